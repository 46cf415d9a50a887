//! The KWin script: the broker loads it into KWin over D-Bus
//! (`org.kde.kwin.Scripting.loadScript` on `/Scripting`, then
//! `org.kde.kwin.Script.run` on the script's object), and the script
//! reports KWin's windows back with `callDBus`.
//!
//! The script is compiled into the broker (`data/kwin/contextd/`), so that
//! the one KWin runs always speaks this broker's interface; it is written
//! to the broker's runtime directory for KWin to read. KWin 5.27 puts the
//! script's object at `/N` (N being what `loadScript` returned), Plasma 6
//! at `/Scripting/ScriptN`: both are tried.

use std::path::{Path, PathBuf};
use std::time::Duration;

use zbus::Connection;

/// The script, as shipped in `data/kwin/contextd/contents/code/main.js`.
pub(crate) const SCRIPT: &str = include_str!("../../../data/kwin/contextd/contents/code/main.js");
/// The plugin name it is loaded under (what `unloadScript` takes).
pub(crate) const PLUGIN: &str = "contextd";

const KWIN: &str = "org.kde.KWin";
const SCRIPTING_PATH: &str = "/Scripting";
const SCRIPTING_IFACE: &str = "org.kde.kwin.Scripting";
const SCRIPT_IFACE: &str = "org.kde.kwin.Script";
/// KWin answers at once; a hung one must not hold the source.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

async fn call<B>(
    conn: &Connection,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Result<zbus::Message, String>
where
    B: serde::Serialize + zbus::wire::DynamicType + Sync,
{
    match tokio::time::timeout(
        CALL_TIMEOUT,
        conn.call_method(Some(KWIN), path, Some(iface), method, body),
    )
    .await
    {
        Ok(Ok(m)) => Ok(m),
        Ok(Err(e)) => Err(format!("{iface}.{method} on {path}: {e}")),
        Err(_) => Err(format!("{iface}.{method} on {path}: no answer from KWin")),
    }
}

/// Write the script into `dir` (made 0700 if missing); its path.
fn write_script(dir: &Path) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let path = dir.join("kwin-contextd.js");
    let tmp = dir.join(".kwin-contextd.js.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(SCRIPT.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Load and run the script in the KWin on `conn`; a script of ours that
/// is already loaded (left by a broker that died) is replaced.
pub(crate) async fn load(conn: &Connection, dir: &Path) -> Result<(), String> {
    let dir = dir.to_owned();
    let path = tokio::task::spawn_blocking(move || write_script(&dir))
        .await
        .map_err(|e| format!("cannot write the KWin script: {e}"))?
        .map_err(|e| format!("cannot write the KWin script: {e}"))?;
    let path_str = path
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))?;
    let loaded = call(
        conn,
        SCRIPTING_PATH,
        SCRIPTING_IFACE,
        "isScriptLoaded",
        &(PLUGIN,),
    )
    .await?;
    if loaded.body().deserialize::<bool>().unwrap_or(false) {
        unload(conn).await?;
    }
    let reply = call(
        conn,
        SCRIPTING_PATH,
        SCRIPTING_IFACE,
        "loadScript",
        &(path_str, PLUGIN),
    )
    .await?;
    let id = reply
        .body()
        .deserialize::<i32>()
        .map_err(|e| format!("loadScript answered oddly: {e}"))?;
    if id < 0 {
        return Err(format!(
            "KWin refused to load {path_str} (loadScript gave {id})"
        ));
    }
    // Plasma 6 first, then 5.27's path.
    let mut errors = Vec::new();
    for object in [format!("/Scripting/Script{id}"), format!("/{id}")] {
        match call(conn, &object, SCRIPT_IFACE, "run", &()).await {
            Ok(_) => {
                tracing::info!(path = path_str, object, "the KWin script runs");
                return Ok(());
            }
            Err(e) => errors.push(e),
        }
    }
    let _ = unload(conn).await;
    Err(format!("cannot run the KWin script: {}", errors.join("; ")))
}

/// Unload the script (at shutdown).
pub(crate) async fn unload(conn: &Connection) -> Result<(), String> {
    call(
        conn,
        SCRIPTING_PATH,
        SCRIPTING_IFACE,
        "unloadScript",
        &(PLUGIN,),
    )
    .await
    .map(|_| ())
}

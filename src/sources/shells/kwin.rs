//! The KWin script: the broker loads it into KWin over D-Bus
//! (`org.kde.kwin.Scripting.loadScript` on `/Scripting`, then
//! `org.kde.kwin.Script.run` on the script's object), and the script
//! reports KWin's windows back with `callDBus`.
//!
//! The script is compiled into the broker (`data/kwin/contextd/`), so that
//! the one KWin runs always speaks this broker's interface; it is written
//! to the broker's runtime directory for KWin to read, with the unique bus
//! name of the broker's connection in it: the script reports to that
//! connection only, never to whoever owns `org.contextd.Broker1` later
//! (any process may take the name while no broker runs, and a script left
//! loaded by a broker that died would otherwise report to it). KWin 5.27
//! puts the script's object at `/N` (N being what `loadScript` returned),
//! Plasma 6 at `/Scripting/ScriptN`: both are tried.

use std::path::{Path, PathBuf};
use std::time::Duration;

use zbus::Connection;

/// The script, as shipped in `data/kwin/contextd/contents/code/main.js`.
pub(crate) const SCRIPT: &str = include_str!("../../../data/kwin/contextd/contents/code/main.js");
/// Where the script takes the broker's unique bus name.
const UNIQUE_NAME_PLACEHOLDER: &str = "@CONTEXTD_BROKER_UNIQUE_NAME@";
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

/// The script for the broker whose connection is `unique` (a unique bus
/// name, checked: it is written into JavaScript).
fn script_for(unique: &str) -> Result<String, String> {
    let name = zbus::names::UniqueName::try_from(unique)
        .map_err(|e| format!("{unique:?} is not a unique bus name: {e}"))?;
    if !name.as_str().starts_with(':')
        || !name
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":._-".contains(&b))
    {
        return Err(format!("{unique:?} is not a unique bus name"));
    }
    Ok(SCRIPT.replacen(UNIQUE_NAME_PLACEHOLDER, name.as_str(), 1))
}

/// Write `script` into `dir` (made 0700 if missing); its path.
fn write_script(dir: &Path, script: &str) -> std::io::Result<PathBuf> {
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
    f.write_all(script.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Load and run the script in the KWin on `conn`, reporting to `unique`
/// (the unique name of the connection that owns the broker's name); a
/// script of ours that is already loaded (left by a broker that died) is
/// replaced.
pub(crate) async fn load(conn: &Connection, dir: &Path, unique: &str) -> Result<(), String> {
    let script = script_for(unique)?;
    let dir = dir.to_owned();
    let path = tokio::task::spawn_blocking(move || write_script(&dir, &script))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The script reports to the broker's unique name and to nothing
    /// else: the placeholder is replaced once and no well-known name is
    /// left for `callDBus`.
    #[test]
    fn the_script_reports_to_the_unique_name_only() {
        assert_eq!(SCRIPT.matches(UNIQUE_NAME_PLACEHOLDER).count(), 1);
        let script = script_for(":1.42").expect("a unique name");
        assert!(script.contains(r#"var BUS = ":1.42";"#), "{script}");
        assert!(!script.contains(UNIQUE_NAME_PLACEHOLDER));
        assert!(!script.contains(r#""org.contextd.Broker1""#));
    }

    /// Whatever is written into the script is a unique name: a
    /// well-known name, or text that would end the string, is refused.
    #[test]
    fn only_a_unique_name_goes_into_the_script() {
        for bad in [
            "org.contextd.Broker1",
            "",
            ":1.2\";callDBus(\"x",
            ":1.2\n",
            "1.2",
        ] {
            assert!(script_for(bad).is_err(), "{bad:?} accepted");
        }
    }
}

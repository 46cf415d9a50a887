//! `kwin_wayland --virtual` 5.27 (tests/it/shells_kwin.rs, benches/shells.rs),
//! or 6 from the Debian 13 root (tests/it/debian13.rs).
//!
//! `/usr/bin/kwin_wayland` carries the file capability `cap_sys_resource`,
//! which a container without that capability cannot exec: this runs a copy
//! without it, which the broker is told of in `[sources.shells] kwin`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{GtkWindow, poll, stop};

pub const SOCKET: &str = "kwin-test-0";

/// `kwin_wayland` without its file capability, its name unchanged.
pub fn kwin_copy(dir: &Path) -> PathBuf {
    kwin_copy_from(None, dir)
}

/// [`kwin_copy`] of the `kwin_wayland` of `root` (a root of
/// scripts/roots.sh), or of the host's. `dir` must be one the root sees at
/// the same path (under /tmp).
pub fn kwin_copy_from(root: Option<&str>, dir: &Path) -> PathBuf {
    let exe = dir.join("kwin_wayland");
    let from = format!("{}/usr/bin/kwin_wayland", root.unwrap_or(""));
    std::fs::copy(&from, &exe)
        .unwrap_or_else(|e| panic!("{from}: {e} (apt-get install kwin-wayland: scripts/deps.sh)"));
    exe
}

pub struct Kwin {
    child: Child,
    runtime_dir: tempfile::TempDir,
    log: PathBuf,
}

impl Kwin {
    /// Start KWin on the bus at `bus` and wait until its scripting answers.
    pub async fn start(bus: &str, exe: &Path, home: &Path, n: u32) -> Kwin {
        Kwin::start_in(None, bus, exe, home, n).await
    }

    /// [`Kwin::start`] with its files from `root` (scripts/in-root.sh), if
    /// given: `exe` is then a copy of that root's ([`kwin_copy_from`]).
    pub async fn start_in(root: Option<&str>, bus: &str, exe: &Path, home: &Path, n: u32) -> Kwin {
        let runtime_dir = tempfile::tempdir().expect("tempdir");
        let log = home.join(format!("kwin-{n}.log"));
        let mut cmd = match root {
            Some(r) => {
                let mut c = Command::new(crate::common::root().join("scripts/in-root.sh"));
                c.arg(r).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let child = cmd
            .args([
                "--virtual",
                "--width",
                "1280",
                "--height",
                "800",
                "--socket",
                SOCKET,
                "--no-lockscreen",
                "--no-global-shortcuts",
                "--no-kactivities",
            ])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("XDG_RUNTIME_DIR", runtime_dir.path())
            .env("DBUS_SESSION_BUS_ADDRESS", bus)
            .env("QT_QPA_PLATFORM", "wayland")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn kwin_wayland");
        let kwin = Kwin {
            child,
            runtime_dir,
            log,
        };
        let conn = zbus::connection::Builder::address(bus)
            .build()
            .await
            .expect("connect");
        poll(20, "KWin's scripting answers", || async {
            conn.call_method(
                Some("org.kde.KWin"),
                "/Scripting",
                Some("org.kde.kwin.Scripting"),
                "isScriptLoaded",
                &("nothing",),
            )
            .await
            .ok()
        })
        .await;
        kwin
    }

    pub fn window(&self, bus: &str, app_id: &str, title: &str) -> GtkWindow {
        GtkWindow::open(self.runtime_dir.path(), SOCKET, bus, app_id, title)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stop(&mut self) {
        stop(&mut self.child, Duration::from_secs(5));
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Kwin {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- kwin_wayland log ---\n{}", self.log());
        }
        self.stop();
    }
}

/// Activate the window titled `title` the way KRunner does: KWin's
/// WindowsRunner matches it, and running the match activates it. KWin 6
/// has no WindowsRunner (the runner moved to Plasma's KRunner): there a
/// one-line script sets `workspace.activeWindow`, as a click would.
pub async fn activate(conn: &zbus::Connection, title: &str) {
    if let Some(script) = start_activation(conn, title).await {
        script.unload(conn).await;
    }
}

/// A KWin 6 activation script still loaded: [`ActivationScript::unload`]
/// it before the next activation. The focus bench unloads it only after
/// it timed the change, so that its own calls to KWin do not run beside
/// the broker in the moments it times.
pub struct ActivationScript;

impl ActivationScript {
    pub async fn unload(self, conn: &zbus::Connection) {
        conn.call_method(
            Some("org.kde.KWin"),
            "/Scripting",
            Some("org.kde.kwin.Scripting"),
            "unloadScript",
            &(ACTIVATION_PLUGIN,),
        )
        .await
        .expect("unloadScript");
    }
}

const ACTIVATION_PLUGIN: &str = "contextd-test-activate";

/// [`activate`], leaving KWin 6's script loaded (returned).
pub async fn start_activation(conn: &zbus::Connection, title: &str) -> Option<ActivationScript> {
    type Match = (
        String,
        String,
        String,
        i32,
        f64,
        std::collections::HashMap<String, zbus::wire::OwnedVariant>,
    );
    let reply = match conn
        .call_method(
            Some("org.kde.KWin"),
            "/WindowsRunner",
            Some("org.kde.krunner1"),
            "Match",
            &(title,),
        )
        .await
    {
        Ok(r) => r,
        Err(zbus::Error::FDO(e)) if matches!(*e, zbus::fdo::Error::UnknownObject(_)) => {
            activate_by_script(conn, title).await;
            return Some(ActivationScript);
        }
        Err(e) => panic!("WindowsRunner.Match: {e}"),
    };
    let matches: Vec<Match> = reply.body().deserialize().expect("matches");
    let m = matches
        .iter()
        .find(|m| m.1 == title)
        .unwrap_or_else(|| panic!("no match for {title}: {matches:?}"));
    conn.call_method(
        Some("org.kde.KWin"),
        "/WindowsRunner",
        Some("org.kde.krunner1"),
        "Run",
        &(m.0.as_str(), ""),
    )
    .await
    .expect("WindowsRunner.Run");
    None
}

/// KWin 6: load and run a script that activates the window titled
/// `title` (its file in /tmp, which a KWin in a root sees too); the caller
/// unloads it.
async fn activate_by_script(conn: &zbus::Connection, title: &str) {
    const PLUGIN: &str = ACTIVATION_PLUGIN;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("activate.js");
    let t = serde_json::to_string(title).expect("title as JSON");
    std::fs::write(
        &path,
        format!(
            "var ws = workspace.windowList();\n\
             for (var i = 0; i < ws.length; i++) {{\n\
             \x20   if (ws[i].caption === {t}) {{ workspace.activeWindow = ws[i]; }}\n\
             }}\n"
        ),
    )
    .expect("write the script");
    let reply = conn
        .call_method(
            Some("org.kde.KWin"),
            "/Scripting",
            Some("org.kde.kwin.Scripting"),
            "loadScript",
            &(path.to_str().expect("utf-8 path"), PLUGIN),
        )
        .await
        .expect("loadScript");
    let id: i32 = reply.body().deserialize().expect("script id");
    assert!(id >= 0, "KWin refused the activation script ({id})");
    conn.call_method(
        Some("org.kde.KWin"),
        format!("/Scripting/Script{id}").as_str(),
        Some("org.kde.kwin.Script"),
        "run",
        &(),
    )
    .await
    .expect("run the activation script");
}

pub async fn script_loaded(conn: &zbus::Connection) -> bool {
    conn.call_method(
        Some("org.kde.KWin"),
        "/Scripting",
        Some("org.kde.kwin.Scripting"),
        "isScriptLoaded",
        &("contextd",),
    )
    .await
    .ok()
    .and_then(|m| m.body().deserialize::<bool>().ok())
    .unwrap_or(false)
}

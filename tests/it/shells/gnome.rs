//! A headless GNOME Shell 43 with the extension of data/gnome-shell
//! installed (tests/it/shells_gnome.rs, benches/shells.rs).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{GtkWindow, poll, stop};

pub const UUID: &str = "contextd@contextd.org";
pub const DISPLAY: &str = "gnome-test-0";
/// A helper extension (benches only) that activates a window by title, as
/// a click would: GNOME Shell 43 has no D-Bus call for that (`Eval` needs
/// unsafe mode), and the contextd extension only reports.
pub const FOCUS_UUID: &str = "contextd-bench-focus@contextd.org";

/// A headless GNOME Shell in its own runtime directory.
pub struct GnomeShell {
    child: Child,
    runtime_dir: tempfile::TempDir,
    log: PathBuf,
}

impl GnomeShell {
    /// Start it on the bus at `bus` in session mode `mode` (a file of
    /// `data_dir`), and wait until its extension system answers there.
    pub async fn start(bus: &str, data_dir: &Path, home: &Path, mode: &str) -> GnomeShell {
        GnomeShell::start_in(None, bus, data_dir, home, mode).await
    }

    /// [`GnomeShell::start`] with the gnome-shell of `root` (a root of
    /// scripts/roots.sh, through scripts/in-root.sh), if given. `data_dir`
    /// and `home` must be where the root sees them at the same path
    /// (under /tmp).
    pub async fn start_in(
        root: Option<&str>,
        bus: &str,
        data_dir: &Path,
        home: &Path,
        mode: &str,
    ) -> GnomeShell {
        let runtime_dir = tempfile::tempdir().expect("tempdir");
        let log = home.join(format!("gnome-shell-{mode}.log"));
        // As a user's shell is: without CAP_SYS_PTRACE, which root (as
        // the tests run) has and a user's processes have not. With it, the
        // shell could read the broker's /proc/PID/exe, which the kernel
        // closes to the user's other processes because the broker is not
        // dumpable (src/hardening.rs); the extension's check of the
        // broker (brokerCheck.js) must work without.
        let mut cmd = Command::new("setpriv");
        cmd.args(["--bounding-set", "-sys_ptrace", "--"]);
        match root {
            Some(r) => {
                cmd.arg(crate::common::root().join("scripts/in-root.sh"));
                cmd.arg(r).arg("gnome-shell");
            }
            None => {
                cmd.arg("gnome-shell");
            }
        };
        let child = cmd
            .args([
                "--headless",
                "--wayland",
                "--no-x11",
                "--virtual-monitor",
                "1280x800",
                &format!("--wayland-display={DISPLAY}"),
                &format!("--mode={mode}"),
            ])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env(
                "XDG_DATA_DIRS",
                format!("{}:/usr/local/share:/usr/share", data_dir.display()),
            )
            .env("XDG_RUNTIME_DIR", runtime_dir.path())
            .env("DBUS_SESSION_BUS_ADDRESS", bus)
            // Without a system bus the shell dies looking for logind.
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
            // Settings in memory: `EnableExtension` writes the shell's own
            // settings, which is all it needs, and nothing touches dconf.
            .env("GSETTINGS_BACKEND", "memory")
            .env("NO_AT_BRIDGE", "1")
            // The extension's test hooks (what its indicator shows, a
            // screenshot) are served only with this set.
            .env("CONTEXTD_SHELL_TEST", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("setpriv and gnome-shell (apt-get install gnome-shell: scripts/deps.sh)");
        let shell = GnomeShell {
            child,
            runtime_dir,
            log,
        };
        let conn = zbus::connection::Builder::address(bus)
            .build()
            .await
            .expect("connect");
        poll(20, "GNOME Shell's extension system answers", || async {
            conn.call_method(
                Some("org.gnome.Shell"),
                "/org/gnome/Shell",
                Some("org.gnome.Shell.Extensions"),
                "ListExtensions",
                &(),
            )
            .await
            .ok()
        })
        .await;
        shell
    }

    pub fn window(&self, bus: &str, app_id: &str, title: &str) -> GtkWindow {
        GtkWindow::open(self.runtime_dir.path(), DISPLAY, bus, app_id, title)
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

impl Drop for GnomeShell {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- gnome-shell log ---\n{}", self.log());
        }
        self.stop();
    }
}

/// `XDG_DATA_DIRS` entry with the extension (as `make install` puts it)
/// and two session modes: `contextd-test` (the user's mode, no overview,
/// which would keep the focus from new windows) and `contextd-test-on`
/// (the same with the extension enabled by the mode).
pub fn data_dir(root: &Path) -> PathBuf {
    data_dir_for(root, "gnome-shell")
}

/// [`data_dir`] with the extension of `data/FORMAT` (`gnome-shell`: the
/// legacy format of GNOME 43 and 44; `gnome-shell-45`: the ES modules of
/// 45 and later): every file of it, as `make install` installs them.
pub fn data_dir_for(root: &Path, format: &str) -> PathBuf {
    let data = root.join("share");
    let ext = data.join("gnome-shell/extensions").join(UUID);
    std::fs::create_dir_all(&ext).expect("mkdir");
    let src = crate::common::root().join("data").join(format).join(UUID);
    // As `make install` does: metadata.json and every module.
    for entry in std::fs::read_dir(&src).expect("the extension's directory") {
        let name = entry.expect("entry").file_name();
        let keep = name
            .to_str()
            .is_some_and(|n| n == "metadata.json" || n.ends_with(".js"));
        if keep {
            std::fs::copy(src.join(&name), ext.join(&name)).expect("copy the extension");
        }
    }
    let modes = data.join("gnome-shell/modes");
    std::fs::create_dir_all(&modes).expect("mkdir");
    std::fs::write(
        modes.join("contextd-test.json"),
        r#"{"parentMode": "user", "hasOverview": false}"#,
    )
    .expect("mode");
    std::fs::write(
        modes.join("contextd-test-on.json"),
        format!(
            r#"{{"parentMode": "user", "hasOverview": false, "enabledExtensions": ["{UUID}"]}}"#
        ),
    )
    .expect("mode");
    data
}

/// Install the focus helper ([`FOCUS_UUID`]) in `data` (from
/// [`data_dir`]) and a mode, `contextd-test-focus`, that enables it with
/// the contextd extension. It serves `Activate(s title) -> b` on
/// `/org/contextd/BenchFocus` of GNOME Shell's connection.
pub fn install_focus_helper(data: &Path) {
    install_focus_helper_for(data, "gnome-shell")
}

/// [`install_focus_helper`] in the format of `data/FORMAT`'s extension
/// (`gnome-shell`: legacy, for 43 and 44; `gnome-shell-45`: ES module).
pub fn install_focus_helper_for(data: &Path, format: &str) {
    let ext = data.join("gnome-shell/extensions").join(FOCUS_UUID);
    std::fs::create_dir_all(&ext).expect("mkdir");
    let esm = format == "gnome-shell-45";
    let versions = if esm {
        r#""45", "46", "47", "48", "49", "50", "51""#
    } else {
        r#""43", "44""#
    };
    std::fs::write(
        ext.join("metadata.json"),
        format!(
            r#"{{"uuid": "{FOCUS_UUID}", "name": "contextd bench focus", "description": "Activates a window by title (benches only)", "shell-version": [{versions}]}}"#
        ),
    )
    .expect("metadata");
    let helper = r#"const IFACE = `<node><interface name="org.contextd.BenchFocus">
  <method name="Activate"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
</interface></node>`;
class Helper {
    enable() {
        this._obj = Gio.DBusExportedObject.wrapJSObject(IFACE, this);
        this._obj.export(Gio.DBus.session, '/org/contextd/BenchFocus');
    }
    disable() {
        this._obj.unexport();
        this._obj = null;
    }
    Activate(title) {
        const w = global.get_window_actors()
            .map(a => a.meta_window)
            .find(w => w.get_title() === title);
        if (!w)
            return false;
        w.activate(global.display.get_current_time_roundtrip());
        return true;
    }
}
"#;
    let js = if esm {
        format!(
            "import Gio from 'gi://Gio';\nimport {{Extension}} from 'resource:///org/gnome/shell/extensions/extension.js';\n{helper}\nexport default class BenchFocus extends Extension {{\n    enable() {{ this._h = new Helper(); this._h.enable(); }}\n    disable() {{ this._h.disable(); this._h = null; }}\n}}\n"
        )
    } else {
        format!(
            "const {{ Gio }} = imports.gi;\n{helper}function init() {{\n    return new Helper();\n}}\n"
        )
    };
    std::fs::write(ext.join("extension.js"), js).expect("extension.js");
    std::fs::write(
        data.join("gnome-shell/modes/contextd-test-focus.json"),
        format!(
            r#"{{"parentMode": "user", "hasOverview": false, "enabledExtensions": ["{UUID}", "{FOCUS_UUID}"]}}"#
        ),
    )
    .expect("mode");
}

/// Activate the window titled `title` through the focus helper.
pub async fn activate(conn: &zbus::Connection, title: &str) -> bool {
    conn.call_method(
        Some("org.gnome.Shell"),
        "/org/contextd/BenchFocus",
        Some("org.contextd.BenchFocus"),
        "Activate",
        &(title,),
    )
    .await
    .ok()
    .and_then(|m| m.body().deserialize::<bool>().ok())
    .unwrap_or(false)
}

//! wlroots-family compositors other than sway (issue 52): labwc and
//! Hyprland from a root of scripts/roots.sh, headless, seen by the broker
//! only through `zwlr_foreign_toplevel_manager_v1` and
//! `ext_foreign_toplevel_list_v1` (neither has an IPC the broker reads).
//! The windows are real GTK windows (tests/shells/gtk_window.py); focus is
//! moved as a taskbar moves it, with the wlr handle's `activate`.
//!
//! The compositor runs as the compositor user of scripts/deps.sh (a
//! desktop's compositor is the user's, not root's) in a runtime directory
//! of its own; the broker and the windows, on the host, reach its socket
//! as root.
//!
//! Hyprland needs a DRM device: its backend library (aquamarine) allocates
//! every buffer through GBM or DRM dumb buffers, also for its headless
//! outputs, and has no software allocator. Where there is no
//! /dev/dri/card* or renderD*, its test says so and stops.

use crate::common::{self, *};
use crate::shells::{Changes, GtkWindow, active, find, is_focus_on, windows};

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use wayland_client::protocol::{wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, QueueHandle, event_created_child};
use wayland_protocols_wlr::foreign_toplevel::v1::client::{
    zwlr_foreign_toplevel_handle_v1 as wlr_handle, zwlr_foreign_toplevel_manager_v1 as wlr_manager,
};

const ONE: &str = "org.example.One";
const TWO: &str = "org.example.Two";
const THREE: &str = "org.example.Three";

/// Which compositor.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Labwc,
    Hyprland,
}

impl Kind {
    fn program(self) -> &'static str {
        match self {
            Kind::Labwc => "labwc",
            Kind::Hyprland => "Hyprland",
        }
    }
}

/// A headless compositor of a root, as the compositor user, with its
/// runtime directory, home and log under one directory of /tmp (which
/// the root sees at the same path).
pub(crate) struct Wlr {
    kind: Kind,
    root: String,
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// The socket's name in the runtime directory, once it was made.
    display: Option<String>,
}

/// The compositor user's uid and gid (scripts/deps.sh makes the user).
fn test_user() -> (u32, u32) {
    let user = std::env::var("CONTEXTD_TEST_USER").unwrap_or_else(|_| "contextd-test".into());
    let id = |flag: &str| -> u32 {
        let (st, out, err) = run_cmd(Command::new("id").args([flag, &user]), 5);
        assert!(
            st.success(),
            "no user {user} (scripts/deps.sh makes it): {err}"
        );
        out.trim().parse().expect("a numeric id")
    };
    (id("-u"), id("-g"))
}

fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}

impl Wlr {
    /// Start `kind` from `root` and wait for its socket.
    pub(crate) fn start(kind: Kind, root: &str) -> Wlr {
        let dir = tempfile::Builder::new()
            .prefix("contextd-wlr-")
            .tempdir_in("/tmp")
            .expect("tempdir in /tmp");
        let (uid, gid) = test_user();
        for sub in ["runtime", "home", "home/.cache", "config", "config/hypr"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        std::fs::write(
            dir.path().join("config/hypr/hyprland.lua"),
            // No Xwayland, nothing drawn but the windows, every log line.
            "hl.config({\n    xwayland = { enabled = false },\n    \
             misc = { disable_hyprland_logo = true, disable_splash_rendering = true },\n    \
             animations = { enabled = false },\n    \
             debug = { enable_stdout_logs = true },\n})\n",
        )
        .expect("hyprland.lua");
        for sub in [
            "",
            "runtime",
            "home",
            "home/.cache",
            "config",
            "config/hypr",
        ] {
            chown(&dir.path().join(sub), uid, gid);
        }
        std::fs::set_permissions(
            dir.path().join("runtime"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod");
        // labwc always makes an Xwayland socket (lazily started) and
        // makes /tmp/.X11-unix, as its own user and 0755, where it is
        // missing: as a system has it, then.
        if !Path::new("/tmp/.X11-unix").exists() {
            let _ = std::fs::create_dir("/tmp/.X11-unix");
            let _ = std::fs::set_permissions(
                "/tmp/.X11-unix",
                std::os::unix::fs::PermissionsExt::from_mode(0o1777),
            );
        }
        let mut w = Wlr {
            kind,
            root: root.to_owned(),
            child: None,
            dir,
            display: None,
        };
        w.launch();
        w
    }

    fn runtime(&self) -> PathBuf {
        self.dir.path().join("runtime")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("compositor.log")
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The compositor's `--version`, run from the root.
    pub(crate) fn version(kind: Kind, root: &str) -> String {
        let (_, out, err) = run_cmd(
            Command::new(common::root().join("scripts/in-root.sh"))
                .args([root, kind.program(), "--version"])
                .env_clear()
                .env("PATH", "/usr/bin:/bin"),
            30,
        );
        format!("{out}{err}")
    }

    /// Start the compositor (again) and wait until its socket answers.
    pub(crate) fn launch(&mut self) {
        assert!(self.child.is_none(), "already running");
        let (uid, gid) = test_user();
        let d = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("log");
        let child = Command::new(common::root().join("scripts/in-root.sh"))
            .arg(&self.root)
            .args([
                "setpriv",
                &format!("--reuid={uid}"),
                &format!("--regid={gid}"),
            ])
            .args(["--clear-groups", "--", "env", "-i"])
            .arg("PATH=/usr/bin:/bin")
            .arg("LANG=C.UTF-8")
            .arg(format!("HOME={}", d.join("home").display()))
            .arg(format!("XDG_RUNTIME_DIR={}", self.runtime().display()))
            .arg(format!("XDG_CONFIG_HOME={}", d.join("config").display()))
            .arg(format!(
                "XDG_CACHE_HOME={}",
                d.join("home/.cache").display()
            ))
            .args([
                "WLR_BACKENDS=headless",
                "WLR_RENDERER=pixman",
                "WLR_LIBINPUT_NO_DEVICES=1",
                "HYPRLAND_HEADLESS_ONLY=1",
            ])
            .arg(self.kind.program())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("scripts/in-root.sh");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(name) = self.answering_socket() {
                self.display = Some(name);
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                panic!("{:?} exited ({st}):\n{}", self.kind, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "no socket of {:?} within 20 s:\n{}",
                self.kind,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A `wayland-N` socket of the runtime directory that accepts.
    fn answering_socket(&self) -> Option<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.runtime())
            .ok()?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("wayland-") && !n.ends_with(".lock"))
            .collect();
        names.sort();
        names
            .into_iter()
            .find(|n| UnixStream::connect(self.runtime().join(n)).is_ok())
    }

    /// The socket's path (the broker's `WAYLAND_DISPLAY`).
    pub(crate) fn socket(&self) -> PathBuf {
        self.runtime()
            .join(self.display.as_deref().expect("started"))
    }

    /// Stop the compositor (SIGTERM, as a session's end does).
    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            crate::shells::stop(&mut c, Duration::from_secs(5));
        }
    }

    /// A GTK window on it.
    pub(crate) fn window(&self, bus: &str, app_id: &str, title: &str) -> GtkWindow {
        GtkWindow::open(
            &self.runtime(),
            self.display.as_deref().expect("started"),
            bus,
            app_id,
            title,
        )
    }
}

impl Drop for Wlr {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {:?} log ---\n{}", self.kind, self.log());
        }
        self.stop();
    }
}

/// A client that activates a window by its app id through its wlr
/// foreign-toplevel handle, as a taskbar does.
#[derive(Default)]
struct Activator {
    seat: Option<wl_seat::WlSeat>,
    manager: Option<wlr_manager::ZwlrForeignToplevelManagerV1>,
    handles: Vec<(wlr_handle::ZwlrForeignToplevelHandleV1, Option<String>)>,
}

/// Activate the window whose app id is `app_id` on the compositor at
/// `socket`; the compositor has acted when this returns (a roundtrip).
pub(crate) fn activate(socket: &Path, app_id: &str) {
    let stream = UnixStream::connect(socket).expect("the compositor's socket");
    let conn = Connection::from_socket(stream).expect("a Wayland connection");
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    conn.display().get_registry(&qh, ());
    let mut state = Activator::default();
    // The globals; then the toplevels and their app ids.
    queue.roundtrip(&mut state).expect("roundtrip");
    queue.roundtrip(&mut state).expect("roundtrip");
    let seat = state.seat.clone().expect("a seat");
    let handle = state
        .handles
        .iter()
        .find(|(_, a)| a.as_deref() == Some(app_id))
        .map(|(h, _)| h.clone())
        .unwrap_or_else(|| panic!("no toplevel {app_id} in the foreign-toplevel list"));
    handle.activate(&seat);
    queue.roundtrip(&mut state).expect("roundtrip");
}

impl Dispatch<wl_registry::WlRegistry, ()> for Activator {
    fn event(
        state: &mut Self,
        registry: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
        {
            match interface.as_str() {
                "wl_seat" if state.seat.is_none() => {
                    state.seat = Some(registry.bind(name, version.min(1), qh, ()));
                }
                "zwlr_foreign_toplevel_manager_v1" if state.manager.is_none() => {
                    state.manager = Some(registry.bind(name, version.min(3), qh, ()));
                }
                _ => {}
            }
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for Activator {
    fn event(
        _: &mut Self,
        _: &wl_seat::WlSeat,
        _: wl_seat::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<wlr_manager::ZwlrForeignToplevelManagerV1, ()> for Activator {
    fn event(
        state: &mut Self,
        _: &wlr_manager::ZwlrForeignToplevelManagerV1,
        event: wlr_manager::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wlr_manager::Event::Toplevel { toplevel } = event {
            state.handles.push((toplevel, None));
        }
    }

    event_created_child!(Activator, wlr_manager::ZwlrForeignToplevelManagerV1, [
        wlr_manager::EVT_TOPLEVEL_OPCODE => (wlr_handle::ZwlrForeignToplevelHandleV1, ()),
    ]);
}

impl Dispatch<wlr_handle::ZwlrForeignToplevelHandleV1, ()> for Activator {
    fn event(
        state: &mut Self,
        handle: &wlr_handle::ZwlrForeignToplevelHandleV1,
        event: wlr_handle::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wlr_handle::Event::AppId { app_id } = event
            && let Some(entry) = state.handles.iter_mut().find(|(h, _)| h == handle)
        {
            entry.1 = Some(app_id);
        }
    }
}

/// Is there a DRM device (what Hyprland cannot run without)?
pub(crate) fn has_drm_device() -> bool {
    std::fs::read_dir("/dev/dri").is_ok_and(|d| {
        d.filter_map(Result::ok).any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("card") || n.starts_with("renderD")
        })
    })
}

/// The acceptance on `kind` from `root`, whose `--version` names
/// `version`: two GTK windows listed with their app ids and titles
/// (through the ext list: `ext-` ids), focus moved by foreign-toplevel
/// activation reaching a subscriber exactly once per activation, a title
/// change, a window closing, the compositor leaving (the source
/// unavailable, no windows) and coming back (its windows listed again,
/// with new ids).
pub(crate) async fn windows_focus_closing_and_coming_back(kind: Kind, root: &str, version: &str) {
    with_timeout(120, async {
        let v = Wlr::version(kind, root);
        assert!(v.contains(version), "{kind:?} {version} expected: {v}");
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows", "windows.titles"])]);
        let mut comp = Wlr::start(kind, root);
        let socket = comp.socket().display().to_string();
        let _d = Daemon::start_with(&bus, &home, &[], &[("WAYLAND_DISPLAY", &socket)]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(20, "the wayland source available", || async {
            let s = crate::shells::source(&ctx, "wayland").await?;
            (s["available"] == true).then_some(())
        })
        .await;

        let one = comp.window(&bus.address, ONE, "Window one");
        let mut two = comp.window(&bus.address, TWO, "Window two");
        let ws = eventually(20, "two windows listed", || async {
            let ws = windows(&ctx).await;
            (find(&ws, ONE).is_some() && find(&ws, TWO).is_some()).then_some(ws)
        })
        .await;
        let w1 = find(&ws, ONE).expect("one");
        assert_eq!(w1["title"], "Window one", "{w1}");
        assert_eq!(w1["app_id_source"], "compositor", "{w1}");
        // Nothing here tells a window's PID (foreign-toplevel has none,
        // and the broker reads no IPC of these compositors): the window
        // says all there is of its app is the claim.
        assert_eq!(w1["identity"]["known_by"], "claimed", "{w1}");
        assert!(w1["identity"].get("app").is_none(), "{w1}");
        let id1 = w1["id"].as_str().expect("id").to_owned();
        assert!(id1.starts_with("ext-"), "{id1}");

        // Focus, moved as a taskbar moves it: exactly once per activation.
        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changes = Changes::new(sub.receive_changed().await.expect("changed"));
        for app in [ONE, TWO, ONE] {
            activate(comp.socket().as_path(), app);
            changes
                .until(10, &format!("focus on {app}"), |d| is_focus_on(d, app))
                .await;
            assert_eq!(active(&ctx).await["app_id"], app);
        }
        while changes.next_within(300).await.is_some() {}
        assert_eq!(
            changes.focuses(),
            [ONE, TWO, ONE].map(|a| Some(a.to_owned())),
            "{:#?}",
            changes.seen
        );

        // A title change, and a window closing.
        two.set_title("Renamed two");
        changes
            .until(10, "title change", |d| {
                d["event"] == "changed" && d["window"]["title"] == "Renamed two"
            })
            .await;
        one.close();
        changes
            .until(10, "one closed", |d| {
                d["event"] == "closed" && d["window"]["app_id"] == ONE
            })
            .await;
        let ws = windows(&ctx).await;
        assert!(find(&ws, ONE).is_none(), "{ws:?}");
        assert_eq!(ws.len(), 1, "{ws:?}");

        // The compositor leaves (its windows with it) and comes back.
        drop(two);
        comp.stop();
        let src = eventually(10, "the source unavailable", || async {
            let s = crate::shells::source(&ctx, "wayland").await?;
            (s["available"] == false).then_some(s)
        })
        .await;
        assert!(src["last_error"].is_string(), "a reason: {src}");
        assert!(windows(&ctx).await.is_empty());
        comp.launch();
        assert_eq!(
            comp.socket().display().to_string(),
            socket,
            "the compositor came back on another socket"
        );
        let _three = comp.window(&bus.address, THREE, "Window three");
        let w3 = eventually(40, "a window of the new compositor", || async {
            find(&windows(&ctx).await, THREE).cloned()
        })
        .await;
        assert_ne!(w3["id"], id1.as_str(), "{w3}");
        assert_eq!(w3["title"], "Window three", "{w3}");
    })
    .await;
}

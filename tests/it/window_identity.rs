//! Window identity from the compositor (issue 52): where the compositor
//! tells a window's PID (sway's IPC here; GNOME Shell and KWin in
//! tests/it/shells_gnome.rs and tests/it/shells_kwin.rs), the window
//! carries the kernel's identity of that process, named as consent names
//! apps, and the app id it claims stays a claim. The attack: a GTK window
//! of a python script that claims `org.mozilla.firefox` is the script,
//! never Firefox. On labwc (nothing tells a PID) the windows say
//! `claimed` (tests/it/wlroots.rs).

use crate::common::session::Session;
use crate::common::*;
use crate::shells::GtkWindow;

use std::process::Command;

use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use serde_json::Value;

pub(crate) const FIREFOX: &str = "org.mozilla.firefox";
const DEMO1: &str = "org.contextd.Demo1";

async fn windows(ctx: &Context1Proxy<'_>) -> Vec<Value> {
    ctx.list_windows()
        .await
        .map(|v| v.iter().map(dict_to_json).collect())
        .unwrap_or_default()
}

/// What the broker's resolver says of `pid`: the id consent would give
/// the process.
pub(crate) fn kernel_id(pid: u32) -> String {
    contextd::internals::resolve_pid(pid)
        .expect("the window's process resolves")
        .app_id
        .to_string()
}

/// The window claiming Firefox's app id is the script's process, and
/// says so; the claim is still there as the claim.
pub(crate) fn assert_claim_is_a_claim(w: &Value, pid: u32) {
    assert_eq!(w["app_id"], FIREFOX, "the claim stays: {w}");
    let id = &w["identity"];
    assert_eq!(id["known_by"], "compositor", "{w}");
    let app = id["app"].as_str().expect("identity.app");
    assert_eq!(app, kernel_id(pid), "{w}");
    assert_ne!(app, FIREFOX, "a claim made it an identity: {w}");
    assert!(
        app.starts_with("exe:") || app.starts_with("python3:"),
        "the python script's identity: {w}"
    );
    assert_ne!(id["app_source"], "flatpak", "{w}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_7_windows_carry_their_process_and_a_claim_stays_a_claim() {
    on_sway_in(&[]).await;
}

/// The session of `session.sh start --no-pipewire FLAGS` (`--root ROOT`:
/// the sway of another Debian): its foot demo window is foot's
/// executable, a GTK window of python claiming Firefox's app id is
/// python's, on the D-Bus wire as `identity`.
pub(crate) async fn on_sway_in(flags: &[&str]) {
    with_timeout(120, async {
        let mut args = vec!["--no-pipewire"];
        args.extend_from_slice(flags);
        let session = Session::start(&args);
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        // Firefox's entry, and one for the demo window that runs foot:
        // each names only a window of its own program.
        let apps = home.dir.path().join("data/applications");
        std::fs::create_dir_all(&apps).expect("mkdir");
        let entry = |name: &str, exec: &str| {
            format!(
                "[Desktop Entry]\nType=Application\nName={name}\nIcon={name}-icon\nExec={exec} %u\n"
            )
        };
        std::fs::write(
            apps.join(format!("{FIREFOX}.desktop")),
            entry("Firefox", "/usr/lib/firefox/firefox"),
        )
        .expect("firefox entry");
        let foot = foot_program(flags);
        std::fs::write(
            apps.join(format!("{DEMO1}.desktop")),
            entry("Demo Terminal", &foot),
        )
        .expect("demo entry");
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let bus = session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus");
        let conn = connect_to(bus).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let runtime = session.get("XDG_RUNTIME_DIR").expect("runtime dir");
        let window = GtkWindow::open(
            std::path::Path::new(runtime),
            "wayland-1",
            bus,
            FIREFOX,
            "Mozilla Firefox",
        );
        let ws = eventually(20, "both windows listed", || async {
            let ws = windows(&ctx).await;
            let has = |app: &str| ws.iter().any(|w| w["app_id"] == app);
            (has(DEMO1) && has(FIREFOX)).then_some(ws)
        })
        .await;
        let fake = ws
            .iter()
            .find(|w| w["app_id"] == FIREFOX)
            .expect("the claiming window");
        assert_claim_is_a_claim(fake, window.pid());
        // Not drawn as Firefox either: Firefox's entry runs another program.
        assert!(fake.get("app_name").is_none(), "named by the claim: {fake}");
        assert!(fake.get("icon").is_none(), "Firefox's icon: {fake}");

        // The demo window is foot, by its executable.
        let demo = ws.iter().find(|w| w["app_id"] == DEMO1).expect("demo");
        let mut c = Command::new("swaymsg");
        session.apply(&mut c);
        let (st, out, err) = run_cmd(c.args(["-t", "get_tree", "-r"]), 10);
        assert!(st.success(), "swaymsg get_tree: {out}{err}");
        let tree: Value = serde_json::from_str(&out).expect("tree JSON");
        let pid = pid_of(&tree, DEMO1).expect("the demo window's pid in sway's tree");
        assert_eq!(demo["identity"]["known_by"], "compositor", "{demo}");
        assert_eq!(demo["identity"]["app"], kernel_id(pid), "{demo}");
        assert_eq!(demo["identity"]["app_source"], "executable", "{demo}");
        // Its entry runs foot, the window's program: it names the window.
        assert_eq!(demo["app_name"], "Demo Terminal", "{demo}");
        assert_eq!(demo["icon"], "Demo Terminal-icon", "{demo}");
        let exe = demo["identity"]["app"].as_str().unwrap_or_default();
        assert!(exe.starts_with("exe:") && exe.ends_with("/foot"), "{demo}");
        assert!(
            demo["identity"].get("sandbox").is_none(),
            "no security context: {demo}"
        );
        window.close();
    })
    .await;
}

/// A sandbox engine's window on sway (1.12): the engine made a Wayland
/// socket of its own with `wp_security_context_v1` (engine, app id,
/// instance: examples/wl_security_context.rs does what Flatpak does) and
/// the app connected through it alone. The window carries its process
/// from the kernel and the security context sway tells; a window of the
/// same program on the plain socket carries none (the metadata is the
/// compositor's word about the connection, not anything a client says).
pub(crate) async fn sandboxed_window_on_sway_in(flags: &[&str]) {
    use crate::wayland::{Toplevels, example_bin};
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    with_timeout(120, async {
        let mut args = vec!["--no-pipewire"];
        args.extend_from_slice(flags);
        let session = Session::start(&args);
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let bus = session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus");
        let conn = connect_to(bus).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let runtime = session.get("XDG_RUNTIME_DIR").expect("runtime dir");
        let socket = std::path::Path::new(runtime).join("wayland-sandboxed");
        let socket = socket.to_str().expect("utf-8 path").to_owned();
        let mut c = Command::new(example_bin("wl_security_context"));
        session.apply(&mut c);
        let mut engine = c
            .args([
                socket.as_str(),
                "org.flatpak",
                "org.example.Sandboxed",
                "instance-7",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn wl_security_context");
        let mut ready = String::new();
        BufReader::new(engine.stdout.take().expect("stdout"))
            .read_line(&mut ready)
            .expect("read wl_security_context");
        assert_eq!(
            ready.trim(),
            "ready",
            "the compositor took the sandbox's socket"
        );
        let _inside = Toplevels::open_on(
            &session,
            Some(&socket),
            1,
            "org.example.Sandboxed",
            "Inside",
        );
        let _outside = Toplevels::open(&session, 1, "org.example.Plain", "Outside");
        let ws = eventually(20, "both windows listed", || async {
            let ws = windows(&ctx).await;
            let has = |app: &str| ws.iter().any(|w| w["app_id"] == app);
            (has("org.example.Sandboxed") && has("org.example.Plain")).then_some(ws)
        })
        .await;
        let inside = ws
            .iter()
            .find(|w| w["app_id"] == "org.example.Sandboxed")
            .expect("inside");
        let id = &inside["identity"];
        assert_eq!(id["known_by"], "compositor", "{inside}");
        assert_eq!(id["sandbox"]["engine"], "org.flatpak", "{inside}");
        assert_eq!(id["sandbox"]["app_id"], "org.example.Sandboxed", "{inside}");
        assert_eq!(id["sandbox"]["instance_id"], "instance-7", "{inside}");
        let exe = id["app"].as_str().unwrap_or_default();
        assert!(
            exe.starts_with("exe:") && exe.ends_with("/wl_toplevels"),
            "{inside}"
        );
        let outside = ws
            .iter()
            .find(|w| w["app_id"] == "org.example.Plain")
            .expect("outside");
        assert_eq!(outside["identity"]["known_by"], "compositor", "{outside}");
        assert!(outside["identity"].get("sandbox").is_none(), "{outside}");
        drop(engine.stdin.take());
        let _ = engine.wait();
    })
    .await;
}

/// What a desktop entry's `Exec=` names for the session's foot (the
/// demo windows' program) under `session.sh start FLAGS`: a root's foot is
/// that root's file, not the host's `foot`, and an entry speaks for a
/// window only when it runs the window's program.
pub(crate) fn foot_program(flags: &[&str]) -> String {
    match flags.iter().position(|f| *f == "--root") {
        Some(i) => format!("{}/usr/bin/foot", flags.get(i + 1).expect("--root ROOT")),
        None => "foot".to_owned(),
    }
}

/// The `pid` of the node of `app_id` in sway's tree.
fn pid_of(node: &Value, app_id: &str) -> Option<u32> {
    if node["app_id"] == app_id {
        return node["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
    }
    ["nodes", "floating_nodes"]
        .iter()
        .filter_map(|k| node[*k].as_array())
        .flatten()
        .find_map(|c| pid_of(c, app_id))
}

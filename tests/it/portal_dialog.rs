//! The consent question in the desktop's own dialog (issue 51): with no
//! consent agent registered, the broker asks through the desktop portal
//! backend's `org.freedesktop.impl.portal.Access.AccessDialog`. Here the
//! real xdg-desktop-portal-gtk (Debian 12's 1.14) in a headless sway,
//! started by the bus from its service file as on a desktop, chosen as
//! xdg-desktop-portal chooses it for `XDG_CURRENT_DESKTOP=sway`, and its
//! dialog answered through AT-SPI, as a screen-reader user would
//! (tests/portal/answer_dialog.py): "Always" and Allow grants and stores
//! (still granted after a restart); Deny refuses and stores nothing (asked
//! again after a restart); an MCP host that goes away while the dialog
//! is shown takes it off the screen (`Request.Close`); and a process that
//! owns the backend's name first without being its executable is never
//! asked; a Flatpak app (behind xdg-dbus-proxy) is named in the dialog by
//! its own exported desktop entry and known as that Flatpak. On GNOME 43
//! without the contextd extension, GNOME Shell's own
//! Access dialog asks (`org.gnome.Shell.Portal`), its "always" check box
//! making the grant last; a GNOME Shell process that owns the portal name
//! but not `org.gnome.Shell` (a second, nested one) is never asked.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::access::Asked;
use common::session::Session;
use common::*;
use contextd::client::proxy::Context1Proxy;

const BACKEND: &str = "org.freedesktop.impl.portal.desktop.gtk";
const GTK_SERVICE: &str =
    "/usr/share/dbus-1/services/org.freedesktop.impl.portal.desktop.gtk.service";
const A11Y_SERVICE: &str = "/usr/share/dbus-1/services/org.a11y.Bus.service";
const APP: &str = "xdg-desktop-portal-gtk";

/// A headless sway whose bus can start the portal backend and the
/// accessibility bus from the system's service files, a home that asks
/// for what is undecided, and the session's environment on a sway desktop.
fn portal_session() -> (Session, Home, Vec<(String, String)>) {
    let session = Session::start(&["--no-pipewire", "--no-windows"]);
    let services = session.path().join("dbus-services");
    for f in [GTK_SERVICE, A11Y_SERVICE] {
        let name = Path::new(f).file_name().expect("name");
        std::fs::copy(f, services.join(name)).unwrap_or_else(|e| {
            panic!("{f} ({e}): scripts/deps.sh installs xdg-desktop-portal-gtk and at-spi2-core")
        });
    }
    let home = Home::new();
    home.ask_undecided();
    let mut env = session_env(&session, &home);
    env.retain(|(k, _)| k != "XDG_CURRENT_DESKTOP");
    env.push(("XDG_CURRENT_DESKTOP".into(), "sway".into()));
    // Toolkits speak to the accessibility bus when it says a reader is on.
    let on = Command::new("gdbus")
        .args([
            "call",
            "--session",
            "--dest",
            "org.a11y.Bus",
            "--object-path",
            "/org/a11y/bus",
            "--method",
            "org.freedesktop.DBus.Properties.Set",
            "org.a11y.Status",
            "IsEnabled",
            "<true>",
        ])
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .expect("gdbus");
    assert!(
        on.status.success(),
        "the accessibility bus: {}",
        String::from_utf8_lossy(&on.stderr)
    );
    (session, home, env)
}

async fn start_daemon(session: &Session, home: &Home, env: &[(String, String)]) -> Daemon {
    let address = session
        .get("DBUS_SESSION_BUS_ADDRESS")
        .expect("bus")
        .to_owned();
    let d = Daemon::spawn_env(home, env.to_vec(), &[]);
    wait_for_owner_at(&address, true).await;
    d
}

/// The answering script, started before the question so that it waits
/// for the dialog: its JSON line (what the dialog showed) once it is done.
struct Answerer(Child);

impl Answerer {
    fn start(env: &[(String, String)], choice: &str, button: &str) -> Answerer {
        let script = crate::common::root().join("tests/portal/answer_dialog.py");
        Answerer(
            Command::new("/usr/bin/python3")
                .arg(script)
                .args([APP, choice, button])
                .env_clear()
                .envs(env.iter().cloned())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("python3 (gir1.2-atspi-2.0)"),
        )
    }

    async fn done(self) -> serde_json::Value {
        let out = tokio::task::spawn_blocking(move || self.0.wait_with_output())
            .await
            .expect("join")
            .expect("wait");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "the dialog was not answered: {text}");
        serde_json::from_str(text.lines().last().unwrap_or_default()).expect("json")
    }
}

async fn bus(session: &Session) -> zbus::Connection {
    connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await
}

/// `ListSources`' `consent-agent` entry: how prompts are asked.
async fn asked_by(conn: &zbus::Connection) -> serde_json::Value {
    let ctx = Context1Proxy::new(conn).await.expect("proxy");
    ctx.list_sources()
        .await
        .expect("ListSources")
        .iter()
        .map(contextd::client::json::dict_to_json)
        .find(|s| s["name"] == "consent-agent")
        .expect("a consent-agent entry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_portal_dialog_asks_always_stores_and_deny_stores_nothing() {
    with_timeout(180, async {
        let (session, home, env) = portal_session();
        let daemon = start_daemon(&session, &home, &env).await;
        let conn = bus(&session).await;
        let how = asked_by(&conn).await;
        assert_eq!(how["available"], true, "{how}");
        let text = how["last_error"].as_str().unwrap_or_default();
        assert!(
            text.contains(BACKEND) && text.contains("/usr/libexec/xdg-desktop-portal-gtk"),
            "{how}"
        );

        // Allow, always: granted, and stored (the same after a restart).
        let answer = Answerer::start(&env, "Always", "Allow");
        let asked = Asked::new(&conn, &["windows"], "100% %s <b>to help</b>").await;
        let shown = answer.done().await;
        assert_eq!(asked.code().await, 0, "{shown}");
        let texts: Vec<String> = shown["texts"]
            .as_array()
            .expect("texts")
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        let all = texts.join("\n");
        // The title is not a printf format, the reason is not markup: both
        // arrive as the app wrote them, the reason as its words.
        assert!(all.contains("see what you are doing?"), "{all}");
        assert!(
            all.contains("\u{201c}100% %s <b>to help</b>\u{201d}"),
            "{all}"
        );
        assert!(all.contains("windows") || all.contains("Windows"), "{all}");
        let radios = shown["radios"].to_string();
        for r in ["Only this time", "For a day", "Always"] {
            assert!(radios.contains(r), "{radios}");
        }
        drop(conn);
        drop(daemon);
        let _daemon = start_daemon(&session, &home, &env).await;
        let conn = bus(&session).await;
        let again = Asked::new(&conn, &["windows"], "").await;
        assert_eq!(again.code().await, 0, "the grant was stored");

        // Deny: refused now, nothing stored; asked again after a restart.
        let answer = Answerer::start(&env, "-", "Deny");
        let asked = Asked::new(&conn, &["power"], "").await;
        answer.done().await;
        assert_eq!(asked.code().await, 1);
        drop(conn);
        drop(_daemon);
        let _daemon = start_daemon(&session, &home, &env).await;
        let conn = bus(&session).await;
        let answer = Answerer::start(&env, "Always", "Allow");
        let asked = Asked::new(&conn, &["power"], "").await;
        answer.done().await;
        assert_eq!(
            asked.code().await,
            0,
            "asked again: the deny stored nothing"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_goes_away_takes_the_portal_dialog_with_it() {
    with_timeout(120, async {
        let (session, home, env) = portal_session();
        let _daemon = start_daemon(&session, &home, &env).await;
        // An MCP host on the stdio bridge calls a tool that needs the
        // user's answer, then quits while the dialog is on the screen.
        let mut bridge = Command::new(contextctl_bin())
            .arg("mcp")
            .env_clear()
            .envs(env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("contextctl mcp");
        let mut stdin = bridge.stdin.take().expect("stdin");
        let stdout = bridge.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut send = |line: &str| {
            use std::io::Write;
            stdin.write_all(line.as_bytes()).expect("write");
            stdin.write_all(b"\n").expect("newline");
            stdin.flush().expect("flush");
        };
        send(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"leaving","version":"1"}}}"#,
        );
        let init = lines
            .recv_timeout(Duration::from_secs(15))
            .expect("initialize answered");
        assert!(init.contains("\"result\""), "{init}");
        send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let seen = Answerer::start(&env, "-", "-");
        send(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_active_window","arguments":{}}}"#,
        );
        let shown = seen.done().await;
        // The dialog names the host and what it called.
        assert!(
            shown.to_string().contains("get_active_window"),
            "{shown}"
        );
        drop(stdin);
        let gone = Answerer::start(&env, "-", "gone");
        assert_eq!(gone.done().await["gone"], true);
        let _ = bridge.kill();
        let _ = bridge.wait();
    })
    .await;
}

/// What the impostor was asked: each `AccessDialog`'s title.
#[derive(Clone, Default)]
struct Impostor {
    asked: Arc<Mutex<Vec<String>>>,
}

#[zbus::interface(name = "org.freedesktop.impl.portal.Access")]
impl Impostor {
    #[allow(clippy::too_many_arguments)]
    async fn access_dialog(
        &self,
        _handle: zbus::wire::ObjectPath<'_>,
        _app_id: &str,
        _parent_window: &str,
        title: &str,
        _subtitle: &str,
        _body: &str,
        _options: HashMap<String, zbus::wire::OwnedVariant>,
    ) -> (u32, HashMap<String, zbus::wire::OwnedVariant>) {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(title.to_owned());
        let mut d: HashMap<String, zbus::wire::Variant<'_>> = HashMap::new();
        d.insert("duration".into(), zbus::wire::Variant::from("always"));
        let mut r = HashMap::new();
        r.insert(
            "choices".into(),
            zbus::wire::OwnedVariant::try_from(zbus::wire::Variant::from(d)).expect("dict"),
        );
        (0, r)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_takes_the_backends_name_first_is_never_asked() {
    impostor_is_never_asked(false).await;
}

/// The same impostor, which also wrote a D-Bus service file naming its
/// own program for the backend's name, in a data directory the user can
/// write put first in `XDG_DATA_DIRS`: only the system's service files
/// say which program the backend is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_file_the_user_can_write_does_not_make_a_backend() {
    impostor_is_never_asked(true).await;
}

async fn impostor_is_never_asked(own_service_file: bool) {
    with_timeout(120, async {
        let (session, home, mut env) = portal_session();
        if own_service_file {
            let data = home.dir.path().join("impostor-data");
            let services = data.join("dbus-1/services");
            std::fs::create_dir_all(&services).expect("mkdir");
            let me = std::fs::read_link("/proc/self/exe").expect("exe");
            std::fs::write(
                services.join(format!("{BACKEND}.service")),
                format!("[D-BUS Service]\nName={BACKEND}\nExec={}\n", me.display()),
            )
            .expect("service file");
            let dirs = env
                .iter()
                .find(|(k, _)| k == "XDG_DATA_DIRS")
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "/usr/local/share:/usr/share".into());
            env.retain(|(k, _)| k != "XDG_DATA_DIRS");
            env.push(("XDG_DATA_DIRS".into(), format!("{}:{dirs}", data.display())));
        }
        // The attack: this test (not xdg-desktop-portal-gtk) owns the
        // backend's name before the broker asks anything, and grants
        // whatever it is asked.
        let impostor = Impostor::default();
        let address = session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus");
        let _owner = zbus::connection::Builder::address(address)
            .serve_at("/org/freedesktop/portal/desktop", impostor.clone())
            .name(BACKEND)
            .build()
            .await
            .expect("the name");
        let daemon = start_daemon(&session, &home, &env).await;
        let conn = bus(&session).await;
        let asked = Asked::new(&conn, &["windows"], "").await;
        // No notification server in this session either: nothing can ask,
        // so nothing is granted.
        assert_ne!(asked.code().await, 0);
        let log = daemon.stderr();
        assert!(
            log.contains("the desktop portal's dialog is not used")
                && log.contains("not /usr/libexec/xdg-desktop-portal-gtk"),
            "{log}"
        );
        assert!(
            impostor
                .asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty(),
            "the impostor was asked"
        );
    })
    .await;
}

/// GNOME Shell's own Access dialog (the shell owns
/// `org.gnome.Shell.Portal`), read and answered by a probe extension: the
/// shell's actor tree has no AT-SPI bridge in these tests, and GNOME 43
/// has no D-Bus call to read it.
const SHELL_PROBE_UUID: &str = "contextd-portal-probe@contextd.org";
const SHELL_PROBE_JS: &str = r#"'use strict';
const {Gio, St} = imports.gi;
const Main = imports.ui.main;
const ModalDialog = imports.ui.modalDialog;
const CheckBox = imports.ui.checkBox;
const IFACE = `<node><interface name="org.contextd.TestPortalProbe">
  <method name="Dialogs"><arg type="s" direction="out"/></method>
  <method name="Press"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  <method name="Check"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  <method name="ReleaseShellName"><arg type="u" direction="out"/></method>
</interface></node>`;
function open() {
    return Main.layoutManager.modalDialogGroup.get_children().filter(a =>
        a instanceof ModalDialog.ModalDialog &&
        (a.state === ModalDialog.State.OPENED || a.state === ModalDialog.State.OPENING));
}
function walk(actor, out) {
    if (actor instanceof CheckBox.CheckBox) {
        out.checks.push([actor.getLabelActor().text, actor]);
        return;
    }
    if (actor instanceof St.Button)
        out.buttons.push([actor.label || '', actor]);
    else if (actor instanceof St.Label)
        out.texts.push(actor.get_text());
    for (const c of actor.get_children())
        walk(c, out);
}
function parts(d) {
    const out = {texts: [], buttons: [], checks: []};
    walk(d, out);
    return out;
}
class Probe {
    enable() {
        this._obj = Gio.DBusExportedObject.wrapJSObject(IFACE, this);
        this._obj.export(Gio.DBus.session, '/org/contextd/TestPortalProbe');
    }
    disable() {
        this._obj.unexport();
    }
    Dialogs() {
        return JSON.stringify(open().map(d => {
            const p = parts(d);
            return {texts: p.texts, buttons: p.buttons.map(b => b[0]), checks: p.checks.map(c => c[0])};
        }));
    }
    Press(label) {
        for (const d of open()) {
            const b = parts(d).buttons.find(x => x[0] === label);
            if (b) {
                b[1].emit('clicked', 1);
                return true;
            }
        }
        return false;
    }
    ReleaseShellName() {
        const r = Gio.DBus.session.call_sync('org.freedesktop.DBus', '/org/freedesktop/DBus',
            'org.freedesktop.DBus', 'ReleaseName', new imports.gi.GLib.Variant('(s)', ['org.gnome.Shell']),
            null, Gio.DBusCallFlags.NONE, -1, null);
        return r.deepUnpack()[0];
    }
    Check(label) {
        for (const d of open()) {
            const c = parts(d).checks.find(x => x[0] === label);
            if (c) {
                c[1].checked = true;
                return true;
            }
        }
        return false;
    }
}
function init() {
    return new Probe();
}
"#;

async fn shell_probe<T>(conn: &zbus::Connection, method: &str, args: &T) -> Option<zbus::Message>
where
    T: serde::Serialize + zbus::wire::DynamicType,
{
    probe_at(conn, "org.gnome.Shell", method, args).await
}

/// A call to the probe in the shell that owns `dest`.
async fn probe_at<T>(
    conn: &zbus::Connection,
    dest: &str,
    method: &str,
    args: &T,
) -> Option<zbus::Message>
where
    T: serde::Serialize + zbus::wire::DynamicType,
{
    conn.call_method(
        Some(dest),
        "/org/contextd/TestPortalProbe",
        Some("org.contextd.TestPortalProbe"),
        method,
        args,
    )
    .await
    .ok()
}

/// GNOME 43 headless on `bus`, without the contextd extension: only the
/// probe, answering once this returns.
async fn shell_with_probe(bus: &Bus) -> (crate::shells::gnome::GnomeShell, tempfile::TempDir) {
    let shell_home = tempfile::tempdir().expect("tempdir");
    let data = crate::shells::gnome::data_dir_for(shell_home.path(), "gnome-shell");
    let ext = data.join("gnome-shell/extensions").join(SHELL_PROBE_UUID);
    std::fs::create_dir_all(&ext).expect("mkdir");
    std::fs::write(
        ext.join("metadata.json"),
        format!(
            r#"{{"uuid": "{SHELL_PROBE_UUID}", "name": "contextd portal probe", "description": "Reads GNOME's access dialog (tests only)", "shell-version": ["43", "44"]}}"#
        ),
    )
    .expect("metadata");
    std::fs::write(ext.join("extension.js"), SHELL_PROBE_JS).expect("extension.js");
    std::fs::write(
        data.join("gnome-shell/modes/contextd-test-portal.json"),
        format!(
            r#"{{"parentMode": "user", "hasOverview": false, "enabledExtensions": ["{SHELL_PROBE_UUID}"]}}"#
        ),
    )
    .expect("mode");
    let shell = crate::shells::gnome::GnomeShell::start(
        &bus.address,
        &data,
        shell_home.path(),
        "contextd-test-portal",
    )
    .await;
    let conn = bus.connect().await;
    eventually(20, "the probe answers", || async {
        shell_probe(&conn, "Dialogs", &()).await.map(|_| ())
    })
    .await;
    (shell, shell_home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_without_the_extension_asks_in_its_own_access_dialog() {
    with_timeout(180, async {
        let bus = Bus::start();
        let home = Home::new();
        home.ask_undecided();
        let (_shell, _shell_home) = shell_with_probe(&bus).await;
        let conn = bus.connect().await;
        let daemon =
            Daemon::start_with(&bus, &home, &[], &[("XDG_CURRENT_DESKTOP", "GNOME")]).await;

        let asked = Asked::new(&conn, &["windows"], "to sort your windows").await;
        let dialog = eventually(20, "GNOME's access dialog with the question", || async {
            let m = shell_probe(&conn, "Dialogs", &()).await?;
            let json: String = m.body().deserialize().ok()?;
            let all: Vec<serde_json::Value> = serde_json::from_str(&json).ok()?;
            all.into_iter()
                .find(|d| d.to_string().contains("see what you are doing?"))
        })
        .await;
        let text = dialog.to_string();
        assert!(
            text.contains("to sort your windows")
                && text.contains("known by the program file it runs"),
            "{dialog}"
        );
        assert_eq!(
            dialog["checks"][0], "Always allow this app to see it",
            "{dialog}"
        );
        // The user ticks "always" and allows.
        let ticked: bool = shell_probe(&conn, "Check", &("Always allow this app to see it",))
            .await
            .expect("Check")
            .body()
            .deserialize()
            .expect("bool");
        assert!(ticked);
        let pressed: bool = shell_probe(&conn, "Press", &("Allow",))
            .await
            .expect("Press")
            .body()
            .deserialize()
            .expect("bool");
        assert!(pressed, "{dialog}");
        assert_eq!(asked.code().await, 0, "{}", daemon.stderr());
        // Stored: asked again, granted at once.
        let again = Asked::new(&conn, &["windows"], "").await;
        assert_eq!(again.code().await, 0);
        let how = asked_by(&conn).await;
        assert!(
            how["last_error"]
                .as_str()
                .is_some_and(|t| t.contains("org.gnome.Shell.Portal")),
            "{how}"
        );
    })
    .await;
}

/// The attack on GNOME: a process that runs GNOME Shell's own program
/// (any unsandboxed process can start `/usr/bin/gnome-shell`, nested or
/// headless) and owns `org.gnome.Shell.Portal`, while the session's
/// shell name `org.gnome.Shell` is another connection's. Here the probe
/// makes the shell give its main name up and the test takes it: the
/// broker must not ask in that shell's dialog (notifications ask, and
/// there is no notification server here: nothing is granted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gnome_shell_that_does_not_own_the_shells_name_is_never_asked() {
    with_timeout(180, async {
        let bus = Bus::start();
        let home = Home::new();
        home.ask_undecided();
        let (_shell, _shell_home) = shell_with_probe(&bus).await;
        let conn = bus.connect().await;
        let portal_owner = eventually(20, "the shell owns its portal name", || async {
            conn.call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "GetNameOwner",
                &("org.gnome.Shell.Portal",),
            )
            .await
            .ok()?
            .body()
            .deserialize::<String>()
            .ok()
        })
        .await;
        let released: u32 = probe_at(&conn, &portal_owner, "ReleaseShellName", &())
            .await
            .expect("ReleaseShellName")
            .body()
            .deserialize()
            .expect("u");
        assert_eq!(released, 1, "DBUS_RELEASE_NAME_REPLY_RELEASED");
        let _other = zbus::connection::Builder::address(bus.address.as_str())
            .name("org.gnome.Shell")
            .build()
            .await
            .expect("org.gnome.Shell taken by another connection");

        let daemon =
            Daemon::start_with(&bus, &home, &[], &[("XDG_CURRENT_DESKTOP", "GNOME")]).await;
        let asked = Asked::new(&conn, &["windows"], "").await;
        assert_ne!(asked.code().await, 0, "granted without a trusted dialog");
        let log = daemon.stderr();
        assert!(
            log.contains("the desktop portal's dialog is not used")
                && log.contains("does not own org.gnome.Shell"),
            "{log}"
        );
        // Nothing was shown in that shell either.
        let m = probe_at(&conn, &portal_owner, "Dialogs", &())
            .await
            .expect("Dialogs");
        let json: String = m.body().deserialize().expect("s");
        assert!(!json.contains("see what you are doing?"), "{json}");
    })
    .await;
}

/// A Flatpak app asks (from its sandbox, through xdg-dbus-proxy, as
/// `flatpak run` runs it): the dialog names it by its exported desktop
/// entry (the sandbox enforces the id the entry is found by), says it is
/// known as that Flatpak, and quotes its reason as its words; the grant
/// "always" is the Flatpak's, which then reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flatpak_app_is_asked_for_by_its_own_name_in_the_portal_dialog() {
    const NOTES: &str = "org.example.Notes";
    with_timeout(180, async {
        let (session, home, env) = portal_session();
        let apps = home.dir.path().join("data/applications");
        std::fs::create_dir_all(&apps).expect("applications");
        std::fs::write(
            apps.join(format!("{NOTES}.desktop")),
            "[Desktop Entry]\nType=Application\nName=Quick Notes\nIcon=accessories-text-editor\nExec=notes\n",
        )
        .expect("desktop entry");
        let _daemon = start_daemon(&session, &home, &env).await;
        let address = session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus");
        let app = common::flatpak::Flatpak::start_at(address, NOTES);
        let answer = Answerer::start(&env, "Always", "Allow");
        app.call(
            "org.contextd.Context1.RequestAccess",
            &["['windows']", "'to file notes by window'"],
        )
        .expect("RequestAccess");
        let shown = answer.done().await;
        let all = shown["texts"]
            .as_array()
            .expect("texts")
            .iter()
            .filter_map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(all.contains("Let Quick Notes see what you are doing?"), "{all}");
        assert!(all.contains(NOTES) && all.contains("Flatpak"), "{all}");
        assert!(
            all.contains("\u{201c}to file notes by window\u{201d}"),
            "{all}"
        );
        // Granted to the Flatpak, for good.
        eventually(20, "the Flatpak reads its windows", || async {
            app.call("org.contextd.Context1.ListWindows", &[]).ok()
        })
        .await;
    })
    .await;
}

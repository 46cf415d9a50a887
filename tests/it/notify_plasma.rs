//! Do Not Disturb and whole notifications against Plasma 6's own
//! notification server (libnotificationmanager, Debian 13's 6.3), not a
//! mock: the notifications applet run alone by `plasmawindowed` on Qt's
//! offscreen platform, from the Debian 13 root (tests/it/debian13.rs), on
//! the test's session bus, where the broker built here follows it.
//!
//! Plasma's server is the applet's: `plasmashell` hosts it only because
//! its panel's system tray loads that applet (libnotificationmanager's
//! `Server` is started by the applet's notifications model, and the
//! `Inhibited` property is kept by the applet's `Globals.qml`, which
//! binds it to its Do Not Disturb state). `plasmawindowed` loads the same
//! applet and owns `org.freedesktop.Notifications` within a second,
//! without a compositor, a panel or a shell.
//!
//! - An app's inhibition (`Inhibit(desktop_entry, reason, hints)`, KDE's
//!   extension: what a video player or a presentation tool calls) is Do
//!   Not Disturb (`by: notification-server`) for a live D-Bus subscriber
//!   and an MCP host subscribed to `context://session`; `UnInhibit`, or
//!   the app leaving the bus, ends it.
//! - Plasma leaving takes what it said with it (unknown, not off); Plasma
//!   coming back with its own Do Not Disturb setting on (`[DoNotDisturb]
//!   Until` in plasmanotifyrc, what the applet's switch writes) is read
//!   again at once.
//! - A look-alike `PropertiesChanged` from another peer (Plasma's
//!   `Inhibited`, dunst's `paused`) changes nothing.
//! - A notification a real client sends (notify-send with an icon,
//!   urgency and an action) reaches a subscriber whole, under Plasma's
//!   id; the action invoked as Plasma's popup does
//!   (`org.kde.NotificationManager.InvokeAction`) reaches the app, and
//!   its withdrawal closes the notification. `send_notification` from an
//!   MCP host is on Plasma under the host's name with its buttons; the
//!   button pressed is the asker's answer, and the broker then takes the
//!   notification down.

use crate::common;
use crate::fdo;
use crate::mcp_support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use fdo::*;
use mcp_support::{
    http_addr, http_call, http_session, mcp_reader, next_with, token, tool_result, updated,
};
use serde_json::{Value, json};
use zbus::Connection;
use zbus::wire::Variant;

const NOTIFICATIONS: &str = "org.freedesktop.Notifications";
const NOTIFICATIONS_PATH: &str = "/org/freedesktop/Notifications";
const LOGIN1: &str = "org.freedesktop.login1";
/// Plasma's Do Not Disturb "until" when the user turns it on without an
/// end (the applet writes a year ahead; KConfig's date-time format).
const UNTIL_FOREVER: &str = "2099,1,1,0,0,0";

/// Plasma's notification server: the notifications applet in
/// `plasmawindowed`, from `root`, on the bus at `bus`; its home (config,
/// cache, runtime directory) under /tmp, seen the same inside the root.
/// Stopped (SIGTERM) on drop; its log printed if the test failed.
struct Plasma {
    child: Option<Child>,
    log: PathBuf,
}

/// The home Plasma keeps its settings in (plasmanotifyrc), kept across
/// its restarts.
struct PlasmaHome {
    dir: tempfile::TempDir,
}

impl PlasmaHome {
    fn new() -> PlasmaHome {
        let dir = tempfile::Builder::new()
            .prefix("contextd-plasma-")
            .tempdir_in("/tmp")
            .expect("tempdir in /tmp");
        for d in ["config", "cache", "data", "run"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        std::fs::set_permissions(
            dir.path().join("run"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod");
        PlasmaHome { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Plasma's environment: the test's session bus, no system bus (its
    /// broadcasts are off by default), Qt's offscreen platform.
    fn command(&self, root: &str, bus: &str, program: &str) -> Command {
        let h = self.path();
        let mut c = Command::new(crate::common::root().join("scripts/in-root.sh"));
        c.arg(root)
            .arg(program)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .env("HOME", h)
            .env("XDG_CONFIG_HOME", h.join("config"))
            .env("XDG_CACHE_HOME", h.join("cache"))
            .env("XDG_DATA_HOME", h.join("data"))
            .env("XDG_RUNTIME_DIR", h.join("run"))
            .env("DBUS_SESSION_BUS_ADDRESS", bus)
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                format!("unix:path={}", h.join("no-system-bus").display()),
            )
            .env("QT_QPA_PLATFORM", "offscreen")
            .stdin(Stdio::null());
        c
    }

    /// Turn Plasma's Do Not Disturb setting on until `until` (KConfig's
    /// date-time), as its applet's switch does, while Plasma is away.
    ///
    /// Not while it runs: Plasma 6.3 misses some of the change notices
    /// `kwriteconfig6 --notify` sends (its own `Inhibited` then stays as
    /// it was, with the file changed: one toggle in a few dozen here,
    /// whatever the pause between toggles, seen with Plasma alone on a
    /// bus, no broker), so a test of that would test Plasma's luck.
    fn set_dnd_until(&self, root: &str, bus: &str, until: &str) {
        let mut c = self.command(root, bus, "/usr/bin/kwriteconfig6");
        c.args([
            "--file",
            "plasmanotifyrc",
            "--group",
            "DoNotDisturb",
            "--key",
            "Until",
            until,
        ]);
        let (st, out, err) = run_cmd(&mut c, 30);
        assert!(st.success(), "kwriteconfig6: {out}{err}");
    }
}

impl Plasma {
    /// Start it and wait until it owns `org.freedesktop.Notifications`.
    async fn start(root: &str, bus: &str, home: &PlasmaHome, n: u32) -> Plasma {
        let log = home.path().join(format!("plasma-{n}.log"));
        let child = home
            .command(root, bus, "/usr/bin/plasmawindowed")
            .arg("org.kde.plasma.notifications")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn plasmawindowed");
        let plasma = Plasma {
            child: Some(child),
            log,
        };
        let conn = connect_to(bus).await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let name = zbus::names::BusName::try_from(NOTIFICATIONS).expect("name");
        eventually(20, "Plasma owns org.freedesktop.Notifications", || async {
            dbus.name_has_owner(name.clone())
                .await
                .unwrap_or(false)
                .then_some(())
        })
        .await;
        plasma
    }

    /// Plasma leaves (SIGTERM, as at the end of a session), and its name
    /// with it.
    async fn stop(&mut self, bus: &str) {
        if let Some(mut c) = self.child.take() {
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: kill(2) on our own child's PID, not yet reaped.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let conn = connect_to(bus).await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let name = zbus::names::BusName::try_from(NOTIFICATIONS).expect("name");
        eventually(10, "org.freedesktop.Notifications released", || async {
            (!dbus.name_has_owner(name.clone()).await.unwrap_or(true)).then_some(())
        })
        .await;
    }
}

impl Drop for Plasma {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- {}:\n{log}", self.log.display());
        }
    }
}

/// A logind with an active session `c1`: DND rides on the session state.
async fn logind(buses: &Buses) -> Mock {
    let logind = Mock::template(&buses.system.address, true, "logind", LOGIN1).await;
    let sys = buses.system.connect().await;
    logind
        .call(
            &sys,
            "/org/freedesktop/login1",
            MOCK_IFACE,
            "AddSession",
            &("c1", "seat0", 1000u32, "alice", true),
        )
        .await;
    logind
}

/// A method of Plasma's server, from `conn`.
async fn call<B>(conn: &Connection, iface: &str, method: &str, body: &B) -> zbus::Message
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(
        Some(NOTIFICATIONS),
        NOTIFICATIONS_PATH,
        Some(iface),
        method,
        body,
    )
    .await
    .unwrap_or_else(|e| panic!("{iface}.{method}: {e}"))
}

fn is_dnd(c: &str, d: &Value, on: bool) -> bool {
    c == "session" && d["session"]["do_not_disturb"] == on
}

/// What a monitor of the bus sees of Plasma's notifications: `Notify`
/// with the id Plasma answered and `CloseNotification` with the id asked.
#[derive(Debug)]
enum Seen {
    Notify {
        app: String,
        summary: String,
        id: u32,
    },
    Close(u32),
}

/// A monitor of the bus at `bus` (the broker leaves its own notifications
/// out of its context, so the test learns here which id Plasma gave the
/// one `send_notification` sent, and sees the broker withdraw it).
async fn watch_plasma(bus: &str) -> tokio::sync::mpsc::UnboundedReceiver<Seen> {
    use futures_util::StreamExt;
    use zbus::message::Type;
    let monitor = connect_to(bus).await;
    monitor
        .call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus.Monitoring"),
            "BecomeMonitor",
            &(
                vec![
                    "type='method_call',interface='org.freedesktop.Notifications'",
                    "type='method_return'",
                ],
                0u32,
            ),
        )
        .await
        .expect("BecomeMonitor");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut stream = zbus::MessageStream::from(&monitor);
    tokio::spawn(async move {
        let _monitor = monitor;
        // Notify calls waiting for their reply: (sender, serial) → (app, summary).
        let mut asked: HashMap<(String, u32), (String, String)> = HashMap::new();
        while let Some(Ok(m)) = stream.next().await {
            let h = m.header();
            let sender = h.sender().map(|s| s.to_string()).unwrap_or_default();
            let seen = match (h.message_type(), h.member().map(|m| m.as_str())) {
                (Type::MethodCall, Some("Notify")) => {
                    type Notify = (
                        String,
                        u32,
                        String,
                        String,
                        String,
                        Vec<String>,
                        HashMap<String, zbus::OwnedVariant>,
                        i32,
                    );
                    if let Ok((app, _, _, summary, ..)) = m.body().deserialize::<Notify>() {
                        let serial = m.primary_header().serial_num().get();
                        asked.insert((sender, serial), (app, summary));
                    }
                    None
                }
                (Type::MethodCall, Some("CloseNotification")) => m
                    .body()
                    .deserialize::<(u32,)>()
                    .ok()
                    .map(|(id,)| Seen::Close(id)),
                (Type::MethodReturn, _) => {
                    let to = h.destination().map(|d| d.to_string()).unwrap_or_default();
                    h.reply_serial()
                        .and_then(|r| asked.remove(&(to, r.get())))
                        .and_then(|(app, summary)| {
                            let (id,) = m.body().deserialize::<(u32,)>().ok()?;
                            Some(Seen::Notify { app, summary, id })
                        })
                }
                _ => None,
            };
            if let Some(seen) = seen
                && tx.send(seen).is_err()
            {
                break;
            }
        }
    });
    rx
}

/// The first of `seen` that `pick` takes, within 15 s.
async fn next_seen<T>(
    seen: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>,
    what: &str,
    pick: impl Fn(Seen) -> Option<T>,
) -> T {
    within(15, what, async {
        loop {
            let s = seen.recv().await.expect("the monitor ended");
            if let Some(t) = pick(s) {
                return t;
            }
        }
    })
    .await
}

/// The whole acceptance, against the Plasma of `root`.
pub(crate) async fn plasma_inhibition_is_do_not_disturb_in(root: &str) {
    with_timeout(150, async {
        let buses = Buses::start();
        let bus = buses.session.address.clone();
        let _logind = logind(&buses).await;
        let home = Home::new();
        let me = my_app_id();
        home.write_policy(&[
            (&me, &["session", "notifications", "notifications.content"]),
            ("token:dnd", &["session"]),
            ("token:asker", &["actions.notify"]),
        ]);
        // Only the server's part: GNOME's (its schema is installed here)
        // would say "off" throughout.
        home.write_config(
            "[consent]\nundecided = \"deny\"\n\n[sources]\ndisabled = [\"dnd-gsettings\"]\n",
        );
        let ph = PlasmaHome::new();
        let mut plasma = Plasma::start(root, &bus, &ph, 1).await;
        let conn = buses.session.connect().await;
        let info = call(&conn, NOTIFICATIONS, "GetServerInformation", &()).await;
        let (name, vendor, version, _spec): (String, String, String, String) =
            info.body().deserialize().expect("server information");
        assert_eq!((name.as_str(), vendor.as_str()), ("Plasma", "KDE"));
        assert!(version.starts_with("6."), "Plasma 6 expected: {version}");
        eprintln!("Plasma's notification server {version}");

        let _d = buses
            .daemon_with(&home, &[("XDG_SESSION_ID", "c1")], &["--http", "127.0.0.1:0"])
            .await;
        until_source(&conn, "dnd-server", true).await;
        // Plasma has `Inhibited` from the start: known, and off.
        until_snapshot(&conn, "DND known and off", |s| {
            s["session"]["do_not_disturb"] == false
        })
        .await;
        let mut changes = Changes::subscribe(&conn, &["session"]).await;
        let addr = http_addr(&home);
        let tok = token(&buses.session, &home, "dnd");
        let mcp = mcp_reader(addr, &tok, &["context://session"]);
        let sid = http_session(addr, &tok);
        let session_now = |id: u64| {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": "context://session"}});
            let (code, msgs) = http_call(addr, &tok, &sid, body.to_string().as_bytes());
            assert_eq!(code, 200, "{msgs:?}");
            let text = msgs
                .iter()
                .find(|m| m["id"] == id)
                .and_then(|m| m["result"]["contents"][0]["text"].as_str())
                .unwrap_or_else(|| panic!("{msgs:?}"))
                .to_owned();
            let v = serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            v["session"].clone()
        };

        // The attack: another peer sends Plasma's signal and dunst's, from
        // its own name, before the real change. Nothing of it is taken
        // (dunst's pause, had it been, would outlive the real "off" below).
        let app = buses.session.connect().await;
        for (iface, prop) in [(NOTIFICATIONS, "Inhibited"), ("org.dunstproject.cmd0", "paused")] {
            let forged: HashMap<&str, Variant<'_>> =
                [(prop, Variant::from(true))].into_iter().collect();
            app.emit_signal(
                None::<&str>,
                NOTIFICATIONS_PATH,
                "org.freedesktop.DBus.Properties",
                "PropertiesChanged",
                &(iface, forged, Vec::<&str>::new()),
            )
            .await
            .expect("forged PropertiesChanged");
        }

        // An app inhibits notifications (a video player, a presentation),
        // from the same connection: after the forgeries on the bus.
        let reply = call(
            &app,
            NOTIFICATIONS,
            "Inhibit",
            &("org.example.Player", "Playing a film", HashMap::<&str, Variant<'_>>::new()),
        )
        .await;
        let cookie: u32 = reply.body().deserialize().expect("cookie");
        assert!(cookie > 0, "no cookie");
        let (d, took) = changes
            .until(10, "DND on by the app's inhibition", |c, d| {
                assert_ne!(
                    d["session"]["do_not_disturb_by"], "dunst",
                    "a forged signal was taken: {d}"
                );
                is_dnd(c, d, true)
            })
            .await;
        eprintln!("Inhibit → Changed in {took:?}");
        assert_eq!(
            d["session"]["do_not_disturb_by"], "notification-server",
            "{d}"
        );
        assert_eq!(d["session"]["active"], true, "the rest stays: {d}");
        let lines = next_with(&mcp, "context://session");
        assert_eq!(updated(&lines), ["context://session"], "{lines:?}");
        let s = session_now(10);
        assert_eq!(s["do_not_disturb"], true, "{s}");
        assert_eq!(s["do_not_disturb_by"], "notification-server", "{s}");

        // The app ends it.
        call(&app, NOTIFICATIONS, "UnInhibit", &(cookie,)).await;
        let (d, _) = changes
            .until(10, "DND off after UnInhibit", |c, d| is_dnd(c, d, false))
            .await;
        assert!(d["session"].get("do_not_disturb_by").is_none(), "{d}");
        next_with(&mcp, "context://session");
        assert_eq!(session_now(11)["do_not_disturb"], false);
        let s = snapshot(&conn).await;
        assert_eq!(s["session"]["do_not_disturb"], false, "{s}");

        // An app that inhibits and leaves the bus: Plasma ends it for it.
        call(
            &app,
            NOTIFICATIONS,
            "Inhibit",
            &("", "Presenting", HashMap::<&str, Variant<'_>>::new()),
        )
        .await;
        changes
            .until(10, "DND on again", |c, d| is_dnd(c, d, true))
            .await;
        drop(app);
        changes
            .until(10, "DND off with the app gone", |c, d| is_dnd(c, d, false))
            .await;

        // Plasma leaves: what it said goes with it (unknown, absent).
        plasma.stop(&bus).await;
        let (d, _) = changes
            .until(10, "DND unknown with Plasma gone", |c, d| {
                c == "session" && d["session"].get("do_not_disturb").is_none()
            })
            .await;
        assert_eq!(d["session"]["active"], true, "{d}");
        until_source(&conn, "dnd-server", false).await;
        let s = session_now(12);
        assert!(s.get("do_not_disturb").is_none(), "{s}");

        // Plasma comes back with Do Not Disturb on in its settings (set
        // while it was away): read again, on.
        ph.set_dnd_until(root, &bus, UNTIL_FOREVER);
        let _plasma = Plasma::start(root, &bus, &ph, 2).await;
        until_source(&conn, "dnd-server", true).await;
        changes
            .until(10, "DND on with Plasma back", |c, d| {
                is_dnd(c, d, true) && d["session"]["do_not_disturb_by"] == "notification-server"
            })
            .await;
        let s = until_snapshot(&conn, "the snapshot with Plasma back", |s| {
            s["session"]["do_not_disturb"] == true
        })
        .await;
        assert_eq!(
            s["session"]["do_not_disturb_by"], "notification-server",
            "{s}"
        );

        // A real client's notification reaches a subscriber whole (Plasma
        // takes it in Do Not Disturb too, only shows no popup).
        let mut notes = Changes::subscribe(&conn, &["notifications"]).await;
        let path = std::env::var("PATH").unwrap_or_default();
        let chat = crate::notify_real_servers::NotifySend::start(
            &buses.envs(&home, &[("PATH", path.as_str())]),
            &[
                "-a",
                "Chat",
                "-i",
                "mail-unread",
                "-u",
                "critical",
                "-A",
                "reply=Reply",
                "Ann wrote",
                "Lunch <b>today</b>?",
            ],
        );
        let (d, _) = notes
            .until(10, "the notification", |c, d| {
                c == "notifications" && d["event"] == "opened"
            })
            .await;
        let n = &d["notification"];
        assert_eq!(n["app_name"], "Chat", "{d}");
        assert_eq!(n["summary"], "Ann wrote", "{d}");
        assert_eq!(n["body"], "Lunch today?", "{d}");
        assert_eq!(n["icon"], "mail-unread", "{d}");
        assert_eq!(n["urgency"], "critical", "{d}");
        assert_eq!(n["actions"], json!(["Reply"]), "{d}");
        let id = n["id"].as_str().expect("id").to_owned();
        let plasma_id: u32 = id
            .strip_prefix("notify-")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not Plasma's id: {id}"));
        // The user presses "Reply" in Plasma's popup: the app gets it
        // (libnotify prints the key) and withdraws the notification.
        call(
            &conn,
            "org.kde.NotificationManager",
            "InvokeAction",
            &(plasma_id, "reply"),
        )
        .await;
        assert_eq!(chat.output(), "reply");
        let (d, _) = notes
            .until(10, "closed after the action", |_, d| {
                d["event"] == "closed" && d["notification"]["id"] == id.as_str()
            })
            .await;
        assert_eq!(d["notification"]["closed"], "closed", "{d}");

        // send_notification from an MCP host: on Plasma under the host's
        // name with its buttons; the one the user presses is the answer,
        // and the broker then takes the notification down.
        let mut seen = watch_plasma(&bus).await;
        let asker = token(&buses.session, &home, "asker");
        let asker_sid = http_session(addr, &asker);
        let asking = tokio::task::spawn_blocking(move || {
            tool_result(
                addr,
                &asker,
                &asker_sid,
                2,
                "send_notification",
                json!({"summary": "Deploy now?", "body": "v2 is ready", "actions": ["Yes", "No"], "timeout_s": 120}),
            )
        });
        let (app, plasma_id) = next_seen(&mut seen, "the question on Plasma", |s| match s {
            Seen::Notify { app, summary, id } if summary == "Deploy now?" => Some((app, id)),
            _ => None,
        })
        .await;
        assert!(app.ends_with(" (via contextd)"), "{app}");
        call(
            &conn,
            "org.kde.NotificationManager",
            "InvokeAction",
            &(plasma_id, "contextd-1"),
        )
        .await;
        let r = within(15, "the answer", asking).await.expect("call");
        assert_eq!(
            r["structuredContent"],
            json!({"id": plasma_id, "action": "No"}),
            "{r}"
        );
        next_seen(&mut seen, "the answered question taken down", |s| {
            matches!(s, Seen::Close(id) if id == plasma_id).then_some(())
        })
        .await;
    })
    .await
}

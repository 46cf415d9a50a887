//! Whole notifications and Do Not Disturb against the notification
//! servers users run, not a mock: mako 1.7 and dunst 1.9 (Debian 12's) in a
//! headless sway of `scripts/session.sh`, each started in about a second.
//!
//! - mako: a notification a real client sends (`notify-send` with an
//!   icon, urgency, `transient`/`resident` hints and actions) reaches a
//!   D-Bus subscriber and MCP's `list_notifications` (filtered by app and
//!   urgency) whole; mako's own id is the broker's; `makoctl invoke` and
//!   `makoctl dismiss` close them as mako says. `send_notification` with
//!   actions is on mako's screen with its buttons, and the label the user
//!   invokes (`makoctl invoke -n ID ACTION`) or the dismissal
//!   (`makoctl dismiss -n ID`) comes back as the asker's result. mako
//!   configured without actions (`actions=0`, which drops `actions` from
//!   its capabilities) gets the notification without buttons and the
//!   asker is told at once that no answer can come. mako keeps Do Not
//!   Disturb in its modes, which it announces to nobody (`ListModes` on
//!   `fr.emersion.Mako`, no property, no signal): unknown, not off.
//! - dunst: `dunstctl set-paused true/false` is Do Not Disturb (`paused`
//!   on `org.dunstproject.cmd0`; dunst 1.9 has no `Inhibited`) for a live
//!   D-Bus subscriber and an MCP host subscribed to `context://session`;
//!   dunst leaving takes it away, and dunst coming back is followed.
//!   dunst sends `ActionInvoked` and `NotificationClosed` to the client
//!   alone (mako broadcasts them): the broker's monitor still sees the
//!   close, and `dunstctl action` / `dunstctl close` still answer the
//!   asker of `send_notification`.
//!
//! What a real server cannot be made to do (an `ActionInvoked` forged by
//! another peer, a server that never answers) stays in
//! `fdo_notifications_whole.rs` and `fdo_dnd.rs` with python-dbusmock.

use crate::common;
use crate::fdo;
use crate::mcp_support;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::dbusmock::{MOCK_IFACE, Mock};
use common::notifyd::{self, dunstctl, mako_field, makoctl, makoctl_list};
use common::session::Session;
use common::*;
use fdo::{Changes, snapshot, source, until_snapshot, until_source};
use mcp_support::{http_session, mcp_reader, next_with, tool_result, updated};
use serde_json::{Value, json};
use zbus::Connection;

const LOGIN1: &str = "org.freedesktop.login1";
const NOTIFICATIONS: &str = "org.freedesktop.Notifications";
const NOTIFICATIONS_PATH: &str = "/org/freedesktop/Notifications";

/// A headless sway session (with a private system bus for logind), a
/// home with `grants`, GNOME's DND setting off (only the server's counts
/// here), and the session's environment for the broker and clients.
fn session(grants: &[(&str, &[&str])]) -> (Session, Home, Vec<(String, String)>) {
    let session = Session::start(&["--no-pipewire", "--no-windows", "--system-bus"]);
    let home = Home::new();
    home.write_policy(grants);
    home.write_config(
        "[consent]\nundecided = \"deny\"\n\n[sources]\ndisabled = [\"dnd-gsettings\"]\n",
    );
    let env = session_env(&session, &home);
    (session, home, env)
}

fn get<'a>(env: &'a [(String, String)], k: &str) -> &'a str {
    env.iter()
        .find(|(ek, _)| ek == k)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {k} in the session's environment"))
}

/// A logind with an active session `c1` on the session's system bus: Do
/// Not Disturb rides on the session state.
async fn logind(env: &[(String, String)]) -> Mock {
    let system = get(env, "DBUS_SYSTEM_BUS_ADDRESS");
    let logind = Mock::template(system, true, "logind", LOGIN1).await;
    let sys = connect_to(system).await;
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

/// The broker in the session (its logind session `c1`), with MCP over
/// HTTP; waits for its name.
async fn broker(home: &Home, env: &[(String, String)]) -> Daemon {
    let mut env = env.to_vec();
    env.push(("XDG_SESSION_ID".into(), "c1".into()));
    let d = Daemon::spawn_env(home, env.clone(), &["--http", "127.0.0.1:0"]);
    wait_for_owner_at(get(&env, "DBUS_SESSION_BUS_ADDRESS"), true).await;
    d
}

/// `contextctl ARGS` in the session; its stdout.
fn ctl(env: &[(String, String)], args: &[&str]) -> String {
    let (st, out, err) = run_cmd(
        Command::new(contextctl_bin())
            .args(args)
            .env_clear()
            .envs(env.iter().cloned())
            .env("RUST_LOG", "off"),
        30,
    );
    assert!(st.success(), "contextctl {args:?}: {err}");
    out.trim().to_owned()
}

/// The broker's HTTP address (its runtime directory is the session's).
async fn http_addr(env: &[(String, String)]) -> SocketAddr {
    let url = std::path::Path::new(get(env, "XDG_RUNTIME_DIR")).join("contextd/mcp-http.url");
    eventually(10, "the HTTP address", || async {
        std::fs::read_to_string(&url).ok().and_then(|s| {
            s.trim()
                .strip_prefix("http://")?
                .strip_suffix("/mcp")?
                .parse()
                .ok()
        })
    })
    .await
}

/// An MCP host: a token of `name` and a Streamable HTTP session of it.
struct Host {
    addr: SocketAddr,
    tok: String,
    sid: String,
}

impl Host {
    async fn new(env: &[(String, String)], name: &str) -> Host {
        let addr = http_addr(env).await;
        let tok = ctl(env, &["token", "create", name]);
        let sid = http_session(addr, &tok);
        Host { addr, tok, sid }
    }

    /// `tools/call`, waited for beside the test (a call with actions waits
    /// for the user).
    fn call(&self, id: u64, name: &'static str, args: Value) -> tokio::task::JoinHandle<Value> {
        let (addr, tok, sid) = (self.addr, self.tok.clone(), self.sid.clone());
        tokio::task::spawn_blocking(move || tool_result(addr, &tok, &sid, id, name, args))
    }
}

/// `notify-send ARGS` from the session; with actions it waits for the
/// answer, and prints the key of the invoked action.
pub(crate) struct NotifySend(Child);

impl NotifySend {
    pub(crate) fn start(env: &[(String, String)], args: &[&str]) -> NotifySend {
        let child = Command::new("notify-send")
            .args(args)
            .env_clear()
            .envs(env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("notify-send (libnotify-bin) must be installed");
        NotifySend(child)
    }

    /// What it printed once it exited (within 10 s).
    pub(crate) fn output(mut self) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.0.try_wait().expect("wait").is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "notify-send did not exit within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = String::new();
        if let Some(mut o) = self.0.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut o, &mut out);
        }
        out.trim().to_owned()
    }
}

impl Drop for NotifySend {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The notification of mako's list with `summary`: (its id, the whole).
async fn on_makos_screen(env: &[(String, String)], summary: &str) -> (u64, Value) {
    eventually(15, &format!("{summary:?} on mako's screen"), || async {
        makoctl_list(env)?
            .into_iter()
            .find(|n| mako_field(n, "summary") == summary)
            .and_then(|n| Some((mako_field(&n, "id").as_u64()?, n)))
    })
    .await
}

/// `makoctl ARGS`, which must succeed.
fn makoctl_ok(env: &[(String, String)], args: &[&str]) {
    let (ok, out) = makoctl(env, args);
    assert!(ok, "makoctl {args:?} failed: {out}");
}

/// Wait until mako's list has no notification with `summary`.
async fn off_makos_screen(env: &[(String, String)], summary: &str) {
    eventually(10, &format!("{summary:?} off mako's screen"), || async {
        makoctl_list(env)
            .filter(|l| !l.iter().any(|n| mako_field(n, "summary") == summary))
            .map(|_| ())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mako_whole_notifications_and_the_askers_answers() {
    with_timeout(150, async {
        let me = my_app_id();
        let (session, home, env) = session(&[
            (&me, &["notifications", "notifications.content", "session"]),
            ("token:reader", &["notifications", "notifications.content"]),
            ("token:asker", &["actions.notify"]),
        ]);
        let _logind = logind(&env).await;
        let config = session.path().join("mako.config");
        std::fs::write(&config, "").expect("mako config");
        let _mako = notifyd::mako(&env, session.path(), Some(&config)).await;
        let _d = broker(&home, &env).await;
        let conn = connect_to(get(&env, "DBUS_SESSION_BUS_ADDRESS")).await;
        until_source(&conn, "notifications", true).await;

        // mako keeps Do Not Disturb in its modes, which it tells nobody:
        // the server's part is there, and says nothing (unknown, not off).
        until_source(&conn, "dnd-server", true).await;
        let s = until_snapshot(&conn, "the session", |s| {
            s["session"]["active"] == true
        })
        .await;
        assert!(s["session"].get("do_not_disturb").is_none(), "{s}");

        // A real client: icon, urgency, hints, two buttons.
        let mut changes = Changes::subscribe(&conn, &["notifications"]).await;
        let chat = NotifySend::start(
            &env,
            &[
                "-a",
                "Chat",
                "-i",
                "mail-unread",
                "-u",
                "critical",
                "-h",
                "boolean:transient:true",
                "-h",
                "boolean:resident:true",
                "-A",
                "reply=Reply",
                "-A",
                "later=Remind me",
                "Ann wrote",
                "Lunch <b>today</b>?",
            ],
        );
        let (d, _) = changes
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
        assert_eq!(n["transient"], true, "{d}");
        assert_eq!(n["resident"], true, "{d}");
        assert_eq!(n["actions"], json!(["Reply", "Remind me"]), "{d}");
        // The broker's id is mako's.
        let (mako_id, shown) = on_makos_screen(&env, "Ann wrote").await;
        assert_eq!(n["id"], format!("notify-{mako_id}"), "{d} vs {shown}");
        assert_eq!(mako_field(&shown, "app-icon"), "mail-unread", "{shown}");
        assert_eq!(
            mako_field(&shown, "actions"),
            &json!({"reply": "Reply", "later": "Remind me"}),
            "{shown}"
        );

        // MCP: the same fields, and the filters by app and urgency.
        let reader = Host::new(&env, "reader").await;
        let r = reader
            .call(2, "list_notifications", json!({"app": "chat", "min_urgency": "critical"}))
            .await
            .expect("call");
        let list = r["structuredContent"]["notifications"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let [m] = list.as_slice() else {
            panic!("{r}")
        };
        for field in ["id", "icon", "urgency", "transient", "resident", "actions", "body"] {
            assert_eq!(m[field], n[field], "{field}: {r} vs {d}");
        }
        for (filter, want) in [
            (json!({"app": "Mail"}), 0),
            (json!({"app": "CHAT"}), 1),
            (json!({"min_urgency": "normal"}), 1),
        ] {
            let r = reader
                .call(3, "list_notifications", filter.clone())
                .await
                .expect("call");
            let got = r["structuredContent"]["notifications"]
                .as_array()
                .map_or(0, Vec::len);
            assert_eq!(got, want, "{filter}: {r}");
        }

        // The user presses "Reply" in mako: the app gets it (libnotify
        // prints the key), and the notification closes.
        makoctl_ok(&env, &["invoke", "-n", &mako_id.to_string(), "reply"]);
        assert_eq!(chat.output(), "reply");
        let id = n["id"].as_str().expect("id").to_owned();
        let (d, _) = changes
            .until(10, "closed after the action", |_, d| {
                d["event"] == "closed" && d["notification"]["id"] == id.as_str()
            })
            .await;
        // notify-send withdraws it once answered (CloseNotification: 3).
        assert_eq!(d["notification"]["closed"], "closed", "{d}");

        // Another, which the user dismisses in mako: "dismissed" (read).
        let _mail = NotifySend::start(&env, &["-a", "Mail", "-u", "low", "New mail"]);
        let (d, _) = changes
            .until(10, "the second", |_, d| {
                d["event"] == "opened" && d["notification"]["app_name"] == "Mail"
            })
            .await;
        assert_eq!(d["notification"]["urgency"], "low", "{d}");
        let id = d["notification"]["id"].as_str().expect("id").to_owned();
        let (mako_id, _) = on_makos_screen(&env, "New mail").await;
        makoctl_ok(&env, &["dismiss", "-n", &mako_id.to_string()]);
        let (d, _) = changes
            .until(10, "dismissed", |_, d| {
                d["event"] == "closed" && d["notification"]["id"] == id.as_str()
            })
            .await;
        assert_eq!(d["notification"]["closed"], "dismissed", "{d}");

        // send_notification with actions: on mako's screen with its
        // buttons, under the host's name; the label the user invokes is
        // the asker's result.
        let asker = Host::new(&env, "asker").await;
        let call = asker.call(
            2,
            "send_notification",
            json!({"summary": "Deploy now?", "body": "v2 is ready", "actions": ["Yes", "No"], "timeout_s": 120}),
        );
        let (mako_id, shown) = on_makos_screen(&env, "Deploy now?").await;
        assert_eq!(
            mako_field(&shown, "actions"),
            &json!({"contextd-0": "Yes", "contextd-1": "No"}),
            "{shown}"
        );
        let app = mako_field(&shown, "app-name").as_str().unwrap_or_default();
        assert!(app.ends_with(" (via contextd)"), "{shown}");
        makoctl_ok(&env, &["invoke", "-n", &mako_id.to_string(), "contextd-1"]);
        let r = within(15, "the answer", call).await.expect("call");
        assert_eq!(
            r["structuredContent"],
            json!({"id": mako_id, "action": "No"}),
            "{r}"
        );
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("The user chose \"No\""), "{text}");
        // mako leaves a notification up after an action (its InvokeAction
        // only signals); answered, the broker takes it down, as libnotify
        // does for its apps.
        off_makos_screen(&env, "Deploy now?").await;

        // Dismissed in mako: the asker is told.
        let call = asker.call(
            3,
            "send_notification",
            json!({"summary": "Lunch?", "actions": ["Go"], "timeout_s": 120}),
        );
        let (mako_id, _) = on_makos_screen(&env, "Lunch?").await;
        makoctl_ok(&env, &["dismiss", "-n", &mako_id.to_string()]);
        let r = within(15, "the dismissal", call).await.expect("call");
        assert_eq!(
            r["structuredContent"],
            json!({"id": mako_id, "closed": "dismissed"}),
            "{r}"
        );

        // Nobody answers within timeout_s: mako expires it (the broker
        // asked for that time) or the broker withdraws it, whichever
        // comes first; either way it is off the screen and said.
        let r = within(
            15,
            "the unanswered one",
            asker.call(
                4,
                "send_notification",
                json!({"summary": "Still there?", "actions": ["Yes"], "timeout_s": 1}),
            ),
        )
        .await
        .expect("call");
        let closed = r["structuredContent"]["closed"].as_str().unwrap_or_default();
        eprintln!("unanswered within timeout_s: {closed}");
        assert!(["expired", "no-answer"].contains(&closed), "{r}");
        off_makos_screen(&env, "Still there?").await;

        // mako without actions (`actions=0`: no `actions` capability): the
        // notification is shown without buttons and the asker is told at
        // once that no answer can come, rather than waiting in vain.
        std::fs::write(&config, "actions=0\n").expect("mako config");
        makoctl_ok(&env, &["reload"]);
        let r = within(
            10,
            "the answer without actions",
            asker.call(
                5,
                "send_notification",
                json!({"summary": "Merge?", "actions": ["Yes", "No"], "timeout_s": 300}),
            ),
        )
        .await
        .expect("call");
        let (mako_id, shown) = on_makos_screen(&env, "Merge?").await;
        assert_eq!(
            r["structuredContent"],
            json!({"id": mako_id, "actions_unsupported": true}),
            "{r}"
        );
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("no answer will come"), "{text}");
        assert!(
            mako_field(&shown, "actions")
                .as_object()
                .is_none_or(|a| a.is_empty()),
            "{shown}"
        );
    })
    .await
}

/// The D-Bus properties of dunst's object under `iface`.
async fn props_of(conn: &Connection, iface: &str) -> Vec<String> {
    let p = zbus::fdo::PropertiesProxy::builder(conn)
        .destination(NOTIFICATIONS)
        .path(NOTIFICATIONS_PATH)
        .build()
        .await
        .expect("proxy");
    let iface = zbus::names::InterfaceName::try_from(iface).expect("iface");
    p.get_all(iface)
        .await
        .map(|m| m.into_keys().collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dunsts_pause_is_do_not_disturb_for_live_subscribers() {
    with_timeout(150, async {
        let me = my_app_id();
        let (session, home, env) = session(&[(&me, &["session"]), ("token:dnd", &["session"])]);
        let _logind = logind(&env).await;
        let dunst = notifyd::dunst(&env, session.path()).await;
        let conn = connect_to(get(&env, "DBUS_SESSION_BUS_ADDRESS")).await;
        // What dunst 1.9 exposes: `paused` under its own interface, and no
        // `Inhibited` (so the broker names dunst).
        assert!(
            props_of(&conn, "org.dunstproject.cmd0")
                .await
                .contains(&"paused".to_owned())
        );
        let by = if props_of(&conn, NOTIFICATIONS)
            .await
            .contains(&"Inhibited".to_owned())
        {
            "notification-server"
        } else {
            "dunst"
        };
        let _d = broker(&home, &env).await;
        until_source(&conn, "dnd-server", true).await;
        until_snapshot(&conn, "DND known and off", |s| {
            s["session"]["do_not_disturb"] == false
        })
        .await;
        let mut changes = Changes::subscribe(&conn, &["session"]).await;
        let host = Host::new(&env, "dnd").await;
        let mcp = mcp_reader(host.addr, &host.tok, &["context://session"]);
        let session_now = |id: u64| {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": "context://session"}});
            let (code, msgs) = mcp_support::http_call(
                host.addr,
                &host.tok,
                &host.sid,
                body.to_string().as_bytes(),
            );
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

        // The user pauses dunst.
        dunstctl(&env, &["set-paused", "true"]);
        let (d, took) = changes
            .until(10, "DND on", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == true
            })
            .await;
        eprintln!("dunstctl set-paused true → Changed in {took:?}");
        assert_eq!(d["session"]["do_not_disturb_by"], by, "{d}");
        assert_eq!(d["session"]["active"], true, "the rest stays: {d}");
        let lines = next_with(&mcp, "context://session");
        assert_eq!(updated(&lines), ["context://session"], "{lines:?}");
        let s = session_now(10);
        assert_eq!(s["do_not_disturb"], true, "{s}");
        assert_eq!(s["do_not_disturb_by"], by, "{s}");

        dunstctl(&env, &["set-paused", "false"]);
        let (d, _) = changes
            .until(10, "DND off", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == false
            })
            .await;
        assert!(d["session"].get("do_not_disturb_by").is_none(), "{d}");
        next_with(&mcp, "context://session");
        assert_eq!(session_now(11)["do_not_disturb"], false);

        // Paused, then dunst leaves: what it said goes with it (unknown).
        dunstctl(&env, &["set-paused", "true"]);
        changes
            .until(10, "DND on again", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == true
            })
            .await;
        drop(dunst);
        let (d, _) = changes
            .until(10, "unknown with dunst gone", |c, d| {
                c == "session" && d["session"].get("do_not_disturb").is_none()
            })
            .await;
        assert_eq!(d["session"]["active"], true, "{d}");
        until_source(&conn, "dnd-server", false).await;

        // dunst comes back (not paused: a new process) and is followed.
        let _dunst = notifyd::dunst(&env, session.path()).await;
        until_source(&conn, "dnd-server", true).await;
        changes
            .until(10, "known and off with dunst back", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == false
            })
            .await;
        dunstctl(&env, &["set-paused", "toggle"]);
        let (d, _) = changes
            .until(10, "DND on with the new dunst", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == true
            })
            .await;
        assert_eq!(d["session"]["do_not_disturb_by"], by, "{d}");
        let s = snapshot(&conn).await;
        assert_eq!(s["session"]["do_not_disturb"], true, "{s}");
        assert!(
            source(&conn, "dnd-server")
                .await
                .is_some_and(|s| s["available"] == true)
        );
    })
    .await
}

/// dunst sends `ActionInvoked` and `NotificationClosed` to the notifying
/// client alone (unicast), where mako broadcasts them: the broker's
/// monitor still sees a notify-send closed, and the asker of
/// `send_notification` still gets the user's choice (`dunstctl action`)
/// or dismissal (`dunstctl close`), and the answered one leaves dunst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dunst_answers_the_asker_alone_and_the_broker_still_hears_it() {
    with_timeout(150, async {
        let me = my_app_id();
        let (session, home, env) = session(&[
            (&me, &["notifications", "notifications.content"]),
            ("token:asker", &["actions.notify"]),
        ]);
        let _logind = logind(&env).await;
        let _dunst = notifyd::dunst(&env, session.path()).await;
        let _d = broker(&home, &env).await;
        let conn = connect_to(get(&env, "DBUS_SESSION_BUS_ADDRESS")).await;
        until_source(&conn, "notifications", true).await;
        let mut changes = Changes::subscribe(&conn, &["notifications"]).await;
        let displayed = || dunstctl(&env, &["count", "displayed"]);

        let _chat = NotifySend::start(
            &env,
            &[
                "-a",
                "Chat",
                "-i",
                "mail-unread",
                "-u",
                "critical",
                "-h",
                "boolean:resident:true",
                "-A",
                "reply=Reply",
                "Ann wrote",
                "Lunch?",
            ],
        );
        let (d, _) = changes
            .until(10, "the notification", |c, d| {
                c == "notifications" && d["event"] == "opened"
            })
            .await;
        let n = &d["notification"];
        assert_eq!(n["icon"], "mail-unread", "{d}");
        assert_eq!(n["urgency"], "critical", "{d}");
        assert_eq!(n["resident"], true, "{d}");
        assert_eq!(n["actions"], json!(["Reply"]), "{d}");
        let id = n["id"].as_str().expect("id").to_owned();
        // The user closes it in dunst: the signal goes to notify-send
        // only, and the monitor hears it.
        dunstctl(&env, &["close"]);
        let (d, _) = changes
            .until(10, "dismissed", |_, d| {
                d["event"] == "closed" && d["notification"]["id"] == id.as_str()
            })
            .await;
        assert_eq!(d["notification"]["closed"], "dismissed", "{d}");

        let asker = Host::new(&env, "asker").await;
        let call = asker.call(
            2,
            "send_notification",
            json!({"summary": "Deploy now?", "actions": ["Yes"], "timeout_s": 120}),
        );
        eventually(15, "the question on dunst's screen", || async {
            (displayed() == "1").then_some(())
        })
        .await;
        // dunst invokes a notification's only action at once.
        dunstctl(&env, &["action", "0"]);
        let r = within(15, "the answer", call).await.expect("call");
        assert_eq!(r["structuredContent"]["action"], "Yes", "{r}");
        eventually(10, "the answered question off dunst's screen", || async {
            (displayed() == "0").then_some(())
        })
        .await;

        let call = asker.call(
            3,
            "send_notification",
            json!({"summary": "Lunch?", "actions": ["Go"], "timeout_s": 120}),
        );
        eventually(15, "the second question on dunst's screen", || async {
            (displayed() == "1").then_some(())
        })
        .await;
        dunstctl(&env, &["close"]);
        let r = within(15, "the dismissal", call).await.expect("call");
        assert_eq!(r["structuredContent"]["closed"], "dismissed", "{r}");
    })
    .await
}

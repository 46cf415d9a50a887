//! Do Not Disturb on the session state, from each desktop's own place:
//! GNOME's `show-banners` through a real dconf (dconf-service on the
//! test's session bus, its database in the test's home, `gsettings set`
//! flipping it), and a notification server's `Inhibited` (Plasma's
//! extension) and dunst's `paused` (python-dbusmock's notification daemon
//! with the properties added). A live subscriber, `GetSnapshot`,
//! `contextctl status` and MCP's `get_session_state` see the changes; a
//! server that leaves takes what it said with it, and one that comes back
//! is followed again; without any source it is absent, not false.

use crate::common;
use crate::fdo;

use std::process::{Child, Command, Stdio};

use common::*;
use fdo::*;
use serde_json::Value;
use zbus::wire::Variant;

const SCHEMA: &str = "org.gnome.desktop.notifications";
const KEY: &str = "show-banners";
const NOTIFICATIONS: &str = "org.freedesktop.Notifications";
const NOTIFICATIONS_PATH: &str = "/org/freedesktop/Notifications";
const LOGIN1: &str = "org.freedesktop.login1";

/// The real dconf-service on the test's session bus, keeping its database
/// in the test's home (`XDG_CONFIG_HOME`); killed on drop.
struct Dconf(Child);

impl Dconf {
    async fn start(buses: &Buses, home: &Home) -> Dconf {
        let child = Command::new("/usr/libexec/dconf-service")
            .env_clear()
            .envs(home.envs(&buses.session))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dconf-service must be installed (make deps)");
        let conn = buses.session.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let name = zbus::names::BusName::try_from("ca.desrt.dconf").expect("name");
        eventually(15, "dconf-service owns ca.desrt.dconf", || async {
            dbus.name_has_owner(name.clone())
                .await
                .unwrap_or(false)
                .then_some(())
        })
        .await;
        Dconf(child)
    }
}

impl Drop for Dconf {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `gsettings ARGS` as the user's session runs it (dconf, the home's
/// database).
fn gsettings(buses: &Buses, home: &Home, args: &[&str]) {
    let (st, _, err) = run_cmd(
        Command::new("gsettings")
            .args(args)
            .env_clear()
            .envs(home.envs(&buses.session))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GSETTINGS_BACKEND", "dconf"),
        20,
    );
    assert!(st.success(), "gsettings {args:?} failed: {err}");
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

fn dnd(s: &Value) -> (Value, Value) {
    (
        s["session"]["do_not_disturb"].clone(),
        s["session"]["do_not_disturb_by"].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dnd_follows_gnomes_show_banners_through_a_real_dconf() {
    use crate::mcp_support::{http_addr, http_call, http_session, token};
    with_timeout(120, async {
        let buses = Buses::start();
        let _logind = logind(&buses).await;
        let home = Home::new();
        home.write_policy(&[
            (&my_app_id(), &["session"]),
            (&contextctl_app(), &["session"]),
            ("token:dnd", &["session"]),
        ]);
        let _dconf = Dconf::start(&buses, &home).await;
        let _d = buses
            .daemon_with(
                &home,
                &[("XDG_SESSION_ID", "c1"), ("GSETTINGS_BACKEND", "dconf")],
                &["--http", "127.0.0.1:0"],
            )
            .await;
        let conn = buses.session.connect().await;
        until_source(&conn, "dnd-gsettings", true).await;
        // The schema's default: banners shown, Do Not Disturb off.
        let s = until_snapshot(&conn, "DND known and off", |s| {
            s["session"]["do_not_disturb"] == false
        })
        .await;
        assert_eq!(dnd(&s), (Value::Bool(false), Value::Null), "{s}");
        let mut changes = Changes::subscribe(&conn, &["session"]).await;

        // The user turns Do Not Disturb on in GNOME's settings.
        gsettings(&buses, &home, &["set", SCHEMA, KEY, "false"]);
        let (d, took) = changes
            .until(10, "DND on", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == true
            })
            .await;
        eprintln!("gsettings set → Changed in {took:?}");
        assert_eq!(d["session"]["do_not_disturb_by"], "gnome", "{d}");
        assert_eq!(d["session"]["active"], true, "the rest stays: {d}");
        let s = snapshot(&conn).await;
        assert_eq!(dnd(&s), (Value::Bool(true), "gnome".into()), "{s}");
        let (out, _) = contextctl(&buses, &home, &["status"]);
        assert!(out.contains("do not disturb (by gnome)"), "{out}");

        // MCP: the tool's text and its structured content.
        let addr = http_addr(&home);
        let tok = token(&buses.session, &home, "dnd");
        let sid = http_session(addr, &tok);
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "get_session_state", "arguments": {}},
        });
        let (code, msgs) = http_call(addr, &tok, &sid, body.to_string().as_bytes());
        assert_eq!(code, 200, "{msgs:?}");
        let r = msgs
            .iter()
            .find(|m| m["id"] == 2)
            .map(|m| m["result"].clone())
            .unwrap_or_default();
        let sc = &r["structuredContent"];
        assert_eq!(sc["session"]["do_not_disturb"], true, "{r}");
        assert_eq!(sc["session"]["do_not_disturb_by"], "gnome", "{r}");
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("do_not_disturb: true") && text.contains("do_not_disturb_by: gnome"),
            "{text}"
        );

        // Reset to the default: off again, and who said on is gone.
        gsettings(&buses, &home, &["reset", SCHEMA, KEY]);
        let (d, _) = changes
            .until(10, "DND off", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == false
            })
            .await;
        assert!(d["session"].get("do_not_disturb_by").is_none(), "{d}");
    })
    .await
}

/// Where GNOME's schema is not installed, its part is unavailable (said
/// why, no error) and the session carries no DND at all: unknown, not off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_gnomes_schema_dnd_is_unknown_not_off() {
    with_timeout(90, async {
        let buses = Buses::start();
        let _logind = logind(&buses).await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["session"])]);
        let no_schemas = home.dir.path().join("no-schemas");
        std::fs::create_dir_all(&no_schemas).expect("mkdir");
        let no_schemas = no_schemas.display().to_string();
        let _d = buses
            .daemon(
                &home,
                &[
                    ("XDG_SESSION_ID", "c1"),
                    ("XDG_DATA_DIRS", no_schemas.as_str()),
                ],
            )
            .await;
        let conn = buses.session.connect().await;
        let src = until_source(&conn, "dnd-gsettings", false).await;
        let why = src["last_error"].as_str().unwrap_or_default();
        assert!(why.contains("not a GNOME machine"), "{src}");
        // No notification server either.
        until_source(&conn, "dnd-server", false).await;
        let s = until_snapshot(&conn, "session known", |s| s["session"]["active"] == true).await;
        assert!(s["session"].get("do_not_disturb").is_none(), "{s}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dnd_follows_the_notification_servers_inhibited_and_dunsts_paused() {
    with_timeout(120, async {
        let buses = Buses::start();
        let _logind = logind(&buses).await;
        let mut server = Mock::template(
            &buses.session.address,
            false,
            "notification_daemon",
            NOTIFICATIONS,
        )
        .await;
        let sc = buses.session.connect().await;
        // Plasma's server has the property from the start.
        server
            .add_property(
                &sc,
                NOTIFICATIONS_PATH,
                NOTIFICATIONS,
                "Inhibited",
                Variant::from(false),
            )
            .await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["session"])]);
        // Only the server's part: GNOME's would say "off" throughout.
        home.write_config(
            "[consent]\nundecided = \"deny\"\n\n[sources]\ndisabled = [\"dnd-gsettings\"]\n",
        );
        let _d = buses.daemon(&home, &[("XDG_SESSION_ID", "c1")]).await;
        let conn = buses.session.connect().await;
        until_source(&conn, "dnd-server", true).await;
        until_snapshot(&conn, "DND known and off", |s| {
            s["session"]["do_not_disturb"] == false
        })
        .await;
        let mut changes = Changes::subscribe(&conn, &["session"]).await;

        // Plasma's "Do not disturb": Inhibited true, with PropertiesChanged.
        server
            .set(
                &sc,
                NOTIFICATIONS_PATH,
                NOTIFICATIONS,
                "Inhibited",
                Variant::from(true),
            )
            .await;
        let (d, _) = changes
            .until(10, "inhibited", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == true
            })
            .await;
        assert_eq!(
            d["session"]["do_not_disturb_by"], "notification-server",
            "{d}"
        );

        // The server leaves: what it said goes with it (unknown, absent).
        server.stop();
        let (d, _) = changes
            .until(10, "unknown with the server gone", |c, d| {
                c == "session" && d["session"].get("do_not_disturb").is_none()
            })
            .await;
        assert_eq!(d["session"]["active"], true, "{d}");
        until_source(&conn, "dnd-server", false).await;

        // It comes back (a new process: the property added again, then
        // set, whenever the broker attaches in between).
        server.restart().await;
        until_source(&conn, "dnd-server", true).await;
        server
            .add_property(
                &sc,
                NOTIFICATIONS_PATH,
                NOTIFICATIONS,
                "Inhibited",
                Variant::from(false),
            )
            .await;
        server
            .set(
                &sc,
                NOTIFICATIONS_PATH,
                NOTIFICATIONS,
                "Inhibited",
                Variant::from(true),
            )
            .await;
        changes
            .until(10, "inhibited after the return", |c, d| {
                c == "session"
                    && d["session"]["do_not_disturb"] == true
                    && d["session"]["do_not_disturb_by"] == "notification-server"
            })
            .await;
        server
            .set(
                &sc,
                NOTIFICATIONS_PATH,
                NOTIFICATIONS,
                "Inhibited",
                Variant::from(false),
            )
            .await;
        changes
            .until(10, "not inhibited", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == false
            })
            .await;

        // dunst's pause, on the same object under its own interface.
        server
            .add_property(
                &sc,
                NOTIFICATIONS_PATH,
                "org.dunstproject.cmd0",
                "paused",
                Variant::from(false),
            )
            .await;
        server
            .set(
                &sc,
                NOTIFICATIONS_PATH,
                "org.dunstproject.cmd0",
                "paused",
                Variant::from(true),
            )
            .await;
        let (d, _) = changes
            .until(10, "dunst paused", |c, d| {
                c == "session" && d["session"]["do_not_disturb"] == true
            })
            .await;
        assert_eq!(d["session"]["do_not_disturb_by"], "dunst", "{d}");
        let s = snapshot(&conn).await;
        assert_eq!(dnd(&s), (Value::Bool(true), "dunst".into()), "{s}");
    })
    .await
}

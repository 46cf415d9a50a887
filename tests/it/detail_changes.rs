//! A withheld detail is not announced by its changes (issue 48), written
//! as the attack: a reader granted `windows` but not `windows.titles`
//! watches the focused window while only its title changes (a chat's
//! unread count, a page navigated to), and a reader granted `network` but
//! not `network.name` watches the network while only its SSID changes.
//! Before, each was told that something changed although what it reads
//! was the same before and after.
//!
//! Every publisher, each with a reader that may see the detail (who must
//! be told) and one that may not (who must not): MCP hosts on legacy
//! HTTP+SSE sessions of two tokens (`resources/updated`), and D-Bus
//! subscribers (`Subscription1.Changed`: this test program, and
//! `contextctl watch` as another app). The absence is proved with a
//! barrier, not a sleep: after the detail's change comes a change the
//! reader may see (on another resource for an MCP host: another window,
//! the power of a python-dbusmock UPower); the reader's feed is in order,
//! so when the barrier arrives, anything about the detail's change would
//! have come before it.

use crate::common;
use crate::fdo;
use crate::mcp_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use fdo::{Buses, Changes, contextctl_app};
use mcp_support::*;
use serde_json::{Value, json};
use zbus::wire::{ObjectPath, Variant};

/// `contextctl --json watch CATEGORY` (another app than this test), its
/// events from a thread; returns once it subscribed.
struct Watcher {
    child: Child,
    rx: mpsc::Receiver<Value>,
}

impl Watcher {
    fn start(env: Vec<(String, String)>, category: &str) -> Watcher {
        let mut child = Command::new(contextctl_bin())
            .args(["--json", "watch", category])
            .env_clear()
            .envs(env)
            .env("RUST_LOG", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("contextctl watch");
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let mut l = String::new();
        err.read_line(&mut l).expect("the watching line");
        assert!(l.starts_with(&format!("watching {category}")), "{l}");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Watcher { child, rx }
    }

    /// The events up to the first that `pred` accepts (included), within
    /// 20 s.
    fn until(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let e = self
                .rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|err| panic!("no {what} from contextctl watch ({err}): {seen:?}"));
            let done = pred(&e);
            seen.push(e);
            if done {
                return seen;
            }
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn window(id: &str, app_id: &str, title: &str, activated: bool, maximized: bool) -> String {
    json!({"type": "window", "window": {
        "id": id, "app_id": app_id, "title": title,
        "states": {"activated": activated, "maximized": maximized}
    }})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_change_reaches_only_readers_of_titles() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = Home::new();
        home.deny_undecided();
        home.write_policy(&[
            ("token:titles", &["windows", "windows.titles"]),
            ("token:plain", &["windows"]),
            (my_app_id().as_str(), &["windows.titles"]),
            (contextctl_app().as_str(), &["windows"]),
        ]);
        let mut replay = Replay::new(&home);
        replay.send(&window("w1", "org.example.Chat", "Chat (1)", true, false));
        replay.send(&window("w2", "org.mozilla.firefox", "News", false, false));
        let _d = Daemon::start(
            &bus,
            &home,
            &["--replay", &replay.arg(), "--http", "127.0.0.1:0"],
        )
        .await;
        wait_socket(&home);
        let addr = http_addr(&home);
        let conn = bus.connect().await;
        let ctx = contextd::client::proxy::Context1Proxy::new(&conn)
            .await
            .expect("proxy");
        eventually(10, "both windows", || async {
            (ctx.list_windows().await.ok()?.len() == 2).then_some(())
        })
        .await;

        let uris = ["context://windows/active", "context://windows/w2"];
        let (titles_tok, plain_tok) = (token(&bus, &home, "titles"), token(&bus, &home, "plain"));
        let titles_mcp = mcp_reader(addr, &titles_tok, &uris);
        let plain_mcp = mcp_reader(addr, &plain_tok, &uris);
        let mut titles_dbus = Changes::subscribe(&conn, &["windows"]).await;
        let plain_dbus = Watcher::start(home.envs(&bus), "windows");

        // Only the title of the focused window changes...
        replay.send(&window("w1", "org.example.Chat", "Chat (2)", true, false));
        // ...then the other window is maximized: every reader may see it.
        replay.send(&window("w2", "org.mozilla.firefox", "News", false, true));

        // A reader of titles is told of both, in order.
        let lines = next_with(&titles_mcp, "context://windows/w2");
        assert_eq!(
            updated(&lines).first().map(String::as_str),
            Some("context://windows/active"),
            "the title change was not announced to a reader of titles: {lines:?}"
        );
        let (d, _) = titles_dbus
            .until(10, "the title change", |_, d| d["window"]["id"] == "w1")
            .await;
        assert_eq!(d["window"]["title"], "Chat (2)", "{d}");
        titles_dbus
            .until(10, "the maximized window", |_, d| d["window"]["id"] == "w2")
            .await;

        // A reader without titles hears of the maximized window, and of
        // nothing before it.
        let lines = next_with(&plain_mcp, "context://windows/w2");
        assert_eq!(
            updated(&lines),
            ["context://windows/w2"],
            "a title-only change was announced to a host without windows.titles: {lines:?}"
        );
        let events = tokio::task::block_in_place(|| {
            plain_dbus.until("the maximized window", |e| {
                e["data"]["window"]["id"] == "w2"
            })
        });
        assert_eq!(
            events.len(),
            1,
            "a title-only change reached a D-Bus subscriber without windows.titles: {events:?}"
        );
        assert!(
            !serde_json::to_string(&events)
                .unwrap_or_default()
                .contains("Chat ("),
            "{events:?}"
        );
    })
    .await;
}

const NM: &str = "org.freedesktop.NetworkManager";
const MANAGER: &str = "/org/freedesktop/NetworkManager";
const AP_IFACE: &str = "org.freedesktop.NetworkManager.AccessPoint";
const UPOWER: &str = "org.freedesktop.UPower";
const UPOWER_PATH: &str = "/org/freedesktop/UPower";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ssid_change_reaches_only_readers_of_the_network_name() {
    with_timeout(120, async {
        let buses = Buses::start();
        let nm = fdo::Mock::template(&buses.system.address, true, "networkmanager", NM).await;
        let sys = buses.system.connect().await;
        nm.add_property(&sys, MANAGER, NM, "Metered", Variant::from(2u32))
            .await;
        nm.add_property(
            &sys,
            MANAGER,
            NM,
            "PrimaryConnection",
            Variant::from(ObjectPath::try_from("/").expect("path")),
        )
        .await;
        // UPower for the barrier of the MCP hosts: a change of another
        // resource that both may see.
        let upower = fdo::Mock::template(&buses.system.address, true, "upower", UPOWER).await;
        let home = Home::new();
        home.deny_undecided();
        home.write_policy(&[
            ("token:named", &["network.name", "power"]),
            ("token:plain", &["network", "power"]),
            (my_app_id().as_str(), &["network.name", "power"]),
            (contextctl_app().as_str(), &["network"]),
        ]);
        let _d = Daemon::spawn_env(&home, buses.envs(&home, &[]), &["--http", "127.0.0.1:0"]);
        within(
            15,
            "the broker owns its name",
            wait_for_owner(&buses.session, true),
        )
        .await;
        wait_socket(&home);
        let addr = http_addr(&home);
        let conn = buses.session.connect().await;

        // A Wi-Fi connection with its access point becomes the primary one.
        let dev: String = nm
            .call(
                &sys,
                MANAGER,
                fdo::MOCK_IFACE,
                "AddWiFiDevice",
                &("wlan0", "wlan0", 100u32),
            )
            .await
            .body()
            .deserialize()
            .expect("device path");
        let ap: String = nm
            .call(
                &sys,
                MANAGER,
                fdo::MOCK_IFACE,
                "AddAccessPoint",
                &(
                    dev.as_str(),
                    "ap1",
                    "Hotel Alpenblick",
                    "00:11:22:33:44:55",
                    2u32,
                    2437u32,
                    54000u32,
                    82u8,
                    0x100u32,
                ),
            )
            .await
            .body()
            .deserialize()
            .expect("ap path");
        let connection: String = nm
            .call(
                &sys,
                MANAGER,
                fdo::MOCK_IFACE,
                "AddWiFiConnection",
                &(dev.as_str(), "conn1", "Hotel Alpenblick", "wpa-psk"),
            )
            .await
            .body()
            .deserialize()
            .expect("connection path");
        let active: String = nm
            .call(
                &sys,
                MANAGER,
                fdo::MOCK_IFACE,
                "AddActiveConnection",
                &(
                    vec![dev.as_str()],
                    connection.as_str(),
                    ap.as_str(),
                    "ac1",
                    2u32,
                ),
            )
            .await
            .body()
            .deserialize()
            .expect("active path");
        nm.set(
            &sys,
            MANAGER,
            NM,
            "PrimaryConnection",
            Variant::from(ObjectPath::try_from(active.as_str()).expect("path")),
        )
        .await;
        // The whole network state settled first (its name, and the type
        // the source reads from the active connection in a step of its
        // own): a part arriving after the readers subscribed would be a
        // change every reader may see.
        fdo::until_snapshot(&conn, "the network's name and type, and the power", |s| {
            s["network"]["ssid"] == "Hotel Alpenblick"
                && s["network"]["primary_type"] == "wifi"
                && s["power"]["on_battery"] == false
        })
        .await;

        let uris = ["context://network", "context://power"];
        let (named_tok, plain_tok) = (
            token(&buses.session, &home, "named"),
            token(&buses.session, &home, "plain"),
        );
        let named_mcp = mcp_reader(addr, &named_tok, &uris);
        let plain_mcp = mcp_reader(addr, &plain_tok, &uris);
        let mut named_dbus = Changes::subscribe(&conn, &["network"]).await;
        let plain_dbus = Watcher::start(home.envs(&buses.session), "network");

        // The access point's name changes (the user roamed to another
        // network of the same kind): nothing else does.
        nm.set(
            &sys,
            &ap,
            AP_IFACE,
            "Ssid",
            Variant::from(b"ACME-Guest".to_vec()),
        )
        .await;
        let (d, _) = named_dbus
            .until(10, "the new name", |_, d| {
                d["network"]["ssid"] == "ACME-Guest"
            })
            .await;
        assert_eq!(d["network"]["primary_type"], "wifi", "{d}");
        // The barriers, now that the state has the new name: the machine
        // goes on battery (what both MCP hosts may see), then, once both
        // heard it, the network becomes metered (what contextctl may
        // see). One after the other: the two come from two sources, whose
        // events may be applied in either order, and a metered change
        // before the power one would be a network change the plain host
        // may see.
        upower
            .set(&sys, UPOWER_PATH, UPOWER, "OnBattery", Variant::from(true))
            .await;

        let lines = next_with(&named_mcp, "context://power");
        assert_eq!(
            updated(&lines).first().map(String::as_str),
            Some("context://network"),
            "the new name was not announced to a reader of it: {lines:?}"
        );
        let lines = next_with(&plain_mcp, "context://power");
        assert_eq!(
            updated(&lines),
            ["context://power"],
            "an SSID-only change was announced to a host without network.name: {lines:?}"
        );
        nm.set(&sys, MANAGER, NM, "Metered", Variant::from(1u32))
            .await;
        let events = tokio::task::block_in_place(|| {
            plain_dbus.until("metered", |e| e["data"]["network"]["metered"] == true)
        });
        assert_eq!(
            events.len(),
            1,
            "an SSID-only change reached a D-Bus subscriber without network.name: {events:?}"
        );
        let text = serde_json::to_string(&events).unwrap_or_default();
        assert!(
            !text.contains("ACME") && !text.contains("Alpenblick"),
            "{text}"
        );
    })
    .await;
}

//! `notifications` from `notify-send` against a mocked notification daemon
//! (python-dbusmock, session bus): app name and summary with
//! `notifications`, the body only with `notifications.content`; closing
//! removes it; the server leaving takes its notifications along.

use crate::common;
use crate::fdo;

use std::process::Command;

use common::*;
use fdo::*;
use serde_json::Value;

const SERVER: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

fn notify_send(buses: &Buses, args: &[&str]) {
    let (st, _, err) = run_cmd(
        Command::new("notify-send")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DBUS_SESSION_BUS_ADDRESS", &buses.session.address),
        20,
    );
    assert!(st.success(), "notify-send failed: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_send_shows_app_and_summary_and_the_body_only_with_content() {
    with_timeout(90, async {
        let buses = Buses::start();
        let server =
            Mock::template(&buses.session.address, false, "notification_daemon", SERVER).await;
        let home = Home::new();
        home.write_policy(&[
            (&my_app_id(), &["notifications"]),
            (&contextctl_app(), &["notifications.content"]),
        ]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        until_source(&conn, "notifications", true).await;
        let mut changes = Changes::subscribe(&conn, &["notifications"]).await;

        notify_send(&buses, &["-a", "TestApp", "Summary", "Body"]);
        let (d, took) = changes
            .until(5, "the notification", |c, d| {
                c == "notifications" && d["event"] == "opened"
            })
            .await;
        eprintln!("notify-send → Changed in {took:?}");
        let n = &d["notification"];
        assert_eq!(n["app_name"], "TestApp", "{d}");
        assert_eq!(n["summary"], "Summary", "{d}");
        assert_eq!(n["urgency"], "normal", "{d}");
        assert!(
            n.get("body").is_none(),
            "body without notifications.content: {d}"
        );
        let id = n["id"].as_str().expect("id").to_owned();
        assert!(id.starts_with("notify-"), "{id}");

        let s = snapshot(&conn).await;
        assert_eq!(s["notifications"][0]["summary"], "Summary", "{s}");
        assert!(!s.to_string().contains("Body"), "{s}");

        // contextctl has notifications.content: it sees the body.
        let (out, _) = contextctl(&buses, &home, &["status", "--json"]);
        let v: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["notifications"][0]["body"], "Body", "{v}");
        let (out, _) = contextctl(&buses, &home, &["status"]);
        assert!(out.contains("TestApp") && out.contains("Summary"), "{out}");

        // The server closes it.
        let server_conn = buses.session.connect().await;
        let n: u32 = id.trim_start_matches("notify-").parse().expect("number");
        server
            .call(&server_conn, PATH, SERVER, "CloseNotification", &(n,))
            .await;
        changes
            .until(5, "closed", |_, d| {
                d["event"] == "closed" && d["notification"]["id"] == id.as_str()
            })
            .await;
        until_snapshot(&conn, "no notifications", |s| {
            s["notifications"].as_array().is_some_and(|a| a.is_empty())
        })
        .await;

        // A second one, then the server leaves: it is gone too, and the
        // source says why.
        notify_send(
            &buses,
            &["-u", "critical", "-a", "Other", "Two", "<b>2</b>"],
        );
        let (d, _) = changes
            .until(5, "second", |_, d| d["event"] == "opened")
            .await;
        assert_eq!(d["notification"]["urgency"], "critical");
        let mut server = server;
        server.stop();
        changes
            .until(5, "closed with the server", |_, d| d["event"] == "closed")
            .await;
        let src = until_source(&conn, "notifications", false).await;
        assert!(
            src["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("no notification server")),
            "{src}"
        );
        server.restart().await;
        until_source(&conn, "notifications", true).await;
        notify_send(&buses, &["-a", "Third", "Three", "x"]);
        changes
            .until(5, "after the restart", |_, d| {
                d["event"] == "opened" && d["notification"]["app_name"] == "Third"
            })
            .await;
    })
    .await
}

/// `list_notifications` with `app` keeps one app's notifications (its
/// name compared without regard to case), with `min_urgency` the urgent
/// ones, both together their intersection; pages count what the filters
/// keep. Over Streamable HTTP, as a host with a token asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_notifications_keeps_one_apps_or_the_urgent_ones() {
    use crate::mcp_support::{http_addr, http_call, http_session, token};
    with_timeout(90, async {
        let buses = Buses::start();
        let _server =
            Mock::template(&buses.session.address, false, "notification_daemon", SERVER).await;
        let home = Home::new();
        home.write_policy(&[
            (&my_app_id(), &["notifications"]),
            ("token:lister", &["notifications"]),
        ]);
        let _d = buses
            .daemon_with(&home, &[], &["--http", "127.0.0.1:0"])
            .await;
        let conn = buses.session.connect().await;
        until_source(&conn, "notifications", true).await;
        for (app, urgency, summary) in [
            ("Mail", "low", "mail-low"),
            ("Chat", "critical", "chat-critical"),
            ("MAIL", "critical", "mail-critical"),
            ("Chat", "normal", "chat-normal"),
        ] {
            notify_send(&buses, &["-a", app, "-u", urgency, summary]);
        }
        until_snapshot(&conn, "the four notifications", |s| {
            s["notifications"].as_array().is_some_and(|a| a.len() == 4)
        })
        .await;
        let addr = http_addr(&home);
        let tok = token(&buses.session, &home, "lister");
        let sid = http_session(addr, &tok);
        let mut id = 0;
        let mut list = |arguments: Value| -> (Vec<String>, Value) {
            id += 1;
            let body = serde_json::json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "list_notifications", "arguments": arguments},
            });
            let (code, msgs) = http_call(addr, &tok, &sid, body.to_string().as_bytes());
            assert_eq!(code, 200, "{msgs:?}");
            let r = msgs
                .iter()
                .find(|m| m["id"] == id)
                .map(|m| m["result"].clone())
                .unwrap_or_default();
            assert_ne!(r["isError"], Value::Bool(true), "{r}");
            let sc = &r["structuredContent"];
            let mut summaries: Vec<String> = sc["notifications"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n["summary"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            summaries.sort();
            (summaries, sc["nextCursor"].clone())
        };
        assert_eq!(
            list(serde_json::json!({"app": "mail"})).0,
            ["mail-critical", "mail-low"]
        );
        assert_eq!(
            list(serde_json::json!({"min_urgency": "critical"})).0,
            ["chat-critical", "mail-critical"]
        );
        assert_eq!(
            list(serde_json::json!({"min_urgency": "normal", "app": "Chat"})).0,
            ["chat-critical", "chat-normal"]
        );
        assert_eq!(list(serde_json::json!({})).0.len(), 4);
        assert!(list(serde_json::json!({"app": "Nobody"})).0.is_empty());
        // A page of one of Chat's two: the cursor leads to the other.
        let (first, next) = list(serde_json::json!({"app": "chat", "limit": 1}));
        assert_eq!(first.len(), 1);
        let cursor = next.as_str().expect("a next cursor").to_owned();
        let (second, last) = list(serde_json::json!({"app": "chat", "limit": 1, "cursor": cursor}));
        assert_eq!(second.len(), 1);
        assert_ne!(first, second);
        assert!(last.is_null(), "{last}");
    })
    .await
}

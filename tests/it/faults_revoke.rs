//! A revocation in the middle of a stream ends it at once, on the paths
//! other tests do not cover: a Streamable HTTP session's GET stream when
//! its token is revoked (the legacy SSE stream: tests/it/mcp_http.rs), and an
//! MCP resource subscription when the grant behind it is revoked (it is
//! told `resources/list_changed` and hears of no further change; a D-Bus
//! subscription gets `Revoked`: tests/it/subscriptions.rs,
//! tests/it/consent_manage.rs).

use crate::common;
use crate::mcp_support;

use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use common::dbusmock::Mock;
use common::*;
use contextd::client::proxy::Consent1Proxy;
use mcp_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_ends_its_streamable_http_stream() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut replay = Replay::new(&home);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "streamer");
        let session = http_session(addr, &tok);
        // The session's GET stream, for what the server sends unasked.
        let mut stream = streamable_get(addr, &tok, &session, None);

        let (ok, _, err) = contextctl(&bus, &home, &["token", "revoke", "streamer"]);
        assert!(ok, "{err}");
        // The stream ends (the chunked body's last chunk, or EOF) well
        // before the read timeout of 20 s.
        let ended = std::thread::spawn(move || {
            let mut buf = Vec::new();
            loop {
                let mut line = String::new();
                match stream.read_line(&mut line) {
                    Ok(0) => return Ok(()),
                    Ok(_) if line.trim() == "0" => return Ok(()),
                    Ok(_) => buf.push(line),
                    Err(e) => return Err(format!("{e} after {buf:?}")),
                }
            }
        });
        let r = tokio::task::spawn_blocking(move || ended.join().expect("reader"))
            .await
            .expect("join");
        assert!(
            r.is_ok(),
            "the stream of a revoked token stayed open: {r:?}"
        );
        // And the session is gone.
        let (code, body) = http_call(
            addr,
            &tok,
            &session,
            br#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#,
        );
        assert_eq!(code, 401, "{body:?}");
    })
    .await
}

/// Open a legacy SSE session for `tok` and send the stream's lines to a
/// channel from a thread; returns the message path.
fn legacy(addr: SocketAddr, tok: &str) -> (String, mpsc::Receiver<String>) {
    let (mut r, path) = legacy_open(addr, tok, None);
    r.get_ref().set_read_timeout(None).expect("timeout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if tx.send(line.clone()).is_err() {
                break;
            }
            line.clear();
        }
    });
    (path, rx)
}

/// The next line of the stream with `needle`, within 20 s.
fn next_with(rx: &mpsc::Receiver<String>, needle: &str) -> Vec<String> {
    let mut before = Vec::new();
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("no {needle} on the stream ({e}) after {before:?}"));
        if l.contains(needle) {
            before.push(l);
            return before;
        }
        before.push(l);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_grant_ends_an_mcp_resource_subscription() {
    with_timeout(90, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let mut replay = Replay::new(&home);
        replay.send(&window_line("w1", "org.a.App", "one", true));
        let _d = Daemon::start_with(
            &bus,
            &home,
            &["--replay", &replay.arg(), "--http", "127.0.0.1:0"],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "host");
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        consent
            .set_grant("token:host", "windows", "allow", 0)
            .await
            .expect("grant");

        let (path, rx) = legacy(addr, &tok);
        legacy_post(
            addr,
            &tok,
            &path,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "revoke", "version": "1"}}}).to_string(),
        );
        next_with(&rx, r#""id":1"#);
        legacy_post(addr, &tok, &path, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        for (id, uri) in [(2, "context://windows/active"), (3, "context://snapshot")] {
            legacy_post(
                addr,
                &tok,
                &path,
                &json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe", "params": {"uri": uri}}).to_string(),
            );
            next_with(&rx, &format!(r#""id":{id}"#));
        }
        // It works before.
        replay.send(&window_line("w2", "org.b.App", "two", true));
        next_with(&rx, "context://windows/active");

        assert!(consent.revoke("token:host", "windows").await.expect("revoke"));
        // The host is told at once that what it may see changed…
        next_with(&rx, "notifications/resources/list_changed");
        // …and hears of no window change after: a window change, then a
        // change of a source's health (which needs no grant); the health
        // change's update comes, and nothing about the window before it.
        replay.send(&window_line("w3", "org.c.App", "three", true));
        replay.send(
            &json!({"type": "source-status", "source": "marker", "available": false}).to_string(),
        );
        let lines = next_with(&rx, "context://snapshot");
        assert!(
            !lines.iter().any(|l| l.contains("context://windows")),
            "a window change reached the host after the revoke: {lines:?}"
        );
    })
    .await
}

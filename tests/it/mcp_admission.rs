//! The desktop comes first (issue 48, item 7), written as the attacks: an
//! MCP host that keeps its requests running (waiting for the user) and
//! then sends ten thousand more is told to come back for each (HTTP 429,
//! `Retry-After`, a JSON-RPC error with `retryAfter`), none is lost
//! without an answer, and meanwhile another token's request is served and
//! the broker answers D-Bus; hosts that together fill every place get 503;
//! a stdio host gets the JSON-RPC error for a request past its bound.

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::agent::AgentBroker;
use common::*;
use contextd::client::proxy::Consent1Proxy;
use mcp_support::*;
use serde_json::Value;

const ASK: &str = "[consent]\nundecided = \"ask\"\nprompt_timeout_s = 60\n";
const META: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"Busy Test","version":"1"}"#;
/// The bounds the README states (`mcp::admission`).
const PER_HOST: usize = 8;
const IN_ALL: usize = 64;

/// A stateless `tools/call` of `get_session_state` with id `id`; with
/// `extra`, one more `_meta` key sends it through rmcp rather than beside
/// it (`mcp::direct`): both paths are bounded.
fn call_body(id: u64, extra: bool) -> String {
    let extra = if extra {
        r#","io.example/trace":1"#
    } else {
        ""
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"get_session_state","arguments":{{}},"_meta":{{{META}{extra}}}}}}}"#
    )
}

/// A stateless `get_session_state` call of `tok`'s with id `id` (see
/// [`call_body`]), answered within `http`'s read timeout.
fn call(addr: SocketAddr, tok: &str, id: u64, extra: bool) -> Answer {
    stateless_tool_call(
        addr,
        tok,
        "get_session_state",
        call_body(id, extra).as_bytes(),
    )
}

/// What `stateless_tool_call` gives: status, headers, body.
type Answer = (u16, Vec<(String, String)>, String);

/// Start a call of `tok`'s that waits for the user, on its own thread.
fn waiting_call(addr: SocketAddr, tok: &str, id: u64) -> std::thread::JoinHandle<Answer> {
    let tok = tok.to_owned();
    std::thread::spawn(move || {
        loop {
            // It waits until the test answers or revokes, however long the
            // machine makes that.
            let r = stateless_tool_call_within(
                addr,
                &tok,
                "get_session_state",
                call_body(id, id.is_multiple_of(2)).as_bytes(),
                Duration::from_secs(140),
            );
            // Told to come back (the test's probes hold a place for a
            // moment): it comes back, as a host does.
            if r.0 != 429 && r.0 != 503 {
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// The prompts waiting, per app, as `ListPending` shows them.
async fn pending(c: &Consent1Proxy<'_>) -> Vec<Value> {
    c.list_pending()
        .await
        .expect("ListPending")
        .iter()
        .map(contextd::client::json::dict_to_json)
        .collect()
}

/// A stateless `tools/list` of `tok`'s: answered at once when admitted.
fn list(addr: SocketAddr, tok: &str) -> Answer {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{{"_meta":{{{META}}}}}}}"#
    );
    mcp_post(
        addr,
        tok,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        body.as_bytes(),
    )
}

/// `Peer.Ping` to the broker answers.
async fn ping(conn: &zbus::Connection) {
    conn.call_method(
        Some("org.contextd.Broker1"),
        "/org/contextd/Broker1",
        Some("org.freedesktop.DBus.Peer"),
        "Ping",
        &(),
    )
    .await
    .expect("the broker answers Ping");
}

/// The status, `Retry-After` and JSON-RPC error of a refused request.
fn refusal(code: u16, hs: &[(String, String)], body: &str) -> (u16, Option<String>, Value) {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    (
        code,
        header(hs, "retry-after").map(str::to_owned),
        v["error"].clone(),
    )
}

/// Send `n` requests of `tok` on one kept-alive connection, all written
/// at once (pipelined), and read every answer: the status line of each,
/// in order.
fn flood(addr: SocketAddr, tok: &str, n: usize) -> Vec<String> {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut w = s.try_clone().expect("clone");
    let tok = tok.to_owned();
    let writer = std::thread::spawn(move || {
        let body = call_body(1, false);
        let one = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: get_session_state\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut batch = String::new();
        for _ in 0..100 {
            batch.push_str(&one);
        }
        for _ in 0..n / 100 {
            if w.write_all(batch.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut r = BufReader::new(s);
    let mut statuses = Vec::with_capacity(n);
    while statuses.len() < n {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let status = line.trim().to_owned();
        let mut length = 0usize;
        let mut retry = false;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                break;
            }
            let h = h.trim().to_ascii_lowercase();
            if h.is_empty() {
                break;
            }
            if let Some(v) = h.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if h.starts_with("retry-after:") {
                retry = true;
            }
        }
        let mut body = vec![0; length];
        if r.read_exact(&mut body).is_err() {
            break;
        }
        statuses.push(if retry {
            format!("{status} +retry")
        } else {
            status
        });
    }
    let _ = writer.join();
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_past_its_bound_is_told_to_come_back_and_others_are_served() {
    with_timeout(150, async {
        let s = AgentBroker::new(ASK).await;
        let (bus, home) = (&s.bus, &s.home);
        let _d = s.start(&["--http", "127.0.0.1:0"]).await;
        let _notifications = Notifications::start(bus).await;
        let addr = http_addr(home);
        let greedy = token(bus, home, "greedy");
        let modest = token(bus, home, "modest");
        home.write_policy(&[("token:modest", &["session"])]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let conn = bus.connect().await;
        let user = Consent1Proxy::new(&conn).await.expect("proxy");

        // The greedy token's requests wait for the user: every place of
        // its own is taken.
        let waiting: Vec<_> = (0..PER_HOST as u64)
            .map(|i| waiting_call(addr, &greedy, 100 + i))
            .collect();
        eventually(20, "the greedy token's question on screen", || async {
            pending(&user)
                .await
                .iter()
                .any(|p| p["app_id"] == "token:greedy")
                .then_some(())
        })
        .await;
        // The prompt shows as soon as the first request asks; the others
        // may still be on their way in. A request answered at once when
        // admitted (`tools/list`) probes until the places are all taken.
        eventually(20, "every place of the greedy token taken", || async {
            let r = tokio::task::block_in_place(|| list(addr, &greedy));
            (r.0 == 429).then_some(())
        })
        .await;
        let (code, hs, body) = tokio::task::block_in_place(|| call(addr, &greedy, 9, false));
        let (code, retry, error) = refusal(code, &hs, &body);
        assert_eq!(code, 429);
        assert_eq!(retry.as_deref(), Some("1"), "{hs:?}");
        assert_eq!(error["code"], -32005, "{body}");
        assert_eq!(error["data"]["retryAfter"], 1, "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).expect("json")["id"],
            9,
            "{body}"
        );
        // Through rmcp's path too.
        let (code, hs, body) = tokio::task::block_in_place(|| call(addr, &greedy, 10, true));
        assert_eq!(refusal(code, &hs, &body).0, 429, "{body}");

        // Ten thousand more, as fast as one connection takes them: each
        // is answered, each told to come back; meanwhile the desktop and
        // another host are served.
        let flooding = {
            let greedy = greedy.clone();
            std::thread::spawn(move || flood(addr, &greedy, 10_000))
        };
        ping(&conn).await;
        let (code, _, body) = tokio::task::block_in_place(|| call(addr, &modest, 1, false));
        assert_eq!(code, 200, "another token refused: {body}");
        assert!(!body.contains("-32005"), "{body}");
        let statuses = tokio::task::block_in_place(|| flooding.join().expect("flood"));
        assert_eq!(statuses.len(), 10_000, "requests lost without an answer");
        let odd: Vec<&String> = statuses
            .iter()
            .filter(|s| s.as_str() != "HTTP/1.1 429 Too Many Requests +retry")
            .collect();
        assert!(
            odd.is_empty(),
            "{} not 429 with Retry-After: {:?}",
            odd.len(),
            odd.first()
        );
        ping(&conn).await;

        // The user answers: the places come back, and the token is served.
        let id = pending(&user)
            .await
            .iter()
            .find(|p| p["app_id"] == "token:greedy")
            .and_then(|p| p["id"].as_u64())
            .expect("the greedy token's question");
        user.answer_pending(id, "deny", 0)
            .await
            .expect("AnswerPending");
        for w in waiting {
            let (code, _, body) = tokio::task::block_in_place(|| w.join().expect("call"));
            assert_eq!(code, 200, "{body}");
        }
        let (code, _, body) = eventually(10, "the greedy token admitted again", || async {
            let r = tokio::task::block_in_place(|| call(addr, &greedy, 11, false));
            (r.0 != 429).then_some(r)
        })
        .await;
        assert_eq!(code, 200, "{body}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_fill_every_place_make_the_next_come_back_later() {
    with_timeout(150, async {
        let s = AgentBroker::new(ASK).await;
        let (bus, home) = (&s.bus, &s.home);
        let _d = s.start(&["--http", "127.0.0.1:0"]).await;
        let _notifications = Notifications::start(bus).await;
        let addr = http_addr(home);
        let hosts = IN_ALL / PER_HOST;
        let tokens: Vec<String> = (0..hosts)
            .map(|i| token(bus, home, &format!("filler{i}")))
            .collect();
        let late = token(bus, home, "late");
        home.write_policy(&[("token:late", &["session"])]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let conn = bus.connect().await;
        let waiting: Vec<_> = tokens
            .iter()
            .flat_map(|t| (0..PER_HOST as u64).map(move |i| (t.clone(), 200 + i)))
            .map(|(t, i)| waiting_call(addr, &t, i))
            .collect();
        let (code, hs, body) = eventually(30, "every place taken", || async {
            let r = tokio::task::block_in_place(|| list(addr, &late));
            (r.0 == 503).then_some(r)
        })
        .await;
        let (_, retry, error) = refusal(code, &hs, &body);
        assert_eq!(retry.as_deref(), Some("1"), "{hs:?}");
        assert_eq!(error["code"], -32005, "{body}");
        ping(&conn).await;
        // Revoking the fillers ends their work and frees every place.
        for i in 0..hosts {
            let (ok, _, err) = contextctl(bus, home, &["token", "revoke", &format!("filler{i}")]);
            assert!(ok, "{err}");
        }
        for w in waiting {
            let _ = tokio::task::block_in_place(|| w.join().expect("call"));
        }
        let (code, _, body) = tokio::task::block_in_place(|| call(addr, &late, 2, false));
        assert_ne!(code, 503, "{body}");
        assert_ne!(code, 429, "{body}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_host_past_its_bound_gets_an_error_at_once() {
    with_timeout(120, async {
        let s = AgentBroker::new(ASK).await;
        let (bus, home) = (&s.bus, &s.home);
        let _d = s.start(&[]).await;
        let _notifications = Notifications::start(bus).await;
        let conn = bus.connect().await;
        let sock = runtime(home).join("mcp.sock");
        let stream = UnixStream::connect(&sock).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut w = stream.try_clone().expect("clone");
        let mut r = BufReader::new(stream);
        writeln!(w, "{INIT}").expect("init");
        let mut line = String::new();
        r.read_line(&mut line).expect("initialize answered");
        assert!(line.contains("\"result\""), "{line}");
        writeln!(w, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).expect("sent");
        for id in 0..=PER_HOST {
            writeln!(
                w,
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"get_session_state","arguments":{{}}}}}}"#,
                100 + id
            )
            .expect("call");
        }
        w.flush().expect("flush");
        // The first answer is the refusal of the one past the bound: the
        // others wait for the user.
        let mut line = String::new();
        tokio::task::block_in_place(|| r.read_line(&mut line)).expect("an answer");
        let v: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["id"], 100 + PER_HOST, "{line}");
        assert_eq!(v["error"]["code"], -32005, "{line}");
        assert_eq!(v["error"]["data"]["retryAfter"], 1, "{line}");
        ping(&conn).await;
    })
    .await;
}

/// What the fake notification server heard: the sender of each `Notify`.
#[derive(Default, Clone)]
struct Heard(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

struct FakeNotifications(Heard);

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl FakeNotifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        _app: &str,
        _replaces: u32,
        _icon: &str,
        _summary: &str,
        _body: &str,
        _actions: Vec<String>,
        _hints: std::collections::HashMap<String, zbus::wire::OwnedVariant>,
        _timeout: i32,
        #[zbus(header)] hdr: zbus::message::Header<'_>,
    ) -> u32 {
        let sender = hdr.sender().map(|s| s.to_string()).unwrap_or_default();
        let mut heard = self.0.0.lock().unwrap_or_else(|e| e.into_inner());
        heard.push(sender);
        u32::try_from(heard.len()).unwrap_or(u32::MAX)
    }
}

/// The desktop comes first, as the bus sees it: an AI host's
/// `send_notification` leaves the broker on a connection of its own, not
/// on the one that answers D-Bus callers and owns the name. (Its call took
/// the connection's write lock from the busy MCP threads, and a
/// `Peer.Ping`'s reply queued behind it: `make soak` measured the broker's
/// Ping at 4–5× the bus daemon's own.) The connection is the broker's
/// (the bus says its PID), so the notification still comes from the
/// broker, as the host's app name says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ai_hosts_notification_never_goes_out_on_the_desktops_connection() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let heard = Heard::default();
        let server = bus.connect().await;
        server
            .object_server()
            .at("/org/freedesktop/Notifications", FakeNotifications(heard.clone()))
            .await
            .expect("serve");
        server
            .request_name("org.freedesktop.Notifications")
            .await
            .expect("name");
        let d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "notifier");
        home.write_policy(&[("token:notifier", &["actions.notify"])]);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"send_notification","arguments":{{"summary":"hello"}},"_meta":{{{META}}}}}}}"#
        );
        eventually(10, "the notification is sent", || async {
            let (code, _, b) = stateless_tool_call(addr, &tok, "send_notification", body.as_bytes());
            let ok = code == 200 && b.contains("\"id\"") && !b.contains("isError\":true");
            if !ok {
                eprintln!("send_notification: {code} {b}");
            }
            ok.then_some(())
        })
        .await;
        let senders = heard.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert!(!senders.is_empty(), "the fake server heard nothing");
        let conn = bus.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let broker = dbus
            .get_name_owner(zbus::names::BusName::try_from("org.contextd.Broker1").expect("name"))
            .await
            .expect("the broker owns its name")
            .to_string();
        for s in &senders {
            assert_ne!(s, &broker, "a notification went out on the desktop's connection");
            let name = zbus::names::BusName::try_from(s.as_str()).expect("unique name");
            let pid = dbus
                .get_connection_unix_process_id(name)
                .await
                .expect("the sender is connected");
            assert_eq!(pid, d.pid(), "the notification came from another process");
        }
    })
    .await
}

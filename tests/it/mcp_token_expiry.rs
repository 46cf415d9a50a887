//! MCP bearer tokens that expire (issue 54 item 5), written as the attack
//! of a host that keeps using its token past its time: every MCP HTTP
//! transport answers 401 "the token expired" (RFC 6750's `invalid_token`
//! with its description), everything the token ran ends at that moment as
//! on revocation (a session and its stream, a 2026-07-28 `listen` stream,
//! a legacy SSE stream, a call waiting for the user), while another token
//! runs on; the expired token stays listed, marked expired, with its
//! decisions, until `contextctl token revoke` removes it.

use crate::common;
use crate::mcp_support;

use std::io::BufRead;
use std::net::SocketAddr;
use std::time::Duration;

use common::agent::AgentBroker;
use common::*;
use contextd::client::proxy::Consent1Proxy;
use mcp_support::*;
use serde_json::Value;

const ASK: &str = "[consent]\nundecided = \"ask\"\nprompt_timeout_s = 60\n";
const META: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"Expiry Test","version":"1"}"#;
/// The token's life: long enough to open everything first on a slow
/// machine (the test checks it did), short enough to wait for.
const LIFE: &str = "15s";

/// A broker asking for undecided access, polkit letting this test manage
/// consent (it plays the user), `windows` granted to the tokens `brief`
/// and `stays` in policy.toml, the windows `w1` (focused) and `w2`
/// replayed, and MCP over HTTP.
async fn broker() -> (AgentBroker, Replay, Daemon) {
    let s = AgentBroker::new(ASK).await;
    s.home
        .write_policy(&[("token:brief", &["windows"]), ("token:stays", &["windows"])]);
    let mut replay = Replay::new(&s.home);
    replay.send(&window_line(
        "w1",
        "org.gnome.TextEditor",
        "notes.txt",
        true,
    ));
    replay.send(&window_line("w2", "org.mozilla.firefox", "News", false));
    let arg = replay.arg();
    let d = s
        .start(&["--replay", arg.as_str(), "--http", "127.0.0.1:0"])
        .await;
    wait_socket(&s.home);
    (s, replay, d)
}

/// `contextctl --json token list`: the tokens, by name.
fn listed(bus: &Bus, home: &Home) -> serde_json::Map<String, Value> {
    let (ok, out, err) = contextctl(bus, home, &["--json", "token", "list"]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(out.trim()).expect("JSON");
    v["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .map(|t| (t["name"].as_str().unwrap_or_default().to_owned(), t.clone()))
        .collect()
}

/// Open a 2026-07-28 `subscriptions/listen` stream of `tok` (no session).
fn listen(addr: SocketAddr, tok: &str) -> std::io::BufReader<std::net::TcpStream> {
    let (head, r) = open_stream(addr, &listen_request(addr, tok), None);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    r
}

fn listen_request(addr: SocketAddr, tok: &str) -> String {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"notifications":{{"resourceSubscriptions":["context://windows/active"]}},"_meta":{{{META}}}}}}}"#
    );
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A 2026-07-28 stateless `tools/call` of `tool`.
fn call_body(tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{{META}}}}}}}"#
    )
}

/// How long a stream may take to end, or to bring a line, at most: the
/// token's life and then some (keep-alives alone never end a wait).
const STREAM_WAIT: Duration = Duration::from_secs(40);

/// Whether the stream ends (EOF or the chunked body's last chunk) within
/// [`STREAM_WAIT`].
fn ends(r: &mut impl BufRead) -> bool {
    let deadline = std::time::Instant::now() + STREAM_WAIT;
    while std::time::Instant::now() < deadline {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) => return true,
            Ok(_) if line.trim() == "0" => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// The next line of an event stream that contains `what`; `None` when
/// the stream ends, or [`STREAM_WAIT`] passes, first.
fn line_with(r: &mut impl BufRead, what: &str) -> Option<String> {
    let deadline = std::time::Instant::now() + STREAM_WAIT;
    while std::time::Instant::now() < deadline {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) if line.contains(what) => return Some(line),
            Ok(_) => {}
        }
    }
    None
}

/// `(what, (status, headers, body))`: a refusal of an expired token.
fn refused_as_expired(what: &str, (code, hs, body): (u16, Vec<(String, String)>, String)) {
    assert_eq!(code, 401, "{what}: {body}");
    let challenge = header(&hs, "www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer ")
            && challenge.contains(r#"error="invalid_token""#)
            && challenge.contains(r#"error_description="the token expired""#),
        "{what}: {challenge}"
    );
    assert!(
        body.contains("expired")
            && body.contains("contextctl token revoke brief")
            && body.contains("contextctl token create brief --expires"),
        "{what}: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refused_on_every_transport_and_what_it_ran_ends() {
    with_timeout(150, async {
        let (s, mut replay, d) = broker().await;
        let (bus, home) = (&s.bus, &s.home);
        let _notifications = Notifications::start(bus).await;
        let addr = http_addr(home);
        let (ok, out, err) = contextctl(bus, home, &["token", "create", "brief", "--expires", LIFE]);
        assert!(ok, "{err}");
        assert!(err.contains("It expires"), "{err}");
        let tok = out.trim().to_owned();
        assert!(tok.starts_with("ctxd_"), "{tok:?}");
        let stays = token(bus, home, "stays");
        let (_conn, user) = {
            let conn = bus.connect().await;
            let proxy = Consent1Proxy::new(&conn).await.expect("proxy");
            (conn, proxy)
        };
        // A decision of the user's for it (not policy.toml's).
        user.set_grant("token:brief", "power", "deny", 0)
            .await
            .expect("SetGrant");

        // Listed with its expiry; the other one never expires.
        let list = listed(bus, home);
        let expires: chrono::DateTime<chrono::Utc> =
            serde_json::from_value(list["brief"]["expires"].clone()).expect("an expiry");
        assert_eq!(list["brief"]["expired"], false, "{list:?}");
        assert!(list["stays"].get("expires").is_none(), "{list:?}");
        let (ok, text, err) = contextctl(bus, home, &["token", "list"]);
        assert!(ok, "{err}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("brief ") && l.contains("expires 20")),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l.starts_with("stays ") && l.ends_with("never")),
            "{text}"
        );

        // Used on every transport while it lives.
        let (code, _, body) = tokio::task::block_in_place(|| {
            stateless_tool_call(
                addr,
                &tok,
                "get_active_window",
                call_body("get_active_window").as_bytes(),
            )
        });
        assert_eq!(code, 200, "{body}");
        let granted = messages(&body).last().cloned().unwrap_or_default();
        assert_eq!(
            granted["result"]["structuredContent"]["window"]["id"], "w1",
            "{granted}"
        );
        let sid = tokio::task::block_in_place(|| http_session(addr, &tok));
        let (code, msgs) = tokio::task::block_in_place(|| {
            http_call(addr, &tok, &sid, br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        });
        assert_eq!(code, 200, "{msgs:?}");
        let mut session_stream =
            tokio::task::block_in_place(|| streamable_get(addr, &tok, &sid, None));
        let mut listening = tokio::task::block_in_place(|| listen(addr, &tok));
        let mut staying = tokio::task::block_in_place(|| listen(addr, &stays));
        let (mut legacy, legacy_path) =
            tokio::task::block_in_place(|| legacy_open(addr, &tok, None));
        tokio::task::block_in_place(|| {
            legacy_post(
                addr,
                &tok,
                &legacy_path,
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
            )
        });
        // A call that waits for the user (`session` is not granted).
        let waiting = {
            let tok = tok.clone();
            std::thread::spawn(move || {
                stateless_tool_call_within(
                    addr,
                    &tok,
                    "get_session_state",
                    call_body("get_session_state").as_bytes(),
                    Duration::from_secs(60),
                )
            })
        };
        eventually(20, "the question on screen", || async {
            pending_of(&user, "token:brief").await.first().cloned()
        })
        .await;
        eventually(20, "the token's readers", || async {
            (readers_of(&user, "token:brief").await.len() >= 2).then_some(())
        })
        .await;
        // All of that before its expiry, or this test proves nothing.
        assert!(
            chrono::Utc::now() < expires,
            "the setup outlived the token's {LIFE}: make LIFE longer"
        );

        // Its expiry comes: the listen stream ends, not before.
        tokio::task::block_in_place(|| {
            assert!(ends(&mut listening), "the listen stream outlived its token");
        });
        assert!(
            chrono::Utc::now() >= expires,
            "the stream ended before the token expired"
        );
        tokio::task::block_in_place(|| {
            assert!(ends(&mut session_stream), "the session's stream stayed open");
            assert!(ends(&mut legacy), "the legacy SSE stream stayed open");
        });
        let (status, _, body) = tokio::task::block_in_place(|| waiting.join().expect("call"));
        assert_eq!(status, 200, "{body}");
        let answer = messages(&body);
        assert!(
            answer
                .last()
                .is_some_and(|m| m["result"]["isError"] == true || m["error"].is_object()),
            "the waiting call was not refused: {answer:?}"
        );
        eventually(5, "its question withdrawn", || async {
            pending_of(&user, "token:brief")
                .await
                .is_empty()
                .then_some(())
        })
        .await;
        eventually(5, "its readers gone", || async {
            readers_of(&user, "token:brief")
                .await
                .is_empty()
                .then_some(())
        })
        .await;
        eventually(5, "the log line", || async {
            d.stderr().contains("token brief expired").then_some(())
        })
        .await;

        // Refused, saying it expired, on every transport.
        let auth = format!("Bearer {tok}");
        let json = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        tokio::task::block_in_place(|| {
            refused_as_expired(
                "Streamable HTTP initialize",
                mcp_post(addr, &tok, &[], INIT.as_bytes()),
            );
            refused_as_expired(
                "a message in its 2025-06-18 session",
                mcp_post(
                    addr,
                    &tok,
                    &[
                        ("Mcp-Session-Id", &sid),
                        ("MCP-Protocol-Version", "2025-06-18"),
                    ],
                    br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
                ),
            );
            refused_as_expired(
                "its session's GET stream",
                http(
                    addr,
                    "GET",
                    "/mcp",
                    &[
                        ("Authorization", auth.as_str()),
                        ("Accept", "text/event-stream"),
                        ("Mcp-Session-Id", &sid),
                        ("MCP-Protocol-Version", "2025-06-18"),
                    ],
                    b"",
                ),
            );
            refused_as_expired(
                "a 2026-07-28 stateless call",
                stateless_tool_call(
                    addr,
                    &tok,
                    "get_active_window",
                    call_body("get_active_window").as_bytes(),
                ),
            );
            let listen_body = listen_request(addr, &tok);
            let listen_body = listen_body
                .split_once("\r\n\r\n")
                .map(|(_, b)| b)
                .unwrap_or_default();
            refused_as_expired(
                "a 2026-07-28 subscriptions/listen",
                http(
                    addr,
                    "POST",
                    "/mcp",
                    &[
                        ("Authorization", auth.as_str()),
                        ("Content-Type", "application/json"),
                        ("Accept", "application/json, text/event-stream"),
                        ("MCP-Protocol-Version", "2026-07-28"),
                        ("Mcp-Method", "subscriptions/listen"),
                    ],
                    listen_body.as_bytes(),
                ),
            );
            refused_as_expired(
                "the legacy SSE GET",
                http(
                    addr,
                    "GET",
                    "/sse",
                    &[("Authorization", auth.as_str()), ("Accept", "text/event-stream")],
                    b"",
                ),
            );
            refused_as_expired(
                "the legacy SSE POST",
                http(
                    addr,
                    "POST",
                    &legacy_path,
                    &json,
                    br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
                ),
            );
            // An unknown token is told nothing of expiry.
            let (code, hs, body) = mcp_post(addr, "ctxd_not_a_token", &[], INIT.as_bytes());
            assert_eq!(code, 401);
            let challenge = header(&hs, "www-authenticate").unwrap_or_default();
            assert!(
                challenge.contains(r#"error="invalid_token""#)
                    && !challenge.contains("error_description"),
                "{challenge}"
            );
            assert!(!body.contains("expired"), "{body}");
        });

        // The other token runs on.
        replay.send(&window_line("w2", "org.mozilla.firefox", "News", true));
        let heard = tokio::task::block_in_place(|| line_with(&mut staying, "resources/updated"));
        assert!(heard.is_some(), "the other token's listen stream ended");

        // Listed as expired, with its decisions, until revoked; its name
        // is taken meanwhile.
        let list = listed(bus, home);
        assert_eq!(list["brief"]["expired"], true, "{list:?}");
        let (ok, text, err) = contextctl(bus, home, &["token", "list"]);
        assert!(ok, "{err}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("brief ") && l.contains("EXPIRED 20")),
            "{text}"
        );
        assert_eq!(
            decided_grants_of(&user, "token:brief").await.len(),
            1,
            "expiry forgot the token's decisions"
        );
        let (ok, _, err) = contextctl(bus, home, &["token", "create", "brief"]);
        assert!(!ok && err.contains("revoke it first"), "{err}");

        let (ok, _, err) = contextctl(bus, home, &["token", "revoke", "brief"]);
        assert!(ok, "{err}");
        assert!(!listed(bus, home).contains_key("brief"));
        assert!(
            decided_grants_of(&user, "token:brief").await.is_empty(),
            "revoking forgets its decisions"
        );
        // The old secret is now simply unknown; a new token of the name
        // works.
        let (code, _, body) =
            tokio::task::block_in_place(|| mcp_post(addr, &tok, &[], INIT.as_bytes()));
        assert_eq!(code, 401);
        assert!(body.contains("unknown or revoked"), "{body}");
        let again = token(bus, home, "brief");
        let (code, _, body) =
            tokio::task::block_in_place(|| mcp_post(addr, &again, &[], INIT.as_bytes()));
        assert_eq!(code, 200, "{body}");
    })
    .await;
}

/// Bad expiries are refused before anything is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_expiry_makes_no_token() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &[]).await;
        wait_socket(&home);
        for bad in ["0s", "soon", "-3s", "3y", "2020-01-01T00:00:00Z"] {
            let arg = format!("--expires={bad}");
            let (ok, _, err) = contextctl(&bus, &home, &["token", "create", "nope", &arg]);
            assert!(!ok, "{bad} made a token");
            assert!(err.contains(bad), "{bad}: {err}");
        }
        let (ok, _, err) = contextctl(
            &bus,
            &home,
            &[
                "token",
                "create",
                "dated",
                "--expires",
                "2099-01-05T10:00:00Z",
            ],
        );
        assert!(ok, "{err}");
        let (ok, out, err) = contextctl(&bus, &home, &["token", "list"]);
        assert!(ok, "{err}");
        assert!(!out.contains("nope"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("dated ") && l.ends_with("expires 2099-01-05 10:00 UTC")),
            "{out}"
        );
    })
    .await;
}

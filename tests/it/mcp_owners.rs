//! One AI host can never reach another's work (issue 48): every MCP
//! session, stream and waiting request belongs to the token that opened
//! it. Written as the attacks of a second token B on token A's work, of a
//! token on the bounds, and of a revoked token that keeps running.

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

/// A request to try: method, headers, body.
type Attempt<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);

const ASK: &str = "[consent]\nundecided = \"ask\"\nprompt_timeout_s = 60\n";
const META: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"Owner Test","version":"1"}"#;

/// A request of `token` on `/mcp` with `headers`: (status, body).
fn as_token(
    addr: SocketAddr,
    token: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let auth = format!("Bearer {token}");
    let mut hs = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    hs.extend_from_slice(headers);
    let (code, _, body) = http(addr, method, "/mcp", &hs, body.as_bytes());
    (code, body)
}

/// The next line of an event stream that contains `what`, within the
/// stream's read timeout; `None` when the stream ends first.
fn line_with(r: &mut impl BufRead, what: &str) -> Option<String> {
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) if line.contains(what) => return Some(line),
            Ok(_) => {}
        }
    }
}

/// Whether the stream ends (EOF or the chunked body's last chunk) before
/// its read timeout.
fn ends(r: &mut impl BufRead) -> bool {
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) => return true,
            Ok(_) if line.trim() == "0" => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

/// A broker with `config`, polkit letting this test manage consent (it
/// plays the user), the windows `w1` (focused) and `w2` replayed, and MCP
/// over HTTP.
async fn broker(config: &str) -> (AgentBroker, Replay, Daemon) {
    let s = AgentBroker::new(config).await;
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

async fn consent(bus: &Bus) -> (zbus::Connection, Consent1Proxy<'static>) {
    let conn = bus.connect().await;
    let proxy = Consent1Proxy::new(&conn).await.expect("proxy");
    (conn, proxy)
}

/// B holds A's `Mcp-Session-Id`: every verb finds no session (404, as for
/// an id that does not exist), B hears none of A's notifications and gets
/// none of A's answers, by resuming or by reusing A's request id; A's
/// session works throughout, and A's answer reaches A when the user
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tokens_session_is_not_found_on_every_verb() {
    with_timeout(150, async {
        let (s, mut replay, _d) = broker(ASK).await;
        let (bus, home) = (&s.bus, &s.home);
        let _notifications = Notifications::start(bus).await;
        let addr = http_addr(home);
        let a = token(bus, home, "host-a");
        let b = token(bus, home, "host-b");
        home.write_policy(&[("token:host-a", &["windows"]), ("token:host-b", &["*"])]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (_conn, user) = consent(bus).await;

        let sid = tokio::task::block_in_place(|| http_session(addr, &a));
        let (code, _) = tokio::task::block_in_place(|| {
            http_call(
                addr,
                &a,
                &sid,
                br#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"context://windows/active"}}"#,
            )
        });
        assert_eq!(code, 200);
        let mut a_stream = tokio::task::block_in_place(|| streamable_get(addr, &a, &sid, None));

        // B, with A's session id, on every verb.
        let session = [
            ("Mcp-Session-Id", sid.as_str()),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        let attempts: Vec<Attempt> = vec![
            (
                "POST",
                session.to_vec(),
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
            ),
            (
                "POST",
                session.to_vec(),
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#,
            ),
            ("GET", session.to_vec(), ""),
            ("GET", [&session[..], &[("Last-Event-ID", "0")]].concat(), ""),
            ("GET", [&session[..], &[("Last-Event-ID", "1")]].concat(), ""),
            ("GET", [&session[..], &[("Last-Event-ID", "0/1")]].concat(), ""),
            ("DELETE", session.to_vec(), ""),
        ];
        let try_all = |attempts: &[Attempt]| {
            for (method, headers, body) in attempts {
                let mut hs = headers.clone();
                if *method == "GET" {
                    hs.push(("Accept", "text/event-stream"));
                }
                let (code, answer) =
                    tokio::task::block_in_place(|| as_token(addr, &b, method, &hs, body));
                assert_eq!(code, 404, "B's {method} {headers:?}: {answer}");
                assert_eq!(answer, "Not Found: Session not found", "{method}");
            }
        };
        try_all(&attempts);
        // As for a session that does not exist.
        let (code, answer) = tokio::task::block_in_place(|| {
            as_token(
                addr,
                &b,
                "GET",
                &[
                    ("Mcp-Session-Id", "00000000-0000-4000-8000-000000000000"),
                    ("MCP-Protocol-Version", "2025-06-18"),
                    ("Accept", "text/event-stream"),
                ],
                "",
            )
        });
        assert_eq!((code, answer.as_str()), (404, "Not Found: Session not found"));

        // A's session is whole: its stream hears the focus change.
        replay.send(&window_line("w2", "org.mozilla.firefox", "News", true));
        let heard = tokio::task::block_in_place(|| {
            line_with(&mut a_stream, "notifications/resources/updated")
        });
        assert!(heard.is_some(), "A's stream heard nothing");

        // A asks for something the user has not decided: the call waits.
        let waiting = {
            let (a, sid) = (a.clone(), sid.clone());
            std::thread::spawn(move || {
                http_call(
                    addr,
                    &a,
                    &sid,
                    br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_session_state","arguments":{}}}"#,
                )
            })
        };
        let prompt = eventually(20, "A's prompt waiting", || async {
            pending_of(&user, "token:host-a").await.first().cloned()
        })
        .await;
        // B tries for A's answer: A's request id in A's session, resumes.
        let mut attempts = attempts;
        attempts.push((
            "POST",
            session.to_vec(),
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_session_state","arguments":{}}}"#,
        ));
        attempts.push(("GET", [&session[..], &[("Last-Event-ID", "1/1")]].concat(), ""));
        attempts.push(("GET", [&session[..], &[("Last-Event-ID", "0/2")]].concat(), ""));
        try_all(&attempts);
        // A itself cannot take the answer of its own pending request by
        // reusing its id either: refused, and the first still waits.
        let (code, dup) = tokio::task::block_in_place(|| {
            http_call(
                addr,
                &a,
                &sid,
                br#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
            )
        });
        assert_eq!(code, 200);
        assert_eq!(dup.last().map(|m| m["error"]["code"].clone()), Some((-32600).into()), "{dup:?}");

        // The user answers: the answer reaches A.
        let id = prompt["id"].as_u64().expect("prompt id");
        assert!(user.answer_pending(id, "once", 0).await.expect("AnswerPending"));
        let (code, answer) = tokio::task::block_in_place(|| waiting.join().expect("A's call"));
        assert_eq!(code, 200);
        let last = answer.last().cloned().unwrap_or_default();
        assert_eq!(last["id"], 5, "{answer:?}");
        assert!(last["result"].is_object(), "{answer:?}");

        // A still uses and ends its own session.
        let (code, _) = tokio::task::block_in_place(|| {
            http_call(addr, &a, &sid, br#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#)
        });
        assert_eq!(code, 200);
        let (code, _) = tokio::task::block_in_place(|| {
            as_token(addr, &a, "DELETE", &session, "")
        });
        assert_eq!(code, 204);
        let (code, _) = tokio::task::block_in_place(|| {
            http_call(addr, &a, &sid, br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#)
        });
        assert_eq!(code, 404);
    })
    .await;
}

/// A revoked token keeps nothing running: its 2026-07-28 `listen` stream
/// and its session's stream end and leave the readers list, and its
/// stateless call waiting for the user is withdrawn from the screen
/// (the notification closed, `ListPending` empty), answered as refused,
/// with nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_ends_its_streams_and_withdraws_its_prompt() {
    with_timeout(150, async {
        let (s, mut replay, _d) = broker(ASK).await;
        let (bus, home) = (&s.bus, &s.home);
        let notifications = Notifications::start(bus).await;
        let addr = http_addr(home);
        let tok = token(bus, home, "leaver");
        let other = token(bus, home, "stayer");
        home.write_policy(&[("token:leaver", &["windows"]), ("token:stayer", &["windows"])]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (conn, user) = consent(bus).await;

        // A listen stream (2026-07-28, no session).
        let listen = |tok: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"notifications":{{"resourceSubscriptions":["context://windows/active"]}},"_meta":{{{META}}}}}}}"#
            );
            let (head, r) = open_stream(
                addr,
                &format!(
                    "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                ),
                None,
            );
            assert!(head.starts_with("http/1.1 200"), "{head}");
            r
        };
        let mut listening = tokio::task::block_in_place(|| listen(&tok));
        let mut staying = tokio::task::block_in_place(|| listen(&other));
        // A session with its stream.
        let sid = tokio::task::block_in_place(|| http_session(addr, &tok));
        let mut session_stream =
            tokio::task::block_in_place(|| streamable_get(addr, &tok, &sid, None));
        eventually(20, "the listen streams and the session read", || async {
            (readers_of(&user, "token:leaver").await.len() >= 2
                && !readers_of(&user, "token:stayer").await.is_empty())
            .then_some(())
        })
        .await;

        // Stateless calls that wait for the user: one answered beside
        // rmcp (`mcp::direct`), one by rmcp (an extra `_meta` key); they
        // share the one question on screen.
        let wait = |extra: &'static str| {
            let tok = tok.clone();
            std::thread::spawn(move || {
                stateless_tool_call(
                    addr,
                    &tok,
                    "get_session_state",
                    format!(
                        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"get_session_state","arguments":{{}},"_meta":{{{META}{extra}}}}}}}"#
                    )
                    .as_bytes(),
                )
            })
        };
        let waiting = [wait(""), wait(r#","io.example/trace":1"#)];
        eventually(20, "the prompt waiting", || async {
            pending_of(&user, "token:leaver").await.first().cloned()
        })
        .await;

        let (ok, _, err) = contextctl(bus, home, &["token", "revoke", "leaver"]);
        assert!(ok, "{err}");
        // Already, not soon: the revocation answers once its token's
        // questions are withdrawn and their notifications closed.
        assert!(pending_of(&user, "token:leaver").await.is_empty());
        let m = conn
            .call_method(
                Some("org.freedesktop.Notifications"),
                "/org/freedesktop/Notifications",
                Some("org.freedesktop.DBus.Mock"),
                "GetCalls",
                &(),
            )
            .await
            .expect("GetCalls");
        let calls: Vec<(u64, String, Vec<zbus::wire::OwnedVariant>)> =
            m.body().deserialize().expect("calls");
        assert!(
            calls.iter().any(|c| c.1 == "CloseNotification"),
            "the notification was not closed by the time revoke returned"
        );
        drop(notifications);
        eventually(5, "the revoked token's readers gone", || async {
            readers_of(&user, "token:leaver")
                .await
                .is_empty()
                .then_some(())
        })
        .await;
        tokio::task::block_in_place(|| {
            assert!(ends(&mut listening), "the listen stream stayed open");
            assert!(ends(&mut session_stream), "the session's stream stayed open");
        });
        for call in waiting {
            let (status, _, body) = tokio::task::block_in_place(|| call.join().expect("call"));
            assert_eq!(status, 200, "{body}");
            let answer = messages(&body);
            assert!(
                answer
                    .last()
                    .is_some_and(|m| m["result"]["isError"] == true || m["error"].is_object()),
                "{answer:?}"
            );
        }
        // Nothing stored (policy.toml's grant is the user's text).
        let stored: Vec<Value> = grants_of(&user, "token:leaver")
            .await
            .into_iter()
            .filter(|g| g["origin"] != "policy")
            .collect();
        assert!(stored.is_empty(), "{stored:?}");
        // The session is gone with it (a new token of the name is not its
        // owner), and the other token's stream runs on.
        let again = token(bus, home, "leaver");
        let (code, _) = tokio::task::block_in_place(|| {
            http_call(addr, &again, &sid, br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#)
        });
        assert_eq!(code, 404);
        assert_eq!(readers_of(&user, "token:stayer").await.len(), 1);
        replay.send(&window_line("w2", "org.mozilla.firefox", "News", true));
        let heard =
            tokio::task::block_in_place(|| line_with(&mut staying, "resources/updated"));
        assert!(heard.is_some(), "the other token's listen stream ended");
    })
    .await;
}

/// Revoke token `claude`, create a new `claude`: it starts with none of
/// the old one's decisions (made by the user, not in policy.toml).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_token_of_a_revoked_name_has_no_grants() {
    with_timeout(120, async {
        let (s, _replay, _d) = broker("[consent]\nundecided = \"deny\"\n").await;
        let (bus, home) = (&s.bus, &s.home);
        let addr = http_addr(home);
        let (_conn, user) = consent(bus).await;
        let old = token(bus, home, "claude");
        user.set_grant("token:claude", "windows", "allow", 0)
            .await
            .expect("SetGrant");
        let call = |tok: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"get_active_window","arguments":{{}},"_meta":{{{META}}}}}}}"#
            );
            let (status, _, body) = tokio::task::block_in_place(|| {
                stateless_tool_call(addr, tok, "get_active_window", body.as_bytes())
            });
            assert_eq!(status, 200, "{body}");
            messages(&body).pop().unwrap_or_default()
        };
        let granted = call(&old);
        assert_eq!(
            granted["result"]["structuredContent"]["window"]["id"], "w1",
            "{granted}"
        );
        let (ok, _, err) = contextctl(bus, home, &["token", "revoke", "claude"]);
        assert!(ok, "{err}");
        assert!(grants_of(&user, "token:claude").await.is_empty());
        let new = token(bus, home, "claude");
        let refused = call(&new);
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        assert!(refused["result"]["structuredContent"]["window"].is_null());
        assert!(grants_of(&user, "token:claude").await.is_empty());
    })
    .await;
}

/// One token opens 5 000 sessions: it holds at most its bound (its
/// idlest go), another token's session stays, its revocation still ends
/// it, and the broker's memory grows by at most 10 MB. One token holding
/// legacy SSE streams ends only its own oldest, never another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_cannot_crowd_out_another() {
    with_timeout(300, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let greedy = token(&bus, &home, "greedy");
        let modest = token(&bus, &home, "modest");
        let pid = _d.pid();

        let kept = tokio::task::block_in_place(|| http_session(addr, &modest));
        let mut kept_stream =
            tokio::task::block_in_place(|| streamable_get(addr, &modest, &kept, None));
        let open = |n: usize| {
            let mut last = String::new();
            for _ in 0..n {
                let (code, hs, body) = http(
                    addr,
                    "POST",
                    "/mcp",
                    &[
                        ("Authorization", &format!("Bearer {greedy}")),
                        ("Content-Type", "application/json"),
                        ("Accept", "application/json, text/event-stream"),
                    ],
                    INIT.as_bytes(),
                );
                assert_eq!(code, 200, "{body}");
                last = header(&hs, "mcp-session-id").expect("id").to_owned();
            }
            last
        };
        let first = tokio::task::block_in_place(|| open(1));
        // Warm up, so that what is measured is what sessions hold.
        tokio::task::block_in_place(|| open(200));
        let before = rss_kib(pid);
        let last = tokio::task::block_in_place(|| open(5000));
        let after = rss_kib(pid);
        eprintln!("broker RSS: {before} kB before, {after} kB after 5000 sessions");
        assert!(
            after <= before + 10 * 1024,
            "RSS grew from {before} kB to {after} kB over 5000 sessions of one token"
        );
        let tools = br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
        let code = |tok: &str, sid: &str| {
            tokio::task::block_in_place(|| http_call(addr, tok, sid, tools)).0
        };
        assert_eq!(code(&greedy, &last), 200, "the newest session works");
        assert_eq!(code(&greedy, &first), 404, "the greedy token's oldest ended");
        assert_eq!(code(&modest, &kept), 200, "another token's session stays");

        // Its revocation still ends it.
        let (ok, _, err) = contextctl(&bus, &home, &["token", "revoke", "modest"]);
        assert!(ok, "{err}");
        tokio::task::block_in_place(|| {
            assert!(ends(&mut kept_stream), "the revoked token's session outlived it")
        });

        // Legacy SSE: the greedy token opens streams past its bound; only
        // its own oldest ends, and another token still opens one.
        let other = token(&bus, &home, "other");
        let streams: Vec<_> = tokio::task::block_in_place(|| {
            (0..70).map(|_| legacy_open(addr, &greedy, None)).collect()
        });
        let (mut oldest, path) = streams.into_iter().next().expect("streams");
        tokio::task::block_in_place(|| {
            assert!(ends(&mut oldest), "the greedy token's oldest stream stayed");
            let (mut r, other_path) = legacy_open(addr, &other, None);
            // The other's session is not the greedy token's: not found.
            let (code, _, _) = http(
                addr,
                "POST",
                &other_path,
                &[
                    ("Authorization", &format!("Bearer {greedy}")),
                    ("Content-Type", "application/json"),
                ],
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            );
            assert_eq!(code, 404);
            let (code, _, _) = http(
                addr,
                "POST",
                &path,
                &[
                    ("Authorization", &format!("Bearer {greedy}")),
                    ("Content-Type", "application/json"),
                ],
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            );
            assert_eq!(code, 404, "the ended stream's session is gone");
            // The other token's session works.
            legacy_post(
                addr,
                &other,
                &other_path,
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
            );
            assert!(line_with(&mut r, "serverInfo").is_some());
        });
    })
    .await;
}

/// Two values of a header that says what the request is: refused (400) on
/// every path, before anything runs; a gateway that reads the last of
/// them must not pass a request that the broker reads otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_given_twice_is_refused() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "twice");
        home.write_policy(&[("token:twice", &["*"])]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let auth = format!("Bearer {tok}");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"send_notification","arguments":{{"title":"twice"}},"_meta":{{{META}}}}}}}"#
        );
        let base = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "send_notification"),
        ];
        // Once each: answered (beside rmcp, `mcp::direct`).
        let (code, _, answer) =
            tokio::task::block_in_place(|| http(addr, "POST", "/mcp", &base, body.as_bytes()));
        assert_eq!(code, 200, "{answer}");
        for (name, value) in [
            ("Mcp-Name", "get_active_window"),
            ("Mcp-Name", "send_notification"),
            ("Mcp-Method", "tools/call"),
            ("MCP-Protocol-Version", "2025-06-18"),
            ("Mcp-Session-Id", "x"),
            ("Authorization", "Bearer ctxd_x"),
        ] {
            let mut hs = base.clone();
            hs.push((name, value));
            if name == "Mcp-Session-Id" {
                hs.push((name, value));
            }
            let (code, _, answer) = tokio::task::block_in_place(|| {
                http(addr, "POST", "/mcp", &hs, body.as_bytes())
            });
            assert_eq!(code, 400, "{name} twice: {answer}");
            let v: Value = serde_json::from_str(&answer).expect("JSON");
            assert_eq!(v["error"]["code"], -32020, "{answer}");
        }
        // The legacy endpoints too.
        let (code, _, _) = tokio::task::block_in_place(|| {
            http(
                addr,
                "GET",
                "/sse",
                &[
                    ("Authorization", &auth),
                    ("Authorization", &auth),
                    ("Accept", "text/event-stream"),
                ],
                b"",
            )
        });
        assert_eq!(code, 400);
    })
    .await;
}

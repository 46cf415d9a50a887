//! MCP over HTTP: the Python SDK over Streamable HTTP (handshake and
//! 2026-07-28) and over the legacy HTTP+SSE pair; and the doors: tokens
//! (401), Host and Origin (403), body size (413), loopback only, revoking.

use crate::common;
use crate::mcp_support;

use std::time::Duration;

use common::*;
use mcp_support::*;
use serde_json::Value;

async fn full_over(transport: &'static str, mode: &'static str) {
    let bus = Bus::start();
    let home = Home::new();
    let _notifications = Notifications::start(&bus).await;
    let mut replay = Replay::new(&home);
    let _d = daemon_with_windows(&bus, &home, &mut replay, &["--http", "127.0.0.1:0"]).await;
    let addr = http_addr(&home);
    let tok = token(&bus, &home, "claude");
    home.write_policy(&[("token:claude", &["*"])]);
    // The daemon picks the policy up through inotify.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let url = match transport {
        "sse" => format!("http://{addr}/sse"),
        _ => format!("http://{addr}/mcp"),
    };
    let r = run_client(
        &bus,
        &home,
        &[
            "--transport",
            transport,
            "--mode",
            mode,
            "--url",
            &url,
            "--token",
            &tok,
            "--fifo",
            &replay.arg(),
        ],
    );
    if mode == "legacy" {
        assert_eq!(
            r["server"]["serverInfo"]["name"], "contextd",
            "{}",
            r["server"]
        );
    }
    for (name, res) in r["tools"].as_object().expect("tools") {
        let res = res.get("ok").unwrap_or_else(|| panic!("{name}: {res}"));
        assert_ne!(res["isError"], Value::Bool(true), "{name}: {res}");
        assert!(res["structuredContent"].is_object(), "{name}");
    }
    // Every tool of the catalog (the context tools, the timeline tools,
    // send_notification) was listed and called.
    assert_eq!(
        r["tools"].as_object().map(|t| t.len()),
        Some(contextd::internals::mcp_tool_catalog().len())
    );
    assert!(r["tools"]["summarize_time"]["ok"]["structuredContent"]["apps"].is_array());
    let active = &r["tools"]["get_active_window"]["ok"]["structuredContent"]["window"];
    assert_eq!(active["id"], "w1", "{active}");
    for (uri, res) in r["resources"].as_object().expect("resources") {
        assert!(res["ok"]["contents"][0]["text"].is_string(), "{uri}: {res}");
    }
    // Every fixed resource: the context resources and the vocabulary.
    assert_eq!(
        r["resources"].as_object().map(|t| t.len()),
        Some(contextd::internals::MCP_FIXED_RESOURCES.len())
    );
    assert!(
        r["updated"]["uri"] == "context://windows/active"
            || r["updated"]["params"]["uri"] == "context://windows/active",
        "no resources/updated after the focus change over {transport}: {}",
        r["updated"]
    );
    let after = r["after_focus"]["ok"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(after.contains("\"id\":\"w2\""), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_host_over_streamable_http() {
    with_timeout(150, full_over("http", "legacy")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_host_over_streamable_http_on_2026_07_28() {
    with_timeout(150, full_over("http", "auto")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_host_over_legacy_sse() {
    with_timeout(150, full_over("sse", "legacy")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_without_grant_is_refused_over_http() {
    with_timeout(150, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut replay = Replay::new(&home);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "nogrant");
        let r = run_client(
            &bus,
            &home,
            &[
                "--transport",
                "http",
                "--scenario",
                "denied",
                "--url",
                &format!("http://{addr}/mcp"),
                "--token",
                &tok,
                "--fifo",
                &replay.arg(),
            ],
        );
        let text = r["tool"]["ok"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(r["tool"]["ok"]["isError"], Value::Bool(true), "{r}");
        assert!(
            text.contains("token:nogrant") && text.contains("windows"),
            "{text}"
        );
        assert_eq!(r["read"]["error"]["code"], -32004);
        assert_eq!(r["leaked"], serde_json::json!([]));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_doors_tokens_host_origin_and_size() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "door");
        let json = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        let with = |extra: &[(&'static str, String)]| {
            let mut h: Vec<(&str, String)> =
                json.iter().map(|(k, v)| (*k, v.to_string())).collect();
            h.extend(extra.iter().cloned());
            h
        };
        let send = |headers: Vec<(&str, String)>, path: &str, body: &[u8]| {
            let hs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http(addr, "POST", path, &hs, body)
        };
        let bearer = format!("Bearer {tok}");

        // No token, a wrong token, a revoked one: 401 with a challenge.
        let (code, hs, _) = send(with(&[]), "/mcp", INIT.as_bytes());
        assert_eq!(code, 401);
        assert!(header(&hs, "www-authenticate").is_some_and(|v| v.starts_with("Bearer")));
        let (code, _, _) = send(
            with(&[("Authorization", "Bearer ctxd_wrong".into())]),
            "/mcp",
            INIT.as_bytes(),
        );
        assert_eq!(code, 401);
        let (code, _, _) = send(
            with(&[("Authorization", "Basic Zm9vOmJhcg==".into())]),
            "/mcp",
            INIT.as_bytes(),
        );
        assert_eq!(code, 401);
        let (code, _, _) = http(addr, "GET", "/sse", &[], b"");
        assert_eq!(code, 401, "the legacy endpoint needs the token too");

        // Bad Origin and bad Host: 403, even with a good token.
        let (code, _, _) = send(
            with(&[
                ("Authorization", bearer.clone()),
                ("Origin", "https://evil.example".into()),
            ]),
            "/mcp",
            INIT.as_bytes(),
        );
        assert_eq!(code, 403);
        let (code, _, _) = send(
            with(&[
                ("Authorization", bearer.clone()),
                ("Host", "evil.example".into()),
            ]),
            "/mcp",
            INIT.as_bytes(),
        );
        assert_eq!(code, 403);
        // Same-origin pages of the server itself are fine.
        let (code, _, body) = send(
            with(&[
                ("Authorization", bearer.clone()),
                ("Origin", format!("http://127.0.0.1:{}", addr.port())),
            ]),
            "/mcp",
            INIT.as_bytes(),
        );
        assert_eq!(code, 200, "{body}");

        // 2 MiB: 413.
        let big = vec![b' '; 2 * 1024 * 1024];
        let (code, _, _) = send(with(&[("Authorization", bearer.clone())]), "/mcp", &big);
        assert_eq!(code, 413);

        // A session belongs to the token that opened it: to another, it
        // does not exist (tests/it/mcp_owners.rs tries every verb).
        let other = token(&bus, &home, "other");
        let sid = http_session(addr, &tok);
        let (code, msgs) = http_call(
            addr,
            &other,
            &sid,
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#,
        );
        assert_eq!(code, 404, "another token used the session: {msgs:?}");
        // An unsupported protocol version in the header: 400.
        let (code, _, body) = send(
            with(&[
                ("Authorization", bearer.clone()),
                ("Mcp-Session-Id", sid.clone()),
                ("MCP-Protocol-Version", "1999-01-01".into()),
            ]),
            "/mcp",
            br#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#,
        );
        assert_eq!(code, 400, "{body}");

        // Revoking ends the token at once.
        let (ok, _, err) = contextctl(&bus, &home, &["token", "list"]);
        assert!(ok, "{err}");
        let (ok, _, err) = contextctl(&bus, &home, &["token", "revoke", "door"]);
        assert!(ok, "{err}");
        let (code, _, _) = send(
            with(&[("Authorization", bearer.clone())]),
            "/mcp",
            INIT.as_bytes(),
        );
        assert_eq!(code, 401);
        let (ok, _, err) = contextctl(&bus, &home, &["token", "revoke", "door"]);
        assert!(!ok && err.contains("no token named"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_over_http_gets_json_rpc_codes() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        let d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "bad");
        let sid = http_session(addr, &tok);
        let code_of = |body: &[u8]| {
            let (status, msgs) = http_call(addr, &tok, &sid, body);
            let code = msgs
                .iter()
                .find_map(|m| m["error"]["code"].as_i64())
                .unwrap_or_else(|| {
                    panic!(
                        "no error for {}: {status} {msgs:?}",
                        String::from_utf8_lossy(body)
                    )
                });
            (status, code)
        };
        assert_eq!(code_of(b"{not json"), (400, -32700));
        assert_eq!(code_of(br#"{"id":1,"method":"ping"}"#).1, -32600);
        assert_eq!(code_of(b"[1,2]").1, -32600);
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":2,"method":"no/such"}"#).1,
            -32601
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":7}}"#).1,
            -32602
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}"#)
                .1,
            -32602
        );
        // Still serving.
        let (status, msgs) = http_call(
            addr,
            &tok,
            &sid,
            br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
        );
        assert_eq!(status, 200);
        assert!(
            msgs.iter().any(|m| m["id"] == 5 && m["result"].is_object()),
            "{msgs:?}"
        );
        assert!(!d.stderr().contains("panicked"), "{}", d.stderr());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_loopback_address_is_refused_unless_explicitly_allowed() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let cfg = home.dir.path().join("config/contextd/config.toml");
        std::fs::write(&cfg, "[mcp.http]\nlisten = \"0.0.0.0:0\"\n").expect("config");
        let mut d = Daemon::spawn(&bus, &home, &[]);
        let st = d
            .wait_exit(Duration::from_secs(10))
            .expect("contextd must exit");
        assert_eq!(exit_code(st), "exit 1");
        let err = d.stderr();
        assert!(
            err.contains("0.0.0.0:0")
                && err.contains("not a loopback address")
                && err.contains("allow_remote"),
            "{err}"
        );
        // The command-line flag is held to the same rule.
        let mut d = Daemon::spawn(
            &bus,
            &home,
            &["--http", "0.0.0.0:0", "--config", "/dev/null"],
        );
        let st = d
            .wait_exit(Duration::from_secs(10))
            .expect("contextd must exit");
        assert_eq!(exit_code(st), "exit 1", "{}", d.stderr());

        std::fs::write(
            &cfg,
            "[mcp.http]\nlisten = \"0.0.0.0:0\"\nallow_remote = true\n",
        )
        .expect("config");
        let _d = Daemon::start(&bus, &home, &[]).await;
        let addr = http_addr(&home);
        assert!(addr.ip().is_unspecified(), "{addr}");
    })
    .await;
}

/// A new connection that sends no complete request head is closed after
/// the first head's deadline (2 s); one kept alive after a request, idle,
/// after the header timeout (10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed() {
    use contextd::internals::{FIRST_HEAD_TIMEOUT, HEADER_TIMEOUT};
    with_timeout(60, async {
        use std::io::{Read, Write};
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        /// Read until the server closes (EOF), after an answer or not.
        fn until_closed(s: &mut std::net::TcpStream) {
            s.set_read_timeout(Some(Duration::from_secs(20)))
                .expect("timeout");
            let mut buf = [0u8; 512];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => continue,
                    Err(e) => panic!("the server kept an idle connection open: {e}"),
                }
            }
        }
        let started = std::time::Instant::now();
        // Connects and says nothing.
        let mut idle = std::net::TcpStream::connect(addr).expect("connect");
        // Sends half a request line and stops.
        let mut slow = std::net::TcpStream::connect(addr).expect("connect");
        slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: ")
            .expect("write");
        for s in [&mut idle, &mut slow] {
            until_closed(s);
        }
        let took = started.elapsed();
        assert!(
            took >= FIRST_HEAD_TIMEOUT - Duration::from_millis(100) && took < HEADER_TIMEOUT,
            "closed after {took:?}, expected about {FIRST_HEAD_TIMEOUT:?}"
        );

        // A request (refused, small: the connection is kept), then idle.
        let mut kept = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            kept,
            "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .expect("write");
        let started = std::time::Instant::now();
        until_closed(&mut kept);
        let took = started.elapsed();
        assert!(
            took >= HEADER_TIMEOUT - Duration::from_secs(1)
                && took < HEADER_TIMEOUT + Duration::from_secs(5),
            "closed after {took:?}, expected about {HEADER_TIMEOUT:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_ends_its_open_streams() {
    with_timeout(60, async {
        use std::io::{BufRead, BufReader, Write};
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "streamer");
        // A legacy SSE stream.
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            s,
            "GET /sse HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .expect("write");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut r = BufReader::new(s);
        let mut seen = String::new();
        while !seen.contains("/messages?sessionId=") {
            let mut line = String::new();
            let n = r.read_line(&mut line).expect("read the stream");
            assert!(n > 0, "the stream ended early: {seen}");
            seen.push_str(&line);
        }
        assert!(seen.contains("200"), "{seen}");
        let (ok, _, err) = contextctl(&bus, &home, &["token", "revoke", "streamer"]);
        assert!(ok, "{err}");
        // The stream ends (the chunked body's last chunk, then EOF).
        let started = std::time::Instant::now();
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) if line.trim() == "0" => break,
                Ok(_) => {}
                Err(e) => panic!("the stream of a revoked token stayed open: {e}"),
            }
        }
        assert!(started.elapsed() < Duration::from_secs(5));
    })
    .await;
}

/// A stateless 2026-07-28 `tools/call` of one of our tools is answered
/// beside rmcp (`mcp::direct`); one with an extra `_meta` key goes through
/// rmcp. For every tool, granted and refused, both answer the same status,
/// content type and messages, with JSON answers (the default) and with
/// `responses = "sse"`. (The prompt and the audit of such a call:
/// tests/it/consent_prompts.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_tool_calls_answered_beside_rmcp_are_what_rmcp_answers() {
    with_timeout(150, beside_rmcp("json")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_tool_calls_answered_beside_rmcp_are_what_rmcp_answers_on_streams() {
    with_timeout(150, beside_rmcp("sse")).await;
}

async fn beside_rmcp(responses: &'static str) {
    {
        let bus = Bus::start();
        let home = Home::new();
        home.write_config(&format!(
            "[consent]\nundecided = \"deny\"\n\n[mcp.http]\nlisten = \"127.0.0.1:0\"\nresponses = \"{responses}\"\n"
        ));
        let answered_as = match responses {
            "json" => "application/json",
            _ => "text/event-stream",
        };
        let mut replay = Replay::new(&home);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
        let addr = http_addr(&home);
        let granted = token(&bus, &home, "direct");
        let refused = token(&bus, &home, "nogrant");
        home.write_policy(&[("token:direct", &["*"])]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let meta = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"Direct Host","version":"4.2"}"#;
        let call = |tok: &str, name: &str, args: &str, extra: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":"c-{name}","method":"tools/call","params":{{"name":"{name}","arguments":{args},"_meta":{{{meta}{extra}}}}}}}"#
            );
            let (status, hs, body) = stateless_tool_call(addr, tok, name, body.as_bytes());
            let kind = header(&hs, "content-type").unwrap_or("").to_owned();
            (status, kind, messages(&body))
        };
        // Answers that change between two calls: times, and the timeline
        // the first call's audit row joined.
        let steady = |mut v: Vec<Value>| {
            fn scrub(v: &mut Value) {
                match v {
                    Value::Object(m) => {
                        for (k, x) in m.iter_mut() {
                            if k.ends_with("_at") || k == "at" || k == "since" {
                                *x = Value::Null;
                            } else {
                                scrub(x);
                            }
                        }
                    }
                    Value::Array(a) => a.iter_mut().for_each(scrub),
                    _ => {}
                }
            }
            v.iter_mut().for_each(scrub);
            v
        };
        let mut compared = 0;
        for tool in contextd::internals::mcp_tool_catalog() {
            let name = tool["name"].as_str().expect("name");
            let args = match name {
                "send_notification" => r#"{"title":"direct"}"#,
                _ => "{}",
            };
            for tok in [&granted, &refused] {
                let direct = call(tok, name, args, "");
                let rmcp = call(tok, name, args, r#","io.example/trace":1"#);
                assert_eq!(direct.0, rmcp.0, "{name}: status");
                assert_eq!(direct.1, rmcp.1, "{name}: content type");
                assert!(!direct.2.is_empty(), "{name}: no answer");
                assert_eq!(
                    direct.2.last().map(|m| m["id"].clone()),
                    Some(Value::String(format!("c-{name}"))),
                    "{name}: {:?}",
                    direct.2
                );
                if name != "get_recent_activity" && name != "summarize_time" {
                    assert_eq!(steady(direct.2), steady(rmcp.2), "{name} with {tok}");
                }
                compared += 1;
            }
        }
        assert_eq!(compared, 2 * contextd::internals::mcp_tool_catalog().len());
        // A refusal is a result with isError, one message: without a logLevel
        // in its `_meta` a request gets no log message (SEP-2575).
        let (status, kind, msgs) = call(&refused, "get_active_window", "{}", "");
        assert_eq!((status, kind.as_str()), (200, answered_as));
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert_eq!(msgs[0]["result"]["isError"], true);
        // With one (rmcp answers it), the log message comes first, on an
        // event stream.
        let (status, kind, msgs) = call(
            &refused,
            "get_active_window",
            "{}",
            r#","io.modelcontextprotocol/logLevel":"warning""#,
        );
        assert_eq!((status, kind.as_str()), (200, "text/event-stream"));
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert_eq!(msgs[0]["method"], "notifications/message");
        assert_eq!(msgs[0]["params"]["level"], "warning");
        assert_eq!(msgs[1]["result"]["isError"], true);
    }
}

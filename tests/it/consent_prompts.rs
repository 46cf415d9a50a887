//! Prompts: an unknown app asks, the registered agent is asked with the
//! app's real identity; its answers (once, always, deny, no answer) have
//! the right effect; with no agent, a notification with three actions asks.

use crate::common;
use crate::mcp_support;

use std::time::Duration;

use common::agent::{AGENT_PATH, AgentBroker, TestAgent, serve_and_register};
use common::dbusmock::Mock;
use common::*;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy, Request1Proxy};
use futures_util::StreamExt;
use zbus::wire::ObjectPath;

const PENDING: &str = "org.contextd.Error.Pending";
const NOT_ALLOWED: &str = "org.contextd.Error.NotAllowed";

type Setup = AgentBroker;

async fn setup(config: &str) -> Setup {
    AgentBroker::new(config).await
}

async fn start(s: &Setup, args: &[&str]) -> Daemon {
    s.start(args).await
}

/// Start the broker with one focused window (`w1`) replayed.
async fn start_with_window(s: &Setup) -> Daemon {
    let replay = s.home.dir.path().join("replay.jsonl");
    std::fs::write(
        &replay,
        window_line("w1", "org.gnome.TextEditor", "notes.txt", true),
    )
    .expect("replay");
    start(s, &["--replay", &replay.display().to_string()]).await
}

async fn register(s: &Setup, agent: &TestAgent) -> zbus::Connection {
    serve_and_register(&s.bus.address, agent).await
}

/// Request access and wait for the Response code (listening first: the
/// answer may come right after the reply).
pub(crate) async fn request(conn: &zbus::Connection, cats: &[&str]) -> u32 {
    let asked = common::access::Asked::new(conn, cats, "testing").await;
    let _ = Request1Proxy::builder(conn)
        .path(asked.path.clone())
        .build()
        .await
        .expect("proxy");
    asked.code_within(20).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_answers_once_always_deny_and_no_answer() {
    with_timeout(120, async {
        let s = setup("[consent]\nprompt_timeout_s = 1\ncooldown_s = 30\n").await;
        // A desktop entry named like this test program: the prompt must
        // not show it, since the program is no system program (see
        // `a_copy_named_like_an_app_is_named_by_its_path`).
        let me = my_app_id();
        let exe_name = me.rsplit('/').next().unwrap_or_default().to_owned();
        let apps = s.home.dir.path().join("data/applications");
        std::fs::create_dir_all(&apps).expect("mkdir");
        std::fs::write(
            apps.join(format!("{exe_name}.desktop")),
            "[Desktop Entry]\nType=Application\nName=Test Asker\nIcon=test-asker\nExec=true\n",
        )
        .expect("desktop entry");
        let mut d = start_with_window(&s).await;

        let agent = TestAgent::new("once");
        let conn = register(&s, &agent).await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        // Unknown app: Pending at once, and the agent is asked who and what.
        assert_eq!(error_name(ctx.get_active_window().await), PENDING);
        let asked = eventually(10, "agent asked", || async {
            agent.asked().first().cloned()
        })
        .await;
        assert_eq!(asked.app["id"], serde_json::json!(my_app_id()));
        assert_eq!(asked.app["identity_source"], "executable");
        assert!(!asked.app.contains_key("name"), "{:?}", asked.app);
        assert!(!asked.app.contains_key("icon"), "{:?}", asked.app);
        assert_eq!(asked.categories, vec!["windows"]);
        assert_eq!(asked.channel, "dbus");

        // "once": the next call passes, the one after asks again.
        let w = eventually(10, "allowed once", || async {
            ctx.get_active_window().await.ok()
        })
        .await;
        assert!(w.contains_key("app_id"));
        assert_eq!(error_name(ctx.get_active_window().await), PENDING);
        eventually(10, "asked again", || async {
            (agent.asked().len() >= 2).then_some(())
        })
        .await;
        // Wait for that prompt's once-grant and use it up.
        eventually(10, "second once", || async {
            ctx.get_active_window().await.ok()
        })
        .await;

        // "always": stored, and it survives a restart.
        agent.set("always", Duration::ZERO);
        assert_eq!(request(&conn, &["windows"]).await, 0);
        for _ in 0..3 {
            ctx.get_active_window().await.expect("always allowed");
        }
        let grants: Vec<serde_json::Value> = consent
            .list_grants()
            .await
            .expect("grants")
            .iter()
            .map(contextd::client::json::dict_to_json)
            .collect();
        assert!(
            grants
                .iter()
                .any(|g| g["app_id"] == serde_json::json!(my_app_id())
                    && g["category"] == "windows"
                    && g["decision"] == "allow"
                    && g["origin"] == "prompt"),
            "{grants:?}"
        );
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(5)).expect("stopped");
        let n_asked = agent.asked().len();
        let _d2 = start_with_window(&s).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "allowed after restart", || async {
            ctx.get_active_window().await.ok()
        })
        .await;
        assert_eq!(agent.asked().len(), n_asked, "asked again after a restart");
        // Agents are registered per run of the broker.
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        consent
            .register_agent(&ObjectPath::try_from(AGENT_PATH).expect("path"))
            .await
            .expect("register again");

        // "deny": NotAllowed, without asking again.
        agent.set("deny", Duration::ZERO);
        assert_eq!(request(&conn, &["power"]).await, 1);
        assert_eq!(error_name(ctx.subscribe(&["power"]).await), NOT_ALLOWED);

        // No answer in time: NotAllowed, nothing stored.
        agent.set("always", Duration::from_secs(3));
        assert_eq!(request(&conn, &["session"]).await, 2);
        assert_eq!(error_name(ctx.subscribe(&["session"]).await), NOT_ALLOWED);
        let grants: Vec<serde_json::Value> = consent
            .list_grants()
            .await
            .expect("grants")
            .iter()
            .map(contextd::client::json::dict_to_json)
            .collect();
        assert!(
            !grants.iter().any(|g| g["category"] == "session"),
            "a timed-out prompt stored something: {grants:?}"
        );
    })
    .await
}

/// Prompt names cannot be borrowed (issue 28, hole 5): a copy of `gdbus`
/// called `chromium` in a directory of its own asks, and the prompt names
/// it by its path, never by Chromium's desktop entry ("Chromium Web
/// Browser") or icon. The real `/usr/bin/gdbus`, a system program, still
/// gets the name of its desktop entry, and so does its notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_named_like_an_app_is_named_by_its_path() {
    with_timeout(120, async {
        let s = setup("[consent]\nprompt_timeout_s = 10\n").await;
        let apps = s.home.dir.path().join("data/applications");
        std::fs::create_dir_all(&apps).expect("mkdir");
        std::fs::write(
            apps.join("gdbus.desktop"),
            "[Desktop Entry]\nType=Application\nName=GDBus Tool\nIcon=gdbus-tool\nExec=gdbus\n",
        )
        .expect("desktop entry");
        // Debian's chromium.desktop when Chromium is installed; else one
        // like it, where the broker looks first.
        if !std::path::Path::new("/usr/share/applications/chromium.desktop").exists() {
            std::fs::write(
                apps.join("chromium.desktop"),
                "[Desktop Entry]\nType=Application\nName=Chromium Web Browser\nIcon=chromium\nExec=chromium\n",
            )
            .expect("desktop entry");
        }
        let _d = start_with_window(&s).await;
        let agent = TestAgent::new("deny");
        let _agent_conn = register(&s, &agent).await;

        let gdbus = std::fs::canonicalize("/usr/bin/gdbus").expect("gdbus (libglib2.0-bin)");
        let dir = tempfile::tempdir().expect("tempdir");
        let copy = dir.path().join("chromium");
        std::fs::copy(&gdbus, &copy).expect("copy gdbus");
        let copy = std::fs::canonicalize(copy).expect("path");
        for exe in [&copy, &gdbus] {
            let (st, _out, err) = run_cmd(
                std::process::Command::new(exe)
                    .args(["call", "--session", "--dest", "org.contextd.Broker1"])
                    .args(["--object-path", "/org/contextd/Broker1"])
                    .args(["--method", "org.contextd.Context1.GetActiveWindow"])
                    .env("DBUS_SESSION_BUS_ADDRESS", &s.bus.address),
                30,
            );
            assert!(
                !st.success() && err.contains("Pending"),
                "{}: {err}",
                exe.display()
            );
        }
        let asked = eventually(20, "both asked", || async {
            let asked = agent.asked();
            (asked.len() >= 2).then_some(asked)
        })
        .await;
        let of = |exe: &std::path::Path| {
            let id = serde_json::json!(format!("exe:{}", exe.display()));
            asked
                .iter()
                .find(|a| a.app["id"] == id)
                .unwrap_or_else(|| panic!("{id} not asked: {asked:?}"))
                .app
                .clone()
        };
        let fake = of(&copy);
        assert_eq!(fake["identity_source"], "executable");
        assert!(
            !fake.contains_key("name") && !fake.contains_key("icon"),
            "the copy is announced by a desktop entry: {fake:?}"
        );
        assert!(
            !serde_json::to_string(&fake).unwrap_or_default().contains("Chromium"),
            "{fake:?}"
        );
        let real = of(&gdbus);
        assert_eq!(real["name"], "GDBus Tool", "{real:?}");
        assert_eq!(real["icon"], "gdbus-tool", "{real:?}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_agent_a_notification_asks_and_always_allow_grants() {
    with_timeout(90, async {
        let s = setup("[consent]\nprompt_timeout_s = 20\n").await;
        let notifier = Mock::start(&s.bus.address, false, "notification_daemon").await;
        let _d = start(&s, &[]).await;
        let conn = s.bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface("org.contextd.Request1")
            .build()
            .expect("rule");
        let mut responses = zbus::MessageStream::for_match_rule(rule, &conn, None)
            .await
            .expect("match");
        let _path = ctx
            .request_access(&["power"], "to show your battery")
            .await
            .expect("request");

        // The mock notification server got a Notify with the three actions.
        let calls = eventually(10, "Notify called", || async {
            let m = notifier
                .call(
                    &conn,
                    "/org/freedesktop/Notifications",
                    "org.freedesktop.DBus.Mock",
                    "GetCalls",
                    &(),
                )
                .await;
            let calls: Vec<(u64, String, Vec<zbus::wire::OwnedVariant>)> =
                m.body().deserialize().ok()?;
            calls.into_iter().find(|c| c.1 == "Notify")
        })
        .await;
        let args: Vec<serde_json::Value> = calls
            .2
            .iter()
            .map(|v| contextd::client::json::to_json(v))
            .collect();
        let actions = args[5].as_array().expect("actions").clone();
        for a in [
            "once",
            "Allow once",
            "always",
            "Always allow",
            "deny",
            "Deny",
        ] {
            assert!(
                actions.contains(&serde_json::json!(a)),
                "missing action {a}: {actions:?}"
            );
        }
        assert!(
            args[4].as_str().unwrap_or("").contains(&my_app_id()),
            "body names the app: {:?}",
            args[4]
        );
        // Critical (Plasma shows it during Do Not Disturb), kept until
        // answered, with the sender's name for Plasma.
        let hints = &args[6];
        assert_eq!(hints["urgency"], 2, "{hints}");
        assert_eq!(hints["resident"], true, "{hints}");
        assert_eq!(
            hints["x-kde-display-appname"], "Desktop context (contextd)",
            "{hints}"
        );

        // The user clicks "Always allow" (the server emits ActionInvoked).
        notifier
            .call(
                &conn,
                "/org/freedesktop/Notifications",
                "org.freedesktop.DBus.Mock",
                "EmitSignal",
                &(
                    "org.freedesktop.Notifications",
                    "ActionInvoked",
                    "us",
                    vec![
                        zbus::wire::Variant::from(1u32),
                        zbus::wire::Variant::from("always"),
                    ],
                ),
            )
            .await;
        let m = tokio::time::timeout(Duration::from_secs(10), responses.next())
            .await
            .expect("Response")
            .expect("stream")
            .expect("msg");
        let (code, _): (u32, contextd::client::proxy::Dict) = m.body().deserialize().expect("body");
        assert_eq!(code, 0);
        ctx.subscribe(&["power"])
            .await
            .expect("granted by the notification");
    })
    .await
}

/// An MCP host's read of an undecided category asks the user, and the
/// prompt says who asks (the host's `clientInfo`, beside its kernel
/// identity) and what it called, with its arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_host_is_asked_with_its_name_and_what_it_called() {
    with_timeout(120, async {
        let s = setup("[consent]\nprompt_timeout_s = 10\n").await;
        let _d = start_with_window(&s).await;
        mcp_support::wait_socket(&s.home);
        let agent = TestAgent::new("once");
        let conn = register(&s, &agent).await;

        let report = tokio::task::block_in_place(|| {
            mcp_support::run_client(
                &s.bus,
                &s.home,
                &[
                    "--transport",
                    "stdio",
                    "--mode",
                    "legacy",
                    "--scenario",
                    "dump",
                ],
            )
        });
        let got = &report["read"]["tool get_active_window"]["ok"];
        assert_eq!(
            got["structuredContent"]["window"]["id"], "w1",
            "allowed once by the agent: {got}"
        );
        let asked = agent.asked();
        let a = asked
            .iter()
            .find(|a| a.reason.contains("get_active_window"))
            .unwrap_or_else(|| panic!("no prompt named the tool: {asked:?}"));
        // The Python SDK's default clientInfo is mcp 0.1.0.
        assert_eq!(
            a.reason, "mcp 0.1.0 (MCP) asks for the tool get_active_window with no arguments",
            "{a:?}"
        );
        assert_eq!(a.channel, "mcp-stdio");
        assert_eq!(a.app["id"], serde_json::json!(mcp_support::python_app_id()));
        // The same in parts, for a consent UI (no arguments: no key).
        assert_eq!(a.app["host"], "mcp 0.1.0", "{a:?}");
        assert_eq!(a.app["call"], "tools/call", "{a:?}");
        assert_eq!(a.app["call_name"], "get_active_window", "{a:?}");
        assert!(!a.app.contains_key("arguments"), "{a:?}");
        assert_eq!(a.categories, ["windows"]);
        assert!(
            asked
                .iter()
                .any(|a| a.reason.contains("the resource context://windows/active")),
            "{asked:?}"
        );
        // The audit says what was called, on every channel.
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let host = mcp_support::python_app_id();
        eventually(10, "the tool call in the audit", || async {
            let rows = consent.get_audit(0, 0, &host, 1000).await.ok()?;
            rows.iter()
                .map(contextd::client::json::dict_to_json)
                .any(|e| {
                    e["request"] == "tools/call get_active_window"
                        && e["category"] == "windows"
                        && e["channel"] == "mcp-stdio"
                        && e["allowed"] == true
                })
                .then_some(())
        })
        .await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let _ = ctx.get_active_window().await;
        let me = my_app_id();
        eventually(10, "the D-Bus member in the audit", || async {
            let rows = consent.get_audit(0, 0, &me, 1000).await.ok()?;
            rows.iter()
                .map(contextd::client::json::dict_to_json)
                .any(|e| e["request"] == "Context1.GetActiveWindow" && e["channel"] == "dbus")
                .then_some(())
        })
        .await;
    })
    .await
}

/// An MCP host that gives up (`notifications/cancelled`) withdraws its
/// prompt: the agent is told to close the question, nothing is stored, and
/// the next read asks again at once (no cool-down: the user ignored
/// nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_mcp_request_withdraws_its_prompt() {
    use std::io::{BufRead, BufReader, Write};
    with_timeout(120, async {
        let s = setup("[consent]\nprompt_timeout_s = 60\n").await;
        let _d = start_with_window(&s).await;
        mcp_support::wait_socket(&s.home);
        // The user takes their time over the first question.
        let agent = TestAgent::new("always");
        agent.set("always", Duration::from_secs(40));
        let conn = register(&s, &agent).await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");

        // This test is the host: a process on the socket is its own host.
        let sock = mcp_support::runtime(&s.home).join("mcp.sock");
        let stream = std::os::unix::net::UnixStream::connect(&sock).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut w = stream.try_clone().expect("clone");
        let mut send = |line: &str| {
            w.write_all(line.as_bytes()).expect("write");
            w.write_all(b"\n").expect("write");
        };
        send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
        send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_active_window"}}"#);
        eventually(10, "the agent asked", || async {
            agent.asked().first().cloned()
        })
        .await;
        send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user gave up"}}"#);
        let (app, cats) = eventually(10, "the agent told to close the question", || async {
            agent.cancelled().first().cloned()
        })
        .await;
        assert_eq!(app, my_app_id());
        assert_eq!(cats, ["windows"]);
        let grants = consent.list_grants().await.expect("grants");
        assert!(
            !grants
                .iter()
                .map(contextd::client::json::dict_to_json)
                .any(|g| g["app_id"] == serde_json::json!(my_app_id())),
            "nothing stored: {grants:?}"
        );

        // Asked again at once, and this time the user allows it once.
        agent.set("once", Duration::ZERO);
        send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_active_window"}}"#);
        let answer = tokio::task::block_in_place(|| {
            let mut r = BufReader::new(stream);
            loop {
                let mut line = String::new();
                r.read_line(&mut line).expect("an answer within 20 s");
                let m: serde_json::Value = serde_json::from_str(&line).expect("JSON");
                if m["id"] == 3 {
                    return m;
                }
            }
        });
        assert_eq!(
            answer["result"]["structuredContent"]["window"]["id"], "w1",
            "{answer}"
        );
        assert_eq!(agent.asked().len(), 2, "{:?}", agent.asked());
    })
    .await
}

/// A 2026-07-28 request without a session over HTTP names its host in its
/// own `_meta`: the prompt shows that name, whether the call is answered
/// beside rmcp (`mcp::direct`) or by rmcp (an extra `_meta` key); a host
/// that hangs up withdraws the prompt and nothing is stored; the audit
/// names the tool and the channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_http_host_is_asked_with_the_name_in_its_request() {
    use std::io::Write;
    with_timeout(120, async {
        let s = setup("[consent]\nprompt_timeout_s = 60\n").await;
        let replay = s.home.dir.path().join("replay.jsonl");
        std::fs::write(
            &replay,
            window_line("w1", "org.gnome.TextEditor", "notes.txt", true),
        )
        .expect("replay");
        let _d = start(
            &s,
            &[
                "--replay",
                &replay.display().to_string(),
                "--http",
                "127.0.0.1:0",
            ],
        )
        .await;
        let addr = mcp_support::http_addr(&s.home);
        let tok = mcp_support::token(&s.bus, &s.home, "stateless");
        let agent = TestAgent::new("always");
        agent.set("always", Duration::from_secs(40));
        let conn = register(&s, &agent).await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let request = |extra: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"get_active_window","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"Stateless Host","version":"7.1"}}{extra}}}}}}}"#
            );
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: get_active_window\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        for (path, extra) in [("direct", ""), ("rmcp", r#","io.example/trace":1"#)] {
            let mut host = std::net::TcpStream::connect(addr).expect("connect");
            host.write_all(request(extra).as_bytes()).expect("write");
            let asked = eventually(10, "the agent asked", || async {
                agent.asked().get(if path == "direct" { 0 } else { 1 }).cloned()
            })
            .await;
            assert_eq!(
                asked.reason,
                "Stateless Host 7.1 (MCP) asks for the tool get_active_window with no arguments",
                "{path}: {asked:?}"
            );
            assert_eq!(asked.channel, "mcp-http", "{path}");
            assert_eq!(asked.app["id"], "token:stateless", "{path}");
            assert_eq!(asked.categories, ["windows"], "{path}");
            // The host hangs up while the user is asked.
            drop(host);
            let cancelled = eventually(10, "the agent told to close the question", || async {
                agent
                    .cancelled()
                    .get(if path == "direct" { 0 } else { 1 })
                    .cloned()
            })
            .await;
            assert_eq!(cancelled.0, "token:stateless", "{path}");
            let grants = consent.list_grants().await.expect("grants");
            assert!(
                !grants
                    .iter()
                    .map(contextd::client::json::dict_to_json)
                    .any(|g| g["app_id"] == "token:stateless"),
                "{path}: nothing stored: {grants:?}"
            );
        }
        // Allowed once: answered, and the audit names the tool.
        agent.set("once", Duration::ZERO);
        let (status, _, body) = tokio::task::block_in_place(|| {
            mcp_support::stateless_tool_call(
                addr,
                &tok,
                "get_active_window",
                br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"get_active_window","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            )
        });
        assert_eq!(status, 200, "{body}");
        let answer = mcp_support::messages(&body);
        assert_eq!(
            answer[0]["result"]["structuredContent"]["window"]["id"], "w1",
            "{answer:?}"
        );
        // Without a clientInfo the prompt says "An MCP host".
        assert_eq!(
            agent.asked().last().map(|a| a.reason.clone()).as_deref(),
            Some("An MCP host (MCP) asks for the tool get_active_window with no arguments")
        );
        eventually(10, "the tool call in the audit", || async {
            let rows = consent.get_audit(0, 0, "token:stateless", 1000).await.ok()?;
            rows.iter()
                .map(contextd::client::json::dict_to_json)
                .any(|e| {
                    e["request"] == "tools/call get_active_window"
                        && e["channel"] == "mcp-http"
                        && e["allowed"] == true
                })
                .then_some(())
        })
        .await;
    })
    .await
}

/// A settings panel stays current: `Changed` names what changed (a new
/// app, a prompt waiting, the audit, a decision), and `ListPending` shows
/// the prompt the user is being asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panel_hears_what_changed_and_lists_the_pending_prompt() {
    with_timeout(60, async {
        let s = setup("[consent]\nundecided = \"ask\"\nprompt_timeout_s = 30\n").await;
        let _d = start_with_window(&s).await;
        // The agent answers when the test says, after the panel looked.
        let agent = TestAgent::new("hold");
        let panel = register(&s, &agent).await;
        let consent = Consent1Proxy::new(&panel).await.expect("proxy");
        let mut changed = consent.receive_changed().await.expect("Changed");
        consent.watch_changes().await.expect("WatchChanges");
        let mut heard: Vec<String> = Vec::new();
        let mut hear = async |want: &str, heard: &mut Vec<String>| {
            while !heard.iter().any(|p| p == want) {
                let sig = tokio::time::timeout(Duration::from_secs(10), changed.next())
                    .await
                    .unwrap_or_else(|_| panic!("no Changed naming {want}; heard {heard:?}"))
                    .expect("stream");
                heard.extend(sig.args().expect("args").parts().iter().cloned());
            }
        };

        // An app nobody decided about reads: it becomes known, the read is
        // audited, and a prompt waits.
        let app = s.bus.connect().await;
        let ctx = Context1Proxy::new(&app).await.expect("ctx");
        assert_eq!(error_name(ctx.get_active_window().await), PENDING);
        hear("apps", &mut heard).await;
        hear("audit", &mut heard).await;
        hear("pending", &mut heard).await;
        let pending: Vec<serde_json::Value> = consent
            .list_pending()
            .await
            .expect("ListPending")
            .iter()
            .map(contextd::client::json::dict_to_json)
            .collect();
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0]["app_id"], my_app_id().as_str());
        assert_eq!(pending[0]["categories"], serde_json::json!(["windows"]));
        assert_eq!(pending[0]["channel"], "dbus");

        // The user answers: the prompt is gone, the decision is made.
        heard.clear();
        agent.release.notify_one();
        hear("pending", &mut heard).await;
        assert!(
            consent
                .list_pending()
                .await
                .expect("ListPending")
                .is_empty()
        );
        // A decision by the user (a panel's toggle) names the grants.
        heard.clear();
        consent
            .set_grant("org.example.Other", "power", "allow", 0)
            .await
            .expect("set grant");
        hear("grants", &mut heard).await;
    })
    .await;
}

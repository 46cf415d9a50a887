//! MCP over stdio with the official Python SDK as the host: it spawns
//! `contextctl mcp`, which relays to the daemon's socket; the daemon asks
//! consent for the bridge's parent (the Python process). Handshake-era
//! sessions (`initialize`, `resources/subscribe`) and 2026-07-28 sessions
//! (`server/discover`, `subscriptions/listen`).

use crate::common;
use crate::mcp_support;

use common::*;
use contextd::client::proxy::Context1Proxy;
use mcp_support::*;
use serde_json::{Value, json};

fn ok<'a>(r: &'a Value, what: &str) -> &'a Value {
    r.get("ok").unwrap_or_else(|| panic!("{what} failed: {r}"))
}

/// Every tool, every resource, prompts, completion, and `updated` after a
/// replayed focus change, as a host granted everything sees them.
fn check_full(r: &Value, legacy: bool) {
    let names: Vec<&str> = r["tool_list"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for t in [
        "get_snapshot",
        "get_active_window",
        "list_windows",
        "get_media_activity",
        "get_session_state",
        "get_power",
        "get_network",
        "list_notifications",
        "send_notification",
        "get_provided_context",
    ] {
        assert!(names.contains(&t), "tool {t} missing from {names:?}");
        let res = ok(&r["tools"][t], t);
        assert_ne!(res["isError"], Value::Bool(true), "{t}: {res}");
        assert!(res["structuredContent"].is_object(), "{t}: {res}");
        assert!(
            res["content"][0]["text"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{t}: {res}"
        );
    }
    for t in r["tool_list"].as_array().expect("tools") {
        assert!(t["outputSchema"].is_object(), "{t}");
        assert_eq!(
            t["inputSchema"]["additionalProperties"],
            Value::Bool(false),
            "{t}"
        );
        assert_eq!(t["annotations"]["openWorldHint"], Value::Bool(false), "{t}");
    }
    let active = ok(&r["tools"]["get_active_window"], "get_active_window");
    assert_eq!(
        active["structuredContent"]["window"]["id"], "w1",
        "{active}"
    );
    assert_eq!(active["structuredContent"]["window"]["title"], "notes.txt");
    let page1 = ok(&r["tools"]["list_windows"], "list_windows")["structuredContent"].clone();
    assert_eq!(
        page1["windows"].as_array().map(Vec::len),
        Some(1),
        "{page1}"
    );
    assert!(page1["nextCursor"].is_string(), "{page1}");
    let page2 = ok(&r["list_windows_page2"], "page 2")["structuredContent"].clone();
    assert_eq!(page2["windows"][0]["id"], "w2", "{page2}");
    assert!(page2.get("nextCursor").is_none(), "{page2}");
    let media = ok(&r["tools"]["get_media_activity"], "get_media_activity");
    let sessions = &media["structuredContent"]["capture_sessions"];
    assert_eq!(sessions[0]["kind"], "microphone", "{media}");
    assert_eq!(sessions[0]["app_id"], "exe:/usr/bin/pw-record", "{media}");
    assert_eq!(sessions[0]["active"], false, "{media}");
    assert!(
        media["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("exe:/usr/bin/pw-record (microphone) from")),
        "{media}"
    );
    let sent = ok(&r["tools"]["send_notification"], "send_notification");
    assert!(sent["structuredContent"]["id"].is_u64(), "{sent}");
    assert_eq!(ok(&r["bad_args"], "bad args")["isError"], Value::Bool(true));
    assert_eq!(
        r["unknown_tool"]["error"]["code"], -32602,
        "{}",
        r["unknown_tool"]
    );

    let uris: Vec<&str> = r["resource_list"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for u in [
        "context://snapshot",
        "context://windows",
        "context://windows/active",
        "context://media",
        "context://session",
        "context://power",
        "context://network",
        "context://notifications",
    ] {
        assert!(uris.contains(&u), "{u} not listed: {uris:?}");
        let contents = &ok(&r["resources"][u], u)["contents"];
        let mimes: Vec<&str> = contents
            .as_array()
            .expect("contents")
            .iter()
            .filter_map(|c| c["mimeType"].as_str())
            .collect();
        assert_eq!(mimes, ["application/json", "text/markdown"], "{u}");
        let json: Value = serde_json::from_str(contents[0]["text"].as_str().expect("text"))
            .expect("JSON resource");
        assert!(json.is_object(), "{u}");
    }
    // The vocabulary: the JSON-LD @context as installed.
    assert!(uris.contains(&"context://vocabulary"), "{uris:?}");
    let vocabulary = &ok(&r["resources"]["context://vocabulary"], "vocabulary")["contents"];
    assert_eq!(vocabulary[0]["mimeType"], "application/ld+json");
    assert_eq!(
        vocabulary[0]["text"].as_str(),
        Some(include_str!("../../dbus-interfaces/contextd.jsonld"))
    );
    assert_eq!(r["templates"][0]["uriTemplate"], "context://windows/{id}");
    assert_eq!(
        r["templates"][1]["uriTemplate"],
        "context://history{?since,until,app}"
    );
    assert_eq!(
        r["templates"][2]["uriTemplate"],
        "context://provided/{kind}"
    );
    assert_eq!(
        r["templates"][3]["uriTemplate"],
        "context://calendar/events/{id}"
    );
    let history = &ok(&r["history"], "context://history")["contents"];
    let timeline: Value =
        serde_json::from_str(history[0]["text"].as_str().expect("text")).expect("JSON");
    let events = timeline["events"].as_array().expect("events");
    assert!(
        events.iter().any(|e| e["kind"] == "focus"
            && e["app_id"] == "org.gnome.TextEditor"
            && e["title"] == "notes.txt"),
        "{timeline}"
    );
    assert!(
        events.iter().all(|e| e["app_id"] == "org.gnome.TextEditor"),
        "app= filters: {timeline}"
    );
    assert_eq!(history[1]["mimeType"], "text/markdown");
    assert_eq!(
        r["history_bad_date"]["error"]["code"], -32602,
        "{}",
        r["history_bad_date"]
    );
    assert!(
        r["history_bad_date"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("RFC 3339")),
        "{}",
        r["history_bad_date"]
    );
    assert_eq!(
        ok(&r["complete_app"], "complete app")["completion"]["values"],
        serde_json::json!(["org.gnome.TextEditor"])
    );
    assert!(
        ok(&r["window_w1"], "window w1")["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("notes.txt"))
    );
    // 2026-07-28 reports a missing resource as invalid params (SEP-2164;
    // rmcp maps it), older versions as -32002.
    let not_found = if legacy { -32002 } else { -32602 };
    assert_eq!(
        r["window_gone"]["error"]["code"], not_found,
        "{}",
        r["window_gone"]
    );
    assert_eq!(r["no_such_resource"]["error"]["code"], not_found);

    assert_eq!(
        r["prompt_list"],
        serde_json::json!(["what_am_i_doing", "privacy_report", "whats_next"])
    );
    let prompt = ok(&r["prompt"], "prompt")["messages"][0]["content"]["text"]
        .as_str()
        .expect("prompt text")
        .to_owned();
    assert!(prompt.contains("notes.txt"), "{prompt}");
    assert!(ok(&r["privacy"], "privacy report")["messages"].is_array());
    // The week comes from the timeline: the replayed microphone is in it.
    let week = ok(&r["privacy_week"], "privacy report 7d")["messages"][0]["content"]["text"]
        .as_str()
        .expect("text")
        .to_owned();
    assert!(
        week.contains("last 7 days, from the timeline")
            && week.contains("exe:/usr/bin/pw-record (microphone) from"),
        "{week}"
    );
    assert_eq!(
        ok(&r["complete"], "complete")["completion"]["values"],
        serde_json::json!(["brief"])
    );
    assert_eq!(
        ok(&r["complete_window"], "complete window")["completion"]["values"],
        serde_json::json!(["w1", "w2"])
    );
    if legacy {
        ok(&r["ping"], "ping");
        ok(&r["set_level"], "logging/setLevel");
        ok(&r["subscribe"], "subscribe");
        ok(&r["unsubscribe"], "unsubscribe");
    } else {
        assert_eq!(
            r["honored"]["resourceSubscriptions"],
            serde_json::json!(["context://windows/active"])
        );
    }
    assert!(
        r["updated"]["uri"] == "context://windows/active"
            || r["updated"]["params"]["uri"] == "context://windows/active",
        "no resources/updated after the focus change: {}",
        r["updated"]
    );
    let after = ok(&r["after_focus"], "read after focus")["contents"][0]["text"]
        .as_str()
        .expect("text")
        .to_owned();
    assert!(after.contains("\"id\":\"w2\""), "{after}");
}

/// What the host learnt about the server: `initialize` (legacy) or
/// `server/discover` (auto picks 2026-07-28).
pub fn check_server(server: &Value, mode: &str) {
    if mode == "legacy" {
        assert_eq!(server["serverInfo"]["name"], "contextd", "{server}");
        assert_eq!(server["protocolVersion"], "2025-11-25", "{server}");
    } else {
        assert_eq!(
            server["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "contextd",
            "{server}"
        );
        assert_eq!(
            server["supportedVersions"],
            serde_json::json!([
                "2024-11-05",
                "2025-03-26",
                "2025-06-18",
                "2025-11-25",
                "2026-07-28"
            ]),
            "{server}"
        );
    }
}

async fn full(mode: &'static str) {
    let bus = Bus::start();
    let home = Home::new();
    home.write_policy(&[(&python_app_id(), &["*"])]);
    let _notifications = Notifications::start(&bus).await;
    let mut replay = Replay::new(&home);
    // Before the start (the FIFO keeps it), a microphone that started and
    // stopped: a capture session for get_media_activity (core::captures).
    replay.send(&serde_json::json!({"type": "stream", "stream": {"id": "pw-1-5", "kind": "microphone", "app_id": "exe:/usr/bin/pw-record", "pid": 42, "state": "running"}}).to_string());
    replay.send(&serde_json::json!({"type": "stream-removed", "id": "pw-1-5"}).to_string());
    let _d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
    let report = run_client(
        &bus,
        &home,
        &[
            "--transport",
            "stdio",
            "--mode",
            mode,
            "--fifo",
            &replay.arg(),
        ],
    );
    check_server(&report["server"], mode);
    check_full(&report, mode == "legacy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_host_over_stdio_reads_everything_it_is_granted() {
    with_timeout(150, full("legacy")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_host_over_stdio_on_2026_07_28_listens_for_updates() {
    with_timeout(150, full("auto")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_without_grant_is_refused_sees_no_updates_and_hears_of_a_new_grant() {
    with_timeout(150, async {
        let bus = Bus::start();
        let home = Home::new();
        // Someone else is granted; the Python host is not.
        home.write_policy(&[("org.example.Other", &["*"])]);
        let mut replay = Replay::new(&home);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
        let grant = format!(
            "[[grant]]\napp = \"org.example.Other\"\ncategories = [\"*\"]\n\n[[grant]]\napp = {:?}\ncategories = [\"windows\"]\n",
            python_app_id()
        );
        let policy = home.policy_path().display().to_string();
        let r = run_client(
            &bus,
            &home,
            &[
                "--transport", "stdio", "--scenario", "denied", "--fifo", &replay.arg(),
                "--policy", &policy, "--grant", &grant,
            ],
        );
        let tool = &r["tool"]["ok"];
        assert_eq!(tool["isError"], Value::Bool(true), "{r}");
        let text = tool["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains(&python_app_id()) && text.contains("windows") && text.contains("[[grant]]"),
            "the refusal must say who, what and how to grant: {text}"
        );
        assert_eq!(r["read"]["error"]["code"], -32004, "{}", r["read"]);
        assert_eq!(r["history"]["error"]["code"], -32004, "{}", r["history"]);
        assert_eq!(r["subscribe_active"]["error"]["code"], -32004);
        assert_eq!(
            r["resource_list"],
            serde_json::json!(["context://snapshot", "context://vocabulary"])
        );
        let snap: Value = serde_json::from_str(
            r["snapshot"]["ok"]["contents"][0]["text"].as_str().unwrap_or("{}"),
        )
        .expect("snapshot JSON");
        assert!(snap.get("windows").is_none(), "{snap}");
        assert!(snap["withheld"].as_array().is_some_and(|w| w.contains(&"windows".into())));
        assert_eq!(r["focused"], "w2");
        assert_eq!(r["leaked"], serde_json::json!([]), "updated leaked to a host without the grant");
        assert_eq!(
            r["list_changed"]["method"], "notifications/resources/list_changed",
            "{}",
            r["list_changed"]
        );
        let after: Vec<&str> = r["resource_list_after"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(after.contains(&"context://windows/active"), "{after:?}");
        assert!(r["read_after"]["ok"].is_object(), "{}", r["read_after"]);
    })
    .await;
}

/// A document an app published, as the replay source takes it (typed by
/// the test: replayed entries skip the broker's vocabulary check).
fn document(name: &str) -> String {
    json!({"type": "provided", "context": {
        "app_id": DOCS, "kind": "document",
        "data": {"@type": "DigitalDocument", "name": name, "url": "file:///home/u/notes.odt"}
    }})
    .to_string()
}

const DOCS: &str = "exe:/usr/bin/docs";

/// Grant `categories` to the Python host and to this test (whose D-Bus
/// `ListCategories` says when the daemon applied the policy).
async fn grant(home: &Home, ctx: &Context1Proxy<'_>, categories: &[&str]) {
    let (me, host) = (my_app_id(), python_app_id());
    home.write_policy(&[(me.as_str(), categories), (host.as_str(), categories)]);
    eventually(10, "the policy applied", || async {
        let cats = ctx.list_categories().await.ok()?;
        cats.iter()
            .map(contextd::client::json::dict_to_json)
            .all(|c| {
                let name = c["name"].as_str().unwrap_or("");
                !name.starts_with("provided.")
                    || c["allowed"].as_bool() == Some(categories.contains(&name))
            })
            .then_some(())
    })
    .await;
}

/// The `provided` scenario of the Python host: reads, then `changes`
/// written to the replay FIFO one by one, each awaited as an `updated`
/// (or, without `updates`, for 2 s in vain).
fn provided_run(
    bus: &Bus,
    home: &Home,
    replay: &Replay,
    mode: &str,
    changes: &[String],
    updates: bool,
) -> Value {
    let changes = serde_json::to_string(changes).expect("changes");
    let fifo = replay.arg();
    let mut args = vec!["--transport", "stdio", "--scenario", "provided"];
    args.extend(["--mode", mode, "--fifo", &fifo, "--changes", &changes]);
    if !updates {
        args.push("--no-updates");
    }
    tokio::task::block_in_place(|| run_client(bus, home, &args))
}

/// The entries of a read of context://provided/document.
fn entries(r: &Value) -> Vec<Value> {
    let text = ok(r, "read")["contents"][0]["text"]
        .as_str()
        .unwrap_or("{}");
    let v: Value = serde_json::from_str(text).expect("JSON");
    v["provided"].as_array().cloned().unwrap_or_default()
}

/// The entry of `app` among `entries`.
fn of(entries: &[Value], app: &str) -> Value {
    entries
        .iter()
        .find(|e| e["app_id"] == app)
        .cloned()
        .unwrap_or_else(|| panic!("no entry of {app} in {entries:?}"))
}

fn text_of<'a>(r: &'a Value, what: &str) -> &'a str {
    ok(r, what)["content"][0]["text"].as_str().unwrap_or("")
}

/// What apps publish (`provided.KIND`) over MCP: a host granted
/// `provided.document` reads it through the resource, the tool, the
/// snapshot and what_am_i_doing, hears of each change and of its removal
/// (resources/subscribe and subscriptions/listen), and is offered the kinds
/// it may see; a host without the grant gets refusals and nothing of it.
/// One entry is published over Provider1 by the Python example provider
/// (the broker types it), the other replayed, so that the host's run can
/// change it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provided_context_reaches_only_a_granted_host_and_its_changes_are_sent() {
    with_timeout(300, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut replay = Replay::new(&home);
        replay.send(&document("CANARY-DOC-1.odt"));
        // An app's own kind nobody is granted at first: neither its data
        // nor its name may reach a host that cannot see it.
        let zebra = json!({"type": "provided", "context": {
            "app_id": "exe:/usr/bin/zebra", "kind": "x-zebraproject",
            "data": {"name": "ZEBRA-SECRET"}
        }});
        replay.send(&zebra.to_string());
        let _d = Daemon::start(&bus, &home, &["--replay", &replay.arg()]).await;
        wait_socket(&home);
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("Context1");
        // The publisher: the Python example provider (PyGObject, as a GTK
        // app writes it), alive for the whole test.
        let mut provider = std::process::Command::new(python())
            .arg(crate::common::root().join("examples/provider.py"))
            .args(["--name", "CANARY-DOC-PUBLISHED.odt", "--ignore-stdin"])
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("examples/provider.py");
        {
            use std::io::BufRead;
            let mut line = String::new();
            std::io::BufReader::new(provider.stdout.as_mut().expect("stdout"))
                .read_line(&mut line)
                .expect("the provider's first line");
            assert!(line.starts_with("published document"), "{line}");
        }
        // The publisher, known by the script its Python runs.
        let me = python_script_id(&provider_script());
        let seeds = json!([
            "document",
            "selection",
            "task",
            "location",
            "event",
            "person"
        ]);
        let updated = "context://provided/document";

        // Without the grant: refused, and nothing of it anywhere.
        grant(&home, &ctx, &["windows"]).await;
        let changes = [document("CANARY-DOC-2.odt")];
        let r = provided_run(&bus, &home, &replay, "legacy", &changes, false);
        let all = r.to_string();
        assert!(
            !all.contains("CANARY-DOC") && !all.contains("ZEBRA-SECRET"),
            "leaked: {r}"
        );
        assert_eq!(r["read"]["error"]["code"], -32004, "{}", r["read"]);
        assert_eq!(ok(&r["tool"], "tool")["isError"], true, "{}", r["tool"]);
        assert!(
            text_of(&r["tool"], "tool").contains("provided.document"),
            "{}",
            r["tool"]
        );
        assert_eq!(
            r["subscribe"]["error"]["code"], -32004,
            "{}",
            r["subscribe"]
        );
        assert_eq!(r["updates"], json!([null]), "updated leaked: {r}");
        // Completion offers the public seed kinds, not the published kind
        // the host may not see.
        assert_eq!(
            ok(&r["complete"], "complete")["completion"]["values"],
            seeds
        );
        // The vocabulary is public.
        let vocabulary = &ok(&r["vocabulary"], "vocabulary")["contents"][0];
        assert_eq!(vocabulary["mimeType"], "application/ld+json");
        assert!(
            r["resource_list"]
                .as_array()
                .is_some_and(|l| l.contains(&json!("context://vocabulary"))),
            "{}",
            r["resource_list"]
        );

        // Granted, handshake era: read, then a change and the removal.
        grant(&home, &ctx, &["provided.document"]).await;
        let removed = json!({"type": "provided-removed", "app_id": DOCS, "kind": "document"});
        let changes = [document("CANARY-DOC-3.odt"), removed.to_string()];
        let r = provided_run(&bus, &home, &replay, "legacy", &changes, true);
        assert!(!r.to_string().contains("ZEBRA-SECRET"), "leaked: {r}");
        let e = entries(&r["read"]);
        assert_eq!(e.len(), 2, "{}", r["read"]);
        let replayed = of(&e, DOCS);
        assert_eq!(replayed["kind"], "document");
        assert_eq!(replayed["data"]["@type"], "DigitalDocument");
        assert_eq!(replayed["data"]["name"], "CANARY-DOC-2.odt");
        assert!(replayed["updated"].is_string(), "{replayed}");
        // Published without @type: the broker typed it.
        let published = of(&e, &me);
        assert_eq!(published["data"]["@type"], "DigitalDocument", "{published}");
        assert_eq!(published["data"]["name"], "CANARY-DOC-PUBLISHED.odt");
        let markdown = ok(&r["read"], "read")["contents"][1]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            markdown.contains("CANARY-DOC-2.odt") && markdown.contains("[DigitalDocument]"),
            "{markdown}"
        );
        let tool = ok(&r["tool"], "tool");
        assert_ne!(tool["isError"], true, "{tool}");
        let structured = tool["structuredContent"]["provided"].as_array().cloned();
        let published = of(&structured.unwrap_or_default(), &me);
        assert_eq!(published["data"]["@type"], "DigitalDocument", "{tool}");
        for bad in ["tool_bad_kind", "tool_no_kind"] {
            assert_eq!(ok(&r[bad], bad)["isError"], true, "{}", r[bad]);
            let text = text_of(&r[bad], bad);
            assert!(
                text.contains("document") && text.contains("x-NAME"),
                "{bad}: {text}"
            );
        }
        let bad_read = &r["read_bad_kind"]["error"];
        assert_eq!(bad_read["code"], -32002, "{bad_read}");
        assert!(
            bad_read["message"]
                .as_str()
                .is_some_and(|m| m.contains("x-NAME")),
            "{bad_read}"
        );
        assert_eq!(
            ok(&r["complete"], "complete")["completion"]["values"],
            seeds
        );
        let prompt = ok(&r["prompt"], "prompt")["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            prompt.contains("Open document") && prompt.contains("CANARY-DOC-PUBLISHED.odt"),
            "{prompt}"
        );
        // The app's own kind is not even named to a host that may not see
        // it (not in the snapshot's withheld, the prompt, completions).
        assert!(!r.to_string().contains("zebraproject"), "{r}");
        ok(&r["subscribe"], "subscribe");
        assert_eq!(r["updates"], json!([updated, updated]), "{r}");
        let after = &r["reads_after"];
        let changed = of(&entries(&after[0]), DOCS);
        assert_eq!(changed["data"]["name"], "CANARY-DOC-3.odt", "{after}");
        let left = entries(&after[1]);
        assert!(
            left.len() == 1 && left[0]["app_id"] == me,
            "removed: {after}"
        );

        // Granted both kinds, 2026-07-28: listen, and the app's own kind
        // is offered now that the host may see it.
        grant(
            &home,
            &ctx,
            &["provided.document", "provided.x-zebraproject"],
        )
        .await;
        let changes = [document("CANARY-DOC-4.odt")];
        let r = provided_run(&bus, &home, &replay, "auto", &changes, true);
        let mut kinds = seeds.as_array().cloned().unwrap_or_default();
        kinds.push("x-zebraproject".into());
        assert_eq!(
            ok(&r["complete"], "complete")["completion"]["values"],
            Value::Array(kinds)
        );
        assert_eq!(
            r["honored"]["resourceSubscriptions"],
            json!([updated]),
            "{r}"
        );
        assert_eq!(r["updates"], json!([updated]), "{r}");
        let back = of(&entries(&r["reads_after"][0]), DOCS);
        assert_eq!(back["data"]["name"], "CANARY-DOC-4.odt", "{back}");
        assert_eq!(back["data"]["@type"], "DigitalDocument");
        let _ = provider.kill();
        let _ = provider.wait();
    })
    .await;
}

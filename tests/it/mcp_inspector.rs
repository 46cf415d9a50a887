//! The MCP Inspector's CLI (`@modelcontextprotocol/inspector`, npm, pinned
//! in scripts/deps.sh; `mcp-inspector --cli ... -- contextctl mcp`) as the
//! host: a second real client besides the Python SDK
//! (tests/it/mcp_minimal_env.rs), on the TypeScript SDK's stdio transport.
//!
//! As there, the host has only `HOME LOGNAME PATH SHELL TERM USER` (the
//! Inspector passes its stdio server what the SDK's
//! `getDefaultEnvironment()` keeps of those, plus `-e` pairs, none here;
//! the test checks what the bridge really got), no daemon runs yet, and
//! the bridge finds the session bus at its default address and activates
//! the daemon there. The Inspector runs once per method, as a script would
//! run it (tests/mcp/inspector.mjs): initialize, list the tools and call
//! every one, list the resources and read every one, list the templates,
//! list the prompts and get every one. Each run is a new Inspector and a
//! new `contextctl mcp`; the first one starts the daemon. Runs in a private
//! mount namespace (tests/mcp/minimal_env.sh) so that /run/user is the
//! test's own.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::{Value, json};

/// Node 22 (`make test` exports CONTEXTD_NODE; `scripts/deps.sh --node`
/// installs it).
fn node() -> PathBuf {
    std::env::var_os("CONTEXTD_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::common::root().join(".tools/node22/bin/node"))
}

/// The Inspector's `mcp-inspector` bin, which runs the CLI with `--cli`.
fn launcher() -> PathBuf {
    crate::common::root().join(
        ".tools/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    )
}

/// The app id the broker gives the Inspector, a `node` process: the bridge
/// is trusted, so its parent is the host, known by its executable.
fn node_app_id() -> String {
    let real = std::fs::canonicalize(node()).expect("node path");
    format!("exe:{}", real.display())
}

const SINCE: &str = "2000-01-01T00:00:00Z";

/// Every tool contextd has (a new one must be added here, with its
/// arguments below if it needs any).
const TOOLS: &[&str] = &[
    "get_snapshot",
    "get_active_window",
    "list_windows",
    "get_media_activity",
    "get_session_state",
    "get_power",
    "get_network",
    "list_notifications",
    "send_notification",
    "get_recent_activity",
    "summarize_time",
    "get_provided_context",
    "list_recent_documents",
    "get_location",
    "get_selection",
    "get_upcoming_events",
    "list_tasks",
];

const RESOURCES: &[&str] = &[
    "context://snapshot",
    "context://windows",
    "context://windows/active",
    "context://media",
    "context://session",
    "context://power",
    "context://network",
    "context://notifications",
    "context://documents/recent",
    "context://location",
    "context://selection",
    "context://calendar/events",
    "context://calendar/tasks",
    "context://vocabulary",
];

#[test]
fn the_inspector_cli_with_the_sdk_default_environment_calls_and_reads_everything() {
    assert!(
        node().exists() && launcher().exists(),
        "Node 22 and the MCP Inspector are missing ({}, {}): run scripts/deps.sh --node",
        node().display(),
        launcher().display()
    );
    let home = Home::new();
    home.deny_undecided();
    home.write_policy(&[(node_app_id().as_str(), &["*"])]);
    // What the tools and prompts that take arguments get: valid values,
    // so that every call can succeed.
    let arguments = json!({
        "tools": {
            "list_windows": {"limit": 100},
            "list_notifications": {"limit": 100},
            "get_recent_activity": {"since": SINCE},
            "summarize_time": {"since": SINCE},
            "get_provided_context": {"kind": "document"},
            "send_notification": {
                "summary": "Hello from the MCP Inspector",
                "body": "sent by tests/it/mcp_inspector.rs",
                "urgency": "low"
            }
        },
        "prompts": {
            "what_am_i_doing": {"detail": "full"},
            "privacy_report": {"period": "7d"},
            "whats_next": {"about": "both"}
        }
    });
    let uid = {
        // SAFETY: getuid(2) has no failure mode.
        unsafe { libc::getuid() }
    };
    let work = tempfile::tempdir().expect("tempdir");
    let manifest = crate::common::root();
    let mut cmd = Command::new("unshare");
    if uid != 0 {
        // Without privileges: a user namespace in which we are root.
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "--"])
        .arg("bash")
        .arg(manifest.join("tests/mcp/minimal_env.sh"))
        .arg(contextd_bin())
        .arg(work.path())
        // The host: the driver that runs the Inspector once per method.
        .arg(node())
        .arg(manifest.join("tests/mcp/inspector.mjs"))
        .arg(launcher())
        .arg(contextctl_bin())
        .arg(arguments.to_string())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in home.envs_for("") {
        // The bus and the runtime directory are the defaults found in the
        // namespace, not the test's.
        if k != "DBUS_SESSION_BUS_ADDRESS" && k != "XDG_RUNTIME_DIR" {
            cmd.env(k, v);
        }
    }
    let started = std::time::Instant::now();
    let (st, out, err) = run_cmd(&mut cmd, 240);
    let elapsed = started.elapsed();
    assert!(
        st.success(),
        "the Inspector driver failed ({st}):\n{err}\n{out}"
    );
    let report: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("report is not JSON ({e}):\n{out}\n{err}"));
    let runs = report["runs"].as_array().expect("runs");
    println!(
        "{} Inspector runs in {:.1} s:",
        runs.len(),
        elapsed.as_secs_f64()
    );
    for r in runs {
        println!(
            "  {:>5} ms  {}",
            r["ms"],
            r["label"].as_str().unwrap_or("?")
        );
    }
    let run = |label: &str| -> &Value {
        let r = runs
            .iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("no run {label:?} in the report:\n{report:#}"));
        // Exit status 0: no JSON-RPC error, no connection error, and for
        // tools/call no result with isError.
        assert_eq!(r["status"], 0, "{label} failed: {r:#}");
        assert!(r["error"].is_null(), "{label}: {r:#}");
        assert!(r["result"].is_object(), "{label}: {r:#}");
        &r["result"]
    };

    // The host really had only the SDK's default environment.
    let environ: BTreeSet<&str> = report["environ"]
        .as_array()
        .unwrap_or_else(|| panic!("no environ in the report:\n{report:#}"))
        .iter()
        .filter_map(|kv| kv.as_str()?.split('=').next())
        .collect();
    assert_eq!(
        environ,
        BTreeSet::from(["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"]),
        "the environment the Inspector gave contextctl mcp"
    );

    for label in ["initialize", "environ"] {
        let init = run(label);
        assert_eq!(init["serverInfo"]["name"], "contextd", "{init:#}");
        for cap in ["tools", "resources", "prompts"] {
            assert!(init["capabilities"][cap].is_object(), "{cap}: {init:#}");
        }
    }

    let tools = run("tools/list")["tools"].as_array().expect("tools");
    let listed: BTreeSet<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for name in TOOLS {
        assert!(listed.contains(name), "{name} not listed: {listed:?}");
    }
    for t in tools {
        let name = t["name"].as_str().expect("tool name");
        // Every argument the schema requires was given.
        for req in t["inputSchema"]["required"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let req = req.as_str().expect("required name");
            assert!(
                arguments["tools"][name].get(req).is_some(),
                "{name} requires {req:?}; give it in `arguments`"
            );
        }
        let res = run(&format!("tools/call {name}"));
        assert_ne!(res["isError"], true, "{name}: {res:#}");
        let content = res["content"].as_array().expect("content");
        assert!(!content.is_empty(), "{name}: {res:#}");
    }
    // The notification reached the desktop's notification server, under
    // the Inspector's identity.
    let log = std::fs::read_to_string(work.path().join("notifications.log"))
        .expect("the notification server was never started");
    assert!(
        log.contains("Notify") && log.contains("Hello from the MCP Inspector"),
        "{log}"
    );

    let resources = run("resources/list")["resources"]
        .as_array()
        .expect("resources");
    let uris: BTreeSet<&str> = resources.iter().filter_map(|r| r["uri"].as_str()).collect();
    for uri in RESOURCES {
        assert!(uris.contains(uri), "{uri} not listed: {uris:?}");
    }
    for uri in &uris {
        let res = run(&format!("resources/read {uri}"));
        let contents = res["contents"].as_array().expect("contents");
        assert!(!contents.is_empty(), "{uri}: {res:#}");
        for c in contents {
            assert_eq!(c["uri"], *uri, "{res:#}");
        }
    }

    let templates = run("resources/templates/list")["resourceTemplates"]
        .as_array()
        .expect("resourceTemplates");
    let templates: BTreeSet<&str> = templates
        .iter()
        .filter_map(|t| t["uriTemplate"].as_str())
        .collect();
    for t in [
        "context://windows/{id}",
        "context://history{?since,until,app}",
        "context://provided/{kind}",
    ] {
        assert!(templates.contains(t), "{t} not listed: {templates:?}");
    }

    let prompts = run("prompts/list")["prompts"].as_array().expect("prompts");
    let names: BTreeSet<&str> = prompts.iter().filter_map(|p| p["name"].as_str()).collect();
    for name in ["what_am_i_doing", "privacy_report", "whats_next"] {
        assert!(names.contains(name), "{name} not listed: {names:?}");
    }
    for name in &names {
        let res = run(&format!("prompts/get {name}"));
        let messages = res["messages"].as_array().expect("messages");
        assert!(!messages.is_empty(), "{name}: {res:#}");
    }
}

//! Every tool's output, in a real run, is what its `outputSchema` says:
//! the schemas are derived from the view types (`mcp::schema`), and this
//! checks the derivation against what the daemon actually sends. A host
//! granted everything, with every category filled (windows, a player with
//! its MPRIS record, a microphone, power, network, a notification, a
//! published document, the session, a recent file, the location, the
//! selection, the timeline), calls every tool and reads every resource of
//! a tool's shape through the Python SDK; `jsonschema` (Draft 2020-12)
//! validates each result against the tool's schema, and each schema
//! against the meta-schema.

use std::process::Command;

use crate::common::*;
use crate::mcp_support::*;
use serde_json::{Value, json};

/// What fills every field a view can have.
fn state() -> Vec<String> {
    vec![
        json!({"type": "stream", "stream": {
            "id": "pw-1", "kind": "playback", "app_id": "exe:/usr/bin/player", "pid": 42,
            "claimed_name": "Player", "claimed_binary": "player", "media_name": "A song",
            "media_role": "Music", "state": "running",
            "player": {"status": "playing", "title": "A song", "artist": "Someone", "url": "https://example.org/a.ogg"}
        }})
        .to_string(),
        json!({"type": "stream", "stream": {"id": "pw-2", "kind": "microphone", "pid": 43, "claimed_name": "Recorder", "state": "running"}}).to_string(),
        json!({"type": "stream", "stream": {"id": "pw-3", "kind": "camera", "app_id": "exe:/usr/bin/cam", "pid": 44, "state": "running"}}).to_string(),
        json!({"type": "stream-removed", "id": "pw-3"}).to_string(),
        json!({"type": "power", "power": {"on_battery": true, "percentage": 55.5, "state": "discharging", "time_to_empty_s": 3600, "warning_level": "none"}}).to_string(),
        json!({"type": "network", "network": {"connectivity": "full", "metered": true, "primary_type": "wifi", "ssid": "Hotel"}}).to_string(),
        json!({"type": "notification", "notification": {"id": "n1", "app_name": "Mail", "summary": "Hi", "body": "Body", "urgency": "critical", "icon": "mail-unread", "actions": ["Reply", "Archive"], "transient": true, "resident": true}}).to_string(),
        json!({"type": "provided", "context": {"app_id": "exe:/usr/bin/docs", "kind": "document", "data": {"@type": "DigitalDocument", "name": "notes.odt"}}}).to_string(),
        json!({"type": "session", "session": {"active": true, "locked": false, "idle": true, "idle_since": "2026-11-23T09:00:00Z"}}).to_string(),
        json!({"type": "do-not-disturb", "dnd": {"on": true, "by": "gnome"}}).to_string(),
        json!({"type": "recent-documents", "documents": [{
            "uri": "file:///home/u/a.txt", "path": "/home/u/a.txt", "name": "a.txt",
            "mime_type": "text/plain", "app": "gedit",
            "modified": "2026-11-23T00:00:00Z", "visited": "2026-11-23T00:00:01Z"
        }]})
        .to_string(),
        json!({"type": "location", "location": {
            "latitude": 47.376954, "longitude": 8.541694, "accuracy": 25.0, "altitude": 408.0,
            "description": "Kaserne", "timestamp": "2026-11-23T09:00:00Z"
        }})
        .to_string(),
        json!({"type": "selection", "selection": {"text": "selected", "mime_type": "text/plain"}})
            .to_string(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_output_validates_against_its_derived_schema() {
    with_timeout(240, async {
        let bus = Bus::start();
        let home = Home::new();
        let script = crate::common::root().join("tests/mcp/validate_outputs.py");
        home.write_policy(&[(python_script_id(&script).as_str(), &["*"])]);
        let _notifications = Notifications::start(&bus).await;
        let mut replay = Replay::new(&home);
        for l in state() {
            replay.send(&l);
        }
        // Focus long enough to be a row of the timeline, then the other.
        replay.send(&window_line("w0", "org.example.Past", "past", true));
        replay.send(r#"{"sleep_ms": 50}"#);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;

        let env: serde_json::Map<String, Value> = home
            .envs(&bus)
            .into_iter()
            .chain([("PATH".into(), std::env::var("PATH").unwrap_or_default())])
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        // The timeline is written in batches: read until it has a row.
        let report = eventually(30, "a timeline row in the report", || async {
            let mut cmd = Command::new(python());
            cmd.arg(&script)
                .arg("--contextctl")
                .arg(contextctl_bin())
                .arg("--env")
                .arg(Value::Object(env.clone()).to_string());
            let r = client_report(cmd);
            let events = r["tools"]["get_recent_activity"]["keys"].clone();
            let activity = &r["resources"]["context://history?since=2000-01-01T00%3A00%3A00Z"];
            (events
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "events"))
                && activity["errors"].as_array().is_some_and(Vec::is_empty))
            .then_some(r)
        })
        .await;

        let mut failures = Vec::new();
        for (name, problems) in report["schemas"].as_object().into_iter().flatten() {
            if problems.as_array().is_none_or(|p| !p.is_empty()) {
                failures.push(format!("schema of {name}: {problems}"));
            }
        }
        let tools = report["tools"].as_object().cloned().unwrap_or_default();
        assert!(tools.len() >= 15, "too few tools: {report}");
        for section in ["tools", "resources"] {
            for (name, r) in report[section].as_object().into_iter().flatten() {
                match r["errors"].as_array() {
                    Some(e) if e.is_empty() => {}
                    _ => failures.push(format!("{section} {name}: {}", r["errors"])),
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        // The state filled what it should (a schema only checks what is there).
        let keys = |t: &str| tools[t]["keys"].to_string();
        for (tool, key) in [
            ("get_snapshot", "media.playback"),
            ("get_snapshot", "location"),
            ("get_media_activity", "capture_sessions"),
            ("list_windows", "nextCursor"),
            ("get_selection", "selection"),
            ("send_notification", "id"),
            ("summarize_time", "apps"),
        ] {
            assert!(keys(tool).contains(key), "{tool}: {}", keys(tool));
        }
    })
    .await;
}

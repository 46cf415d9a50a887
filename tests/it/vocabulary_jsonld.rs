//! The shared vocabulary is real JSON-LD: an entry of every seed kind,
//! published to the broker (org.contextd.Provider1) and read back as it
//! serves it (Context1.GetProvided's `json`, with the `@type` the broker
//! sets), expands with a JSON-LD processor (PyPI pyld, in the venv of
//! `scripts/deps.sh --python`) and the broker's own `Vocabulary` (which is
//! dbus-interfaces/contextd.jsonld) as the `expandContext` to the
//! schema.org IRIs the vocabulary promises.

use crate::common;
use crate::mcp_support;

use std::io::Write;
use std::process::{Command, Stdio};

use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Context1Proxy, Provider1Proxy};
use contextd::internals::vocabulary;
use serde_json::{Map, Value, json};

pub(crate) const SCHEMA: &str = "http://schema.org/";
pub(crate) const OURS: &str = "urn:contextd:vocabulary:";

/// One entry of every seed kind, as an app would publish it.
fn published() -> Vec<(&'static str, Value)> {
    vec![
        (
            "document",
            json!({
                "name": "notes.txt",
                "url": "file:///home/me/notes.txt",
                "encodingFormat": "text/plain",
                "dateModified": "2026-11-23T09:30:00Z"
            }),
        ),
        (
            "selection",
            json!({"text": "héllo wörld", "isPartOf": "file:///home/me/notes.txt"}),
        ),
        (
            "task",
            json!({
                "name": "Write the report",
                "status": "ActiveActionStatus",
                "due": "2026-11-24T17:00:00+01:00"
            }),
        ),
        (
            "location",
            json!({
                "geo": {"latitude": 48.2082, "longitude": 16.3738},
                "name": "Office",
                "accuracy": 25
            }),
        ),
        (
            "event",
            json!({
                "name": "Standup",
                "startDate": "2026-11-23T10:00:00Z",
                "endDate": "2026-11-23T10:15:00Z",
                "location": "Room 4",
                "attendees": ["ana@example.org", {"@type": "Person", "name": "Ben"}]
            }),
        ),
        (
            "person",
            json!({"name": "Ana", "email": "ana@example.org", "channel": "matrix"}),
        ),
    ]
}

/// The entries as the broker serves them, and its `Vocabulary`: each
/// published by this process and read back with GetProvided.
async fn served() -> (Map<String, Value>, String) {
    let entries = published();
    let kinds: Vec<&str> = entries.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        kinds,
        vocabulary::seed_kinds().collect::<Vec<_>>(),
        "a seed kind without an example here"
    );
    let bus = Bus::start();
    let home = Home::new();
    let grants: Vec<String> = kinds.iter().map(|k| format!("provided.{k}")).collect();
    let grants: Vec<&str> = grants.iter().map(String::as_str).collect();
    home.write_policy(&[(&my_app_id(), &grants)]);
    let _d = Daemon::start(&bus, &home, &[]).await;
    let conn = bus.connect().await;
    let provider = Provider1Proxy::new(&conn).await.expect("Provider1");
    let ctx = Context1Proxy::new(&conn).await.expect("Context1");
    let mut out = Map::new();
    for (kind, data) in entries {
        provider
            .publish(kind, &data.to_string())
            .await
            .unwrap_or_else(|e| panic!("publish {kind} {data}: {e}"));
        let records = ctx.get_provided(kind).await.expect("GetProvided");
        assert_eq!(records.len(), 1, "{kind}: {records:?}");
        let record = dict_to_json(&records[0]);
        let text = record["json"].as_str().expect("json is a string");
        let served: Value = serde_json::from_str(text).expect("json is JSON");
        // What the broker serves is what its vocabulary checked and typed.
        let checked = vocabulary::check_entry(kind, &data.to_string()).expect("valid");
        assert_eq!(served, checked, "{kind}");
        assert_eq!(served, record["data"], "{kind}: json and data differ");
        out.insert(kind.to_owned(), served);
    }
    let vocabulary = provider.vocabulary().await.expect("Vocabulary");
    (out, vocabulary)
}

/// `expand.py`'s answer for `entries` with `context` (a JSON-LD context
/// document): {kind: expanded}.
pub(crate) fn expand(entries: &Map<String, Value>, context: &str) -> Map<String, Value> {
    let root = crate::common::root();
    let dir = tempfile::tempdir().expect("tempdir");
    let context_file = dir.path().join("contextd.jsonld");
    std::fs::write(&context_file, context).expect("write the context");
    let python = mcp_support::python();
    let (st, _o, e) = common::run_cmd(Command::new(&python).args(["-c", "import pyld"]), 30);
    assert!(
        st.success(),
        "{} has no pyld: run scripts/deps.sh --python (or set CONTEXTD_PYTHON): {e}",
        python.display()
    );
    let mut child = Command::new(&python)
        .arg(root.join("tests/provider/expand.py"))
        .arg(&context_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn expand.py");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(Value::Object(entries.clone()).to_string().as_bytes())
        .expect("write entries");
    let out = child.wait_with_output().expect("expand.py");
    assert!(
        out.status.success(),
        "expand.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).expect("expand.py prints JSON") {
        Value::Object(m) => m,
        other => panic!("expand.py printed {other}"),
    }
}

/// The one node an entry expands to.
pub(crate) fn node<'a>(expanded: &'a Map<String, Value>, kind: &str) -> &'a Map<String, Value> {
    match &expanded[kind] {
        Value::Array(nodes) if nodes.len() == 1 => nodes[0].as_object().expect("a node"),
        other => panic!("{kind} expanded to {other}"),
    }
}

/// The values of property `iri` of `node`.
fn values<'a>(node: &'a Map<String, Value>, iri: &str) -> &'a [Value] {
    match node.get(iri) {
        Some(Value::Array(v)) => v,
        _ => panic!(
            "no {iri} in {}",
            serde_json::to_string_pretty(node).unwrap_or_default()
        ),
    }
}

/// The single `@value` of property `iri`, and its `@type` if it has one.
fn literal<'a>(node: &'a Map<String, Value>, iri: &str) -> (&'a Value, Option<&'a str>) {
    let v = values(node, iri);
    assert_eq!(v.len(), 1, "{iri}: {v:?}");
    (&v[0]["@value"], v[0].get("@type").and_then(Value::as_str))
}

/// The single `@id` of property `iri`.
fn id<'a>(node: &'a Map<String, Value>, iri: &str) -> &'a str {
    let v = values(node, iri);
    assert_eq!(v.len(), 1, "{iri}: {v:?}");
    v[0]["@id"]
        .as_str()
        .unwrap_or_else(|| panic!("{iri} is not a node reference: {}", v[0]))
}

fn s(t: &str) -> String {
    format!("{SCHEMA}{t}")
}

fn types(node: &Map<String, Value>) -> Vec<&str> {
    node["@type"]
        .as_array()
        .expect("@type list")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// Every key of every node (nested ones too) is an absolute IRI or a
/// keyword: nothing of the entry was dropped or left relative.
pub(crate) fn assert_all_iris(v: &Value, path: &str) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| assert_all_iris(x, path)),
        Value::Object(m) => {
            for (k, x) in m {
                assert!(
                    k.starts_with('@') || k.starts_with(SCHEMA) || k.starts_with(OURS),
                    "{path}: key {k} is no schema.org or contextd IRI"
                );
                assert_all_iris(x, &format!("{path}/{k}"));
            }
        }
        _ => {}
    }
}

/// Each served entry keeps every field it was published with: expansion
/// drops keys it cannot map, so count them.
pub(crate) fn assert_nothing_dropped(served: &Map<String, Value>, expanded: &Map<String, Value>) {
    for (kind, entry) in served {
        let n = node(expanded, kind);
        let fields = entry.as_object().expect("object").len();
        assert_eq!(
            n.len(),
            fields,
            "{kind}: {fields} fields served, {} expanded: {}",
            n.len(),
            serde_json::to_string_pretty(n).unwrap_or_default()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_seed_kind_expands_to_schema_org() {
    let (served, context) = with_timeout(60, served()).await;
    let installed =
        std::fs::read_to_string(crate::common::root().join("dbus-interfaces/contextd.jsonld"))
            .expect("contextd.jsonld");
    assert_eq!(
        context, installed,
        "the Vocabulary property is not the file"
    );
    let expanded = expand(&served, &context);
    for (kind, nodes) in &expanded {
        assert_all_iris(nodes, kind);
    }
    assert_nothing_dropped(&served, &expanded);

    let doc = node(&expanded, "document");
    assert_eq!(types(doc), [s("DigitalDocument")]);
    assert_eq!(literal(doc, &s("name")).0, "notes.txt");
    assert_eq!(id(doc, &s("url")), "file:///home/me/notes.txt");
    assert_eq!(literal(doc, &s("encodingFormat")).0, "text/plain");
    assert_eq!(
        literal(doc, &s("dateModified")),
        (&json!("2026-11-23T09:30:00Z"), Some(s("DateTime").as_str()))
    );

    let sel = node(&expanded, "selection");
    assert_eq!(types(sel), [s("Quotation")]);
    assert_eq!(literal(sel, &s("text")).0, "héllo wörld");
    assert_eq!(id(sel, &s("isPartOf")), "file:///home/me/notes.txt");
    // The broker counted the characters; ours, not schema.org's.
    let len_iri = format!("{OURS}length");
    assert_eq!(
        literal(sel, &len_iri),
        (&json!(11), Some(s("Integer").as_str()))
    );

    let task = node(&expanded, "task");
    assert_eq!(types(task), [s("Action")]);
    assert_eq!(literal(task, &s("name")).0, "Write the report");
    assert_eq!(
        id(task, &s("actionStatus")),
        "http://schema.org/ActiveActionStatus"
    );
    assert_eq!(
        literal(task, &format!("{OURS}due")),
        (
            &json!("2026-11-24T17:00:00+01:00"),
            Some(s("DateTime").as_str())
        )
    );

    let place = node(&expanded, "location");
    assert_eq!(types(place), [s("Place")]);
    let geo = values(place, &s("geo"));
    assert_eq!(geo.len(), 1);
    let geo = geo[0].as_object().expect("geo node");
    assert_eq!(literal(geo, &s("latitude")).0, &json!(48.2082));
    assert_eq!(literal(geo, &s("longitude")).0, &json!(16.3738));
    assert_eq!(literal(place, &s("name")).0, "Office");
    assert_eq!(
        literal(place, &format!("{OURS}accuracy")),
        (&json!(25), Some(s("Number").as_str()))
    );

    let event = node(&expanded, "event");
    assert_eq!(types(event), [s("Event")]);
    assert_eq!(literal(event, &s("name")).0, "Standup");
    assert_eq!(
        literal(event, &s("startDate")),
        (&json!("2026-11-23T10:00:00Z"), Some(s("DateTime").as_str()))
    );
    assert_eq!(
        literal(event, &s("endDate")).0,
        &json!("2026-11-23T10:15:00Z")
    );
    assert_eq!(literal(event, &s("location")).0, "Room 4");
    let attendees = values(event, &s("attendee"));
    assert_eq!(attendees.len(), 2, "{attendees:?}");
    assert_eq!(attendees[0]["@value"], "ana@example.org");
    let ben = attendees[1].as_object().expect("attendee node");
    assert_eq!(types(ben), [s("Person")]);
    assert_eq!(literal(ben, &s("name")).0, "Ben");

    let person = node(&expanded, "person");
    assert_eq!(types(person), [s("Person")]);
    assert_eq!(literal(person, &s("name")).0, "Ana");
    assert_eq!(literal(person, &s("email")).0, "ana@example.org");
    assert_eq!(literal(person, &format!("{OURS}channel")).0, "matrix");
}

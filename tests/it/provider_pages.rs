//! Provided context a page at a time, as readers and attackers use it:
//! `Context1.GetProvidedPage` and the MCP tool's `cursor` and
//! `context://provided/{kind}?cursor=` hold every entry exactly once
//! across pages (also while publishers come and go), a cursor not made
//! for the kind is a typed error, consent gates every page (a reader
//! without the grant gets nothing on any page, whatever its cursor), and
//! an app over its budget of bytes held is refused with `LimitExceeded`
//! and keeps what it had.

use crate::common;
use crate::mcp_support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use common::*;
use contextd::client::json::to_json;
use contextd::client::proxy::{Context1Proxy, Provider1Proxy};
use mcp_support::*;
use serde_json::{Value, json};

/// Publishers, each its own app: hard links of contextctl (beside it, so
/// on its file system) running `contextctl publish`, so that the broker
/// sees one app per link. Killed and removed on drop.
struct Publishers {
    dir: tempfile::TempDir,
    children: Vec<(String, Child)>,
}

impl Publishers {
    fn new() -> Publishers {
        let bin = std::fs::canonicalize(contextctl_bin()).expect("contextctl path");
        let parent = bin.parent().expect("parent").to_owned();
        Publishers {
            dir: tempfile::tempdir_in(parent).expect("tempdir"),
            children: Vec::new(),
        }
    }

    /// Start app `name` publishing `kind`; returns its app id.
    fn publish(&mut self, bus: &Bus, name: &str, kind: &str, json: &str) -> String {
        let link: PathBuf = self.dir.path().join(name);
        if !link.exists() {
            std::fs::hard_link(contextctl_bin(), &link)
                .or_else(|_| std::fs::copy(contextctl_bin(), &link).map(|_| ()))
                .expect("link contextctl");
        }
        let child = Command::new(&link)
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .args(["publish", kind, json])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("publish");
        let id = format!(
            "exe:{}",
            std::fs::canonicalize(&link).expect("path").display()
        );
        self.children.push((id.clone(), child));
        id
    }

    /// Stop app `id` (its entry goes with its connection).
    fn stop(&mut self, id: &str) {
        if let Some(pos) = self.children.iter().position(|(a, _)| a == id) {
            let (_, mut c) = self.children.remove(pos);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Publishers {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn app_ids(entries: &[contextd::client::proxy::Dict]) -> Vec<String> {
    entries
        .iter()
        .map(|e| {
            let v = e.get("app_id").map(|v| to_json(v)).expect("app_id");
            v.as_str().expect("a string").to_owned()
        })
        .collect()
}

/// Every page of `kind`, `limit` at a time: the app ids in order.
async fn all_pages(ctx: &Context1Proxy<'_>, kind: &str, limit: u32) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let (entries, next) = ctx
            .get_provided_page(kind, limit, &cursor)
            .await
            .expect("GetProvidedPage");
        assert!(entries.len() <= limit as usize, "a page over its limit");
        ids.extend(app_ids(&entries));
        if next.is_empty() {
            return ids;
        }
        cursor = next;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_hold_every_entry_once_and_odd_cursors_are_invalid_args() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        home.deny_undecided();
        let me = my_app_id();
        home.write_policy(&[(me.as_str(), &["provided.document", "provided.task"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");

        let mut apps = Publishers::new();
        let mut ids: Vec<String> = (0..5)
            .map(|i| {
                apps.publish(
                    &bus,
                    &format!("pager-app-{i}"),
                    "document",
                    &format!(r#"{{"name":"doc {i}"}}"#),
                )
            })
            .collect();
        ids.sort();
        eventually(20, "five documents", || async {
            (ctx.get_provided("document").await.ok()?.len() == 5).then_some(())
        })
        .await;

        // Pages of 2: 2, 2, 1, by app id, each entry once; the records are
        // GetProvided's without `data`: the entry once, as its JSON-LD text.
        assert_eq!(all_pages(&ctx, "document", 2).await, ids);
        assert_eq!(all_pages(&ctx, "document", 1).await, ids);
        let (first, next) = ctx
            .get_provided_page("document", 0, "")
            .await
            .expect("limit 0: the default");
        assert_eq!((app_ids(&first), next.as_str()), (ids.clone(), ""));
        let e = &first[0];
        let mut keys: Vec<&str> = e.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["app_id", "json", "kind", "updated"]);
        assert_eq!(e.get("kind").map(|v| to_json(v)), Some(json!("document")));
        let text = e.get("json").map(|v| to_json(v)).expect("json");
        let parsed: Value = serde_json::from_str(text.as_str().expect("text")).expect("JSON");
        assert_eq!(parsed, json!({"@type": "DigitalDocument", "name": "doc 0"}));
        // The client's reader of pages (`client::page`) reads the same.
        let (records, rnext) = contextd::client::page::provided_page(&ctx, "document", 0, "")
            .await
            .expect("the page, read by client::page");
        assert_eq!(rnext, "");
        let read: Vec<String> = records.iter().map(|r| r.app_id.clone()).collect();
        assert_eq!(read, ids);
        assert_eq!(Some(json!(records[0].json)), Some(text.clone()));
        assert!(records.iter().all(|r| r.kind == "document"));
        assert_eq!(
            Some(json!(records[0].updated)),
            e.get("updated").map(|v| to_json(v))
        );
        // The same text as GetProvided's record of the entry.
        let all = ctx.get_provided("document").await.expect("GetProvided");
        let same = all
            .iter()
            .find(|r| r.get("app_id").map(|v| to_json(v)) == e.get("app_id").map(|v| to_json(v)))
            .expect("the entry in GetProvided");
        assert_eq!(same.get("json").map(|v| to_json(v)), Some(text.clone()));

        // A publisher goes between two pages: what stays is read once,
        // nothing twice.
        let (page1, cursor) = ctx
            .get_provided_page("document", 2, "")
            .await
            .expect("page 1");
        assert_eq!(app_ids(&page1), ids[..2]);
        apps.stop(&ids[2]);
        eventually(10, "the stopped app's entry gone", || async {
            (ctx.get_provided("document").await.ok()?.len() == 4).then_some(())
        })
        .await;
        let mut rest = Vec::new();
        let mut cursor = cursor;
        while !cursor.is_empty() {
            let (entries, next) = ctx
                .get_provided_page("document", 2, &cursor)
                .await
                .expect("next page");
            rest.extend(app_ids(&entries));
            cursor = next;
        }
        assert_eq!(rest, ids[3..]);

        // Cursors not made for the kind, and limits out of range.
        let (_, doc_cursor) = ctx
            .get_provided_page("document", 1, "")
            .await
            .expect("page");
        for (kind, cursor) in [
            ("document", "not a cursor!"),
            ("document", "ZG9jdW1lbnQ"),
            ("task", doc_cursor.as_str()),
        ] {
            assert_eq!(
                error_name(ctx.get_provided_page(kind, 2, cursor).await),
                "org.contextd.Error.InvalidArgs",
                "{kind} {cursor}"
            );
        }
        assert_eq!(
            error_name(ctx.get_provided_page("document", 1001, "").await),
            "org.contextd.Error.InvalidArgs"
        );
        // GetProvided answers as before.
        assert_eq!(
            app_ids(&ctx.get_provided("document").await.expect("GetProvided")),
            [&ids[..2], &ids[3..]].concat()
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_page_for_a_reader_without_the_grant_on_dbus_or_mcp() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        home.deny_undecided();
        let me = my_app_id();
        let grants: &[(&str, &[&str])] = &[
            (me.as_str(), &["provided.document"]),
            ("token:pager", &["provided.document"]),
        ];
        home.write_policy(grants);
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "pager");
        let sid = http_session(addr, &tok);
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");

        let mut apps = Publishers::new();
        let mut ids: Vec<String> = (0..3)
            .map(|i| {
                apps.publish(
                    &bus,
                    &format!("secret-app-{i}"),
                    "document",
                    &format!(r#"{{"name":"secret {i}"}}"#),
                )
            })
            .collect();
        ids.sort();
        eventually(20, "three documents", || async {
            (ctx.get_provided("document").await.ok()?.len() == 3).then_some(())
        })
        .await;

        // Granted: D-Bus and MCP page the same entries with the same cursors.
        let (_, cursor) = ctx
            .get_provided_page("document", 1, "")
            .await
            .expect("page 1");
        let call = |id: u32, params: Value| {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "get_provided_context", "arguments": params}});
            let (code, msgs) = http_call(addr, &tok, &sid, body.to_string().as_bytes());
            assert_eq!(code, 200, "{msgs:?}");
            msgs.last().expect("a reply")["result"].clone()
        };
        let read = |id: u32, uri: &str| {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
                "params": {"uri": uri}});
            let (code, msgs) = http_call(addr, &tok, &sid, body.to_string().as_bytes());
            assert_eq!(code, 200, "{msgs:?}");
            msgs.last().expect("a reply").clone()
        };
        let r = call(1, json!({"kind": "document", "limit": 1}));
        let s = &r["structuredContent"];
        assert_eq!(s["provided"][0]["app_id"], ids[0].as_str(), "{r}");
        assert_eq!(s["nextCursor"], cursor.as_str(), "{r}");
        let r = call(2, json!({"kind": "document", "limit": 2, "cursor": cursor}));
        let got: Vec<&str> = r["structuredContent"]["provided"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["app_id"].as_str())
            .collect();
        assert_eq!(got, ids[1..], "{r}");
        assert!(r["structuredContent"].get("nextCursor").is_none(), "{r}");
        let page_uri = format!(
            "context://provided/document?cursor={}",
            percent_encoding::utf8_percent_encode(&cursor, percent_encoding::NON_ALPHANUMERIC)
        );
        let m = read(3, &page_uri);
        let text = m["result"]["contents"][0]["text"]
            .as_str()
            .expect("JSON text");
        let page: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(page["provided"].as_array().map(Vec::len), Some(2), "{m}");
        assert_eq!(page["provided"][0]["app_id"], ids[1].as_str(), "{m}");
        // A bad cursor: a tool error, and invalid params for the resource.
        let r = call(4, json!({"kind": "document", "cursor": "bogus"}));
        assert_eq!(r["isError"], true, "{r}");
        let m = read(5, "context://provided/document?cursor=bogus");
        assert_eq!(m["error"]["code"], -32602, "{m}");

        // The grant goes: no page, first or later, valid cursor or not,
        // on either side.
        home.write_policy(&[]);
        eventually(10, "the grant gone", || async {
            match ctx.get_provided_page("document", 1, "").await {
                Err(zbus::Error::MethodError(n, _, _))
                    if n.as_str() == "org.contextd.Error.NotAllowed" =>
                {
                    Some(())
                }
                _ => None,
            }
        })
        .await;
        for c in [cursor.as_str(), "bogus"] {
            assert_eq!(
                error_name(ctx.get_provided_page("document", 1, c).await),
                "org.contextd.Error.NotAllowed",
                "{c}"
            );
        }
        assert_eq!(
            error_name(ctx.get_provided("document").await),
            "org.contextd.Error.NotAllowed"
        );
        for (i, args) in [
            json!({"kind": "document"}),
            json!({"kind": "document", "cursor": cursor}),
            json!({"kind": "document", "cursor": "bogus"}),
        ]
        .into_iter()
        .enumerate()
        {
            let r = call(10 + i as u32, args);
            assert_eq!(r["isError"], true, "{r}");
            let text = r.to_string();
            assert!(
                text.contains("Not allowed") && !text.contains("secret"),
                "{r}"
            );
        }
        for (i, uri) in ["context://provided/document", page_uri.as_str()]
            .into_iter()
            .enumerate()
        {
            let m = read(20 + i as u32, uri);
            assert!(m.get("result").is_none() && m.get("error").is_some(), "{m}");
            assert!(!m.to_string().contains("secret"), "{m}");
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_over_its_byte_budget_is_refused_and_keeps_what_it_had() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.deny_undecided();
        let me = my_app_id();
        home.write_policy(&[(me.as_str(), &["provided.*"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");
        let provider = Provider1Proxy::new(&conn).await.expect("provider");

        // About 60 KB each: four fit in 256 KiB with their bookkeeping,
        // a fifth does not.
        let blob = |c: char| format!(r#"{{"blob":"{}"}}"#, c.to_string().repeat(60_000));
        for k in ["a", "b", "c", "d"] {
            provider
                .publish(&format!("x-{k}"), &blob('a'))
                .await
                .expect("within the budget");
        }
        let r = provider.publish("x-e", &blob('e')).await;
        let (name, msg) = match r {
            Err(zbus::Error::MethodError(n, m, _)) => (n.to_string(), m.unwrap_or_default()),
            other => panic!("expected LimitExceeded, got {other:?}"),
        };
        assert_eq!(name, "org.contextd.Error.LimitExceeded", "{msg}");
        assert!(msg.contains("bytes") && msg.contains("262144"), "{msg}");
        // What it had stays; the refused entry is nowhere.
        for k in ["a", "b", "c", "d"] {
            let got = ctx.get_provided(&format!("x-{k}")).await.expect("read");
            assert_eq!(got.len(), 1, "x-{k}");
        }
        assert!(ctx.get_provided("x-e").await.expect("read").is_empty());
        // Replacing an entry with one of the same size fits.
        provider
            .publish("x-a", &blob('b'))
            .await
            .expect("a replacement counts once");
        // Retracting one makes room.
        provider.retract("x-b").await.expect("retract");
        provider
            .publish("x-e", &blob('e'))
            .await
            .expect("room again");
        assert_eq!(ctx.get_provided("x-e").await.expect("read").len(), 1);
    })
    .await
}

//! org.contextd.Provider1 over the bus: an app publishes, readers allowed
//! its kind read it, the entry goes with the app's connection, bad data and
//! floods are typed errors that leave the previous entry as it was, the
//! user refuses an app's publications, and documents reach the timeline.

use crate::common;

use std::time::Duration;

use common::dbusmock::Mock;
use common::*;
use contextd::client::json::{dict_to_json, to_json};
use contextd::client::proxy::{
    Consent1Proxy, Context1Proxy, History1Proxy, Provider1Proxy, Subscription1Proxy,
};
use futures_util::StreamExt;
use serde_json::Value;

fn err(r: zbus::Result<()>) -> (String, String) {
    match r {
        Err(zbus::Error::MethodError(name, msg, _)) => (name.to_string(), msg.unwrap_or_default()),
        other => panic!("expected a D-Bus error, got {other:?}"),
    }
}

/// A session bus, a system bus with polkit allowing management, a home.
async fn buses() -> (Bus, Bus, Mock, Home) {
    let bus = Bus::start();
    let sys = Bus::start();
    let polkit = Mock::start(&sys.address, true, "polkitd").await;
    polkit.set_allowed(&["org.contextd.manage-consent"]).await;
    (bus, sys, polkit, Home::new())
}

async fn start(bus: &Bus, sys: &Bus, home: &Home) -> Daemon {
    Daemon::start_with(bus, home, &[], &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)]).await
}

async fn provided(ctx: &Context1Proxy<'_>, kind: &str) -> Vec<Value> {
    ctx.get_provided(kind)
        .await
        .expect("GetProvided")
        .iter()
        .map(dict_to_json)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_publishes_and_allowed_readers_read_until_it_goes() {
    with_timeout(90, async {
        let (bus, sys, _polkit, home) = buses().await;
        let me = my_app_id();
        home.write_policy(&[(
            me.as_str(),
            &["provided.document", "provided.selection", "history"],
        )]);
        let _d = start(&bus, &sys, &home).await;

        let reader = bus.connect().await;
        let ctx = Context1Proxy::new(&reader).await.expect("ctx");
        let path = ctx
            .subscribe(&["provided.document"])
            .await
            .expect("subscribe");
        let sub = Subscription1Proxy::builder(&reader)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changed = sub.receive_changed().await.expect("changed");
        let mut next_change = async || {
            let sig = tokio::time::timeout(Duration::from_secs(10), changed.next())
                .await
                .expect("a Changed within 10 s")
                .expect("stream open");
            let a = sig.args().expect("args");
            assert_eq!(a.category(), "provided.document");
            Value::Object(
                a.data()
                    .iter()
                    .map(|(k, v)| (k.clone(), to_json(v)))
                    .collect(),
            )
        };

        // The publisher: its own connection, so that closing it is the
        // app exiting.
        let app = bus.connect().await;
        let provider = Provider1Proxy::new(&app).await.expect("provider");
        let vocabulary: Value =
            serde_json::from_str(&provider.vocabulary().await.expect("Vocabulary"))
                .expect("the vocabulary is JSON");
        assert_eq!(vocabulary["@context"]["@vocab"], "http://schema.org/");

        provider
            .publish(
                "document",
                r#"{"name":"plan.odt","url":"file:///home/me/plan.odt","encodingFormat":"application/vnd.oasis.opendocument.text"}"#,
            )
            .await
            .expect("publish");
        let c = next_change().await;
        assert_eq!(c["event"], "opened", "{c}");
        assert_eq!(c["context"]["data"]["@type"], "DigitalDocument", "{c}");

        let got = provided(&ctx, "document").await;
        assert_eq!(got.len(), 1, "{got:?}");
        // The publisher is who its credentials say, not a name it gave.
        assert_eq!(got[0]["app_id"], me.as_str());
        assert_eq!(got[0]["data"]["@type"], "DigitalDocument");
        assert_eq!(got[0]["data"]["name"], "plan.odt");
        let json: Value = serde_json::from_str(got[0]["json"].as_str().expect("json"))
            .expect("json is JSON");
        assert_eq!(json["url"], "file:///home/me/plan.odt");
        let snap = dict_to_json(&ctx.get_snapshot().await.expect("snapshot"));
        assert!(
            snap["provided"]
                .as_array()
                .is_some_and(|p| p.iter().any(|e| e["data"]["name"] == "plan.odt")),
            "{snap}"
        );

        // Bad data: a typed error naming the rule; the entry stays.
        for (kind, data, name, says) in [
            ("document", r#"{"url":"file:///x"}"#, "InvalidArgs", "'name' is required"),
            ("document", r#"{"name":7}"#, "InvalidArgs", "'name' must be a string"),
            ("document", "not json", "InvalidArgs", "not JSON"),
            ("spreadsheet", r#"{"name":"a"}"#, "InvalidArgs", "unknown kind"),
        ] {
            let (n, m) = err(provider.publish(kind, data).await);
            assert_eq!(n, format!("org.contextd.Error.{name}"), "{kind} {data}: {m}");
            assert!(m.contains(says), "{kind} {data}: {m}");
        }
        let huge = format!(r#"{{"name":"{}"}}"#, "x".repeat(1024 * 1024));
        let (n, m) = err(provider.publish("document", &huge).await);
        assert_eq!(n, "org.contextd.Error.InvalidArgs");
        assert!(m.contains("at most 65536"), "{m}");
        assert_eq!(provided(&ctx, "document").await[0]["data"]["name"], "plan.odt");

        // A kind the reader was not granted: refused, nothing of it shown.
        tokio::time::sleep(Duration::from_millis(1100)).await; // the bucket refills
        provider
            .publish("task", r#"{"name":"Write the report","status":"ActiveActionStatus"}"#)
            .await
            .expect("publish task");
        assert_eq!(
            error_name(ctx.get_provided("task").await),
            "org.contextd.Error.NotAllowed",
            "a kind not granted is refused (only explicit grants count here)"
        );

        // A storm: at most 10 a second, then LimitExceeded; the entry stays.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let mut storm = Vec::new();
        for i in 0..30 {
            storm.push(
                provider
                    .publish("selection", &format!(r#"{{"text":"storm {i}"}}"#))
                    .await,
            );
        }
        let ok = storm.iter().filter(|r| r.is_ok()).count();
        assert!((10..30).contains(&ok), "{ok} of 30 passed");
        let (n, m) = err(storm.into_iter().find(|r| r.is_err()).expect("refused"));
        assert_eq!(n, "org.contextd.Error.LimitExceeded");
        assert!(m.contains("10 times a second"), "{m}");
        assert_eq!(provided(&ctx, "document").await[0]["data"]["name"], "plan.odt");

        // 16 kinds at most.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let mut refused = None;
        for i in 0..20 {
            if i % 8 == 7 {
                tokio::time::sleep(Duration::from_millis(1100)).await;
            }
            if let Err(e) = provider.publish(&format!("x-k{i}"), "{}").await {
                refused = Some((i, e));
                break;
            }
        }
        let (i, e) = refused.expect("the 17th kind is refused");
        assert_eq!(
            i, 13,
            "document, task and selection count too: the 17th kind is x-k13"
        );
        let (n, m) = err(Err(e));
        assert_eq!(n, "org.contextd.Error.LimitExceeded");
        assert!(m.contains("16 kinds"), "{m}");

        // Users see who publishes, without the data.
        let consent = Consent1Proxy::new(&reader).await.expect("consent");
        let providers: Vec<Value> = consent
            .list_providers()
            .await
            .expect("ListProviders")
            .iter()
            .map(dict_to_json)
            .collect();
        let mine = providers
            .iter()
            .find(|p| p["app_id"] == me.as_str())
            .expect("listed");
        assert_eq!(mine["allowed"], true);
        let kinds: Vec<&str> = mine["kinds"]
            .as_array()
            .expect("kinds")
            .iter()
            .filter_map(|k| k["kind"].as_str())
            .collect();
        assert!(kinds.contains(&"document") && kinds.contains(&"selection"), "{mine}");
        assert!(!mine.to_string().contains("storm"), "no data in the listing: {mine}");

        // The app exits: its entries go, and subscribers are told.
        while let Ok(Some(c)) =
            tokio::time::timeout(Duration::from_millis(300), async { Some(next_change().await) })
                .await
        {
            let _ = c; // drain the publishes above
        }
        drop(provider);
        drop(app);
        let c = next_change().await;
        assert_eq!(c["event"], "closed", "{c}");
        assert_eq!(c["context"]["data"]["name"], "plan.odt", "{c}");
        assert!(provided(&ctx, "document").await.is_empty());

        // The timeline has the document (its name), not the selection.
        let history = History1Proxy::new(&reader).await.expect("history");
        let events = eventually(10, "the document in the timeline", || async {
            let (events, _) = history
                .query(0, 0, &["provided.document"], &[], 100, "")
                .await
                .ok()?;
            let events: Vec<Value> = events.iter().map(dict_to_json).collect();
            events
                .iter()
                .any(|e| e["kind"] == "document" && e.get("end").is_some())
                .then_some(events)
        })
        .await;
        assert_eq!(events[0]["title"], "plan.odt", "{events:?}");
        let all = history.query(0, 0, &[], &[], 1000, "").await.expect("query");
        assert!(
            !format!("{:?}", all.0).contains("storm"),
            "no selection text in the timeline"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_app_cannot_publish_and_shows_nothing() {
    with_timeout(60, async {
        let (bus, sys, _polkit, home) = buses().await;
        let me = my_app_id();
        home.write_policy(&[(me.as_str(), &["provided.document"])]);
        let _d = start(&bus, &sys, &home).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");
        let provider = Provider1Proxy::new(&conn).await.expect("provider");
        let consent = Consent1Proxy::new(&conn).await.expect("consent");

        provider
            .publish("document", r#"{"name":"secret.txt"}"#)
            .await
            .expect("publish");
        assert_eq!(provided(&ctx, "document").await.len(), 1);

        assert!(consent.set_publishing(&me, false).await.expect("refuse"));
        assert!(
            provided(&ctx, "document").await.is_empty(),
            "refusing removes what it published"
        );
        let (n, m) = err(provider
            .publish("document", r#"{"name":"again.txt"}"#)
            .await);
        assert_eq!(n, "org.contextd.Error.NotAllowed");
        assert!(m.contains("contextctl providers allow"), "{m}");
        assert!(provided(&ctx, "document").await.is_empty());
        let listed: Vec<Value> = consent
            .list_providers()
            .await
            .expect("list")
            .iter()
            .map(dict_to_json)
            .collect();
        let mine = listed
            .iter()
            .find(|p| p["app_id"] == me.as_str())
            .expect("a refused app is listed");
        assert_eq!(mine["allowed"], false, "{mine}");
        assert!(mine.get("refused_since").is_some(), "{mine}");

        // The refusal is stored: it holds across a restart.
        drop(_d);
        wait_for_owner(&bus, false).await;
        let _d = start(&bus, &sys, &home).await;
        let conn = bus.connect().await;
        let provider = Provider1Proxy::new(&conn).await.expect("provider");
        let (n, _) = err(provider
            .publish("document", r#"{"name":"again.txt"}"#)
            .await);
        assert_eq!(n, "org.contextd.Error.NotAllowed");
        let consent = Consent1Proxy::new(&conn).await.expect("consent");
        assert!(consent.set_publishing(&me, true).await.expect("allow"));
        provider
            .publish("document", r#"{"name":"again.txt"}"#)
            .await
            .expect("allowed again");
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");
        assert_eq!(
            provided(&ctx, "document").await[0]["data"]["name"],
            "again.txt"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contextctl_publishes_from_a_shell_and_lists_providers() {
    with_timeout(60, async {
        let (bus, sys, _polkit, home) = buses().await;
        home.write_policy(&[(my_app_id().as_str(), &["provided.task"])]);
        let _d = start(&bus, &sys, &home).await;
        let ctl_id = format!(
            "exe:{}",
            std::fs::canonicalize(contextctl_bin())
                .expect("path")
                .display()
        );
        let mut publisher = std::process::Command::new(contextctl_bin())
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .args(["publish", "task", r#"{"name":"Review the draft"}"#])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("contextctl publish");
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");
        let got = eventually(10, "the shell's task", || async {
            let v = provided(&ctx, "task").await;
            (!v.is_empty()).then_some(v)
        })
        .await;
        assert_eq!(got[0]["app_id"], ctl_id.as_str(), "{got:?}");
        assert_eq!(got[0]["data"]["@type"], "Action");

        let out = std::process::Command::new(contextctl_bin())
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)
            .args(["providers"])
            .output()
            .expect("contextctl providers");
        let table = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && table.contains(&ctl_id)
                && table.contains("task")
                && table.contains("Review the draft")
                && table.contains("allowed"),
            "{table}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );

        // SIGTERM retracts; the entry is gone.
        // SAFETY: kill(2) on our child.
        unsafe { libc::kill(publisher.id() as i32, libc::SIGTERM) };
        let st = publisher.wait().expect("wait");
        assert!(st.success(), "{st}");
        assert!(provided(&ctx, "task").await.is_empty());
    })
    .await;
}

/// JSON-LD keywords change what an entry means to a reader's processor
/// (`@id` makes it about another node, `@included` adds nodes, `@reverse`
/// turns relations around, a nested `@context` redefines the terms or is
/// fetched from anywhere): none but `@type` is taken, at any depth, and the
/// error names the key. Nothing of a refused entry reaches a reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_ld_keywords_that_change_meaning_are_refused() {
    with_timeout(60, async {
        let (bus, sys, _polkit, home) = buses().await;
        let me = my_app_id();
        home.write_policy(&[(me.as_str(), &["provided.document", "provided.event", "provided.x-note"])]);
        let _d = start(&bus, &sys, &home).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");
        let provider = Provider1Proxy::new(&conn).await.expect("provider");
        provider
            .publish("document", r#"{"name":"plan.odt"}"#)
            .await
            .expect("publish");
        let attacks = [
            ("document", r#"{"name":"a","@id":"https://bank.example/account"}"#, "'@id'"),
            (
                "document",
                r#"{"name":"a","@included":[{"@type":"Person","name":"bank"}]}"#,
                "'@included'",
            ),
            ("document", r#"{"name":"a","@reverse":{"author":{"name":"bank"}}}"#, "'@reverse'"),
            (
                "document",
                r#"{"name":"a","url":{"@context":"https://evil.example/ctx.jsonld","name":"bank"}}"#,
                "'url.@context'",
            ),
            (
                "document",
                r#"{"name":"a","url":{"@context":{"name":"http://evil.example/p"},"name":"bank"}}"#,
                "'url.@context'",
            ),
            (
                "event",
                r#"{"name":"a","startDate":"2026-11-23T09:30:00Z","attendees":[{"name":"bank","@id":"mailto:x@bank.example"}]}"#,
                "'attendees[0].@id'",
            ),
            ("x-note", r#"{"@graph":[{"name":"bank"}]}"#, "'@graph'"),
        ];
        for (i, (kind, data, key)) in attacks.into_iter().enumerate() {
            if i % 8 == 7 {
                tokio::time::sleep(Duration::from_millis(1100)).await; // the bucket refills
            }
            let (n, m) = err(provider.publish(kind, data).await);
            assert_eq!(n, "org.contextd.Error.InvalidArgs", "{data}: {m}");
            assert!(m.contains(key), "{data}: the error names {key}: {m}");
        }
        for kind in ["document", "event", "x-note"] {
            let got = provided(&ctx, kind).await;
            assert!(!format!("{got:?}").contains("bank"), "{kind}: {got:?}");
        }
        assert_eq!(provided(&ctx, "document").await[0]["data"]["name"], "plan.odt");
        // `@type` stays a name, nested too.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        provider
            .publish(
                "document",
                r#"{"name":"b","url":{"@type":"WebPage","name":"Start"}}"#,
            )
            .await
            .expect("a nested @type");
        assert_eq!(
            provided(&ctx, "document").await[0]["data"]["url"]["@type"],
            "WebPage"
        );
    })
    .await;
}

/// An entry is its connection's: a second process of the same app (the
/// same executable here) can neither retract nor overwrite it, and its
/// exit leaves it. Readers see the entry published last; when that one
/// goes, the other is shown again. The app's limit on kinds counts all its
/// connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_connection_of_the_app_cannot_touch_anothers_entry() {
    with_timeout(60, async {
        let (bus, sys, _polkit, home) = buses().await;
        let me = my_app_id();
        home.write_policy(&[(me.as_str(), &["provided.document"])]);
        let _d = start(&bus, &sys, &home).await;
        let reader = bus.connect().await;
        let ctx = Context1Proxy::new(&reader).await.expect("ctx");
        let names = || async {
            provided(&ctx, "document")
                .await
                .iter()
                .map(|e| e["data"]["name"].as_str().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        };

        let first = bus.connect().await;
        let a = Provider1Proxy::new(&first).await.expect("provider a");
        a.publish("document", r#"{"name":"first.odt"}"#)
            .await
            .expect("publish a");
        assert_eq!(names().await, ["first.odt"]);

        let second = bus.connect().await;
        let b = Provider1Proxy::new(&second).await.expect("provider b");
        // Retracting what it never published removes nothing.
        b.retract("document").await.expect("retract b");
        assert_eq!(names().await, ["first.odt"], "b retracted a's entry");

        // b publishes: readers see the newest; b retracts: a's again.
        b.publish("document", r#"{"name":"second.odt"}"#)
            .await
            .expect("publish b");
        assert_eq!(names().await, ["second.odt"]);
        b.retract("document").await.expect("retract b");
        assert_eq!(names().await, ["first.odt"], "a's entry was overwritten");

        // b publishes again and exits: a's entry, still published, stays.
        b.publish("document", r#"{"name":"third.odt"}"#)
            .await
            .expect("publish b");
        assert_eq!(names().await, ["third.odt"]);
        drop(b);
        drop(second);
        eventually(10, "a's entry shown again after b exits", || async {
            (names().await == ["first.odt"]).then_some(())
        })
        .await;

        // The limit on kinds counts every connection of the app: a has
        // one, a third connection has 15 more, a fourth gets none.
        let third = bus.connect().await;
        let c = Provider1Proxy::new(&third).await.expect("provider c");
        for i in 0..15 {
            if i % 8 == 5 {
                tokio::time::sleep(Duration::from_millis(1100)).await; // the bucket refills
            }
            c.publish(&format!("x-k{i}"), "{}")
                .await
                .expect("publish c");
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let fourth = bus.connect().await;
        let d = Provider1Proxy::new(&fourth).await.expect("provider d");
        let (n, m) = err(d.publish("x-other", "{}").await);
        assert_eq!(n, "org.contextd.Error.LimitExceeded", "{m}");
        assert!(m.contains("16 kinds"), "{m}");

        // a exits: its entry goes; nothing else of the app is a document.
        drop(a);
        drop(first);
        eventually(10, "a's entry gone with a", || async {
            names().await.is_empty().then_some(())
        })
        .await;
    })
    .await;
}

/// The attack: an app the user never shares publishes its open document
/// over Provider1 anyway. An entry it held before the rule is withdrawn
/// from readers the moment the rule is added (`contextctl privacy add
/// app`), and every publish after is refused (`NotAllowed`, naming the
/// privacy rules) with nothing kept for any reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_shared_app_publishes_nothing_readers_can_see() {
    with_timeout(60, async {
        let (bus, sys, _polkit, home) = buses().await;
        let me = my_app_id();
        home.write_policy(&[(me.as_str(), &["provided.document"])]);
        let _d = start(&bus, &sys, &home).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("ctx");
        let provider = Provider1Proxy::new(&conn).await.expect("provider");
        provider
            .publish("document", r#"{"name":"VAULT-BEFORE.kdbx"}"#)
            .await
            .expect("publish before the rule");
        assert_eq!(provided(&ctx, "document").await.len(), 1);

        let mut cmd = std::process::Command::new(contextctl_bin());
        cmd.args(["privacy", "add", "app", me.as_str()])
            .envs(home.envs_for(&bus.address));
        let (st, out, e) = run_cmd(&mut cmd, 20);
        assert!(st.success(), "contextctl privacy add: {out} {e}");
        eventually(10, "the entry is withdrawn", || async {
            provided(&ctx, "document").await.is_empty().then_some(())
        })
        .await;
        let (n, m) = err(provider
            .publish("document", r#"{"name":"VAULT-AFTER.kdbx"}"#)
            .await);
        assert_eq!(n, "org.contextd.Error.NotAllowed");
        assert!(m.contains("never shared"), "{m}");
        let all = format!("{:?}", provided(&ctx, "document").await);
        assert!(!all.contains("VAULT-"), "{all}");
    })
    .await;
}

//! Subscriptions: changes reach allowed subscribers only, as unicast;
//! an eavesdropper with a match rule gets nothing; a subscriber that leaves
//! is cleaned up; a revoked grant ends the subscription with `Revoked`.

use crate::common;

use std::time::Duration;

use common::*;
use contextd::client::json::to_json;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use serde_json::Value;
use zbus::MatchRule;
use zbus::message::Type as MsgType;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_gets_focus_change_and_eavesdropper_gets_nothing() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let mut replay = Replay::new(&home);
        replay.send(&window_line(
            "w1",
            "org.gnome.TextEditor",
            "notes.txt",
            true,
        ));
        replay.send(&window_line("w2", "org.mozilla.firefox", "News", false));
        let _d = Daemon::start(&bus, &home, &["--replay", &replay.arg()]).await;

        // The eavesdropper: a match rule for every signal from the broker.
        let spy = bus.connect().await;
        let rule = MatchRule::builder()
            .msg_type(MsgType::Signal)
            .sender(BUS_NAME)
            .build()
            .expect("rule");
        let mut spied = zbus::MessageStream::for_match_rule(rule, &spy, None)
            .await
            .expect("match");

        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "windows replayed", || async {
            (ctx.list_windows().await.ok()?.len() == 2).then_some(())
        })
        .await;
        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changed = sub.receive_changed().await.expect("changed stream");
        replay.send(r#"{"type":"focus","id":"w2"}"#);

        let sig = tokio::time::timeout(Duration::from_secs(5), changed.next())
            .await
            .expect("Changed within 5 s")
            .expect("stream open");
        let args = sig.args().expect("args");
        assert_eq!(args.category(), "windows");
        let data: Value = Value::Object(
            args.data()
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        );
        let focus = if data["event"] == "focus" {
            data
        } else {
            // The deactivation of w1 may come first as a window change.
            let sig = tokio::time::timeout(Duration::from_secs(5), changed.next())
                .await
                .expect("focus Changed")
                .expect("open");
            let a = sig.args().expect("args");
            Value::Object(
                a.data()
                    .iter()
                    .map(|(k, v)| (k.clone(), to_json(v)))
                    .collect(),
            )
        };
        assert_eq!(focus["event"], "focus", "{focus}");
        assert_eq!(focus["window"]["id"], "w2");
        assert!(
            focus["window"].get("title").is_none(),
            "title leaked: {focus}"
        );
        // The signal was addressed to the subscriber.
        assert_eq!(
            sig.message().header().destination().map(|d| d.to_string()),
            conn.unique_name().map(|n| n.to_string())
        );

        // The spy saw no Changed: give it time, then check.
        let got = tokio::time::timeout(Duration::from_millis(500), async {
            while let Some(Ok(m)) = spied.next().await {
                if m.header().member().is_some_and(|m| m.as_str() == "Changed") {
                    return Some(m);
                }
            }
            None
        })
        .await;
        assert!(
            !matches!(got, Ok(Some(_))),
            "eavesdropper received a Changed signal"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_that_leaves_is_cleaned_up() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let path = {
            let conn = bus.connect().await;
            let ctx = Context1Proxy::new(&conn).await.expect("proxy");
            let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
            conn.close().await.expect("close");
            path
        };
        let other = bus.connect().await;
        eventually(10, "subscription object removed", || async {
            let p = zbus::fdo::IntrospectableProxy::builder(&other)
                .destination(BUS_NAME)
                .path(path.as_str())
                .build()
                .await
                .ok()?;
            // An unknown object is an error; an empty node is fine too.
            match p.introspect().await {
                Err(_) => Some(()),
                Ok(xml) => (!xml.contains("org.contextd.Subscription1")).then_some(()),
            }
        })
        .await;
        // Only the owner may unsubscribe.
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let stranger = Subscription1Proxy::builder(&other).path(path.clone()).build().await.expect("proxy");
        assert!(matches!(stranger.unsubscribe().await, Err(zbus::Error::MethodError(n, _, _)) if n.as_str() == "org.contextd.Error.NotAllowed"));
        let mine = Subscription1Proxy::builder(&conn).path(path).build().await.expect("proxy");
        mine.unsubscribe().await.expect("owner unsubscribes");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_the_grant_ends_the_subscription_with_revoked() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let mut replay = Replay::new(&home);
        replay.send(&window_line("w1", "org.a.App", "t", true));
        let _d = Daemon::start(&bus, &home, &["--replay", &replay.arg()]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut revoked = sub.receive_revoked().await.expect("stream");
        let mut changed = sub.receive_changed().await.expect("stream");

        home.write_policy(&[]);
        let sig = tokio::time::timeout(Duration::from_secs(5), revoked.next())
            .await
            .expect("Revoked within 5 s")
            .expect("open");
        assert_eq!(sig.args().expect("args").category(), "windows");
        // Nothing after it, even when windows change.
        replay.send(&window_line("w2", "org.b.App", "t2", true));
        let after = tokio::time::timeout(Duration::from_millis(500), changed.next()).await;
        assert!(after.is_err(), "a Changed arrived after Revoked");
    })
    .await
}

/// The user's own rule, added with `contextctl privacy add` while a
/// reader with `windows.titles` is subscribed: its very next change
/// already hides the matching title (no title, `hidden: user-rule`), the
/// title is gone from every read, and later title changes of the window
/// never carry it; another window's title stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_added_while_subscribed_hides_the_title_from_the_next_change() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows", "windows.titles"])]);
        let mut replay = Replay::new(&home);
        replay.send(&window_line(
            "w1",
            "org.gnome.Calc",
            "Quarterly SALARY-4711 review.ods",
            true,
        ));
        replay.send(&window_line(
            "w2",
            "org.gnome.TextEditor",
            "CONTROL-notes.txt",
            false,
        ));
        let _d = Daemon::start(&bus, &home, &["--replay", &replay.arg()]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let titles = || async {
            let ws = ctx.list_windows().await.ok()?;
            Some(
                ws.iter()
                    .map(contextd::client::json::dict_to_json)
                    .map(|w| w.to_string())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        };
        eventually(10, "windows replayed", || async {
            titles()
                .await
                .filter(|t| t.contains("SALARY-4711"))
                .map(|_| ())
        })
        .await;
        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changed = sub.receive_changed().await.expect("changed stream");

        let mut cmd = std::process::Command::new(contextctl_bin());
        cmd.args(["privacy", "add", "title", "salary"])
            .envs(home.envs_for(&bus.address));
        let (st, out, err) = run_cmd(&mut cmd, 20);
        assert!(st.success(), "contextctl privacy add: {out} {err}");

        let sig = tokio::time::timeout(Duration::from_secs(10), changed.next())
            .await
            .expect("a Changed within 10 s of the rule")
            .expect("stream open");
        let data: Value = Value::Object(
            sig.args()
                .expect("args")
                .data()
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        );
        let text = data.to_string();
        assert!(
            !text.contains("SALARY"),
            "the next change carries the title: {text}"
        );
        assert_eq!(data["window"]["id"], "w1", "{text}");
        assert_eq!(data["window"]["hidden"], "user-rule", "{text}");
        assert!(data["window"].get("title").is_none(), "{text}");

        let now = titles().await.expect("ListWindows");
        assert!(!now.contains("SALARY"), "{now}");
        assert!(
            now.contains("CONTROL-notes.txt"),
            "the other title stays: {now}"
        );
        assert!(now.contains("user-rule"), "{now}");

        // The window changes its title again: still never carried.
        replay.send(&window_line(
            "w1",
            "org.gnome.Calc",
            "Quarterly SALARY-4712 final.ods",
            true,
        ));
        replay.send(&window_line(
            "w2",
            "org.gnome.TextEditor",
            "CONTROL-notes-2.txt",
            false,
        ));
        let mut seen = String::new();
        while !seen.contains("CONTROL-notes-2.txt") {
            let sig = tokio::time::timeout(Duration::from_secs(10), changed.next())
                .await
                .expect("Changed of the control within 10 s")
                .expect("open");
            let a = sig.args().expect("args");
            seen.push_str(
                &Value::Object(
                    a.data()
                        .iter()
                        .map(|(k, v)| (k.clone(), to_json(v)))
                        .collect(),
                )
                .to_string(),
            );
        }
        assert!(!seen.contains("SALARY"), "{seen}");

        // Removing the rule: the next title the window sends shows again.
        let mut cmd = std::process::Command::new(contextctl_bin());
        cmd.args(["privacy", "remove", "title", "salary"])
            .envs(home.envs_for(&bus.address));
        let (st, out, err) = run_cmd(&mut cmd, 20);
        assert!(st.success(), "contextctl privacy remove: {out} {err}");
        eventually(
            10,
            "the title shows again once the window sends it",
            || async {
                replay_title(&home);
                titles()
                    .await
                    .filter(|t| t.contains("SALARY-4713"))
                    .map(|_| ())
            },
        )
        .await;
    })
    .await
}

/// Send w1's title once more, through a second writer of the replay FIFO
/// (the test's own writer is borrowed by the closure that polls).
fn replay_title(home: &Home) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .open(home.dir.path().join("replay.fifo"))
    {
        let _ = writeln!(
            f,
            "{}",
            window_line(
                "w1",
                "org.gnome.Calc",
                "Quarterly SALARY-4713 final.ods",
                true
            )
        );
    }
}

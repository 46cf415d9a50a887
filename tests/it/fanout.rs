//! One change fanned out to many subscribers: each gets it once, addressed
//! to it alone, as it may see it. The broker serialises a `Changed` body
//! once for every subscriber that may see the same of a change (issue 33);
//! a body is never reused for a subscriber whose view differs: when the
//! user grants titles, the next change carries them.

use crate::common;

use std::time::Duration;

use common::*;
use contextd::client::json::to_json;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use serde_json::Value;

const SUBSCRIBERS: usize = 12;

/// The next focus change a subscriber hears: its window, and whether the
/// signal was addressed to `me`.
async fn next_focus(
    changed: &mut (impl futures_util::Stream<Item = contextd::client::proxy::Changed> + Unpin),
    me: &str,
) -> Value {
    loop {
        let sig = tokio::time::timeout(Duration::from_secs(10), changed.next())
            .await
            .expect("Changed within 10 s")
            .expect("stream open");
        let args = sig.args().expect("args");
        let data: Value = args
            .data()
            .iter()
            .map(|(k, v)| (k.clone(), to_json(v)))
            .collect();
        assert_eq!(
            sig.message()
                .header()
                .destination()
                .map(|d| d.to_string())
                .as_deref(),
            Some(me),
            "a Changed addressed to another peer"
        );
        if data["event"] == "focus" {
            return data["window"].clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_change_reaches_every_subscriber_as_it_may_see_it() {
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

        let mut subs = Vec::new();
        for _ in 0..SUBSCRIBERS {
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
            let changed = sub.receive_changed().await.expect("changed stream");
            let me = conn.unique_name().expect("unique name").to_string();
            subs.push((conn, sub, changed, me));
        }

        // Without the detail: every subscriber gets the focus, no title.
        replay.send(r#"{"type":"focus","id":"w2"}"#);
        for (_, _, changed, me) in &mut subs {
            let w = next_focus(changed, me).await;
            assert_eq!(w["id"], "w2", "{w}");
            assert!(w.get("title").is_none(), "title without the grant: {w}");
        }

        // The user grants titles: the next change carries them to every
        // subscriber (a body made for the view without titles is not it).
        home.write_policy(&[(&my_app_id(), &["windows", "windows.titles"])]);
        let ctx = Context1Proxy::new(&subs[0].0).await.expect("proxy");
        eventually(10, "titles granted", || async {
            let w = contextd::client::json::dict_to_json(&ctx.get_active_window().await.ok()?);
            w.get("title").is_some().then_some(())
        })
        .await;
        replay.send(r#"{"type":"focus","id":"w1"}"#);
        for (_, _, changed, me) in &mut subs {
            let w = next_focus(changed, me).await;
            assert_eq!(w["id"], "w1", "{w}");
            assert_eq!(w["title"], "notes.txt", "{w}");
        }
    })
    .await
}

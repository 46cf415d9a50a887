//! Details are consented like categories: "Allow once" on a detail
//! (`windows.titles`) gives one read that shows it, then none; every read
//! that shows a detail is in the audit with the member called; a signal
//! (a look) neither uses a one-time grant nor shows what only one allows.
//!
//! Written as the attack on the old broker, where a once-grant on a detail
//! was only looked at: with `windows` granted, one "Allow once" on
//! `windows.titles` gave titles on every later read, and the audit showed
//! only `windows`.

use crate::common;
use crate::mcp_support;

use common::agent::{TestAgent, serve_and_register};
use common::dbusmock::Mock;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use serde_json::Value;

struct Setup {
    bus: Bus,
    home: Home,
    replay: Replay,
    _sys: Bus,
    _polkit: Mock,
    _daemon: Daemon,
}

/// A broker with `windows` (not its titles) granted to this test program
/// by policy.toml, one focused window "notes.txt", and a replay FIFO for
/// more window events.
async fn setup() -> Setup {
    let bus = Bus::start();
    let sys = Bus::start();
    let polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
    let home = Home::new();
    home.write_config(&common::agent::trusting_this_program(
        "[consent]\nprompt_timeout_s = 20\n",
    ));
    home.write_policy(&[(&my_app_id(), &["windows"])]);
    let mut replay = Replay::new(&home);
    replay.send(&window_line(
        "w1",
        "org.gnome.TextEditor",
        "notes.txt",
        true,
    ));
    let daemon = Daemon::start_with(
        &bus,
        &home,
        &["--replay", &replay.arg()],
        &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
    )
    .await;
    Setup {
        bus,
        home,
        replay,
        _sys: sys,
        _polkit: polkit,
        _daemon: daemon,
    }
}

/// The focused text editor window `id` titled `title`, maximized or not.
fn window_with(id: &str, title: &str, maximized: bool) -> String {
    serde_json::json!({"type": "window", "window": {
        "id": id, "app_id": "org.gnome.TextEditor", "title": title,
        "states": {"activated": true, "maximized": maximized}
    }})
    .to_string()
}

async fn register(bus: &Bus, agent: &TestAgent) -> zbus::Connection {
    serve_and_register(&bus.address, agent).await
}

/// `RequestAccess(cats)` and the code of its `Response`.
async fn request(conn: &zbus::Connection, cats: &[&str]) -> u32 {
    common::access::Asked::new(conn, cats, "testing details")
        .await
        .code_within(20)
        .await
}

/// The audit rows of this test program.
async fn audit(conn: &zbus::Connection) -> Vec<Value> {
    Consent1Proxy::new(conn)
        .await
        .expect("proxy")
        .get_audit(0, 0, &my_app_id(), 1000)
        .await
        .expect("GetAudit")
        .iter()
        .map(dict_to_json)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_on_a_detail_gives_one_read_and_the_audit_names_it() {
    with_timeout(120, async {
        let s = setup().await;
        let agent = TestAgent::new("once");
        let _agent_conn = register(&s.bus, &agent).await;
        let app = s.bus.connect().await;
        let ctx = Context1Proxy::new(&app).await.expect("proxy");

        // `windows` is granted: the window, without its title.
        let w = dict_to_json(&ctx.get_active_window().await.expect("windows granted"));
        assert_eq!(w["id"], "w1");
        assert!(w.get("title").is_none(), "no title without the detail: {w}");

        // The user allows the titles once.
        assert_eq!(request(&app, &["windows.titles"]).await, 0, "allowed once");
        assert_eq!(
            agent.asked().last().map(|a| a.categories.clone()),
            Some(vec!["windows.titles".to_owned()])
        );

        // A signal is a look: it neither shows the once-grant nor uses it.
        let sub_path = ctx.subscribe(&["windows"]).await.expect("Subscribe");
        let sub = Subscription1Proxy::builder(&app)
            .path(sub_path)
            .build()
            .await
            .expect("proxy");
        let mut changed = sub.receive_changed().await.expect("Changed stream");
        let mut replay = s.replay;
        // A change it may see (a title change alone is none to it).
        replay.send(&window_with("w1", "draft.txt", true));
        let sig = within(10, "Changed", changed.next()).await.expect("signal");
        let args = sig.args().expect("args");
        let data = dict_to_json(&args.data);
        assert!(data["window"].is_object(), "{data}");
        assert!(
            data["window"].get("title").is_none(),
            "a signal showed a title allowed only once: {data}"
        );

        // One read with the title...
        let w = dict_to_json(&ctx.get_active_window().await.expect("read"));
        assert_eq!(
            w["title"], "draft.txt",
            "the once-grant gives one title: {w}"
        );
        // ...then none, on every way to read windows.
        let w = dict_to_json(&ctx.get_active_window().await.expect("read"));
        assert!(w.get("title").is_none(), "the once-grant was used up: {w}");
        let all: Vec<Value> = ctx
            .list_windows()
            .await
            .expect("ListWindows")
            .iter()
            .map(dict_to_json)
            .collect();
        assert!(all.iter().all(|w| w.get("title").is_none()), "{all:?}");
        let snap = dict_to_json(&ctx.get_snapshot().await.expect("GetSnapshot"));
        assert!(
            !snap.to_string().contains("draft.txt"),
            "the snapshot shows no title: {snap}"
        );

        // The audit shows the detail, with the member that showed it and
        // why it was allowed.
        let rows = eventually(10, "the detail in the audit", || async {
            let rows = audit(&app).await;
            rows.iter()
                .any(|r| r["category"] == "windows.titles")
                .then_some(rows)
        })
        .await;
        let titles: Vec<&Value> = rows
            .iter()
            .filter(|r| r["category"] == "windows.titles")
            .collect();
        assert_eq!(titles.len(), 1, "one read showed titles: {rows:?}");
        assert_eq!(titles[0]["request"], "Context1.GetActiveWindow", "{rows:?}");
        assert_eq!(titles[0]["reason"], "once", "{rows:?}");
        assert_eq!(titles[0]["allowed"], true, "{rows:?}");
        drop(s.home);
    })
    .await;
}

/// "Allow once" answers one call or one subscription: a `Subscribe` that
/// names the detail uses the once-grant, and that subscription (only)
/// carries titles while it lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_that_names_the_detail_holds_its_once_grant() {
    with_timeout(120, async {
        let s = setup().await;
        let agent = TestAgent::new("once");
        let _agent_conn = register(&s.bus, &agent).await;
        let app = s.bus.connect().await;
        let ctx = Context1Proxy::new(&app).await.expect("proxy");
        assert_eq!(request(&app, &["windows.titles"]).await, 0, "allowed once");

        let sub_path = ctx
            .subscribe(&["windows", "windows.titles"])
            .await
            .expect("Subscribe uses the once-grant");
        let sub = Subscription1Proxy::builder(&app)
            .path(sub_path)
            .build()
            .await
            .expect("proxy");
        let mut changed = sub.receive_changed().await.expect("Changed stream");
        let mut replay = s.replay;
        for title in ["one.txt", "two.txt"] {
            replay.send(&window_line("w1", "org.gnome.TextEditor", title, true));
            let sig = within(10, "Changed", changed.next()).await.expect("signal");
            let data = dict_to_json(&sig.args().expect("args").data);
            assert_eq!(data["window"]["title"], title, "{data}");
        }
        // The subscription used it: a read has no title.
        let w = dict_to_json(&ctx.get_active_window().await.expect("read"));
        assert!(w.get("title").is_none(), "{w}");
        let rows = eventually(10, "Subscribe in the audit", || async {
            let rows = audit(&app).await;
            rows.iter()
                .any(|r| r["category"] == "windows.titles" && r["request"] == "Context1.Subscribe")
                .then_some(rows)
        })
        .await;
        assert!(
            !rows
                .iter()
                .any(|r| r["category"] == "windows.titles"
                    && r["request"] == "Context1.GetActiveWindow"),
            "{rows:?}"
        );
        drop(s.home);
    })
    .await;
}

/// The attack on shared renderings (`core::watch::Rendered`): a second
/// connection of the same app subscribes to `windows` alone while the
/// first one's subscription holds the titles. Both receive every change
/// at once, rendered from the same change; the second must never get the
/// first's view, whichever of the two is rendered first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_connection_without_the_detail_never_gets_the_titled_view() {
    with_timeout(120, async {
        let s = setup().await;
        let agent = TestAgent::new("once");
        let _agent_conn = register(&s.bus, &agent).await;
        let app = s.bus.connect().await;
        let ctx = Context1Proxy::new(&app).await.expect("proxy");
        assert_eq!(request(&app, &["windows.titles"]).await, 0, "allowed once");
        let titled = ctx
            .subscribe(&["windows", "windows.titles"])
            .await
            .expect("Subscribe uses the once-grant");
        let titled = Subscription1Proxy::builder(&app)
            .path(titled)
            .build()
            .await
            .expect("proxy");
        let mut with_titles = titled.receive_changed().await.expect("Changed stream");

        let other = s.bus.connect().await;
        let other_ctx = Context1Proxy::new(&other).await.expect("proxy");
        let plain = other_ctx.subscribe(&["windows"]).await.expect("Subscribe");
        let plain = Subscription1Proxy::builder(&other)
            .path(plain)
            .build()
            .await
            .expect("proxy");
        let mut without = plain.receive_changed().await.expect("Changed stream");

        let mut replay = s.replay;
        for i in 0..6 {
            let marker = format!("shared-view-marker-{i}.txt");
            // Maximized and back: a change the second connection may see
            // too (a title change alone is none to it).
            replay.send(&window_with("w1", &marker, i % 2 == 0));
            let sig = within(10, "Changed (titles)", with_titles.next())
                .await
                .expect("signal");
            let data = dict_to_json(&sig.args().expect("args").data);
            assert_eq!(data["window"]["title"], marker.as_str(), "{data}");
            let sig = within(10, "Changed (no titles)", without.next())
                .await
                .expect("signal");
            let data = dict_to_json(&sig.args().expect("args").data);
            assert!(data["window"].is_object(), "{data}");
            assert!(
                !data.to_string().contains("shared-view-marker"),
                "the connection without the detail got a title: {data}"
            );
        }
        drop(s.home);
    })
    .await;
}

/// The attack on kept reply headers (`dbus::context1::ReplyHeaders`):
/// connections of the same app ask for the focused window at once and in
/// turn, one leaves and a new one comes. A header kept for one caller and
/// used for another would address the reply to the wrong connection: the
/// asker would wait for ever and another connection of the app would get
/// its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_get_active_window_reply_goes_to_the_connection_that_asked() {
    with_timeout(120, async {
        let s = setup().await;
        let first = s.bus.connect().await;
        let second = s.bus.connect().await;
        let (a, b) = (
            Context1Proxy::new(&first).await.expect("proxy"),
            Context1Proxy::new(&second).await.expect("proxy"),
        );
        let app_of = |d: &contextd::client::proxy::Dict| dict_to_json(d)["app_id"].clone();
        // The first connection's header is kept before the second asks.
        let w = within(10, "the first connection's read", a.get_active_window())
            .await
            .expect("windows granted");
        assert_eq!(app_of(&w), "org.gnome.TextEditor");
        for round in 0..20 {
            let (x, y) = within(
                10,
                &format!("both connections' reads, round {round}"),
                futures_util::future::join(a.get_active_window(), b.get_active_window()),
            )
            .await;
            for got in [x, y] {
                assert_eq!(app_of(&got.expect("read")), "org.gnome.TextEditor");
            }
        }
        // A connection that left is forgotten; a new one is answered.
        drop((b, second));
        let third = s.bus.connect().await;
        let c = Context1Proxy::new(&third).await.expect("proxy");
        for _ in 0..3 {
            let (x, y) = within(
                10,
                "the first and a new connection's reads",
                futures_util::future::join(a.get_active_window(), c.get_active_window()),
            )
            .await;
            for got in [x, y] {
                assert_eq!(app_of(&got.expect("read")), "org.gnome.TextEditor");
            }
        }
        drop(s.home);
    })
    .await;
}

/// MCP reads through the same service: a tool that shows titles is in the
/// audit under the detail, with the tool called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_that_shows_a_detail_is_audited_under_it() {
    with_timeout(120, async {
        let host = mcp_support::python_app_id();
        let m = Managed::start("", &[(&host, &["windows", "windows.titles"])]).await;
        let report = tokio::task::block_in_place(|| {
            mcp_support::run_client(
                &m.bus,
                &m.home,
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
            got["structuredContent"]["window"]["title"], "notes.txt",
            "{got}"
        );
        let conn = m.bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "the detail in the audit with the tool", || async {
            let rows = consent.get_audit(0, 0, &host, 1000).await.ok()?;
            rows.iter()
                .map(dict_to_json)
                .any(|e| {
                    e["category"] == "windows.titles"
                        && e["request"] == "tools/call get_active_window"
                        && e["channel"] == "mcp-stdio"
                        && e["allowed"] == true
                        && e["reason"] == "policy"
                })
                .then_some(())
        })
        .await;
    })
    .await;
}

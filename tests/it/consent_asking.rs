//! Asking is bounded and fair (issue 47, items 2 and 4), each test written
//! as the attack and asserting that nothing is stored:
//! - one app floods the broker with 30 000 `RequestAccess` calls (real
//!   categories and invented `provided.*` kinds): the invented kinds are
//!   refused, the rest merge into one question, the broker stays small,
//!   and another app's question is the next one shown;
//! - the bound on all open questions: past it a request is refused at
//!   once with `Unavailable`;
//! - three refusals in a row quiet an app: no more questions until the
//!   user changes a decision for it;
//! - a queued question whose category the user denies meanwhile is never
//!   shown;
//! - markup, line breaks and bidirectional controls in an app's reason
//!   and in a desktop entry's name reach the notification server escaped,
//!   on one line, without the controls, bounded; and `ListPending` shows
//!   the reason the same way.
//!
//! The cool-down after Escape is `consent_agents::questions_queue_and_
//! escape_cools_the_app_down`.

use crate::common;

use std::time::Duration;

use common::agent::{AgentBroker, TestAgent, serve_and_register};
use common::dbusmock::Mock;
use common::*;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use futures_util::StreamExt;

const UNAVAILABLE: &str = "org.contextd.Error.Unavailable";
const NOT_FOUND: &str = "org.contextd.Error.NotFound";
const NOT_ALLOWED: &str = "org.contextd.Error.NotAllowed";

/// The most questions the broker keeps open (`core::prompts::MAX_OPEN`).
const MAX_OPEN: usize = 32;

/// The `Request1` objects the broker serves now.
async fn request_objects(conn: &zbus::Connection) -> usize {
    let m = conn
        .call_method(
            Some(BUS_NAME),
            "/org/contextd/Broker1/request",
            Some("org.freedesktop.DBus.Introspectable"),
            "Introspect",
            &(),
        )
        .await;
    match m {
        Ok(m) => {
            let xml: String = m.body().deserialize().expect("xml");
            xml.matches("<node name=").count()
        }
        // No object under it at all.
        Err(_) => 0,
    }
}

/// The pending questions, as a settings panel sees them.
async fn pending(consent: &Consent1Proxy<'_>) -> Vec<serde_json::Value> {
    consent
        .list_pending()
        .await
        .expect("ListPending")
        .iter()
        .map(contextd::client::json::dict_to_json)
        .collect()
}

/// The grants and denies stored for `app`.
async fn stored(consent: &Consent1Proxy<'_>, app: &str) -> Vec<serde_json::Value> {
    consent
        .list_grants()
        .await
        .expect("grants")
        .iter()
        .map(contextd::client::json::dict_to_json)
        .filter(|g| g["app_id"] == app)
        .collect()
}

/// `gdbus` (the program at `exe`, an app of its own: its path is its id)
/// calls `RequestAccess(categories, reason)`, both in GVariant text: its
/// exit status, output and error.
fn gdbus_requests(
    exe: &std::path::Path,
    bus: &str,
    categories: &str,
    reason: &str,
) -> (std::process::ExitStatus, String, String) {
    tokio::task::block_in_place(|| {
        run_cmd(
            std::process::Command::new(exe)
                .args(["call", "--session", "--dest", BUS_NAME])
                .args(["--object-path", PATH])
                .args(["--method", "org.contextd.Context1.RequestAccess"])
                .args([categories, reason])
                .env("DBUS_SESSION_BUS_ADDRESS", bus),
            30,
        )
    })
}

fn gdbus() -> std::path::PathBuf {
    std::fs::canonicalize("/usr/bin/gdbus").expect("gdbus (libglib2.0-bin)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_requests_asks_one_question_and_the_next_app_goes_first() {
    with_timeout(300, async {
        // The limits of Debian's session bus (/usr/share/dbus-1/
        // session.conf): 50 000 calls of one connection may wait for
        // their replies, so a flood reaches the broker.
        let bus = Bus::start_with(
            r#"<limit name="max_replies_per_connection">50000</limit>
  <limit name="max_incoming_bytes">1000000000</limit>
  <limit name="max_outgoing_bytes">1000000000</limit>"#,
        );
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        home.write_config(&common::agent::trusting_this_program(
            "[consent]\nprompt_timeout_s = 300\n",
        ));
        let d = Daemon::start_with(
            &bus,
            &home,
            &[],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let agent = TestAgent::new("hold");
        let _agent_conn = serve_and_register(&bus.address, &agent).await;
        let flood = bus.connect().await;
        let ctx = Context1Proxy::new(&flood).await.expect("proxy");
        let consent = Consent1Proxy::new(&flood).await.expect("proxy");
        let me = my_app_id();

        // The app's first question is on the screen.
        ctx.request_access(&["power"], "first")
            .await
            .expect("RequestAccess");
        eventually(20, "the first question is asked", || async {
            (agent.asked().len() == 1).then_some(())
        })
        .await;
        let before = rss_kib(d.pid());

        // The flood: 30 000 calls over one connection, as fast as the bus
        // takes them; one in four for a kind nobody publishes.
        let real = ["network", "session", "location"];
        let results: Vec<(usize, zbus::Result<zbus::wire::OwnedObjectPath>)> =
            futures_util::stream::iter(0..30_000usize)
                .map(|i| {
                    let ctx = ctx.clone();
                    async move {
                        let invented = format!("provided.invented-{i}");
                        let cat = if i % 4 == 3 {
                            invented.as_str()
                        } else {
                            real[i % 3]
                        };
                        (i, ctx.request_access(&[cat], "flood").await)
                    }
                })
                .buffer_unordered(512)
                .collect()
                .await;
        let mut paths = std::collections::BTreeSet::new();
        for (i, r) in results {
            if i % 4 == 3 {
                assert_eq!(error_name(r), NOT_FOUND, "call {i}: an invented kind");
            } else {
                paths.insert(r.unwrap_or_else(|e| panic!("call {i}: {e}")).to_string());
            }
        }
        // One follow-up question of the app (the one on the screen cannot
        // change under the user's eyes), served by one request object.
        assert_eq!(paths.len(), 1, "{paths:?}");
        let open = pending(&consent).await;
        assert_eq!(open.len(), 2, "{open:#?}");
        assert!(open.iter().all(|p| p["app_id"] == me.as_str()), "{open:#?}");
        let mut union: Vec<String> = open[1]["categories"]
            .as_array()
            .expect("categories")
            .iter()
            .filter_map(|c| c.as_str().map(str::to_owned))
            .collect();
        union.sort();
        assert_eq!(
            union,
            ["location", "network", "session"],
            "the follow-up asks the union"
        );
        assert!(
            request_objects(&flood).await <= 2,
            "request objects pile up"
        );
        let (after, peak) = (rss_kib(d.pid()), status_kib(d.pid(), "VmHWM"));
        eprintln!("broker RSS: {before} KiB before the flood, {after} KiB after, peak {peak} KiB");
        // The release broker starts at 14 MiB and must stay under 25; this
        // is the debug build (larger from the start), so what counts is
        // what the flood adds: under 11 MiB (it added 190 MB when every
        // call queued a question and an object).
        assert!(
            peak.saturating_sub(before) < 11 * 1024,
            "the flood grew the broker from {before} KiB to {peak} KiB"
        );

        // Another app asks once: its question is the next one shown,
        // before the flooding app's follow-up, though that is older.
        let (st, _out, err) = gdbus_requests(&gdbus(), &bus.address, "['network']", "'mine'");
        assert!(st.success(), "{err}");
        eventually(20, "three questions open", || async {
            (pending(&consent).await.len() == 3).then_some(())
        })
        .await;
        assert_eq!(agent.asked().len(), 1, "{:?}", agent.asked());
        agent.release.notify_one();
        let next = eventually(20, "the next question is asked", || async {
            agent.asked().get(1).cloned()
        })
        .await;
        assert_eq!(
            next.app["id"],
            serde_json::json!(format!("exe:{}", gdbus().display())),
            "{next:?}"
        );
        // "Allow once" is no stored decision; nothing else was decided.
        assert!(stored(&consent, &me).await.is_empty());
        assert!(
            stored(&consent, &format!("exe:{}", gdbus().display()))
                .await
                .is_empty()
        );
    })
    .await;
}

/// The bound on all open questions: 32 apps' questions open, the 33rd
/// app's request is refused at once, with nothing queued; once one ends,
/// there is room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_bound_a_request_is_refused_at_once() {
    with_timeout(240, async {
        let s = AgentBroker::new("[consent]\nprompt_timeout_s = 300\n").await;
        let _d = s.start(&[]).await;
        let agent = TestAgent::new("hold");
        let _agent_conn = serve_and_register(&s.bus.address, &agent).await;
        let conn = s.bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");

        // 32 apps: copies of gdbus, each at a path of its own.
        let dir = tempfile::tempdir().expect("tempdir");
        for n in 0..MAX_OPEN {
            let exe = dir.path().join(format!("app{n}"));
            std::fs::copy(gdbus(), &exe).expect("copy gdbus");
            let (st, _out, err) = gdbus_requests(&exe, &s.bus.address, "['power']", "'bounded'");
            assert!(st.success(), "app {n}: {err}");
        }
        eventually(20, "32 questions open", || async {
            (pending(&consent).await.len() == MAX_OPEN).then_some(())
        })
        .await;
        // The 33rd app: refused, nothing queued.
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert_eq!(
            error_name(ctx.request_access(&["power"], "one too many").await),
            UNAVAILABLE
        );
        // A read that would ask is refused the same way.
        assert_eq!(error_name(ctx.get_active_window().await), UNAVAILABLE);
        assert_eq!(pending(&consent).await.len(), MAX_OPEN);
        assert!(
            !pending(&consent)
                .await
                .iter()
                .any(|p| p["app_id"] == my_app_id().as_str())
        );
        // One answered: room for one.
        agent.release.notify_one();
        eventually(20, "one question ended", || async {
            (pending(&consent).await.len() == MAX_OPEN - 1).then_some(())
        })
        .await;
        ctx.request_access(&["power"], "now there is room")
            .await
            .expect("RequestAccess");
        assert!(stored(&consent, &my_app_id()).await.is_empty());
    })
    .await;
}

/// Deny three questions in a row: the app is quiet, its next request is
/// denied without a question; when the user changes a decision for it,
/// it may ask again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_denies_in_a_row_quiet_the_app() {
    with_timeout(120, async {
        let s = AgentBroker::new("[consent]\nprompt_timeout_s = 60\n").await;
        let _d = s.start(&[]).await;
        let agent = TestAgent::new("deny");
        let _agent_conn = serve_and_register(&s.bus.address, &agent).await;
        let app = s.bus.connect().await;
        let ctx = Context1Proxy::new(&app).await.expect("proxy");
        let consent = Consent1Proxy::new(&app).await.expect("proxy");
        let me = my_app_id();

        for cat in ["power", "network", "session"] {
            assert_eq!(crate::consent_prompts::request(&app, &[cat]).await, 1);
        }
        assert_eq!(agent.asked().len(), 3);
        // A fourth category: denied at once, no question.
        assert_eq!(
            crate::consent_prompts::request(&app, &["location"]).await,
            1
        );
        assert_eq!(error_name(ctx.subscribe(&["location"]).await), NOT_ALLOWED);
        assert!(pending(&consent).await.is_empty());
        assert_eq!(agent.asked().len(), 3, "asked while quiet");
        assert!(
            !stored(&consent, &me)
                .await
                .iter()
                .any(|g| g["category"] == "location"),
            "the quiet period is no decision"
        );
        // The user changes a decision for the app: it may ask again.
        consent
            .set_grant(&me, "power", "allow", 0)
            .await
            .expect("SetGrant");
        agent.set("once", Duration::ZERO);
        assert_eq!(
            crate::consent_prompts::request(&app, &["location"]).await,
            0
        );
        assert_eq!(agent.asked().len(), 4);
    })
    .await;
}

/// A question waiting behind another, whose category the user denies in
/// a panel meanwhile, is never shown: its requester hears the denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_question_decided_meanwhile_is_never_shown() {
    with_timeout(120, async {
        let s = AgentBroker::new("[consent]\nprompt_timeout_s = 60\n").await;
        let _d = s.start(&[]).await;
        let agent = TestAgent::new("hold");
        let _agent_conn = serve_and_register(&s.bus.address, &agent).await;
        let app = s.bus.connect().await;
        let consent = Consent1Proxy::new(&app).await.expect("proxy");
        let me = my_app_id();

        let ctx = Context1Proxy::new(&app).await.expect("proxy");
        ctx.request_access(&["power"], "first")
            .await
            .expect("RequestAccess");
        eventually(20, "the first question is asked", || async {
            (agent.asked().len() == 1).then_some(())
        })
        .await;
        // The second waits; its Response is listened for.
        let second = {
            let app = app.clone();
            tokio::spawn(async move { crate::consent_prompts::request(&app, &["network"]).await })
        };
        eventually(20, "two questions open", || async {
            (pending(&consent).await.len() == 2).then_some(())
        })
        .await;
        consent
            .set_grant(&me, "network", "deny", 0)
            .await
            .expect("SetGrant");
        agent.release.notify_one();
        assert_eq!(
            second.await.expect("join"),
            1,
            "denied by the user's decision"
        );
        eventually(20, "nothing open", || async {
            pending(&consent).await.is_empty().then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(agent.asked().len(), 1, "shown: {:?}", agent.asked());
        // Only the user's own decision is stored.
        let decided: Vec<_> = stored(&consent, &me).await;
        assert_eq!(decided.len(), 1, "{decided:?}");
        assert_eq!(decided[0]["origin"], "manage");
    })
    .await;
}

/// Markup, line breaks and a right-to-left override in an app's reason
/// and in the name its desktop entry gives: the notification server
/// (announcing `body-markup`, as python-dbusmock's does) gets them
/// escaped, on one line, without the override, bounded, with the app's id
/// beside the name; `ListPending` shows the same reason cleaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_text_from_apps_is_escaped_one_line_and_bounded() {
    with_timeout(120, async {
        let s = AgentBroker::new("[consent]\nprompt_timeout_s = 60\n").await;
        let notifier = Mock::start(&s.bus.address, false, "notification_daemon").await;
        let apps = s.home.dir.path().join("data/applications");
        std::fs::create_dir_all(&apps).expect("mkdir");
        // `\n` is a line break in a desktop entry's value.
        std::fs::write(
            apps.join("gdbus.desktop"),
            "[Desktop Entry]\nType=Application\nName=</b><a href=\"https://evil.example\">Verified by GNOME</a>\\nSettings \u{202E}nimda\nIcon=gdbus\nExec=gdbus\n",
        )
        .expect("desktop entry");
        let _d = s.start(&[]).await;
        let conn = s.bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");

        let reason = format!(
            "'</b><a href=\"https://evil.example\">Verified by GNOME</a>\\n\\u202e<b>Click Always allow</b><span foreground=\"#00000000\">hidden</span> {}'",
            "x".repeat(1000)
        );
        let (st, _out, err) = gdbus_requests(&gdbus(), &s.bus.address, "['power']", &reason);
        assert!(st.success(), "{err}");

        let call = eventually(20, "Notify called", || async {
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
        let args: Vec<serde_json::Value> = call
            .2
            .iter()
            .map(|v| contextd::client::json::to_json(v))
            .collect();
        let summary = args[3].as_str().expect("summary");
        let body = args[4].as_str().expect("body");
        for (what, text) in [("summary", summary), ("body", body)] {
            for bad in ['<', '>', '\n', '\r', '\u{202E}'] {
                assert!(!text.contains(bad), "{what} has {bad:?}: {text}");
            }
        }
        assert!(
            body.contains(
                "&lt;/b&gt;&lt;a href=&quot;https://evil.example&quot;&gt;Verified by GNOME&lt;/a&gt;"
            ),
            "{body}"
        );
        assert!(body.contains("&lt;span foreground=&quot;"), "{body}");
        let id = format!("exe:{}", gdbus().display());
        assert!(body.contains(&format!("({id},")), "the id beside the name: {body}");
        assert!(!body.contains(&"x".repeat(300)), "the reason is bounded: {body}");
        assert!(body.chars().count() < 1000, "{} characters", body.chars().count());

        // The same reason in ListPending: one line, no override, bounded.
        let open = pending(&consent).await;
        let shown = open[0]["reason"].as_str().expect("reason");
        assert!(!shown.contains('\n') && !shown.contains('\u{202E}'), "{shown}");
        assert!(shown.chars().count() <= 300, "{}", shown.chars().count());
        assert!(shown.ends_with('…'), "{shown}");
        assert!(stored(&consent, &id).await.is_empty());
    })
    .await;
}

//! Pausing sharing is one event, whoever flips the switch: a pause or a
//! resume from the dashboard (over HTTP, as the page posts it) reaches a
//! settings panel on the bus exactly as `Consent1.SetPaused` does, as
//! `Consent1.Changed` sent to the panel that called `WatchChanges`, and
//! neither puts the switch's value in a broadcast `PropertiesChanged`
//! (`Paused` is for management callers only, `Recording` for apps with a
//! lasting `history` grant).

use std::collections::BTreeSet;

use crate::common::dashboard::Session;
use crate::common::*;
use contextd::client::proxy::Consent1Proxy;
use futures_util::StreamExt;
use zbus::MessageStream;

/// A dashboard session, logged in as the user's browser would be: the
/// one-time link, its cookie, the page's CSRF token.
struct Dashboard {
    session: Session,
    csrf: String,
}

impl Dashboard {
    async fn open(consent: &Consent1Proxy<'_>) -> Dashboard {
        let session = Session::open(consent).await;
        let body = session.page("");
        let csrf = body
            .split("name=\"csrf\" content=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("csrf token in the page")
            .to_owned();
        Dashboard { session, csrf }
    }

    /// What the page's pause switch posts.
    fn set_paused(&self, paused: bool) {
        let form = format!("paused={paused}&csrf={}", self.csrf);
        let s = &self.session;
        let (status, body) = s.http(
            "POST",
            &format!("{}/pause", s.root),
            &[
                ("Origin", &s.base),
                ("X-Dashboard", "1"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &form,
        );
        assert_eq!(status, 204, "pause from the dashboard: {body}");
    }
}

/// Signals from the broker as the panel receives them: the `Changed`
/// parts, and every `PropertiesChanged` (which must never carry the
/// switch's value).
struct Heard {
    stream: MessageStream,
}

impl Heard {
    async fn new(conn: &zbus::Connection) -> Heard {
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(contextd::names::BUS_NAME)
            .build()
            .expect("match rule");
        Heard {
            stream: MessageStream::for_match_rule(rule, conn, None)
                .await
                .expect("match rule"),
        }
    }

    /// The parts of the next `Consent1.Changed` that names `grants`;
    /// fails on a `PropertiesChanged` for `Paused` or `Recording`.
    async fn changed(&mut self, what: &str) -> BTreeSet<String> {
        within(10, what, async {
            loop {
                let m = self.stream.next().await.expect("stream").expect("message");
                let h = m.header();
                let iface = h.interface().map(|i| i.to_string()).unwrap_or_default();
                let member = h.member().map(|m| m.to_string()).unwrap_or_default();
                if member == "PropertiesChanged" {
                    let (on, changed, _): (
                        String,
                        std::collections::HashMap<String, zbus::wire::OwnedVariant>,
                        Vec<String>,
                    ) = m.body().deserialize().expect("PropertiesChanged body");
                    assert!(
                        !changed.contains_key("Paused") && !changed.contains_key("Recording"),
                        "{on}: the switch's value was broadcast: {changed:?}"
                    );
                    continue;
                }
                if iface == "org.contextd.Consent1" && member == "Changed" {
                    let parts: Vec<String> = m.body().deserialize().expect("Changed body");
                    if parts.iter().any(|p| p == "grants") {
                        return parts.into_iter().collect();
                    }
                }
            }
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_from_the_dashboard_reaches_panels_as_set_paused_does() {
    with_timeout(90, async {
        let m = Managed::start("", &[]).await;
        let conn = m.bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let mut heard = Heard::new(&conn).await;
        consent.watch_changes().await.expect("WatchChanges");
        let dash = Dashboard::open(&consent).await;

        dash.set_paused(true);
        let from_dashboard = heard
            .changed("Changed after a pause from the dashboard")
            .await;
        assert!(consent.paused().await.expect("Paused"), "paused");
        dash.set_paused(false);
        let resumed_from_dashboard = heard
            .changed("Changed after a resume from the dashboard")
            .await;
        assert!(!consent.paused().await.expect("Paused"), "resumed");

        consent.set_paused(true).await.expect("SetPaused(true)");
        let from_bus = heard.changed("Changed after SetPaused(true)").await;
        consent.set_paused(false).await.expect("SetPaused(false)");
        let resumed_from_bus = heard.changed("Changed after SetPaused(false)").await;

        assert_eq!(from_dashboard, from_bus, "a pause, either way");
        assert_eq!(
            resumed_from_dashboard, resumed_from_bus,
            "a resume, either way"
        );
    })
    .await;
}

/// The dashboard's "Never shared" form: a title rule added there hides
/// the matching title from an app granted `windows.titles` at once, and
/// is kept in privacy.toml as `contextctl privacy` keeps it; removed
/// there, it is gone from the file. A form without the session's CSRF
/// token changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rule_added_in_the_dashboard_hides_the_title_at_once() {
    with_timeout(90, async {
        let me = my_app_id();
        let m = Managed::start(
            "[consent]\nundecided = \"deny\"\n",
            &[(me.as_str(), &["windows", "windows.titles"])],
        )
        .await;
        let conn = m.bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = contextd::client::proxy::Context1Proxy::new(&conn)
            .await
            .expect("Context1");
        let windows = || async {
            ctx.list_windows().await.ok().map(|ws| {
                format!(
                    "{:?}",
                    ws.iter()
                        .map(contextd::client::json::dict_to_json)
                        .collect::<Vec<_>>()
                )
            })
        };
        eventually(10, "the window is there with its title", || async {
            windows()
                .await
                .filter(|w| w.contains("notes.txt"))
                .map(|_| ())
        })
        .await;
        let dash = Dashboard::open(&consent).await;
        let s = &dash.session;
        let post = |form: &str| {
            s.http(
                "POST",
                &format!("{}/privacy", s.root),
                &[
                    ("Origin", &s.base),
                    ("X-Dashboard", "1"),
                    ("Content-Type", "application/x-www-form-urlencoded"),
                ],
                form,
            )
        };
        // The attack: a form without the session's token.
        let (status, _) = post("action=add&what=title&pattern=notes");
        assert_eq!(status, 403, "no CSRF token");
        let (status, body) = post(&format!(
            "action=add&what=title&pattern=notes&csrf={}",
            dash.csrf
        ));
        assert_eq!(status, 204, "add from the dashboard: {body}");
        let now = windows().await.expect("ListWindows");
        assert!(!now.contains("notes.txt"), "hidden at once: {now}");
        assert!(now.contains("user-rule"), "{now}");
        let file = m.home.dir.path().join("config/contextd/privacy.toml");
        let text = std::fs::read_to_string(&file).expect("privacy.toml");
        assert!(text.contains("notes"), "{text}");
        assert!(s.page("").contains("notes"), "the page lists the rule");
        let (status, body) = post(&format!(
            "action=remove&what=title&pattern=notes&csrf={}",
            dash.csrf
        ));
        assert_eq!(status, 204, "remove from the dashboard: {body}");
        let text = std::fs::read_to_string(&file).expect("privacy.toml");
        assert!(!text.contains("notes"), "{text}");
    })
    .await;
}

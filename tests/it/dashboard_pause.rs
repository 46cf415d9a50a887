//! Pausing sharing is one event, whoever flips the switch: a pause or a
//! resume from the dashboard (over HTTP, as the page posts it) reaches a
//! settings panel on the bus exactly as `Consent1.SetPaused` does, as
//! `Consent1.Changed` sent to the panel that called `WatchChanges`, and
//! neither puts the switch's value in a broadcast `PropertiesChanged`
//! (`Paused` is for management callers only, `Recording` for apps with a
//! lasting `history` grant).

use std::collections::BTreeSet;
use std::net::SocketAddr;

use crate::common::*;
use crate::mcp_support;
use contextd::client::proxy::Consent1Proxy;
use futures_util::StreamExt;
use zbus::MessageStream;

/// A dashboard session, logged in as the user's browser would be: the
/// one-time link, its cookie, the page's CSRF token.
struct Dashboard {
    addr: SocketAddr,
    base: String,
    root: String,
    cookie: String,
    csrf: String,
}

impl Dashboard {
    fn http(&self, method: &str, path: &str, hdrs: &[(&str, &str)], body: &str) -> (u16, String) {
        let (status, _, body) = tokio::task::block_in_place(|| {
            mcp_support::http(self.addr, method, path, hdrs, body.as_bytes())
        });
        (status, body)
    }

    async fn open(consent: &Consent1Proxy<'_>) -> Dashboard {
        let url = consent.open_dashboard().await.expect("OpenDashboard");
        let base = url.split("/open?").next().expect("base").to_owned();
        let addr: SocketAddr = base
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("not a loopback URL: {url}"));
        let (status, headers, _) = tokio::task::block_in_place(|| {
            mcp_support::http(addr, "GET", &url[base.len()..], &[], b"")
        });
        assert_eq!(status, 200, "the one-time link opens");
        let set_cookie = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v.clone())
            .expect("a session cookie");
        let cookie = set_cookie.split(';').next().expect("cookie").to_owned();
        let root = set_cookie
            .split(';')
            .find_map(|p| p.trim().strip_prefix("Path="))
            .expect("the cookie's path is the session's")
            .to_owned();
        let mut d = Dashboard {
            addr,
            base,
            root,
            cookie,
            csrf: String::new(),
        };
        let page = format!("{}/", d.root);
        let (status, body) = d.http("GET", &page, &[("Cookie", &d.cookie)], "");
        assert_eq!(status, 200, "the session's page: {body}");
        d.csrf = body
            .split("name=\"csrf\" content=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("csrf token in the page")
            .to_owned();
        d
    }

    /// What the page's pause switch posts.
    fn set_paused(&self, paused: bool) {
        let form = format!("paused={paused}&csrf={}", self.csrf);
        let (status, body) = self.http(
            "POST",
            &format!("{}/pause", self.root),
            &[
                ("Cookie", &self.cookie),
                ("Origin", &self.base),
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

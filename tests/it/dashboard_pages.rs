//! The dashboard's pages of one question each (issue 53), in a real
//! browser (Debian's Chromium through Selenium, as tests/it/dashboard.rs):
//! with grants planted (two apps granted by policy.toml, one of them
//! with a desktop entry and an icon; this test program granted by the
//! user), real reads over D-Bus (allowed and refused), a live
//! subscription and an MCP token that expired:
//!
//! - the Apps page lists policy.toml's apps (they never asked) and the
//!   tokens, the expired one as expired;
//! - a category's page says what it means, has a switch per app (the
//!   policy's read-only, naming policy.toml's path), the live reader,
//!   and who used it in the last 24 hours as an SVG with an accessible
//!   name and a table;
//! - an app's page has its desktop entry's name and icon (served by the
//!   dashboard, loaded by the browser), how the broker knows it, what it
//!   may see, the last 7 days per category and day, its readers;
//! - the Timeline's 24-hour chart: a row per category, a mark per access;
//! - switching an app off on a category's page denies it there and ends
//!   its live reader of that category;
//! - every page: axe-core finds no violation at all, light and dark,
//!   wide and 360 px wide (Apps and Now here, the others with a replayed
//!   week in them); at 360 px nothing is wider than the screen; nothing
//!   but the dashboard is requested. With `CONTEXTD_SHOTS=DIR`, a picture
//!   of each (light/dark, wide/narrow) in DIR.

use crate::common;
use crate::mcp_support;

use common::dashboard::Browser;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// A Flatpak-style app that policy.toml grants everything, with a desktop
/// entry and an icon in the user's data directory.
const DASH: &str = "org.example.Dash";
/// An app policy.toml grants windows and power; no desktop entry.
const NOTES: &str = "org.example.Notes";
const ICON: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" fill="#3584e4"/><circle cx="32" cy="32" r="14" fill="#fff"/></svg>"##;

/// The value of a script run in the page.
fn js(b: &mut Browser, script: &str) -> Value {
    b.cmd(json!({"op": "js", "script": script}))["value"].clone()
}

/// The script's value once it is truthy (not null, false, 0 or "").
fn until_js(b: &mut Browser, secs: u64, what: &str, script: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let v = js(b, script);
        let truthy = !(v.is_null() || v == false || v == 0 || v == "");
        if truthy {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for: {what} (last {v})"
        );
        tokio::task::block_in_place(|| std::thread::sleep(std::time::Duration::from_millis(100)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn category_and_app_pages_and_the_day_in_a_real_browser() {
    with_timeout(300, async {
        let m = Managed::start(
            "[consent]\nundecided = \"deny\"\n",
            &[(DASH, &["*"]), (NOTES, &["windows", "power"])],
        )
        .await;
        let (bus, home) = (&m.bus, &m.home);
        let data = home.dir.path().join("data");
        std::fs::create_dir_all(data.join("applications")).expect("mkdir");
        std::fs::write(
            data.join(format!("applications/{DASH}.desktop")),
            format!("[Desktop Entry]\nType=Application\nName=Dash Board\nIcon={DASH}\nExec=dash\n"),
        )
        .expect("desktop entry");
        let icons = data.join("icons/hicolor/scalable/apps");
        std::fs::create_dir_all(&icons).expect("mkdir");
        std::fs::write(icons.join(format!("{DASH}.svg")), ICON).expect("icon");

        // This test program: granted windows and power by the user, reads
        // both, is refused calendar (undecided is denied), and follows
        // windows.
        let me = my_app_id();
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        for c in ["windows", "power"] {
            consent.set_grant(&me, c, "allow", 0).await.expect("grant");
        }
        for _ in 0..3 {
            ctx.list_windows().await.expect("ListWindows");
        }
        ctx.get_snapshot().await.expect("GetSnapshot");
        assert!(ctx.get_calendar().await.is_err(), "calendar is refused");
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface("org.contextd.Subscription1")
            .member("Revoked")
            .build()
            .expect("rule");
        let mut revoked = zbus::MessageStream::for_match_rule(rule, &conn, None)
            .await
            .expect("match");
        ctx.subscribe(&["windows"]).await.expect("subscribe");
        // An MCP token that expired, and one that never does.
        let (ok, _, err) = tokio::task::block_in_place(|| {
            mcp_support::contextctl(bus, home, &["token", "create", "brief", "--expires", "1s"])
        });
        assert!(ok, "token create: {err}");
        let (ok, _, err) = tokio::task::block_in_place(|| {
            mcp_support::contextctl(bus, home, &["token", "create", "lasting"])
        });
        assert!(ok, "token create: {err}");
        // The audit is written in batches: wait for this program's reads.
        eventually(20, "the reads in the audit", || async {
            let rows = consent.get_audit(0, 0, &me, 100).await.ok()?;
            let rows: Vec<Value> = rows.iter().map(dict_to_json).collect();
            let windows = rows.iter().any(|r| r["category"] == "windows");
            let refused = rows
                .iter()
                .any(|r| r["category"] == "calendar" && r["allowed"] == false);
            (windows && refused).then_some(())
        })
        .await;
        let (ok, out, err) = tokio::task::block_in_place(|| {
            mcp_support::contextctl(bus, home, &["dashboard", "--no-open"])
        });
        assert!(ok, "contextctl dashboard: {err}");
        let url = out.trim().to_owned();
        let base = url.split("/open?").next().expect("base").to_owned();

        let mut b = Browser::start();
        let landed = b.get(&url);
        b.wait_text("Decisions per app and category", 10);
        let sbase = landed.trim_end_matches('/').to_owned();
        let policy_file = home.policy_path().display().to_string();

        // Apps: policy.toml's apps are there although they never asked;
        // the tokens, one expired.
        let text = b.text();
        for want in [DASH, NOTES, "granted in policy.toml", &me] {
            assert!(text.contains(want), "the Apps page lacks {want:?}:\n{text}");
        }
        assert!(!text.contains("No app has asked for anything yet"), "{text}");
        b.wait_text("MCP tokens", 5);
        let tokens = js(
            &mut b,
            "return [...document.querySelectorAll('table.tokens tbody tr')].map(r => r.innerText)",
        );
        let tokens: Vec<String> = tokens
            .as_array()
            .expect("rows")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        assert!(
            tokens.iter().any(|r| r.contains("brief") && r.contains("expired")),
            "{tokens:?}"
        );
        assert!(
            tokens.iter().any(|r| r.contains("lasting") && r.contains("never") && r.contains("active")),
            "{tokens:?}"
        );

        // A category's page.
        b.get(&format!("{sbase}/category/windows"));
        b.wait_text("Which apps and windows are open", 10);
        let switches = js(
            &mut b,
            "return [...document.querySelectorAll('button[role=switch]')].map(s => ({label: s.getAttribute('aria-label'), \
             checked: s.getAttribute('aria-checked'), disabled: s.disabled}))",
        );
        let find = |app: &str| {
            switches
                .as_array()
                .expect("switches")
                .iter()
                .find(|s| s["label"].as_str().unwrap_or_default().contains(app))
                .cloned()
                .unwrap_or_else(|| panic!("no switch for {app}: {switches}"))
        };
        let mine = find(&me);
        assert_eq!(mine["checked"], "true", "{mine}");
        assert_eq!(mine["disabled"], false, "{mine}");
        for app in ["Dash Board", NOTES] {
            let s = find(app);
            assert_eq!(s["checked"], "true", "{s}");
            assert_eq!(s["disabled"], true, "policy.toml's grant is read-only: {s}");
            assert!(
                s["label"].as_str().unwrap_or_default().contains(&policy_file),
                "names its file: {s}"
            );
        }
        let text = b.text();
        assert!(
            text.contains("Read-only: granted in") && text.contains(&policy_file),
            "{text}"
        );
        assert!(text.contains("Live subscriptions and MCP sessions"), "{text}");
        let chart = js(
            &mut b,
            "const s = document.querySelector('figure.chart.day svg[role=img]'); \
             return s && {name: s.getAttribute('aria-label'), marks: s.querySelectorAll('rect.mark').length, \
             table: document.querySelector('table.day').innerText}",
        );
        let name = chart["name"].as_str().unwrap_or_default();
        assert!(
            name.starts_with("Who used windows in the last 24 hours") && name.contains(&me),
            "{chart}"
        );
        assert!(chart["marks"].as_u64().unwrap_or(0) >= 1, "{chart}");
        assert!(chart["table"].as_str().unwrap_or_default().contains(&me), "{chart}");
        // Its icon is served by the dashboard and the browser shows it.
        let icon = js(
            &mut b,
            "const i = document.querySelector('img.icon'); return i && {src: i.src, w: i.naturalWidth}",
        );
        assert!(
            icon["src"]
                .as_str()
                .unwrap_or_default()
                .starts_with(&format!("{sbase}/icon/")),
            "{icon}"
        );

        // A category this program never asked for and was not decided
        // about: not on its page; policy.toml's "*" is.
        b.get(&format!("{sbase}/category/location"));
        b.wait_text("Where you are", 10);
        let text = b.text();
        assert!(!text.contains(&me), "{text}");
        assert!(text.contains("Dash Board") && !text.contains(NOTES), "{text}");
        // One it asked for and was refused: there, undecided.
        b.get(&format!("{sbase}/category/calendar"));
        b.wait_text("Not decided: it is asked", 10);
        assert!(b.text().contains(&me), "{}", b.text());

        // An app's page: the policy one with its desktop entry.
        b.get(&format!("{sbase}/app/{DASH}"));
        b.wait_text("What it may see", 10);
        let text = b.text();
        for want in ["Dash Board", DASH, "named in policy.toml", &policy_file, "*"] {
            assert!(text.contains(want), "{DASH}'s page lacks {want:?}:\n{text}");
        }
        let loaded = until_js(
            &mut b,
            10,
            "the icon loaded",
            "const i = document.querySelector('img.icon.big'); return i && i.complete ? i.naturalWidth : 0",
        );
        assert!(loaded.as_u64().unwrap_or(0) > 0, "{loaded}");
        // This program's page: how it is known, its decisions, its week.
        let mine_path = format!(
            "{sbase}/app/{}",
            me.replace(':', "%3A").replace('/', "%2F")
        );
        b.get(&mine_path);
        b.wait_text("What it read, last 7 days", 10);
        let text = b.text();
        for want in ["executable", "the program file it runs", "windows", "power", "calendar"] {
            assert!(text.contains(want), "my page lacks {want:?}:\n{text}");
        }
        let week = js(
            &mut b,
            "return {name: document.querySelector('figure.chart.week svg').getAttribute('aria-label'), \
             rows: [...document.querySelectorAll('table.week tbody tr')].map(r => [...r.cells].map(c => c.innerText))}",
        );
        let rows = week["rows"].as_array().expect("rows");
        let row = |c: &str| {
            rows.iter()
                .find(|r| r[0] == c)
                .cloned()
                .unwrap_or_else(|| panic!("no {c} row: {week}"))
        };
        // Today is the last column: 3 ListWindows (the snapshot reads more).
        let windows_today: u64 = row("windows")[7]
            .as_str()
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(windows_today >= 3, "{week}");
        assert_eq!(row("calendar")[7], "0 (1)", "refused, in brackets: {week}");
        assert!(
            week["name"].as_str().unwrap_or_default().starts_with("Accesses allowed per day"),
            "{week}"
        );
        b.wait_text("Live subscriptions and MCP sessions", 5);
        // The expired token's page says so.
        b.get(&format!("{sbase}/app/token%3Abrief"));
        b.wait_text("MCP token", 10);
        assert!(b.text().contains("expired"), "{}", b.text());

        // The Timeline's day: a row per category, a mark per access.
        b.get(&format!("{sbase}/timeline"));
        b.wait_text("Accesses in the last 24 hours, by category", 10);
        let day = js(
            &mut b,
            "const s = document.querySelector('figure.chart.day svg[role=img]'); \
             return {name: s.getAttribute('aria-label'), rows: s.querySelectorAll('text.lbl').length, \
             refused: s.querySelectorAll('rect.mark.refused').length, \
             table: document.querySelector('table.day').innerText}",
        );
        let name = day["name"].as_str().unwrap_or_default();
        assert!(
            name.contains("windows:") && name.contains("calendar:"),
            "{day}"
        );
        assert!(day["rows"].as_u64().unwrap_or(0) >= 3, "{day}");
        assert!(day["refused"].as_u64().unwrap_or(0) >= 1, "{day}");
        assert!(day["table"].as_str().unwrap_or_default().contains("calendar"), "{day}");

        // Apps and Now, light and dark, wide and narrow: no axe-core
        // violation, nothing wider than a 360 px screen (a picture with
        // CONTEXTD_SHOTS). The other pages are checked so with a replayed
        // week in them, fuller than here (`a_replayed_day_shows_on_every_page`).
        let pages = [("apps", String::new()), ("now", "now".to_owned())];
        for scheme in ["light", "dark"] {
            for width in [0u32, 360] {
                b.cmd(json!({"op": "emulate", "scheme": scheme, "width": width}));
                for (name, path) in &pages {
                    b.get(&format!("{sbase}/{path}"));
                    b.wait_text("contextd", 10);
                    let dark = js(
                        &mut b,
                        "return matchMedia('(prefers-color-scheme: dark)').matches",
                    );
                    assert_eq!(dark, scheme == "dark", "{name}: the scheme took");
                    let v = b.cmd(json!({"op": "axe", "all": true}))["violations"].clone();
                    assert_eq!(
                        v,
                        json!([]),
                        "axe-core on {name} ({scheme}, width {width}): {}",
                        serde_json::to_string_pretty(&v).unwrap_or_default()
                    );
                    if width != 0 && *name != "apps" {
                        // The Apps grid scrolls in its own box; the rest fits.
                        let over = js(
                            &mut b,
                            "return document.documentElement.scrollWidth - window.innerWidth",
                        );
                        let wide = js(
                            &mut b,
                            "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 || e.scrollWidth > e.clientWidth + 1) \
                             .slice(0, 8).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right) + '/' + e.scrollWidth + '/' + e.clientWidth)",
                        );
                        assert!(
                            over.as_i64().unwrap_or(1) <= 0,
                            "{name} ({scheme}) is {over} px wider than 360 px: {wide}"
                        );
                    }
                    let size = if width == 0 { "wide" } else { "narrow" };
                    b.picture(&format!("dash-{name}-{scheme}-{size}"));
                }
            }
        }
        b.cmd(json!({"op": "emulate", "scheme": "light", "width": 0}));

        // A switch on the category's page: this program switched off for
        // windows is denied it, and its live reader of windows ends.
        b.get(&format!("{sbase}/category/windows"));
        b.wait_text("Reading it now", 10);
        b.cmd(json!({"op": "click", "label": format!("windows for {me}")}));
        let msg = within(10, "Revoked after the switch", revoked.next()).await;
        let (cat, _): (String, String) = msg
            .expect("stream")
            .expect("message")
            .body()
            .deserialize()
            .expect("body");
        assert_eq!(cat, "windows");
        eventually(10, "the switch's deny in ListGrants", || async {
            consent
                .list_grants()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .any(|g| g["app_id"] == me && g["category"] == "windows" && g["decision"] == "deny")
                .then_some(())
        })
        .await;
        {
            until_js(
                &mut b,
                10,
                "the page shows it off, without the reader",
                &format!(
                    "const s = document.querySelector('button[role=switch][aria-label=\"windows for {me}\"]'); \
                     return s && s.getAttribute('aria-checked') === 'false' && !document.body.innerText.includes('Live subscriptions')"
                ),
            );
        }
        // And on again: allowed.
        b.cmd(json!({"op": "click", "label": format!("windows for {me}")}));
        eventually(10, "the switch's allow in ListGrants", || async {
            consent
                .list_grants()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .any(|g| g["app_id"] == me && g["category"] == "windows" && g["decision"] == "allow")
                .then_some(())
        })
        .await;

        // Nothing but the dashboard was requested (the icons included).
        let urls = b.cmd(json!({"op": "requests"}))["urls"].clone();
        let foreign: Vec<&str> = urls
            .as_array()
            .expect("urls")
            .iter()
            .filter_map(Value::as_str)
            .filter(|u| {
                !u.starts_with(&format!("{base}/")) && !u.starts_with("data:") && !u.starts_with("about:")
            })
            .collect();
        assert!(foreign.is_empty(), "requests beyond the dashboard: {foreign:?}");
    })
    .await
}

/// The attacks on the new paths: an icon for an app whose desktop entry
/// names a file that is no image is not served; a page for an app id or
/// category that does not parse is a 404; a form's `back` cannot send the
/// browser anywhere but one of the session's pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_new_paths_refuse_what_is_not_theirs() {
    with_timeout(120, async {
        let m = Managed::start("[consent]\nundecided = \"deny\"\n", &[(DASH, &["windows"])]).await;
        let (bus, home) = (&m.bus, &m.home);
        let data = home.dir.path().join("data");
        std::fs::create_dir_all(data.join("applications")).expect("mkdir");
        let secret = home.dir.path().join("secret.png");
        std::fs::write(&secret, "a secret, not an image").expect("secret");
        std::fs::write(
            data.join(format!("applications/{DASH}.desktop")),
            format!(
                "[Desktop Entry]\nType=Application\nName=Dash\nIcon={}\n",
                secret.display()
            ),
        )
        .expect("desktop entry");
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let s = common::dashboard::Session::open(&consent).await;
        let page = s.page("");
        let csrf = page
            .split("name=\"csrf\" content=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("csrf")
            .to_owned();
        let (st, body) = s.http("GET", &format!("{}/icon/{DASH}", s.root), &[], "");
        assert_eq!(st, 404, "{body}");
        assert!(!body.contains("a secret"), "{body}");
        for p in [
            "category/nope",
            "category/..",
            "app/",
            "app/%00",
            "icon/%2E%2E",
        ] {
            let (st, _) = s.http("GET", &format!("{}/{p}", s.root), &[], "");
            assert!(st == 404 || st == 400, "{p}: {st}");
        }
        for back in [
            "http://evil.example/",
            "//evil.example/",
            "/category/..%2F..%2Fopen",
            "/app/x%0d%0aSet-Cookie:%20a=b",
        ] {
            let form = format!(
                "app={DASH}&category=power&decision=allow&csrf={csrf}&back={}",
                back.replace('%', "%25")
                    .replace('/', "%2F")
                    .replace(':', "%3A")
            );
            let (st, hs, _) = tokio::task::block_in_place(|| {
                mcp_support::http(
                    s.addr,
                    "POST",
                    &format!("{}/decide", s.root),
                    &[
                        ("Cookie", &s.cookie),
                        ("Origin", &s.base),
                        ("Content-Type", "application/x-www-form-urlencoded"),
                    ],
                    form.as_bytes(),
                )
            });
            assert_eq!(st, 303, "{back}");
            let loc = hs
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("location"))
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            assert!(
                loc.starts_with(&format!("{}/", s.root))
                    && !loc.contains("..")
                    && !loc.contains('\n'),
                "{back} → {loc}"
            );
            assert!(
                !hs.iter().any(|(k, _)| k.eq_ignore_ascii_case("set-cookie")),
                "{hs:?}"
            );
        }
    })
    .await
}

/// Timeline rows of `app` (all kinds) over the whole replayed day.
async fn timeline_rows(h: &contextd::client::proxy::History1Proxy<'_>, app: &str) -> usize {
    let (events, _) = h
        .query(0, i64::from(i32::MAX), &[], &[app], 1000, "")
        .await
        .expect("History1.Query");
    events.len()
}

/// "Forget this app's history" as the attack: a change from another
/// origin, one without the CSRF token, app ids that are patterns, a
/// prefix or another id dressed up with path tricks, and a path that
/// climbs out of an app's page all forget nothing; the real form forgets
/// the app's timeline and audit and nothing of another app, and keeps
/// its decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forgetting_an_app_s_history_takes_only_that_app_s() {
    with_timeout(180, async {
        let me = my_app_id();
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit =
            common::dbusmock::Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"])
                .await;
        let home = Home::new();
        home.deny_undecided();
        home.write_policy(&[(&me, &["windows", "history"])]);
        let mut replay = Replay::new(&home);
        // A day: this program's window (its id is the window's claim
        // here) focused 09:00-10:00, then Notes' until 11:00.
        let at =
            |h: &str| json!({"type": "clock", "at": format!("2026-11-21T{h}:00Z")}).to_string();
        for l in [
            window_line("mine", &me, "mine", false),
            window_line("notes", NOTES, "notes", false),
            at("09:00"),
            json!({"type": "focus", "id": "mine"}).to_string(),
            at("10:00"),
            json!({"type": "focus", "id": "notes"}).to_string(),
            at("11:00"),
            json!({"type": "focus", "id": null}).to_string(),
            at("12:00"),
        ] {
            replay.send(&l);
        }
        let _d = Daemon::start_with(
            &bus,
            &home,
            &[
                "--replay",
                &replay.arg(),
                "--fake-clock",
                "2026-11-21T08:00:00Z",
            ],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let h = contextd::client::proxy::History1Proxy::new(&conn)
            .await
            .expect("proxy");
        eventually(20, "both apps' focus in the timeline", || async {
            (timeline_rows(&h, &me).await == 1 && timeline_rows(&h, NOTES).await == 1).then_some(())
        })
        .await;
        ctx.list_windows().await.expect("ListWindows");
        let audit = || async {
            consent
                .get_audit(0, 0, &me, 1000)
                .await
                .expect("GetAudit")
                .iter()
                .map(dict_to_json)
                .filter(|r| {
                    r["request"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("ListWindows")
                })
                .map(|r| r["count"].as_u64().unwrap_or(1))
                .sum::<u64>()
        };
        eventually(20, "my reads in the audit", || async {
            (audit().await > 0).then_some(())
        })
        .await;
        let mine_before = (timeline_rows(&h, &me).await, audit().await);
        assert_eq!(mine_before, (1, 1), "one focus row and one read of mine");

        let s = common::dashboard::Session::open(&consent).await;
        let page = s.page(&format!(
            "app/{}",
            me.replace(':', "%3A").replace('/', "%2F")
        ));
        assert!(
            page.contains("Forget this app&#39;s history")
                || page.contains("Forget this app's history"),
            "{page}"
        );
        let csrf = page
            .split("name=\"csrf\" content=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("csrf")
            .to_owned();
        let enc = |v: &str| {
            v.replace('%', "%25")
                .replace('/', "%2F")
                .replace(':', "%3A")
                .replace('&', "%26")
                .replace('*', "%2A")
        };
        let post = |path: &str, origin: &str, form: String| {
            let mut hs = vec![("Content-Type", "application/x-www-form-urlencoded")];
            if !origin.is_empty() {
                hs.push(("Origin", origin));
            }
            s.http("POST", &format!("{}/{path}", s.root), &hs, &form)
        };
        let target = format!("app={}", enc(&me));
        // Another origin, and no CSRF token: refused.
        let (st, _) = post(
            "forget-history",
            "http://127.0.0.1:1",
            format!("{target}&csrf={csrf}"),
        );
        assert_eq!(st, 403, "another origin");
        let (st, _) = post("forget-history", &s.base, target.clone());
        assert_eq!(st, 403, "no CSRF token");
        let (st, _) = post("forget-history", "", format!("{target}&csrf={csrf}"));
        assert_eq!(st, 403, "no Origin");
        // Patterns, a prefix, another id with path tricks, a control
        // character: nothing of this program's is forgotten.
        for app in [
            "%".to_owned(),
            "*".to_owned(),
            "exe:".to_owned(),
            me[..me.len() - 2].to_owned(),
            format!("{me}/../x"),
            format!("exe:/x/..{}", me.trim_start_matches("exe:")),
            format!("{NOTES}\n{me}"),
        ] {
            let (st, _) = post(
                "forget-history",
                &s.base,
                format!("app={}&csrf={csrf}", enc(&app)),
            );
            assert!(st == 303 || st == 400, "{app:?}: {st}");
        }
        // A path that climbs from an app's page is no route of ours.
        let (st, _) = post(
            &format!("app/{}/../forget-history", enc(&me)),
            &s.base,
            format!("{target}&csrf={csrf}"),
        );
        assert!(st == 404 || st == 405, "{st}");
        assert_eq!(
            (timeline_rows(&h, &me).await, audit().await),
            mine_before,
            "nothing of mine was forgotten"
        );
        assert_eq!(timeline_rows(&h, NOTES).await, 1);

        // The page's own form: this program's timeline and audit go;
        // Notes' timeline and this program's decisions stay.
        let (st, _) = post(
            "forget-history",
            &s.base,
            format!("{target}&csrf={csrf}&back=%2Fapp%2F{}", enc(&enc(&me))),
        );
        assert_eq!(st, 303);
        assert_eq!(audit().await, 0, "my audit forgotten");
        assert_eq!(timeline_rows(&h, &me).await, 0, "my timeline forgotten");
        assert_eq!(timeline_rows(&h, NOTES).await, 1, "Notes' timeline stays");
        let grants: Vec<Value> = consent
            .list_grants()
            .await
            .expect("ListGrants")
            .iter()
            .map(dict_to_json)
            .collect();
        assert!(
            grants
                .iter()
                .any(|g| g["app_id"] == me && g["category"] == "history"),
            "decisions stay: {grants:?}"
        );
    })
    .await
}

/// A day replayed with a scripted clock (`--fake-clock`, the replay's
/// `clock` lines): its focus changes, captures and playback, and reads of
/// this program at those times (allowed and refused), over the last
/// seven days.
struct Day {
    replay: Replay,
    steps: u32,
}

impl Day {
    fn send(&mut self, line: serde_json::Value) {
        self.replay.send(&line.to_string());
    }

    fn clock(&mut self, at: &str) {
        self.send(json!({"type": "clock", "at": format!("2026-11-{at}:00Z")}));
    }

    fn focus(&mut self, id: Option<&str>) {
        self.send(json!({"type": "focus", "id": id}));
    }

    fn stream(&mut self, id: &str, kind: &str, app: &str) {
        self.send(json!({"type": "stream", "stream": {"id": id, "kind": kind, "app_id": app, "pid": 42, "state": "running"}}));
    }

    fn ended(&mut self, id: &str) {
        self.send(json!({"type": "stream-removed", "id": id}));
    }

    /// Wait until the broker has taken every line sent so far (a window
    /// sent now shows in ListWindows), so that what this program reads
    /// next is read at the script's time.
    async fn settle(&mut self, ctx: &Context1Proxy<'_>) {
        self.steps += 1;
        let id = format!("sync-{}", self.steps);
        self.replay
            .send(&window_line(&id, "org.example.Sync", "sync", false));
        eventually(20, "the replay's lines taken", || async {
            ctx.list_windows()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .any(|w| w["id"] == id)
                .then_some(())
        })
        .await;
    }
}

/// The rows of a table as the browser shows them, cell by cell.
fn table_rows(b: &mut Browser, selector: &str) -> Vec<Vec<String>> {
    let v = js(
        b,
        &format!(
            "const t = document.querySelector('{selector}'); return t ? [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.innerText)) : null"
        ),
    );
    serde_json::from_value(v.clone()).unwrap_or_else(|_| panic!("no table {selector}: {v}"))
}

/// The accessible name of the chart in `selector`.
fn chart_name(b: &mut Browser, selector: &str) -> String {
    js(
        b,
        &format!("const s = document.querySelector('{selector} svg[role=img]'); return s ? s.getAttribute('aria-label') : ''"),
    )
    .as_str()
    .unwrap_or_default()
    .to_owned()
}

/// Issue 53's acceptance with a replayed day (focus changes, captures and
/// playback, reads allowed and refused spread over 24 hours and 7 days,
/// grants from the user and from policy.toml): every page shows them
/// (asserted on the DOM), each chart has an accessible name and a table,
/// private windows and password managers show nowhere and a never-share
/// rule added afterwards hides an app's time; "Forget this app's history"
/// empties its week; axe-core finds nothing on any page, light and dark,
/// 1400 and 360 px wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_day_shows_on_every_page() {
    with_timeout(400, async {
        let me = my_app_id();
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = common::dbusmock::Mock::polkit_allowing(
            &sys.address,
            &["org.contextd.manage-consent"],
        )
        .await;
        let home = Home::new();
        home.deny_undecided();
        home.write_policy(&[(DASH, &["*"]), (NOTES, &["windows", "power"])]);
        let mut day = Day {
            replay: Replay::new(&home),
            steps: 0,
        };
        for (id, app, title) in [
            ("ed", "org.gnome.TextEditor", "report.odt"),
            ("fx", "org.mozilla.firefox", "News"),
            ("kp", "org.keepassxc.KeePassXC", "vault.kdbx"),
            ("pv", "org.mozilla.firefox", "Mozilla Firefox Private Browsing"),
        ] {
            day.replay.send(&window_line(id, app, title, false));
        }
        let _d = Daemon::start_with(
            &bus,
            &home,
            &["--replay", &day.replay.arg(), "--fake-clock", "2026-11-15T09:00:00Z"],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        // The user's grants; the user's deny over policy.toml's grant.
        for c in ["windows", "power", "session"] {
            consent.set_grant(&me, c, "allow", 0).await.expect("grant");
        }
        consent
            .set_grant(NOTES, "power", "deny", 0)
            .await
            .expect("deny");

        // Six days ago, three days ago (a screen recording too), today.
        day.clock("15T10:00");
        day.settle(&ctx).await;
        ctx.list_windows().await.expect("ListWindows");
        day.clock("18T14:00");
        day.stream("v-1", "screen", "org.example.Recorder");
        day.settle(&ctx).await;
        assert!(ctx.get_calendar().await.is_err(), "calendar is refused");
        day.clock("18T14:30");
        day.ended("v-1");
        day.clock("21T09:00");
        day.focus(Some("ed"));
        day.clock("21T09:30");
        day.settle(&ctx).await;
        ctx.list_windows().await.expect("ListWindows");
        day.clock("21T10:30");
        day.focus(Some("fx"));
        day.clock("21T11:00");
        day.focus(Some("kp"));
        day.clock("21T11:10");
        day.focus(Some("pv"));
        day.clock("21T11:20");
        day.focus(Some("ed"));
        day.clock("21T12:00");
        day.stream("pw-1-5", "microphone", "exe:/usr/bin/pw-record");
        day.clock("21T12:15");
        day.settle(&ctx).await;
        ctx.get_snapshot().await.expect("GetSnapshot");
        day.clock("21T12:30");
        day.ended("pw-1-5");
        day.clock("21T13:00");
        day.stream("cam-1", "camera", "org.gnome.Cheese");
        day.clock("21T13:20");
        day.ended("cam-1");
        day.clock("21T14:00");
        day.stream("pb-1", "playback", "org.gnome.Music");
        day.clock("21T14:45");
        day.ended("pb-1");
        day.clock("21T15:00");
        day.focus(None);
        day.settle(&ctx).await;
        assert!(ctx.get_calendar().await.is_err(), "calendar is refused");
        day.clock("21T16:00");
        day.settle(&ctx).await;
        // The audit is written in batches: wait for the last read.
        eventually(20, "today's refused read in the audit", || async {
            consent
                .get_audit(0, 0, &me, 1000)
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .any(|r| {
                    r["category"] == "calendar"
                        && r["time"].as_str().unwrap_or_default().starts_with("2026-11-21T15")
                })
                .then_some(())
        })
        .await;

        let (ok, out, err) = tokio::task::block_in_place(|| {
            mcp_support::contextctl(&bus, &home, &["dashboard", "--no-open"])
        });
        assert!(ok, "contextctl dashboard: {err}");
        let mut b = Browser::start();
        let landed = b.get(out.trim());
        b.wait_text("Decisions per app and category", 10);
        let sbase = landed.trim_end_matches('/').to_owned();
        let mine = format!("app/{}", me.replace(':', "%3A").replace('/', "%2F"));

        // Categories: how many apps may see each, as the core counts them
        // (NOTES' policy grant of power is taken back by the user's deny).
        b.get(&format!("{sbase}/categories"));
        b.wait_text("apps allowed", 10);
        let counts = js(
            &mut b,
            "return Object.fromEntries([...document.querySelectorAll('ul.categories li')].map(l => [l.querySelector('a').innerText, l.querySelector('.count').innerText]))",
        );
        assert_eq!(counts["windows"], "3 apps allowed", "{counts}");
        assert_eq!(counts["power"], "2 apps allowed", "{counts}");
        assert_eq!(counts["calendar"], "1 app allowed", "{counts}");

        // A category's page: its 24 hours and 7 days.
        b.get(&format!("{sbase}/category/windows"));
        b.wait_text("Who used windows in the last 7 days", 10);
        let week = chart_name(&mut b, "figure.chart.days7");
        assert!(week.starts_with("Who used windows in the last 7 days") && week.contains(&me), "{week}");
        let rows = table_rows(&mut b, "table.days7");
        assert!(rows.iter().any(|r| r[0].contains(&me)), "{rows:?}");
        // media.capture's page has the capture log's rows.
        b.get(&format!("{sbase}/category/media.capture"));
        b.wait_text("Who used media.capture in the last 24 hours", 10);
        let dayname = chart_name(&mut b, "figure.chart.day");
        assert!(
            dayname.contains("microphone: in use 30 min by exe:/usr/bin/pw-record")
                && dayname.contains("camera: in use 20 min by org.gnome.Cheese"),
            "{dayname}"
        );
        let week = chart_name(&mut b, "figure.chart.days7");
        assert!(week.contains("screen: in use 30 min by org.example.Recorder"), "{week}");

        // This program's page: its reads on three of the seven days.
        b.get(&format!("{sbase}/{mine}"));
        b.wait_text("What it read, last 7 days", 10);
        let rows = table_rows(&mut b, "table.week");
        let row = |c: &str| {
            rows.iter()
                .find(|r| r[0] == c)
                .cloned()
                .unwrap_or_else(|| panic!("no {c} row: {rows:?}"))
        };
        let n = |s: &str| -> u64 {
            s.split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let windows = row("windows");
        assert!(
            n(&windows[1]) >= 1 && n(&windows[4]) >= 1 && n(&windows[7]) >= 1 && n(&windows[2]) == 0,
            "reads on the 15th, 18th and 21st only: {rows:?}"
        );
        assert_eq!(row("calendar")[4], "0 (1)", "{rows:?}");
        assert_eq!(row("calendar")[7], "0 (1)", "{rows:?}");

        // The Timeline: the 24 hours and 7 days, with the capture rows.
        b.get(&format!("{sbase}/timeline"));
        b.wait_text("Accesses in the last 7 days, by category", 10);
        let dayname = chart_name(&mut b, "figure.chart.day");
        for want in [
            "windows:",
            "calendar: 1 by",
            "microphone: in use 30 min by exe:/usr/bin/pw-record",
            "camera: in use 20 min by org.gnome.Cheese",
        ] {
            assert!(dayname.contains(want), "the day lacks {want:?}: {dayname}");
        }
        assert!(!dayname.contains("screen"), "three days ago is not today: {dayname}");
        let week = js(
            &mut b,
            "const s = document.querySelector('figure.chart.days7 svg[role=img]'); \
             return {rows: [...s.querySelectorAll('text.lbl')].map(t => t.textContent), \
             marks: s.querySelectorAll('rect.mark').length, refused: s.querySelectorAll('rect.mark.refused').length, \
             uses: s.querySelectorAll('rect.use').length}",
        );
        let labels: Vec<&str> = week["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for want in ["windows", "calendar", "microphone (in use)", "camera (in use)", "screen (in use)"] {
            assert!(labels.contains(&want), "the week lacks a {want} row: {week}");
        }
        assert!(week["marks"].as_u64().unwrap_or(0) >= 4, "{week}");
        assert!(week["refused"].as_u64().unwrap_or(0) >= 2, "{week}");
        assert_eq!(week["uses"], 3, "{week}");
        let rows = table_rows(&mut b, "table.days7");
        assert!(
            rows.iter().any(|r| r[0] == "screen" && r[1].contains("org.example.Recorder") && r[4] == "30 min"),
            "{rows:?}"
        );

        // Time per app: the day as a strip and bars, the week's bars.
        let strip = chart_name(&mut b, "figure.chart.strip");
        for want in [
            "focus: org.gnome.TextEditor 5 h 10 min in 2, org.mozilla.firefox 30 min in 1",
            "playing: org.gnome.Music 45 min in 1",
            "recording: ",
            "exe:/usr/bin/pw-record 30 min in 1",
        ] {
            assert!(strip.contains(want), "the strip lacks {want:?}: {strip}");
        }
        let rows = table_rows(&mut b, "table.strip");
        let got: Vec<(String, String, String, String)> = rows
            .iter()
            .map(|r| (r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone()))
            .collect();
        for want in [
            ("Focus", "org.gnome.TextEditor", "09:00", "10:30"),
            ("Focus", "org.mozilla.firefox", "10:30", "11:00"),
            ("Focus", "org.gnome.TextEditor", "11:20", "15:00"),
            ("Recording", "exe:/usr/bin/pw-record", "12:00", "12:30"),
            ("Recording", "org.gnome.Cheese", "13:00", "13:20"),
            ("Playing", "org.gnome.Music", "14:00", "14:45"),
        ] {
            let want = (want.0.to_owned(), want.1.to_owned(), want.2.to_owned(), want.3.to_owned());
            assert!(got.contains(&want), "the strip's table lacks {want:?}: {got:?}");
        }
        let bars = table_rows(&mut b, "table.summary");
        assert!(
            bars.iter().any(|r| r[0] == "org.gnome.TextEditor" && r[1] == "5 h 10 min"),
            "{bars:?}"
        );
        assert!(
            bars.iter().any(|r| r[0] == "org.gnome.Music" && r[3] == "45 min"),
            "{bars:?}"
        );
        assert!(
            bars.iter().any(|r| r[0] == "exe:/usr/bin/pw-record" && r[2] == "30 min"),
            "{bars:?}"
        );
        assert!(chart_name(&mut b, "figure.chart.bars").starts_with("Time per app, last 24 hours"));
        let week_bars = table_rows(&mut b, "table.summary7");
        assert!(
            week_bars.iter().any(|r| r[0] == "org.example.Recorder" && r[2] == "30 min"),
            "{week_bars:?}"
        );
        // Private windows and password managers show nowhere, nor a title.
        let text = b.text();
        for never in ["KeePassXC", "vault.kdbx", "Private Browsing", "report.odt", "News"] {
            assert!(!text.contains(never), "the Timeline shows {never:?}:\n{text}");
        }
        let html = js(&mut b, "return document.documentElement.outerHTML");
        let html = html.as_str().unwrap_or_default();
        for never in ["KeePassXC", "vault.kdbx", "Private Browsing", "report.odt"] {
            assert!(!html.contains(never), "the Timeline's markup has {never:?}");
        }

        // Every new or changed page: no axe-core violation, light and
        // dark, 1400 and 360 px wide; nothing wider than 360 px; a picture.
        let pages = [
            ("timeline", "timeline".to_owned()),
            ("categories", "categories".to_owned()),
            ("category-windows", "category/windows".to_owned()),
            ("category-capture", "category/media.capture".to_owned()),
            ("app-self", mine.clone()),
            ("app-dash", format!("app/{DASH}")),
        ];
        for scheme in ["light", "dark"] {
            for width in [1400u32, 360] {
                b.cmd(json!({"op": "emulate", "scheme": scheme, "width": width}));
                for (name, path) in &pages {
                    b.get(&format!("{sbase}/{path}"));
                    b.wait_text("contextd", 10);
                    let dark = js(&mut b, "return matchMedia('(prefers-color-scheme: dark)').matches");
                    assert_eq!(dark, scheme == "dark", "{name}: the scheme took");
                    let v = b.cmd(json!({"op": "axe", "all": true}))["violations"].clone();
                    assert_eq!(
                        v,
                        json!([]),
                        "axe-core on {name} ({scheme}, {width} px): {}",
                        serde_json::to_string_pretty(&v).unwrap_or_default()
                    );
                    if width == 360 {
                        let over = js(&mut b, "return document.documentElement.scrollWidth - window.innerWidth");
                        assert!(over.as_i64().unwrap_or(1) <= 0, "{name} ({scheme}) is {over} px wider than 360 px");
                    }
                    let size = if width == 360 { "narrow" } else { "wide" };
                    b.picture(&format!("dash2-{name}-{scheme}-{size}"));
                }
            }
        }
        b.cmd(json!({"op": "emulate", "scheme": "light", "width": 0}));

        // A never-share rule added now hides an app's time from then on.
        b.get(&format!("{sbase}/"));
        b.wait_text("Never shared", 10);
        js(
            &mut b,
            "document.getElementById('never-what').value = 'app'; \
             document.getElementById('never-pattern').value = 'org.gnome.Music'; \
             document.getElementById('never-pattern').form.requestSubmit(); return true",
        );
        b.wait_text("org.gnome.Music", 10);
        b.get(&format!("{sbase}/timeline"));
        b.wait_text("The day as a strip", 10);
        let strip = chart_name(&mut b, "figure.chart.strip");
        assert!(strip.contains("playing: nothing"), "{strip}");
        assert!(!b.text().contains("org.gnome.Music"), "{}", b.text());

        // Forget this program's history on its page: its week is empty.
        b.get(&format!("{sbase}/{mine}"));
        b.wait_text("Forget this app's history", 10);
        js(&mut b, "window.confirm = () => true; return true");
        b.cmd(json!({"op": "click", "label": format!("Forget the history of {me}")}));
        b.wait_text("Nothing in the last 7 days.", 10);
    })
    .await
}

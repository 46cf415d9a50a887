//! The dashboard's pages, rendered on the server (maud escapes every
//! value). Each page is usable without its script: changes are plain
//! forms that post and come back; the script (`data/dashboard/`) only
//! saves a grid cell when it changes and re-reads the page when the
//! server says something changed.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::Handles;
use super::charts::{self, Period};
use super::frame::{app_href, app_label, category_href, columns, layout, short};
use crate::core::consent::AuditQuery;
use crate::core::view::CaptureSessionView;
use crate::model::MediaKind;

/// The grid's rows: every app that asked, the apps decided about before
/// they ever asked (from a panel, the CLI, this grid), and the apps
/// policy.toml grants (which may never ask: they have what they need).
pub(super) fn rows(core: &Handles) -> Vec<crate::core::manage::AppView> {
    let mut apps = core.manage.apps();
    for g in core.manage.grants() {
        if !apps.iter().any(|a| a.app_id == g.app_id) {
            apps.push(crate::core::manage::AppView {
                app_id: g.app_id.clone(),
                identity_source: if g.origin == "policy" {
                    "granted in policy.toml (has not asked yet)"
                } else {
                    "decided before it asked"
                },
                first_seen: String::new(),
                last_seen: String::new(),
                name: None,
                icon: None,
            });
        }
    }
    apps
}

const DECISIONS: [(&str, &str); 4] = [
    ("clear", "Undecided"),
    ("allow", "Allow"),
    ("deny", "Deny"),
    ("ask", "Ask"),
];
const FOR: [(&str, &str); 5] = [
    ("", "forever"),
    ("1h", "for 1 hour"),
    ("1d", "for 1 day"),
    ("7d", "for 7 days"),
    ("30d", "for 30 days"),
];

fn select(name: &str, label: &str, options: &[(&str, &str)], chosen: &str) -> Markup {
    html! {
        select name=(name) aria-label=(label) {
            @for (v, text) in options {
                option value=(v) selected[*v == chosen] { (text) }
            }
        }
    }
}

/// Apps × categories: every app that asked, every category, the user's
/// decision in each cell; a row or a column at once; forget an app.
pub(super) fn apps(core: &Handles, csrf: &str) -> Markup {
    let cols = columns(core);
    let apps = rows(core);
    // (app, category) → (decision, origin, expires)
    let mut cells: BTreeMap<(String, String), (String, String, Option<String>)> = BTreeMap::new();
    for g in core.manage.grants() {
        cells.insert(
            (g.app_id.clone(), g.category.clone()),
            (
                g.decision.to_owned(),
                g.origin.to_owned(),
                g.expires.clone(),
            ),
        );
    }
    let body = html! {
        p { "Who may see what. A change applies at once; a live subscription that loses its category ends. "
            "Until you decide, an app that asks shows a prompt." }
        p {
            label for="expiry" { "New decisions in the grid last " }
            select id="expiry" name="for" {
                @for (v, text) in FOR { option value=(v) { (text) } }
            }
        }
        @if apps.is_empty() {
            p.empty { "No app has asked for anything yet." }
        } @else {
            div.grid-wrap {
                table.grid {
                    caption { "Decisions per app and category" }
                    thead {
                        tr {
                            th scope="col" { "App" }
                            @for c in &cols {
                                th scope="col" title=(c.description()) {
                                    a.cat href=(category_href("/", &c.to_string())) { (c.to_string()) }
                                    form.col method="post" action="decide" data-fetch {
                                        input type="hidden" name="csrf" value=(csrf);
                                        input type="hidden" name="category" value=(c.to_string());
                                        (select("decision", &format!("Decision for {c} for every app"), &DECISIONS, ""))
                                        (select("for", &format!("How long, for {c} for every app"), &FOR, ""))
                                        button type="submit" aria-label=(format!("Set {c} for every app")) { "Set column" }
                                    }
                                }
                            }
                        }
                    }
                    tbody {
                        @for a in &apps {
                            tr {
                                th scope="row" {
                                    a.app href=(app_href("/", &a.app_id)) { (app_label(a.name.as_deref(), &a.app_id)) }
                                    @if a.first_seen.is_empty() {
                                        span.seen { (a.identity_source) }
                                    } @else {
                                        span.seen title=(crate::model::IdentitySource::parse(a.identity_source).map_or("", |s| s.meaning())) {
                                            "identified by " (a.identity_source)
                                            @if a.identity_source == crate::model::IdentitySource::Interpreter.as_str() {
                                                " (what it runs, as it says: a claim)"
                                            }
                                        }
                                    }
                                    form.row method="post" action="decide" data-fetch {
                                        input type="hidden" name="csrf" value=(csrf);
                                        input type="hidden" name="app" value=(a.app_id);
                                        (select("decision", &format!("Decision for every category for {}", a.app_id), &DECISIONS, ""))
                                        (select("for", &format!("How long, for every category for {}", a.app_id), &FOR, ""))
                                        button type="submit" aria-label=(format!("Set every category for {}", a.app_id)) { "Set row" }
                                    }
                                    form.forget method="post" action="forget" data-fetch data-confirm=(format!("Forget {} and everything decided about it?", a.app_id)) {
                                        input type="hidden" name="csrf" value=(csrf);
                                        input type="hidden" name="app" value=(a.app_id);
                                        button type="submit" aria-label=(format!("Forget {}", a.app_id)) { "Forget" }
                                    }
                                }
                                @for c in &cols {
                                    @let cell = cells.get(&(a.app_id.clone(), c.to_string()));
                                    @let policy = cells.get(&(a.app_id.clone(), "*".to_owned()));
                                    @let chosen = cell.filter(|x| x.1 != "policy").map(|x| x.0.as_str()).unwrap_or("clear");
                                    td data-decision=(chosen) {
                                        select data-cell data-app=(a.app_id) data-category=(c.to_string())
                                            aria-label=(format!("{c} for {}", a.name.as_deref().unwrap_or(&a.app_id))) {
                                            @for (v, text) in DECISIONS {
                                                option value=(v) selected[v == chosen] { (text) }
                                            }
                                        }
                                        @if let Some((_, _, Some(exp))) = cell {
                                            span.exp { "until " (short(exp)) }
                                        }
                                        @if let Some((d, o, _)) = cell.filter(|x| x.1 == "policy").or(policy) {
                                            span.policy { (d) " by " (o) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    let body = html! {
        (body)
        (super::detail::tokens(core, "/"))
        (never_shared(core, csrf))
    };
    layout("Apps", "/", csrf, core, body)
}

/// The user's never-share rules, with a form to add one and a button to
/// remove each (`core::privacy`; kept in privacy.toml, as `contextctl
/// privacy` keeps them).
fn never_shared(core: &Handles, csrf: &str) -> Markup {
    let rules = core.manage.privacy_rules();
    let rows: Vec<(&str, &String)> = rules
        .apps
        .iter()
        .map(|p| ("app", p))
        .chain(rules.titles.iter().map(|p| ("title", p)))
        .collect();
    html! {
        section aria-labelledby="never-h" {
            h2 id="never-h" { "Never shared" }
            p { "Whatever an app was granted, these never leave: private browser windows, password managers, "
                "one-time codes and card numbers in notifications (built in), and your own rules below. "
                "A rule applies at once." }
            @if rows.is_empty() {
                p.empty { "No rules of your own." }
            } @else {
                ul.never {
                    @for (what, pattern) in &rows {
                        li {
                            (what) " " q { (pattern) }
                            form.never method="post" action="privacy" {
                                input type="hidden" name="csrf" value=(csrf);
                                input type="hidden" name="action" value="remove";
                                input type="hidden" name="what" value=(what);
                                input type="hidden" name="pattern" value=(pattern);
                                button type="submit" aria-label=(format!("Remove the rule {what} {pattern}")) { "Remove" }
                            }
                        }
                    }
                }
            }
            form.never method="post" action="privacy" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="action" value="add";
                label for="never-what" { "Never share " }
                select id="never-what" name="what" {
                    option value="title" { "window titles containing" }
                    option value="app" { "the app whose id contains" }
                }
                " "
                input id="never-pattern" type="text" name="pattern" required maxlength="200" aria-label="Pattern";
                " "
                button type="submit" { "Add" }
            }
        }
    }
}

pub(super) fn kind_name(k: MediaKind) -> &'static str {
    match k {
        MediaKind::Playback => "playback",
        MediaKind::Microphone => "microphone",
        MediaKind::Camera => "camera",
        MediaKind::Screen => "screen",
    }
}

/// Who reads now, the prompts waiting (answered here), and what plays
/// and records now.
pub(super) fn now(core: &Handles, csrf: &str) -> Markup {
    let readers = core.manage.readers();
    let pending = core.ask.pending_prompts();
    let asked = core.ask.asked_through();
    let media = core.manage.owner_media();
    let capture = media.capture.unwrap_or_default();
    let playback = media.playback.unwrap_or_default();
    let body = html! {
        section aria-labelledby="pending-h" {
            h2 id="pending-h" { "Waiting for your answer" }
            @if let Some(how) = &asked {
                p.channel {
                    @match (how.available, how.last_error.as_deref()) {
                        (true, None) => "Questions are asked in your desktop's consent dialog (the contextd GNOME extension).",
                        (true, Some(what)) => { "Questions are " (what) "." }
                        (false, why) => { "Questions come as notifications: " (why.map_or("no dialog is available", |w| w.trim_start_matches("notification: "))) "." }
                    }
                }
            }
            @if pending.is_empty() {
                p.empty { "No app is waiting." }
            } @else {
                ul.pending {
                    @for p in &pending {
                        li {
                            p {
                                (app_label(p.app_name.as_deref(), &p.app_id))
                                " asks for " strong { (p.categories.0.join(", ")) }
                                " over " (p.channel)
                                @if !p.reason.is_empty() { ": " q { (p.reason) } }
                            }
                            @for (answer, secs, text) in [("once", 0, "Allow once"), ("always", 0, "Always allow"), ("duration", 86_400, "Allow for a day"), ("deny", 0, "Deny")] {
                                form.answer method="post" action="answer" data-fetch {
                                    input type="hidden" name="csrf" value=(csrf);
                                    input type="hidden" name="back" value="/now";
                                    input type="hidden" name="id" value=(p.id);
                                    input type="hidden" name="answer" value=(answer);
                                    input type="hidden" name="duration_s" value=(secs);
                                    button type="submit" aria-label=(format!("{text}: {} reading {}", p.app_id, p.categories.0.join(", "))) { (text) }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="readers-h" {
            h2 id="readers-h" { "Reading now" }
            @if readers.is_empty() {
                p.empty { "Nobody follows your context right now." }
            } @else {
                table.readers tabindex="0" {
                    caption { "Live subscriptions and MCP sessions" }
                    thead { tr { th scope="col" { "App" } th scope="col" { "How" } th scope="col" { "Follows" } th scope="col" { "Since" } th scope="col" { span.sr { "Actions" } } } }
                    tbody {
                        @for r in &readers {
                            tr {
                                th scope="row" { a href=(app_href("/now", &r.app_id)) { (app_label(r.name.as_deref(), &r.app_id)) } @if let Some(c) = &r.client { span.client { (c) } } }
                                td { (r.channel) " (" (r.transport) ")" }
                                td { @if r.categories.0.is_empty() { "—" } @else { (r.categories.0.join(", ")) } }
                                td { (short(&r.since)) }
                                td {
                                    form method="post" action="end-reader" data-fetch {
                                        input type="hidden" name="csrf" value=(csrf);
                                        input type="hidden" name="back" value="/now";
                                        input type="hidden" name="id" value=(r.id);
                                        button type="submit" aria-label=(format!("End reader {}: {} ({})", r.id, r.app_id, r.transport)) { "End" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="media-h" {
            h2 id="media-h" { "Microphone, camera and screen now" }
            @let using: Vec<_> = capture.iter().filter(|s| s.active).collect();
            @if using.is_empty() {
                p.empty { "Nothing records now." }
            } @else {
                ul.media { @for s in using { li { strong { (kind_name(s.kind)) } " — " (s.app_id.as_deref().or(s.claimed_name.as_deref()).unwrap_or("an unknown app")) " since " (short(&s.since)) } } }
            }
            h3 { "Playing" }
            @let playing: Vec<_> = playback.iter().filter(|s| s.active).collect();
            @if playing.is_empty() {
                p.empty { "Nothing plays now." }
            } @else {
                ul.media { @for s in playing { li { (s.app_id.as_deref().or(s.claimed_name.as_deref()).unwrap_or("an unknown app")) @if let Some(m) = &s.media_name { " — " (m) } } } }
            }
        }
    };
    layout("Now", "/now", csrf, core, body)
}

/// A bar per capture session on a time axis, one row per app and device.
fn chart(
    title: &str,
    sessions: &[CaptureSessionView],
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Markup {
    let span = (now - since).num_seconds().max(1) as f64;
    let mut rows: BTreeMap<(String, &'static str), Vec<(f64, f64)>> = BTreeMap::new();
    for s in sessions {
        let parse = |t: &str| {
            DateTime::parse_from_rfc3339(t)
                .ok()
                .map(|t| t.with_timezone(&Utc))
        };
        let Some(start) = parse(&s.start) else {
            continue;
        };
        let end = s.end.as_deref().and_then(parse).unwrap_or(now);
        if end < since {
            continue;
        }
        let x0 = ((start.max(since) - since).num_seconds() as f64 / span).clamp(0.0, 1.0);
        let x1 = ((end - since).num_seconds() as f64 / span).clamp(0.0, 1.0);
        rows.entry((
            s.app_id.clone().unwrap_or_else(|| "unknown".into()),
            kind_name(s.kind),
        ))
        .or_default()
        .push((x0, (x1 - x0).max(0.002)));
    }
    let width = 600.0;
    let label_w = 220.0;
    let row_h = 22.0;
    let height = (rows.len().max(1) as f64) * row_h + 20.0;
    let summary: Vec<String> = rows
        .iter()
        .map(|((app, kind), bars)| {
            let minutes: f64 = bars.iter().map(|(_, w)| w * span / 60.0).sum();
            format!("{app} {kind} {minutes:.0} min")
        })
        .collect();
    html! {
        figure.chart {
            figcaption { (title) }
            @if rows.is_empty() {
                p.empty { "No microphone, camera or screen use." }
            } @else {
                svg role="img" aria-label=(format!("{title}: {}", summary.join("; "))) viewBox=(format!("0 0 {} {}", label_w + width, height)) xmlns="http://www.w3.org/2000/svg" {
                    title { (title) }
                    @for (i, ((app, kind), bars)) in rows.iter().enumerate() {
                        @let y = i as f64 * row_h;
                        text x="0" y=(y + 15.0) class="lbl" { (app) " · " (kind) }
                        rect x=(label_w) y=(y + 4.0) width=(width) height=(row_h - 8.0) class="track" {}
                        @for (x, w) in bars {
                            rect x=(label_w + x * width) y=(y + 4.0) width=(w * width) height=(row_h - 8.0) class=(format!("bar {kind}")) {}
                        }
                    }
                    text x=(label_w) y=(height - 4.0) class="axis" { (short(&crate::core::view::time(&since))) }
                    text x=(label_w + width) y=(height - 4.0) class="axis end" { "now" }
                }
            }
        }
    }
}

/// The access log, capture use over 24 hours and 7 days, time per app.
pub(super) async fn timeline(core: &Handles, csrf: &str) -> Markup {
    let now = core.manage.now();
    let audit = core
        .manage
        .audit(AuditQuery {
            since: None,
            until: None,
            app: None,
            limit: 200,
        })
        .await;
    let day = now - chrono::Duration::hours(24);
    let week = now - chrono::Duration::days(7);
    let week_sessions = core
        .manage
        .owner_captures(week)
        .await
        .map(|c| c.sessions)
        .unwrap_or_default();
    let until = now + chrono::Duration::seconds(1);
    let summary = core.manage.owner_summary(day, until).await;
    let summary7 = core.manage.owner_summary(week, until).await;
    let spans = core
        .manage
        .owner_spans(day, until)
        .await
        .map_err(|e| e.to_string());
    let day_marks = super::detail::day_marks(core, now).await;
    let week_marks = super::detail::week_marks(core, now, None).await;
    let body = html! {
        (charts::access_chart(&day_marks, &Period::day("day-h", "Accesses in the last 24 hours, by category".into(), now), None, "/timeline"))
        (charts::access_chart(&week_marks, &Period::week("days7-h", "Accesses in the last 7 days, by category".into(), now), None, "/timeline"))
        (charts::day_strip(&spans, now, "/timeline"))
        (charts::time_bars("time-h", "Time per app, last 24 hours", "summary", &summary, "/timeline"))
        (charts::time_bars("time7-h", "Time per app, last 7 days", "summary7", &summary7, "/timeline"))
        section aria-labelledby="access-h" {
            h2 id="access-h" { "Who read what" }
            @match &audit {
                Err(e) => p.empty { (e.to_string()) },
                Ok(rows) if rows.is_empty() => p.empty { "No app has read anything yet." },
                Ok(rows) => {
                    table.audit tabindex="0" {
                        caption { "The newest 200 accesses, newest first (repeats folded)" }
                        thead { tr { th scope="col" { "When" } th scope="col" { "App" } th scope="col" { "Category" } th scope="col" { "Through" } th scope="col" { "Called" } th scope="col" { "Result" } } }
                        tbody {
                            @for r in rows {
                                tr.(if r.allowed { "ok" } else { "no" }) {
                                    td { (short(&r.time)) @if r.count > 1 { " (×" (r.count) ")" } }
                                    th scope="row" { a href=(app_href("/timeline", &r.app_id)) { (r.app_id) } }
                                    td { a href=(category_href("/timeline", &r.category)) { (r.category) } }
                                    td { (r.channel) }
                                    td { code { (r.request) } }
                                    td { @if r.allowed { "allowed" } @else { "refused" } " (" (r.reason) ")" }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="capture-h" {
            h2 id="capture-h" { "Microphone, camera and screen" }
            (chart("The last 24 hours", &week_sessions, day, now))
            (chart("The last 7 days", &week_sessions, week, now))
        }
    };
    layout("Timeline", "/timeline", csrf, core, body)
}

/// What `/open` answers once the session is made: a page that goes on to
/// the session's pages at once (a refresh, no script).
pub(super) fn opening(to: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(format!("0;url={to}"));
                title { "contextd dashboard" }
                link rel="stylesheet" href="/assets/dashboard.css";
            }
            body {
                main {
                    h1 { "contextd dashboard" }
                    p { a href=(to) { "Open the dashboard" } }
                }
            }
        }
    }
}

/// A refusal, as a page of its own (no script, no session needed).
pub(super) fn refused(why: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "contextd dashboard" }
                link rel="stylesheet" href="/assets/dashboard.css";
            }
            body {
                main {
                    h1 { "contextd dashboard" }
                    p { (why) }
                }
            }
        }
    }
}

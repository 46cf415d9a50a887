//! The pages of one question each (issue 53): a page per category (what
//! it means, a switch per app, who used it in the last 24 hours), a page
//! per app (who it is and how the broker knows, what it may see, what it
//! read in the last 7 days, its live readers), the 24-hour access
//! timeline drawn on the server as SVG, and the MCP tokens.
//!
//! Like the other pages they only format what the core's management
//! views say (`core::manage`); a switch posts to `decide` as the grid
//! does. Every chart is an `<svg role="img">` with an accessible name and
//! a table beside it that says the same; colours come from the style
//! sheet's classes (the CSP allows no inline style), so dark mode follows
//! the desktop's `prefers-color-scheme`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, DurationRound, Utc};
use maud::{Markup, html};

use super::Handles;
use super::charts::{self, Mark, Period};
use super::frame::{app_href, app_label, category_href, columns, layout, segment, short, up};
use crate::core::consent::{AuditCountQuery, AuditQuery};
use crate::core::manage::AuditView;
use crate::core::view::CaptureSessionView;
use crate::model::{AppId, Category, IdentitySource};

/// The most accesses the 24-hour timeline draws (rows of the audit,
/// repeats within a second already folded into one).
const MAX_MARKS: u32 = 5000;

/// The audit's accesses of the last 24 hours, newest first.
async fn day_of_accesses(core: &Handles, now: DateTime<Utc>) -> Result<Vec<AuditView>, String> {
    core.manage
        .audit(AuditQuery {
            since: Some(now - Duration::hours(24)),
            until: None,
            app: None,
            limit: MAX_MARKS,
        })
        .await
        .map_err(|e| e.to_string())
}

/// The capture log's sessions of the last 7 days (from the timeline when
/// it is kept, else those since the broker started).
async fn captures(core: &Handles, now: DateTime<Utc>) -> Vec<CaptureSessionView> {
    core.manage
        .owner_captures(now - Duration::days(7))
        .await
        .map(|c| c.sessions)
        .unwrap_or_default()
}

/// What the 24-hour access timeline draws: every access, and the capture
/// log's sessions.
pub(super) async fn day_marks(core: &Handles, now: DateTime<Utc>) -> Result<Vec<Mark>, String> {
    let mut marks = charts::audit_marks(&day_of_accesses(core, now).await?);
    marks.extend(charts::capture_marks(&captures(core, now).await, now));
    Ok(marks)
}

/// What the 7-day access timeline draws: the audit counted per hour (of
/// `category`, or all) in SQLite, and the capture log's sessions.
pub(super) async fn week_marks(
    core: &Handles,
    now: DateTime<Utc>,
    category: Option<&Category>,
) -> Result<Vec<Mark>, String> {
    let hour = Duration::hours(1);
    // Whole hours, so that a mark is an hour of the clock.
    let since = (now - Duration::days(7))
        .duration_trunc(hour)
        .unwrap_or(now - Duration::days(7));
    let counts = core
        .manage
        .audit_counts(AuditCountQuery {
            since,
            until: now + Duration::seconds(1),
            app: None,
            category: category.cloned(),
            period: Some(hour),
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut marks = charts::count_marks(&counts, hour);
    marks.extend(charts::capture_marks(&captures(core, now).await, now));
    Ok(marks)
}

/// A switch: a form that posts the flipped decision to `decide`, so it
/// works without the page's script too.
fn switch(csrf: &str, here: &str, app: &str, category: &str, on: bool, label: &str) -> Markup {
    html! {
        form.switch method="post" action=(format!("{}decide", up(here))) data-fetch {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="back" value=(here);
            input type="hidden" name="app" value=(app);
            input type="hidden" name="category" value=(category);
            input type="hidden" name="decision" value=(if on { "deny" } else { "allow" });
            button.switch type="submit" role="switch" aria-checked=(if on { "true" } else { "false" }) aria-label=(label) {
                span.knob aria-hidden="true" {}
                span.state { @if on { "On" } @else { "Off" } }
            }
        }
    }
}

/// A category's page: what it means, a switch per app that asked for it
/// or is granted it (policy.toml's read-only, naming the file), who
/// reads it now, who used it in the last 24 hours.
pub(super) async fn category(core: &Handles, csrf: &str, c: &Category) -> Markup {
    let name = c.to_string();
    let here = format!("/category/{}", segment(&name));
    let now = core.manage.now();
    let apps = core.manage.category_apps(c).await;
    let readers: Vec<_> = core
        .manage
        .readers()
        .into_iter()
        .filter(|r| r.categories.0.contains(&name))
        .collect();
    let day = day_marks(core, now).await;
    let week = week_marks(core, now, Some(c)).await;
    let entries = entries(apps.iter().map(|a| a.app_id.clone()).collect()).await;
    let details: Vec<&Category> = Category::fixed()
        .iter()
        .filter(|d| d.base().as_ref() == Some(c))
        .collect();
    let body = html! {
        p.lead { (c.description()) "." }
        @if let Some(base) = c.base() {
            p { "A detail of " a href=(category_href(&here, &base.to_string())) { (base.to_string()) }
                ": an app that may see it may see " (base.to_string()) " too." }
        }
        @if !details.is_empty() {
            p { "Its details, granted apart: "
                @for (i, d) in details.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href=(category_href(&here, &d.to_string())) { (d.to_string()) }
                } "." }
        }
        @if c.is_sensitive() {
            p.sensitive { "This can tell where you are, who you talk to or what you work on." }
        }
        section aria-labelledby="apps-h" {
            h2 id="apps-h" { "Apps" }
            p { "Switched on, an app may see " (name) " until you switch it off; off, it is refused and not asked again. "
                "A change applies at once: a live reader loses it." }
            @if apps.is_empty() {
                p.empty { "No app asked for it, and none is granted it." }
            } @else {
                ul.switches {
                    @for a in &apps {
                        @let (entry_name, icon) = entries.get(&a.app_id).cloned().unwrap_or_default();
                        @let name_of = entry_name.or_else(|| a.name.clone());
                        @let shown = match &name_of { Some(n) => format!("{n} ({})", a.app_id), None => a.app_id.clone() };
                        li {
                            div.who {
                                @if icon {
                                    img.icon src=(format!("{}icon/{}", up_or_dot(&here), segment(&a.app_id))) alt="" width="32" height="32";
                                } @else {
                                    span.icon.none aria-hidden="true" {}
                                }
                                a href=(app_href(&here, &a.app_id)) { (app_label(name_of.as_deref(), &a.app_id)) }
                                span.state-text {
                                    @match (a.decision, &a.policy) {
                                        (Some("allow"), _) => { "Allowed" @if let Some(e) = &a.expires { " until " (short(e)) } },
                                        (Some("deny"), _) => { "Denied" @if a.policy.is_some() { " (over policy.toml's grant)" } },
                                        (Some(_), None) => "Asks every time",
                                        (_, Some(p)) => { "Granted by policy.toml" @if let Some(e) = &p.expires { " until " (short(e)) } },
                                        (None, None) => "Not decided: it is asked",
                                    }
                                    @if let Some(d) = &a.decided_for && *d != name { " (decided for " (d) ")" }
                                }
                            }
                            @match (&a.policy, a.decision) {
                                (Some(p), None) => {
                                    p.policy-note {
                                        button.switch type="button" role="switch" aria-checked="true" aria-disabled="true" disabled
                                            aria-label=(format!("{name} for {shown}: granted in {}, read-only", p.file)) {
                                            span.knob aria-hidden="true" {} span.state { "On" }
                                        }
                                        " Read-only: granted in " code { (p.file) } "; change it there."
                                    }
                                }
                                _ => { (switch(csrf, &here, &a.app_id, &name, a.granted, &format!("{name} for {shown}"))) }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="readers-h" {
            h2 id="readers-h" { "Reading it now" }
            @if readers.is_empty() {
                p.empty { "Nobody follows it right now." }
            } @else {
                (readers_table(csrf, &here, &readers))
            }
        }
        (charts::access_chart(&day, &Period::day("used-h", format!("Who used {name} in the last 24 hours"), now), Some(&name), &here))
        (charts::access_chart(&week, &Period::week("used7-h", format!("Who used {name} in the last 7 days"), now), Some(&name), &here))
    };
    layout(&name, &here, csrf, core, body)
}

/// The name of each of `ids` from the desktop entry that may speak for
/// it (`desktop_entry::display_of`), and whether the dashboard serves an
/// icon for it (read in a blocking task: the file system).
async fn entries(ids: Vec<String>) -> BTreeMap<String, (Option<String>, bool)> {
    tokio::task::spawn_blocking(move || {
        ids.into_iter()
            .map(|id| {
                let name = crate::desktop_entry::display_of(&id).map(|e| e.name);
                let icon = super::icons::of_app(&id).is_some();
                (id, (name, icon))
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// `../` on a page one level down, `./` at the root: a link that names
/// one of the session's own paths.
fn up_or_dot(here: &str) -> &'static str {
    match up(here) {
        "" => "./",
        u => u,
    }
}

fn readers_table(csrf: &str, here: &str, readers: &[crate::core::readers::ReaderView]) -> Markup {
    html! {
        table.readers tabindex="0" {
            caption { "Live subscriptions and MCP sessions" }
            thead { tr { th scope="col" { "App" } th scope="col" { "How" } th scope="col" { "Follows" } th scope="col" { "Since" } th scope="col" { span.sr { "Actions" } } } }
            tbody {
                @for r in readers {
                    tr {
                        th scope="row" { a href=(app_href(here, &r.app_id)) { (app_label(r.name.as_deref(), &r.app_id)) } @if let Some(c) = &r.client { span.client { (c) } } }
                        td { (r.channel) " (" (r.transport) ")" }
                        td { @if r.categories.0.is_empty() { "—" } @else { (r.categories.0.join(", ")) } }
                        td { (short(&r.since)) }
                        td {
                            form method="post" action=(format!("{}end-reader", up(here))) data-fetch {
                                input type="hidden" name="csrf" value=(csrf);
                                input type="hidden" name="back" value=(here);
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

/// Every category, what it means, and how many apps may see it.
pub(super) fn categories(core: &Handles, csrf: &str) -> Markup {
    let cols = columns(core);
    let allowed = core.manage.allowed_apps(&cols);
    let body = html! {
        p { "What apps can ask to see, one page each: who may, who asked, who used it." }
        ul.categories {
            @for (c, n) in cols.iter().zip(allowed) {
                @let name = c.to_string();
                li {
                    a href=(category_href("/categories", &name)) { (name) }
                    span.desc { (c.description()) }
                    span.count { @if n == 0 { "no app allowed" } @else if n == 1 { "1 app allowed" } @else { (n) " apps allowed" } }
                }
            }
        }
    };
    layout("Categories", "/categories", csrf, core, body)
}

/// How the broker knows an app, in words.
fn known_by(source: &str) -> String {
    match IdentitySource::parse(source) {
        Some(s) => format!("{} ({})", s.as_str(), s.meaning()),
        None => source.to_owned(),
    }
}

/// An app's page: its icon and name (from the desktop entry that may
/// speak for it), its identity and how the broker knows it, what it may
/// see and until when, what it read in the last 7 days, its live
/// readers, revoke everything.
pub(super) async fn app(core: &Handles, csrf: &str, app: &AppId) -> Markup {
    let id = app.as_str().to_owned();
    let here = format!("/app/{}", segment(&id));
    let now = core.manage.now();
    let lookup = id.clone();
    let (entry, icon) = tokio::task::spawn_blocking(move || {
        (
            crate::desktop_entry::display_of(&lookup),
            super::icons::of_app(&lookup).is_some(),
        )
    })
    .await
    .unwrap_or((None, false));
    let known = core.manage.apps().into_iter().find(|a| a.app_id == id);
    let decisions: Vec<_> = core
        .manage
        .grants()
        .into_iter()
        .filter(|g| g.app_id == id && g.origin != "policy")
        .collect();
    let policy = core.manage.policy_grants(app);
    let token = id
        .strip_prefix("token:")
        .and_then(|n| core.tokens.list().into_iter().find(|t| t.name == n));
    let readers: Vec<_> = core
        .manage
        .readers()
        .into_iter()
        .filter(|r| r.app_id == id)
        .collect();
    // Seven days: today (UTC) and the six before it.
    let today = now.date_naive();
    let first = today - chrono::Days::new(6);
    let since = first
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc())
        .unwrap_or(now);
    let days: Vec<chrono::NaiveDate> = (0..7).map(|i| first + chrono::Days::new(i)).collect();
    let counts = core
        .manage
        .audit_counts(AuditCountQuery {
            since,
            until: now + Duration::seconds(1),
            app: Some(app.clone()),
            category: None,
            period: Some(Duration::days(1)),
        })
        .await;
    let name = entry.as_ref().map(|e| e.name.clone());
    let title = name.clone().unwrap_or_else(|| id.clone());
    let body = html! {
        div.app-head {
            @if icon {
                img.icon.big src=(format!("../icon/{}", segment(&id))) alt="" width="64" height="64";
            }
            dl.facts {
                @if name.is_some() {
                    dt { "Name" } dd { (title) " (from its desktop entry " code { (entry.as_ref().map(|e| e.desktop_id.as_str()).unwrap_or_default()) } ")" }
                }
                dt { "App id" } dd { code { (id) } }
                dt { "Known by" }
                dd {
                    @match (&known, &token) {
                        (Some(a), _) => { (known_by(a.identity_source)) },
                        (None, Some(_)) => { (known_by("token")) },
                        (None, None) if !policy.is_empty() => "named in policy.toml; it has not asked yet",
                        (None, None) => "it has not asked yet",
                    }
                }
                @if let Some(a) = &known {
                    dt { "Asked first" } dd { (short(&a.first_seen)) }
                    dt { "Asked last" } dd { (short(&a.last_seen)) }
                }
                @if let Some(t) = &token {
                    dt { "MCP token" }
                    dd {
                        (t.name) ", made " (short(&crate::core::view::time(&t.created)))
                        @match (t.expired, &t.expires) {
                            (true, Some(e)) => { ", " strong.expired { "expired" } " " (short(&crate::core::view::time(e))) },
                            (true, None) => { ", " strong.expired { "expired" } },
                            (false, Some(e)) => { ", expires " (short(&crate::core::view::time(e))) },
                            (false, None) => ", never expires",
                        }
                    }
                }
            }
        }
        section aria-labelledby="may-h" {
            h2 id="may-h" { "What it may see" }
            @if decisions.is_empty() && policy.is_empty() {
                p.empty { "Nothing decided: whatever it asks for is asked of you." }
            } @else {
                table.may tabindex="0" {
                    caption { "Decisions for " (title) }
                    thead { tr { th scope="col" { "Category" } th scope="col" { "Decision" } th scope="col" { "Until" } th scope="col" { "By" } } }
                    tbody {
                        @for g in &decisions {
                            tr {
                                th scope="row" { a href=(category_href(&here, &g.category)) { (g.category) } }
                                td.(g.decision) { (g.decision) }
                                td { @match &g.expires { Some(e) => (short(e)), None => "for good" } }
                                td { "you (" (g.origin) ")" }
                            }
                        }
                        @for p in &policy {
                            tr {
                                th scope="row" {
                                    @if p.covers.contains('*') { (p.covers) } @else { a href=(category_href(&here, &p.covers)) { (p.covers) } }
                                }
                                td.allow { "allow" }
                                td { @match &p.expires { Some(e) => (short(e)), None => "for good" } }
                                td { "policy.toml, read-only: " code { (p.file) } }
                            }
                        }
                    }
                }
            }
            form.revoke method="post" action="../decide" data-fetch data-confirm=(format!("Revoke every decision for {id}? It will be asked again.")) {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="back" value=(here);
                input type="hidden" name="app" value=(id);
                input type="hidden" name="decision" value="clear";
                button type="submit" aria-label=(format!("Revoke everything for {id}")) { "Revoke everything" }
                @if !policy.is_empty() {
                    " " span.note { "policy.toml's grants stay: change them in its file." }
                }
            }
        }
        (week(&counts, &days, &here))
        section aria-labelledby="forget-h" {
            h2 id="forget-h" { "Its history" }
            p { "What the timeline recorded of " (title) " (when it had focus, what it played or recorded, what it published) "
                "and what it read or was refused. Forgetting it deletes both for good; what it may see stays as it is." }
            form.forget-history method="post" action="../forget-history" data-fetch
                data-confirm=(format!("Forget the history of {id}: its timeline and what it read? Its decisions stay.")) {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="back" value=(here);
                input type="hidden" name="app" value=(id);
                button type="submit" aria-label=(format!("Forget the history of {id}")) { "Forget this app's history" }
            }
        }
        section aria-labelledby="readers-h" {
            h2 id="readers-h" { "Reading now" }
            @if readers.is_empty() {
                p.empty { "It follows nothing right now." }
            } @else {
                (readers_table(csrf, &here, &readers))
            }
        }
    };
    layout(&title, &here, csrf, core, body)
}

/// What an app read in the last 7 days: a bar per day (allowed
/// accesses) and the table per category and day.
fn week(
    counts: &crate::core::Result<Vec<crate::core::manage::AuditCountView>>,
    days: &[chrono::NaiveDate],
    here: &str,
) -> Markup {
    let rows = counts.as_ref().map(Vec::as_slice).unwrap_or_default();
    let day_of = |c: &crate::core::manage::AuditCountView| c.start.date_naive();
    let mut per: BTreeMap<&str, BTreeMap<chrono::NaiveDate, (u64, u64)>> = BTreeMap::new();
    for c in rows {
        let e = per
            .entry(&c.category)
            .or_default()
            .entry(day_of(c))
            .or_default();
        e.0 += c.allowed;
        e.1 += c.refused;
    }
    let totals: Vec<u64> = days
        .iter()
        .map(|d| per.values().filter_map(|m| m.get(d)).map(|(a, _)| a).sum())
        .collect();
    let max = totals.iter().copied().max().unwrap_or(0).max(1) as f64;
    let cats: BTreeSet<&str> = per.keys().copied().collect();
    let label = |d: &chrono::NaiveDate| d.format("%a %-d %b").to_string();
    let summary: Vec<String> = days
        .iter()
        .zip(&totals)
        .map(|(d, n)| format!("{} {n}", label(d)))
        .collect();
    let (w, h, bar_w) = (560.0, 140.0, 60.0);
    html! {
        section aria-labelledby="week-h" {
            h2 id="week-h" { "What it read, last 7 days" }
            @match counts {
                Err(e) => p.empty { (e.to_string()) },
                Ok(_) if cats.is_empty() => p.empty { "Nothing in the last 7 days." },
                Ok(_) => {
                    figure.chart.week {
                        svg role="img" aria-label=(format!("Accesses allowed per day, last 7 days: {}", summary.join("; ")))
                            viewBox=(format!("0 0 {w} {h}")) xmlns="http://www.w3.org/2000/svg" {
                            @for (i, (d, n)) in days.iter().zip(&totals).enumerate() {
                                @let x = 10.0 + i as f64 * (bar_w + 20.0);
                                @let bh = (*n as f64 / max) * (h - 40.0);
                                rect x=(x) y=(h - 20.0 - bh) width=(bar_w) height=(bh.max(1.0)) class="bar" {}
                                text x=(x + bar_w / 2.0) y=(h - 24.0 - bh) class="axis mid" { (n) }
                                text x=(x + bar_w / 2.0) y=(h - 4.0) class="axis mid" { (d.format("%a %-d")) }
                            }
                        }
                        figcaption { "Allowed accesses per day (UTC); the table has each category." }
                    }
                    table.week tabindex="0" {
                        caption { "Accesses per category and day, last 7 days (refused in brackets)" }
                        thead { tr { th scope="col" { "Category" } @for d in days { th scope="col" { (label(d)) } } } }
                        tbody {
                            @for c in &cats {
                                tr {
                                    th scope="row" { a href=(category_href(here, c)) { (c) } }
                                    @for d in days {
                                        td {
                                            @match per.get(c).and_then(|m| m.get(d)) {
                                                None => "0",
                                                Some((a, 0)) => (a),
                                                Some((a, r)) => { (a) " (" (r) ")" },
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The MCP bearer tokens, with their expiry (an expired one says so).
pub(super) fn tokens(core: &Handles, here: &str) -> Markup {
    let tokens = core.tokens.list();
    html! {
        section aria-labelledby="tokens-h" {
            h2 id="tokens-h" { "MCP tokens" }
            @if tokens.is_empty() {
                p.empty { "No token: no MCP host reaches contextd over HTTP. " code { "contextctl token create NAME" } " makes one." }
            } @else {
                table.tokens tabindex="0" {
                    caption { "Bearer tokens for MCP over HTTP; each is the app token:NAME" }
                    thead { tr { th scope="col" { "Token" } th scope="col" { "Made" } th scope="col" { "Expires" } th scope="col" { "State" } } }
                    tbody {
                        @for t in &tokens {
                            tr {
                                th scope="row" { a href=(app_href(here, &format!("token:{}", t.name))) { (t.name) } }
                                td { (short(&crate::core::view::time(&t.created))) }
                                td { @match &t.expires { Some(e) => (short(&crate::core::view::time(e))), None => "never" } }
                                td { @if t.expired { strong.expired { "expired" } } @else { "active" } }
                            }
                        }
                    }
                }
                p { "Remove one with " code { "contextctl token revoke NAME" } "." }
            }
        }
    }
}

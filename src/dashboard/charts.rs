//! The dashboard's pictures, drawn on the server as SVG (issue 53): the
//! access timeline (a row per category, a mark per app per access, and a
//! row per capture device from the capture log), the day as a strip of
//! which app had focus when (what played and what recorded below it),
//! and bars of time per app. A floor below the pages (`pages`, `detail`),
//! beside `frame`.
//!
//! Every chart is an `<svg role="img">` whose accessible name sums it up,
//! with a table beside it that says all of it; colours come from the
//! style sheet's classes (the CSP allows no inline style), so dark mode
//! follows the desktop's `prefers-color-scheme`. They draw what the
//! core's owner views say (`core::manage`) and decide nothing: which
//! intervals of time may be shown (none of an app the never-share rules
//! hold back, never a title) is the core's [`Manage::owner_spans`]
//! and [`Manage::owner_summary`].
//!
//! [`Manage::owner_spans`]: crate::core::manage::Manage::owner_spans
//! [`Manage::owner_summary`]: crate::core::manage::Manage::owner_summary

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use maud::{Markup, html};

use super::frame::{app_href, category_href, short};
use crate::core::manage::{AuditCountView, AuditView, SpanLane, SpanView};
use crate::core::view::{AppTotalsView, CaptureSessionView};
use crate::model::MediaKind;

/// Apps get one of this many colours, in the order they first appear.
const COLOURS: usize = 8;
/// The most apps the bars of time per app draw (the table has them all).
const MAX_BARS: usize = 12;

pub(super) fn parse(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A duration in words: `2 h 5 min`, `12 min`, `40 s`.
pub(super) fn span_words(d: Duration) -> String {
    let s = d.num_seconds().max(0);
    match s {
        s if s >= 3600 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

fn hhmm(t: DateTime<Utc>) -> String {
    t.format("%H:%M").to_string()
}

/// The word for a capture device, as the access timeline's rows name it.
pub(super) fn device(k: MediaKind) -> &'static str {
    match k {
        MediaKind::Playback => "playback",
        MediaKind::Microphone => "microphone",
        MediaKind::Camera => "camera",
        MediaKind::Screen => "screen",
    }
}

/// One thing an access chart draws: accesses of an app to a category
/// (counted; over `[at, end)` when they were counted per period), or an
/// app's use of a capture device from `at` to `end`.
#[derive(Debug, Clone)]
pub(super) struct Mark {
    /// The category, or the device of a capture.
    pub(super) row: String,
    pub(super) capture: bool,
    pub(super) app: String,
    pub(super) at: DateTime<Utc>,
    pub(super) end: Option<DateTime<Utc>>,
    pub(super) allowed: u64,
    pub(super) refused: u64,
}

/// The audit's rows, a mark each.
pub(super) fn audit_marks(rows: &[AuditView]) -> Vec<Mark> {
    rows.iter()
        .filter_map(|a| {
            Some(Mark {
                row: a.category.clone(),
                capture: false,
                app: a.app_id.clone(),
                at: parse(&a.time)?,
                end: None,
                allowed: if a.allowed { a.count } else { 0 },
                refused: if a.allowed { 0 } else { a.count },
            })
        })
        .collect()
}

/// The audit counted per `period`: a mark per app, category and period
/// with accesses, as wide as the period.
pub(super) fn count_marks(counts: &[AuditCountView], period: Duration) -> Vec<Mark> {
    counts
        .iter()
        .map(|c| Mark {
            row: c.category.clone(),
            capture: false,
            app: c.app_id.clone(),
            at: c.start,
            end: Some(c.start + period),
            allowed: c.allowed,
            refused: c.refused,
        })
        .collect()
}

/// The capture log's sessions (microphone, camera, screen), a row per
/// device, from when each started until it ended (or now).
pub(super) fn capture_marks(sessions: &[CaptureSessionView], now: DateTime<Utc>) -> Vec<Mark> {
    sessions
        .iter()
        .filter(|s| s.kind != MediaKind::Playback)
        .filter_map(|s| {
            let at = parse(&s.start)?;
            Some(Mark {
                row: device(s.kind).to_owned(),
                capture: true,
                app: s
                    .app_id
                    .clone()
                    .or_else(|| s.claimed_name.clone())
                    .unwrap_or_else(|| "an unknown app".into()),
                at,
                end: Some(s.end.as_deref().and_then(parse).unwrap_or(now)),
                allowed: 0,
                refused: 0,
            })
        })
        .collect()
}

/// The period an access chart shows.
pub(super) struct Period {
    /// The section heading's id.
    pub(super) id: &'static str,
    pub(super) title: String,
    /// The figure's and table's class (`day`: 24 hours, `days7`: 7 days).
    pub(super) class: &'static str,
    pub(super) since: DateTime<Utc>,
    pub(super) now: DateTime<Utc>,
    /// The lines across it, each with its label.
    pub(super) ticks: Vec<(DateTime<Utc>, String)>,
    /// What a mark is, for the caption.
    pub(super) marks_are: &'static str,
    /// What the section says when there is nothing.
    pub(super) empty: &'static str,
}

impl Period {
    /// The last 24 hours, a line every 6.
    pub(super) fn day(id: &'static str, title: String, now: DateTime<Utc>) -> Period {
        let since = now - Duration::hours(24);
        Period {
            id,
            title,
            class: "day",
            since,
            now,
            ticks: [0, 6, 12, 18, 24]
                .iter()
                .map(|h| {
                    let t = since + Duration::hours(*h);
                    (t, if *h == 24 { "now".into() } else { hhmm(t) })
                })
                .collect(),
            marks_are: "Each mark is an access; a hollow one was refused.",
            empty: "Nothing in the last 24 hours.",
        }
    }

    /// The last 7 days, a line at each midnight (UTC).
    pub(super) fn week(id: &'static str, title: String, now: DateTime<Utc>) -> Period {
        let since = now - Duration::days(7);
        let mut ticks = Vec::new();
        let mut day = since.date_naive();
        while let Some(next) = day.succ_opt() {
            let Some(t) = next.and_hms_opt(0, 0, 0).map(|t| t.and_utc()) else {
                break;
            };
            if t >= now {
                break;
            }
            ticks.push((t, t.format("%a %-d").to_string()));
            day = next;
        }
        Period {
            id,
            title,
            class: "days7",
            since,
            now,
            ticks,
            marks_are: "Each mark is an hour in which an app read it; a hollow one was refused every time.",
            empty: "Nothing in the last 7 days.",
        }
    }
}

/// What a row of an access chart's table sums up.
#[derive(Debug, Default, Clone, Copy)]
struct Sum {
    allowed: u64,
    refused: u64,
    used: Option<Duration>,
    last: Option<DateTime<Utc>>,
}

/// The access timeline of `p`: one row per category (then one per
/// capture device, from the capture log), a mark per app per access (a
/// refused one hollow), a bar per use of a device; the apps told apart by
/// colour and named in a legend; its accessible name sums it up and a
/// table says it all. `only`: just that category's row (a category's
/// page; `media.capture`'s has its devices' rows).
pub(super) fn access_chart(
    marks: &Result<Vec<Mark>, String>,
    p: &Period,
    only: Option<&str>,
    here: &str,
) -> Markup {
    let mut rows: Vec<&Mark> = match marks {
        Ok(m) => m
            .iter()
            .filter(|m| m.end.unwrap_or(m.at) >= p.since && m.at <= p.now)
            .filter(|m| {
                only.is_none_or(|c| {
                    if m.capture {
                        c == "media.capture"
                    } else {
                        m.row == c
                    }
                })
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    rows.sort_by_key(|m| m.at);
    // Apps in the order they first appear, for colours.
    let mut apps: Vec<&str> = Vec::new();
    for m in &rows {
        if !apps.contains(&m.app.as_str()) {
            apps.push(&m.app);
        }
    }
    let colour = |app: &str| apps.iter().position(|a| *a == app).unwrap_or(0) % COLOURS;
    // (capture, row) → app → sum
    let mut table: BTreeMap<(bool, &str), BTreeMap<&str, Sum>> = BTreeMap::new();
    for m in &rows {
        let e = table
            .entry((m.capture, &m.row))
            .or_default()
            .entry(&m.app)
            .or_default();
        e.allowed += m.allowed;
        e.refused += m.refused;
        if m.capture {
            let from = m.at.max(p.since);
            let to = m.end.unwrap_or(p.now).min(p.now);
            e.used = Some(e.used.unwrap_or(Duration::zero()) + (to - from).max(Duration::zero()));
        }
        let last = if m.capture {
            m.end.unwrap_or(m.at)
        } else {
            m.at
        };
        e.last = Some(e.last.map_or(last, |l| l.max(last)));
    }
    // The table names each row's category or device, but on a page of
    // one category (whose devices' rows `media.capture`'s has).
    let name_rows = only.is_none_or(|c| c == "media.capture");
    let (label_w, width, row_h, top) = (170.0, 640.0, 30.0, 6.0);
    let height = top + table.len().max(1) as f64 * row_h + 22.0;
    let span = (p.now - p.since).num_seconds().max(1) as f64;
    let x_of = |t: DateTime<Utc>| {
        label_w + ((t - p.since).num_seconds() as f64 / span).clamp(0.0, 1.0) * width
    };
    let summary: Vec<String> = table
        .iter()
        .map(|((capture, row), apps)| {
            let names: Vec<&str> = apps.keys().copied().collect();
            if *capture {
                let used = apps
                    .values()
                    .filter_map(|s| s.used)
                    .fold(Duration::zero(), |a, b| a + b);
                format!("{row}: in use {} by {}", span_words(used), names.join(", "))
            } else {
                let n: u64 = apps.values().map(|s| s.allowed + s.refused).sum();
                format!("{row}: {n} by {}", names.join(", "))
            }
        })
        .collect();
    html! {
        section aria-labelledby=(p.id) {
            h2 id=(p.id) { (p.title) }
            @match marks {
                Err(e) => p.empty { (e) },
                Ok(_) if rows.is_empty() => p.empty { (p.empty) },
                Ok(_) => {
                    figure.chart.(p.class) {
                        svg role="img" aria-label=(format!("{}. {}", p.title, summary.join("; ")))
                            viewBox=(format!("0 0 {} {height}", label_w + width + 10.0)) xmlns="http://www.w3.org/2000/svg" {
                            @for (t, label) in &p.ticks {
                                @let x = x_of(*t);
                                line x1=(x) x2=(x) y1=(top) y2=(height - 18.0) class="tick" {}
                                text x=(x) y=(height - 4.0) class=(if label == "now" { "axis end" } else if x <= label_w + 1.0 { "axis" } else { "axis mid" }) { (label) }
                            }
                            @if p.ticks.last().is_none_or(|(_, l)| l != "now") {
                                text x=(label_w + width) y=(height - 4.0) class="axis end" { "now" }
                            }
                            @for (i, ((capture, row), _)) in table.iter().enumerate() {
                                @let y = top + i as f64 * row_h;
                                text x="0" y=(y + 19.0) class="lbl" { (row) @if *capture { " (in use)" } }
                                rect x=(label_w) y=(y + 3.0) width=(width) height=(row_h - 6.0) class="track" {}
                                @for m in rows.iter().filter(|m| m.capture == *capture && m.row == *row) {
                                    @let x0 = x_of(m.at);
                                    @let w = m.end.map_or(3.0, |e| (x_of(e) - x0).max(3.0));
                                    @let x = if m.end.is_some() { x0 } else { x0 - 1.5 };
                                    @if m.capture {
                                        rect x=(x) y=(y + 6.0) width=(w) height=(row_h - 12.0)
                                            class=(format!("use c{}", colour(&m.app))) {
                                            title { (m.app) " · " (hhmm(m.at)) "–" (m.end.map(hhmm).unwrap_or_default()) }
                                        }
                                    } @else {
                                        rect x=(x) y=(y + 6.0) width=(w) height=(row_h - 12.0)
                                            class=(format!("mark c{}{}", colour(&m.app), if m.allowed == 0 { " refused" } else { "" })) {
                                            title {
                                                (m.app) " · " (short(&crate::core::view::time(&m.at)))
                                                @if m.allowed + m.refused > 1 { " ×" (m.allowed + m.refused) }
                                                @if m.refused > 0 { " (" (m.refused) " refused)" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                        figcaption {
                            "Times in UTC. " (p.marks_are) " A bar on a device's row is the time an app used it."
                            ul.legend {
                                @for app in &apps {
                                    li { span.swatch.(format!("c{}", colour(app))) aria-hidden="true" {} a href=(app_href(here, app)) { (app) } }
                                }
                            }
                        }
                    }
                    table.(p.class) tabindex="0" {
                        caption { (p.title) ", as a table" }
                        thead { tr {
                            @if name_rows { th scope="col" { "Category or device" } }
                            th scope="col" { "App" } th scope="col" { "Allowed" } th scope="col" { "Refused" }
                            th scope="col" { "In use" } th scope="col" { "Last" }
                        } }
                        tbody {
                            @for ((capture, row), apps) in &table {
                                @for (app, s) in apps {
                                    tr {
                                        @if name_rows {
                                            td { a href=(category_href(here, if *capture { "media.capture" } else { row })) { (row) } }
                                        }
                                        th scope="row" { a href=(app_href(here, app)) { (app) } }
                                        @if *capture { td { "—" } td { "—" } } @else { td { (s.allowed) } td { (s.refused) } }
                                        td { @match s.used { Some(d) => (span_words(d)), None => "—" } }
                                        td { @if let Some(l) = s.last { (short(&crate::core::view::time(&l))) } }
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

fn lane_name(l: SpanLane) -> &'static str {
    match l {
        SpanLane::Focus => "Focus",
        SpanLane::Playing => "Playing",
        SpanLane::Recording => "Recording",
    }
}

/// The day as a strip: which app had focus when, and below it what
/// played and what recorded, over the last 24 hours; the apps told apart
/// by colour (the most focused first) and named in a legend. Its
/// accessible name sums up each app's time; the table lists every
/// interval. No title is shown: only the app.
pub(super) fn day_strip(
    spans: &Result<Vec<SpanView>, String>,
    now: DateTime<Utc>,
    here: &str,
) -> Markup {
    let p = Period::day(
        "strip-h",
        "The day as a strip: who had focus when".into(),
        now,
    );
    let spans: &[SpanView] = spans.as_ref().map(Vec::as_slice).unwrap_or_default();
    // lane → app → (time, intervals)
    let mut per: BTreeMap<SpanLane, BTreeMap<&str, (Duration, usize)>> = BTreeMap::new();
    for s in spans {
        let e = per
            .entry(s.lane)
            .or_default()
            .entry(&s.app_id)
            .or_insert((Duration::zero(), 0));
        e.0 += s.end - s.start;
        e.1 += 1;
    }
    // Colours: the most focused app first, then the others as they come.
    let mut apps: Vec<(&str, Duration)> = per
        .get(&SpanLane::Focus)
        .map(|m| m.iter().map(|(a, (d, _))| (*a, *d)).collect())
        .unwrap_or_default();
    apps.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut order: Vec<&str> = apps.iter().map(|(a, _)| *a).collect();
    for s in spans {
        if !order.contains(&s.app_id.as_str()) {
            order.push(&s.app_id);
        }
    }
    let colour = |app: &str| order.iter().position(|a| *a == app).unwrap_or(0) % COLOURS;
    let lanes = [SpanLane::Focus, SpanLane::Playing, SpanLane::Recording];
    let (label_w, width, row_h, top) = (90.0, 720.0, 34.0, 6.0);
    let height = top + lanes.len() as f64 * row_h + 22.0;
    let span = (p.now - p.since).num_seconds().max(1) as f64;
    let x_of = |t: DateTime<Utc>| {
        label_w + ((t - p.since).num_seconds() as f64 / span).clamp(0.0, 1.0) * width
    };
    let summary: Vec<String> = lanes
        .iter()
        .map(|l| {
            let apps: Vec<String> = per
                .get(l)
                .map(|m| {
                    let mut v: Vec<(&&str, &(Duration, usize))> = m.iter().collect();
                    v.sort_by_key(|b| std::cmp::Reverse(b.1.0));
                    v.iter()
                        .map(|(a, (d, n))| format!("{a} {} in {n}", span_words(*d)))
                        .collect()
                })
                .unwrap_or_default();
            if apps.is_empty() {
                format!("{}: nothing", lane_name(*l).to_lowercase())
            } else {
                format!("{}: {}", lane_name(*l).to_lowercase(), apps.join(", "))
            }
        })
        .collect();
    html! {
        section aria-labelledby=(p.id) {
            h2 id=(p.id) { (p.title) }
            @if spans.is_empty() {
                p.empty { "No app had focus, played or recorded in the last 24 hours (or the timeline is off)." }
            } @else {
                figure.chart.strip {
                    svg role="img" aria-label=(format!("Which app had focus, played and recorded when, last 24 hours. {}", summary.join("; ")))
                        viewBox=(format!("0 0 {} {height}", label_w + width + 10.0)) xmlns="http://www.w3.org/2000/svg" {
                        @for (t, label) in &p.ticks {
                            @let x = x_of(*t);
                            line x1=(x) x2=(x) y1=(top) y2=(height - 18.0) class="tick" {}
                            text x=(x) y=(height - 4.0) class=(if label == "now" { "axis end" } else if x <= label_w + 1.0 { "axis" } else { "axis mid" }) { (label) }
                        }
                        @for (i, lane) in lanes.iter().enumerate() {
                            @let y = top + i as f64 * row_h;
                            text x="0" y=(y + 21.0) class="lbl" { (lane_name(*lane)) }
                            rect x=(label_w) y=(y + 3.0) width=(width) height=(row_h - 6.0) class="track" {}
                            @for s in spans.iter().filter(|s| s.lane == *lane) {
                                @let x0 = x_of(s.start);
                                rect x=(x0) y=(y + 5.0) width=((x_of(s.end) - x0).max(1.0)) height=(row_h - 10.0)
                                    class=(format!("span c{}", colour(&s.app_id))) {
                                    title { (s.app_id) " · " (hhmm(s.start)) "–" (hhmm(s.end)) }
                                }
                            }
                        }
                    }
                    figcaption {
                        "Times in UTC. The top row is the app whose window had focus; window titles are never shown, "
                        "and private windows, password managers and what you chose never to share are not recorded."
                        ul.legend {
                            @for app in &order {
                                li { span.swatch.(format!("c{}", colour(app))) aria-hidden="true" {} a href=(app_href(here, app)) { (app) } }
                            }
                        }
                    }
                }
                table.strip tabindex="0" {
                    caption { "The day as a strip, as a table: every interval, oldest first" }
                    thead { tr { th scope="col" { "What" } th scope="col" { "App" } th scope="col" { "From" } th scope="col" { "To" } th scope="col" { "How long" } } }
                    tbody {
                        @for s in spans {
                            tr {
                                td { (lane_name(s.lane)) }
                                th scope="row" { a href=(app_href(here, &s.app_id)) { (s.app_id) } }
                                td { (hhmm(s.start)) } td { (hhmm(s.end)) } td { (span_words(s.end - s.start)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A kind of time and how long.
type Lane = (&'static str, Option<f64>);

/// Bars of time per app: for each app (the most focused first, at most
/// [`MAX_BARS`]) a bar of focus, one of playing and one of recording, on
/// one scale; the table has every app.
pub(super) fn time_bars(
    id: &'static str,
    title: &str,
    class: &'static str,
    rows: &crate::core::Result<Vec<AppTotalsView>>,
    here: &str,
) -> Markup {
    let secs = |s: Option<f64>| s.unwrap_or(0.0).max(0.0);
    let words = |s: Option<f64>| match s {
        Some(s) if s > 0.0 => span_words(Duration::seconds(s as i64)),
        _ => "—".to_owned(),
    };
    html! {
        section aria-labelledby=(id) {
            h2 id=(id) { (title) }
            @match rows {
                Err(e) => p.empty { (e.to_string()) },
                Ok(rows) if rows.is_empty() => p.empty { "Nothing recorded." },
                Ok(rows) => {
                    @let shown: Vec<&AppTotalsView> = rows.iter().take(MAX_BARS).collect();
                    @let max = shown.iter().flat_map(|r| [secs(r.focus_s), secs(r.playback_s), secs(r.capture_s)])
                        .fold(1.0_f64, f64::max);
                    // Each app: its name, then a bar per kind of time it has.
                    @let (width, label_h, bar_h, gap) = (560.0, 16.0, 12.0, 8.0);
                    // (app, its lanes, where its group starts)
                    @let groups: Vec<(&AppTotalsView, Vec<Lane>, f64)> = shown.iter().scan(0.0, |y, r| {
                        let lanes: Vec<Lane> = [("focus", r.focus_s), ("playing", r.playback_s), ("recording", r.capture_s)]
                            .into_iter().filter(|(_, v)| secs(*v) > 0.0).collect();
                        let at = *y;
                        *y += label_h + lanes.len() as f64 * bar_h + gap;
                        Some((*r, lanes, at))
                    }).collect();
                    @let height = groups.last().map_or(0.0, |(_, l, y)| y + label_h + l.len() as f64 * bar_h) + 4.0;
                    @let summary: Vec<String> = shown.iter().map(|r| format!("{}: focus {}, playing {}, recording {}",
                        r.app_id, words(r.focus_s), words(r.playback_s), words(r.capture_s))).collect();
                    figure.chart.bars {
                        svg role="img" aria-label=(format!("{title}. {}", summary.join("; ")))
                            viewBox=(format!("0 0 {} {height}", width + 120.0)) xmlns="http://www.w3.org/2000/svg" {
                            @for (r, lanes, y) in &groups {
                                text x="0" y=(y + 12.0) class="lbl" { (r.app_id) }
                                @for (j, (lane, v)) in lanes.iter().enumerate() {
                                    @let by = y + label_h + j as f64 * bar_h;
                                    @let w = (secs(*v) / max * width).max(2.0);
                                    rect x="0" y=(by) width=(w) height=(bar_h - 2.0) class=(format!("lane {lane}")) {
                                        title { (r.app_id) " · " (lane) " " (words(*v)) }
                                    }
                                    text x=(w + 6.0) y=(by + 9.0) class="val" { (words(*v)) }
                                }
                            }
                        }
                        figcaption {
                            ul.legend {
                                li { span.swatch.lane.focus aria-hidden="true" {} "Focus" }
                                li { span.swatch.lane.playing aria-hidden="true" {} "Playing" }
                                li { span.swatch.lane.recording aria-hidden="true" {} "Recording (microphone, camera, screen)" }
                            }
                        }
                    }
                    table.(class) tabindex="0" {
                        caption { (title) ", as a table" }
                        thead { tr { th scope="col" { "App" } th scope="col" { "Focused" } th scope="col" { "Recording" } th scope="col" { "Playing" } } }
                        tbody {
                            @for r in rows {
                                tr {
                                    th scope="row" { a href=(app_href(here, &r.app_id)) { (r.app_id) } }
                                    td { (words(r.focus_s)) } td { (words(r.capture_s)) } td { (words(r.playback_s)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

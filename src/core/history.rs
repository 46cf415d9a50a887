//! The timeline recorder: turns changes of the state into intervals and
//! points for the history store, applying what the user chose to record.
//!
//! Pure logic (no I/O): the daemon feeds it every `Change` and hands the
//! resulting operations to the store, which writes them in batches.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::consent::BoxFut;
use super::state::{Change, ChangeKind};
use crate::model::{Category, MediaKind, StreamState};

/// What a history row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HistoryKind {
    Focus,
    Capture,
    Playback,
    Locked,
    Idle,
    Sleep,
    Notification,
    /// The document an app said it has open (org.contextd.Provider1).
    Document,
    /// The task an app said is current.
    Task,
    /// A file the user opened (a point: `recently-used.xbel` got it).
    #[serde(rename = "recent-document")]
    RecentDocument,
}

impl HistoryKind {
    pub const ALL: [HistoryKind; 10] = [
        HistoryKind::Focus,
        HistoryKind::Capture,
        HistoryKind::Playback,
        HistoryKind::Locked,
        HistoryKind::Idle,
        HistoryKind::Sleep,
        HistoryKind::Notification,
        HistoryKind::Document,
        HistoryKind::Task,
        HistoryKind::RecentDocument,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HistoryKind::Focus => "focus",
            HistoryKind::Capture => "capture",
            HistoryKind::Playback => "playback",
            HistoryKind::Locked => "locked",
            HistoryKind::Idle => "idle",
            HistoryKind::Sleep => "sleep",
            HistoryKind::Notification => "notification",
            HistoryKind::Document => "document",
            HistoryKind::Task => "task",
            HistoryKind::RecentDocument => "recent-document",
        }
    }

    pub fn parse(s: &str) -> Option<HistoryKind> {
        HistoryKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The category a reader needs (besides `history`) to see this row.
    pub fn category(self) -> Category {
        match self {
            HistoryKind::Focus => Category::Windows,
            HistoryKind::Capture => Category::MediaCapture,
            HistoryKind::Playback => Category::MediaPlayback,
            HistoryKind::Locked | HistoryKind::Idle | HistoryKind::Sleep => Category::Session,
            HistoryKind::Notification => Category::Notifications,
            HistoryKind::Document => Category::Provided("document".into()),
            HistoryKind::Task => Category::Provided("task".into()),
            HistoryKind::RecentDocument => Category::DocumentsRecent,
        }
    }
}

/// One row of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEvent {
    pub id: i64,
    pub kind: HistoryKind,
    pub app_id: Option<String>,
    /// Window title, media name or notification summary, when recorded.
    pub title: Option<String>,
    pub detail: Option<serde_json::Value>,
    pub start: DateTime<Utc>,
    /// `None` while the interval is open.
    pub end: Option<DateTime<Utc>>,
}

/// Time per app over a period, as `History1.Summary` and `summarize_time`
/// report it (`core::view::app_totals` decides what a reader sees).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AppTotals {
    pub app_id: String,
    pub focus_ms: i64,
    pub capture_ms: i64,
    pub playback_ms: i64,
}

/// A read of the timeline: rows overlapping `[since, until)` of the given
/// kinds (and apps, when any are named), oldest first, a page at a time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub kinds: Vec<HistoryKind>,
    pub apps: Vec<String>,
    /// Rows per page (0: 100; at most 1000).
    pub limit: u32,
    /// `start_ms:id` of the last row of the previous page.
    pub cursor: Option<(i64, i64)>,
}

/// A page cursor as readers pass it back (`start_ms:id`; empty: the first
/// page). Anything else is `InvalidArgs`.
pub fn parse_cursor(s: &str) -> Result<Option<(i64, i64)>, crate::core::Error> {
    if s.is_empty() {
        return Ok(None);
    }
    let bad = || {
        crate::core::Error::InvalidArgs(format!(
            "invalid cursor '{}'",
            s.chars().take(40).collect::<String>()
        ))
    };
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    Ok(Some((
        a.parse().map_err(|_| bad())?,
        b.parse().map_err(|_| bad())?,
    )))
}

/// A page of rows and the cursor of the next page (`None`: the last).
pub(crate) type Page = (Vec<HistoryEvent>, Option<String>);

/// A period that ends less than this before now ends now
/// ([`summary_until`]).
pub(crate) const NOW_SLACK: chrono::Duration = chrono::Duration::seconds(2);

/// Where a summary of a period ending at `until` reads to, `now` being
/// the read's own clock: a period that ends less than [`NOW_SLACK`]
/// before `now` was meant to end now (an MCP host or a D-Bus caller that
/// left `until` out got the publisher's clock, contextctl sends its own
/// in whole seconds), and between those clocks and this one the request
/// only travelled. Read to the same `now`, a summary takes the current
/// hour from its hourly totals instead of all of its rows
/// (`store::history`); it counts at most that much more time.
pub(crate) fn summary_until(until: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    if until < now && now - until <= NOW_SLACK {
        now
    } else {
        until
    }
}

/// The read side of the timeline's store (implemented by `store::history`),
/// so that the read service decides what a reader sees without SQL.
pub(crate) trait HistoryStore: Send + Sync + std::fmt::Debug {
    /// A page of rows in (start, id) order.
    fn query(&self, q: Query, now: DateTime<Utc>) -> BoxFut<'_, Result<Page, crate::core::Error>>;
    /// Focus, capture and playback time per app in `[since, until)`.
    fn summary(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<Vec<AppTotals>, crate::core::Error>>;
    /// Delete rows overlapping `[since, until)` of `apps` and `kinds`
    /// (empty: all); how many were deleted.
    fn forget(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        apps: Vec<String>,
        kinds: Vec<HistoryKind>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<u64, crate::core::Error>>;
}

/// What the store is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryOp {
    Open(HistoryEvent),
    Close { id: i64, end: DateTime<Utc> },
}

/// What the user chose to record (config.toml `[history]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistorySettings {
    /// Record at all.
    pub enabled: bool,
    /// Kinds to record (`focus`, `capture`, `playback`, `locked`, `idle`,
    /// `sleep`, `notification`, `document`, `task`, `recent-document`);
    /// all by default.
    pub record: Vec<String>,
    /// Record window titles with focus intervals.
    pub titles: bool,
    /// Record notification bodies (off by default: they are messages).
    pub notification_bodies: bool,
    /// Deprecated: merged into `[privacy] apps` (`core::privacy`), which
    /// holds them back from every reader too, not only the timeline.
    pub exclude_apps: Vec<String>,
    /// Deprecated: merged into `[privacy] titles`.
    pub exclude_titles: Vec<String>,
    /// Days kept, for every kind not in `retention_days_per_kind`.
    pub retention_days: u32,
    pub retention_days_per_kind: HashMap<String, u32>,
}

impl Default for HistorySettings {
    fn default() -> Self {
        HistorySettings {
            enabled: true,
            record: HistoryKind::ALL
                .iter()
                .map(|k| k.as_str().to_owned())
                .collect(),
            titles: true,
            notification_bodies: false,
            // Password managers and private windows are held back by
            // `core::privacy`'s built-in lists now, for every reader.
            exclude_apps: Vec::new(),
            exclude_titles: Vec::new(),
            retention_days: 14,
            retention_days_per_kind: HashMap::new(),
        }
    }
}

impl HistorySettings {
    pub fn records(&self, k: HistoryKind) -> bool {
        self.enabled && self.record.iter().any(|r| r == k.as_str())
    }

    /// The deprecated exclude lists as never-share rules (`[privacy]`).
    pub fn as_privacy(&self) -> super::privacy::PrivacySettings {
        super::privacy::PrivacySettings {
            apps: self.exclude_apps.clone(),
            titles: self.exclude_titles.clone(),
        }
    }

    pub fn retention(&self, k: HistoryKind) -> chrono::Duration {
        let days = self
            .retention_days_per_kind
            .get(k.as_str())
            .copied()
            .unwrap_or(self.retention_days)
            .max(1);
        chrono::Duration::days(i64::from(days))
    }
}

/// A stream's open interval, and the app and device it shares with the
/// other capture streams of that app (`None`: shared with none).
#[derive(Debug)]
struct OpenStream {
    id: i64,
    shared_as: Option<(crate::model::AppId, MediaKind)>,
}

/// Open intervals, keyed by what closes them.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    settings: HistorySettings,
    next_id: i64,
    focus: Option<i64>,
    /// Open stream intervals by stream id. Capture streams of one app (its
    /// kernel identity) and one device share one interval, as in
    /// `core::captures`: a camera seen through PipeWire and as an open
    /// device node at once is one use of the camera, not two.
    streams: HashMap<String, OpenStream>,
    session: HashMap<HistoryKind, i64>,
    /// The document and the task each app published (each its row, and
    /// the entry, whose name is the row's), by [`provided_slot`]. By the
    /// app's shared id and the entry's shared text, not copies of them,
    /// and one key per app, not per app and kind: with a thousand
    /// publishers the copies weighed more than the table.
    provided: HashMap<crate::model::AppId, [Option<(i64, crate::model::ProvidedData)>; 2]>,
    paused: bool,
    /// The never-share rules in force (the state's): what they hold back
    /// is never recorded. The state cleaned every change already; asked
    /// again here for what the changes cannot say (a stream's app, a
    /// document's name).
    privacy: std::sync::Arc<super::privacy::Privacy>,
}

/// Where [`Recorder`] keeps an app's row of a provided kind: its
/// document, or its task (the only provided kinds the timeline records).
fn provided_slot(kind: HistoryKind) -> usize {
    usize::from(kind == HistoryKind::Task)
}

impl Recorder {
    pub(crate) fn new(settings: HistorySettings, next_id: i64) -> Self {
        Recorder {
            settings,
            next_id: next_id.max(1),
            ..Default::default()
        }
    }

    /// Record under the never-share rules `privacy` (the state's).
    pub(crate) fn with_privacy(mut self, privacy: std::sync::Arc<super::privacy::Privacy>) -> Self {
        self.privacy = privacy;
        self
    }

    fn open(&mut self, ev: HistoryEvent, out: &mut Vec<HistoryOp>) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        out.push(HistoryOp::Open(HistoryEvent { id, ..ev }));
        id
    }

    fn close(id: Option<i64>, now: DateTime<Utc>, out: &mut Vec<HistoryOp>) {
        if let Some(id) = id {
            out.push(HistoryOp::Close { id, end: now });
        }
    }

    /// Close every open interval (pause, shutdown).
    pub(crate) fn close_all(&mut self, now: DateTime<Utc>) -> Vec<HistoryOp> {
        let mut out = Vec::new();
        Self::close(self.focus.take(), now, &mut out);
        let mut ids: Vec<i64> = self.streams.drain().map(|(_, o)| o.id).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            out.push(HistoryOp::Close { id, end: now });
        }
        for (_, id) in self.session.drain() {
            out.push(HistoryOp::Close { id, end: now });
        }
        for (_, rows) in self.provided.drain() {
            for (id, _) in rows.into_iter().flatten() {
                out.push(HistoryOp::Close { id, end: now });
            }
        }
        out
    }

    /// While paused nothing is recorded; pausing closes what is open.
    pub(crate) fn set_paused(&mut self, paused: bool, now: DateTime<Utc>) -> Vec<HistoryOp> {
        let was = self.paused;
        self.paused = paused;
        if paused && !was {
            self.close_all(now)
        } else {
            Vec::new()
        }
    }

    pub(crate) fn observe(&mut self, change: &Change, now: DateTime<Utc>) -> Vec<HistoryOp> {
        let mut out = Vec::new();
        if self.paused || !self.settings.enabled {
            return out;
        }
        let rules = self.privacy.rules();
        match change {
            Change::Focus { window } => {
                Self::close(self.focus.take(), now, &mut out);
                if !self.settings.records(HistoryKind::Focus) {
                    return out;
                }
                if let Some(w) = window
                    && w.title_hidden.is_none()
                    && rules.window(w).is_none()
                {
                    let id = self.open(
                        HistoryEvent {
                            id: 0,
                            kind: HistoryKind::Focus,
                            app_id: Some(w.app_id.clone()),
                            title: self.settings.titles.then(|| w.title.clone()),
                            detail: None,
                            start: now,
                            end: None,
                        },
                        &mut out,
                    );
                    self.focus = Some(id);
                }
            }
            Change::Window {
                kind: ChangeKind::Changed,
                window,
                ..
            } if self.focus.is_some()
                && window.states.activated
                && (window.title_hidden.is_some() || rules.window(window).is_some()) =>
            {
                // The focused window became private: stop recording it
                // from now on.
                Self::close(self.focus.take(), now, &mut out);
            }
            Change::Stream { kind, stream } => {
                let hk = if stream.kind == MediaKind::Playback {
                    HistoryKind::Playback
                } else {
                    HistoryKind::Capture
                };
                let running = *kind != ChangeKind::Closed && stream.state == StreamState::Running;
                let open = self.streams.get(&stream.id).map(|o| o.id);
                let shared_as = (hk == HistoryKind::Capture)
                    .then(|| stream.app_id.clone().map(|a| (a, stream.kind)))
                    .flatten();
                let joined = shared_as.as_ref().and_then(|key| {
                    self.streams
                        .values()
                        .find(|o| o.shared_as.as_ref() == Some(key))
                        .map(|o| o.id)
                });
                match (open, running) {
                    (None, true) if joined.is_some() => {
                        if let Some(id) = joined {
                            self.streams
                                .insert(stream.id.clone(), OpenStream { id, shared_as });
                        }
                    }
                    (None, true) => {
                        let app = stream
                            .app_id
                            .as_ref()
                            .map(|a| a.to_string())
                            .or_else(|| stream.claimed_name.clone());
                        if !self.settings.records(hk)
                            || app.as_deref().is_some_and(|a| rules.app(a).is_some())
                        {
                            return out;
                        }
                        let device = match stream.kind {
                            MediaKind::Microphone => "microphone",
                            MediaKind::Camera => "camera",
                            MediaKind::Screen => "screen",
                            MediaKind::Playback => "playback",
                        };
                        let id = self.open(
                            HistoryEvent {
                                id: 0,
                                kind: hk,
                                app_id: app,
                                title: stream.media_name.clone(),
                                detail: Some(
                                    serde_json::json!({ "device": device, "stream_id": stream.id }),
                                ),
                                start: now,
                                end: None,
                            },
                            &mut out,
                        );
                        self.streams
                            .insert(stream.id.clone(), OpenStream { id, shared_as });
                    }
                    (Some(id), false) => {
                        self.streams.remove(&stream.id);
                        if !self.streams.values().any(|o| o.id == id) {
                            out.push(HistoryOp::Close { id, end: now });
                        }
                    }
                    _ => {}
                }
            }
            Change::Provided { kind, context } => {
                // Documents and tasks, by name; never the data (a
                // selection's text stays out of the timeline).
                let hk = match &*context.kind {
                    "document" => HistoryKind::Document,
                    "task" => HistoryKind::Task,
                    _ => return out,
                };
                let name = (*kind != ChangeKind::Closed)
                    .then(|| crate::core::vocabulary::title(&context.data))
                    .flatten();
                let app = &context.app_id;
                let slot = provided_slot(hk);
                let open = self
                    .provided
                    .get(app)
                    .and_then(|rows| rows[slot].as_ref())
                    .map(|(id, data)| (*id, crate::core::vocabulary::title(data)));
                let keep = matches!((&open, &name), (Some((_, Some(a))), Some(b)) if a == b);
                if keep {
                    // The same name: the row goes on, with the newest entry
                    // (the one before may go).
                    if let Some((_, data)) = self
                        .provided
                        .get_mut(app)
                        .and_then(|rows| rows[slot].as_mut())
                    {
                        *data = context.data.clone();
                    }
                    return out;
                }
                if let Some((id, _)) = open {
                    if let Some(rows) = self.provided.get_mut(app) {
                        rows[slot] = None;
                        if rows.iter().all(Option::is_none) {
                            self.provided.remove(app);
                        }
                    }
                    out.push(HistoryOp::Close { id, end: now });
                }
                let Some(name) = name else {
                    return out;
                };
                if !self.settings.records(hk)
                    || rules.app(context.app_id.as_str()).is_some()
                    || rules.title(&name).is_some()
                {
                    return out;
                }
                let title = self.settings.titles.then(|| name.clone());
                let id = self.open(
                    HistoryEvent {
                        id: 0,
                        kind: hk,
                        app_id: Some(context.app_id.to_string()),
                        title,
                        detail: None,
                        start: now,
                        end: None,
                    },
                    &mut out,
                );
                self.provided.entry(app.clone()).or_default()[slot] =
                    Some((id, context.data.clone()));
            }
            Change::RecentDocuments { new, .. } => {
                // A point per file used since the last list: by name (a
                // title, as a document's), its URI and type as detail.
                // Excluded paths never reach the state, so never here.
                if !self.settings.records(HistoryKind::RecentDocument) {
                    return out;
                }
                for d in new {
                    if !rules.document_shown(d) {
                        continue;
                    }
                    let mut detail = serde_json::json!({ "uri": d.uri });
                    if let Some(m) = &d.mime_type {
                        detail["mime_type"] = serde_json::json!(m);
                    }
                    let id = self.open(
                        HistoryEvent {
                            id: 0,
                            kind: HistoryKind::RecentDocument,
                            app_id: d.app.clone(),
                            title: self.settings.titles.then(|| d.name.clone()),
                            detail: Some(detail),
                            start: now,
                            end: None,
                        },
                        &mut out,
                    );
                    out.push(HistoryOp::Close { id, end: now });
                }
            }
            Change::Session(s) => {
                let s = s.clone().unwrap_or_default();
                for (k, on) in [
                    (HistoryKind::Locked, s.locked),
                    (HistoryKind::Idle, s.idle),
                    (HistoryKind::Sleep, s.preparing_for_sleep),
                ] {
                    match (self.session.get(&k).copied(), on) {
                        (None, true) if self.settings.records(k) => {
                            let id = self.open(
                                HistoryEvent {
                                    id: 0,
                                    kind: k,
                                    app_id: None,
                                    title: None,
                                    detail: None,
                                    start: now,
                                    end: None,
                                },
                                &mut out,
                            );
                            self.session.insert(k, id);
                        }
                        (Some(id), false) => {
                            self.session.remove(&k);
                            out.push(HistoryOp::Close { id, end: now });
                        }
                        _ => {}
                    }
                }
            }
            Change::Notification {
                kind: ChangeKind::Opened,
                notification: n,
                ..
            } => {
                if !self.settings.records(HistoryKind::Notification)
                    || rules.app(&n.app_name).is_some()
                {
                    return out;
                }
                let detail = self
                    .settings
                    .notification_bodies
                    .then(|| serde_json::json!({ "body": n.body }));
                let id = self.open(
                    HistoryEvent {
                        id: 0,
                        kind: HistoryKind::Notification,
                        app_id: Some(n.app_name.clone()),
                        title: Some(n.summary.clone()),
                        detail,
                        start: now,
                        end: None,
                    },
                    &mut out,
                );
                out.push(HistoryOp::Close { id, end: now });
            }
            _ => {}
        }
        out
    }
}

/// The timeline's write side, owned by core (implemented by
/// `store::history::History`, which queues the operations and writes them
/// in batches on a task of its own): the observer below hands it what the
/// recorder decided, synchronously, as each change is applied, so that
/// the state's lock is never held across a write.
pub(crate) trait HistorySink: Send + 'static {
    /// Queue `ops`, in order after those queued before; never waits.
    fn submit(&self, ops: Vec<HistoryOp>);
}

/// The state's observer that records the timeline: every change, in the
/// order the pump applied it, through the [`Recorder`] (what the user
/// chose to record, the never-share rules), to the history writer `W`.
#[derive(Debug)]
pub(crate) struct Timeline<W> {
    recorder: Recorder,
    writer: W,
}

impl<W: HistorySink> Timeline<W> {
    pub(crate) fn new(recorder: Recorder, writer: W) -> Self {
        Timeline { recorder, writer }
    }
}

impl<W: HistorySink> super::state::StateObserver for Timeline<W> {
    fn changes(&mut self, changes: &[Change], now: DateTime<Utc>) {
        for c in changes {
            let ops = self.recorder.observe(c, now);
            if !ops.is_empty() {
                self.writer.submit(ops);
            }
        }
    }

    /// Pausing closes what is open; the writer hears of every pause and
    /// resume, even with nothing to close.
    fn paused(&mut self, paused: bool, now: DateTime<Utc>) {
        let ops = self.recorder.set_paused(paused, now);
        self.writer.submit(ops);
    }
}

/// The timeline's retention side (implemented by `store::history::History`):
/// delete what `settings` no longer keep at `now`, in steps, and say how
/// many rows went.
pub(crate) trait HistoryPurge: Send + Sync + 'static {
    fn purge<'a>(
        &'a self,
        settings: &'a HistorySettings,
        now: DateTime<Utc>,
    ) -> BoxFut<'a, Result<u64, crate::core::Error>>;
}

/// How often retention runs after the first time (at start).
pub(crate) const RETENTION_EVERY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Retention: purge at start and then `every` (a day: [`RETENTION_EVERY`])
/// until `cancel`. A purge in progress is dropped on `cancel`: the store
/// purges in steps, so a stop never waits for a big purge, and what is
/// left goes next time.
pub(crate) async fn retention(
    store: impl HistoryPurge,
    settings: HistorySettings,
    clock: std::sync::Arc<dyn super::clock::Clock>,
    every: std::time::Duration,
    cancel: tokio_util::sync::CancellationToken,
) {
    let mut ticks = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = ticks.tick() => {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    r = store.purge(&settings, clock.now()) => match r {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(rows = n, "history retention: purged"),
                        Err(e) => tracing::warn!(error = %e, "history retention failed"),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Window, WindowStates};

    /// A summary "until now" is read to the read's own clock; a period
    /// the caller ended earlier (or later) keeps its end.
    #[test]
    fn a_period_ending_just_before_now_ends_now() {
        let now = Utc::now();
        let s = chrono::Duration::seconds;
        assert_eq!(summary_until(now, now), now);
        assert_eq!(summary_until(now - s(1), now), now);
        assert_eq!(summary_until(now - NOW_SLACK, now), now);
        assert_eq!(summary_until(now - s(3), now), now - s(3));
        assert_eq!(summary_until(now + s(1), now), now + s(1));
    }

    /// The allocation-free match is `to_lowercase` + `contains`, ASCII or
    /// not.
    #[test]
    fn patterns_match_as_lowercased_text_contains_them() {
        use crate::core::privacy::contains_lowercase;
        let old = |h: &str, n: &str| h.to_lowercase().contains(&n.to_lowercase());
        let texts = [
            "",
            "a",
            "KeePassXC",
            "org.keepassxc.KeePassXC",
            "Private Browsing — Firefox",
            "(Private) x",
            "İstanbul",
            "ÄBC straße",
            "Σίσυφος",
            "ǅ",
            "abc\u{0}d",
        ];
        let patterns = [
            "",
            "keepassxc",
            "KEEPASS",
            "private browsing",
            "(private)",
            "i̇stanbul",
            "istanbul",
            "äbc",
            "STRASSE",
            "straße",
            "σίσυφος",
            "ǆ",
            "\u{0}d",
            "c\u{0}",
            "xyz",
            "a",
        ];
        for h in texts {
            for n in patterns {
                assert_eq!(contains_lowercase(h, n), old(h, n), "{h:?} {n:?}");
            }
        }
        let s = crate::core::privacy::Rules::default();
        assert!(s.app("org.KeePassXC.KeePassXC").is_some());
        assert!(s.app("org.gnome.TextEditor").is_none());
        assert!(s.title("Mozilla Firefox (Private Browsing)").is_some());
        assert!(s.title("notes.txt").is_none());
    }

    fn w(app: &str, title: &str) -> Window {
        Window {
            id: format!("{app}-1"),
            app_id: app.into(),
            app_name: None,
            icon: None,
            title: title.into(),
            states: WindowStates {
                activated: true,
                ..Default::default()
            },
            outputs: vec![],
            parent: None,
            first_seen: Utc::now(),
            last_focused: None,
            attributed_by: Default::default(),
            title_hidden: None,
            process: None,
            sandbox: None,
        }
    }

    #[test]
    fn documents_and_tasks_by_name_never_selections() {
        use crate::model::{AppId, ProvidedContext};
        let p = |kind: &str, data: serde_json::Value| ProvidedContext {
            app_id: AppId::new("org.gnome.TextEditor").expect("app"),
            kind: kind.into(),
            data: data.into(),
            updated: Utc::now(),
        };
        let change = |k: ChangeKind, c: ProvidedContext| Change::Provided {
            kind: k,
            context: c,
        };
        let mut r = Recorder::new(HistorySettings::default(), 1);
        let t0 = Utc::now();
        let ops = r.observe(
            &change(
                ChangeKind::Opened,
                p("document", serde_json::json!({"name": "a.txt"})),
            ),
            t0,
        );
        assert!(
            matches!(&ops[..], [HistoryOp::Open(e)] if e.kind == HistoryKind::Document && e.title.as_deref() == Some("a.txt")),
            "{ops:?}"
        );
        // Same name: nothing; another name: close and open.
        let ops = r.observe(
            &change(
                ChangeKind::Changed,
                p(
                    "document",
                    serde_json::json!({"name": "a.txt", "dateModified": "2026-11-23T00:00:00Z"}),
                ),
            ),
            t0,
        );
        assert!(ops.is_empty(), "{ops:?}");
        let ops = r.observe(
            &change(
                ChangeKind::Changed,
                p("document", serde_json::json!({"name": "b.txt"})),
            ),
            t0,
        );
        assert!(
            matches!(&ops[..], [HistoryOp::Close { id: 1, .. }, HistoryOp::Open(e)] if e.id == 2),
            "{ops:?}"
        );
        let ops = r.observe(
            &change(
                ChangeKind::Closed,
                p("document", serde_json::json!({"name": "b.txt"})),
            ),
            t0,
        );
        assert!(
            matches!(&ops[..], [HistoryOp::Close { id: 2, .. }]),
            "{ops:?}"
        );
        let ops = r.observe(
            &change(
                ChangeKind::Opened,
                p("selection", serde_json::json!({"text": "secret"})),
            ),
            t0,
        );
        assert!(ops.is_empty(), "{ops:?}");
    }

    /// A history writer that keeps what it was handed.
    #[derive(Default, Clone)]
    struct Kept(std::sync::Arc<std::sync::Mutex<Vec<Vec<HistoryOp>>>>);

    impl HistorySink for Kept {
        fn submit(&self, ops: Vec<HistoryOp>) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(ops);
        }
    }

    impl Kept {
        fn taken(&self) -> Vec<Vec<HistoryOp>> {
            std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
        }
    }

    /// The observer hands the writer what the recorder decided, change by
    /// change; while the user has paused sharing, an app that takes the
    /// focus (or anything else that changes) reaches the writer not at
    /// all, and the pause closed what was open.
    #[test]
    fn the_timeline_writes_what_the_recorder_decides_and_nothing_while_paused() {
        use crate::core::state::StateObserver;
        let kept = Kept::default();
        let mut t = Timeline::new(Recorder::new(HistorySettings::default(), 1), kept.clone());
        let t0 = Utc::now();
        let focus = |app: &str| Change::Focus {
            window: Some(w(app, "notes")),
        };
        t.changes(&[focus("org.gnome.TextEditor")], t0);
        let got = kept.taken();
        assert!(
            matches!(&got[..], [ops] if matches!(&ops[..], [HistoryOp::Open(e)] if e.id == 1)),
            "{got:?}"
        );
        t.paused(true, t0);
        assert_eq!(
            kept.taken(),
            vec![vec![HistoryOp::Close { id: 1, end: t0 }]]
        );
        t.changes(
            &[focus("org.example.Spy"), focus("org.gnome.TextEditor")],
            t0,
        );
        assert!(kept.taken().is_empty(), "nothing recorded while paused");
        t.paused(false, t0);
        assert_eq!(kept.taken(), vec![Vec::new()], "the resume is said");
        t.changes(&[focus("org.gnome.TextEditor")], t0);
        assert_eq!(kept.taken().len(), 1);
    }

    /// A store whose purge counts its calls, or never ends.
    #[derive(Clone, Default)]
    struct Purges {
        calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
        stuck: bool,
    }

    impl HistoryPurge for Purges {
        fn purge<'a>(
            &'a self,
            _: &'a HistorySettings,
            _: DateTime<Utc>,
        ) -> BoxFut<'a, Result<u64, crate::core::Error>> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let stuck = self.stuck;
            Box::pin(async move {
                if stuck {
                    std::future::pending::<()>().await;
                }
                Ok(1)
            })
        }
    }

    fn calls(p: &Purges) -> usize {
        p.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Retention runs at start and again each period, and ends with its
    /// level.
    #[tokio::test]
    async fn retention_purges_at_start_and_each_period() {
        let store = Purges::default();
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(retention(
            store.clone(),
            HistorySettings::default(),
            std::sync::Arc::new(crate::core::clock::SystemClock),
            std::time::Duration::from_millis(5),
            cancel.clone(),
        ));
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while calls(&store) < 2 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("purged twice");
        cancel.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("ends")
            .expect("joins");
    }

    /// A purge that does not end (a huge timeline on a slow disk) does
    /// not hold the stop: the task ends when cancelled.
    #[tokio::test]
    async fn a_stuck_purge_does_not_hold_the_stop() {
        let store = Purges {
            stuck: true,
            ..Default::default()
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(retention(
            store.clone(),
            HistorySettings::default(),
            std::sync::Arc::new(crate::core::clock::SystemClock),
            RETENTION_EVERY,
            cancel.clone(),
        ));
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while calls(&store) < 1 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("purge started");
        cancel.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("ends while the purge is stuck")
            .expect("joins");
    }

    #[test]
    fn focus_intervals_exclusions_and_pause() {
        let mut r = Recorder::new(HistorySettings::default(), 1);
        let t0 = Utc::now();
        let ops = r.observe(
            &Change::Focus {
                window: Some(w("org.gnome.TextEditor", "notes")),
            },
            t0,
        );
        assert!(
            matches!(&ops[..], [HistoryOp::Open(e)] if e.id == 1 && e.title.as_deref() == Some("notes"))
        );
        let ops = r.observe(
            &Change::Focus {
                window: Some(w("org.keepassxc.KeePassXC", "vault")),
            },
            t0,
        );
        assert_eq!(
            ops,
            vec![HistoryOp::Close { id: 1, end: t0 }],
            "excluded app is not recorded"
        );
        let ops = r.observe(
            &Change::Focus {
                window: Some(w("firefox", "Mozilla Firefox Private Browsing")),
            },
            t0,
        );
        assert!(ops.is_empty(), "private window is not recorded: {ops:?}");
        r.observe(
            &Change::Focus {
                window: Some(w("firefox", "News")),
            },
            t0,
        );
        let ops = r.set_paused(true, t0);
        assert_eq!(ops.len(), 1);
        assert!(
            r.observe(
                &Change::Focus {
                    window: Some(w("org.a", "x"))
                },
                t0
            )
            .is_empty()
        );
    }

    #[test]
    fn capture_of_one_app_and_device_is_one_interval() {
        use crate::model::{AppId, MediaStream};
        let cam = |id: &str, exe: &str| MediaStream {
            id: id.into(),
            kind: MediaKind::Camera,
            app_id: AppId::from_exe(exe).ok(),
            attributed_by: Default::default(),
            pid: Some(42),
            claimed_name: None,
            claimed_binary: None,
            media_name: None,
            media_role: None,
            state: StreamState::Running,
            since: Utc::now(),
            player: None,
        };
        let ch = |k: ChangeKind, s: MediaStream| Change::Stream { kind: k, stream: s };
        let mut r = Recorder::new(HistorySettings::default(), 1);
        let t0 = Utc::now();
        let opened = |ops: &[HistoryOp]| {
            ops.iter()
                .filter(|o| matches!(o, HistoryOp::Open(_)))
                .count()
        };
        let ops = r.observe(&ch(ChangeKind::Opened, cam("pw-1-7", "/usr/bin/call")), t0);
        assert_eq!(opened(&ops), 1, "{ops:?}");
        let a = cam("v4l2-1-video0-42", "/usr/bin/call");
        assert!(r.observe(&ch(ChangeKind::Opened, a.clone()), t0).is_empty());
        let b = cam("v4l2-1-video0-43", "/usr/bin/other");
        assert_eq!(opened(&r.observe(&ch(ChangeKind::Opened, b), t0)), 1);
        // One of the app's two streams ends: its interval goes on.
        let gone = cam("pw-1-7", "/usr/bin/call");
        assert!(r.observe(&ch(ChangeKind::Closed, gone), t0).is_empty());
        let ops = r.observe(&ch(ChangeKind::Closed, a), t0);
        assert!(
            matches!(&ops[..], [HistoryOp::Close { id: 1, .. }]),
            "{ops:?}"
        );
        // Shutdown closes the other app's interval once.
        assert_eq!(r.close_all(t0).len(), 1);
    }
}

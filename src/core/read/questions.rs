//! The questions a reader asks, one type each ([`Read`]): which
//! categories it needs and how its view is built from what the reader
//! may see. Nothing here asks the gate: [`Reads::read`] decides, audits
//! and prompts, once for every question.

use std::path::PathBuf;

use chrono::{DateTime, Utc};

use super::{CapturesView, Needs, Read, Reads, Seen, is_contextctl, state_view};
use crate::core::error::{Error, Result};
use crate::core::history::{HistoryKind, Query};
use crate::core::view::{
    self, AppTotalsView, CategoryView, HistoryEventView, HistoryPage, MediaView, NetworkView,
    NotificationsView, PlaceView, ProvidedPageView, ProvidedView, RecentDocumentsView,
    SelectionView, SnapshotView, SourceView, StateView, WindowOneView, WindowsView,
};
use crate::core::{provide, vocabulary};
use crate::model::{self, Category};

/// How far back [`HistoryApps`] looks: longer than any retention.
const HISTORY_APPS_DAYS: i64 = 400;

/// Everything the reader may see; never asks, never fails: the rest is
/// listed as `withheld`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot;

impl Read for Snapshot {
    type View = SnapshotView;

    fn needs(&self, reads: &Reads, _now: DateTime<Utc>) -> Result<Needs> {
        // The kinds published now show like sections; the seed kinds
        // nobody publishes are decided too, so that `withheld` names them
        // alike whether or not anyone publishes.
        let shown: Vec<Category> = reads
            .provided_kinds()
            .iter()
            .filter_map(|k| Category::provided(k).ok())
            .collect();
        let looked = vocabulary::seed_kinds()
            .filter_map(|k| Category::provided(k).ok())
            .filter(|c| !shown.contains(c))
            .collect();
        Ok(Needs::Sections {
            sections: vec![
                (Category::Windows, Some(Category::WindowsTitles)),
                (Category::MediaPlayback, None),
                (Category::MediaCapture, None),
                (Category::Session, None),
                (Category::Power, None),
                (Category::Network, Some(Category::NetworkName)),
                (
                    Category::Notifications,
                    Some(Category::NotificationsContent),
                ),
                (Category::DocumentsRecent, None),
                (Category::Location, Some(Category::LocationPrecise)),
                (Category::Calendar, Some(Category::CalendarDetails)),
            ],
            shown,
            looked,
        })
    }

    async fn view(self, seen: Seen<'_>) -> Result<SnapshotView> {
        Ok(seen
            .reads
            .state
            .read(|s| view::snapshot(s, &|c: &Category| seen.can(c))))
    }
}

/// The windows need `windows`; their titles `windows.titles` too.
fn windows_needs() -> Needs {
    Needs::details(Category::Windows, vec![Category::WindowsTitles])
}

/// The open windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Windows;

impl Read for Windows {
    type View = WindowsView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(windows_needs())
    }

    async fn view(self, seen: Seen<'_>) -> Result<WindowsView> {
        let can = |c: &Category| seen.can(c);
        Ok(seen.reads.state.read(|s| view::windows_view(s, &can)))
    }
}

/// The focused window (`None` inside the view when none has focus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ActiveWindow;

impl Read for ActiveWindow {
    type View = WindowOneView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(windows_needs())
    }

    async fn view(self, seen: Seen<'_>) -> Result<WindowOneView> {
        let can = |c: &Category| seen.can(c);
        Ok(seen.reads.state.read(|s| view::window_one(s, &can, None)))
    }
}

/// One window by id (`NotFound` when there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window(pub(crate) String);

impl Read for Window {
    type View = WindowOneView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(windows_needs())
    }

    async fn view(self, seen: Seen<'_>) -> Result<WindowOneView> {
        let can = |c: &Category| seen.can(c);
        let id = self.0;
        let v = seen
            .reads
            .state
            .read(|s| view::window_one(s, &can, Some(&id)));
        if v.window.is_none() {
            return Err(Error::NotFound(format!(
                "no window with id '{}' (it may have closed)",
                id.chars().take(64).collect::<String>()
            )));
        }
        Ok(v)
    }
}

/// Who plays and who captures: either category will do, each part only
/// with its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Media;

impl Read for Media {
    type View = MediaView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        // A prompt asks about `media.capture`, the part that answers "who
        // uses my microphone".
        Ok(Needs::Either {
            first: Category::MediaPlayback,
            or: Category::MediaCapture,
        })
    }

    async fn view(self, seen: Seen<'_>) -> Result<MediaView> {
        let can = |c: &Category| seen.can(c);
        Ok(seen.reads.state.read(|s| view::media(s, &can, seen.now)))
    }
}

/// Whether the session is active, idle, locked or going to sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Session;

impl Read for Session {
    type View = StateView<model::SessionState>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::base(Category::Session))
    }

    async fn view(self, seen: Seen<'_>) -> Result<Self::View> {
        Ok(state_view(seen.reads.state.read(|s| s.session.clone())))
    }
}

/// The battery and whether the machine runs on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Power;

impl Read for Power {
    type View = StateView<model::Power>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::base(Category::Power))
    }

    async fn view(self, seen: Seen<'_>) -> Result<Self::View> {
        Ok(state_view(seen.reads.state.read(|s| s.power.clone())))
    }
}

/// Connectivity; the network's name with `network.name` too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Network;

impl Read for Network {
    type View = StateView<NetworkView>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::details(
            Category::Network,
            vec![Category::NetworkName],
        ))
    }

    async fn view(self, seen: Seen<'_>) -> Result<Self::View> {
        let name = seen.can(&Category::NetworkName);
        Ok(state_view(seen.reads.state.read(|s| {
            s.network.as_ref().map(|n| NetworkView::new(n, name))
        })))
    }
}

/// The notifications apps sent; their text with `notifications.content`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Notifications;

impl Read for Notifications {
    type View = NotificationsView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::details(
            Category::Notifications,
            vec![Category::NotificationsContent],
        ))
    }

    async fn view(self, seen: Seen<'_>) -> Result<NotificationsView> {
        let can = |c: &Category| seen.can(c);
        Ok(seen.reads.state.read(|s| view::notifications_view(s, &can)))
    }
}

/// The recently used files (`documents.recent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecentDocuments;

impl Read for RecentDocuments {
    type View = RecentDocumentsView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::base(Category::DocumentsRecent))
    }

    async fn view(self, seen: Seen<'_>) -> Result<RecentDocumentsView> {
        Ok(seen.reads.state.read(view::recent_documents))
    }
}

/// The primary selection (`selection`): read on request only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Selection;

impl Read for Selection {
    type View = StateView<SelectionView>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::base(Category::Selection))
    }

    async fn view(self, seen: Seen<'_>) -> Result<Self::View> {
        Ok(seen.reads.state.read(view::selection_view))
    }
}

/// Where the machine is (`location`, precisely with `location.precise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Location;

impl Read for Location {
    type View = StateView<PlaceView>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::details(
            Category::Location,
            vec![Category::LocationPrecise],
        ))
    }

    async fn view(self, seen: Seen<'_>) -> Result<Self::View> {
        let precise = seen.can(&Category::LocationPrecise);
        Ok(state_view(seen.reads.state.read(|s| {
            s.location.as_ref().map(|l| PlaceView::new(l, precise))
        })))
    }
}

/// The next events and open tasks (`calendar`; what they are with
/// `calendar.details`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Calendar;

impl Read for Calendar {
    type View = view::CalendarView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::details(
            Category::Calendar,
            vec![Category::CalendarDetails],
        ))
    }

    async fn view(self, seen: Seen<'_>) -> Result<Self::View> {
        let can = |c: &Category| seen.can(c);
        Ok(seen.reads.state.read(|s| view::calendar_view(s, &can)))
    }
}

/// One event by its id (`NotFound` when there is none: it ended, moved
/// out of the window of days, or never was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CalendarEvent(pub(crate) String);

impl Read for CalendarEvent {
    type View = view::EventOneView;

    fn needs(&self, r: &Reads, now: DateTime<Utc>) -> Result<Needs> {
        Calendar.needs(r, now)
    }

    async fn view(self, seen: Seen<'_>) -> Result<Self::View> {
        let id = self.0;
        let all = Calendar.view(seen).await?;
        match all.events.into_iter().find(|e| e.id == id) {
            Some(event) => Ok(view::EventOneView {
                event,
                withheld: all.withheld,
            }),
            None => Err(Error::NotFound(format!(
                "no upcoming event with id '{}' (it may have ended)",
                id.chars().take(64).collect::<String>()
            ))),
        }
    }
}

/// The context apps published of one kind (`provided.KIND`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Provided(pub(crate) String);

impl Read for Provided {
    type View = Vec<ProvidedView>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::base(Category::provided(&self.0)?))
    }

    async fn view(self, seen: Seen<'_>) -> Result<Vec<ProvidedView>> {
        let kind = self.0;
        Ok(seen.reads.state.read(|s| {
            s.provided
                .of_kind_after(&kind, None)
                .map(|(app, e)| ProvidedView::of(app, e))
                .collect()
        }))
    }
}

/// One page of what apps published of one kind (`provided.KIND`), by app
/// id: the entries after the cursor's app, at most `limit` of them
/// (clamped to 1..=[`provide::MAX_PAGE`]). The cursor is checked after
/// the gate, so a reader without the grant learns nothing from one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProvidedPage {
    pub(crate) kind: String,
    /// A `next_cursor` of an earlier page of this kind; `None` for the
    /// first.
    pub(crate) cursor: Option<String>,
    pub(crate) limit: usize,
}

impl Read for ProvidedPage {
    type View = ProvidedPageView;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::base(Category::provided(&self.kind)?))
    }

    async fn view(self, seen: Seen<'_>) -> Result<ProvidedPageView> {
        let after = match &self.cursor {
            Some(c) => Some(provide::decode_cursor(&self.kind, c)?),
            None => None,
        };
        let limit = self.limit.clamp(1, provide::MAX_PAGE);
        let kind = self.kind;
        Ok(seen.reads.state.read(|s| {
            // By app: the entries after the cursor's app start at the
            // next app, and a page of N looks at about N apps' entries,
            // not at everyone's.
            let mut it = s.provided.of_kind_after(&kind, after.as_ref());
            let provided: Vec<ProvidedView> = it
                .by_ref()
                .take(limit)
                .map(|(app, e)| ProvidedView::of(app, e))
                .collect();
            let next_cursor = match (it.next(), provided.last()) {
                (Some(_), Some(last)) => Some(provide::encode_cursor(&kind, last.app_id.as_str())),
                _ => None,
            };
            ProvidedPageView {
                provided,
                next_cursor,
            }
        }))
    }
}

/// Every category and whether the reader may read it (looks only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Categories;

impl Read for Categories {
    type View = Vec<CategoryView>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::Looks)
    }

    async fn view(self, seen: Seen<'_>) -> Result<Vec<CategoryView>> {
        // Every seed kind, published now or not (a listing that changed
        // with publishing would tell anyone that someone publishes), and
        // the x-NAME kinds published now, named only to a reader that may
        // see them (`view::categories`).
        let mut kinds: Vec<String> = vocabulary::seed_kinds().map(str::to_owned).collect();
        for k in seen.reads.provided_kinds() {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        Ok(view::categories(&|c: &Category| seen.can(c), &kinds))
    }
}

/// The health of every source (needs no consent): with the errors as
/// they are when the caller is `contextctl`, the executable installed
/// beside this daemon, running outside any sandbox; generic errors for
/// every other caller. (Unsandboxed code of the user can read the same
/// files and the journal itself; the rule keeps paths and lines of
/// policy.toml from sandboxed apps and from apps that only asked for
/// context.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sources {
    /// The caller's executable, as its identity was resolved
    /// (`identity::Identity::executable`).
    pub(crate) executable: Option<PathBuf>,
}

impl Read for Sources {
    type View = Vec<SourceView>;

    fn needs(&self, _: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        Ok(Needs::Nothing)
    }

    async fn view(self, seen: Seen<'_>) -> Result<Vec<SourceView>> {
        if is_contextctl(seen.who, self.executable.as_deref()) {
            Ok(seen.reads.owner_sources())
        } else {
            Ok(seen.reads.state.read(view::sources))
        }
    }
}

/// The categories a page of the timeline of `kinds` may show besides
/// `history`: each kind's own, and the details its rows carry (a focus
/// row's title, a notification's body). Only these are used up and
/// audited by the read.
fn history_details(kinds: &[HistoryKind]) -> Vec<Category> {
    let mut v: Vec<Category> = Vec::new();
    for k in kinds {
        let c = k.category();
        if !v.contains(&c) {
            v.push(c);
        }
        let detail = match k {
            HistoryKind::Focus => Some(Category::WindowsTitles),
            HistoryKind::Notification => Some(Category::NotificationsContent),
            _ => None,
        };
        if let Some(d) = detail
            && !v.contains(&d)
        {
            v.push(d);
        }
    }
    v
}

/// A page of the timeline, of the kinds asked for whose category the
/// reader may see.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct History(pub(crate) Query);

impl Read for History {
    type View = HistoryPage;

    fn needs(&self, reads: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        reads.history()?;
        Ok(Needs::details(
            Category::History,
            history_details(&self.0.kinds),
        ))
    }

    async fn view(self, seen: Seen<'_>) -> Result<HistoryPage> {
        let history = seen.reads.history()?;
        let can = |c: &Category| seen.can(c);
        let mut q = self.0;
        q.kinds.retain(|k| can(&k.category()));
        if q.kinds.is_empty() {
            return Ok(HistoryPage::default());
        }
        let (rows, next_cursor) = history.query(q, seen.now).await?;
        Ok(HistoryPage {
            events: rows
                .iter()
                .map(|e| HistoryEventView::new(e, &can))
                .collect(),
            next_cursor,
        })
    }
}

/// What a summary of time per app needs: `history`, and the use it shows
/// of each app only with that use's category.
fn totals_needs(reads: &Reads) -> Result<Needs> {
    reads.history()?;
    Ok(Needs::details(
        Category::History,
        vec![
            Category::Windows,
            Category::MediaCapture,
            Category::MediaPlayback,
        ],
    ))
}

/// Time per app in `[since, until)`, of the apps and uses the reader may
/// see.
async fn visible_totals(
    seen: &Seen<'_>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<AppTotalsView>> {
    let totals = seen.reads.totals(since, until).await?;
    let can = |c: &Category| seen.can(c);
    Ok(totals
        .iter()
        .filter_map(|t| AppTotalsView::new(t, &can))
        .collect())
}

/// Time per app in `[since, until)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) since: DateTime<Utc>,
    pub(crate) until: DateTime<Utc>,
}

impl Read for Summary {
    type View = Vec<AppTotalsView>;

    fn needs(&self, reads: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        totals_needs(reads)
    }

    async fn view(self, seen: Seen<'_>) -> Result<Vec<AppTotalsView>> {
        visible_totals(&seen, self.since, self.until).await
    }
}

/// The app ids in the timeline whose use the reader may see (completion
/// of a history filter): an app id in the timeline says it was used,
/// which needs the category of that use (focus, capture, playback), as in
/// a summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HistoryApps;

impl Read for HistoryApps {
    type View = Vec<String>;

    fn needs(&self, reads: &Reads, _: DateTime<Utc>) -> Result<Needs> {
        totals_needs(reads)
    }

    async fn view(self, seen: Seen<'_>) -> Result<Vec<String>> {
        let since = seen.now - chrono::Duration::days(HISTORY_APPS_DAYS);
        let until = seen.now + chrono::Duration::seconds(1);
        let totals = visible_totals(&seen, since, until).await?;
        Ok(totals.into_iter().map(|t| t.app_id).collect())
    }
}

/// Who used the microphone, camera or screen since `since`: from the
/// timeline when the reader may read it (asked for when the period is
/// longer than the 24 hours the broker keeps in memory), else the capture
/// sessions seen since the broker started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Captures {
    pub(crate) since: DateTime<Utc>,
}

impl Read for Captures {
    type View = CapturesView;

    fn needs(&self, _: &Reads, now: DateTime<Utc>) -> Result<Needs> {
        // The broker keeps 24 hours in memory; longer needs the timeline,
        // asked for like any read (after `media.capture`). A shorter
        // period uses the timeline when the reader may read it already:
        // shown like a detail.
        Ok(if now - self.since > chrono::Duration::hours(24) {
            Needs::Access {
                bases: vec![Category::MediaCapture, Category::History],
                details: Vec::new(),
            }
        } else {
            Needs::details(Category::MediaCapture, vec![Category::History])
        })
    }

    async fn view(self, seen: Seen<'_>) -> Result<CapturesView> {
        let timeline = seen.can(&Category::History);
        seen.reads
            .capture_sessions(self.since, seen.now, timeline)
            .await
    }
}

//! The read service: "subject S reads WHAT, in mode M" answered with a
//! typed, already-redacted view (`core::view`) or a typed error.
//!
//! Every decision about what a reader sees is made here, once, for every
//! publisher: which categories a read needs (a base category, and the
//! details it shows only when they are granted too), the media rule
//! (either `media.playback` or `media.capture` will do, each part only
//! with its own), prompts and their cool-down, and the audit of every
//! access with its channel. D-Bus, MCP and the dashboard call
//! [`Core::read`] and only turn the view into their wire format; none of
//! them asks the gate itself.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::Core;
use super::consent::{BoxFut, Channel};
use super::error::{Error, Result};
use super::gate::Decision;
use super::history::{HistoryKind, HistoryStore, Query};
use super::prompts::{self, Outcome, PromptRequest};
use super::state::Change;
use super::view::{
    self, AppTotalsView, CaptureSessionView, CategoryView, ChangeView, HistoryEventView,
    HistoryPage, MediaView, NetworkView, NotificationsView, PlaceView, ProvidedView,
    RecentDocumentsView, SelectionView, SnapshotView, SourceView, StateView, WindowOneView,
    WindowsView,
};
use crate::model::{AppId, Category, IdentitySource, MediaKind, Power, SessionState};

/// Who reads: the app id the broker derived from the caller's credentials
/// (never a name the caller sent), how it was derived, and the channel
/// it came over (recorded with every access).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subject {
    pub app_id: AppId,
    pub source: IdentitySource,
    pub channel: Channel,
}

/// Reports that the broker is waiting for the user (MCP
/// `notifications/progress`): the step and a message.
pub type Progress = Arc<dyn Fn(f64, String) -> BoxFut<'static, ()> + Send + Sync>;

/// How a read treats a category the user has not decided about.
#[derive(Clone)]
pub enum Mode {
    /// Only look: no prompt, no audit. For filtering (signals, lists of
    /// resources, completions); an undecided category is `Pending`.
    Look,
    /// An access: audited; an undecided category starts a prompt and the
    /// read answers `Pending` at once (a D-Bus read never blocks on the
    /// user; the app asks again, or calls `RequestAccess`). `request` is
    /// what the app called (the D-Bus member), recorded in the audit.
    Access { request: String },
    /// An access that waits for the user's answer (MCP): audited; while
    /// the prompt shows, `progress` is told every few seconds; `cancel`
    /// (the host gave up, or the session ended) stops the wait. A prompt
    /// that is not answered with an allow refuses the read and stores
    /// nothing.
    Ask {
        progress: Option<Progress>,
        cancel: CancellationToken,
        /// What the host asked for, as the prompt shows it: the host's
        /// own name (MCP `clientInfo`), the tool, resource or prompt, and
        /// its arguments.
        reason: String,
        /// What the host called, for the audit (`tools/call NAME`, …).
        request: String,
    },
}

impl fmt::Debug for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Look => f.write_str("Look"),
            Mode::Access { request } => f.debug_struct("Access").field("request", request).finish(),
            Mode::Ask {
                progress,
                reason,
                request,
                ..
            } => f
                .debug_struct("Ask")
                .field("progress", &progress.is_some())
                .field("reason", reason)
                .field("request", request)
                .finish_non_exhaustive(),
        }
    }
}

impl Mode {
    /// What the caller called, for the audit; `None` for a look.
    fn request(&self) -> Option<&str> {
        match self {
            Mode::Look => None,
            Mode::Access { request } | Mode::Ask { request, .. } => Some(request),
        }
    }
}

/// The longest reason a prompt shows (characters).
const MAX_REASON: usize = 500;

/// How often a waiting MCP host hears that the user is still being asked.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What a reader asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// Everything the reader may see; never asks, never fails: the rest is
    /// listed as `withheld`.
    Snapshot,
    Windows,
    /// The focused window (`None` inside the view when none has focus).
    ActiveWindow,
    /// One window by id (`NotFound` when there is none).
    Window(String),
    Media,
    Session,
    Power,
    Network,
    Notifications,
    /// The recently used files (`documents.recent`).
    RecentDocuments,
    /// The primary selection (`selection`): read on request only.
    Selection,
    /// Where the machine is (`location`, precisely with
    /// `location.precise`).
    Location,
    /// The context apps published of one kind (`provided.KIND`).
    Provided(String),
    /// Every category and whether the reader may read it (looks only).
    Categories,
    /// The health of every source (needs no consent).
    Sources,
    /// A page of the timeline, of the kinds asked for whose category the
    /// reader may see.
    History(Query),
    /// Time per app in `[since, until)`.
    Summary {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    /// The app ids in the timeline whose use the reader may see
    /// (completion of a history filter).
    HistoryApps,
    /// Who used the microphone, camera or screen since `since`: from the
    /// timeline when the reader may read it (asked for when the period is
    /// longer than the 24 hours the broker keeps in memory), else the
    /// capture sessions seen since the broker started.
    Captures {
        since: DateTime<Utc>,
    },
}

/// The answer to a read, one variant per [`What`].
#[derive(Debug, Clone, PartialEq)]
pub enum View {
    Snapshot(SnapshotView),
    Windows(WindowsView),
    Window(WindowOneView),
    Media(MediaView),
    Session(StateView<SessionState>),
    Power(StateView<Power>),
    Network(StateView<NetworkView>),
    Notifications(NotificationsView),
    RecentDocuments(RecentDocumentsView),
    Location(StateView<PlaceView>),
    Selection(StateView<SelectionView>),
    Provided(Vec<ProvidedView>),
    Categories(Vec<CategoryView>),
    Sources(Vec<SourceView>),
    History(HistoryPage),
    Summary(Vec<AppTotalsView>),
    HistoryApps(Vec<String>),
    Captures(CapturesView),
}

/// Capture sessions of a period, and where they come from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CapturesView {
    /// Oldest first.
    pub sessions: Vec<CaptureSessionView>,
    /// From the timeline (else: what the broker saw since it started).
    pub from_timeline: bool,
    /// More sessions than [`MAX_CAPTURES`] were in the period.
    pub more: bool,
}

/// The answer to [`Core::request_access`].
#[derive(Debug)]
pub enum Requested {
    /// Every category is allowed already.
    Granted,
    /// One is refused; why.
    Denied(String),
    /// The user is being asked; the outcome arrives here.
    Asking(tokio::sync::watch::Receiver<Option<Outcome>>),
}

/// Capture sessions a [`What::Captures`] reads from the timeline at most.
pub const MAX_CAPTURES: u32 = 1000;

/// The categories a reader may see, decided before rendering so that
/// rendering (under the state's lock) never waits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed(BTreeSet<Category>);

impl Allowed {
    pub fn can(&self, c: &Category) -> bool {
        self.0.contains(c)
    }
}

/// How far back [`What::HistoryApps`] looks: longer than any retention.
const HISTORY_APPS_DAYS: i64 = 400;

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

/// What a summary of time per app shows besides `history`.
fn summary_details() -> [Category; 3] {
    [
        Category::Windows,
        Category::MediaCapture,
        Category::MediaPlayback,
    ]
}

/// The sections of a snapshot, each with the details it shows.
fn snapshot_sections() -> [(Category, Option<Category>); 9] {
    [
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
    ]
}

impl Core {
    /// The timeline's store, once the daemon has opened it.
    pub fn set_history(&self, h: Arc<dyn HistoryStore>) {
        let _ = self.history.set(h);
    }

    pub(super) fn history(&self) -> Result<&Arc<dyn HistoryStore>> {
        self.history
            .get()
            .ok_or_else(|| Error::Unavailable("the timeline is not available".into()))
    }

    /// Answer a read of `who`: decide, audit, prompt as `mode` says, and
    /// render only what `who` may see.
    pub async fn read(&self, who: &Subject, what: What, mode: Mode) -> Result<View> {
        let now = self.clock.now();
        Ok(match what {
            What::Snapshot => {
                let allowed = self.snapshot_allowed(who, &mode);
                View::Snapshot(
                    self.state
                        .read(|s| view::snapshot(s, &|c: &Category| allowed.can(c))),
                )
            }
            What::Windows | What::ActiveWindow | What::Window(_) => {
                let allowed = self
                    .access_with_details(who, Category::Windows, &[Category::WindowsTitles], mode)
                    .await?;
                let can = |c: &Category| allowed.can(c);
                match what {
                    What::Windows => {
                        View::Windows(self.state.read(|s| view::windows_view(s, &can)))
                    }
                    What::Window(id) => {
                        let v = self.state.read(|s| view::window_one(s, &can, Some(&id)));
                        if v.window.is_none() {
                            return Err(Error::NotFound(format!(
                                "no window with id '{}' (it may have closed)",
                                id.chars().take(64).collect::<String>()
                            )));
                        }
                        View::Window(v)
                    }
                    _ => View::Window(self.state.read(|s| view::window_one(s, &can, None))),
                }
            }
            What::Media => {
                let allowed = self.access_media(who, mode).await?;
                View::Media(
                    self.state
                        .read(|s| view::media(s, &|c: &Category| allowed.can(c), now)),
                )
            }
            What::Session => {
                self.authorize(who, &[Category::Session], mode).await?;
                View::Session(state_view(self.state.read(|s| s.session.clone())))
            }
            What::Power => {
                self.authorize(who, &[Category::Power], mode).await?;
                View::Power(state_view(self.state.read(|s| s.power.clone())))
            }
            What::Network => {
                let allowed = self
                    .access_with_details(who, Category::Network, &[Category::NetworkName], mode)
                    .await?;
                let name = allowed.can(&Category::NetworkName);
                View::Network(state_view(
                    self.state
                        .read(|s| s.network.as_ref().map(|n| NetworkView::new(n, name))),
                ))
            }
            What::Notifications => {
                let allowed = self
                    .access_with_details(
                        who,
                        Category::Notifications,
                        &[Category::NotificationsContent],
                        mode,
                    )
                    .await?;
                View::Notifications(
                    self.state
                        .read(|s| view::notifications_view(s, &|c: &Category| allowed.can(c))),
                )
            }
            What::Selection => {
                self.authorize(who, &[Category::Selection], mode).await?;
                View::Selection(self.state.read(view::selection_view))
            }
            What::Location => {
                let allowed = self
                    .access_with_details(
                        who,
                        Category::Location,
                        &[Category::LocationPrecise],
                        mode,
                    )
                    .await?;
                let precise = allowed.can(&Category::LocationPrecise);
                View::Location(state_view(
                    self.state
                        .read(|s| s.location.as_ref().map(|l| PlaceView::new(l, precise))),
                ))
            }
            What::RecentDocuments => {
                self.authorize(who, &[Category::DocumentsRecent], mode)
                    .await?;
                View::RecentDocuments(self.state.read(view::recent_documents))
            }
            What::Provided(kind) => {
                let cat = Category::provided(&kind)?;
                self.authorize(who, std::slice::from_ref(&cat), mode)
                    .await?;
                View::Provided(self.state.read(|s| {
                    s.provided
                        .iter()
                        .filter(|((_, k), _)| *k == kind)
                        .map(|(_, p)| ProvidedView::new(p))
                        .collect()
                }))
            }
            What::Categories => {
                // Every seed kind, published now or not (a listing that
                // changed with publishing would tell anyone that someone
                // publishes), and the x-NAME kinds published now, named
                // only to a reader that may see them (`view::categories`).
                let mut kinds: Vec<String> =
                    super::vocabulary::seed_kinds().map(str::to_owned).collect();
                for k in self.provided_kinds() {
                    if !kinds.contains(&k) {
                        kinds.push(k);
                    }
                }
                let allowed = Allowed(
                    Category::fixed()
                        .iter()
                        .cloned()
                        .chain(kinds.iter().filter_map(|k| Category::provided(k).ok()))
                        .filter(|c| self.gate.allows(&who.app_id, c))
                        .collect(),
                );
                View::Categories(view::categories(&|c: &Category| allowed.can(c), &kinds))
            }
            What::Sources => View::Sources(self.state.read(view::sources)),
            What::History(mut q) => {
                let history = self.history()?;
                let allowed = self
                    .access_with_details(who, Category::History, &history_details(&q.kinds), mode)
                    .await?;
                let can = |c: &Category| allowed.can(c);
                q.kinds.retain(|k| can(&k.category()));
                if q.kinds.is_empty() {
                    return Ok(View::History(HistoryPage::default()));
                }
                let (rows, next_cursor) = history.query(q, now).await?;
                View::History(HistoryPage {
                    events: rows
                        .iter()
                        .map(|e| HistoryEventView::new(e, &can))
                        .collect(),
                    next_cursor,
                })
            }
            What::Summary { since, until } => {
                View::Summary(self.visible_totals(who, since, until, mode).await?)
            }
            What::HistoryApps => {
                // The apps whose time the reader may see: an app id in the
                // timeline says it was used, which needs the category of
                // that use (focus, capture, playback), as in a summary.
                let since = now - chrono::Duration::days(HISTORY_APPS_DAYS);
                let until = now + chrono::Duration::seconds(1);
                let totals = self.visible_totals(who, since, until, mode).await?;
                View::HistoryApps(totals.into_iter().map(|t| t.app_id).collect())
            }
            What::Captures { since } => View::Captures(self.captures(who, since, now, mode).await?),
        })
    }

    /// Time per app in `[since, until)`, of the apps and uses `who` may
    /// see.
    async fn visible_totals(
        &self,
        who: &Subject,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        mode: Mode,
    ) -> Result<Vec<AppTotalsView>> {
        let history = self.history()?;
        let allowed = self
            .access_with_details(who, Category::History, &summary_details(), mode)
            .await?;
        let totals = history.summary(since, until, self.clock.now()).await?;
        let can = |c: &Category| allowed.can(c);
        Ok(totals
            .iter()
            .filter_map(|t| AppTotalsView::new(t, &can))
            .collect())
    }

    async fn captures(
        &self,
        who: &Subject,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
        mode: Mode,
    ) -> Result<CapturesView> {
        self.authorize(who, &[Category::MediaCapture], mode.clone())
            .await?;
        // The broker keeps 24 hours in memory; longer needs the timeline,
        // asked for like any read. A shorter period uses the timeline when
        // the reader may read it already.
        let timeline = if now - since > chrono::Duration::hours(24) {
            self.authorize(who, &[Category::History], mode).await?;
            true
        } else {
            // Shown when allowed already: used up and audited like a
            // detail (a look only on a lasting grant).
            self.shown(who, [Category::History], &mode)
                .can(&Category::History)
        };
        self.capture_sessions(since, now, timeline).await
    }

    /// Capture sessions since `since`: from the timeline when `timeline`
    /// and there is one, else those the broker saw since it started.
    pub(super) async fn capture_sessions(
        &self,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
        timeline: bool,
    ) -> Result<CapturesView> {
        if let (true, Ok(history)) = (timeline, self.history()) {
            let q = Query {
                since,
                until: now + chrono::Duration::seconds(1),
                kinds: vec![HistoryKind::Capture],
                apps: vec![],
                limit: MAX_CAPTURES,
                cursor: None,
            };
            let (rows, next) = history.query(q, now).await?;
            let sessions = rows
                .iter()
                .map(|e| {
                    let device = e
                        .detail
                        .as_ref()
                        .and_then(|d| d.get("device"))
                        .cloned()
                        .and_then(|d| serde_json::from_value::<MediaKind>(d).ok())
                        .unwrap_or(MediaKind::Microphone);
                    CaptureSessionView {
                        stream_id: format!("history-{}", e.id),
                        kind: device,
                        start: view::time(&e.start),
                        active: e.end.is_none(),
                        end: e.end.as_ref().map(view::time),
                        app_id: e.app_id.clone(),
                        pid: None,
                        claimed_name: None,
                    }
                })
                .collect();
            return Ok(CapturesView {
                sessions,
                from_timeline: true,
                more: next.is_some(),
            });
        }
        // Oldest first, as from the timeline.
        let sessions = self.state.read(|s| {
            s.captures
                .recent(now)
                .filter(|c| c.end.is_none_or(|e| e >= since))
                .map(CaptureSessionView::new)
                .collect()
        });
        Ok(CapturesView {
            sessions,
            from_timeline: false,
            more: false,
        })
    }

    /// `RequestAccess`: what the user said, or will say, about `who`
    /// reading `categories`. Nothing is read, so nothing is audited; an
    /// undecided category shows the prompt (with the app's `reason`).
    pub async fn request_access(
        &self,
        who: &Subject,
        categories: &[Category],
        reason: &str,
    ) -> Requested {
        self.gate.seen(&who.app_id, who.source).await;
        let mut ask = Vec::new();
        for c in categories {
            match self.gate.decide(&who.app_id, c) {
                Decision::Allow => {}
                Decision::Deny(e) => return Requested::Denied(e.to_string()),
                Decision::Ask => ask.push(c.clone()),
            }
        }
        if ask.is_empty() {
            return Requested::Granted;
        }
        let Some(owned) = self.arc() else {
            return Requested::Denied("the broker is stopping".into());
        };
        Requested::Asking(prompts::start(&owned, prompt_request(who, ask, reason)))
    }

    /// The first of `categories` that `app` may no longer see (a live
    /// subscription ends then), if any. `held` are the one-time grants the
    /// subscription used up when it was made ([`Core::subscribe_access`]):
    /// they last as long as it does, until a pause or a deny.
    pub fn withdrawn(
        &self,
        app: &AppId,
        categories: &[Category],
        held: &[Category],
    ) -> Option<Category> {
        categories
            .iter()
            .find(|c| !self.streams(app, c, held))
            .cloned()
    }

    /// Whether a stream of changes (a subscription, a host's listen) may
    /// carry `c` to `app`: on a lasting grant, or on a one-time grant the
    /// subscription itself used up. A signal is a look: it never uses a
    /// one-time grant, so one not used yet does not count.
    fn streams(&self, app: &AppId, c: &Category, held: &[Category]) -> bool {
        self.gate.allows_lasting(app, c) || (held.contains(c) && self.gate.holds(app, c))
    }

    /// Delete rows of the timeline (the caller is a manager, checked by
    /// its publisher through polkit): how many.
    pub async fn forget_history(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        apps: Vec<String>,
        kinds: Vec<HistoryKind>,
    ) -> Result<u64> {
        let now = self.clock.now();
        self.history()?.forget(since, until, apps, kinds, now).await
    }

    /// One change as subscriber `app` may see it, or `None` when it must
    /// not be sent (looks only: subscribing was the access). Only what
    /// `app` may see on a lasting grant, or on a one-time grant in `held`
    /// (see [`Core::withdrawn`]).
    pub fn change_for_held(
        &self,
        app: &AppId,
        held: &[Category],
        c: &Change,
    ) -> Option<(Category, ChangeView)> {
        view::change(c, &|cat: &Category| self.streams(app, cat, held))
    }

    /// [`Core::change_for_held`] for a reader that holds no one-time grant.
    pub fn change_for(&self, app: &AppId, c: &Change) -> Option<(Category, ChangeView)> {
        self.change_for_held(app, &[], c)
    }

    /// Every source's health with its errors as they are (a policy.toml
    /// error quotes the file and its line), for the user's own tools:
    /// `contextctl` (the publisher checks the caller's executable) and
    /// the dashboard. Apps read [`What::Sources`], whose errors are generic.
    pub fn owner_sources(&self) -> Vec<SourceView> {
        self.state.read(view::owner_sources)
    }

    /// The health of every source as `who` (process `pid`) may read it:
    /// with the errors as they are when the caller is `contextctl`, the
    /// executable installed beside this daemon, running outside any
    /// sandbox; generic errors for every other caller. (Unsandboxed code
    /// of the user can read the same files and the journal itself; the
    /// rule keeps paths and lines of policy.toml from sandboxed apps and
    /// from apps that only asked for context.)
    pub fn sources_for(&self, who: &Subject, pid: u32) -> Vec<SourceView> {
        let unsandboxed = matches!(
            who.source,
            IdentitySource::Executable | IdentitySource::Systemd
        );
        if unsandboxed && is_contextctl(pid) {
            self.owner_sources()
        } else {
            self.state.read(view::sources)
        }
    }

    /// Whether `who` may see `category` now (looks only).
    pub fn allows(&self, who: &Subject, category: &Category) -> bool {
        self.gate.allows(&who.app_id, category)
    }

    /// Whether a read of `category` is worth offering to `who` (a resource
    /// in a listing): allowed, or not decided yet, so that reading it can
    /// ask the user.
    pub fn offered(&self, who: &Subject, category: &Category) -> bool {
        !matches!(self.gate.decide(&who.app_id, category), Decision::Deny(_))
    }

    /// What a snapshot shows `who`: each section whose category it may
    /// see, its details when it may see them too, and the provided kinds
    /// published now. An audited mode uses up the one-time grants of what
    /// it shows and audits it (nothing is asked: a snapshot never
    /// prompts); a look shows only lasting grants. The seed kinds nobody
    /// publishes are decided too, without an access, so that `withheld`
    /// names them alike whether or not anyone publishes.
    fn snapshot_allowed(&self, who: &Subject, mode: &Mode) -> Allowed {
        let mut allowed = Allowed::default();
        for (base, detail) in snapshot_sections() {
            if self.shown(who, [base.clone()], mode).0.is_empty() {
                continue;
            }
            allowed.0.extend(self.shown(who, detail, mode).0);
            allowed.0.insert(base);
        }
        let present: Vec<Category> = self
            .provided_kinds()
            .iter()
            .filter_map(|k| Category::provided(k).ok())
            .collect();
        allowed
            .0
            .extend(self.shown(who, present.iter().cloned(), mode).0);
        for k in super::vocabulary::seed_kinds() {
            if let Ok(c) = Category::provided(k)
                && !present.contains(&c)
                && match mode {
                    Mode::Look => self.gate.allows_lasting(&who.app_id, &c),
                    _ => self.gate.allows(&who.app_id, &c),
                }
            {
                allowed.0.insert(c);
            }
        }
        allowed
    }

    fn provided_kinds(&self) -> Vec<String> {
        self.state.read(|s| {
            let mut k: Vec<String> = s.provided.keys().map(|(_, k)| k.clone()).collect();
            k.sort();
            k.dedup();
            k
        })
    }

    /// Of `categories`, those a read in `mode` shows `who`, never asking.
    /// An audited mode uses up a one-time grant of each one shown and
    /// audits it with the request (a detail is consented like a category:
    /// "allow once" on `windows.titles` gives one read with titles); what
    /// is not shown is not recorded. A look shows only what is granted for
    /// good or for a while (it uses nothing up, so a one-time grant does
    /// not count).
    fn shown(
        &self,
        who: &Subject,
        categories: impl IntoIterator<Item = Category>,
        mode: &Mode,
    ) -> Allowed {
        let app = &who.app_id;
        Allowed(match mode.request() {
            None => categories
                .into_iter()
                .filter(|c| self.gate.allows_lasting(app, c))
                .collect(),
            Some(request) => categories
                .into_iter()
                .filter(|c| {
                    self.gate
                        .access_if_allowed(app, c, who.channel, request)
                        .is_some()
                })
                .collect(),
        })
    }

    /// An access to `base` as `mode` says, then which of `details` `who`
    /// may also see (never asked for: a read shows less rather than
    /// prompting for a detail; see [`Core::shown`]). `base` counts in.
    async fn access_with_details(
        &self,
        who: &Subject,
        base: Category,
        details: &[Category],
        mode: Mode,
    ) -> Result<Allowed> {
        self.authorize(who, std::slice::from_ref(&base), mode.clone())
            .await?;
        let mut allowed = self.shown(who, details.iter().cloned(), &mode);
        allowed.0.insert(base);
        Ok(allowed)
    }

    /// Media: either category will do. The access (and a prompt) is about
    /// `media.playback` when that is allowed, else about `media.capture`,
    /// the one that answers "who uses my microphone"; the other part shows
    /// only when it is allowed too.
    async fn access_media(&self, who: &Subject, mode: Mode) -> Result<Allowed> {
        let (first, other) = if self.gate.allows(&who.app_id, &Category::MediaPlayback) {
            (Category::MediaPlayback, Category::MediaCapture)
        } else {
            (Category::MediaCapture, Category::MediaPlayback)
        };
        self.access_with_details(who, first, &[other], mode).await
    }

    /// The one consent loop: may `who` see every one of `categories`?
    ///
    /// [`Mode::Look`] decides without side effects. [`Mode::Access`] and
    /// [`Mode::Ask`] are accesses: audited with the channel, a one-time
    /// grant used up, the app remembered; an undecided category shows the
    /// user a prompt, which `Access` does not wait for (`Pending`) and
    /// `Ask` does.
    pub async fn authorize(
        &self,
        who: &Subject,
        categories: &[Category],
        mode: Mode,
    ) -> Result<()> {
        self.subscribe_access(who, categories, mode).await.map(drop)
    }

    /// [`Core::authorize`] for a subscription: also the categories whose
    /// one-time grant this access used up. The subscription holds them for
    /// its life ("allow once" answers one call or one subscription); pass
    /// them to [`Core::change_for_held`] and [`Core::withdrawn`].
    pub async fn subscribe_access(
        &self,
        who: &Subject,
        categories: &[Category],
        mode: Mode,
    ) -> Result<Vec<Category>> {
        let app = &who.app_id;
        if let Mode::Look = mode {
            for c in categories {
                // A look uses nothing up: a one-time grant not used yet
                // is undecided to it.
                match self.gate.decide_lasting(app, c) {
                    Decision::Allow => {}
                    Decision::Deny(e) => return Err(e),
                    Decision::Ask => {
                        return Err(Error::Pending {
                            app: app.clone(),
                            category: c.clone(),
                        });
                    }
                }
            }
            return Ok(Vec::new());
        }
        if let Mode::Ask { cancel, .. } = &mode
            && cancel.is_cancelled()
        {
            return Err(Error::Failed("the request was cancelled".into()));
        }
        self.gate.seen(app, who.source).await;
        let request = match &mode {
            Mode::Access { request } | Mode::Ask { request, .. } => request.clone(),
            Mode::Look => String::new(),
        };
        let (ask, mut held) = self.access_each(who, categories, &request)?;
        if ask.is_empty() {
            return Ok(held);
        }
        let pending = || Error::Pending {
            app: app.clone(),
            category: ask[0].clone(),
        };
        let Some(owned) = self.arc() else {
            return Err(pending());
        };
        let reason = match &mode {
            Mode::Ask { reason, .. } => reason.as_str(),
            _ => "",
        };
        let prompt = prompt_request(who, ask.clone(), reason);
        let Mode::Ask {
            progress, cancel, ..
        } = mode
        else {
            prompts::start(&owned, prompt);
            return Err(pending());
        };
        // While this waits; dropped on every return, which withdraws the
        // prompt when nobody else waits for it.
        let waiting = prompts::start_waiting(&owned, prompt);
        let names: Vec<String> = ask.iter().map(ToString::to_string).collect();
        let message = format!("waiting for the user to allow {}", names.join(", "));
        let report = |step: f64| {
            let p = progress.clone();
            let m = message.clone();
            async move {
                if let Some(p) = p {
                    p(step, m).await;
                }
            }
        };
        let mut step = 0.0;
        report(step).await;
        let outcome = loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    return Err(Error::Failed("the request was cancelled while the user was asked".into()));
                }
                o = prompts::wait(waiting.rx.clone()) => break o,
                _ = tokio::time::sleep(PROGRESS_EVERY) => {
                    step += 1.0;
                    report(step).await;
                }
            }
        };
        if !outcome.allowed() {
            let hint = match &outcome {
                Outcome::NoAnswer(e) => e.to_string(),
                _ => "the user denied it".to_owned(),
            };
            return Err(Error::NotAllowed {
                app: app.clone(),
                category: ask[0].clone(),
                hint,
            });
        }
        // The answer is in the gate now (a one-time grant is used up here).
        let (still, once) = self.access_each(who, &ask, &request)?;
        if still.is_empty() {
            held.extend(once);
            Ok(held)
        } else {
            Err(pending())
        }
    }

    /// An audited access of each category: the undecided ones (or the
    /// first refusal), and those allowed by a one-time grant it used up.
    fn access_each(
        &self,
        who: &Subject,
        categories: &[Category],
        request: &str,
    ) -> Result<(Vec<Category>, Vec<Category>)> {
        let mut ask = Vec::new();
        let mut once = Vec::new();
        for c in categories {
            match self.gate.access_once(&who.app_id, c, who.channel, request) {
                (Decision::Allow, true) => once.push(c.clone()),
                (Decision::Allow, false) => {}
                (Decision::Deny(e), _) => {
                    tracing::debug!(app = %who.app_id, category = %c, channel = %who.channel, error = %e, "refused");
                    return Err(e);
                }
                (Decision::Ask, _) => ask.push(c.clone()),
            }
        }
        Ok((ask, once))
    }
}

/// The prompt asking the user about `who` reading `categories`; the app's
/// name and icon are looked up by the prompter.
fn prompt_request(who: &Subject, categories: Vec<Category>, reason: &str) -> PromptRequest {
    PromptRequest {
        app: who.app_id.clone(),
        identity_source: who.source,
        display_name: None,
        icon: None,
        categories,
        channel: who.channel,
        reason: reason.chars().take(MAX_REASON).collect(),
    }
}

/// Whether process `pid` runs the `contextctl` beside this daemon's own
/// executable (`/usr/bin/contextctl` beside `/usr/bin/contextd`).
fn is_contextctl(pid: u32) -> bool {
    let Ok(ours) = std::env::current_exe() else {
        return false;
    };
    let Some(dir) = ours.parent() else {
        return false;
    };
    let Ok(theirs) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return false;
    };
    theirs == dir.join("contextctl")
}

fn state_view<T>(value: Option<T>) -> StateView<T> {
    StateView {
        available: value.is_some(),
        value,
    }
}

//! What the user's own management tools see (`Consent1` for settings
//! panels, `contextctl consent`, the dashboard): the apps that asked, the
//! decisions, the audit. Typed views like `core::view`'s, rendered by each
//! publisher.
//!
//! Who may call them is decided in two steps. First here, for every
//! publisher ([`Manage::may_manage`]): the user's controls are the user's
//! alone, so a sandboxed app (Flatpak, Snap: the boundary consent binds)
//! never reaches them, whatever polkit would say, and nobody answers its
//! own question ([`Manage::may_answer`]). Then the publisher's
//! authentication (polkit on D-Bus, naming the caller and the change).

use std::sync::Arc;

use serde::Serialize;

use super::clock::Clock;
use super::consent::{self, AuditCountQuery, AuditQuery, BoxFut, Origin};
use super::error::{Error, Result};
use super::event::SourceEvent;
use super::gate::Gate;
use super::notice;
use super::privacy;
use super::prompts::Ask;
use super::provide::Provide;
use super::read::Reads;
use super::readers::{ReaderView, Readers};
use super::state::State;
use super::subject::Subject;
use super::tickets::Tickets;
use super::tokens::{Forget, WITHDRAW_WAIT};
use super::view::time;
use crate::model::{AppId, Category};

/// The `ListSources` entry that says the broker runs degraded because its
/// database could not be used (`store::recovery`).
pub(crate) const RECOVERY_SOURCE: &str = "recovery";

/// Why a sandboxed caller is refused, for its error and the journal.
const SANDBOXED: &str = "an app in a sandbox never reaches the user's own controls \
     (the user decides in the dashboard, a settings panel or contextctl)";

/// An app that asked for context, and how it was identified.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AppView {
    pub(crate) app_id: String,
    pub(crate) identity_source: &'static str,
    pub(crate) first_seen: String,
    pub(crate) last_seen: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) icon: Option<String>,
}

/// A live decision: the user's, or policy.toml's (origin `policy`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct GrantView {
    pub(crate) app_id: String,
    /// A category, or `*` for a policy grant of everything.
    pub(crate) category: String,
    pub(crate) decision: &'static str,
    pub(crate) origin: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expires: Option<String>,
}

/// One row of the audit log (identical decisions folded, with a count).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AuditView {
    pub(crate) time: String,
    pub(crate) app_id: String,
    pub(crate) category: String,
    pub(crate) channel: &'static str,
    /// What the app called (see `core::consent::AuditEntry::request`).
    pub(crate) request: String,
    pub(crate) allowed: bool,
    pub(crate) reason: String,
    pub(crate) count: u64,
}

/// A policy.toml grant, as the user's pages show it: read-only there,
/// changed in its file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PolicyGrantView {
    /// What it covers: a category, `*` (every one) or `provided.*`.
    pub(crate) covers: String,
    /// The file that says it (policy.toml's path).
    pub(crate) file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expires: Option<String>,
}

/// How one app stands with one category (a category's page: its switch).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StandingView {
    pub(crate) app_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    /// How the broker knows the app: its identity source when it asked
    /// (`flatpak`, `executable`, …), else `policy` (named in policy.toml
    /// only) or `decided` (decided about before it asked).
    pub(crate) known_as: &'static str,
    /// A lasting grant holds (the user's allow or policy.toml), paused or not.
    pub(crate) granted: bool,
    /// The user's decision that applies (`allow`, `deny`, `ask`), and the
    /// category it was made for (the base's deny covers a detail).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) decision: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) decided_for: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expires: Option<String>,
    /// policy.toml grants it (then the user's switch cannot take it away
    /// but by a deny, and the page says where the grant is written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<PolicyGrantView>,
}

/// The audit's accesses of one app to one category in one period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AuditCountView {
    /// Where the period starts.
    pub(crate) start: chrono::DateTime<chrono::Utc>,
    pub(crate) app_id: String,
    pub(crate) category: String,
    pub(crate) allowed: u64,
    pub(crate) refused: u64,
}

/// Which picture an interval of time belongs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SpanLane {
    /// The app's window had focus.
    Focus,
    /// It played audio or video.
    Playing,
    /// It used the microphone, camera or screen.
    Recording,
}

/// One interval of an app's time ([`Manage::owner_spans`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SpanView {
    pub(crate) app_id: String,
    pub(crate) lane: SpanLane,
    pub(crate) start: chrono::DateTime<chrono::Utc>,
    pub(crate) end: chrono::DateTime<chrono::Utc>,
}

/// The most intervals [`Manage::owner_spans`] returns: a day of focus
/// changes every few seconds, drawn, is still a page and not megabytes.
const MAX_SPANS: usize = 5000;

/// What forgetting an app's history took ([`Manage::forget_app_history`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct ForgottenView {
    /// Rows of the timeline.
    pub(crate) timeline: u64,
    /// Accesses of the audit.
    pub(crate) audit: u64,
}

/// How far back a category's page looks in the audit for the apps that
/// asked for it.
const ASKED_WITHIN: chrono::Duration = chrono::Duration::days(90);

/// The owner's handle: the user's own controls and what only the user
/// sees (`Consent1`, `contextctl`, the dashboard): decisions, the pause,
/// readers, tickets, the timeline's deletion, export and import, the
/// never-share rules. It holds the parts those touch and the handles of
/// the areas it steers: the reads (the owner's reads of the timeline),
/// the prompts (answering them) and the providers (who may publish).
#[derive(Debug, Clone)]
pub(crate) struct Manage {
    pub(super) state: Arc<State>,
    pub(super) gate: Arc<Gate>,
    pub(super) clock: Arc<dyn Clock>,
    readers: Readers,
    tickets: Arc<Tickets>,
    reads: Reads,
    ask: Ask,
    provide: Provide,
}

impl Manage {
    pub(crate) fn new(
        state: Arc<State>,
        gate: Arc<Gate>,
        clock: Arc<dyn Clock>,
        readers: Readers,
        reads: Reads,
        ask: Ask,
        provide: Provide,
    ) -> Self {
        Manage {
            state,
            gate,
            clock,
            readers,
            tickets: Arc::default(),
            reads,
            ask,
            provide,
        }
    }

    /// Now, by the core's clock (a test's manual clock included).
    pub(crate) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// The user decided for `app` and `category` (a panel, the dashboard).
    pub(crate) async fn record_decision(
        &self,
        app: &AppId,
        category: &Category,
        verdict: consent::Verdict,
        expires: Option<chrono::DateTime<chrono::Utc>>,
        origin: consent::Origin,
    ) -> Result<()> {
        self.gate
            .record(app, category, verdict, expires, origin)
            .await
            .map(|_| ())
    }

    /// Remove the user's decision for `app` and `category`: whether there
    /// was one.
    pub(crate) async fn revoke(&self, app: &AppId, category: &Category) -> Result<bool> {
        self.gate.revoke(app, category).await
    }

    /// Pause or resume sharing, for every publisher alike: readers hear
    /// it as `Item::Paused` / `Item::Resumed`, the user's panels as the
    /// `grants` notice. Whether it changed.
    pub(crate) fn set_paused(&self, paused: bool) -> bool {
        self.gate.set_paused(paused)
    }

    /// Whether sharing is paused (for the user's own surfaces).
    pub(crate) fn paused(&self) -> bool {
        self.gate.paused()
    }

    /// Why the broker runs degraded (its database could not be used),
    /// if it does: undecided access is denied meanwhile.
    pub(crate) fn recovery(&self) -> Option<String> {
        self.gate.recovery()
    }

    /// Re-key the database (the user's `contextctl key rotate`); where
    /// the new key is kept.
    pub(crate) async fn rotate_key(&self) -> Result<String> {
        let store = self
            .gate
            .store()
            .ok_or_else(|| Error::Unavailable("no database".into()))?;
        store.rotate_key().await
    }

    /// The user acted on the recovery: end the degraded state (and its
    /// `recovery` entry in `ListSources`). Whether there was one.
    pub(crate) async fn end_recovery(&self) -> Result<bool> {
        let ended = self.gate.end_recovery().await?;
        if ended {
            self.state.apply(SourceEvent::SourceStatus {
                source: RECOVERY_SOURCE.into(),
                available: true,
                error: None,
            });
            self.gate.notices.bump(notice::Part::Grants);
        }
        Ok(ended)
    }

    /// Whether `app` holds a grant of `category` (lasting or for a while,
    /// paused or not): who may learn what only readers of it learn.
    pub(crate) fn granted(&self, app: &AppId, category: &Category) -> bool {
        self.gate.granted(app, category)
    }

    /// The user ended reader `id`: false when there is none.
    pub(crate) fn end_reader(&self, id: u64) -> bool {
        self.readers.end(id)
    }

    /// Every live reader, oldest first, with the app's desktop name and
    /// icon when the broker knows them.
    pub(crate) fn readers(&self) -> Vec<ReaderView> {
        self.readers.views(&self.gate)
    }

    /// Forget everything about `app` (its decisions, its entry, its audit)
    /// and end what it has open: for every control surface alike.
    pub(crate) async fn forget_app(&self, app: &AppId) -> Result<u64> {
        let removed = self.gate.forget_app(app).await?;
        self.readers.end_app(app);
        Ok(removed)
    }

    /// Forget `app`'s history, and only that: what the timeline recorded
    /// under its id (its focus time, its captures and playback, the
    /// notifications it sent, the documents and tasks it published, the
    /// files it opened) and what it read or was refused (its audit, rows
    /// still waiting to be written included). Its decisions, its entry
    /// and policy.toml stay: taking those is "revoke" and "forget the
    /// app"; what it has open stays open (its history only starts again).
    /// The owner's pages hear of it (the `audit` notice).
    pub(crate) async fn forget_app_history(&self, app: &AppId) -> Result<ForgottenView> {
        let now = self.clock.now();
        let timeline = match self.reads.history() {
            Ok(h) => {
                h.forget(
                    chrono::DateTime::<chrono::Utc>::MIN_UTC,
                    now + chrono::Duration::seconds(1),
                    vec![app.to_string()],
                    Vec::new(),
                    now,
                )
                .await?
            }
            // No timeline is kept: there is none to forget.
            Err(_) => 0,
        };
        let audit = match self.gate.store() {
            Some(store) => store.forget_audit(app.clone()).await?,
            None => 0,
        };
        self.gate.notices.bump(notice::Part::Audit);
        tracing::info!(app = %app, timeline, audit, "an app's history forgotten");
        Ok(ForgottenView { timeline, audit })
    }

    /// What changed of what the user controls, for a panel's `Changed`.
    pub(crate) fn control_changes(&self) -> notice::Listener {
        notice::Listener::new(&self.gate.notices)
    }

    /// Put the user's never-share rules (`[privacy]`) in force, at once:
    /// titles and notifications they match are hidden from every reader
    /// and the timeline from the next change on, what their apps publish
    /// is withdrawn. Whether the rules changed.
    pub(crate) fn set_privacy(&self, user: privacy::PrivacySettings) -> bool {
        let before = self.state.privacy().rules();
        self.state.set_privacy(privacy::Rules::new(user));
        let changed = *before != *self.state.privacy().rules();
        if changed {
            self.provide.withdraw_never_shared();
        }
        changed
    }

    /// The user's never-share rules in force (`[privacy]`).
    pub(crate) fn privacy_rules(&self) -> privacy::PrivacySettings {
        self.state.privacy().rules().user().clone()
    }

    /// Where the dashboard listens, for the links its tickets open.
    pub(crate) fn set_dashboard_base(&self, base: String) {
        self.tickets.set_base(base);
    }

    /// A link that opens the dashboard once (a fresh ticket in it).
    pub(crate) fn dashboard_url(&self) -> Result<String> {
        self.tickets.issue()
    }

    /// Use up a dashboard ticket: whether it was valid.
    pub(crate) fn redeem_ticket(&self, ticket: &str) -> bool {
        self.tickets.redeem(ticket)
    }

    /// How many revocations are in force but not stored yet (for the
    /// user's own surfaces).
    pub(crate) fn waiting_revocations(&self) -> usize {
        self.gate.pending_writes()
    }

    /// Delete rows of the timeline (the caller is a manager, checked by
    /// its publisher through polkit): how many.
    pub(crate) async fn forget_history(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
        apps: Vec<String>,
        kinds: Vec<super::history::HistoryKind>,
    ) -> Result<u64> {
        let now = self.clock.now();
        self.reads
            .history()?
            .forget(since, until, apps, kinds, now)
            .await
    }

    /// Whether `who` may use the user's own controls for `what` (the
    /// call, for the message and the journal). Refused, before any
    /// authentication is asked, for a sandboxed app: its id comes from its
    /// sandbox, and a polkit dialog it caused would look like the user's
    /// own action. Every refusal is logged with the caller and the call.
    pub(crate) fn may_manage(&self, who: &Subject, what: &str) -> Result<()> {
        if who.source.is_sandboxed() {
            tracing::warn!(
                app = %who.app_id,
                identity = who.source.as_str(),
                channel = who.channel.as_str(),
                call = what,
                "refused: a sandboxed app reached for the user's controls"
            );
            return Err(Error::NotTheUser {
                app: who.app_id.clone(),
                what: what.to_owned(),
                why: SANDBOXED.to_owned(),
            });
        }
        Ok(())
    }

    /// Whether `who` may answer the waiting question `id`: never its own
    /// (an app that answers its own question grants itself). The
    /// question's app is the one the broker identified when it asked.
    /// The question, when it still waits (for the publisher's words of
    /// what is answered).
    pub(crate) fn may_answer(
        &self,
        who: &Subject,
        id: u64,
    ) -> Result<Option<super::prompts::PendingView>> {
        self.may_manage(who, "answer a consent question")?;
        let question = self.ask.pending_one(id);
        if question
            .as_ref()
            .is_some_and(|q| q.app_id == who.app_id.as_str())
        {
            tracing::warn!(app = %who.app_id, id, "refused: an app answered its own question");
            return Err(Error::NotTheUser {
                app: who.app_id.clone(),
                what: "answer a consent question".to_owned(),
                why: "nobody answers its own question: the user answers it".to_owned(),
            });
        }
        Ok(question)
    }

    /// The user's own view of who uses the microphone, camera or screen
    /// since `since` (the dashboard): every app, no consent (it is the
    /// user asking), from the timeline when there is one.
    pub(crate) async fn owner_captures(
        &self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<super::read::CapturesView> {
        self.reads
            .capture_sessions(since, self.clock.now(), true)
            .await
    }

    /// The user's own view of what plays and records now.
    pub(crate) fn owner_media(&self) -> super::view::MediaView {
        let now = self.clock.now();
        self.state
            .read(|s| super::view::media(s, &|_: &Category| true, now))
    }

    /// The user's own time per app in `[since, until)`, without the apps
    /// the never-share rules hold back now (a rule added after their
    /// time was recorded hides it from then on).
    pub(crate) async fn owner_summary(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<super::view::AppTotalsView>> {
        let totals = self.reads.totals(since, until).await?;
        let rules = self.state.privacy().rules();
        Ok(totals
            .iter()
            .filter(|t| rules.app(&t.app_id).is_none())
            .filter_map(|t| super::view::AppTotalsView::new(t, &|_: &Category| true))
            .collect())
    }

    /// The user's own focus, playback and capture intervals overlapping
    /// `[since, until)`, clipped to it (an open one ends now), oldest
    /// first: the pictures of time per app. Never a title, and none of
    /// an app the never-share rules hold back now; private windows and
    /// password managers were never recorded (`core::history`). At most
    /// [`MAX_SPANS`].
    pub(crate) async fn owner_spans(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<SpanView>> {
        use super::history::{HistoryKind, Query, parse_cursor};
        let now = self.clock.now();
        let history = self.reads.history()?;
        let rules = self.state.privacy().rules();
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let q = Query {
                since,
                until,
                kinds: vec![
                    HistoryKind::Focus,
                    HistoryKind::Playback,
                    HistoryKind::Capture,
                ],
                apps: Vec::new(),
                limit: 1000,
                cursor,
            };
            let (rows, next) = history.query(q, now).await?;
            for e in rows {
                let Some(app) = e.app_id else { continue };
                if rules.app(&app).is_some() {
                    continue;
                }
                let lane = match e.kind {
                    HistoryKind::Focus => SpanLane::Focus,
                    HistoryKind::Playback => SpanLane::Playing,
                    _ => SpanLane::Recording,
                };
                let end = e.end.unwrap_or(now).min(until);
                let start = e.start.max(since);
                if end > start {
                    out.push(SpanView {
                        app_id: app,
                        lane,
                        start,
                        end,
                    });
                }
            }
            match next {
                Some(c) if out.len() < MAX_SPANS => cursor = parse_cursor(&c)?,
                _ => break,
            }
        }
        out.truncate(MAX_SPANS);
        Ok(out)
    }

    /// How many apps may see each of `categories` now: a lasting grant
    /// holds (the user's allow or policy.toml's, not taken back by a
    /// deny; paused or not), as [`Gate::granted`] decides it. For every
    /// app the broker knows of: those that asked and those decided about
    /// (policy.toml's included).
    pub(crate) fn allowed_apps(&self, categories: &[Category]) -> Vec<usize> {
        let mut ids: std::collections::BTreeSet<AppId> =
            self.gate.apps().iter().map(|a| a.app_id.clone()).collect();
        ids.extend(self.gate.grants().iter().map(|d| d.app.clone()));
        categories
            .iter()
            .map(|c| ids.iter().filter(|a| self.gate.granted(a, c)).count())
            .collect()
    }

    /// Every app that asked.
    pub(crate) fn apps(&self) -> Vec<AppView> {
        self.gate
            .apps()
            .iter()
            .map(|a| AppView {
                app_id: a.app_id.to_string(),
                identity_source: a.identity_source.as_str(),
                first_seen: time(&a.first_seen),
                last_seen: time(&a.last_seen),
                name: a.display_name.clone(),
                icon: a.icon.clone(),
            })
            .collect()
    }

    /// Every live decision.
    pub(crate) fn grants(&self) -> Vec<GrantView> {
        self.gate
            .grants()
            .iter()
            .map(|d| GrantView {
                app_id: d.app.to_string(),
                category: match &d.category {
                    Category::Provided(k) if k == "*" => "*".to_owned(),
                    c => c.to_string(),
                },
                decision: d.verdict.as_str(),
                origin: d.origin.as_str(),
                created: (d.origin != Origin::Policy).then(|| time(&d.created)),
                expires: d.expires.as_ref().map(time),
            })
            .collect()
    }

    /// Where policy.toml is (the file its grants are changed in).
    pub(crate) fn policy_file(&self) -> String {
        self.gate.policy_path().display().to_string()
    }

    /// policy.toml's grants of `app` still in force.
    pub(crate) fn policy_grants(&self, app: &AppId) -> Vec<PolicyGrantView> {
        let now = self.clock.now();
        let file = self.policy_file();
        self.gate
            .policy()
            .grants_for(app)
            .iter()
            .filter(|g| g.expires.is_none_or(|e| e > now))
            .map(|g| PolicyGrantView {
                covers: match &g.category {
                    super::policy::CategoryPattern::All => "*".to_owned(),
                    super::policy::CategoryPattern::AllProvided => "provided.*".to_owned(),
                    super::policy::CategoryPattern::One(c) => c.to_string(),
                },
                file: file.clone(),
                expires: g.expires.as_ref().map(time),
            })
            .collect()
    }

    /// Every app that asked for `category` (within the audit's last
    /// [`ASKED_WITHIN`]), was decided about for it, or that policy.toml
    /// grants it; with how each stands. Apps that asked first, by id.
    pub(crate) async fn category_apps(&self, category: &Category) -> Vec<StandingView> {
        let now = self.clock.now();
        let known = self.apps();
        let mut asked: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        if let Ok(counts) = self
            .audit_counts(AuditCountQuery {
                since: now - ASKED_WITHIN,
                until: now + chrono::Duration::seconds(1),
                app: None,
                category: Some(category.clone()),
                period: None,
            })
            .await
        {
            asked.extend(counts.into_iter().map(|c| c.app_id));
        }
        let mut ids = asked.clone();
        for d in self.gate.grants() {
            ids.insert(d.app.to_string());
        }
        let file = self.policy_file();
        let mut out: Vec<StandingView> = ids
            .into_iter()
            .filter_map(|id| {
                let app = AppId::new(&id).ok()?;
                let st = self.gate.standing(&app, category);
                let a = known.iter().find(|a| a.app_id == id);
                // Decided about for another category only: not this page's.
                if !asked.contains(&id) && st.stored.is_none() && st.policy.is_none() {
                    return None;
                }
                Some(StandingView {
                    name: a.and_then(|a| a.name.clone()),
                    known_as: match (a, &st.policy) {
                        (Some(a), _) => a.identity_source,
                        (None, Some(_)) => "policy",
                        (None, None) => "decided",
                    },
                    granted: st.granted,
                    decision: st.stored.as_ref().map(|d| d.verdict.as_str()),
                    decided_for: st.stored.as_ref().map(|d| d.category.to_string()),
                    expires: st
                        .stored
                        .as_ref()
                        .and_then(|d| d.expires.as_ref().map(time)),
                    policy: st.policy.map(|e| PolicyGrantView {
                        covers: category.to_string(),
                        file: file.clone(),
                        expires: e.as_ref().map(time),
                    }),
                    app_id: id,
                })
            })
            .collect();
        out.sort_by(|a, b| {
            (a.known_as == "policy" || a.known_as == "decided", &a.app_id)
                .cmp(&(b.known_as == "policy" || b.known_as == "decided", &b.app_id))
        });
        out
    }

    /// The audit counted per period, app and category (the user's pages:
    /// an app's last 7 days).
    pub(crate) async fn audit_counts(&self, q: AuditCountQuery) -> Result<Vec<AuditCountView>> {
        let store = self
            .gate
            .store()
            .ok_or_else(|| Error::Unavailable("no database: the audit log is not kept".into()))?;
        Ok(store
            .audit_counts(q)
            .await?
            .into_iter()
            .map(|c| AuditCountView {
                start: c.start,
                app_id: c.app.to_string(),
                category: c.category.to_string(),
                allowed: c.allowed,
                refused: c.refused,
            })
            .collect())
    }

    /// The audit log, newest first.
    pub(crate) async fn audit(&self, q: AuditQuery) -> Result<Vec<AuditView>> {
        let store = self
            .gate
            .store()
            .ok_or_else(|| Error::Unavailable("no database: the audit log is not kept".into()))?;
        Ok(store
            .query_audit(q)
            .await?
            .iter()
            .map(|e| AuditView {
                time: time(&e.time),
                app_id: e.app.to_string(),
                category: e.category.to_string(),
                channel: e.channel.as_str(),
                request: e.request.clone(),
                allowed: e.allowed,
                reason: e.reason.clone(),
                count: e.count,
            })
            .collect())
    }
}

/// What a token's end forgets (`core::tokens`): the decisions made for
/// its consent subject and the questions asked for it.
impl Forget for Manage {
    fn forget_decisions<'a>(&'a self, app: &'a AppId) -> BoxFut<'a, usize> {
        Box::pin(self.gate.forget_decisions(app))
    }

    fn withdraw_questions<'a>(&'a self, app: &'a AppId) -> BoxFut<'a, ()> {
        Box::pin(self.ask.withdraw_questions(app, WITHDRAW_WAIT))
    }
}

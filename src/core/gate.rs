//! The consent gate: `decide(subject, category) -> Allow | Deny | Ask`.
//!
//! Every read of context, every signal carrying context and every MCP
//! resource or tool goes through here. A decision costs no I/O: policy.toml
//! and the user's stored decisions are held in memory; writes go to the
//! store, audit entries are handed to it without waiting.
//!
//! Order of precedence for (app, category):
//! 1. paused: everything is denied;
//! 2. a stored **deny** (of the category, or of its base for a detail);
//! 3. a stored **allow**, or a grant in policy.toml (a detail implies its
//!    base);
//! 4. a one-time grant ("allow once") not used yet;
//! 5. a prompt that went unanswered moments ago: denied for a short
//!    cool-down, so that an app cannot flood the user with prompts;
//! 6. the app's question was dismissed moments ago (a cool-down for the
//!    whole app), or the user refused its last [`QUIET_AFTER`] questions
//!    (a quiet period of [`QUIET_FOR`], until the user changes a decision
//!    for it): denied without asking. Both are kept in memory only: only
//!    user input writes a decision;
//! 7. otherwise: ask (or deny, if config.toml says unknown apps are denied).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::consent::{AppInfo, AuditEntry, ConsentStore, Loaded, Origin, StoredDecision, Verdict};
use super::error::Error;
use super::event::SourceEvent;
use super::policy::{Policy, PolicyError};
use super::subject::Channel;
use crate::model::{AppId, Category, IdentitySource};

/// Where an app stands with a category ([`Gate::standing`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Standing {
    /// The user's decision that applies, if any.
    pub(crate) stored: Option<StoredDecision>,
    /// A policy.toml grant covers it: until when (`None` inside: for good).
    pub(crate) policy: Option<Option<DateTime<Utc>>>,
    /// A stored allow or the policy grants it (paused or not).
    pub(crate) granted: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    Allow,
    /// Not allowed; the error explains why and how to grant.
    Deny(Error),
    /// The user has not decided; ask them.
    Ask,
}

/// Tunables from config.toml `[consent]`.
#[derive(Debug, Clone)]
pub(crate) struct GateSettings {
    /// What an undecided (app, category) gets: `Ask` (default) or `Deny`.
    pub(crate) undecided: Verdict,
    /// How long an unanswered prompt keeps denying before asking again.
    pub(crate) cooldown: chrono::Duration,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            undecided: Verdict::Ask,
            cooldown: chrono::Duration::seconds(60),
        }
    }
}

/// Questions of one app refused in a row (denied, dismissed, closed with
/// Escape) after which it is not asked again for [`QUIET_FOR`]: as
/// browsers block an origin's permission requests after three
/// dismissals.
pub(crate) const QUIET_AFTER: u32 = 3;
/// How long an app that was refused [`QUIET_AFTER`] times in a row is not
/// asked (unless the user changes a decision for it meanwhile).
pub(crate) const QUIET_FOR: chrono::Duration = chrono::Duration::hours(24);

/// How a question of an app ended, for its cool-down and quiet period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The user allowed: the count of refusals starts again.
    Allowed,
    /// The user denied.
    Denied,
    /// The user closed it without choosing (Escape, the notification
    /// closed): a cool-down for the app, and it counts as a refusal.
    Dismissed,
    /// Nobody answered in time (the user may be away): a cool-down for
    /// the app, not a refusal.
    Unanswered,
}

/// How an app's questions went lately (in memory only).
#[derive(Debug, Clone, Default)]
struct Asked {
    /// Questions refused in a row.
    refusals: u32,
    /// No question before this (a dismissal's cool-down).
    cool_until: Option<DateTime<Utc>>,
    /// No question before this (the quiet period).
    quiet_until: Option<DateTime<Utc>>,
}

/// Why an access was allowed, for the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AllowedBy {
    Stored(Origin),
    Policy,
    Once,
}

type Key = (AppId, Category);

#[derive(Debug)]
pub(crate) struct Gate {
    policy: RwLock<Arc<Policy>>,
    policy_path: PathBuf,
    pub(super) decisions: RwLock<HashMap<AppId, HashMap<Category, StoredDecision>>>,
    apps: RwLock<HashMap<AppId, AppInfo>>,
    /// Apps whose publications the user refused, and since when.
    refused_publishers: RwLock<HashMap<AppId, DateTime<Utc>>>,
    once: Mutex<HashMap<Key, u32>>,
    cooldown: Mutex<HashMap<Key, DateTime<Utc>>>,
    /// Each app's recent questions: its cool-down and quiet period.
    asked: Mutex<HashMap<AppId, Asked>>,
    paused: AtomicBool,
    settings: GateSettings,
    store: Option<Arc<dyn ConsentStore>>,
    clock: Arc<dyn Clock>,
    /// Bumped whenever what any app may see could have changed (policy
    /// reloaded, a decision changed, a grant expired, pause), so that
    /// publishers re-check live subscriptions at once.
    generation: watch::Sender<u64>,
    /// What changed, for the user's control surfaces.
    pub(crate) notices: super::notice::Notices,
    /// The last allowed read of each app (who reads now, for the
    /// privacy indicators: `core::reading`).
    pub(crate) reads: super::reading::Marks,
    /// Why the broker runs degraded, while it does (`store::recovery`):
    /// undecided access is then denied, never asked.
    recovery: RwLock<Option<String>>,
    /// Revocations and denies in force in memory but not yet stored (a
    /// full or read-only disk): written by `super::pending` until they
    /// are.
    pub(super) pending: Mutex<Vec<super::consent::PendingWrite>>,
    /// Woken when a write is kept for the retries or the room kept for
    /// one is given back (`super::pending::write_revocations` sleeps on
    /// it while nothing waits and the room is there).
    pub(super) pending_wake: tokio::sync::Notify,
    /// Where the waiting writes are kept meanwhile, off the database's
    /// disk (`super::pending`): set once at start.
    pub(super) journal: std::sync::OnceLock<PathBuf>,
}

/// The pseudo-source that reports the health of policy.toml.
pub(crate) const POLICY_SOURCE: &str = "policy";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gate {
    pub(crate) fn with_store(
        policy_path: PathBuf,
        clock: Arc<dyn Clock>,
        store: Option<Arc<dyn ConsentStore>>,
        loaded: Loaded,
        settings: GateSettings,
    ) -> Self {
        let (generation, _) = watch::channel(0);
        let mut decisions: HashMap<AppId, HashMap<Category, StoredDecision>> = HashMap::new();
        for d in loaded.decisions {
            decisions
                .entry(d.app.clone())
                .or_default()
                .insert(d.category.clone(), d);
        }
        let apps = loaded
            .apps
            .into_iter()
            .map(|a| (a.app_id.clone(), a))
            .collect();
        Gate {
            policy: RwLock::new(Arc::new(Policy::default())),
            policy_path,
            decisions: RwLock::new(decisions),
            apps: RwLock::new(apps),
            refused_publishers: RwLock::new(loaded.refused_publishers.into_iter().collect()),
            once: Mutex::new(HashMap::new()),
            cooldown: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
            paused: AtomicBool::new(false),
            settings,
            store,
            clock,
            generation,
            notices: super::notice::Notices::default(),
            reads: super::reading::Marks::default(),
            recovery: RwLock::new(loaded.recovery),
            pending: Mutex::new(Vec::new()),
            pending_wake: tokio::sync::Notify::new(),
            journal: std::sync::OnceLock::new(),
        }
    }

    /// Why the broker runs degraded, if it does.
    pub(crate) fn recovery(&self) -> Option<String> {
        self.recovery
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The user acted on the recovery: undecided access is asked again
    /// (if config.toml says so), now and after a restart.
    pub(crate) async fn end_recovery(&self) -> Result<bool, Error> {
        if self.recovery().is_none() {
            return Ok(false);
        }
        if let Some(store) = &self.store {
            store.clear_recovery().await?;
        }
        *self.recovery.write().unwrap_or_else(|e| e.into_inner()) = None;
        self.bump();
        Ok(true)
    }

    pub(crate) fn policy_path(&self) -> &Path {
        &self.policy_path
    }

    pub(crate) fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-read the policy file. On error the previous policy stays.
    pub(crate) fn reload(&self) -> Result<(), PolicyError> {
        let p = Policy::load(&self.policy_path)?;
        let changed = {
            let mut cur = self.policy.write().unwrap_or_else(|e| e.into_inner());
            let changed = **cur != p;
            *cur = Arc::new(p);
            changed
        };
        if changed {
            self.bump();
        }
        Ok(())
    }

    /// Re-read the policy file and say how it went as the `policy`
    /// source's status ([`POLICY_SOURCE`]), which `ListSources` shows: an
    /// error, with its line, keeps the last good policy (a typo never
    /// grants more, nor takes away what worked).
    pub(crate) fn reload_reported(&self) -> SourceEvent {
        let error = match self.reload() {
            Ok(()) => {
                tracing::info!(path = %self.policy_path.display(), "policy loaded");
                None
            }
            Err(e) => {
                tracing::error!("{e}; keeping the last good policy");
                Some(e.to_string())
            }
        };
        SourceEvent::SourceStatus {
            source: POLICY_SOURCE.into(),
            available: true,
            error,
        }
    }

    /// Tell publishers that decisions may have changed.
    pub(crate) fn bump(&self) {
        self.generation.send_modify(|g| *g += 1);
        self.notices.bump(super::notice::Part::Grants);
    }

    pub(crate) fn watch_generation(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub(crate) fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// The global privacy switch: nothing is handed out while paused.
    pub(crate) fn set_paused(&self, paused: bool) -> bool {
        let was = self.paused.swap(paused, Ordering::SeqCst);
        if was != paused {
            self.bump();
        }
        was != paused
    }

    /// Wake the gate at every expiry of a grant or decision (its
    /// generation moves), so that subscriptions end on time, until
    /// `cancel`. A new decision may bring a sooner expiry: recomputed on
    /// every change.
    pub(crate) async fn wake_at_expiries(self: Arc<Self>, cancel: CancellationToken) {
        let mut generation = self.watch_generation();
        loop {
            let expiry = self.next_expiry();
            let sleep_for = expiry
                .and_then(|e| (e - self.clock.now()).to_std().ok())
                .unwrap_or(std::time::Duration::from_secs(24 * 3600));
            tokio::select! {
                _ = cancel.cancelled() => break,
                r = generation.changed() => {
                    if r.is_err() {
                        break;
                    }
                }
                _ = tokio::time::sleep(sleep_for + std::time::Duration::from_millis(1)) => {
                    if expiry.is_some() {
                        self.bump();
                    }
                }
            }
        }
    }

    /// The soonest expiry of a policy grant or stored decision after now,
    /// so that the daemon wakes up and cuts subscriptions exactly then.
    pub(crate) fn next_expiry(&self) -> Option<DateTime<Utc>> {
        let now = self.clock.now();
        let stored = self
            .decisions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|m| m.values())
            .filter_map(|d| d.expires)
            .filter(|e| *e > now)
            .min();
        match (stored, self.policy().next_expiry(now)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn stored(&self, app: &AppId, cat: &Category, now: DateTime<Utc>) -> Option<StoredDecision> {
        let guard = self.decisions.read().unwrap_or_else(|e| e.into_inner());
        let m = guard.get(app)?;
        let live = |c: &Category| m.get(c).filter(|d| d.live_at(now)).cloned();
        // A deny of the base covers its details.
        if let Some(base) = cat.base()
            && let Some(d) = live(&base)
            && d.verdict == Verdict::Deny
        {
            return Some(d);
        }
        if let Some(d) = live(cat) {
            return Some(d);
        }
        // An allow of a detail covers its base.
        m.values()
            .find(|d| {
                d.verdict == Verdict::Allow
                    && d.live_at(now)
                    && d.category.base().as_ref() == Some(cat)
            })
            .cloned()
    }

    fn evaluate(&self, app: &AppId, cat: &Category) -> Result<AllowedBy, Decision> {
        self.evaluate_paused(app, cat, self.paused())
    }

    /// Where `app` stands with `category`, for the user's own pages: the
    /// user's decision that applies (its base's deny, a detail's allow:
    /// as [`Gate::decide`] reads them), the policy.toml grant that covers
    /// it (the one lasting longest), and whether either grants it now.
    pub(crate) fn standing(&self, app: &AppId, category: &Category) -> Standing {
        let now = self.clock.now();
        let policy = self
            .policy()
            .grants_for(app)
            .iter()
            .filter(|g| g.category.covers(category) && g.expires.is_none_or(|e| e > now))
            .map(|g| g.expires)
            .max_by(|a, b| match (a, b) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            });
        Standing {
            stored: self.stored(app, category, now),
            policy,
            granted: self.granted(app, category),
        }
    }

    /// Whether `app` holds a lasting grant of `category` (a stored allow
    /// or policy.toml), paused or not: who may learn what only readers of
    /// that category could tell (History1's `Recording`).
    pub(crate) fn granted(&self, app: &AppId, category: &Category) -> bool {
        matches!(
            self.evaluate_paused(app, category, false),
            Ok(AllowedBy::Stored(_) | AllowedBy::Policy)
        )
    }

    fn evaluate_paused(
        &self,
        app: &AppId,
        cat: &Category,
        paused: bool,
    ) -> Result<AllowedBy, Decision> {
        let now = self.clock.now();
        if paused {
            return Err(Decision::Deny(Error::NotAllowed {
                app: app.clone(),
                category: cat.clone(),
                // An app learns of a pause only as a refusal, not that it
                // is one (the switch is the user's business: Consent1's
                // Paused is for management callers only); the audit says
                // `paused`.
                hint: "the user does not share context now".into(),
            }));
        }
        let stored = self.stored(app, cat, now);
        match stored.as_ref().map(|d| d.verdict) {
            Some(Verdict::Deny) => {
                return Err(Decision::Deny(Error::NotAllowed {
                    app: app.clone(),
                    category: cat.clone(),
                    hint: format!(
                        "you denied it; to change that: contextctl consent grant {} {}",
                        app, cat
                    ),
                }));
            }
            Some(Verdict::Allow) => {
                let origin = stored.map(|d| d.origin).unwrap_or(Origin::Manage);
                return Ok(AllowedBy::Stored(origin));
            }
            _ => {}
        }
        if self.policy().allows(app, cat, now) {
            return Ok(AllowedBy::Policy);
        }
        if lock(&self.once)
            .get(&(app.clone(), cat.clone()))
            .is_some_and(|n| *n > 0)
        {
            return Ok(AllowedBy::Once);
        }
        if let Some(until) = lock(&self.cooldown).get(&(app.clone(), cat.clone()))
            && *until > now
        {
            return Err(Decision::Deny(Error::NotAllowed {
                app: app.clone(),
                category: cat.clone(),
                hint: "the user did not answer the last prompt; ask again later with RequestAccess"
                    .into(),
            }));
        }
        if let Some(hint) = self.quiet(app, now) {
            return Err(Decision::Deny(Error::NotAllowed {
                app: app.clone(),
                category: cat.clone(),
                hint,
            }));
        }
        let degraded = self.recovery().is_some();
        if stored.is_some() || (self.settings.undecided == Verdict::Ask && !degraded) {
            return Err(Decision::Ask);
        }
        Err(Decision::Deny(Error::NotAllowed {
            app: app.clone(),
            category: cat.clone(),
            hint: if degraded {
                format!(
                    "contextd runs degraded (its database could not be used; see contextctl status): undecided access is denied until the user acts. {}",
                    self.grant_hint(app, cat)
                )
            } else {
                self.grant_hint(app, cat)
            },
        }))
    }

    /// What `app` may do with `category`, without side effects (used to
    /// render details, e.g. titles, inside an access already decided).
    pub(crate) fn decide(&self, app: &AppId, category: &Category) -> Decision {
        match self.evaluate(app, category) {
            Ok(_) => Decision::Allow,
            Err(d) => d,
        }
    }

    pub(crate) fn allows(&self, app: &AppId, category: &Category) -> bool {
        self.evaluate(app, category).is_ok()
    }

    /// Whether `app` may see `category` on a lasting ground: a stored
    /// allow or a policy.toml grant, never a one-time grant. What a look
    /// shows (signals, a snapshot looked at): a look uses nothing up, so
    /// it must not show what only a one-time grant allows, or "once"
    /// would never run out.
    pub(crate) fn allows_lasting(&self, app: &AppId, category: &Category) -> bool {
        matches!(
            self.evaluate(app, category),
            Ok(AllowedBy::Stored(_) | AllowedBy::Policy)
        )
    }

    /// [`Gate::decide`] for a look: a one-time grant not used yet counts
    /// as undecided (a look never uses it).
    pub(crate) fn decide_lasting(&self, app: &AppId, category: &Category) -> Decision {
        match self.evaluate(app, category) {
            Ok(AllowedBy::Once) => Decision::Ask,
            Ok(_) => Decision::Allow,
            Err(d) => d,
        }
    }

    /// Whether a one-time grant that a subscription used up at `Subscribe`
    /// still holds for it: until a pause or a deny of the category (or of
    /// its base).
    pub(crate) fn holds(&self, app: &AppId, category: &Category) -> bool {
        if self.paused() {
            return false;
        }
        let denied = self
            .stored(app, category, self.clock.now())
            .is_some_and(|d| d.verdict == Verdict::Deny);
        !denied
    }

    /// A gate with nothing stored and nothing undecided allowed: what a
    /// test of the parts around the gate starts from.
    #[cfg(test)]
    pub(crate) fn denying(policy_path: PathBuf, clock: Arc<dyn Clock>) -> Gate {
        Gate::with_store(
            policy_path,
            clock,
            None,
            Loaded::default(),
            GateSettings {
                undecided: Verdict::Deny,
                ..Default::default()
            },
        )
    }

    /// An access: decides, uses up a one-time grant, and audits.
    #[cfg(test)]
    pub(crate) fn access(
        &self,
        app: &AppId,
        category: &Category,
        channel: Channel,
        request: &str,
    ) -> Decision {
        self.access_once(app, category, channel, request).0
    }

    /// A detail shown by an access already allowed: when `app` may see
    /// `category` (a one-time grant is used up), audit it and say so
    /// (`Some(used a one-time grant)`); otherwise nothing happens and
    /// nothing is recorded, since a read shows less rather than asking for
    /// a detail.
    pub(crate) fn access_if_allowed(
        &self,
        app: &AppId,
        category: &Category,
        channel: Channel,
        request: &str,
    ) -> Option<bool> {
        // One evaluation decides both whether to access and the access.
        let r = self.evaluate(app, category);
        if r.is_err() {
            return None;
        }
        match self.access_evaluated(app, category, (channel, request), r) {
            (Decision::Allow, once) => Some(once),
            _ => None,
        }
    }

    /// [`Gate::access`], and whether it used up a one-time grant.
    pub(crate) fn access_once(
        &self,
        app: &AppId,
        category: &Category,
        channel: Channel,
        request: &str,
    ) -> (Decision, bool) {
        let r = self.evaluate(app, category);
        self.access_evaluated(app, category, (channel, request), r)
    }

    /// The access of [`Gate::access_once`] on `r`, the evaluation the
    /// caller just made (so a read evaluates the policy once per
    /// category): uses up a one-time grant and audits.
    fn access_evaluated(
        &self,
        app: &AppId,
        category: &Category,
        (channel, request): (Channel, &str),
        mut r: Result<AllowedBy, Decision>,
    ) -> (Decision, bool) {
        if let Ok(AllowedBy::Once) = r {
            // Used up under the lock: two reads at the same moment do not
            // both get one grant.
            let mut once = lock(&self.once);
            let key = (app.clone(), category.clone());
            match once.get_mut(&key) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    if *n == 0 {
                        once.remove(&key);
                    }
                }
                _ => {
                    drop(once);
                    r = match self.evaluate(app, category) {
                        Ok(AllowedBy::Once) => Err(Decision::Ask),
                        other => other,
                    };
                }
            }
        }
        let (allowed, reason) = match &r {
            Ok(AllowedBy::Once) => (true, "once"),
            Ok(AllowedBy::Stored(o)) => (true, o.as_str()),
            Ok(AllowedBy::Policy) => (true, "policy"),
            Err(Decision::Ask) => (false, "undecided"),
            Err(Decision::Deny(_)) if self.paused() => (false, "paused"),
            Err(_) => (false, "denied"),
        };
        self.audit(app, category, (channel, request), allowed, reason);
        if allowed {
            self.reads.note(app);
        }
        match r {
            Ok(AllowedBy::Once) => (Decision::Allow, true),
            Ok(_) => (Decision::Allow, false),
            Err(d) => (d, false),
        }
    }

    fn audit(
        &self,
        app: &AppId,
        category: &Category,
        (channel, request): (Channel, &str),
        allowed: bool,
        reason: &str,
    ) {
        // The store tells the control surfaces once the entry is written
        // (`notice::Part::Audit`): what they re-read is there then.
        if let Some(store) = &self.store {
            store.audit(AuditEntry {
                time: self.clock.now(),
                app: app.clone(),
                category: category.clone(),
                channel,
                request: request.to_owned(),
                allowed,
                reason: reason.to_owned(),
                count: 1,
            });
        }
    }

    /// Record an answer of the user (prompt) or a management call.
    pub(crate) async fn record(
        &self,
        app: &AppId,
        category: &Category,
        verdict: Verdict,
        expires: Option<DateTime<Utc>>,
        origin: Origin,
    ) -> Result<(), Error> {
        let d = StoredDecision {
            app: app.clone(),
            category: category.clone(),
            verdict,
            expires,
            origin,
            created: self.clock.now(),
        };
        if origin != Origin::Prompt {
            self.user_decided(app);
        }
        // A deny takes effect at once, stored or not (revocation always
        // wins); a write that fails is kept and retried (`pending`). Any
        // other decision is in force only once stored.
        if verdict == Verdict::Deny {
            self.decisions
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .entry(app.clone())
                .or_default()
                .insert(category.clone(), d.clone());
            lock(&self.once).remove(&(app.clone(), category.clone()));
            lock(&self.cooldown).remove(&(app.clone(), category.clone()));
            self.bump();
            self.write_or_keep(super::consent::PendingWrite::Put(d))
                .await;
            return Ok(());
        }
        if let Some(store) = &self.store {
            store.put_decision(d.clone()).await?;
        }
        self.superseded(app, category);
        self.decisions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(app.clone())
            .or_default()
            .insert(category.clone(), d);
        lock(&self.cooldown).remove(&(app.clone(), category.clone()));
        self.bump();
        Ok(())
    }

    /// Allow `app` one access to `category`.
    pub(crate) fn grant_once(&self, app: &AppId, category: &Category) {
        *lock(&self.once)
            .entry((app.clone(), category.clone()))
            .or_insert(0) += 1;
        lock(&self.cooldown).remove(&(app.clone(), category.clone()));
    }

    /// Why `app` is not asked now (a dismissal's cool-down, the quiet
    /// period after refusals), if it is not.
    fn quiet(&self, app: &AppId, now: DateTime<Utc>) -> Option<String> {
        let asked = lock(&self.asked);
        let a = asked.get(app)?;
        if let Some(until) = a.quiet_until.filter(|u| *u > now) {
            return Some(format!(
                "the user refused its last {QUIET_AFTER} questions: it is not asked again until {} unless the user changes a decision for it",
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
        }
        if let Some(until) = a.cool_until.filter(|u| *u > now) {
            return Some(format!(
                "the user closed its last question without answering: it is not asked again until {}",
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
        }
        None
    }

    /// A question of `app` ended `how`: its cool-down and quiet period
    /// (in memory, never stored).
    pub(crate) fn question_ended(&self, app: &AppId, how: Ended) {
        let now = self.clock.now();
        let mut asked = lock(&self.asked);
        // Forget what is over, so that the map holds only apps that count.
        asked.retain(|_, a| {
            a.refusals > 0
                || a.cool_until.is_some_and(|u| u > now)
                || a.quiet_until.is_some_and(|u| u > now)
        });
        if how == Ended::Allowed {
            asked.remove(app);
            return;
        }
        let a = asked.entry(app.clone()).or_default();
        if matches!(how, Ended::Dismissed | Ended::Unanswered) {
            a.cool_until = Some(now + self.settings.cooldown);
        }
        if matches!(how, Ended::Denied | Ended::Dismissed) {
            a.refusals += 1;
            if a.refusals >= QUIET_AFTER {
                a.quiet_until = Some(now + QUIET_FOR);
                tracing::info!(%app, refusals = a.refusals, "the user refused this app's questions: it is not asked for a while");
            }
        }
    }

    /// The user changed a decision for `app` (a panel, `contextctl`, the
    /// dashboard): its cool-down and quiet period end.
    pub(crate) fn user_decided(&self, app: &AppId) {
        lock(&self.asked).remove(app);
    }

    /// A prompt went unanswered: deny for the cool-down, store nothing.
    pub(crate) fn cool_down(&self, app: &AppId, category: &Category) {
        let until = self.clock.now() + self.settings.cooldown;
        lock(&self.cooldown).insert((app.clone(), category.clone()), until);
    }

    /// Remove a stored decision (back to undecided).
    /// Takes effect at once, stored or not: a write that fails (a full or
    /// read-only disk) is kept and retried until written (`pending`).
    pub(crate) async fn revoke(&self, app: &AppId, category: &Category) -> Result<bool, Error> {
        let removed = self
            .decisions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(app)
            .and_then(|m| m.remove(category))
            .is_some();
        lock(&self.once).remove(&(app.clone(), category.clone()));
        self.user_decided(app);
        self.bump();
        self.write_or_keep(super::consent::PendingWrite::Delete(
            app.clone(),
            category.clone(),
        ))
        .await;
        Ok(removed)
    }

    /// Forget everything about an app.
    pub(crate) async fn forget_app(&self, app: &AppId) -> Result<u64, Error> {
        let n = match &self.store {
            Some(store) => store.forget_app(app.clone()).await?,
            None => 0,
        };
        self.decisions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(app);
        self.apps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(app);
        lock(&self.once).retain(|(a, _), _| a != app);
        lock(&self.cooldown).retain(|(a, _), _| a != app);
        self.user_decided(app);
        self.refused_publishers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(app);
        self.bump();
        self.notices.bump(super::notice::Part::Apps);
        self.notices.bump(super::notice::Part::Providers);
        Ok(n)
    }

    /// Forget the decisions of `app` (stored ones, one-time grants and
    /// cool-downs), keeping its entry and its audit: for a subject that
    /// ends while its name may come back (a revoked MCP token). Takes
    /// effect at once, as [`Gate::revoke`] does; how many were stored.
    pub(crate) async fn forget_decisions(&self, app: &AppId) -> usize {
        let gone: Vec<Category> = self
            .decisions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(app)
            .map(|m| m.into_keys().collect())
            .unwrap_or_default();
        lock(&self.once).retain(|(a, _), _| a != app);
        lock(&self.cooldown).retain(|(a, _), _| a != app);
        self.bump();
        for category in &gone {
            self.write_or_keep(super::consent::PendingWrite::Delete(
                app.clone(),
                category.clone(),
            ))
            .await;
        }
        gone.len()
    }

    /// Whether the user lets `app` publish (org.contextd.Provider1).
    pub(crate) fn may_publish(&self, app: &AppId) -> bool {
        !self
            .refused_publishers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(app)
    }

    /// The apps whose publications the user refused, and since when.
    pub(crate) fn refused_publishers(&self) -> Vec<(AppId, DateTime<Utc>)> {
        let mut v: Vec<_> = self
            .refused_publishers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(a, t)| (a.clone(), *t))
            .collect();
        v.sort();
        v
    }

    /// Let `app` publish or refuse its publications, stored first (the
    /// user expects it to stick). Returns whether anything changed.
    pub(crate) async fn set_publishing(&self, app: &AppId, allowed: bool) -> Result<bool, Error> {
        if allowed == self.may_publish(app) {
            return Ok(false);
        }
        let since = (!allowed).then(|| self.clock.now());
        if let Some(store) = &self.store {
            store.set_refused_publisher(app.clone(), since).await?;
        }
        let mut refused = self
            .refused_publishers
            .write()
            .unwrap_or_else(|e| e.into_inner());
        match since {
            Some(t) => {
                refused.insert(app.clone(), t);
            }
            None => {
                refused.remove(app);
            }
        }
        drop(refused);
        self.notices.bump(super::notice::Part::Providers);
        Ok(true)
    }

    /// Note that an app asked (for `ListApps`). Cheap when already known.
    pub(crate) async fn seen(&self, app: &AppId, source: IdentitySource) {
        let now = self.clock.now();
        // Every access passes here: a shared lock answers the usual case
        // (seen within the minute) without serialising the callers.
        if self
            .apps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(app)
            .is_some_and(|a| now - a.last_seen < chrono::Duration::minutes(1))
        {
            return;
        }
        let info = {
            let mut apps = self.apps.write().unwrap_or_else(|e| e.into_inner());
            match apps.get_mut(app) {
                // Refresh last_seen at most once a minute: no write per call.
                Some(a) if now - a.last_seen < chrono::Duration::minutes(1) => return,
                Some(a) => {
                    a.last_seen = now;
                    a.clone()
                }
                None => {
                    let a = AppInfo {
                        app_id: app.clone(),
                        identity_source: source,
                        display_name: None,
                        icon: None,
                        first_seen: now,
                        last_seen: now,
                    };
                    apps.insert(app.clone(), a.clone());
                    self.notices.bump(super::notice::Part::Apps);
                    a
                }
            }
        };
        if let Some(store) = &self.store
            && let Err(e) = store.upsert_app(info).await
        {
            tracing::warn!(error = %e, "cannot record the app");
        }
    }

    pub(crate) fn apps(&self) -> Vec<AppInfo> {
        let mut v: Vec<AppInfo> = self
            .apps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        v.sort_by(|a, b| a.app_id.cmp(&b.app_id));
        v
    }

    /// Every live decision: stored ones and policy.toml grants (shown with
    /// origin `policy`).
    pub(crate) fn grants(&self) -> Vec<StoredDecision> {
        let now = self.clock.now();
        let mut v: Vec<StoredDecision> = self
            .decisions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|m| m.values())
            .filter(|d| d.live_at(now))
            .cloned()
            .collect();
        for (app, grants) in self.policy().apps() {
            for g in grants {
                if g.expires.is_some_and(|e| e <= now) {
                    continue;
                }
                let category = match &g.category {
                    super::policy::CategoryPattern::One(c) => c.clone(),
                    super::policy::CategoryPattern::All => Category::Provided("*".into()),
                    super::policy::CategoryPattern::AllProvided => Category::Provided("*".into()),
                };
                v.push(StoredDecision {
                    app: app.clone(),
                    category,
                    verdict: Verdict::Allow,
                    expires: g.expires,
                    origin: Origin::Policy,
                    created: now,
                });
            }
        }
        v.sort_by(|a, b| {
            (a.app.as_str(), a.category.to_string()).cmp(&(b.app.as_str(), b.category.to_string()))
        });
        v
    }

    pub(crate) fn store(&self) -> Option<&Arc<dyn ConsentStore>> {
        self.store.as_ref()
    }

    fn grant_hint(&self, app: &AppId, category: &Category) -> String {
        format!(
            "{} ({}). To allow it: contextctl consent grant {} {}, or add to {}: [[grant]] app = \"{}\" categories = [\"{}\"]",
            category,
            category.description(),
            app,
            category,
            self.policy_path.display(),
            app.as_str().replace('\\', "\\\\").replace('"', "\\\""),
            category
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::ManualClock;

    #[test]
    fn deny_names_app_category_and_how_to_grant_and_expiry_uses_the_clock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("policy.toml");
        let clock = ManualClock::new("2026-01-01T00:00:00Z".parse().expect("date"));
        let gate = Gate::denying(path.clone(), clock.clone());
        let app = AppId::new("org.example.App").expect("id");
        let Decision::Deny(e) = gate.decide(&app, &Category::Windows) else {
            panic!("must deny")
        };
        let msg = e.to_string();
        assert!(
            msg.contains("org.example.App")
                && msg.contains("windows")
                && msg.contains("policy.toml"),
            "{msg}"
        );

        std::fs::write(
            &path,
            "[[grant]]\napp = \"org.example.App\"\ncategories = [\"windows\"]\nexpires = \"2026-01-01T00:00:02Z\"\n",
        )
        .expect("write");
        let mut gen_rx = gate.watch_generation();
        gate.reload().expect("reload");
        assert!(gen_rx.has_changed().expect("watch"));
        gen_rx.mark_unchanged();
        assert!(gate.allows(&app, &Category::Windows));
        clock.advance(chrono::Duration::seconds(2));
        assert!(!gate.allows(&app, &Category::Windows));

        // A broken file keeps the last good policy.
        std::fs::write(&path, "[[grant]\n").expect("write");
        assert!(gate.reload().is_err());
        clock.advance(chrono::Duration::seconds(-1));
        assert!(gate.allows(&app, &Category::Windows));
        assert!(!gen_rx.has_changed().expect("watch"));
    }

    /// The attack: a policy.toml broken to widen access (a grant of every
    /// category whose file does not parse) grants nothing new; the last
    /// good policy stays and the `policy` source says what is wrong, with
    /// its line. A good file again clears the error.
    #[test]
    fn a_broken_policy_is_reported_and_grants_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("policy.toml");
        let clock = ManualClock::new("2026-01-01T00:00:00Z".parse().expect("date"));
        let gate = Gate::denying(path.clone(), clock);
        let app = AppId::new("org.example.Spy").expect("id");
        std::fs::write(
            &path,
            "[[grant]]\napp = \"org.example.Spy\"\ncategories = [\"windows\", \"notifications\"\n",
        )
        .expect("write");
        let SourceEvent::SourceStatus {
            source,
            available,
            error,
        } = gate.reload_reported()
        else {
            panic!("a source status");
        };
        assert_eq!(source, POLICY_SOURCE);
        assert!(available);
        let error = error.expect("the error is said");
        assert!(error.contains("policy.toml:3:"), "its line: {error}");
        assert!(!gate.allows(&app, &Category::Windows));
        assert!(!gate.allows(&app, &Category::Notifications));
        std::fs::write(&path, "").expect("write");
        assert!(matches!(
            gate.reload_reported(),
            SourceEvent::SourceStatus { error: None, .. }
        ));
    }

    #[tokio::test]
    async fn a_once_grant_on_a_detail_is_used_by_one_access_and_never_by_a_look() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new("2026-01-01T00:00:00Z".parse().expect("date"));
        let gate = Gate::with_store(
            dir.path().join("p.toml"),
            clock,
            None,
            Loaded::default(),
            GateSettings::default(),
        );
        let app = AppId::new("org.example.App").expect("id");
        let titles = Category::WindowsTitles;
        gate.grant_once(&app, &titles);
        assert!(gate.allows(&app, &titles));
        assert!(
            !gate.allows_lasting(&app, &titles),
            "a look does not count it"
        );
        assert_eq!(gate.decide_lasting(&app, &titles), Decision::Ask);
        assert_eq!(
            gate.access_if_allowed(&app, &titles, Channel::DBus, "t"),
            Some(true),
            "shown once, and used up"
        );
        assert_eq!(
            gate.access_if_allowed(&app, &titles, Channel::DBus, "t"),
            None
        );
        assert!(!gate.allows(&app, &titles));
        // A subscription that used it holds it until a pause or a deny.
        assert!(gate.holds(&app, &titles));
        gate.set_paused(true);
        assert!(!gate.holds(&app, &titles));
        gate.set_paused(false);
        gate.record(
            &app,
            &Category::Windows,
            Verdict::Deny,
            None,
            Origin::Manage,
        )
        .await
        .expect("record");
        assert!(!gate.holds(&app, &titles), "a deny of the base ends it");
    }

    #[tokio::test]
    async fn stored_decisions_once_cooldown_and_pause() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new("2026-01-01T00:00:00Z".parse().expect("date"));
        let gate = Gate::with_store(
            dir.path().join("p.toml"),
            clock.clone(),
            None,
            Loaded::default(),
            GateSettings::default(),
        );
        let app = AppId::new("org.example.App").expect("id");
        assert_eq!(gate.decide(&app, &Category::Windows), Decision::Ask);

        gate.grant_once(&app, &Category::Windows);
        assert_eq!(
            gate.access(&app, &Category::Windows, Channel::DBus, "test"),
            Decision::Allow
        );
        assert_eq!(
            gate.access(&app, &Category::Windows, Channel::DBus, "test"),
            Decision::Ask
        );

        gate.cool_down(&app, &Category::Windows);
        assert!(matches!(
            gate.decide(&app, &Category::Windows),
            Decision::Deny(_)
        ));
        clock.advance(chrono::Duration::seconds(61));
        assert_eq!(gate.decide(&app, &Category::Windows), Decision::Ask);

        let exp = clock.now() + chrono::Duration::seconds(2);
        gate.record(
            &app,
            &Category::WindowsTitles,
            Verdict::Allow,
            Some(exp),
            Origin::Prompt,
        )
        .await
        .expect("record");
        assert!(
            gate.allows(&app, &Category::Windows),
            "a detail implies its base"
        );
        assert_eq!(gate.next_expiry(), Some(exp));
        clock.advance(chrono::Duration::seconds(2));
        assert_eq!(gate.decide(&app, &Category::WindowsTitles), Decision::Ask);

        gate.record(
            &app,
            &Category::Windows,
            Verdict::Deny,
            None,
            Origin::Manage,
        )
        .await
        .expect("record");
        assert!(
            matches!(
                gate.decide(&app, &Category::WindowsTitles),
                Decision::Deny(_)
            ),
            "a base deny covers details"
        );

        gate.record(&app, &Category::Power, Verdict::Allow, None, Origin::Manage)
            .await
            .expect("record");
        assert!(gate.allows(&app, &Category::Power));
        gate.set_paused(true);
        assert!(!gate.allows(&app, &Category::Power));
        gate.set_paused(false);
        assert!(gate.revoke(&app, &Category::Power).await.expect("revoke"));
        assert_eq!(gate.decide(&app, &Category::Power), Decision::Ask);
    }

    /// The attack: an app asks and asks. A dismissal keeps the whole app
    /// from asking for the cool-down; three refusals in a row, for a day,
    /// until the user changes a decision for it. Nothing is stored.
    #[tokio::test]
    async fn a_dismissal_cools_the_app_down_and_three_refusals_quiet_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new("2026-01-01T00:00:00Z".parse().expect("date"));
        let gate = Gate::with_store(
            dir.path().join("p.toml"),
            clock.clone(),
            None,
            Loaded::default(),
            GateSettings::default(),
        );
        let app = AppId::new("org.example.Asker").expect("id");
        let other = AppId::new("org.example.Other").expect("id");
        gate.question_ended(&app, Ended::Dismissed);
        for c in [Category::Power, Category::Network] {
            assert!(matches!(gate.decide(&app, &c), Decision::Deny(_)), "{c}");
        }
        assert_eq!(gate.decide(&other, &Category::Power), Decision::Ask);
        clock.advance(chrono::Duration::seconds(61));
        assert_eq!(gate.decide(&app, &Category::Power), Decision::Ask);
        // Refused twice more in a row: quiet for a day.
        gate.question_ended(&app, Ended::Denied);
        assert_eq!(gate.decide(&app, &Category::Power), Decision::Ask);
        gate.question_ended(&app, Ended::Denied);
        clock.advance(chrono::Duration::hours(23));
        assert!(matches!(
            gate.decide(&app, &Category::Location),
            Decision::Deny(_)
        ));
        assert!(gate.grants().is_empty(), "nothing stored");
        // The user changes a decision for it: asked again.
        gate.record(&app, &Category::Power, Verdict::Allow, None, Origin::Manage)
            .await
            .expect("record");
        assert_eq!(gate.decide(&app, &Category::Location), Decision::Ask);
        // An allow starts the count again; a timeout cools down only.
        gate.question_ended(&app, Ended::Denied);
        gate.question_ended(&app, Ended::Denied);
        gate.question_ended(&app, Ended::Allowed);
        gate.question_ended(&app, Ended::Denied);
        gate.question_ended(&app, Ended::Unanswered);
        clock.advance(chrono::Duration::seconds(61));
        assert_eq!(gate.decide(&app, &Category::Location), Decision::Ask);
        // A prompt's own answer is no change by the user.
        gate.question_ended(&app, Ended::Denied);
        gate.question_ended(&app, Ended::Denied);
        gate.record(
            &app,
            &Category::Network,
            Verdict::Deny,
            None,
            Origin::Prompt,
        )
        .await
        .expect("record");
        assert!(matches!(
            gate.decide(&app, &Category::Location),
            Decision::Deny(_)
        ));
    }
}

//! The read service: "subject S asks question Q, in mode M", answered
//! with `Q`'s own view (`core::view`), already redacted, or a typed error.
//!
//! A read is a type ([`Read`], one per question in [`questions`]): it
//! says which categories it needs ([`Needs`]) and how its view is built
//! from what the reader may see ([`Seen`]). [`Reads::read`] is the one
//! consent path between the two, for every question and every publisher:
//! the gate's decision, the audit of every access with its channel, the
//! use of one-time grants, prompts and their cool-down, the details shown
//! only when granted too, and the media rule (either `media.playback` or
//! `media.capture` will do, each part only with its own). D-Bus, MCP and
//! the dashboard call [`Reads::read`] and only turn the view into their
//! wire format; none of them asks the gate itself.

pub(crate) mod questions;

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::clock::Clock;
use super::error::{Error, Result};
use super::gate::{Decision, Gate};
use super::history::{HistoryKind, HistoryStore, Query};
use super::prompts::{self, Ask, Outcome, PromptRequest};
use super::state::State;
use super::subject::{HostCall, Mode, Subject};
use super::view::{self, CaptureSessionView, SourceView, StateView};
use crate::model::{Category, IdentitySource, MediaKind};

pub(crate) use questions::*;

/// The longest reason a prompt shows (characters).
const MAX_REASON: usize = 500;

/// How often a waiting MCP host hears that the user is still being asked.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// A question a reader asks, answered by [`Reads::read`] with a
/// [`Read::View`]. One type per question ([`questions`]); the type says
/// only which categories it needs and how its view is built, never
/// whether the reader may see them (that is [`Reads::read`]'s, once).
pub(crate) trait Read: Send {
    /// The answer, already redacted to what the reader may see.
    type View: Send;

    /// The categories this read needs, decided before anything is
    /// accessed (`now` is the moment the read reads at). An error here
    /// (the timeline is not open, a kind that cannot exist) refuses the
    /// read before any access is made or audited.
    fn needs(&self, reads: &Reads, now: DateTime<Utc>) -> Result<Needs>;

    /// The view, of what [`Seen`] says the reader may see.
    fn view(self, seen: Seen<'_>) -> impl Future<Output = Result<Self::View>> + Send;
}

/// What a read needs, as [`Reads::read`] decides it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Needs {
    /// No consent: it tells nothing of what the user does (the sources'
    /// health). Nothing is decided or audited.
    Nothing,
    /// Looks only, whatever the mode: the view shows each category it
    /// asks [`Seen::can`] about as the gate decides it now (a one-time
    /// grant counts, unused), and nothing is accessed, audited or asked
    /// (the list of categories and whether the reader may read each).
    Looks,
    /// Never asks, never fails: each of `sections` is shown when its
    /// category is (used up and audited like a detail, see
    /// [`Reads::shown`]), with its detail when that is too; so is each of
    /// `shown`; each of `looked` is decided without an access, so that
    /// `withheld` names it alike whether or not anything is there (the
    /// snapshot: its sections, the kinds published now, the seed kinds
    /// nobody publishes).
    Sections {
        sections: Vec<(Category, Option<Category>)>,
        shown: Vec<Category>,
        looked: Vec<Category>,
    },
    /// An access to each of `bases` in turn (asked for as the mode says),
    /// then each of `details` shown when it is granted too: a detail is
    /// never asked for, a read shows less instead.
    Access {
        bases: Vec<Category>,
        details: Vec<Category>,
    },
    /// Either category will do: `first` when the reader may see it, else
    /// `or` (the one a prompt asks about); the other one is a detail.
    Either { first: Category, or: Category },
}

impl Needs {
    /// An access to `base` and nothing more.
    pub(crate) fn base(base: Category) -> Needs {
        Needs::details(base, Vec::new())
    }

    /// An access to `base`, with `details` shown when granted too.
    pub(crate) fn details(base: Category, details: Vec<Category>) -> Needs {
        Needs::Access {
            bases: vec![base],
            details,
        }
    }
}

/// What a read may show, decided by [`Reads::read`] before its view is
/// built, and the moment it reads at.
pub(crate) struct Seen<'a> {
    pub(crate) reads: &'a Reads,
    pub(crate) who: &'a Subject,
    pub(crate) now: DateTime<Utc>,
    allowed: Allowed,
    /// [`Needs::Looks`]: ask the gate (side-effect free) rather than the
    /// set.
    looks: bool,
}

impl Seen<'_> {
    /// Whether the view may show `c`.
    pub(crate) fn can(&self, c: &Category) -> bool {
        if self.looks {
            self.reads.gate.allows(&self.who.app_id, c)
        } else {
            self.allowed.can(c)
        }
    }
}

/// Capture sessions of a period, and where they come from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct CapturesView {
    /// Oldest first.
    pub(crate) sessions: Vec<CaptureSessionView>,
    /// From the timeline (else: what the broker saw since it started).
    pub(crate) from_timeline: bool,
    /// More sessions than [`MAX_CAPTURES`] were in the period.
    pub(crate) more: bool,
}

/// The answer to [`Reads::request_access`].
#[derive(Debug)]
pub(crate) enum Requested {
    /// Every category is allowed already.
    Granted,
    /// One is refused; why.
    Denied(String),
    /// The user is being asked; the outcome arrives here. Requests of one
    /// app merged into one question share its id.
    Asking(prompts::Asking),
}

/// What a `RequestAccess` answers once its question ended
/// ([`Reads::settle`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Settled {
    /// Every category asked for is allowed now.
    Granted,
    /// Refused (by the user, or by the gate meanwhile); why.
    Denied(String),
    /// Ended without the user's answer (a timeout, no way to ask); why.
    Ended(String),
}

/// Capture sessions a [`Captures`] read takes from the timeline at most.
pub(crate) const MAX_CAPTURES: u32 = 1000;

/// The categories a reader may see, decided before rendering so that
/// rendering (under the state's lock) never waits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Allowed(BTreeSet<Category>);

impl Allowed {
    pub(crate) fn can(&self, c: &Category) -> bool {
        self.0.contains(c)
    }
}

/// The reads' handle: every gated read of every publisher
/// ([`Reads::read`]), the consent of an access ([`Reads::authorize`],
/// [`Reads::subscribe_access`]) and `RequestAccess`. It holds what
/// answering needs: the state, the gate, the clock, the timeline's read
/// side (set once the daemon opened the store) and the prompts, which an
/// undecided read asks.
#[derive(Debug, Clone)]
pub(crate) struct Reads {
    state: Arc<State>,
    gate: Arc<Gate>,
    clock: Arc<dyn Clock>,
    history: Arc<OnceLock<Arc<dyn HistoryStore>>>,
    ask: Ask,
}

impl Reads {
    pub(crate) fn new(state: Arc<State>, gate: Arc<Gate>, clock: Arc<dyn Clock>, ask: Ask) -> Self {
        Reads {
            state,
            gate,
            clock,
            history: Arc::new(OnceLock::new()),
            ask,
        }
    }

    /// The timeline's store, once the daemon has opened it.
    pub(crate) fn set_history(&self, h: Arc<dyn HistoryStore>) {
        let _ = self.history.set(h);
    }

    pub(crate) fn history(&self) -> Result<&Arc<dyn HistoryStore>> {
        self.history
            .get()
            .ok_or_else(|| Error::Unavailable("the timeline is not available".into()))
    }

    /// Time per app in `[since, until)`, every app: what a reader's
    /// summary and the owner's are filtered from. A period ending just
    /// before now is read to now ([`super::history::summary_until`]).
    pub(crate) async fn totals(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<super::history::AppTotals>> {
        let history = self.history()?;
        let now = self.clock.now();
        let until = super::history::summary_until(until, now);
        history.summary(since, until, now).await
    }

    /// Answer question `q` of `who`: decide what it needs, audit, prompt
    /// as `mode` says, and build the view of only what `who` may see.
    pub(crate) async fn read<Q: Read>(&self, who: &Subject, q: Q, mode: Mode) -> Result<Q::View> {
        let now = self.clock.now();
        let needs = q.needs(self, now)?;
        let looks = matches!(needs, Needs::Looks);
        let allowed = self.consent(who, needs, mode).await?;
        q.view(Seen {
            reads: self,
            who,
            now,
            allowed,
            looks,
        })
        .await
    }

    /// The one consent path of a read: what `needs` lets `who` see in
    /// `mode`, or why not.
    async fn consent(&self, who: &Subject, needs: Needs, mode: Mode) -> Result<Allowed> {
        match needs {
            Needs::Nothing | Needs::Looks => Ok(Allowed::default()),
            Needs::Sections {
                sections,
                shown,
                looked,
            } => Ok(self.sections_allowed(who, sections, shown, looked, &mode)),
            Needs::Access { bases, details } => {
                self.access_with_details(who, bases, details, mode).await
            }
            Needs::Either { first, or } => {
                // The access (and a prompt) is about `first` when that is
                // allowed, else about `or`; the other shows only when it
                // is allowed too.
                let (base, other) = if self.gate.allows(&who.app_id, &first) {
                    (first, or)
                } else {
                    (or, first)
                };
                self.access_with_details(who, vec![base], vec![other], mode)
                    .await
            }
        }
    }

    /// Capture sessions since `since`: from the timeline when `timeline`
    /// and there is one, else those the broker saw since it started.
    pub(crate) async fn capture_sessions(
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
    pub(crate) async fn request_access(
        &self,
        who: &Subject,
        categories: &[Category],
        reason: &str,
    ) -> Result<Requested> {
        self.gate.seen(&who.app_id, who.source).await;
        let mut ask = Vec::new();
        for c in categories {
            match self.gate.decide(&who.app_id, c) {
                Decision::Allow => {}
                Decision::Deny(e) => return Ok(Requested::Denied(e.to_string())),
                Decision::Ask => ask.push(c.clone()),
            }
        }
        if ask.is_empty() {
            return Ok(Requested::Granted);
        }
        Ok(Requested::Asking(prompts::start(
            &self.ask,
            prompt_request(who, ask, reason, None),
        )?))
    }

    /// What a `RequestAccess` of `categories` answers now that its
    /// question ended `outcome`: what the gate says of each of them
    /// (one question answers several requests of an app, each for some
    /// of its categories; a question never shown left the answer to the
    /// gate), else how the question ended.
    pub(crate) fn settle(
        &self,
        who: &Subject,
        categories: &[Category],
        outcome: &Outcome,
    ) -> Settled {
        match outcome {
            // Escape: the user's own "no" to this call.
            Outcome::NoAnswer(e @ prompts::PromptError::Declined) => {
                return Settled::Denied(e.to_string());
            }
            Outcome::NoAnswer(e) => return Settled::Ended(e.to_string()),
            Outcome::Answered(_) | Outcome::Decided => {}
        }
        let mut undecided = false;
        for c in categories {
            match self.gate.decide(&who.app_id, c) {
                Decision::Allow => {}
                Decision::Deny(e) => {
                    return Settled::Denied(match outcome {
                        Outcome::Answered(_) => "the user denied it".to_owned(),
                        _ => e.to_string(),
                    });
                }
                Decision::Ask => undecided = true,
            }
        }
        if undecided {
            Settled::Ended("the user has not decided about all of it yet".into())
        } else {
            Settled::Granted
        }
    }

    /// Every source's health with its errors as they are (a policy.toml
    /// error quotes the file and its line), for the user's own tools:
    /// `contextctl` (see [`Sources`]) and the dashboard. Apps read
    /// [`Sources`], whose errors are generic.
    pub(crate) fn owner_sources(&self) -> Vec<SourceView> {
        self.state.read(view::owner_sources)
    }

    /// Whether `who` may see `category` now (looks only).
    pub(crate) fn allows(&self, who: &Subject, category: &Category) -> bool {
        self.gate.allows(&who.app_id, category)
    }

    /// Whether a read of `category` is worth offering to `who` (a resource
    /// in a listing): allowed, or not decided yet, so that reading it can
    /// ask the user.
    pub(crate) fn offered(&self, who: &Subject, category: &Category) -> bool {
        !matches!(self.gate.decide(&who.app_id, category), Decision::Deny(_))
    }

    /// What [`Needs::Sections`] shows `who` (the snapshot): each section
    /// whose category it may see, its detail when it may see that too, and
    /// each of `shown`. An audited mode uses up the one-time grants of what
    /// it shows and audits it (nothing is asked: a snapshot never prompts);
    /// a look shows only lasting grants. Each of `looked` is decided too,
    /// without an access.
    fn sections_allowed(
        &self,
        who: &Subject,
        sections: Vec<(Category, Option<Category>)>,
        shown: Vec<Category>,
        looked: Vec<Category>,
        mode: &Mode,
    ) -> Allowed {
        let mut allowed = Allowed::default();
        for (base, detail) in sections {
            if self.shown(who, [base.clone()], mode).0.is_empty() {
                continue;
            }
            allowed.0.extend(self.shown(who, detail, mode).0);
            allowed.0.insert(base);
        }
        allowed.0.extend(self.shown(who, shown, mode).0);
        for c in looked {
            let seen = match mode {
                Mode::Look => self.gate.allows_lasting(&who.app_id, &c),
                _ => self.gate.allows(&who.app_id, &c),
            };
            if seen {
                allowed.0.insert(c);
            }
        }
        allowed
    }

    /// The kinds apps publish now, sorted, each once.
    pub(crate) fn provided_kinds(&self) -> Vec<String> {
        self.state.read(|s| {
            let mut k: Vec<String> = s.provided.iter().map(|(_, e)| e.kind.to_string()).collect();
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

    /// An access to each of `bases` in turn as `mode` says, then which of
    /// `details` `who` may also see (never asked for: a read shows less
    /// rather than prompting for a detail; see [`Reads::shown`]). The
    /// bases count in.
    async fn access_with_details(
        &self,
        who: &Subject,
        bases: Vec<Category>,
        details: Vec<Category>,
        mode: Mode,
    ) -> Result<Allowed> {
        for base in &bases {
            self.authorize(who, std::slice::from_ref(base), mode.clone())
                .await?;
        }
        let mut allowed = self.shown(who, details, &mode);
        allowed.0.extend(bases);
        Ok(allowed)
    }

    /// The one consent loop: may `who` see every one of `categories`?
    ///
    /// [`Mode::Look`] decides without side effects. [`Mode::Access`] and
    /// [`Mode::Ask`] are accesses: audited with the channel, a one-time
    /// grant used up, the app remembered; an undecided category shows the
    /// user a prompt, which `Access` does not wait for (`Pending`) and
    /// `Ask` does.
    pub(crate) async fn authorize(
        &self,
        who: &Subject,
        categories: &[Category],
        mode: Mode,
    ) -> Result<()> {
        self.subscribe_access(who, categories, mode).await.map(drop)
    }

    /// [`Reads::authorize`] for a subscription: also the categories whose
    /// one-time grant this access used up. The subscription holds them for
    /// its life ("allow once" answers one call or one subscription); pass
    /// them to [`Reads::change_for_held`] and [`Reads::withdrawn`].
    pub(crate) async fn subscribe_access(
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
        let (reason, call) = match &mode {
            Mode::Ask { reason, call, .. } => (reason.as_str(), call.clone()),
            _ => ("", None),
        };
        let prompt = prompt_request(who, ask.clone(), reason, call);
        let Mode::Ask {
            progress, cancel, ..
        } = mode
        else {
            prompts::start(&self.ask, prompt)?;
            return Err(pending());
        };
        // While this waits; dropped on every return, which withdraws the
        // prompt when nobody else waits for it.
        let waiting = prompts::start_waiting(&self.ask, prompt)?;
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
        // A question never shown left the answer to the gate (below).
        if !outcome.allowed() && outcome != Outcome::Decided {
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
fn prompt_request(
    who: &Subject,
    categories: Vec<Category>,
    reason: &str,
    call: Option<HostCall>,
) -> PromptRequest {
    PromptRequest {
        call,
        app: who.app_id.clone(),
        identity_source: who.source,
        display_name: None,
        icon: None,
        categories,
        channel: who.channel,
        reason: reason.chars().take(MAX_REASON).collect(),
    }
}

/// Whether `who` is the `contextctl` installed beside this daemon's own
/// executable (`/usr/bin/contextctl` beside `/usr/bin/contextd`), running
/// outside any sandbox. `executable` is the caller's, as its identity was
/// resolved (through the process's pinned `/proc` directory, never read
/// again by PID).
pub(crate) fn is_contextctl(who: &Subject, executable: Option<&std::path::Path>) -> bool {
    let unsandboxed = matches!(
        who.source,
        IdentitySource::Executable | IdentitySource::Systemd
    );
    let (true, Some(theirs)) = (unsandboxed, executable) else {
        return false;
    };
    let Ok(ours) = std::env::current_exe() else {
        return false;
    };
    ours.parent()
        .is_some_and(|dir| theirs == dir.join("contextctl"))
}

pub(crate) fn state_view<T>(value: Option<T>) -> StateView<T> {
    StateView {
        available: value.is_some(),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Channel;
    use crate::model::AppId;

    #[test]
    fn only_our_contextctl_outside_a_sandbox_reads_the_sources_as_they_are() {
        let exe = std::env::current_exe().expect("current exe");
        let dir = exe.parent().expect("its directory");
        let ours = dir.join("contextctl");
        let who = |id: &str, source| Subject {
            app_id: AppId::new(id).expect("app id"),
            source,
            channel: Channel::DBus,
        };
        let exe_id = format!("exe:{}", ours.display());
        let exe = who(&exe_id, IdentitySource::Executable);
        assert!(is_contextctl(&exe, Some(&ours)));
        // In a terminal's scope: named by the unit, told by its executable.
        let unit = who("systemd:org.example.Term", IdentitySource::Systemd);
        assert!(is_contextctl(&unit, Some(&ours)));
        assert!(!is_contextctl(&unit, None));
        assert!(!is_contextctl(&exe, Some(&dir.join("contextd"))));
        let elsewhere = std::path::Path::new("/nonexistent/contextctl");
        assert!(!is_contextctl(&exe, Some(elsewhere)));
        for sandboxed in [
            IdentitySource::Flatpak,
            IdentitySource::Snap,
            IdentitySource::Interpreter,
        ] {
            assert!(!is_contextctl(
                &who("org.example.App", sandboxed),
                Some(&ours)
            ));
        }
    }
}

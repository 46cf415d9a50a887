//! Asking the user: when the gate says "ask", a prompt is shown through
//! whatever UI the publisher provides (a registered consent agent, else a
//! desktop notification). The answer is applied to the gate; a prompt
//! that fails, times out or is dismissed stores nothing and denies for a
//! cool-down.
//!
//! Asking is bounded and fair, so that no app can flood the user, the
//! broker's memory or another app's turn:
//! - **one question per app**: a request of an app whose question waits
//!   merges its categories into it (the question shows the union, and one
//!   answer covers all of them). While the app's question is on the
//!   screen it cannot change (the user is reading it): what the app asks
//!   meanwhile waits in one follow-up question of the app, merged the
//!   same way. So an app has at most one question waiting and one shown;
//! - **a bound on all of them** ([`MAX_OPEN`]): past it a request is
//!   refused at once with [`Error::Unavailable`], nothing queued;
//! - **fair order**: the next question shown is the waiting one whose app
//!   had the screen longest ago (never, first; then the oldest question),
//!   so that an app's follow-up never goes before another app's first;
//! - **only what exists**: `provided.*` categories only for kinds some app
//!   publishes now ([`Error::NotFound`] otherwise, nothing queued);
//! - **checked again before it is shown**: a question's categories the
//!   user decided meanwhile (a panel, the dashboard), or an app that is
//!   cooling down or quiet ([`super::gate::Ended`]), are dropped from it
//!   right before it is shown; a question left with nothing to ask is
//!   never shown, and its waiters learn the gate's decision.
//!
//! One question is on the screen at a time: the others wait in line (and
//! in `ListPending`), and their time to answer starts when they are shown.
//! The broker keeps the line rather than each UI because it is the one
//! that knows every question (an answer from the dashboard, a withdrawal,
//! a timeout), and because then no agent, however simple, can stack
//! dialogs or let a question time out before the user saw it.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::consent::{Answer, BoxFut, Origin, Verdict};
use super::display::{self, ID_MAX, NAME_MAX, REASON_MAX};
use super::error::{Error, Result};
use super::gate::{Decision, Ended, Gate};
use super::provide::Providers;
use super::state::State;
use super::subject::{Channel, HostCall};
use crate::model::{AppId, Category, IdentitySource};

/// The most questions open at once (on the screen and waiting), over all
/// apps. An app has at most two of them (one shown, one waiting), so 32
/// is room for sixteen apps at their most, and for many more asking once.
pub(crate) const MAX_OPEN: usize = 32;

/// What a prompt shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptRequest {
    pub(crate) app: AppId,
    pub(crate) identity_source: IdentitySource,
    pub(crate) display_name: Option<String>,
    pub(crate) icon: Option<String>,
    pub(crate) categories: Vec<Category>,
    pub(crate) channel: Channel,
    pub(crate) reason: String,
    /// For an MCP host: what it called, for a UI to show apart from the
    /// reason.
    pub(crate) call: Option<HostCall>,
}

impl PromptRequest {
    /// The texts an app chose (its name and icon as its desktop entry
    /// claims them, its reason, its host's name and call) as every prompt
    /// surface shows them ([`display::one_line`]): one line, no control or
    /// bidirectional characters, bounded. The prompter calls it again
    /// once it looked the app's name up.
    pub(crate) fn cleaned(mut self) -> Self {
        let line = |s: &str, max| display::one_line(s, max);
        self.display_name = self
            .display_name
            .map(|n| line(&n, NAME_MAX))
            .filter(|n| !n.is_empty());
        self.icon = self
            .icon
            .map(|i| line(&i, NAME_MAX))
            .filter(|i| !i.is_empty());
        self.reason = line(&self.reason, REASON_MAX);
        if let Some(c) = &mut self.call {
            c.host = c.host.as_deref().map(|h| line(h, NAME_MAX));
            c.method = line(&c.method, NAME_MAX);
            c.name = line(&c.name, NAME_MAX);
            c.arguments = c.arguments.as_deref().map(|a| line(a, REASON_MAX));
        }
        self
    }

    /// The app's id as a prompt shows it (beside any name it claims): an
    /// executable's path may hold any character but a control one.
    pub(crate) fn shown_id(&self) -> String {
        display::one_line(self.app.as_str(), ID_MAX)
    }

    /// The app's name as a prompt shows it: the one its desktop entry
    /// gives, when one may speak for it (`desktop_entry::display_of`),
    /// else what identifies it: an executable by its path, anything else
    /// by its id (which every prompt shows beside the name anyway).
    pub(crate) fn shown_name(&self) -> String {
        let id = self.shown_id();
        self.display_name
            .clone()
            .unwrap_or_else(|| id.strip_prefix("exe:").unwrap_or(&id).to_owned())
    }

    /// What is asked, each category in words (lower case).
    pub(crate) fn asked_in_words(&self) -> Vec<String> {
        self.categories
            .iter()
            .map(|c| c.description().to_lowercase())
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum PromptError {
    #[error("no way to ask the user: {0}")]
    NoUi(String),
    #[error("the user did not answer in time")]
    Timeout,
    #[error("the prompt was closed without an answer")]
    Dismissed,
    /// The user closed the question without choosing (Escape in the
    /// consent dialog): this call is denied, nothing is stored, and the
    /// app is not asked again for the cool-down.
    #[error("the user closed the question without choosing")]
    Declined,
    #[error("the prompt failed: {0}")]
    Failed(String),
    /// Everyone waiting for the answer gave up (an MCP host cancelled its
    /// request or went away) before the user answered: the prompt is taken
    /// off the screen. Not the user's doing, so no cool-down either.
    #[error("the app stopped waiting for the answer")]
    Withdrawn,
}

/// Shows prompts. Implemented by the D-Bus publisher (agent or
/// notification). When `withdraw` is cancelled before the user answered,
/// the prompter takes the question off the screen and answers
/// [`PromptError::Withdrawn`].
pub(crate) trait Prompter: Send + Sync + fmt::Debug {
    fn ask(
        &self,
        req: PromptRequest,
        timeout: Duration,
        withdraw: CancellationToken,
    ) -> BoxFut<'static, Result<Answer, PromptError>>;
}

/// How a prompt ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Answered(Answer),
    NoAnswer(PromptError),
    /// Never shown: by its turn, what it asked was decided (the user, in a
    /// panel or the dashboard) or its app may not be asked now (a
    /// cool-down, a quiet period). The gate has the answer for each of
    /// its categories; nothing was written.
    Decided,
}

impl Outcome {
    pub(crate) fn allowed(&self) -> bool {
        matches!(
            self,
            Outcome::Answered(Answer::Once | Answer::Always | Answer::For(_))
        )
    }
}

/// A question: on the screen or waiting for its turn, and who waits for
/// its answer.
#[derive(Debug, Clone)]
struct Question {
    /// What [`Prompts::answer`] takes (`Consent1.AnswerPending`, the
    /// dashboard), and the order questions were made in.
    id: u64,
    app: AppId,
    /// What is asked: its categories grow while it waits (requests of
    /// its app merged into it) and are trimmed to what is still
    /// undecided when its turn comes.
    req: Arc<Mutex<PromptRequest>>,
    /// Since when it is asked (for `Consent1.ListPending`).
    since: chrono::DateTime<chrono::Utc>,
    rx: watch::Receiver<Option<Outcome>>,
    /// Readers waiting for the answer ([`start_waiting`]).
    waiting: Arc<AtomicUsize>,
    /// Someone asked who does not wait (a D-Bus read answered `Pending`,
    /// `RequestAccess`): the question stays until the user answers.
    keep: Arc<AtomicBool>,
    withdraw: CancellationToken,
    /// An answer given elsewhere than the prompter's UI; taken once.
    answer: Arc<Mutex<Option<oneshot::Sender<Answer>>>>,
    /// Its turn on the screen, given once by [`Line::next`].
    turn: Arc<Mutex<Option<oneshot::Sender<()>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Question {
    fn categories(&self) -> Vec<Category> {
        lock(&self.req).categories.clone()
    }
}

/// The open questions and whose turn it is.
#[derive(Debug, Default)]
struct Line {
    /// Every open question, oldest first: at most [`MAX_OPEN`].
    open: Vec<Question>,
    /// The question on the screen (or about to be: its turn was given).
    showing: Option<u64>,
    /// When each app with an open question last had the screen (a count
    /// of turns): the fair order.
    served: HashMap<AppId, u64>,
    turns: u64,
}

impl Line {
    /// `app`'s question that waits for its turn, if any.
    fn waiting_of(&self, app: &AppId) -> Option<&Question> {
        self.open
            .iter()
            .find(|q| &q.app == app && self.showing != Some(q.id))
    }

    /// Give the screen, when free, to the waiting question whose app had
    /// it longest ago (never: first), the oldest first among equals.
    fn next(&mut self) {
        while self.showing.is_none() {
            let pick = self
                .open
                .iter()
                .filter(|q| lock(&q.turn).is_some())
                .min_by_key(|q| (self.served.get(&q.app).copied(), q.id))
                .cloned();
            let Some(q) = pick else { return };
            let Some(tx) = lock(&q.turn).take() else {
                continue;
            };
            // Its task ended meanwhile (withdrawn, answered elsewhere):
            // the next one.
            if tx.send(()).is_ok() {
                self.turns += 1;
                self.served.insert(q.app.clone(), self.turns);
                self.showing = Some(q.id);
            }
        }
    }

    /// Question `id` ended: off the line, and the screen to the next.
    fn end(&mut self, id: u64) {
        self.open.retain(|q| q.id != id);
        if self.showing == Some(id) {
            self.showing = None;
        }
        let open = &self.open;
        self.served
            .retain(|app, _| open.iter().any(|q| &q.app == app));
        self.next();
    }
}

#[derive(Debug)]
pub(crate) struct Prompts {
    prompter: RwLock<Option<Arc<dyn Prompter>>>,
    line: Mutex<Line>,
    timeout: Duration,
    next_id: std::sync::atomic::AtomicU64,
    /// Open surfaces that answer prompts besides the prompter's UI (the
    /// dashboard while a page of it is open).
    surfaces: Arc<AtomicUsize>,
    /// Who may register as consent agent.
    pub(crate) agent_trust: RwLock<super::agents::AgentTrust>,
}

/// The prompts' handle: asks the user (for a read, a `RequestAccess`) and
/// gives the user's own surfaces the questions that wait. It holds what
/// asking touches: the line of questions, the gate an answer is stored
/// in, the providers (a `provided.*` kind is asked for only while
/// published), the state (where the consent surface's health shows), the
/// clock, and the level of the shutdown tree a question's task runs on
/// (the publishers', since questions are asked for them, so that a stop
/// ends and joins a question still showing).
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    prompts: Arc<Prompts>,
    gate: Arc<Gate>,
    providers: Arc<Providers>,
    state: Arc<State>,
    clock: Arc<dyn Clock>,
    tasks: crate::shutdown::Level,
}

impl Ask {
    pub(crate) fn new(
        prompts: Prompts,
        gate: Arc<Gate>,
        providers: Arc<Providers>,
        state: Arc<State>,
        clock: Arc<dyn Clock>,
        tasks: crate::shutdown::Level,
    ) -> Self {
        Ask {
            prompts: Arc::new(prompts),
            gate,
            providers,
            state,
            clock,
            tasks,
        }
    }

    /// The prompts waiting for the user, oldest first.
    pub(crate) fn pending_prompts(&self) -> Vec<PendingView> {
        self.prompts.pending()
    }

    /// The waiting prompt `id`, if it still waits.
    pub(crate) fn pending_one(&self, id: u64) -> Option<PendingView> {
        self.prompts.pending_one(id)
    }

    /// The user answered prompt `id`: false when it no longer waits.
    pub(crate) fn answer_prompt(&self, id: u64, answer: Answer) -> bool {
        self.prompts.answer(id, answer)
    }

    /// Who asks the user (the D-Bus consent agents).
    pub(crate) fn set_prompter(&self, p: Arc<dyn Prompter>) {
        self.prompts.set_prompter(p);
    }

    /// While the returned surface lives (an open dashboard page), prompts
    /// with no other UI wait for it.
    pub(crate) fn prompt_surface(&self) -> Surface {
        self.prompts.surface()
    }

    /// Who may register as the consent agent (the daemon, from config).
    pub(crate) fn set_agent_trust(&self, trust: super::agents::AgentTrust) {
        *self
            .prompts
            .agent_trust
            .write()
            .unwrap_or_else(|e| e.into_inner()) = trust;
    }

    /// Whether `who` may ask the user (register as the consent agent).
    pub(crate) fn trust_agent(
        &self,
        who: &super::subject::Subject,
        executable: Option<&std::path::Path>,
        owns_shell_name: bool,
    ) -> Result<super::agents::TrustedAgent> {
        self.prompts
            .agent_trust
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .decide(who, executable, owns_shell_name)
    }

    /// Who asks the user now (`None`: a desktop notification does), for
    /// `ListSources`' consent surface entry.
    pub(crate) fn prompts_asked_by(&self, how: super::agents::AskedBy<'_>) {
        use super::agents::AskedBy;
        let (available, error) = match how {
            AskedBy::Agent(a) => {
                tracing::info!(agent = %a.describe(), "prompts are asked by the consent agent");
                (true, None)
            }
            AskedBy::Portal(which) => {
                tracing::info!(
                    portal = which,
                    "prompts are asked in the desktop portal's dialog"
                );
                (
                    true,
                    Some(format!(
                        "asked in {which}: no trusted consent agent registered"
                    )),
                )
            }
            AskedBy::Notification(why) => (
                false,
                Some(format!(
                    "notification: no trusted consent agent registered; no portal dialog: {why}"
                )),
            ),
        };
        self.state.apply(super::event::SourceEvent::SourceStatus {
            source: super::agents::SURFACE_SOURCE.into(),
            available,
            error,
        });
    }

    /// How questions are asked now, as `prompts_asked_by` last said:
    /// whether a dialog asks (an agent's or the portal's), and what the
    /// `consent-agent` entry of `ListSources` says (the portal's dialog,
    /// or why a notification asks). For the dashboard.
    pub(crate) fn asked_through(&self) -> Option<super::view::SourceView> {
        self.state.read(|s| {
            s.sources
                .get(super::agents::SURFACE_SOURCE)
                .map(super::view::SourceView::new)
        })
    }

    /// Withdraw `app`'s open questions (its token was revoked) and wait,
    /// a while, until they are off the screen.
    pub(crate) async fn withdraw_questions(&self, app: &AppId, within: Duration) {
        let gone = self.prompts.withdraw_of(app);
        let all = futures_util::future::join_all(gone.into_iter().map(wait));
        if tokio::time::timeout(within, all).await.is_err() {
            tracing::warn!(app = %app, "a revoked token's question did not leave the screen in time");
        }
    }
}

/// A surface that answers prompts is open while this lives.
#[derive(Debug)]
pub(crate) struct Surface(Arc<AtomicUsize>);

impl Drop for Surface {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Prompts {
    pub(crate) fn new(timeout: Duration) -> Self {
        Prompts {
            prompter: RwLock::new(None),
            line: Mutex::new(Line::default()),
            timeout,
            next_id: std::sync::atomic::AtomicU64::new(1),
            surfaces: Arc::new(AtomicUsize::new(0)),
            agent_trust: RwLock::new(super::agents::AgentTrust::default()),
        }
    }

    pub(crate) fn set_prompter(&self, p: Arc<dyn Prompter>) {
        *self.prompter.write().unwrap_or_else(|e| e.into_inner()) = Some(p);
    }

    /// A surface that answers prompts ([`Prompts::answer`]) is open: while
    /// one is, a prompt that has no other UI (no agent, no notification
    /// daemon) waits for it instead of failing.
    pub(crate) fn surface(&self) -> Surface {
        self.surfaces.fetch_add(1, Ordering::SeqCst);
        Surface(self.surfaces.clone())
    }

    /// Answer the waiting prompt `id` from elsewhere than its UI (a
    /// settings panel, the dashboard): the prompter takes its question
    /// off the screen and the answer is applied as the user's. False when
    /// it is no longer waiting.
    pub(crate) fn answer(&self, id: u64, answer: Answer) -> bool {
        let tx = lock(&self.line)
            .open
            .iter()
            .find(|q| q.id == id)
            .and_then(|q| lock(&q.answer).take());
        tx.is_some_and(|tx| tx.send(answer).is_ok())
    }

    /// The prompts waiting for the user, oldest first.
    pub(crate) fn pending(&self) -> Vec<PendingView> {
        lock(&self.line).open.iter().map(Question::view).collect()
    }

    /// Withdraw every open question of `app`, whoever waits for it (its
    /// token was revoked: nobody is left to answer for); the receivers of
    /// their outcomes, which come once each is off the screen.
    pub(crate) fn withdraw_of(&self, app: &AppId) -> Vec<watch::Receiver<Option<Outcome>>> {
        lock(&self.line)
            .open
            .iter()
            .filter(|q| &q.app == app)
            .map(|q| {
                q.withdraw.cancel();
                q.rx.clone()
            })
            .collect()
    }

    /// The waiting prompt `id`, if it still waits.
    pub(crate) fn pending_one(&self, id: u64) -> Option<PendingView> {
        lock(&self.line)
            .open
            .iter()
            .find(|q| q.id == id)
            .map(Question::view)
    }
}

impl Question {
    /// As `Consent1.ListPending` and the dashboard show it.
    fn view(&self) -> PendingView {
        let r = lock(&self.req);
        PendingView {
            id: self.id,
            app_id: r.app.to_string(),
            app_name: r.display_name.clone(),
            icon: r.icon.clone(),
            categories: super::view::Names(r.categories.iter().map(ToString::to_string).collect()),
            channel: r.channel.as_str().to_owned(),
            reason: r.reason.clone(),
            since: super::view::time(&self.since),
        }
    }
}

/// A prompt waiting for the user, for `Consent1.ListPending`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct PendingView {
    /// What [`Prompts::answer`] takes.
    pub(crate) id: u64,
    pub(crate) app_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) app_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) icon: Option<String>,
    pub(crate) categories: super::view::Names,
    /// `dbus` or `mcp`.
    pub(crate) channel: String,
    /// What the app called and why (the MCP host, tool and arguments),
    /// as every prompt surface shows it ([`PromptRequest::cleaned`]).
    pub(crate) reason: String,
    pub(crate) since: String,
}

/// A question asked for a caller that does not wait ([`start`]).
#[derive(Debug)]
pub(crate) struct Asking {
    /// The question's id: requests merged into one question share it
    /// (one `Request1` object serves them).
    pub(crate) id: u64,
    pub(crate) rx: watch::Receiver<Option<Outcome>>,
}

/// Ask (or join the app's open question) for `req`, and return a
/// receiver of its outcome. The question stays until the user answers
/// (or it times out): the caller does not wait for it. Refused at once,
/// nothing queued, past the bounds ([`MAX_OPEN`], kinds nobody
/// publishes).
pub(crate) fn start(core: &Ask, req: PromptRequest) -> Result<Asking> {
    let q = show(core, req)?;
    q.keep.store(true, Ordering::SeqCst);
    Ok(Asking { id: q.id, rx: q.rx })
}

/// A reader waiting for a prompt's answer. When the last one waiting goes
/// away (drops this) before the answer, and nobody asked who does not
/// wait, the prompt is withdrawn.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) rx: watch::Receiver<Option<Outcome>>,
    question: Question,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let last = self.question.waiting.fetch_sub(1, Ordering::SeqCst) == 1;
        let answered = self.question.rx.borrow().is_some();
        if last && !answered && !self.question.keep.load(Ordering::SeqCst) {
            self.question.withdraw.cancel();
        }
    }
}

/// [`start`] for a reader that waits for the answer (MCP).
pub(crate) fn start_waiting(core: &Ask, req: PromptRequest) -> Result<Waiting> {
    let question = show(core, req)?;
    question.waiting.fetch_add(1, Ordering::SeqCst);
    Ok(Waiting {
        rx: question.rx.clone(),
        question,
    })
}

/// The categories of `req` that may be asked for at all: a `provided.*`
/// one only while some app publishes that kind.
fn askable(core: &Ask, categories: &[Category]) -> Result<()> {
    for c in categories {
        if let Category::Provided(kind) = c
            && !core.providers.publishes(kind)
        {
            return Err(Error::NotFound(format!(
                "no app publishes '{c}' now: provided context can be asked for only while an app publishes it"
            )));
        }
    }
    Ok(())
}

fn show(core: &Ask, req: PromptRequest) -> Result<Question> {
    let mut req = req.cleaned();
    req.categories.sort();
    req.categories.dedup();
    askable(core, &req.categories)?;
    let mut line = lock(&core.prompts.line);
    // The app's question that waits: it asks for this too.
    if let Some(q) = line.waiting_of(&req.app) {
        let grew = {
            let mut r = lock(&q.req);
            let before = r.categories.len();
            r.categories.extend(req.categories.iter().cloned());
            r.categories.sort();
            r.categories.dedup();
            if r.reason.is_empty() {
                r.reason = req.reason.clone();
            }
            if r.call.is_none() {
                r.call = req.call.clone();
            }
            r.categories.len() != before
        };
        let q = q.clone();
        drop(line);
        if grew {
            core.gate.notices.bump(super::notice::Part::Pending);
        }
        return Ok(q);
    }
    // The app's question on the screen already asks all of it.
    if let Some(q) = line.open.iter().find(|q| {
        line.showing == Some(q.id)
            && q.app == req.app
            && req
                .categories
                .iter()
                .all(|c| lock(&q.req).categories.contains(c))
    }) {
        return Ok(q.clone());
    }
    if line.open.len() >= MAX_OPEN {
        drop(line);
        tracing::info!(app = %req.app, "a question refused: {MAX_OPEN} are open already");
        return Err(Error::Unavailable(format!(
            "the user has {MAX_OPEN} questions to answer already; ask again later"
        )));
    }
    let (tx, rx) = watch::channel(None);
    let (answer_tx, answer_rx) = oneshot::channel();
    let (turn_tx, turn_rx) = oneshot::channel();
    let q = Question {
        id: core.prompts.next_id.fetch_add(1, Ordering::Relaxed),
        app: req.app.clone(),
        req: Arc::new(Mutex::new(req)),
        since: core.clock.now(),
        rx,
        waiting: Arc::new(AtomicUsize::new(0)),
        keep: Arc::new(AtomicBool::new(false)),
        withdraw: CancellationToken::new(),
        answer: Arc::new(Mutex::new(Some(answer_tx))),
        turn: Arc::new(Mutex::new(Some(turn_tx))),
    };
    line.open.push(q.clone());
    drop(line);
    core.gate.notices.bump(super::notice::Part::Pending);
    let task_core = core.clone();
    let task_q = q.clone();
    core.tasks.spawn(async move {
        let core = task_core;
        let q = task_q;
        let (shown, outcome) = ask(&core, &q, turn_rx, answer_rx).await;
        if let Some(req) = &shown {
            apply(&core, req, &outcome).await;
        }
        tracing::info!(app = %q.app, categories = ?q.categories().iter().map(ToString::to_string).collect::<Vec<_>>(), ?outcome, "prompt ended");
        lock(&core.prompts.line).end(q.id);
        core.gate.notices.bump(super::notice::Part::Pending);
        let _ = tx.send(Some(outcome));
    });
    // Its turn, when the screen is free (after it is in the line and its
    // task runs: a turn given before is kept in the channel).
    lock(&core.prompts.line).next();
    Ok(q)
}

/// Wait for `q`'s turn, check it against the gate again, and ask the
/// user: what was shown (`None`: nothing was, so nothing is applied) and
/// how it ended.
async fn ask(
    core: &Ask,
    q: &Question,
    turn: oneshot::Receiver<()>,
    mut answer_rx: oneshot::Receiver<Answer>,
) -> (Option<PromptRequest>, Outcome) {
    let prompter = || {
        core.prompts
            .prompter
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    };
    let timeout = core.prompts.timeout;
    let stop = core.tasks.token();
    let withdraw = q.withdraw.clone();
    let surfaces = core.prompts.surfaces.clone();
    let open = move || surfaces.load(Ordering::SeqCst) > 0;
    let stopping = || PromptError::Failed("the broker is stopping".into());
    let dropped = || PromptError::Failed("the prompt was dropped".into());
    // Wait for the screen; an answer from elsewhere (the user saw the
    // question in a panel), a withdrawal or the stop end the wait.
    tokio::select! {
        t = turn => if t.is_err() {
            return (None, Outcome::NoAnswer(dropped()));
        },
        _ = stop.cancelled() => return (None, Outcome::NoAnswer(stopping())),
        _ = withdraw.cancelled() => return (None, Outcome::NoAnswer(PromptError::Withdrawn)),
        a = &mut answer_rx => {
            let req = lock(&q.req).clone();
            return match a {
                Ok(a) => (Some(req), Outcome::Answered(a)),
                Err(_) => (None, Outcome::NoAnswer(dropped())),
            };
        }
    }
    // Checked again right before it is shown: only what is still
    // undecided, and nothing when the app may not be asked now.
    let req = {
        let mut r = lock(&q.req);
        let app = r.app.clone();
        r.categories
            .retain(|c| core.gate.decide(&app, c) == Decision::Ask);
        r.clone()
    };
    if req.categories.is_empty() {
        return (None, Outcome::Decided);
    }
    core.gate.notices.bump(super::notice::Part::Pending);
    let result = match prompter() {
        None => Err(PromptError::NoUi("no prompt UI is available".into())),
        Some(p) => {
            let ask = tokio::time::timeout(
                timeout + Duration::from_secs(1),
                p.ask(req.clone(), timeout, withdraw.clone()),
            );
            tokio::pin!(ask);
            tokio::select! {
                // Stopping ends the prompt without an answer (nothing is
                // stored), and every waiter hears so at once.
                _ = stop.cancelled() => Err(stopping()),
                r = &mut ask => r.unwrap_or(Err(PromptError::Timeout)),
                Ok(a) = &mut answer_rx => {
                    // Answered elsewhere: let the prompter take its
                    // question off the screen (briefly; its answer, if
                    // any, is not the one that counts).
                    withdraw.cancel();
                    let _ = tokio::time::timeout(Duration::from_secs(2), ask).await;
                    Ok(a)
                }
            }
        }
    };
    // No UI of the prompter's, but the dashboard is open: it asks.
    let result = match result {
        Err(PromptError::NoUi(_)) if open() => tokio::select! {
            _ = stop.cancelled() => Err(stopping()),
            _ = withdraw.cancelled() => Err(PromptError::Withdrawn),
            r = tokio::time::timeout(timeout, &mut answer_rx) => match r {
                Ok(Ok(a)) => Ok(a),
                Ok(Err(_)) => Err(dropped()),
                Err(_) => Err(PromptError::Timeout),
            },
        },
        r => r,
    };
    let outcome = match result {
        Ok(a) => Outcome::Answered(a),
        Err(e) => Outcome::NoAnswer(e),
    };
    (Some(req), outcome)
}

/// Wait for a prompt's outcome.
pub(crate) async fn wait(mut rx: watch::Receiver<Option<Outcome>>) -> Outcome {
    loop {
        if let Some(o) = rx.borrow_and_update().clone() {
            return o;
        }
        if rx.changed().await.is_err() {
            return rx
                .borrow()
                .clone()
                .unwrap_or(Outcome::NoAnswer(PromptError::Failed(
                    "the prompt task ended".into(),
                )));
        }
    }
}

/// Only user input writes a decision: an answer is stored (or, for "once",
/// kept in memory for one access); no answer stores nothing. How the
/// question ended counts towards the app's cool-down and quiet period
/// (in memory, [`super::gate::Gate::question_ended`]).
async fn apply(core: &Ask, req: &PromptRequest, outcome: &Outcome) {
    let now = core.clock.now();
    let ended = match outcome {
        o if o.allowed() => Some(Ended::Allowed),
        Outcome::Answered(_) => Some(Ended::Denied),
        // The user closed it without choosing.
        Outcome::NoAnswer(PromptError::Declined | PromptError::Dismissed) => Some(Ended::Dismissed),
        Outcome::NoAnswer(PromptError::Timeout) => Some(Ended::Unanswered),
        // Withdrawn by the app, not ignored by the user; never shown; or
        // no way to ask (below): not the user's doing.
        Outcome::NoAnswer(_) | Outcome::Decided => None,
    };
    for cat in &req.categories {
        let r = match outcome {
            Outcome::Answered(Answer::Once) => {
                core.gate.grant_once(&req.app, cat);
                Ok(())
            }
            Outcome::Answered(Answer::Always) => {
                core.gate
                    .record(&req.app, cat, Verdict::Allow, None, Origin::Prompt)
                    .await
            }
            Outcome::Answered(Answer::For(d)) => {
                core.gate
                    .record(
                        &req.app,
                        cat,
                        Verdict::Allow,
                        Some(now + *d),
                        Origin::Prompt,
                    )
                    .await
            }
            Outcome::Answered(Answer::Deny) => {
                core.gate
                    .record(&req.app, cat, Verdict::Deny, None, Origin::Prompt)
                    .await
            }
            // No UI, or the prompter failed: this category is refused
            // for the cool-down, so that a broken UI is not asked in a
            // loop (the app as a whole may still ask about others).
            Outcome::NoAnswer(PromptError::NoUi(_) | PromptError::Failed(_)) => {
                core.gate.cool_down(&req.app, cat);
                Ok(())
            }
            Outcome::NoAnswer(_) | Outcome::Decided => Ok(()),
        };
        if let Err(e) = r {
            tracing::error!(app = %req.app, category = %cat, error = %e, "cannot store the user's answer");
        }
    }
    if let Some(how) = ended {
        core.gate.question_ended(&req.app, how);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: u64, app: &str) -> (Question, oneshot::Receiver<()>) {
        let app = AppId::new(app).expect("id");
        let (_tx, rx) = watch::channel(None);
        let (turn_tx, turn_rx) = oneshot::channel();
        let q = Question {
            id,
            app: app.clone(),
            req: Arc::new(Mutex::new(PromptRequest {
                app,
                identity_source: IdentitySource::Flatpak,
                display_name: None,
                icon: None,
                categories: vec![Category::Power],
                channel: Channel::DBus,
                reason: String::new(),
                call: None,
            })),
            since: chrono::Utc::now(),
            rx,
            waiting: Arc::new(AtomicUsize::new(0)),
            keep: Arc::new(AtomicBool::new(false)),
            withdraw: CancellationToken::new(),
            answer: Arc::new(Mutex::new(None)),
            turn: Arc::new(Mutex::new(Some(turn_tx))),
        };
        (q, turn_rx)
    }

    /// The attack: an app whose question is on the screen asks again and
    /// again; another app asks once. The other app's question is shown
    /// next, before the first app's follow-up, though that one is older.
    #[test]
    fn another_apps_first_question_goes_before_a_follow_up() {
        let mut line = Line::default();
        let (a1, mut a1_turn) = question(1, "org.example.Flood");
        line.open.push(a1);
        line.next();
        assert_eq!(line.showing, Some(1));
        assert!(a1_turn.try_recv().is_ok());
        let (a2, mut a2_turn) = question(2, "org.example.Flood");
        let (b1, mut b1_turn) = question(3, "org.example.Other");
        line.open.push(a2);
        line.open.push(b1);
        line.next();
        assert_eq!(line.showing, Some(1), "one question on the screen");
        line.end(1);
        assert_eq!(line.showing, Some(3), "the other app's first question");
        assert!(b1_turn.try_recv().is_ok());
        assert!(a2_turn.try_recv().is_err());
        line.end(3);
        assert_eq!(line.showing, Some(2));
        assert!(a2_turn.try_recv().is_ok());
        line.end(2);
        assert!(line.open.is_empty() && line.showing.is_none());
        assert!(line.served.is_empty(), "nothing kept of apps that left");
    }

    /// A question whose task ended before its turn (withdrawn) is
    /// skipped.
    #[test]
    fn a_question_gone_before_its_turn_is_skipped() {
        let mut line = Line::default();
        let (a, a_turn) = question(1, "org.example.A");
        let (b, mut b_turn) = question(2, "org.example.B");
        drop(a_turn);
        line.open.push(a);
        line.open.push(b);
        line.next();
        assert_eq!(line.showing, Some(2));
        assert!(b_turn.try_recv().is_ok());
    }

    #[test]
    fn text_from_apps_is_cleaned_for_every_surface() {
        let (q, _) = question(1, "org.example.A");
        let mut req = lock(&q.req).clone();
        req.display_name = Some("Settings\n\u{202E}evil".into());
        req.reason = format!("</b>\n{}", "x".repeat(1000));
        req.call = Some(HostCall {
            host: Some("Host\u{2066}".into()),
            method: "tools/call".into(),
            name: "t".into(),
            arguments: Some("a\nb".into()),
        });
        let c = req.cleaned();
        assert_eq!(c.display_name.as_deref(), Some("Settings evil"));
        assert!(c.reason.starts_with("</b> x"), "{}", c.reason);
        assert_eq!(c.reason.chars().count(), REASON_MAX);
        let call = c.call.expect("call");
        assert_eq!(call.host.as_deref(), Some("Host"));
        assert_eq!(call.arguments.as_deref(), Some("a b"));
    }
}

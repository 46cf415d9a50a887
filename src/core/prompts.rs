//! Asking the user: when the gate says "ask", a prompt is shown through
//! whatever UI the publisher provides (a registered consent agent, else a
//! desktop notification), once per (app, categories) at a time. The answer
//! is applied to the gate; a prompt that fails, times out or is dismissed
//! stores nothing and denies for a short cool-down.
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

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Core;
use super::consent::{Answer, BoxFut, Channel, Origin, Verdict};
use crate::model::{AppId, Category, IdentitySource};

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

/// What an MCP host called, as a prompt shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct HostCall {
    /// The name and version the host gave (`clientInfo`, a claim).
    pub(crate) host: Option<String>,
    /// `tools/call`, `resources/read`, `prompts/get`, ...
    pub(crate) method: String,
    /// The tool, resource or prompt.
    pub(crate) name: String,
    /// Its arguments as compact JSON (cut to a length a prompt shows),
    /// when it has any.
    pub(crate) arguments: Option<String>,
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
    /// consent dialog): this call is denied, nothing is stored, and, the
    /// user having seen it, the next call asks again (no cool-down).
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
}

impl Outcome {
    pub(crate) fn allowed(&self) -> bool {
        matches!(
            self,
            Outcome::Answered(Answer::Once | Answer::Always | Answer::For(_))
        )
    }
}

type Key = (AppId, Vec<Category>);

/// A prompt on the screen, and who waits for its answer.
#[derive(Debug, Clone)]
struct Showing {
    /// What is asked, and since when (for `Consent1.ListPending`).
    req: PromptRequest,
    since: chrono::DateTime<chrono::Utc>,
    rx: watch::Receiver<Option<Outcome>>,
    /// Readers waiting for the answer ([`start_waiting`]).
    waiting: Arc<AtomicUsize>,
    /// Someone asked who does not wait (a D-Bus read answered `Pending`,
    /// `RequestAccess`): the question stays until the user answers.
    keep: Arc<AtomicBool>,
    withdraw: CancellationToken,
    /// What `Prompts::answer` takes (`Consent1.AnswerPending`, the
    /// dashboard).
    id: u64,
    /// An answer given elsewhere than the prompter's UI; taken once.
    answer: Arc<Mutex<Option<tokio::sync::oneshot::Sender<Answer>>>>,
}

#[derive(Debug)]
pub(crate) struct Prompts {
    prompter: RwLock<Option<Arc<dyn Prompter>>>,
    pending: Mutex<HashMap<Key, Showing>>,
    timeout: Duration,
    next_id: std::sync::atomic::AtomicU64,
    /// Open surfaces that answer prompts besides the prompter's UI (the
    /// dashboard while a page of it is open).
    surfaces: Arc<AtomicUsize>,
    /// Held by the question on the screen: the next one waits for it.
    screen: Arc<tokio::sync::Mutex<()>>,
    /// Who may register as consent agent.
    pub(crate) agent_trust: RwLock<super::agents::AgentTrust>,
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
            pending: Mutex::new(HashMap::new()),
            timeout,
            next_id: std::sync::atomic::AtomicU64::new(1),
            surfaces: Arc::new(AtomicUsize::new(0)),
            screen: Arc::new(tokio::sync::Mutex::new(())),
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
        let tx = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|s| s.id == id)
            .and_then(|s| s.answer.lock().unwrap_or_else(|e| e.into_inner()).take());
        tx.is_some_and(|tx| tx.send(answer).is_ok())
    }

    /// The prompts waiting for the user, oldest first.
    pub(crate) fn pending(&self) -> Vec<PendingView> {
        let mut v: Vec<(chrono::DateTime<chrono::Utc>, PendingView)> = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|s| {
                (
                    s.since,
                    PendingView {
                        id: s.id,
                        app_id: s.req.app.to_string(),
                        app_name: s.req.display_name.clone(),
                        icon: s.req.icon.clone(),
                        categories: super::view::Names(
                            s.req.categories.iter().map(ToString::to_string).collect(),
                        ),
                        channel: s.req.channel.as_str().to_owned(),
                        reason: s.req.reason.clone(),
                        since: super::view::time(&s.since),
                    },
                )
            })
            .collect();
        v.sort_by_key(|(since, _)| *since);
        v.into_iter().map(|(_, p)| p).collect()
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
    /// What the app called and why (the MCP host, tool and arguments).
    pub(crate) reason: String,
    pub(crate) since: String,
}

/// Start a prompt for `req` (or join the one already showing for the same
/// app and categories) and return a receiver of its outcome. The prompt
/// stays until the user answers (or it times out): the caller does not
/// wait for it.
pub(crate) fn start(core: &Arc<Core>, req: PromptRequest) -> watch::Receiver<Option<Outcome>> {
    let showing = show(core, req);
    showing.keep.store(true, Ordering::SeqCst);
    showing.rx
}

/// A reader waiting for a prompt's answer. When the last one waiting goes
/// away (drops this) before the answer, and nobody asked who does not
/// wait, the prompt is withdrawn.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) rx: watch::Receiver<Option<Outcome>>,
    showing: Showing,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let last = self.showing.waiting.fetch_sub(1, Ordering::SeqCst) == 1;
        let answered = self.showing.rx.borrow().is_some();
        if last && !answered && !self.showing.keep.load(Ordering::SeqCst) {
            self.showing.withdraw.cancel();
        }
    }
}

/// [`start`] for a reader that waits for the answer (MCP).
pub(crate) fn start_waiting(core: &Arc<Core>, req: PromptRequest) -> Waiting {
    let showing = show(core, req);
    showing.waiting.fetch_add(1, Ordering::SeqCst);
    Waiting {
        rx: showing.rx.clone(),
        showing,
    }
}

fn show(core: &Arc<Core>, mut req: PromptRequest) -> Showing {
    req.categories.sort();
    req.categories.dedup();
    let key: Key = (req.app.clone(), req.categories.clone());
    let mut pending = core
        .prompts
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(s) = pending.get(&key) {
        return s.clone();
    }
    let (tx, rx) = watch::channel(None);
    let (answer_tx, mut answer_rx) = tokio::sync::oneshot::channel();
    let showing = Showing {
        req: req.clone(),
        since: core.clock.now(),
        rx,
        waiting: Arc::new(AtomicUsize::new(0)),
        keep: Arc::new(AtomicBool::new(false)),
        withdraw: CancellationToken::new(),
        id: core.prompts.next_id.fetch_add(1, Ordering::Relaxed),
        answer: Arc::new(Mutex::new(Some(answer_tx))),
    };
    pending.insert(key.clone(), showing.clone());
    drop(pending);
    core.gate.notices.bump(super::notice::Part::Pending);
    let withdraw = showing.withdraw.clone();
    let task_core = core.clone();
    core.tasks.spawn(async move {
        let core = task_core;
        let prompter = core
            .prompts
            .prompter
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let timeout = core.prompts.timeout;
        let stop = core.tasks.token();
        let surfaces = core.prompts.surfaces.clone();
        let open = move || surfaces.load(Ordering::SeqCst) > 0;
        // Wait for the question before this one to leave the screen; an
        // answer from elsewhere, a withdrawal or the stop end the wait.
        let screen = core.prompts.screen.clone();
        let turn = tokio::select! {
            t = screen.lock_owned() => Ok(Ok(t)),
            _ = stop.cancelled() => Err(PromptError::Failed("the broker is stopping".into())),
            _ = withdraw.cancelled() => Err(PromptError::Withdrawn),
            a = &mut answer_rx => a.map_err(|_| PromptError::Failed("the prompt was dropped".into())).map(Err),
        };
        let result = match (turn, prompter) {
            (Err(e), _) => Err(e),
            (Ok(Err(a)), _) => Ok(a),
            (Ok(Ok(_)), None) => Err(PromptError::NoUi("no prompt UI is available".into())),
            (Ok(Ok(_turn)), Some(p)) => {
                let ask = tokio::time::timeout(
                    timeout + Duration::from_secs(1),
                    p.ask(req.clone(), timeout, withdraw.clone()),
                );
                tokio::pin!(ask);
                tokio::select! {
                    // Stopping ends the prompt without an answer (nothing is
                    // stored), and every waiter hears so at once.
                    _ = stop.cancelled() => Err(PromptError::Failed("the broker is stopping".into())),
                    r = &mut ask => r.unwrap_or(Err(PromptError::Timeout)),
                    Ok(a) = &mut answer_rx => {
                        // Answered elsewhere: let the prompter take its
                        // question off the screen (briefly; its answer,
                        // if any, is not the one that counts).
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
                _ = stop.cancelled() => Err(PromptError::Failed("the broker is stopping".into())),
                _ = withdraw.cancelled() => Err(PromptError::Withdrawn),
                r = tokio::time::timeout(timeout, &mut answer_rx) => match r {
                    Ok(Ok(a)) => Ok(a),
                    Ok(Err(_)) => Err(PromptError::Failed("the prompt was dropped".into())),
                    Err(_) => Err(PromptError::Timeout),
                },
            },
            r => r,
        };
        let outcome = match result {
            Ok(a) => Outcome::Answered(a),
            Err(e) => Outcome::NoAnswer(e),
        };
        apply(&core, &req, &outcome).await;
        tracing::info!(app = %req.app, categories = ?req.categories.iter().map(ToString::to_string).collect::<Vec<_>>(), ?outcome, "prompt ended");
        core.prompts
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        core.gate.notices.bump(super::notice::Part::Pending);
        let _ = tx.send(Some(outcome));
    });
    showing
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
/// kept in memory for one access); no answer stores nothing.
async fn apply(core: &Core, req: &PromptRequest, outcome: &Outcome) {
    let now = core.clock.now();
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
            // Withdrawn by the app, not ignored by the user: no cool-down.
            // Declined: the user saw it and said "not now" to this call
            // only; the next call asks again.
            Outcome::NoAnswer(PromptError::Withdrawn | PromptError::Declined) => Ok(()),
            Outcome::NoAnswer(_) => {
                core.gate.cool_down(&req.app, cat);
                Ok(())
            }
        };
        if let Err(e) = r {
            tracing::error!(app = %req.app, category = %cat, error = %e, "cannot store the user's answer");
        }
    }
}

//! Who an MCP host is, and the one door every MCP consent decision goes
//! through.
//!
//! [`authorize`] is the only place on the MCP side that asks the gate.
//! Resource reads, tool calls, prompts, subscriptions, the filtering of
//! `updated` notifications and of the resource list all call it, so that
//! the consent issue can make it wait for the user's answer (reporting
//! `notifications/progress` while it waits, stopping on
//! `notifications/cancelled`) and audit every access with its channel, in
//! one place.

use std::collections::BTreeSet;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::core::{self, Core};
use crate::model::{AppId, Category, IdentitySource};

/// The transport a request came over; recorded with every access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// `contextctl mcp` over the daemon's Unix socket.
    Stdio,
    /// Streamable HTTP or the legacy HTTP+SSE pair.
    Http,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Stdio => "mcp-stdio",
            Channel::Http => "mcp-http",
        }
    }
}

/// The consent subject of an MCP session: the host's app id (stdio: the
/// bridge's parent process, from the kernel) or `token:NAME` (HTTP).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subject {
    pub app_id: AppId,
    pub source: IdentitySource,
    pub channel: Channel,
}

/// What a consent check may do when the answer is not known yet.
#[derive(Debug, Clone)]
pub enum Wait {
    /// Never ask the user: used to filter (notifications, lists, optional
    /// details such as window titles). An undecided category is refused
    /// with `Pending`.
    Never,
    /// The host asked for this data: the user may be asked, and the host
    /// told about the wait.
    Ask(Waiter),
}

/// How to keep a host informed while the user decides, and how the host
/// stops waiting.
#[derive(Debug, Clone)]
pub struct Waiter {
    /// `notifications/progress` go here when the request had a token.
    pub progress: Option<(Peer<RoleServer>, ProgressToken)>,
    /// Cancelled when the host sends `notifications/cancelled` for the
    /// request (rmcp cancels the request's token) or the session ends.
    pub cancel: CancellationToken,
}

impl Waiter {
    /// Report that the broker is waiting for the user (used by the consent
    /// prompt once it exists; a failure to send only means the host left).
    pub async fn report(&self, progress: f64, message: &str) {
        if let Some((peer, token)) = &self.progress {
            let p = ProgressNotificationParam::new(token.clone(), progress)
                .with_message(message.to_owned());
            if let Err(e) = peer.notify_progress(p).await {
                tracing::debug!(error = %e, "cannot send progress");
            }
        }
    }
}

/// Decide whether `subject` may see every one of `categories`.
///
/// [`Wait::Never`] only looks (no prompt, no audit: it filters what is
/// shown). [`Wait::Ask`] is an access: it is audited with the channel, and
/// an undecided category shows the user a prompt while the host is kept
/// informed with `notifications/progress`; `notifications/cancelled` (the
/// request's token) stops the wait. A prompt that is not answered with an
/// allow refuses the request and stores nothing.
pub async fn authorize(
    core: &Core,
    subject: &Subject,
    categories: &[Category],
    wait: Wait,
) -> Result<(), core::Error> {
    let channel = match subject.channel {
        Channel::Stdio => core::Channel::McpStdio,
        Channel::Http => core::Channel::McpHttp,
    };
    let waiter = match wait {
        Wait::Never => {
            for c in categories {
                match core.gate.decide(&subject.app_id, c) {
                    core::Decision::Allow => {}
                    core::Decision::Deny(e) => return Err(e),
                    core::Decision::Ask => {
                        return Err(core::Error::Pending {
                            app: subject.app_id.clone(),
                            category: c.clone(),
                        });
                    }
                }
            }
            return Ok(());
        }
        Wait::Ask(w) => w,
    };
    if waiter.cancel.is_cancelled() {
        return Err(core::Error::Failed("the request was cancelled".into()));
    }
    core.gate
        .seen(&subject.app_id, subject.source, None, None)
        .await;
    let mut ask = Vec::new();
    for c in categories {
        match core.gate.access(&subject.app_id, c, channel) {
            core::Decision::Allow => {}
            core::Decision::Deny(e) => {
                tracing::debug!(app = %subject.app_id, category = %c, channel = channel.as_str(), error = %e, "refused");
                return Err(e);
            }
            core::Decision::Ask => ask.push(c.clone()),
        }
    }
    if ask.is_empty() {
        return Ok(());
    }
    let pending = || core::Error::Pending {
        app: subject.app_id.clone(),
        category: ask[0].clone(),
    };
    let Some(owned) = core.arc() else {
        return Err(pending());
    };
    let names: Vec<String> = ask.iter().map(ToString::to_string).collect();
    let rx = core::prompts::start(
        &owned,
        core::prompts::PromptRequest {
            app: subject.app_id.clone(),
            identity_source: subject.source,
            display_name: None,
            icon: None,
            categories: ask.clone(),
            channel,
            reason: String::new(),
        },
    );
    let message = format!("waiting for the user to allow {}", names.join(", "));
    let mut step = 0.0;
    waiter.report(step, &message).await;
    let outcome = loop {
        tokio::select! {
            _ = waiter.cancel.cancelled() => {
                return Err(core::Error::Failed("the request was cancelled while the user was asked".into()));
            }
            o = core::prompts::wait(rx.clone()) => break o,
            _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {
                step += 1.0;
                waiter.report(step, &message).await;
            }
        }
    };
    if !outcome.allowed() {
        let why = match &outcome {
            core::prompts::Outcome::NoAnswer(e) => e.to_string(),
            _ => "the user denied it".to_owned(),
        };
        return Err(core::Error::NotAllowed {
            app: subject.app_id.clone(),
            category: ask[0].clone(),
            hint: why,
        });
    }
    // The answer is in the gate now (a one-time grant is used up here).
    for c in &ask {
        match core.gate.access(&subject.app_id, c, channel) {
            core::Decision::Allow => {}
            core::Decision::Deny(e) => return Err(e),
            core::Decision::Ask => return Err(pending()),
        }
    }
    Ok(())
}

/// Of `categories`, those `subject` may see, without asking anyone: the
/// input of `core::view`'s `can` predicate (which must not block).
pub async fn allowed_of(
    core: &Core,
    subject: &Subject,
    categories: impl IntoIterator<Item = Category>,
) -> Allowed {
    let mut set = BTreeSet::new();
    for c in categories {
        if authorize(core, subject, std::slice::from_ref(&c), Wait::Never)
            .await
            .is_ok()
        {
            set.insert(c);
        }
    }
    Allowed(set)
}

/// An access to `base` (asking when `wait` allows), then which of its
/// `details` the host may also see, without asking. The result counts
/// `base` in, so that it can feed `core::view`'s `can` directly.
pub async fn authorize_with_details(
    core: &Core,
    subject: &Subject,
    base: Category,
    details: impl IntoIterator<Item = Category>,
    wait: Wait,
) -> Result<Allowed, core::Error> {
    authorize(core, subject, std::slice::from_ref(&base), wait).await?;
    let mut allowed = allowed_of(core, subject, details).await;
    allowed.0.insert(base);
    Ok(allowed)
}

/// Whether a category is worth showing to the host (listing a resource):
/// allowed, or not decided yet (so that reading it can ask the user).
pub async fn visible(core: &Core, subject: &Subject, category: &Category) -> bool {
    match authorize(core, subject, std::slice::from_ref(category), Wait::Never).await {
        Ok(()) | Err(core::Error::Pending { .. }) => true,
        Err(_) => false,
    }
}

/// A set of categories a host may see, decided up front so that rendering
/// (which holds the state's lock) never waits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed(BTreeSet<Category>);

impl Allowed {
    pub fn can(&self, c: &Category) -> bool {
        self.0.contains(c)
    }
}

/// Every fixed category and the provided kinds present now: what a
/// snapshot may contain.
pub fn snapshot_categories(core: &Core) -> Vec<Category> {
    let mut v: Vec<Category> = Category::fixed().to_vec();
    core.state.read(|s| {
        for (_, kind) in s.provided.keys() {
            if let Ok(c) = Category::provided(kind)
                && !v.contains(&c)
            {
                v.push(c);
            }
        }
    });
    v
}

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
/// Today this asks the gate (policy.toml). The consent issue makes it
/// prompt for undecided categories when `wait` is [`Wait::Ask`], report
/// progress through the waiter and give up when it is cancelled, and audit
/// the decision with `subject.channel`.
pub async fn authorize(
    core: &Core,
    subject: &Subject,
    categories: &[Category],
    wait: Wait,
) -> Result<(), core::Error> {
    if let Wait::Ask(w) = &wait
        && w.cancel.is_cancelled()
    {
        return Err(core::Error::Failed("the request was cancelled".into()));
    }
    for c in categories {
        let r = core.gate.check(&subject.app_id, c);
        if let Err(e) = &r {
            tracing::debug!(app = %subject.app_id, category = %c, channel = subject.channel.as_str(), error = %e, "refused");
        }
        r?;
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

//! Who an MCP host is, and how a request asks the user.
//!
//! Every consent decision is the core's (`core::read`): the MCP side only
//! says who the host is (a [`Subject`] from the transport: the bridge's
//! parent process on stdio, the token on HTTP) and how a request may wait
//! for the user ([`ask`]: with `notifications/progress` when the request
//! has a progress token, stopped by `notifications/cancelled`).

use std::sync::Arc;

use rmcp::model::ProgressNotificationParam;
use rmcp::service::{RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use crate::core::{Channel, Mode, Subject};

/// The host's `clientInfo` as people read it, "name version", when it
/// gave one in `initialize` (a claim, shown beside the kernel's identity).
pub(crate) fn client(peer: &rmcp::service::Peer<RoleServer>) -> Option<String> {
    peer.peer_info().map(|i| named_client(&i.client_info))
}

fn named_client(i: &rmcp::model::Implementation) -> String {
    format!("{} {}", i.name, i.version)
}

/// The host that made a request: the `clientInfo` in the request's own
/// `_meta` (a 2026-07-28 request without a session names itself there;
/// rmcp gives such a request a default peer that names rmcp), else the one
/// the session began with.
pub(crate) fn client_of(ctx: &RequestContext<RoleServer>) -> Option<String> {
    ctx.meta
        .client_info()
        .map(|i| named_client(&i))
        .or_else(|| client(&ctx.peer))
}

/// The mode of a request the host made itself: it may ask the user and
/// wait, reporting progress, until the host cancels it. `request` is the
/// method and its tool, resource or prompt, for the audit; `what` is what the
/// request reads ("the tool get_active_window {}"); the prompt shows it with
/// the name and version the host gave (its `clientInfo`, a claim: the app the
/// user decides about is the one the kernel names).
pub(crate) fn ask(ctx: &RequestContext<RoleServer>, request: &str, what: &str) -> Mode {
    ask_with(ctx, request, what, None)
}

/// [`ask`] with the arguments of the call (compact JSON), for a consent
/// UI to show apart.
fn ask_with(
    ctx: &RequestContext<RoleServer>,
    request: &str,
    what: &str,
    arguments: Option<String>,
) -> Mode {
    let progress = ctx.meta.get_progress_token().map(|token| {
        let peer = ctx.peer.clone();
        let report: crate::core::subject::Progress = Arc::new(move |step, message| {
            let peer = peer.clone();
            let p = ProgressNotificationParam::new(token.clone(), step).with_message(message);
            Box::pin(async move {
                // A failure only means the host left.
                if let Err(e) = peer.notify_progress(p).await {
                    tracing::debug!(error = %e, "cannot send progress");
                }
            })
        });
        report
    });
    // Over the stdio socket, the wait also ends when the host goes away;
    // over HTTP, when its token is revoked (`http::guard` puts it with the
    // request's parts).
    let gone = ctx.extensions.get::<HostGone>().or_else(|| {
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<HostGone>())
    });
    let cancel = match gone {
        Some(gone) => gone.link(&ctx.ct),
        None => ctx.ct.clone(),
    };
    asking(client_of(ctx), progress, cancel, request, what, arguments)
}

/// [`ask`] from its parts, for a request answered without rmcp's request
/// context (`direct`): the host's name, how to report progress, and what
/// ends the wait.
pub(crate) fn asking(
    client: Option<String>,
    progress: Option<crate::core::subject::Progress>,
    cancel: CancellationToken,
    request: &str,
    what: &str,
    arguments: Option<String>,
) -> Mode {
    let (method, name) = request.split_once(' ').unwrap_or((request, ""));
    let call = crate::core::subject::HostCall {
        host: client.clone(),
        method: method.to_owned(),
        name: name.to_owned(),
        arguments,
    };
    let host = client.unwrap_or_else(|| "An MCP host".to_owned());
    Mode::Ask {
        progress,
        cancel,
        reason: format!("{host} (MCP) asks for {what}"),
        request: request.to_owned(),
        call: Some(call),
    }
}

/// [`ask`] for a call of a named thing with arguments (`tools/call`,
/// `prompts/get`).
pub(crate) fn ask_named(
    ctx: &RequestContext<RoleServer>,
    method: &str,
    noun: &str,
    name: &str,
    args: &Option<serde_json::Map<String, serde_json::Value>>,
) -> Mode {
    let (request, what) = named(method, noun, name, args);
    ask_with(ctx, &request, &what, arguments_text(args))
}

/// The arguments of a call as a prompt shows them: compact JSON cut to a
/// length a prompt can show; `None` without any.
pub(crate) fn arguments_text(
    args: &Option<serde_json::Map<String, serde_json::Value>>,
) -> Option<String> {
    const MAX: usize = 200;
    let a = args.as_ref().filter(|a| !a.is_empty())?;
    let text = serde_json::Value::Object(a.clone()).to_string();
    Some(if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    } else {
        text
    })
}

/// A call of a named thing as the audit records it (`METHOD NAME`) and as
/// the prompt shows it ("the NOUN NAME with ARGUMENTS", compact JSON cut
/// to a length a prompt can show).
pub(crate) fn named(
    method: &str,
    noun: &str,
    name: &str,
    args: &Option<serde_json::Map<String, serde_json::Value>>,
) -> (String, String) {
    let args = arguments_text(args).unwrap_or_else(|| "no arguments".to_owned());
    (
        format!("{method} {name}"),
        format!("the {noun} {name} with {args}"),
    )
}

/// The host closed its input (`contextctl mcp`'s stdin ended: the host
/// quit), or, over HTTP, its token was revoked. Every request of the
/// connection carries this (in its extensions); a request waiting for the
/// user stops waiting when it is cancelled ([`HostGone::link`]): its
/// prompt is withdrawn and nothing is stored. Requests that do not wait for the user still finish and their
/// answers are written while the other end reads.
#[derive(Debug, Clone)]
pub(crate) struct HostGone {
    token: CancellationToken,
    tasks: TaskTracker,
}

impl HostGone {
    /// `token` is cancelled when the host goes away (or with the
    /// connection); the links' tasks go on `tasks`.
    pub(crate) fn new(token: CancellationToken, tasks: TaskTracker) -> HostGone {
        HostGone { token, tasks }
    }

    /// The host is gone.
    pub(crate) fn cancel(&self) {
        self.token.cancel();
    }

    /// A token cancelled when `request` is (rmcp cancels it on
    /// `notifications/cancelled` and once the answer is sent) or the host
    /// goes away, whichever comes first.
    pub(crate) fn link(&self, request: &CancellationToken) -> CancellationToken {
        let linked = request.child_token();
        let gone = self.token.clone();
        let t = linked.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                _ = gone.cancelled() => t.cancel(),
                _ = t.cancelled() => {}
            }
        });
        linked
    }
}

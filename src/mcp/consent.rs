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

pub use crate::core::{Channel, Mode, Subject};

/// The mode of a request the host made itself: it may ask the user and
/// wait, reporting progress, until the host cancels it.
pub fn ask(ctx: &RequestContext<RoleServer>) -> Mode {
    let progress = ctx.meta.get_progress_token().map(|token| {
        let peer = ctx.peer.clone();
        let report: crate::core::read::Progress = Arc::new(move |step, message| {
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
    Mode::Ask {
        progress,
        cancel: ctx.ct.clone(),
    }
}

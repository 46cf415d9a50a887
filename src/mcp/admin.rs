//! Token management for `contextctl token …`, over a second Unix socket
//! in the daemon's private runtime directory (`admin.sock`).
//!
//! Authorization: the directory is 0700 and the daemon checks
//! `SO_PEERCRED`: only processes of the daemon's own uid may manage
//! tokens (root is not let in: tokens are the user's), and never a
//! sandboxed one (`Manage::may_manage`: a Flatpak app given the runtime
//! directory is still a Flatpak app). One JSON request
//! per connection, one JSON answer:
//! `{"op":"token-create","name":N,"expires":TIME?}` → `{"ok":true,"token":T}`,
//! `{"op":"token-list"}` →
//! `{"ok":true,"tokens":[{"created","expired","expires"?,"name"}]}`,
//! `{"op":"token-revoke","name":N}` → `{"ok":true}`;
//! failures are `{"ok":false,"error":MESSAGE}`.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Handles;
use super::stdio;
use crate::core::tokens::Tokens;
use crate::core::{Channel, Subject};
use crate::identity;
use crate::model::admin::{Answer, Request};

pub(crate) use crate::names::ADMIN_SOCKET as SOCKET_NAME;
const MAX_REQUEST: u64 = 4096;
const TIMEOUT: Duration = Duration::from_secs(5);

/// Serve token requests until `cancel`.
pub(crate) async fn serve(
    tokens: Tokens,
    core: Arc<Handles>,
    listener: UnixListener,
    cancel: CancellationToken,
    tasks: TaskTracker,
) {
    // SAFETY-free: getuid cannot fail.
    let us = unsafe { libc::getuid() };
    loop {
        let stream = tokio::select! {
            _ = cancel.cancelled() => break,
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept on the admin socket failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let tokens = tokens.clone();
        let core = core.clone();
        tasks.spawn(async move {
            if tokio::time::timeout(TIMEOUT, one(tokens, &core, stream, us))
                .await
                .is_err()
            {
                tracing::debug!("admin request timed out");
            }
        });
    }
}

async fn one(tokens: Tokens, core: &Handles, stream: UnixStream, us: u32) {
    let peer = stdio::peer(&stream);
    let (r, mut w) = stream.into_split();
    let answer = match peer {
        Ok((uid, pid)) if uid == us => {
            // The request is read before any refusal of our uid's peer,
            // so that its writer hears the answer, not a broken pipe.
            let mut line = String::new();
            let read = BufReader::new(r.take(MAX_REQUEST))
                .read_line(&mut line)
                .await;
            match read.map_err(|e| e.to_string()).and_then(|_| {
                serde_json::from_str::<Request>(&line).map_err(|e| format!("bad request: {e}"))
            }) {
                Ok(req) => match refused(core, pid) {
                    Some(no) => no,
                    None => handle(&tokens, req).await,
                },
                Err(e) => Answer::refused(e),
            }
        }
        Ok((uid, _)) => Answer::refused(format!("uid {uid} may not manage the tokens of uid {us}")),
        Err(e) => Answer::refused(format!("cannot read peer credentials: {e}")),
    };
    let mut out = serde_json::to_string(&answer)
        .unwrap_or_else(|_| r#"{"error":"cannot write the answer","ok":false}"#.to_owned());
    out.push('\n');
    let _ = w.write_all(out.as_bytes()).await;
    let _ = w.shutdown().await;
}

/// Tokens are the user's controls: the core refuses a sandboxed peer (a
/// Flatpak app given the runtime directory), as it does on D-Bus. The
/// peer is the process that connected (`SO_PEERCRED`), identified from
/// the kernel; one that cannot be identified is refused too.
fn refused(core: &Handles, pid: Option<u32>) -> Option<Answer> {
    let Some(pid) = pid else {
        return Some(Answer::refused(
            "the kernel gave no process for this connection",
        ));
    };
    let who = match identity::resolve_pid(pid) {
        Ok(who) => who,
        Err(e) => {
            return Some(Answer::refused(format!("cannot identify the caller: {e}")));
        }
    };
    let subject = Subject {
        app_id: who.app_id,
        source: who.source,
        channel: Channel::McpStdio,
    };
    core.manage
        .may_manage(&subject, "manage MCP tokens")
        .err()
        .map(|e| Answer::refused(e.to_string()))
}

async fn handle(tokens: &Tokens, req: Request) -> Answer {
    let r = match req {
        Request::TokenCreate { name, expires } => tokens.create(&name, expires).await.map(|t| {
            match expires {
                Some(at) => tracing::info!(token = %name, expires = %at, "MCP token created"),
                None => tracing::info!(token = %name, "MCP token created"),
            }
            Answer {
                token: Some(t),
                ..Answer::done()
            }
        }),
        Request::TokenList => Ok(Answer {
            tokens: Some(tokens.store.list()),
            ..Answer::done()
        }),
        Request::TokenRevoke { name } => tokens.revoke(&name).await.map(|()| {
            tracing::info!(token = %name, "MCP token revoked");
            Answer::done()
        }),
    };
    r.unwrap_or_else(|e| Answer::refused(e.to_string()))
}

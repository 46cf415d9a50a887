//! The PipeWire source: who plays audio or video, and who captures from
//! the microphone, a camera or the screen.
//!
//! A PipeWire client on its own thread (`thread`) watches the registry:
//! nodes (their properties and state: running, idle, suspended), clients
//! (their `pipewire.sec.pid`), devices and links. The tracker (`tracker`)
//! classifies the nodes (`classify`, where the rules are documented) and
//! turns the graph into `MediaStream` events:
//!
//! - a stream's id is `pw-N-NODE`: `N` counts this broker's connections to
//!   PipeWire, so that when one ends every stream it reported is removed
//!   with `StreamsReset { id_prefix: "pw-N-" }` and a new connection never
//!   reuses an id;
//! - a stream is *active* while its node is running;
//! - its identity is the app id of the PID PipeWire recorded for its client
//!   from the socket (`pipewire.sec.pid`, which a client cannot change),
//!   resolved by `identity::resolve_pid` like a D-Bus caller's; a
//!   connection that xdg-desktop-portal opened for an app (screen cast,
//!   camera) is the app the portal named in it (`tracker::Client::identity`);
//!   what the app says about itself (`application.name`,
//!   `application.process.binary`, `media.name`, `media.role`) is kept as
//!   a claim.
//!
//! PipeWire missing or gone: the source reports itself unavailable with
//! the reason, removes the streams of the connection that ended, and tries
//! again with a bounded backoff (250 ms doubling to 30 s; 5 min while the
//! socket is absent and watched), or at once when PipeWire's socket
//! appears (inotify on its directory, [`super::socket`]). It never ends
//! before the daemon does.

pub(crate) mod classify;
mod thread;
pub(crate) mod tracker;

use std::path::Path;

use tokio::sync::mpsc;

use super::socket::SocketWatch;
use super::{Backoff, SourceContext};
use crate::core::SourceEvent;

pub(crate) use thread::remote_path;
use tracker::Tracker;

pub(crate) const NAME: &str = "pipewire";

/// How one connection ended.
enum End {
    Cancelled,
    Lost { reason: String, synced: bool },
}

/// Run the source until `ctx.cancel`.
pub(crate) async fn run(ctx: SourceContext) {
    let mut backoff = Backoff::default();
    let mut watch = SocketWatch::new(NAME, Path::new(&remote_path()));
    let mut instance: u64 = 0;
    loop {
        instance += 1;
        let prefix = format!("pw-{instance}-");
        let end = connection(&ctx, &prefix).await;
        // Whatever the connection reported is gone with it.
        if !ctx
            .send(SourceEvent::StreamsReset { id_prefix: prefix })
            .await
        {
            return;
        }
        let (reason, synced) = match end {
            End::Cancelled => return,
            End::Lost { reason, synced } => (reason, synced),
        };
        if synced {
            tracing::warn!(source = NAME, "{reason}; reconnecting");
            backoff.reset();
        } else {
            tracing::debug!(source = NAME, "{reason}");
        }
        ctx.status(NAME, false, Some(reason)).await;
        if !watch.wait(&ctx.cancel, &mut backoff).await {
            return;
        }
    }
}

/// One connection, from start to end.
async fn connection(ctx: &SourceContext, prefix: &str) -> End {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let conn = match thread::Connection::start(tx) {
        Ok(c) => c,
        Err(e) => {
            return End::Lost {
                reason: format!("cannot start the PipeWire thread: {e}"),
                synced: false,
            };
        }
    };
    let mut tracker = Tracker::new(prefix.to_owned(), tracker::resolve_with_proc());
    let mut synced = false;
    let end = 'conn: loop {
        let msg = tokio::select! {
            _ = ctx.cancel.cancelled() => break End::Cancelled,
            m = rx.recv() => m,
        };
        match msg {
            None => {
                break End::Lost {
                    reason: "the PipeWire thread ended".into(),
                    synced,
                };
            }
            Some(thread::Msg::Lost(reason)) => break End::Lost { reason, synced },
            Some(thread::Msg::Synced) => {
                synced = true;
                tracing::info!(source = NAME, remote = %remote_path(), "connected to PipeWire");
                ctx.status(NAME, true, None).await;
            }
            Some(thread::Msg::Obs(obs)) => {
                tracing::trace!(source = NAME, ?obs, "observed");
                for ev in tracker.observe(obs, chrono::Utc::now()) {
                    if !ctx.send(ev).await {
                        break 'conn End::Cancelled;
                    }
                }
            }
        }
    };
    conn.stop().await;
    end
}

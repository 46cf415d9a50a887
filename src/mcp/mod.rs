//! The MCP publisher: the broker's context for MCP hosts (Claude Desktop,
//! Claude Code, VS Code, Cursor, any MCP client), under the same consent
//! rules as D-Bus.
//!
//! One rmcp handler ([`server::ContextServer`]) serves every transport:
//! - stdio, through `contextctl mcp` and the daemon's Unix socket
//!   ([`stdio`], [`bridge`]);
//! - Streamable HTTP at `/mcp` and the legacy HTTP+SSE pair at
//!   `/sse` + `/messages` ([`http`], [`sse`]), on loopback, behind bearer
//!   tokens ([`tokens`]).
//!
//! Like the D-Bus adapter it only converts: every read goes through the
//! core's read service (`core::read`), which decides what the host sees,
//! and the typed view it answers is rendered as JSON and Markdown, so MCP
//! shows exactly what D-Bus shows.

pub(crate) mod admin;
pub(crate) mod admission;
pub(crate) mod consent;
pub(crate) mod direct;
pub(crate) mod error;
pub(crate) mod extension;
pub(crate) mod http;
pub(crate) mod jsonrpc;
pub(crate) mod notify;
pub(crate) mod output;
pub(crate) mod prompts;
pub(crate) mod render;
pub(crate) mod resources;
pub(crate) mod schema;
pub(crate) mod server;
pub(crate) mod sessions;
pub(crate) mod sse;
pub(crate) mod stdio;
pub(crate) mod timeline;
pub(crate) mod tools;
pub(crate) mod watch;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::core::manage::Manage;
use crate::core::read::Reads;
use crate::core::tokens::{TokenStore, Tokens};
use crate::core::watch::Watches;
use crate::shutdown::Level;

/// The core's handles the MCP publisher uses: the reads (tools,
/// resources, prompts), the change feeds (a session's subscriptions) and
/// the owner's controls (who may manage, a token's end).
#[derive(Debug)]
pub(crate) struct Handles {
    pub(crate) reads: Reads,
    pub(crate) watches: Watches,
    pub(crate) manage: Manage,
}

/// What every MCP session shares.
#[derive(Debug)]
pub(crate) struct Broker {
    pub(crate) core: Arc<Handles>,
    pub(crate) notifier: notify::Notifier,
    /// Cancelled at shutdown; every session's token is a child.
    pub(crate) cancel: CancellationToken,
    /// The publishers' tracker: every connection's and session's task is
    /// spawned here, so that shutdown joins them.
    pub(crate) tasks: TaskTracker,
    /// How long a session's full queue is waited for before the reader
    /// is disconnected (`[limits] reader_stall_s`).
    pub(crate) stall: std::time::Duration,
    /// How many requests run at once, per host and in all
    /// ([`admission`]).
    pub(crate) admission: Arc<admission::Admission>,
}

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP socket: {0}")]
    Socket(#[from] stdio::SocketError),
    #[error("MCP over HTTP: {0}")]
    Http(#[from] http::HttpError),
    #[error(
        "$XDG_RUNTIME_DIR is not set, so there is no private place for the MCP socket; `contextctl mcp` needs it"
    )]
    NoRuntimeDir,
}

/// Check what can be checked before the daemon takes its bus name, so that
/// a bad `[mcp.http]` stops the start with a clear error.
pub(crate) fn preflight(config: &Config) -> Result<(), McpError> {
    if let Some(h) = config.file.mcp.http.as_ref() {
        http::check_listen(h)?;
    }
    Ok(())
}

/// Start the MCP publishers: the stdio socket always, HTTP when configured.
/// Call after the bus name is ours, so that a second instance never takes
/// the socket of the first.
pub(crate) async fn serve(
    config: &Config,
    core: Arc<Handles>,
    (conn, own_connection): (zbus::Connection, bool),
    tokens: Arc<dyn TokenStore>,
    level: &Level,
) -> Result<(), McpError> {
    let broker = Arc::new(Broker {
        core: core.clone(),
        notifier: notify::Notifier::new(conn, own_connection),
        cancel: level.token(),
        tasks: level.tracker(),
        stall: std::time::Duration::from_secs(config.file.limits.reader_stall_s.max(1)),
        admission: admission::Admission::new(admission::IN_ALL, admission::PER_HOST),
    });

    // A token's grants end with it (`core::tokens::Tokens`).
    let forget: Arc<dyn crate::core::tokens::Forget> = Arc::new(core.manage.clone());
    let store = Tokens::new(tokens, Some(forget));

    // Without a runtime directory there is no private place for the
    // sockets: MCP over stdio and token management are off (HTTP still
    // works, with the tokens that exist), and the log says why.
    let runtime = config.paths.runtime_dir.clone();
    match &runtime {
        Some(runtime) => {
            let mut socket = stdio::BoundSocket::bind(runtime, stdio::SOCKET_NAME)?;
            let mut admin = stdio::BoundSocket::bind(runtime, admin::SOCKET_NAME)?;
            tracing::info!(path = %socket.path.display(), "MCP stdio socket ready (contextctl mcp)");
            if let Some(listener) = socket.take_listener() {
                let broker = broker.clone();
                let bridges = Arc::new(stdio::Bridges::new(config.file.mcp.bridge.as_deref()));
                tracing::debug!(?bridges, "trusted stdio bridges");
                let cancel = level.child_token();
                level.spawn(async move {
                    let _socket = socket;
                    stdio::serve(broker, listener, bridges, cancel).await;
                });
            }
            if let Some(listener) = admin.take_listener() {
                let store = store.clone();
                let core = core.clone();
                let cancel = level.child_token();
                let tasks = level.tracker();
                level.spawn(async move {
                    let _admin = admin;
                    admin::serve(store, core, listener, cancel, tasks).await;
                });
            }
        }
        None => tracing::warn!("{}", McpError::NoRuntimeDir),
    }

    // What a token runs ends at its expiry (one timer for the soonest).
    level.spawn(store.clone().end_at_expiries(level.child_token()));

    if let Some(h) = config.file.mcp.http.as_ref() {
        let bound = http::bind(h, runtime.as_deref()).await?;
        level.spawn(http::serve(bound, broker, store, level.child_token()));
    }
    Ok(())
}

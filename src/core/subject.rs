//! Core's ground floor: who asks (the [`Subject`] and the [`Channel`] it
//! came over) and how (the [`Mode`] of a read, with the [`HostCall`] an MCP
//! host made). Every service of the core and every publisher names these;
//! this module imports nothing else of the core, so that no file of the
//! core needs another one back to say who is asking.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::model::{AppId, IdentitySource};

/// How an app reached the broker; shown in prompts and the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum Channel {
    #[serde(rename = "dbus")]
    DBus,
    #[serde(rename = "mcp-stdio")]
    McpStdio,
    #[serde(rename = "mcp-http")]
    McpHttp,
}

impl Channel {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Channel::DBus => "dbus",
            Channel::McpStdio => "mcp-stdio",
            Channel::McpHttp => "mcp-http",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who reads: the app id the broker derived from the caller's credentials
/// (never a name the caller sent), how it was derived, and the channel
/// it came over (recorded with every access).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Subject {
    pub(crate) app_id: AppId,
    pub(crate) source: IdentitySource,
    pub(crate) channel: Channel,
}

/// Reports that the broker is waiting for the user (MCP
/// `notifications/progress`): the step and a message.
pub(crate) type Progress =
    Arc<dyn Fn(f64, String) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How a read treats a category the user has not decided about.
#[derive(Clone)]
pub(crate) enum Mode {
    /// Only look: no prompt, no audit. For filtering (signals, lists of
    /// resources, completions); an undecided category is `Pending`.
    Look,
    /// An access: audited; an undecided category starts a prompt and the
    /// read answers `Pending` at once (a D-Bus read never blocks on the
    /// user; the app asks again, or calls `RequestAccess`). `request` is
    /// what the app called (the D-Bus member), recorded in the audit.
    Access { request: String },
    /// An access that waits for the user's answer (MCP): audited; while
    /// the prompt shows, `progress` is told every few seconds; `cancel`
    /// (the host gave up, or the session ended) stops the wait. A prompt
    /// that is not answered with an allow refuses the read and stores
    /// nothing.
    Ask {
        progress: Option<Progress>,
        cancel: CancellationToken,
        /// What the host asked for, as the prompt shows it: the host's
        /// own name (MCP `clientInfo`), the tool, resource or prompt, and
        /// its arguments.
        reason: String,
        /// What the host called, for the audit (`tools/call NAME`, …).
        request: String,
        /// The same, in parts, for a consent UI to show apart.
        call: Option<HostCall>,
    },
}

impl fmt::Debug for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Look => f.write_str("Look"),
            Mode::Access { request } => f.debug_struct("Access").field("request", request).finish(),
            Mode::Ask {
                progress,
                reason,
                request,
                ..
            } => f
                .debug_struct("Ask")
                .field("progress", &progress.is_some())
                .field("reason", reason)
                .field("request", request)
                .finish_non_exhaustive(),
        }
    }
}

impl Mode {
    /// What the caller called, for the audit; `None` for a look.
    pub(crate) fn request(&self) -> Option<&str> {
        match self {
            Mode::Look => None,
            Mode::Access { request } | Mode::Ask { request, .. } => Some(request),
        }
    }
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

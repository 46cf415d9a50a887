//! The admin socket's requests and answers (`contextctl token …`, served
//! by `mcp::admin`): plain data that both sides import, so that the client
//! names no module of the core or of a publisher to talk to the daemon.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One request on the admin socket (one a connection, as a JSON line).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    TokenCreate { name: String },
    TokenList,
    TokenRevoke { name: String },
}

/// One stored token, as `token list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub name: String,
    pub created: DateTime<Utc>,
}

/// How long an unused dashboard ticket is good for: the daemon forgets
/// it then, and `contextctl dashboard` removes the link pages it wrote
/// that are older (they open nothing any more).
pub const TICKET_TTL: Duration = Duration::from_secs(120);

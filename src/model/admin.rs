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
    TokenCreate {
        name: String,
        /// When the token stops working; absent: never. A time, not a
        /// duration: the client computes it on the same machine's clock
        /// (`--expires 30d` or an RFC 3339 time), and a daemon too old to
        /// know expiry refuses the field rather than make a token that
        /// never expires.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<DateTime<Utc>>,
    },
    TokenList,
    TokenRevoke {
        name: String,
    },
}

/// One stored token, as `token list` shows it. Fields in name order, as
/// the socket has always written them; `expires` left out when the token
/// never expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub created: DateTime<Utc>,
    /// Its expiry has come: it no longer works, and stays listed until
    /// revoked.
    #[serde(default)]
    pub expired: bool,
    /// When it stops (or stopped) working; `None`: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<DateTime<Utc>>,
    pub name: String,
}

/// The daemon's answer to one [`Request`]: whether it was done, and what
/// it asked for (the new token, the list) or why not. Typed on both sides
/// rather than JSON built by hand; fields in name order and the absent
/// ones left out, so the line on the socket reads as it always did
/// (`{"ok":true,"token":"…"}`, `{"error":"…","ok":false}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<TokenInfo>>,
}

impl Answer {
    /// Done, with nothing to give back.
    pub fn done() -> Self {
        Answer {
            ok: true,
            ..Answer::default()
        }
    }

    /// Not done, and why.
    pub fn refused(why: impl Into<String>) -> Self {
        Answer {
            error: Some(why.into()),
            ..Answer::default()
        }
    }
}

/// How long an unused dashboard ticket is good for: the daemon forgets
/// it then, and `contextctl dashboard` removes the link pages it wrote
/// that are older (they open nothing any more).
pub const TICKET_TTL: Duration = Duration::from_secs(120);

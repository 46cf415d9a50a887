//! The encrypted store: SQLCipher through sqlx, behind the traits `core`
//! owns (`core::consent::ConsentStore`, `core::history::HistoryStore`).
//!
//! The key is a raw 32-byte key (no KDF cost at start) from, in order:
//! `$CREDENTIALS_DIRECTORY/dbkey` (systemd `LoadCredential=`), the Secret
//! Service (an item with `application=contextd`, created on first start),
//! else `$XDG_STATE_HOME/contextd/db.key` (0600 in a 0700 directory).

mod cipher;
pub(crate) mod db;
pub(crate) mod health;
pub(crate) mod history;
mod history_read;
pub(crate) mod key;
mod portable;
pub(crate) mod recovery;
pub(crate) mod reserve;
mod rotate;
mod secret;
pub(crate) mod secret_service;
pub(crate) mod tokens;

pub(crate) use db::{Db, DbError};
pub(crate) use key::KeyError;

use chrono::{DateTime, TimeZone, Utc};

/// Times are stored as Unix milliseconds (UTC).
fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

//! `contextctl key rotate`: the database re-encrypted under a new key
//! (SQLCipher `PRAGMA rekey`), the new key stored where the old one came
//! from (the Secret Service item, or the key file), while the broker
//! runs.
//!
//! Every connection of the pool is held for the while (nothing else
//! reads or writes), one of them re-encrypts every page, the write-ahead
//! log is checkpointed into the file, a fresh connection proves the new
//! key opens it, and only then is the new key stored; if storing fails,
//! the database is re-keyed back to the old key. The other connections
//! (keyed with the old key) are closed, and the pool opens new ones with
//! the new key. A key from a systemd credential is not ours to replace:
//! refused before anything changes.

use std::sync::Arc;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

use super::key::{DbKey, KeySource};
use crate::core::Error;

/// Where the key lives and what it is, for a rotation.
#[derive(Debug)]
pub(crate) struct KeyHome {
    pub(crate) source: KeySource,
    pub(crate) key: DbKey,
    pub(crate) session: Option<zbus::Connection>,
}

pub(crate) type SharedKeyHome = Arc<tokio::sync::Mutex<Option<KeyHome>>>;

fn rekey_sql(key: &DbKey) -> String {
    format!("PRAGMA rekey = \"x'{}'\"", key.hex())
}

/// The connect options of the database at `path` under `key`.
pub(crate) fn options(path: &std::path::Path, key: &DbKey) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .pragma("key", format!("\"x'{}'\"", key.hex()))
        // Pages freed by forgetting go back to the file system
        // (`History::shrink`); a database made before is switched once,
        // see `Db::open`.
        .auto_vacuum(sqlx::sqlite::SqliteAutoVacuum::Incremental)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .pragma("secure_delete", "ON")
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(5))
        // Statement logging would print the key.
        .disable_statement_logging()
}

impl super::Db {
    /// Re-key the database; returns where the new key is.
    pub(crate) async fn rotate_key(&self) -> Result<String, Error> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Error::Failed(format!("key rotation: {what}: {e}"))
        };
        let mut home = self.key_home.lock().await;
        let Some(h) = home.as_mut() else {
            return Err(Error::Unavailable(
                "the database runs in memory (its key is missing): there is no key to rotate"
                    .into(),
            ));
        };
        if let KeySource::Credentials(p) = &h.source {
            return Err(Error::Unavailable(format!(
                "the key comes from the systemd credential {}: replace it there (and rekey) rather than here",
                p.display()
            )));
        }
        let new = DbKey::random().map_err(|e| failed("a new key", &e))?;
        let max = self.pool().options().get_max_connections();
        let mut held = Vec::new();
        for _ in 0..max {
            held.push(
                self.pool()
                    .acquire()
                    .await
                    .map_err(|e| failed("waiting for the database", &e))?,
            );
        }
        let Some(first) = held.first_mut() else {
            return Err(Error::Failed("key rotation: no connection".into()));
        };
        sqlx::query(sqlx::AssertSqlSafe(rekey_sql(&new)))
            .execute(&mut **first)
            .await
            .map_err(|e| failed("rekey", &e))?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut **first)
            .await
            .map_err(|e| failed("checkpoint", &e))?;
        // Prove the new key opens the file before the old one goes.
        let proved = async {
            let mut c = options(self.path(), &new)
                .create_if_missing(false)
                .connect()
                .await?;
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sqlite_master")
                .fetch_one(&mut c)
                .await?;
            use sqlx::Connection;
            c.close().await
        }
        .await;
        let stored = match proved {
            Ok(()) => match &h.source {
                KeySource::KeyFile(p) => super::key::replace_key_file(p, &new),
                KeySource::SecretService => match &h.session {
                    Some(conn) => super::secret_service::replace(conn, &new).await,
                    None => Err(super::KeyError::SecretService("no session bus".into())),
                },
                KeySource::Credentials(_) => Ok(()),
            }
            .map_err(|e| failed("storing the new key", &e)),
            Err(e) => Err(failed("the new key does not open the database", &e)),
        };
        if let Err(e) = stored {
            // Back to the old key: the database stays as it was.
            let back = sqlx::query(sqlx::AssertSqlSafe(rekey_sql(&h.key)))
                .execute(&mut **first)
                .await;
            if let Err(b) = back {
                tracing::error!(error = %b, "key rotation: re-keying back to the old key failed");
            }
            return Err(e);
        }
        self.pool().set_connect_options(options(self.path(), &new));
        // The others still hold the old key: closed; the pool opens new
        // ones with the new key.
        let mut held = held.into_iter();
        let first = held.next();
        for c in held {
            let _ = c.close().await;
        }
        drop(first);
        h.key = new;
        let at = h.source.to_string();
        tracing::info!(key = %at, "the database key was rotated");
        Ok(at)
    }
}

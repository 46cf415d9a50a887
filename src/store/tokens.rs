//! MCP bearer tokens in the encrypted database (`core::tokens` says what a
//! token is). Everything is read into memory at start, so that checking a
//! token (every HTTP request) never waits for the database; creating and
//! revoking write first and count only once written. A token's expiry is
//! its `expires_ms` (migrations/0011; NULL, as every token made before
//! it has, is never).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqlitePool;

use super::{from_ms, ms};
use crate::core::Clock;
use crate::core::consent::BoxFut;
use crate::core::tokens::{Presented, Stored, TokenError, TokenSet, TokenStore, new_key};
use crate::model::admin::TokenInfo;

fn failed(e: sqlx::Error) -> TokenError {
    TokenError::Db(e.to_string())
}

#[derive(Debug)]
pub(crate) struct DbTokenStore {
    pool: SqlitePool,
    set: TokenSet,
}

impl DbTokenStore {
    /// Load the key and the tokens (a new key on the first start); their
    /// expiry is compared with `clock`.
    pub(crate) async fn open(
        pool: SqlitePool,
        clock: Arc<dyn Clock>,
    ) -> Result<DbTokenStore, TokenError> {
        let key: Option<Vec<u8>> = sqlx::query_scalar("SELECT key FROM mcp_token_key")
            .fetch_optional(&pool)
            .await
            .map_err(failed)?;
        let key = match key {
            Some(k) => k,
            None => {
                let k = new_key()?;
                sqlx::query("INSERT INTO mcp_token_key (id, key) VALUES (1, ?)")
                    .bind(&k)
                    .execute(&pool)
                    .await
                    .map_err(failed)?;
                k
            }
        };
        if key.len() != 32 {
            return Err(TokenError::Db(format!(
                "the token key is {} bytes, expected 32",
                key.len()
            )));
        }
        let rows = sqlx::query("SELECT name, hmac_sha256, created_ms, expires_ms FROM mcp_tokens")
            .fetch_all(&pool)
            .await
            .map_err(failed)?;
        let mut tokens = Vec::with_capacity(rows.len());
        for r in rows {
            tokens.push(Stored {
                name: r.try_get(0).map_err(failed)?,
                tag: r.try_get(1).map_err(failed)?,
                created: from_ms(r.try_get(2).map_err(failed)?),
                expires: r.try_get::<Option<i64>, _>(3).map_err(failed)?.map(from_ms),
            });
        }
        Ok(DbTokenStore {
            pool,
            set: TokenSet::new(&key, tokens, clock),
        })
    }
}

impl TokenStore for DbTokenStore {
    fn create<'a>(
        &'a self,
        name: &'a str,
        expires: Option<DateTime<Utc>>,
    ) -> BoxFut<'a, Result<String, TokenError>> {
        Box::pin(async move {
            let (token, tag) = self.set.mint(name, expires)?;
            let created = self.set.now();
            let r = sqlx::query(
                "INSERT INTO mcp_tokens (name, hmac_sha256, created_ms, expires_ms) VALUES (?, ?, ?, ?)
                 ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(&tag)
            .bind(ms(created))
            .bind(expires.map(ms))
            .execute(&self.pool)
            .await
            .map_err(failed)?;
            if r.rows_affected() == 0 {
                return Err(TokenError::Exists(name.to_owned()));
            }
            self.set.insert(Stored {
                name: name.to_owned(),
                tag,
                created,
                expires,
            });
            Ok(token)
        })
    }

    fn list(&self) -> Vec<TokenInfo> {
        self.set.list()
    }

    fn revoke<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<(), TokenError>> {
        Box::pin(async move {
            let r = sqlx::query("DELETE FROM mcp_tokens WHERE name = ?")
                .bind(name)
                .execute(&self.pool)
                .await
                .map_err(failed)?;
            // Gone from memory either way: a token the database lost must
            // not keep working until a restart.
            self.set.remove(name);
            if r.rows_affected() == 0 {
                return Err(TokenError::NoSuch(name.chars().take(80).collect()));
            }
            Ok(())
        })
    }

    fn verify(&self, presented: &str) -> Presented {
        self.set.verify(presented)
    }

    fn end_expired(&self) -> Vec<String> {
        self.set.end_expired()
    }

    fn next_expiry(&self) -> Option<Duration> {
        self.set.next_expiry()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::SystemClock;
    use crate::core::clock::ManualClock;
    use crate::core::tokens::{Bearer, PREFIX};
    use crate::store::Db;
    use crate::store::key::{DbKey, KeySource};
    use std::path::Path;

    /// The tests close the pool at the end (see store::history's tests).
    async fn db(dir: &Path) -> Db {
        let key_path = dir.join("k");
        let key = match std::fs::read(&key_path) {
            Ok(b) => DbKey::parse(&b).expect("key"),
            Err(_) => {
                let k = DbKey::random().expect("key");
                std::fs::write(&key_path, k.hex()).expect("write key");
                k
            }
        };
        Db::open(&dir.join("db"), &key, &KeySource::KeyFile(key_path))
            .await
            .expect("open")
            .0
    }

    #[tokio::test]
    async fn create_verify_revoke_survive_a_restart_and_only_tags_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = db(dir.path()).await;
        let store = DbTokenStore::open(d.pool().clone(), Arc::new(SystemClock))
            .await
            .expect("open");
        let t = store.create("claude", None).await.expect("create");
        assert!(t.starts_with(PREFIX));
        assert!(matches!(
            store.create("claude", None).await,
            Err(TokenError::Exists(_))
        ));
        assert!(matches!(
            store.create("bad name", None).await,
            Err(TokenError::BadName(_))
        ));
        assert_eq!(live(store.verify(&t)).name, "claude");
        assert!(matches!(store.verify("ctxd_wrong"), Presented::Unknown));
        let tag: Vec<u8> =
            sqlx::query_scalar("SELECT hmac_sha256 FROM mcp_tokens WHERE name = 'claude'")
                .fetch_one(d.pool())
                .await
                .expect("tag");
        assert_eq!(tag.len(), 32);
        assert!(!String::from_utf8_lossy(&tag).contains(&t[PREFIX.len()..]));
        drop(store);
        d.pool().close().await;

        let d = db(dir.path()).await;
        let again = DbTokenStore::open(d.pool().clone(), Arc::new(SystemClock))
            .await
            .expect("reopen");
        let bearer = live(again.verify(&t));
        assert_eq!(bearer.name, "claude");
        assert_eq!(again.list().len(), 1);
        assert_eq!(again.list()[0].expires, None, "never expires");
        again.revoke("claude").await.expect("revoke");
        assert!(matches!(again.verify(&t), Presented::Unknown));
        assert!(bearer.life.is_cancelled(), "what the token ran ends");
        assert!(matches!(
            again.revoke("claude").await,
            Err(TokenError::NoSuch(_))
        ));
        d.pool().close().await;
    }

    fn live(p: Presented) -> Bearer {
        match p {
            Presented::Live(b) => b,
            other => panic!("not live: {other:?}"),
        }
    }

    /// The expiry is written with the token and read back after a
    /// restart: a token does not outlive its time by the daemon stopping
    /// (it expired while stopped: refused as expired, listed, removable).
    #[tokio::test]
    async fn the_expiry_is_stored_and_holds_after_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Whole milliseconds, as the database keeps them.
        let now = from_ms(ms(Utc::now()));
        let clock = ManualClock::new(now);
        let d = db(dir.path()).await;
        let store = DbTokenStore::open(d.pool().clone(), clock.clone())
            .await
            .expect("open");
        let at = now + chrono::Duration::days(30);
        let t = store.create("month", Some(at)).await.expect("create");
        let forever = store.create("forever", None).await.expect("create");
        assert!(matches!(
            store.create("past", Some(now)).await,
            Err(TokenError::Past(_))
        ));
        let rows: Vec<(String, Option<i64>)> =
            sqlx::query_as("SELECT name, expires_ms FROM mcp_tokens ORDER BY name")
                .fetch_all(d.pool())
                .await
                .expect("rows");
        assert_eq!(
            rows,
            [
                ("forever".to_owned(), None),
                ("month".to_owned(), Some(at.timestamp_millis()))
            ],
            "nothing else written, and no row for the refused one"
        );
        drop(store);
        d.pool().close().await;

        // Restarted a day before its expiry: it works.
        clock.set(at - chrono::Duration::days(1));
        let d = db(dir.path()).await;
        let again = DbTokenStore::open(d.pool().clone(), clock.clone())
            .await
            .expect("reopen");
        let month = again
            .list()
            .into_iter()
            .find(|i| i.name == "month")
            .expect("listed");
        assert_eq!(
            month.expires.map(|e| e.timestamp_millis()),
            Some(at.timestamp_millis())
        );
        assert!(!month.expired);
        live(again.verify(&t));
        assert_eq!(
            again.next_expiry(),
            Some(std::time::Duration::from_secs(86400))
        );
        drop(again);
        d.pool().close().await;

        // Restarted after it: refused as expired, listed as expired, and
        // revoking removes it; the other one never expires.
        clock.set(at + chrono::Duration::days(1));
        let d = db(dir.path()).await;
        let later = DbTokenStore::open(d.pool().clone(), clock)
            .await
            .expect("reopen");
        assert!(matches!(later.verify(&t), Presented::Expired(ref n) if n == "month"));
        assert!(later.list().iter().any(|i| i.name == "month" && i.expired));
        live(later.verify(&forever));
        assert_eq!(later.next_expiry(), None);
        later.revoke("month").await.expect("revoke");
        assert!(matches!(later.verify(&t), Presented::Unknown));
        let left: Vec<String> = sqlx::query_scalar("SELECT name FROM mcp_tokens")
            .fetch_all(d.pool())
            .await
            .expect("names");
        assert_eq!(left, ["forever"]);
        d.pool().close().await;
    }

    /// Migration 0011 on a database made before it: its tokens keep
    /// working and never expire.
    #[tokio::test]
    async fn tokens_of_a_database_without_the_column_never_expire() {
        let pool = crate::store::db::memory_before(11).await;
        // A token as the version before wrote it.
        let key = new_key().expect("key");
        let (secret, tag) = TokenSet::new(&key, [], Arc::new(SystemClock))
            .mint("old", None)
            .expect("mint");
        sqlx::query("INSERT INTO mcp_token_key (id, key) VALUES (1, ?)")
            .bind(&key)
            .execute(&pool)
            .await
            .expect("key");
        sqlx::query("INSERT INTO mcp_tokens (name, hmac_sha256, created_ms) VALUES ('old', ?, 1)")
            .bind(&tag)
            .execute(&pool)
            .await
            .expect("token");
        sqlx::raw_sql(include_str!("../../migrations/0011_token_expiry.sql"))
            .execute(&pool)
            .await
            .expect("0011");
        // Far in the future, it still verifies.
        let clock = ManualClock::new(Utc::now() + chrono::Duration::days(365 * 50));
        let store = DbTokenStore::open(pool.clone(), clock).await.expect("open");
        assert_eq!(live(store.verify(&secret)).name, "old");
        let list = store.list();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].expires, None);
        assert!(!list[0].expired);
        assert_eq!(store.next_expiry(), None);
        pool.close().await;
    }
}

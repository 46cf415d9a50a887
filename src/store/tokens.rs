//! MCP bearer tokens in the encrypted database (`core::tokens` says what a
//! token is). Everything is read into memory at start, so that checking a
//! token (every HTTP request) never waits for the database; creating and
//! revoking write first and count only once written.

use chrono::Utc;
use sqlx::Row;
use sqlx::sqlite::SqlitePool;

use super::{from_ms, ms};
use crate::core::consent::BoxFut;
use crate::core::tokens::{Bearer, TokenError, TokenSet, TokenStore, new_key};
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
    /// Load the key and the tokens (a new key on the first start).
    pub(crate) async fn open(pool: SqlitePool) -> Result<DbTokenStore, TokenError> {
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
        let rows = sqlx::query("SELECT name, hmac_sha256, created_ms FROM mcp_tokens")
            .fetch_all(&pool)
            .await
            .map_err(failed)?;
        let mut tokens = Vec::with_capacity(rows.len());
        for r in rows {
            tokens.push((
                r.try_get(0).map_err(failed)?,
                r.try_get(1).map_err(failed)?,
                from_ms(r.try_get(2).map_err(failed)?),
            ));
        }
        Ok(DbTokenStore {
            pool,
            set: TokenSet::new(&key, tokens),
        })
    }
}

impl TokenStore for DbTokenStore {
    fn create<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<String, TokenError>> {
        Box::pin(async move {
            let (token, tag) = self.set.mint(name)?;
            let created = Utc::now();
            let r = sqlx::query(
                "INSERT INTO mcp_tokens (name, hmac_sha256, created_ms) VALUES (?, ?, ?)
                 ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(&tag)
            .bind(ms(created))
            .execute(&self.pool)
            .await
            .map_err(failed)?;
            if r.rows_affected() == 0 {
                return Err(TokenError::Exists(name.to_owned()));
            }
            self.set.insert((name.to_owned(), tag, created));
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

    fn verify(&self, presented: &str) -> Option<Bearer> {
        self.set.verify(presented)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tokens::PREFIX;
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
        let store = DbTokenStore::open(d.pool().clone()).await.expect("open");
        let t = store.create("claude").await.expect("create");
        assert!(t.starts_with(PREFIX));
        assert!(matches!(
            store.create("claude").await,
            Err(TokenError::Exists(_))
        ));
        assert!(matches!(
            store.create("bad name").await,
            Err(TokenError::BadName(_))
        ));
        assert_eq!(store.verify(&t).map(|b| b.name).as_deref(), Some("claude"));
        assert!(store.verify("ctxd_wrong").is_none());
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
        let again = DbTokenStore::open(d.pool().clone()).await.expect("reopen");
        let bearer = again.verify(&t).expect("verifies");
        assert_eq!(bearer.name, "claude");
        assert_eq!(again.list().len(), 1);
        again.revoke("claude").await.expect("revoke");
        assert!(again.verify(&t).is_none());
        assert!(bearer.life.is_cancelled(), "what the token ran ends");
        assert!(matches!(
            again.revoke("claude").await,
            Err(TokenError::NoSuch(_))
        ));
        d.pool().close().await;
    }
}

//! Bearer tokens for MCP over HTTP. A token is its own consent subject
//! (`token:NAME`).
//!
//! Only an HMAC-SHA256 of each token is stored, so that nobody gets a
//! token back out of the database, not even with its key; checks use ring's constant-time `hmac::verify`. The token
//! itself is shown once, by `contextctl token create`.
//!
//! The tags, names, creation times and the key live in the encrypted
//! database (`store::tokens` implements [`TokenStore`]).

use std::collections::BTreeMap;
use std::sync::RwLock;

use base64::Engine;
use chrono::{DateTime, Utc};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use crate::core::consent::BoxFut;

/// Tokens start with this, so that they are recognisable in a config file
/// or a leak scanner.
pub(crate) const PREFIX: &str = "ctxd_";
const KEY_LEN: usize = 32;
const TOKEN_BYTES: usize = 32;
/// Tokens longer than this are not ours; refuse before hashing.
const MAX_TOKEN_LEN: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("invalid token name '{0}': use 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-'")]
    BadName(String),
    #[error("a token named '{0}' exists; revoke it first (contextctl token revoke {0})")]
    Exists(String),
    #[error("no token named '{0}'")]
    NoSuch(String),
    #[error("no randomness from the system")]
    Random,
    #[error("token database: {0}")]
    Db(String),
}

/// One stored token, as `token list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub name: String,
    pub created: DateTime<Utc>,
}

/// Where tokens live (`store::tokens::DbTokenStore`, in the encrypted
/// database). Checks are synchronous, from memory: every HTTP request makes
/// one; changes are written before they count.
pub(crate) trait TokenStore: Send + Sync + std::fmt::Debug {
    /// Create token `name` and return the secret (shown once, never stored).
    fn create<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<String, TokenError>>;
    fn list(&self) -> Vec<TokenInfo>;
    /// Remove token `name`; `Err(NoSuch)` when there is none.
    fn revoke<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<(), TokenError>>;
    /// The name of the token `presented` is, if it is one.
    fn verify(&self, presented: &str) -> Option<String>;
}

/// The store as the daemon uses it: revocations are also announced, so
/// that open HTTP sessions and SSE streams of a revoked token end at once
/// (every request checks the token anyway).
#[derive(Debug, Clone)]
pub(crate) struct Tokens {
    pub(crate) store: std::sync::Arc<dyn TokenStore>,
    revoked: tokio::sync::broadcast::Sender<String>,
}

impl Tokens {
    pub(crate) fn new(store: std::sync::Arc<dyn TokenStore>) -> Self {
        let (revoked, _) = tokio::sync::broadcast::channel(64);
        Tokens { store, revoked }
    }

    pub(crate) async fn revoke(&self, name: &str) -> Result<(), TokenError> {
        self.store.revoke(name).await?;
        let _ = self.revoked.send(name.to_owned());
        Ok(())
    }

    /// Names of tokens as they are revoked.
    pub(crate) fn revocations(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.revoked.subscribe()
    }

    /// The next revocation `rx` hears of; `None` once the store is gone.
    /// A listener that fell behind (more revocations at once than the
    /// channel holds) missed names, so it gets every token no longer
    /// stored instead: a missed name must not leave its streams open.
    pub(crate) async fn next_revoked(
        &self,
        rx: &mut tokio::sync::broadcast::Receiver<String>,
    ) -> Option<Revoked> {
        match rx.recv().await {
            Ok(name) => Some(Revoked::One(name)),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Some(Revoked::AllBut(
                self.store.list().into_iter().map(|t| t.name).collect(),
            )),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
        }
    }
}

/// Which tokens a revocation ends ([`Tokens::next_revoked`]).
#[derive(Debug)]
pub(crate) enum Revoked {
    One(String),
    /// Every token but these, the ones still stored.
    AllBut(std::collections::HashSet<String>),
}

impl Revoked {
    /// Whether the token `name` is revoked.
    pub(crate) fn covers(&self, name: &str) -> bool {
        match self {
            Revoked::One(n) => n == name,
            Revoked::AllBut(live) => !live.contains(name),
        }
    }
}

pub(crate) fn valid_name(name: &str) -> Result<(), TokenError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(TokenError::BadName(name.chars().take(80).collect()))
    }
}

/// The tokens in memory: the HMAC key and, per name, the tag and the
/// creation time. What a store keeps is exactly this.
#[derive(Debug)]
pub(crate) struct TokenSet {
    key: hmac::Key,
    /// Per name: the tag and the creation time.
    tokens: RwLock<BTreeMap<String, Tag>>,
    rng: SystemRandom,
}

/// A new random HMAC key.
pub(crate) fn new_key() -> Result<Vec<u8>, TokenError> {
    let mut k = vec![0u8; KEY_LEN];
    SystemRandom::new()
        .fill(&mut k)
        .map_err(|_| TokenError::Random)?;
    Ok(k)
}

/// A stored token: name, HMAC-SHA256 tag, creation time.
pub(crate) type Stored = (String, Vec<u8>, DateTime<Utc>);
type Tag = (Vec<u8>, DateTime<Utc>);

impl TokenSet {
    pub(crate) fn new(key: &[u8], tokens: impl IntoIterator<Item = Stored>) -> TokenSet {
        TokenSet {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            tokens: RwLock::new(tokens.into_iter().map(|(n, t, c)| (n, (t, c))).collect()),
            rng: SystemRandom::new(),
        }
    }

    /// A new secret for `name` and its tag (nothing is kept yet).
    pub(crate) fn mint(&self, name: &str) -> Result<(String, Vec<u8>), TokenError> {
        valid_name(name)?;
        if self.contains(name) {
            return Err(TokenError::Exists(name.to_owned()));
        }
        let mut secret = [0u8; TOKEN_BYTES];
        self.rng.fill(&mut secret).map_err(|_| TokenError::Random)?;
        let token = format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
        );
        let tag = hmac::sign(&self.key, token.as_bytes()).as_ref().to_vec();
        Ok((token, tag))
    }

    fn contains(&self, name: &str) -> bool {
        self.tokens
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(name)
    }

    pub(crate) fn insert(&self, (name, tag, created): Stored) {
        self.tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, (tag, created));
    }

    pub(crate) fn remove(&self, name: &str) {
        self.tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    pub(crate) fn list(&self) -> Vec<TokenInfo> {
        let tokens = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        tokens
            .iter()
            .map(|(name, (_, c))| TokenInfo {
                name: name.clone(),
                created: *c,
            })
            .collect()
    }

    pub(crate) fn verify(&self, presented: &str) -> Option<String> {
        if presented.len() > MAX_TOKEN_LEN || !presented.starts_with(PREFIX) {
            return None;
        }
        let tokens = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        // Every stored tag is checked (no early exit on the name), each in
        // constant time.
        let mut found = None;
        for (name, (tag, _)) in tokens.iter() {
            if hmac::verify(&self.key, presented.as_bytes(), tag).is_ok() {
                found = Some(name.clone());
            }
        }
        found
    }
}

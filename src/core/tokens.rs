//! Bearer tokens for MCP over HTTP. A token is its own consent subject
//! (`token:NAME`).
//!
//! A token is also the owner of everything it runs: each live token has a
//! [`Bearer`] whose `life` every session, stream and waiting request of it
//! is tied to, so that revoking the token ends them all at once (no index
//! of sessions that another token could push entries out of), and whose
//! `id` is unique to this token (a new token of the same name is another
//! owner). What the user decided for `token:NAME` (prompts, the dashboard)
//! belongs to the token that was asked: [`Tokens::revoke`] forgets it, and
//! [`Tokens::create`] starts a token with none (see [`Tokens`]).
//!
//! Only an HMAC-SHA256 of each token is stored, so that nobody gets a
//! token back out of the database, not even with its key; checks use ring's constant-time `hmac::verify`. The token
//! itself is shown once, by `contextctl token create`.
//!
//! The tags, names, creation times and the key live in the encrypted
//! database (`store::tokens` implements [`TokenStore`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use base64::Engine;
use chrono::{DateTime, Utc};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use tokio_util::sync::CancellationToken;

use crate::core::consent::BoxFut;
use crate::model::AppId;
use crate::model::admin::TokenInfo;

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

/// Where tokens live (`store::tokens::DbTokenStore`, in the encrypted
/// database). Checks are synchronous, from memory: every HTTP request makes
/// one; changes are written before they count.
pub(crate) trait TokenStore: Send + Sync + std::fmt::Debug {
    /// Create token `name` and return the secret (shown once, never stored).
    fn create<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<String, TokenError>>;
    fn list(&self) -> Vec<TokenInfo>;
    /// Remove token `name`; `Err(NoSuch)` when there is none. Its
    /// [`Bearer::life`] is cancelled once it no longer verifies.
    fn revoke<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<(), TokenError>>;
    /// The live token `presented` is, if it is one.
    fn verify(&self, presented: &str) -> Option<Bearer>;
}

/// A live token as a request presents it: who owns what the request opens.
#[derive(Debug, Clone)]
pub(crate) struct Bearer {
    pub(crate) name: String,
    /// Unique to this token in this daemon's run: a token created later
    /// under the same name has another. What a session, stream or pending
    /// request is owned by.
    pub(crate) id: u64,
    /// Cancelled when the token is revoked. Everything the token runs
    /// holds it (or a child of it) and ends with it.
    pub(crate) life: CancellationToken,
}

impl Bearer {
    /// A bearer for a subject that no token stands for and that is never
    /// revoked (an MCP extension's requests without a token, see
    /// `mcp::extension::Extension::anonymous`).
    pub(crate) fn unrevocable(name: &str) -> Bearer {
        Bearer {
            name: name.to_owned(),
            id: 0,
            life: CancellationToken::new(),
        }
    }
}

/// What a token's end forgets: the decisions made for its consent subject
/// (`core::manage::Manage`'s). A trait so that this module does not
/// need the whole core (and its tests none).
pub(crate) trait Forget: Send + Sync + std::fmt::Debug {
    /// Forget them; how many were stored. In force at once (a write that
    /// fails is retried, as every revocation is).
    fn forget_decisions<'a>(&'a self, app: &'a AppId) -> BoxFut<'a, usize>;

    /// Withdraw the questions asked for `app` and wait (boundedly) until
    /// they are off the screen, so that a revoked token's prompt is gone
    /// when `contextctl token revoke` returns.
    fn withdraw_questions<'a>(&'a self, app: &'a AppId) -> BoxFut<'a, ()>;
}

/// How long a revocation waits for its token's questions to leave the
/// screen (a prompter that does not answer `CloseNotification`).
pub(crate) const WITHDRAW_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The store as the daemon uses it: creating and revoking also keep the
/// grants with the token.
///
/// Grants are keyed by the app id `token:NAME` (the name is what the user
/// sees and what policy.toml says). So that a revoked token's grants do
/// not pass to the next token given the same name, the decisions stored
/// for `token:NAME` are forgotten when the token is revoked and again
/// before a token of that name is created: the second covers a decision
/// stored in the moment of the revocation (a prompt answered as it was
/// withdrawn) and a daemon stopped between the two writes. While no
/// token of the name exists, no request can add one. policy.toml's grants
/// are the user's own text naming the token by name and stay.
#[derive(Debug, Clone)]
pub(crate) struct Tokens {
    pub(crate) store: Arc<dyn TokenStore>,
    forget: Option<Arc<dyn Forget>>,
}

impl Tokens {
    pub(crate) fn new(store: Arc<dyn TokenStore>, forget: Option<Arc<dyn Forget>>) -> Self {
        Tokens { store, forget }
    }

    /// Create token `name` with no decisions (see [`Tokens`]); the secret.
    pub(crate) async fn create(&self, name: &str) -> Result<String, TokenError> {
        valid_name(name)?;
        if self.store.list().iter().any(|t| t.name == name) {
            return Err(TokenError::Exists(name.to_owned()));
        }
        self.forget_grants(name).await?;
        self.store.create(name).await
    }

    /// Revoke token `name`: it no longer verifies, everything it runs
    /// ends (its [`Bearer::life`]), and its decisions are forgotten.
    pub(crate) async fn revoke(&self, name: &str) -> Result<(), TokenError> {
        self.store.revoke(name).await?;
        // Its questions go before its decisions: one answered as it was
        // withdrawn is stored first and then forgotten.
        if let Some(forget) = &self.forget
            && let Ok(app) = AppId::from_token(name)
        {
            forget.withdraw_questions(&app).await;
        }
        self.forget_grants(name).await
    }

    async fn forget_grants(&self, name: &str) -> Result<(), TokenError> {
        let Some(forget) = &self.forget else {
            return Ok(());
        };
        let app = AppId::from_token(name).map_err(|e| TokenError::BadName(e.to_string()))?;
        let n = forget.forget_decisions(&app).await;
        if n > 0 {
            tracing::info!(app = %app, decisions = n, "forgot the decisions of a token's name");
        }
        Ok(())
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
/// creation time (what a store keeps), with the live token's [`Bearer`].
#[derive(Debug)]
pub(crate) struct TokenSet {
    key: hmac::Key,
    /// Per name: the tag, the creation time and the bearer.
    tokens: RwLock<BTreeMap<String, Live>>,
    rng: SystemRandom,
    /// The next [`Bearer::id`] (0 is [`Bearer::unrevocable`]'s).
    next_id: AtomicU64,
}

#[derive(Debug)]
struct Live {
    tag: Vec<u8>,
    created: DateTime<Utc>,
    bearer: Bearer,
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

impl TokenSet {
    pub(crate) fn new(key: &[u8], tokens: impl IntoIterator<Item = Stored>) -> TokenSet {
        let set = TokenSet {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            tokens: RwLock::new(BTreeMap::new()),
            rng: SystemRandom::new(),
            next_id: AtomicU64::new(1),
        };
        for t in tokens {
            set.insert(t);
        }
        set
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
        let bearer = Bearer {
            name: name.clone(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            life: CancellationToken::new(),
        };
        let old = self
            .tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                name,
                Live {
                    tag,
                    created,
                    bearer,
                },
            );
        if let Some(old) = old {
            old.bearer.life.cancel();
        }
    }

    /// Forget token `name`; what it runs ends (after it no longer
    /// verifies, so that nothing new starts under a cancelled life).
    pub(crate) fn remove(&self, name: &str) {
        let gone = self
            .tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        if let Some(gone) = gone {
            gone.bearer.life.cancel();
        }
    }

    pub(crate) fn list(&self) -> Vec<TokenInfo> {
        let tokens = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        tokens
            .iter()
            .map(|(name, t)| TokenInfo {
                name: name.clone(),
                created: t.created,
            })
            .collect()
    }

    pub(crate) fn verify(&self, presented: &str) -> Option<Bearer> {
        if presented.len() > MAX_TOKEN_LEN || !presented.starts_with(PREFIX) {
            return None;
        }
        let tokens = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        // Every stored tag is checked (no early exit on the name), each in
        // constant time.
        let mut found = None;
        for t in tokens.values() {
            if hmac::verify(&self.key, presented.as_bytes(), &t.tag).is_ok() {
                found = Some(t.bearer.clone());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attack: revoke `claude`, create a new `claude`; the old
    /// token's owner id, life and secret are none of the new one's.
    #[test]
    fn a_new_token_of_a_revoked_name_is_another_owner() {
        let key = new_key().expect("key");
        let set = TokenSet::new(&key, []);
        let (old_secret, tag) = set.mint("claude").expect("mint");
        set.insert(("claude".into(), tag, Utc::now()));
        let old = set.verify(&old_secret).expect("verifies");
        assert_eq!(old.name, "claude");
        assert!(!old.life.is_cancelled());
        set.remove("claude");
        assert!(old.life.is_cancelled(), "revoking ends what the token runs");
        assert!(set.verify(&old_secret).is_none());
        let (new_secret, tag) = set.mint("claude").expect("mint again");
        set.insert(("claude".into(), tag, Utc::now()));
        let new = set.verify(&new_secret).expect("verifies");
        assert_ne!(new.id, old.id);
        assert!(!new.life.is_cancelled());
        assert!(
            set.verify(&old_secret).is_none(),
            "the old secret stays dead"
        );
    }
}

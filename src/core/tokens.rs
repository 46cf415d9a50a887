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
//! token back out of the database, not even with its key. A check signs
//! the presented token once and compares that tag with every stored one
//! in constant time (one HMAC per request, however many tokens there are:
//! verifying against each tag with `hmac::verify` cost one HMAC per stored
//! token, an eighth of the daemon's time with 51 tokens under load). The
//! token itself is shown once, by `contextctl token create`.
//!
//! A token may expire (`contextctl token create NAME --expires 30d`; by
//! default it never does). From that moment it no longer verifies, and
//! [`Presented::Expired`] tells it apart from an unknown token so that the
//! host hears why (`mcp::http`: 401 "the token expired"). Everything it
//! runs ends then, exactly as on revocation: [`Tokens::end_at_expiries`]
//! cancels its [`Bearer::life`] and withdraws its questions. An expired
//! token stays listed (as expired) until it is revoked, and its
//! decisions stay with it: the user may want to look at what it was
//! allowed; revoking forgets them as for any token.
//!
//! Expiry is a time of day on the system clock, compared once per check
//! (no allocation on the way of a request that passes), whatever clock a
//! replay scripts for the rest of the core.
//!
//! The tags, names, creation and expiry times and the key live in the
//! encrypted database (`store::tokens` implements [`TokenStore`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, Utc};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
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
    #[error("the expiry {0} is not in the future")]
    Past(DateTime<Utc>),
    #[error("token database: {0}")]
    Db(String),
}

/// Where tokens live (`store::tokens::DbTokenStore`, in the encrypted
/// database). Checks are synchronous, from memory: every HTTP request makes
/// one; changes are written before they count.
pub(crate) trait TokenStore: Send + Sync + std::fmt::Debug {
    /// Create token `name`, good until `expires` (`None`: until revoked),
    /// and return the secret (shown once, never stored).
    fn create<'a>(
        &'a self,
        name: &'a str,
        expires: Option<DateTime<Utc>>,
    ) -> BoxFut<'a, Result<String, TokenError>>;
    fn list(&self) -> Vec<TokenInfo>;
    /// Remove token `name`; `Err(NoSuch)` when there is none. Its
    /// [`Bearer::life`] is cancelled once it no longer verifies.
    fn revoke<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<(), TokenError>>;
    /// What `presented` is: a live token, one of ours that expired, or
    /// nothing we know.
    fn verify(&self, presented: &str) -> Presented;
    /// End what the tokens whose expiry has come run (their
    /// [`Bearer::life`]), each once; the names of those ended now.
    fn end_expired(&self) -> Vec<String>;
    /// How long until the next token that still runs expires.
    fn next_expiry(&self) -> Option<Duration>;
}

/// What a presented bearer token is ([`TokenStore::verify`]).
#[derive(Debug, Clone)]
pub(crate) enum Presented {
    Live(Bearer),
    /// A token of ours whose expiry has come, by name: the answer says
    /// which one to make again (its holder has the secret, so the name
    /// tells them nothing new).
    Expired(String),
    /// Not a token of ours (never made, revoked, or not one at all).
    Unknown,
}

/// A live token as a request presents it: who owns what the request opens.
#[derive(Debug, Clone)]
pub(crate) struct Bearer {
    pub(crate) name: String,
    /// Unique to this token in this daemon's run: a token created later
    /// under the same name has another. What a session, stream or pending
    /// request is owned by.
    pub(crate) id: u64,
    /// Cancelled when the token is revoked or expires. Everything the
    /// token runs holds it (or a child of it) and ends with it.
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
    /// Told when a token is created or revoked: the next expiry may have
    /// changed ([`Tokens::end_at_expiries`]).
    rearm: Arc<Notify>,
}

/// The longest [`Tokens::end_at_expiries`] sleeps before it reads the
/// clock again. Its timer runs on the monotonic clock, which stands still
/// while the machine is suspended, and an expiry is a time of day: after
/// a resume past a token's expiry, what it runs ends within this long
/// (its requests are refused at once: every check reads the clock).
const RECHECK: Duration = Duration::from_secs(60);

impl Tokens {
    pub(crate) fn new(store: Arc<dyn TokenStore>, forget: Option<Arc<dyn Forget>>) -> Self {
        Tokens {
            store,
            forget,
            rearm: Arc::new(Notify::new()),
        }
    }

    /// Create token `name`, good until `expires` (`None`: until revoked),
    /// with no decisions (see [`Tokens`]); the secret.
    pub(crate) async fn create(
        &self,
        name: &str,
        expires: Option<DateTime<Utc>>,
    ) -> Result<String, TokenError> {
        valid_name(name)?;
        if self.store.list().iter().any(|t| t.name == name) {
            return Err(TokenError::Exists(name.to_owned()));
        }
        self.forget_grants(name).await?;
        let secret = self.store.create(name, expires).await?;
        self.rearm.notify_one();
        Ok(secret)
    }

    /// Revoke token `name`: it no longer verifies, everything it runs
    /// ends (its [`Bearer::life`]), and its decisions are forgotten.
    pub(crate) async fn revoke(&self, name: &str) -> Result<(), TokenError> {
        self.store.revoke(name).await?;
        self.rearm.notify_one();
        // Its questions go before its decisions: one answered as it was
        // withdrawn is stored first and then forgotten.
        self.withdraw_questions(name).await;
        self.forget_grants(name).await
    }

    /// End each token at its expiry, as [`Tokens::revoke`] ends what it
    /// runs (its [`Bearer::life`], its questions on the screen), but keep
    /// the token listed and its decisions; until `cancel`. One timer for
    /// the soonest expiry, set again when a token is created or revoked.
    pub(crate) async fn end_at_expiries(self, cancel: CancellationToken) {
        loop {
            for name in self.store.end_expired() {
                tracing::info!("token {name} expired");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    () = self.withdraw_questions(&name) => {}
                }
            }
            let wait = self.store.next_expiry().map(|d| d.min(RECHECK));
            tokio::select! {
                _ = cancel.cancelled() => return,
                () = self.rearm.notified() => {}
                () = tokio::time::sleep(wait.unwrap_or_default()), if wait.is_some() => {}
            }
        }
    }

    /// Withdraw the questions asked for token `name` (boundedly, see
    /// [`Forget::withdraw_questions`]).
    async fn withdraw_questions(&self, name: &str) {
        if let Some(forget) = &self.forget
            && let Ok(app) = AppId::from_token(name)
        {
            forget.withdraw_questions(&app).await;
        }
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

/// The tokens in memory: the HMAC key and, per name, the tag, the
/// creation and expiry times (what a store keeps), with the token's
/// [`Bearer`].
#[derive(Debug)]
pub(crate) struct TokenSet {
    key: hmac::Key,
    /// Per name: the tag, the times and the bearer.
    tokens: RwLock<BTreeMap<String, Live>>,
    rng: SystemRandom,
    /// The next [`Bearer::id`] (0 is [`Bearer::unrevocable`]'s).
    next_id: AtomicU64,
    /// What expiry is compared with (the system's; tests move a manual one).
    clock: Arc<dyn Clock>,
}

#[derive(Debug)]
struct Live {
    tag: Vec<u8>,
    created: DateTime<Utc>,
    expires: Option<DateTime<Utc>>,
    /// Its life is cancelled when the token expires (a revoked token
    /// leaves the set): in the set, a cancelled life means ended by its
    /// expiry.
    bearer: Bearer,
}

impl Live {
    fn expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expires.is_some_and(|e| e <= now)
    }
}

/// A new random HMAC key.
pub(crate) fn new_key() -> Result<Vec<u8>, TokenError> {
    let mut k = vec![0u8; KEY_LEN];
    SystemRandom::new()
        .fill(&mut k)
        .map_err(|_| TokenError::Random)?;
    Ok(k)
}

/// A stored token.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) name: String,
    /// HMAC-SHA256 of the token under the set's key.
    pub(crate) tag: Vec<u8>,
    pub(crate) created: DateTime<Utc>,
    /// `None`: never.
    pub(crate) expires: Option<DateTime<Utc>>,
}

impl TokenSet {
    pub(crate) fn new(
        key: &[u8],
        tokens: impl IntoIterator<Item = Stored>,
        clock: Arc<dyn Clock>,
    ) -> TokenSet {
        let set = TokenSet {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            tokens: RwLock::new(BTreeMap::new()),
            rng: SystemRandom::new(),
            next_id: AtomicU64::new(1),
            clock,
        };
        for t in tokens {
            set.insert(t);
        }
        // Tokens that expired while the daemon was not running: nothing
        // of theirs runs, and their end was logged when it came (or the
        // daemon was down): ended quietly.
        let ended = set.end_expired();
        if !ended.is_empty() {
            tracing::debug!(tokens = ?ended, "expired tokens kept until revoked");
        }
        set
    }

    /// The tokens, to read (a poisoned lock still holds consistent
    /// entries: every change is one map operation).
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Live>> {
        self.tokens.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Live>> {
        self.tokens.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Now, by the set's clock.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// A new secret for `name`, good until `expires`, and its tag
    /// (nothing is kept yet).
    pub(crate) fn mint(
        &self,
        name: &str,
        expires: Option<DateTime<Utc>>,
    ) -> Result<(String, Vec<u8>), TokenError> {
        valid_name(name)?;
        if self.contains(name) {
            return Err(TokenError::Exists(name.to_owned()));
        }
        if let Some(at) = expires
            && at <= self.clock.now()
        {
            return Err(TokenError::Past(at));
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
        self.read().contains_key(name)
    }

    pub(crate) fn insert(
        &self,
        Stored {
            name,
            tag,
            created,
            expires,
        }: Stored,
    ) {
        let bearer = Bearer {
            name: name.clone(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            life: CancellationToken::new(),
        };
        let old = self.write().insert(
            name,
            Live {
                tag,
                created,
                expires,
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
        let gone = self.write().remove(name);
        if let Some(gone) = gone {
            gone.bearer.life.cancel();
        }
    }

    pub(crate) fn list(&self) -> Vec<TokenInfo> {
        let now = self.clock.now();
        let tokens = self.read();
        tokens
            .iter()
            .map(|(name, t)| TokenInfo {
                created: t.created,
                expired: t.expired_at(now),
                expires: t.expires,
                name: name.clone(),
            })
            .collect()
    }

    pub(crate) fn verify(&self, presented: &str) -> Presented {
        if presented.len() > MAX_TOKEN_LEN || !presented.starts_with(PREFIX) {
            return Presented::Unknown;
        }
        // Once per check, before the lock: a clock read, no allocation.
        let now = self.clock.now();
        let tokens = self.read();
        let tag = hmac::sign(&self.key, presented.as_bytes());
        // Every stored tag is compared (no early exit on the name), each in
        // constant time.
        let mut found = None;
        for t in tokens.values() {
            if same_tag(tag.as_ref(), &t.tag) {
                found = Some(t);
            }
        }
        match found {
            None => Presented::Unknown,
            Some(t) if t.expired_at(now) => Presented::Expired(t.bearer.name.clone()),
            Some(t) => Presented::Live(t.bearer.clone()),
        }
    }

    /// See [`TokenStore::end_expired`].
    pub(crate) fn end_expired(&self) -> Vec<String> {
        let now = self.clock.now();
        let tokens = self.read();
        let mut ended = Vec::new();
        for t in tokens.values() {
            if t.expired_at(now) && !t.bearer.life.is_cancelled() {
                t.bearer.life.cancel();
                ended.push(t.bearer.name.clone());
            }
        }
        ended
    }

    /// See [`TokenStore::next_expiry`].
    pub(crate) fn next_expiry(&self) -> Option<Duration> {
        let now = self.clock.now();
        let tokens = self.read();
        tokens
            .values()
            .filter(|t| !t.bearer.life.is_cancelled())
            .filter_map(|t| t.expires)
            .min()
            .map(|at| (at - now).to_std().unwrap_or_default())
    }
}

/// Whether two tags are equal, in time that depends only on their lengths
/// (tags are all 32 bytes): every word is compared, with no exit at the
/// first that differs, and only the accumulated difference is looked at,
/// through `black_box`, so that the compiler keeps the loop whole. Eight
/// bytes at a time: with a `black_box` per byte, comparing with 51 tokens
/// was 7 % of the daemon's time under `make bench`'s HTTP load.
fn same_tag(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = wa
        .remainder()
        .iter()
        .zip(wb.remainder())
        .fold(0u64, |acc, (x, y)| acc | u64::from(x ^ y));
    let diff = wa.zip(wb).fold(tail, |acc, (x, y)| {
        let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
        acc | (word(x) ^ word(y))
    });
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::core::clock::{ManualClock, SystemClock};

    fn stored(name: &str, tag: Vec<u8>, expires: Option<DateTime<Utc>>) -> Stored {
        Stored {
            name: name.into(),
            tag,
            created: Utc::now(),
            expires,
        }
    }

    #[test]
    fn tags_are_equal_only_when_every_byte_is() {
        let a = [7u8; 32];
        assert!(same_tag(&a, &a));
        for i in [0, 15, 31] {
            let mut b = a;
            b[i] ^= 0x80;
            assert!(!same_tag(&a, &b), "differs at {i}");
        }
        assert!(!same_tag(&a, &a[..31]));
        let c = [3u8; 13];
        let mut d = c;
        d[12] = 4;
        assert!(
            same_tag(&c, &c) && !same_tag(&c, &d),
            "a tail shorter than a word counts"
        );
        assert!(!same_tag(&a[..0], &a));
    }

    /// With many tokens, each verifies as itself and none as another.
    #[test]
    fn each_of_many_tokens_is_itself() {
        let key = new_key().expect("key");
        let set = TokenSet::new(&key, [], Arc::new(SystemClock));
        let mut secrets = Vec::new();
        for i in 0..20 {
            let name = format!("t{i}");
            let (secret, tag) = set.mint(&name, None).expect("mint");
            set.insert(stored(&name, tag, None));
            secrets.push((name, secret));
        }
        for (name, secret) in &secrets {
            assert_eq!(&live(set.verify(secret)).name, name);
        }
        let (_, last) = &secrets[19];
        let mut forged = last.clone();
        let end = if forged.pop() == Some('A') { 'B' } else { 'A' };
        forged.push(end);
        assert!(matches!(set.verify(&forged), Presented::Unknown));
    }

    fn live(p: Presented) -> Bearer {
        match p {
            Presented::Live(b) => b,
            other => panic!("not live: {other:?}"),
        }
    }

    /// The attack: revoke `claude`, create a new `claude`; the old
    /// token's owner id, life and secret are none of the new one's.
    #[test]
    fn a_new_token_of_a_revoked_name_is_another_owner() {
        let key = new_key().expect("key");
        let set = TokenSet::new(&key, [], Arc::new(SystemClock));
        let (old_secret, tag) = set.mint("claude", None).expect("mint");
        set.insert(stored("claude", tag, None));
        let old = live(set.verify(&old_secret));
        assert_eq!(old.name, "claude");
        assert!(!old.life.is_cancelled());
        set.remove("claude");
        assert!(old.life.is_cancelled(), "revoking ends what the token runs");
        assert!(matches!(set.verify(&old_secret), Presented::Unknown));
        let (new_secret, tag) = set.mint("claude", None).expect("mint again");
        set.insert(stored("claude", tag, None));
        let new = live(set.verify(&new_secret));
        assert_ne!(new.id, old.id);
        assert!(!new.life.is_cancelled());
        assert!(
            matches!(set.verify(&old_secret), Presented::Unknown),
            "the old secret stays dead"
        );
    }

    /// The attack: keep using a token past its expiry. From that moment
    /// it does not verify, and says it expired (an unknown or a wrong
    /// secret still says nothing); it stays listed as expired, what it
    /// runs ends once, and a token without an expiry never ends.
    #[test]
    fn a_token_past_its_expiry_does_not_verify_and_says_it_expired() {
        let start = Utc::now();
        let clock = ManualClock::new(start);
        let set = TokenSet::new(&new_key().expect("key"), [], clock.clone());
        let at = start + chrono::Duration::hours(1);
        let (secret, tag) = set.mint("claude", Some(at)).expect("mint");
        set.insert(stored("claude", tag, Some(at)));
        let (forever, tag) = set.mint("forever", None).expect("mint");
        set.insert(stored("forever", tag, None));
        let bearer = live(set.verify(&secret));
        assert_eq!(
            set.next_expiry(),
            Some(std::time::Duration::from_secs(3600))
        );
        assert!(set.end_expired().is_empty());

        clock.advance(chrono::Duration::hours(1) - chrono::Duration::milliseconds(1));
        live(set.verify(&secret));
        clock.advance(chrono::Duration::milliseconds(1));
        assert!(
            matches!(set.verify(&secret), Presented::Expired(ref n) if n == "claude"),
            "verified at its expiry"
        );
        assert!(matches!(set.verify("ctxd_wrong"), Presented::Unknown));
        assert!(matches!(
            set.verify(&format!("{secret}x")),
            Presented::Unknown
        ));
        live(set.verify(&forever));
        // The check alone ends nothing: the timer does, once.
        assert!(!bearer.life.is_cancelled());
        assert_eq!(set.next_expiry(), Some(std::time::Duration::ZERO));
        assert_eq!(set.end_expired(), ["claude"]);
        assert!(bearer.life.is_cancelled(), "what it ran ends at its expiry");
        assert!(set.end_expired().is_empty(), "ended once");
        assert_eq!(set.next_expiry(), None, "nothing left to wait for");

        let list = set.list();
        let claude = list.iter().find(|t| t.name == "claude").expect("listed");
        assert!(claude.expired);
        assert_eq!(claude.expires, Some(at));
        let forever_info = list.iter().find(|t| t.name == "forever").expect("listed");
        assert!(!forever_info.expired);
        assert_eq!(forever_info.expires, None);
        // Still there, by name, until revoked.
        assert!(matches!(
            set.mint("claude", None),
            Err(TokenError::Exists(_))
        ));
        set.remove("claude");
        assert!(matches!(set.verify(&secret), Presented::Unknown));
        assert_eq!(set.list().len(), 1);
    }

    #[test]
    fn an_expiry_must_be_in_the_future_and_tokens_expired_at_load_are_ended() {
        let now = Utc::now();
        let clock = ManualClock::new(now);
        let set = TokenSet::new(&new_key().expect("key"), [], clock.clone());
        assert!(matches!(set.mint("a", Some(now)), Err(TokenError::Past(_))));
        assert!(matches!(
            set.mint("a", Some(now - chrono::Duration::days(1))),
            Err(TokenError::Past(_))
        ));
        assert!(
            set.mint("a", Some(now + chrono::Duration::seconds(1)))
                .is_ok()
        );

        // A token that expired while the daemon was stopped.
        let key = new_key().expect("key");
        let first = TokenSet::new(&key, [], clock.clone());
        let (secret, tag) = first
            .mint("old", Some(now + chrono::Duration::seconds(1)))
            .expect("mint");
        clock.advance(chrono::Duration::days(1));
        let set = TokenSet::new(
            &key,
            [stored("old", tag, Some(now + chrono::Duration::seconds(1)))],
            clock,
        );
        assert!(matches!(set.verify(&secret), Presented::Expired(_)));
        assert!(set.end_expired().is_empty(), "ended at load, quietly");
        assert_eq!(set.next_expiry(), None);
        assert!(set.list()[0].expired);
    }

    /// A store in memory, for [`Tokens`].
    #[derive(Debug)]
    struct Memory(TokenSet);

    impl TokenStore for Memory {
        fn create<'a>(
            &'a self,
            name: &'a str,
            expires: Option<DateTime<Utc>>,
        ) -> BoxFut<'a, Result<String, TokenError>> {
            Box::pin(async move {
                let (secret, tag) = self.0.mint(name, expires)?;
                self.0.insert(Stored {
                    name: name.into(),
                    tag,
                    created: self.0.now(),
                    expires,
                });
                Ok(secret)
            })
        }
        fn list(&self) -> Vec<TokenInfo> {
            self.0.list()
        }
        fn revoke<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<(), TokenError>> {
            Box::pin(async move {
                self.0.remove(name);
                Ok(())
            })
        }
        fn verify(&self, presented: &str) -> Presented {
            self.0.verify(presented)
        }
        fn end_expired(&self) -> Vec<String> {
            self.0.end_expired()
        }
        fn next_expiry(&self) -> Option<Duration> {
            self.0.next_expiry()
        }
    }

    /// What was forgotten and withdrawn, by app id.
    #[derive(Debug, Default)]
    struct Recorded {
        forgotten: Mutex<Vec<String>>,
        withdrawn: Mutex<Vec<String>>,
    }

    impl Forget for Recorded {
        fn forget_decisions<'a>(&'a self, app: &'a AppId) -> BoxFut<'a, usize> {
            self.forgotten
                .lock()
                .expect("lock")
                .push(app.as_str().to_owned());
            Box::pin(async { 0 })
        }
        fn withdraw_questions<'a>(&'a self, app: &'a AppId) -> BoxFut<'a, ()> {
            self.withdrawn
                .lock()
                .expect("lock")
                .push(app.as_str().to_owned());
            Box::pin(async {})
        }
    }

    /// The wall clock of paused tokio time: what the timer sleeps on and
    /// what the expiry is compared with move together.
    #[derive(Debug)]
    struct TokioClock {
        base: DateTime<Utc>,
        start: tokio::time::Instant,
    }

    impl Clock for TokioClock {
        fn now(&self) -> DateTime<Utc> {
            self.base + chrono::Duration::from_std(self.start.elapsed()).unwrap_or_default()
        }
    }

    /// One timer ends each token at its expiry (armed again by a token
    /// created after it started, and by one revoked before its time),
    /// withdraws its questions and keeps its decisions; revoking the
    /// expired token forgets them.
    #[tokio::test(start_paused = true)]
    async fn the_timer_ends_a_token_at_its_expiry_and_keeps_its_decisions() {
        let clock = Arc::new(TokioClock {
            base: Utc::now(),
            start: tokio::time::Instant::now(),
        });
        let set = TokenSet::new(&new_key().expect("key"), [], clock.clone());
        let recorded = Arc::new(Recorded::default());
        let tokens = Tokens::new(Arc::new(Memory(set)), Some(recorded.clone()));
        let cancel = CancellationToken::new();
        let timer = tokio::spawn(tokens.clone().end_at_expiries(cancel.clone()));
        // Let the timer start with nothing to wait for.
        tokio::task::yield_now().await;

        let soon = clock.now() + chrono::Duration::seconds(90);
        let secret = tokens.create("short", Some(soon)).await.expect("create");
        let sooner = clock.now() + chrono::Duration::seconds(30);
        tokens
            .create("dropped", Some(sooner))
            .await
            .expect("create");
        let forever = tokens.create("forever", None).await.expect("create");
        tokens.revoke("dropped").await.expect("revoke");
        let bearer = live(tokens.store.verify(&secret));
        let forgotten_before = recorded.forgotten.lock().expect("lock").len();

        tokio::time::timeout(Duration::from_secs(3600), bearer.life.cancelled())
            .await
            .expect("the token's life ends at its expiry");
        assert!(clock.now() >= soon, "ended before its expiry");
        assert!(matches!(
            tokens.store.verify(&secret),
            Presented::Expired(_)
        ));
        assert!(
            tokens
                .store
                .list()
                .iter()
                .any(|t| t.name == "short" && t.expired),
            "listed as expired"
        );
        live(tokens.store.verify(&forever));
        assert!(
            recorded
                .withdrawn
                .lock()
                .expect("lock")
                .contains(&"token:short".to_owned()),
            "its questions are withdrawn"
        );
        assert_eq!(
            recorded.forgotten.lock().expect("lock").len(),
            forgotten_before,
            "its decisions are kept"
        );

        tokens.revoke("short").await.expect("revoke");
        assert_eq!(
            recorded
                .forgotten
                .lock()
                .expect("lock")
                .last()
                .map(String::as_str),
            Some("token:short")
        );
        assert!(tokens.store.list().iter().all(|t| t.name != "short"));
        cancel.cancel();
        timer.await.expect("the timer ends with its level");
    }
}

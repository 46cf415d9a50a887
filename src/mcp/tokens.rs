//! Bearer tokens for MCP over HTTP. A token is its own consent subject
//! (`token:NAME`).
//!
//! Only an HMAC-SHA256 of each token is stored, keyed with a server key
//! kept in a separate file, so that a copy of the token list alone lets
//! nobody in; checks use ring's constant-time `hmac::verify`. The token
//! itself is shown once, by `contextctl token create`.
//!
//! Behind [`TokenStore`] so that the encrypted database can take over; the
//! file store keeps, in `$XDG_STATE_HOME/contextd/` (0700):
//! `mcp-tokens.json` (0600: names, hashes, creation times) and
//! `mcp-token.key` (0600: 32 random bytes).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use base64::Engine;
use chrono::{DateTime, Utc};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

pub const TOKENS_FILE: &str = "mcp-tokens.json";
pub const KEY_FILE: &str = "mcp-token.key";
/// Tokens start with this, so that they are recognisable in a config file
/// or a leak scanner.
pub const PREFIX: &str = "ctxd_";
const KEY_LEN: usize = 32;
const TOKEN_BYTES: usize = 32;
/// Tokens longer than this are not ours; refuse before hashing.
const MAX_TOKEN_LEN: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}: {reason}")]
    Corrupt { path: String, reason: String },
    #[error("invalid token name '{0}': use 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-'")]
    BadName(String),
    #[error("a token named '{0}' exists; revoke it first (contextctl token revoke {0})")]
    Exists(String),
    #[error("no token named '{0}'")]
    NoSuch(String),
    #[error("no randomness from the system")]
    Random,
}

/// One stored token, as `token list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub name: String,
    pub created: DateTime<Utc>,
}

/// Where tokens live.
pub trait TokenStore: Send + Sync + std::fmt::Debug {
    /// Create token `name` and return the secret (shown once, never stored).
    fn create(&self, name: &str) -> Result<String, TokenError>;
    fn list(&self) -> Vec<TokenInfo>;
    /// Remove token `name`; `Err(NoSuch)` when there is none.
    fn revoke(&self, name: &str) -> Result<(), TokenError>;
    /// The name of the token `presented` is, if it is one.
    fn verify(&self, presented: &str) -> Option<String>;
}

/// The store as the daemon uses it: revocations are also announced, so
/// that open HTTP sessions and SSE streams of a revoked token end at once
/// (every request checks the token anyway).
#[derive(Debug, Clone)]
pub struct Tokens {
    pub store: std::sync::Arc<dyn TokenStore>,
    revoked: tokio::sync::broadcast::Sender<String>,
}

impl Tokens {
    pub fn new(store: std::sync::Arc<dyn TokenStore>) -> Self {
        let (revoked, _) = tokio::sync::broadcast::channel(64);
        Tokens { store, revoked }
    }

    pub fn revoke(&self, name: &str) -> Result<(), TokenError> {
        self.store.revoke(name)?;
        let _ = self.revoked.send(name.to_owned());
        Ok(())
    }

    /// Names of tokens as they are revoked.
    pub fn revocations(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.revoked.subscribe()
    }
}

pub fn valid_name(name: &str) -> Result<(), TokenError> {
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

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// Hex HMAC-SHA256 of the token under the server key.
    hmac_sha256: String,
    created: DateTime<Utc>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    tokens: BTreeMap<String, Entry>,
}

/// The file implementation of [`TokenStore`].
#[derive(Debug)]
pub struct FileTokenStore {
    path: PathBuf,
    key: hmac::Key,
    tokens: RwLock<BTreeMap<String, Vec<u8>>>,
    created: RwLock<BTreeMap<String, DateTime<Utc>>>,
    rng: SystemRandom,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TokenError + '_ {
    move |error| TokenError::Io {
        path: path.display().to_string(),
        error,
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), TokenError> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl FileTokenStore {
    /// Open (creating when missing) the store in `dir`.
    pub fn open(dir: &Path) -> Result<FileTokenStore, TokenError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
        let rng = SystemRandom::new();
        let key_path = dir.join(KEY_FILE);
        let key = match std::fs::read(&key_path) {
            Ok(k) if k.len() == KEY_LEN => k,
            Ok(k) => {
                return Err(TokenError::Corrupt {
                    path: key_path.display().to_string(),
                    reason: format!(
                        "the key is {} bytes, expected {KEY_LEN}; every token made with it is lost, so remove this file and {TOKENS_FILE} and create new tokens",
                        k.len()
                    ),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut k = vec![0u8; KEY_LEN];
                rng.fill(&mut k).map_err(|_| TokenError::Random)?;
                write_private(&key_path, &k)?;
                k
            }
            Err(e) => return Err(io(&key_path)(e)),
        };
        let key = hmac::Key::new(hmac::HMAC_SHA256, &key);
        let path = dir.join(TOKENS_FILE);
        let file: File = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| TokenError::Corrupt {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File {
                version: 1,
                tokens: BTreeMap::new(),
            },
            Err(e) => return Err(io(&path)(e)),
        };
        let mut tokens = BTreeMap::new();
        let mut created = BTreeMap::new();
        for (name, e) in file.tokens {
            let h = unhex(&e.hmac_sha256).ok_or_else(|| TokenError::Corrupt {
                path: path.display().to_string(),
                reason: format!("the hash of token '{name}' is not hex"),
            })?;
            tokens.insert(name.clone(), h);
            created.insert(name, e.created);
        }
        Ok(FileTokenStore {
            path,
            key,
            tokens: RwLock::new(tokens),
            created: RwLock::new(created),
            rng,
        })
    }

    fn save(
        &self,
        tokens: &BTreeMap<String, Vec<u8>>,
        created: &BTreeMap<String, DateTime<Utc>>,
    ) -> Result<(), TokenError> {
        let file = File {
            version: 1,
            tokens: tokens
                .iter()
                .map(|(n, h)| {
                    (
                        n.clone(),
                        Entry {
                            hmac_sha256: hex(h),
                            created: created.get(n).copied().unwrap_or_else(Utc::now),
                        },
                    )
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| TokenError::Corrupt {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        write_private(&self.path, &bytes)
    }
}

impl TokenStore for FileTokenStore {
    fn create(&self, name: &str) -> Result<String, TokenError> {
        valid_name(name)?;
        let mut tokens = self.tokens.write().unwrap_or_else(|e| e.into_inner());
        let mut created = self.created.write().unwrap_or_else(|e| e.into_inner());
        if tokens.contains_key(name) {
            return Err(TokenError::Exists(name.to_owned()));
        }
        let mut secret = [0u8; TOKEN_BYTES];
        self.rng.fill(&mut secret).map_err(|_| TokenError::Random)?;
        let token = format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
        );
        let tag = hmac::sign(&self.key, token.as_bytes());
        tokens.insert(name.to_owned(), tag.as_ref().to_vec());
        created.insert(name.to_owned(), Utc::now());
        if let Err(e) = self.save(&tokens, &created) {
            tokens.remove(name);
            created.remove(name);
            return Err(e);
        }
        Ok(token)
    }

    fn list(&self) -> Vec<TokenInfo> {
        let created = self.created.read().unwrap_or_else(|e| e.into_inner());
        created
            .iter()
            .map(|(name, c)| TokenInfo {
                name: name.clone(),
                created: *c,
            })
            .collect()
    }

    fn revoke(&self, name: &str) -> Result<(), TokenError> {
        let mut tokens = self.tokens.write().unwrap_or_else(|e| e.into_inner());
        let mut created = self.created.write().unwrap_or_else(|e| e.into_inner());
        let Some(h) = tokens.remove(name) else {
            return Err(TokenError::NoSuch(name.chars().take(80).collect()));
        };
        let c = created.remove(name);
        if let Err(e) = self.save(&tokens, &created) {
            tokens.insert(name.to_owned(), h);
            if let Some(c) = c {
                created.insert(name.to_owned(), c);
            }
            return Err(e);
        }
        Ok(())
    }

    fn verify(&self, presented: &str) -> Option<String> {
        if presented.len() > MAX_TOKEN_LEN || !presented.starts_with(PREFIX) {
            return None;
        }
        let tokens = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        // Every stored hash is checked (no early exit on the name), each in
        // constant time.
        let mut found = None;
        for (name, tag) in tokens.iter() {
            if hmac::verify(&self.key, presented.as_bytes(), tag).is_ok() {
                found = Some(name.clone());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn create_verify_revoke_and_only_hashes_on_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("contextd");
        let store = FileTokenStore::open(&state).expect("open");
        let t = store.create("claude").expect("create");
        assert!(t.starts_with(PREFIX));
        assert!(matches!(store.create("claude"), Err(TokenError::Exists(_))));
        assert!(matches!(
            store.create("bad name"),
            Err(TokenError::BadName(_))
        ));
        assert_eq!(store.verify(&t).as_deref(), Some("claude"));
        assert_eq!(store.verify("ctxd_wrong"), None);
        let on_disk = std::fs::read_to_string(state.join(TOKENS_FILE)).expect("read");
        assert!(!on_disk.contains(&t[PREFIX.len()..]));
        for f in [TOKENS_FILE, KEY_FILE] {
            let m = std::fs::metadata(state.join(f)).expect("meta");
            assert_eq!(m.mode() & 0o777, 0o600, "{f}");
        }
        assert_eq!(
            std::fs::metadata(&state).expect("meta").mode() & 0o777,
            0o700
        );
        // A second open (a restart) knows the token.
        let again = FileTokenStore::open(&state).expect("reopen");
        assert_eq!(again.verify(&t).as_deref(), Some("claude"));
        assert_eq!(again.list().len(), 1);
        again.revoke("claude").expect("revoke");
        assert_eq!(again.verify(&t), None);
        assert!(matches!(again.revoke("claude"), Err(TokenError::NoSuch(_))));
    }
}

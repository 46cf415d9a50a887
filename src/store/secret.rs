//! The key itself and what can go wrong getting it: shared by every
//! place a key comes from (`key`: credentials and the key file;
//! `secret_service`), which therefore need not know each other.

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};

/// A raw SQLCipher key. Never logged: its Debug is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct DbKey(pub(crate) [u8; 32]);

impl fmt::Debug for DbKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DbKey(..)")
    }
}

impl Drop for DbKey {
    /// Wipe the key from memory when it is no longer needed (SQLCipher
    /// keeps its own copy for the open database).
    fn drop(&mut self) {
        for b in self.0.iter_mut() {
            // SAFETY: a valid, aligned &mut u8; volatile so the wipe is not
            // optimised away.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

impl DbKey {
    pub fn random() -> Result<DbKey, KeyError> {
        let mut k = [0u8; 32];
        SystemRandom::new()
            .fill(&mut k)
            .map_err(|_| KeyError::Random)?;
        Ok(DbKey(k))
    }

    /// 32 raw bytes, or 64 hex digits (with an optional trailing newline).
    pub fn parse(bytes: &[u8]) -> Option<DbKey> {
        if bytes.len() == 32 {
            let mut k = [0u8; 32];
            k.copy_from_slice(bytes);
            return Some(DbKey(k));
        }
        let text = std::str::from_utf8(bytes).ok()?.trim();
        if text.len() != 64 {
            return None;
        }
        let mut k = [0u8; 32];
        for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
            let s = std::str::from_utf8(chunk).ok()?;
            k[i] = u8::from_str_radix(s, 16).ok()?;
        }
        Some(DbKey(k))
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}: not a key (want 32 raw bytes or 64 hex digits)")]
    Malformed { path: String },
    #[error(
        "{path} is readable by other users (mode {mode:o}); refusing to use it. Fix with: chmod 600 {path}"
    )]
    TooOpen { path: String, mode: u32 },
    #[error("{path} belongs to uid {owner}, not to us ({us})")]
    WrongOwner { path: String, owner: u32, us: u32 },
    #[error("the Secret Service failed: {0}")]
    SecretService(String),
    #[error(
        "the database {db} exists but no key was found ({tried}); refusing to create a new key that could not open it"
    )]
    Missing { db: String, tried: String },
    #[error("the system's random generator failed")]
    Random,
}

//! One-time tickets that open the dashboard.
//!
//! `Consent1.OpenDashboard` (polkit-checked, so only the user's own
//! session gets one) asks the core for a URL; the dashboard redeems the
//! ticket in it once, for a session (a capability path and a cookie
//! scoped to it). A ticket is a bearer secret until then: it travels in
//! D-Bus replies, stdout and a 0600 file, never a command line, where
//! every user could read it. The core sits between the two
//! because publishers never talk to each other: D-Bus issues, the
//! dashboard redeems. Only a hash of each ticket is kept, so a memory dump
//! of the broker does not hold a usable link either.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use base64::Engine;
use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};

use super::error::{Error, Result};

/// How long an unused ticket is good for (the client cleans up by it too).
pub(crate) use crate::model::admin::TICKET_TTL;
/// Tickets outstanding at most; the oldest goes first.
const MAX_TICKETS: usize = 16;

#[derive(Debug, Default)]
pub(crate) struct Tickets {
    /// `http://127.0.0.1:PORT`, once the dashboard listens.
    base: OnceLock<String>,
    issued: Mutex<Vec<(digest::Digest, Instant)>>,
}

fn hash(ticket: &str) -> digest::Digest {
    digest::digest(&digest::SHA256, ticket.as_bytes())
}

/// 32 random bytes, URL-safe base64: what tickets, session ids and CSRF
/// tokens are made of.
pub(crate) fn random_token() -> Result<String> {
    let mut b = [0u8; 32];
    SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| Error::Failed("the system's random number generator failed".into()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

impl Tickets {
    /// The dashboard listens at `base` (set once, by the daemon).
    pub(crate) fn set_base(&self, base: String) {
        let _ = self.base.set(base);
    }

    pub(crate) fn issue(&self) -> Result<String> {
        let base = self.base.get().ok_or_else(|| {
            Error::Unavailable(
                "the dashboard is off ([dashboard] enabled = false in config.toml)".into(),
            )
        })?;
        let ticket = random_token()?;
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.retain(|(_, at)| at.elapsed() < TICKET_TTL);
        if issued.len() >= MAX_TICKETS {
            issued.remove(0);
        }
        issued.push((hash(&ticket), Instant::now()));
        Ok(format!("{base}/open?ticket={ticket}"))
    }

    /// Use `ticket`: true once, for a ticket issued less than
    /// [`TICKET_TTL`] ago.
    pub(crate) fn redeem(&self, ticket: &str) -> bool {
        let h = hash(ticket);
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.retain(|(_, at)| at.elapsed() < TICKET_TTL);
        // Comparing hashes: an early exit tells nothing about the ticket.
        match issued.iter().position(|(d, _)| d.as_ref() == h.as_ref()) {
            Some(i) => {
                issued.remove(i);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_opens_once() {
        let t = Tickets::default();
        assert!(t.issue().is_err(), "no dashboard, no ticket");
        t.set_base("http://127.0.0.1:1".into());
        let url = t.issue().expect("issued");
        let ticket = url.rsplit('=').next().expect("ticket");
        assert!(!t.redeem("not-a-ticket"));
        assert!(t.redeem(ticket));
        assert!(!t.redeem(ticket), "used twice");
    }
}

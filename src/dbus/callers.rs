//! Who is calling: the app identity of a bus peer, from the bus's own
//! credentials of the connection (never from anything the peer sends).
//!
//! Resolution costs a `GetConnectionCredentials` round trip and a few
//! /proc reads, so it is cached per unique name; unique names are never
//! reused on a bus, and the entry is dropped when the peer leaves.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

use zbus::fdo::DBusProxy;
use zbus::names::BusName;

use super::error::{Error, Result};
use crate::core::identity::{self, Identity};

/// A bus peer as the broker knows it.
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity: Identity,
    pub uid: u32,
}

impl std::ops::Deref for Caller {
    type Target = Identity;
    fn deref(&self) -> &Identity {
        &self.identity
    }
}

#[derive(Debug)]
pub struct Callers {
    dbus: DBusProxy<'static>,
    our_uid: u32,
    cache: Mutex<HashMap<String, Arc<Caller>>>,
}

impl Callers {
    pub fn new(dbus: DBusProxy<'static>) -> Self {
        Callers {
            dbus,
            // SAFETY: getuid(2) has no failure mode and touches no memory.
            our_uid: unsafe { libc::getuid() },
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The identity of the sender of a message.
    pub async fn identify(&self, sender: Option<&str>) -> Result<Arc<Caller>> {
        let sender = sender.ok_or_else(|| Error::Failed("message has no sender".into()))?;
        if let Some(id) = self.lock().get(sender) {
            return Ok(id.clone());
        }
        let name = BusName::try_from(sender.to_owned())
            .map_err(|e| Error::InvalidArgs(format!("bad sender name: {e}")))?;
        let creds = self
            .dbus
            .get_connection_credentials(name)
            .await
            .map_err(|e| Error::Failed(format!("cannot get credentials of {sender}: {e}")))?;
        let uid = creds.unix_user_id().unwrap_or(u32::MAX);
        if uid != self.our_uid && uid != 0 {
            return Err(Error::NotAllowed(format!(
                "{sender} runs as uid {uid}; contextd serves only its own user ({})",
                self.our_uid
            )));
        }
        let resolved = if let Some(fd) = creds.process_fd() {
            identity::resolve_pidfd(fd.as_fd())
        } else if let Some(pid) = creds.process_id() {
            identity::resolve_pid(pid)
        } else {
            return Err(Error::Failed(format!(
                "the bus gave no process for {sender}"
            )));
        };
        let id = Arc::new(Caller {
            identity: resolved
                .map_err(|e| Error::Failed(format!("cannot identify {sender}: {e}")))?,
            uid,
        });
        tracing::debug!(sender, app = %id.app_id, source = id.source.as_str(), "identified caller");
        self.lock().insert(sender.to_owned(), id.clone());
        Ok(id)
    }

    /// Forget a peer that left the bus.
    pub fn forget(&self, unique_name: &str) {
        self.lock().remove(unique_name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Caller>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

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
use crate::identity::{self, Identity};

/// A bus peer as the broker knows it.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) identity: Identity,
    pub(crate) uid: u32,
    /// The process's start time (clock ticks after boot), read before and
    /// after its identity was resolved and the same both times: with the
    /// PID it names this one process, which polkit checks again
    /// (`dbus::polkit`). 0 when `/proc` did not say.
    pub(crate) start_time: u64,
}

impl Caller {
    /// The consent subject this caller is, on D-Bus.
    pub(crate) fn subject(&self) -> crate::core::Subject {
        crate::core::Subject {
            app_id: self.identity.app_id.clone(),
            source: self.identity.source,
            channel: crate::core::Channel::DBus,
        }
    }

    /// The process polkit is asked about: the one identified.
    pub(crate) fn process(&self) -> super::polkit::Process {
        super::polkit::Process {
            pid: self.identity.pid,
            uid: self.uid,
            start_time: self.start_time,
        }
    }
}

impl std::ops::Deref for Caller {
    type Target = Identity;
    fn deref(&self) -> &Identity {
        &self.identity
    }
}

#[derive(Debug)]
pub(crate) struct Callers {
    dbus: DBusProxy<'static>,
    our_uid: u32,
    cache: Mutex<HashMap<String, Arc<Caller>>>,
}

impl Callers {
    pub(crate) fn new(dbus: DBusProxy<'static>) -> Self {
        Callers {
            dbus,
            // SAFETY: getuid(2) has no failure mode and touches no memory.
            our_uid: unsafe { libc::getuid() },
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The identity of the sender of a message.
    pub(crate) async fn identify(&self, sender: Option<&str>) -> Result<Arc<Caller>> {
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
        let started = creds.process_id().and_then(start_time);
        let resolved = if let Some(fd) = creds.process_fd() {
            identity::resolve_pidfd(fd.as_fd())
        } else if let Some(pid) = creds.process_id() {
            identity::resolve_pid(pid)
        } else {
            return Err(Error::Failed(format!(
                "the bus gave no process for {sender}"
            )));
        };
        let identity =
            resolved.map_err(|e| Error::Failed(format!("cannot identify {sender}: {e}")))?;
        // The start time read before the lookup must still be the
        // process's after it: else the PID changed hands in between.
        if started.is_some() && started != start_time(identity.pid) {
            return Err(Error::Failed(format!(
                "{sender}'s process exited while it was identified"
            )));
        }
        let id = Arc::new(Caller {
            identity,
            uid,
            start_time: started.unwrap_or(0),
        });
        tracing::debug!(sender, app = %id.app_id, source = id.source.as_str(), "identified caller");
        self.lock().insert(sender.to_owned(), id.clone());
        Ok(id)
    }

    /// Forget a peer that left the bus.
    pub(crate) fn forget(&self, unique_name: &str) {
        self.lock().remove(unique_name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Caller>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Who owns `name` on the bus now, as the bus says (`None`: nobody, or
/// the bus did not answer).
pub(crate) async fn name_owner(conn: &zbus::Connection, name: &str) -> Option<String> {
    let reply = conn
        .call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetNameOwner",
            &(name,),
        )
        .await
        .ok()?;
    reply.body().deserialize::<String>().ok()
}

/// The process start time (field 22 of /proc/PID/stat), which polkit uses
/// with the PID to tell a process from a later one with the same PID.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &[u8]) -> Option<u64> {
    // `comm` (field 2) may hold spaces and parentheses: the fields we
    // want follow the last `)`.
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_after_a_hostile_comm() {
        let stat = b"42 (a) b (c)) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time(b"42 (x"), None);
        assert_eq!(parse_start_time(b""), None);
        assert!(start_time(std::process::id()).is_some_and(|t| t > 0));
    }
}

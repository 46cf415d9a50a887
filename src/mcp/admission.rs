//! How much MCP work runs at once: the desktop comes first.
//!
//! A request of an MCP host takes a [`Ticket`] before its work starts and
//! gives it back when its answer has been sent (over HTTP, when the body
//! of the response ends, which for a streamed answer is after the
//! result). At most [`PER_HOST`] requests of one host (one bearer token
//! over HTTP, one connection over the stdio socket or a legacy SSE stream)
//! and [`IN_ALL`] of all hosts run at once; past that the request is not
//! queued: the host is told to come back ([`Busy`]: HTTP `429` for its own
//! bound, `503` for everyone's, both with `Retry-After`; a JSON-RPC error
//! with `retryAfter` in its data on stdio and legacy SSE). A waiting queue
//! would only move the wait into the broker, hold the memory of every
//! waiting request, and keep the MCP threads busy with work whose hosts
//! may have given up.
//!
//! The other half of "the desktop comes first" is what MCP work costs
//! while nobody asked for it: a session renders a change only for the
//! resources it subscribed to (`core::watch::Interest`). A lower CPU
//! priority for the MCP threads (nice 10) was tried and dropped: under
//! `make soak` D-Bus answered no sooner and MCP did a tenth of the work;
//! the MCP threads share the core's locks with the threads that answer
//! D-Bus, and a preempted one holding a lock makes D-Bus wait too.
//!
//! Notifications (no id, no answer) take no ticket: `notifications/cancelled`
//! must reach a busy host's work to end it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests of one host running at once.
pub(crate) const PER_HOST: usize = 8;
/// Requests of all hosts running at once.
pub(crate) const IN_ALL: usize = 64;
/// What a host told to come back is told to wait, in seconds.
pub(crate) const RETRY_AFTER_S: u64 = 1;

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Busy {
    #[error(
        "this MCP host has {PER_HOST} requests running already; try again in {RETRY_AFTER_S} s"
    )]
    Host,
    #[error("contextd is busy with other MCP hosts' requests; try again in {RETRY_AFTER_S} s")]
    All,
}

impl Busy {
    /// The JSON-RPC error data that says when to come back.
    pub(crate) fn data(self) -> serde_json::Value {
        serde_json::json!({ "retryAfter": RETRY_AFTER_S })
    }
}

/// Whose request it is, for the per-host bound: a bearer token (by its
/// `Bearer::id`) over HTTP, one connection or stream otherwise. Taken on
/// every request, so a plain copyable key rather than a string built each
/// time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Host {
    Token(u64),
    Connection(u64),
}

/// The bounds, shared by every MCP publisher of the daemon.
#[derive(Debug)]
pub(crate) struct Admission {
    all: Arc<Semaphore>,
    per_host: usize,
    running: Mutex<HashMap<Host, usize>>,
}

/// One admitted request; dropping it gives its place back.
#[derive(Debug)]
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    host: Host,
    _all: OwnedSemaphorePermit,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut running = self.admission.lock();
        if let Some(n) = running.get_mut(&self.host) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.remove(&self.host);
            }
        }
    }
}

impl Admission {
    pub(crate) fn new(in_all: usize, per_host: usize) -> Arc<Admission> {
        Arc::new(Admission {
            all: Arc::new(Semaphore::new(in_all)),
            per_host,
            running: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Host, usize>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one request of `host`, or why not. Never waits.
    pub(crate) fn enter(self: &Arc<Self>, host: Host) -> Result<Ticket, Busy> {
        let mut running = self.lock();
        let n = running.get(&host).copied().unwrap_or(0);
        if n >= self.per_host {
            return Err(Busy::Host);
        }
        let permit = self
            .all
            .clone()
            .try_acquire_owned()
            .map_err(|_| Busy::All)?;
        running.insert(host, n + 1);
        Ok(Ticket {
            admission: self.clone(),
            host,
            _all: permit,
        })
    }

    /// Requests running now, of everyone (for tests and the log).
    #[cfg(test)]
    fn running(&self) -> usize {
        self.lock().values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_cannot_take_everyone_s_places() {
        let a = Admission::new(3, 2);
        let t1 = a.enter(Host::Token(1)).expect("first");
        let _t2 = a.enter(Host::Token(1)).expect("second");
        assert_eq!(a.enter(Host::Token(1)).err(), Some(Busy::Host));
        let _t3 = a.enter(Host::Token(2)).expect("another host still gets in");
        assert_eq!(a.enter(Host::Connection(3)).err(), Some(Busy::All));
        drop(t1);
        let _t4 = a
            .enter(Host::Connection(3))
            .expect("a place given back is taken again");
        assert_eq!(a.running(), 3);
    }

    #[test]
    fn places_come_back_when_tickets_drop() {
        let a = Admission::new(2, 2);
        let tickets: Vec<_> = (0..2)
            .map(|_| a.enter(Host::Token(1)).expect("in"))
            .collect();
        drop(tickets);
        assert_eq!(a.running(), 0);
        assert!(a.lock().is_empty(), "no key left behind");
    }
}

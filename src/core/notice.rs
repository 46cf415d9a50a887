//! What changed for the user's control surfaces (settings panels, the
//! dashboard, `contextctl`): the decisions, the known apps, the audit log,
//! the prompts waiting, who publishes. Each part is a counter bumped when
//! it changes; a listener keeps the last counters it saw and asks which
//! parts moved, so that it can coalesce a burst into one signal and
//! re-read only what changed.

use tokio::sync::watch;

/// A part of what the user controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    /// Decisions and policy: what apps may see (also bumped by the gate's
    /// generation: expiries, pause).
    Grants,
    /// The apps the broker knows.
    Apps,
    /// The audit log (an access was recorded).
    Audit,
    /// Consent prompts waiting for the user.
    Pending,
    /// Who publishes what, and who is refused.
    Providers,
    /// Who is reading now (live subscriptions and MCP sessions).
    Readers,
}

impl Part {
    pub(crate) const ALL: [Part; 6] = [
        Part::Grants,
        Part::Apps,
        Part::Audit,
        Part::Pending,
        Part::Providers,
        Part::Readers,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Part::Grants => "grants",
            Part::Apps => "apps",
            Part::Audit => "audit",
            Part::Pending => "pending",
            Part::Providers => "providers",
            Part::Readers => "readers",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The counters of every part.
pub(crate) type Counters = [u64; Part::ALL.len()];

/// The counters; clones share them (the gate and the readers' registry
/// bump the same ones).
#[derive(Debug, Clone)]
pub(crate) struct Notices {
    tx: std::sync::Arc<watch::Sender<Counters>>,
}

impl Default for Notices {
    fn default() -> Self {
        Notices {
            tx: std::sync::Arc::new(watch::channel([0; Part::ALL.len()]).0),
        }
    }
}

impl Notices {
    /// `part` changed.
    pub(crate) fn bump(&self, part: Part) {
        self.tx
            .send_modify(|c| c[part.index()] = c[part.index()].wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Counters> {
        self.tx.subscribe()
    }
}

/// How long a burst of changes is gathered into one announcement.
pub(crate) const COALESCE: std::time::Duration = std::time::Duration::from_millis(100);
/// The audit part is announced at most this often: accesses can come by
/// the thousand a second.
pub(crate) const AUDIT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One control surface's view of the counters (a D-Bus panel's
/// `Changed`, the dashboard's event stream): each [`Listener::next`]
/// gives the parts that moved, gathered over [`COALESCE`], the audit at
/// most every [`AUDIT_EVERY`].
#[derive(Debug)]
pub(crate) struct Listener {
    rx: watch::Receiver<Counters>,
    seen: Counters,
    audit_at: Option<tokio::time::Instant>,
}

impl Listener {
    pub(crate) fn new(notices: &Notices) -> Self {
        let mut rx = notices.subscribe();
        let seen = *rx.borrow_and_update();
        Listener {
            rx,
            seen,
            audit_at: None,
        }
    }

    /// The next parts that moved (never empty), or `None` when `cancel`
    /// fires or the counters are gone.
    pub(crate) async fn next(
        &mut self,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Option<Vec<Part>> {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return None,
                r = self.rx.changed() => if r.is_err() { return None },
            }
            let mut wait = COALESCE;
            if moved(&self.seen, &self.rx.borrow()).contains(&Part::Audit)
                && let Some(at) = self.audit_at
            {
                wait = wait.max(AUDIT_EVERY.saturating_sub(at.elapsed()));
            }
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = tokio::time::sleep(wait) => {}
            }
            let now = *self.rx.borrow_and_update();
            let parts = moved(&self.seen, &now);
            self.seen = now;
            if parts.contains(&Part::Audit) {
                self.audit_at = Some(tokio::time::Instant::now());
            }
            if !parts.is_empty() {
                return Some(parts);
            }
        }
    }
}

/// The parts that moved between `before` and `now`.
pub(crate) fn moved(before: &Counters, now: &Counters) -> Vec<Part> {
    Part::ALL
        .into_iter()
        .filter(|p| before[p.index()] != now[p.index()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_sees_which_parts_moved() {
        let n = Notices::default();
        let rx = n.subscribe();
        let before = *rx.borrow();
        n.bump(Part::Apps);
        n.bump(Part::Audit);
        n.bump(Part::Audit);
        assert_eq!(moved(&before, &rx.borrow()), [Part::Apps, Part::Audit]);
    }
}

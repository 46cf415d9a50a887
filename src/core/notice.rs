//! What changed for the user's control surfaces (settings panels, the
//! dashboard, `contextctl`): the decisions, the known apps, the audit log,
//! the prompts waiting, who publishes. Each part is a counter bumped when
//! it changes; a listener keeps the last counters it saw and asks which
//! parts moved, so that it can coalesce a burst into one signal and
//! re-read only what changed.

use tokio::sync::watch;

/// A part of what the user controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
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
}

impl Part {
    pub const ALL: [Part; 5] = [
        Part::Grants,
        Part::Apps,
        Part::Audit,
        Part::Pending,
        Part::Providers,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Part::Grants => "grants",
            Part::Apps => "apps",
            Part::Audit => "audit",
            Part::Pending => "pending",
            Part::Providers => "providers",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The counters of every part.
pub type Counters = [u64; Part::ALL.len()];

#[derive(Debug)]
pub struct Notices {
    tx: watch::Sender<Counters>,
}

impl Default for Notices {
    fn default() -> Self {
        Notices {
            tx: watch::channel([0; Part::ALL.len()]).0,
        }
    }
}

impl Notices {
    /// `part` changed.
    pub fn bump(&self, part: Part) {
        self.tx
            .send_modify(|c| c[part.index()] = c[part.index()].wrapping_add(1));
    }

    pub fn subscribe(&self) -> watch::Receiver<Counters> {
        self.tx.subscribe()
    }
}

/// The parts that moved between `before` and `now`.
pub fn moved(before: &Counters, now: &Counters) -> Vec<Part> {
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

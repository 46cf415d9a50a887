//! The core: state, consent gate, identity, and the read service
//! ([`read`]) through which every publisher reads. No zbus, sqlx, rmcp,
//! wayland or pipewire type appears here; publishers and sources adapt to
//! it, and the store implements the traits it owns.

pub mod captures;
pub mod change;
pub mod clock;
pub mod consent;
pub mod error;
pub mod event;
pub mod gate;
pub mod history;
pub mod identity;
pub mod manage;
pub mod notice;
pub mod policy;
pub mod prompts;
pub mod provide;
pub mod read;
pub mod readers;
pub mod reports;
pub mod state;
pub mod tickets;
pub mod tokens;
pub mod view;
pub mod vocabulary;

use std::sync::Arc;

pub use clock::{Clock, SystemClock};
pub use consent::Channel;
pub use error::{Error, Result};
pub use event::SourceEvent;
pub use gate::{Decision, Gate, GateSettings};
pub use read::{Mode, Subject};
pub use state::{Change, ChangeKind, Snapshot, State};

/// The core as publishers see it.
#[derive(Debug)]
pub struct Core {
    /// Ourselves, for work that must outlive a borrow (a prompt's task).
    me: std::sync::Weak<Core>,
    pub state: State,
    pub gate: Gate,
    pub prompts: prompts::Prompts,
    /// Who publishes what (org.contextd.Provider1), beside the entries in
    /// the state.
    providers: provide::Providers,
    /// Who is reading now (`Consent1.ListReaders`).
    pub readers: readers::Readers,
    /// One-time tickets that open the dashboard.
    pub tickets: tickets::Tickets,
    pub clock: Arc<dyn Clock>,
    /// The timeline's read side, set once the daemon opened the store.
    history: std::sync::OnceLock<Arc<dyn history::HistoryStore>>,
    /// Who may report windows (the desktop shell), set by the daemon.
    reporters: std::sync::OnceLock<reports::Reporters>,
    /// Where the core's own tasks (a prompt) are spawned: the publishers'
    /// level of the shutdown tree, since prompts are asked for them, so
    /// that a stop ends and joins a prompt that is still showing.
    pub tasks: crate::shutdown::Level,
}

impl Core {
    pub fn with_gate(
        gate: Gate,
        clock: Arc<dyn Clock>,
        prompt_timeout: std::time::Duration,
        tasks: crate::shutdown::Level,
    ) -> Arc<Self> {
        let readers = readers::Readers::new(gate.notices.clone());
        Arc::new_cyclic(|me| Core {
            me: me.clone(),
            state: State::new(clock.clone()),
            gate,
            prompts: prompts::Prompts::new(prompt_timeout),
            providers: provide::Providers::default(),
            readers,
            tickets: tickets::Tickets::default(),
            clock,
            history: std::sync::OnceLock::new(),
            reporters: std::sync::OnceLock::new(),
            tasks,
        })
    }

    /// An owning handle to this core (always there while a `&Core` is).
    pub fn arc(&self) -> Option<Arc<Core>> {
        self.me.upgrade()
    }
}

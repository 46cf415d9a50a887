//! The core: state, consent gate, identity. No zbus, sqlx, rmcp, wayland or
//! pipewire type appears here; publishers and sources adapt to it.

pub mod captures;
pub mod clock;
pub mod error;
pub mod event;
pub mod gate;
pub mod identity;
pub mod policy;
pub mod state;
pub mod view;

use std::sync::Arc;

pub use clock::{Clock, SystemClock};
pub use error::{Error, Result};
pub use event::SourceEvent;
pub use gate::{Decision, Gate};
pub use state::{Change, ChangeKind, Snapshot, State};

/// The core as publishers see it.
#[derive(Debug)]
pub struct Core {
    pub state: State,
    pub gate: Gate,
    pub clock: Arc<dyn Clock>,
}

impl Core {
    pub fn new(policy_path: std::path::PathBuf, clock: Arc<dyn Clock>) -> Arc<Self> {
        Arc::new(Core {
            state: State::new(clock.clone()),
            gate: Gate::new(policy_path, clock.clone()),
            clock,
        })
    }
}

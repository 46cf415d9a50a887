//! The core: state, consent gate and the read service
//! ([`read`]) through which every publisher reads. No zbus, sqlx, rmcp,
//! wayland or pipewire type appears here; publishers and sources adapt to
//! it, and the store implements the traits it owns.
//!
//! Publishers see the core as a few narrow handles, each in the file of
//! its area and holding only the parts that area touches:
//! [`read::Reads`] (the gated reads), [`watch::Watches`] (the change
//! feeds), [`manage::Manage`] (the user's controls), [`provide::Provide`]
//! (what apps publish), [`prompts::Ask`] (asking the user),
//! [`reports::Reports`] (the shell's window reports) and
//! [`indicators::Indicators`] (who reads now). [`Core`] builds the parts
//! once and hands the handles out; the daemon gives each publisher the
//! ones it uses.

pub(crate) mod agents;
pub(crate) mod captures;
pub(crate) mod change;
pub(crate) mod clock;
pub(crate) mod consent;
pub(crate) mod cursor;
pub(crate) mod display;
pub(crate) mod drive;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod gate;
pub(crate) mod history;
pub(crate) mod indicators;
pub(crate) mod lane;
pub(crate) mod manage;
pub(crate) mod notice;
pub(crate) mod pending;
pub(crate) mod policy;
pub(crate) mod portable;
pub(crate) mod privacy;
pub(crate) mod prompts;
pub(crate) mod provide;
pub(crate) mod pump;
pub(crate) mod read;
pub(crate) mod readers;
pub(crate) mod reading;
pub(crate) mod reports;
pub(crate) mod state;
pub(crate) mod subject;
pub(crate) mod tickets;
pub(crate) mod tokens;
pub(crate) mod view;
pub(crate) mod vocabulary;
pub(crate) mod watch;

use std::sync::Arc;

pub(crate) use clock::{Clock, SystemClock};
pub(crate) use error::{Error, Result};
pub use event::SourceEvent;
pub(crate) use gate::{Gate, GateSettings};
pub(crate) use manage::RECOVERY_SOURCE;
pub(crate) use state::State;
pub(crate) use subject::{Channel, Mode, Subject};
pub(crate) use watch::{Follow, Item, Watch, Watcher};

/// The core's parts, built once, and the handles over them. Nothing
/// below this file names it: each area is its handle.
#[derive(Debug)]
pub(crate) struct Core {
    state: Arc<State>,
    gate: Arc<Gate>,
    reads: read::Reads,
    watches: watch::Watches,
    manage: manage::Manage,
    provide: provide::Provide,
    ask: prompts::Ask,
    reports: reports::Reports,
    indicators: indicators::Indicators,
}

impl Core {
    /// The core over `gate`. `tasks` is the level of the shutdown tree
    /// the core's own tasks (a prompt) run on: the publishers', since
    /// prompts are asked for them, so that a stop ends and joins a prompt
    /// that is still showing. `change_feed` is the state's broadcast's
    /// capacity.
    pub(crate) fn with_gate(
        gate: Gate,
        clock: Arc<dyn Clock>,
        prompt_timeout: std::time::Duration,
        tasks: crate::shutdown::Level,
        change_feed: usize,
    ) -> Arc<Self> {
        let gate = Arc::new(gate);
        let state = Arc::new(State::with_capacity(clock.clone(), change_feed));
        let readers = readers::Readers::new(gate.notices.clone());
        let providers = Arc::new(provide::Providers::default());
        let ask = prompts::Ask::new(
            prompts::Prompts::new(prompt_timeout),
            gate.clone(),
            providers.clone(),
            state.clone(),
            clock.clone(),
            tasks.clone(),
        );
        let reads = read::Reads::new(state.clone(), gate.clone(), clock.clone(), ask.clone());
        let watches = watch::Watches::new(
            state.clone(),
            gate.clone(),
            readers.clone(),
            clock.clone(),
            tasks,
        );
        let provide = provide::Provide::new(providers, state.clone(), gate.clone(), clock.clone());
        let manage = manage::Manage::new(
            state.clone(),
            gate.clone(),
            clock.clone(),
            readers.clone(),
            reads.clone(),
            ask.clone(),
            provide.clone(),
        );
        let indicators = indicators::Indicators::new(readers, gate.clone());
        Arc::new(Core {
            state,
            gate,
            reads,
            watches,
            manage,
            provide,
            ask,
            reports: reports::Reports::default(),
            indicators,
        })
    }

    /// The gated reads (every publisher that reads).
    pub(crate) fn reads(&self) -> read::Reads {
        self.reads.clone()
    }

    /// The change feeds (subscriptions, MCP sessions, the dashboard).
    pub(crate) fn watches(&self) -> watch::Watches {
        self.watches.clone()
    }

    /// The user's controls (`Consent1`, the admin socket, the dashboard).
    pub(crate) fn manage(&self) -> manage::Manage {
        self.manage.clone()
    }

    /// What apps publish (`Provider1`, the user's panels).
    pub(crate) fn provide(&self) -> provide::Provide {
        self.provide.clone()
    }

    /// Asking the user (the consent agents, the dashboard's questions).
    pub(crate) fn ask(&self) -> prompts::Ask {
        self.ask.clone()
    }

    /// The shell's window reports (`WindowReports1`).
    pub(crate) fn reports(&self) -> reports::Reports {
        self.reports.clone()
    }

    /// Who reads now (the tray icon).
    pub(crate) fn indicators(&self) -> indicators::Indicators {
        self.indicators.clone()
    }

    /// The state, for the daemon's plumbing only: it applies the sources'
    /// events and installs the timeline's observer. Publishers read
    /// through [`read::Reads`] and follow changes with [`watch::Watches`].
    pub(crate) fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// The gate, for the daemon's plumbing only: it loads policy.toml,
    /// wakes at expiries, hands the writers the notices. Publishers ask
    /// the handles, which say what they want.
    pub(crate) fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    /// Why the broker runs degraded, if it does ([`manage::Manage::recovery`]).
    pub(crate) fn recovery(&self) -> Option<String> {
        self.manage.recovery()
    }

    /// The timeline's store, once the daemon has opened it.
    pub(crate) fn set_history(&self, h: Arc<dyn history::HistoryStore>) {
        self.reads.set_history(h);
    }

    /// Who may report windows (the desktop shell), set by the daemon.
    pub(crate) fn set_window_reports(&self, reporters: reports::Reporters) {
        self.reports.set_window_reports(reporters);
    }

    /// Who may register as consent agent (from `config.toml`).
    pub(crate) fn set_agent_trust(&self, trust: agents::AgentTrust) {
        self.ask.set_agent_trust(trust);
    }

    /// Retry waiting revocations until `cancel` ([`pending::write_revocations`]).
    pub(crate) fn write_revocations(
        &self,
        cancel: tokio_util::sync::CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        pending::write_revocations(self.gate.clone(), self.state.clone(), cancel)
    }

    /// Keep who reads now up to date until `cancel`
    /// ([`indicators::Indicators::run_reading`]).
    pub(crate) fn run_reading(
        &self,
        window: std::time::Duration,
        cancel: tokio_util::sync::CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.indicators.clone().run_reading(window, cancel)
    }
}

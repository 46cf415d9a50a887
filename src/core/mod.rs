//! The core: state, consent gate and the read service
//! ([`read`]) through which every publisher reads. No zbus, sqlx, rmcp,
//! wayland or pipewire type appears here; publishers and sources adapt to
//! it, and the store implements the traits it owns.

pub(crate) mod agents;
pub(crate) mod captures;
pub(crate) mod change;
pub(crate) mod clock;
pub(crate) mod consent;
pub(crate) mod cursor;
pub(crate) mod display;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod gate;
pub(crate) mod history;
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

use crate::model;

pub(crate) use clock::{Clock, SystemClock};
pub(crate) use error::{Error, Result};
pub use event::SourceEvent;
pub(crate) use gate::{Gate, GateSettings};
pub(crate) use state::State;
pub(crate) use subject::{Channel, Mode, Subject};
pub(crate) use watch::{Follow, Item, Watch, Watcher};

/// The `ListSources` entry that says the broker runs degraded because its
/// database could not be used (`store::recovery`).
pub(crate) const RECOVERY_SOURCE: &str = "recovery";

/// The core as publishers see it.
#[derive(Debug)]
pub(crate) struct Core {
    /// Ourselves, for work that must outlive a borrow (a prompt's task).
    me: std::sync::Weak<Core>,
    state: State,
    gate: Gate,
    prompts: prompts::Prompts,
    /// Who publishes what (org.contextd.Provider1), beside the entries in
    /// the state.
    providers: provide::Providers,
    /// Who is reading now (`Consent1.ListReaders`).
    readers: readers::Readers,
    /// Who reads now, for the privacy indicators (`core::reading`).
    reading: reading::Feed,
    /// One-time tickets that open the dashboard.
    tickets: tickets::Tickets,
    clock: Arc<dyn Clock>,
    /// The timeline's read side, set once the daemon opened the store.
    history: std::sync::OnceLock<Arc<dyn history::HistoryStore>>,
    /// Who may report windows (the desktop shell), set by the daemon.
    reporters: std::sync::OnceLock<reports::Reporters>,
    /// Where the core's own tasks (a prompt) are spawned: the publishers'
    /// level of the shutdown tree, since prompts are asked for them, so
    /// that a stop ends and joins a prompt that is still showing.
    tasks: crate::shutdown::Level,
    /// The views of the last changes, shared by readers that see the same
    /// of them (`watch::Rendered`).
    rendered: watch::Rendered,
}

impl Core {
    pub(crate) fn with_gate(
        gate: Gate,
        clock: Arc<dyn Clock>,
        prompt_timeout: std::time::Duration,
        tasks: crate::shutdown::Level,
        change_feed: usize,
    ) -> Arc<Self> {
        let readers = readers::Readers::new(gate.notices.clone());
        Arc::new_cyclic(|me| Core {
            me: me.clone(),
            state: State::with_capacity(clock.clone(), change_feed),
            gate,
            prompts: prompts::Prompts::new(prompt_timeout),
            providers: provide::Providers::default(),
            readers,
            reading: reading::Feed::default(),
            tickets: tickets::Tickets::default(),
            clock,
            history: std::sync::OnceLock::new(),
            reporters: std::sync::OnceLock::new(),
            tasks,
            rendered: watch::Rendered::default(),
        })
    }

    /// An owning handle to this core (always there while a `&Core` is).
    pub(crate) fn arc(&self) -> Option<Arc<Core>> {
        self.me.upgrade()
    }

    /// The state, for the daemon's plumbing only: it applies the sources'
    /// events and installs the timeline's observer. Publishers read
    /// through [`Core::read`] and follow changes with [`Core::watch`].
    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    /// The gate, for the daemon's plumbing only: it loads policy.toml,
    /// wakes at expiries, hands the writers the notices. Publishers ask
    /// the methods below, which say what they want.
    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Now, by the core's clock (a test's manual clock included).
    pub(crate) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// The user decided for `app` and `category` (a panel, the dashboard).
    pub(crate) async fn record_decision(
        &self,
        app: &model::AppId,
        category: &model::Category,
        verdict: consent::Verdict,
        expires: Option<chrono::DateTime<chrono::Utc>>,
        origin: consent::Origin,
    ) -> Result<()> {
        self.gate
            .record(app, category, verdict, expires, origin)
            .await
            .map(|_| ())
    }

    /// Remove the user's decision for `app` and `category`: whether there
    /// was one.
    pub(crate) async fn revoke(
        &self,
        app: &model::AppId,
        category: &model::Category,
    ) -> Result<bool> {
        self.gate.revoke(app, category).await
    }

    /// Pause or resume sharing, for every publisher alike: readers hear
    /// it as [`Item::Paused`] / [`Item::Resumed`], the user's panels as
    /// the `grants` notice. Whether it changed.
    pub(crate) fn set_paused(&self, paused: bool) -> bool {
        self.gate.set_paused(paused)
    }

    /// Whether sharing is paused (for the user's own surfaces).
    pub(crate) fn paused(&self) -> bool {
        self.gate.paused()
    }

    /// Why the broker runs degraded (its database could not be used),
    /// if it does: undecided access is denied meanwhile.
    pub(crate) fn recovery(&self) -> Option<String> {
        self.gate.recovery()
    }

    /// Re-key the database (the user's `contextctl key rotate`); where
    /// the new key is kept.
    pub(crate) async fn rotate_key(&self) -> Result<String> {
        let store = self
            .gate
            .store()
            .ok_or_else(|| Error::Unavailable("no database".into()))?;
        store.rotate_key().await
    }

    /// The user acted on the recovery: end the degraded state (and its
    /// `recovery` entry in `ListSources`). Whether there was one.
    pub(crate) async fn end_recovery(&self) -> Result<bool> {
        let ended = self.gate.end_recovery().await?;
        if ended {
            self.state().apply(SourceEvent::SourceStatus {
                source: RECOVERY_SOURCE.into(),
                available: true,
                error: None,
            });
            self.gate.notices.bump(notice::Part::Grants);
        }
        Ok(ended)
    }

    /// Whether `app` holds a grant of `category` (lasting or for a while,
    /// paused or not): who may learn what only readers of it learn.
    pub(crate) fn granted(&self, app: &model::AppId, category: &model::Category) -> bool {
        self.gate.granted(app, category)
    }

    /// The prompts waiting for the user, oldest first.
    pub(crate) fn pending_prompts(&self) -> Vec<prompts::PendingView> {
        self.prompts.pending()
    }

    /// The user answered prompt `id`: false when it no longer waits.
    pub(crate) fn answer_prompt(&self, id: u64, answer: consent::Answer) -> bool {
        self.prompts.answer(id, answer)
    }

    /// Who asks the user (the D-Bus consent agents).
    pub(crate) fn set_prompter(&self, p: Arc<dyn prompts::Prompter>) {
        self.prompts.set_prompter(p);
    }

    /// While the returned surface lives (an open dashboard page), prompts
    /// with no other UI wait for it.
    pub(crate) fn prompt_surface(&self) -> prompts::Surface {
        self.prompts.surface()
    }

    /// The user ended reader `id`: false when there is none.
    pub(crate) fn end_reader(&self, id: u64) -> bool {
        self.readers.end(id)
    }

    /// What changed of what the user controls, for a panel's `Changed`.
    pub(crate) fn control_changes(&self) -> notice::Listener {
        notice::Listener::new(&self.gate.notices)
    }

    /// Put the user's never-share rules (`[privacy]`) in force, at once:
    /// titles and notifications they match are hidden from every reader
    /// and the timeline from the next change on, what their apps publish
    /// is withdrawn. Whether the rules changed.
    pub(crate) fn set_privacy(&self, user: privacy::PrivacySettings) -> bool {
        let before = self.state.privacy().rules();
        self.state.set_privacy(privacy::Rules::new(user));
        let changed = *before != *self.state.privacy().rules();
        if changed {
            self.withdraw_never_shared();
        }
        changed
    }

    /// The user's never-share rules in force (`[privacy]`).
    pub(crate) fn privacy_rules(&self) -> privacy::PrivacySettings {
        self.state.privacy().rules().user().clone()
    }

    /// Where the dashboard listens, for the links its tickets open.
    pub(crate) fn set_dashboard_base(&self, base: String) {
        self.tickets.set_base(base);
    }

    /// Use up a dashboard ticket: whether it was valid.
    pub(crate) fn redeem_ticket(&self, ticket: &str) -> bool {
        self.tickets.redeem(ticket)
    }
}

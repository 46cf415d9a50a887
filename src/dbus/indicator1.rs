//! `org.contextd.Indicator1`: the desktop shell's own privacy indicator
//! (the GNOME Shell extension) learns who reads and acts on its menu.
//! Documented in `dbus-interfaces/org.contextd.Indicator1.xml`.
//!
//! Only the shell may call, checked as `WindowReports1` checks it (its
//! executable, and its connection the owner of the shell's name): the
//! shell is the user's own UI, so it needs no polkit check (whose
//! `auth_self_keep` would ask for a password to draw an icon), and an app
//! cannot hide the indicator by claiming to show it. Its actions only
//! lower what is shared (End, Pause); resuming stays a management call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;

use super::Shared;
use super::error::{Error, Result};
use super::window_reports1::NameOwners;
use super::wire::{self, Dict};
use crate::core::reports;
use crate::shutdown::Level;

/// Whether the indicator is on (`[ui] indicator`), and which shell
/// connection shows its own (no StatusNotifierItem meanwhile).
#[derive(Debug)]
pub(crate) struct IndicatorState {
    pub(crate) enabled: AtomicBool,
    pub(crate) shell: watch::Sender<Option<String>>,
}

impl Default for IndicatorState {
    fn default() -> Self {
        IndicatorState {
            enabled: AtomicBool::new(true),
            shell: watch::channel(None).0,
        }
    }
}

pub(crate) struct Indicator1 {
    shared: Arc<Shared>,
    owners: Arc<NameOwners>,
}

impl Indicator1 {
    /// The caller must be the shell, over the connection that owns its
    /// name (asking the bus when the core does not know it as that).
    async fn check(&self, hdr: &Header<'_>) -> Result<String> {
        let (source, sender) = self.owners.shell_caller(&self.shared, hdr).await?;
        if !self.shared.core.reports.owns_shell_name(source, &sender) {
            let name = reports::bus_name(source).unwrap_or(source);
            return Err(Error::NotAllowed(format!(
                "only the shell's connection that owns {name} shows the indicator"
            )));
        }
        Ok(sender)
    }
}

#[interface(name = "org.contextd.Indicator1", introspection_docs = false)]
impl Indicator1 {
    /// The caller shows the indicator itself from now until it leaves the
    /// bus or calls `Unwatch`: it is sent `Changed`, and the broker shows
    /// no StatusNotifierItem. False when the indicator is off.
    #[zbus(out_args("enabled"))]
    async fn watch(&self, #[zbus(header)] hdr: Header<'_>) -> Result<bool> {
        let sender = self.check(&hdr).await?;
        if !self.shared.indicator.enabled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        self.shared.indicator.shell.send_replace(Some(sender));
        Ok(true)
    }

    async fn unwatch(&self, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        let sender = self.check(&hdr).await?;
        self.shared
            .indicator
            .shell
            .send_if_modified(|s| s.take_if(|s| *s == sender).is_some());
        Ok(())
    }

    /// Who reads now: each live reader, and each app that only read in
    /// the last seconds (`id` 0).
    #[zbus(out_args("readers"))]
    async fn list_reading(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        self.check(&hdr).await?;
        Ok(wire::dicts(&self.shared.core.indicators.reading_now())?)
    }

    /// End live reader `id`, as `Consent1.EndReader` does.
    #[zbus(out_args("ended"))]
    async fn end_reader(&self, id: u64, #[zbus(header)] hdr: Header<'_>) -> Result<bool> {
        self.check(&hdr).await?;
        let ended = self.shared.core.manage.end_reader(id);
        if ended {
            tracing::info!(id, "reader ended from the shell's indicator");
        }
        Ok(ended)
    }

    /// Pause all sharing, as `Consent1.SetPaused(true)` does.
    async fn pause(&self, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        self.check(&hdr).await?;
        if self.shared.core.manage.set_paused(true) {
            tracing::info!("sharing paused from the shell's indicator");
        }
        Ok(())
    }

    /// Whether sharing is paused.
    #[zbus(out_args("paused"))]
    async fn paused(&self, #[zbus(header)] hdr: Header<'_>) -> Result<bool> {
        self.check(&hdr).await?;
        Ok(self.shared.core.manage.paused())
    }

    /// Who reads (or the pause) changed: call `ListReading` again. Sent to
    /// the watching shell only.
    #[zbus(signal)]
    async fn changed(emitter: &SignalEmitter<'_>, anyone: bool) -> zbus::Result<()>;
}

/// The watching shell left the bus.
pub(crate) fn peer_gone(shared: &Shared, name: &str) {
    shared
        .indicator
        .shell
        .send_if_modified(|s| s.take_if(|s| s == name).is_some());
}

/// Serve the interface and send `Changed` to the watching shell when who
/// reads or the pause changes.
pub(crate) async fn serve(
    shared: &Arc<Shared>,
    owners: Arc<NameOwners>,
    level: &Level,
) -> zbus::Result<()> {
    shared
        .conn
        .object_server()
        .at(
            super::PATH,
            Indicator1 {
                shared: shared.clone(),
                owners,
            },
        )
        .await?;
    let shared = shared.clone();
    let cancel = level.token();
    level.spawn(async move {
        let mut reading = shared.core.indicators.follow_reading();
        let mut gate = shared.core.indicators.follow_gate();
        let mut shell = shared.indicator.shell.subscribe();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                r = reading.changed() => if r.is_err() { break },
                r = gate.changed() => if r.is_err() { break },
                r = shell.changed() => if r.is_err() { break },
            }
            let anyone = reading.borrow_and_update().anyone();
            let Some(dest) = shell.borrow_and_update().clone() else {
                continue;
            };
            let Ok(dest) = zbus::names::BusName::try_from(dest) else {
                continue;
            };
            match SignalEmitter::new(&shared.conn, super::PATH) {
                Ok(e) => {
                    let e = e.set_destination(dest);
                    if let Err(e) = Indicator1::changed(&e, anyone).await {
                        tracing::debug!(error = %e, "cannot send Indicator1.Changed");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot announce who reads"),
            }
        }
    });
    Ok(())
}

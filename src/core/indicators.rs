//! The indicators' handle: who reads now, for the privacy indicators
//! (the tray icon, the shell's `Indicator1`). What counts as reading is
//! `core::reading`'s; this keeps its feed up to date and answers the
//! menus. Its own file because it holds the gate, which keeps the reads'
//! marks (`reading::Marks`) and so imports `core::reading`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::gate::Gate;
use super::notice::Part;
use super::readers::{ReaderView, Readers};
use super::reading::{Feed, GRANULE_MS, Reading, ReadingView};
use crate::model::AppId;

/// The indicators' handle: who reads now, for the privacy indicators
/// (the tray icon). It holds the feed it keeps up to date
/// ([`Indicators::run_reading`]), the live readers and the gate (the
/// reads of the last moments, the pause).
#[derive(Debug, Clone)]
pub(crate) struct Indicators {
    reading: Arc<Feed>,
    readers: Readers,
    gate: Arc<Gate>,
}

impl Indicators {
    pub(crate) fn new(readers: Readers, gate: Arc<Gate>) -> Self {
        Indicators {
            reading: Arc::default(),
            readers,
            gate,
        }
    }

    /// Every live reader (as `Consent1.ListReaders` shows them).
    fn readers(&self) -> Vec<ReaderView> {
        self.readers.views(&self.gate)
    }

    /// Who reads now; changes when the set of apps reading or the live
    /// readers change (never more often: readers alone do not move it).
    pub(crate) fn follow_reading(&self) -> watch::Receiver<Reading> {
        self.reading.tx.subscribe()
    }

    /// Moves when what apps may see changes (a pause included), for an
    /// indicator that shows whether sharing is paused.
    pub(crate) fn follow_gate(&self) -> watch::Receiver<u64> {
        self.gate.watch_generation()
    }

    /// Everything reading now, for a menu: each live reader, then each
    /// app that only read in the window; by label.
    pub(crate) fn reading_now(&self) -> Vec<ReadingView> {
        let live = self.readers();
        let (recent, _) = self.gate.reads.recent();
        let apps = self.gate.apps();
        let mut out: Vec<ReadingView> = live
            .iter()
            .map(|r| {
                let label = r
                    .client
                    .clone()
                    .or_else(|| r.name.clone())
                    .unwrap_or_else(|| r.app_id.clone());
                ReadingView {
                    id: r.id,
                    app_id: r.app_id.clone(),
                    name: r.name.clone(),
                    icon: r.icon.clone(),
                    client: r.client.clone(),
                    transport: r.transport,
                    label,
                }
            })
            .collect();
        for app in recent {
            if live.iter().any(|r| r.app_id == app.as_str()) {
                continue;
            }
            let info = apps.iter().find(|a| a.app_id == app);
            let name = info.and_then(|a| a.display_name.clone());
            out.push(ReadingView {
                id: 0,
                app_id: app.to_string(),
                label: name.clone().unwrap_or_else(|| app.to_string()),
                name,
                icon: info.and_then(|a| a.icon.clone()),
                client: None,
                transport: "read",
            });
        }
        out.sort_by(|a, b| (&a.label, a.id).cmp(&(&b.label, b.id)));
        out
    }

    /// The set now.
    fn reading_set(&self) -> (Reading, Option<Duration>) {
        let (mut apps, next) = self.gate.reads.recent();
        let mut live = Vec::new();
        for r in self.readers() {
            live.push(r.id);
            if let Ok(app) = AppId::new(r.app_id) {
                apps.insert(app);
            }
        }
        live.sort_unstable();
        (Reading { apps, live }, next)
    }

    /// Keep [`Indicators::follow_reading`] up to date until `cancel`: reads
    /// within `window` count. Spawned once by the daemon.
    pub(crate) async fn run_reading(self, window: Duration, cancel: CancellationToken) {
        self.gate.reads.set_window(window);
        let mut notices = self.gate.notices.subscribe();
        let mut seen_readers = notices.borrow_and_update()[Part::Readers as usize];
        loop {
            let (now, next) = self.reading_set();
            self.reading.tx.send_if_modified(|r| {
                if *r == now {
                    return false;
                }
                tracing::debug!(
                    apps = now.apps.len(),
                    live = now.live.len(),
                    "who reads changed"
                );
                *r = now;
                true
            });
            // Past the window's end plus a granule, so that the read is
            // out of it when we look again.
            let sleep = next.map(|n| n + Duration::from_millis(GRANULE_MS));
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    () = self.gate.reads.woken() => break,
                    () = async {
                        match sleep {
                            Some(d) => tokio::time::sleep(d).await,
                            None => std::future::pending().await,
                        }
                    } => break,
                    r = notices.changed() => {
                        if r.is_err() {
                            return;
                        }
                        let n = notices.borrow_and_update()[Part::Readers as usize];
                        if n != seen_readers {
                            seen_readers = n;
                            break;
                        }
                    }
                }
            }
        }
    }
}

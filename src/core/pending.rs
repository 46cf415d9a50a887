//! Revocation always wins: a revoke or a deny is in force in memory the
//! moment the user makes it, whether or not the disk takes it. A write
//! that fails (a full or read-only disk) is kept here and retried every
//! [`RETRY`] until it is written, and said meanwhile: the `revocations`
//! entry of `ListSources` (`contextctl status`) and the log. The last
//! try is made when the broker stops, after the publishers (so that
//! space freed before a restart is used before the restart). What a
//! crash or a disk that never comes back loses is said in the README.
//!
//! Only the newest write per (app, category) is kept: a later decision
//! for the same pair replaces a waiting one, so that an old revocation
//! never undoes a newer grant.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Core;
use super::consent::PendingWrite;
use super::event::SourceEvent;
use super::gate::Gate;
use crate::model::{AppId, Category};

/// How often waiting writes are tried again.
pub(crate) const RETRY: Duration = Duration::from_secs(2);

/// The `ListSources` entry that says revocations wait to be written.
pub(crate) const SOURCE: &str = "revocations";

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gate {
    /// A newer decision for (app, category) was stored: what waited for
    /// the pair is obsolete.
    pub(super) fn superseded(&self, app: &AppId, category: &Category) {
        lock(&self.pending).retain(|w| w.key() != (app, category));
    }

    /// Write `w` now, or keep it for the retries.
    pub(super) async fn write_or_keep(&self, w: PendingWrite) {
        let (app, category) = w.key();
        self.superseded(app, category);
        if let Err(e) = self.write(&w).await {
            tracing::error!(
                error = %e,
                app = %app,
                category = %category,
                "a revocation is in force but could not be stored; retrying every {} s until it is",
                RETRY.as_secs()
            );
            lock(&self.pending).push(w);
        }
    }

    async fn write(&self, w: &PendingWrite) -> Result<(), super::Error> {
        let Some(store) = self.store() else {
            return Ok(());
        };
        match w {
            PendingWrite::Put(d) => store.put_decision(d.clone()).await,
            PendingWrite::Delete(a, c) => store
                .delete_decision(a.clone(), c.clone())
                .await
                .map(|_| ()),
        }
    }

    /// How many revocations wait to be written.
    pub(crate) fn pending_writes(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Try every waiting write once; how many still wait.
    pub(crate) async fn write_pending(&self) -> usize {
        let waiting: Vec<PendingWrite> = lock(&self.pending).clone();
        for w in waiting {
            if self.write(&w).await.is_ok() {
                let (app, category) = w.key();
                tracing::info!(%app, %category, "a waiting revocation is stored now");
                // Unless a newer write for the pair replaced it meanwhile.
                let mut p = lock(&self.pending);
                if let Some(i) = p.iter().position(|x| x.key() == (app, category)) {
                    let same = match (&p[i], &w) {
                        (PendingWrite::Put(a), PendingWrite::Put(b)) => a == b,
                        (PendingWrite::Delete(..), PendingWrite::Delete(..)) => true,
                        _ => false,
                    };
                    if same {
                        p.remove(i);
                    }
                }
            }
        }
        self.pending_writes()
    }
}

impl Core {
    /// Retry waiting revocations until `cancel`, then once more; say in
    /// `ListSources` while any wait. Runs in the writers' level.
    pub(crate) async fn write_revocations(self: Arc<Self>, cancel: CancellationToken) {
        let mut said = false;
        loop {
            let stop = tokio::select! {
                _ = cancel.cancelled() => true,
                _ = tokio::time::sleep(RETRY) => false,
            };
            let waiting = if self.gate.pending_writes() > 0 {
                self.gate.write_pending().await
            } else {
                0
            };
            if waiting > 0 {
                said = true;
                self.state().apply(SourceEvent::SourceStatus {
                    source: SOURCE.into(),
                    available: false,
                    error: Some(format!(
                        "{waiting} revocation(s) in force but not yet stored (the disk is full or read-only); retrying every {} s. They hold until contextd stops: free some space so that they outlive a restart",
                        RETRY.as_secs()
                    )),
                });
            } else if said {
                said = false;
                self.state().apply(SourceEvent::SourceStatus {
                    source: SOURCE.into(),
                    available: true,
                    error: None,
                });
            }
            if stop {
                if waiting > 0 {
                    tracing::error!(
                        waiting,
                        "stopping with revocations not stored: a restart will not know of them"
                    );
                }
                break;
            }
        }
    }
}

//! Revocation always wins: a revoke or a deny is in force in memory the
//! moment the user makes it, whether or not the disk takes it. A write
//! that fails (a full or read-only disk) is kept here and retried every
//! [`RETRY`] until it is written, and said meanwhile: the `revocations`
//! entry of `ListSources` (`contextctl status`) and the log. The last
//! try is made when the broker stops, after the publishers (so that
//! space freed before a restart is used before the restart).
//!
//! A restart never brings a revoked grant back, a crash included:
//! - **a full disk**: the store keeps room for revocations
//!   (`store::reserve`); a write the disk refuses gives it back and is
//!   tried again at once, so the revocation is in the database and
//!   outlives a crash and a reboot alike;
//! - **what the disk still does not take** (a read-only disk, a reserve
//!   another program's writes ate first) is kept in a journal off the
//!   database's disk, `$XDG_RUNTIME_DIR/contextd/pending-revocations`
//!   (0600, rewritten whole on every change, removed once everything is
//!   stored), read back at the next start: applied in memory over what
//!   the database holds and written when the disk takes it. The runtime
//!   directory is memory (tmpfs) and goes at logout or reboot: a reboot
//!   while the disk still refuses the write is the one case that loses
//!   it, and the README says so.
//!
//! Only the newest write per (app, category) is kept: a later decision
//! for the same pair replaces a waiting one, so that an old revocation
//! never undoes a newer grant.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::consent::{Origin, PendingWrite, StoredDecision, Verdict};
use super::event::SourceEvent;
use super::gate::Gate;
use super::state::State;
use crate::model::{AppId, Category};

/// How often waiting writes are tried again.
pub(crate) const RETRY: Duration = Duration::from_secs(2);

/// The `ListSources` entry that says revocations wait to be written.
pub(crate) const SOURCE: &str = "revocations";

/// The journal's name in the broker's runtime directory.
pub(crate) const JOURNAL: &str = "pending-revocations";

/// One line of the journal.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Line {
    Deny {
        app_id: String,
        category: String,
        origin: Origin,
        created: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<DateTime<Utc>>,
    },
    Revoke {
        app_id: String,
        category: String,
    },
}

impl Line {
    fn of(w: &PendingWrite) -> Line {
        match w {
            PendingWrite::Put(d) => Line::Deny {
                app_id: d.app.as_str().to_owned(),
                category: d.category.to_string(),
                origin: d.origin,
                created: d.created,
                expires: d.expires,
            },
            PendingWrite::Delete(a, c) => Line::Revoke {
                app_id: a.as_str().to_owned(),
                category: c.to_string(),
            },
        }
    }

    fn write(self) -> Option<PendingWrite> {
        Some(match self {
            Line::Deny {
                app_id,
                category,
                origin,
                created,
                expires,
            } => PendingWrite::Put(StoredDecision {
                app: AppId::new(app_id).ok()?,
                category: category.parse().ok()?,
                verdict: Verdict::Deny,
                expires,
                origin,
                created,
            }),
            Line::Revoke { app_id, category } => {
                PendingWrite::Delete(AppId::new(app_id).ok()?, category.parse().ok()?)
            }
        })
    }
}

/// Write `waiting` to the journal at `path` (replaced whole, through a
/// temporary file), or remove it when nothing waits.
fn save(path: &Path, waiting: &[PendingWrite]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if waiting.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let mut text = String::new();
    for w in waiting {
        text.push_str(&serde_json::to_string(&Line::of(w)).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_data()?;
    std::fs::rename(&tmp, path)
}

/// The writes in the journal at `path`; a line that cannot be read is
/// skipped and logged (the others still count).
fn load(path: &Path) -> Vec<PendingWrite> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::error!(error = %e, path = %path.display(), "cannot read the journal of waiting revocations");
            }
            return Vec::new();
        }
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let w = serde_json::from_str::<Line>(l).ok().and_then(Line::write);
            if w.is_none() {
                tracing::error!(line = l, path = %path.display(), "a line of the journal of waiting revocations cannot be read; skipped");
            }
            w
        })
        .collect()
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gate {
    /// A newer decision for (app, category) was stored: what waited for
    /// the pair is obsolete.
    pub(super) fn superseded(&self, app: &AppId, category: &Category) {
        let mut p = lock(&self.pending);
        let before = p.len();
        p.retain(|w| w.key() != (app, category));
        if p.len() != before {
            self.journal(&p);
        }
    }

    /// Keep the journal equal to `waiting` (called with the lock held, so
    /// that two changes never reach the file out of order).
    fn journal(&self, waiting: &[PendingWrite]) {
        if let Some(path) = self.journal.get()
            && let Err(e) = save(path, waiting)
        {
            tracing::error!(
                error = %e,
                path = %path.display(),
                "cannot keep the journal of waiting revocations: a crash before the disk takes them would lose them"
            );
        }
    }

    /// Where waiting writes are kept until stored; read what a previous
    /// run left there (a crash while the disk refused them): each is in
    /// force at once, over what the database holds, and waits to be
    /// written. How many were read.
    pub(crate) fn open_journal(&self, path: PathBuf) -> usize {
        let found = load(&path);
        if self.journal.set(path.clone()).is_err() {
            return 0;
        }
        if found.is_empty() {
            return 0;
        }
        tracing::warn!(
            count = found.len(),
            path = %path.display(),
            "revocations the disk had not taken before the last stop are in force again and wait to be written"
        );
        {
            let mut decisions = self.decisions.write().unwrap_or_else(|e| e.into_inner());
            for w in &found {
                match w {
                    PendingWrite::Put(d) => {
                        decisions
                            .entry(d.app.clone())
                            .or_default()
                            .insert(d.category.clone(), d.clone());
                    }
                    PendingWrite::Delete(a, c) => {
                        if let Some(m) = decisions.get_mut(a) {
                            m.remove(c);
                        }
                    }
                }
            }
        }
        let n = found.len();
        {
            let mut p = lock(&self.pending);
            for w in found {
                let (a, c) = w.key();
                let (a, c) = (a.clone(), c.clone());
                p.retain(|x| x.key() != (&a, &c));
                p.push(w);
            }
            self.journal(&p);
        }
        if n > 0 {
            self.pending_wake.notify_one();
        }
        self.bump();
        n
    }

    /// Write `w` now, or keep it for the retries.
    pub(super) async fn write_or_keep(&self, w: PendingWrite) {
        let (app, category) = w.key();
        self.superseded(app, category);
        let mut written = self.write(&w).await;
        if written.is_err() && self.store().is_some_and(|s| s.release_reserve()) {
            // The disk was full: the room kept for this is free now (and
            // is to be made again when the disk has room).
            self.pending_wake.notify_one();
            written = self.write(&w).await;
        }
        if let Err(e) = written {
            tracing::error!(
                error = %e,
                app = %app,
                category = %category,
                "a revocation is in force but could not be stored; retrying every {} s until it is",
                RETRY.as_secs()
            );
            let mut p = lock(&self.pending);
            p.push(w);
            self.journal(&p);
            drop(p);
            self.pending_wake.notify_one();
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
            let mut written = self.write(&w).await.is_ok();
            if !written && self.store().is_some_and(|s| s.release_reserve()) {
                written = self.write(&w).await.is_ok();
            }
            if written {
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
                        self.journal(&p);
                    }
                }
            }
        }
        self.pending_writes()
    }
}

/// Retry waiting revocations until `cancel`, then once more; say in
/// `ListSources` while any wait. Runs in the writers' level.
///
/// Every [`RETRY`] only while something waits or the room for the next
/// revocation is not there: then it sleeps until a write is kept or the
/// room given back (`Gate::pending_wake`), so that an idle broker does
/// not wake every two seconds to look at a file.
pub(crate) async fn write_revocations(
    gate: Arc<Gate>,
    state: Arc<State>,
    cancel: CancellationToken,
) {
    let mut said = false;
    let mut settled = false;
    loop {
        let stop = tokio::select! {
            _ = cancel.cancelled() => true,
            _ = tokio::time::sleep(RETRY), if !settled => false,
            _ = gate.pending_wake.notified(), if settled => false,
        };
        let waiting = if gate.pending_writes() > 0 {
            gate.write_pending().await
        } else {
            0
        };
        // Nothing waits, and there is room for the next one
        // (`store::reserve`), made now when the disk has it.
        settled = waiting == 0 && gate.store().is_none_or(|store| store.keep_reserve());
        if waiting > 0 {
            said = true;
            state.apply(SourceEvent::SourceStatus {
                source: SOURCE.into(),
                available: false,
                error: Some(format!(
                    "{waiting} revocation(s) in force but not yet stored (the disk is full or read-only); retrying every {} s. {}",
                    RETRY.as_secs(),
                    match gate.journal.get() {
                        Some(j) => format!("Kept meanwhile in {} (memory: a restart keeps them, a reboot does not); free some space or make the disk writable", j.display()),
                        None => "They hold until contextd stops (no runtime directory for a journal): free some space so that they outlive a restart".to_owned(),
                    }
                )),
            });
        } else if said {
            said = false;
            state.apply(SourceEvent::SourceStatus {
                source: SOURCE.into(),
                available: true,
                error: None,
            });
        }
        if stop {
            if waiting > 0 {
                tracing::error!(
                    waiting,
                    journal = ?gate.journal.get(),
                    "stopping with revocations not stored: they are in the journal, read at the next start (a reboot loses it)"
                );
            }
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_keeps_denies_and_revocations_and_goes_when_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL);
        let app = AppId::new("org.example.App".to_owned()).expect("app");
        let created: DateTime<Utc> = "2026-11-26T18:00:00Z".parse().expect("time");
        let waiting = vec![
            PendingWrite::Put(StoredDecision {
                app: app.clone(),
                category: "windows".parse().expect("category"),
                verdict: Verdict::Deny,
                expires: None,
                origin: Origin::Manage,
                created,
            }),
            PendingWrite::Delete(app.clone(), "media.capture".parse().expect("category")),
        ];
        save(&path, &waiting).expect("save");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path)
                .expect("journal")
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
        let back = load(&path);
        assert_eq!(back.len(), 2);
        match &back[0] {
            PendingWrite::Put(d) => {
                assert_eq!(d.app, app);
                assert_eq!(d.verdict, Verdict::Deny);
                assert_eq!(d.created, created);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(&back[1], PendingWrite::Delete(a, c) if a == &app && c.to_string() == "media.capture")
        );
        // A line that cannot be read is skipped, the others count.
        std::fs::write(
            &path,
            format!(
                "not json\n{}\n",
                std::fs::read_to_string(&path)
                    .expect("read")
                    .lines()
                    .nth(1)
                    .expect("line")
            ),
        )
        .expect("write");
        assert_eq!(load(&path).len(), 1);
        save(&path, &[]).expect("empty");
        assert!(!path.exists());
        save(&path, &[]).expect("empty twice");
    }
}

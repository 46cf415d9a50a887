//! Whether the database takes writes.
//!
//! A full disk must not take the broker down, lose what is already stored,
//! or make it hold what it cannot write in memory without end. SQLite rolls
//! back a transaction that finds no room (the file stays consistent) and
//! reads go on, so what the broker owes the user is to say so and to keep
//! going:
//!
//! - every writer of the store reports here, so that there is one answer
//!   to "is the database writable" and one place that logs it: an error
//!   with the path at the first failure, a line when writing works again;
//! - the answer is the `database` entry of `ListSources` (`contextctl
//!   status`, `contextctl sources`), unavailable with the reason and what
//!   was not recorded meanwhile; it appears only once something failed,
//!   so a healthy broker lists no such entry;
//! - the background writers (history, audit) drop what they could not
//!   write and count it here, instead of holding it: their queues are
//!   bounded, and the next write that succeeds marks the database
//!   available again;
//! - writes a user asked for (a grant, a revoke, a token) fail with
//!   `Unavailable` and a message that says the disk is full and that
//!   nothing was changed ([`Health::error`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::core::Error;

/// Told the database's problem (`Some`) or that it is writable again
/// (`None`).
pub(crate) type Report = Box<dyn Fn(Option<String>) + Send + Sync>;

/// What a failed write could not record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lost {
    /// Nothing kept in the background (a write the caller hears of).
    Nothing,
    /// Timeline operations of one batch.
    History(u64),
    /// Audit entries of one batch.
    Audit(u64),
}

/// The database's write health, shared by its writers (cheap to clone).
#[derive(Clone)]
pub(crate) struct Health(Arc<Inner>);

struct Inner {
    path: PathBuf,
    state: Mutex<State>,
    report: OnceLock<Report>,
}

#[derive(Default)]
struct State {
    /// The reason writes fail, while they do.
    failing: Option<String>,
    /// Not recorded since writes began to fail.
    lost_history: u64,
    lost_audit: u64,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("path", &self.0.path)
            .field("problem", &self.problem())
            .finish()
    }
}

/// Whether `e` says the disk (or the user's quota) is full: SQLite's
/// `SQLITE_FULL` (the unix VFS turns `ENOSPC` and `EDQUOT` into it), or an
/// I/O error of the file itself.
pub(crate) fn is_full(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => {
            primary_code(e) == Some(13) || d.message().contains("database or disk is full")
        }
        sqlx::Error::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
        ),
        _ => false,
    }
}

/// Whether `e` is the storage failing (full, read-only, an I/O error)
/// rather than the statement (a constraint, a bug): only those make the
/// database unavailable.
pub(crate) fn is_write_fault(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        // SQLITE_READONLY 8, SQLITE_IOERR 10, SQLITE_CANTOPEN 14.
        sqlx::Error::Database(_) => is_full(e) || matches!(primary_code(e), Some(8 | 10 | 14)),
        _ => false,
    }
}

/// SQLite's primary result code of `e`: the low byte of the extended code
/// that sqlx reports (`SQLITE_CORRUPT_INDEX` 779 is `SQLITE_CORRUPT` 11).
pub(crate) fn primary_code(e: &sqlx::Error) -> Option<i64> {
    match e {
        sqlx::Error::Database(d) => d
            .code()
            .and_then(|c| c.parse::<i64>().ok())
            .map(|c| c & 0xff),
        _ => None,
    }
}

impl Health {
    pub(crate) fn new(path: &Path) -> Health {
        Health(Arc::new(Inner {
            path: path.to_owned(),
            state: Mutex::new(State::default()),
            report: OnceLock::new(),
        }))
    }

    /// Where changes of health go (the daemon puts them in the snapshot).
    /// Set once; later calls are ignored.
    pub(crate) fn on_change(&self, report: impl Fn(Option<String>) + Send + Sync + 'static) {
        let _ = self.0.report.set(Box::new(report));
    }

    /// Why writes fail now, if they do.
    pub(crate) fn problem(&self) -> Option<String> {
        let s = self.lock();
        s.failing.as_ref().map(|_| self.describe(&s))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn describe(&self, s: &State) -> String {
        let reason = s.failing.as_deref().unwrap_or("");
        let mut lost = Vec::new();
        if s.lost_history > 0 {
            lost.push(format!("{} timeline changes", s.lost_history));
        }
        if s.lost_audit > 0 {
            lost.push(format!("{} audit entries", s.lost_audit));
        }
        let lost = if lost.is_empty() {
            String::new()
        } else {
            format!(" Not recorded so far: {}.", lost.join(" and "))
        };
        format!("{reason}{lost}")
    }

    /// A write failed with `e`; `lost` is what it dropped.
    pub(crate) fn failed(&self, e: &sqlx::Error, lost: Lost) {
        let reason = if is_full(e) {
            format!(
                "disk full: cannot write {}; reads go on, new grants, history and audit are not stored until space is freed (writing resumes by itself).",
                self.0.path.display()
            )
        } else {
            format!("cannot write {}: {e}.", self.0.path.display())
        };
        let message = {
            let mut s = self.lock();
            match lost {
                Lost::Nothing => {}
                Lost::History(n) => s.lost_history += n,
                Lost::Audit(n) => s.lost_audit += n,
            }
            if s.failing.is_none() {
                tracing::error!(path = %self.0.path.display(), error = %e, "{reason}");
            }
            s.failing = Some(reason);
            self.describe(&s)
        };
        if let Some(r) = self.0.report.get() {
            r(Some(message));
        }
    }

    /// A write succeeded: if writes were failing, they work again.
    pub(crate) fn wrote(&self) {
        let recovered = {
            let mut s = self.lock();
            if s.failing.is_none() {
                return;
            }
            let lost = (s.lost_history, s.lost_audit);
            *s = State::default();
            lost
        };
        tracing::info!(
            path = %self.0.path.display(),
            lost_timeline_changes = recovered.0,
            lost_audit_entries = recovered.1,
            "the database takes writes again"
        );
        if let Some(r) = self.0.report.get() {
            r(None);
        }
    }

    /// The error a caller gets for a write that failed with `e` (and the
    /// health is told): `Unavailable` with what to do when the disk is
    /// full, else `Failed`. Either way nothing was changed: the
    /// transaction was rolled back.
    pub(crate) fn error(&self, what: &str, e: sqlx::Error) -> Error {
        if is_write_fault(&e) {
            self.failed(&e, Lost::Nothing);
        }
        if is_full(&e) {
            Error::Unavailable(format!(
                "cannot store {what}: the disk holding {} is full; nothing was changed. Free some space and try again",
                self.0.path.display()
            ))
        } else {
            Error::Failed(format!("database: {e}"))
        }
    }
}

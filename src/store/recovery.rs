//! Opening the database without ever mistaking a bad file for a new one.
//!
//! A file at the database's path that cannot be used (empty, cut short,
//! damaged, another program's, of a newer schema, not opened by the key
//! in hand) is never repaired, overwritten or taken for a first start:
//! it is renamed aside, byte for byte, with its `-wal` and `-shm`, as
//! `contextd.db.broken-<UTC time>` (a name no program writes to), and a
//! new database is made in its place, which notes why. The broker then
//! runs *degraded* (`core::gate`): undecided access is denied, never
//! asked, until the user acts (`contextctl recovery dismiss`, or an
//! import); the note survives restarts. No new key is ever made while a
//! file is at the path.
//!
//! A database whose key is missing (the Secret Service item gone, the
//! key file deleted) is different: the file is likely fine and the key may
//! come back (an unlocked keyring, a restored key file), so it is left
//! where it is and the broker runs degraded on a database in memory,
//! every start, until the key is back or the user moves the file away.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::db::{Db, DbError, DbTasks};
use super::key::{self, KeyError, KeySource};

/// The database as opened, and whether the broker runs degraded.
pub(crate) struct Opened {
    pub db: Db,
    pub tasks: DbTasks,
    /// Where the key came from; `None` for a database in memory.
    pub key_source: Option<KeySource>,
    /// Why the broker is degraded, when it is (from this start or a
    /// recovery not yet dismissed).
    pub degraded: Option<String>,
    /// Whether the problem was found by this start (the user is told
    /// once, by a notification, when it is).
    pub found_now: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("{path}: cannot move the unusable database aside: {error}")]
    SetAside { path: String, error: std::io::Error },
    #[error("{0}")]
    Store(#[from] crate::core::Error),
}

/// The name an unusable file is moved to: beside it, with the time.
pub(crate) fn aside_name(path: &Path, now: DateTime<Utc>) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".broken-{}", now.format("%Y%m%dT%H%M%SZ")));
    PathBuf::from(name)
}

/// Rename `path` (and its `-wal`, `-shm`) aside; returns the new name of
/// the database file. Renaming keeps every byte and never needs room on
/// a full disk. An existing name is never replaced (a second problem in
/// the same second gets a counter).
pub(crate) fn set_aside(path: &Path, now: DateTime<Utc>) -> Result<PathBuf, RecoveryError> {
    let err = |error| RecoveryError::SetAside {
        path: path.display().to_string(),
        error,
    };
    let base = aside_name(path, now);
    let mut target = base.clone();
    let mut n = 1;
    while target.exists() {
        n += 1;
        let mut s = base.as_os_str().to_owned();
        s.push(format!(".{n}"));
        target = PathBuf::from(s);
    }
    for suffix in ["-wal", "-shm"] {
        let mut from = path.as_os_str().to_owned();
        from.push(suffix);
        let from = PathBuf::from(from);
        if from.exists() {
            let mut to = target.as_os_str().to_owned();
            to.push(suffix);
            std::fs::rename(&from, PathBuf::from(to)).map_err(err)?;
        }
    }
    std::fs::rename(path, &target).map_err(err)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(target)
}

/// Open the database at `db_path`, setting an unusable file aside and
/// running degraded rather than failing or starting afresh silently.
/// Errors only for what the user must fix before anything can run (a key
/// file others can read, a directory that cannot be written).
pub(crate) async fn open(
    state_dir: &Path,
    db_path: &Path,
    session: Option<&zbus::Connection>,
    now: DateTime<Utc>,
) -> Result<Opened, RecoveryError> {
    // What the bytes say without a key (empty, another program's, cut
    // short) is said before the key is looked for: a missing key would be
    // the wrong complaint.
    let mut moved: Option<(PathBuf, String)> = None;
    if let Err(e) = Db::inspect(db_path) {
        if !e.file_unusable() {
            return Err(e.into());
        }
        moved = Some((set_aside(db_path, now)?, e.to_string()));
    }
    let (key, source) = match key::load(state_dir, db_path, session).await {
        Ok(k) => k,
        Err(e @ KeyError::Missing { .. }) => {
            tracing::error!("{e}; running degraded on a database in memory");
            let (db, tasks) = Db::open_memory(db_path).await?;
            return Ok(Opened {
                db,
                tasks,
                key_source: None,
                degraded: Some(format!(
                    "{e}. Nothing is stored until the key is back: restore it (see docs/files-and-recovery.md, \"Losing the key\") and restart contextd."
                )),
                found_now: true,
            });
        }
        Err(e) => return Err(e.into()),
    };
    let (db, tasks) = match Db::open(db_path, &key, &source).await {
        Ok(opened) => opened,
        Err(e) if e.file_unusable() && moved.is_none() => {
            let to = set_aside(db_path, now)?;
            moved = Some((to, e.to_string()));
            Db::open(db_path, &key, &source).await?
        }
        Err(e) => return Err(e.into()),
    };
    db.set_key_home(source.clone(), key, session.cloned()).await;
    let found_now = moved.is_some();
    if let Some((to, reason)) = &moved {
        tracing::error!(
            moved_to = %to.display(),
            "{reason}; it was moved aside and a new database made: running degraded (undecided access is denied) until you act"
        );
        db.record_recovery(to, reason, now).await?;
    }
    Ok(Opened {
        db,
        tasks,
        key_source: Some(source),
        degraded: None,
        found_now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_aside_keeps_every_byte_and_never_replaces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("contextd.db");
        std::fs::write(&db, b"one").expect("db");
        std::fs::write(dir.path().join("contextd.db-wal"), b"wal").expect("wal");
        let now: DateTime<Utc> = "2026-11-26T15:30:00Z".parse().expect("time");
        let to = set_aside(&db, now).expect("aside");
        assert_eq!(to, dir.path().join("contextd.db.broken-20261126T153000Z"));
        assert_eq!(std::fs::read(&to).expect("read"), b"one");
        assert_eq!(
            std::fs::read(dir.path().join("contextd.db.broken-20261126T153000Z-wal")).expect("wal"),
            b"wal"
        );
        assert!(!db.exists());
        std::fs::write(&db, b"two").expect("db");
        let again = set_aside(&db, now).expect("aside");
        assert_ne!(again, to);
        assert_eq!(std::fs::read(&to).expect("read"), b"one");
        assert_eq!(std::fs::read(&again).expect("read"), b"two");
    }
}

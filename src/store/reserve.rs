//! Room kept for revocations: a file of [`SIZE`] bytes beside the
//! database (`contextd.db.reserve`), allocated while the disk has room,
//! given back when a revocation or a deny finds the disk full, so that
//! the write that must never be lost still finds room
//! (`core::pending`); made again once nothing waits and the disk has
//! room for it and as much again.
//!
//! Why a file on the database's own file system: a revocation the disk
//! took is in the database, so it outlives a crash and a reboot alike.
//! (What it does not cover, a read-only disk or a reserve some other
//! program's writes eat first, the journal of `core::pending` covers
//! until a reboot.) Only revocations and denies give it up: the timeline
//! and the audit log, which drop what a full disk refuses, never do.

use std::io;
use std::path::{Path, PathBuf};

/// Far more than a revocation takes (a few pages of the write-ahead log,
/// 4 KiB each), and enough for a timeline batch written meanwhile.
pub(crate) const SIZE: u64 = 512 * 1024;

/// The reserve of one database file.
#[derive(Debug)]
pub(crate) struct Reserve {
    path: PathBuf,
}

impl Reserve {
    /// The reserve of the database at `db`.
    pub(crate) fn beside(db: &Path) -> Reserve {
        let mut name = db.as_os_str().to_owned();
        name.push(".reserve");
        Reserve {
            path: PathBuf::from(name),
        }
    }

    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the reserve is there.
    pub(crate) fn held(&self) -> bool {
        self.path.metadata().is_ok_and(|m| m.len() >= SIZE)
    }

    /// Make the reserve if it is missing and the file system has room
    /// for it and as much again (a nearly full disk is not made full by
    /// it). Whether it is held now.
    pub(crate) fn keep(&self) -> bool {
        if self.held() {
            return true;
        }
        let Some(dir) = self.path.parent() else {
            return false;
        };
        match free_bytes(dir) {
            Ok(free) if free >= 2 * SIZE => {}
            _ => return false,
        }
        match allocate(&self.path) {
            Ok(()) => {
                tracing::debug!(path = %self.path.display(), "room for revocations reserved");
                true
            }
            Err(e) => {
                let _ = std::fs::remove_file(&self.path);
                tracing::debug!(error = %e, path = %self.path.display(), "cannot reserve room for revocations");
                false
            }
        }
    }

    /// Give the room back: whether there was any.
    pub(crate) fn release(&self) -> bool {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                tracing::warn!(
                    path = %self.path.display(),
                    "the disk is full: the room reserved for revocations is given back so that a revocation can be stored"
                );
                true
            }
            Err(_) => false,
        }
    }
}

fn free_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs(3) writes into the zeroed struct we own; `c` is a
    // valid NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// A file whose blocks are really allocated (not sparse, so that removing
/// it frees them): `posix_fallocate`, else written zeros. Written under a
/// temporary name and renamed, so that a half-made reserve is never taken
/// for one.
fn allocate(path: &Path) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    // SAFETY: posix_fallocate on a descriptor we own.
    let r = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, SIZE as libc::off_t) };
    if r != 0 {
        if r == libc::ENOSPC {
            let _ = std::fs::remove_file(&tmp);
            return Err(io::Error::from_raw_os_error(r));
        }
        let chunk = vec![0u8; 64 * 1024];
        for _ in 0..SIZE / chunk.len() as u64 {
            if let Err(e) = f.write_all(&chunk) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        }
    }
    if let Err(e) = f.sync_all().and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_released_and_kept_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Reserve::beside(&dir.path().join("contextd.db"));
        assert_eq!(r.path(), dir.path().join("contextd.db.reserve"));
        assert!(!r.held());
        assert!(r.keep());
        assert!(r.held());
        assert_eq!(std::fs::metadata(r.path()).expect("reserve").len(), SIZE);
        assert!(r.release());
        assert!(!r.held());
        assert!(!r.release(), "nothing left to give back");
        assert!(r.keep());
        assert!(r.held());
    }
}

//! `/proc/PID`, read through one directory fd (see the module docs of
//! `identity` for why), and the small file helpers every rule uses.

use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::{Identity, IdentityError, Result};
use crate::model::{AppId, IdentitySource};

/// Where the kernel's view of processes lives.
pub(super) const PROC: &str = "/proc";

/// `/proc/PID/cgroup`, `/proc/PID/stat` and fdinfo files are at most a few
/// KiB (a cgroup path is bounded by PATH_MAX per hierarchy).
pub(super) const MAX_PROC_FILE: usize = 64 * 1024;

/// Longest symlink target we read back from `/proc` (PATH_MAX plus the
/// kernel's " (deleted)" marker fits easily).
const MAX_LINK: usize = 16 * 1024;

/// An open `/proc/PID` directory: all reads about the process go through
/// it, so that they are all about the same process (see the `identity`
/// module docs).
pub(super) struct ProcDir {
    pub(super) dir: File,
    /// For error messages only; never opened again by path.
    pub(super) path: PathBuf,
    pub(super) pid: u32,
}

impl ProcDir {
    pub(super) fn open(proc_root: &Path, pid: u32) -> Result<Self> {
        if pid == 0 || i32::try_from(pid).is_err() {
            return Err(IdentityError::InvalidPid { pid });
        }
        let path = proc_root.join(pid.to_string());
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOCTTY)
            .open(&path)
            .map_err(|e| gone_or_unreadable(pid, &path, e))?;
        Ok(ProcDir { dir, path, pid })
    }

    pub(super) fn identity(&self, id: String, source: IdentitySource) -> Result<Identity> {
        let app_id = AppId::new(id).map_err(|e| self.no_id(e.to_string()))?;
        // A unit names an unsandboxed process; its executable says whether
        // it is one of ours (`contextctl` in a terminal's scope).
        let executable = match source {
            IdentitySource::Systemd => self.executable().ok().map(PathBuf::from),
            _ => None,
        };
        Ok(Identity {
            app_id,
            source,
            pid: self.pid,
            executable,
        })
    }

    pub(super) fn read(&self, name: &CStr, limit: usize) -> Result<Vec<u8>> {
        let file = open_at(&self.dir, name, 0).map_err(|e| self.fail_c(name, e))?;
        read_limited(file, limit).map_err(|e| self.fail_c(name, e))
    }

    fn fail_c(&self, name: &CStr, e: io::Error) -> IdentityError {
        self.fail(&name.to_string_lossy(), e)
    }

    pub(super) fn fail(&self, name: &str, e: io::Error) -> IdentityError {
        gone_or_unreadable(self.pid, &self.path.join(name), e)
    }

    pub(super) fn no_id(&self, reason: String) -> IdentityError {
        IdentityError::NoUsableId {
            pid: self.pid,
            reason,
        }
    }
}

/// `ENOENT`/`ESRCH` under `/proc/PID` mean the process is gone (or, via
/// a pinned directory, that the process it was opened for is).
fn gone_or_unreadable(pid: u32, path: &Path, e: io::Error) -> IdentityError {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => IdentityError::ProcessGone { pid },
        _ => IdentityError::Unreadable {
            path: path.to_owned(),
            source: e,
        },
    }
}

/// `openat(2)` read-only, close-on-exec, never acquiring a terminal.
pub(super) fn open_at(dir: &File, name: &CStr, flags: libc::c_int) -> io::Result<File> {
    let flags = flags | libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY;
    // SAFETY: `dir` is an open fd for the duration of the call and `name`
    // is NUL-terminated.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new fd that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `readlinkat(2)`, growing the buffer until the target fits.
pub(super) fn read_link_at(dir: &File, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 512];
    loop {
        // SAFETY: `dir` is an open fd, `name` is NUL-terminated, and `buf`
        // is writable for `buf.len()` bytes.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        // readlink truncates silently; a full buffer may be a cut target.
        if n < buf.len() {
            buf.truncate(n);
            // The target outlives the call (a caller's executable is kept
            // for as long as its connection): keep its bytes, not the
            // buffer's 512.
            buf.shrink_to_fit();
            return Ok(buf);
        }
        if buf.len() >= MAX_LINK {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "symbolic link target too long",
            ));
        }
        buf.resize(buf.len() * 2, 0);
    }
}

/// Read at most `limit` bytes; more is an error rather than a truncation,
/// so that we never parse half a file.
pub(super) fn read_limited(file: File, limit: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(buf)
}

/// [`super::parent_pid`] against another `/proc`.
pub(super) fn parent_pid_in(proc_root: &Path, pid: u32) -> Result<u32> {
    let dir = ProcDir::open(proc_root, pid)?;
    let stat = dir.read(c"stat", MAX_PROC_FILE)?;
    parse_stat_ppid(&stat).ok_or_else(|| IdentityError::Malformed {
        path: dir.path.join("stat"),
        reason: "no parent PID after the command name",
    })
}

/// The parent PID in the contents of `/proc/PID/stat`.
///
/// The command name (field 2) is chosen by the process, may contain
/// spaces, parentheses and non-UTF-8 bytes, and is not escaped; only the
/// *last* `)` reliably ends it, because nothing after it can contain one.
fn parse_stat_ppid(stat: &[u8]) -> Option<u32> {
    let end_of_comm = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(end_of_comm + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::test_support::{FakeProc, sleeper};

    #[test]
    fn pinned_proc_dir_does_not_outlive_its_process() {
        // What makes the lookup race-free once /proc/PID is open: reads
        // through the directory fail after the process is reaped, rather
        // than reaching whoever gets the PID next.
        let mut child = sleeper();
        let dir = ProcDir::open(Path::new(PROC), child.0.id()).unwrap();
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let err = dir.resolve().unwrap_err();
        assert!(matches!(err, IdentityError::ProcessGone { .. }), "{err}");
        let err = dir.read(c"cgroup", MAX_PROC_FILE).unwrap_err();
        assert!(matches!(err, IdentityError::ProcessGone { .. }), "{err}");
    }

    #[test]
    fn fake_missing_pieces() {
        let proc = FakeProc::new();
        assert!(matches!(
            proc.resolve(500),
            Err(IdentityError::ProcessGone { pid: 500 })
        ));

        let dir = proc.process(501, "0::/\n", "/usr/bin/true");
        std::fs::remove_file(dir.join("exe")).unwrap();
        assert!(matches!(
            proc.resolve(501),
            Err(IdentityError::ProcessGone { pid: 501 })
        ));

        let dir = proc.process(502, "0::/\n", "/usr/bin/true");
        std::fs::remove_dir(dir.join("root")).unwrap();
        std::fs::write(dir.join("root"), "not a directory").unwrap();
        let err = proc.resolve(502).unwrap_err();
        assert!(matches!(err, IdentityError::Unreadable { .. }), "{err}");
    }

    #[test]
    fn stat_ppid() {
        assert_eq!(
            parse_stat_ppid(b"1234 ((a) b (c)) S 42 1234 1234 0 -1 4194560 0 0"),
            Some(42)
        );
        assert_eq!(
            parse_stat_ppid(b"1 (systemd) S 0 1 1 0 -1 4194560"),
            Some(0)
        );
        assert_eq!(parse_stat_ppid(b"7 (x\n) R) Z 99 7"), Some(99));
        assert_eq!(parse_stat_ppid(b"7 (\xff\xfe)) S 5 7"), Some(5));
        assert_eq!(parse_stat_ppid(b"7 (x) S"), None);
        assert_eq!(parse_stat_ppid(b"7 (x) S -1"), None);
        assert_eq!(parse_stat_ppid(b"garbage"), None);
        assert_eq!(parse_stat_ppid(b""), None);
    }

    #[test]
    fn fake_parent_pid() {
        let proc = FakeProc::new();
        let dir = proc.process(600, "0::/\n", "/usr/bin/true");
        std::fs::write(
            dir.join("stat"),
            "600 ((a) b (c)) S 77 600 600 0 -1 4194560 0 0 0 0\n",
        )
        .unwrap();
        assert_eq!(parent_pid_in(proc.dir.path(), 600).unwrap(), 77);
        std::fs::write(dir.join("stat"), "600 (x").unwrap();
        let err = parent_pid_in(proc.dir.path(), 600).unwrap_err();
        assert!(matches!(err, IdentityError::Malformed { .. }), "{err}");
    }
}

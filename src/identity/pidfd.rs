//! A pidfd (the `ProcessFD` of D-Bus `GetConnectionCredentials`) tied to
//! `/proc/PID`: its PID from fdinfo, and the check that its process is
//! still alive, so that the directory we read is that process's (see
//! [`super::resolve_pidfd`]).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::PathBuf;

use super::procfs::{MAX_PROC_FILE, PROC, read_limited};
use super::{IdentityError, Result};

pub(super) enum PidfdPid {
    Alive(u32),
    Exited,
}

/// The PID of a pidfd's process, from the `Pid:` line of its fdinfo
/// (Linux 5.3+; the value is -1 once the process has been reaped).
pub(super) fn pidfd_pid(fd: BorrowedFd<'_>) -> Result<PidfdPid> {
    let path = PathBuf::from(format!("{PROC}/self/fdinfo/{}", fd.as_raw_fd()));
    let file = File::open(&path).map_err(|e| IdentityError::Unreadable {
        path: path.clone(),
        source: e,
    })?;
    let contents = read_limited(file, MAX_PROC_FILE).map_err(|e| IdentityError::Unreadable {
        path: path.clone(),
        source: e,
    })?;
    let pid =
        parse_fdinfo_pid(&String::from_utf8_lossy(&contents)).ok_or(IdentityError::BadPidfd {
            reason: "its fdinfo has no Pid line",
        })?;
    match pid {
        -1 => Ok(PidfdPid::Exited),
        // The kernel reports 0 for a process outside our PID namespace,
        // whose /proc entry we could not open anyway.
        0 => Err(IdentityError::BadPidfd {
            reason: "its process is not in our PID namespace",
        }),
        pid => u32::try_from(pid)
            .ok()
            .filter(|&p| i32::try_from(p).is_ok())
            .map(PidfdPid::Alive)
            .ok_or(IdentityError::BadPidfd {
                reason: "its fdinfo has an invalid Pid",
            }),
    }
}

fn parse_fdinfo_pid(fdinfo: &str) -> Option<i64> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .and_then(|value| value.trim().parse().ok())
}

/// Fail unless the pidfd's process is still alive with PID `pid`.
///
/// Both the fdinfo PID (-1 once reaped) and `pidfd_send_signal(fd, 0)`
/// (`ESRCH` once exited) are checked; the signal works on kernels whose
/// fdinfo does not report -1 yet. `EPERM` still proves the process exists.
pub(super) fn ensure_pidfd_is(fd: BorrowedFd<'_>, pid: u32) -> Result<()> {
    match pidfd_pid(fd)? {
        PidfdPid::Alive(now) if now == pid => {}
        _ => return Err(IdentityError::PidReused { pid }),
    }
    // SAFETY: plain syscall on a borrowed, open fd; a null siginfo is
    // allowed and signal 0 only checks existence and permission.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r == 0 {
        return Ok(());
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EPERM | libc::ENOSYS) => Ok(()),
        Some(libc::ESRCH) => Err(IdentityError::PidReused { pid }),
        _ => Err(IdentityError::BadPidfd {
            reason: "pidfd_send_signal refused it",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::test_support::{pidfd_open, sleeper, test_process_is_plain};
    use crate::identity::{resolve_pid, resolve_pidfd};
    use crate::model::IdentitySource;
    use std::os::fd::AsFd;

    #[test]
    fn fdinfo_pid() {
        let live = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\n";
        assert_eq!(parse_fdinfo_pid(live), Some(4242));
        assert_eq!(parse_fdinfo_pid("Pid:\t-1\nNSpid:\t-1\n"), Some(-1));
        assert_eq!(parse_fdinfo_pid("pos:\t0\nflags:\t02\nmnt_id:\t3\n"), None);
    }

    #[test]
    fn pidfd_of_live_child() {
        if !test_process_is_plain() {
            return;
        }
        let child = sleeper();
        let pid = child.0.id();
        let fd = pidfd_open(pid);
        let by_fd = resolve_pidfd(fd.as_fd()).unwrap();
        assert_eq!(by_fd.pid, pid);
        assert_eq!(by_fd.source, IdentitySource::Executable);
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert_eq!(by_fd.app_id.as_str(), format!("exe:{}", exe.display()));
        assert_eq!(by_fd, resolve_pid(pid).unwrap());
    }

    #[test]
    fn pidfd_of_zombie_child() {
        let mut child = sleeper();
        let pid = child.0.id();
        let fd = pidfd_open(pid);
        child.0.kill().unwrap();
        // Wait until it is a zombie, without reaping it.
        for _ in 0..500 {
            let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
            let state = stat
                .iter()
                .rposition(|&b| b == b')')
                .and_then(|i| stat.get(i + 2).copied());
            if state == Some(b'Z') {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let err = resolve_pidfd(fd.as_fd()).unwrap_err();
        assert!(matches!(err, IdentityError::ProcessGone { .. }), "{err}");
    }

    #[test]
    fn pidfd_of_reaped_child() {
        let mut child = sleeper();
        let fd = pidfd_open(child.0.id());
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let err = resolve_pidfd(fd.as_fd()).unwrap_err();
        assert!(
            matches!(
                err,
                IdentityError::PidfdExited
                    | IdentityError::ProcessGone { .. }
                    | IdentityError::PidReused { .. }
            ),
            "{err}"
        );
    }

    #[test]
    fn not_a_pidfd() {
        let file = File::open("/proc/self/stat").unwrap();
        let err = resolve_pidfd(file.as_fd()).unwrap_err();
        assert!(matches!(err, IdentityError::BadPidfd { .. }), "{err}");
    }
}

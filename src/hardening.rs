//! What the daemon does to its own process before it holds anything
//! worth stealing: the database key, the user's context, the decisions.
//!
//! - **No core dumps** (`RLIMIT_CORE` 0, and `PR_SET_DUMPABLE` off): a
//!   crash would otherwise write the key and whatever the broker knew to
//!   a file (or hand it to `systemd-coredump`, which keeps it in the
//!   journal's coredump store, readable by the user and often by admins).
//!   The unit says `LimitCORE=0` too; this covers starts without systemd
//!   (D-Bus activation on a bus without a user manager, `make run`).
//! - **Not dumpable** also means: other processes of the same user cannot
//!   `ptrace` the daemon or read its `/proc/PID/{mem,environ,maps}` (the
//!   kernel makes those root's). This is a speed bump, not a boundary:
//!   same-uid code can still read the key file or replace the binary
//!   (README, "Threat model"). It does not hide anything the daemon
//!   needs to be seen: peers identify it by their own socket credentials,
//!   not through its `/proc` directory (the GNOME Shell extension, which
//!   checks who owns the broker's name, reads only what the kernel shows
//!   of a process that is not dumpable: `brokerCheck.js`).

use std::io;

/// What [`protect`] could not do; the daemon logs it and runs on (a
/// broker without these is still correct, only easier to inspect).
#[derive(Debug, thiserror::Error)]
pub enum HardeningError {
    #[error("cannot turn core dumps off (setrlimit RLIMIT_CORE): {0}")]
    CoreLimit(io::Error),
    #[error("cannot make the process non-dumpable (prctl PR_SET_DUMPABLE): {0}")]
    Dumpable(io::Error),
}

/// Turn core dumps off and make the process non-dumpable. Call first in
/// `main`, before the key is read or any thread starts.
///
/// Under the unit (`LimitCORE=0`) the limit is 0 already, and setting it
/// is skipped: its `SystemCallFilter=` refuses `setrlimit` (`@resources`).
pub fn protect() -> Result<(), HardeningError> {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let mut now = zero;
    // SAFETY: getrlimit(2) writes into the struct we own.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut now) } == 0;
    // SAFETY: setrlimit(2) reads the struct we pass and touches nothing else.
    if !(known && now.rlim_cur == 0 && now.rlim_max == 0)
        && unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) } != 0
    {
        return Err(HardeningError::CoreLimit(io::Error::last_os_error()));
    }
    // SAFETY: prctl(2) with PR_SET_DUMPABLE takes plain integers.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(HardeningError::Dumpable(io::Error::last_os_error()));
    }
    Ok(())
}

/// Whether this process may dump core: `(RLIMIT_CORE soft limit,
/// PR_GET_DUMPABLE)`.
pub fn state() -> io::Result<(u64, i32)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: PR_GET_DUMPABLE takes no pointers.
    let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
    if dumpable < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur, dumpable))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child of the test (so the test binary keeps its own
    /// settings): after `protect`, no core limit and not dumpable.
    #[test]
    fn protect_turns_dumps_off() {
        // SAFETY: the child only calls async-signal-safe functions
        // (setrlimit, prctl, getrlimit, _exit) before it exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            let ok = protect().is_ok() && matches!(state(), Ok((0, 0)));
            // SAFETY: _exit ends the child without running the parent's
            // destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}

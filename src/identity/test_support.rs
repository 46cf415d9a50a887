//! What the identity tests share: cgroup lines, child processes, a fake
//! `/proc`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::{Identity, Result, parse_cgroup, resolve_pid_in};
use crate::model::IdentitySource;

pub(super) fn cg(contents: &str) -> Option<(IdentitySource, String)> {
    parse_cgroup(contents)
}

pub(super) fn systemd(id: &str) -> Option<(IdentitySource, String)> {
    Some((IdentitySource::Systemd, format!("systemd:{id}")))
}

pub(super) fn snap(id: &str) -> Option<(IdentitySource, String)> {
    Some((IdentitySource::Snap, id.to_owned()))
}

pub(super) const USER: &str = "0::/user.slice/user-1000.slice/user@1000.service";

pub(super) fn user_unit(unit: &str) -> String {
    format!("{USER}/app.slice/{unit}\n")
}

/// Skip tests that assume an unconfined test process (e.g. when run in
/// a Flatpak IDE or an app scope).
pub(super) fn test_process_is_plain() -> bool {
    let flatpak = Path::new("/.flatpak-info").exists();
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if flatpak || parse_cgroup(&cgroup).is_some() {
        eprintln!("test process has an app identity; skipping");
        return false;
    }
    true
}

/// A child that is killed and reaped when dropped.
pub(super) struct Reaped(pub(super) Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn sleeper() -> Reaped {
    Reaped(Command::new("sleep").arg("30").spawn().unwrap())
}

pub(super) fn pidfd_open(pid: u32) -> OwnedFd {
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    assert!(fd >= 0, "pidfd_open: {}", io::Error::last_os_error());
    // SAFETY: see above.
    unsafe { OwnedFd::from_raw_fd(i32::try_from(fd).unwrap()) }
}

/// A fake `/proc` in a temporary directory.
pub(super) struct FakeProc {
    pub(super) dir: tempfile::TempDir,
}

impl FakeProc {
    pub(super) fn new() -> Self {
        FakeProc {
            dir: tempfile::Builder::new()
                .prefix("identity-proc")
                .tempdir()
                .unwrap(),
        }
    }

    /// `PID/root/`, `PID/cgroup` and `PID/exe -> exe`.
    pub(super) fn process(&self, pid: u32, cgroup: &str, exe: &str) -> PathBuf {
        let dir = self.dir.path().join(pid.to_string());
        std::fs::create_dir_all(dir.join("root")).unwrap();
        std::fs::write(dir.join("cgroup"), cgroup).unwrap();
        std::os::unix::fs::symlink(exe, dir.join("exe")).unwrap();
        dir
    }

    pub(super) fn resolve(&self, pid: u32) -> Result<Identity> {
        resolve_pid_in(self.dir.path(), pid)
    }
}

//! Who a process is: the app identity of a peer, derived from what the
//! kernel says about the process, never from anything the process says
//! about itself (a bus name, a Wayland app id, `argv[0]`, an environment
//! variable are all chosen by the caller).
//!
//! The rules follow xdg-desktop-portal (`xdp_app_info_from_flatpak`,
//! `pid_is_snap`/`_xdp_parse_cgroup_file`, and
//! `_xdp_app_info_host_parse_app_id_from_unit_name` in
//! `src/xdp-app-info-host.c` / `src/xdp-utils.c`), so that an app has the
//! same id here as in the portal's permission store. In order:
//!
//! 1. **Flatpak**: `/proc/PID/root/.flatpak-info`, read through the
//!    process's own root so that it is the file of *its* sandbox. Flatpak
//!    writes it and bind-mounts it read-only, so the app cannot edit it. If
//!    the file exists the process *is* sandboxed, so a file we cannot use is
//!    an error, never a reason to fall back to a weaker (host) identity.
//! 2. **Snap**: the systemd unit of the process (`snap.NAME.APP-UUID.scope`,
//!    `snap.NAME.APP.service`) or the v1 freezer cgroup `/snap.NAME`, which
//!    snapd puts every process of a snap in.
//! 3. **systemd**: the user unit the desktop launched the app in
//!    (`app[-LAUNCHER]-ID-RANDOM.scope`, `app[-LAUNCHER]-ID[@RANDOM].service`),
//!    as specified in <https://systemd.io/DESKTOP_ENVIRONMENTS/>.
//! 4. **Executable**: `readlink /proc/PID/exe`; for an interpreter of
//!    `[identity] interpreters` (`node`, `python3`, …), the script,
//!    package or module its command line runs (`node:@scope/pkg`,
//!    `python3:/path/tool.py`), labelled as a claim.
//!
//! How much each is worth: a Flatpak id is enforced by the sandbox. The
//! cgroup and executable ids hold against sandboxed apps (which step 1
//! catches first, and which cannot leave their sandbox) but not against
//! unsandboxed code of the same user, which can create a systemd scope of
//! any name through its user manager, `LD_PRELOAD` into any binary, or fake
//! a `.flatpak-info` in a user namespace. The portal makes the same
//! assumption: unsandboxed code is as trusted as the user. An interpreter's
//! script is less still: a command line is what the process says, so it
//! only tells honest apps apart.
//!
//! Every source has an id form of its own (`org.x.App` Flatpak,
//! `snap.NAME`, `systemd:org.x.App`, `node:PKG`/`python3:/path`,
//! `exe:/path`), and grants are keyed by the whole id: a process that
//! starts itself in `app-org.x.App-1.scope` is `systemd:org.x.App` and
//! never inherits the Flatpak `org.x.App`'s grants.
//!
//! Everything about one process is read through one directory fd of
//! `/proc/PID`. The kernel ties such an fd to the process it was opened for:
//! once that process is gone, reads through it fail (`ESRCH`/`ENOENT`)
//! instead of silently returning data of a newer process that got the same
//! PID. What remains racy is the step from "the bus said PID N" to opening
//! `/proc/N`; only a pidfd closes that gap (see [`resolve_pidfd`]).
//!
//! This file holds the entry points ([`resolve_pid`], [`resolve_pidfd`],
//! [`parent_pid`]), the shared types and the order of the rules; each rule
//! has a file of its own with its tests beside it: `flatpak.rs`
//! (`.flatpak-info`), `snap.rs` (snap units and the freezer cgroup),
//! `scope.rs` (the `app-…` units the desktop launches apps in), `exe.rs`
//! (the executable) and `interpreter.rs` (what an interpreter runs);
//! `system.rs` says which program files are the system's. Shared by them: `cgroup.rs` finds the units in
//! `/proc/PID/cgroup` for the snap and systemd rules, `procfs.rs` reads
//! `/proc/PID` through one directory fd, and `pidfd.rs` ties a pidfd to
//! that directory.

mod cgroup;
mod exe;
mod flatpak;
mod holders;
mod interpreter;
mod pidfd;
mod procfs;
mod scope;
mod snap;
mod system;
#[cfg(test)]
mod test_support;

use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use crate::model::{AppId, IdentitySource, SYSTEMD_PREFIX};
use cgroup::Cgroup;
use pidfd::{PidfdPid, ensure_pidfd_is, pidfd_pid};
use procfs::{MAX_PROC_FILE, PROC, ProcDir};

pub(crate) use holders::{Pinned, ensure_sole_holder, stdio_host};
pub(crate) use interpreter::{Interpreters, set_interpreters};
pub(crate) use system::is_system_dir;
pub use system::is_system_executable;

/// The app behind a process, and how we know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub app_id: AppId,
    pub source: IdentitySource,
    pub pid: u32,
    /// The executable, read through the same pinned `/proc/PID` as the
    /// id, for an unsandboxed process named by its executable or its
    /// systemd unit (`None` else, or when it could not be read): who may
    /// see more than an app (`contextctl`, `core::read::Sources`) is told
    /// from it, never from a second read by PID.
    pub executable: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// PID 0 means "unknown" on the bus, and PIDs never exceed `i32::MAX`.
    #[error("{pid} is not a valid process id")]
    InvalidPid { pid: u32 },
    #[error("process {pid} does not exist (any more)")]
    ProcessGone { pid: u32 },
    /// The process went away while we looked it up, so what we read may
    /// belong to another process that got its PID.
    #[error("process {pid} exited during the lookup; its PID may now belong to another process")]
    PidReused { pid: u32 },
    #[error("the process behind the pidfd has already exited")]
    PidfdExited,
    #[error("not a usable pidfd: {reason}")]
    BadPidfd { reason: &'static str },
    #[error("cannot read {path}: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("unexpected contents in {path}: {reason}")]
    Malformed { path: PathBuf, reason: &'static str },
    #[error("process {pid} has no usable app id: {reason}")]
    NoUsableId { pid: u32, reason: String },
    /// The process the kernel named is not the one that holds the
    /// connection (or the bridge's stdio): see `holders.rs`.
    #[error("{reason}")]
    NotTheHost { reason: String },
}

type Result<T, E = IdentityError> = std::result::Result<T, E>;

/// Resolve the identity of process `pid`.
///
/// Racy by nature: the PID was recorded (by the bus, by `SO_PEERCRED`)
/// some time before we open `/proc/PID`; if the process exited and its PID
/// was given to a new process in between, this returns the identity of
/// the new process. Once `/proc/PID` is open, all reads are from that one
/// process or fail (see the module docs). Use [`resolve_pidfd`] whenever
/// the bus hands out a pidfd; this exists for buses that do not
/// (dbus-daemon 1.14, for one, has no `ProcessFD` credential).
pub fn resolve_pid(pid: u32) -> Result<Identity> {
    resolve_pid_in(Path::new(PROC), pid)
}

/// [`resolve_pid`] against another `/proc`, so that tests can build a fake
/// tree (`PID/root/.flatpak-info`, `PID/cgroup`, `PID/exe`).
pub(crate) fn resolve_pid_in(proc_root: &Path, pid: u32) -> Result<Identity> {
    ProcDir::open(proc_root, pid)?.resolve()
}

/// [`resolve_pid_in`] with a list of interpreters of its own rather than
/// the configured one.
#[cfg(test)]
pub(crate) fn resolve_with(proc_root: &Path, pid: u32, list: &Interpreters) -> Result<Identity> {
    ProcDir::open(proc_root, pid)?.resolve_using(list)
}

/// Resolve the identity of the process a pidfd refers to (the `ProcessFD`
/// of D-Bus `GetConnectionCredentials`).
///
/// A pidfd names one process for its whole life, but `/proc` is keyed by
/// PID, so we take the PID from `/proc/self/fdinfo/FD`, open `/proc/PID`,
/// and then check that the pidfd's process is still alive: if it is, the
/// directory we opened is its directory (a PID is only reused after its
/// process is gone), and reads through it stay with that process. We check
/// once more after reading, so that an identity is only returned for a
/// process that outlived the lookup.
pub(crate) fn resolve_pidfd(fd: BorrowedFd<'_>) -> Result<Identity> {
    let pid = match pidfd_pid(fd)? {
        PidfdPid::Alive(pid) => pid,
        PidfdPid::Exited => return Err(IdentityError::PidfdExited),
    };
    let dir = ProcDir::open(Path::new(PROC), pid)?;
    ensure_pidfd_is(fd, pid)?;
    let identity = dir.resolve()?;
    ensure_pidfd_is(fd, pid)?;
    Ok(identity)
}

/// The parent PID of `pid`, from field 4 of `/proc/PID/stat`.
///
/// 0 means the parent is outside our PID namespace (or `pid` is 1).
pub(crate) fn parent_pid(pid: u32) -> Result<u32> {
    procfs::parent_pid_in(Path::new(PROC), pid)
}

impl ProcDir {
    /// The rules, in the order of the module docs; the first that names
    /// the process wins. Strongest evidence first:
    ///
    /// 1. **Flatpak** before anything else: it is the only id a sandbox
    ///    enforces, while the unit a sandboxed process is in was chosen by
    ///    whoever started it (`flatpak run` from a terminal, when it cannot
    ///    create its own scope, leaves the app in the terminal's). Once the
    ///    `.flatpak-info` exists, a file we cannot use is an error, never a
    ///    fall through to the rules below, which would give a sandboxed app
    ///    a host id.
    /// 2. **Snap** before the systemd scope: snapd puts a snap in its own
    ///    `snap.NAME.…` unit and, on cgroup v1, snap-confine puts it in the
    ///    freezer cgroup `/snap.NAME` whatever unit the launcher chose (a
    ///    terminal's `vte-spawn-….scope`). Those names come from snapd; an
    ///    `app-…` unit name comes from whoever launched the process.
    /// 3. **systemd scope** before the executable: the desktop names the
    ///    unit after the app it launched (the `.desktop` id, which is what
    ///    the portal's permission store knows), while an executable is a
    ///    path that many apps share (`/usr/bin/python3`, `/usr/bin/gjs`).
    /// 4. **Executable** last: every process has one, so it is the fallback
    ///    that always answers (or says why not). When it is an interpreter
    ///    of `[identity] interpreters` (`/usr/bin/node`), what it runs names
    ///    the process instead, if that can be told (`interpreter.rs`).
    ///
    /// The same order as xdg-desktop-portal (Flatpak, Snap, host), so that
    /// an app has one id here and in the portal (but for the `systemd:`
    /// prefix and interpreted scripts, which the portal does not tell
    /// apart).
    fn resolve(&self) -> Result<Identity> {
        self.resolve_using(&interpreter::current())
    }

    fn resolve_using(&self, interpreters: &Interpreters) -> Result<Identity> {
        // 1. Flatpak.
        if let Some(id) = self.flatpak_id()? {
            return self.identity(id, IdentitySource::Flatpak);
        }
        // 2. Snap, then 3. systemd scope: both from the cgroup.
        let cgroup = self.read(c"cgroup", MAX_PROC_FILE)?;
        if let Some((source, id)) = parse_cgroup(&String::from_utf8_lossy(&cgroup)) {
            return self.identity(id, source);
        }
        // 4. Executable, or what the interpreter runs.
        let exe = self.executable_id()?;
        if let Some(path) = exe.app_id.as_str().strip_prefix("exe:")
            && let Some(kind) = interpreters.kind_of(path)
            && let Some(script) = self.interpreter_id(kind)?
        {
            return Ok(script);
        }
        Ok(exe)
    }
}

/// The Snap or systemd identity in the contents of `/proc/PID/cgroup`.
///
/// The unit of a process is found the way systemd's `sd_pid_get_unit` /
/// `sd_pid_get_user_unit` (which the portal calls) find it: the first
/// component after the leading slices, and below the user manager
/// (`user@UID.service`) the first one after its slices. Deeper cgroups are
/// ones a unit created for itself (delegation) and name nothing.
///
/// - `snap.NAME.APP-UUID.scope`, `snap.NAME.hook.HOOK-UUID.scope`, the
///   older `snap.NAME.APP.UUID.scope`, or `snap.NAME.APP.service` (system
///   or user unit), or a v1 `freezer` cgroup `/snap.NAME`, give
///   `snap.NAME` (snapd's own parsing; the portal asks `snap routine
///   portal-info`, which we cannot spawn here).
/// - A *user* unit `app-…` gives the id of the portal's regexes, if it is
///   a valid app id (reverse DNS, by the portal's `xdp_is_valid_app_id`),
///   as `systemd:ID` (see [`AppId`]'s forms).
///
/// The unified (`0::`) hierarchy is used, or `name=systemd` on cgroup v1.
pub(crate) fn parse_cgroup(contents: &str) -> Option<(IdentitySource, String)> {
    let cgroup = Cgroup::parse(contents);
    // Snap before systemd (see `ProcDir::resolve`).
    if let Some(name) = snap::from_cgroup(&cgroup) {
        return Some((IdentitySource::Snap, name));
    }
    // Prefixed: a unit name is chosen by whoever starts the process (any
    // unsandboxed program can start itself in `app-ID-1.scope`), so it
    // must never name the same consent subject as the Flatpak app `ID`.
    let id = scope::from_cgroup(&cgroup)?;
    Some((IdentitySource::Systemd, format!("{SYSTEMD_PREFIX}{id}")))
}

/// The portal's `xdp_is_valid_app_id`: Flatpak's rules for app ids, but
/// elements may start with a digit and two elements are enough (so that
/// `snap.NAME` passes). At most 255 bytes, `.`-separated non-empty
/// elements of `[A-Za-z0-9_]`, `-` allowed only in the last element, at
/// least one `.`.
///
/// Used for the ids we derive from Flatpak and systemd: a unit like
/// `app-gnome-xdg\x2duser\x2ddirs-3033.scope` names a program, not an app,
/// and must not be confused with a reverse-DNS id.
fn is_valid_app_id(id: &str) -> bool {
    if id.is_empty() || id.len() > 255 || id.starts_with('.') {
        return false;
    }
    let elements: Vec<&str> = id.split('.').collect();
    let last = elements.len() - 1;
    elements.len() >= 2
        && elements.iter().enumerate().all(|(i, element)| {
            !element.is_empty()
                && element
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || (i == last && b == b'-'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::test_support::{FakeProc, Reaped, sleeper, user_unit};
    use std::process::Command;

    #[test]
    fn resolve_invalid_pids() {
        assert!(matches!(
            resolve_pid(0),
            Err(IdentityError::InvalidPid { pid: 0 })
        ));
        assert!(matches!(
            resolve_pid(u32::MAX),
            Err(IdentityError::InvalidPid { .. })
        ));
        // Above pid_max (at most 2^22), so no such process.
        assert!(matches!(
            resolve_pid(i32::MAX as u32),
            Err(IdentityError::ProcessGone { .. })
        ));
    }

    #[test]
    fn parent_of_child_and_self() {
        let child = sleeper();
        assert_eq!(parent_pid(child.0.id()).unwrap(), std::process::id());
        // SAFETY: getppid cannot fail.
        let ppid = unsafe { libc::getppid() };
        assert_eq!(parent_pid(std::process::id()).unwrap(), ppid as u32);
        assert!(matches!(
            parent_pid(0),
            Err(IdentityError::InvalidPid { .. })
        ));
    }

    #[test]
    fn parent_with_hostile_comm() {
        // The kernel names a process after the file it executed, so a
        // symlink called `(a) b (c)` gives it that comm.
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("(a) b (c)");
        let sleep = ["/usr/bin/sleep", "/bin/sleep"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap();
        std::os::unix::fs::symlink(sleep, &link).unwrap();
        let child = Reaped(Command::new(&link).arg("30").spawn().unwrap());
        let stat = std::fs::read(format!("/proc/{}/stat", child.0.id())).unwrap();
        assert!(
            stat.windows(11).any(|w| w == b"((a) b (c))"),
            "{}",
            String::from_utf8_lossy(&stat)
        );
        assert_eq!(parent_pid(child.0.id()).unwrap(), std::process::id());
    }

    #[test]
    fn fake_flatpak_beats_cgroup() {
        // A sandboxed app that moved itself into another scope is still
        // the sandboxed app.
        let proc = FakeProc::new();
        let dir = proc.process(
            101,
            &user_unit("app-gnome-org.gnome.Terminal-1.scope"),
            "/app/bin/x",
        );
        std::fs::write(
            dir.join("root/.flatpak-info"),
            "[Application]\nname=org.example.Sandboxed\n",
        )
        .unwrap();
        assert_eq!(
            proc.resolve(101).unwrap().app_id.as_str(),
            "org.example.Sandboxed"
        );
    }

    #[test]
    fn garbage_cgroup_input() {
        for input in [
            "",
            "\n\n",
            ":",
            "::",
            "0::",
            "0::app-",
            "0::/app-.scope",
            "0::/user@1000.service/app-",
            "0::/user@1000.service/app--.scope",
            "0::/user@1000.service/app-a-.scope",
            "0::/user@1000.service/app-gnome-.scope",
            "0::/user@1000.service/app-@.service",
            "0::/user@1000.service/app-.service",
            "0::/user@1000.service/snap..scope",
            "0::/user@1000.service/app-gnome-org.gnome.Term\u{e9}-1.scope",
            "0::/user@1000.service/app-org.x.Y\\x-1.scope",
            "0::/user@1000.service/app-org.x.Y\\x0-1.scope",
            "0::/user@1000.service/\u{1f600}",
            "\u{0}\u{0}\u{0}",
            "garbage without colons",
        ] {
            let _ = parse_cgroup(input);
        }
        assert_eq!(parse_cgroup(""), None);
        assert_eq!(parse_cgroup("garbage"), None);
        // Every prefix of a real line, cut at any byte.
        let line = user_unit("app-gnome-org.gnome.Evince\\x2dPrevious-1234.scope");
        for end in 0..line.len() {
            let _ = parse_cgroup(&line[..end]);
        }
    }

    #[test]
    fn app_id_validity() {
        for ok in [
            "org.gnome.Terminal",
            "snap.firefox",
            "org.gnome.Evince-Previous",
            "com.0ad.Game",
            "a.b",
            "org._private.App",
        ] {
            assert!(is_valid_app_id(ok), "{ok}");
        }
        for bad in [
            "",
            "firefox",
            ".org.x",
            "org.x.",
            "org..x",
            "org.my-app.Foo",
            "org.x y.Foo",
            "org.gnome.Caf\u{e9}",
            "org/x.y",
        ] {
            assert!(!is_valid_app_id(bad), "{bad}");
        }
        let long = format!("org.{}", "a".repeat(251));
        assert_eq!(long.len(), 255);
        assert!(is_valid_app_id(&long));
        assert!(!is_valid_app_id(&format!("{long}a")));
    }
}

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
//! 4. **Executable**: `readlink /proc/PID/exe`.
//!
//! How much each is worth: a Flatpak id is enforced by the sandbox. The
//! cgroup and executable ids hold against sandboxed apps (which step 1
//! catches first, and which cannot leave their sandbox) but not against
//! unsandboxed code of the same user, which can create a systemd scope of
//! any name through its user manager, `LD_PRELOAD` into any binary, or fake
//! a `.flatpak-info` in a user namespace. The portal makes the same
//! assumption: unsandboxed code is as trusted as the user.
//!
//! Everything about one process is read through one directory fd of
//! `/proc/PID`. The kernel ties such an fd to the process it was opened for:
//! once that process is gone, reads through it fail (`ESRCH`/`ENOENT`)
//! instead of silently returning data of a newer process that got the same
//! PID. What remains racy is the step from "the bus said PID N" to opening
//! `/proc/N`; only a pidfd closes that gap (see [`resolve_pidfd`]).

use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::model::{AppId, IdentitySource};

/// Where the kernel's view of processes lives.
const PROC: &str = "/proc";

/// `.flatpak-info` is a few KiB; anything much larger is not one, and we
/// do not want a caller to make us read a file of any size.
const MAX_FLATPAK_INFO: usize = 256 * 1024;

/// `/proc/PID/cgroup`, `/proc/PID/stat` and fdinfo files are at most a few
/// KiB (a cgroup path is bounded by PATH_MAX per hierarchy).
const MAX_PROC_FILE: usize = 64 * 1024;

/// Longest symlink target we read back from `/proc` (PATH_MAX plus the
/// kernel's " (deleted)" marker fits easily).
const MAX_LINK: usize = 16 * 1024;

/// `statfs` magic of FUSE, for the portal's toolbox exception.
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// What the kernel appends to `/proc/PID/exe` when the file was unlinked
/// (typically: the package was upgraded while the app ran).
const DELETED_MARKER: &[u8] = b" (deleted)";

/// The app behind a process, and how we know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub app_id: AppId,
    pub source: IdentitySource,
    pub pid: u32,
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
pub fn resolve_pid_in(proc_root: &Path, pid: u32) -> Result<Identity> {
    ProcDir::open(proc_root, pid)?.resolve()
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
pub fn resolve_pidfd(fd: BorrowedFd<'_>) -> Result<Identity> {
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
pub fn parent_pid(pid: u32) -> Result<u32> {
    parent_pid_in(Path::new(PROC), pid)
}

fn parent_pid_in(proc_root: &Path, pid: u32) -> Result<u32> {
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

/// The app id in the contents of a `.flatpak-info` file.
///
/// It is a GKeyFile; the id is `name` in `[Application]`, except that,
/// like the portal, we use `[Runtime]` when that group exists (Flatpak
/// writes it instead of `[Application]` when a runtime itself is run).
/// Keys of other groups (`[Instance]`, `[Context]`, ...) are ignored.
/// Validity of the id is checked by the caller.
pub fn parse_flatpak_info(contents: &str) -> Option<String> {
    let mut group: Option<&str> = None;
    let mut app_name = None;
    let mut runtime_name = None;
    let mut has_runtime_group = false;
    for line in contents.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            group = header.strip_suffix(']');
            has_runtime_group |= group == Some("Runtime");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim_end() != "name" {
            continue;
        }
        // GKeyFile: the last of duplicate keys wins.
        match group {
            Some("Application") => app_name = Some(value.trim()),
            Some("Runtime") => runtime_name = Some(value.trim()),
            _ => {}
        }
    }
    let name = if has_runtime_group {
        runtime_name
    } else {
        app_name
    };
    name.filter(|n| !n.is_empty()).map(str::to_owned)
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
///   a valid app id (reverse DNS, by the portal's `xdp_is_valid_app_id`).
///
/// The unified (`0::`) hierarchy is used, or `name=systemd` on cgroup v1.
pub fn parse_cgroup(contents: &str) -> Option<(IdentitySource, String)> {
    let mut unified = None;
    let mut named_systemd = None;
    let mut freezer = None;
    for line in contents.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(hierarchy), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if hierarchy == "0" && controllers.is_empty() {
            unified.get_or_insert(path);
        } else if controllers == "name=systemd" {
            named_systemd.get_or_insert(path);
        } else if controllers.split(',').any(|c| c == "freezer") {
            freezer.get_or_insert(path);
        }
    }
    // Legacy (v1) systems still print a `0::/` line; the unit is then only
    // in `name=systemd`. On hybrid systems both agree.
    let systemd_path = [unified, named_systemd]
        .into_iter()
        .flatten()
        .find(|p| !p.is_empty() && *p != "/");
    let (system_unit, user_unit) = systemd_path.map(units_of).unwrap_or((None, None));

    if let Some(name) = user_unit.or(system_unit).and_then(snap_from_unit) {
        return Some((IdentitySource::Snap, name));
    }
    if let Some(name) = freezer.and_then(snap_from_freezer) {
        return Some((IdentitySource::Snap, name));
    }
    // The portal only looks at user units: desktops launch apps in the
    // user's manager, and a system unit called `app-…` is no app launch.
    let id = user_unit.and_then(app_id_from_unit)?;
    Some((IdentitySource::Systemd, id))
}

/// `(system unit, user unit)` of a cgroup path, like systemd's
/// `cg_path_get_unit` and `cg_path_get_user_unit`.
fn units_of(path: &str) -> (Option<&str>, Option<&str>) {
    let mut components = path.split('/').filter(|c| !c.is_empty());
    let system = components.find(|c| !c.ends_with(".slice"));
    let user = match system {
        Some(unit) if unit.starts_with("user@") && unit.ends_with(".service") => {
            components.find(|c| !c.ends_with(".slice"))
        }
        _ => None,
    };
    (system, user)
}

/// Whether `unit` only has characters systemd allows in a unit name, so
/// that the byte-wise parsing below works on ASCII.
fn is_unit_name(unit: &str) -> bool {
    !unit.is_empty()
        && unit.len() < 256
        && unit
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":-_.\\@".contains(&b))
}

/// `snap.NAME` from a snap unit name, following snapd's
/// `securityTagFromCgroupPath`: `snap.<instance>.<app or hook…>` with a
/// `.scope` or `.service` suffix.
fn snap_from_unit(unit: &str) -> Option<String> {
    if !is_unit_name(unit) {
        return None;
    }
    let body = unit.strip_prefix("snap.")?;
    let body = body
        .strip_suffix(".scope")
        .or_else(|| body.strip_suffix(".service"))?;
    let (instance, rest) = body.split_once('.')?;
    // Component hooks have `<instance>+<component>` tags, `+` being
    // escaped as `\x2b` in unit names; the snap is the part before it.
    let instance = instance.split("\\x2b").next()?;
    if !rest
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
    {
        return None;
    }
    is_snap_instance_name(instance).then(|| format!("snap.{instance}"))
}

/// `snap.NAME` from a v1 freezer cgroup path `/snap.NAME` (snap-confine
/// puts all processes of a snap there, as root).
fn snap_from_freezer(path: &str) -> Option<String> {
    let instance = path.strip_prefix("/snap.")?;
    is_snap_instance_name(instance).then(|| format!("snap.{instance}"))
}

/// snapd's `ValidateInstanceName`: a snap name (2–40 of `a-z0-9-`, at
/// least one letter, no leading, trailing or double `-`), optionally
/// followed by `_` and an instance key of 1–10 of `a-z0-9`.
fn is_snap_instance_name(instance: &str) -> bool {
    let (name, key) = match instance.split_once('_') {
        Some((name, key)) => (name, Some(key)),
        None => (instance, None),
    };
    let name_ok = (2..=40).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    let key_ok = key.is_none_or(|k| {
        (1..=10).contains(&k.len())
            && k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    name_ok && key_ok
}

/// The app id of a user unit, if it is an `app-…` unit naming a valid id.
fn app_id_from_unit(unit: &str) -> Option<String> {
    if !is_unit_name(unit) {
        return None;
    }
    let id = unescape_systemd(portal_unit_capture(unit)?);
    is_valid_app_id(&id).then_some(id)
}

/// The capture group of the portal's two regexes
/// (`_xdp_app_info_host_parse_app_id_from_unit_name`), still escaped:
///
/// ```text
/// ^app-(?:[[:alnum:]]+\-)?(.+?)(?:\-[[:alnum:]]*)(?:\.scope|\.slice)$
/// ^app-(?:[[:alnum:]]+\-)?(.+?)(?:@[[:alnum:]]*|\-autostart)?\.service$
/// ```
///
/// Written out rather than with a regex crate, with the backtracking order
/// of PCRE: the optional launcher prefix is tried first, and the lazy
/// capture takes the shortest id that lets the rest match. The launcher
/// cannot be told from the id by its name, only by position: an id's own
/// `-` is escaped (`\x2d`) in a unit name, so a literal `-` right after a
/// first alphanumeric run ends a launcher (`gnome-`, `kde-`, `KDE-`,
/// `flatpak-`, …), while `org.kde.konsole` starts with `org.`.
fn portal_unit_capture(unit: &str) -> Option<&str> {
    let rest = unit.strip_prefix("app-")?;
    if let Some(body) = rest
        .strip_suffix(".scope")
        .or_else(|| rest.strip_suffix(".slice"))
    {
        return after_optional_launcher(body, scope_capture);
    }
    let body = rest.strip_suffix(".service")?;
    after_optional_launcher(body, service_capture)
}

/// `(?:[[:alnum:]]+\-)?` followed by `capture`. The greedy alphanumeric
/// run can only end at a `-` when it is maximal, so there is one launcher
/// candidate; PCRE tries it before the empty alternative.
fn after_optional_launcher<'a>(
    body: &'a str,
    capture: impl Fn(&'a str) -> Option<&'a str>,
) -> Option<&'a str> {
    let run = body.bytes().take_while(u8::is_ascii_alphanumeric).count();
    if run > 0 && body.as_bytes().get(run) == Some(&b'-') {
        let captured = body.get(run + 1..).and_then(&capture);
        if captured.is_some() {
            return captured;
        }
    }
    capture(body)
}

/// `(.+?)(?:\-[[:alnum:]]*)` up to the end of `s`.
fn scope_capture(s: &str) -> Option<&str> {
    (1..s.len())
        .find(|&i| {
            s.as_bytes().get(i) == Some(&b'-')
                && s.get(i + 1..)
                    .is_some_and(|t| t.bytes().all(|b| b.is_ascii_alphanumeric()))
        })
        .and_then(|i| s.get(..i))
}

/// `(.+?)(?:@[[:alnum:]]*|\-autostart)?` up to the end of `s`.
fn service_capture(s: &str) -> Option<&str> {
    (1..=s.len())
        .find(|&i| {
            s.get(i..).is_some_and(|tail| {
                tail.is_empty()
                    || tail == "-autostart"
                    || tail
                        .strip_prefix('@')
                        .is_some_and(|t| t.bytes().all(|b| b.is_ascii_alphanumeric()))
            })
        })
        .and_then(|i| s.get(..i))
}

/// Undo systemd's unit-name escaping: `\xNN` becomes byte `NN`.
///
/// Systemd escapes every byte a unit name cannot hold this way (`-` as
/// `\x2d`, `é` as `\xc3\xa9`). Like systemd's `cunescape(…, UNESCAPE_RELAX)`
/// that the portal uses, an invalid escape (bad hex digits, too short, or
/// `\x00`, which would cut a C string) is kept as it is, and decoded bytes
/// are not decoded again. Bytes that do not form UTF-8 become U+FFFD,
/// which no valid app id contains.
pub fn unescape_systemd(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' && bytes.get(i + 1) == Some(&b'x') {
            let hi = bytes.get(i + 2).and_then(|&h| hex_value(h));
            let lo = bytes.get(i + 3).and_then(|&l| hex_value(l));
            if let (Some(hi), Some(lo)) = (hi, lo) {
                let decoded = (hi << 4) | lo;
                if decoded != 0 {
                    out.push(decoded);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b);
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
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

/// An open `/proc/PID` directory: all reads about the process go through
/// it, so that they are all about the same process (see module docs).
struct ProcDir {
    dir: File,
    /// For error messages only; never opened again by path.
    path: PathBuf,
    pid: u32,
}

impl ProcDir {
    fn open(proc_root: &Path, pid: u32) -> Result<Self> {
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

    fn resolve(&self) -> Result<Identity> {
        if let Some(id) = self.flatpak_id()? {
            return self.identity(id, IdentitySource::Flatpak);
        }
        let cgroup = self.read(c"cgroup", MAX_PROC_FILE)?;
        if let Some((source, id)) = parse_cgroup(&String::from_utf8_lossy(&cgroup)) {
            return self.identity(id, source);
        }
        self.executable_id()
    }

    fn identity(&self, id: String, source: IdentitySource) -> Result<Identity> {
        let app_id = AppId::new(id).map_err(|e| self.no_id(e.to_string()))?;
        Ok(Identity {
            app_id,
            source,
            pid: self.pid,
        })
    }

    /// Step 1, as the portal's `xdp_app_info_from_flatpak` does it: open
    /// the process's root, then `.flatpak-info` in it.
    fn flatpak_id(&self) -> Result<Option<String>> {
        let root = match open_at(&self.dir, c"root", libc::O_DIRECTORY) {
            Ok(root) => root,
            // A root on FUSE (a toolbox container) refuses us even for our
            // own processes. A Flatpak root never is on FUSE, so the portal
            // treats this as "not a Flatpak" and so do we.
            Err(e) if e.raw_os_error() == Some(libc::EACCES) && self.root_is_fuse() => {
                tracing::debug!(pid = self.pid, "root is on FUSE: not a Flatpak");
                return Ok(None);
            }
            // Anything else (notably EACCES for another user's process) is
            // an error: we cannot tell whether the process is sandboxed.
            Err(e) => return Err(self.fail("root", e)),
        };
        let info_path = || self.path.join("root/.flatpak-info");
        // O_NOFOLLOW: a symlink here would be resolved in *our* root, not
        // the process's. O_NONBLOCK: a FIFO must not hang us.
        let file = match open_at(&root, c".flatpak-info", libc::O_NOFOLLOW | libc::O_NONBLOCK) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(IdentityError::Unreadable {
                    path: info_path(),
                    source: e,
                });
            }
        };
        let is_file = file
            .metadata()
            .map_err(|e| IdentityError::Unreadable {
                path: info_path(),
                source: e,
            })?
            .is_file();
        if !is_file {
            return Err(IdentityError::Malformed {
                path: info_path(),
                reason: "not a regular file",
            });
        }
        let contents =
            read_limited(file, MAX_FLATPAK_INFO).map_err(|e| IdentityError::Unreadable {
                path: info_path(),
                source: e,
            })?;
        let contents = String::from_utf8(contents).map_err(|_| IdentityError::Malformed {
            path: info_path(),
            reason: "not UTF-8",
        })?;
        let name = parse_flatpak_info(&contents)
            .ok_or_else(|| self.no_id("its .flatpak-info names no application".into()))?;
        if !is_valid_app_id(&name) {
            return Err(self.no_id(format!(
                "its .flatpak-info names an invalid app id {name:?}"
            )));
        }
        Ok(Some(name))
    }

    fn root_is_fuse(&self) -> bool {
        let Ok(path) = std::ffi::CString::new(self.path.join("root").as_os_str().as_bytes()) else {
            return false;
        };
        let mut buf = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // SAFETY: `path` is NUL-terminated and `buf` is writable memory of
        // the size statfs(2) fills in.
        if unsafe { libc::statfs(path.as_ptr(), buf.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: statfs succeeded, so it initialised `buf` (and it was
        // zeroed before, which is a valid `statfs` anyway).
        let st = unsafe { buf.assume_init() };
        // f_type is i64, u32 or c_long depending on the target.
        #[allow(clippy::unnecessary_cast)]
        let magic = st.f_type as i64;
        magic == FUSE_SUPER_MAGIC
    }

    /// Step 4: the executable. A name the process has no say in, but only
    /// as good as the file system (see module docs).
    fn executable_id(&self) -> Result<Identity> {
        let mut target = read_link_at(&self.dir, c"exe").map_err(|e| self.fail("exe", e))?;
        // A file replaced since the process started (an upgrade) keeps its
        // identity. Claiming a path P this way needs a file "P (deleted)"
        // next to P, i.e. write access to P's directory, which could
        // replace P itself anyway.
        if target.ends_with(DELETED_MARKER) {
            target.truncate(target.len() - DELETED_MARKER.len());
        }
        // Not lossy: two different paths must never share an id.
        let path = String::from_utf8(target)
            .map_err(|_| self.no_id("its executable path is not UTF-8".into()))?;
        let app_id = AppId::from_exe(&path)
            .map_err(|e| self.no_id(format!("executable path {path:?}: {e}")))?;
        Ok(Identity {
            app_id,
            source: IdentitySource::Executable,
            pid: self.pid,
        })
    }

    fn read(&self, name: &CStr, limit: usize) -> Result<Vec<u8>> {
        let file = open_at(&self.dir, name, 0).map_err(|e| self.fail_c(name, e))?;
        read_limited(file, limit).map_err(|e| self.fail_c(name, e))
    }

    fn fail_c(&self, name: &CStr, e: io::Error) -> IdentityError {
        self.fail(&name.to_string_lossy(), e)
    }

    fn fail(&self, name: &str, e: io::Error) -> IdentityError {
        gone_or_unreadable(self.pid, &self.path.join(name), e)
    }

    fn no_id(&self, reason: String) -> IdentityError {
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
fn open_at(dir: &File, name: &CStr, flags: libc::c_int) -> io::Result<File> {
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
fn read_link_at(dir: &File, name: &CStr) -> io::Result<Vec<u8>> {
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
fn read_limited(file: File, limit: usize) -> io::Result<Vec<u8>> {
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

enum PidfdPid {
    Alive(u32),
    Exited,
}

/// The PID of a pidfd's process, from the `Pid:` line of its fdinfo
/// (Linux 5.3+; the value is -1 once the process has been reaped).
fn pidfd_pid(fd: BorrowedFd<'_>) -> Result<PidfdPid> {
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
fn ensure_pidfd_is(fd: BorrowedFd<'_>, pid: u32) -> Result<()> {
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
    use std::os::fd::{AsFd, OwnedFd};
    use std::process::{Child, Command};

    fn cg(contents: &str) -> Option<(IdentitySource, String)> {
        parse_cgroup(contents)
    }

    fn systemd(id: &str) -> Option<(IdentitySource, String)> {
        Some((IdentitySource::Systemd, id.to_owned()))
    }

    fn snap(id: &str) -> Option<(IdentitySource, String)> {
        Some((IdentitySource::Snap, id.to_owned()))
    }

    const USER: &str = "0::/user.slice/user-1000.slice/user@1000.service";

    fn user_unit(unit: &str) -> String {
        format!("{USER}/app.slice/{unit}\n")
    }

    // ---- systemd units (real-world lines) ----

    #[test]
    fn gnome_terminal_scope() {
        assert_eq!(
            cg(
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Terminal-12345.scope\n"
            ),
            systemd("org.gnome.Terminal")
        );
    }

    #[test]
    fn kde_scope_without_launcher() {
        assert_eq!(
            cg(&user_unit("app-org.kde.konsole-1234.scope")),
            systemd("org.kde.konsole")
        );
        // KDE's random part is not always decimal.
        assert_eq!(
            cg(&user_unit("app-org.kde.dolphin-a0b1c2d3e4.scope")),
            systemd("org.kde.dolphin")
        );
    }

    #[test]
    fn kde_service_with_launcher() {
        // From the portal's own tests (tests/test-xdp-utils.c).
        assert_eq!(
            cg(&user_unit("app-KDE-org.kde.okular@12345.service")),
            systemd("org.kde.okular")
        );
        assert_eq!(
            cg(&user_unit("app-kde-org.kde.dolphin@abcd.service")),
            systemd("org.kde.dolphin")
        );
    }

    #[test]
    fn services() {
        assert_eq!(
            cg(&user_unit("app-org.example.Foo@12.service")),
            systemd("org.example.Foo")
        );
        assert_eq!(
            cg(&user_unit("app-org.kde.amarok.service")),
            systemd("org.kde.amarok")
        );
        // Autostart, before and after systemd v248.
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.SettingsDaemon.DiskUtilityNotify-autostart.service"
            )),
            systemd("org.gnome.SettingsDaemon.DiskUtilityNotify")
        );
        assert_eq!(
            cg(&user_unit(
                "app-org.gnome.Evolution\\x2dalarm\\x2dnotify@autostart.service"
            )),
            systemd("org.gnome.Evolution-alarm-notify")
        );
    }

    #[test]
    fn escaped_ids() {
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.Evolution\\x2dalarm\\x2dnotify-2437.scope"
            )),
            systemd("org.gnome.Evolution-alarm-notify")
        );
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.Evince\\x2dPrevious-1234.scope"
            )),
            systemd("org.gnome.Evince-Previous")
        );
        // A `-` is only allowed in the last element of an app id.
        assert_eq!(cg(&user_unit("app-gnome-org.my\\x2dapp.Foo-1.scope")), None);
    }

    #[test]
    fn flatpak_launcher_scope() {
        assert_eq!(
            cg(&user_unit("app-flatpak-org.mozilla.firefox-1234.scope")),
            systemd("org.mozilla.firefox")
        );
    }

    #[test]
    fn more_portal_examples() {
        for (unit, id) in [
            (
                "app-gnome-org.gnome.Epiphany-182352.scope",
                "org.gnome.Epiphany",
            ),
            (
                "app-gnome-org.gnome.Terminal-92502.slice",
                "org.gnome.Terminal",
            ),
            (
                "app-com.obsproject.Studio-d70acc38b5154a3a8b4a60accc4b15f4.scope",
                "com.obsproject.Studio",
            ),
        ] {
            let captured = portal_unit_capture(unit).map(unescape_systemd);
            assert_eq!(captured.as_deref(), Some(id), "{unit}");
        }
        assert_eq!(portal_unit_capture("app-not-a-well-formed-unit-name"), None);
    }

    #[test]
    fn non_reverse_dns_falls_through() {
        assert_eq!(cg(&user_unit("app-foo-123.scope")), None);
        // The portal's regex yields "spice-vdagent"; it is no app id.
        assert_eq!(
            portal_unit_capture("app-glib-spice\\x2dvdagent-1839.scope"),
            Some("spice\\x2dvdagent")
        );
        assert_eq!(
            cg(&user_unit("app-glib-spice\\x2dvdagent-1839.scope")),
            None
        );
        assert_eq!(
            cg(&user_unit("app-gnome-xdg\\x2duser\\x2ddirs-3033.scope")),
            None
        );
        assert_eq!(cg(&user_unit("app-firefox.service")), None);
    }

    #[test]
    fn non_app_units() {
        assert_eq!(cg("0::/user.slice/user-1000.slice/session-2.scope\n"), None);
        assert_eq!(cg(&format!("{USER}/init.scope\n")), None);
        assert_eq!(cg(&format!("{USER}\n")), None);
        assert_eq!(cg("0::/\n"), None);
        assert_eq!(cg("0::/system.slice/dbus-broker.service\n"), None);
        // A shell in GNOME Terminal is not GNOME Terminal.
        assert_eq!(
            cg(&format!(
                "{USER}/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n"
            )),
            None
        );
        // Like sd_pid_get_user_unit: system units are no app launches.
        assert_eq!(cg("0::/system.slice/app-org.example.Foo.service\n"), None);
    }

    #[test]
    fn unit_is_the_first_below_slices() {
        // A cgroup a unit created below itself does not name the process.
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.Builder-1234.scope/build-42"
            )),
            systemd("org.gnome.Builder")
        );
        assert_eq!(
            cg(&format!(
                "{USER}/app.slice/app-gnome-code-4242.scope/app-org.evil.App-1.scope\n"
            )),
            None
        );
    }

    #[test]
    fn cgroup_v1_and_hybrid() {
        let hybrid = "12:pids:/user.slice/user-1000.slice/user@1000.service\n\
                      3:freezer:/\n\
                      1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Calculator-5.scope\n\
                      0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Calculator-5.scope\n";
        assert_eq!(cg(hybrid), systemd("org.gnome.Calculator"));
        let legacy = "1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Calculator-5.scope\n0::/\n";
        assert_eq!(cg(legacy), systemd("org.gnome.Calculator"));
    }

    // ---- snaps ----

    #[test]
    fn snap_scope_v2() {
        assert_eq!(
            cg(
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-1b3a.scope\n"
            ),
            snap("snap.firefox")
        );
        assert_eq!(
            cg(&user_unit(
                "snap.firefox.firefox-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"
            )),
            snap("snap.firefox")
        );
        assert_eq!(
            cg(&user_unit(
                "snap.firefox_esr.firefox-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"
            )),
            snap("snap.firefox_esr")
        );
        assert_eq!(
            cg(&user_unit(
                "snap.gnome-calculator.hook.configure-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"
            )),
            snap("snap.gnome-calculator")
        );
    }

    #[test]
    fn snap_v1_multi_line() {
        let v1 = "12:pids:/user.slice/user-1000.slice/user@1000.service\n\
                  11:perf_event:/\n\
                  10:net_cls,net_prio:/\n\
                  9:cpuset:/\n\
                  8:memory:/user.slice/user-1000.slice/user@1000.service\n\
                  7:rdma:/\n\
                  6:devices:/user.slice\n\
                  5:blkio:/user.slice\n\
                  4:hugetlb:/\n\
                  3:freezer:/snap.spotify\n\
                  2:cpu,cpuacct:/user.slice\n\
                  1:name=systemd:/user.slice/user-1000.slice/user@1000.service/snap.spotify.spotify.2a4b9c1e-8d3f-4e5a-b6c7-d8e9f0a1b2c3.scope\n\
                  0::/\n";
        assert_eq!(cg(v1), snap("snap.spotify"));
    }

    #[test]
    fn snap_freezer_only() {
        // The portal's test data: the systemd unit is a terminal's, the
        // freezer cgroup (set up by snap-confine) says snap.
        let data = "12:pids:/user.slice/user-1000.slice/user@1000.service\n\
                    8:memory:/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n\
                    3:freezer:/snap.portal-test\n\
                    1:name=systemd:/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n\
                    0::/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n";
        assert_eq!(cg(data), snap("snap.portal-test"));
    }

    #[test]
    fn snap_service() {
        assert_eq!(
            cg("0::/system.slice/snap.lxd.daemon.service\n"),
            snap("snap.lxd")
        );
        assert_eq!(
            cg("0::/system.slice/snap.lxd.daemon.service/lxc.payload.c1/init.scope\n"),
            snap("snap.lxd")
        );
    }

    #[test]
    fn not_snaps() {
        // Portal counts this as a snap and asks snapd; it names no app.
        assert_eq!(cg(&user_unit("snap.something.scope")), None);
        assert_eq!(cg(&user_unit("snap.Firefox.firefox-1.scope")), None);
        assert_eq!(cg(&user_unit("snap.-x.app-1.scope")), None);
        assert_eq!(cg(&user_unit("snap.firefox..scope")), None);
        assert_eq!(cg("3:freezer:/snap.\n0::/\n"), None);
        assert_eq!(cg("3:freezer:/lxc/c1/snap.foo\n0::/\n"), None);
        let not_snap = "12:pids:/\n11:perf_event:/\n3:freezer:/\n1:name=systemd:/\n0::/\n";
        assert_eq!(cg(not_snap), None);
    }

    #[test]
    fn snap_names() {
        for ok in [
            "ab",
            "firefox",
            "gnome-42-2204",
            "0ad",
            "a1",
            "firefox_esr",
            "ab_1234567890",
        ] {
            assert!(is_snap_instance_name(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "12",
            "-ab",
            "ab-",
            "a--b",
            "Ab",
            "ab_",
            "ab_12345678901",
            "ab_X",
            "a.b",
        ] {
            assert!(!is_snap_instance_name(bad), "{bad}");
        }
        assert!(!is_snap_instance_name(&"a".repeat(41)));
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

    // ---- unescaping and id validity ----

    #[test]
    fn unescape() {
        assert_eq!(
            unescape_systemd("org.gnome.Evince\\x2dPrevious"),
            "org.gnome.Evince-Previous"
        );
        assert_eq!(unescape_systemd("a\\x2Db"), "a-b");
        assert_eq!(unescape_systemd("caf\\xc3\\xa9"), "caf\u{e9}");
        assert_eq!(
            unescape_systemd("\\x5cx2d"),
            "\\x2d",
            "decoded bytes are not decoded again"
        );
        assert_eq!(unescape_systemd("\\xZZ"), "\\xZZ");
        assert_eq!(unescape_systemd("\\x2"), "\\x2");
        assert_eq!(unescape_systemd("\\x"), "\\x");
        assert_eq!(unescape_systemd("\\"), "\\");
        assert_eq!(unescape_systemd("\\x00"), "\\x00");
        assert_eq!(unescape_systemd("\\n"), "\\n");
        assert_eq!(unescape_systemd("\\\\x2d"), "\\-");
        assert_eq!(unescape_systemd("\\xff"), "\u{fffd}");
        assert_eq!(unescape_systemd(""), "");
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

    // ---- .flatpak-info ----

    const CALCULATOR_INFO: &str = "[Application]\n\
        name=org.gnome.Calculator\n\
        runtime=runtime/org.gnome.Platform/x86_64/46\n\
        \n\
        [Instance]\n\
        instance-id=1843036357\n\
        instance-path=/home/user/.var/app/org.gnome.Calculator\n\
        app-path=/var/lib/flatpak/app/org.gnome.Calculator/x86_64/stable/0a1b2c/files\n\
        app-commit=0a1b2c3d4e5f\n\
        app-extensions=\n\
        runtime-path=/var/lib/flatpak/runtime/org.gnome.Platform/x86_64/46/3d4e5f/files\n\
        runtime-commit=3d4e5f6a7b8c\n\
        runtime-extensions=org.freedesktop.Platform.GL.default=4a5b6c;org.gnome.Platform.Locale=7d8e9f\n\
        branch=stable\n\
        arch=x86_64\n\
        flatpak-version=1.14.6\n\
        session-bus-proxy=true\n\
        system-bus-proxy=true\n\
        devel=false\n\
        \n\
        [Context]\n\
        shared=network;ipc;\n\
        sockets=x11;wayland;pulseaudio;fallback-x11;\n\
        devices=dri;\n\
        \n\
        [Session Bus Policy]\n\
        org.gnome.SearchProvider=own\n";

    #[test]
    fn flatpak_info_real() {
        assert_eq!(
            parse_flatpak_info(CALCULATOR_INFO).as_deref(),
            Some("org.gnome.Calculator")
        );
    }

    #[test]
    fn flatpak_info_variants() {
        assert_eq!(
            parse_flatpak_info("# comment\n  [Application]  \n  name =  org.example.App  \r\n")
                .as_deref(),
            Some("org.example.App")
        );
        assert_eq!(
            parse_flatpak_info(
                "[Runtime]\nname=org.gnome.Platform\nruntime=runtime/org.gnome.Platform/x86_64/46\n"
            )
            .as_deref(),
            Some("org.gnome.Platform")
        );
        // Other groups' `name` keys never count.
        assert_eq!(parse_flatpak_info("[Instance]\nname=org.evil.App\n"), None);
        assert_eq!(
            parse_flatpak_info(
                "[Application]\nruntime=runtime/x/y/z\n[Instance]\nname=org.evil.App\n"
            ),
            None
        );
        assert_eq!(parse_flatpak_info("name=org.evil.App\n"), None);
        assert_eq!(parse_flatpak_info("[Application]\nname=\n"), None);
        assert_eq!(
            parse_flatpak_info("[Application]\nname[de]=org.evil.App\n"),
            None
        );
        assert_eq!(
            parse_flatpak_info("[Application\nname=org.evil.App\n"),
            None
        );
        assert_eq!(parse_flatpak_info(""), None);
        assert_eq!(parse_flatpak_info("\u{0}[]=\n[=\n"), None);
    }

    // ---- /proc/PID/stat ----

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
    fn fdinfo_pid() {
        let live = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\n";
        assert_eq!(parse_fdinfo_pid(live), Some(4242));
        assert_eq!(parse_fdinfo_pid("Pid:\t-1\nNSpid:\t-1\n"), Some(-1));
        assert_eq!(parse_fdinfo_pid("pos:\t0\nflags:\t02\nmnt_id:\t3\n"), None);
    }

    // ---- against the real /proc ----

    /// Skip tests that assume an unconfined test process (e.g. when run in
    /// a Flatpak IDE or an app scope).
    fn test_process_is_plain() -> bool {
        let flatpak = Path::new("/.flatpak-info").exists();
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        if flatpak || parse_cgroup(&cgroup).is_some() {
            eprintln!("test process has an app identity; skipping");
            return false;
        }
        true
    }

    #[test]
    fn resolve_self() {
        if !test_process_is_plain() {
            return;
        }
        let me = resolve_pid(std::process::id()).unwrap();
        let exe = std::env::current_exe().unwrap();
        assert_eq!(me.source, IdentitySource::Executable);
        assert_eq!(me.app_id.as_str(), format!("exe:{}", exe.display()));
        assert_eq!(me.pid, std::process::id());
    }

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

    /// A child that is killed and reaped when dropped.
    struct Reaped(Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn sleeper() -> Reaped {
        Reaped(Command::new("sleep").arg("30").spawn().unwrap())
    }

    fn pidfd_open(pid: u32) -> OwnedFd {
        // SAFETY: plain syscall; a non-negative result is a new fd we own.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        assert!(fd >= 0, "pidfd_open: {}", io::Error::last_os_error());
        // SAFETY: see above.
        unsafe { OwnedFd::from_raw_fd(i32::try_from(fd).unwrap()) }
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
    fn not_a_pidfd() {
        let file = File::open("/proc/self/stat").unwrap();
        let err = resolve_pidfd(file.as_fd()).unwrap_err();
        assert!(matches!(err, IdentityError::BadPidfd { .. }), "{err}");
    }

    // ---- against a fake /proc ----

    struct FakeProc {
        dir: tempfile::TempDir,
    }

    impl FakeProc {
        fn new() -> Self {
            FakeProc {
                dir: tempfile::Builder::new()
                    .prefix("identity-proc")
                    .tempdir()
                    .unwrap(),
            }
        }

        /// `PID/root/`, `PID/cgroup` and `PID/exe -> exe`.
        fn process(&self, pid: u32, cgroup: &str, exe: &str) -> PathBuf {
            let dir = self.dir.path().join(pid.to_string());
            std::fs::create_dir_all(dir.join("root")).unwrap();
            std::fs::write(dir.join("cgroup"), cgroup).unwrap();
            std::os::unix::fs::symlink(exe, dir.join("exe")).unwrap();
            dir
        }

        fn resolve(&self, pid: u32) -> Result<Identity> {
            resolve_pid_in(self.dir.path(), pid)
        }
    }

    #[test]
    fn fake_flatpak() {
        let proc = FakeProc::new();
        let dir = proc.process(
            100,
            &user_unit("app-flatpak-org.gnome.Calculator-1843036357.scope"),
            "/app/bin/gnome-calculator",
        );
        std::fs::write(dir.join("root/.flatpak-info"), CALCULATOR_INFO).unwrap();
        let id = proc.resolve(100).unwrap();
        assert_eq!(id.app_id.as_str(), "org.gnome.Calculator");
        assert_eq!(id.source, IdentitySource::Flatpak);
        assert_eq!(id.pid, 100);
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
    fn fake_flatpak_without_usable_name_is_an_error() {
        let proc = FakeProc::new();
        let dir = proc.process(
            102,
            &user_unit("app-gnome-org.gnome.Terminal-1.scope"),
            "/usr/bin/bash",
        );
        std::fs::write(
            dir.join("root/.flatpak-info"),
            "[Instance]\nname=org.evil.App\n",
        )
        .unwrap();
        let err = proc.resolve(102).unwrap_err();
        assert!(
            matches!(err, IdentityError::NoUsableId { pid: 102, .. }),
            "{err}"
        );

        std::fs::write(dir.join("root/.flatpak-info"), "[Application]\nname=evil\n").unwrap();
        let err = proc.resolve(102).unwrap_err();
        assert!(
            matches!(err, IdentityError::NoUsableId { pid: 102, .. }),
            "{err}"
        );

        std::fs::write(
            dir.join("root/.flatpak-info"),
            b"[Application]\nname=org.x.\xff\n",
        )
        .unwrap();
        let err = proc.resolve(102).unwrap_err();
        assert!(matches!(err, IdentityError::Malformed { .. }), "{err}");
    }

    #[test]
    fn fake_flatpak_info_symlink_dir_or_fifo_is_an_error() {
        let proc = FakeProc::new();
        let dir = proc.process(103, "0::/\n", "/usr/bin/true");
        let info = dir.join("root/.flatpak-info");
        let elsewhere = proc.dir.path().join("elsewhere");
        std::fs::write(&elsewhere, CALCULATOR_INFO).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &info).unwrap();
        let err = proc.resolve(103).unwrap_err();
        assert!(matches!(err, IdentityError::Unreadable { .. }), "{err}");

        std::fs::remove_file(&info).unwrap();
        std::fs::create_dir(&info).unwrap();
        let err = proc.resolve(103).unwrap_err();
        assert!(matches!(err, IdentityError::Malformed { .. }), "{err}");

        std::fs::remove_dir(&info).unwrap();
        let c_info = std::ffi::CString::new(info.as_os_str().as_bytes()).unwrap();
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_info.as_ptr(), 0o600) }, 0);
        let err = proc.resolve(103).unwrap_err();
        assert!(matches!(err, IdentityError::Malformed { .. }), "{err}");
    }

    #[test]
    fn fake_flatpak_info_too_large() {
        let proc = FakeProc::new();
        let dir = proc.process(104, "0::/\n", "/usr/bin/true");
        let big = format!(
            "[Application]\nname=org.x.Y\n#{}\n",
            "x".repeat(MAX_FLATPAK_INFO)
        );
        std::fs::write(dir.join("root/.flatpak-info"), big).unwrap();
        let err = proc.resolve(104).unwrap_err();
        assert!(matches!(err, IdentityError::Unreadable { .. }), "{err}");
    }

    #[test]
    fn fake_systemd() {
        let proc = FakeProc::new();
        proc.process(
            200,
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Terminal-12345.scope\n",
            "/usr/libexec/gnome-terminal-server",
        );
        let id = proc.resolve(200).unwrap();
        assert_eq!(id.app_id.as_str(), "org.gnome.Terminal");
        assert_eq!(id.source, IdentitySource::Systemd);
    }

    #[test]
    fn fake_snap() {
        let proc = FakeProc::new();
        proc.process(
            300,
            &user_unit("snap.firefox.firefox-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"),
            "/snap/firefox/4336/usr/lib/firefox/firefox",
        );
        let id = proc.resolve(300).unwrap();
        assert_eq!(id.app_id.as_str(), "snap.firefox");
        assert_eq!(id.source, IdentitySource::Snap);
    }

    #[test]
    fn fake_executable() {
        let proc = FakeProc::new();
        proc.process(
            400,
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "/usr/bin/foo (deleted)",
        );
        let id = proc.resolve(400).unwrap();
        assert_eq!(id.app_id.as_str(), "exe:/usr/bin/foo");
        assert_eq!(id.source, IdentitySource::Executable);

        proc.process(401, &user_unit("app-foo-123.scope"), "/opt/foo/bin/foo");
        assert_eq!(
            proc.resolve(401).unwrap().app_id.as_str(),
            "exe:/opt/foo/bin/foo"
        );

        let long = format!("/{}", "d/".repeat(2000));
        proc.process(402, "0::/\n", &long);
        assert_eq!(
            proc.resolve(402).unwrap().app_id.as_str(),
            format!("exe:{long}")
        );

        proc.process(403, "0::/\n", "/tmp/evil\nexe:/usr/bin/firefox");
        let err = proc.resolve(403).unwrap_err();
        assert!(matches!(err, IdentityError::NoUsableId { .. }), "{err}");
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

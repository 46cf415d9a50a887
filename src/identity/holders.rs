//! Who holds the other end of a pipe or socket: the MCP stdio bridge's
//! host is the process at the far end of `contextctl mcp`'s standard input
//! and output, and a direct peer of the MCP socket is the process that
//! holds the client end of the connection. Neither is taken from the
//! process tree alone, which a child of a granted host can arrange
//! (`clone(CLONE_PARENT)`, a double fork), nor from a PID alone, which an
//! `exec` after `connect` gives to another program.
//!
//! Every process is pinned with a pidfd (see [`Pinned`]), and what was
//! seen of it (the executable's file) is compared again before it is
//! trusted: an `exec` between connecting and being served changes it.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::pidfd::ensure_pidfd_is;
use super::procfs::{MAX_PROC_FILE, PROC, read_limited};
use super::{Identity, IdentityError, Result, resolve_pidfd};

/// A process held by a pidfd, with the executable file it ran when it was
/// pinned.
#[derive(Debug)]
pub(crate) struct Pinned {
    fd: OwnedFd,
    pid: u32,
    /// `(st_dev, st_ino)` of `/proc/PID/exe` when pinned.
    exe: (u64, u64),
}

impl Pinned {
    /// Pin process `pid` now: a pidfd, and its executable's file.
    pub(crate) fn open(pid: u32) -> Result<Pinned> {
        if pid == 0 || i32::try_from(pid).is_err() {
            return Err(IdentityError::InvalidPid { pid });
        }
        // SAFETY: pidfd_open(2) takes a PID and flags and returns a new fd
        // that nothing else owns, or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let raw = i32::try_from(raw).map_err(|_| IdentityError::InvalidPid { pid })?;
        if raw < 0 {
            return Err(match io::Error::last_os_error().raw_os_error() {
                Some(libc::ESRCH) => IdentityError::ProcessGone { pid },
                _ => IdentityError::BadPidfd {
                    reason: "pidfd_open refused the process",
                },
            });
        }
        // SAFETY: a new fd, owned from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let exe = exe_file(pid)?;
        ensure_pidfd_is(fd.as_fd(), pid)?;
        Ok(Pinned { fd, pid, exe })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Fail unless the process is alive and runs the file it ran when it
    /// was pinned (an `exec` since then makes it another program).
    pub(crate) fn ensure_unchanged(&self) -> Result<()> {
        ensure_pidfd_is(self.fd.as_fd(), self.pid)?;
        let now = exe_file(self.pid)?;
        ensure_pidfd_is(self.fd.as_fd(), self.pid)?;
        if now != self.exe {
            return Err(IdentityError::NotTheHost {
                reason: format!(
                    "process {} executed another program after it was pinned",
                    self.pid
                ),
            });
        }
        Ok(())
    }

    /// Its identity, through the pidfd, provided it still runs the same
    /// executable.
    pub(crate) fn resolve(&self) -> Result<Identity> {
        self.ensure_unchanged()?;
        let id = resolve_pidfd(self.fd.as_fd())?;
        self.ensure_unchanged()?;
        Ok(id)
    }
}

/// `(st_dev, st_ino)` of the file `/proc/PID/exe` leads to.
fn exe_file(pid: u32) -> Result<(u64, u64)> {
    let path = Path::new(PROC).join(pid.to_string()).join("exe");
    let meta = std::fs::metadata(&path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => IdentityError::ProcessGone { pid },
        _ => IdentityError::Unreadable { path, source: e },
    })?;
    Ok((meta.dev(), meta.ino()))
}

/// What an fd is open on, as far as finding its other end goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A pipe (both ends share the inode) and the access mode of this end.
    Pipe { ino: u64, write: bool },
    /// A Unix socket, by its inode.
    Socket(u64),
}

/// What `pid`'s fd `fd` is open on; `None` for anything but a pipe or a
/// socket (a terminal, a file).
fn end_of(pid: u32, fd: u32) -> Result<Option<End>> {
    let link = Path::new(PROC).join(format!("{pid}/fd/{fd}"));
    let target = std::fs::read_link(&link).map_err(|e| match e.raw_os_error() {
        Some(libc::ESRCH) => IdentityError::ProcessGone { pid },
        _ => IdentityError::Unreadable {
            path: link.clone(),
            source: e,
        },
    })?;
    let target = target.to_string_lossy();
    if let Some(ino) = inode_in(&target, "pipe:[") {
        let write = access_mode(pid, fd)? != libc::O_RDONLY;
        return Ok(Some(End::Pipe { ino, write }));
    }
    Ok(inode_in(&target, "socket:[").map(End::Socket))
}

fn inode_in(link: &str, prefix: &str) -> Option<u64> {
    link.strip_prefix(prefix)?.strip_suffix(']')?.parse().ok()
}

/// `O_RDONLY`, `O_WRONLY` or `O_RDWR` of `pid`'s fd `fd`, from its fdinfo.
fn access_mode(pid: u32, fd: u32) -> Result<libc::c_int> {
    let path = Path::new(PROC).join(format!("{pid}/fdinfo/{fd}"));
    let text = File::open(&path)
        .and_then(|f| read_limited(f, MAX_PROC_FILE))
        .map_err(|e| IdentityError::Unreadable {
            path: path.clone(),
            source: e,
        })?;
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|v| libc::c_int::from_str_radix(v.trim(), 8).ok())
        .map(|flags| flags & libc::O_ACCMODE)
        .ok_or(IdentityError::Malformed {
            path,
            reason: "no flags line",
        })
}

/// The other end of `end`: for a pipe, the same pipe opened the other way;
/// for a socket, its peer (from the kernel's `sock_diag`).
fn other_end(end: End) -> Result<End> {
    match end {
        End::Pipe { ino, write } => Ok(End::Pipe { ino, write: !write }),
        End::Socket(ino) => unix_peer(ino)
            .map_err(|e| IdentityError::Unreadable {
                path: format!("sock_diag of socket:[{ino}]").into(),
                source: e,
            })?
            .map(End::Socket)
            .ok_or_else(|| IdentityError::NotTheHost {
                reason: format!("socket:[{ino}] has no peer (it is not a connected Unix socket)"),
            }),
    }
}

/// One pass at a time over `/proc`: a pass reads every descriptor of every
/// process of ours, so two at once only compete for the same CPU. The
/// connections waiting to be identified take turns (a pass is a few
/// milliseconds on a desktop), and nothing else waits for them.
static SCANNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// For each of `ends`, the processes that have it open, in one pass over
/// the processes of our user (all of them when we are root). A process
/// that is gone, or whose descriptors we cannot read, holds nothing.
fn holders(ends: &[End]) -> Vec<Vec<u32>> {
    let _turn = SCANNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // SAFETY-free: getuid cannot fail.
    let us = unsafe { libc::getuid() };
    let mut found = vec![Vec::new(); ends.len()];
    let Ok(dir) = std::fs::read_dir(PROC) else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if us != 0 && !entry.metadata().is_ok_and(|m| m.uid() == us) {
            continue;
        }
        for (i, held) in holds(pid, ends).into_iter().enumerate() {
            if held && let Some(list) = found.get_mut(i) {
                list.push(pid);
            }
        }
    }
    found
}

/// Which of `ends` `pid` has open (read now).
fn holds(pid: u32, ends: &[End]) -> Vec<bool> {
    let mut held = vec![false; ends.len()];
    let Ok(fds) = std::fs::read_dir(Path::new(PROC).join(format!("{pid}/fd"))) else {
        return held;
    };
    for e in fds.flatten() {
        // The link first, and the fdinfo (for a pipe's direction) only of
        // a pipe we look for: a pass over every process reads little else.
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        let ino = inode_in(&target, "pipe:[").or_else(|| inode_in(&target, "socket:["));
        let Some(ino) = ino else { continue };
        let wanted = ends.iter().any(|end| match *end {
            End::Pipe { ino: i, .. } | End::Socket(i) => i == ino,
        });
        if !wanted {
            continue;
        }
        let Some(end) = e
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
            .and_then(|fd| end_of(pid, fd).ok().flatten())
        else {
            continue;
        };
        for (i, want) in ends.iter().enumerate() {
            if *want == end
                && let Some(h) = held.get_mut(i)
            {
                *h = true;
            }
        }
    }
    held
}

/// The far end of the accepted connection `sock`: the client's socket.
fn client_end(sock: BorrowedFd<'_>) -> Result<End> {
    let ours = fd_inode(sock).map_err(|e| IdentityError::Unreadable {
        path: "the accepted MCP socket".into(),
        source: e,
    })?;
    other_end(End::Socket(ours))
}

/// Fail unless `who`, the holders of the client end of the connection, is
/// the connecting process alone (an `exec`-ed or forked program sharing
/// the connection is not the peer the kernel named).
fn sole_holder(who: &[u32], peer: &Pinned) -> Result<()> {
    if who != [peer.pid] {
        return Err(IdentityError::NotTheHost {
            reason: format!(
                "the connection is held by processes {who:?}, not by the connecting process {} alone",
                peer.pid
            ),
        });
    }
    peer.ensure_unchanged()
}

/// Fail unless `peer` is the only process that holds the client end of
/// the accepted connection `sock`, and still runs the program it ran when
/// it was pinned at accept.
pub(crate) fn ensure_sole_holder(sock: BorrowedFd<'_>, peer: &Pinned) -> Result<()> {
    let client = client_end(sock)?;
    let who = holders(&[client]);
    sole_holder(who.first().map(Vec::as_slice).unwrap_or_default(), peer)
}

/// The host of the stdio bridge `bridge`, connected over `sock`: the one
/// process that holds the other ends of the bridge's standard input and
/// output, which must also be its parent; and the bridge must be the only
/// holder of its end of the connection. Refused when nobody holds the
/// stdio ends (a terminal, a file), when more than one process does
/// (someone else can speak through the bridge), or when the holder is not
/// the parent (the bridge was re-parented, `clone(CLONE_PARENT)`, or its
/// pipes handed to it). One pass over `/proc` answers all three.
pub(crate) fn stdio_host(sock: BorrowedFd<'_>, bridge: &Pinned, parent: u32) -> Result<Pinned> {
    let client = client_end(sock)?;
    let mut stdio = Vec::with_capacity(2);
    for fd in [0, 1] {
        let what = if fd == 0 { "input" } else { "output" };
        let end = end_of(bridge.pid, fd)?.ok_or_else(|| IdentityError::NotTheHost {
            reason: format!(
                "the standard {what} of contextctl mcp ({}) is not a pipe or socket from its host",
                bridge.pid
            ),
        })?;
        stdio.push((what, other_end(end)?));
    }
    let mut ends = vec![client];
    ends.extend(stdio.iter().map(|(_, e)| *e));
    let who = holders(&ends);
    sole_holder(who.first().map(Vec::as_slice).unwrap_or_default(), bridge)?;
    let mut host: Option<u32> = None;
    for ((what, _), held) in stdio.iter().zip(who.iter().skip(1)) {
        let held: Vec<u32> = held.iter().copied().filter(|&p| p != bridge.pid).collect();
        match (held.as_slice(), host) {
            ([one], None) => host = Some(*one),
            ([one], Some(h)) if *one == h => {}
            ([], _) => {
                return Err(IdentityError::NotTheHost {
                    reason: format!(
                        "no process holds the other end of the standard {what} of contextctl mcp ({})",
                        bridge.pid
                    ),
                });
            }
            (many, _) => {
                return Err(IdentityError::NotTheHost {
                    reason: format!(
                        "the standard input and output of contextctl mcp ({}) are not held by one process (processes {many:?} and {host:?})",
                        bridge.pid
                    ),
                });
            }
        }
    }
    let host = host.ok_or_else(|| IdentityError::NotTheHost {
        reason: "no host found".into(),
    })?;
    if host != parent {
        return Err(IdentityError::NotTheHost {
            reason: format!(
                "the standard input and output of contextctl mcp ({}) are held by process {host}, not by its parent {parent}",
                bridge.pid
            ),
        });
    }
    let pinned = Pinned::open(host)?;
    // The PID may have been reused between the pass and the pidfd: the
    // pinned process must hold the ends itself.
    let far: Vec<End> = stdio.iter().map(|(_, e)| *e).collect();
    if holds(host, &far).contains(&false) {
        return Err(IdentityError::PidReused { pid: host });
    }
    bridge.ensure_unchanged()?;
    Ok(pinned)
}

fn fd_inode(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: `st` is written by fstat before it is read, and the fd is
    // open for as long as it is borrowed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &raw mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_ino)
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_PEER: u32 = 0x4;
const UNIX_DIAG_PEER: u16 = 2;

#[repr(C)]
struct DiagRequest {
    // struct nlmsghdr
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    port: u32,
    // struct unix_diag_req
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

/// The inode of the peer of Unix socket `ino`, from `NETLINK_SOCK_DIAG`
/// (`None` when it has none).
fn unix_peer(ino: u64) -> io::Result<Option<u64>> {
    let ino32 = u32::try_from(ino).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: socket(2) returns a new fd or -1.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd, owned from here on.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let req = DiagRequest {
        len: std::mem::size_of::<DiagRequest>() as u32,
        kind: SOCK_DIAG_BY_FAMILY,
        flags: libc::NLM_F_REQUEST as u16,
        seq: 1,
        port: 0,
        family: libc::AF_UNIX as u8,
        protocol: 0,
        pad: 0,
        states: u32::MAX,
        ino: ino32,
        show: UDIAG_SHOW_PEER,
        // INET_DIAG_NOCOOKIE: look the socket up by inode alone.
        cookie: [u32::MAX; 2],
    };
    // SAFETY: `req` is plain data of the size given.
    let sent = unsafe {
        libc::send(
            sock.as_raw_fd(),
            (&raw const req).cast(),
            std::mem::size_of::<DiagRequest>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 8192];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    parse_peer(buf.get(..n).unwrap_or_default(), ino32)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The `UNIX_DIAG_PEER` of the answer about socket `ino`.
fn parse_peer(msg: &[u8], ino: u32) -> io::Result<Option<u64>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed sock_diag answer");
    let len = u32_at(msg, 0).ok_or_else(bad)? as usize;
    let kind = u16_at(msg, 4).ok_or_else(bad)?;
    let msg = msg.get(..len).ok_or_else(bad)?;
    if kind == libc::NLMSG_ERROR as u16 {
        let errno = u32_at(msg, 16).ok_or_else(bad)? as i32;
        return Err(io::Error::from_raw_os_error(-errno));
    }
    if kind != SOCK_DIAG_BY_FAMILY || u32_at(msg, 16 + 4) != Some(ino) {
        return Err(bad());
    }
    // nlmsghdr (16) + unix_diag_msg (16), then rtattrs aligned to 4.
    let mut at = 32;
    while let (Some(alen), Some(akind)) = (u16_at(msg, at), u16_at(msg, at + 2)) {
        let alen = alen as usize;
        if alen < 4 {
            return Err(bad());
        }
        if akind == UNIX_DIAG_PEER {
            return Ok(u32_at(msg, at + 4).map(u64::from).filter(|&p| p != 0));
        }
        at += (alen + 3) & !3;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn socketpair_peers() {
        let (a, b) = UnixStream::pair().unwrap();
        let ia = fd_inode(a.as_fd()).unwrap();
        let ib = fd_inode(b.as_fd()).unwrap();
        assert_eq!(unix_peer(ia).unwrap(), Some(ib));
        assert_eq!(unix_peer(ib).unwrap(), Some(ia));
    }

    #[test]
    fn pipe_ends() {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two fds into the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: new fds, owned here.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let me = std::process::id();
        let re = end_of(me, r.as_raw_fd() as u32).unwrap().unwrap();
        let we = end_of(me, w.as_raw_fd() as u32).unwrap().unwrap();
        assert!(matches!(re, End::Pipe { write: false, .. }));
        assert_eq!(other_end(re).unwrap(), we);
        assert_eq!(holds(me, &[we, re]), [true, true]);
        drop(w);
        assert_eq!(holds(me, &[we, re]), [false, true]);
    }

    #[test]
    fn pinned_self_is_unchanged() {
        let p = Pinned::open(std::process::id()).unwrap();
        p.ensure_unchanged().unwrap();
    }
}

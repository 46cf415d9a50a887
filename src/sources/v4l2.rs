//! The V4L2 source: cameras opened without PipeWire.
//!
//! Browsers without the camera portal, video call apps and most video
//! tools open `/dev/videoN` themselves; PipeWire never sees that. This
//! source watches the device nodes with inotify and reports every process
//! that holds one open as a `camera` capture stream (`media.capture`), so
//! that it is in the live stream list, the capture sessions of the day
//! (`core::captures`) and the timeline (`core::history`), like PipeWire's.
//!
//! - **Watches.** `IN_OPEN | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE` on every
//!   `videoN` in the directory (config.toml `[sources.v4l2] dir`, `/dev`
//!   unless set), and `IN_CREATE | IN_DELETE | IN_MOVED_* | IN_ATTRIB` on
//!   the directory itself, so that a camera plugged in later is watched
//!   (`IN_ATTRIB`: udev gives the user access to a new node only after it
//!   is created, and a watch needs read access). The directory is never
//!   watched for opens: in `/dev` that would wake the broker for every
//!   terminal and `/dev/null`.
//! - **Who.** Only when an event arrives (nothing polls, nothing runs while
//!   no camera opens or closes), the source looks at the `/proc/PID/fd`
//!   links of every process and keeps those that point to a watched node
//!   (same name, then the same device number for a character device, or
//!   the same inode for anything else). Only the processes the broker may
//!   read show up: the user's own (as root, every one). The kernel reports
//!   an open just before the descriptor is in the opener's table, so after
//!   an open the source looks once more [`SETTLE`] later. inotify reports
//!   a close only when the last descriptor of an open file goes, so the
//!   source also follows each opener's exit with a pidfd (a child that
//!   inherited the descriptor exits while its parent keeps it).
//! - **Identity** comes from the opener's PID through
//!   `identity::resolve_pid`, the resolver PipeWire's streams and
//!   D-Bus callers use; its `comm` is kept as a claim (`claimed_name`). The
//!   stream's `media_name` is the node's path. It is resolved once per
//!   opener: a process that executes another program while it holds the
//!   node keeps the identity it had (no event says it changed).
//! - **Streams.** One per process and node, `v4l2-N-videoK-PID` (`N`
//!   counts this source's watches, so that a new one never reuses an id),
//!   running while the process holds the node; it ends when its last
//!   descriptor of the node is closed (or the process exits, or the node
//!   goes away).
//! - **With PipeWire.** An app that uses a camera through PipeWire is
//!   reported by the PipeWire source; one that opens the node itself, by
//!   this one; an app seen by both at once makes one capture session and
//!   one timeline interval (the merge is in `core::captures` and
//!   `core::history`, by app identity and kind). PipeWire's own camera
//!   plugin opens the node in the PipeWire daemon, and WirePlumber probes
//!   nodes: neither is reported (`MEDIA_SERVERS`), since the app behind
//!   them is the PipeWire source's.
//!
//! A directory that cannot be watched (missing, not a directory, no
//! permission) makes the source unavailable with the reason; it tries
//! again with the usual backoff. It never ends before the daemon does.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use inotify::{EventMask, EventStream, Inotify, WatchDescriptor, WatchMask};

use super::{Backoff, SourceContext};
use crate::core::SourceEvent;
use crate::model::{AppId, MediaKind, MediaStream, StreamState};

pub(crate) const NAME: &str = "v4l2";

/// How long after an open the source looks at the openers once more.
pub(crate) const SETTLE: Duration = Duration::from_millis(30);

const PROC: &str = "/proc";

/// What the source watches on a node.
fn node_mask() -> WatchMask {
    WatchMask::OPEN | WatchMask::CLOSE_WRITE | WatchMask::CLOSE_NOWRITE
}

/// What the source watches on the directory.
fn dir_mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_TO
        | WatchMask::MOVED_FROM
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// `video` followed by a number: the V4L2 video nodes.
pub(crate) fn is_video_node(name: &str) -> bool {
    name.strip_prefix("video")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// How a node is recognized behind a process's descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeKey {
    /// A character device: its device number, wherever its node is.
    Rdev(u64),
    /// Anything else (a test's regular file): its inode.
    Inode(u64, u64),
}

fn node_key(m: &std::fs::Metadata) -> NodeKey {
    if m.file_type().is_char_device() {
        NodeKey::Rdev(m.rdev())
    } else {
        NodeKey::Inode(m.dev(), m.ino())
    }
}

/// A process holding a node: `(node name, PID)`.
type Opener = (String, u32);

/// The start time of process `dir` (`/proc/PID`), in clock ticks since
/// boot (field 22 of `stat`): with the PID, it names one process.
fn start_time(dir: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Every process (that we may read) holding one of `nodes` open, with its
/// start time.
fn openers(proc_root: &Path, nodes: &BTreeMap<String, NodeKey>) -> BTreeMap<Opener, u64> {
    let mut out = BTreeMap::new();
    if nodes.is_empty() {
        return out;
    }
    let Ok(procs) = std::fs::read_dir(proc_root) else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // Other users' processes are not ours to read; gone ones are gone.
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let mut held: Vec<&str> = Vec::new();
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some((name, key)) = target
                .file_name()
                .and_then(OsStr::to_str)
                .and_then(|n| nodes.get_key_value(n))
            else {
                continue;
            };
            if !held.contains(&name.as_str())
                && std::fs::metadata(fd.path()).is_ok_and(|m| node_key(&m) == *key)
            {
                held.push(name);
            }
        }
        if held.is_empty() {
            continue;
        }
        let Some(start) = start_time(&p.path()) else {
            continue;
        };
        for name in held {
            out.insert((name.to_owned(), pid), start);
        }
    }
    out
}

/// Who a new opener is.
#[derive(Debug, Clone)]
struct Who {
    app_id: Option<AppId>,
    comm: Option<String>,
}

fn who(pid: u32) -> Who {
    let app_id = match crate::identity::resolve_pid(pid) {
        Ok(id) => Some(id.app_id),
        Err(e) => {
            tracing::debug!(source = NAME, pid, error = %e, "no app id for a camera opener");
            None
        }
    };
    let comm = std::fs::read_to_string(Path::new(PROC).join(pid.to_string()).join("comm"))
        .ok()
        .map(|c| c.trim_end().to_owned())
        .filter(|c| !c.is_empty());
    Who { app_id, comm }
}

/// The media server's own programs: PipeWire holds a camera's node while
/// it streams it to an app (which the PipeWire source reports, with the
/// app's identity) and WirePlumber opens nodes briefly to probe them.
/// Neither is an app using the camera.
const MEDIA_SERVERS: [&str; 2] = ["pipewire", "wireplumber"];

fn is_media_server(w: &Who) -> bool {
    w.app_id
        .as_ref()
        .and_then(|a| a.as_str().strip_prefix("exe:"))
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| MEDIA_SERVERS.iter().any(|m| n == *m))
}

/// One look at the openers: all of them, and who the new ones are.
#[derive(Debug, Default)]
struct Scan {
    found: BTreeMap<Opener, u64>,
    new: HashMap<Opener, Who>,
}

/// Look at the nodes of `dir` named in `names` and at who holds them.
/// Blocking (procfs): run on a blocking thread.
fn scan(dir: &Path, names: Vec<String>, known: BTreeMap<Opener, u64>) -> Scan {
    let nodes: BTreeMap<String, NodeKey> = names
        .into_iter()
        .filter_map(|n| {
            let m = std::fs::metadata(dir.join(&n)).ok()?;
            Some((n, node_key(&m)))
        })
        .collect();
    let mut found = openers(Path::new(PROC), &nodes);
    let mut new = HashMap::new();
    for (k, start) in &found {
        if known.get(k) != Some(start) {
            new.insert(k.clone(), who(k.1));
        }
    }
    // A process that exited while we looked (a short-lived child that
    // inherited the descriptor) holds nothing any more.
    found.retain(|(_, pid), start| {
        !new.keys().any(|(_, p)| p == pid)
            || start_time(&Path::new(PROC).join(pid.to_string())) == Some(*start)
    });
    new.retain(|k, _| found.contains_key(k));
    let servers: Vec<Opener> = new
        .iter()
        .filter(|(_, w)| is_media_server(w))
        .map(|(k, _)| k.clone())
        .collect();
    for k in servers {
        new.remove(&k);
        found.remove(&k);
    }
    Scan { found, new }
}

/// The streams this source reported, and what changes them.
#[derive(Debug)]
struct Reported {
    prefix: String,
    dir: PathBuf,
    /// Opener → its start time.
    streams: BTreeMap<Opener, u64>,
}

impl Reported {
    fn id(&self, (name, pid): &Opener) -> String {
        format!("{}{name}-{pid}", self.prefix)
    }

    /// The events that take the reported streams to `scan`.
    fn update(&mut self, scan: Scan, now: chrono::DateTime<chrono::Utc>) -> Vec<SourceEvent> {
        let mut out = Vec::new();
        let gone: Vec<Opener> = self
            .streams
            .iter()
            .filter(|(k, start)| scan.found.get(*k) != Some(*start))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.streams.remove(&k);
            out.push(SourceEvent::StreamRemoved { id: self.id(&k) });
        }
        for (k, start) in scan.found {
            if self.streams.contains_key(&k) {
                continue;
            }
            let Some(who) = scan.new.get(&k) else {
                continue;
            };
            let stream = MediaStream {
                id: self.id(&k),
                kind: MediaKind::Camera,
                app_id: who.app_id.clone(),
                attributed_by: Default::default(),
                pid: Some(k.1),
                claimed_name: who.comm.clone(),
                claimed_binary: None,
                media_name: Some(self.dir.join(&k.0).display().to_string()),
                media_role: None,
                state: StreamState::Running,
                since: now,
                player: None,
            };
            self.streams.insert(k, start);
            out.push(SourceEvent::Stream { stream });
        }
        out
    }
}

/// A pidfd of `pid`: readable once that process has exited.
fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: pidfd_open(2) takes a PID and flags and returns a new file
    // descriptor or -1; it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd =
        RawFd::try_from(fd).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
    // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Tells the watch loop when an opener exits.
///
/// inotify reports a close only when the last descriptor of an open file
/// goes: a child that inherited the camera's descriptor from its parent (or
/// got it over a socket) exits without any inotify event while the parent
/// still holds it. A pidfd per opener, readable when the process exits,
/// says so at once (an event too, not a poll).
struct Exits {
    tx: tokio::sync::mpsc::Sender<()>,
    rx: tokio::sync::mpsc::Receiver<()>,
    /// Opener PID → its start time and what stops its task.
    watched: HashMap<u32, (u64, tokio_util::sync::DropGuard)>,
}

impl Exits {
    fn new() -> Exits {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        Exits {
            tx,
            rx,
            watched: HashMap::new(),
        }
    }

    /// Watch exactly the processes of `streams`.
    fn follow(&mut self, ctx: &SourceContext, streams: &BTreeMap<Opener, u64>) {
        let pids: HashMap<u32, u64> = streams.iter().map(|((_, pid), s)| (*pid, *s)).collect();
        self.watched
            .retain(|pid, (start, _)| pids.get(pid) == Some(start));
        for (pid, start) in pids {
            if self.watched.contains_key(&pid) {
                continue;
            }
            let fd = match pidfd_open(pid) {
                // The PID is still the opener's (not reused since we looked).
                Ok(fd) if start_time(&Path::new(PROC).join(pid.to_string())) == Some(start) => fd,
                Ok(_) | Err(_) => {
                    // Gone already: look again.
                    let _ = self.tx.try_send(());
                    continue;
                }
            };
            // SAFETY: an OwnedFd stays open and is the same descriptor for
            // as long as the AsyncFd owns it.
            let registered = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            };
            let fd = match registered {
                Ok(fd) => fd,
                Err(e) => {
                    tracing::debug!(source = NAME, pid, error = %e, "cannot follow an opener's exit");
                    continue;
                }
            };
            let stop = ctx.cancel.child_token();
            let tx = self.tx.clone();
            let cancelled = stop.clone();
            ctx.tasks.spawn(async move {
                tokio::select! {
                    _ = cancelled.cancelled() => {}
                    _ = fd.readable() => {
                        let _ = tx.try_send(());
                    }
                }
            });
            self.watched.insert(pid, (start, stop.drop_guard()));
        }
    }
}

/// The inotify watches on the directory and its nodes.
struct Watcher {
    dir: PathBuf,
    events: EventStream<Vec<u8>>,
    dir_wd: WatchDescriptor,
    /// Node name → its watch (`None`: not watchable yet, e.g. no access).
    nodes: BTreeMap<String, Option<WatchDescriptor>>,
}

impl Watcher {
    fn new(dir: &Path) -> std::io::Result<Watcher> {
        let ino = Inotify::init()?;
        let dir_wd = ino.watches().add(dir, dir_mask())?;
        let events = ino.into_event_stream(vec![0u8; 4096])?;
        let mut w = Watcher {
            dir: dir.to_owned(),
            events,
            dir_wd,
            nodes: BTreeMap::new(),
        };
        w.relist()?;
        Ok(w)
    }

    /// Read the directory again: watch new nodes, forget gone ones.
    fn relist(&mut self) -> std::io::Result<()> {
        let mut names = Vec::new();
        for e in std::fs::read_dir(&self.dir)?.flatten() {
            if let Some(n) = e.file_name().to_str().filter(|n| is_video_node(n)) {
                names.push(n.to_owned());
            }
        }
        self.nodes.retain(|n, _| names.contains(n));
        for n in names {
            self.watch(&n);
        }
        Ok(())
    }

    /// Watch node `name`, if it is not watched yet; `true` when it is now
    /// and was not before.
    fn watch(&mut self, name: &str) -> bool {
        if matches!(self.nodes.get(name), Some(Some(_))) {
            return false;
        }
        let path = self.dir.join(name);
        let wd = match self.events.watches().add(&path, node_mask()) {
            Ok(wd) => Some(wd),
            Err(e) => {
                tracing::debug!(source = NAME, node = %path.display(), error = %e, "cannot watch");
                None
            }
        };
        let added = wd.is_some();
        self.nodes.insert(name.to_owned(), wd);
        added
    }

    fn forget(&mut self, name: &str) {
        if let Some(Some(wd)) = self.nodes.remove(name) {
            // Gone with the node already when it was deleted.
            let _ = self.events.watches().remove(wd);
        }
    }

    /// Take one event into account. `Err`: the directory went away.
    fn apply(
        &mut self,
        ev: &inotify::Event<std::ffi::OsString>,
        look: &mut Look,
    ) -> Result<(), String> {
        if ev.mask.contains(EventMask::Q_OVERFLOW) {
            self.relist()
                .map_err(|e| format!("cannot read {}: {e}", self.dir.display()))?;
            look.now = true;
            return Ok(());
        }
        if ev.wd == self.dir_wd {
            if ev
                .mask
                .intersects(EventMask::IGNORED | EventMask::DELETE_SELF | EventMask::MOVE_SELF)
            {
                return Err(format!("{} was removed or moved", self.dir.display()));
            }
            let Some(name) = ev.name.as_deref().and_then(OsStr::to_str) else {
                return Ok(());
            };
            if !is_video_node(name) {
                return Ok(());
            }
            if ev
                .mask
                .intersects(EventMask::DELETE | EventMask::MOVED_FROM)
            {
                self.forget(name);
                look.now = true;
            } else if ev.mask.contains(EventMask::ATTRIB) {
                // Only news when the node just became ours to watch (udev
                // gave us access to it).
                look.now |= self.watch(name);
            } else {
                self.watch(name);
                look.now = true;
            }
            return Ok(());
        }
        if ev.mask.contains(EventMask::IGNORED) {
            // The node was deleted (its directory event says which).
            for wd in self.nodes.values_mut() {
                if wd.as_ref() == Some(&ev.wd) {
                    *wd = None;
                }
            }
        }
        if ev.mask.contains(EventMask::OPEN) {
            look.settle = true;
        }
        look.now = true;
        Ok(())
    }
}

/// What the events of one batch ask for.
#[derive(Debug, Default)]
struct Look {
    /// Look at the openers now.
    now: bool,
    /// And once more [`SETTLE`] later.
    settle: bool,
}

/// How a watch ended.
enum End {
    Cancelled,
    Lost(String),
}

/// Run the source until `ctx.cancel`.
pub(crate) async fn run(ctx: SourceContext) {
    let dir = ctx.config.file.sources.v4l2.dir.clone();
    let mut backoff = Backoff::default();
    let mut instance: u64 = 0;
    loop {
        instance += 1;
        let prefix = format!("{NAME}-{instance}-");
        let end = watch(&ctx, &dir, &prefix, &mut backoff).await;
        if !ctx
            .send(SourceEvent::StreamsReset { id_prefix: prefix })
            .await
        {
            return;
        }
        let reason = match end {
            End::Cancelled => return,
            End::Lost(reason) => reason,
        };
        tracing::debug!(source = NAME, "{reason}");
        ctx.status(NAME, false, Some(reason)).await;
        if !ctx.sleep(backoff.next_delay()).await {
            return;
        }
    }
}

/// One watch of the directory, from start to end.
async fn watch(ctx: &SourceContext, dir: &Path, prefix: &str, backoff: &mut Backoff) -> End {
    let mut w = match Watcher::new(dir) {
        Ok(w) => w,
        Err(e) => return End::Lost(format!("cannot watch {}: {e}", dir.display())),
    };
    backoff.reset();
    tracing::info!(source = NAME, dir = %dir.display(), nodes = w.nodes.len(), "watching camera nodes");
    ctx.status(NAME, true, None).await;
    let mut reported = Reported {
        prefix: prefix.to_owned(),
        dir: dir.to_owned(),
        streams: BTreeMap::new(),
    };
    // Whoever holds a camera already.
    let mut look = Look {
        now: true,
        settle: false,
    };
    let mut settle: Option<tokio::time::Instant> = None;
    let mut exits = Exits::new();
    loop {
        if look.now {
            if look.settle {
                settle = Some(tokio::time::Instant::now() + SETTLE);
            }
            look = Look::default();
            let names: Vec<String> = w.nodes.keys().cloned().collect();
            let known = reported.streams.clone();
            let dir = dir.to_owned();
            let scan = match ctx
                .tasks
                .spawn_blocking(move || scan(&dir, names, known))
                .await
            {
                Ok(s) => s,
                Err(e) => return End::Lost(format!("looking for camera openers failed: {e}")),
            };
            for ev in reported.update(scan, chrono::Utc::now()) {
                if !ctx.send(ev).await {
                    return End::Cancelled;
                }
            }
            exits.follow(ctx, &reported.streams);
        }
        let deadline = settle.unwrap_or_else(tokio::time::Instant::now);
        tokio::select! {
            _ = ctx.cancel.cancelled() => return End::Cancelled,
            _ = tokio::time::sleep_until(deadline), if settle.is_some() => {
                settle = None;
                look.now = true;
            }
            Some(()) = exits.rx.recv() => look.now = true,
            ev = w.events.next() => {
                let mut next = ev;
                // Take the whole batch, then look once.
                loop {
                    match next {
                        Some(Ok(ev)) => {
                            if let Err(reason) = w.apply(&ev, &mut look) {
                                return End::Lost(reason);
                            }
                        }
                        Some(Err(e)) => return End::Lost(format!("inotify failed: {e}")),
                        None => return End::Lost("inotify ended".into()),
                    }
                    match w.events.next().now_or_never() {
                        Some(n) => next = n,
                        None => break,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn video_node_names() {
        for n in ["video0", "video12"] {
            assert!(is_video_node(n), "{n}");
        }
        for n in ["video", "videox", "video0p", "vbi0", "media0", "null"] {
            assert!(!is_video_node(n), "{n}");
        }
    }

    #[test]
    fn start_time_of_a_process_with_spaces_and_parens_in_its_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("stat"),
            "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100",
        )
        .expect("write");
        assert_eq!(start_time(dir.path()), Some(987654));
        std::fs::write(dir.path().join("stat"), "42 (x) S 1").expect("write");
        assert_eq!(start_time(dir.path()), None);
        assert!(start_time(Path::new("/proc/self")).is_some());
    }

    #[test]
    fn a_scan_finds_this_process_holding_a_node_and_not_other_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let node = dir.path().join("video0");
        std::fs::write(&node, b"").expect("write");
        // Same name elsewhere: not the node.
        let other = tempfile::tempdir().expect("tempdir");
        std::fs::write(other.path().join("video0"), b"").expect("write");
        let names = vec!["video0".to_owned(), "video1".to_owned()];
        let me = (String::from("video0"), std::process::id());

        let _decoy = std::fs::File::open(other.path().join("video0")).expect("open");
        let s = scan(dir.path(), names.clone(), BTreeMap::new());
        assert!(!s.found.contains_key(&me), "{s:?}");

        let f = std::fs::File::open(&node).expect("open");
        let s = scan(dir.path(), names.clone(), BTreeMap::new());
        let start = *s.found.get(&me).expect("found");
        let who = s.new.get(&me).expect("resolved");
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        assert_eq!(
            who.app_id.as_ref().map(ToString::to_string),
            Some(format!("exe:{}", exe.display()))
        );
        // Known openers are not resolved again.
        let known: BTreeMap<Opener, u64> = [(me.clone(), start)].into();
        assert!(scan(dir.path(), names.clone(), known).new.is_empty());

        drop(f);
        let s = scan(dir.path(), names, BTreeMap::new());
        assert!(!s.found.contains_key(&me), "{s:?}");
    }

    #[test]
    fn the_media_server_is_not_a_camera_user() {
        let w = |exe: &str| Who {
            app_id: AppId::from_exe(exe).ok(),
            comm: None,
        };
        assert!(is_media_server(&w("/usr/bin/pipewire")));
        assert!(is_media_server(&w("/usr/bin/wireplumber")));
        assert!(!is_media_server(&w("/usr/bin/cheese")));
        assert!(!is_media_server(&Who {
            app_id: None,
            comm: Some("pipewire".into()),
        }));
    }

    #[test]
    fn streams_follow_the_openers() {
        let mut r = Reported {
            prefix: "v4l2-1-".into(),
            dir: PathBuf::from("/dev"),
            streams: BTreeMap::new(),
        };
        let who = Who {
            app_id: AppId::from_exe("/usr/bin/cheese").ok(),
            comm: Some("cheese".into()),
        };
        let a = (String::from("video0"), 10);
        let b = (String::from("video0"), 11);
        let scan_of = |found: &[(&Opener, u64)]| Scan {
            found: found.iter().map(|(k, s)| ((*k).clone(), *s)).collect(),
            new: found
                .iter()
                .map(|(k, _)| ((*k).clone(), who.clone()))
                .collect(),
        };
        let ev = r.update(scan_of(&[(&a, 5), (&b, 6)]), chrono::Utc::now());
        assert_eq!(ev.len(), 2);
        match &ev[0] {
            SourceEvent::Stream { stream } => {
                assert_eq!(stream.id, "v4l2-1-video0-10");
                assert_eq!(stream.kind, MediaKind::Camera);
                assert_eq!(stream.state, StreamState::Running);
                assert_eq!(stream.media_name.as_deref(), Some("/dev/video0"));
                assert_eq!(stream.claimed_name.as_deref(), Some("cheese"));
            }
            other => panic!("{other:?}"),
        }
        // Unchanged: nothing. One closes: its stream only.
        assert!(
            r.update(scan_of(&[(&a, 5), (&b, 6)]), chrono::Utc::now())
                .is_empty()
        );
        let ev = r.update(scan_of(&[(&b, 6)]), chrono::Utc::now());
        assert_eq!(
            ev,
            vec![SourceEvent::StreamRemoved {
                id: "v4l2-1-video0-10".into()
            }]
        );
        // The PID of a new process: the old stream ends, a new one starts.
        let ev = r.update(scan_of(&[(&b, 7)]), chrono::Utc::now());
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert!(matches!(&ev[0], SourceEvent::StreamRemoved { .. }));
        assert!(matches!(&ev[1], SourceEvent::Stream { .. }));
    }

    #[tokio::test]
    async fn the_real_dev_can_be_watched() {
        // /dev may hold no video node here; the directory watch is what a
        // hot-plugged camera needs.
        let w = Watcher::new(Path::new("/dev")).expect("watch /dev");
        assert!(w.nodes.keys().all(|n| is_video_node(n)));
        assert!(Watcher::new(Path::new("/nonexistent-contextd")).is_err());
    }
}

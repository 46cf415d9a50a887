//! What the broker has written to the bus and the bus daemon has not read
//! yet: the queue a method's reply waits behind.
//!
//! Why it matters: the broker's connection to the bus is one socket, read
//! by the bus daemon in order. Under a storm of subscription signals
//! (`make soak`: 1000 focus changes a second, 50 subscribers) the socket
//! held up to 220 KB of signals not yet read, a full send buffer, and a
//! `Peer.Ping`'s reply, written after them, waited for the bus daemon to
//! route every one (it reads a few kilobytes per turn of its main loop,
//! between all its other connections): 4 to 6 times the bus daemon's own
//! `Ping` under the same load. The subscriptions' writer
//! (`subscription::write_signals`) now writes only while fewer than
//! [`SendQueue::LOW`] bytes wait, so a reply finds a short queue; the
//! signals wait in the broker instead, where their subscribers' feeds lag
//! and skip to now (`Subscription1.Lagged`) as they did when the socket
//! was full.
//!
//! How far: the bus daemon reads 2 048 bytes of a connection per turn of
//! its main loop (`max_bytes_read_per_iteration` in libdbus's socket
//! transport), so every 2 KB ahead of a reply is one more turn of the
//! daemon across all its connections before the reply is even read. A
//! `Peer.Ping` to any peer crosses the daemon twice; to stay at that
//! floor a reply must never find more than one turn's reading ahead of
//! it. So the writer writes only when the bus daemon has read everything
//! of ours ([`SendQueue::LOW`] is less than one signal), and then at most
//! a turn's worth (`subscription::WRITE_AT_ONCE`). With a low mark of
//! three signals (4 KiB) the broker's `Ping` under `make soak` was 1.2 to
//! 1.5 times a bare peer's (a connection that only answers); with an
//! empty queue, 1.1 (docs/performance.md). The subscribers of a storm get
//! fewer signals and skip to now sooner (`Lagged`), which is what a storm
//! beyond what the bus can carry must come to anyway.
//!
//! How to know when to write again, without polling: the kernel wakes a
//! Unix socket's writer when what waits unread falls to a quarter of the
//! socket's send buffer (`unix_writable`), so while signals wait the send
//! buffer is set to four times the low mark and the writer waits for the
//! socket to be writable. Only while they wait: with that small buffer a
//! large reply (a page of 100 provided entries, about 30 KB) is written
//! in parts, the broker woken for each while the bus daemon finds the
//! socket empty, and `GetProvidedPage` took 5.1 times a `Peer.Ping`
//! instead of 3.9 (`make bench`'s provider bench); once the writer has
//! nothing left the socket's own buffer is set back. The kernel counts buffers, not bytes (a 300-byte signal is
//! 1 280 bytes of `SIOCOUTQ` and of the send buffer), and so do both the
//! mark and the buffer. A reply larger than the buffer is written in
//! parts as the daemon reads it, as before: the daemon's 2 KB a turn, not
//! the buffer, is what limits it. Where the buffer cannot be set that
//! small, the writer looks again every [`LOOK_EVERY`] on a timer
//! (`timerfd`: tokio's timer resolves milliseconds, and a writer that
//! slept a millisecond after every turn left the socket empty most of
//! the time: a fan-out to 250 readers missed its target).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio_util::sync::CancellationToken;

/// How often the writer looks again where the socket's writability does
/// not tell (see the module's doc).
const LOOK_EVERY: Duration = Duration::from_micros(200);

/// The broker's end of its bus socket (a duplicate of the descriptor the
/// connection uses), asked how much of what was written is still unread.
#[derive(Debug)]
pub(crate) struct SendQueue {
    fd: OwnedFd,
    /// The low mark in force: [`SendQueue::LOW`], or a quarter of the send
    /// buffer the kernel gave when that is less.
    low: usize,
    /// The socket's writability says when the queue falls to `low` (its
    /// send buffer is four times `low`).
    writable_tells: bool,
    /// What the writer waits on, made on its first wait (on the runtime
    /// that waits: a descriptor registers with one reactor).
    wake: Option<Wake>,
    /// The send buffer the socket came with (as `SO_SNDBUF` reports it),
    /// in force while no signal waits, and whether the small one is in
    /// force now.
    roomy: Option<usize>,
    narrowed: bool,
}

#[derive(Debug)]
enum Wake {
    /// The socket's writability (a second descriptor of it).
    Writable(AsyncFd<OwnedFd>),
    /// A microsecond timer.
    Tick(Tick),
}

impl SendQueue {
    /// Below this many unread bytes the writer writes: less than the
    /// smallest signal in the kernel's accounting (a 300-byte signal is
    /// 1 280 bytes of `SIOCOUTQ`), so only when the bus daemon has read
    /// all of ours. Asked for twice this, the kernel's send buffer is its
    /// floor (`SOCK_MIN_SNDBUF`, about 4.6 KB) or 5 KB, and writability
    /// comes at a quarter of it: at this mark.
    pub(crate) const LOW: usize = 1280;

    /// A gauge of `fd`'s socket, whose send buffer is made four times
    /// [`Self::LOW`] while signals wait (the kernel doubles what it is
    /// asked for, and wakes a writer at a quarter of it).
    ///
    /// The small buffer is in force only while signals wait
    /// ([`Self::drained`] sets it, [`Self::idle`] gives the socket's own
    /// back): a reply larger than it (a page of 100 provided entries is
    /// about 30 KB) is otherwise written in parts, the broker woken for
    /// each, and the bus daemon finds the socket empty between them.
    pub(crate) fn new(fd: OwnedFd) -> SendQueue {
        let roomy = send_buffer(&fd);
        set_send_buffer(&fd, 2 * Self::LOW);
        let quarter = send_buffer(&fd).map(|b| b / 4);
        let mut q = SendQueue {
            fd,
            low: quarter.map_or(Self::LOW, |q| q.min(Self::LOW)),
            writable_tells: quarter.is_some_and(|q| q <= Self::LOW),
            wake: None,
            roomy,
            narrowed: true,
        };
        q.idle();
        q
    }

    /// No signal waits: the socket's own send buffer again, so that a
    /// large reply is written at once.
    pub(crate) fn idle(&mut self) {
        if let (true, Some(roomy)) = (self.narrowed, self.roomy) {
            // The kernel doubles what it is asked for.
            set_send_buffer(&self.fd, roomy / 2);
            self.narrowed = false;
        }
    }

    /// Signals wait: the small send buffer, whose writability says when
    /// the queue is at the low mark.
    fn narrow(&mut self) {
        if !self.narrowed {
            set_send_buffer(&self.fd, 2 * Self::LOW);
            self.narrowed = true;
        }
    }

    /// Bytes written to the socket and not yet read by its peer (for a
    /// Unix socket, `SIOCOUTQ` counts what the peer's receive queue holds
    /// of ours, in the kernel's accounting of buffers).
    pub(crate) fn unread(&self) -> std::io::Result<usize> {
        let mut n: libc::c_int = 0;
        // SAFETY: `TIOCOUTQ` (`SIOCOUTQ` for sockets) writes one `int`
        // through the pointer, which points to `n`, alive for the call; the
        // descriptor is ours (owned, open).
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Wait until fewer than the low mark's bytes are unread, or `cancel`.
    /// A socket that cannot be asked is taken as drained (the writer then
    /// works as it did without a gauge).
    pub(crate) async fn drained(&mut self, cancel: &CancellationToken) {
        if self.is_drained() {
            return;
        }
        self.narrow();
        if self.wake.is_none() {
            self.wake = self.make_wake();
        }
        loop {
            if let Some(Wake::Writable(fd)) = &self.wake {
                let mut ready = tokio::select! {
                    _ = cancel.cancelled() => return,
                    r = fd.writable() => match r {
                        Ok(ready) => ready,
                        Err(_) => return,
                    },
                };
                // Looked at after the readiness was taken: a wake-up from
                // here on sets it again (tokio clears only the one it
                // handed out).
                if self.is_drained() {
                    return;
                }
                ready.clear_ready();
                continue;
            }
            // No writability to wait on: look again after a moment.
            let pause = async {
                match &self.wake {
                    Some(Wake::Tick(tick)) => tick.after(LOOK_EVERY).await,
                    // No timerfd (a descriptor limit): tokio's timer.
                    _ => tokio::time::sleep(LOOK_EVERY).await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = pause => {}
            }
            if self.is_drained() {
                return;
            }
        }
    }

    fn is_drained(&self) -> bool {
        !matches!(self.unread(), Ok(n) if n >= self.low)
    }

    /// The socket's writability when its send buffer is what [`Self::new`]
    /// asked for (then it tells exactly when the queue falls to the low
    /// mark); a timer otherwise.
    fn make_wake(&self) -> Option<Wake> {
        let writable = self
            .writable_tells
            .then(|| self.fd.try_clone().ok())
            .flatten()
            .and_then(|fd| {
                // SAFETY: an OwnedFd stays open and is the same descriptor
                // for as long as the AsyncFd owns it.
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::WRITABLE) }.ok()
            });
        if let Some(fd) = writable {
            return Some(Wake::Writable(fd));
        }
        Tick::new().ok().map(Wake::Tick)
    }
}

/// Ask for a send buffer of `bytes` (the kernel keeps twice that, at
/// least its floor). A socket that refuses keeps the one it has: the
/// writer then waits on a timer ([`SendQueue::make_wake`]).
fn set_send_buffer(fd: &OwnedFd, bytes: usize) {
    let asked = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: SO_SNDBUF reads one `int`, alive for the call; the
    // descriptor is ours.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&asked as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// The socket's send buffer as the kernel keeps it (`SO_SNDBUF`, in its
/// accounting of buffers).
fn send_buffer(fd: &OwnedFd) -> Option<usize> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_SNDBUF writes one `int` to `v` and its size to `len`,
    // both alive for the call; the descriptor is ours.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return None;
    }
    usize::try_from(v).ok()
}

/// A one-shot timer with microsecond resolution (`timerfd`), for waits
/// shorter than tokio's timer wheel resolves.
#[derive(Debug)]
struct Tick {
    fd: AsyncFd<OwnedFd>,
}

impl Tick {
    fn new() -> std::io::Result<Tick> {
        // SAFETY: plain syscall; the result is checked before it is used.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an OwnedFd stays open and is the same descriptor for as
        // long as the AsyncFd owns it.
        let registered =
            unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
        match registered {
            Ok(fd) => Ok(Tick { fd }),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }

    /// Wait `d` (an error from the timer ends the wait at once: the writer
    /// then only looks again sooner).
    async fn after(&self, d: Duration) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(d.subsec_nanos().max(1)),
            },
        };
        let fd = self.fd.get_ref().as_fd().as_raw_fd();
        // SAFETY: `spec` is a valid itimerspec alive for the call, the old
        // value is not asked for (null), and `fd` is our timerfd.
        if unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) } < 0 {
            return;
        }
        loop {
            let Ok(mut ready) = self.fd.readable().await else {
                return;
            };
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into the 8-byte buffer.
            let n = unsafe { libc::read(fd, expirations.as_mut_ptr().cast(), expirations.len()) };
            if n == 8 {
                return;
            }
            if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock {
                return;
            }
            ready.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn counts_what_the_peer_has_not_read() {
        let (mut ours, mut theirs) = UnixStream::pair().expect("pair");
        let q = SendQueue::new(OwnedFd::from(ours.try_clone().expect("dup")));
        assert_eq!(q.unread().expect("ioctl"), 0);
        ours.write_all(&[7u8; 4096]).expect("write");
        let waiting = q.unread().expect("ioctl");
        assert!(waiting >= 4096, "{waiting} bytes counted, 4096 written");
        let mut buf = vec![0u8; 4096];
        theirs.read_exact(&mut buf).expect("read");
        assert_eq!(q.unread().expect("ioctl"), 0);
    }

    /// Write to `ours` (non-blocking) until the gauge says the queue is at
    /// its low mark or more.
    fn fill(ours: &mut UnixStream, q: &SendQueue) {
        let chunk = [1u8; 512];
        while q.unread().expect("ioctl") < q.low {
            match ours.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
    }

    fn empty(theirs: &mut UnixStream, q: &SendQueue) {
        theirs.set_nonblocking(true).expect("nonblocking");
        let mut buf = [0u8; 4096];
        while q.unread().expect("ioctl") > 0 {
            match theirs.read(&mut buf) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    #[tokio::test]
    async fn waits_while_the_queue_is_long_and_is_woken_once_read() {
        use futures_util::FutureExt;
        let (mut ours, mut theirs) = UnixStream::pair().expect("pair");
        ours.set_nonblocking(true).expect("nonblocking");
        let mut q = SendQueue::new(OwnedFd::from(ours.try_clone().expect("dup")));
        assert!(
            q.writable_tells,
            "the kernel keeps a send buffer of four times the low mark ({} bytes)",
            q.low
        );
        let cancel = CancellationToken::new();
        // A short queue: no wait at all.
        ours.write_all(&[1u8; 100]).expect("write");
        assert_eq!(q.drained(&cancel).now_or_never(), Some(()));
        // At the low mark, unread: it waits, on the socket's writability.
        fill(&mut ours, &q);
        assert_eq!(q.drained(&cancel).now_or_never(), None);
        assert!(matches!(q.wake, Some(Wake::Writable(_))));
        // Read by the peer: the kernel wakes the writer.
        empty(&mut theirs, &q);
        tokio::time::timeout(Duration::from_secs(5), q.drained(&cancel))
            .await
            .expect("woken once the peer read");
        // Again (the readiness handed out before was cleared, not lost).
        fill(&mut ours, &q);
        assert_eq!(q.drained(&cancel).now_or_never(), None);
        empty(&mut theirs, &q);
        tokio::time::timeout(Duration::from_secs(5), q.drained(&cancel))
            .await
            .expect("woken a second time");
        // A stop ends the wait too.
        fill(&mut ours, &q);
        cancel.cancel();
        assert_eq!(q.drained(&cancel).now_or_never(), Some(()));
    }

    #[tokio::test]
    async fn the_small_buffer_only_while_signals_wait() {
        use futures_util::FutureExt;
        let (mut ours, mut theirs) = UnixStream::pair().expect("pair");
        ours.set_nonblocking(true).expect("nonblocking");
        let roomy = send_buffer(&OwnedFd::from(ours.try_clone().expect("dup"))).expect("SO_SNDBUF");
        let mut q = SendQueue::new(OwnedFd::from(ours.try_clone().expect("dup")));
        let now = |q: &SendQueue| send_buffer(&q.fd).expect("SO_SNDBUF");
        // Made idle: a large reply is written at once.
        assert_eq!(now(&q), roomy);
        assert!(roomy > 4 * q.low, "{roomy}");
        // Signals wait behind a long queue: the small buffer, whose
        // writability tells the low mark.
        fill(&mut ours, &q);
        let cancel = CancellationToken::new();
        assert_eq!(q.drained(&cancel).now_or_never(), None);
        assert_eq!(now(&q), 4 * q.low);
        empty(&mut theirs, &q);
        tokio::time::timeout(Duration::from_secs(5), q.drained(&cancel))
            .await
            .expect("woken once the peer read");
        // Nothing waits any more: the socket's own again.
        q.idle();
        assert_eq!(now(&q), roomy);
    }

    #[tokio::test]
    async fn the_timer_fires_again_and_again() {
        let tick = Tick::new().expect("timerfd");
        for _ in 0..3 {
            tokio::time::timeout(Duration::from_secs(5), tick.after(LOOK_EVERY))
                .await
                .expect("the timer fired");
        }
    }
}

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
//! The kernel counts buffers, not bytes: a 300-byte signal is 1 280 bytes
//! of `SIOCOUTQ`. And the wait for the bus daemon to read is short (tens
//! of microseconds when it is idle), far below tokio's 1 ms timer: a
//! writer that slept a millisecond after every turn left the socket empty
//! most of the time, and a fan-out to 250 readers took 31 such sleeps
//! (`make bench`'s readers bench missed its target). So the writer looks
//! again every [`SendQueue::LOOK_EVERY`], on a timer of its own
//! (`timerfd`, microseconds).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio_util::sync::CancellationToken;

/// The broker's end of its bus socket (a duplicate of the descriptor the
/// connection uses), asked how much of what was written is still unread.
#[derive(Debug)]
pub(crate) struct SendQueue {
    fd: OwnedFd,
    /// The timer the writer waits on, made on its first wait (on the
    /// runtime that waits: a descriptor registers with one reactor).
    tick: Option<Tick>,
}

impl SendQueue {
    /// Below this many unread bytes (in the kernel's accounting: about a
    /// dozen signals) the writer writes: a reply waits behind at most
    /// this and one turn of signals.
    pub(crate) const LOW: usize = 16 * 1024;

    /// How often the writer looks again while the queue is longer: about
    /// what the bus daemon takes to read a few signals when it is not
    /// busy, so that the socket does not sit empty between turns.
    const LOOK_EVERY: Duration = Duration::from_micros(200);

    pub(crate) fn new(fd: OwnedFd) -> SendQueue {
        SendQueue { fd, tick: None }
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

    /// Wait until fewer than [`Self::LOW`] bytes are unread, or `cancel`.
    /// A socket that cannot be asked is taken as drained (the writer then
    /// works as it did without a gauge).
    pub(crate) async fn drained(&mut self, cancel: &CancellationToken) {
        while matches!(self.unread(), Ok(n) if n >= Self::LOW) {
            if self.tick.is_none() {
                self.tick = Tick::new().ok();
            }
            match &self.tick {
                Some(tick) => tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tick.after(Self::LOOK_EVERY) => {}
                },
                // No timerfd (never on Linux; a descriptor limit): tokio's
                // millisecond timer.
                None => tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(Self::LOOK_EVERY) => {}
                },
            }
        }
    }
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

    #[tokio::test]
    async fn waits_while_the_queue_is_long_and_goes_on_once_read() {
        use futures_util::FutureExt;
        let (mut ours, mut theirs) = UnixStream::pair().expect("pair");
        ours.set_nonblocking(true).expect("nonblocking");
        let mut q = SendQueue::new(OwnedFd::from(ours.try_clone().expect("dup")));
        let cancel = CancellationToken::new();
        // A short queue: no wait at all.
        ours.write_all(&[1u8; 100]).expect("write");
        assert_eq!(q.drained(&cancel).now_or_never(), Some(()));
        // More than LOW, unread: it waits.
        let chunk = [1u8; 1024];
        let mut written = 100;
        while written < 2 * SendQueue::LOW {
            written += ours.write(&chunk).expect("write");
        }
        assert_eq!(q.drained(&cancel).now_or_never(), None);
        // Read by the peer: it goes on at once.
        let mut buf = vec![0u8; written];
        theirs.read_exact(&mut buf).expect("read");
        assert_eq!(q.drained(&cancel).now_or_never(), Some(()));
        // A stop ends the wait too.
        ours.set_nonblocking(false).expect("blocking");
        ours.write_all(&vec![1u8; 2 * SendQueue::LOW])
            .expect("write");
        cancel.cancel();
        assert_eq!(q.drained(&cancel).now_or_never(), Some(()));
    }

    #[tokio::test]
    async fn the_timer_fires_again_and_again() {
        let tick = Tick::new().expect("timerfd");
        for _ in 0..3 {
            tokio::time::timeout(Duration::from_secs(5), tick.after(SendQueue::LOOK_EVERY))
                .await
                .expect("the timer fired");
        }
    }
}

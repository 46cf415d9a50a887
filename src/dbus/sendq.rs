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

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The broker's end of its bus socket (a duplicate of the descriptor the
/// connection uses), asked how much of what was written is still unread.
#[derive(Debug)]
pub(crate) struct SendQueue {
    fd: OwnedFd,
}

impl SendQueue {
    /// Below this many unread bytes the writer writes: a reply waits
    /// behind at most this and one turn of signals.
    pub(crate) const LOW: usize = 8 * 1024;

    /// How often the writer looks again while the queue is longer.
    const LOOK_EVERY: Duration = Duration::from_millis(1);

    pub(crate) fn new(fd: OwnedFd) -> SendQueue {
        SendQueue { fd }
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
    pub(crate) async fn drained(&self, cancel: &CancellationToken) {
        while matches!(self.unread(), Ok(n) if n >= Self::LOW) {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(Self::LOOK_EVERY) => {}
            }
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
        let q = SendQueue::new(OwnedFd::from(ours.try_clone().expect("dup")));
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
}

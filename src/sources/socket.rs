//! Waiting for a service's socket: the compositor's, PipeWire's, a bus's.
//!
//! A source whose service is gone waits for its socket to be created
//! (inotify on the socket's directory, and for a symlink on its target's
//! directory too, where a restarted service makes its new socket) or for
//! the next retry of its [`Backoff`], whichever comes first. The retry
//! covers what inotify cannot see (a socket that is there but refuses, a
//! directory that did not exist). While the socket file does not exist at
//! all and its directory is watched, only its creation can change
//! anything, so the retry waits [`ABSENT_RECHECK`] instead: a machine
//! without the service (no system bus in a container, no compositor on a
//! server) costs no wake-ups, and nothing spins.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use inotify::{EventStream, Inotify, WatchMask};
use tokio_util::sync::CancellationToken;

use super::Backoff;

/// The retry while the socket is absent and its directory watched: only
/// for what inotify misses (the directory itself removed and made again).
pub(crate) const ABSENT_RECHECK: Duration = Duration::from_secs(300);

/// Watches for a socket (re)appearing.
pub(crate) struct SocketWatch {
    source: &'static str,
    path: PathBuf,
    stream: Option<EventStream<Vec<u8>>>,
    names: Vec<OsString>,
}

impl std::fmt::Debug for SocketWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketWatch")
            .field("source", &self.source)
            .field("path", &self.path)
            .field("watching", &self.stream.is_some())
            .finish()
    }
}

impl SocketWatch {
    /// Watch for `path` (for `source`'s logs). Without inotify, or when no
    /// directory can be watched, [`SocketWatch::wait`] is the backoff alone.
    pub(crate) fn new(source: &'static str, path: &Path) -> SocketWatch {
        let mut names = Vec::new();
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut add = |p: &Path| {
            if let (Some(dir), Some(name)) = (p.parent(), p.file_name()) {
                if !dirs.iter().any(|d| d == dir) {
                    dirs.push(dir.to_path_buf());
                }
                names.push(name.to_owned());
            }
        };
        add(path);
        // A symlink (a test session, a nested compositor): its target's
        // directory too, where a restarted service makes a new socket.
        if let Ok(target) = std::fs::read_link(path) {
            let target = match path.parent() {
                Some(dir) if target.is_relative() => dir.join(target),
                _ => target,
            };
            add(&target);
        }
        let setup = || -> std::io::Result<EventStream<Vec<u8>>> {
            let ino = Inotify::init()?;
            let mut any = false;
            for d in &dirs {
                match ino
                    .watches()
                    .add(d, WatchMask::CREATE | WatchMask::MOVED_TO)
                {
                    Ok(_) => any = true,
                    Err(e) => {
                        tracing::debug!(source, dir = %d.display(), error = %e, "cannot watch")
                    }
                }
            }
            if !any {
                return Err(std::io::Error::other("no directory could be watched"));
            }
            ino.into_event_stream(vec![0u8; 4096])
        };
        let stream = match setup() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::debug!(source, socket = %path.display(), error = %e, "no inotify; retrying with backoff only");
                None
            }
        };
        SocketWatch {
            source,
            path: path.to_path_buf(),
            stream,
            names,
        }
    }

    /// Resolves when a watched name is created; never without inotify.
    pub(crate) async fn appeared(&mut self) {
        loop {
            let Some(s) = self.stream.as_mut() else {
                return std::future::pending().await;
            };
            match s.next().await {
                Some(Ok(ev)) => {
                    if ev.name.as_ref().is_some_and(|n| self.names.contains(n)) {
                        return;
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(source = self.source, error = %e, "inotify failed; retrying with backoff only");
                    self.stream = None;
                }
                None => self.stream = None,
            }
        }
    }

    /// How long to wait before the next try: the backoff's next delay, or
    /// [`ABSENT_RECHECK`] while the socket is absent and watched.
    fn delay(&self, backoff: &mut Backoff) -> Duration {
        // `symlink_metadata`: a dangling symlink is there, and its target's
        // directory is watched too.
        let absent = std::fs::symlink_metadata(&self.path).is_err();
        if absent && self.stream.is_some() {
            ABSENT_RECHECK
        } else {
            backoff.next_delay()
        }
    }

    /// Wait for the socket to appear or for the next retry; `false` when
    /// cancelled. An appearance resets `backoff` and waits a moment (a
    /// socket is bound before it listens; if that was not enough, the
    /// next try comes soon).
    pub(crate) async fn wait(&mut self, cancel: &CancellationToken, backoff: &mut Backoff) -> bool {
        let delay = self.delay(backoff);
        tokio::select! {
            _ = cancel.cancelled() => false,
            _ = self.appeared() => {
                backoff.reset();
                tokio::select! {
                    _ = cancel.cancelled() => false,
                    _ = tokio::time::sleep(Duration::from_millis(20)) => true,
                }
            }
            _ = tokio::time::sleep(delay) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_absent_watched_socket_waits_for_its_creation_not_the_backoff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sock");
        let w = SocketWatch::new("test", &path);
        let mut backoff = Backoff::default();
        assert_eq!(w.delay(&mut backoff), ABSENT_RECHECK);
        // There (even if it refuses): the backoff retries.
        std::fs::write(&path, b"").expect("write");
        assert_eq!(w.delay(&mut backoff), Duration::from_millis(250));
        // Unwatched (no such directory): the backoff alone.
        let lost = SocketWatch::new("test", Path::new("/nonexistent-dir/sock"));
        assert_eq!(lost.delay(&mut backoff), Duration::from_millis(500));

        let cancel = CancellationToken::new();
        std::fs::remove_file(&path).expect("rm");
        let mut w = SocketWatch::new("test", &path);
        let creator = {
            let path = path.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                std::fs::write(&path, b"").expect("create");
            })
        };
        // Resolves on the creation, long before ABSENT_RECHECK (the test's
        // own timeout would end it otherwise).
        let woke = tokio::time::timeout(Duration::from_secs(60), w.wait(&cancel, &mut backoff));
        assert!(woke.await.expect("woken by the creation"));
        creator.await.expect("creator");
        // Woken by the watch (which resets the backoff), not a retry.
        assert_eq!(backoff.next_delay(), Duration::from_millis(250));
    }
}

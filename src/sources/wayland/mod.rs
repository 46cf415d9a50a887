//! Windows and focus from the Wayland compositor, through the
//! foreign-toplevel protocols (`zwlr_foreign_toplevel_manager_v1`, offered
//! by wlroots compositors, and `ext_foreign_toplevel_list_v1`).
//!
//! - [`client`]: one connection on its own thread, sending the changes
//!   into the core's channel as each batch of events is read;
//! - [`toplevels`]: the protocol bookkeeping (double-buffering until
//!   `done`, window ids, the pairing of ext and wlr handles);
//! - this module: finds the socket, (re)connects, reports the source's
//!   health.
//!
//! Availability: no `WAYLAND_DISPLAY` (or a relative one without
//! `XDG_RUNTIME_DIR`), a socket that is gone or refuses, a compositor that
//! offers neither protocol: the source is `unavailable` with that reason
//! in `ListSources`. When a connection ends the windows of that compositor
//! are removed (`WindowsReset`) and the source waits for the socket to
//! come back ([`super::socket`]): inotify on the socket's directory (and,
//! for a symlink, on its target's directory) wakes it at once, and a retry
//! with a backoff (250 ms doubling to 30 s; 5 min while the socket is
//! absent and watched) covers what inotify cannot see. Nothing spins while
//! the compositor is gone.
//!
//! `WAYLAND_DISPLAY` is read once, at start (a process's environment does
//! not change); a broker started before the compositor exported it has
//! to be restarted (the systemd unit is ordered after the graphical
//! session for that reason).

pub(crate) mod client;
pub(crate) mod selection;
pub(crate) mod sway;
pub(crate) mod toplevels;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::socket::SocketWatch;
use super::{Backoff, SourceContext};
use crate::core::SourceEvent;
use client::{Connection, Ended};

pub(crate) const NAME: &str = "wayland";

/// Where the compositor's socket is, or why that is not known.
pub(crate) fn socket_path(
    wayland_display: Option<&std::ffi::OsStr>,
    runtime_dir: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, String> {
    let display = wayland_display
        .filter(|v| !v.is_empty())
        .ok_or_else(|| "WAYLAND_DISPLAY is not set: no Wayland session to watch".to_owned())?;
    let display = PathBuf::from(display);
    if display.is_absolute() {
        return Ok(display);
    }
    let rt = runtime_dir
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .ok_or_else(|| {
            format!(
                "WAYLAND_DISPLAY={} is relative and XDG_RUNTIME_DIR is not set",
                display.display()
            )
        })?;
    Ok(rt.join(display))
}

/// The compositor's socket from the environment, or why there is none to
/// follow; the same for the selection source.
///
/// libwayland-client is loaded at run time (wayland-backend's
/// `client_system` with `dlopen`, Cargo.toml says why), so a machine
/// without it still runs the broker: both sources say what to install.
pub(crate) fn socket_from_env() -> Result<PathBuf, String> {
    if !wayland_sys::client::is_lib_available() {
        return Err("libwayland-client.so.0 cannot be loaded (the package \
                    libwayland-client0): the compositor is not followed"
            .to_owned());
    }
    socket_path(
        std::env::var_os("WAYLAND_DISPLAY").as_deref(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
    )
}

/// The source, with the socket from the environment.
pub(crate) async fn run(ctx: SourceContext) {
    match socket_from_env() {
        Ok(p) => run_at(ctx, p, Backoff::default()).await,
        Err(reason) => {
            tracing::info!(source = NAME, "{reason}");
            ctx.status(NAME, false, Some(reason)).await;
            ctx.cancel.cancelled().await;
        }
    }
}

pub(crate) fn connect(path: &Path) -> Result<UnixStream, String> {
    UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("no compositor socket at {}", path.display()),
        std::io::ErrorKind::ConnectionRefused => {
            format!(
                "the compositor socket {} refuses connections",
                path.display()
            )
        }
        _ => format!("cannot connect to {}: {e}", path.display()),
    })
}

/// Pre-load the desktop entries off the async threads (the first scan
/// reads every `.desktop` file).
async fn warm_desktop_entries() {
    let _ = tokio::task::spawn_blocking(|| {
        crate::desktop_entry::shared()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refresh(false);
    })
    .await;
}

/// The source on the socket at `path`, retrying with `backoff`.
pub async fn run_at(ctx: SourceContext, path: PathBuf, mut backoff: Backoff) {
    let mut generation: u64 = 0;
    let mut last_error: Option<String> = None;
    let mut watch: Option<SocketWatch> = None;
    warm_desktop_entries().await;
    // Set when the last connection died young: wait before the next try.
    let mut wait_first = false;
    loop {
        if ctx.cancel.is_cancelled() {
            return;
        }
        // Watch before each try, so that a socket that appears between a
        // failed try and the wait is not missed.
        let w = watch.get_or_insert_with(|| SocketWatch::new(NAME, &path));
        if wait_first {
            wait_first = false;
            if !w.wait(&ctx.cancel, &mut backoff).await {
                return;
            }
            continue;
        }
        let stream = match connect(&path) {
            Ok(s) => s,
            Err(reason) => {
                if last_error.as_deref() != Some(reason.as_str()) {
                    tracing::info!(source = NAME, "{reason}; waiting for the compositor");
                    ctx.status(NAME, false, Some(reason.clone())).await;
                    last_error = Some(reason);
                }
                if !w.wait(&ctx.cancel, &mut backoff).await {
                    return;
                }
                continue;
            }
        };
        watch = None;
        generation += 1;
        let resolver: toplevels::Resolver = Box::new(crate::desktop_entry::for_window);
        let finder = sway::finder_from_env();
        let mut conn = match Connection::start(stream, generation, ctx.tx.clone(), resolver, finder)
        {
            Ok(c) => c,
            Err(e) => {
                let reason = format!("cannot start the Wayland thread: {e}");
                tracing::error!(source = NAME, "{reason}");
                ctx.status(NAME, false, Some(reason.clone())).await;
                last_error = Some(reason);
                wait_first = true;
                continue;
            }
        };
        let started = Instant::now();
        tracing::info!(source = NAME, path = %path.display(), generation, "connected to the compositor");
        let ended = tokio::select! {
            _ = ctx.cancel.cancelled() => {
                conn.join(THREAD_STOP).await;
                return;
            }
            e = &mut conn.ended => e.unwrap_or(Ended::Lost("the Wayland thread died".into())),
        };
        // It has ended (or died): joining takes no time.
        conn.join(THREAD_STOP).await;
        match ended {
            Ended::Stopped | Ended::CoreGone => return,
            Ended::Lost(reason) => {
                tracing::info!(source = NAME, "{reason}");
                if !ctx.send(SourceEvent::WindowsReset).await {
                    return;
                }
                ctx.status(NAME, false, Some(reason.clone())).await;
                last_error = Some(reason);
                // A connection that lived a while: try again at once (the
                // socket is most likely gone, and then the watch waits).
                // One that died young (a compositor that drops us at
                // once): back off, so that this never spins.
                if started.elapsed() >= LIVED_LONG {
                    backoff.reset();
                } else {
                    wait_first = true;
                }
            }
        }
    }
}

/// How long a connection's thread may take to stop.
const THREAD_STOP: Duration = Duration::from_millis(300);

/// A connection that lasted this long resets the backoff.
const LIVED_LONG: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn socket_path_follows_libwayland() {
        let rt = Some(OsStr::new("/run/user/1000"));
        assert_eq!(
            socket_path(Some(OsStr::new("wayland-1")), rt),
            Ok(PathBuf::from("/run/user/1000/wayland-1"))
        );
        assert_eq!(
            socket_path(Some(OsStr::new("/tmp/w")), None),
            Ok(PathBuf::from("/tmp/w"))
        );
        assert!(
            socket_path(None, rt)
                .unwrap_err()
                .contains("WAYLAND_DISPLAY is not set")
        );
        assert!(socket_path(Some(OsStr::new("")), rt).is_err());
        assert!(
            socket_path(Some(OsStr::new("wayland-0")), None)
                .unwrap_err()
                .contains("XDG_RUNTIME_DIR")
        );
        assert!(socket_path(Some(OsStr::new("wayland-0")), Some(OsStr::new("rel"))).is_err());
    }
}

//! The HTTP server loop the loopback publishers share (MCP over HTTP, the
//! dashboard): accept, refuse loopback peers of another uid, bound the
//! open connections per peer, HTTP/1.1 with a header timeout, and a
//! graceful end of every connection when the publisher stops. Routing,
//! authentication and everything else is each publisher's.
//!
//! Loopback is shared by every user of the machine. Before a byte of a
//! request is read, the uid owning the peer's socket is looked up
//! ([`peer`]) and a peer that is not our own uid is closed at once: another
//! user can neither try tokens or session links nor hold connection slots.
//! Slots are counted per peer: the user's own connections have theirs;
//! non-loopback peers (only with `[mcp.http] allow_remote = true`, whose
//! uid no kernel here knows) have their own, so they cannot use up the
//! user's either.
//!
//! A refusal sent before the request's body was read (401, 403, 413 on the
//! declared length) carries `Connection: close` (the publisher sets it);
//! such a connection ends with a lingering close ([`linger`]): our side
//! is half-closed after the response, and what the client still sends is
//! read and dropped until it closes (bounded in time and bytes). Closing a
//! socket with unread bytes in it makes the kernel answer with a reset,
//! which reaches a client still writing its body before it reads the
//! response: it would see a broken connection instead of the status.

mod peer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client may take to send a request's head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A lingering close waits at most this long for the client to close.
const LINGER_TIME: Duration = Duration::from_secs(5);
/// ... and reads (and drops) at most this much of what it still sends.
const LINGER_BYTES: u64 = 64 << 20;

/// Who a connection comes from, as far as slots go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// A loopback socket of our own uid.
    Ours,
    /// A loopback socket of another uid (or one the kernel no longer
    /// knows): refused.
    Stranger(Option<u32>),
    /// Not loopback: only a listener the user opened to the network
    /// (`allow_remote`) sees these; its bearer token is what counts.
    Remote,
}

/// The peer of an accepted connection.
fn classify(stream: &TcpStream, peer: SocketAddr, me: u32) -> Peer {
    if !peer.ip().to_canonical().is_loopback() {
        return Peer::Remote;
    }
    let Ok(local) = stream.local_addr() else {
        return Peer::Stranger(None);
    };
    match peer::uid_of(local, peer) {
        Ok(uid) if uid == me => Peer::Ours,
        Ok(uid) => Peer::Stranger(Some(uid)),
        Err(e) => {
            tracing::debug!(%peer, error = %e, "cannot tell who owns a loopback peer");
            Peer::Stranger(None)
        }
    }
}

/// Serve `app` on `listener` until `cancel`; each connection's task is
/// spawned on `tasks` (the publishers' level of the shutdown tree). At
/// most `max_connections` of the user's own at once (more wait to be
/// accepted), and as many again from non-loopback peers (more are closed).
/// `what` names the port in logs.
pub(crate) async fn serve(
    listener: &TcpListener,
    app: Router,
    max_connections: usize,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
    what: &'static str,
) {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    let ours = Arc::new(Semaphore::new(max_connections));
    let remote = Arc::new(Semaphore::new(max_connections));
    loop {
        let (stream, addr) = tokio::select! {
            _ = cancel.cancelled() => break,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept on the {what} port failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit: OwnedSemaphorePermit = match classify(&stream, addr, me) {
            Peer::Stranger(uid) => {
                tracing::debug!(peer = %addr, ?uid, "refused a {what} connection from another user");
                continue;
            }
            Peer::Remote => match remote.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    tracing::debug!(peer = %addr, "no free {what} slot for a remote peer");
                    continue;
                }
            },
            Peer::Ours => tokio::select! {
                _ = cancel.cancelled() => break,
                p = ours.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            },
        };
        let _ = stream.set_nodelay(true);
        // Hyper gets a second descriptor of the socket: dropping its own
        // does not close the connection, so that [`linger`] can end it.
        let (stream, ours) = match split_fd(stream) {
            Ok(pair) => pair,
            Err(e) => {
                tracing::debug!(peer = %addr, error = %e, "cannot set up a {what} connection");
                continue;
            }
        };
        let closing = Arc::new(AtomicBool::new(false));
        let service = Watched {
            app: TowerToHyperService::new(app.clone()),
            closing: closing.clone(),
        };
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let stopped = tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "HTTP connection ended");
                    }
                    false
                }
                _ = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_millis(300), conn).await;
                    true
                }
            };
            if !stopped && closing.load(Ordering::Relaxed) {
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = linger(ours) => {}
                }
            }
            drop(permit);
        });
    }
}

/// A connection's service: the app, noting whether a response ends the
/// connection (`Connection: close`, see [`linger`]). A wrapper rather than
/// `Router::layer`, which rebuilds the router (every route boxed again,
/// about 3 KiB) for each connection, held while it is open.
struct Watched {
    app: TowerToHyperService<Router>,
    closing: Arc<AtomicBool>,
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Watched {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>,
    >;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        let answer = self.app.call(req);
        let closing = self.closing.clone();
        Box::pin(async move {
            let r = answer.await?;
            if closes(&r) {
                closing.store(true, Ordering::Relaxed);
            }
            Ok(r)
        })
    }
}

/// Two descriptors of one accepted socket: one for hyper, one kept to end
/// the connection ourselves.
fn split_fd(stream: TcpStream) -> std::io::Result<(TcpStream, TcpStream)> {
    let std = stream.into_std()?;
    let other = std.try_clone()?;
    Ok((TcpStream::from_std(std)?, TcpStream::from_std(other)?))
}

/// Whether a response ends its connection (`Connection: close`).
fn closes(r: &axum::response::Response) -> bool {
    r.headers()
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("close"))
}

/// A lingering close: half-close our side (the response is out; the
/// client reads it and sees the end), then read and drop what the client
/// still sends until it closes, [`LINGER_TIME`] passes or
/// [`LINGER_BYTES`] came. Only then is the socket closed, with nothing
/// unread in it, so no reset overtakes the response.
async fn linger(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    let drain = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    total += n as u64;
                    if total >= LINGER_BYTES {
                        break;
                    }
                }
            }
        }
    };
    if tokio::time::timeout(LINGER_TIME, drain).await.is_err() {
        tracing::debug!("a client did not close within {LINGER_TIME:?} after a refusal");
    }
}

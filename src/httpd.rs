//! The HTTP server loop the loopback publishers share (MCP over HTTP, the
//! dashboard): accept, refuse loopback peers of another uid, bound the
//! open connections per peer, HTTP/1.1 with header deadlines, slots that
//! connections which never authenticated cannot hold against those that
//! do, and a graceful end of every connection when the publisher stops.
//! Routing, authentication and everything else is each publisher's.
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
//! # Slots cannot be held by connections that prove nothing
//!
//! Every program of the user's uid, and a Flatpak app allowed on the
//! network, is "the user's own" to the kernel. Such a program can open as
//! many connections as there are slots and send their request heads a
//! byte every few seconds, never finishing (a "slow head"). With slots
//! taken first come, first served, a real client then waited for a slot
//! until a slow head's deadline passed (seconds), and the program simply
//! opened the next one. The bounds now:
//!
//! - **A first head within [`FIRST_HEAD_TIMEOUT`]** (2 s): a connection
//!   that has not sent one complete request head by then is closed. Later
//!   heads on a kept-alive connection have [`HEADER_TIMEOUT`] (10 s, from
//!   the end of the previous response), as before.
//! - **Eviction, never waiting, while a slot holds a connection that has
//!   proven nothing.** A connection is *proven* once a request on it passed
//!   its publisher's authentication ([`vouch`]: MCP's bearer token, the
//!   dashboard's session or one-time link). When every slot is taken, a
//!   new connection takes the slot of the *oldest unproven* connection
//!   (still sending its first head, idle after refused requests, in a
//!   refused request, or lingering after one), which is closed at once.
//!   Only when no unproven connection is left does it take the slot of the
//!   *proven connection idle the longest* (kept alive between requests;
//!   its client reconnects, as after any keep-alive timeout). Proven
//!   connections with a request in progress (a call waiting for the user,
//!   an event stream) are never closed for a newcomer: only when every
//!   slot is one of those does a new connection wait for a slot.
//!
//! So slow heads cannot keep a real client out: its connection is accepted
//! as soon as the accept loop reaches it, without waiting for any
//! deadline, and it is the newest, so a flood would have to push a whole
//! table of connections through before its head (sent in one write by
//! every real client) is read. What is left is the accept queue ahead of it
//! (each accept is one `sock_diag` lookup), measured by `make bench`
//! (`mcp`: an authenticated request's latency under a flood of slow
//! heads). A kept-alive connection of a real MCP host is not a slow head:
//! under such a flood it keeps its slot.
//!
//! No bound per peer process: the kernel's socket lookup names the uid
//! (and the socket's inode), not a process; finding the process means
//! walking every `/proc/PID/fd` for each connection, and a program of the
//! user's uid can fork as many processes as it likes. Eviction holds
//! whatever the number of processes. A program that floods the port with
//! new connections as fast as the CPU allows competes for the CPU, which
//! no slot policy changes; the user's own unsandboxed programs can do
//! worse (the threat model in the README).
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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client may take to send a request's head on a kept-alive
/// connection (from the end of the previous response).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new connection may take to send its first request's head.
/// Every real client writes it at once; a connection that has not sent
/// it by then is closed.
pub const FIRST_HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// A lingering close waits at most this long for the client to close.
const LINGER_TIME: Duration = Duration::from_secs(5);
/// ... and reads (and drops) at most this much of what it still sends.
const LINGER_BYTES: u64 = 64 << 20;
/// How often the accept loop, waiting for a slot, looks again for a
/// connection to close (one whose request has ended since).
const RECHECK: Duration = Duration::from_millis(250);
/// "Slots were full" is logged at most this often per port.
const FULL_LOG_EVERY: Duration = Duration::from_secs(60);

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

/// One open connection, as the slots see it (the module docs say how
/// slots are shared).
#[derive(Debug)]
struct Conn {
    accepted: Instant,
    /// A request on it passed its publisher's authentication ([`vouch`]).
    proven: AtomicBool,
    /// A complete request head came (the first-head deadline is off).
    started: AtomicBool,
    /// Requests on it whose response is not sent yet.
    busy: AtomicUsize,
    /// When its last response was sent, in nanoseconds after `accepted`.
    idle_since: AtomicU64,
    /// Cancelled to close the connection and free its slot.
    evict: CancellationToken,
}

impl Conn {
    fn new(accepted: Instant) -> Conn {
        Conn {
            accepted,
            proven: AtomicBool::new(false),
            started: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            evict: CancellationToken::new(),
        }
    }

    fn proven(&self) -> bool {
        self.proven.load(Ordering::Relaxed)
    }

    fn idle_at(&self) -> Instant {
        self.accepted + Duration::from_nanos(self.idle_since.load(Ordering::Relaxed))
    }

    /// A response was sent (or a request abandoned).
    fn went_idle(&self) {
        let since = u64::try_from(self.accepted.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.idle_since.store(since, Ordering::Relaxed);
        self.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connection to close for a newcomer when every slot is taken: the
/// oldest unproven one, else the proven one idle the longest, never a
/// proven one with a request in progress nor one already closing.
fn victim<'a>(open: impl Iterator<Item = &'a Arc<Conn>> + Clone) -> Option<&'a Arc<Conn>> {
    let live = open.filter(|c| !c.evict.is_cancelled());
    live.clone()
        .filter(|c| !c.proven())
        .min_by_key(|c| c.accepted)
        .or_else(|| {
            live.filter(|c| c.proven() && c.busy.load(Ordering::Relaxed) == 0)
                .min_by_key(|c| c.idle_at())
        })
}

/// The slots of one kind of peer: a bounded number of open connections.
#[derive(Debug)]
struct Slots {
    free: Arc<Semaphore>,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    max: usize,
}

/// A slot held by a connection's task; dropping it frees the slot.
#[derive(Debug)]
struct Slot {
    slots: Arc<Slots>,
    id: u64,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Out of the table before the permit goes back (fields drop after
        // this), so a newcomer never picks a connection already gone.
        self.slots
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

/// Whether a newcomer may wait for a slot or is refused when none can be
/// had at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    Wait,
    Refuse,
}

impl Slots {
    fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            free: Arc::new(Semaphore::new(max)),
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            max,
        })
    }

    /// A slot for a connection accepted now: a free one, else one freed by
    /// closing the [`victim`]; with none to close, wait (until `cancel`)
    /// or give up. `evicted` is told when a connection was closed for it.
    async fn take(
        self: &Arc<Self>,
        full: Full,
        cancel: &CancellationToken,
        evicted: &mut impl FnMut(),
    ) -> Option<(Slot, Arc<Conn>)> {
        let permit = loop {
            if let Ok(p) = self.free.clone().try_acquire_owned() {
                break p;
            }
            let closed = {
                let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
                victim(open.values())
                    .inspect(|v| v.evict.cancel())
                    .is_some()
            };
            if closed {
                evicted();
            } else if full == Full::Refuse {
                return None;
            }
            // The victim's task frees its slot as soon as it runs; with
            // none, a slot frees when a connection ends, or a request
            // ends and makes its connection a victim.
            tokio::select! {
                _ = cancel.cancelled() => return None,
                p = self.free.clone().acquire_owned() => match p {
                    Ok(p) => break p,
                    Err(_) => return None,
                },
                _ = tokio::time::sleep(RECHECK) => {}
            }
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::new(Instant::now()));
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, conn.clone());
        Some((
            Slot {
                slots: self.clone(),
                id,
                _permit: permit,
            },
            conn,
        ))
    }
}

/// What a request carries (in its extensions) of the connection it came
/// on, for [`vouch`].
#[derive(Debug, Clone)]
struct Standing(Arc<Conn>);

/// The publisher authenticated the request with these `extensions` (a
/// valid bearer token, a dashboard session or link): its connection is
/// proven, and from now on closed for a newcomer only when idle and no
/// unproven connection is left (see the module docs). Call it as soon as
/// the credentials are checked, before the request's work, so that a
/// request waiting long (for the user's answer) is not taken for one that
/// proved nothing.
pub(crate) fn vouch(extensions: &http::Extensions) {
    if let Some(Standing(conn)) = extensions.get::<Standing>() {
        conn.proven.store(true, Ordering::Relaxed);
    }
}

/// Serve `app` on `listener` until `cancel`; each connection's task is
/// spawned on `tasks` (the publishers' level of the shutdown tree). At
/// most `max_connections` of the user's own at once and as many again
/// from non-loopback peers; a newcomer over that closes a connection that
/// proved nothing, or one idle (see the module docs); with none to close,
/// the user's own wait to be accepted and remote ones are closed. `what`
/// names the port in logs.
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
    let ours = Slots::new(max_connections);
    let remote = Slots::new(max_connections);
    let mut logged_full: Option<Instant> = None;
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
        let (slots, full) = match classify(&stream, addr, me) {
            Peer::Stranger(uid) => {
                tracing::debug!(peer = %addr, ?uid, "refused a {what} connection from another user");
                continue;
            }
            Peer::Remote => (&remote, Full::Refuse),
            Peer::Ours => (&ours, Full::Wait),
        };
        let mut evicted = || {
            tracing::debug!(peer = %addr, "closed a {what} connection to free its slot");
            if logged_full.is_none_or(|t| t.elapsed() >= FULL_LOG_EVERY) {
                logged_full = Some(Instant::now());
                tracing::warn!(
                    "all {} {what} connection slots were taken: closing the oldest connections \
                     that sent no authenticated request to let new ones in (some program holds \
                     connections open)",
                    slots.max
                );
            }
        };
        let Some((slot, conn)) = slots.take(full, cancel, &mut evicted).await else {
            if cancel.is_cancelled() {
                break;
            }
            tracing::debug!(peer = %addr, "no free {what} slot for a remote peer");
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Hyper gets a second descriptor of the socket: dropping its own
        // does not close the connection, so that [`linger`] can end it.
        let (stream, ours_fd) = match split_fd(stream) {
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
            conn: conn.clone(),
        };
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true);
            let served = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(served);
            let first_head = async {
                tokio::time::sleep_until((conn.accepted + FIRST_HEAD_TIMEOUT).into()).await;
                if conn.started.load(Ordering::Relaxed) {
                    std::future::pending::<()>().await;
                }
            };
            let ended = tokio::select! {
                r = served.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "HTTP connection ended");
                    }
                    true
                }
                _ = cancel.cancelled() => {
                    served.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_millis(300), served).await;
                    false
                }
                _ = conn.evict.cancelled() => false,
                _ = first_head => {
                    tracing::debug!("a {what} connection sent no request head within {FIRST_HEAD_TIMEOUT:?}");
                    false
                }
            };
            if ended && closing.load(Ordering::Relaxed) {
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = conn.evict.cancelled() => {}
                    _ = linger(ours_fd) => {}
                }
            }
        });
    }
}

/// A connection's service: the app, noting whether a response ends the
/// connection (`Connection: close`, see [`linger`]) and, for the slots,
/// when a request is in progress ([`InFlight`]) and whether one was
/// authenticated ([`vouch`]). A wrapper rather than `Router::layer`, which
/// rebuilds the router (every route boxed again, about 3 KiB) for each
/// connection, held while it is open.
struct Watched {
    app: TowerToHyperService<Router>,
    closing: Arc<AtomicBool>,
    conn: Arc<Conn>,
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Watched {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn call(&self, mut req: http::Request<hyper::body::Incoming>) -> Self::Future {
        self.conn.started.store(true, Ordering::Relaxed);
        let in_flight = InFlight::new(self.conn.clone());
        req.extensions_mut().insert(Standing(self.conn.clone()));
        let answer = self.app.call(req);
        let closing = self.closing.clone();
        Box::pin(async move {
            let r = answer.await?;
            if closes(&r) {
                closing.store(true, Ordering::Relaxed);
            }
            // The request is in progress until its response is sent.
            let (parts, body) = r.into_parts();
            Ok(axum::response::Response::from_parts(
                parts,
                Body::new(Sending {
                    body,
                    _in_flight: in_flight,
                }),
            ))
        })
    }
}

/// A request in progress on a connection, from its head until its
/// response is sent (or abandoned).
#[derive(Debug)]
struct InFlight(Arc<Conn>);

impl InFlight {
    fn new(conn: Arc<Conn>) -> InFlight {
        conn.busy.fetch_add(1, Ordering::Relaxed);
        InFlight(conn)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.went_idle();
    }
}

/// A response body being sent; hyper drops it once sent.
struct Sending {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Sending {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(accepted: Instant, proven: bool, busy: usize, idle_after: Duration) -> Arc<Conn> {
        let c = Conn::new(accepted);
        c.proven.store(proven, Ordering::Relaxed);
        c.busy.store(busy, Ordering::Relaxed);
        c.idle_since
            .store(idle_after.as_nanos() as u64, Ordering::Relaxed);
        Arc::new(c)
    }

    #[test]
    fn a_newcomer_closes_slow_heads_first_then_the_longest_idle_never_a_busy_proven() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let proven_idle_old = conn(t, true, 0, s(50));
        let proven_idle_new = conn(t + s(1), true, 0, s(1));
        let proven_busy = conn(t + s(2), true, 1, s(0));
        let slow_old = conn(t + s(3), false, 0, s(0));
        let slow_new = conn(t + s(4), false, 0, s(0));
        let refused_busy = conn(t + s(5), false, 1, s(0));
        let all = vec![
            proven_idle_old.clone(),
            proven_idle_new.clone(),
            proven_busy.clone(),
            slow_new.clone(),
            slow_old.clone(),
            refused_busy.clone(),
        ];
        let pick = |all: &[Arc<Conn>]| victim(all.iter()).cloned();
        // Unproven ones first, oldest first, busy or not.
        assert!(pick(&all).is_some_and(|v| Arc::ptr_eq(&v, &slow_old)));
        slow_old.evict.cancel();
        assert!(pick(&all).is_some_and(|v| Arc::ptr_eq(&v, &slow_new)));
        slow_new.evict.cancel();
        assert!(pick(&all).is_some_and(|v| Arc::ptr_eq(&v, &refused_busy)));
        refused_busy.evict.cancel();
        // Then the proven one idle the longest: went idle first, whenever
        // it was accepted.
        assert!(pick(&all).is_some_and(|v| Arc::ptr_eq(&v, &proven_idle_new)));
        proven_idle_new.evict.cancel();
        assert!(pick(&all).is_some_and(|v| Arc::ptr_eq(&v, &proven_idle_old)));
        proven_idle_old.evict.cancel();
        // Never a proven connection with a request in progress.
        assert!(pick(&all).is_none());
        assert!(!proven_busy.evict.is_cancelled());
    }

    /// A connection's task as `serve` runs it, for its slot: it ends when
    /// evicted.
    fn hold(slot: Slot, conn: Arc<Conn>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            conn.evict.cancelled().await;
            drop(slot);
        })
    }

    #[tokio::test]
    async fn a_full_table_takes_a_slow_heads_slot_at_once_and_waits_only_for_busy_proven_ones() {
        let cancel = CancellationToken::new();
        let slots = Slots::new(2);
        let closed = std::cell::Cell::new(0);
        let mut count = || closed.set(closed.get() + 1);
        let (a, ca) = slots
            .take(Full::Wait, &cancel, &mut count)
            .await
            .expect("a slot");
        let (b, cb) = slots
            .take(Full::Wait, &cancel, &mut count)
            .await
            .expect("a slot");
        // `a` is a real client's, in a request; `b` a slow head.
        ca.proven.store(true, Ordering::Relaxed);
        let in_flight = InFlight::new(ca.clone());
        let (ha, hb) = (hold(a, ca.clone()), hold(b, cb.clone()));
        let (c, cc) = tokio::time::timeout(
            Duration::from_secs(5),
            slots.take(Full::Wait, &cancel, &mut count),
        )
        .await
        .expect("not kept waiting by a slow head")
        .expect("a slot");
        assert!(cb.evict.is_cancelled(), "the slow head made room");
        assert!(!ca.evict.is_cancelled(), "the real client kept its slot");
        hb.await.expect("b's task");
        // `c` proves itself too: the table holds two busy proven ones.
        cc.proven.store(true, Ordering::Relaxed);
        let busy_c = InFlight::new(cc.clone());
        let hc = hold(c, cc.clone());
        assert!(
            slots
                .take(Full::Refuse, &cancel, &mut count)
                .await
                .is_none(),
            "no room: a remote newcomer is refused"
        );
        // Waiting: `a`'s request ends, so `a` is idle and makes room.
        let waiting = slots.take(Full::Wait, &cancel, &mut count);
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(RECHECK * 2, waiting.as_mut())
                .await
                .is_err(),
            "both are busy proven: the newcomer waits"
        );
        drop(in_flight);
        let (_d, _) = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("an idle connection makes room")
            .expect("a slot");
        assert!(ca.evict.is_cancelled() && !cc.evict.is_cancelled());
        ha.await.expect("a's task");
        drop(busy_c);
        cc.evict.cancel();
        hc.await.expect("c's task");
        assert_eq!(
            closed.get(),
            2,
            "one slow head and one idle connection were closed"
        );
    }
}

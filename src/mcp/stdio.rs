//! The daemon's end of `contextctl mcp`: a Unix socket in
//! `$XDG_RUNTIME_DIR/contextd/` (directory 0700) speaking newline-delimited
//! JSON-RPC, one MCP session per connection.
//!
//! Identity comes from the kernel: `SO_PEERCRED` names the connecting
//! process, which is pinned with a pidfd at accept (with the executable it
//! runs); it must be the only process holding its end of the connection
//! and still run that executable when it is identified, so that a forked
//! child or an `exec` after `connect` does not speak as a granted program.
//! When that process is `contextctl`, the MCP host is the one process that
//! holds the other ends of its standard input and output, which must also
//! be its parent (Claude Desktop spawned `contextctl mcp` on its pipes):
//! a child of the host that re-parents a `contextctl` of its own
//! (`clone(CLONE_PARENT)`) holds those pipes itself and is refused (see
//! `identity::holders`). The host is resolved through its pidfd with
//! the same app-id resolver as D-Bus callers. A peer that is not
//! `contextctl` is its own host (nothing it says about itself counts).
//!
//! Framing is ours (rmcp's stdio transport drops unparsable input without
//! an answer): lines are capped at [`MAX_MESSAGE_BYTES`], screened by
//! `jsonrpc::screen`, and what passes goes to rmcp through a
//! [`ChannelTransport`].

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Broker;
use super::consent::{Channel, HostGone, Subject};
use super::jsonrpc::{self, MAX_MESSAGE_BYTES, Rejection, Screened};
use super::server::{ContextServer, Origin};
use crate::identity;

/// The socket's file name in the runtime directory.
pub(crate) use crate::names::MCP_SOCKET as SOCKET_NAME;
/// At most this many hosts connected at once; more wait.
const MAX_CONNECTIONS: usize = 64;
/// How many messages may queue in each direction of one connection.
const QUEUE: usize = 64;
/// The kernel's send buffer of each connection, in bytes (Linux books
/// twice this for its own overhead). The system default (`wmem_default`,
/// about 208 KiB) holds some 2 000 notifications: a host that stopped
/// reading went unnoticed for a minute and more at a hundred changes a
/// second before the broker's own queue filled and `reader_stall_s` began
/// (`make soak`, "slow readers disconnected", was 0 of 4 in 40 s of load).
/// 32 KiB is still over 200 notifications and any answer is written in
/// pieces as the bridge reads, so a reading host never waits on it.
const SEND_BUFFER: libc::c_int = 32 * 1024;

/// Bound what the kernel holds for a connection (see [`SEND_BUFFER`]).
fn bound_send_buffer(stream: &UnixStream) {
    use std::os::fd::AsRawFd;
    let size = SEND_BUFFER;
    // SAFETY: the fd is open for as long as `stream` is borrowed, and
    // SO_SNDBUF reads exactly one c_int from the pointer given.
    let r = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&raw const size).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot bound the MCP socket's send buffer");
    }
}

/// The socket's read buffer. A line longer than this is gathered in
/// pieces (up to [`MAX_MESSAGE_BYTES`]); host messages are mostly a few
/// hundred bytes, and every open session holds its buffer (it was 64 KiB,
/// the largest cost of a stdio session).
const READ_BUFFER: usize = 4 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error(
        "{path} belongs to uid {owner}, not to us ({us}); refusing to put the MCP socket there"
    )]
    NotOurs { path: String, owner: u32, us: u32 },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SocketError + '_ {
    move |error| SocketError::Io {
        path: path.display().to_string(),
        error,
    }
}

/// Create `dir` (and parents) and make sure it is ours and 0700.
pub(crate) fn private_dir(dir: &Path) -> Result<(), SocketError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    // SAFETY-free: getuid cannot fail.
    let us = unsafe { libc::getuid() };
    if meta.uid() != us {
        return Err(SocketError::NotOurs {
            path: dir.display().to_string(),
            owner: meta.uid(),
            us,
        });
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    }
    Ok(())
}

/// A bound socket, removed again on drop when it is still ours (a
/// `--replace` successor may have bound its own at the same path).
#[derive(Debug)]
pub(crate) struct BoundSocket {
    pub(crate) path: PathBuf,
    listener: Option<UnixListener>,
    ino: (u64, u64),
}

impl BoundSocket {
    /// Bind `dir/name` so that it appears already listening: the socket is
    /// bound and chmod-ed under a temporary name, then renamed into place.
    /// Binding at the final path would leave a moment (between `bind` and
    /// `listen`) in which the file exists and a client that sees it gets
    /// `ECONNREFUSED`; the rename also replaces a stale socket (or a
    /// `--replace` predecessor's) in one step, so clients never find none.
    pub(crate) fn bind(dir: &Path, name: &str) -> Result<BoundSocket, SocketError> {
        private_dir(dir)?;
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        match std::fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&tmp)(e)),
        }
        let listener = UnixListener::bind(&tmp).map_err(io(&tmp))?;
        let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .and_then(|()| std::fs::metadata(&tmp))
            .and_then(|meta| std::fs::rename(&tmp, &path).map(|()| meta));
        let meta = match placed {
            Ok(meta) => meta,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(io(&path)(e));
            }
        };
        Ok(BoundSocket {
            ino: (meta.dev(), meta.ino()),
            path,
            listener: Some(listener),
        })
    }

    pub(crate) fn take_listener(&mut self) -> Option<UnixListener> {
        self.listener.take()
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        if let Ok(m) = std::fs::metadata(&self.path)
            && (m.dev(), m.ino()) == self.ino
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The uid and pid of a socket peer, from the kernel.
pub(crate) fn peer(stream: &UnixStream) -> std::io::Result<(u32, Option<u32>)> {
    let c = stream.peer_cred()?;
    Ok((c.uid(), c.pid().and_then(|p| u32::try_from(p).ok())))
}

/// The `contextctl` programs whose connections speak for their parent
/// (the MCP host that started them): the one installed beside this daemon
/// and the one `[mcp] bridge` names. A program is one of them by the path
/// the kernel gives for its executable, never by its name: any other
/// program that connects, even one called `contextctl`, is the host itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Bridges(Vec<String>);

impl Bridges {
    /// The sibling of this daemon's executable and `configured`, each as
    /// the identity of a process running it (`exe:` and the real path).
    pub(crate) fn new(configured: Option<&Path>) -> Bridges {
        let sibling = std::env::current_exe()
            .ok()
            .map(|e| e.with_file_name("contextctl"));
        let mut v = Vec::new();
        for p in sibling.iter().map(PathBuf::as_path).chain(configured) {
            match std::fs::canonicalize(p) {
                Ok(real) => {
                    let id = format!("exe:{}", real.display());
                    if !v.contains(&id) {
                        v.push(id);
                    }
                }
                Err(e) => tracing::debug!(path = %p.display(), error = %e, "no bridge there"),
            }
        }
        Bridges(v)
    }

    fn trusts(&self, id: &identity::Identity) -> bool {
        self.0.iter().any(|b| b == id.app_id.as_str())
    }
}

/// Who the MCP host behind a connecting process is: the process that
/// holds the other ends of the bridge's standard input and output (which
/// must be its parent) when the process is a trusted bridge, else the
/// process itself, provided it alone holds the connection and still runs
/// the program it ran when it connected. `peer` was pinned at accept.
///
/// `we_see_its_fds` is false for a root peer of a broker that is not
/// root: its descriptors cannot be read, so it is taken as itself (root
/// can take any process's identity anyway) and never speaks for a parent.
pub(crate) fn resolve_host(
    sock: std::os::fd::BorrowedFd<'_>,
    peer: &identity::Pinned,
    bridges: &Bridges,
    we_see_its_fds: bool,
) -> Result<identity::Identity, String> {
    let pid = peer.pid();
    let bridge = peer
        .resolve()
        .map_err(|e| format!("cannot identify the connecting process {pid}: {e}"))?;
    if !we_see_its_fds {
        return Ok(bridge);
    }
    if !bridges.trusts(&bridge) {
        identity::ensure_sole_holder(sock, peer)
            .map_err(|e| format!("the connecting process {pid} is not the peer: {e}"))?;
        return Ok(bridge);
    }
    let parent = identity::parent_pid(pid)
        .map_err(|e| format!("cannot find the parent of contextctl ({pid}): {e}"))?;
    if parent <= 1 {
        return Err(format!(
            "contextctl mcp ({pid}) has no parent process (its host exited); nobody to ask consent for"
        ));
    }
    let host = identity::stdio_host(sock, peer, parent)
        .map_err(|e| format!("cannot find the MCP host of contextctl mcp ({pid}): {e}"))?;
    host.resolve()
        .map_err(|e| format!("cannot identify the MCP host (process {parent}): {e}"))
}

pub(crate) async fn serve(
    broker: Arc<Broker>,
    listener: UnixListener,
    bridges: Arc<Bridges>,
    cancel: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    // SAFETY-free: getuid cannot fail.
    let us = unsafe { libc::getuid() };
    let tasks = broker.tasks.clone();
    loop {
        let permit = tokio::select! {
            _ = cancel.cancelled() => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = cancel.cancelled() => break,
            a = listener.accept() => a,
        };
        let (stream, pinned) = match accepted {
            Ok((s, _)) => {
                bound_send_buffer(&s);
                // Pinned now, before anything else: the process that
                // connected, and the program it runs (see `resolve_host`).
                let pinned = peer(&s)
                    .ok()
                    .and_then(|(_, pid)| pid)
                    .map(identity::Pinned::open);
                (s, pinned)
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept on the MCP socket failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let broker = broker.clone();
        let bridges = bridges.clone();
        let cancel = cancel.child_token();
        tasks.spawn(async move {
            connection(broker, (stream, pinned), us, bridges, cancel).await;
            drop(permit);
        });
    }
}

async fn connection(
    broker: Arc<Broker>,
    (mut stream, pinned): (
        UnixStream,
        Option<Result<identity::Pinned, identity::IdentityError>>,
    ),
    us: u32,
    bridges: Arc<Bridges>,
    cancel: CancellationToken,
) {
    // Identified once it speaks: a connection that never sends anything
    // costs no pass over `/proc` (see `identity::holders`), and the
    // process was pinned at accept, so an `exec` meanwhile is still seen.
    tokio::select! {
        _ = cancel.cancelled() => return,
        r = stream.readable() => if r.is_err() { return },
    }
    let subject = match identify(&stream, pinned, us, bridges).await {
        Ok(s) => s,
        Err(msg) => {
            tracing::warn!("refusing an MCP connection: {msg}");
            let r = Rejection {
                id: None,
                error: rmcp::ErrorData::new(super::error::PERMISSION_DENIED, msg, None),
            };
            let mut line = r.to_json().to_string();
            line.push('\n');
            let _ = stream.write_all(line.as_bytes()).await;
            let _ = stream.shutdown().await;
            return;
        }
    };
    tracing::debug!(app = %subject.app_id, "MCP host connected over the socket");
    let (r, w) = stream.into_split();
    let gone = HostGone::new(cancel.child_token(), broker.tasks.clone());
    let transport = ChannelTransport::spawn_lines(r, w, cancel.clone(), &broker.tasks, Some(gone))
        .admitted_by(broker.admission.clone());
    let server = ContextServer::new(
        broker,
        Origin::Fixed(subject.clone()),
        "stdio",
        Some(cancel.clone()),
    );
    // Boxed and dropped once the handshake is over: the handshake's future
    // is large, and this task lives as long as the session.
    let served = Box::pin(server.serve_with_ct(transport, cancel.clone())).await;
    match served {
        Ok(running) => {
            let reason = running.waiting().await;
            tracing::debug!(app = %subject.app_id, ?reason, "MCP host disconnected");
        }
        Err(e) => {
            tracing::debug!(app = %subject.app_id, error = %e, "MCP session ended before it began")
        }
    }
    // Stop the framing tasks, which closes the socket.
    cancel.cancel();
}

async fn identify(
    stream: &UnixStream,
    pinned: Option<Result<identity::Pinned, identity::IdentityError>>,
    us: u32,
    bridges: Arc<Bridges>,
) -> Result<Subject, String> {
    let (uid, pid) =
        peer(stream).map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    if uid != us && uid != 0 {
        return Err(format!(
            "the peer runs as uid {uid}; contextd serves only its own user ({us})"
        ));
    }
    let pid = pid.ok_or("the kernel gave no process id for the peer")?;
    let pinned = pinned
        .ok_or("the kernel gave no process id for the peer")?
        .map_err(|e| format!("cannot pin the connecting process {pid}: {e}"))?;
    let sock = {
        use std::os::fd::AsFd;
        stream
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| format!("cannot duplicate the connection: {e}"))?
    };
    let we_see_its_fds = uid == us;
    let id = tokio::task::spawn_blocking(move || {
        use std::os::fd::AsFd;
        resolve_host(sock.as_fd(), &pinned, &bridges, we_see_its_fds)
    })
    .await
    .map_err(|e| format!("identity lookup failed: {e}"))??;
    Ok(Subject {
        app_id: id.app_id,
        source: id.source,
        channel: Channel::McpStdio,
    })
}

/// An rmcp transport over two channels: what the host sent (already
/// screened) comes in, what the server sends goes out. The stdio socket
/// and the legacy SSE endpoint fill and drain them.
///
/// The messages travel boxed: a tokio channel allocates its slots 32 at
/// a time, each the size of the message type (hundreds of bytes for
/// rmcp's message enums), and every open session holds its channels'
/// first blocks; a box makes a slot one pointer.
pub(crate) struct ChannelTransport {
    rx: mpsc::Receiver<Box<ClientJsonRpcMessage>>,
    tx: mpsc::Sender<Box<ServerJsonRpcMessage>>,
    admit: Option<Admit>,
}

/// The requests of one connection running now, each holding its
/// [`super::admission::Ticket`] until its answer is sent.
struct Admit {
    admission: Arc<super::admission::Admission>,
    host: super::admission::Host,
    running: std::collections::HashMap<rmcp::model::RequestId, super::admission::Ticket>,
}

/// Each connection or stream is its own host for [`super::admission`].
static CONNECTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Debug, thiserror::Error)]
#[error("the MCP connection is closed")]
pub(crate) struct Closed;

impl ChannelTransport {
    pub(crate) fn new(
        rx: mpsc::Receiver<Box<ClientJsonRpcMessage>>,
        tx: mpsc::Sender<Box<ServerJsonRpcMessage>>,
    ) -> Self {
        ChannelTransport {
            rx,
            tx,
            admit: None,
        }
    }

    /// Bound this connection's requests by `admission` ([`super::admission`]):
    /// one past the bounds is answered at once with an error saying when to
    /// come back, and never reaches the server.
    pub(crate) fn admitted_by(mut self, admission: Arc<super::admission::Admission>) -> Self {
        let n = CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.admit = Some(Admit {
            admission,
            host: super::admission::Host::Connection(n),
            running: std::collections::HashMap::new(),
        });
        self
    }

    /// Frame newline-delimited JSON-RPC over a byte stream: a reader task
    /// (bounded lines, screened) and a writer task (one message per line),
    /// both spawned on `tasks` so that shutdown joins them.
    pub(crate) fn spawn_lines<R, W>(
        read: R,
        write: W,
        cancel: CancellationToken,
        tasks: &TaskTracker,
        gone: Option<HostGone>,
    ) -> ChannelTransport
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (in_tx, in_rx) = mpsc::channel(QUEUE);
        let (out_tx, out_rx) = mpsc::channel(QUEUE);
        let (err_tx, err_rx) = mpsc::channel(QUEUE);
        let pending = Pending::default();
        tasks.spawn(read_lines(
            read,
            in_tx,
            err_tx,
            (pending.clone(), gone),
            cancel.clone(),
        ));
        tasks.spawn(write_lines(write, out_rx, err_rx, pending, cancel));
        ChannelTransport::new(in_rx, out_tx)
    }
}

impl Transport<RoleServer> for ChannelTransport {
    type Error = Closed;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let Some(admit) = &mut self.admit {
            let answered = match &item {
                ServerJsonRpcMessage::Response(r) => Some(&r.id),
                ServerJsonRpcMessage::Error(e) => e.id.as_ref(),
                _ => None,
            };
            if let Some(id) = answered {
                admit.running.remove(id);
            }
        }
        let tx = self.tx.clone();
        async move { tx.send(Box::new(item)).await.map_err(|_| Closed) }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let m = *self.rx.recv().await?;
            let (Some(admit), ClientJsonRpcMessage::Request(r)) = (&mut self.admit, &m) else {
                return Some(m);
            };
            match admit.admission.enter(admit.host) {
                Ok(ticket) => {
                    admit.running.insert(r.id.clone(), ticket);
                    return Some(m);
                }
                Err(busy) => {
                    tracing::debug!(host = ?admit.host, "MCP request refused: {busy}");
                    let e = rmcp::ErrorData::new(
                        super::error::BUSY,
                        busy.to_string(),
                        Some(busy.data()),
                    );
                    let answer = ServerJsonRpcMessage::error(e, Some(r.id.clone()));
                    if self.tx.send(Box::new(answer)).await.is_err() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.rx.close();
        Ok(())
    }
}

/// Requests passed to rmcp and not answered yet. rmcp stops serving as
/// soon as its input ends, dropping answers in flight; a host that writes
/// its requests and closes stdin (`echo … | contextctl mcp`) still gets
/// them, because the reader holds the end of input back until they are
/// answered (for at most [`DRAIN_TIMEOUT`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Pending(Arc<std::sync::Mutex<std::collections::HashSet<rmcp::model::RequestId>>>);

const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<rmcp::model::RequestId>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn drained(&self) {
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        while !self.lock().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// Read lines of at most [`MAX_MESSAGE_BYTES`], screen them, pass the good
/// ones on and queue answers for the bad ones. An oversized line is
/// answered and skipped to its end, without ever being held in memory.
pub(crate) async fn read_lines<R: AsyncRead + Unpin>(
    read: R,
    tx: mpsc::Sender<Box<ClientJsonRpcMessage>>,
    errors: mpsc::Sender<Box<Rejection>>,
    (pending, gone): (Pending, Option<HostGone>),
    cancel: CancellationToken,
) {
    let mut reader = BufReader::with_capacity(READ_BUFFER, read);
    let mut line: Vec<u8> = Vec::new();
    let mut discarding = false;
    loop {
        let chunk = tokio::select! {
            _ = cancel.cancelled() => return,
            c = reader.fill_buf() => c,
        };
        let available = match chunk {
            Ok([]) => {
                // The host is gone: what waits for the user stops now
                // (its answer, an error, is written like the others').
                if let Some(g) = &gone {
                    g.cancel();
                }
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = pending.drained() => {}
                }
                return;
            }
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "MCP socket read failed");
                return;
            }
        };
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        if discarding {
            if newline.is_some() {
                discarding = false;
            }
        } else if line.len() + take > MAX_MESSAGE_BYTES + 1 {
            line = Vec::new();
            discarding = newline.is_none();
            tracing::debug!("MCP message over {MAX_MESSAGE_BYTES} bytes refused");
            if errors
                .send(Box::new(Rejection::too_large(MAX_MESSAGE_BYTES)))
                .await
                .is_err()
            {
                return;
            }
        } else {
            line.extend_from_slice(&available[..take]);
        }
        reader.consume(take);
        if newline.is_none() || discarding || line.is_empty() {
            continue;
        }
        let text = std::mem::take(&mut line);
        let text = text.strip_suffix(b"\n").unwrap_or(&text);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match jsonrpc::screen(text) {
            Screened::Pass(mut m) => {
                if let ClientJsonRpcMessage::Request(r) = m.as_mut() {
                    pending.lock().insert(r.id.clone());
                    if let Some(g) = &gone {
                        use rmcp::model::GetExtensions as _;
                        r.request.extensions_mut().insert(g.clone());
                    }
                }
                if tx.send(m).await.is_err() {
                    return;
                }
            }
            Screened::Reject(r) => {
                if errors.send(Box::new(r)).await.is_err() {
                    return;
                }
            }
            Screened::Ignore(why) => tracing::debug!("ignored MCP message: {why}"),
        }
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut write: W,
    mut out: mpsc::Receiver<Box<ServerJsonRpcMessage>>,
    mut errors: mpsc::Receiver<Box<Rejection>>,
    pending: Pending,
    cancel: CancellationToken,
) {
    let mut errors_open = true;
    loop {
        let line = tokio::select! {
            _ = cancel.cancelled() => break,
            m = out.recv() => match m {
                Some(m) => {
                    match m.as_ref() {
                        ServerJsonRpcMessage::Response(r) => { pending.lock().remove(&r.id); }
                        ServerJsonRpcMessage::Error(e) => {
                            if let Some(id) = &e.id { pending.lock().remove(id); }
                        }
                        _ => {}
                    }
                    serde_json::to_vec(&m)
                }
                None => break,
            },
            r = errors.recv(), if errors_open => match r {
                Some(r) => serde_json::to_vec(&r.to_json()),
                None => { errors_open = false; continue; }
            },
        };
        let mut line = match line {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialize an MCP message");
                continue;
            }
        };
        line.push(b'\n');
        if let Err(e) = async {
            write.write_all(&line).await?;
            write.flush().await
        }
        .await
        {
            tracing::debug!(error = %e, "MCP socket write failed");
            break;
        }
        // For `make bench`'s readers bench: when this line left the
        // broker (CLOCK_MONOTONIC, comparable across processes).
        crate::core::clock::trace_written("stdio", 1);
    }
    let _ = write.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The socket appears listening, replaces a stale one, and leaves no
    /// temporary name behind.
    #[tokio::test]
    async fn the_socket_appears_listening_and_replaces_a_stale_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        let stale = {
            private_dir(&run).expect("dir");
            let l = std::os::unix::net::UnixListener::bind(run.join("mcp.sock")).expect("stale");
            drop(l);
            std::fs::metadata(run.join("mcp.sock"))
                .expect("stale file")
                .ino()
        };
        let bound = BoundSocket::bind(&run, "mcp.sock").expect("bind");
        let meta = std::fs::metadata(&bound.path).expect("placed");
        assert_ne!(meta.ino(), stale, "the stale socket must be replaced");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        std::os::unix::net::UnixStream::connect(&bound.path).expect("listening once visible");
        let names: Vec<_> = std::fs::read_dir(&run)
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("mcp.sock")]);
        let path = bound.path.clone();
        drop(bound);
        assert!(!path.exists(), "removed on drop");
    }
}

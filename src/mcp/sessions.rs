//! The Streamable HTTP sessions (`Mcp-Session-Id`), held lean: rmcp's
//! `SessionManager`, in place of its `LocalSessionManager`.
//!
//! Why our own: every open session is memory held for as long as a host
//! stays connected, and rmcp's manager spends most of a session's cost on
//! machinery: a worker task per session, four tokio channels (each
//! allocating 32 slots of a message enum hundreds of bytes wide on
//! creation, 12-36 KiB a session) between the HTTP handlers, the worker and
//! the rmcp service, and caches allocated ahead of use. Here a session is
//! one shared [`Session`] (its routing table behind a mutex) and one
//! [`SessionTransport`] that rmcp's service reads and writes directly:
//! what the host sends travels boxed (a slot is a pointer), and what the
//! server sends is routed by the sender, with no task between. Per session
//! that is about a third of what rmcp's manager held (`make bench`'s
//! readers bench measures it).
//!
//! The behaviour is rmcp 3.9's `LocalSessionManager`'s, kept on purpose
//! (the conformance suites of both protocol eras check it):
//! - an answer goes on the SSE stream of the POST that asked (with a
//!   priming event first, `retry` 3 s), and ends that stream; progress
//!   and cancellation notifications, and server requests made while
//!   handling a request (SEP-2260), go on the same stream; everything
//!   else on the session's standalone stream (`GET`);
//! - event ids are `N.NONCE` on the standalone stream and `N/REQ.NONCE`
//!   on a request's stream (`NONCE` is random per stream, so that an id
//!   cannot be guessed from another); the last 16 events of each stream
//!   are kept, and `Last-Event-ID` replays them from `N` (a new `GET`, or
//!   rmcp's priming id `0`, replays the standalone stream's from 0); a
//!   second `GET` while one is open gets a quiet shadow stream
//!   (keep-alives only, at most 32);
//! - a stream a host cancelled (`notifications/cancelled`) keeps its
//!   events for `completed_ttl` (0 with JSON answers, 5 s with SSE ones)
//!   for a late resume;
//! - back-pressure: a send waits for room on its stream (16 events), so a
//!   host that stops reading its `GET` stream holds up its notifications
//!   until the watch loop's stall limit disconnects it
//!   (`super::watch`);
//! - a session with no message either way for 5 minutes ends, as do its
//!   streams, when its service ends, or at `DELETE`.
//!
//! What is ours, beyond rmcp's: every session has an owner, the token
//! ([`Bearer`]) of the request that opened it (`OWNER`, which the HTTP
//! layer sets around rmcp's service for each request):
//! - a request of another token that names the session finds nothing,
//!   exactly as if the session did not exist (`has_session` is false, and
//!   every other call fails as for an unknown id), on every verb;
//! - the session ends the moment its token is revoked (its `life`), with
//!   its streams;
//! - a token holds at most [`PER_TOKEN`] sessions: opening one more ends
//!   the one of the same token idle longest, never another token's;
//! - a request whose JSON-RPC id (or progress token) is one a pending
//!   request of the session already uses is refused, so that an answer
//!   goes only to the request that asked.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ErrorData, GetExtensions, GetMeta, JsonRpcMessage,
    ProgressToken, RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{OriginatingRequestId, RoleServer};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::{mpsc, oneshot};

use crate::core::tokens::Bearer;

/// Room on each stream, and in the session's inbox (rmcp's default).
const CHANNEL: usize = 16;
/// How many events of a stream are kept for a resume.
const CACHED: usize = 16;
/// A session with no message either way for this long ends.
const IDLE: Duration = Duration::from_secs(300);
/// The `retry` a request's stream primes its client with.
const SSE_RETRY: Duration = Duration::from_secs(3);
/// At most this many shadow streams per session.
const MAX_SHADOWS: usize = 32;
/// At most this many sessions per token: a host opens one (a few across
/// reconnects); opening more ends the token's idlest. So one token can
/// neither fill the broker's memory nor touch another token's sessions.
pub(crate) const PER_TOKEN: usize = 16;

tokio::task_local! {
    /// The token of the HTTP request being served, set around rmcp's
    /// service by `super::http` (rmcp's `SessionManager` calls are made
    /// within the request's future; its session workers, outside any
    /// request, see none).
    static OWNER: Bearer;
}

/// Serve `f` (one HTTP request) as `owner`'s: the sessions it opens are
/// `owner`'s, and it reaches only `owner`'s.
pub(crate) async fn as_owner<F: Future>(owner: Bearer, f: F) -> F::Output {
    OWNER.scope(owner, f).await
}

/// The token of the request being served, if one is (see `OWNER`).
pub(crate) fn owner() -> Option<Bearer> {
    OWNER.try_with(Clone::clone).ok()
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("no session {0}")]
    NotFound(SessionId),
    #[error("the session has ended")]
    Ended,
    #[error("invalid event id {0:?}")]
    EventId(String),
    #[error("the stream of that event is gone")]
    StreamGone,
    #[error("a session is opened only by an authenticated request")]
    NoOwner,
}

/// The sessions of one HTTP server.
#[derive(Debug)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<SessionId, Arc<Session>>>,
    /// How long a cancelled request's events are kept for a resume.
    completed_ttl: Duration,
}

impl Sessions {
    pub(crate) fn new(completed_ttl: Duration) -> Sessions {
        Sessions {
            map: Mutex::new(HashMap::new()),
            completed_ttl,
        }
    }

    /// Session `id`, when the request being served may use it: one of
    /// another token is not found, as one that does not exist.
    fn get(&self, id: &SessionId) -> Result<Arc<Session>, SessionError> {
        lock(&self.map)
            .get(id)
            .filter(|s| s.usable())
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.clone()))
    }

    /// Whether session `id` exists and token `owner` opened it.
    pub(crate) fn owned_by(&self, id: &str, owner: u64) -> bool {
        lock(&self.map)
            .get(&SessionId::from(id))
            .is_some_and(|s| s.owner.id == owner && !s.owner.life.is_cancelled())
    }

    /// Make room for one more session of `owner`: end its sessions idle
    /// longest until fewer than [`PER_TOKEN`] are left (another token's
    /// are never looked at), and those whose token is gone.
    fn make_room(map: &mut HashMap<SessionId, Arc<Session>>, owner: u64) -> Vec<Arc<Session>> {
        let mut gone = Vec::new();
        map.retain(|_, s| {
            let dead = s.owner.life.is_cancelled();
            if dead {
                gone.push(s.clone());
            }
            !dead
        });
        let mut mine: Vec<(Instant, SessionId)> = map
            .iter()
            .filter(|(_, s)| s.owner.id == owner)
            .map(|(id, s)| (s.routes().last_active, id.clone()))
            .collect();
        if mine.len() < PER_TOKEN {
            return gone;
        }
        mine.sort_by_key(|(at, _)| *at);
        let extra = mine.len() + 1 - PER_TOKEN;
        for (_, id) in mine.into_iter().take(extra) {
            if let Some(s) = map.remove(&id) {
                tracing::debug!(session = %id, "a token opened more than {PER_TOKEN} MCP sessions: its idlest ends");
                gone.push(s);
            }
        }
        gone
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One session, shared by its transport (the rmcp service's side) and the
/// HTTP handlers.
#[derive(Debug)]
struct Session {
    /// What the host sent, to the service; `None` once the session ended.
    inbox: Mutex<Option<mpsc::Sender<Box<ClientJsonRpcMessage>>>>,
    routes: Mutex<Routes>,
    /// The token that opened it: the only one that reaches it, and whose
    /// revocation ends it.
    owner: Bearer,
}

/// What a message for a request's stream is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Request(RequestId),
    Progress(ProgressToken),
}

#[derive(Debug)]
struct Routes {
    next_request: u64,
    /// The streams of requests (POSTs), by their number.
    requests: HashMap<u64, RequestStream>,
    keys: HashMap<Key, u64>,
    standalone: Cached,
    shadows: Vec<mpsc::Sender<ServerSseMessage>>,
    /// The `initialize` request's answer goes here.
    init: Option<oneshot::Sender<ServerJsonRpcMessage>>,
    last_active: Instant,
    completed_ttl: Duration,
}

#[derive(Debug)]
struct RequestStream {
    keys: Vec<Key>,
    cached: Cached,
    /// When the host cancelled it (then kept for a late resume).
    completed_at: Option<Instant>,
}

/// A stream's sender and its last events.
#[derive(Debug)]
struct Cached {
    /// `None`: no one listens (the events are still numbered and kept).
    tx: Option<mpsc::Sender<ServerSseMessage>>,
    cache: VecDeque<ServerSseMessage>,
    /// The request's number, on a request's stream.
    request: Option<u64>,
    next_index: usize,
    /// Random, in every event id of the stream: a resume must name it.
    nonce: u64,
}

impl Cached {
    fn new(request: Option<u64>) -> Cached {
        Cached {
            tx: None,
            cache: VecDeque::new(),
            request,
            next_index: 0,
            nonce: uuid::Uuid::new_v4().as_u64_pair().0,
        }
    }

    fn is_dead(&self) -> bool {
        self.tx.as_ref().is_none_or(mpsc::Sender::is_closed)
    }

    /// Number `event`, keep it, and say where it goes.
    fn push(&mut self, mut event: ServerSseMessage) -> Delivery {
        let index = self.next_index;
        self.next_index += 1;
        let nonce = self.nonce;
        event.event_id = Some(match self.request {
            Some(r) => format!("{index}/{r}.{nonce:016x}"),
            None => format!("{index}.{nonce:016x}"),
        });
        if self.cache.len() >= CACHED {
            self.cache.pop_front();
        }
        self.cache.push_back(event.clone());
        Delivery(self.tx.clone().map(|tx| (tx, event)))
    }

    /// The kept events from `index` on (rmcp's replay: inclusive), for a
    /// resume that names this stream's `nonce` (`None`: from the start).
    fn from(
        &self,
        index: usize,
        nonce: Option<u64>,
    ) -> Result<Vec<ServerSseMessage>, SessionError> {
        match nonce {
            Some(n) if n == self.nonce => {}
            None if index == 0 => {}
            _ => return Err(SessionError::EventId(index.to_string())),
        }
        let Some(front) = self.cache.front() else {
            return Ok(Vec::new());
        };
        let first = front
            .event_id
            .as_deref()
            .and_then(|id| EventId::parse(id).ok())
            .map_or(0, |e| e.index);
        let skip = index.saturating_sub(first);
        if skip > self.cache.len() {
            return Err(SessionError::EventId(index.to_string()));
        }
        Ok(self.cache.iter().skip(skip).cloned().collect())
    }
}

/// An event to hand to a stream's channel, if anyone listens.
struct Delivery(Option<(mpsc::Sender<ServerSseMessage>, ServerSseMessage)>);

impl Delivery {
    /// Hand it over: at once when there is room, else waiting for room
    /// (back-pressure). A stream whose reader went away drops it, as rmcp
    /// does (it is still kept for a resume).
    async fn deliver(self) {
        let Some((tx, event)) = self.0 else {
            return;
        };
        match tx.try_send(event) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(event)) => {
                let _ = tx.send(event).await;
            }
        }
    }
}

/// `N.NONCE` or `N/REQ.NONCE` (hex nonce); or rmcp's priming id `0`.
struct EventId {
    index: usize,
    request: Option<u64>,
    nonce: Option<u64>,
}

impl EventId {
    fn parse(s: &str) -> Result<EventId, SessionError> {
        let bad = || SessionError::EventId(s.chars().take(64).collect());
        let (head, nonce) = match s.rsplit_once('.') {
            Some((h, n)) if n.len() == 16 => {
                (h, Some(u64::from_str_radix(n, 16).map_err(|_| bad())?))
            }
            Some(_) => return Err(bad()),
            None => (s, None),
        };
        let (index, request) = match head.split_once('/') {
            Some((i, r)) => (i, Some(r.parse::<u64>().map_err(|_| bad())?)),
            None => (head, None),
        };
        let e = EventId {
            index: index.parse().map_err(|_| bad())?,
            request,
            nonce,
        };
        // Without a nonce only the start of the standalone stream.
        if e.nonce.is_none() && (e.index != 0 || e.request.is_some()) {
            return Err(bad());
        }
        Ok(e)
    }
}

/// Where a server message goes.
enum Target {
    Request { id: u64, close: bool },
    Standalone,
}

impl Routes {
    fn new(completed_ttl: Duration) -> Routes {
        Routes {
            next_request: 0,
            requests: HashMap::new(),
            keys: HashMap::new(),
            standalone: Cached::new(None),
            shadows: Vec::new(),
            init: None,
            last_active: Instant::now(),
            completed_ttl,
        }
    }

    fn touch(&mut self) {
        self.last_active = Instant::now();
        let ttl = self.completed_ttl;
        self.requests
            .retain(|_, r| r.completed_at.is_none_or(|at| at.elapsed() < ttl));
    }

    fn target(&self, m: &ServerJsonRpcMessage) -> Target {
        let on = |key: Key, close: bool| match self.keys.get(&key) {
            Some(id) => Target::Request { id: *id, close },
            None => Target::Standalone,
        };
        match m {
            // SEP-2260: a server request made while handling a client
            // request rides that request's stream.
            JsonRpcMessage::Request(r) => {
                match r.request.extensions().get::<OriginatingRequestId>() {
                    Some(o) => {
                        let t = on(Key::Request(o.0.clone()), false);
                        if matches!(t, Target::Standalone) {
                            tracing::warn!(originating_request_id = %o.0, "a server request's originating stream is gone; it goes on the standalone stream");
                        }
                        t
                    }
                    None => Target::Standalone,
                }
            }
            JsonRpcMessage::Notification(n) => match &n.notification {
                ServerNotification::ProgressNotification(p) => {
                    on(Key::Progress(p.params.progress_token.clone()), false)
                }
                ServerNotification::CancelledNotification(c) => match &c.params.request_id {
                    Some(id) => on(Key::Request(id.clone()), false),
                    None => Target::Standalone,
                },
                _ => Target::Standalone,
            },
            JsonRpcMessage::Response(r) => on(Key::Request(r.id.clone()), true),
            JsonRpcMessage::Error(e) => match &e.id {
                Some(id) => on(Key::Request(id.clone()), true),
                None => Target::Standalone,
            },
        }
    }

    /// Route a server message: number it on its stream, keep it, and end
    /// a request's stream with its answer.
    fn route(&mut self, m: ServerJsonRpcMessage) -> Result<Delivery, SessionError> {
        self.touch();
        if matches!(m, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_))
            && let Some(init) = self.init.take()
        {
            let _ = init.send(m);
            return Ok(Delivery(None));
        }
        match self.target(&m) {
            Target::Standalone => Ok(self.standalone.push(ServerSseMessage::from_message(m))),
            Target::Request { id, close } => {
                let Some(stream) = self.requests.get_mut(&id) else {
                    return Err(SessionError::StreamGone);
                };
                let delivery = stream.cached.push(ServerSseMessage::from_message(m));
                if close && let Some(done) = self.requests.remove(&id) {
                    for k in done.keys {
                        self.keys.remove(&k);
                    }
                }
                Ok(delivery)
            }
        }
    }

    /// A new stream for a request (a POST); its number and its receiver,
    /// primed.
    fn open_request(&mut self) -> (u64, mpsc::Receiver<ServerSseMessage>, Delivery) {
        let id = self.next_request;
        self.next_request = self.next_request.wrapping_add(1);
        let (tx, rx) = mpsc::channel(CHANNEL);
        let mut cached = Cached::new(Some(id));
        cached.tx = Some(tx);
        let priming = cached.push(ServerSseMessage::retry(SSE_RETRY));
        self.requests.insert(
            id,
            RequestStream {
                keys: Vec::new(),
                cached,
                completed_at: None,
            },
        );
        (id, rx, priming)
    }

    /// What a client message to request stream `request` registers. A
    /// request whose id or progress token a pending request of the
    /// session already uses is refused (`Err` with the id to answer):
    /// its answers would take the other's way.
    fn register(
        &mut self,
        m: &ClientJsonRpcMessage,
        request: Option<u64>,
    ) -> Result<(), RequestId> {
        match m {
            JsonRpcMessage::Request(r) => {
                let Some(id) = request else { return Ok(()) };
                let mut keys = vec![Key::Request(r.id.clone())];
                if let Some(p) = r.request.get_meta().get_progress_token() {
                    keys.push(Key::Progress(p));
                }
                if keys.iter().any(|k| self.keys.contains_key(k)) {
                    return Err(r.id.clone());
                }
                let Some(stream) = self.requests.get_mut(&id) else {
                    return Ok(());
                };
                for k in keys {
                    stream.keys.push(k.clone());
                    self.keys.insert(k, id);
                }
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.cancelled(&Key::Request(id.clone()));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The host cancelled a request: its stream ends, and its events are
    /// kept for `completed_ttl`.
    fn cancelled(&mut self, key: &Key) {
        let Some(id) = self.keys.remove(key) else {
            return;
        };
        let Some(stream) = self.requests.get_mut(&id) else {
            return;
        };
        stream.completed_at = Some(Instant::now());
        stream.cached.tx = None;
        for k in std::mem::take(&mut stream.keys) {
            self.keys.remove(&k);
        }
    }

    /// A stream for the standalone events: the primary one (replaying the
    /// kept events from `from`) when none is open, else a shadow.
    fn open_standalone(
        &mut self,
        from: usize,
        nonce: Option<u64>,
    ) -> Result<(mpsc::Receiver<ServerSseMessage>, Vec<ServerSseMessage>), SessionError> {
        self.shadows.retain(|tx| !tx.is_closed());
        if self.standalone.is_dead() {
            let replay = self.standalone.from(from, nonce)?;
            let (tx, rx) = mpsc::channel(CHANNEL.max(replay.len()));
            self.standalone.tx = Some(tx);
            Ok((rx, replay))
        } else {
            // Keep-alives only: competing EventSource connections must not
            // take the primary from each other.
            if self.shadows.len() >= MAX_SHADOWS {
                self.shadows.remove(0);
            }
            let (tx, rx) = mpsc::channel(1);
            self.shadows.push(tx);
            Ok((rx, Vec::new()))
        }
    }

    /// Resume a request's stream from `index`.
    fn resume_request(
        &mut self,
        request: u64,
        index: usize,
        nonce: Option<u64>,
    ) -> Result<(mpsc::Receiver<ServerSseMessage>, Vec<ServerSseMessage>), SessionError> {
        let stream = self
            .requests
            .get_mut(&request)
            .ok_or(SessionError::StreamGone)?;
        let replay = stream.cached.from(index, nonce)?;
        let (tx, rx) = mpsc::channel(CHANNEL.max(replay.len()));
        // A finished stream replays and ends.
        stream.cached.tx = stream.completed_at.is_none().then_some(tx);
        Ok((rx, replay))
    }

    /// End every stream.
    fn end(&mut self) {
        self.init = None;
        self.standalone.tx = None;
        self.shadows.clear();
        self.requests.clear();
        self.keys.clear();
    }
}

impl Session {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        lock(&self.routes)
    }

    /// Whether the request being served may use this session: its token
    /// is the owner's, and live. (Outside a request, rmcp's own session
    /// worker closing it, it may.)
    fn usable(&self) -> bool {
        !self.owner.life.is_cancelled() && owner().is_none_or(|o| o.id == self.owner.id)
    }

    /// Pass a host's message to the service.
    async fn push(&self, m: ClientJsonRpcMessage) -> Result<(), SessionError> {
        let inbox = lock(&self.inbox).clone().ok_or(SessionError::Ended)?;
        inbox
            .send(Box::new(m))
            .await
            .map_err(|_| SessionError::Ended)
    }

    fn end(&self) {
        lock(&self.inbox).take();
        self.routes().end();
    }
}

/// A receiver with its replay first, as an SSE event stream.
pub(crate) struct Events {
    replay: std::vec::IntoIter<ServerSseMessage>,
    rx: mpsc::Receiver<ServerSseMessage>,
}

impl Stream for Events {
    type Item = ServerSseMessage;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(m) = self.replay.next() {
            return Poll::Ready(Some(m));
        }
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(_)) = &polled {
            // For `make bench`'s readers bench: when this event went to
            // the HTTP connection (CLOCK_MONOTONIC, comparable across
            // processes).
            crate::core::clock::trace_written("http", 1);
        }
        polled
    }
}

/// The stream of a request refused for reusing a pending request's id
/// (`Routes::register`): its one error, then the end.
fn duplicate(id: RequestId) -> Events {
    let error = ServerJsonRpcMessage::error(
        ErrorData::invalid_request(
            format!("request id {id} is already in use by a pending request of this session"),
            None,
        ),
        Some(id),
    );
    let (_, rx) = mpsc::channel(1);
    events(rx, vec![ServerSseMessage::from_message(error)])
}

fn events(rx: mpsc::Receiver<ServerSseMessage>, replay: Vec<ServerSseMessage>) -> Events {
    Events {
        replay: replay.into_iter(),
        rx,
    }
}

/// The rmcp service's end of a session.
pub(crate) struct SessionTransport {
    session: Arc<Session>,
    rx: mpsc::Receiver<Box<ClientJsonRpcMessage>>,
}

impl Drop for SessionTransport {
    /// The service ended: so do the session's streams, and an
    /// `initialize` still waiting for its answer.
    fn drop(&mut self) {
        self.session.end();
    }
}

impl Transport<RoleServer> for SessionTransport {
    type Error = SessionError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Routed now, in the order the service sends; delivered when
        // polled.
        let routed = self.session.routes().route(item);
        async move {
            routed?.deliver().await;
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let idle_until = self.session.routes().last_active + IDLE;
            let next = tokio::select! {
                _ = self.session.owner.life.cancelled() => {
                    // The token was revoked: the session and its streams
                    // end now, not when the service has drained.
                    tracing::debug!("an MCP session ends with its token");
                    self.session.end();
                    return None;
                }
                next = tokio::time::timeout_at(idle_until.into(), self.rx.recv()) => next,
            };
            match next {
                Ok(Some(m)) => {
                    self.session.routes().touch();
                    return Some(*m);
                }
                Ok(None) => return None,
                Err(_) => {
                    if self.session.routes().last_active.elapsed() >= IDLE {
                        tracing::debug!("an MCP session idle for {IDLE:?} ends");
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

impl SessionManager for Sessions {
    type Error = SessionError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = owner().ok_or(SessionError::NoOwner)?;
        if owner.life.is_cancelled() {
            return Err(SessionError::Ended);
        }
        let id: SessionId = uuid::Uuid::new_v4().to_string().into();
        let (tx, rx) = mpsc::channel(CHANNEL);
        let session = Arc::new(Session {
            inbox: Mutex::new(Some(tx)),
            routes: Mutex::new(Routes::new(self.completed_ttl)),
            owner,
        });
        let gone = {
            let mut map = lock(&self.map);
            let gone = Sessions::make_room(&mut map, session.owner.id);
            map.insert(id.clone(), session.clone());
            gone
        };
        gone.iter().for_each(|s| s.end());
        Ok((id, SessionTransport { session, rx }))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let session = self.get(id)?;
        let (tx, rx) = oneshot::channel();
        session.routes().init = Some(tx);
        session.push(message).await?;
        rx.await.map_err(|_| SessionError::Ended)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.get(id).is_ok())
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let gone = {
            let mut map = lock(&self.map);
            match map.get(id) {
                // rmcp's worker, its service over (no request), or the
                // owner's `DELETE`.
                Some(s) if owner().is_none() || s.usable() => map.remove(id),
                _ => None,
            }
        };
        if let Some(s) = gone {
            s.end();
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let session = self.get(id)?;
        let opened = {
            let mut routes = session.routes();
            routes.touch();
            let (request, rx, priming) = routes.open_request();
            match routes.register(&message, Some(request)) {
                Ok(()) => Ok((rx, priming)),
                Err(dup) => {
                    routes.requests.remove(&request);
                    Err(dup)
                }
            }
        };
        let (rx, priming) = match opened {
            Ok(o) => o,
            Err(dup) => return Ok(duplicate(dup)),
        };
        priming.deliver().await;
        session.push(message).await?;
        Ok(events(rx, Vec::new()))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let session = self.get(id)?;
        {
            let mut routes = session.routes();
            routes.touch();
            // Only a request is refused, and only with a stream.
            let _ = routes.register(&message, None);
        }
        session.push(message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let session = self.get(id)?;
        let mut routes = session.routes();
        routes.touch();
        let (rx, replay) = routes.open_standalone(0, None)?;
        Ok(events(rx, replay))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let session = self.get(id)?;
        let event = EventId::parse(&last_event_id)?;
        let mut routes = session.routes();
        routes.touch();
        let (rx, replay) = match event.request {
            Some(r) => routes.resume_request(r, event.index, event.nonce)?,
            None => routes.open_standalone(event.index, event.nonce)?,
        };
        Ok(events(rx, replay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        CallToolRequestParams, ClientRequest, NumberOrString, ResourceUpdatedNotificationParam,
        ServerResult,
    };

    fn updated(uri: &str) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::notification(ServerNotification::ResourceUpdatedNotification(
            rmcp::model::Notification::new(ResourceUpdatedNotificationParam::new(uri)),
        ))
    }

    fn ids(v: &[ServerSseMessage]) -> Vec<String> {
        v.iter().filter_map(|m| m.event_id.clone()).collect()
    }

    #[test]
    fn standalone_events_are_numbered_kept_and_replayed() {
        let mut r = Routes::new(Duration::ZERO);
        // Nobody listens yet: numbered and kept.
        for i in 0..3 {
            r.route(updated(&format!("context://x/{i}")))
                .expect("route");
        }
        let (_rx, replay) = r.open_standalone(0, None).expect("open");
        let nonce = format!("{:016x}", r.standalone.nonce);
        assert_eq!(ids(&replay), [0, 1, 2].map(|i| format!("{i}.{nonce}")));
        // A second GET while the first listens: a shadow, no replay.
        let (_shadow, replay) = r.open_standalone(0, None).expect("shadow");
        assert!(replay.is_empty());
        // Only the last CACHED are kept.
        for i in 3..40 {
            r.route(updated(&format!("context://x/{i}")))
                .expect("route");
        }
        assert_eq!(r.standalone.cache.len(), CACHED);
        let n = Some(r.standalone.nonce);
        assert!(r.standalone.from(0, n).is_ok());
        assert!(r.standalone.from(100, n).is_err(), "beyond what was sent");
    }

    /// The attack: resume a stream by guessing its event ids. Counting up
    /// from 0 is not enough: an id names its stream's random nonce.
    #[test]
    fn an_event_id_cannot_be_guessed() {
        let mut r = Routes::new(Duration::ZERO);
        for i in 0..3 {
            r.route(updated(&format!("context://x/{i}")))
                .expect("route");
        }
        let (req, _rx, _priming) = r.open_request();
        for guess in ["1", "2", &format!("1/{req}"), "1.0000000000000000"] {
            let e = EventId::parse(guess);
            let refused = match e {
                Err(_) => true,
                Ok(e) => match e.request {
                    Some(q) => r.resume_request(q, e.index, e.nonce).is_err(),
                    None => r.open_standalone(e.index, e.nonce).is_err(),
                },
            };
            assert!(refused, "{guess}");
        }
        // rmcp's priming id: the start of the standalone stream, as a
        // new GET of the owner gets anyway.
        let e = EventId::parse("0").expect("0");
        let (_rx, replay) = r.open_standalone(e.index, e.nonce).expect("from 0");
        assert_eq!(replay.len(), 3);
        // The real id resumes.
        let last = replay[1].event_id.clone().expect("id");
        r.standalone.tx = None;
        let e = EventId::parse(&last).expect("parse");
        let (_rx, replay) = r.open_standalone(e.index, e.nonce).expect("resume");
        assert_eq!(replay.len(), 2);
    }

    /// The attack: a second request with the id of a pending one, to take
    /// its answer. It is refused; the answer goes to the one that asked.
    #[tokio::test]
    async fn a_pending_answer_is_not_diverted_by_a_reused_id() {
        let mut r = Routes::new(Duration::ZERO);
        let call = |id: i64| {
            ClientJsonRpcMessage::request(
                ClientRequest::CallToolRequest(rmcp::model::Request::new(
                    CallToolRequestParams::new("x"),
                )),
                NumberOrString::Number(id),
            )
        };
        let (first, mut rx, priming) = r.open_request();
        priming.deliver().await;
        r.register(&call(7), Some(first)).expect("first");
        let (second, _rx2, _) = r.open_request();
        assert!(r.register(&call(7), Some(second)).is_err());
        let answer =
            ServerJsonRpcMessage::response(ServerResult::empty(()), NumberOrString::Number(7));
        r.route(answer).expect("route").deliver().await;
        let _priming = rx.recv().await.expect("priming");
        let got = rx.recv().await.expect("the answer reaches the asker");
        assert!(got.message.is_some());
    }

    #[tokio::test]
    async fn an_answer_ends_its_request_stream() {
        let mut r = Routes::new(Duration::ZERO);
        let (req, mut rx, priming) = r.open_request();
        priming.deliver().await;
        let call = ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(rmcp::model::Request::new(CallToolRequestParams::new(
                "x",
            ))),
            NumberOrString::Number(7),
        );
        r.register(&call, Some(req)).expect("register");
        assert!(matches!(
            r.target(&updated("context://a")),
            Target::Standalone
        ));
        let answer =
            ServerJsonRpcMessage::response(ServerResult::empty(()), NumberOrString::Number(7));
        r.route(answer).expect("route").deliver().await;
        assert!(r.requests.is_empty() && r.keys.is_empty());
        let first = rx.recv().await.expect("priming");
        let nonce = first
            .event_id
            .as_deref()
            .and_then(|i| i.rsplit_once('.'))
            .map(|(_, n)| n.to_owned())
            .expect("nonce");
        assert_eq!(
            first.event_id.as_deref(),
            Some(format!("0/{req}.{nonce}").as_str())
        );
        assert!(first.message.is_none());
        let second = rx.recv().await.expect("answer");
        assert_eq!(
            second.event_id.as_deref(),
            Some(format!("1/{req}.{nonce}").as_str())
        );
        assert!(rx.recv().await.is_none(), "the stream ends with its answer");
    }
}

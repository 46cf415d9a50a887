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
//! - event ids are `N` on the standalone stream and `N/REQ` on a
//!   request's stream; the last 16 events of each stream are kept, and
//!   `Last-Event-ID` replays them from `N` (a new `GET` replays the
//!   standalone stream's from 0); a second `GET` while one is open gets a
//!   quiet shadow stream (keep-alives only, at most 32);
//! - a stream a host cancelled (`notifications/cancelled`) keeps its
//!   events for `completed_ttl` (0 with JSON answers, 5 s with SSE ones)
//!   for a late resume;
//! - back-pressure: a send waits for room on its stream (16 events), so a
//!   host that stops reading its `GET` stream holds up its notifications
//!   until the watch loop's stall limit disconnects it
//!   (`super::watch`);
//! - a session with no message either way for 5 minutes ends, as do its
//!   streams, when its service ends, or at `DELETE`.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, GetExtensions, GetMeta, JsonRpcMessage,
    ProgressToken, RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{OriginatingRequestId, RoleServer};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::{mpsc, oneshot};

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

    fn get(&self, id: &SessionId) -> Result<Arc<Session>, SessionError> {
        lock(&self.map)
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.clone()))
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
}

impl Cached {
    fn new(request: Option<u64>) -> Cached {
        Cached {
            tx: None,
            cache: VecDeque::new(),
            request,
            next_index: 0,
        }
    }

    fn is_dead(&self) -> bool {
        self.tx.as_ref().is_none_or(mpsc::Sender::is_closed)
    }

    /// Number `event`, keep it, and say where it goes.
    fn push(&mut self, mut event: ServerSseMessage) -> Delivery {
        let index = self.next_index;
        self.next_index += 1;
        event.event_id = Some(match self.request {
            Some(r) => format!("{index}/{r}"),
            None => index.to_string(),
        });
        if self.cache.len() >= CACHED {
            self.cache.pop_front();
        }
        self.cache.push_back(event.clone());
        Delivery(self.tx.clone().map(|tx| (tx, event)))
    }

    /// The kept events from `index` on (rmcp's replay: inclusive).
    fn from(&self, index: usize) -> Result<Vec<ServerSseMessage>, SessionError> {
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

/// `N` or `N/REQ`.
struct EventId {
    index: usize,
    request: Option<u64>,
}

impl EventId {
    fn parse(s: &str) -> Result<EventId, SessionError> {
        let bad = || SessionError::EventId(s.chars().take(64).collect());
        let (index, request) = match s.split_once('/') {
            Some((i, r)) => (i, Some(r.parse::<u64>().map_err(|_| bad())?)),
            None => (s, None),
        };
        Ok(EventId {
            index: index.parse().map_err(|_| bad())?,
            request,
        })
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

    /// What a client message to request stream `request` registers.
    fn register(&mut self, m: &ClientJsonRpcMessage, request: Option<u64>) {
        match m {
            JsonRpcMessage::Request(r) => {
                let Some(id) = request else { return };
                let Some(stream) = self.requests.get_mut(&id) else {
                    return;
                };
                let mut keys = vec![Key::Request(r.id.clone())];
                if let Some(p) = r.request.get_meta().get_progress_token() {
                    keys.push(Key::Progress(p));
                }
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
    ) -> Result<(mpsc::Receiver<ServerSseMessage>, Vec<ServerSseMessage>), SessionError> {
        self.shadows.retain(|tx| !tx.is_closed());
        if self.standalone.is_dead() {
            let replay = self.standalone.from(from)?;
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
    ) -> Result<(mpsc::Receiver<ServerSseMessage>, Vec<ServerSseMessage>), SessionError> {
        let stream = self
            .requests
            .get_mut(&request)
            .ok_or(SessionError::StreamGone)?;
        let replay = stream.cached.from(index)?;
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
            match tokio::time::timeout_at(idle_until.into(), self.rx.recv()).await {
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
        let id: SessionId = uuid::Uuid::new_v4().to_string().into();
        let (tx, rx) = mpsc::channel(CHANNEL);
        let session = Arc::new(Session {
            inbox: Mutex::new(Some(tx)),
            routes: Mutex::new(Routes::new(self.completed_ttl)),
        });
        lock(&self.map).insert(id.clone(), session.clone());
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
        Ok(lock(&self.map).contains_key(id))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let gone = lock(&self.map).remove(id);
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
        let (rx, priming) = {
            let mut routes = session.routes();
            routes.touch();
            let (request, rx, priming) = routes.open_request();
            routes.register(&message, Some(request));
            (rx, priming)
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
            routes.register(&message, None);
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
        let (rx, replay) = routes.open_standalone(0)?;
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
            Some(r) => routes.resume_request(r, event.index)?,
            None => routes.open_standalone(event.index)?,
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
        let (_rx, replay) = r.open_standalone(0).expect("open");
        assert_eq!(ids(&replay), ["0", "1", "2"]);
        // A second GET while the first listens: a shadow, no replay.
        let (_shadow, replay) = r.open_standalone(0).expect("shadow");
        assert!(replay.is_empty());
        // Only the last CACHED are kept.
        for i in 3..40 {
            r.route(updated(&format!("context://x/{i}")))
                .expect("route");
        }
        assert_eq!(r.standalone.cache.len(), CACHED);
        assert!(r.standalone.from(0).is_ok());
        assert!(r.standalone.from(100).is_err(), "beyond what was sent");
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
        r.register(&call, Some(req));
        assert!(matches!(
            r.target(&updated("context://a")),
            Target::Standalone
        ));
        let answer =
            ServerJsonRpcMessage::response(ServerResult::empty(()), NumberOrString::Number(7));
        r.route(answer).expect("route").deliver().await;
        assert!(r.requests.is_empty() && r.keys.is_empty());
        let first = rx.recv().await.expect("priming");
        assert_eq!(first.event_id.as_deref(), Some(format!("0/{req}").as_str()));
        assert!(first.message.is_none());
        let second = rx.recv().await.expect("answer");
        assert_eq!(
            second.event_id.as_deref(),
            Some(format!("1/{req}").as_str())
        );
        assert!(rx.recv().await.is_none(), "the stream ends with its answer");
    }
}

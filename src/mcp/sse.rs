//! The legacy HTTP+SSE transport of protocol 2024-11-05, for hosts that
//! still speak it: `GET /sse` opens an event stream whose first event,
//! `endpoint`, names `/messages?sessionId=ID`; the host POSTs each message
//! there and reads every answer from the stream.
//!
//! rmcp 3.9 has no server for this transport any more, so this is the thin
//! adapter beside it: it frames (SSE events out, POST bodies in) and hands
//! messages to the same `ContextServer` through a [`ChannelTransport`];
//! the protocol stays rmcp's. The HTTP guard has already
//! checked Host, Origin, the token and the body by the time these run.
//!
//! A session belongs to the token that opened it ([`Bearer`]): a POST of
//! another token finds no such session (404, as for an id that does not
//! exist); revoking the token ends the stream at once; a token holds at
//! most [`PER_TOKEN`] streams, and opening one more ends its own oldest,
//! so that no token can take another's place (the connections themselves
//! are bounded by the HTTP server).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{StatusCode, header};
use rmcp::ServiceExt;
use rmcp::model::ClientJsonRpcMessage;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::Broker;
use super::consent::Subject;
use super::jsonrpc::Screen;
use super::server::{ContextServer, Origin};
use super::stdio::ChannelTransport;
use crate::core::tokens::Bearer;

/// At most this many legacy streams per token.
pub(crate) const PER_TOKEN: usize = 8;
const QUEUE: usize = 64;
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a POST may wait for room in its session's queue.
const POST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Session {
    /// The token that opened it ([`Bearer::id`]).
    owner: u64,
    /// In order of opening, for ending a token's oldest.
    opened: u64,
    tx: mpsc::Sender<Box<ClientJsonRpcMessage>>,
    /// Ends the stream.
    stop: CancellationToken,
}

/// The legacy sessions.
#[derive(Debug, Clone)]
pub(crate) struct Legacy {
    broker: Arc<Broker>,
    sessions: Arc<Mutex<HashMap<String, Session>>>,
    opened: Arc<std::sync::atomic::AtomicU64>,
    cancel: CancellationToken,
}

impl Legacy {
    pub(crate) fn new(broker: Arc<Broker>, cancel: CancellationToken) -> Self {
        Legacy {
            broker,
            sessions: Arc::new(Mutex::new(HashMap::new())),
            opened: Arc::default(),
            cancel,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "error": message }).to_string(),
    )
        .into_response()
}

/// Removes a session from the table when its stream goes.
struct Cleanup {
    legacy: Legacy,
    id: String,
    _stop: DropGuard,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.legacy.lock().remove(&self.id);
        tracing::debug!(session = %self.id, "legacy SSE stream closed");
    }
}

fn event(name: &str, data: &str) -> Bytes {
    // `data` is one line (JSON without newlines, or the endpoint path).
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// `GET /sse`: open a session.
pub(crate) async fn open(State(legacy): State<Legacy>, req: Request) -> Response {
    let (Some(subject), Some(bearer)) = (
        req.extensions().get::<Subject>().cloned(),
        req.extensions().get::<Bearer>().cloned(),
    ) else {
        return error(StatusCode::UNAUTHORIZED, "no token");
    };
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (in_tx, in_rx) = mpsc::channel(QUEUE);
    let (out_tx, mut out_rx) = mpsc::channel(QUEUE);
    let stop = legacy.cancel.child_token();
    {
        let mut m = legacy.lock();
        // Room for this one among the token's own: its oldest ends.
        let mut mine: Vec<(u64, String)> = m
            .iter()
            .filter(|(_, s)| s.owner == bearer.id)
            .map(|(id, s)| (s.opened, id.clone()))
            .collect();
        mine.sort_unstable();
        let extra = (mine.len() + 1).saturating_sub(PER_TOKEN);
        for (_, old) in mine.into_iter().take(extra) {
            if let Some(s) = m.remove(&old) {
                tracing::debug!(session = %old, "a token opened more than {PER_TOKEN} legacy SSE streams: its oldest ends");
                s.stop.cancel();
            }
        }
        m.insert(
            id.clone(),
            Session {
                owner: bearer.id,
                opened: legacy
                    .opened
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                tx: in_tx,
                stop: stop.clone(),
            },
        );
    }
    let server = ContextServer::new(
        legacy.broker.clone(),
        Origin::Fixed(subject.clone()),
        "sse",
        Some(stop.clone()),
    );
    {
        let stop = stop.clone();
        let admission = legacy.broker.admission.clone();
        legacy.broker.tasks.spawn(async move {
            match server
                .serve_with_ct(
                    ChannelTransport::new(in_rx, out_tx).admitted_by(admission),
                    stop,
                )
                .await
            {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::debug!(error = %e, "legacy SSE session ended before it began"),
            }
        });
    }
    // End the stream when the token is revoked (its life).
    {
        let stop = stop.clone();
        let life = bearer.life.clone();
        legacy.broker.tasks.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = life.cancelled() => stop.cancel(),
            }
        });
    }
    let cleanup = Cleanup {
        legacy: legacy.clone(),
        id: id.clone(),
        _stop: stop.clone().drop_guard(),
    };
    let first = event("endpoint", &format!("/messages?sessionId={id}"));
    tracing::debug!(session = %id, app = %subject.app_id, "legacy SSE stream opened");
    // Server messages become SSE events (plus a keep-alive comment every
    // 15 s, so that proxies and clients see the stream is alive).
    let (bytes_tx, bytes_rx) = mpsc::channel::<Bytes>(QUEUE);
    legacy.broker.tasks.spawn(async move {
        let mut tick = tokio::time::interval(KEEP_ALIVE);
        tick.tick().await;
        loop {
            let chunk = tokio::select! {
                m = out_rx.recv() => match m {
                    Some(m) => match serde_json::to_string(&m) {
                        Ok(s) => event("message", &s),
                        Err(e) => { tracing::error!(error = %e, "cannot serialize an MCP message"); continue; }
                    },
                    None => break,
                },
                _ = tick.tick() => Bytes::from_static(b": keep-alive\n\n"),
            };
            if bytes_tx.send(chunk).await.is_err() {
                break;
            }
        }
    });
    // The body owns the cleanup: when the host disconnects, hyper drops the
    // body, and the session ends.
    let body = futures_util::stream::unfold(
        (Some(first), bytes_rx, cleanup, stop),
        |(first, mut rx, cleanup, stop)| async move {
            if let Some(f) = first {
                return Some((Ok::<Bytes, Infallible>(f), (None, rx, cleanup, stop)));
            }
            let next = tokio::select! {
                _ = stop.cancelled() => None,
                b = rx.recv() => b,
            };
            next.map(|b| (Ok(b), (None, rx, cleanup, stop)))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("X-Accel-Buffering", "no")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "cannot build the stream"))
}

#[derive(Debug, Deserialize)]
pub(crate) struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: String,
}

/// `POST /messages?sessionId=ID`: one message for a session.
pub(crate) async fn post(
    State(legacy): State<Legacy>,
    Query(q): Query<SessionQuery>,
    req: Request,
) -> Response {
    let Some(bearer) = req.extensions().get::<Bearer>().cloned() else {
        return error(StatusCode::UNAUTHORIZED, "no token");
    };
    let msg = req
        .extensions()
        .get::<Screen>()
        .and_then(|s| s.0.lock().unwrap_or_else(|e| e.into_inner()).take());
    let Some(msg) = msg else {
        return error(StatusCode::BAD_REQUEST, "no JSON-RPC message in the body");
    };
    let tx = {
        let m = legacy.lock();
        match m.get(&q.session_id) {
            // Another token's session is one that does not exist.
            Some(s) if s.owner == bearer.id && !s.stop.is_cancelled() => s.tx.clone(),
            _ => {
                return error(
                    StatusCode::NOT_FOUND,
                    "no such session; open one with GET /sse",
                );
            }
        }
    };
    match tx.send_timeout(Box::new(msg), POST_TIMEOUT).await {
        Ok(()) => (StatusCode::ACCEPTED, "Accepted").into_response(),
        Err(mpsc::error::SendTimeoutError::Timeout(_)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the session is not reading its messages",
        ),
        Err(mpsc::error::SendTimeoutError::Closed(_)) => {
            error(StatusCode::NOT_FOUND, "the session has ended")
        }
    }
}

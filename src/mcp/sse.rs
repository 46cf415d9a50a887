//! The legacy HTTP+SSE transport of protocol 2024-11-05, for hosts that
//! still speak it: `GET /sse` opens an event stream whose first event,
//! `endpoint`, names `/messages?sessionId=ID`; the host POSTs each message
//! there and reads every answer from the stream.
//!
//! rmcp 3.9 has no server for this transport any more, so this is the thin
//! adapter beside it: it frames (SSE events out, POST bodies in) and hands
//! messages to the same `ContextServer` through a [`ChannelTransport`];
//! the protocol stays rmcp's. The HTTP guard has already
//! checked Host, Origin, the token and the body by the time these run. A
//! session belongs to the token that opened it.

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
use crate::core::tokens::Tokens;
use crate::model::AppId;

/// At most this many legacy streams at once.
const MAX_SESSIONS: usize = 64;
const QUEUE: usize = 64;
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a POST may wait for room in its session's queue.
const POST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Session {
    app_id: AppId,
    tx: mpsc::Sender<Box<ClientJsonRpcMessage>>,
}

/// The legacy sessions.
#[derive(Debug, Clone)]
pub(crate) struct Legacy {
    broker: Arc<Broker>,
    tokens: Tokens,
    sessions: Arc<Mutex<HashMap<String, Session>>>,
    cancel: CancellationToken,
}

impl Legacy {
    pub(crate) fn new(broker: Arc<Broker>, tokens: Tokens, cancel: CancellationToken) -> Self {
        Legacy {
            broker,
            tokens,
            sessions: Arc::new(Mutex::new(HashMap::new())),
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
    let Some(subject) = req.extensions().get::<Subject>().cloned() else {
        return error(StatusCode::UNAUTHORIZED, "no token");
    };
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (in_tx, in_rx) = mpsc::channel(QUEUE);
    let (out_tx, mut out_rx) = mpsc::channel(QUEUE);
    {
        let mut m = legacy.lock();
        if m.len() >= MAX_SESSIONS {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many legacy SSE sessions; close some or use Streamable HTTP at /mcp",
            );
        }
        m.insert(
            id.clone(),
            Session {
                app_id: subject.app_id.clone(),
                tx: in_tx,
            },
        );
    }
    let stop = legacy.cancel.child_token();
    let server = ContextServer::new(
        legacy.broker.clone(),
        Origin::Fixed(subject.clone()),
        "sse",
        Some(stop.clone()),
    );
    {
        let stop = stop.clone();
        legacy.broker.tasks.spawn(async move {
            match server
                .serve_with_ct(ChannelTransport::new(in_rx, out_tx), stop)
                .await
            {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::debug!(error = %e, "legacy SSE session ended before it began"),
            }
        });
    }
    // End the stream when the token is revoked (`Tokens::next_revoked`).
    {
        let stop = stop.clone();
        let tokens = legacy.tokens.clone();
        let mut revoked = legacy.tokens.revocations();
        let token = subject
            .app_id
            .as_str()
            .strip_prefix("token:")
            .map(str::to_owned);
        legacy.broker.tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    r = tokens.next_revoked(&mut revoked) => match r {
                        Some(r) if token.as_deref().is_some_and(|t| r.covers(t)) => {
                            stop.cancel();
                            break;
                        }
                        Some(_) => {}
                        None => break,
                    },
                }
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
    let Some(subject) = req.extensions().get::<Subject>().cloned() else {
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
            None => {
                return error(
                    StatusCode::NOT_FOUND,
                    "no such session; open one with GET /sse",
                );
            }
            Some(s) if s.app_id != subject.app_id => {
                return error(
                    StatusCode::FORBIDDEN,
                    "this session belongs to another token",
                );
            }
            Some(s) => s.tx.clone(),
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

//! MCP over HTTP: Streamable HTTP at `/mcp` (rmcp's service) and the
//! legacy HTTP+SSE pair at `/sse` + `/messages` ([`super::sse`]), on a
//! loopback address, off until `[mcp.http]` (or `contextd --http`) asks.
//!
//! rmcp serves the protocol (a stateless `tools/call` of one of our tools is
//! answered by [`super::direct`] without rmcp's per-request service); a thin
//! layer in front of every route ([`guard`])
//! adds what a loopback server needs and rmcp does not do the same way for all
//! routes:
//! 1. `Host` must be a loopback name of the listen address (or a configured
//!    one) and `Origin`, when present, an allowed origin: else 403 (DNS
//!    rebinding, browsers);
//! 2. `Authorization: Bearer TOKEN` must name a live token: else 401 (for
//!    a token past its expiry, `error_description="the token expired"`
//!    and a body that says how to make a new one);
//! 3. the request headers of MCP (`Mcp-Session-Id`, `MCP-Protocol-Version`,
//!    `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`, `Last-Event-ID`) and the
//!    credentials (`Authorization`, `Origin`) come at most once each: else
//!    400 (a gateway that reads the last of two must not see another
//!    request than the one served);
//! 4. POST bodies: at most 1 MiB (413), read within 30 s (408), and
//!    screened as JSON-RPC (400 with -32700/-32600/-32602).
//!
//! Everything a request opens belongs to its token ([`Bearer`]): a
//! Streamable HTTP session ([`super::sessions`], which finds no session of
//! another token, as if it did not exist), a legacy SSE stream
//! ([`super::sse`]), a request waiting for the user (its wait ends with
//! the token: [`HostGone`]). Revoking the token ends them all at once,
//! through its `life`.
//!
//! A refusal made before the body was read (401, 403, 413 on the declared
//! length) still gets to a client that is busy sending its body: a small
//! body (at most [`DRAIN_BYTES`]) is read and dropped first, and the
//! connection stays open for the next request; anything larger, or a body
//! refused after part of it was read (413, 408, 400), gets
//! `Connection: close` and a lingering close ([`crate::httpd`]), so the
//! client reads the status before the connection ends, over HTTP/1.1
//! (the only version served).
//!
//! Connections: the first request's head must arrive within 2 s, later
//! ones within 10 s (between requests on an idle keep-alive connection);
//! at most 256 of the user's own at once, and a connection whose request
//! passed the guard (a live token) keeps its slot against connections
//! that never did: when all are taken, a new connection closes the oldest
//! of those (slow request heads cannot keep a host out), then the one
//! idle the longest ([`crate::httpd`]). A loopback peer of another uid is
//! closed before a byte is read.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Broker;
use super::consent::{Channel, HostGone, Subject};
use super::jsonrpc::{self, Checked, MAX_MESSAGE_BYTES, Screen, Screened};
use super::server::ContextServer;
use super::sessions::{self, Sessions};
use super::sse;
use crate::config::McpHttpConfig;
use crate::core::tokens::{Bearer, Presented, Tokens};
use crate::model::{AppId, IdentitySource};

/// Where clients find the server (port 0 picks one).
pub(crate) const URL_FILE: &str = "mcp-http.url";
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The body of a refused request is read and dropped, to keep the
/// connection, when it is at most this long...
const DRAIN_BYTES: usize = 64 * 1024;
/// ... and arrives within this long; else the connection is closed.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_CONNECTIONS: usize = 256;
/// The request headers that must come at most once (see the module docs;
/// `Mcp-Param-*` too).
const SINGLE: [&str; 7] = [
    "authorization",
    "origin",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
];

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "refusing to listen on {0}: it is not a loopback address. MCP over HTTP carries your desktop context in plain HTTP; \
         listen on 127.0.0.1 or [::1], or, only with TLS terminated in front of contextd, set allow_remote = true in [mcp.http]"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// The non-negotiable: loopback unless the user explicitly said otherwise.
pub(crate) fn check_listen(cfg: &McpHttpConfig) -> Result<(), HttpError> {
    if !cfg.listen.ip().is_loopback() && !cfg.allow_remote {
        return Err(HttpError::NotLoopback(cfg.listen));
    }
    if !cfg.listen.ip().is_loopback() {
        tracing::warn!(addr = %cfg.listen, "MCP over HTTP on a non-loopback address (allow_remote = true): TLS must be terminated in front of contextd");
    }
    Ok(())
}

/// A bound listener and what the guard needs to know about it.
#[derive(Debug)]
pub(crate) struct Bound {
    listener: TcpListener,
    addr: SocketAddr,
    cfg: McpHttpConfig,
    url_file: Option<PathBuf>,
}

pub(crate) async fn bind(
    cfg: &McpHttpConfig,
    runtime: Option<&std::path::Path>,
) -> Result<Bound, HttpError> {
    check_listen(cfg)?;
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|error| HttpError::Bind {
            addr: cfg.listen,
            error,
        })?;
    let addr = listener.local_addr().map_err(|error| HttpError::Bind {
        addr: cfg.listen,
        error,
    })?;
    let url_file = runtime.map(|r| r.join(URL_FILE));
    if let Some(f) = &url_file
        && let Err(e) = std::fs::write(f, format!("http://{addr}/mcp\n"))
    {
        tracing::warn!(path = %f.display(), error = %e, "cannot write the MCP URL file");
    }
    tracing::info!("MCP over HTTP at http://{addr}/mcp (legacy SSE at http://{addr}/sse)");
    Ok(Bound {
        listener,
        addr,
        cfg: cfg.clone(),
        url_file,
    })
}

/// What the guard checks against.
#[derive(Debug)]
pub(crate) struct Guard {
    tokens: Tokens,
    hosts: Vec<String>,
    origins: Vec<String>,
    /// Answers the plain stateless `tools/call`s on `/mcp` (see
    /// [`super::direct`]); `None` where only the guard is wanted.
    direct: Option<super::direct::Direct>,
    /// Where the tasks that end a request's wait with its token run.
    tasks: TaskTracker,
    /// How many requests run at once, per token and in all
    /// ([`super::admission`]); `None` where only the guard is wanted.
    admission: Option<Arc<super::admission::Admission>>,
}

impl Guard {
    pub(crate) fn new(
        tokens: Tokens,
        addr: SocketAddr,
        cfg: &McpHttpConfig,
        tasks: TaskTracker,
    ) -> Guard {
        let port = addr.port();
        let mut hosts: Vec<String> = Vec::new();
        let mut origins: Vec<String> = Vec::new();
        for name in ["127.0.0.1", "localhost", "[::1]"] {
            hosts.push(name.to_owned());
            hosts.push(format!("{name}:{port}"));
            origins.push(format!("http://{name}:{port}"));
        }
        if !addr.ip().is_loopback() {
            let ip = match addr {
                SocketAddr::V4(a) => a.ip().to_string(),
                SocketAddr::V6(a) => format!("[{}]", a.ip()),
            };
            hosts.push(ip.clone());
            hosts.push(format!("{ip}:{port}"));
        }
        hosts.extend(cfg.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
        origins.extend(cfg.allowed_origins.iter().map(|o| o.to_ascii_lowercase()));
        Guard {
            tokens,
            hosts,
            origins,
            direct: None,
            tasks,
            admission: None,
        }
    }

    fn host_ok(&self, host: &str) -> bool {
        let h = host.to_ascii_lowercase();
        self.hosts.contains(&h)
    }

    fn origin_ok(&self, origin: &str) -> bool {
        let o = origin.trim_end_matches('/').to_ascii_lowercase();
        self.origins.contains(&o)
    }

    /// The subject of a request's credentials, and its token.
    fn authenticate(&self, req: &Request) -> Result<(Subject, Bearer), Box<Response>> {
        let subject = |bearer: Bearer| -> Result<(Subject, Bearer), Box<Response>> {
            let app_id = AppId::from_token(&bearer.name)
                .map_err(|e| Box::new(plain(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())))?;
            Ok((
                Subject {
                    app_id,
                    source: IdentitySource::Token,
                    channel: Channel::McpHttp,
                },
                bearer,
            ))
        };
        let Some(auth) = req.headers().get(header::AUTHORIZATION) else {
            // Only an extension (the conformance suite's, whose client
            // sends no token) serves requests without one; the product
            // never does.
            if let Some(name) = super::extension::get().and_then(|e| e.anonymous()) {
                static ANONYMOUS: std::sync::OnceLock<Bearer> = std::sync::OnceLock::new();
                return subject(ANONYMOUS.get_or_init(|| Bearer::unrevocable(name)).clone());
            }
            return Err(Box::new(unauthorized(
                "Bearer realm=\"contextd\"",
                "this server needs Authorization: Bearer TOKEN; create a token with `contextctl token create NAME`",
            )));
        };
        let token = auth
            .to_str()
            .ok()
            .and_then(|a| {
                let (scheme, rest) = a.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .ok_or_else(|| {
                Box::new(unauthorized(
                    "Bearer realm=\"contextd\", error=\"invalid_request\"",
                    "the Authorization header must be `Bearer TOKEN`",
                ))
            })?;
        match self.tokens.store.verify(token) {
            Presented::Live(bearer) => subject(bearer),
            // RFC 6750 3.1: the same error as for any token that is not
            // good, with why, so that a host can tell its user.
            Presented::Expired(name) => Err(Box::new(unauthorized(
                "Bearer realm=\"contextd\", error=\"invalid_token\", error_description=\"the token expired\"",
                &format!(
                    "the token '{name}' expired; make a new one: `contextctl token revoke {name}`, then `contextctl token create {name} --expires 30d` (or without --expires for one that never expires)"
                ),
            ))),
            Presented::Unknown => Err(Box::new(unauthorized(
                "Bearer realm=\"contextd\", error=\"invalid_token\"",
                "unknown or revoked token",
            ))),
        }
    }
}

fn plain(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "error": message }).to_string(),
    )
        .into_response()
}

fn unauthorized(challenge: &'static str, message: &str) -> Response {
    let mut r = plain(StatusCode::UNAUTHORIZED, message);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    r
}

impl Guard {
    /// The checks of a request's head, before its body is read: `Host`,
    /// `Origin`, headers given twice, the credentials, a declared length.
    /// The subject of the credentials and its token, or the answer.
    pub(crate) fn head(&self, req: &Request) -> Result<(Subject, Bearer), Box<Response>> {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| req.uri().authority().map(|a| a.to_string()));
        match host {
            None => {
                return Err(Box::new(plain(
                    StatusCode::BAD_REQUEST,
                    "missing Host header",
                )));
            }
            Some(h) if !self.host_ok(&h) => {
                tracing::debug!(host = %h, "refused Host");
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    "Host header is not allowed",
                )));
            }
            Some(_) => {}
        }
        if let Some(twice) = repeated(req.headers()) {
            return Err(Box::new(header_twice(&twice)));
        }
        if let Some(o) = req.headers().get(header::ORIGIN) {
            let ok = o.to_str().is_ok_and(|o| self.origin_ok(o));
            if !ok {
                tracing::debug!(origin = ?o, "refused Origin");
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    "Origin is not allowed",
                )));
            }
        }
        let subject = self.authenticate(req)?;
        if req.method() == http::Method::POST {
            let declared = req
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > MAX_MESSAGE_BYTES as u64) {
                return Err(Box::new(too_large()));
            }
        }
        Ok(subject)
    }
}

/// The first header of [`SINGLE`] (or `Mcp-Param-*`) that `headers`
/// carries more than once.
fn repeated(headers: &http::HeaderMap) -> Option<String> {
    headers
        .keys()
        .filter(|k| SINGLE.contains(&k.as_str()) || k.as_str().starts_with("mcp-param-"))
        .find(|k| headers.get_all(*k).iter().nth(1).is_some())
        .map(|k| k.as_str().to_owned())
}

/// A request with a header twice: 400 with rmcp's JSON-RPC error for a
/// header that does not agree with the request (-32020; no id, as the body
/// is not read).
fn header_twice(name: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": rmcp::model::ErrorCode::HEADER_MISMATCH.0,
                "message": format!("duplicate {name} header: it must be sent once"),
            }
        })
        .to_string(),
    )
        .into_response()
}

/// The layer in front of every route (see the module docs).
pub(crate) async fn guard(State(g): State<Arc<Guard>>, mut req: Request, next: Next) -> Response {
    let (subject, bearer) = match g.head(&req) {
        Ok(s) => s,
        Err(r) => return refused(req.into_body(), *r).await,
    };
    // Its connection is a real client's, not one holding a slot
    // (`crate::httpd`'s slots).
    crate::httpd::vouch(req.extensions());
    // A request waiting for the user stops waiting when its token is
    // revoked (`consent::ask`).
    req.extensions_mut()
        .insert(HostGone::new(bearer.life.clone(), g.tasks.clone()));
    req.extensions_mut().insert(subject);
    req.extensions_mut().insert(bearer);
    if req.method() == http::Method::POST {
        let (mut parts, body) = req.into_parts();
        let collected = tokio::time::timeout(
            BODY_TIMEOUT,
            Limited::new(body, MAX_MESSAGE_BYTES).collect(),
        )
        .await;
        // A body not read to its end: the connection cannot carry another
        // request, and ends after the answer (see the module docs).
        let bytes = match collected {
            Err(_) => {
                return closing(plain(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body took too long",
                ));
            }
            Ok(Err(e)) => {
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    return closing(too_large());
                }
                return closing(plain(
                    StatusCode::BAD_REQUEST,
                    &format!("cannot read the body: {e}"),
                ));
            }
            Ok(Ok(c)) => c.to_bytes(),
        };
        // A plain stateless tool call is answered here, read once: what
        // `direct::accept` takes, the check below passes too.
        if parts.uri.path() == "/mcp"
            && let Some(d) = &g.direct
            && let Some((call, client)) = super::direct::accept(&parts.headers, &bytes)
            && let Some(subject) = parts.extensions.get::<Subject>()
            && let Some(bearer) = parts.extensions.get::<Bearer>()
        {
            let ticket = match g.admit(bearer, Some(call.request_id())) {
                Ok(t) => t,
                Err(r) => return *r,
            };
            let answer = super::direct::answer(d, subject, &bearer.life, call, client).await;
            return holding(answer, ticket);
        }
        // Only the legacy endpoint wants the message parsed; rmcp parses
        // `/mcp`'s body itself, so there a check is enough.
        let checked = if parts.uri.path() == "/messages" {
            match jsonrpc::screen(&bytes) {
                Screened::Pass(m) => {
                    parts
                        .extensions
                        .insert(Screen(Arc::new(Mutex::new(Some(*m)))));
                    // Admitted by the legacy stream's transport.
                    Checked::Pass(None)
                }
                other => other.into(),
            }
        } else {
            jsonrpc::check(&bytes)
        };
        let mut ticket = None;
        match checked {
            // A request on `/mcp` runs once admitted; on `/messages` the
            // legacy stream's transport admits it (`ChannelTransport`).
            Checked::Pass(Some(id)) if parts.uri.path() == "/mcp" => {
                let Some(bearer) = parts.extensions.get::<Bearer>() else {
                    return plain(StatusCode::UNAUTHORIZED, "no token");
                };
                ticket = match g.admit(bearer, Some(id)) {
                    Ok(t) => t,
                    Err(r) => return *r,
                };
            }
            Checked::Pass(_) => {}
            Checked::Reject(r) => {
                return (
                    StatusCode::BAD_REQUEST,
                    [(header::CONTENT_TYPE, "application/json")],
                    r.to_json().to_string(),
                )
                    .into_response();
            }
            Checked::Ignore(why) => {
                tracing::debug!("ignored MCP message: {why}");
                return StatusCode::ACCEPTED.into_response();
            }
        }
        req = Request::from_parts(parts, Body::from(bytes));
        return holding(next.run(req).await, ticket);
    }
    next.run(req).await
}

impl Guard {
    /// A place for one request of `bearer`'s, or the answer that tells
    /// the host to come back: `429` when its token has too many requests
    /// running, `503` when all hosts together do, both with `Retry-After`
    /// and a JSON-RPC error (`retryAfter` in its data) for request `id`.
    fn admit(
        &self,
        bearer: &Bearer,
        id: Option<rmcp::model::RequestId>,
    ) -> Result<Option<super::admission::Ticket>, Box<Response>> {
        let Some(admission) = &self.admission else {
            return Ok(None);
        };
        let busy = match admission.enter(super::admission::Host::Token(bearer.id)) {
            Ok(t) => return Ok(Some(t)),
            Err(b) => b,
        };
        tracing::debug!(token = %bearer.name, "MCP request refused: {busy}");
        let status = match busy {
            super::admission::Busy::Host => StatusCode::TOO_MANY_REQUESTS,
            super::admission::Busy::All => StatusCode::SERVICE_UNAVAILABLE,
        };
        let body = json!({
            "jsonrpc": "2.0",
            "id": id.map_or(serde_json::Value::Null, rmcp::model::RequestId::into_json_value),
            "error": {
                "code": super::error::BUSY.0,
                "message": busy.to_string(),
                "data": busy.data(),
            }
        });
        Err(Box::new(
            (
                status,
                [
                    (
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    ),
                    (
                        header::RETRY_AFTER,
                        HeaderValue::from(super::admission::RETRY_AFTER_S),
                    ),
                ],
                body.to_string(),
            )
                .into_response(),
        ))
    }
}

/// `response`, holding `ticket` until its body has been sent: a streamed
/// answer's work goes on after the head.
fn holding(response: Response, ticket: Option<super::admission::Ticket>) -> Response {
    let Some(ticket) = ticket else {
        return response;
    };
    response.map(|body| {
        Body::new(Holding {
            body,
            _ticket: ticket,
        })
    })
}

/// A body that gives its request's place back when it is dropped.
struct Holding {
    body: Body,
    _ticket: super::admission::Ticket,
}

impl http_body::Body for Holding {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// `response` says the connection ends after it.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Send `response`, a refusal made before the request's `body` was read.
/// A small body is read and dropped first, so that the connection can
/// carry the next request; a larger one (or one that does not come) is
/// left unread and the connection closes after the response, lingering
/// ([`crate::httpd`]) so that the client reads it.
async fn refused(body: Body, response: Response) -> Response {
    use axum::body::HttpBody as _;
    if body.is_end_stream() {
        return response;
    }
    let declared = body.size_hint().exact();
    if declared.is_some_and(|n| n > DRAIN_BYTES as u64) {
        return closing(response);
    }
    let drained =
        tokio::time::timeout(DRAIN_TIMEOUT, Limited::new(body, DRAIN_BYTES).collect()).await;
    match drained {
        Ok(Ok(_)) => response,
        _ => closing(response),
    }
}

fn too_large() -> Response {
    plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("request body larger than {MAX_MESSAGE_BYTES} bytes"),
    )
}

/// The layer in front of `/mcp`: rmcp's service runs as the request's
/// token ([`sessions::as_owner`]), so that the sessions it opens are that
/// token's and it reaches no other's. A `DELETE` naming a session that is
/// not the token's is answered as rmcp answers a request naming an unknown
/// session (rmcp itself closes whatever id a `DELETE` names).
async fn owned(State(sessions): State<Arc<Sessions>>, req: Request, next: Next) -> Response {
    let Some(bearer) = req.extensions().get::<Bearer>().cloned() else {
        return plain(StatusCode::UNAUTHORIZED, "no token");
    };
    let delete = req.method() == http::Method::DELETE;
    if delete
        && let Some(id) = req.headers().get("mcp-session-id")
        && !id.to_str().is_ok_and(|id| sessions.owned_by(id, bearer.id))
    {
        return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
    }
    let mut resp = sessions::as_owner(bearer, next.run(req)).await;
    // rmcp answers a session DELETE with 202; the Python and TypeScript
    // clients expect 200 or 204 (and warn otherwise). Nothing follows a
    // DELETE, so 204 says the same thing.
    if delete && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::NO_CONTENT;
        *resp.body_mut() = Body::empty();
    }
    resp
}

/// The router: `/mcp`, `/sse`, `/messages`, all behind the guard.
fn router(
    broker: Arc<Broker>,
    tokens: Tokens,
    addr: SocketAddr,
    cfg: &McpHttpConfig,
    sessions: Arc<Sessions>,
    cancel: CancellationToken,
) -> Router {
    let guard_state = Arc::new(Guard {
        direct: Some(super::direct::Direct {
            broker: broker.clone(),
            json: cfg.responses == crate::config::Responses::Json,
        }),
        admission: Some(broker.admission.clone()),
        ..Guard::new(tokens.clone(), addr, cfg, broker.tasks.clone())
    });
    let streamable = {
        let broker = broker.clone();
        let config = StreamableHttpServerConfig::default()
            // The guard checks Host and Origin for every route.
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
            .with_json_response(cfg.responses == crate::config::Responses::Json)
            .with_sse_keep_alive(Some(Duration::from_secs(15)))
            .with_cancellation_token(cancel.child_token());
        // rmcp makes the handler within the request's future (as the
        // request's token: `owned`), for a session or a stateless request.
        StreamableHttpService::new(
            move || {
                Ok(ContextServer::http(
                    broker.clone(),
                    sessions::owner().map(|o| o.life),
                ))
            },
            sessions.clone(),
            config,
        )
    };
    let legacy = sse::Legacy::new(broker, cancel);
    Router::new()
        .route_service("/mcp", streamable)
        .route_layer(middleware::from_fn_with_state(sessions, owned))
        .merge(
            Router::new()
                .route("/sse", get(sse::open))
                .route("/messages", post(sse::post))
                .with_state(legacy),
        )
        .layer(middleware::from_fn_with_state(guard_state, guard))
}

/// The sessions ([`super::sessions`]), keeping no answer once it is
/// sent.
///
/// rmcp's own manager kept a stream's answers for `completed_cache_ttl`
/// (60 s by default) so that a client whose SSE stream broke could resume
/// it (`Last-Event-ID`), evicting them only when that session's next
/// message came: a host that made a thousand calls and went quiet left
/// them all held until its session timed out (5 min). In `make soak` (200
/// hosts) that was 43 MB still held 30 s after the load stopped, on a
/// 28 MB daemon. Answers sent as JSON (the default, `[mcp.http] responses
/// = "json"`) have no stream to resume: none is kept. Answers sent as SSE
/// are kept 5 s (the retry interval the stream announces is 3 s).
fn session_manager(responses: crate::config::Responses) -> Sessions {
    Sessions::new(match responses {
        crate::config::Responses::Json => Duration::ZERO,
        crate::config::Responses::Sse => Duration::from_secs(5),
    })
}

/// Serve HTTP until `cancel`.
pub(crate) async fn serve(
    bound: Bound,
    broker: Arc<Broker>,
    tokens: Tokens,
    cancel: CancellationToken,
) {
    let sessions = Arc::new(session_manager(bound.cfg.responses));
    let tasks = broker.tasks.clone();
    let app = router(
        broker,
        tokens,
        bound.addr,
        &bound.cfg,
        sessions,
        cancel.clone(),
    );
    crate::httpd::serve(
        &bound.listener,
        app,
        MAX_CONNECTIONS,
        &tasks,
        &cancel,
        "MCP HTTP",
    )
    .await;
    if let Some(f) = &bound.url_file {
        let _ = std::fs::remove_file(f);
    }
}

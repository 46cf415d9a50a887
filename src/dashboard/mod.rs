//! The privacy dashboard: a publisher for the user's own eyes, served on
//! loopback only (`contextctl dashboard` opens it).
//!
//! Like every publisher it converts and formats; the core decides. It
//! reads the user's management views (`core::manage`, `core::readers`,
//! `core::prompts`) and changes decisions through the gate, as
//! `Consent1` does for settings panels.
//!
//! Who may use it: whoever holds a one-time ticket, which only
//! `Consent1.OpenDashboard` hands out (polkit-checked, like every
//! `Consent1` call); `contextctl dashboard` passes it to the browser in a
//! 0600 file under `$XDG_RUNTIME_DIR/contextd/`, never on a command line
//! (`/proc/PID/cmdline` is readable by every user). `/open?ticket=` spends
//! the ticket and starts a session of two secrets, both needed for every
//! page and every change:
//! - a capability in the path: every page of the session is under
//!   `/s/CAP/` (pages link relatively, `Referrer-Policy: same-origin`: a
//!   referrer only to the dashboard itself, never another port), so
//!   only the browser tab that opened it knows where the session is;
//! - a cookie (`HttpOnly`, `SameSite=Strict`) set for `Path=/s/CAP` only.
//!
//! Why both: browsers do not scope cookies by port, and all of loopback is
//! one site, so a cookie for `Path=/` would be sent to a page that *any*
//! local process serves on another port, and its owner could replay it.
//! The path-scoped cookie is not sent there at all, and even a cookie that
//! leaked opens nothing without the capability. Every request must carry
//! a loopback `Host` of our port (no DNS rebinding); every change must come
//! from our own `Origin` and carry the session's CSRF token. Pages are
//! served with a strict Content-Security-Policy: scripts and styles only
//! from the dashboard itself, which embeds them in the binary, so nothing
//! is fetched from anywhere else. Connections from loopback sockets of
//! another uid are closed before a byte is read ([`crate::httpd`]). Of the
//! 64 connection slots, those of the browser's session (a request with the
//! session, or the link that opened it) are kept against connections that
//! proved nothing: when all are taken, a new connection closes the oldest
//! of those, so a program holding slots with slow request heads cannot
//! keep the user's browser out ([`crate::httpd`]).
//!
//! What this does not stop: code running as the user (unsandboxed) can
//! read the browser's profile (history holds the path, the cookie jar the
//! cookie) or the runtime directory, as it can read the database key; the
//! threat model in the README says so.

mod charts;
mod detail;
mod frame;
mod icons;
mod pages;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::DashboardConfig;
use crate::core::consent::{Answer, Origin as DecisionOrigin, Verdict};
use crate::core::drive::{Backpressure, Flow, Sent, Sink, drive};
use crate::core::manage::Manage;
use crate::core::notice;
use crate::core::prompts::Ask;
use crate::core::watch::Watches;
use crate::core::{Follow, Item, Watcher};
use crate::model::{AppId, Category};
use crate::shutdown::Level;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "contextd_dashboard";
/// Every response's Content-Security-Policy: nothing but the dashboard
/// itself, no inline script or style, no framing, forms only to itself.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// Browser sessions at most (a new one pushes out the least recently used).
const MAX_SESSIONS: usize = 16;
/// A session unused this long is forgotten.
const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);
const MAX_CONNECTIONS: usize = 64;
/// The largest form accepted.
const MAX_FORM: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error(
        "refusing to serve the dashboard on {0}: it is not a loopback address. The dashboard changes who may see your context; \
         it listens on 127.0.0.1 or [::1] only ([dashboard] listen in config.toml)"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr} for the dashboard: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// Check `[dashboard]` before the daemon takes its bus name.
pub(crate) fn check(cfg: &DashboardConfig) -> Result<(), DashboardError> {
    if cfg.enabled && !cfg.listen.ip().is_loopback() {
        return Err(DashboardError::NotLoopback(cfg.listen));
    }
    Ok(())
}

/// The core's handles the dashboard uses: the user's controls, the
/// questions waiting for the user, and the owner's change feed.
#[derive(Debug)]
pub(crate) struct Handles {
    pub(crate) manage: Manage,
    pub(crate) ask: Ask,
    pub(crate) watches: Watches,
    /// The MCP bearer tokens, listed with their expiry (never their
    /// secrets: only their HMACs are kept).
    pub(crate) tokens: Arc<dyn crate::core::tokens::TokenStore>,
}

/// Bind, serve until the level stops, and tell the core where (for the
/// tickets' URL). Nothing when `[dashboard] enabled = false`.
pub(crate) async fn serve(
    cfg: &DashboardConfig,
    privacy_file: std::path::PathBuf,
    core: Arc<Handles>,
    level: &Level,
) -> Result<(), DashboardError> {
    if !cfg.enabled {
        return Ok(());
    }
    check(cfg)?;
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|error| DashboardError::Bind {
            addr: cfg.listen,
            error,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|error| DashboardError::Bind {
            addr: cfg.listen,
            error,
        })?;
    core.manage.set_dashboard_base(format!("http://{addr}"));
    tracing::info!(%addr, "dashboard ready (contextctl dashboard)");
    let dash = Arc::new(Dash {
        core,
        privacy_file,
        addr,
        sessions: Mutex::new(HashMap::new()),
        cancel: level.child_token(),
        tasks: level.tracker(),
    });
    let app = router(dash.clone());
    level.spawn(async move {
        crate::httpd::serve(
            &listener,
            app,
            MAX_CONNECTIONS,
            &dash.tasks,
            &dash.cancel,
            "dashboard",
        )
        .await;
    });
    Ok(())
}

/// One browser's session: the capability in its pages' path, the cookie
/// that must come with it, and the token every change carries.
#[derive(Debug, Clone)]
struct Session {
    /// The path segment of every page of the session (`/s/CAP/…`).
    cap: String,
    /// The cookie's value; the cookie is set for `Path=/s/CAP` only.
    sid: String,
    csrf: String,
    used: Instant,
}

impl Session {
    /// Where the session's pages are: `/s/CAP`.
    fn root(&self) -> String {
        format!("{SESSION_PREFIX}{}", self.cap)
    }
}

/// Every page of a session is under `/s/CAP/`.
const SESSION_PREFIX: &str = "/s/";

#[derive(Debug)]
struct Dash {
    core: Arc<Handles>,
    /// Where the user's never-share rules are kept (`privacy.toml`, as
    /// `contextctl privacy` keeps them; the daemon watches it).
    privacy_file: std::path::PathBuf,
    addr: SocketAddr,
    /// By capability.
    sessions: Mutex<HashMap<String, Session>>,
    cancel: CancellationToken,
    tasks: tokio_util::task::TaskTracker,
}

impl Dash {
    /// The `Host` values that are us: the loopback names of our port.
    fn is_our_host(&self, host: &str) -> bool {
        let port = self.addr.port();
        let ours = if self.addr.is_ipv4() {
            [format!("127.0.0.1:{port}"), format!("localhost:{port}")]
        } else {
            [format!("[::1]:{port}"), format!("localhost:{port}")]
        };
        ours.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// The session of a request to `/s/CAP/…`: the capability in the
    /// path names it, and the request must also carry its cookie. Neither
    /// alone is enough: the cookie is the one thing a browser sends to
    /// other loopback ports (cookies are not scoped by port), and a path
    /// can be copied out of a window or history.
    fn session(&self, path: &str, headers: &HeaderMap) -> Option<Session> {
        let cap = path.strip_prefix(SESSION_PREFIX)?.split('/').next()?;
        let mut m = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, s| s.used.elapsed() < SESSION_IDLE);
        let s = m.get_mut(cap)?;
        // Both are ours and random; comparing them may stop early.
        if !cookies(headers, COOKIE).any(|v| v == s.sid) {
            return None;
        }
        s.used = Instant::now();
        Some(s.clone())
    }

    fn new_session(&self) -> crate::core::Result<Session> {
        let s = Session {
            cap: crate::core::tickets::random_token()?,
            sid: crate::core::tickets::random_token()?,
            csrf: crate::core::tickets::random_token()?,
            used: Instant::now(),
        };
        let mut m = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, s| s.used.elapsed() < SESSION_IDLE);
        if m.len() >= MAX_SESSIONS
            && let Some(oldest) = m.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone())
        {
            m.remove(&oldest);
        }
        m.insert(s.cap.clone(), s.clone());
        Ok(s)
    }
}

/// The values of every cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookies<'a>(
    headers: &'a HeaderMap,
    name: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(move |(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn router(dash: Arc<Dash>) -> Router {
    Router::new()
        .route("/open", get(open))
        .route("/assets/dashboard.css", get(css))
        .route("/assets/dashboard.js", get(js))
        .route("/s/{cap}", get(to_root))
        .route("/s/{cap}/", get(apps_page))
        .route("/s/{cap}/now", get(now_page))
        .route("/s/{cap}/timeline", get(timeline_page))
        .route("/s/{cap}/categories", get(categories_page))
        .route("/s/{cap}/category/{name}", get(category_page))
        .route("/s/{cap}/app/{id}", get(app_page))
        .route("/s/{cap}/icon/{id}", get(icon))
        .route("/s/{cap}/events", get(events))
        .route("/s/{cap}/decide", post(decide))
        .route("/s/{cap}/pause", post(pause))
        .route("/s/{cap}/forget", post(forget))
        .route("/s/{cap}/forget-history", post(forget_history))
        .route("/s/{cap}/end-reader", post(end_reader))
        .route("/s/{cap}/answer", post(answer))
        .route("/s/{cap}/privacy", post(privacy))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(dash.clone(), guard))
        .with_state(dash)
}

/// What a refused request gets: a short page saying why, and the way in.
fn refuse(status: StatusCode, why: &str) -> Response {
    (status, pages::refused(why)).into_response()
}

/// Every request: our `Host`; a session, named by the capability in the
/// path and proven by its cookie (but to open one, and for the static
/// assets); for a change, our `Origin` and the session's CSRF token (the
/// form is read here, once, and handed on). Every response: the security
/// headers.
async fn guard(State(dash): State<Arc<Dash>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut resp = if !dash.is_our_host(&host) {
        refuse(
            StatusCode::FORBIDDEN,
            "This address is not the dashboard's. Open it with `contextctl dashboard`.",
        )
    } else if req.uri().path() == "/open" {
        // A link that opened a session proves its connection (see below).
        let conn = req.extensions().clone();
        let resp = next.run(req).await;
        if resp.status().is_success() {
            crate::httpd::vouch(&conn);
        }
        resp
    } else if req.uri().path().starts_with("/assets/") {
        next.run(req).await
    } else {
        match dash.session(req.uri().path(), req.headers()) {
            None => refuse(
                StatusCode::FORBIDDEN,
                "There is no dashboard session in this browser. Open it with `contextctl dashboard`.",
            ),
            Some(session) => {
                // The browser's connection keeps its slot against
                // connections that proved nothing ([`crate::httpd`]).
                crate::httpd::vouch(req.extensions());
                checked(req, next, session, &host).await
            }
        }
    };
    let h = resp.headers_mut();
    for (k, v) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        // Not `no-referrer`: under it a browser sends `Origin: null` with a
        // plain form's POST, and every change made without the page's
        // script was refused. `same-origin` sends the path only to this
        // origin (scheme, host and port: another loopback port is another
        // origin), which knows it.
        ("referrer-policy", "same-origin"),
        ("x-frame-options", "DENY"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        ("cache-control", "no-store"),
    ] {
        h.insert(k, HeaderValue::from_static(v));
    }
    resp
}

/// The form of a change, its CSRF token checked.
#[derive(Debug, Clone, Default)]
struct Form(HashMap<String, String>);

impl Form {
    fn get(&self, k: &str) -> &str {
        self.0.get(k).map(String::as_str).unwrap_or_default()
    }
}

async fn checked(mut req: Request, next: Next, session: Session, host: &str) -> Response {
    if req.method() == Method::GET || req.method() == Method::HEAD {
        req.extensions_mut().insert(session);
        return next.run(req).await;
    }
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .unwrap_or_default();
    if origin != format!("http://{host}") {
        return refuse(
            StatusCode::FORBIDDEN,
            "A change must come from the dashboard's own page (its Origin).",
        );
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_FORM).await {
        Ok(b) => b,
        Err(_) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "The form is too large."),
    };
    let form: HashMap<String, String> = match form_pairs(&bytes) {
        Some(f) => f,
        None => return refuse(StatusCode::BAD_REQUEST, "The form is malformed."),
    };
    let token = form.get("csrf").map(String::as_str).unwrap_or_default();
    // Both are ours and random; comparing them may stop early.
    if token.is_empty() || token != session.csrf {
        return refuse(
            StatusCode::FORBIDDEN,
            "The form's CSRF token is missing or stale: reload the page.",
        );
    }
    let mut req = Request::from_parts(parts, Body::empty());
    req.extensions_mut().insert(session);
    req.extensions_mut().insert(Form(form));
    next.run(req).await
}

/// `application/x-www-form-urlencoded` into a map (the last of a repeated
/// key wins); `None` when it is not UTF-8.
pub(crate) fn form_pairs(bytes: &[u8]) -> Option<HashMap<String, String>> {
    std::str::from_utf8(bytes).ok()?;
    Some(
        url_pairs(bytes)
            .into_iter()
            .collect::<HashMap<String, String>>(),
    )
}

fn url_pairs(bytes: &[u8]) -> Vec<(String, String)> {
    bytes
        .split(|b| *b == b'&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = match p.iter().position(|b| *b == b'=') {
                Some(i) => (&p[..i], &p[i + 1..]),
                None => (p, &[][..]),
            };
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &[u8]) -> String {
    let plus: Vec<u8> = s
        .iter()
        .map(|b| if *b == b'+' { b' ' } else { *b })
        .collect();
    percent_encoding::percent_decode(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

async fn open(State(dash): State<Arc<Dash>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let ticket = q.get("ticket").map(String::as_str).unwrap_or_default();
    if !dash.core.manage.redeem_ticket(ticket) {
        return refuse(
            StatusCode::FORBIDDEN,
            "This link was used already or has expired. Run `contextctl dashboard` again for a new one.",
        );
    }
    let s = match dash.new_session() {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    // The cookie goes only to the session's own path, so a browser never
    // sends it to another loopback port's pages (which cannot know CAP).
    let root = s.root();
    let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path={root}", s.sid);
    let Ok(cookie) = HeaderValue::from_str(&cookie) else {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, "no session");
    };
    // A page of ours that moves on, not a redirect: the link usually comes
    // from another site (a file:// page, a terminal), and a browser sends
    // a SameSite=Strict cookie on no navigation a foreign page started,
    // redirects included. This page starts the next one itself.
    let mut resp = page(pages::opening(&format!("{root}/")));
    resp.headers_mut().insert(header::SET_COOKIE, cookie);
    resp
}

/// `/s/CAP` → `/s/CAP/`, where the relative links of the pages work.
async fn to_root(req: Request) -> Response {
    let s = session_of(req.extensions());
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("{}/", s.root()))],
    )
        .into_response()
}

async fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "There is no such page.")
}

fn session_of(req: &axum::http::Extensions) -> Session {
    req.get::<Session>().cloned().unwrap_or(Session {
        cap: String::new(),
        sid: String::new(),
        csrf: String::new(),
        used: Instant::now(),
    })
}

async fn apps_page(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let s = session_of(req.extensions());
    page(pages::apps(&dash.core, &s.csrf))
}

async fn now_page(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let s = session_of(req.extensions());
    page(pages::now(&dash.core, &s.csrf))
}

async fn timeline_page(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let s = session_of(req.extensions());
    page(pages::timeline(&dash.core, &s.csrf).await)
}

async fn categories_page(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let s = session_of(req.extensions());
    page(detail::categories(&dash.core, &s.csrf))
}

async fn category_page(
    State(dash): State<Arc<Dash>>,
    Path((_, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    let s = session_of(req.extensions());
    match name.parse::<Category>() {
        Ok(c) => page(detail::category(&dash.core, &s.csrf, &c).await),
        Err(_) => not_found().await,
    }
}

async fn app_page(
    State(dash): State<Arc<Dash>>,
    Path((_, id)): Path<(String, String)>,
    req: Request,
) -> Response {
    let s = session_of(req.extensions());
    match AppId::new(&id) {
        Ok(a) => page(detail::app(&dash.core, &s.csrf, &a).await),
        Err(_) => not_found().await,
    }
}

/// An app's icon, as its desktop entry names it ([`icons`]); 404 when
/// there is none. Cached by nobody (`no-store`, as every response).
async fn icon(Path((_, id)): Path<(String, String)>) -> Response {
    if AppId::new(&id).is_err() {
        return not_found().await;
    }
    match tokio::task::spawn_blocking(move || icons::of_app(&id)).await {
        Ok(Some(i)) => ([(header::CONTENT_TYPE, i.mime)], i.bytes).into_response(),
        _ => not_found().await,
    }
}

/// A page larger than this gives its memory back to the system once sent.
const TRIM_AFTER: usize = 256 * 1024;

/// Gives the heap's free memory back to the system when dropped.
struct Trim;

impl Drop for Trim {
    fn drop(&mut self) {
        // SAFETY: malloc_trim(3) only releases free memory of glibc's
        // heaps; it has no preconditions.
        #[cfg(target_env = "gnu")]
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// A rendered page. The grid of 200 apps is over a megabyte of HTML;
/// glibc keeps such freed blocks for the process, and the broker lives all
/// session long on a 20 MB budget, so once a large page is sent (its body
/// dropped) the memory goes back.
fn page(markup: maud::Markup) -> Response {
    let html = markup.into_string();
    if html.len() < TRIM_AFTER {
        return ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    }
    let body = futures_util::stream::unfold(
        (Some(bytes::Bytes::from(html)), Trim),
        |(chunk, trim)| async move {
            chunk.map(|c| (Ok::<_, std::convert::Infallible>(c), (None, trim)))
        },
    );
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        Body::from_stream(body),
    )
        .into_response()
}

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../data/dashboard/dashboard.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../data/dashboard/dashboard.js"),
    )
}

fn asset(mime: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, mime)], body).into_response()
}

/// Server-sent events: `changed` with the parts that moved (`grants`,
/// `apps`, `audit`, `pending`, `providers`, `readers`), `media` when what
/// plays or records changed, and every part and `media` when the feed fell
/// behind (changes were dropped), so the open page re-reads itself.
async fn events(State(dash): State<Arc<Dash>>) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(16);
    let cancel = dash.cancel.child_token();
    let core = dash.core.clone();
    let mut feed = core.watches.watch(Watcher::Owner, Follow::All);
    dash.tasks.spawn(async move {
        // While a page listens, the dashboard answers prompts that have
        // no other UI.
        let _surface = core.ask.prompt_surface();
        drive(&mut feed, &mut Page { tx }, &cancel).await;
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|e| (Ok::<_, std::convert::Infallible>(e), rx))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// An open page's side of [`drive`]: the owner's feed as its `changed`
/// events.
struct Page {
    tx: tokio::sync::mpsc::Sender<Event>,
}

impl Sink for Page {
    type Msg = Event;

    /// A reader that does not read is cut off, not buffered for: the page
    /// re-reads itself when it reconnects.
    fn backpressure(&self) -> Backpressure {
        Backpressure::CutOff
    }

    async fn convert(&mut self, item: Item, out: &mut Vec<Event>) -> Flow {
        let data = match item {
            Item::Ended | Item::EndedByUser | Item::Revoked { .. } => return Flow::Stop,
            Item::Control(parts) => parts
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(","),
            Item::Changed {
                category: Category::MediaPlayback | Category::MediaCapture,
                ..
            } => "media".to_owned(),
            Item::Lagged { .. } => {
                let mut all: Vec<&str> = notice::Part::ALL.iter().map(|p| p.as_str()).collect();
                all.push("media");
                all.join(",")
            }
            Item::Changed { .. }
            | Item::Sources
            | Item::GateChanged
            | Item::Paused
            | Item::Resumed => return Flow::Go,
        };
        out.push(Event::default().event("changed").data(data));
        Flow::Go
    }

    async fn send(&mut self, event: Event) -> Sent {
        match self.tx.send(event).await {
            Ok(()) => Sent::Delivered,
            Err(_) => Sent::Gone,
        }
    }

    /// The page closed its stream.
    async fn gone(&self) {
        self.tx.closed().await
    }
}

/// What a change answers: 204 to the page's script, which re-reads the
/// page; a redirect back to a plain form's page (in its session).
fn done(req: &Request, form: &Form) -> Response {
    if req.headers().get("x-dashboard").is_some() {
        return StatusCode::NO_CONTENT.into_response();
    }
    let back = back_to(form.get("back"));
    let root = session_of(req.extensions()).root();
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("{root}/{back}"))],
    )
        .into_response()
}

/// Where a plain form goes back to, below the session's root: one of
/// the pages, a category's or an app's page with its name parsed and
/// encoded again (what comes back is only ever a page of ours, never a
/// header or a path the form chose).
fn back_to(back: &str) -> String {
    match back {
        "/now" => "now".into(),
        "/timeline" => "timeline".into(),
        "/categories" => "categories".into(),
        b => {
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8()
                    .ok()
                    .map(|s| s.into_owned())
            };
            if let Some(c) = b
                .strip_prefix("/category/")
                .and_then(decode)
                .and_then(|c| c.parse::<Category>().ok())
            {
                format!("category/{}", frame::segment(&c.to_string()))
            } else if let Some(a) = b
                .strip_prefix("/app/")
                .and_then(decode)
                .and_then(|a| AppId::new(&a).ok())
            {
                format!("app/{}", frame::segment(a.as_str()))
            } else {
                String::new()
            }
        }
    }
}

fn bad(why: impl std::fmt::Display) -> Response {
    refuse(StatusCode::BAD_REQUEST, &why.to_string())
}

fn form_of(req: &Request) -> Form {
    req.extensions().get::<Form>().cloned().unwrap_or_default()
}

/// How long a decision lasts: `""` forever, else `1h`, `1d`, `7d`, `30d`.
fn expiry(core: &Handles, s: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, String> {
    let d = match s {
        "" | "forever" => return Ok(None),
        "1h" => chrono::Duration::hours(1),
        "1d" => chrono::Duration::days(1),
        "7d" => chrono::Duration::days(7),
        "30d" => chrono::Duration::days(30),
        other => return Err(format!("'{other}' is not a duration the dashboard offers")),
    };
    Ok(Some(core.manage.now() + d))
}

/// Decide for one app and category, a row (an app, every category) or a
/// column (a category, every app of the grid): `allow`, `deny`, `ask`, or
/// `clear` (back to undecided).
async fn decide(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let form = form_of(&req);
    let core = &dash.core;
    let expires = match expiry(core, form.get("for")) {
        Ok(e) => e,
        Err(e) => return bad(e),
    };
    let verdict = match form.get("decision") {
        "clear" => None,
        d => match d.parse::<Verdict>() {
            Ok(v) => Some(v),
            Err(e) => return bad(e),
        },
    };
    let apps: Vec<AppId> = match form.get("app") {
        "" => pages::rows(core)
            .iter()
            .filter_map(|a| AppId::new(&a.app_id).ok())
            .collect(),
        a => match AppId::new(a) {
            Ok(a) => vec![a],
            Err(e) => return bad(format!("app: {e}")),
        },
    };
    let categories: Vec<Category> = match form.get("category") {
        "" if form.get("app").is_empty() => return bad("name an app, a category or both"),
        "" => frame::columns(core),
        c => match c.parse::<Category>() {
            Ok(c) => vec![c],
            Err(e) => return bad(e),
        },
    };
    for app in &apps {
        for c in &categories {
            let r = match verdict {
                Some(v) => {
                    core.manage
                        .record_decision(app, c, v, expires, DecisionOrigin::Manage)
                        .await
                }
                None => core.manage.revoke(app, c).await.map(|_| ()),
            };
            if let Err(e) = r {
                return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
            }
        }
    }
    tracing::info!(
        apps = apps.len(),
        categories = categories.len(),
        decision = form.get("decision"),
        "decision set from the dashboard"
    );
    done(&req, &form)
}

async fn pause(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let form = form_of(&req);
    let paused = form.get("paused") == "true";
    if dash.core.manage.set_paused(paused) {
        tracing::info!(paused, "sharing paused from the dashboard");
    }
    done(&req, &form)
}

/// Add or remove one of the user's never-share rules: written to
/// privacy.toml, which the daemon watches and puts in force (a rule added
/// is put in force here at once too: hiding more never waits).
async fn privacy(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let form = form_of(&req);
    let pattern = form.get("pattern").trim().to_owned();
    if pattern.is_empty() || pattern.chars().count() > 200 || pattern.chars().any(char::is_control)
    {
        return bad("pattern: one line of at most 200 characters, not empty");
    }
    let mut file = match crate::config::PrivacyFile::load(&dash.privacy_file) {
        Ok(f) => f,
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let list = match form.get("what") {
        "app" => &mut file.privacy.apps,
        "title" => &mut file.privacy.titles,
        other => return bad(format!("what: '{other}' is neither app nor title")),
    };
    let at = list.iter().position(|p| p.eq_ignore_ascii_case(&pattern));
    match (form.get("action"), at) {
        ("add", None) => list.push(pattern),
        ("add", Some(_)) => return done(&req, &form),
        ("remove", Some(i)) => {
            list.remove(i);
        }
        ("remove", None) => {
            return bad(
                "this rule is not in privacy.toml (a rule in config.toml is removed there)",
            );
        }
        (other, _) => return bad(format!("action: '{other}' is neither add nor remove")),
    }
    if let Err(e) = file.save(&dash.privacy_file) {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    if form.get("action") == "add" {
        dash.core
            .manage
            .set_privacy(dash.core.manage.privacy_rules().merged(&file.privacy));
    }
    tracing::info!("never-share rules changed from the dashboard");
    done(&req, &form)
}

async fn forget(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let form = form_of(&req);
    let app = match AppId::new(form.get("app")) {
        Ok(a) => a,
        Err(e) => return bad(format!("app: {e}")),
    };
    if let Err(e) = dash.core.manage.forget_app(&app).await {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    done(&req, &form)
}

/// Forget one app's history (its timeline and its audit; its decisions
/// stay): the core decides what that takes
/// ([`Manage::forget_app_history`]). Only the app the form names, parsed
/// as an id: the store matches it exactly, never as a pattern.
async fn forget_history(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let form = form_of(&req);
    let app = match AppId::new(form.get("app")) {
        Ok(a) => a,
        Err(e) => return bad(format!("app: {e}")),
    };
    if let Err(e) = dash.core.manage.forget_app_history(&app).await {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    done(&req, &form)
}

async fn end_reader(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let form = form_of(&req);
    let Ok(id) = form.get("id").parse::<u64>() else {
        return bad("id: not a reader's id");
    };
    dash.core.manage.end_reader(id);
    done(&req, &form)
}

async fn answer(State(dash): State<Arc<Dash>>, req: Request) -> Response {
    let form = form_of(&req);
    let Ok(id) = form.get("id").parse::<u64>() else {
        return bad("id: not a prompt's id");
    };
    let secs = form.get("duration_s").parse::<i64>().ok();
    let a = match Answer::parse(form.get("answer"), secs) {
        Ok(Some(a)) => a,
        Ok(None) => return bad("answer with once, always, duration or deny"),
        Err(e) => return bad(e),
    };
    dash.core.ask.answer_prompt(id, a);
    done(&req, &form)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_cookies_are_parsed() {
        let f =
            form_pairs(b"app=exe%3A%2Fusr%2Fbin%2Fx&decision=allow&x+y=a+b&flag").expect("utf-8");
        assert_eq!(f["app"], "exe:/usr/bin/x");
        assert_eq!(f["x y"], "a b");
        assert_eq!(f["flag"], "");
        assert!(form_pairs(b"\xff").is_none());
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; contextd_dashboard=abc; contextd_dashboard=def"),
        );
        assert_eq!(cookies(&h, COOKIE).collect::<Vec<_>>(), ["abc", "def"]);
        assert_eq!(cookies(&h, "b").next(), None);
    }

    #[test]
    fn only_loopback() {
        let mut c = DashboardConfig::default();
        assert!(check(&c).is_ok());
        c.listen = "0.0.0.0:0".parse().expect("addr");
        assert!(matches!(check(&c), Err(DashboardError::NotLoopback(_))));
        c.enabled = false;
        assert!(check(&c).is_ok());
    }
}

//! `make bench` for many readers (issue 33 item 3), in a private headless
//! session (scripts/session.sh, sway 1.7 as benches/wayland.rs drives it):
//!
//! - the daemon's memory per reader: its RSS before any reader, after 50
//!   MCP sessions (25 `contextctl mcp` stdio bridges and 25 Streamable
//!   HTTP sessions, each subscribed to `context://windows/active`), and
//!   after 200 D-Bus subscribers more (`Context1.Subscribe`, each on its
//!   own bus connection, each following 8 categories). Per reader is the
//!   RSS delta over the count. Targets: ≤ 64 KB per MCP session, ≤ 16 KB
//!   per D-Bus subscriber.
//! - the fan-out latency of one focus change (`swaymsg focus`): the time
//!   from a bare Wayland client's sight of the change to each reader's
//!   notification (D-Bus `Changed` with `event: focus`, MCP
//!   `notifications/resources/updated`), p99 over every reader and
//!   change, against the same measure with one reader of the same kind
//!   alone (the floor, measured in the same round right after). Target:
//!   ≤ 3× for each kind.
//!
//! Why a bench of its own rather than a section of benches/wayland.rs or
//! benches/mcp.rs: it needs both publishers at once in one daemon, a
//! fresh daemon per round (a round's RSS deltas are then first growth,
//! not memory a previous round freed and the allocator kept), and 250
//! readers that would distort the other benches' single-reader floors.
//!
//! Three rounds; every target prints min/median/max and is decided on
//! the median. Prints figures; asserts nothing.

use crate::common;
use crate::wayland::{SessionGuard, bare_client, script, session_env};

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

const ROUNDS: usize = 3;
const STDIO: usize = 25;
const HTTP: usize = 25;
const SUBSCRIBERS: usize = 200;
/// Focus changes timed per measure (after [`WARMUP`]).
const CHANGES: usize = 60;
const WARMUP: usize = 5;
const DEMO: [&str; 2] = ["org.contextd.Demo1", "org.contextd.Demo2"];
const CATEGORIES: [&str; 8] = [
    "windows",
    "windows.titles",
    "media.playback",
    "media.capture",
    "session",
    "power",
    "network",
    "notifications",
];
const ACTIVE: &str = "context://windows/active";

fn get(env: &[(String, String)], k: &str) -> String {
    env.iter()
        .find(|(ek, _)| ek == k)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {k} in the session's environment"))
}

// ---------------------------------------------------------------- readers

/// The kinds of reader.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    DBus,
    Http,
    Stdio,
}

const KINDS: [Kind; 3] = [Kind::DBus, Kind::Http, Kind::Stdio];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::DBus => "D-Bus subscriber",
            Kind::Http => "MCP Streamable HTTP",
            Kind::Stdio => "MCP stdio bridge",
        }
    }
}

/// What a reader reports: its index, when the notification arrived, and
/// which demo window it names (`None`: an MCP notification, which names
/// only the resource).
type Seen = (usize, Instant, Option<usize>);

fn has(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Which demo window `body` names, if any.
fn demo_in(body: &[u8]) -> Option<usize> {
    DEMO.iter().position(|d| has(body, d.as_bytes()))
}

/// One reader, alive while this lives. Each stamps its notifications on
/// its own task as they arrive, with the least work it can (a byte
/// search), so that the bench's own client adds as little as it can to
/// 250 readers sharing the machine's two cores with the daemon.
enum Reader {
    DBus {
        _conn: zbus::Connection,
        task: tokio::task::JoinHandle<()>,
    },
    Http {
        session: HttpSession,
        task: tokio::task::JoinHandle<()>,
    },
    Stdio {
        _child: tokio::process::Child,
        _stdin: tokio::process::ChildStdin,
        task: tokio::task::JoinHandle<()>,
    },
}

impl Reader {
    async fn close(self) {
        match self {
            Reader::DBus { _conn, task } => {
                task.abort();
                drop(_conn);
            }
            Reader::Http { mut session, task } => {
                task.abort();
                session.delete().await;
            }
            Reader::Stdio {
                mut _child, task, ..
            } => {
                task.abort();
                let _ = _child.kill().await;
            }
        }
    }
}

async fn dbus_reader(address: &str, idx: usize, tx: mpsc::UnboundedSender<Seen>) -> Reader {
    let conn = zbus::connection::Builder::address(address)
        .build()
        .await
        .expect("connect");
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    let path = ctx.subscribe(&CATEGORIES).await.expect("subscribe");
    let sub = Subscription1Proxy::builder(&conn)
        .path(path)
        .build()
        .await
        .expect("sub");
    let mut changed = sub.receive_changed().await.expect("changed");
    let task = tokio::spawn(async move {
        while let Some(sig) = changed.next().await {
            let now = Instant::now();
            let msg = sig.message();
            let body = msg.body();
            let bytes: &[u8] = body.data();
            if has(bytes, b"focus")
                && let Some(d) = demo_in(bytes)
                && tx.send((idx, now, Some(d))).is_err()
            {
                return;
            }
        }
    });
    Reader::DBus { _conn: conn, task }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const SUBSCRIBE: &str = r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"context://windows/active"}}"#;
const UPDATED: &[u8] = b"notifications/resources/updated";

async fn stdio_reader(
    env: &[(String, String)],
    idx: usize,
    tx: mpsc::UnboundedSender<Seen>,
) -> Reader {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_contextctl"))
        .arg("mcp")
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("contextctl mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for (line, answered) in [(INITIALIZE, true), (INITIALIZED, false), (SUBSCRIBE, true)] {
        stdin.write_all(line.as_bytes()).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
        stdin.flush().await.expect("flush");
        if answered {
            let l = lines
                .next_line()
                .await
                .expect("read")
                .expect("contextctl mcp closed");
            assert!(l.contains(r#""result""#), "{l}");
        }
    }
    let task = tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            let now = Instant::now();
            if has(l.as_bytes(), UPDATED) && tx.send((idx, now, None)).is_err() {
                return;
            }
        }
    });
    Reader::Stdio {
        _child: child,
        _stdin: stdin,
        task,
    }
}

/// A Streamable HTTP session (2025-06-18): its POST connection.
struct HttpSession {
    sender: SendRequest<Full<Bytes>>,
    addr: String,
    auth: String,
    sid: Option<String>,
}

impl HttpSession {
    async fn connect(addr: &str, auth: &str) -> HttpSession {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        HttpSession {
            sender,
            addr: addr.to_owned(),
            auth: auth.to_owned(),
            sid: None,
        }
    }

    async fn send(
        &mut self,
        method: http::Method,
        body: &str,
    ) -> Result<(http::response::Parts, Bytes), hyper::Error> {
        let mut b = http::Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", &self.addr)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", &self.auth);
        if let Some(s) = &self.sid {
            b = b
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        let req = b
            .body(Full::new(Bytes::from(body.to_owned())))
            .expect("request");
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await?.to_bytes();
        Ok((parts, bytes))
    }

    async fn post(&mut self, body: &str) {
        let (parts, bytes) = self.send(http::Method::POST, body).await.expect("POST");
        if let Some(s) = parts.headers.get("mcp-session-id") {
            self.sid = s.to_str().ok().map(str::to_owned);
        }
        assert!(parts.status.is_success(), "{} {:?}", parts.status, bytes);
        assert!(!has(&bytes, br#""error""#), "{bytes:?}");
    }

    /// End the session (`DELETE`), so that its feed stops at once.
    /// The POST connection may be closed by then (the server ends idle
    /// keep-alive connections): then on a new one.
    async fn delete(&mut self) {
        if self.send(http::Method::DELETE, "").await.is_ok() {
            return;
        }
        let mut fresh = HttpSession::connect(&self.addr, &self.auth).await;
        fresh.sid = self.sid.take();
        let _ = fresh.send(http::Method::DELETE, "").await;
    }

    /// The session's GET stream, at its body.
    async fn stream(&self) -> tokio::net::TcpStream {
        let mut tcp = tokio::net::TcpStream::connect(&self.addr)
            .await
            .expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let req = format!(
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nMcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-06-18\r\nAccept: text/event-stream\r\n\r\n",
            self.addr,
            self.auth,
            self.sid.as_deref().expect("a session")
        );
        tcp.write_all(req.as_bytes()).await.expect("write");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            tcp.read_exact(&mut byte).await.expect("head");
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&head)
        );
        tcp
    }
}

async fn http_reader(
    addr: &str,
    auth: &str,
    idx: usize,
    tx: mpsc::UnboundedSender<Seen>,
) -> Reader {
    let mut session = HttpSession::connect(addr, auth).await;
    session.post(INITIALIZE).await;
    session.post(INITIALIZED).await;
    let mut stream = session.stream().await;
    session.post(SUBSCRIBE).await;
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        // The end of the previous read, in case a needle straddles two.
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let n = match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let now = Instant::now();
            tail.extend_from_slice(&buf[..n]);
            let mut hits = 0;
            let mut at = 0;
            while let Some(p) = tail[at..].windows(UPDATED.len()).position(|w| w == UPDATED) {
                hits += 1;
                at += p + UPDATED.len();
            }
            for _ in 0..hits {
                if tx.send((idx, now, None)).is_err() {
                    return;
                }
            }
            let keep = tail.len().saturating_sub(UPDATED.len());
            tail.drain(..keep.max(at));
        }
    });
    Reader::Http { session, task }
}

// ---------------------------------------------------------------- the daemon

/// One daemon of a round: its own config and data, the session's bus,
/// Wayland and runtime directory, MCP over HTTP on a free port.
struct Daemon {
    _dir: tempfile::TempDir,
    proc: Proc,
    env: Vec<(String, String)>,
    http: String,
    auth: String,
}

impl Daemon {
    async fn start(session: &[(String, String)]) -> Daemon {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("config/contextd");
        std::fs::create_dir_all(&cfg).expect("mkdir");
        let me = std::fs::read_link("/proc/self/exe").expect("exe");
        let cats: Vec<String> = CATEGORIES.iter().map(|c| format!("{c:?}")).collect();
        let cats = cats.join(", ");
        std::fs::write(
            cfg.join("policy.toml"),
            format!(
                "[[grant]]\napp = \"exe:{}\"\ncategories = [{cats}]\n\n[[grant]]\napp = \"token:bench\"\ncategories = [{cats}]\n",
                me.display()
            ),
        )
        .expect("policy");
        std::fs::write(
            cfg.join("config.toml"),
            "[mcp.http]\nlisten = \"127.0.0.1:0\"\n",
        )
        .expect("config");
        let mut env: Vec<(String, String)> = session.to_vec();
        let d = |p: &str| dir.path().join(p).display().to_string();
        env.extend([
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("XDG_CONFIG_HOME".into(), d("config")),
            ("XDG_DATA_HOME".into(), d("data")),
            ("XDG_STATE_HOME".into(), d("state")),
            ("HOME".into(), d("")),
            ("RUST_LOG".into(), "off".into()),
        ]);
        if let Ok(t) = std::env::var("GLIBC_TUNABLES") {
            env.push(("GLIBC_TUNABLES".into(), t));
        }
        let url_file = PathBuf::from(get(&env, "XDG_RUNTIME_DIR")).join("contextd/mcp-http.url");
        let _ = std::fs::remove_file(&url_file);
        let proc = Proc(
            Command::new(env!("CARGO_BIN_EXE_contextd"))
                .env_clear()
                .envs(env.iter().cloned())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn contextd"),
        );
        let http = mcp_http_addr(&url_file, 20).await;
        let token = create_token("bench", env.clone());
        Daemon {
            _dir: dir,
            proc,
            env,
            http,
            auth: format!("Bearer {token}"),
        }
    }

    fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    async fn reader(&self, kind: Kind, idx: usize, tx: &mpsc::UnboundedSender<Seen>) -> Reader {
        match kind {
            Kind::DBus => {
                dbus_reader(&get(&self.env, "DBUS_SESSION_BUS_ADDRESS"), idx, tx.clone()).await
            }
            Kind::Http => http_reader(&self.http, &self.auth, idx, tx.clone()).await,
            Kind::Stdio => stdio_reader(&self.env, idx, tx.clone()).await,
        }
    }
}

// ---------------------------------------------------------------- measuring

/// Drives focus changes and times them against the bare client.
struct Driver {
    swaysock: String,
    bare: std_mpsc::Receiver<(Instant, String)>,
    next: usize,
}

impl Driver {
    /// Focus the other demo window; which one, and when the bare client
    /// saw it (`None`: it did not within 2 s).
    fn change(&mut self) -> (usize, Option<Instant>) {
        let target = self.next % 2;
        self.next += 1;
        while self.bare.try_recv().is_ok() {}
        let st = Command::new("swaymsg")
            .env("SWAYSOCK", &self.swaysock)
            .arg(format!("[app_id={}] focus", DEMO[target]))
            .stdout(Stdio::null())
            .status()
            .expect("swaymsg");
        assert!(st.success(), "swaymsg failed");
        let at = loop {
            match self.bare.recv_timeout(Duration::from_secs(2)) {
                Ok((t, app)) if app == DEMO[target] => break Some(t),
                Ok(_) => continue,
                Err(_) => break None,
            }
        };
        (target, at)
    }
}

/// `changes` focus changes (after `warmup`) seen by the readers whose
/// kinds are `kinds` (by index); each reader's latency per change, by
/// kind. Changes a reader missed within 2 s are counted.
async fn measure(
    driver: &mut Driver,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    kinds: &[Kind],
    (warmup, changes): (usize, usize),
) -> (HashMap<Kind, Vec<Duration>>, usize) {
    let mut out: HashMap<Kind, Vec<Duration>> = HashMap::new();
    let mut missed = 0;
    for i in 0..(warmup + changes) {
        while rx.try_recv().is_ok() {}
        let (target, bare_at) = driver.change();
        let mut first: Vec<Option<Instant>> = vec![None; kinds.len()];
        let mut left = kinds.len();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while left > 0 {
            let Ok(Some((idx, at, demo))) = tokio::time::timeout_at(deadline, rx.recv()).await
            else {
                break;
            };
            if demo.is_some_and(|d| d != target) || first[idx].is_some() {
                continue;
            }
            first[idx] = Some(at);
            left -= 1;
        }
        // Let what else this change makes (a window's state, a second
        // `updated`) arrive before the next change, so that it is not
        // taken for the next one's.
        tokio::time::sleep(Duration::from_millis(30)).await;
        if i < warmup {
            continue;
        }
        let Some(bare_at) = bare_at else {
            missed += kinds.len();
            continue;
        };
        for (idx, at) in first.into_iter().enumerate() {
            match at {
                Some(at) => out
                    .entry(kinds[idx])
                    .or_default()
                    .push(at.saturating_duration_since(bare_at)),
                None => missed += 1,
            }
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    (out, missed)
}

/// What one round gave.
struct Round {
    rss: [u64; 3],
    per_stdio_kib: f64,
    per_http_kib: f64,
    /// CPU per focus change during the fan-out, µs: the daemon's and the
    /// bus daemon's (from clock ticks, 10 ms each).
    cpu: (f64, f64),
    per_mcp_kib: f64,
    per_sub_kib: f64,
    /// Per kind: p50 and p99 with all 250 readers, p50 and p99 alone.
    fan: HashMap<Kind, (Duration, Duration)>,
    alone: HashMap<Kind, (Duration, Duration)>,
    all_p99: Duration,
    missed: usize,
    created: Duration,
    profile: Vec<String>,
}

async fn round(session: &[(String, String)], driver: &mut Driver, profile: bool) -> Round {
    let d = Daemon::start(session).await;
    let pid = d.pid();
    let (tx, mut rx) = mpsc::unbounded_channel::<Seen>();
    // Until the daemon lists both windows.
    let conn = zbus::connection::Builder::address(get(&d.env, "DBUS_SESSION_BUS_ADDRESS").as_str())
        .build()
        .await
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(c) = Context1Proxy::new(&conn).await
            && c.list_windows().await.is_ok_and(|w| w.len() == 2)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon did not list the windows"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // One reader of each kind first, alone, and gone again: the daemon's
    // first reader of a kind grows what every later one shares (code
    // paths, the HTTP server's buffers, allocator arenas), which is no
    // reader's own cost. They also warm the focus path.
    for kind in KINDS {
        let r = d.reader(kind, 0, &tx).await;
        measure(driver, &mut rx, &[kind], (WARMUP, 0)).await;
        r.close().await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = rss_kib(pid);

    let t = Instant::now();
    let mut readers = Vec::new();
    let mut kinds = Vec::new();
    for _ in 0..STDIO {
        readers.push(d.reader(Kind::Stdio, kinds.len(), &tx).await);
        kinds.push(Kind::Stdio);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_stdio = rss_kib(pid);
    for _ in 0..HTTP {
        readers.push(d.reader(Kind::Http, kinds.len(), &tx).await);
        kinds.push(Kind::Http);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss1 = rss_kib(pid);
    for _ in 0..SUBSCRIBERS {
        readers.push(d.reader(Kind::DBus, kinds.len(), &tx).await);
        kinds.push(Kind::DBus);
    }
    let created = t.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss2 = rss_kib(pid);

    // Fan-out to all of them; the CPU the daemon and the bus daemon spent
    // on it.
    let bus_pid = zbus::fdo::DBusProxy::new(&conn)
        .await
        .expect("proxy")
        .get_connection_unix_process_id(
            zbus::names::BusName::try_from("org.freedesktop.DBus").expect("name"),
        )
        .await
        .unwrap_or(0);
    let cpu0 = (cpu_ticks(pid), cpu_ticks(bus_pid));
    let (fan_all, mut missed) = measure(driver, &mut rx, &kinds, (WARMUP, CHANGES)).await;
    let ticks = |t: u64| t as f64 * 10_000.0 / (WARMUP + CHANGES) as f64;
    let cpu = (
        ticks(cpu_ticks(pid) - cpu0.0),
        ticks(cpu_ticks(bus_pid) - cpu0.1),
    );
    let profile = if profile {
        let (_, p) = profiled(pid, measure(driver, &mut rx, &kinds, (0, 20))).await;
        p
    } else {
        Vec::new()
    };
    for r in readers {
        r.close().await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Then one reader of each kind alone: the floor, in the same round.
    let mut alone = HashMap::new();
    for kind in KINDS {
        let r = d.reader(kind, 0, &tx).await;
        let (m, n) = measure(driver, &mut rx, &[kind], (WARMUP, CHANGES)).await;
        missed += n;
        let v = m.get(&kind).cloned().unwrap_or_default();
        alone.insert(kind, (pct(&v, 0.5), pct(&v, 0.99)));
        r.close().await;
    }
    let mut all: Vec<Duration> = fan_all.values().flatten().copied().collect();
    all.sort();
    let fan = fan_all
        .iter()
        .map(|(k, v)| (*k, (pct(v, 0.5), pct(v, 0.99))))
        .collect();
    Round {
        rss: [rss0, rss1, rss2],
        per_stdio_kib: rss_stdio.saturating_sub(rss0) as f64 / STDIO as f64,
        per_http_kib: rss1.saturating_sub(rss_stdio) as f64 / HTTP as f64,
        cpu,
        per_mcp_kib: rss1.saturating_sub(rss0) as f64 / (STDIO + HTTP) as f64,
        per_sub_kib: rss2.saturating_sub(rss1) as f64 / SUBSCRIBERS as f64,
        fan,
        alone,
        all_p99: pct(&all, 0.99),
        missed,
        created,
        profile,
    }
}

pub(crate) fn main() {
    block_on(2, run());
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sdir = dir.path().join("s");
    let st = Command::new(script())
        .arg("start")
        .arg(&sdir)
        .arg("--no-pipewire")
        .stdout(Stdio::null())
        .status()
        .expect("session.sh");
    assert!(st.success(), "session.sh start failed");
    let _session = SessionGuard(sdir.clone());
    let session = session_env(&sdir);
    let mut driver = Driver {
        swaysock: get(&session, "SWAYSOCK"),
        bare: bare_client(&session),
        next: 0,
    };
    // Let the bare client see the initial windows.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let profile = std::env::var_os("CONTEXTD_BENCH_PROFILE").is_some();
    let mut rounds = Vec::new();
    for i in 0..ROUNDS {
        rounds.push(round(&session, &mut driver, profile && i == 0).await);
    }

    println!(
        "contextd many-readers benchmark (headless sway 1.7; {ROUNDS} rounds, a fresh daemon each; {STDIO} stdio bridges + {HTTP} HTTP sessions subscribed to {ACTIVE}, {SUBSCRIBERS} D-Bus subscribers of 8 categories; {CHANGES} focus changes per measure after {WARMUP} warm-up)"
    );
    for (i, r) in rounds.iter().enumerate() {
        println!(
            "  round {}: daemon RSS {:.1} MB idle, {:.1} MB with {} MCP sessions, {:.1} MB with {} D-Bus subscribers more ({:.1} s to make them); {:.1} KiB per MCP session ({:.1} stdio, {:.1} HTTP), {:.1} KiB per subscriber",
            i + 1,
            r.rss[0] as f64 / 1024.0,
            r.rss[1] as f64 / 1024.0,
            STDIO + HTTP,
            r.rss[2] as f64 / 1024.0,
            SUBSCRIBERS,
            r.created.as_secs_f64(),
            r.per_mcp_kib,
            r.per_stdio_kib,
            r.per_http_kib,
            r.per_sub_kib
        );
        println!(
            "    CPU per focus change with all 250: daemon {:.0} µs, bus daemon {:.0} µs",
            r.cpu.0, r.cpu.1
        );
        for kind in KINDS {
            let (f50, f99) = r.fan.get(&kind).copied().unwrap_or_default();
            let (a50, a99) = r.alone.get(&kind).copied().unwrap_or_default();
            println!(
                "    {:<20} with all 250: p50 {:>8.1} µs  p99 {:>8.1} µs | alone: p50 {:>7.1} µs  p99 {:>7.1} µs | p99 {:.2}x",
                kind.name(),
                us(f50),
                us(f99),
                us(a50),
                us(a99),
                us(f99) / us(a99).max(1.0)
            );
        }
        println!(
            "    every reader, p99 {:.1} µs{}",
            us(r.all_p99),
            if r.missed > 0 {
                format!(" ({} notifications missed)", r.missed)
            } else {
                String::new()
            }
        );
    }
    for r in &rounds {
        if !r.profile.is_empty() {
            println!(
                "  where the daemon's time goes during the fan-out (perf, cpu-clock, self time):"
            );
            for l in &r.profile {
                println!("    {l}");
            }
        }
    }
    println!("  targets (median of {ROUNDS} rounds):");
    let mcp: Vec<f64> = rounds.iter().map(|r| r.per_mcp_kib).collect();
    let (a, m, b) = min_median_max(&mcp);
    println!(
        "    memory per MCP session: min {a:.1} KiB  median {m:.1} KiB  max {b:.1} KiB (target <= 64 KiB: {})",
        verdict(m <= 64.0)
    );
    let sub: Vec<f64> = rounds.iter().map(|r| r.per_sub_kib).collect();
    let (a, m, b) = min_median_max(&sub);
    println!(
        "    memory per D-Bus subscriber (8 categories): min {a:.1} KiB  median {m:.1} KiB  max {b:.1} KiB (target <= 16 KiB: {})",
        verdict(m <= 16.0)
    );
    for kind in KINDS {
        let ratios: Vec<f64> = rounds
            .iter()
            .map(|r| {
                let f = r.fan.get(&kind).map(|x| us(x.1)).unwrap_or(0.0);
                let a = r.alone.get(&kind).map(|x| us(x.1)).unwrap_or(0.0);
                f / a.max(1.0)
            })
            .collect();
        println!(
            "    fan-out p99 to 250 readers vs one reader alone, {:<20}: {} (target <= 3x: {})",
            kind.name(),
            spread(&ratios),
            verdict(median(&ratios) <= 3.0)
        );
    }
}

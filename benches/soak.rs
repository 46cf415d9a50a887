//! `make soak`: the daemon under load, with faults, in a private session
//! (scripts/session.sh --mocks: private buses, headless sway, PipeWire
//! with WirePlumber, python-dbusmock's logind, UPower, NetworkManager,
//! polkitd and GeoClue), loopback only. Issue 16, items 2, 3 (faults while
//! loaded, kill -9 during writes) and 4 (the figures table).
//!
//! 1. Idle: `Peer.Ping` round trips to the broker, for the idle p99.
//! 2. Load, `CONTEXTD_SOAK_SECS` (60) seconds, history on:
//!    - `CONTEXTD_SOAK_MCP` (200) MCP Streamable HTTP clients, each its own
//!      connection, bearer token and 2025-06-18 session, cycling
//!      through every tool, resource and list the server lists, and
//!      ending its session (`DELETE /mcp`) when the load stops;
//!    - `CONTEXTD_SOAK_SUBSCRIBERS` (50) D-Bus subscribers
//!      (`Context1.Subscribe`) counting `Changed`;
//!    - 4 D-Bus callers of `Context1` (audited reads);
//!    - `CONTEXTD_SOAK_FOCUS_RATE` (1000) focus changes/s: sway IPC
//!      `[app_id=…] focus` commands over one socket, between the windows of
//!      examples/wl_toplevels (a real Wayland client);
//!    - `CONTEXTD_SOAK_STREAM_RATE` (50) stream changes/s: `pw-play` of a
//!      1 s tone started at half that rate (each opens and closes a stream);
//!    - one separate D-Bus client (a thread of its own) sending
//!      `Peer.Ping` to the broker, to the bus daemon and to a bare peer
//!      (a connection that only answers, on a thread of its own) every
//!      5 ms;
//!    - every `CONTEXTD_SOAK_FAULT_EVERY` (2) s a fault: sway, PipeWire,
//!      logind, UPower, NetworkManager, GeoClue in turn are killed
//!      (SIGKILL); the broker's `ListSources` must mark the source
//!      unavailable; the service is started again (scripts/session.sh) and
//!      the time until `ListSources` says available is its recovery time.
//!
//!    RSS and CPU of the daemon are sampled every 3 s (and once before
//!    the load).
//!    - `CONTEXTD_SOAK_SLOW_READERS` (4) MCP hosts on the stdio socket
//!      subscribe to the active window and never read: the daemon must
//!      disconnect them (`[limits] reader_stall_s` = 5 here).
//!
//!    Before the load, a warm-up (`CONTEXTD_SOAK_WARMUP_SECS`, 5 s, plus
//!    the time of one round of the faults, each once: set
//!    `CONTEXTD_SOAK_WARMUP_FAULTS=0` to leave them out) of the same
//!    hosts, subscribers, focus changes and streams, then 11 s of quiet:
//!    what answering and reconnecting build once and keep (each thread's
//!    reply buffer, channel blocks, rendered views, statement caches, the
//!    new connections' buffers and match streams) is built before the
//!    heap is measured. The load's faults then come back many times: a
//!    leak per fault shows as the heap not coming back.
//!    `CONTEXTD_SOAK_HOLD=FILE` holds the load after the warm-up until
//!    FILE exists: time for a profiler to attach (`heaptrack -p` takes
//!    seconds to inject itself) and see everything the load allocates;
//!    and it holds again once the heap after the load is printed, until
//!    `FILE.after` exists, so that what the profiler sees live then is
//!    what the load left (not the second load's). It also holds before
//!    the warm-up until `FILE.start` exists: a profiler attached there and
//!    the daemon killed at one of the later holds in one run and at the
//!    other in a second shows what the warm-up left and what the load
//!    added to it (`heaptrack_print --diff`).
//!
//!    After the load: the daemon's heap in use (src/memory.rs logs it)
//!    must come back within 10 % of its value before the load (within
//!    30 s, the focus changes paused meanwhile: they are load too); RSS is
//!    printed without a target (glibc keeps pages that a few live blocks
//!    pin); and every slow reader must have been
//!    disconnected (with at least 30 s of load) by 30 s after it: the
//!    stall counts from when its queue is full, and on a machine the load
//!    saturates the queue fills slowly.
//!
//!    Then a second load, `CONTEXTD_SOAK_AGAIN_SECS` (half the first)
//!    seconds of the same MCP hosts and subscribers without faults; after
//!    the same wait RSS must be within 10 % of what it was after the
//!    first: no growth per cycle.
//! 3. `CONTEXTD_SOAK_KILLS` (100) times: the daemon starts on the same
//!    database, records focus changes (the driver keeps going) and audits
//!    D-Bus reads, and is killed with SIGKILL after 0.3-1.3 s. After each
//!    kill the database is opened as the daemon opens it,
//!    `PRAGMA integrity_check` must be ok, and the history lost is the
//!    time between the kill and the newest focus row stored (focus changes
//!    are sent without pause, so that is the span of history missing).
//! 4. The figures table.
//!
//! Fails (exit status 1) on: any MCP transport error, HTTP error status or
//! JSON-RPC error; a D-Bus call failing other than with a typed
//! `org.contextd.Error`; the daemon exiting; a panic in its log; a source
//! not marked unavailable or not back within 15 s; the heap in use not
//! back within 10 % of its pre-load value 30 s after the load; a kill
//! round without focus changes sent (the loss would not be measured);
//! RSS after the second
//! load over 10 % above the first's; a slow reader not
//! disconnected; RSS over
//! `CONTEXTD_SOAK_MAX_RSS_MB` (200) or still growing (the last sample over
//! 1.5× the one at a third of the load, plus 8 MB); a database that does
//! not open or fails its integrity check; history lost over
//! `CONTEXTD_SOAK_MAX_LOST_MS` (see [`LOST_LIMIT_MS`]). Timing (latencies,
//! the Ping ratio, recovery over 2 s) is printed, marked MISS when over its
//! target, and does not fail the run.

use crate::common;
use crate::pipewire_client;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// The issue's promise: a kill -9 loses no more than the last second of
/// history (the writer's flush interval, `store::history::FLUSH`, is
/// 750 ms, leaving room for the transaction itself).
const LOST_LIMIT_MS: i64 = 1000;
/// What the table says for inputs tried unless `make soak` ran a fuzz
/// slice (CONTEXTD_SOAK_FUZZ_CASES): the last full `make fuzz`, as
/// docs/performance.md, "Reliability: fuzzing", reports it. Update both together.
const LAST_FUZZ: &str = "not run by this soak; the last `make fuzz`: 1 000 006 inputs over 14 targets, 0 failures (docs/performance.md, Reliability: fuzzing)";
const WINDOWS: usize = 8;
/// How [`HttpHost::call`] says the broker told the host to come back
/// (HTTP 429 or 503 with `Retry-After`: its bound on MCP work).
const COME_BACK: &str = "come back:";
/// What a host told to come back waits (the broker's `Retry-After`).
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Longer than any answer should take even on a loaded machine; a request
/// without an answer by then is counted as an error (a hang).
const ANSWER_WITHIN: Duration = Duration::from_secs(30);
const FAULTS: [&str; 6] = [
    "sway",
    "pipewire",
    "logind",
    "upower",
    "networkmanager",
    "geoclue",
];

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The broker's source for a fault.
fn source_of(fault: &str) -> &'static str {
    match fault {
        "sway" => "wayland",
        "pipewire" => "pipewire",
        "logind" => "login1",
        "upower" => "upower",
        "networkmanager" => "networkmanager",
        _ => "geoclue",
    }
}

// ------------------------------------------------------------- the session

fn script() -> PathBuf {
    crate::common::root().join("scripts/session.sh")
}

struct Session {
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Session {
    fn start(dir: &Path) -> Session {
        let out = Command::new(script())
            .arg("start")
            .arg(dir)
            .args(["--mocks", "--no-windows"])
            .stdout(Stdio::null())
            .output()
            .expect("session.sh");
        assert!(
            out.status.success(),
            "session.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(dir.join("env.list"))
            .expect("env.list")
            .lines()
            .filter_map(|l| l.split_once('='))
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Session {
            dir: dir.to_owned(),
            env,
        }
    }

    fn get(&self, k: &str) -> String {
        self.env
            .iter()
            .find(|(ek, _)| ek == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    fn command(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(prog);
        c.env_clear()
            .envs(self.env.iter().cloned())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// `session.sh CMD DIR ARGS…`; its error output when it fails.
    fn ctl(&self, cmd: &str, args: &[&str]) -> Result<(), String> {
        let out = Command::new(script())
            .arg(cmd)
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status();
    }
}

// ------------------------------------------------------------- the daemon

struct Home {
    dir: PathBuf,
    log: PathBuf,
}

impl Home {
    fn new(dir: &Path) -> Home {
        let cfg = dir.join("config/contextd");
        std::fs::create_dir_all(&cfg).expect("mkdir");
        let me = std::fs::read_link("/proc/self/exe").expect("exe");
        // Every MCP host its own token, as on a desktop with many hosts:
        // the broker's bounds are per token (`mcp::admission`, sessions).
        let mut policy = format!(
            "[[grant]]\napp = \"exe:{}\"\ncategories = [\"*\"]\n\n[[grant]]\napp = \"token:soak\"\ncategories = [\"*\"]\n",
            me.display()
        );
        for i in 0..env_num("CONTEXTD_SOAK_MCP", 200) {
            policy.push_str(&format!(
                "\n[[grant]]\napp = \"token:soak{i}\"\ncategories = [\"*\"]\n"
            ));
        }
        std::fs::write(cfg.join("policy.toml"), policy).expect("policy");
        std::fs::write(
            cfg.join("config.toml"),
            "[mcp.http]\nlisten = \"127.0.0.1:0\"\n\n[history]\nenabled = true\n\n[limits]\nreader_stall_s = 5\n",
        )
        .expect("config");
        Home {
            dir: dir.to_owned(),
            log: dir.join("contextd.log"),
        }
    }

    fn envs(&self, s: &Session) -> Vec<(String, String)> {
        let mut env = s.env.clone();
        let p = |x: &str| self.dir.join(x).display().to_string();
        env.extend([
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("XDG_CONFIG_HOME".into(), p("config")),
            ("XDG_DATA_HOME".into(), p("data")),
            ("XDG_STATE_HOME".into(), p("state")),
            ("HOME".into(), self.dir.display().to_string()),
            ("RUST_LOG".into(), "warn,contextd::memory=debug".into()),
        ]);
        env
    }

    fn spawn(&self, s: &Session) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log");
        Command::new(env!("CARGO_BIN_EXE_contextd"))
            .env_clear()
            .envs(self.envs(s))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn contextd")
    }

    fn url_file(&self, s: &Session) -> PathBuf {
        PathBuf::from(s.get("XDG_RUNTIME_DIR")).join("contextd/mcp-http.url")
    }
}

/// The daemon of the load, killed if the soak ends early (a panic).
struct DaemonGuard(Arc<Mutex<Child>>);

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        if let Ok(mut c) = self.0.lock()
            && matches!(c.try_wait(), Ok(None))
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Still running? (A zombie of ours counts as exited.)
fn alive(child: &Arc<Mutex<Child>>) -> bool {
    child
        .lock()
        .map(|mut c| matches!(c.try_wait(), Ok(None)))
        .unwrap_or(false)
}

async fn sources(ctx: &Context1Proxy<'_>) -> Option<BTreeMap<String, bool>> {
    let v = tokio::time::timeout(ANSWER_WITHIN, ctx.list_sources())
        .await
        .ok()?
        .ok()?;
    Some(
        v.iter()
            .map(dict_to_json)
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or("").to_owned(),
                    s["available"] == true,
                )
            })
            .collect(),
    )
}

async fn until_sources(ctx: &Context1Proxy<'_>, want: &[&str], secs: u64) -> Result<(), String> {
    let t = Instant::now();
    loop {
        if let Some(s) = sources(ctx).await
            && want.iter().all(|w| s.get(*w) == Some(&true))
        {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(secs) {
            return Err(format!(
                "sources {want:?} not all available within {secs} s: {:?}",
                sources(ctx).await
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ------------------------------------------------------------- MCP client

/// A host on Streamable HTTP: its own keep-alive connection and session.
struct HttpHost {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    auth: String,
    sid: Option<String>,
    next: u64,
}

#[derive(Debug)]
enum Outcome {
    Ok,
    /// A tool's result with `isError` (e.g. a source restarting): an
    /// answer, not a failure.
    ToolError(String),
    Error(String),
}

impl HttpHost {
    async fn connect(addr: &str, auth: &str) -> Result<HttpHost, String> {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut h = HttpHost {
            sender,
            host: addr.to_owned(),
            auth: auth.to_owned(),
            sid: None,
            next: 1,
        };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "soak", "version": "1"}});
        match h.call("initialize", init).await {
            Ok(_) => {}
            Err(e) => return Err(format!("initialize: {e}")),
        }
        h.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())
            .await?;
        Ok(h)
    }

    async fn post(&mut self, body: String) -> Result<(http::StatusCode, Bytes), String> {
        let mut b = http::Request::post("/mcp")
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", &self.auth);
        if let Some(s) = &self.sid {
            b = b
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        let req = b
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        self.sender
            .ready()
            .await
            .map_err(|e| format!("ready: {e}"))?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| format!("send: {e}"))?;
        let (parts, body) = resp.into_parts();
        if let Some(s) = parts.headers.get("mcp-session-id") {
            self.sid = s.to_str().ok().map(str::to_owned);
        }
        let bytes = body
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((parts.status, bytes))
    }

    /// End the session, as a host that stops does (`DELETE /mcp`, what
    /// the MCP SDKs send on close): the daemon gives its memory back
    /// then, not at the session's idle timeout (5 min).
    async fn close(mut self) {
        let Some(sid) = self.sid.take() else {
            return;
        };
        let Ok(req) = http::Request::delete("/mcp")
            .header("host", &self.host)
            .header("authorization", &self.auth)
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", "2025-06-18")
            .body(Full::new(Bytes::new()))
        else {
            return;
        };
        if self.sender.ready().await.is_ok()
            && let Ok(resp) = self.sender.send_request(req).await
        {
            let _ = resp.into_body().collect().await;
        }
    }

    /// One request; its result, or why not.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next;
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (status, bytes) = self.post(body.to_string()).await?;
        let text = String::from_utf8_lossy(&bytes);
        if status == http::StatusCode::TOO_MANY_REQUESTS
            || status == http::StatusCode::SERVICE_UNAVAILABLE
        {
            // Told to come back (`mcp::admission`): an answer, not an error.
            return Err(format!("{COME_BACK} {status}"));
        }
        if !status.is_success() {
            return Err(format!(
                "HTTP {status}: {}",
                text.chars().take(200).collect::<String>()
            ));
        }
        let found = serde_json::from_str::<Value>(text.trim()).ok().or_else(|| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|v| v["id"] == id)
        });
        let Some(mut v) = found else {
            return Err(format!(
                "no answer to {id}: {}",
                text.chars().take(200).collect::<String>()
            ));
        };
        if let Some(e) = v.get("error") {
            return Err(format!("JSON-RPC error {e}"));
        }
        Ok(v["result"].take())
    }
}

/// Every request a host can make here: each tool (with its required
/// arguments filled in), each resource and template, each list.
#[derive(Clone, Debug)]
struct Op {
    label: String,
    method: &'static str,
    params: Value,
}

fn fill(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    let props = &schema["properties"];
    for r in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = r.as_str() else { continue };
        let p = &props[name];
        let v = if let Some(first) = p["enum"].as_array().and_then(|e| e.first()) {
            first.clone()
        } else if name == "kind" {
            json!("document")
        } else {
            match p["type"].as_str() {
                Some("integer") | Some("number") => json!(1),
                Some("boolean") => json!(true),
                _ => json!("soak"),
            }
        };
        args.insert(name.to_owned(), v);
    }
    Value::Object(args)
}

async fn discover_ops(h: &mut HttpHost) -> Result<Vec<Op>, String> {
    let mut ops = Vec::new();
    let tools = h.call("tools/list", json!({})).await?;
    for t in tools["tools"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or_default().to_owned();
        ops.push(Op {
            label: format!("tools/call {name}"),
            method: "tools/call",
            params: json!({"name": name, "arguments": fill(&t["inputSchema"])}),
        });
    }
    let res = h.call("resources/list", json!({})).await?;
    for r in res["resources"].as_array().into_iter().flatten() {
        let uri = r["uri"].as_str().unwrap_or_default().to_owned();
        // A window's own resource names a window that the load's focus
        // changes and sway's restarts may close: read the active one.
        if uri.starts_with("context://windows/") && uri != "context://windows/active" {
            continue;
        }
        ops.push(Op {
            label: format!("resources/read {uri}"),
            method: "resources/read",
            params: json!({"uri": uri}),
        });
    }
    let tpl = h.call("resources/templates/list", json!({})).await?;
    for t in tpl["resourceTemplates"].as_array().into_iter().flatten() {
        let u = t["uriTemplate"].as_str().unwrap_or_default();
        let uri = if u.starts_with("context://history") {
            "context://history".to_owned()
        } else if u.starts_with("context://provided/") {
            "context://provided/document".to_owned()
        } else if u.starts_with("context://windows/") {
            "context://windows/active".to_owned()
        } else {
            continue;
        };
        ops.push(Op {
            label: format!("resources/read {u}"),
            method: "resources/read",
            params: json!({"uri": uri}),
        });
    }
    for m in [
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "ping",
    ] {
        ops.push(Op {
            label: m.to_owned(),
            method: m,
            params: json!({}),
        });
    }
    Ok(ops)
}

#[derive(Default)]
struct Tally {
    lat: Vec<Duration>,
    /// Latencies by kind of request (MCP hosts only), to name the slow
    /// ones.
    by_op: BTreeMap<String, Vec<Duration>>,
    errors: BTreeMap<String, (u64, String)>,
    tool_errors: BTreeMap<String, (u64, String)>,
    /// Requests answered "come back later" (MCP hosts only).
    come_back: u64,
}

impl Tally {
    fn add(&mut self, kind: &str, label: &str, why: String, tool: bool) {
        let m = if tool {
            &mut self.tool_errors
        } else {
            &mut self.errors
        };
        let e = m
            .entry(format!("{kind}{label}"))
            .or_insert_with(|| (0, why));
        e.0 += 1;
    }

    fn merge(&mut self, o: Tally) {
        self.come_back += o.come_back;
        self.lat.extend(o.lat);
        for (k, v) in o.by_op {
            self.by_op.entry(k).or_default().extend(v);
        }
        for (k, (n, w)) in o.errors {
            self.errors.entry(k).or_insert((0, w)).0 += n;
        }
        for (k, (n, w)) in o.tool_errors {
            self.tool_errors.entry(k).or_insert((0, w)).0 += n;
        }
    }

    fn error_count(&self) -> u64 {
        self.errors.values().map(|(n, _)| n).sum()
    }
}

async fn mcp_client(
    i: usize,
    addr: String,
    auth: String,
    ops: Arc<Vec<Op>>,
    deadline: Instant,
) -> Tally {
    let mut t = Tally::default();
    let mut host = None;
    let mut k = i;
    while Instant::now() < deadline {
        let h = match host.as_mut() {
            Some(h) => h,
            None => match HttpHost::connect(&addr, &auth).await {
                Ok(h) => host.insert(h),
                Err(e) if e.contains(COME_BACK) => {
                    t.come_back += 1;
                    tokio::time::sleep(RETRY_AFTER).await;
                    continue;
                }
                Err(e) => {
                    t.add("", "connect", e, false);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let op = &ops[k % ops.len()];
        k += 1;
        let start = Instant::now();
        let r =
            match tokio::time::timeout(ANSWER_WITHIN, h.call(op.method, op.params.clone())).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "send: no answer within {} s",
                    ANSWER_WITHIN.as_secs()
                )),
            };
        let took = start.elapsed();
        let outcome = match r {
            Ok(v) if v["isError"] == true => Outcome::ToolError(
                v["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(120)
                    .collect(),
            ),
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::Error(e),
        };
        if !matches!(outcome, Outcome::Error(_)) {
            t.by_op.entry(op.label.clone()).or_default().push(took);
        }
        match outcome {
            Outcome::Ok => t.lat.push(took),
            Outcome::ToolError(w) => {
                t.lat.push(took);
                t.add("", &op.label, w, true);
            }
            Outcome::Error(e) if e.starts_with(COME_BACK) => {
                t.come_back += 1;
                tokio::time::sleep(RETRY_AFTER).await;
            }
            Outcome::Error(e) => {
                // A broken connection is made again.
                if e.starts_with("send") || e.starts_with("ready") || e.starts_with("body") {
                    host = None;
                }
                t.add("", &op.label, e, false);
            }
        }
    }
    if let Some(h) = host {
        h.close().await;
    }
    t
}

// ------------------------------------------------------------- D-Bus

async fn dbus_caller(address: String, deadline: Instant) -> Tally {
    let mut t = Tally::default();
    let conn = match zbus::connection::Builder::address(address.as_str())
        .build()
        .await
    {
        Ok(c) => c,
        Err(e) => {
            t.add("", "connect", e.to_string(), false);
            return t;
        }
    };
    let Ok(ctx) = Context1Proxy::new(&conn).await else {
        return t;
    };
    let mut k = 0u64;
    while Instant::now() < deadline {
        let start = Instant::now();
        let (label, r): (&str, zbus::Result<()>) = match k % 5 {
            0 => ("GetSnapshot", within(ctx.get_snapshot()).await),
            1 => ("ListWindows", within(ctx.list_windows()).await),
            2 => ("GetActiveWindow", within(ctx.get_active_window()).await),
            3 => ("GetMedia", within(ctx.get_media()).await),
            _ => ("ListSources", within(ctx.list_sources()).await),
        };
        k += 1;
        let took = start.elapsed();
        match r {
            Ok(()) => t.lat.push(took),
            // A typed answer (e.g. NotFound while sway restarts).
            Err(zbus::Error::MethodError(name, msg, _))
                if name.as_str().starts_with("org.contextd.Error.") =>
            {
                t.lat.push(took);
                t.add(
                    &format!("{} ", name.as_str()),
                    label,
                    msg.unwrap_or_default(),
                    true,
                );
            }
            Err(e) => t.add("", label, e.to_string(), false),
        }
    }
    t
}

async fn subscriber(address: String, deadline: Instant, signals: Arc<AtomicU64>) -> Tally {
    let mut t = Tally::default();
    let conn = match zbus::connection::Builder::address(address.as_str())
        .build()
        .await
    {
        Ok(c) => c,
        Err(e) => {
            t.add("", "connect", e.to_string(), false);
            return t;
        }
    };
    let sub = async {
        let ctx = Context1Proxy::new(&conn).await?;
        let path = ctx
            .subscribe(&["windows", "media.playback", "power", "network", "session"])
            .await?;
        Subscription1Proxy::builder(&conn).path(path).build().await
    };
    let sub = match sub.await {
        Ok(s) => s,
        Err(e) => {
            t.add("", "Subscribe", e.to_string(), false);
            return t;
        }
    };
    let Ok(mut changed) = sub.receive_changed().await else {
        t.add("", "receive_changed", "no stream".into(), false);
        return t;
    };
    let until = tokio::time::Instant::from_std(deadline);
    loop {
        tokio::select! {
            s = changed.next() => match s {
                Some(_) => { signals.fetch_add(1, Ordering::Relaxed); }
                None => { t.add("", "Changed", "the signal stream ended".into(), false); break; }
            },
            _ = tokio::time::sleep_until(until) => break,
        }
    }
    let _ = within(sub.unsubscribe()).await;
    t
}

/// How long a [`pinger`] pings.
enum Pings {
    /// This many pairs (the idle figure).
    Count(usize),
    /// Until the load's end.
    Until(Instant),
}

/// What a [`pinger`] measured: round trips to the broker, to the bus
/// daemon itself and to a bare peer, and the broker's errors.
#[derive(Default)]
struct PingFigures {
    broker: Vec<Duration>,
    bus: Vec<Duration>,
    peer: Vec<Duration>,
    errors: u64,
}

/// The `Peer.Ping` client: rounds of pings (the broker, the bus daemon,
/// then a [`bare_peer`]) `every` apart, on a thread of its own with its
/// own runtime and connection.
///
/// Why a thread: on the soak's shared runtime the pinger waited behind
/// 200 MCP hosts and 50 subscribers of this very process for its turn to
/// send and to hear the answer, so both figures measured the soak's own
/// queue (about four pairs a second, a p99 of a few hundred samples). On
/// its own thread it is woken as soon as the answer arrives, like a
/// settings panel or the shell would be: the figures are the bus's and the
/// broker's, and there are enough of them for a p99.
fn pinger(address: String, pings: Pings, every: Duration) -> std::thread::JoinHandle<PingFigures> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the pinger's runtime");
        let (peer_name, stop_peer, peer) = bare_peer(&address);
        let figures = rt.block_on(async move {
            let conn = zbus::connection::Builder::address(address.as_str())
                .build()
                .await
                .expect("connect");
            let mut f = PingFigures::default();
            let mut n = 0usize;
            loop {
                match &pings {
                    Pings::Count(total) if n >= *total => break,
                    Pings::Until(end) if Instant::now() >= *end => break,
                    _ => {}
                }
                n += 1;
                match ping_once(&conn).await {
                    Ok(d) => f.broker.push(d),
                    Err(_) => f.errors += 1,
                }
                if let Ok(d) = ping_bus(&conn).await {
                    f.bus.push(d);
                }
                if let Ok(d) = ping_peer(&conn, &peer_name, "/").await {
                    f.peer.push(d);
                }
                tokio::time::sleep(every).await;
            }
            f
        });
        let _ = stop_peer.send(());
        let _ = peer.join();
        figures
    })
}

/// A second floor: a peer that does nothing but answer `Peer.Ping` (a
/// zbus connection with its object server started, on a thread and
/// runtime of its own). A ping to any peer crosses the bus daemon twice
/// (the call to the peer, the reply back), where the bus daemon's own
/// `Ping` crosses it once; this floor shows what those two crossings cost
/// under the load with nothing of the broker in it. Returns its unique
/// name, a sender that stops it, and its thread.
fn bare_peer(
    address: &str,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let address = address.to_string();
    let (name_tx, name_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the bare peer's runtime");
        rt.block_on(async move {
            let conn = zbus::connection::Builder::address(address.as_str())
                .build()
                .await
                .expect("connect");
            // Peer is answered by the object server, started on first use.
            let _ = conn.object_server();
            let _ = name_tx.send(
                conn.unique_name()
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
            );
            let _ = stop_rx.await;
        });
    });
    let name = name_rx.recv().unwrap_or_default();
    (name, stop_tx, thread)
}

/// A `Peer.Ping` round trip to the broker.
async fn ping_once(conn: &zbus::Connection) -> zbus::Result<Duration> {
    ping_peer(conn, "org.contextd.Broker1", "/org/contextd/Broker1").await
}

/// The floor: `Peer.Ping` to the bus daemon itself, the same hop without
/// the broker (what the machine's load alone does to a round trip).
async fn ping_bus(conn: &zbus::Connection) -> zbus::Result<Duration> {
    ping_peer(conn, "org.freedesktop.DBus", "/org/freedesktop/DBus").await
}

/// A D-Bus call's answer, or a failure once [`ANSWER_WITHIN`] has passed
/// without one (a hang is a failure, not a wait).
async fn within<T>(f: impl std::future::Future<Output = zbus::Result<T>>) -> zbus::Result<()> {
    match tokio::time::timeout(ANSWER_WITHIN, f).await {
        Ok(r) => r.map(drop),
        Err(_) => Err(zbus::Error::Failure(format!(
            "no answer within {} s",
            ANSWER_WITHIN.as_secs()
        ))),
    }
}

async fn ping_peer(conn: &zbus::Connection, dest: &str, path: &str) -> zbus::Result<Duration> {
    let t = Instant::now();
    within(conn.call_method(
        Some(dest),
        path,
        Some("org.freedesktop.DBus.Peer"),
        "Ping",
        &(),
    ))
    .await?;
    Ok(t.elapsed())
}

// ------------------------------------------------------------- sway focus driver

/// One i3/sway IPC RUN_COMMAND over `sock`; whether sway ran it.
fn sway_command(sock: &mut UnixStream, cmd: &str) -> std::io::Result<bool> {
    let mut msg = Vec::with_capacity(14 + cmd.len());
    msg.extend_from_slice(b"i3-ipc");
    msg.extend_from_slice(&(cmd.len() as u32).to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(cmd.as_bytes());
    sock.write_all(&msg)?;
    let mut head = [0u8; 14];
    sock.read_exact(&mut head)?;
    let len = u32::from_ne_bytes([head[6], head[7], head[8], head[9]]) as usize;
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body)?;
    // `[ { "success": true } ]`, or false with an "error".
    let has = |n: &[u8]| body.windows(n.len()).any(|w| w == n);
    Ok(has(b"true") && !has(b"false"))
}

struct Focus {
    sent: AtomicU64,
    failed: AtomicU64,
    /// When each focus change sway accepted was sent (ms since the epoch),
    /// for the kill -9 phase.
    log: Mutex<Vec<i64>>,
    stop: AtomicBool,
    /// Held while RSS settles after a load: a flood of focus changes is
    /// load too (the state, the history writer, SQLite's cache), and
    /// "RSS after load" is what the daemon holds once the load stops.
    paused: AtomicBool,
}

/// Focus changes at `rate`/s until stopped; reconnects while sway is away.
fn focus_driver(sock_path: PathBuf, rate: u64, focus: Arc<Focus>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut sock: Option<UnixStream> = None;
        let start = Instant::now();
        let mut done = 0u64;
        let mut i = 0usize;
        while !focus.stop.load(Ordering::Relaxed) {
            let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
            if focus.paused.load(Ordering::Relaxed) {
                // Time paused is not made up afterwards.
                done = due;
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            if done >= due {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            let s = match sock.as_mut() {
                Some(s) => s,
                None => match UnixStream::connect(&sock_path) {
                    Ok(s) => {
                        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                        sock.insert(s)
                    }
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(50));
                        // Time without sway is not made up afterwards.
                        done = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                        continue;
                    }
                },
            };
            i += 1;
            let cmd = format!("[app_id=\"org.soak.App{}\"] focus", i % WINDOWS + 1);
            let at = now_ms();
            match sway_command(s, &cmd) {
                Ok(true) => {
                    focus.sent.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut l) = focus.log.lock() {
                        l.push(at);
                    }
                }
                Ok(false) => {
                    focus.failed.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(20));
                    done = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                }
                Err(_) => {
                    sock = None;
                    focus.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            done += 1;
        }
    })
}

/// `WINDOWS` toplevels org.soak.App1…; returns once sway mapped them.
fn open_windows(s: &Session) -> Result<Proc, String> {
    let mut c = s.command(wl_toplevels_bin());
    c.args([&WINDOWS.to_string(), "org.soak.App", "Soak window "])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut p = Proc(c.spawn().map_err(|e| e.to_string())?);
    let out = p.0.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    if line.trim() != "ready" {
        return Err(format!("wl_toplevels said {line:?}"));
    }
    Ok(p)
}

// ------------------------------------------------------------- PipeWire streams

/// pw-play of a 1 s tone, `rate`/2 times a second (each opens and closes
/// a stream), until stopped; returns how many were started.
async fn stream_driver(
    s: Arc<Session>,
    wav: PathBuf,
    rate: u64,
    stop: Arc<AtomicBool>,
    started: Arc<AtomicU64>,
) {
    let every = Duration::from_secs_f64(2.0 / rate.max(1) as f64);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // A player that has not ended after 1.5 s (PipeWire restarting, a
    // graph not running yet) is killed, which closes its stream too: the
    // players never pile up.
    let mut players: Vec<(Instant, Proc)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        players.retain_mut(|(at, p)| {
            matches!(p.0.try_wait(), Ok(None)) && at.elapsed() < Duration::from_millis(1500)
        });
        let mut c = s.command("pw-play");
        c.arg(&wav);
        if let Ok(p) = c.spawn() {
            players.push((Instant::now(), Proc(p)));
            started.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// ------------------------------------------------------------- faults

struct FaultResult {
    fault: &'static str,
    source: &'static str,
    marked_unavailable: bool,
    recovery: Option<Duration>,
    error: Option<String>,
}

async fn fault_once(
    s: &Session,
    ctx: &Context1Proxy<'_>,
    fault: &'static str,
    windows: &Mutex<Option<Proc>>,
) -> FaultResult {
    let source = source_of(fault);
    let mut r = FaultResult {
        fault,
        source,
        marked_unavailable: false,
        recovery: None,
        error: None,
    };
    type Step<'a> = (&'a str, Vec<&'a str>);
    let (kill, start): (Step, Step) = match fault {
        "sway" => (
            ("kill-sway", vec!["KILL"]),
            ("start-sway", vec!["--no-windows"]),
        ),
        "pipewire" => (("kill-pipewire", vec!["KILL"]), ("start-pipewire", vec![])),
        m => (("kill-mock", vec![m, "KILL"]), ("start-mock", vec![m])),
    };
    if let Err(e) = s.ctl(kill.0, &kill.1) {
        r.error = Some(format!("{}: {e}", kill.0));
        return r;
    }
    if fault == "sway"
        && let Ok(mut w) = windows.lock()
    {
        *w = None;
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if sources(ctx).await.and_then(|m| m.get(source).copied()) == Some(false) {
            r.marked_unavailable = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if let Err(e) = s.ctl(start.0, &start.1) {
        r.error = Some(format!("{}: {e}", start.0));
        return r;
    }
    let back = Instant::now();
    let mut recovered = None;
    while back.elapsed() < Duration::from_secs(15) {
        if sources(ctx).await.and_then(|m| m.get(source).copied()) == Some(true) {
            recovered = Some(back.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    r.recovery = recovered;
    if recovered.is_none() {
        r.error = Some(format!(
            "{source} not available within 15 s of {fault} returning"
        ));
    }
    if fault == "sway" {
        match tokio::task::block_in_place(|| open_windows(s)) {
            Ok(p) => {
                if let Ok(mut w) = windows.lock() {
                    *w = Some(p);
                }
            }
            Err(e) => r.error = Some(format!("windows after sway's restart: {e}")),
        }
    }
    r
}

// ------------------------------------------------------------- slow readers

/// How long RSS may take to come back after the load.
const RSS_SETTLE: Duration = Duration::from_secs(30);

/// What the resident memory of `pid` is made of (`smaps_rollup`), in KiB:
/// anonymous (the heap, stacks: what the daemon can give back) and
/// file-backed (the binary and libraries as far as they were paged in).
fn rss_parts(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let rss = field("Rss:");
    let anon = field("Anonymous:");
    (anon, rss.saturating_sub(anon))
}

/// The newest `memory` line of the daemon's log (src/memory.rs logs it
/// every 5 s at debug level, which the soak turns on): how much of the
/// anonymous memory is in use, free in the heaps, and SQLite's.
fn heap_line(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // Plain text: the daemon colours its log only on a terminal.
    let Some(line) = text.lines().rev().find(|l| l.contains("heap_used=")) else {
        return "not logged".into();
    };
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or("?".to_owned(), |b| format!("{:.1} MB", b / 1048576.0))
    };
    format!(
        "in use {} (the broker's own allocations), glibc's in use {} (its per-thread caches counted), free in the heaps {} (resident or not), SQLite {}",
        field("heap_used"),
        field("malloc_in_use"),
        field("heap_free"),
        field("sqlite")
    )
}

/// The daemon's heap in use (src/memory.rs's last line), in bytes.
fn heap_used(log: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line = text.lines().rev().find(|l| l.contains("heap_used="))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("heap_used=")?.parse::<f64>().ok())
}

fn parts_line(pid: u32) -> String {
    let (anon, file) = rss_parts(pid);
    format!(
        "anonymous {:.1} MB, files {:.1} MB",
        anon as f64 / 1024.0,
        file as f64 / 1024.0
    )
}

/// `n` MCP hosts on the stdio socket (this process, granted everything)
/// that subscribe to the active window and then never read: the focus
/// driver fills their queues, and the daemon must cut them off.
fn slow_readers(s: &Session, n: usize) -> Vec<UnixStream> {
    let path = PathBuf::from(s.get("XDG_RUNTIME_DIR")).join("contextd/mcp.sock");
    let mut out = Vec::new();
    for i in 0..n {
        let opened = (|| -> std::io::Result<UnixStream> {
            let mut sock = UnixStream::connect(&path)?;
            sock.set_read_timeout(Some(Duration::from_secs(10)))?;
            let mut r = BufReader::new(sock.try_clone()?);
            let mut line = String::new();
            writeln!(
                sock,
                r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"slow-{i}","version":"1"}}}}}}"#
            )?;
            r.read_line(&mut line)?;
            writeln!(
                sock,
                r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
            )?;
            writeln!(
                sock,
                r#"{{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{{"uri":"context://windows/active"}}}}"#
            )?;
            line.clear();
            r.read_line(&mut line)?;
            Ok(sock)
        })();
        match opened {
            Ok(sock) => out.push(sock),
            Err(e) => println!("  a slow reader could not subscribe: {e}"),
        }
    }
    out
}

// ------------------------------------------------------------- figures

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn lat_line(lat: &mut [Duration]) -> String {
    lat.sort();
    format!(
        "p50 {:>8.2} ms  p99 {:>8.2} ms",
        ms(pct(lat, 0.5)),
        ms(pct(lat, 0.99))
    )
}

pub(crate) fn main() {
    let ok = {
        let ok = Arc::new(AtomicBool::new(false));
        let o = ok.clone();
        block_on(2, async move { o.store(run().await, Ordering::SeqCst) });
        ok.load(Ordering::SeqCst)
    };
    std::process::exit(if ok { 0 } else { 1 });
}

async fn run() -> bool {
    let secs = env_num("CONTEXTD_SOAK_SECS", 60);
    let n_mcp = env_num("CONTEXTD_SOAK_MCP", 200) as usize;
    let n_subs = env_num("CONTEXTD_SOAK_SUBSCRIBERS", 50) as usize;
    let focus_rate = env_num("CONTEXTD_SOAK_FOCUS_RATE", 1000);
    let stream_rate = env_num("CONTEXTD_SOAK_STREAM_RATE", 50);
    let fault_every = env_num("CONTEXTD_SOAK_FAULT_EVERY", 2);
    let kills = env_num("CONTEXTD_SOAK_KILLS", 100);
    let max_rss_mb = env_num("CONTEXTD_SOAK_MAX_RSS_MB", 200);
    let lost_limit = env_num("CONTEXTD_SOAK_MAX_LOST_MS", LOST_LIMIT_MS as u64) as i64;
    let mut failures: Vec<String> = Vec::new();

    let tmp = tempfile::Builder::new()
        .prefix("ctxd-soak")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let session = Arc::new(Session::start(&tmp.path().join("s")));
    let home = Home::new(&tmp.path().join("home"));
    let wav = tmp.path().join("tone.wav");
    pipewire_client::write_tone(&wav, 1);
    let windows = Arc::new(Mutex::new(Some(
        open_windows(&session).expect("wl_toplevels"),
    )));

    let address = session.get("DBUS_SESSION_BUS_ADDRESS");
    let daemon = Arc::new(Mutex::new(home.spawn(&session)));
    let _daemon_guard = DaemonGuard(daemon.clone());
    let pid = daemon.lock().map(|c| c.id()).unwrap_or(0);
    let conn = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("connect");
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    let all: Vec<&str> = FAULTS.iter().map(|f| source_of(f)).collect();
    if let Err(e) = until_sources(&ctx, &all, 30).await {
        println!("soak: the broker did not come up: {e}");
        return false;
    }
    let url = std::fs::read_to_string(home.url_file(&session)).expect("mcp-http.url");
    let addr = url
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let token = create_token("soak", home.envs(&session));
    let auth = format!("Bearer {token}");
    let host_auths: Arc<Vec<String>> = Arc::new(
        (0..n_mcp)
            .map(|i| {
                format!(
                    "Bearer {}",
                    create_token(&format!("soak{i}"), home.envs(&session))
                )
            })
            .collect(),
    );
    let ops = {
        let mut h = HttpHost::connect(&addr, &auth).await.expect("MCP host");
        let ops = discover_ops(&mut h).await.expect("lists");
        h.close().await;
        Arc::new(ops)
    };

    // The Ping client: its own thread, runtime and connection, idle first.
    let PingFigures {
        broker: mut idle,
        bus: mut idle_bus,
        peer: mut idle_peer,
        ..
    } = tokio::task::block_in_place(|| {
        pinger(
            address.clone(),
            Pings::Count(1000),
            Duration::from_millis(2),
        )
        .join()
    })
    .unwrap_or_default();
    idle.sort();
    idle_bus.sort();
    idle_peer.sort();
    let idle_p99 = pct(&idle, 0.99);
    let idle_bus_p99 = pct(&idle_bus, 0.99);

    println!(
        "contextd soak: {secs} s of load with faults, then {kills} kill -9 during writes ({} CPUs, load average {})",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  {n_mcp} MCP HTTP clients over {} requests ({} tools), {n_subs} D-Bus subscribers, 4 D-Bus callers, {focus_rate} focus changes/s (sway IPC, {WINDOWS} wl_toplevels windows), {stream_rate} stream changes/s (pw-play), a fault every {fault_every} s",
        ops.len(),
        ops.iter().filter(|o| o.method == "tools/call").count()
    );
    println!("  idle Peer.Ping: {}", lat_line(&mut idle));

    // ---- a warm-up: the same hosts, subscribers, focus changes and
    // streams for a few seconds, no faults, then a pause. A daemon that
    // has never answered anyone holds none of what answering builds once
    // and keeps by design (each thread's reply buffer, the channels'
    // blocks, the rendered views, statement caches, one match stream per
    // followed service): measured from a cold start, "the heap comes
    // back" would count those as what the load left. The figure the heap
    // must come back to is the one after the warm-up; the cold one is
    // printed beside it.
    let logged = Instant::now() + Duration::from_secs(10);
    while heap_line(&home.log) == "not logged" && Instant::now() < logged {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let heap_cold = heap_used(&home.log);
    // `FILE.start` holds before the warm-up, for a profiler that is to see
    // both what the warm-up and what the load leave (two runs, one killed
    // at each later hold, compared).
    if let Ok(hold) = std::env::var("CONTEXTD_SOAK_HOLD") {
        let start = format!("{hold}.start");
        println!("  holding the warm-up until {start} exists");
        while !Path::new(&start).exists() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let focus = Arc::new(Focus {
        sent: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        log: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        paused: AtomicBool::new(false),
    });
    let focus_thread = focus_driver(session.dir.join("sway-ipc.sock"), focus_rate, focus.clone());
    let warm_secs = env_num("CONTEXTD_SOAK_WARMUP_SECS", 5);
    let warm_faults = env_num("CONTEXTD_SOAK_WARMUP_FAULTS", 1) > 0;
    // With its round of faults, the warm-up's load runs a fault interval
    // longer per fault (the faults come a second apart after each one's
    // recovery, so the round ends within that time on a machine that
    // recovers in under a second; the warm-up waits for the round either
    // way).
    let faults_take = if warm_faults && warm_secs > 0 {
        fault_every * FAULTS.len() as u64
    } else {
        0
    };
    let warm_said = format!(
        "{} s warm-up{}",
        warm_secs + faults_take,
        if faults_take > 0 {
            " with each fault once"
        } else {
            ""
        }
    );
    if warm_secs > 0 {
        let until = Instant::now() + Duration::from_secs(warm_secs + faults_take);
        let stop = Arc::new(AtomicBool::new(false));
        let streams = tokio::spawn(stream_driver(
            session.clone(),
            wav.clone(),
            stream_rate,
            stop.clone(),
            Arc::new(AtomicU64::new(0)),
        ));
        let signals = Arc::new(AtomicU64::new(0));
        let subs: Vec<_> = (0..n_subs)
            .map(|_| tokio::spawn(subscriber(address.clone(), until, signals.clone())))
            .collect();
        let callers: Vec<_> = (0..4)
            .map(|_| tokio::spawn(dbus_caller(address.clone(), until)))
            .collect();
        let hosts: Vec<_> = (0..n_mcp)
            .map(|i| {
                tokio::spawn(mcp_client(
                    i,
                    addr.clone(),
                    host_auths[i].clone(),
                    ops.clone(),
                    until,
                ))
            })
            .collect();
        // Each fault once: what a source builds again when its service
        // comes back (a new connection's buffers, match streams, the
        // windows' records) is in the heap before it is measured, as
        // what answering builds is.
        let mut warm_faults_failed = Vec::new();
        if warm_faults {
            for f in FAULTS {
                let r = fault_once(&session, &ctx, f, &windows).await;
                if let Some(e) = r.error {
                    warm_faults_failed.push(format!("warm-up fault {f}: {e}"));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        let mut warm = Tally::default();
        for t in hosts.into_iter().chain(subs).chain(callers) {
            if let Ok(t) = t.await {
                warm.merge(t);
            }
        }
        stop.store(true, Ordering::Relaxed);
        let _ = streams.await;
        focus.paused.store(true, Ordering::Relaxed);
        // Two of src/memory.rs's lines (every 5 s) after the warm-up: the
        // first tick gives back what idle readers kept, the second logs
        // what is left.
        tokio::time::sleep(Duration::from_secs(11)).await;
        println!(
            "  warm-up: {} s of the same load{} ({} requests, {} errors)",
            warm_secs + faults_take,
            if warm_faults {
                ", each fault once"
            } else {
                " without faults"
            },
            warm.lat.len(),
            warm.error_count()
        );
        failures.extend(warm_faults_failed);
        if warm.error_count() > 0 {
            failures.push(format!(
                "{} request errors in the warm-up",
                warm.error_count()
            ));
        }
    }

    // For a profiler attached now (heaptrack -p, which takes seconds to
    // inject itself): `CONTEXTD_SOAK_HOLD=FILE` holds the load until FILE
    // exists, so that what the load allocates is all seen.
    if let Ok(hold) = std::env::var("CONTEXTD_SOAK_HOLD") {
        println!("  holding the load until {hold} exists");
        while !Path::new(&hold).exists() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // ---- the load
    // What the daemon holds before it: the figure RSS must come back to.
    let rss_before_load = rss_kib(pid);
    let parts_before = parts_line(pid);
    let heap_before = heap_line(&home.log);
    let heap_used_before = heap_used(&home.log);
    let n_slow = env_num("CONTEXTD_SOAK_SLOW_READERS", 4) as usize;
    let slow = tokio::task::block_in_place(|| slow_readers(&session, n_slow));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let load_start = Instant::now();
    focus.paused.store(false, Ordering::Relaxed);
    let streams_stop = Arc::new(AtomicBool::new(false));
    let streams_started = Arc::new(AtomicU64::new(0));
    let streams = tokio::spawn(stream_driver(
        session.clone(),
        wav.clone(),
        stream_rate,
        streams_stop.clone(),
        streams_started.clone(),
    ));
    let signals = Arc::new(AtomicU64::new(0));
    let mut subs = Vec::new();
    for _ in 0..n_subs {
        subs.push(tokio::spawn(subscriber(
            address.clone(),
            deadline,
            signals.clone(),
        )));
    }
    let mut callers = Vec::new();
    for _ in 0..4 {
        callers.push(tokio::spawn(dbus_caller(address.clone(), deadline)));
    }
    let mut hosts = Vec::new();
    for i in 0..n_mcp {
        hosts.push(tokio::spawn(mcp_client(
            i,
            addr.clone(),
            host_auths[i].clone(),
            ops.clone(),
            deadline,
        )));
    }
    let pinger = pinger(
        address.clone(),
        Pings::Until(deadline),
        // Often enough for a p99 of thousands of samples, not hundreds
        // (a p99 of 300 is the third slowest: one stall moves it).
        Duration::from_millis(5),
    );
    // RSS and CPU every 3 s.
    let sampler = {
        let daemon = daemon.clone();
        let focus = focus.clone();
        let signals = signals.clone();
        let streams_started = streams_started.clone();
        tokio::spawn(async move {
            // SAFETY: sysconf has no preconditions.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
            let mut samples: Vec<(f64, u64, f64)> = Vec::new();
            let mut last = (Instant::now(), cpu_ticks(pid));
            let (mut last_focus, mut last_sig, mut last_streams) = (0, 0, 0);
            let mut died = false;
            while Instant::now() < deadline {
                tokio::time::sleep(Duration::from_secs(3)).await;
                if !alive(&daemon) {
                    died = true;
                    break;
                }
                let (now, ticks) = (Instant::now(), cpu_ticks(pid));
                let dt = now.duration_since(last.0).as_secs_f64();
                let cpu = (ticks - last.1) as f64 / hz / dt * 100.0;
                last = (now, ticks);
                let rss = rss_kib(pid);
                let t = load_start.elapsed().as_secs_f64();
                let f = focus.sent.load(Ordering::Relaxed);
                let sg = signals.load(Ordering::Relaxed);
                let st = streams_started.load(Ordering::Relaxed);
                println!(
                    "  t={t:>5.1} s  RSS {:>6.1} MB  CPU {cpu:>5.1} %  focus {:>5.0}/s  pw-play {:>4.1}/s  Changed {:>7.0}/s",
                    rss as f64 / 1024.0,
                    (f - last_focus) as f64 / dt,
                    (st - last_streams) as f64 / dt,
                    (sg - last_sig) as f64 / dt,
                );
                (last_focus, last_sig, last_streams) = (f, sg, st);
                samples.push((t, rss, cpu));
            }
            (samples, died)
        })
    };
    // The faults, in turn, while the load runs.
    let mut faults: Vec<FaultResult> = Vec::new();
    let mut k = 0;
    tokio::time::sleep(Duration::from_secs(fault_every)).await;
    while deadline.saturating_duration_since(Instant::now()) > Duration::from_secs(8) {
        let f = FAULTS[k % FAULTS.len()];
        k += 1;
        let r = fault_once(&session, &ctx, f, &windows).await;
        println!(
            "  fault {:<15} {:<15} unavailable seen: {:<3}  recovery {}{}",
            r.fault,
            format!("({})", r.source),
            if r.marked_unavailable { "yes" } else { "NO" },
            r.recovery
                .map(|d| format!("{:>7.1} ms", ms(d)))
                .unwrap_or_else(|| "   never".into()),
            r.error
                .as_ref()
                .map(|e| format!("  ERROR {e}"))
                .unwrap_or_default()
        );
        faults.push(r);
        if !alive(&daemon) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(fault_every)).await;
    }
    let mut mcp = Tally::default();
    for h in hosts {
        if let Ok(t) = h.await {
            mcp.merge(t);
        }
    }
    let mut dbus = Tally::default();
    for c in callers {
        if let Ok(t) = c.await {
            dbus.merge(t);
        }
    }
    let mut sub_tally = Tally::default();
    for s in subs {
        if let Ok(t) = s.await {
            sub_tally.merge(t);
        }
    }
    let load_secs = load_start.elapsed().as_secs_f64();
    let PingFigures {
        broker: mut ping_lat,
        bus: mut bus_lat,
        peer: mut peer_lat,
        errors: ping_errors,
    } = tokio::task::block_in_place(|| pinger.join()).unwrap_or_default();
    bus_lat.sort();
    peer_lat.sort();
    let bus_p99 = pct(&bus_lat, 0.99);
    let peer_p99 = pct(&peer_lat, 0.99);
    let bus_ratio = ms(bus_p99) / ms(idle_bus_p99).max(1e-6);
    let (samples, died) = sampler.await.unwrap_or_default();
    streams_stop.store(true, Ordering::Relaxed);
    let _ = streams.await;
    let focus_sent_load = focus.sent.load(Ordering::Relaxed);
    let focus_failed_load = focus.failed.load(Ordering::Relaxed);
    let daemon_up = alive(&daemon) && !died;
    let cpu_total = cpu_ticks(pid) as f64
        // SAFETY: sysconf has no preconditions.
        / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;

    // ---- the figures of the load
    let mcp_n = mcp.lat.len();
    let dbus_n = dbus.lat.len();
    println!("\nLoad ({load_secs:.1} s):");
    println!(
        "  MCP HTTP      {:>8.0} req/s  {}  errors {}  isError results {}  told to come back {}",
        mcp_n as f64 / load_secs,
        lat_line(&mut mcp.lat),
        mcp.error_count(),
        mcp.tool_errors.values().map(|(n, _)| n).sum::<u64>(),
        mcp.come_back
    );
    // The slowest kinds of MCP request by p99: where a host would wait.
    let mut slow_ops: Vec<(Duration, Duration, usize, &String)> = mcp
        .by_op
        .iter_mut()
        .map(|(k, v)| {
            v.sort();
            (pct(v, 0.99), pct(v, 0.5), v.len(), k)
        })
        .collect();
    slow_ops.sort_by_key(|b| std::cmp::Reverse(b.0));
    let slow_ops: Vec<String> = slow_ops
        .iter()
        .take(5)
        .map(|(p99, p50, n, k)| format!("{k} p50 {:.0} / p99 {:.0} ms ({n})", ms(*p50), ms(*p99)))
        .collect();
    println!("    slowest by p99: {}", slow_ops.join("; "));
    println!(
        "  D-Bus calls   {:>8.0} req/s  {}  errors {}  typed errors {}",
        dbus_n as f64 / load_secs,
        lat_line(&mut dbus.lat),
        dbus.error_count(),
        dbus.tool_errors.values().map(|(n, _)| n).sum::<u64>()
    );
    let n_ping = ping_lat.len();
    let ping_line = lat_line(&mut ping_lat);
    let ping_p99 = pct(&ping_lat, 0.99);
    let ratio = ms(ping_p99) / ms(idle_p99).max(1e-6);
    // The target (issue 48): under the load, the broker answers `Ping` at
    // most 2× as late (p99) as the bus daemon itself does under the same
    // load. Against its own idle figure the ratio measures the machine's
    // saturation, not the broker, and is printed for reference.
    let floor_ratio = ms(ping_p99) / ms(bus_p99).max(1e-6);
    let floor_met = if floor_ratio <= 2.0 { "met" } else { "MISS" };
    println!(
        "  Peer.Ping     {:>8.0} req/s  {ping_line}  errors {ping_errors}  p99/idle p99 {ratio:.2}×",
        n_ping as f64 / load_secs,
    );
    println!(
        "  the floor, Peer.Ping to the bus daemon: idle p99 {:.2} ms, loaded p50 {:.2} ms, p99 {:.2} ms ({bus_ratio:.2}×): what the machine's load alone does; the broker's loaded p99 is {floor_ratio:.2}× that floor (target ≤ 2×: {floor_met})",
        ms(idle_bus_p99),
        ms(pct(&bus_lat, 0.5)),
        ms(bus_p99),
    );
    println!(
        "  a bare peer's Peer.Ping (two crossings of the bus daemon, nothing else): idle p99 {:.2} ms, loaded p50 {:.2} ms, p99 {:.2} ms ({} answers); the broker's loaded p99 is {:.2}× it (information, no target)",
        ms(pct(&idle_peer, 0.99)),
        ms(pct(&peer_lat, 0.5)),
        ms(peer_p99),
        peer_lat.len(),
        ms(ping_p99) / ms(peer_p99).max(1e-6),
    );
    println!(
        "  Changed       {:>8.0} signals/s over {n_subs} subscribers, errors {}",
        signals.load(Ordering::Relaxed) as f64 / load_secs,
        sub_tally.error_count()
    );
    println!(
        "  focus         {:>8.0} changes/s sway accepted ({focus_failed_load} refused or lost while sway restarted)",
        focus_sent_load as f64 / load_secs
    );
    println!(
        "  streams       {:>8.0} changes/s ({} pw-play, each opened and closed)",
        2.0 * streams_started.load(Ordering::Relaxed) as f64 / load_secs,
        streams_started.load(Ordering::Relaxed)
    );
    let rss_line: Vec<String> = samples
        .iter()
        .map(|(t, r, _)| format!("{t:.0}s:{:.1}", *r as f64 / 1024.0))
        .collect();
    println!("  RSS (MB) over time: {}", rss_line.join(" "));
    let cpu_avg = samples.iter().map(|s| s.2).sum::<f64>() / samples.len().max(1) as f64;
    println!(
        "  daemon CPU: {cpu_avg:.0} % of one core on average during the load ({cpu_total:.1} s in all)"
    );
    for (what, t) in [("MCP", &mcp), ("D-Bus", &dbus), ("subscribers", &sub_tally)] {
        for (k, (n, why)) in &t.errors {
            println!("  ERROR {what} {k}: {n}× e.g. {why}");
        }
        for (k, (n, why)) in &t.tool_errors {
            println!("  answered with an error {what} {k}: {n}× e.g. {why}");
        }
    }
    let mcp_errors = mcp.error_count() + dbus.error_count() + sub_tally.error_count();
    if mcp_errors > 0 {
        failures.push(format!("{mcp_errors} request errors under load"));
    }
    if ping_errors > 0 {
        failures.push(format!("{ping_errors} Peer.Ping errors"));
    }
    if !daemon_up {
        failures.push("the daemon exited during the load".into());
    }
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
    if peak > max_rss_mb * 1024 {
        failures.push(format!(
            "RSS {:.1} MB over {max_rss_mb} MB",
            peak as f64 / 1024.0
        ));
    }
    if samples.len() >= 3 {
        let third = samples[samples.len() / 3].1;
        let last = samples[samples.len() - 1].1;
        if last as f64 > third as f64 * 1.5 + 8192.0 {
            failures.push(format!(
                "RSS still growing: {:.1} MB at a third of the load, {:.1} MB at its end",
                third as f64 / 1024.0,
                last as f64 / 1024.0
            ));
        }
    }
    for f in &faults {
        if !f.marked_unavailable {
            failures.push(format!(
                "{} not marked unavailable after {} was killed",
                f.source, f.fault
            ));
        }
        if let Some(e) = &f.error {
            failures.push(format!("fault {}: {e}", f.fault));
        }
    }

    // ---- after the load: memory comes back, slow readers were cut off
    // A reader is cut off once its queue has stayed full for
    // `reader_stall_s`; on a machine saturated by the load the queue fills
    // slowly (the broker makes its notifications slowly too), so the count
    // waits for it, with a deadline, while focus changes go on. Dropped
    // before that, a reader's socket would close and nothing would be
    // left to cut off.
    let slow_opened = slow.len();
    let cut_by = Instant::now() + RSS_SETTLE;
    let slow_count = || {
        std::fs::read_to_string(&home.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("disconnecting an MCP reader"))
            .count()
    };
    while slow_count() < slow_opened && Instant::now() < cut_by {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(slow);
    focus.paused.store(true, Ordering::Relaxed);
    // What is in use must come back (issue 50 item 7): the heap in use,
    // which src/memory.rs logs every 5 s, within 10 % of what it was
    // before the load. RSS is printed without a target: glibc keeps the
    // pages of its heaps that a few live blocks pin (src/memory.rs gives
    // back what it can), so RSS says what the allocator kept, not what
    // the broker holds.
    let settled = Instant::now();
    let heap_limit = heap_used_before.map(|b| b * 1.1);
    let heap_back = || match (heap_used(&home.log), heap_limit) {
        (Some(now), Some(limit)) => now <= limit,
        _ => false,
    };
    while !heap_back() && settled.elapsed() < RSS_SETTLE {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let heap_met = heap_back();
    let heap_after = heap_used(&home.log);
    let heap_secs = settled.elapsed().as_secs_f64();
    // RSS after the whole wait, however soon the heap came back: the
    // second load's RSS is taken after the same wait, and a load's
    // clients take seconds to leave (a short wait measured the second
    // load's RSS while its hosts were still going).
    while settled.elapsed() < RSS_SETTLE {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let rss_after = rss_kib(pid);
    let settle_secs = settled.elapsed().as_secs_f64();
    let slow_cut = slow_count();
    let mb = |b: Option<f64>| {
        b.map_or("not logged".to_owned(), |b| {
            format!("{:.2} MB", b / 1048576.0)
        })
    };
    println!(
        "  heap in use after load: {} {heap_secs:.0} s after it stopped (before it, after the warm-up: {}; within 10 %: {}; at start, before any client: {})",
        mb(heap_after),
        mb(heap_used_before),
        if heap_met { "yes" } else { "NO" },
        mb(heap_cold)
    );
    println!(
        "    the daemon's heap (src/memory.rs) before the load: {heap_before}; now: {}",
        heap_line(&home.log)
    );
    if let Ok(hold) = std::env::var("CONTEXTD_SOAK_HOLD") {
        let after = format!("{hold}.after");
        println!("  holding after the load until {after} exists");
        while !Path::new(&after).exists() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    println!(
        "  RSS after load: {:.1} MB (before it: {:.1} MB; no target: the allocator keeps pages)",
        rss_after as f64 / 1024.0,
        rss_before_load as f64 / 1024.0,
    );
    println!(
        "    before the load: {parts_before}; after it: {}",
        parts_line(pid)
    );
    println!(
        "  slow readers disconnected: {slow_cut} of {slow_opened} (subscribed, never read; reader_stall_s = 5)"
    );
    if !heap_met {
        failures.push(format!(
            "the heap in use did not come back after the load: {} {heap_secs:.0} s after it, {} before it",
            mb(heap_after),
            mb(heap_used_before)
        ));
    }
    if secs >= 30 && slow_cut < slow_opened {
        failures.push(format!(
            "{} of {slow_opened} slow readers were not disconnected",
            slow_opened - slow_cut
        ));
    }

    // ---- a second load: the same hosts and subscribers again, without
    // faults. What the daemon holds after it, after the same wait, must
    // not have grown from what it held after the first: memory a load
    // leaves behind is the allocator's high-water mark (src/memory.rs),
    // paid once, not a leak paid every time (issue 32 item 7, "no growth
    // per cycle").
    let again_secs = env_num("CONTEXTD_SOAK_AGAIN_SECS", secs.div_ceil(2));
    let mut rss_again = None;
    if again_secs > 0 && alive(&daemon) {
        focus.paused.store(false, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(again_secs);
        let signals = Arc::new(AtomicU64::new(0));
        let subs: Vec<_> = (0..n_subs)
            .map(|_| tokio::spawn(subscriber(address.clone(), deadline, signals.clone())))
            .collect();
        let hosts: Vec<_> = (0..n_mcp)
            .map(|i| {
                tokio::spawn(mcp_client(
                    i,
                    addr.clone(),
                    host_auths[i].clone(),
                    ops.clone(),
                    deadline,
                ))
            })
            .collect();
        let mut again = Tally::default();
        for t in hosts.into_iter().chain(subs) {
            if let Ok(t) = t.await {
                again.merge(t);
            }
        }
        focus.paused.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs_f64(settle_secs)).await;
        let rss = rss_kib(pid);
        let growth = 100.0 * (rss as f64 / rss_after.max(1) as f64 - 1.0);
        println!(
            "  RSS after a second load ({again_secs} s, {n_mcp} MCP hosts and {n_subs} subscribers, no faults): {:.1} MB after the same {settle_secs:.0} s (after the first: {:.1} MB; growth per cycle {growth:+.1} %, limit +10 %: {})",
            rss as f64 / 1024.0,
            rss_after as f64 / 1024.0,
            if growth <= 10.0 { "met" } else { "MISS" }
        );
        println!(
            "    heap in use after it: {} (after the first: {})",
            mb(heap_used(&home.log)),
            mb(heap_after)
        );
        println!("    after it: {}", parts_line(pid));
        if again.error_count() > 0 {
            failures.push(format!(
                "{} request errors in the second load",
                again.error_count()
            ));
        }
        if growth > 10.0 {
            failures.push(format!(
                "RSS grew from one load to the next: {:.1} MB after the first, {:.1} MB after the second",
                rss_after as f64 / 1024.0,
                rss as f64 / 1024.0
            ));
        }
        rss_again = Some((rss, growth));
    }

    // ---- kill -9 during writes
    focus.paused.store(false, Ordering::Relaxed);
    drop(conn);
    if let Ok(mut d) = daemon.lock() {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
        let _ = d.wait();
    }
    println!("\nkill -9 during writes ({kills} rounds):");
    let key_file = home.dir.join("state/contextd/db.key");
    let db_path = home.dir.join("data/contextd/contextd.db");
    let mut lost_max = 0i64;
    let mut lost_sum = 0i64;
    let mut opened = 0u64;
    let mut integrity_ok = 0u64;
    let mut over = 0u64;
    let mut audit_rows = 0i64;
    // Rounds in which focus changes were sent: without them a round
    // measures no loss.
    let mut rounds_written = 0u64;
    let mut history_rows = 0i64;
    let conn = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("connect");
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    let kill_start = Instant::now();
    // What sway did with the focus changes in this phase: if no round saw
    // one, this says whether they were refused (no such window) or never
    // sent (the driver waiting for sway).
    let (sent_before, failed_before) = (
        focus.sent.load(Ordering::Relaxed),
        focus.failed.load(Ordering::Relaxed),
    );
    for round in 0..kills {
        let d = Arc::new(Mutex::new(home.spawn(&session)));
        let _guard = DaemonGuard(d.clone());
        if let Err(e) = until_sources(&ctx, &["wayland"], 20).await {
            failures.push(format!("kill round {round}: {e}"));
            break;
        }
        let round_start = now_ms();
        // Audited reads from two clients while the focus changes go on.
        let stop = Arc::new(AtomicBool::new(false));
        let mut burst = Vec::new();
        for _ in 0..2 {
            let (a, stop) = (address.clone(), stop.clone());
            burst.push(tokio::spawn(async move {
                let Ok(c) = zbus::connection::Builder::address(a.as_str()).build().await else {
                    return;
                };
                let Ok(p) = Context1Proxy::new(&c).await else {
                    return;
                };
                while !stop.load(Ordering::Relaxed) && p.get_active_window().await.is_ok() {}
            }));
        }
        // 0.3 to 1.3 s, spread over the rounds (the writer flushes each second).
        let wait = 300 + (round * 397) % 1000;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let killed_at = now_ms();
        if let Ok(mut d) = d.lock() {
            let _ = d.kill(); // SIGKILL
            let _ = d.wait();
        }
        stop.store(true, Ordering::Relaxed);
        for b in burst {
            let _ = b.await;
        }
        let sent_in_round = focus
            .log
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|t| **t >= round_start && **t <= killed_at)
                    .count()
            })
            .unwrap_or(0);
        let key = match std::fs::read(&key_file)
            .ok()
            .and_then(|b| contextd::internals::store::DbKey::parse(&b))
        {
            Some(k) => k,
            None => {
                failures.push(format!("kill round {round}: no key file"));
                break;
            }
        };
        let opened_db = contextd::internals::store::Db::open(
            &db_path,
            &key,
            &contextd::internals::store::KeySource::KeyFile(key_file.clone()),
        )
        .await;
        let (db, _tasks) = match opened_db {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!(
                    "kill round {round}: the database does not open: {e}"
                ));
                break;
            }
        };
        opened += 1;
        match db.integrity_check().await {
            Ok(()) => integrity_ok += 1,
            Err(e) => failures.push(format!("kill round {round}: {e}")),
        }
        let newest: Option<i64> = sqlx::query_scalar(
            "SELECT max(start_ms) FROM history WHERE kind = 'focus' AND start_ms >= ?",
        )
        .bind(round_start)
        .fetch_one(db.pool())
        .await
        .unwrap_or(None);
        // What was sent and is not stored: from the newest row stored
        // (or the round's start) to the kill.
        if std::env::var_os("CONTEXTD_SOAK_VERBOSE").is_some() {
            println!(
                "  round {round}: {wait} ms, {sent_in_round} focus changes sent, newest stored {:?} ms before the kill",
                newest.map(|n| killed_at - n)
            );
        }
        if sent_in_round > 0 {
            rounds_written += 1;
        }
        let lost = if sent_in_round == 0 {
            0
        } else {
            killed_at - newest.unwrap_or(round_start).max(round_start)
        };
        lost_max = lost_max.max(lost);
        lost_sum += lost;
        if lost > lost_limit {
            over += 1;
        }
        if round + 1 == kills {
            history_rows = sqlx::query_scalar("SELECT count(*) FROM history")
                .fetch_one(db.pool())
                .await
                .unwrap_or(0);
            audit_rows = sqlx::query_scalar("SELECT coalesce(sum(count), 0) FROM audit")
                .fetch_one(db.pool())
                .await
                .unwrap_or(0);
        }
        db.pool().close().await;
        if (round + 1) % 20 == 0 {
            println!(
                "  {} rounds: opened {opened}, integrity ok {integrity_ok}, history lost at most {lost_max} ms",
                round + 1
            );
        }
    }
    focus.stop.store(true, Ordering::Relaxed);
    let _ = focus_thread.join();
    let kill_secs = kill_start.elapsed().as_secs_f64();
    let focus_in_kills = format!(
        "{} focus changes accepted by sway and {} refused or lost during the kill phase",
        focus.sent.load(Ordering::Relaxed) - sent_before,
        focus.failed.load(Ordering::Relaxed) - failed_before
    );
    println!("  {focus_in_kills}");
    if rounds_written < kills {
        failures.push(format!(
            "focus changes were sent in only {rounds_written} of {kills} kill rounds ({focus_in_kills}): the loss is not measured"
        ));
    }
    if over > 0 {
        failures.push(format!(
            "{over} kills lost more than {lost_limit} ms of history (at most {lost_max} ms)"
        ));
    }
    println!(
        "  {kills} rounds in {kill_secs:.0} s: opened {opened}, integrity ok {integrity_ok}; history lost per kill: mean {:.0} ms, max {lost_max} ms; stored at the end: {history_rows} history rows, {audit_rows} audited calls",
        lost_sum as f64 / kills.max(1) as f64
    );

    // ---- panics
    let log = std::fs::read_to_string(&home.log).unwrap_or_default();
    let panics = log.matches("panicked").count();
    if panics > 0 {
        failures.push(format!("{panics} panics in the daemon's log"));
        for l in log.lines().filter(|l| l.contains("panicked")).take(5) {
            println!("  PANIC {l}");
        }
    }
    // Faults summed up per kind.
    let mut per: BTreeMap<&str, (u32, u32, Vec<Duration>)> = BTreeMap::new();
    for f in &faults {
        let e = per.entry(f.fault).or_default();
        e.0 += 1;
        if f.marked_unavailable && f.error.is_none() {
            e.1 += 1;
        }
        if let Some(d) = f.recovery {
            e.2.push(d);
        }
    }

    // ---- the table
    let mut t = String::new();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let _ = writeln!(
        t,
        "\n| figure | value |\n| --- | --- |\n| run | {date}, {} CPUs, load {secs} s, {kills} kills |",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        t,
        "| load held: MCP HTTP ({n_mcp} clients, {} kinds of request) | {:.0} req/s, p50 {:.1} ms, p99 {:.1} ms, {} errors ({} tool results with isError), {} told to come back (429/503, `Retry-After`) |",
        ops.len(),
        mcp_n as f64 / load_secs,
        ms(pct(&mcp.lat, 0.5)),
        ms(pct(&mcp.lat, 0.99)),
        mcp.error_count(),
        mcp.tool_errors.values().map(|(n, _)| n).sum::<u64>(),
        mcp.come_back
    );
    let _ = writeln!(
        t,
        "| load held: D-Bus calls (4 clients) | {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, {} errors ({} typed org.contextd.Error answers) |",
        dbus_n as f64 / load_secs,
        ms(pct(&dbus.lat, 0.5)),
        ms(pct(&dbus.lat, 0.99)),
        dbus.error_count(),
        dbus.tool_errors.values().map(|(n, _)| n).sum::<u64>()
    );
    let _ = writeln!(
        t,
        "| load held: D-Bus subscribers ({n_subs}) | {:.0} Changed/s received, {} errors |",
        signals.load(Ordering::Relaxed) as f64 / load_secs,
        sub_tally.error_count()
    );
    let _ = writeln!(
        t,
        "| load held: sources | {:.0} focus changes/s (sway), {:.0} stream changes/s (PipeWire) |",
        focus_sent_load as f64 / load_secs,
        2.0 * streams_started.load(Ordering::Relaxed) as f64 / load_secs
    );
    let _ = writeln!(
        t,
        "| bus not stalled: Peer.Ping p99 | the broker's loaded p99 is {floor_ratio:.2}× the bus daemon's own under the same load (target ≤ 2×: {floor_met}): {:.2} ms against {:.2} ms; idle {:.2} and {:.2} ms ({ratio:.2}× and {bus_ratio:.2}× idle: the machine's saturation) |",
        ms(ping_p99),
        ms(bus_p99),
        ms(idle_p99),
        ms(idle_bus_p99),
    );
    let _ = writeln!(
        t,
        "| memory, CPU | RSS {:.1} → {:.1} MB (peak {:.1}), CPU {cpu_avg:.0} % of a core |",
        samples.first().map_or(0.0, |s| s.1 as f64 / 1024.0),
        samples.last().map_or(0.0, |s| s.1 as f64 / 1024.0),
        peak as f64 / 1024.0
    );
    let _ = writeln!(
        t,
        "| heap in use after load | {} {heap_secs:.0} s after the load stopped, {} before it, after a {warm_said} (target within 10 %: {}; {} at start, before any client); RSS {:.1} MB, {:.1} MB before it (no target: the allocator keeps pages) |",
        mb(heap_after),
        mb(heap_used_before),
        if heap_met { "met" } else { "MISS" },
        mb(heap_cold),
        rss_after as f64 / 1024.0,
        rss_before_load as f64 / 1024.0,
    );
    if let Some((rss, growth)) = rss_again {
        let _ = writeln!(
            t,
            "| RSS after a second load (growth per cycle) | {:.1} MB after the same wait, {:.1} MB after the first load: {growth:+.1} % (limit +10 %: {}) |",
            rss as f64 / 1024.0,
            rss_after as f64 / 1024.0,
            if growth <= 10.0 { "met" } else { "MISS" }
        );
    }
    let _ = writeln!(
        t,
        "| slow readers disconnected | {slow_cut} of {slow_opened} MCP hosts that subscribed and never read (queue full for `reader_stall_s` = 5 s) |"
    );
    for (f, (n, good, mut rec)) in per {
        rec.sort();
        let _ = writeln!(
            t,
            "| fault survived: {f} killed ({}) | {good}/{n} marked unavailable and back; recovery p50 {:.0} ms, max {:.0} ms (target 2 s: {}) |",
            source_of(f),
            ms(pct(&rec, 0.5)),
            ms(rec.last().copied().unwrap_or_default()),
            if rec.last().is_some_and(|d| *d <= Duration::from_secs(2)) {
                "met"
            } else {
                "MISS"
            }
        );
    }
    let _ = writeln!(
        t,
        "| fault survived: kill -9 during writes | {opened}/{kills} opened, {integrity_ok}/{kills} integrity_check ok |",
    );
    let _ = writeln!(
        t,
        "| data lost per kill -9 (history: the kill's time minus the newest focus row stored, focus changed every ms) | mean {:.0} ms, max {lost_max} ms over {rounds_written} rounds with writes (limit {lost_limit} ms: {}) |",
        lost_sum as f64 / kills.max(1) as f64,
        if over == 0 && rounds_written == kills {
            "met"
        } else {
            "FAIL"
        }
    );
    let fuzz = std::env::var("CONTEXTD_SOAK_FUZZ_FIGURE")
        .ok()
        .filter(|f| !f.trim().is_empty())
        .unwrap_or_else(|| LAST_FUZZ.into());
    let _ = writeln!(t, "| inputs tried (fuzz) | {fuzz} |");
    let _ = writeln!(
        t,
        "| panics | {panics} (\"panicked\" in the daemon's stderr over {} starts) |",
        kills + 1
    );
    let _ = writeln!(
        t,
        "| daemon exited on its own | {} |",
        if daemon_up { "no" } else { "YES" }
    );
    println!("{t}");
    if failures.is_empty() {
        println!("soak: passed");
    } else {
        for f in &failures {
            println!("soak: FAILED: {f}");
        }
        println!("(the daemon's log: {}; kept)", home.log.display());
        // Keep the directory for a look.
        let _ = tmp.keep();
    }
    drop(windows);
    failures.is_empty()
}

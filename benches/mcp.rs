//! `make bench` for MCP: in one run, over stdio (`contextctl mcp`, the way
//! hosts connect) and over Streamable HTTP, the latency of a consent-checked
//! `tools/call get_active_window` against `ping` (the floor: a round trip
//! through the same transport and rmcp, no consent, no rendering), and the
//! requests per second with 50 concurrent HTTP clients, against the anchor:
//! the same trivial tool served by the official TypeScript SDK
//! (`@modelcontextprotocol/sdk`, benches/mcp_ts_anchor.cjs) on this machine
//! in this run.
//!
//! Targets (from the issue): tool p50/p99 ≤ 1.5× ping; contextd ≥ 5× the
//! TypeScript SDK's requests/s. Prints figures and ratios; asserts nothing.

#[path = "common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const CALLS: usize = 2000;
const WARMUP: usize = 200;
const CLIENTS: usize = 50;
const THROUGHPUT_FOR: Duration = Duration::from_secs(5);

const TOOL: &str = r#""method":"tools/call","params":{"name":"get_active_window","arguments":{}}"#;
const PING: &str = r#""method":"ping""#;

fn msg(id: u64, body: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#)
}

/// A host on stdio: `contextctl mcp` as our child.
struct StdioHost {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next: u64,
}

impl StdioHost {
    async fn start(env: &[(String, String)]) -> StdioHost {
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
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut s = StdioHost {
            _child: child,
            stdin,
            lines,
            next: 1,
        };
        s.call(r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#).await;
        s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        s
    }

    async fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        self.stdin.write_all(b"\n").await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    async fn call(&mut self, body: &str) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&msg(id, body)).await;
        loop {
            let l = self
                .lines
                .next_line()
                .await
                .expect("read")
                .expect("contextctl closed");
            let v: Value = serde_json::from_str(&l).expect("json");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{v}");
                return v;
            }
        }
    }
}

/// A host on Streamable HTTP: one keep-alive connection, one session.
struct HttpHost {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    auth: Option<String>,
    sid: Option<String>,
    next: u64,
}

impl HttpHost {
    async fn connect(addr: &str, auth: Option<String>) -> HttpHost {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut h = HttpHost {
            sender,
            host: addr.to_owned(),
            auth,
            sid: None,
            next: 1,
        };
        h.call(r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#).await;
        h.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())
            .await;
        h
    }

    async fn post(&mut self, body: String) -> (http::response::Parts, Bytes) {
        let mut b = http::Request::post("/mcp")
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(a) = &self.auth {
            b = b.header("authorization", a);
        }
        if let Some(s) = &self.sid {
            b = b
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        let req = b.body(Full::new(Bytes::from(body))).expect("request");
        self.sender.ready().await.expect("ready");
        let resp = self.sender.send_request(req).await.expect("send");
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.expect("body").to_bytes();
        (parts, bytes)
    }

    async fn call(&mut self, body: &str) -> Value {
        let id = self.next;
        self.next += 1;
        let (parts, bytes) = self.post(msg(id, body)).await;
        if let Some(s) = parts.headers.get("mcp-session-id") {
            self.sid = s.to_str().ok().map(str::to_owned);
        }
        assert!(parts.status.is_success(), "{} {:?}", parts.status, bytes);
        let text = String::from_utf8_lossy(&bytes);
        let found = serde_json::from_str::<Value>(text.trim()).ok().or_else(|| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|v| v["id"] == id)
        });
        let v = found.unwrap_or_else(|| panic!("no answer to {id} in {text}"));
        assert!(v.get("error").is_none(), "{v}");
        v
    }
}

/// A host that sends one request and waits for its answer.
trait Host {
    async fn request(&mut self, body: &str);
}

impl Host for StdioHost {
    async fn request(&mut self, body: &str) {
        self.call(body).await;
    }
}

impl Host for HttpHost {
    async fn request(&mut self, body: &str) {
        self.call(body).await;
    }
}

/// Interleaved blocks of tool calls and pings, so that drift hits both.
async fn latencies(host: &mut impl Host) -> (Vec<Duration>, Vec<Duration>) {
    for _ in 0..WARMUP {
        host.request(PING).await;
        host.request(TOOL).await;
    }
    let (mut tool, mut ping) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    for _ in 0..(CALLS / 100) {
        for _ in 0..100 {
            let t = Instant::now();
            host.request(PING).await;
            ping.push(t.elapsed());
        }
        for _ in 0..100 {
            let t = Instant::now();
            host.request(TOOL).await;
            tool.push(t.elapsed());
        }
    }
    tool.sort();
    ping.sort();
    (tool, ping)
}

fn line(what: &str, tool: &[Duration], ping: &[Duration]) -> (f64, f64) {
    let (t50, t99, p50, p99) = (
        pct(tool, 0.5),
        pct(tool, 0.99),
        pct(ping, 0.5),
        pct(ping, 0.99),
    );
    let (r50, r99) = (us(t50) / us(p50), us(t99) / us(p99));
    println!(
        "  {what:<22} tools/call p50 {:>8.1} µs  p99 {:>8.1} µs | ping p50 {:>8.1} µs  p99 {:>8.1} µs | ratio p50 {r50:.2}×  p99 {r99:.2}×",
        us(t50),
        us(t99),
        us(p50),
        us(p99)
    );
    (r50, r99)
}

/// Requests per second of `body` (the tool call or ping) with [`CLIENTS`]
/// clients, each on its own connection and session.
async fn throughput(addr: &str, auth: Option<String>, body: &'static str) -> f64 {
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(HttpHost::connect(addr, auth.clone()).await);
    }
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + THROUGHPUT_FOR;
    let mut tasks = Vec::new();
    for mut c in clients {
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                c.call(body).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

fn node() -> PathBuf {
    std::env::var_os("CONTEXTD_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/node22/bin/node"))
}

async fn run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("tempdir");
    let (_bus, address) = start_bus(dir.path());
    for d in ["config/contextd", "data", "state", "run"] {
        std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
    }
    let me = std::fs::read_link("/proc/self/exe").expect("exe");
    std::fs::write(
        dir.path().join("config/contextd/policy.toml"),
        format!(
            "[[grant]]\napp = \"exe:{}\"\ncategories = [\"windows\", \"windows.titles\"]\n\n[[grant]]\napp = \"token:bench\"\ncategories = [\"windows\", \"windows.titles\"]\n",
            me.display()
        ),
    )
    .expect("policy");
    let replay = dir.path().join("replay.jsonl");
    std::fs::write(
        &replay,
        r#"{"type":"window","window":{"id":"w1","app_id":"org.gnome.TextEditor","title":"notes.txt","states":{"activated":true}}}"#,
    )
    .expect("replay");
    let env: Vec<(String, String)> = vec![
        ("DBUS_SESSION_BUS_ADDRESS".into(), address.clone()),
        ("HOME".into(), dir.path().display().to_string()),
        (
            "XDG_CONFIG_HOME".into(),
            dir.path().join("config").display().to_string(),
        ),
        (
            "XDG_DATA_HOME".into(),
            dir.path().join("data").display().to_string(),
        ),
        (
            "XDG_STATE_HOME".into(),
            dir.path().join("state").display().to_string(),
        ),
        (
            "XDG_RUNTIME_DIR".into(),
            dir.path().join("run").display().to_string(),
        ),
        ("RUST_LOG".into(), "off".into()),
    ];
    let _daemon = Proc(
        Command::new(env!("CARGO_BIN_EXE_contextd"))
            .arg("--replay")
            .arg(&replay)
            .args(["--http", "127.0.0.1:0"])
            .env_clear()
            .envs(env.iter().cloned())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn contextd"),
    );
    let url_file = dir.path().join("run/contextd/mcp-http.url");
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = loop {
        if let Ok(u) = std::fs::read_to_string(&url_file) {
            break u.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "contextd did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_contextctl"))
        .args(["token", "create", "bench"])
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .expect("contextctl token create");
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        token.starts_with("ctxd_"),
        "no token: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let auth = Some(format!("Bearer {token}"));

    // The anchor.
    let mut anchor = tokio::process::Command::new(node())
        .arg(root.join("benches/mcp_ts_anchor.cjs"))
        .arg(root.join(".tools/ts-sdk"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node (scripts/deps.sh --node installs Node 22 and the TypeScript SDK)");
    let mut port = String::new();
    BufReader::new(anchor.stdout.take().expect("stdout"))
        .read_line(&mut port)
        .await
        .expect("anchor port");
    let ts_addr = format!("127.0.0.1:{}", port.trim());

    println!(
        "contextd MCP benchmark ({CALLS} calls each, interleaved in blocks of 100, after {WARMUP} warm-up;\n{CLIENTS} concurrent HTTP clients for {} s each; consent-checked get_active_window vs ping)\n",
        THROUGHPUT_FOR.as_secs()
    );
    println!("Latency:");
    let mut stdio = StdioHost::start(&env).await;
    let (tool, ping) = latencies(&mut stdio).await;
    let (s50, s99) = line("stdio (contextctl mcp)", &tool, &ping);
    let mut h = HttpHost::connect(&addr, auth.clone()).await;
    let (tool, ping) = latencies(&mut h).await;
    let (h50, h99) = line("Streamable HTTP", &tool, &ping);
    let mut t = HttpHost::connect(&ts_addr, None).await;
    let (tool, ping) = latencies(&mut t).await;
    line("TypeScript SDK (HTTP)", &tool, &ping);

    println!("\nThroughput over Streamable HTTP ({CLIENTS} clients):");
    let ours = throughput(&addr, auth.clone(), TOOL).await;
    let ours_ping = throughput(&addr, auth.clone(), PING).await;
    let theirs = throughput(&ts_addr, None, TOOL).await;
    println!("  contextd (rmcp), tools/call get_active_window  {ours:>9.0} requests/s");
    println!("  contextd (rmcp), ping (the transport's floor)   {ours_ping:>9.0} requests/s");
    println!("  TypeScript SDK anchor, tools/call               {theirs:>9.0} requests/s");
    let x = ours / theirs;
    println!("  contextd / TypeScript SDK                       {x:>9.2}×");
    println!("\nTargets:");
    println!(
        "  stdio tool/ping ≤ 1.5×:  p50 {s50:.2}× p99 {s99:.2}×  {}",
        verdict(s50 <= 1.5 && s99 <= 1.5)
    );
    println!(
        "  HTTP tool/ping ≤ 1.5×:   p50 {h50:.2}× p99 {h99:.2}×  {}",
        verdict(h50 <= 1.5 && h99 <= 1.5)
    );
    println!("  ≥ 5× the TypeScript SDK: {x:.2}×  {}", verdict(x >= 5.0));
}

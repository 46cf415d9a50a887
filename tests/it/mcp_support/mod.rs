//! Helpers of the MCP tests: the Python SDK driver, raw HTTP, the daemon's
//! MCP files, tokens. Used next to `tests/it/common`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Bus, Daemon, Home, contextctl_bin, run_cmd};

/// The venv python with PyPI `mcp` (`make test` exports CONTEXTD_PYTHON;
/// `scripts/deps.sh --python` creates it).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("CONTEXTD_PYTHON") {
        return PathBuf::from(p);
    }
    let p = crate::common::root().join(".tools/venv/bin/python");
    assert!(
        p.exists(),
        "no Python with PyPI mcp: run scripts/deps.sh --python (or set CONTEXTD_PYTHON)"
    );
    p
}

/// The app id the broker gives a process running `python()` (the MCP
/// host when the Python client spawns `contextctl mcp`).
pub fn python_app_id() -> String {
    python_script_id(&client_script())
}

/// The app id the broker gives `python()` running `script`: a system
/// Python is an interpreter of the default `[identity] interpreters`, so
/// the process is named by its script's real path; another Python is
/// known by its executable.
pub fn python_script_id(script: &Path) -> String {
    let real = std::fs::canonicalize(python()).expect("python path");
    if contextd::internals::is_system_executable(&real) {
        let script = std::fs::canonicalize(script).expect("script path");
        format!("python3:{}", script.display())
    } else {
        format!("exe:{}", real.display())
    }
}

/// The Python example provider, `examples/provider.py`.
pub fn provider_script() -> PathBuf {
    crate::common::root().join("examples/provider.py")
}

pub fn client_script() -> PathBuf {
    crate::common::root().join("tests/mcp/client.py")
}

/// The daemon's runtime directory under `home`.
pub fn runtime(home: &Home) -> PathBuf {
    home.dir.path().join("run/contextd")
}

/// Wait for the daemon's HTTP URL file and return the address.
pub fn http_addr(home: &Home) -> SocketAddr {
    let file = runtime(home).join("mcp-http.url");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = std::fs::read_to_string(&file)
            && let Some(a) = s
                .trim()
                .strip_prefix("http://")
                .and_then(|r| r.strip_suffix("/mcp"))
            && let Ok(addr) = a.parse()
        {
            return addr;
        }
        assert!(
            Instant::now() < deadline,
            "no {} within 10 s",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until the MCP socket exists.
pub fn wait_socket(home: &Home) {
    let sock = runtime(home).join("mcp.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(
            Instant::now() < deadline,
            "no {} within 10 s",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `contextctl ARGS` in the broker's environment.
pub fn contextctl(bus: &Bus, home: &Home, args: &[&str]) -> (bool, String, String) {
    let (st, out, err) = run_cmd(
        Command::new(contextctl_bin())
            .args(args)
            .env_clear()
            .envs(home.envs(bus))
            .env("PATH", std::env::var("PATH").unwrap_or_default()),
        30,
    );
    (st.success(), out, err)
}

/// Create a token and return it.
pub fn token(bus: &Bus, home: &Home, name: &str) -> String {
    let (ok, out, err) = contextctl(bus, home, &["token", "create", name]);
    assert!(ok, "token create failed: {err}");
    let t = out.trim().to_owned();
    assert!(t.starts_with("ctxd_"), "odd token {t:?}");
    t
}

/// The Python SDK driver's command line, in the broker's environment.
pub fn client_command(bus: &Bus, home: &Home, args: &[&str]) -> Command {
    let mut env: serde_json::Map<String, Value> = home
        .envs(bus)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    env.insert(
        "PATH".into(),
        Value::String(std::env::var("PATH").unwrap_or_default()),
    );
    let env = Value::Object(env).to_string();
    let mut cmd = Command::new(python());
    cmd.arg(client_script())
        .args(args)
        .arg("--contextctl")
        .arg(contextctl_bin())
        .arg("--env")
        .arg(&env);
    cmd
}

/// Run `cmd` (from [`client_command`]) and return its report.
pub fn client_report(mut cmd: Command) -> Value {
    let (st, out, err) = run_cmd(&mut cmd, 120);
    assert!(
        st.success(),
        "the Python MCP client failed ({st}):\n{err}\n{out}"
    );
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("report is not JSON ({e}):\n{out}\n{err}"))
}

/// Run the Python SDK driver and return its report.
pub fn run_client(bus: &Bus, home: &Home, args: &[&str]) -> Value {
    client_report(client_command(bus, home, args))
}

/// One HTTP/1.1 exchange on a fresh connection: (status, headers, body).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    http_within(addr, method, path, headers, body, HTTP_WAIT)
}

/// How long [`http`] waits for an answer.
const HTTP_WAIT: Duration = Duration::from_secs(20);

/// [`http`] with its own read timeout: for a request that waits for the
/// user as long as the test makes it.
pub fn http_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> (u16, Vec<(String, String)>, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(timeout)).expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write head");
    // The server may answer (413) before reading a large body; a failed
    // write of the rest is then fine.
    let _ = s.write_all(body);
    let mut r = BufReader::new(s);
    let (code, hs) = read_head(&mut r);
    let chunked = header(&hs, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
    let mut raw = Vec::new();
    let _ = r.read_to_end(&mut raw);
    let body = if chunked { dechunk(&raw) } else { raw };
    (code, hs, String::from_utf8_lossy(&body).into_owned())
}

/// Read a response's status line and headers (names lower-cased), up to
/// the empty line.
pub fn read_head(r: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut status = String::new();
    r.read_line(&mut status).expect("status line");
    let code: u16 = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status:?}"));
    let mut hs = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).expect("header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            hs.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    (code, hs)
}

pub fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            std::str::from_utf8(&raw[..nl])
                .unwrap_or("0")
                .split(';')
                .next()
                .unwrap_or("0")
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = nl + 2;
        let end = (start + size).min(raw.len());
        out.extend_from_slice(&raw[start..end]);
        raw = raw.get(end + 2..).unwrap_or(&[]);
    }
    out
}

pub fn header<'a>(hs: &'a [(String, String)], k: &str) -> Option<&'a str> {
    hs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

/// The JSON-RPC messages in a body that is JSON or an SSE stream.
pub fn messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

pub const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// POST `body` to `/mcp` as an MCP host does (bearer token, JSON in, JSON
/// or an event stream accepted), with `extra` headers.
pub fn mcp_post(
    addr: SocketAddr,
    token: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    mcp_post_within(addr, token, extra, body, HTTP_WAIT)
}

/// [`mcp_post`], its answer waited for at most `timeout` (a call that
/// waits for the user).
pub fn mcp_post_within(
    addr: SocketAddr,
    token: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> (u16, Vec<(String, String)>, String) {
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    headers.extend_from_slice(extra);
    http_within(addr, "POST", "/mcp", &headers, body, timeout)
}

/// Open a Streamable HTTP session with raw requests; returns its id.
pub fn http_session(addr: SocketAddr, token: &str) -> String {
    let (code, hs, body) = mcp_post(addr, token, &[], INIT.as_bytes());
    assert_eq!(code, 200, "initialize: {body}");
    let sid = header(&hs, "mcp-session-id")
        .expect("session id")
        .to_owned();
    let (code, _, _) = mcp_post(
        addr,
        token,
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(code, 202);
    sid
}

/// POST one message in a session; (status, messages).
pub fn http_call(addr: SocketAddr, token: &str, sid: &str, body: &[u8]) -> (u16, Vec<Value>) {
    let (code, _, b) = mcp_post(
        addr,
        token,
        &[
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        body,
    );
    (code, messages(&b))
}

/// POST a 2026-07-28 `tools/call` of `name` without a session, with the
/// headers SEP-2243 asks for; (status, headers, body).
pub fn stateless_tool_call(
    addr: SocketAddr,
    token: &str,
    name: &str,
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    stateless_tool_call_within(addr, token, name, body, HTTP_WAIT)
}

/// [`stateless_tool_call`], its answer waited for at most `timeout` (a
/// call that waits for the user).
pub fn stateless_tool_call_within(
    addr: SocketAddr,
    token: &str,
    name: &str,
    body: &[u8],
    timeout: Duration,
) -> (u16, Vec<(String, String)>, String) {
    mcp_post_within(
        addr,
        token,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ],
        body,
        timeout,
    )
}

/// A `python3 -m dbusmock` notification daemon on the test bus.
pub struct Notifications(Child);

impl Notifications {
    pub async fn start(bus: &Bus) -> Notifications {
        let child = Command::new("/usr/bin/python3")
            .args([
                "-m",
                "dbusmock",
                "--session",
                "--template",
                "notification_daemon",
            ])
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3-dbusmock must be installed (make deps)");
        let conn = bus.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let name = zbus::names::BusName::try_from("org.freedesktop.Notifications").expect("name");
        let deadline = Instant::now() + Duration::from_secs(15);
        while !dbus.name_has_owner(name.clone()).await.unwrap_or(false) {
            assert!(
                Instant::now() < deadline,
                "dbusmock notification daemon did not start"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Notifications(child)
    }
}

impl Drop for Notifications {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start the daemon with a replay FIFO and HTTP on a free loopback port,
/// and replay two windows (w1 focused, w2 not).
pub async fn daemon_with_windows(
    bus: &Bus,
    home: &Home,
    replay: &mut crate::common::Replay,
    extra: &[&str],
) -> Daemon {
    replay.send(&crate::common::window_line(
        "w1",
        "org.gnome.TextEditor",
        "notes.txt",
        true,
    ));
    replay.send(&crate::common::window_line(
        "w2",
        "org.mozilla.firefox",
        "News",
        false,
    ));
    let arg = replay.arg();
    let mut args = vec!["--replay", arg.as_str()];
    args.extend_from_slice(extra);
    let d = Daemon::start(bus, home, &args).await;
    wait_socket(home);
    d
}

/// Send a raw HTTP request (`text`, head and body) on a fresh connection
/// and read the response head; returns the head (header names lower-cased)
/// and the connection at the body, for a stream read as it comes (or, for
/// a slow reader, not read). `rcvbuf` sets the socket's receive buffer.
pub fn open_stream(
    addr: SocketAddr,
    text: &str,
    rcvbuf: Option<i32>,
) -> (String, BufReader<TcpStream>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    if let Some(size) = rcvbuf {
        use std::os::fd::AsRawFd;
        let size: libc::c_int = size;
        // SAFETY: setsockopt on our own socket with a valid int.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "SO_RCVBUF");
    }
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(text.as_bytes()).expect("write");
    let mut r = BufReader::new(s);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).expect("read") > 0,
            "no response: {head}"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    (head, r)
}

/// Open a legacy SSE stream for `token` (`GET /sse`), read up to its
/// endpoint event; returns the stream and the session's message path.
pub fn legacy_open(
    addr: SocketAddr,
    token: &str,
    rcvbuf: Option<i32>,
) -> (BufReader<TcpStream>, String) {
    let (head, mut r) = open_stream(
        addr,
        &format!(
            "GET /sse HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ),
        rcvbuf,
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).expect("read") > 0, "stream ended");
        if let Some(p) = line.trim().strip_prefix("data: /messages") {
            return (r, format!("/messages{p}"));
        }
    }
}

/// POST one message to a legacy SSE session (`path` from its endpoint
/// event); expects 202 (the answer comes on the stream).
pub fn legacy_post(addr: SocketAddr, token: &str, path: &str, body: &str) {
    let auth = format!("Bearer {token}");
    let (code, _, answer) = http(
        addr,
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    );
    assert_eq!(code, 202, "{path}: {answer}");
}

/// The GET stream of a Streamable HTTP session (what the server sends
/// unasked), at its body.
pub fn streamable_get(
    addr: SocketAddr,
    tok: &str,
    session: &str,
    rcvbuf: Option<i32>,
) -> BufReader<TcpStream> {
    let (head, r) = open_stream(
        addr,
        &format!(
            "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\nAccept: text/event-stream\r\n\r\n"
        ),
        rcvbuf,
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    r
}

/// The entries of `app` among `dicts` (a `Consent1` list), as JSON.
fn of_app(
    dicts: zbus::Result<Vec<contextd::client::json::Dict>>,
    what: &str,
    app: &str,
) -> Vec<Value> {
    dicts
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .iter()
        .map(contextd::client::json::dict_to_json)
        .filter(|d| d["app_id"] == app)
        .collect()
}

/// `app`'s live readers, as the user's `Consent1.ListReaders` lists them.
pub async fn readers_of(c: &contextd::client::proxy::Consent1Proxy<'_>, app: &str) -> Vec<Value> {
    of_app(c.list_readers().await, "ListReaders", app)
}

/// `app`'s questions waiting for the user (`Consent1.ListPending`).
pub async fn pending_of(c: &contextd::client::proxy::Consent1Proxy<'_>, app: &str) -> Vec<Value> {
    of_app(c.list_pending().await, "ListPending", app)
}

/// Every grant of `app` (`Consent1.ListGrants`), policy.toml's included.
pub async fn grants_of(c: &contextd::client::proxy::Consent1Proxy<'_>, app: &str) -> Vec<Value> {
    of_app(c.list_grants().await, "ListGrants", app)
}

/// `app`'s grants that are stored decisions (not policy.toml's).
pub async fn decided_grants_of(
    c: &contextd::client::proxy::Consent1Proxy<'_>,
    app: &str,
) -> Vec<Value> {
    let mut grants = grants_of(c, app).await;
    grants.retain(|g| g["origin"] != "policy");
    grants
}

/// A legacy HTTP+SSE session of `tok`, initialized and subscribed to
/// `uris`; the lines of its stream, from a thread.
pub fn mcp_reader(addr: SocketAddr, tok: &str, uris: &[&str]) -> mpsc::Receiver<String> {
    let (mut r, path) = legacy_open(addr, tok, None);
    r.get_ref().set_read_timeout(None).expect("timeout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if tx.send(line.clone()).is_err() {
                break;
            }
            line.clear();
        }
    });
    legacy_post(
        addr,
        tok,
        &path,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "details", "version": "1"}}}).to_string(),
    );
    next_with(&rx, r#""id":1"#);
    legacy_post(
        addr,
        tok,
        &path,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    for (i, uri) in uris.iter().enumerate() {
        let id = i + 2;
        legacy_post(
            addr,
            tok,
            &path,
            &json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe", "params": {"uri": uri}}).to_string(),
        );
        next_with(&rx, &format!(r#""id":{id}"#));
    }
    rx
}

/// The lines of the stream up to the first with `needle` (included),
/// within 20 s.
pub fn next_with(rx: &mpsc::Receiver<String>, needle: &str) -> Vec<String> {
    let mut before = Vec::new();
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("no {needle} on the stream ({e}) after {before:?}"));
        let found = l.contains(needle);
        before.push(l);
        if found {
            return before;
        }
    }
}

/// The `resources/updated` notifications among `lines`, by URI.
pub fn updated(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| l.trim().strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|m| m["method"] == "notifications/resources/updated")
        .filter_map(|m| m["params"]["uri"].as_str().map(str::to_owned))
        .collect()
}

/// `tools/call` of `name` in a Streamable HTTP session: the result.
pub fn tool_result(
    addr: SocketAddr,
    tok: &str,
    sid: &str,
    id: u64,
    name: &str,
    arguments: Value,
) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    });
    let (code, msgs) = http_call(addr, tok, sid, body.to_string().as_bytes());
    assert_eq!(code, 200, "{msgs:?}");
    msgs.iter()
        .find(|m| m["id"] == id)
        .map(|m| m["result"].clone())
        .unwrap_or_else(|| panic!("no result for {id}: {msgs:?}"))
}

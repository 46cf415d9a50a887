//! Loopback is shared by every user of the machine. Another uid that
//! opens hundreds of half-sent requests to the dashboard's and MCP's HTTP
//! ports gets every connection closed without an answer, and holds none of
//! the user's slots meanwhile: the user's own dashboard page and MCP
//! request are answered.
//!
//! The tests run as root; the other user is `contextd-test` (created by
//! scripts/deps.sh), reached through `runuser`.

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use common::*;
use mcp_support::*;
use serde_json::Value;

/// The other user.
const OTHER: &str = "contextd-test";
/// Connections it opens to each port: more than either has slots (the
/// dashboard 64, MCP 256), so without per-uid limits the user's own
/// requests queue behind them.
const HELD: usize = 300;

/// How long the user's own requests may take. Held connections would keep
/// their slots until the server's header timeout and the rest wait in the
/// accept queue behind them, so a request that waits for them takes at
/// least that long; one that does not is answered at once.
fn patience() -> Duration {
    contextd::internals::HEADER_TIMEOUT / 2
}

/// `tests/peers/hold.py` running as [`OTHER`].
struct Holder {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Holder {
    fn start(ports: &[u16]) -> Holder {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", OTHER, "--", "/usr/bin/python3", "-c"])
            .arg(include_str!("../peers/hold.py"))
            .arg(HELD.to_string())
            .args(ports.iter().map(u16::to_string))
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd
            .spawn()
            .expect("runuser (util-linux) and python3 to run as the other user");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Holder {
            child,
            stdin,
            stdout,
        }
    }

    fn line(&mut self) -> Value {
        let mut l = String::new();
        self.stdout.read_line(&mut l).expect("from the holder");
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("holder said {l:?}: {e}"))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on a fresh connection, answered within [`patience`]: its
/// status and headers, or what went wrong.
fn ask(addr: SocketAddr, head: &str, body: &[u8]) -> Result<(u16, Vec<(String, String)>), String> {
    let mut s = TcpStream::connect_timeout(&addr, patience()).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(patience()))
        .map_err(|e| e.to_string())?;
    s.write_all(head.as_bytes())
        .and_then(|_| s.write_all(body))
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => got.push(b[0]),
            Ok(_) => return Err("closed without an answer".into()),
            Err(e) => return Err(format!("no answer within {:?}: {e}", patience())),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad answer {text:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((status, headers))
}

fn get(addr: SocketAddr, path: &str, cookie: &str) -> Result<(u16, Vec<(String, String)>), String> {
    ask(
        addr,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
        ),
        b"",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_uid_cannot_hold_the_users_http_slots() {
    with_timeout(120, async {
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "this test runs as root (as `make test` does) to reach the user {OTHER}"
        );
        let m = Managed::start("[mcp.http]\nlisten = \"127.0.0.1:0\"\n", &[]).await;
        let (bus, home) = (&m.bus, &m.home);
        let mcp = http_addr(home);
        let tok = tokio::task::block_in_place(|| token(bus, home, "mine"));
        let (ok, out, err) =
            tokio::task::block_in_place(|| contextctl(bus, home, &["dashboard", "--no-open"]));
        assert!(ok, "{err}");
        let url = out.trim().to_owned();
        let base = url.split("/open?").next().expect("base").to_owned();
        let dash: SocketAddr = base["http://".len()..].parse().expect("addr");

        let mut other = tokio::task::block_in_place(|| Holder::start(&[mcp.port(), dash.port()]));
        let held = tokio::task::block_in_place(|| other.line());
        assert_eq!(
            held["held"].as_u64().unwrap_or(0) + held["failed"].as_u64().unwrap_or(0),
            2 * HELD as u64,
            "{held}"
        );

        // Meanwhile, the user: the dashboard, opened and shown ...
        let (status, headers) =
            tokio::task::block_in_place(|| get(dash, &url[base.len()..], "")).expect("the link");
        assert_eq!(status, 200, "{headers:?}");
        let find = |k: &str| {
            headers
                .iter()
                .find(|(h, _)| h == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no {k} in {headers:?}"))
        };
        let set = find("set-cookie");
        let cookie = set.split(';').next().unwrap_or_default().to_owned();
        // The session's pages are where its cookie goes.
        let page = set
            .split(';')
            .find_map(|a| a.trim().strip_prefix("Path="))
            .map(|p| format!("{p}/"))
            .unwrap_or_else(|| panic!("no Path in {set}"));
        let (status, _) =
            tokio::task::block_in_place(|| get(dash, &page, &cookie)).expect("the dashboard page");
        assert_eq!(status, 200, "the user's own dashboard page");
        // ... and an MCP request.
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {mcp}\r\nAuthorization: Bearer {tok}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            INIT.len()
        );
        let (status, _) = tokio::task::block_in_place(|| ask(mcp, &head, INIT.as_bytes()))
            .expect("the user's MCP request");
        assert_eq!(status, 200, "the user's own MCP request");

        // The other user's connections were all closed, none answered.
        writeln!(other.stdin, "check").expect("to the holder");
        let ended = tokio::task::block_in_place(|| other.line());
        assert_eq!(ended["answered"], 0, "{ended}");
        assert_eq!(ended["open"], 0, "{ended}");
        assert_eq!(
            ended["closed"].as_u64(),
            held["held"].as_u64(),
            "{ended} after {held}"
        );
        let log = m.daemon.stderr();
        assert!(
            log.contains("connection from another user"),
            "the refusals are logged (debug)"
        );
    })
    .await
}

//! Every refused request gets its status code, on a fresh connection and
//! on one kept alive, while the client is still sending its body: the
//! MCP SDK's own HTTP client (`httpx2.AsyncClient`) sending 401, 403 and
//! then 2 MiB on one connection, and raw sockets that write a whole large
//! body before they read (a client that does not stop at the first byte of
//! the answer).

use crate::common;
use crate::mcp_support;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use common::*;
use mcp_support::*;
use serde_json::Value;

const BIG: usize = 2 * 1024 * 1024;

/// 401, 403, then 2 MiB on one `httpx2.AsyncClient` connection: 413, 20
/// rounds out of 20, and the first two answers keep the connection (the
/// 413 comes on the same one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_client_reads_401_403_413_on_one_connection() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "keepalive");
        let script = crate::common::root().join("tests/mcp/keepalive.py");
        let (st, out, err) = run_cmd(
            Command::new(python())
                .arg(script)
                .arg(format!("http://{addr}/mcp"))
                .arg(&tok)
                .arg("20"),
            100,
        );
        assert!(st.success(), "keepalive.py failed:\n{out}\n{err}");
        let report: Value = serde_json::from_str(out.trim()).expect("report");
        let rounds = report.as_array().expect("rounds");
        assert_eq!(rounds.len(), 20);
        for (i, round) in rounds.iter().enumerate() {
            let steps = round.as_array().expect("steps");
            for s in steps {
                assert_eq!(
                    s["status"].as_u64().map(|c| c.to_string()).as_deref(),
                    s["want"].as_str(),
                    "round {i}: {round}"
                );
            }
            let ports: Vec<&Value> = steps.iter().map(|s| &s["port"]).collect();
            assert!(
                ports.iter().all(|p| !p.is_null() && *p == ports[0]),
                "round {i}: the answers came on more than one connection: {round}"
            );
        }
    })
    .await;
}

/// A request head, with `Host` and `Content-Length` (unless chunked).
fn head(addr: SocketAddr, path: &str, headers: &[(&str, &str)], len: Option<usize>) -> String {
    let mut h = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    );
    match len {
        Some(n) => h.push_str(&format!("Content-Length: {n}\r\n")),
        None => h.push_str("Transfer-Encoding: chunked\r\n"),
    }
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    h
}

/// Write `bytes` on another thread (the whole of it, as a client that
/// does not watch for an early answer does) and return when it is written
/// or the connection refused it.
fn write_all_behind(s: &TcpStream, bytes: Vec<u8>) -> std::thread::JoinHandle<std::io::Result<()>> {
    let mut w = s.try_clone().expect("clone");
    std::thread::spawn(move || w.write_all(&bytes))
}

/// Read one response: (status, headers lower-cased, body).
fn read_response(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let (code, hs) = read_head(r);
    let len: usize = header(&hs, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).expect("body");
    (code, hs, body)
}

fn connect(addr: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let r = BufReader::new(s.try_clone().expect("clone"));
    (s, r)
}

/// The connection ends (EOF, not a reset) after a `Connection: close`.
fn ends_cleanly(r: &mut BufReader<TcpStream>, what: &str) {
    let mut rest = Vec::new();
    match r.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "{what}: bytes after the answer"),
        Err(e) => panic!("{what}: the connection broke instead of closing: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_clients_writing_whole_bodies_read_their_status() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "raw");
        let bearer = format!("Bearer {tok}");
        let big = vec![b' '; BIG];

        for round in 0..3 {
            // Fresh connection, 2 MiB with a good token: 413, then a
            // clean end.
            let (s, mut r) = connect(addr);
            let mut bytes =
                head(addr, "/mcp", &[("Authorization", &bearer)], Some(BIG)).into_bytes();
            bytes.extend_from_slice(&big);
            let w = write_all_behind(&s, bytes);
            let (code, hs, _) = read_response(&mut r);
            assert_eq!(code, 413, "round {round}: fresh 2 MiB");
            assert_eq!(header(&hs, "connection"), Some("close"));
            ends_cleanly(&mut r, "fresh 2 MiB");
            w.join().expect("writer").expect("the whole body was taken");

            // Fresh connection, 2 MiB without a token: 401 (refused on
            // its head), not a reset.
            let (s, mut r) = connect(addr);
            let mut bytes = head(addr, "/mcp", &[], Some(BIG)).into_bytes();
            bytes.extend_from_slice(&big);
            let w = write_all_behind(&s, bytes);
            let (code, _, _) = read_response(&mut r);
            assert_eq!(code, 401, "round {round}: 2 MiB without a token");
            ends_cleanly(&mut r, "2 MiB without a token");
            w.join().expect("writer").expect("the whole body was taken");

            // Kept alive: a small 401 and a small 403 keep the connection
            // (their bodies are read and dropped); then 2 MiB gets 413.
            let (mut s, mut r) = connect(addr);
            s.write_all(
                &[
                    head(addr, "/mcp", &[], Some(INIT.len())).as_bytes(),
                    INIT.as_bytes(),
                ]
                .concat(),
            )
            .expect("write");
            let (code, hs, _) = read_response(&mut r);
            assert_eq!(code, 401);
            assert_ne!(
                header(&hs, "connection"),
                Some("close"),
                "a small refused body keeps the connection"
            );
            s.write_all(
                &[
                    head(
                        addr,
                        "/mcp",
                        &[
                            ("Authorization", &bearer),
                            ("Origin", "https://evil.example"),
                        ],
                        Some(INIT.len()),
                    )
                    .as_bytes(),
                    INIT.as_bytes(),
                ]
                .concat(),
            )
            .expect("write");
            let (code, _, _) = read_response(&mut r);
            assert_eq!(code, 403);
            let mut bytes =
                head(addr, "/mcp", &[("Authorization", &bearer)], Some(BIG)).into_bytes();
            bytes.extend_from_slice(&big);
            let w = write_all_behind(&s, bytes);
            let (code, _, _) = read_response(&mut r);
            assert_eq!(code, 413, "round {round}: 2 MiB on a kept-alive connection");
            ends_cleanly(&mut r, "kept alive");
            w.join().expect("writer").expect("the whole body was taken");

            // Chunked, no declared length, over the limit: 413 once 1 MiB
            // was read, and a clean end.
            let (s, mut r) = connect(addr);
            let mut bytes = head(addr, "/mcp", &[("Authorization", &bearer)], None).into_bytes();
            for chunk in big.chunks(64 * 1024) {
                bytes.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                bytes.extend_from_slice(chunk);
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(b"0\r\n\r\n");
            let w = write_all_behind(&s, bytes);
            let (code, hs, _) = read_response(&mut r);
            assert_eq!(code, 413, "round {round}: chunked 2 MiB");
            assert_eq!(header(&hs, "connection"), Some("close"));
            ends_cleanly(&mut r, "chunked 2 MiB");
            w.join().expect("writer").expect("the whole body was taken");
        }
    })
    .await;
}

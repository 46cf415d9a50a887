//! A program of the user's own uid (or a Flatpak app allowed on the
//! network) holds every connection slot of MCP over HTTP (256) and of the
//! dashboard (64) with slow request heads: more connections than there are
//! slots, each sending `GET /` one byte at a time and never finishing, and
//! opening a new one whenever the server closes one. Meanwhile the user's
//! MCP host (a valid token) and browser (a valid session) are answered
//! before a deadline, on new connections and on the connections they kept
//! alive from before the flood (those keep their slots: a newcomer closes
//! connections that never authenticated first).
//!
//! The latency figure (about 1 s at most) is in `make bench` (`mcp`);
//! these tests only say "answered before the deadline".

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use common::*;
use mcp_support::*;

/// How long the user's requests may take. Without the slot rules they
/// wait for a slow head's header deadline (10 s), at least; with them
/// they are answered at once.
const DEADLINE: Duration = Duration::from_secs(5);
/// Connections of the flood against MCP (256 slots) and the dashboard (64).
const MCP_FLOOD: usize = 300;
const DASHBOARD_FLOOD: usize = 80;

/// The attacker: `n` connections to `addr`, each sending a request head
/// one byte at a time, every half second, never finishing; a connection
/// the server closes is opened again at the next round.
struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Held>>,
}

/// What the flood saw.
#[derive(Debug, Default)]
struct Held {
    /// Connections opened (first ones and reopened).
    opened: usize,
    /// Connections the server closed (or reset).
    closed: usize,
    /// Connections on which the server answered something.
    answered: usize,
}

impl Flood {
    /// Start and return once all `n` are open and have sent a few bytes.
    fn start(addr: SocketAddr, n: usize) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let head = format!(
                    "GET / HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}",
                    "a".repeat(4096)
                )
                .into_bytes();
                let mut held = Held::default();
                let mut socks: Vec<Option<(TcpStream, usize)>> = (0..n).map(|_| None).collect();
                let mut rounds = 0;
                while !stop.load(Ordering::Relaxed) {
                    for slot in socks.iter_mut() {
                        if let Some((s, _)) = slot {
                            let mut b = [0u8; 512];
                            match s.read(&mut b) {
                                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                                Ok(0) | Err(_) => {
                                    held.closed += 1;
                                    *slot = None;
                                }
                                Ok(_) => {
                                    held.answered += 1;
                                    *slot = None;
                                }
                            }
                        }
                        if slot.is_none() {
                            let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
                            else {
                                continue;
                            };
                            s.set_nonblocking(true).expect("nonblocking");
                            held.opened += 1;
                            *slot = Some((s, 0));
                        }
                        if let Some((s, at)) = slot {
                            match s.write(&head[*at % head.len()..][..1]) {
                                Ok(_) => *at += 1,
                                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                                Err(_) => {
                                    held.closed += 1;
                                    *slot = None;
                                }
                            }
                        }
                    }
                    rounds += 1;
                    if rounds == 2 {
                        let open = socks.iter().filter(|s| s.is_some()).count();
                        let _ = ready_tx.send(open);
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                held
            })
        };
        let open = ready
            .recv_timeout(Duration::from_secs(30))
            .expect("the flood is under way");
        assert_eq!(open, n, "the flood holds {n} connections");
        Flood {
            stop,
            thread: Some(thread),
        }
    }

    fn end(mut self) -> Held {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("the flood's thread")
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A connection of the user's own client, kept alive between requests.
struct Client {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    /// Connect within [`DEADLINE`].
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, DEADLINE)
            .unwrap_or_else(|e| panic!("no connection within {DEADLINE:?}: {e}"));
        stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let reader = BufReader::new(stream.try_clone().expect("clone"));
        Client { stream, reader }
    }

    /// One request; its status, headers and body, read within
    /// [`DEADLINE`] (each read).
    fn ask(&mut self, head: &str, body: &[u8]) -> (u16, Vec<(String, String)>, String) {
        self.stream
            .write_all(&[head.as_bytes(), body].concat())
            .expect("the request is sent");
        let (code, hs) = read_head_within(&mut self.reader);
        let body = if header(&hs, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            read_chunked(&mut self.reader)
        } else {
            let len: usize = header(&hs, "content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut b = vec![0u8; len];
            self.reader
                .read_exact(&mut b)
                .unwrap_or_else(|e| panic!("the body within {DEADLINE:?}: {e}"));
            b
        };
        (code, hs, String::from_utf8_lossy(&body).into_owned())
    }
}

/// [`read_head`], failing with the deadline's name rather than a bare
/// read error.
fn read_head_within(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    match r.fill_buf() {
        Ok([]) => panic!("the connection was closed without an answer"),
        Ok(_) => read_head(r),
        Err(e) => panic!("no answer within {DEADLINE:?}: {e}"),
    }
}

fn read_chunked(r: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).expect("chunk size");
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
            .unwrap_or_else(|e| panic!("chunk size {line:?}: {e}"));
        let mut chunk = vec![0u8; size + 2];
        r.read_exact(&mut chunk).expect("chunk");
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&chunk[..size]);
    }
}

/// An MCP `initialize` with the token, on a connection kept alive.
fn initialize(addr: SocketAddr, tok: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n",
        INIT.len()
    )
}

fn assert_initialized(what: &str, (code, hs, body): (u16, Vec<(String, String)>, String)) {
    assert_eq!(code, 200, "{what}: {body}");
    assert!(header(&hs, "mcp-session-id").is_some(), "{what}: {hs:?}");
    assert!(
        messages(&body)
            .iter()
            .any(|m| m["result"]["serverInfo"].is_object()),
        "{what}: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_do_not_keep_an_mcp_host_out() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = Home::new();
        let d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "host");
        tokio::task::block_in_place(|| {
            // The host's connection from before, kept alive.
            let mut kept = Client::connect(addr);
            assert_initialized("before", kept.ask(&initialize(addr, &tok), INIT.as_bytes()));

            let flood = Flood::start(addr, MCP_FLOOD);
            // A new connection of the host: answered.
            let mut fresh = Client::connect(addr);
            assert_initialized(
                "a new connection under the flood",
                fresh.ask(&initialize(addr, &tok), INIT.as_bytes()),
            );
            // Again on that one, and on the one from before: both kept
            // their slots.
            assert_initialized(
                "the new connection, kept alive",
                fresh.ask(&initialize(addr, &tok), INIT.as_bytes()),
            );
            assert_initialized(
                "the connection kept alive from before the flood",
                kept.ask(&initialize(addr, &tok), INIT.as_bytes()),
            );
            // A request without a token on a new connection proves
            // nothing, but it is not kept out either: 401.
            let mut anon = Client::connect(addr);
            let (code, _, _) = anon.ask(
                &format!(
                    "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\n\r\n",
                    INIT.len()
                ),
                INIT.as_bytes(),
            );
            assert_eq!(code, 401);

            let held = flood.end();
            // The flood did hold connections, and the server closed slow
            // heads without answering them.
            assert!(held.closed > 0, "{held:?}");
            assert_eq!(held.answered, 0, "{held:?}");
        });
        assert!(
            d.stderr().contains("connection slots were taken"),
            "a full table is logged"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_do_not_keep_the_users_dashboard_out() {
    with_timeout(120, async {
        let m = Managed::start("", &[]).await;
        let (ok, out, err) = tokio::task::block_in_place(|| {
            contextctl(&m.bus, &m.home, &["dashboard", "--no-open"])
        });
        assert!(ok, "{err}");
        let url = out.trim().to_owned();
        let base = url.split("/open?").next().expect("base").to_owned();
        let dash: SocketAddr = base["http://".len()..].parse().expect("addr");
        tokio::task::block_in_place(|| {
            // The browser opened the link before the flood and keeps the
            // connection alive.
            let mut kept = Client::connect(dash);
            let (code, hs, body) = kept.ask(
                &format!(
                    "GET {} HTTP/1.1\r\nHost: {dash}\r\n\r\n",
                    &url[base.len()..]
                ),
                b"",
            );
            assert_eq!(code, 200, "the link: {body}");
            let set = header(&hs, "set-cookie").expect("a session cookie");
            let cookie = set.split(';').next().unwrap_or_default().to_owned();
            let page = set
                .split(';')
                .find_map(|a| a.trim().strip_prefix("Path="))
                .map(|p| format!("{p}/"))
                .unwrap_or_else(|| panic!("no Path in {set}"));
            let get = format!("GET {page} HTTP/1.1\r\nHost: {dash}\r\nCookie: {cookie}\r\n\r\n");

            let flood = Flood::start(dash, DASHBOARD_FLOOD);
            let mut fresh = Client::connect(dash);
            let (code, _, body) = fresh.ask(&get, b"");
            assert_eq!(code, 200, "a new connection under the flood: {body}");
            assert!(body.contains("<html"), "{body}");
            let (code, _, _) = fresh.ask(&get, b"");
            assert_eq!(code, 200, "the new connection, kept alive");
            let (code, _, _) = kept.ask(&get, b"");
            assert_eq!(code, 200, "the connection kept alive from before the flood");

            let held = flood.end();
            assert!(held.closed > 0, "{held:?}");
            assert_eq!(held.answered, 0, "{held:?}");
        });
    })
    .await;
}

/// Without any flood: a connection that sends no complete head is closed
/// after [`contextd::internals::FIRST_HEAD_TIMEOUT`], well before the
/// header timeout; a connection kept alive after an authenticated request
/// may stay idle longer than that and is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_head_has_a_short_deadline_a_kept_alive_connection_does_not() {
    use contextd::internals::{FIRST_HEAD_TIMEOUT, HEADER_TIMEOUT};
    assert!(FIRST_HEAD_TIMEOUT * 2 < HEADER_TIMEOUT);
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "host");
        tokio::task::block_in_place(|| {
            let mut kept = Client::connect(addr);
            assert_initialized("first", kept.ask(&initialize(addr, &tok), INIT.as_bytes()));

            let mut slow = TcpStream::connect(addr).expect("connect");
            slow.write_all(format!("GET / HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
                .expect("half a head");
            // Closed (not answered) before the header timeout.
            slow.set_read_timeout(Some(HEADER_TIMEOUT - FIRST_HEAD_TIMEOUT))
                .expect("timeout");
            let mut b = [0u8; 64];
            match slow.read(&mut b) {
                Ok(0) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                Ok(n) => panic!(
                    "a half head was answered: {:?}",
                    String::from_utf8_lossy(&b[..n])
                ),
                Err(e) => panic!("a half head was not closed before the header timeout: {e}"),
            }

            // The kept-alive connection has been idle longer than the
            // first head's deadline by now.
            assert_initialized(
                "after idling past the first head's deadline",
                kept.ask(&initialize(addr, &tok), INIT.as_bytes()),
            );
        });
    })
    .await;
}

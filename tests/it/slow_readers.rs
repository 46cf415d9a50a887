//! Readers that stop reading are not buffered without end: a D-Bus
//! subscriber whose process is stopped (it never reads its socket again)
//! and MCP hosts that subscribed and never read their stream (a legacy SSE
//! stream, a Streamable HTTP session's GET stream), while thousands of
//! changes happen. The broker's memory stays
//! within a bound, and a subscriber and a host that do read keep getting
//! their events.
//!
//! Where what a slow reader misses goes:
//! - D-Bus: the broker hands every signal to the bus at once; the bus
//!   daemon queues it for the reader up to its `max_outgoing_bytes` and
//!   drops the rest (this bus has a small limit, as a real one has a
//!   finite one). The broker holds nothing per reader. (Its one loop that
//!   sends `Changed` waits while the bus does not read from it: a bus that
//!   throttles the broker for a stopped reader, see below, would stall
//!   every subscriber; dbus-daemon does so only past the broker's
//!   `max_incoming_bytes`, far above any reader's queue.)
//! - MCP: the session's queues are bounded (`mcp::sse`, rmcp's session
//!   channels); once they and the socket are full, the session's
//!   notification loop waits, its receiver of the change broadcast falls
//!   behind, and what it missed is dropped, to be told as "re-read what
//!   you subscribed to" when it reads again (`mcp::watch`).

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use mcp_support::*;

/// Changes in the flood, and the length of each title (a D-Bus `Changed`
/// carries it: about 2.5 MB for the stopped subscriber).
const FLOOD: usize = 5000;
const TITLE: usize = 500;
/// The broker's resident memory may grow by at most this much over the
/// flood (it is about 20 MB in all).
const RSS_BOUND_KB: u64 = 20 * 1024;

/// A process killed on drop (SIGKILL ends a stopped process too).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A D-Bus subscriber that subscribes to windows and stops itself
/// (SIGSTOP): from then on nobody reads its socket. Returns it once
/// stopped.
fn stopped_subscriber(bus: &Bus) -> Proc {
    let script = r#"
import os, signal, sys
from gi.repository import Gio, GLib
conn = Gio.DBusConnection.new_for_address_sync(
    sys.argv[1],
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None, None)
r = conn.call_sync("org.contextd.Broker1", "/org/contextd/Broker1", "org.contextd.Context1",
    "Subscribe", GLib.Variant("(as)", (["windows", "windows.titles"],)), GLib.VariantType("(o)"),
    Gio.DBusCallFlags.NONE, 10000, None)
print(r.unpack()[0], flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
"#;
    let mut child = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .arg(&bus.address)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("subscription path");
    assert!(
        line.starts_with("/org/contextd/"),
        "no subscription: {line:?}"
    );
    let pid = child.id();
    let proc = Proc(child);
    // Wait until it is stopped.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name in parentheses.
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('T'))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the subscriber did not stop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    proc
}

const SUBSCRIBE: &str = r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"context://windows/active"}}"#;

/// Open a legacy SSE session, initialize it and subscribe to the active
/// window; returns the stream (read up to the endpoint event). With
/// `small_buffer`, the socket's receive buffer is the smallest, so that
/// the server's side fills first.
fn legacy_session(addr: SocketAddr, tok: &str, small_buffer: bool) -> BufReader<TcpStream> {
    let (r, path) = legacy_open(addr, tok, small_buffer.then_some(4096));
    r.get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    legacy_post(
        addr,
        tok,
        &path,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"slow-readers","version":"1"}}}"#,
    );
    legacy_post(
        addr,
        tok,
        &path,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    legacy_post(addr, tok, &path, SUBSCRIBE);
    r
}

/// A Streamable HTTP session subscribed to the active window whose GET
/// stream (where its notifications go) has the smallest receive buffer
/// and is never read.
fn unread_streamable(addr: SocketAddr, tok: &str) -> BufReader<TcpStream> {
    let session = http_session(addr, tok);
    let stream = streamable_get(addr, tok, &session, Some(4096));
    let (code, body) = http_call(addr, tok, &session, SUBSCRIBE.as_bytes());
    assert_eq!(code, 200, "{body:?}");
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_are_not_buffered_without_end() {
    with_timeout(300, async {
        // A bus that queues at most 1 MB for a reader and rejects the
        // rest ("destination has a full message queue"). What it has
        // read from a sender and still holds for readers counts against
        // the sender's max_incoming_bytes (127 MB by default, 1 GB on a
        // session bus): were that as small, the bus would stop reading the
        // broker itself, and a stopped reader would stall every signal.
        let bus = Bus::start_with(r#"<limit name="max_outgoing_bytes">1000000</limit>"#);
        let home = Home::new();
        let python = std::fs::canonicalize("/usr/bin/python3").expect("python3");
        let python = format!("exe:{}", python.display());
        let cats: &[&str] = &["windows", "windows.titles"];
        home.write_policy(&[
            (&my_app_id(), cats),
            (&python, cats),
            ("token:slow", cats),
            ("token:fast", cats),
        ]);
        let mut replay = Replay::new(&home);
        let d = daemon_with_windows(&bus, &home, &mut replay, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let slow_tok = token(&bus, &home, "slow");
        let fast_tok = token(&bus, &home, "fast");

        // The slow readers.
        let _stopped = stopped_subscriber(&bus);
        let slow_stream = legacy_session(addr, &slow_tok, true);
        let slow_get = unread_streamable(addr, &slow_tok);

        // The readers that read: a D-Bus subscriber and an SSE host.
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let sub = Subscription1Proxy::builder(&conn)
            .path(ctx.subscribe(cats).await.expect("subscribe"))
            .build()
            .await
            .expect("subscription");
        let mut changed = sub.receive_changed().await.expect("Changed");
        let mut fast_stream = legacy_session(addr, &fast_tok, false);
        let updates = Arc::new(AtomicUsize::new(0));
        let subscribed = Arc::new(AtomicUsize::new(0));
        {
            let updates = updates.clone();
            let subscribed = subscribed.clone();
            std::thread::spawn(move || {
                let mut line = String::new();
                while fast_stream.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line.contains("notifications/resources/updated") {
                        updates.fetch_add(1, Ordering::SeqCst);
                    } else if line.contains(r#""id":2"#) {
                        subscribed.fetch_add(1, Ordering::SeqCst);
                    }
                    line.clear();
                }
            });
        }
        eventually(20, "the fast host subscribed", || async {
            (subscribed.load(Ordering::SeqCst) > 0).then_some(())
        })
        .await;

        // Warm up (the allocator's arenas, the first pages of every
        // queue), then measure.
        let title = |i: usize, tag: &str| format!("{tag} {i} {}", "x".repeat(TITLE));
        for i in 0..200 {
            replay.send(&window_line(
                "w1",
                "org.gnome.TextEditor",
                &title(i, "warm"),
                true,
            ));
        }
        let mut seen = 0;
        while seen < 200 {
            within(20, "the warm-up reaches the reader", changed.next())
                .await
                .expect("Changed");
            seen += 1;
        }
        let before = rss_kib(d.pid());

        // The flood, from a thread (the FIFO blocks while the broker is
        // busy), then one change more, which the readers that read must
        // get (some of the flood they may miss: a reader that falls
        // behind has changes dropped, not queued).
        let mut flood = tokio::task::spawn_blocking(move || {
            for i in 0..FLOOD {
                replay.send(&window_line(
                    "w1",
                    "org.gnome.TextEditor",
                    &title(i, "flood"),
                    true,
                ));
            }
            replay
        });
        // Read while the flood runs.
        let mut got = 0usize;
        let mut replay = loop {
            tokio::select! {
                r = &mut flood => break r.expect("flood"),
                sig = changed.next() => {
                    sig.expect("Changed");
                    got += 1;
                }
            }
        };
        // Then a change more, until one reaches the reader (a reader that
        // fell behind had changes dropped, maybe the first of these too).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        'heard: for n in 0.. {
            assert!(
                std::time::Instant::now() < deadline,
                "no change after the flood reached the reading subscriber in 60 s ({got} Changed during it)"
            );
            replay.send(&window_line(
                "w1",
                "org.gnome.TextEditor",
                &format!("after the flood {n}"),
                true,
            ));
            let until = tokio::time::Instant::now() + Duration::from_secs(2);
            while let Ok(Some(sig)) = tokio::time::timeout_at(until, changed.next()).await {
                got += 1;
                let data = contextd::client::json::dict_to_json(&sig.args().expect("args").data);
                if data["window"]["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("after the flood"))
                {
                    break 'heard;
                }
            }
        }
        let during = rss_kib(d.pid());
        // The host that reads hears of a change after the flood.
        let heard = updates.load(Ordering::SeqCst);
        replay.send(&window_line(
            "w1",
            "org.gnome.TextEditor",
            "later still",
            true,
        ));
        eventually(
            30,
            "the reading host hears of changes after the flood",
            || async { (updates.load(Ordering::SeqCst) > heard).then_some(()) },
        )
        .await;
        let after = rss_kib(d.pid());
        eprintln!(
            "RSS: {before} kB before {FLOOD} changes, {during} kB after, {after} kB once the \
             readers caught up; the reading subscriber got {got} Changed, the reading host {} \
             resources/updated",
            updates.load(Ordering::SeqCst)
        );
        assert!(
            during.max(after) < before + RSS_BOUND_KB,
            "the broker grew from {before} kB to {} kB with slow readers",
            during.max(after)
        );
        // The broker is alive and answers.
        ctx.get_active_window()
            .await
            .expect("a read after the flood");
        drop(slow_stream);
        drop(slow_get);
    })
    .await
}

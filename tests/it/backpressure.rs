//! Back-pressure is explicit (`[limits]`, small here so that a few hundred
//! changes do what millions would):
//! - a D-Bus subscriber that stops reading, long enough that the broker's
//!   feed for it overflows, hears `Lagged` (once, or once more per second
//!   it went on falling behind), reads the state again as the interface
//!   asks, and then hears the changes from the current state on (not a
//!   replay of a backlog);
//! - an MCP host that stops reading is disconnected once its queue stayed
//!   full for `reader_stall_s`, and the log says why.

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use mcp_support::*;

/// A python3 (GLib) subscriber: subscribes to windows, stops itself
/// (SIGSTOP: nobody reads its socket), and once continued prints each
/// signal of its subscription as a line: `lagged` or `changed TITLE`. On
/// `Lagged` it does what `Subscription1.xml` asks of a subscriber: reads
/// the state again (`GetActiveWindow`), printed as `read TITLE`.
const SUBSCRIBER: &str = r#"
import os, signal, sys
from gi.repository import Gio, GLib
conn = Gio.DBusConnection.new_for_address_sync(
    sys.argv[1],
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None, None)
r = conn.call_sync("org.contextd.Broker1", "/org/contextd/Broker1", "org.contextd.Context1",
    "Subscribe", GLib.Variant("(as)", (["windows", "windows.titles"],)), GLib.VariantType("(o)"),
    Gio.DBusCallFlags.NONE, 10000, None)
path = r.unpack()[0]
def on_signal(c, sender, p, iface, name, params):
    if name == "Lagged":
        print("lagged", flush=True)
        w = conn.call_sync("org.contextd.Broker1", "/org/contextd/Broker1",
            "org.contextd.Context1", "GetActiveWindow", None, GLib.VariantType("(a{sv})"),
            Gio.DBusCallFlags.NONE, 10000, None).unpack()[0]
        print("read", w.get("title", ""), flush=True)
    elif name == "Changed":
        cat, data = params.unpack()
        print("changed", data.get("window", {}).get("title", ""), flush=True)
conn.signal_subscribe(None, "org.contextd.Subscription1", None, path, None,
    Gio.DBusSignalFlags.NONE, on_signal)
print(path, flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
GLib.MainLoop().run()
"#;

/// For a failure: what the bus daemon holds for each connection
/// (`Debug.Stats`: bytes and messages queued in and out) and where the
/// subscriber's threads wait.
fn where_it_waits(address: &str, pid: u32) -> String {
    let script = r#"
for n in $(dbus-send --bus="$1" --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.ListNames | sed -n 's/.*string "\(:[^"]*\)".*/\1/p'); do
  echo "$n: $(dbus-send --bus="$1" --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.Debug.Stats.GetConnectionStats string:$n | tr -s ' \n' ' ' | grep -o 'string "\(Incoming\|Outgoing\)[A-Za-z]*" variant uint32 [0-9]*' | sed 's/string "\([A-Za-z]*\)" variant uint32 /\1=/g' | tr '\n' ' ')"
done
for t in /proc/$2/task/*; do echo "subscriber thread $t: $(cut -d' ' -f3 $t/stat) $(cat $t/wchan)"; done
"#;
    Command::new("sh")
        .args(["-c", script, "sh", address, &pid.to_string()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .is_some_and(|r| r.trim_start().starts_with('T'))
}

/// Whether an MCP host reading the active window over HTTP sees `title`.
fn active_is(addr: std::net::SocketAddr, tok: &str, session: &str, title: &str) -> bool {
    let (code, msgs) = http_call(
        addr,
        tok,
        session,
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_active_window","arguments":{}}}"#,
    );
    code == 200 && msgs.iter().any(|m| m.to_string().contains(title))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dbus_subscriber_that_stops_reading_hears_lagged_once_then_current_changes() {
    with_timeout(120, async {
        // What the bus holds for a reader counts against its sender's
        // max_incoming_bytes: with a small one, the bus stops reading the
        // broker while the subscriber is stopped, and the broker's feed for
        // the subscription overflows (16 changes).
        let bus = Bus::start_with(r#"<limit name="max_incoming_bytes">200000</limit>"#);
        let home = Home::new();
        home.write_config("[consent]\nundecided = \"deny\"\n[limits]\nchange_feed = 16\n");
        let python = std::fs::canonicalize("/usr/bin/python3").expect("python3");
        let python = format!("exe:{}", python.display());
        let cats: &[&str] = &["windows", "windows.titles"];
        home.write_policy(&[(&python, cats), ("token:lag", cats)]);
        let mut replay = Replay::new(&home);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &["--http", "127.0.0.1:0"]).await;
        let addr = http_addr(&home);
        let tok = token(&bus, &home, "lag");
        let session = http_session(addr, &tok);

        // Everything the bus carries, for a failure: whether the broker
        // sent the subscriber its changes at all.
        let monitor_log = home.dir.path().join("monitor.log");
        let _monitor = scopeguard(
            Command::new("dbus-monitor")
                .args(["--address", &bus.address, "--monitor"])
                .stdout(std::fs::File::create(&monitor_log).expect("monitor log"))
                .stderr(Stdio::null())
                .spawn()
                .expect("dbus-monitor"),
        );
        let mut child = Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(SUBSCRIBER)
            .arg(&bus.address)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3");
        let pid = child.id();
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let _sub = scopeguard(child);
        let mut line = String::new();
        out.read_line(&mut line).expect("path");
        assert!(
            line.starts_with("/org/contextd/"),
            "no subscription: {line:?}"
        );
        eventually(10, "the subscriber stopped", || async {
            stopped(pid).then_some(())
        })
        .await;

        // 400 changes of 1000-character titles while it does not read.
        let title = |i: usize| format!("flood {i} {}", "x".repeat(1000));
        let last = "flood 399 ".to_owned();
        // Lagged is told at most once a second while the feed falls behind
        // (`core::watch::LAG_QUIET`): how many seconds that lasted bounds
        // how many there may be, not how fast the machine is.
        let flood_start = std::time::Instant::now();
        let mut replay = tokio::task::spawn_blocking(move || {
            for i in 0..400 {
                replay.send(&window_line("w1", "org.gnome.TextEditor", &title(i), true));
            }
            replay
        })
        .await
        .expect("flood");
        eventually(60, "the broker applied the flood", || async {
            active_is(addr, &tok, &session, &last).then_some(())
        })
        .await;

        // It reads again; then one change more.
        // SAFETY: kill(2) on the child we started.
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        replay.send(&window_line(
            "w1",
            "org.gnome.TextEditor",
            "current 4711",
            true,
        ));
        // The broker has the change (else a missing signal below would
        // say nothing about delivery).
        eventually(60, "the broker applied \"current 4711\"", || async {
            active_is(addr, &tok, &session, "current 4711").then_some(())
        })
        .await;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut seen: Vec<String> = Vec::new();
        // What the subscriber heard until it knows `title`, by a change or
        // by reading again after a `Lagged`.
        let hear_until = |seen: &mut Vec<String>, title: &str| {
            let changed = format!("changed {title}");
            let read = format!("read {title}");
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let l = rx.recv_timeout(left).unwrap_or_else(|_| {
                    let short: Vec<String> =
                        seen.iter().map(|l| l.chars().take(24).collect()).collect();
                    let monitor = std::fs::read_to_string(&monitor_log).unwrap_or_default();
                    let to_sub: Vec<&str> = monitor
                        .lines()
                        .filter(|l| l.contains("interface=org.contextd.Subscription1"))
                        .collect();
                    panic!(
                        "the subscriber did not learn {title:?} within 60 s; heard {short:?}\n{}\nthe bus carried {} Subscription1 signals; the last ones:\n{}",
                        where_it_waits(&bus.address, pid),
                        to_sub.len(),
                        to_sub[to_sub.len().saturating_sub(8)..].join("\n")
                    )
                });
                let done = l == changed || l == read;
                seen.push(l.clone());
                if done {
                    return l == changed;
                }
            }
        };
        // The storm's end: whether "current 4711" comes as a change or by
        // reading again depends on whether the broker's feed for the
        // subscriber still held the storm when it was made (then it is
        // dropped with the backlog, and a `Lagged` follows).
        hear_until(&mut seen, "current 4711");
        let lagged: Vec<usize> = seen
            .iter()
            .enumerate()
            .filter(|(_, l)| *l == "lagged")
            .map(|(i, _)| i)
            .collect();
        let short: Vec<String> = seen.iter().map(|l| l.chars().take(24).collect()).collect();
        eprintln!("the subscriber heard: {short:?}");
        // Told that it missed changes: once for the storm, or again for
        // what came a second later (never once per burst).
        assert!(!lagged.is_empty(), "no Lagged: {short:?}");
        // One for the storm, one more at the end of each quiet second in
        // which it went on falling behind (`core::watch::LAG_QUIET`; the
        // storm lasted `secs`, from its first change to the last signal
        // heard), and at most one per 16 changes heard besides: never one
        // per burst (400 changes into a feed of 16 would be 25).
        let secs = usize::try_from(flood_start.elapsed().as_secs()).unwrap_or(usize::MAX);
        assert!(
            lagged.len() <= 2 + secs + seen.len() / 16,
            "a Lagged per burst ({secs} s): {short:?}"
        );
        // And then changes again, from the current state on: one change
        // at a time, each learnt before the next is made, until one comes
        // as a change (the first may still find the backlog of the storm;
        // none is lost either way).
        let mut came_as_change = false;
        for i in 0..4 {
            let title = format!("after {i}");
            replay.send(&window_line("w1", "org.gnome.TextEditor", &title, true));
            if hear_until(&mut seen, &title) {
                came_as_change = true;
                break;
            }
        }
        let short: Vec<String> = seen.iter().map(|l| l.chars().take(24).collect()).collect();
        assert!(
            came_as_change,
            "after the storm, four changes made one at a time never came as Changed: {short:?}"
        );
    })
    .await;
}

/// Kill and reap a child on drop.
fn scopeguard(child: std::process::Child) -> impl Drop {
    struct G(std::process::Child);
    impl Drop for G {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    G(child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_host_that_stops_reading_is_disconnected() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_config("[consent]\nundecided = \"deny\"\n[limits]\nreader_stall_s = 1\n");
        home.write_policy(&[(&my_app_id(), &["windows", "windows.titles"])]);
        let mut replay = Replay::new(&home);
        let d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;

        // The test itself is the host (a process on the socket is its own
        // host); it subscribes and then never reads.
        let mut s = UnixStream::connect(runtime(&home).join("mcp.sock")).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut send = |m: &str| {
            s.write_all(m.as_bytes()).expect("write");
            s.write_all(b"\n").expect("newline");
        };
        send(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stops-reading","version":"1"}}}"#,
        );
        let mut line = String::new();
        r.read_line(&mut line).expect("initialize answer");
        send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        send(
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"context://windows/active"}}"#,
        );
        line.clear();
        r.read_line(&mut line).expect("subscribe answer");
        assert!(line.contains(r#""id":2"#), "{line}");

        // Focus moves back and forth until the broker gives up on it.
        let flood = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let mut i = 0usize;
            while started.elapsed() < Duration::from_secs(60) {
                let (a, b) = if i.is_multiple_of(2) { ("w1", "w2") } else { ("w2", "w1") };
                replay.send(&window_line(a, "org.gnome.TextEditor", "a", true));
                replay.send(&window_line(b, "org.mozilla.firefox", "b", false));
                i += 1;
                if i.is_multiple_of(500) && std::fs::read_to_string(&d.stderr_path)
                    .is_ok_and(|l| l.contains("disconnecting an MCP reader"))
                {
                    return (replay, d);
                }
            }
            (replay, d)
        });
        let (_replay, d) = flood.await.expect("flood");
        let log = d.stderr();
        assert!(
            log.lines().any(|l| l.contains("disconnecting an MCP reader")
                && l.contains("stopped reading")),
            "no disconnection logged"
        );
        // The connection is closed: what was queued is read to its end.
        let mut buf = [0u8; 65536];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("the connection stayed open: {e}"),
            }
        }
    })
    .await;
}

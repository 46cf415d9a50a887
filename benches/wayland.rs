//! `make bench` for the Wayland source, in a private headless session
//! (scripts/session.sh):
//!
//! - added focus latency: a bare Wayland client bound to
//!   `zwlr_foreign_toplevel_manager_v1` and the broker's D-Bus subscriber
//!   timestamp the same focus change (driven by `swaymsg`) with one clock;
//!   the difference is what the broker adds (its Wayland thread, the core,
//!   the consent filter, the bus hop). p50/p99 over 200 changes; target
//!   p99 ≤ 1 ms. The CPUs split (common::CpuSplit): sway, its windows and
//!   `swaymsg` on one part, the bus, the broker and the bench on the
//!   other; then one round with the cores shared, for the record.
//! - the daemon's RSS with 300 windows open (examples/wl_toplevels.rs);
//!   target ≤ 20 MB.
//!
//! Prints figures; asserts nothing.

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use common::*;
use contextd::client::proxy::Context1Proxy;
use wayland_client::protocol::wl_registry;
use wayland_client::{Connection, Dispatch, Proxy, QueueHandle, event_created_child};
use wayland_protocols_wlr::foreign_toplevel::v1::client::{
    zwlr_foreign_toplevel_handle_v1 as handle, zwlr_foreign_toplevel_manager_v1 as manager,
};

const CHANGES: usize = 200;
const WARMUP: usize = 20;
const REPS: usize = 3;
const DEMO: [&str; 2] = ["org.contextd.Demo1", "org.contextd.Demo2"];

/// scripts/session.sh (the readers bench starts its session the same way).
pub(crate) fn script() -> PathBuf {
    crate::common::root()
        .to_path_buf()
        .join("scripts/session.sh")
}

/// Stops the session when dropped.
pub(crate) struct SessionGuard(pub(crate) PathBuf);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(&self.0)
            .stderr(Stdio::null())
            .status();
    }
}

/// The session's environment (its env.list).
pub(crate) fn session_env(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("env.list"))
        .expect("env.list")
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

// ---------------------------------------------------------------- bare client

/// The bare client: reports (when, app id) each time a toplevel's `done`
/// carries the activated state it did not have before (the readers bench
/// times its fan-out from it too).
struct Bare {
    tx: std_mpsc::Sender<(Instant, String)>,
    handles: HashMap<u32, (String, bool, bool)>, // app id, activated, pending activated
}

impl Dispatch<wl_registry::WlRegistry, ()> for Bare {
    fn event(
        _: &mut Self,
        reg: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
            && interface == "zwlr_foreign_toplevel_manager_v1"
        {
            let _: manager::ZwlrForeignToplevelManagerV1 = reg.bind(name, version.min(3), qh, ());
        }
    }
}

impl Dispatch<manager::ZwlrForeignToplevelManagerV1, ()> for Bare {
    fn event(
        _: &mut Self,
        _: &manager::ZwlrForeignToplevelManagerV1,
        _: manager::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }

    event_created_child!(Bare, manager::ZwlrForeignToplevelManagerV1, [
        manager::EVT_TOPLEVEL_OPCODE => (handle::ZwlrForeignToplevelHandleV1, ()),
    ]);
}

impl Dispatch<handle::ZwlrForeignToplevelHandleV1, ()> for Bare {
    fn event(
        bare: &mut Self,
        h: &handle::ZwlrForeignToplevelHandleV1,
        event: handle::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let e = bare
            .handles
            .entry(h.id().protocol_id())
            .or_insert_with(|| (String::new(), false, false));
        match event {
            handle::Event::AppId { app_id } => e.0 = app_id,
            handle::Event::State { state } => {
                e.2 = state
                    .chunks_exact(4)
                    .any(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) == 2);
            }
            handle::Event::Done => {
                let now = Instant::now();
                if e.2 && !e.1 {
                    let _ = bare.tx.send((now, e.0.clone()));
                }
                e.1 = e.2;
            }
            _ => {}
        }
    }
}

pub(crate) fn bare_client(env: &[(String, String)]) -> std_mpsc::Receiver<(Instant, String)> {
    let get = |k: &str| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.clone());
    let path = PathBuf::from(get("XDG_RUNTIME_DIR").expect("runtime dir"))
        .join(get("WAYLAND_DISPLAY").expect("display"));
    let stream = std::os::unix::net::UnixStream::connect(&path).expect("connect to sway");
    let (tx, rx) = std_mpsc::channel();
    std::thread::spawn(move || {
        let conn = Connection::from_socket(stream).expect("wayland connection");
        let mut q = conn.new_event_queue();
        conn.display().get_registry(&q.handle(), ());
        let mut bare = Bare {
            tx,
            handles: HashMap::new(),
        };
        while q.blocking_dispatch(&mut bare).is_ok() {}
    });
    rx
}

// ---------------------------------------------------------------- RSS
// (rss_kib and wl_toplevels_bin are in common.rs)

pub(crate) fn main() {
    block_on(1, run());
}

async fn run() {
    let bookworm = measure(None).await;
    let trixie = match crate::common::desktop_root("desktop13", "the Debian 13 root") {
        Ok(r) => Ok(measure(Some(&r)).await),
        Err(why) => Err(why),
    };
    let sid = match crate::common::desktop_root("desktop-testing", "the Debian testing root") {
        Ok(r) => Ok(measure(Some(&r)).await),
        Err(why) => Err(why),
    };
    println!(
        "contextd Wayland benchmark ({REPS} x {CHANGES} focus changes after {WARMUP} warm-up)"
    );
    bookworm.print("headless sway 1.7 (Debian 12): wlr foreign-toplevel");
    match trixie {
        Ok(f) => f.print("headless sway 1.10 (Debian 13): ext foreign-toplevel list + wlr states"),
        Err(why) => println!("  headless sway 1.10 (Debian 13): not measured: {why}"),
    }
    match sid {
        Ok(f) => f.print("headless sway 1.12 (Debian sid): ext foreign-toplevel list + wlr states"),
        Err(why) => println!("  headless sway 1.12 (Debian sid): not measured: {why}"),
    }
}

/// What one sway gave.
struct WaylandFigures {
    reps: Vec<(Duration, Duration, Duration)>,
    /// The round with the cores shared (p50, p99, max), when they were
    /// split for the others.
    shared: Option<(Duration, Duration, Duration)>,
    split: Option<String>,
    p99s: Vec<Duration>,
    p99: Duration,
    missed: usize,
    rss_idle: u64,
    rss_300: u64,
    parts_300: String,
    listed: Duration,
    list_ms: f64,
}

/// The figures of the sway of `session.sh start --root ROOT` (or the
/// host's).
async fn measure(root: Option<&str>) -> WaylandFigures {
    let dir = tempfile::tempdir().expect("tempdir");
    let sdir = dir.path().join("s");
    let st = Command::new(script())
        .arg("start")
        .arg(&sdir)
        .arg("--no-pipewire")
        .args(root.map(|r| ["--root", r]).into_iter().flatten())
        .stdout(Stdio::null())
        .status()
        .expect("session.sh");
    assert!(st.success(), "session.sh start failed");
    let _session = SessionGuard(sdir.clone());
    let env = session_env(&sdir);
    let get = |k: &str| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.clone());
    let address = get("DBUS_SESSION_BUS_ADDRESS").expect("bus");

    grant_self(&dir.path().join("config"), &["windows", "windows.titles"]);
    let daemon = Proc(
        Command::new(env!("CARGO_BIN_EXE_contextd"))
            .env_clear()
            .envs(env.iter().cloned())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("HOME", dir.path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn contextd"),
    );
    let pid = daemon.0.id();

    let conn = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("connect");
    let ctx = loop {
        if let Ok(c) = Context1Proxy::new(&conn).await
            && c.list_windows().await.is_ok_and(|w| w.len() == 2)
        {
            break c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut changed = Subscriber::new(&address, &["windows"]);
    let bare = bare_client(&env);
    // Let the bare client see the initial windows.
    tokio::time::sleep(Duration::from_millis(200)).await;
    while bare.try_recv().is_ok() {}

    // Three repetitions (warm-up before the first), each its p50, p99
    // and max; the verdict is on the median p99. The CPUs split for them
    // (sway and its windows on one part), then shared for one more.
    let split = CpuSplit::new();
    let desktop = session_pids(&sdir, |n| n == "sway" || n.starts_with("window-"));
    if let Some(s) = &split {
        desktop.iter().for_each(|&p| s.desktop(p));
        session_pids(&sdir, |n| n == "dbus")
            .into_iter()
            .chain([pid])
            .for_each(|p| s.measured(p));
        s.measured(std::process::id());
    }
    let mut reps: Vec<(Duration, Duration, Duration)> = Vec::new();
    let mut shared = None;
    let mut missed = 0;
    for rep in 0..REPS + 1 {
        let sharing = rep == REPS;
        if sharing {
            match &split {
                Some(s) => s.share(&desktop),
                None => break,
            }
        }
        let mut added = Vec::with_capacity(CHANGES);
        let warmup = if rep == 0 { WARMUP } else { 0 };
        for i in 0..(CHANGES + warmup) {
            let target = DEMO[i % 2];
            let mut swaymsg = Command::new("swaymsg");
            if let (Some(s), false) = (&split, sharing) {
                s.desktop_command(&mut swaymsg);
            }
            let st = swaymsg
                .env("SWAYSOCK", get("SWAYSOCK").expect("swaysock"))
                .arg(format!("[app_id={target}] focus"))
                .stdout(Stdio::null())
                .status()
                .expect("swaymsg");
            assert!(st.success());
            // The broker's signal.
            let broker_at = loop {
                let sig = tokio::time::timeout(Duration::from_secs(2), changed.next()).await;
                let Ok(Some((now, d))) = sig else {
                    break None;
                };
                if d["event"] == "focus" && d["window"]["app_id"] == target {
                    break Some(now);
                }
            };
            // The bare client's event (already queued: it is faster).
            let bare_at = loop {
                match bare.recv_timeout(Duration::from_secs(2)) {
                    Ok((t, app)) if app == target => break Some(t),
                    Ok(_) => continue,
                    Err(_) => break None,
                }
            };
            match (broker_at, bare_at) {
                (Some(b), Some(w)) if i >= warmup => added.push(b.saturating_duration_since(w)),
                (Some(_), Some(_)) => {}
                _ => missed += (!sharing) as usize,
            }
        }
        added.sort();
        let figures = (
            pct(&added, 0.5),
            pct(&added, 0.99),
            *added.last().unwrap_or(&Duration::ZERO),
        );
        if sharing {
            shared = Some(figures);
        } else {
            reps.push(figures);
        }
    }
    let mut p99s: Vec<Duration> = reps.iter().map(|r| r.1).collect();
    p99s.sort();
    let p99 = p99s[p99s.len() / 2];

    // RSS: idle with the two windows, then with 300 more.
    let rss_idle = rss_kib(pid);
    drop(changed);
    let mut cmd = Command::new(wl_toplevels_bin());
    let mut many = Proc(
        cmd.env_clear()
            .envs(env.iter().cloned())
            .args(["300", "org.example.Bench", "Bench window "])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("wl_toplevels"),
    );
    let mut out = BufReader::new(many.0.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    let t0 = Instant::now();
    loop {
        if ctx.list_windows().await.is_ok_and(|w| w.len() == 302) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "300 windows not listed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let listed = t0.elapsed();
    let rss_300 = rss_kib(pid);
    let parts_300 = rss_parts(pid);
    // A full listing of 302 windows, timed.
    let t = Instant::now();
    let n = 20;
    for _ in 0..n {
        ctx.list_windows().await.expect("list");
    }
    let list_ms = t.elapsed().as_secs_f64() * 1000.0 / n as f64;
    if let Some(stdin) = many.0.stdin.as_mut() {
        let _ = writeln!(stdin, "quit");
    }

    drop(daemon);
    WaylandFigures {
        reps,
        shared,
        split: split
            .as_ref()
            .map(|s| s.describe("sway, its windows and swaymsg")),
        p99s,
        p99,
        missed,
        rss_idle,
        rss_300,
        parts_300: parts_300.to_string(),
        listed,
        list_ms,
    }
}

impl WaylandFigures {
    fn print(&self, name: &str) {
        let WaylandFigures {
            reps,
            shared,
            split,
            p99s,
            p99,
            missed,
            rss_idle,
            rss_300,
            parts_300,
            listed,
            list_ms,
        } = self;
        let (p99, missed, rss_idle, rss_300, listed, list_ms) =
            (*p99, *missed, *rss_idle, *rss_300, *listed, *list_ms);
        println!("  {name}");
        println!(
            "    runs 1-{REPS}: {}",
            split
                .as_deref()
                .unwrap_or("one CPU: the cores shared in every run")
        );
        let runs = reps
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("run {}", i + 1), r))
            .chain(
                shared
                    .iter()
                    .map(|r| ("for the record, the cores shared (no target)".to_owned(), r)),
            );
        for (run, (p50, p99, max)) in runs {
            println!(
                "    {run}: added focus latency (broker subscriber - bare wlr client)  p50 {:>7.1} µs   p99 {:>7.1} µs   max {:>7.1} µs",
                us(*p50),
                us(*p99),
                us(*max)
            );
        }
        println!(
            "    added p99: min {:.1} µs  median {:.1} µs  max {:.1} µs",
            us(p99s[0]),
            us(p99),
            us(p99s[p99s.len() - 1])
        );
        println!(
            "    median p99 target <= 1 ms: {}{}",
            verdict(p99 <= Duration::from_millis(1)),
            if missed > 0 {
                format!(" ({missed} changes not seen by both)")
            } else {
                String::new()
            }
        );
        println!(
            "    daemon RSS: {:.1} MB with 2 windows, {:.1} MB with 302 (target <= 20 MB: {})",
            rss_idle as f64 / 1024.0,
            rss_300 as f64 / 1024.0,
            verdict(rss_300 <= 20 * 1024)
        );
        println!("    of which with 302: {parts_300}");
        println!(
            "    300 windows listed {:.0} ms after the client mapped them; ListWindows of 302: {list_ms:.2} ms",
            listed.as_secs_f64() * 1000.0
        );
    }
}

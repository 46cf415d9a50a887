//! `make bench` for the PipeWire source, in a private session
//! (scripts/session.sh: PipeWire + WirePlumber with null devices).
//!
//! 1. Latency: 100 times, `pw-play` starts; we time from its spawn to the
//!    first `Changed` for its stream on a `media.playback` subscription,
//!    and, in the same run, to a bare pipewire-rs registry listener seeing
//!    its node appear (the floor: the earliest any PipeWire client can know
//!    the node exists). Prints p50/p99 of both and of the difference.
//! 2. Idle: with 20 streams playing and nothing changing, the daemon's CPU
//!    ticks (utime + stime from /proc/PID/stat) over 10 s, three times.
//!
//! Prints figures; asserts nothing (timing belongs here, not in tests).

use crate::common;
use crate::pipewire_client;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;

const STARTS: usize = 100;
const REPS: usize = 3;
const IDLE_STREAMS: usize = 20;
const IDLE_SECS: u64 = 10;

/// The session of scripts/session.sh, stopped on drop.
struct Session {
    dir: PathBuf,
    env: HashMap<String, String>,
}

fn script() -> PathBuf {
    crate::common::root().join("scripts/session.sh")
}

impl Session {
    fn start(dir: &Path) -> Session {
        let st = Command::new(script())
            .arg("start")
            .arg(dir)
            .arg("--no-sway")
            .stdout(Stdio::null())
            .status()
            .expect("session.sh");
        assert!(st.success(), "session.sh start failed");
        let env = std::fs::read_to_string(dir.join("env.list"))
            .expect("env.list")
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Session {
            dir: dir.to_owned(),
            env,
        }
    }

    fn get(&self, k: &str) -> &str {
        self.env.get(k).map(String::as_str).unwrap_or("")
    }

    fn command(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        for (k, v) in &self.env {
            if v.is_empty() {
                c.env_remove(k);
            } else {
                c.env(k, v);
            }
        }
        c.stdout(Stdio::null()).stderr(Stdio::null());
        c
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

pub(crate) fn main() {
    block_on(1, run());
}

async fn run() {
    let dir = tempfile::Builder::new()
        .prefix("ctxd-bench")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let session = Session::start(&dir.path().join("s"));
    let home = dir.path().join("home");
    grant_self(&home.join("config"), &["media.playback", "media.capture"]);
    let wav = home.join("tone.wav");
    pipewire_client::write_tone(&wav, 120);

    let mut daemon_cmd = session.command(env!("CARGO_BIN_EXE_contextd"));
    daemon_cmd
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("HOME", &home)
        .env("RUST_LOG", "warn");
    let daemon = Proc(daemon_cmd.spawn().expect("contextd"));
    let conn = zbus::connection::Builder::address(session.get("DBUS_SESSION_BUS_ADDRESS"))
        .build()
        .await
        .expect("connect");
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    let t = Instant::now();
    loop {
        let up = ctx.list_sources().await.ok().is_some_and(|v| {
            v.iter()
                .map(dict_to_json)
                .any(|s| s["name"] == "pipewire" && s["available"] == true)
        });
        if up {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "broker not up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut changed = Subscriber::new(session.get("DBUS_SESSION_BUS_ADDRESS"), &["media.playback"]);
    let socket = pipewire_client::socket_of(session.get("PIPEWIRE_RUNTIME_DIR"));
    let (_listener, seen) = pipewire_client::watch_nodes(&socket);
    while seen.try_recv().is_ok() {}

    // 1. Latency, three repetitions of STARTS (the first after 5 warm-up
    // starts). The floor and the broker see the same start, so each
    // repetition pairs them; a loaded machine shows as a slow floor. The
    // CPUs split (common::CpuSplit): PipeWire, WirePlumber and each
    // pw-play on one part, the bus, the broker and the bench (the bare
    // listener included) on the other; then one round with the cores
    // shared, for the record.
    println!(
        "contextd PipeWire benchmark ({REPS} x {STARTS} pw-play starts after 5 warm-up; times from pw-play's spawn)"
    );
    let split = CpuSplit::new();
    let stack = session_pids(&session.dir, |n| n == "pipewire" || n == "wireplumber");
    match &split {
        Some(s) => {
            stack.iter().for_each(|&p| s.desktop(p));
            s.measured(daemon.0.id());
            session_pids(&session.dir, |n| n == "dbus")
                .into_iter()
                .for_each(|p| s.measured(p));
            s.measured(std::process::id());
            println!(
                "  runs 1-{REPS}: {}",
                s.describe("PipeWire, WirePlumber and pw-play")
            );
        }
        None => println!("  one CPU: the cores shared in every run"),
    }
    let (mut r50s, mut r99s) = (Vec::new(), Vec::new());
    for rep in 0..REPS + 1 {
        let shared = rep == REPS;
        if shared {
            match &split {
                Some(s) => s.share(&stack),
                None => break,
            }
        }
        let mut broker = Vec::with_capacity(STARTS);
        let mut floor = Vec::with_capacity(STARTS);
        let mut extra = Vec::with_capacity(STARTS);
        let warmup = if rep == 0 { 5 } else { 0 };
        for i in 0..STARTS + warmup {
            let mut cmd = session.command("pw-play");
            cmd.arg(&wav);
            if let (Some(s), false) = (&split, shared) {
                s.desktop_command(&mut cmd);
            }
            let t0 = Instant::now();
            let mut play = Proc(cmd.spawn().expect("pw-play"));
            let pid = play.0.id();
            // Runs do not overlap (each waits for its stream's end), so the
            // next stream opened is this pw-play's.
            let got = loop {
                let (got, sig) = tokio::time::timeout(Duration::from_secs(10), changed.next())
                    .await
                    .expect("Changed within 10 s")
                    .expect("open");
                if sig["event"] == "opened" {
                    break got;
                }
            };
            // The listener's node: the next playback stream node to appear.
            let node_seen = loop {
                let n = seen
                    .recv_timeout(Duration::from_secs(10))
                    .expect("the bare listener saw the node");
                if n.props.get("media.class").map(String::as_str) == Some("Stream/Output/Audio") {
                    break n.at;
                }
            };
            if i >= warmup {
                broker.push(got - t0);
                floor.push(node_seen - t0);
                extra.push(got.saturating_duration_since(node_seen));
            }
            // Stop it and wait until the broker says so, so that runs do not overlap.
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            let _ = play.0.wait();
            loop {
                let (_, sig) = tokio::time::timeout(Duration::from_secs(10), changed.next())
                    .await
                    .expect("closed within 10 s")
                    .expect("open");
                if sig["event"] == "closed" {
                    break;
                }
            }
        }
        broker.sort();
        floor.sort();
        extra.sort();
        let ms = |v: &[Duration], p: f64| us(pct(v, p)) / 1000.0;
        let r50 = us(pct(&broker, 0.5)) / us(pct(&floor, 0.5)).max(1.0);
        let r99 = us(pct(&broker, 0.99)) / us(pct(&floor, 0.99)).max(1.0);
        let run = if shared {
            "for the record, the cores shared (no target)".to_owned()
        } else {
            format!("run {}", rep + 1)
        };
        println!(
            "  {run}: bare registry listener (floor) p50 {:.2} ms p99 {:.2} ms | subscriber's Changed p50 {:.2} ms p99 {:.2} ms | extra p50 {:.2} ms p99 {:.2} ms | {r50:.2}x p50, {r99:.2}x p99",
            ms(&floor, 0.5),
            ms(&floor, 0.99),
            ms(&broker, 0.5),
            ms(&broker, 0.99),
            ms(&extra, 0.5),
            ms(&extra, 0.99),
        );
        if !shared {
            r50s.push(r50);
            r99s.push(r99);
        }
    }
    let (a, m50, c) = min_median_max(&r50s);
    println!("  ratio p50: min {a:.2}x  median {m50:.2}x  max {c:.2}x");
    let (a, m99, c) = min_median_max(&r99s);
    println!(
        "  ratio p99: min {a:.2}x  median {m99:.2}x  max {c:.2}x (target <= 1.2x: {})",
        verdict(m99 <= 1.2)
    );

    // 2. Idle with 20 streams, with no subscription (its signals would
    // only be counted as work for the broker).
    drop(changed);
    let mut players = Vec::new();
    for _ in 0..IDLE_STREAMS {
        let mut cmd = session.command("pw-play");
        cmd.arg(&wav);
        players.push(Proc(cmd.spawn().expect("pw-play")));
    }
    let t = Instant::now();
    loop {
        let n = ctx
            .get_media()
            .await
            .ok()
            .map(|m| dict_to_json(&m))
            .and_then(|m| {
                m["media.playback"]
                    .as_array()
                    .map(|a| a.iter().filter(|s| s["active"] == true).count())
            })
            .unwrap_or(0);
        if n == IDLE_STREAMS {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "only {n} streams running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the start-up settle, then watch: threads of the runtime's
    // blocking pool that worked during the start-up end 10 s after their
    // last task (tokio's keep-alive); strace saw their exits inside the
    // window. A transient of the start-up, not idle work.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let pid = daemon.0.id();
    // Three windows of IDLE_SECS; the verdict on the median.
    let mut ticks = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let before = cpu_ticks(pid);
        tokio::time::sleep(Duration::from_secs(IDLE_SECS)).await;
        ticks.push((cpu_ticks(pid) - before) as f64);
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let (a, m, c) = min_median_max(&ticks);
    println!(
        "  idle: {IDLE_STREAMS} streams playing, nothing changing: CPU ticks per {IDLE_SECS} s min {a} median {m} max {c} (1 tick = 1/{hz} s; target 0: {})",
        verdict(m == 0.0)
    );
    drop(players);
    drop(daemon);
}

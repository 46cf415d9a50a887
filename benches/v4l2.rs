//! `make bench` for cameras opened without PipeWire (the `v4l2` source).
//!
//! Three rounds of each; every target printed min/median/max and decided
//! on the median.
//!
//! 1. Latency: 100 times this process opens a video node (a regular file
//!    `video0` in the source's configured directory) and holds it; we time
//!    from the open to the `opened` `Changed` on a `media.capture`
//!    subscription, and, in the same run, to a bare inotify watcher of the
//!    same node seeing `IN_OPEN` (the floor: the earliest any process can
//!    know). Target: within 100 ms.
//! 2. Idle: with a node held open and nothing happening, the daemon's CPU
//!    ticks over 10 s, three times (target 0: the source waits on inotify, never polls).
//!
//! Prints figures; asserts nothing.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use contextd::client::json::{dict_to_json, to_json};
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use serde_json::Value;

const OPENS: usize = 100;
const IDLE_SECS: u64 = 10;
const REPS: usize = 3;

fn data_of(sig: &contextd::client::proxy::Changed) -> Value {
    let args = sig.args().expect("args");
    args.data()
        .iter()
        .map(|(k, v)| (k.clone(), to_json(v)))
        .collect()
}

/// A bare watcher of `node`'s opens, on a thread of its own: the instant
/// of each `IN_OPEN`.
fn watch_opens(node: &Path) -> std::sync::mpsc::Receiver<Instant> {
    let mut ino = inotify::Inotify::init().expect("inotify");
    ino.watches()
        .add(node, inotify::WatchMask::OPEN)
        .expect("watch");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            let Ok(events) = ino.read_events_blocking(&mut buf) else {
                return;
            };
            let at = Instant::now();
            for _ in events {
                if tx.send(at).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

async fn next_event(
    changed: &mut (impl futures_util::Stream<Item = contextd::client::proxy::Changed> + Unpin),
    want: &str,
) -> Instant {
    loop {
        let sig = tokio::time::timeout(Duration::from_secs(10), changed.next())
            .await
            .expect("Changed within 10 s")
            .expect("open");
        let at = Instant::now();
        if data_of(&sig)["event"] == want {
            return at;
        }
    }
}

pub(crate) fn main() {
    block_on(2, run());
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dev = dir.path().join("dev");
    std::fs::create_dir_all(&dev).expect("mkdir");
    let node = dev.join("video0");
    std::fs::write(&node, b"").expect("node");
    let (_bus, address) = start_bus(dir.path());
    let config = dir.path().join("config");
    grant_self(&config, &["media.capture"]);
    // Only this source: the others (none of whose services run here) would
    // retry on their backoff and count in the idle figure.
    std::fs::write(
        config.join("contextd/config.toml"),
        format!(
            "[sources]\ndisabled = [\"pipewire\", \"login1\", \"upower\", \"networkmanager\", \"notifications\", \"mpris\", \"wayland\", \"selection\", \"geoclue\", \"recent\"]\n\n[sources.v4l2]\ndir = \"{}\"\n",
            dev.display()
        ),
    )
    .expect("config");
    let mut cmd = contextd(dir.path());
    cmd.env("DBUS_SESSION_BUS_ADDRESS", &address);
    let daemon = Proc(cmd.spawn().expect("contextd"));
    let pid = daemon.0.id();
    let conn = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("bus");
    let t = Instant::now();
    let ctx = loop {
        if let Ok(ctx) = Context1Proxy::new(&conn).await
            && ctx.list_sources().await.ok().is_some_and(|v| {
                v.iter()
                    .map(dict_to_json)
                    .any(|s| s["name"] == "v4l2" && s["available"] == true)
            })
        {
            break ctx;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "broker not up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let path = ctx.subscribe(&["media.capture"]).await.expect("subscribe");
    let sub = Subscription1Proxy::builder(&conn)
        .path(path)
        .build()
        .await
        .expect("sub");
    let mut changed = sub.receive_changed().await.expect("changed");
    let opens = watch_opens(&node);

    // Three rounds (the warm-up before the first); each target is
    // printed min/median/max and decided on the median.
    let mut rounds: Vec<[Vec<Duration>; 3]> = Vec::with_capacity(REPS);
    for rep in 0..REPS {
        let warmup = if rep == 0 { 5 } else { 0 };
        let (mut broker, mut floor, mut extra) = (vec![], vec![], vec![]);
        for i in 0..OPENS + warmup {
            let t0 = Instant::now();
            let held = std::fs::File::open(&node).expect("open");
            let got = next_event(&mut changed, "opened").await;
            let seen = opens
                .recv_timeout(Duration::from_secs(10))
                .expect("IN_OPEN");
            drop(held);
            next_event(&mut changed, "closed").await;
            while opens.try_recv().is_ok() {}
            if i >= warmup {
                broker.push(got - t0);
                floor.push(seen - t0);
                extra.push(got.saturating_duration_since(seen));
            }
        }
        for v in [&mut broker, &mut floor, &mut extra] {
            v.sort();
        }
        rounds.push([broker, floor, extra]);
    }
    println!(
        "v4l2 camera source ({REPS} x {OPENS} opens of a video node held by this process, after 5 warm-up):"
    );
    for (n, [broker, floor, extra]) in rounds.iter().enumerate() {
        println!(
            "  run {}: open → subscriber's Changed   p50 {:8.1} µs   p99 {:8.1} µs",
            n + 1,
            us(pct(broker, 0.5)),
            us(pct(broker, 0.99)),
        );
        println!(
            "         open → bare inotify watcher   p50 {:8.1} µs   p99 {:8.1} µs (floor)",
            us(pct(floor, 0.5)),
            us(pct(floor, 0.99))
        );
        println!(
            "         added by the broker           p50 {:8.1} µs   p99 {:8.1} µs (ratio p50 {:.1}×)",
            us(pct(extra, 0.5)),
            us(pct(extra, 0.99)),
            us(pct(broker, 0.5)) / us(pct(floor, 0.5)).max(1.0)
        );
    }
    let p99s: Vec<f64> = rounds.iter().map(|r| us(pct(&r[0], 0.99))).collect();
    let (a, m, b) = min_median_max(&p99s);
    println!(
        "  open → subscriber's Changed p99: min {a:.1} µs  median {m:.1} µs  max {b:.1} µs (target ≤ 100 ms: {})",
        verdict(m <= 100_000.0)
    );

    // Idle: a node held open, nothing happening; three windows of
    // IDLE_SECS.
    let _held = std::fs::File::open(&node).expect("open");
    next_event(&mut changed, "opened").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut ticks = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let before = cpu_ticks(pid);
        tokio::time::sleep(Duration::from_secs(IDLE_SECS)).await;
        ticks.push((cpu_ticks(pid) - before) as f64);
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let (a, m, b) = min_median_max(&ticks);
    println!(
        "  idle: a camera held, nothing changing: CPU ticks per {IDLE_SECS} s min {a} median {m} max {b} (1 tick = 1/{hz} s; target 0: {})",
        verdict(m == 0.0)
    );
    drop(daemon);
}

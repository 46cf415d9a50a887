//! `make bench` for the foundation: a consent-checked `GetActiveWindow`
//! against `org.freedesktop.DBus.Peer.Ping` to the same daemon in the same
//! run (the floor: a round trip through the bus to this process), and the
//! time from process start to the bus name owned.
//!
//! Prints figures and ratios; asserts nothing (timing belongs here, not in
//! tests).

#[path = "common.rs"]
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;

const CALLS: usize = 2000;
const WARMUP: usize = 200;

async fn time_calls(conn: &zbus::Connection, iface: &str, member: &str, n: usize) -> Vec<Duration> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = conn
            .call_method(
                Some("org.contextd.Broker1"),
                "/org/contextd/Broker1",
                Some(iface),
                member,
                &(),
            )
            .await;
        v.push(t.elapsed());
        if let Err(e) = r {
            panic!("{iface}.{member} failed: {e}");
        }
    }
    v
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_bus, address) = start_bus(dir.path());
    let cfg = dir.path().join("config/contextd");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    let me = std::fs::read_link("/proc/self/exe").expect("exe");
    std::fs::write(
        cfg.join("policy.toml"),
        format!(
            "[[grant]]\napp = \"exe:{}\"\ncategories = [\"windows\", \"windows.titles\"]\n",
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

    let conn = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("connect");
    let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");

    // Start-up: spawn → NameOwnerChanged for our name, 10 times.
    let mut startups = Vec::new();
    let mut daemon = None;
    for i in 0..10 {
        let mut owners = dbus.receive_name_owner_changed().await.expect("signal");
        let t = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_contextd"))
            .arg("--replay")
            .arg(&replay)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("HOME", dir.path())
            .env("RUST_LOG", "off")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn contextd");
        let proc_ = Proc(child);
        loop {
            let sig = tokio::time::timeout(Duration::from_secs(10), owners.next())
                .await
                .expect("name owned within 10 s")
                .expect("stream");
            let args = sig.args().expect("args");
            if args.name().as_str() == "org.contextd.Broker1" && args.new_owner().is_some() {
                break;
            }
        }
        startups.push(t.elapsed());
        if i == 9 {
            daemon = Some(proc_);
        } else {
            let pid = proc_.0.id() as i32;
            // SAFETY: kill(2) on our child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let mut p = proc_;
            let _ = p.0.wait();
            loop {
                let name = zbus::names::BusName::try_from("org.contextd.Broker1").expect("name");
                if !dbus.name_has_owner(name).await.unwrap_or(true) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    let _daemon = daemon;
    startups.sort();

    // Warm up both paths (identity cache, allocator, bus).
    time_calls(&conn, "org.freedesktop.DBus.Peer", "Ping", WARMUP).await;
    time_calls(&conn, "org.contextd.Context1", "GetActiveWindow", WARMUP).await;

    // Interleave blocks so that drift hits both alike.
    let mut ping = Vec::with_capacity(CALLS);
    let mut gaw = Vec::with_capacity(CALLS);
    for _ in 0..(CALLS / 100) {
        ping.extend(time_calls(&conn, "org.freedesktop.DBus.Peer", "Ping", 100).await);
        gaw.extend(time_calls(&conn, "org.contextd.Context1", "GetActiveWindow", 100).await);
    }
    ping.sort();
    gaw.sort();
    let (p50, p99) = (pct(&ping, 0.5), pct(&ping, 0.99));
    let (g50, g99) = (pct(&gaw, 0.5), pct(&gaw, 0.99));
    let r50 = us(g50) / us(p50);
    let r99 = us(g99) / us(p99);
    let s50 = pct(&startups, 0.5);

    println!(
        "contextd foundation benchmark ({CALLS} calls each, interleaved, after {WARMUP} warm-up)"
    );
    println!(
        "  Peer.Ping (floor)           p50 {:>8.1} µs   p99 {:>8.1} µs",
        us(p50),
        us(p99)
    );
    println!(
        "  Context1.GetActiveWindow    p50 {:>8.1} µs   p99 {:>8.1} µs",
        us(g50),
        us(g99)
    );
    println!(
        "  ratio p50 {r50:.2}x (target <= 1.3x: {})",
        verdict(r50 <= 1.3)
    );
    println!(
        "  ratio p99 {r99:.2}x (target <= 2.0x: {})",
        verdict(r99 <= 2.0)
    );
    println!(
        "  start to name owned         p50 {:>8.1} ms   max {:>6.1} ms (target <= 100 ms: {})",
        us(s50) / 1000.0,
        us(*startups.last().unwrap_or(&Duration::ZERO)) / 1000.0,
        verdict(s50 <= Duration::from_millis(100))
    );
}

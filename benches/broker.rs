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
    block_on(1, run());
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_bus, address) = start_bus(dir.path());
    grant_self(&dir.path().join("config"), &["windows", "windows.titles"]);
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
    // The anchor: a permission lookup of xdg-desktop-portal's permission
    // store on the same bus, the closest thing a desktop has today.
    let store = Command::new("/usr/libexec/xdg-permission-store")
        .arg("--replace")
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
        .map(Proc);
    let mut lookup = Vec::new();
    if store.is_some() {
        let ps = "org.freedesktop.impl.portal.PermissionStore";
        let ps_path = "/org/freedesktop/impl/portal/PermissionStore";
        let mut ready = false;
        for _ in 0..200 {
            let r = conn
                .call_method(
                    Some(ps),
                    ps_path,
                    Some(ps),
                    "SetPermission",
                    &(
                        "contextd-bench",
                        true,
                        "windows",
                        "org.example.App",
                        vec!["yes"],
                    ),
                )
                .await;
            if r.is_ok() {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if ready {
            for i in 0..(WARMUP + CALLS) {
                let t = Instant::now();
                let r = conn
                    .call_method(
                        Some(ps),
                        ps_path,
                        Some(ps),
                        "Lookup",
                        &("contextd-bench", "windows"),
                    )
                    .await;
                if i >= WARMUP {
                    lookup.push(t.elapsed());
                }
                if let Err(e) = r {
                    eprintln!("permission store Lookup failed: {e}");
                    lookup.clear();
                    break;
                }
            }
        }
    }
    lookup.sort();

    // Audit throughput: every GetActiveWindow is audited. 16 clients in
    // parallel for 2 s, against Ping with the same load as the floor.
    let load = |iface: &'static str, member: &'static str| {
        let address = address.clone();
        async move {
            let mut handles = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(2);
            for _ in 0..16 {
                let c = zbus::connection::Builder::address(address.as_str())
                    .build()
                    .await
                    .expect("connect");
                handles.push(tokio::spawn(async move {
                    let mut n = 0u64;
                    let mut lat = Vec::new();
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        if c.call_method(
                            Some("org.contextd.Broker1"),
                            "/org/contextd/Broker1",
                            Some(iface),
                            member,
                            &(),
                        )
                        .await
                        .is_err()
                        {
                            break;
                        }
                        lat.push(t.elapsed());
                        n += 1;
                    }
                    (n, lat)
                }));
            }
            let mut total = 0;
            let mut lat = Vec::new();
            for h in handles {
                if let Ok((n, l)) = h.await {
                    total += n;
                    lat.extend(l);
                }
            }
            lat.sort();
            (total as f64 / 2.0, lat)
        }
    };
    let (ping_rps, ping_lat) = load("org.freedesktop.DBus.Peer", "Ping").await;
    let (gaw_rps, gaw_lat) = load("org.contextd.Context1", "GetActiveWindow").await;

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
    if lookup.is_empty() {
        println!("  xdg-permission-store Lookup: not measured (xdg-desktop-portal not installed?)");
    } else {
        let (l50, l99) = (pct(&lookup, 0.5), pct(&lookup, 0.99));
        println!(
            "  PermissionStore.Lookup      p50 {:>8.1} µs   p99 {:>8.1} µs (anchor)",
            us(l50),
            us(l99)
        );
        println!(
            "  consent-checked read vs permission-store lookup at p50: {:.2}x ({})",
            us(g50) / us(l50),
            if g50 < l50 {
                "faster, meets target"
            } else {
                "NOT faster: MISSES target"
            }
        );
    }
    println!(
        "  16 clients for 2 s: Ping {:>8.0} calls/s (p50 {:.1} µs); audited GetActiveWindow {:>8.0} calls/s (p50 {:.1} µs, p99 {:.1} µs)",
        ping_rps,
        us(pct(&ping_lat, 0.5)),
        gaw_rps,
        us(pct(&gaw_lat, 0.5)),
        us(pct(&gaw_lat, 0.99))
    );
    println!(
        "  audited throughput {:.2}x of the bus floor (target 10 000 audited calls/s: {})",
        gaw_rps / ping_rps,
        verdict(gaw_rps >= 10_000.0)
    );
    let _store = store;
    println!(
        "  start to name owned         p50 {:>8.1} ms   max {:>6.1} ms (target <= 100 ms: {})",
        us(s50) / 1000.0,
        us(*startups.last().unwrap_or(&Duration::ZERO)) / 1000.0,
        verdict(s50 <= Duration::from_millis(100))
    );
}

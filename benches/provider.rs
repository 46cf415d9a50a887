//! `make bench` for org.contextd.Provider1, in one run against one daemon:
//!
//! - publish → a subscribed reader's `Changed`: the added latency over a
//!   D-Bus `Peer.Ping` round trip measured interleaved with it (target
//!   ≤ 2× the ping's p99). An app may publish 10 times a second, so the
//!   samples come at that pace (30 s).
//! - 1000 providers with 6 kinds each (benches/provider_child.c, built
//!   here with gcc and GIO, each under its own hard link so that the broker
//!   sees 1000 apps): the daemon's RSS (target ≤ 20 MB in all), and
//!   `GetProvided("document")` (1000 entries) against `Peer.Ping`.
//!
//! Prints figures and ratios; asserts nothing.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;

const PROVIDERS: usize = 1000;
const PUBLISH_SAMPLES: usize = 300;
const CALLS: usize = 500;

pub(crate) fn main() {
    block_on(2, run());
}

async fn ping(conn: &zbus::Connection) -> Duration {
    let t = Instant::now();
    conn.call_method(
        Some("org.contextd.Broker1"),
        "/org/contextd/Broker1",
        Some("org.freedesktop.DBus.Peer"),
        "Ping",
        &(),
    )
    .await
    .expect("Ping");
    t.elapsed()
}

/// Build the child publisher; `None` (and why) when GIO's headers are
/// missing.
fn build_child(dir: &Path) -> Result<std::path::PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/provider_child.c");
    let out = dir.join("provider_child");
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "gio-2.0"])
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    if !flags.status.success() {
        return Err("gio-2.0 is missing (scripts/deps.sh installs libglib2.0-dev)".into());
    }
    let flags = String::from_utf8_lossy(&flags.stdout).into_owned();
    let st = Command::new("gcc")
        .arg("-O2")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .args(flags.split_whitespace())
        .status()
        .map_err(|e| format!("gcc: {e}"))?;
    if !st.success() {
        return Err(format!("gcc failed: {st}"));
    }
    Ok(out)
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_bus, address) = start_bus(dir.path());
    grant_self(&dir.path().join("config"), &["provided.*"]);
    let daemon = Proc(
        contextd(dir.path())
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .spawn()
            .expect("spawn contextd"),
    );
    let pid = daemon.0.id();
    let reader = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("connect");
    let dbus = zbus::fdo::DBusProxy::new(&reader).await.expect("dbus");
    let name = zbus::names::BusName::try_from("org.contextd.Broker1").expect("name");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dbus.name_has_owner(name.clone()).await.unwrap_or(false) {
        assert!(Instant::now() < deadline, "contextd did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ctx = contextd::client::proxy::Context1Proxy::new(&reader)
        .await
        .expect("ctx");
    let path = ctx
        .subscribe(&["provided.document"])
        .await
        .expect("subscribe");
    let sub = contextd::client::proxy::Subscription1Proxy::builder(&reader)
        .path(path)
        .build()
        .await
        .expect("sub");
    let mut changed = sub.receive_changed().await.expect("changed");
    let app = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("connect");
    let provider = contextd::client::proxy::Provider1Proxy::new(&app)
        .await
        .expect("provider");

    println!(
        "contextd provider benchmark ({PUBLISH_SAMPLES} publishes at 10/s, the most an app may; {PROVIDERS} providers × 6 kinds)\n"
    );
    // Publish → Changed, each beside a Ping.
    let (mut publish, mut pings) = (Vec::new(), Vec::new());
    let mut tick = tokio::time::interval(Duration::from_millis(101));
    for i in 0..PUBLISH_SAMPLES + 10 {
        tick.tick().await;
        let p = ping(&reader).await;
        let t = Instant::now();
        provider
            .publish("document", &format!(r#"{{"name":"doc {i}.txt"}}"#))
            .await
            .expect("publish");
        tokio::time::timeout(Duration::from_secs(5), changed.next())
            .await
            .expect("Changed within 5 s")
            .expect("stream");
        if i >= 10 {
            publish.push(t.elapsed());
            pings.push(p);
        }
    }
    publish.sort();
    pings.sort();
    let (t50, t99, p50, p99) = (
        pct(&publish, 0.5),
        pct(&publish, 0.99),
        pct(&pings, 0.5),
        pct(&pings, 0.99),
    );
    println!("Publish → subscribed reader's Changed:");
    println!(
        "  Publish→Changed  p50 {:>8.1} µs  p99 {:>8.1} µs | Peer.Ping p50 {:>8.1} µs  p99 {:>8.1} µs",
        us(t50),
        us(t99),
        us(p50),
        us(p99)
    );
    let added99 = us(t99) - us(p99);
    println!(
        "  added over a Ping: p50 {:+.1} µs  p99 {:+.1} µs; p99 ratio {:.2}×  {}",
        us(t50) - us(p50),
        added99,
        us(t99) / us(p99),
        verdict(us(t99) <= 2.0 * us(p99))
    );
    drop(provider);
    drop(app);
    // Stop listening: an unread signal stream would stall the connection
    // once 1000 publishes fill its queue.
    let _ = sub.unsubscribe().await;
    drop(changed);
    drop(sub);

    // 1000 providers.
    let rss_before = rss_kib(pid);
    let child = match build_child(dir.path()) {
        Ok(c) => c,
        Err(why) => {
            println!("\n1000 providers: not measured: {why}");
            return;
        }
    };
    let links = dir.path().join("apps");
    std::fs::create_dir_all(&links).expect("mkdir");
    let mut children: Vec<Child> = Vec::with_capacity(PROVIDERS);
    let t = Instant::now();
    for i in 0..PROVIDERS {
        let link = links.join(format!("provider-app-{i:04}"));
        std::fs::hard_link(&child, &link).expect("hard link");
        let mut c = Command::new(&link)
            .arg(i.to_string())
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn provider");
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("ready");
        assert_eq!(line.trim(), "ready", "provider {i} did not publish");
        children.push(c);
    }
    let spawned = t.elapsed();
    let entries = ctx
        .get_provided("document")
        .await
        .expect("GetProvided")
        .len();
    let rss = rss_kib(pid);
    let mut get = Vec::with_capacity(CALLS);
    let mut pings = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        pings.push(ping(&reader).await);
        let t = Instant::now();
        let n = ctx
            .get_provided("document")
            .await
            .expect("GetProvided")
            .len();
        get.push(t.elapsed());
        assert_eq!(n, entries);
    }
    get.sort();
    pings.sort();
    let rss_read = rss_kib(pid);
    println!(
        "\n{PROVIDERS} providers × 6 kinds ({} document entries; all published in {:.1} s):",
        entries,
        spawned.as_secs_f64()
    );
    println!(
        "  daemon RSS {:.1} MB (before them {:.1} MB; after {CALLS} GetProvided {:.1} MB)  {}",
        rss as f64 / 1024.0,
        rss_before as f64 / 1024.0,
        rss_read as f64 / 1024.0,
        verdict(rss.max(rss_read) <= 20 * 1024)
    );
    println!(
        "  GetProvided(document) p50 {:>8.1} µs  p99 {:>8.1} µs | Peer.Ping p50 {:>8.1} µs  p99 {:>8.1} µs | ratio p50 {:.2}×",
        us(pct(&get, 0.5)),
        us(pct(&get, 0.99)),
        us(pct(&pings, 0.5)),
        us(pct(&pings, 0.99)),
        us(pct(&get, 0.5)) / us(pct(&pings, 0.5))
    );
    // The providers exit: their entries go.
    let t = Instant::now();
    for c in &mut children {
        drop(c.stdin.take());
    }
    for mut c in children {
        let _ = c.wait();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ctx
        .get_provided("document")
        .await
        .expect("GetProvided")
        .is_empty()
    {
        assert!(Instant::now() < deadline, "entries outlived their apps");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "  all {PROVIDERS} exited → their entries gone in {:.2} s; RSS {:.1} MB",
        t.elapsed().as_secs_f64(),
        rss_kib(pid) as f64 / 1024.0
    );
    let _ = std::io::stdout().flush();
}

//! `make bench` for org.contextd.Provider1. Three rounds, each against a
//! fresh daemon; every target is printed as min/median/max of the rounds
//! (each a ratio to its own round's floor) with the verdict on the median:
//!
//! - publish → a subscribed reader's `Changed`: p99 over a D-Bus
//!   `Peer.Ping` round trip measured interleaved with it (target ≤ 2×).
//!   An app may publish 10 times a second, so the samples come at that
//!   pace (10 s a round).
//! - 1000 providers with 6 kinds each (benches/provider_child.c, built
//!   here with gcc and GIO, each under its own hard link so that the broker
//!   sees 1000 apps): the daemon's RSS once all have published (target
//!   ≤ 22 MB; the floor is the round's RSS before them; the RSS after the
//!   reads is printed beside), and `GetProvidedPage("document", 100)`, the
//!   first page of 1000 entries, against `Peer.Ping` interleaved with it
//!   (p50 ratio, target ≤ 5×). Every page is read once to check that the
//!   pages hold every entry once. `GetProvided` (all 1000 in one answer) is
//!   printed beside, with no target: readers of many entries page.
//!
//! Prints figures and ratios; asserts nothing but the pages' contents.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use contextd::client::page::provided_page as read_page;
use futures_util::StreamExt;

const PROVIDERS: usize = 1000;
const PUBLISH_SAMPLES: usize = 100;
const CALLS: usize = 300;
const ROUNDS: usize = 3;
const PAGE: u32 = 100;
/// RSS target with 1000 providers × 6 kinds, in KiB.
const RSS_TARGET_KIB: u64 = 22 * 1024;

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
    let src = crate::common::root().join("benches/provider_child.c");
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

/// What one round measured.
struct Round {
    /// Publish→Changed p99 / Ping p99.
    publish_p99: f64,
    /// RSS with the providers, once all have published (the target),
    /// after the reads, and before them (the floor), KiB.
    rss: u64,
    rss_read: u64,
    rss_floor: u64,
    /// First page of 100 p50 / Ping p50, and its p50 in µs.
    page_ratio: f64,
    page_p50: f64,
    /// All 1000 in one GetProvided p50 / Ping p50.
    all_ratio: f64,
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let child = match build_child(dir.path()) {
        Ok(c) => Some(c),
        Err(why) => {
            println!("1000 providers: not measured: {why}");
            None
        }
    };
    println!(
        "contextd provider benchmark: {ROUNDS} rounds, each a fresh daemon ({PUBLISH_SAMPLES} publishes at 10/s, the most an app may; {PROVIDERS} providers × 6 kinds)\n"
    );
    let mut rounds = Vec::new();
    for r in 0..ROUNDS {
        let round_dir = dir.path().join(format!("round{r}"));
        std::fs::create_dir_all(&round_dir).expect("mkdir");
        println!("Round {}:", r + 1);
        rounds.push(round(&round_dir, child.as_deref()).await);
    }
    let pick =
        |f: &dyn Fn(&Round) -> Option<f64>| -> Vec<f64> { rounds.iter().filter_map(f).collect() };
    println!("\nTargets, min / median / max of {ROUNDS} rounds (verdict on the median):");
    let publish = pick(&|r| Some(r.publish_p99));
    println!(
        "  Publish→Changed p99 vs Ping p99 (≤ 2×):           {}  {}",
        spread(&publish),
        verdict(median(&publish) <= 2.0)
    );
    if child.is_none() {
        return;
    }
    let rss = pick(&|r| Some(r.rss as f64 / 1024.0));
    let floor = pick(&|r| Some(r.rss_floor as f64 / 1024.0));
    let rss_ratio = pick(&|r| Some(r.rss as f64 / r.rss_floor as f64));
    let rss_read = pick(&|r| Some(r.rss_read as f64 / 1024.0));
    let (a, m, b) = min_median_max(&rss);
    println!(
        "  RSS, 1000 providers × 6 kinds (≤ 22 MB):         min {a:.1} MB  median {m:.1} MB  max {b:.1} MB; vs the round's floor (before them, median {:.1} MB): {}  {}",
        median(&floor),
        spread(&rss_ratio),
        verdict(m * 1024.0 <= RSS_TARGET_KIB as f64)
    );
    let (a, m, b) = min_median_max(&rss_read);
    println!(
        "    after {CALLS} first pages and {} GetProvided of all 1000: min {a:.1} MB  median {m:.1} MB  max {b:.1} MB (no target)",
        CALLS / 10
    );
    let page = pick(&|r| Some(r.page_ratio));
    println!(
        "  GetProvidedPage first {PAGE} of 1000 vs Ping (≤ 5×): {}  {} (p50 median {:.1} µs)",
        spread(&page),
        verdict(median(&page) <= 5.0),
        median(&pick(&|r| Some(r.page_p50)))
    );
    let all = pick(&|r| Some(r.all_ratio));
    println!(
        "  GetProvided, all 1000 in one answer vs Ping:      {}  (no target: readers of many entries page)",
        spread(&all)
    );
    let _ = std::io::stdout().flush();
}

/// One round against a fresh daemon: publish→Changed, then (with the
/// child built) the 1000 providers.
async fn round(dir: &Path, child: Option<&Path>) -> Round {
    let (_bus, address) = start_bus(dir);
    grant_self(&dir.join("config"), &["provided.*"]);
    let daemon = Proc(
        contextd(dir)
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
    let publish_p99 = us(t99) / us(p99);
    println!(
        "  Publish→Changed  p50 {:>8.1} µs  p99 {:>8.1} µs | Peer.Ping p50 {:>8.1} µs  p99 {:>8.1} µs | p99 ratio {publish_p99:.2}×",
        us(t50),
        us(t99),
        us(p50),
        us(p99)
    );
    drop(provider);
    drop(app);
    // Stop listening: an unread signal stream would stall the connection
    // once 1000 publishes fill its queue.
    let _ = sub.unsubscribe().await;
    drop(changed);
    drop(sub);
    let mut out = Round {
        publish_p99,
        rss: 0,
        rss_read: 0,
        rss_floor: 0,
        page_ratio: f64::NAN,
        page_p50: f64::NAN,
        all_ratio: f64::NAN,
    };
    let Some(child) = child else {
        return out;
    };

    // 1000 providers.
    // The floor: the round's daemon before them, its entry gone (the
    // bench's own app retracted with its connection).
    tokio::time::sleep(Duration::from_millis(200)).await;
    out.rss_floor = rss_kib(pid);
    let links = dir.join("apps");
    std::fs::create_dir_all(&links).expect("mkdir");
    let mut children: Vec<Child> = Vec::with_capacity(PROVIDERS);
    let t = Instant::now();
    for i in 0..PROVIDERS {
        let link = links.join(format!("provider-app-{i:04}"));
        std::fs::hard_link(child, &link).expect("hard link");
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
    let rss = rss_kib(pid);

    // Every page once: each entry exactly once, in app order.
    let mut seen: Vec<String> = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let (entries, next) = read_page(&ctx, "document", PAGE, &cursor)
            .await
            .expect("GetProvidedPage");
        pages += 1;
        seen.extend(entries.into_iter().map(|e| e.app_id));
        if next.is_empty() {
            break;
        }
        cursor = next;
    }
    let entries = seen.len();
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), entries, "an entry on two pages");
    assert_eq!(unique, seen, "pages not in app order");

    let mut page = Vec::with_capacity(CALLS);
    let mut all = Vec::with_capacity(CALLS / 10);
    let mut pings = Vec::with_capacity(CALLS);
    for i in 0..CALLS {
        pings.push(ping(&reader).await);
        let t = Instant::now();
        let (first, _) = read_page(&ctx, "document", PAGE, "")
            .await
            .expect("GetProvidedPage");
        page.push(t.elapsed());
        assert_eq!(first.len(), (PAGE as usize).min(entries));
        if i % 10 == 0 {
            let t = Instant::now();
            let n = ctx
                .get_provided("document")
                .await
                .expect("GetProvided")
                .len();
            all.push(t.elapsed());
            assert_eq!(n, entries);
        }
    }
    page.sort();
    all.sort();
    pings.sort();
    out.rss = rss;
    out.rss_read = rss_kib(pid);
    out.page_p50 = us(pct(&page, 0.5));
    out.page_ratio = out.page_p50 / us(pct(&pings, 0.5));
    out.all_ratio = us(pct(&all, 0.5)) / us(pct(&pings, 0.5));
    println!(
        "  {PROVIDERS} providers × 6 kinds published in {:.1} s; {entries} document entries on {pages} pages of {PAGE}, each once",
        spawned.as_secs_f64()
    );
    println!(
        "  daemon RSS {:.1} MB (the floor, before them: {:.1} MB; ratio {:.2}×); after the reads {:.1} MB",
        out.rss as f64 / 1024.0,
        out.rss_floor as f64 / 1024.0,
        out.rss as f64 / out.rss_floor as f64,
        out.rss_read as f64 / 1024.0
    );
    println!(
        "  GetProvidedPage first {PAGE} p50 {:>8.1} µs  p99 {:>8.1} µs | GetProvided all p50 {:>8.1} µs | Peer.Ping p50 {:>6.1} µs | ratios p50 {:.2}× / {:.2}×",
        out.page_p50,
        us(pct(&page, 0.99)),
        us(pct(&all, 0.5)),
        us(pct(&pings, 0.5)),
        out.page_ratio,
        out.all_ratio
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
    while !read_page(&ctx, "document", 1, "")
        .await
        .expect("GetProvidedPage")
        .0
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
    drop(daemon);
    out
}

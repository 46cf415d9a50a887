//! `make bench` for the freedesktop sources: a property change on a mocked
//! service (python-dbusmock UPower, `Percentage` of the display device)
//! until a subscriber of `power` gets `Changed`, against the floor of the
//! same run: a bare zbus client on the system bus that watches the very
//! same `PropertiesChanged`. Both wait for the same change in every round,
//! so the difference is what the broker adds (its source, the core, the
//! consent check, the rendering and the second bus hop).
//!
//! Prints p50/p99 over 200 changes and the added time, in three rounds
//! (the target printed min/median/max, decided on the median); asserts nothing
//! (timing belongs here, not in tests).

use crate::common;

use std::num::NonZeroUsize;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use zbus::message::Type as MsgType;
use zbus::wire::Variant;
use zbus::{Connection, MatchRule, MessageStream};

const CHANGES: usize = 200;
const WARMUP: usize = 20;
const REPS: usize = 3;
const UPOWER: &str = "org.freedesktop.UPower";
const DISPLAY: &str = "/org/freedesktop/UPower/devices/DisplayDevice";
const DEVICE_IFACE: &str = "org.freedesktop.UPower.Device";

pub(crate) fn main() {
    block_on(2, run());
}

async fn connect(address: &str) -> Connection {
    zbus::connection::Builder::address(address)
        .build()
        .await
        .expect("connect")
}

async fn wait_name(conn: &Connection, name: &str) {
    let dbus = zbus::fdo::DBusProxy::new(conn).await.expect("proxy");
    let name = zbus::names::BusName::try_from(name.to_owned()).expect("name");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dbus.name_has_owner(name.clone()).await.unwrap_or(false) {
        assert!(Instant::now() < deadline, "{name} not on the bus in 20 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn set_percentage(sys: &Connection, p: f64) {
    sys.call_method(
        Some(UPOWER),
        DISPLAY,
        Some("org.freedesktop.DBus.Properties"),
        "Set",
        &(DEVICE_IFACE, "Percentage", Variant::from(p)),
    )
    .await
    .expect("Set Percentage");
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let session_dir = dir.path().join("session");
    let system_dir = dir.path().join("system");
    std::fs::create_dir_all(&session_dir).expect("mkdir");
    std::fs::create_dir_all(&system_dir).expect("mkdir");
    let (_session_bus, session) = start_bus(&session_dir);
    let (_system_bus, system) = start_bus(&system_dir);

    let _upower = Proc(
        Command::new("/usr/bin/python3")
            .args(["-m", "dbusmock", "--system", "--template", "upower"])
            .env("DBUS_SYSTEM_BUS_ADDRESS", &system)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3-dbusmock (make deps)"),
    );
    let sys = connect(&system).await;
    wait_name(&sys, UPOWER).await;
    sys.call_method(
        Some(UPOWER),
        DISPLAY,
        Some("org.freedesktop.DBus.Properties"),
        "Set",
        &(DEVICE_IFACE, "IsPresent", Variant::from(true)),
    )
    .await
    .expect("IsPresent");

    grant_self(&dir.path().join("config"), &["power"]);
    let _daemon = Proc(
        contextd(dir.path())
            .env("DBUS_SESSION_BUS_ADDRESS", &session)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &system)
            .spawn()
            .expect("spawn contextd"),
    );
    let ses = connect(&session).await;
    wait_name(&ses, "org.contextd.Broker1").await;

    // The subscriber.
    let ctx = Context1Proxy::new(&ses).await.expect("proxy");
    let path = ctx.subscribe(&["power"]).await.expect("subscribe");
    let sub = Subscription1Proxy::builder(&ses)
        .path(path)
        .build()
        .await
        .expect("subscription");
    let mut changed = sub.receive_changed().await.expect("Changed");

    // The floor: a bare client watching the same PropertiesChanged.
    let bare_conn = connect(&system).await;
    let rule = MatchRule::builder()
        .msg_type(MsgType::Signal)
        .sender(UPOWER)
        .path(DISPLAY)
        .interface("org.freedesktop.DBus.Properties")
        .member("PropertiesChanged")
        .build()
        .expect("rule");
    let mut bare = MessageStream::for_match_rule(rule, &bare_conn, NonZeroUsize::new(1024))
        .await
        .expect("match");

    // Wait until the broker follows UPower.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let snap =
            contextd::client::json::dict_to_json(&ctx.get_snapshot().await.expect("snapshot"));
        if snap.get("power").is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the broker does not follow UPower"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Three rounds (the warm-up before the first), each its p50 and p99;
    // the verdict is on the median round's added p99.
    let mut rounds: Vec<[Vec<Duration>; 3]> = Vec::with_capacity(REPS);
    let mut i = 0usize;
    for rep in 0..REPS {
        let mut floor = Vec::with_capacity(CHANGES);
        let mut broker = Vec::with_capacity(CHANGES);
        let mut added = Vec::with_capacity(CHANGES);
        let warmup = if rep == 0 { WARMUP } else { 0 };
        for n in 0..(warmup + CHANGES) {
            i += 1;
            // A value other than the last, so that every round is a change,
            // and a percentage (0..=100): the broker refuses others
            // (sources::upower::valid_percentage), and from the second
            // round on 10 + i / 4 was over 100, so no Changed came.
            let p = 1.0 + (i % 396) as f64 * 0.25;
            let t0 = Instant::now();
            let bare_wait = async {
                loop {
                    let m = bare.next().await.expect("bare stream").expect("message");
                    let Ok((_, props, _)) = m.body().deserialize::<(
                        String,
                        std::collections::HashMap<String, zbus::wire::OwnedVariant>,
                        Vec<String>,
                    )>() else {
                        continue;
                    };
                    if props.get("Percentage").and_then(|v| f64::try_from(v).ok()) == Some(p) {
                        return t0.elapsed();
                    }
                }
            };
            let broker_wait = async {
                loop {
                    let sig = changed.next().await.expect("Changed stream");
                    let Some(data) = changed_data(&sig) else {
                        continue;
                    };
                    if data["power"]["percentage"].as_f64() == Some(p) {
                        return t0.elapsed();
                    }
                }
            };
            let (_, f, b) = tokio::time::timeout(
                Duration::from_secs(10),
                futures_util::future::join3(set_percentage(&sys, p), bare_wait, broker_wait),
            )
            .await
            .expect("a change reached both within 10 s");
            if n >= warmup {
                floor.push(f);
                broker.push(b);
                added.push(b.saturating_sub(f));
            }
        }
        floor.sort();
        broker.sort();
        added.sort();
        rounds.push([floor, broker, added]);
    }
    let row = |name: &str, v: &[Duration]| {
        println!(
            "    {name:<44} p50 {:>8.1} µs   p99 {:>8.1} µs",
            us(pct(v, 0.5)),
            us(pct(v, 0.99))
        );
    };
    println!(
        "contextd freedesktop benchmark ({REPS} x {CHANGES} changes of UPower's Percentage, after {WARMUP} warm-up)"
    );
    for (n, [floor, broker, added]) in rounds.iter().enumerate() {
        println!("  run {}:", n + 1);
        row("bare zbus client, PropertiesChanged (floor)", floor);
        row("subscriber of `power`, Changed", broker);
        row("added by the broker (per change)", added);
    }
    let a99s: Vec<f64> = rounds.iter().map(|r| us(pct(&r[2], 0.99))).collect();
    let (a, m, b) = min_median_max(&a99s);
    println!(
        "  added at p99: min {a:.1} µs  median {m:.1} µs  max {b:.1} µs (target <= 1000 µs: {})",
        verdict(m <= 1000.0)
    );
}

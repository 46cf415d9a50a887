//! Sources restarted while the broker is read: real sway, real PipeWire
//! (with WirePlumber) and a mocked system service (python-dbusmock's
//! UPower) are each killed and started again while two clients read the
//! snapshot without pause. Meanwhile the snapshot marks the source
//! unavailable, every read is answered, the broker never exits, and the
//! source is back after its service returns; the time from starting the
//! service again to the source being available is printed, with the part
//! the service's own start took (the target is 2 s after the service is
//! back; the wait allows 30 s, since a loaded CI machine is no stopwatch).
//!
//! The behaviour of each source across a restart (ids, streams re-listed,
//! the system bus itself going away) is in tests/it/wayland.rs,
//! tests/it/pipewire_restart.rs and tests/it/fdo_restart.rs.

use crate::common;
use crate::fdo;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use fdo::Mock;
use serde_json::Value;

/// The source `name` as the snapshot lists it.
async fn in_snapshot(ctx: &Context1Proxy<'_>, name: &str) -> Option<Value> {
    let snap = dict_to_json(
        &within(10, "GetSnapshot", ctx.get_snapshot())
            .await
            .expect("GetSnapshot"),
    );
    snap["sources"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

async fn until_available(ctx: &Context1Proxy<'_>, name: &str, available: bool, secs: u64) -> Value {
    eventually(
        secs,
        &format!("{name} available={available} in the snapshot"),
        || async {
            in_snapshot(ctx, name)
                .await
                .filter(|s| s["available"] == available)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_restarted_while_read_come_back() {
    with_timeout(240, async {
        let session = Session::start(&["--system-bus"]);
        let system = session
            .get("DBUS_SYSTEM_BUS_ADDRESS")
            .expect("system bus")
            .to_owned();
        let mut upower = Mock::template(&system, true, "upower", "org.freedesktop.UPower").await;
        let home = Home::new();
        home.write_policy(&[(
            &my_app_id(),
            &[
                "windows",
                "windows.titles",
                "media.playback",
                "media.capture",
                "power",
            ],
        )]);
        let mut d = Daemon::start_in_session(&session, &home, &[]).await;
        let address = session
            .get("DBUS_SESSION_BUS_ADDRESS")
            .expect("bus")
            .to_owned();
        let conn = connect_to(&address).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        for name in ["wayland", "pipewire", "upower"] {
            until_available(&ctx, name, true, 30).await;
        }

        // The load: two clients reading the snapshot without pause; every
        // read must be answered.
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let mut readers = Vec::new();
        for _ in 0..2 {
            let c = connect_to(&address).await;
            let stop = stop.clone();
            let reads = reads.clone();
            readers.push(tokio::spawn(async move {
                let p = Context1Proxy::new(&c).await.expect("proxy");
                while !stop.load(Ordering::Relaxed) {
                    match tokio::time::timeout(Duration::from_secs(10), p.get_snapshot()).await {
                        Ok(Ok(_)) => reads.fetch_add(1, Ordering::Relaxed),
                        Ok(Err(e)) => panic!("a read failed during the restarts: {e}"),
                        Err(_) => panic!("a read went unanswered for 10 s during the restarts"),
                    };
                }
            }));
        }

        let mut figures = Vec::new();
        for (name, kill, start) in [
            ("wayland", "kill-sway", "start-sway"),
            ("pipewire", "kill-pipewire", "start-pipewire"),
            ("upower", "", ""),
        ] {
            let before = reads.load(Ordering::Relaxed);
            if kill.is_empty() {
                upower.stop();
            } else {
                session.ctl(kill, &[]);
            }
            let gone = until_available(&ctx, name, false, 30).await;
            assert!(gone["last_error"].is_string(), "no reason given: {gone}");
            assert!(
                d.child.try_wait().expect("wait").is_none(),
                "the broker exited"
            );
            // The time from starting the service again until the source
            // is available; the start itself (sway up with its windows,
            // PipeWire and WirePlumber, the mock's name on the bus) is
            // part of it, and printed apart.
            let t0 = Instant::now();
            if start.is_empty() {
                upower.restart().await;
            } else {
                session.ctl(start, &[]);
            }
            let started = t0.elapsed();
            until_available(&ctx, name, true, 30).await;
            let took = t0.elapsed();
            figures.push(format!(
                "{name} {:.2} s (its own start {:.2} s)",
                took.as_secs_f64(),
                started.as_secs_f64()
            ));
            assert!(
                d.child.try_wait().expect("wait").is_none(),
                "the broker exited"
            );
            eventually(10, "reads go on", || async {
                (reads.load(Ordering::Relaxed) > before).then_some(())
            })
            .await;
        }
        // The context itself is back, not only the source's status.
        eventually(30, "windows and power again", || async {
            let snap = dict_to_json(&ctx.get_snapshot().await.ok()?);
            (snap["windows"].as_array().is_some_and(|w| !w.is_empty())
                && snap.get("power").is_some())
            .then_some(())
        })
        .await;
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.await.expect("a reader failed");
        }
        eprintln!(
            "source available again after its service was started: {}; {} snapshot reads answered meanwhile",
            figures.join(", "),
            reads.load(Ordering::Relaxed)
        );
        assert!(
            d.child.try_wait().expect("wait").is_none(),
            "the broker exited"
        );
        // Everything the broker wrote meanwhile is its own log's, each line
        // with a time and a level: no library prints raw lines into the
        // user's journal (wayland-backend printed "Io error: Broken pipe"
        // with eprintln at every compositor restart).
        let err = d.stderr();
        let raw: Vec<&str> = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        assert!(raw.is_empty(), "lines outside the log's format: {raw:?}");
    })
    .await
}

//! Management: polkit decides who may change decisions; revoking ends live
//! subscriptions at once; pause stops everything.

use crate::common;

use std::time::{Duration, Instant};

use common::dbusmock::Mock;
use common::*;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;

const NOT_ALLOWED: &str = "org.contextd.Error.NotAllowed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polkit_decides_who_may_set_grants() {
    with_timeout(60, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let polkit = Mock::start(&sys.address, true, "polkitd").await;
        let home = Home::new();
        let _d = Daemon::start_with(
            &bus,
            &home,
            &[],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");

        polkit.set_allowed(&[]).await;
        let r = consent
            .set_grant("org.example.App", "windows", "allow", 0)
            .await;
        match r {
            Err(zbus::Error::MethodError(name, msg, _)) => {
                assert_eq!(name.as_str(), NOT_ALLOWED);
                assert!(
                    msg.unwrap_or_default()
                        .contains("org.contextd.manage-consent")
                );
            }
            other => panic!("expected NotAllowed, got {other:?}"),
        }
        assert_eq!(error_name(consent.list_grants().await), NOT_ALLOWED);

        polkit.set_allowed(&["org.contextd.manage-consent"]).await;
        consent
            .set_grant("org.example.App", "windows", "allow", 0)
            .await
            .expect("allowed by polkit");
        let grants = consent.list_grants().await.expect("grants");
        assert_eq!(grants.len(), 1);

        // Bad arguments are typed errors, and change nothing.
        for (app, cat, dec, exp) in [
            ("", "windows", "allow", 0i64),
            ("org.example.App", "nope", "allow", 0),
            ("org.example.App", "windows", "maybe", 0),
            ("org.example.App", "windows", "allow", 1),
        ] {
            assert_eq!(
                error_name(consent.set_grant(app, cat, dec, exp).await),
                "org.contextd.Error.InvalidArgs",
                "{app} {cat} {dec} {exp}"
            );
        }
        assert_eq!(consent.list_grants().await.expect("grants").len(), 1);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_polkit_management_is_refused_and_says_why() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        // A system bus address where nothing listens.
        let nowhere = format!("unix:path={}/no-system-bus", home.dir.path().display());
        let _d =
            Daemon::start_with(&bus, &home, &[], &[("DBUS_SYSTEM_BUS_ADDRESS", &nowhere)]).await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        match consent
            .set_grant("org.example.App", "windows", "allow", 0)
            .await
        {
            Err(zbus::Error::MethodError(name, msg, _)) => {
                assert_eq!(name.as_str(), NOT_ALLOWED);
                let msg = msg.unwrap_or_default();
                assert!(
                    msg.contains("polkit") && msg.contains("policy.toml"),
                    "{msg}"
                );
            }
            other => panic!("expected NotAllowed, got {other:?}"),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_while_subscribed_ends_the_subscription_at_once_and_pause_stops_all() {
    with_timeout(60, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let mut replay = Replay::new(&home);
        replay.send(&window_line("w1", "org.a.App", "one", true));
        let _d = Daemon::start_with(
            &bus,
            &home,
            &["--replay", &replay.arg()],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let me = my_app_id();
        consent
            .set_grant(&me, "windows", "allow", 0)
            .await
            .expect("grant");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changed = sub.receive_changed().await.expect("stream");
        let mut revoked = sub.receive_revoked().await.expect("stream");

        // It works before.
        replay.send(&window_line("w2", "org.b.App", "two", true));
        tokio::time::timeout(Duration::from_secs(5), changed.next())
            .await
            .expect("Changed before revoke")
            .expect("open");

        let t0 = Instant::now();
        assert!(consent.revoke(&me, "windows").await.expect("revoke"));
        let sig = tokio::time::timeout(Duration::from_secs(5), revoked.next())
            .await
            .expect("Revoked in time")
            .expect("open");
        let took = t0.elapsed();
        eprintln!("Revoke → Revoked signal: {took:?}");
        assert_eq!(sig.args().expect("args").category(), "windows");
        // Drain what was already queued before the revoke, then nothing.
        while tokio::time::timeout(Duration::from_millis(50), changed.next())
            .await
            .is_ok()
        {}
        replay.send(&window_line("w3", "org.c.App", "three", true));
        assert!(
            tokio::time::timeout(Duration::from_millis(500), changed.next())
                .await
                .is_err(),
            "Changed after Revoked"
        );
        // And the next call is refused (asked, in fact: the decision is gone).
        assert!(ctx.get_active_window().await.is_err());

        // Pause: everything refused; resume: back.
        consent
            .set_grant(&me, "windows", "allow", 0)
            .await
            .expect("grant");
        ctx.get_active_window().await.expect("allowed");
        consent.set_paused(true).await.expect("pause");
        assert!(consent.paused().await.expect("prop"));
        assert_eq!(error_name(ctx.get_active_window().await), NOT_ALLOWED);
        consent.set_paused(false).await.expect("resume");
        ctx.get_active_window().await.expect("allowed again");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_with_an_expiry_ends_on_time() {
    with_timeout(60, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let replay = home.dir.path().join("r.jsonl");
        std::fs::write(&replay, window_line("w1", "org.a.App", "one", true)).expect("replay");
        let _d = Daemon::start_with(
            &bus,
            &home,
            &["--replay", &replay.display().to_string()],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let until = chrono::Utc::now().timestamp() + 2;
        consent
            .set_grant(&my_app_id(), "windows", "allow", until)
            .await
            .expect("grant");
        eventually(5, "allowed", || async {
            ctx.get_active_window().await.ok()
        })
        .await;
        let sub = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(sub)
            .build()
            .await
            .expect("sub");
        let mut revoked = sub.receive_revoked().await.expect("stream");
        // The daemon wakes at the expiry and ends the subscription.
        tokio::time::timeout(Duration::from_secs(6), revoked.next())
            .await
            .expect("Revoked at expiry")
            .expect("open");
        assert_eq!(error_name(ctx.get_active_window().await), NOT_ALLOWED);
    })
    .await
}

/// The start time of this process (field 22 of /proc/self/stat), which the
/// broker must hand polkit as it read it when it identified us.
fn own_start_time() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    rest.split_whitespace()
        .nth(19)
        .and_then(|t| t.parse().ok())
        .expect("start time")
}

/// polkit is asked about the caller as it was identified (its PID with the
/// start time read then, so a PID that changes hands while the dialog is up
/// authorises nothing), and its details say what is asked: the dialog can
/// show "allow org.example.App to see windows" and rules can test the app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polkit_hears_the_identified_process_and_what_is_asked() {
    with_timeout(60, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let _d = Daemon::start_with(
            &bus,
            &home,
            &[],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        consent
            .set_grant("org.example.Marker7", "windows.titles", "allow", 0)
            .await
            .expect("allowed by polkit");
        consent.list_grants().await.expect("grants");

        let start = own_start_time();
        let pid = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(20);
        let log = loop {
            let log = polkit.log();
            if log.matches("CheckAuthorization").count() >= 2 {
                break log;
            }
            assert!(
                Instant::now() < deadline,
                "no CheckAuthorization logged:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let calls: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("CheckAuthorization"))
            .collect();
        let set = calls
            .iter()
            .find(|l| l.contains("SetGrant"))
            .unwrap_or_else(|| panic!("no SetGrant check:\n{log}"));
        for needle in [
            "org.example.Marker7".to_owned(),
            "windows.titles".to_owned(),
            "allow org.example.Marker7 to see windows.titles".to_owned(),
            format!("UInt32({pid}"),
            format!("UInt64({start}"),
        ] {
            assert!(set.contains(&needle), "{needle} not in the check: {set}");
        }
        let list = calls
            .iter()
            .find(|l| l.contains("ListGrants"))
            .unwrap_or_else(|| panic!("no ListGrants check:\n{log}"));
        assert!(list.contains("every app"), "{list}");
        assert!(list.contains(&format!("UInt64({start}")), "{list}");
    })
    .await
}

//! Services come and go: a mocked system service that stops makes its
//! source unavailable (with the reason) and its context unknown; started
//! again, it is picked up (NameOwnerChanged). The whole system bus going
//! away and coming back is survived too (reconnect with backoff). The
//! daemon stays up throughout.

use crate::common;
use crate::fdo;

use std::time::Duration;

use common::*;
use fdo::*;
use zbus::wire::Variant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_and_the_system_bus_come_and_go() {
    with_timeout(120, async {
        let session = Bus::start();
        let mut system = RestartableBus::start();
        let upower = || Mock::template(&system.address, true, "upower", "org.freedesktop.UPower");
        let mut up = upower().await;
        let mut nm = Mock::template(
            &system.address,
            true,
            "networkmanager",
            "org.freedesktop.NetworkManager",
        )
        .await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["power", "network"])]);
        let mut env = home.envs(&session);
        env.push(("DBUS_SYSTEM_BUS_ADDRESS".into(), system.address.clone()));
        let mut d = Daemon::spawn_env(&home, env, &[]);
        wait_for_owner(&session, true).await;
        let conn = session.connect().await;
        until_source(&conn, "upower", true).await;
        until_source(&conn, "networkmanager", true).await;
        until_snapshot(&conn, "power and network", |s| {
            s.get("power").is_some() && s.get("network").is_some()
        })
        .await;

        // UPower stops: unavailable, with the reason; power unknown.
        up.stop();
        let src = until_source(&conn, "upower", false).await;
        assert!(
            src["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("org.freedesktop.UPower is not running")),
            "{src}"
        );
        until_snapshot(&conn, "power unknown", |s| s.get("power").is_none()).await;
        assert_eq!(
            until_source(&conn, "networkmanager", true).await["available"],
            true
        );

        // It comes back, with a changed value, and is followed again.
        up.restart().await;
        until_source(&conn, "upower", true).await;
        let sys = system.connect().await;
        up.set(
            &sys,
            "/org/freedesktop/UPower",
            "org.freedesktop.UPower",
            "OnBattery",
            Variant::from(true),
        )
        .await;
        until_snapshot(&conn, "power followed after the restart", |s| {
            s["power"]["on_battery"] == true
        })
        .await;

        // The whole system bus goes away.
        up.stop();
        nm.stop();
        drop(sys);
        system.stop();
        for name in ["upower", "networkmanager", "login1"] {
            let src = until_source(&conn, name, false).await;
            assert!(src["last_error"].is_string(), "{src}");
        }
        until_snapshot(&conn, "nothing from the system bus", |s| {
            s.get("power").is_none() && s.get("network").is_none()
        })
        .await;
        // Retries are spaced out, and the daemon keeps serving.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(matches!(d.child.try_wait(), Ok(None)), "the daemon exited");
        snapshot(&conn).await;

        // ... and comes back.
        system.restart();
        up.restart().await;
        nm.restart().await;
        until_source(&conn, "upower", true).await;
        until_source(&conn, "networkmanager", true).await;
        until_snapshot(&conn, "power and network again", |s| {
            s.get("power").is_some() && s["network"]["connectivity"] == "full"
        })
        .await;
        assert!(matches!(d.child.try_wait(), Ok(None)), "the daemon exited");
    })
    .await
}

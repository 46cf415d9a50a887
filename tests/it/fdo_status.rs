//! `contextctl status` shows session, power, network, the last
//! notifications and what is playing, readably.

use crate::common;
use crate::fdo;

use std::collections::HashMap;

use common::*;
use fdo::*;
use zbus::wire::Variant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_everything_the_freedesktop_sources_know() {
    with_timeout(90, async {
        let buses = Buses::start();
        let sys_addr = buses.system.address.clone();
        let ses_addr = buses.session.address.clone();
        let logind = Mock::template(&sys_addr, true, "logind", "org.freedesktop.login1").await;
        let up = Mock::template(&sys_addr, true, "upower", "org.freedesktop.UPower").await;
        let _nm = Mock::template(
            &sys_addr,
            true,
            "networkmanager",
            "org.freedesktop.NetworkManager",
        )
        .await;
        let _notifications = Mock::template(
            &ses_addr,
            false,
            "notification_daemon",
            "org.freedesktop.Notifications",
        )
        .await;
        let player = Mock::mpris_player(&ses_addr, "{}").await;
        let sys = buses.system.connect().await;
        logind
            .call(
                &sys,
                "/org/freedesktop/login1",
                MOCK_IFACE,
                "AddSession",
                &("c1", "seat0", 1000u32, "alice", true),
            )
            .await;
        up.update(
            &sys,
            "/org/freedesktop/UPower/devices/DisplayDevice",
            "org.freedesktop.UPower.Device",
            vec![
                ("IsPresent", Variant::from(true)),
                ("Percentage", Variant::from(42.0f64)),
                ("State", Variant::from(2u32)),
                ("TimeToEmpty", Variant::from(3900i64)),
            ],
        )
        .await;
        let sess = buses.session.connect().await;
        let meta: HashMap<&str, Variant<'_>> = [
            ("xesam:title", Variant::from("Title")),
            ("xesam:artist", Variant::from(vec!["Artist"])),
        ]
        .into_iter()
        .collect();
        player
            .call(
                &sess,
                MPRIS_PATH,
                MOCK_IFACE,
                "SetPlayback",
                &("Playing", meta),
            )
            .await;

        let home = Home::new();
        home.write_policy(&[(&contextctl_app(), &["*"]), (&my_app_id(), &["*"])]);
        let _d = buses.daemon(&home, &[("XDG_SESSION_ID", "c1")]).await;
        let conn = buses.session.connect().await;
        // The notifications source monitors the bus once it has started,
        // after the broker owns its name: a notification sent before it
        // is available is not seen (as in fdo_notifications).
        until_source(&conn, "notifications", true).await;
        let (st, _, err) = run_cmd(
            std::process::Command::new("notify-send")
                .args(["-a", "TestApp", "Summary", "Body"])
                .env("DBUS_SESSION_BUS_ADDRESS", &ses_addr),
            20,
        );
        assert!(st.success(), "{err}");
        until_snapshot(&conn, "everything known", |s| {
            s.get("session").is_some()
                && s["power"]["percentage"] == 42.0
                && s.get("network").is_some()
                && s["notifications"].as_array().is_some_and(|a| !a.is_empty())
                && s["media.playback"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
        })
        .await;

        let (out, _) = contextctl(&buses, &home, &["status"]);
        for want in [
            "Session:        active, unlocked",
            "Power:          on AC power, 42 %, discharging, 1 h 05 min left",
            "Network:        full connectivity",
            "Notifications:  1",
            "TestApp: Summary — Body",
            "Now playing:    Test Player: Artist — Title (playing)",
        ] {
            assert!(out.contains(want), "missing {want:?} in:\n{out}");
        }
        let (out, _) = contextctl(&buses, &home, &["media"]);
        assert!(
            out.contains("Test Player") && out.contains("Artist — Title"),
            "{out}"
        );
    })
    .await
}

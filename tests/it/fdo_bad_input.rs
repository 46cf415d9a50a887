//! Bad input from services: wrong types, absurd values, a notification
//! with a 1 MiB body and broken markup, a player with broken metadata. The
//! broker keeps working, logs each problem once, and shows what it can.

use crate::common;
use crate::fdo;

use std::collections::HashMap;

use common::*;
use fdo::*;
use serde_json::Value;
use zbus::wire::Variant;

const DISPLAY: &str = "/org/freedesktop/UPower/devices/DisplayDevice";
const DEVICE_IFACE: &str = "org.freedesktop.UPower.Device";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_values_are_logged_once_and_the_rest_is_shown() {
    with_timeout(90, async {
        let buses = Buses::start();
        let up = Mock::template(&buses.system.address, true, "upower", "org.freedesktop.UPower").await;
        let nm = Mock::template(
            &buses.system.address,
            true,
            "networkmanager",
            "org.freedesktop.NetworkManager",
        )
        .await;
        let notifications = Mock::template(
            &buses.session.address,
            false,
            "notification_daemon",
            "org.freedesktop.Notifications",
        )
        .await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["*"])]);
        let d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        let sys = buses.system.connect().await;
        until_snapshot(&conn, "power and network", |s| {
            s.get("power").is_some() && s.get("network").is_some()
        })
        .await;

        // UPower: 250 %, a negative time, OnBattery as a string; three
        // times over, with a good change in between each time.
        for i in 0..3 {
            up.update(
                &sys,
                DISPLAY,
                DEVICE_IFACE,
                vec![
                    ("IsPresent", Variant::from(true)),
                    ("Percentage", Variant::from(250.0f64)),
                    ("TimeToEmpty", Variant::from(-60i64)),
                    ("State", Variant::from(2u32)),
                    ("Energy", Variant::from(i as f64)),
                ],
            )
            .await;
            up.set(
                &sys,
                "/org/freedesktop/UPower",
                "org.freedesktop.UPower",
                "OnBattery",
                Variant::from(format!("yes {i}")),
            )
            .await;
        }
        let s = until_snapshot(&conn, "discharging shown without the absurd values", |s| {
            s["power"]["state"] == "discharging"
        })
        .await;
        assert!(s["power"].get("percentage").is_none(), "{s}");
        assert!(s["power"].get("time_to_empty_s").is_none(), "{s}");
        assert_eq!(s["power"]["on_battery"], false, "{s}");

        // NetworkManager: a connectivity value that does not exist.
        nm.call(
            &sys,
            "/org/freedesktop/NetworkManager",
            MOCK_IFACE,
            "SetConnectivity",
            &(77u32,),
        )
        .await;
        until_snapshot(&conn, "unknown connectivity", |s| {
            s["network"]["connectivity"] == "unknown"
        })
        .await;

        // A notification with a 1 MiB body of broken markup.
        let body = format!(
            "<b>bold</b> &amp; <a href=\"https://tracker.example/?id=1\">link</a> 1 < 2 <unclosed {}",
            "x".repeat(1 << 20)
        );
        let app = buses.session.connect().await;
        app.call_method(
            Some("org.freedesktop.Notifications"),
            "/org/freedesktop/Notifications",
            Some("org.freedesktop.Notifications"),
            "Notify",
            &(
                "BigApp",
                0u32,
                "",
                "Big",
                body.as_str(),
                Vec::<&str>::new(),
                HashMap::from([("urgency", Variant::from("not a byte"))]),
                -1i32,
            ),
        )
        .await
        .expect("Notify");
        let s = until_snapshot(&conn, "the big notification", |s| {
            s["notifications"]
                .as_array()
                .is_some_and(|a| a.iter().any(|n| n["app_name"] == "BigApp"))
        })
        .await;
        let n = &s["notifications"][0];
        let shown = n["body"].as_str().expect("body");
        assert!(shown.starts_with("bold & link 1 < 2 <unclosed xxx"), "{shown:.80}");
        assert!(shown.ends_with("…[truncated]"), "not cut: {} chars", shown.len());
        assert!(shown.chars().count() < 1100);
        assert!(!shown.contains("tracker.example"));
        assert_eq!(n["urgency"], "normal");
        drop(notifications);

        // A player whose properties have the wrong types, then metadata
        // with wrong values.
        let player = Mock::mpris_player(&buses.session.address, r#"{"broken": true}"#).await;
        let s = until_snapshot(&conn, "the broken player, shown", |s| {
            s["media.playback"]
                .as_array()
                .is_some_and(|a| a.iter().any(|st| st["id"] == "mpris-contextdtest"))
        })
        .await;
        let st = s["media.playback"]
            .as_array()
            .and_then(|a| a.iter().find(|st| st["id"] == "mpris-contextdtest"))
            .cloned()
            .unwrap_or(Value::Null);
        assert!(st.get("claimed_name").is_none(), "{st}");
        assert!(st["player"].get("status").is_none(), "{st}");
        assert_eq!(st["state"], "other", "{st}");
        let sess = buses.session.connect().await;
        let meta: HashMap<&str, Variant<'_>> = [
            ("xesam:title", Variant::from(42u32)),
            ("xesam:artist", Variant::from("Just One")),
            ("xesam:url", Variant::from("javascript:alert(1)")),
        ]
        .into_iter()
        .collect();
        player
            .call(&sess, MPRIS_PATH, MOCK_IFACE, "SetPlayback", &("Playing", meta))
            .await;
        let s = until_snapshot(&conn, "what the player got right", |s| {
            s["media.playback"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|st| st["player"]["status"] == "playing" && st["player"]["artist"] == "Just One")
            })
        })
        .await;
        assert!(!s.to_string().contains("javascript"), "{s}");

        // Still serving, and each problem was logged once.
        assert!(matches!(snapshot(&conn).await.get("sources"), Some(Value::Array(_))));
        let log = d.stderr();
        let count = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
        assert_eq!(count("property Percentage is 250"), 1, "{log}");
        assert_eq!(count("property TimeToEmpty is negative"), 1, "{log}");
        assert_eq!(count("property OnBattery has type s"), 1, "{log}");
        assert_eq!(count("property Connectivity is 77"), 1, "{log}");
        assert_eq!(count("urgency hint"), 1, "{log}");
        assert_eq!(count("Metadata[xesam:title] is not a string"), 1, "{log}");
        assert_eq!(count("Metadata[xesam:url] is not an http"), 1, "{log}");
    })
    .await
}

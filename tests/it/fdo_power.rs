//! `power` follows UPower (a python-dbusmock UPower on a private system
//! bus): on battery, the lid (the mock is a machine with one), the
//! display device's percentage and state.

use crate::common;
use crate::fdo;

use common::*;
use fdo::*;
use zbus::wire::Variant;

const UPOWER: &str = "org.freedesktop.UPower";
const DAEMON: &str = "/org/freedesktop/UPower";
const DISPLAY: &str = "/org/freedesktop/UPower/devices/DisplayDevice";
const DEVICE_IFACE: &str = "org.freedesktop.UPower.Device";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_follows_on_battery_and_percentage() {
    with_timeout(90, async {
        let buses = Buses::start();
        let upower = Mock::template(&buses.system.address, true, "upower", UPOWER).await;
        let sys = buses.system.connect().await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["power"])]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;

        // The mock starts on AC, without a battery.
        let s = until_snapshot(&conn, "power known", |s| s.get("power").is_some()).await;
        assert_eq!(s["power"]["on_battery"], false, "{s}");
        assert_eq!(s["power"]["lid_closed"], false, "{s}");
        assert!(s["power"].get("percentage").is_none(), "{s}");
        let mut changes = Changes::subscribe(&conn, &["power"]).await;

        // The lid closes.
        upower
            .set(&sys, DAEMON, UPOWER, "LidIsClosed", Variant::from(true))
            .await;
        changes
            .until(5, "lid closed", |c, d| {
                c == "power" && d["power"]["lid_closed"] == true
            })
            .await;

        // A battery appears, discharging, in one PropertiesChanged.
        upower
            .update(
                &sys,
                DISPLAY,
                DEVICE_IFACE,
                vec![
                    ("IsPresent", Variant::from(true)),
                    ("Percentage", Variant::from(80.0f64)),
                    ("State", Variant::from(2u32)),
                    ("TimeToEmpty", Variant::from(5400i64)),
                    ("WarningLevel", Variant::from(1u32)),
                ],
            )
            .await;
        let (d, took) = changes
            .until(5, "battery", |c, d| {
                c == "power" && d["power"]["percentage"] == 80.0
            })
            .await;
        eprintln!("battery → Changed in {took:?}");
        assert_eq!(d["power"]["state"], "discharging", "{d}");
        assert_eq!(d["power"]["time_to_empty_s"], 5400, "{d}");
        assert_eq!(d["power"]["warning_level"], "none", "{d}");

        // On battery.
        upower
            .set(&sys, DAEMON, UPOWER, "OnBattery", Variant::from(true))
            .await;
        let (_, took) = changes
            .until(5, "on battery", |_, d| d["power"]["on_battery"] == true)
            .await;
        eprintln!("OnBattery → Changed in {took:?}");

        // The attack: another peer on the system bus sends UPower's
        // signal, from its own name. The broker's match rule names no
        // sender (sources::fdo::SignalStream), so the bus delivers it;
        // the broker must drop it on the header's sender.
        let forged: std::collections::HashMap<&str, Variant<'_>> =
            [("Percentage", Variant::from(3.0f64))]
                .into_iter()
                .collect();
        sys.emit_signal(
            None::<&str>,
            DISPLAY,
            "org.freedesktop.DBus.Properties",
            "PropertiesChanged",
            &(DEVICE_IFACE, forged, Vec::<&str>::new()),
        )
        .await
        .expect("forged PropertiesChanged");

        // The percentage drops (sent after the forgery: the broker has
        // read that one first).
        upower
            .set(
                &sys,
                DISPLAY,
                DEVICE_IFACE,
                "Percentage",
                Variant::from(79.5f64),
            )
            .await;
        changes
            .until(5, "79.5 %", |_, d| {
                assert_ne!(
                    d["power"]["percentage"], 3.0,
                    "a forged signal was taken: {d}"
                );
                d["power"]["percentage"] == 79.5
            })
            .await;
        let s = until_snapshot(&conn, "snapshot follows", |s| {
            s["power"]["percentage"] == 79.5 && s["power"]["on_battery"] == true
        })
        .await;
        assert_eq!(s["power"]["state"], "discharging");
    })
    .await
}

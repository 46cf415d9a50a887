//! `network` follows NetworkManager (a python-dbusmock NetworkManager on a
//! private system bus): connectivity, metered, the primary connection's
//! type; its SSID only with `network.name`.

use crate::common;
use crate::fdo;

use common::*;
use fdo::*;
use serde_json::Value;
use zbus::wire::{ObjectPath, Variant};

const NM: &str = "org.freedesktop.NetworkManager";
const MANAGER: &str = "/org/freedesktop/NetworkManager";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_follows_connectivity_metered_and_hides_the_ssid() {
    with_timeout(90, async {
        let buses = Buses::start();
        let nm = Mock::template(&buses.system.address, true, "networkmanager", NM).await;
        let sys = buses.system.connect().await;
        // The template lacks these manager properties; add them (no signal).
        nm.add_property(&sys, MANAGER, NM, "Metered", Variant::from(2u32))
            .await;
        nm.add_property(
            &sys,
            MANAGER,
            NM,
            "PrimaryConnection",
            Variant::from(ObjectPath::try_from("/").expect("path")),
        )
        .await;
        let home = Home::new();
        // This test may read the network's name; contextctl only the network.
        home.write_policy(&[
            (&my_app_id(), &["network.name"]),
            (&contextctl_app(), &["network"]),
        ]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;

        let s = until_snapshot(&conn, "network known", |s| {
            s["network"]["connectivity"] == "full"
        })
        .await;
        assert_eq!(s["network"]["metered"], false, "{s}");
        let mut changes = Changes::subscribe(&conn, &["network"]).await;

        // Connectivity drops to a captive portal.
        nm.call(&sys, MANAGER, MOCK_IFACE, "SetConnectivity", &(2u32,))
            .await;
        let (_, took) = changes
            .until(5, "portal", |c, d| {
                c == "network" && d["network"]["connectivity"] == "portal"
            })
            .await;
        eprintln!("Connectivity → Changed in {took:?}");

        // Metered (NM_METERED_YES).
        nm.set(&sys, MANAGER, NM, "Metered", Variant::from(1u32))
            .await;
        let (_, took) = changes
            .until(5, "metered", |_, d| d["network"]["metered"] == true)
            .await;
        eprintln!("Metered → Changed in {took:?}");

        // A Wi-Fi connection becomes the primary one.
        let dev: String = nm
            .call(
                &sys,
                MANAGER,
                MOCK_IFACE,
                "AddWiFiDevice",
                &("wlan0", "wlan0", 100u32),
            )
            .await
            .body()
            .deserialize()
            .expect("device path");
        let ap: String = nm
            .call(
                &sys,
                MANAGER,
                MOCK_IFACE,
                "AddAccessPoint",
                &(
                    dev.as_str(),
                    "ap1",
                    "Hotel Alpenblick",
                    "00:11:22:33:44:55",
                    2u32,
                    2437u32,
                    54000u32,
                    82u8,
                    0x100u32,
                ),
            )
            .await
            .body()
            .deserialize()
            .expect("ap path");
        let connection: String = nm
            .call(
                &sys,
                MANAGER,
                MOCK_IFACE,
                "AddWiFiConnection",
                &(dev.as_str(), "conn1", "Hotel Alpenblick", "wpa-psk"),
            )
            .await
            .body()
            .deserialize()
            .expect("connection path");
        let active: String = nm
            .call(
                &sys,
                MANAGER,
                MOCK_IFACE,
                "AddActiveConnection",
                &(
                    vec![dev.as_str()],
                    connection.as_str(),
                    ap.as_str(),
                    "ac1",
                    2u32,
                ),
            )
            .await
            .body()
            .deserialize()
            .expect("active path");
        nm.set(
            &sys,
            MANAGER,
            NM,
            "PrimaryConnection",
            Variant::from(ObjectPath::try_from(active.as_str()).expect("path")),
        )
        .await;
        let (d, _) = changes
            .until(5, "wifi with its name", |_, d| {
                d["network"]["primary_type"] == "wifi" && d["network"]["ssid"].is_string()
            })
            .await;
        assert_eq!(d["network"]["ssid"], "Hotel Alpenblick");

        // contextctl may read `network` but not `network.name`.
        let (out, _) = contextctl(&buses, &home, &["status", "--json"]);
        let v: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["network"]["primary_type"], "wifi", "{v}");
        assert_eq!(v["network"]["metered"], true, "{v}");
        assert!(!out.contains("Alpenblick"), "the SSID leaked: {out}");
        assert!(
            v["withheld"]
                .as_array()
                .is_some_and(|a| a.contains(&Value::from("network.name"))),
            "{v}"
        );
        let (out, _) = contextctl(&buses, &home, &["status"]);
        assert!(out.contains("wifi") && !out.contains("Alpenblick"), "{out}");

        // The connection goes away.
        nm.set(
            &sys,
            MANAGER,
            NM,
            "PrimaryConnection",
            Variant::from(ObjectPath::try_from("/").expect("path")),
        )
        .await;
        changes
            .until(5, "no primary connection", |_, d| {
                d["network"].get("ssid").is_none() && d["network"].get("primary_type").is_none()
            })
            .await;
    })
    .await
}

//! `media.playback` follows an MPRIS player (a python-dbusmock template on
//! the session bus): it appears, plays with metadata, stops and leaves;
//! the track is shown only under `media.playback`, never with
//! `media.capture` alone; the identity comes from the player's process.

use crate::common;
use crate::fdo;

use std::collections::HashMap;

use common::*;
use fdo::*;
use serde_json::Value;
use zbus::wire::Variant;

const STREAM: &str = "mpris-contextdtest";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_appears_plays_stops_and_leaves() {
    with_timeout(90, async {
        let buses = Buses::start();
        let home = Home::new();
        home.write_policy(&[
            (&my_app_id(), &["media.playback"]),
            (&contextctl_app(), &["media.capture"]),
        ]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        until_source(&conn, "mpris", true).await;
        let mut changes = Changes::subscribe(&conn, &["media.playback"]).await;

        let mut player = Mock::mpris_player(&buses.session.address, "{}").await;
        let (d, took) = changes
            .until(5, "the player appears", |c, d| {
                c == "media.playback" && d["event"] == "opened" && d["stream"]["id"] == STREAM
            })
            .await;
        eprintln!("player appears → Changed in {took:?}");
        let s = &d["stream"];
        assert_eq!(s["kind"], "playback", "{d}");
        assert_eq!(s["claimed_name"], "Test Player", "{d}");
        assert_eq!(s["player"]["status"], "stopped", "{d}");
        assert_eq!(s["pid"], player.pid().expect("pid"), "{d}");
        assert!(
            s["app_id"]
                .as_str()
                // python3 -m dbusmock: known by the module it runs.
                .is_some_and(
                    |a| a == "python3:dbusmock" || (a.starts_with("exe:") && a.contains("python"))
                ),
            "identity from the process: {d}"
        );

        // Playing, with metadata.
        let sess = buses.session.connect().await;
        let meta: HashMap<&str, Variant<'_>> = [
            ("xesam:title", Variant::from("Secret Song")),
            ("xesam:artist", Variant::from(vec!["Some Artist"])),
            (
                "xesam:url",
                Variant::from("https://music.example/track/7?session=s3cret#t=1"),
            ),
            ("mpris:length", Variant::from(180_000_000i64)),
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
        let (d, took) = changes
            .until(5, "playing", |_, d| {
                d["stream"]["player"]["status"] == "playing"
            })
            .await;
        eprintln!("PlaybackStatus → Changed in {took:?}");
        let p = &d["stream"]["player"];
        assert_eq!(p["title"], "Secret Song", "{d}");
        assert_eq!(p["artist"], "Some Artist", "{d}");
        assert_eq!(
            p["url"], "https://music.example/track/7",
            "no query or fragment: {d}"
        );
        assert_eq!(d["stream"]["state"], "running", "{d}");

        // contextctl may read media.capture only: no trace of the player.
        let (out, _) = contextctl(&buses, &home, &["status", "--json"]);
        let v: Value = serde_json::from_str(&out).expect("json");
        assert!(
            !out.contains("Secret Song") && !out.contains(STREAM),
            "{out}"
        );
        assert!(
            v["withheld"]
                .as_array()
                .is_some_and(|a| a.contains(&Value::from("media.playback"))),
            "{v}"
        );

        // Stopped.
        player
            .set(
                &sess,
                MPRIS_PATH,
                MPRIS_PLAYER_IFACE,
                "PlaybackStatus",
                Variant::from("Stopped"),
            )
            .await;
        let (d, _) = changes
            .until(5, "stopped", |_, d| {
                d["stream"]["player"]["status"] == "stopped"
            })
            .await;
        assert_eq!(d["stream"]["state"], "suspended", "{d}");

        // It leaves the bus.
        player.stop();
        let (_, took) = changes
            .until(5, "the player leaves", |_, d| {
                d["event"] == "closed" && d["stream"]["id"] == STREAM
            })
            .await;
        eprintln!("player leaves → Changed in {took:?}");
        until_snapshot(&conn, "no player", |s| {
            s["media.playback"]
                .as_array()
                .is_some_and(|a| a.iter().all(|st| st["id"] != STREAM))
        })
        .await;

        // And comes back.
        player.restart().await;
        changes
            .until(5, "back", |_, d| {
                d["event"] == "opened" && d["stream"]["id"] == STREAM
            })
            .await;
    })
    .await
}

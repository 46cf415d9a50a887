//! A caller without `media.capture` learns nothing about capture: no
//! capture stream and no capture session in GetSnapshot or GetMedia, no
//! subscription to it, and no capture `Changed` on its `media.playback`
//! subscription, while a microphone is recorded and audio plays.

use crate::common;
use crate::pipewire_client;

use std::process::Command;
use std::time::Duration;

use common::session::Session;
use common::*;
use contextd::client::json::{dict_to_json, to_json};
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use pipewire_client::Proc;
use serde_json::Value;

fn spawn(session: &Session, prog: &str, args: &[&std::ffi::OsStr]) -> Proc {
    let mut cmd = Command::new(prog);
    session.apply(&mut cmd);
    cmd.args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    Proc(cmd.spawn().expect(prog))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_media_capture_no_capture_is_seen_anywhere() {
    with_timeout(90, async {
        let session = Session::start(&["--no-sway"]);
        let home = Home::new();
        // This test process may read playback only; busctl may read capture
        // (it is the control: the capture does exist).
        home.write_policy(&[
            (&my_app_id(), &["media.playback"]),
            ("exe:/usr/bin/busctl", &["media.capture"]),
        ]);
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        match ctx.subscribe(&["media.capture"]).await {
            Err(zbus::Error::MethodError(name, _, _)) => {
                assert_eq!(name.as_str(), "org.contextd.Error.NotAllowed")
            }
            other => panic!("expected NotAllowed, got {other:?}"),
        }
        let path = ctx.subscribe(&["media.playback"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changed = sub.receive_changed().await.expect("stream");

        let wav = home.dir.path().join("tone.wav");
        pipewire_client::write_tone(&wav, 30);
        let out = home.dir.path().join("out.wav");
        let rec = spawn(&session, "pw-record", &[out.as_os_str()]);
        let play = spawn(&session, "pw-play", &[wav.as_os_str()]);

        // The control: a caller with media.capture sees the recording.
        let rec_pid = rec.pid().to_string();
        eventually(20, "busctl sees the capture", || async {
            let (st, out, _) = run_cmd(
                Command::new("busctl")
                    .arg(format!(
                        "--address={}",
                        session.get("DBUS_SESSION_BUS_ADDRESS").unwrap_or("")
                    ))
                    .args(["--json=short", "call", BUS_NAME, PATH])
                    .args(["org.contextd.Context1", "GetMedia"]),
                20,
            );
            (st.success() && out.contains("microphone") && out.contains(&rec_pid)).then_some(())
        })
        .await;
        // And this caller sees the playback, so it is looking at the same world.
        eventually(20, "playback seen", || async {
            let m = dict_to_json(&ctx.get_media().await.ok()?);
            m["media.playback"]
                .as_array()?
                .iter()
                .any(|s| s["pid"] == play.pid() && s["active"] == true)
                .then_some(())
        })
        .await;

        let rec_pid = rec.pid();
        let snap = dict_to_json(&ctx.get_snapshot().await.expect("snapshot"));
        let media = dict_to_json(&ctx.get_media().await.expect("media"));
        for v in [&snap, &media] {
            assert!(v.get("media.capture").is_none(), "{v}");
            assert!(v.get("capture_sessions").is_none(), "{v}");
            assert!(!v.to_string().contains("microphone"), "{v}");
            assert!(
                !v.to_string().contains(&format!("\"pid\":{rec_pid}")),
                "{v}"
            );
            assert!(
                v["withheld"]
                    .as_array()
                    .is_some_and(|w| w.contains(&"media.capture".into())),
                "{v}"
            );
        }

        // Stop the recording too: every Changed so far and for a while
        // after is playback, never capture.
        drop(rec);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
        let mut n = 0;
        while let Ok(Some(sig)) = tokio::time::timeout_at(deadline, changed.next()).await {
            let args = sig.args().expect("args");
            let data: Value = args
                .data()
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect();
            assert_eq!(args.category(), "media.playback", "{data}");
            assert_eq!(data["stream"]["kind"], "playback", "{data}");
            assert_ne!(data["stream"]["pid"], rec_pid, "{data}");
            n += 1;
        }
        assert!(n > 0, "the playback subscription got nothing at all");
        drop(play);
    })
    .await
}

//! `contextctl media`: who plays and who captures now, and the capture of
//! the last 24 hours, as a table and as JSON; what contextctl may not see
//! is named as withheld.

use crate::common;
use crate::pipewire_client;

use std::process::Command;

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
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

fn contextctl(session: &Session, home: &Home, args: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(contextctl_bin());
    session.apply(&mut cmd);
    for (k, v) in home.envs_for(session.get("DBUS_SESSION_BUS_ADDRESS").unwrap_or("")) {
        if k != "XDG_RUNTIME_DIR" {
            cmd.env(k, v);
        }
    }
    let (st, out, err) = run_cmd(cmd.args(args), 30);
    (st.success(), out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contextctl_media_shows_now_and_the_day() {
    with_timeout(90, async {
        let session = Session::start(&["--no-sway"]);
        let home = Home::new();
        let ctl = format!("exe:{}", contextctl_bin());
        home.write_policy(&[
            (&ctl, &["media.playback", "media.capture"]),
            (&my_app_id(), &["media.playback", "media.capture"]),
        ]);
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        let wav = home.dir.path().join("tone.wav");
        pipewire_client::write_tone(&wav, 30);
        let out = home.dir.path().join("out.wav");
        let mut cmd = Command::new("pw-play");
        session.apply(&mut cmd);
        cmd.arg("--properties={application.name=\"TestPlayer\"}")
            .arg(&wav)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let _play = Proc(cmd.spawn().expect("pw-play"));
        let mut rec = spawn(&session, "pw-record", &[out.as_os_str()]);
        let rec_pid = rec.pid();
        eventually(20, "both running", || async {
            let m = dict_to_json(&ctx.get_media().await.ok()?);
            let on = |k: &str| {
                m[k].as_array()
                    .is_some_and(|a| a.iter().any(|s| s["active"] == true))
            };
            (on("media.playback") && on("media.capture")).then_some(())
        })
        .await;
        rec.stop();
        eventually(10, "capture ended", || async {
            let m = dict_to_json(&ctx.get_media().await.ok()?);
            m["capture_sessions"]
                .as_array()?
                .iter()
                .any(|c| c["pid"] == rec_pid && c.get("end").is_some())
                .then_some(())
        })
        .await;

        let (ok, text, err) = contextctl(&session, &home, &["media"]);
        assert!(ok, "{err}");
        assert!(
            text.contains("Playing:") && text.contains("TestPlayer"),
            "{text}"
        );
        assert!(text.contains("Capturing: nothing"), "{text}");
        assert!(text.contains("Capture in the last 24 hours:"), "{text}");
        let row = text
            .lines()
            .find(|l| l.starts_with("microphone"))
            .unwrap_or_else(|| panic!("no microphone row:\n{text}"));
        assert!(row.contains("pw-cat") && !row.contains(" now "), "{row}");

        let (ok, json, err) = contextctl(&session, &home, &["--json", "media"]);
        assert!(ok, "{err}");
        let v: Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(v["media.playback"][0]["claimed_name"], "TestPlayer", "{v}");
        assert_eq!(v["capture_sessions"][0]["kind"], "microphone", "{v}");
        assert_eq!(v["capture_sessions"][0]["pid"], rec_pid, "{v}");

        // With playback only, capture is withheld, and said to be.
        home.write_policy(&[(&ctl, &["media.playback"])]);
        let text = eventually(10, "policy reloaded", || async {
            let (ok, text, _) = contextctl(&session, &home, &["media"]);
            (ok && text.contains("Withheld from contextctl: media.capture")).then_some(text)
        })
        .await;
        assert!(!text.contains("microphone"), "{text}");
        assert!(text.contains("TestPlayer"), "{text}");

        // With neither, an error that names the category.
        home.write_policy(&[]);
        let err = eventually(10, "policy reloaded", || async {
            let (ok, _, err) = contextctl(&session, &home, &["media"]);
            (!ok).then_some(err)
        })
        .await;
        assert!(
            err.contains("NotAllowed") && err.contains("media.capture"),
            "{err}"
        );
    })
    .await
}

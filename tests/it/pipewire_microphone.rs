//! `pw-record` is microphone capture by that process, active while it
//! records; when it stops, it is in the capture sessions of the last 24
//! hours with its start and end.

use crate::common;
use crate::pipewire_client;

use std::time::Duration;

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use pipewire_client::Proc;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pw_record_is_microphone_capture_and_ends_in_the_day_list() {
    pw_record_is_microphone_capture_and_ends_in_the_day_list_in(&[]).await;
}

/// The whole test in the session of `session.sh start --no-sway FLAGS`
/// (`--root ROOT`: another Debian's PipeWire, WirePlumber and pw-record).
pub(crate) async fn pw_record_is_microphone_capture_and_ends_in_the_day_list_in(flags: &[&str]) {
    with_timeout(90, async {
        let mut args = vec!["--no-sway"];
        args.extend_from_slice(flags);
        let session = Session::start(&args);
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["media.capture"])]);
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        let out = home.dir.path().join("out.wav");
        let mut cmd = session.command("pw-record");
        session.apply(&mut cmd);
        cmd.arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut rec = Proc(cmd.spawn().expect("pw-record"));
        let pid = rec.pid();
        // From a root, pw-record (a link to pw-cat) is exec'd by
        // scripts/in-root.sh under the same pid: wait until it runs.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let exe = loop {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe");
            if exe
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("pw-"))
            {
                break exe;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "pw-record not exec'd in 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        };

        let s = eventually(20, "pw-record capturing", || async {
            let m = dict_to_json(&ctx.get_media().await.ok()?);
            m["media.capture"]
                .as_array()?
                .iter()
                .find(|s| s["pid"] == pid && s["active"] == true && s.get("app_id").is_some())
                .cloned()
        })
        .await;
        assert_eq!(s["kind"], "microphone", "{s}");
        assert_eq!(s["app_id"], format!("exe:{}", exe.display()), "{s}");
        let id = s["id"].as_str().expect("id").to_owned();
        // An open session while it records.
        let m = dict_to_json(&ctx.get_media().await.expect("media"));
        let open: Vec<&Value> = m["capture_sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .filter(|c| c["stream_id"] == id.as_str())
            .collect();
        assert_eq!(open.len(), 1, "{m}");
        assert_eq!(open[0]["active"], true, "{m}");
        assert!(open[0].get("end").is_none(), "{m}");

        rec.stop();
        let done = eventually(10, "capture ended", || async {
            let m = dict_to_json(&ctx.get_media().await.ok()?);
            let gone = !m["media.capture"]
                .as_array()?
                .iter()
                .any(|s| s["id"] == id.as_str());
            let c = m["capture_sessions"]
                .as_array()?
                .iter()
                .find(|c| c["stream_id"] == id.as_str())?
                .clone();
            (gone && c.get("end").is_some()).then_some(c)
        })
        .await;
        assert_eq!(done["kind"], "microphone", "{done}");
        assert_eq!(done["pid"], pid, "{done}");
        assert_eq!(done["app_id"], format!("exe:{}", exe.display()), "{done}");
        assert_eq!(done["active"], false, "{done}");
        let t = |k: &str| {
            chrono::DateTime::parse_from_rfc3339(done[k].as_str().unwrap_or("")).expect("time")
        };
        assert!(t("start") <= t("end"), "{done}");
    })
    .await
}

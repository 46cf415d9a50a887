//! PipeWire killed and started again: the source becomes unavailable with
//! the reason, the streams of the dead instance are removed, the daemon
//! stays up, and once PipeWire is back the source is available again and
//! streams are listed (under a new id prefix).

use crate::common;
use crate::pipewire_client;

use std::process::Command;

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use pipewire_client::Proc;
use serde_json::Value;

fn pw_record(session: &Session, out: &std::path::Path) -> Proc {
    let mut cmd = Command::new("pw-record");
    session.apply(&mut cmd);
    cmd.arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    Proc(cmd.spawn().expect("pw-record"))
}

async fn pipewire_source(ctx: &Context1Proxy<'_>) -> Option<Value> {
    ctx.list_sources()
        .await
        .ok()?
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == "pipewire")
}

async fn capture_ids(ctx: &Context1Proxy<'_>) -> Option<Vec<String>> {
    let m = dict_to_json(&ctx.get_media().await.ok()?);
    Some(
        m["media.capture"]
            .as_array()?
            .iter()
            .filter_map(|s| s["id"].as_str().map(str::to_owned))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipewire_restart_makes_the_source_unavailable_then_relists() {
    with_timeout(120, async {
        let session = Session::start(&["--no-sway"]);
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["media.capture"])]);
        let mut daemon = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let out = home.dir.path().join("out.wav");

        let rec = pw_record(&session, &out);
        let before = eventually(20, "capture listed", || async {
            capture_ids(&ctx).await.filter(|v| v.len() == 1)
        })
        .await;

        session.ctl("kill-pipewire", &[]);
        let src = eventually(10, "pipewire unavailable", || async {
            pipewire_source(&ctx)
                .await
                .filter(|s| s["available"] == false)
        })
        .await;
        assert!(
            src["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("PipeWire")),
            "{src}"
        );
        eventually(10, "the dead instance's streams removed", || async {
            capture_ids(&ctx).await.filter(|v| v.is_empty())
        })
        .await;
        drop(rec);
        assert!(
            daemon.child.try_wait().expect("wait").is_none(),
            "the daemon exited"
        );

        session.ctl("start-pipewire", &[]);
        eventually(15, "pipewire available again", || async {
            pipewire_source(&ctx)
                .await
                .filter(|s| s["available"] == true)
        })
        .await;
        let _rec = pw_record(&session, &out);
        let after = eventually(20, "capture listed after the restart", || async {
            capture_ids(&ctx).await.filter(|v| v.len() == 1)
        })
        .await;
        let prefix = |id: &str| id.rsplit_once('-').map(|(p, _)| p.to_owned());
        assert_ne!(
            prefix(&before[0]),
            prefix(&after[0]),
            "a new connection must use a new id prefix: {before:?} {after:?}"
        );
        assert!(
            daemon.child.try_wait().expect("wait").is_none(),
            "the daemon exited"
        );
    })
    .await
}

//! Video capture is reported as camera or screen capture, decided by what
//! the stream is linked to: a real `Stream/Input/Video` stream linked to a
//! plain video source is a camera; linked to a source made like
//! xdg-desktop-portal-wlr's screen cast (`xdpw-stream-…`), the screen.

use crate::common;
use crate::pipewire_client;

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use serde_json::Value;

async fn capture_of(ctx: &Context1Proxy<'_>, node: u32) -> Option<Value> {
    let m = dict_to_json(&ctx.get_media().await.ok()?);
    m["media.capture"]
        .as_array()?
        .iter()
        .find(|s| {
            s["id"]
                .as_str()
                .is_some_and(|i| i.ends_with(&format!("-{node}")))
        })
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn video_capture_is_camera_or_screen_by_its_source() {
    with_timeout(90, async {
        let session = Session::start(&["--no-sway"]);
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["media.capture", "media.playback"])]);
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let socket = pipewire_client::socket_of(session.get("PIPEWIRE_RUNTIME_DIR").expect("pw"));

        // A plain video source (a test pattern): the capture is a camera.
        let (cam, (_, node)) = pipewire_client::video_capture(
            &socket,
            &[("node.name", "contextd-test-pattern")],
            &[("application.name", "VideoCall")],
        );
        let s = eventually(20, "camera capture running", || async {
            capture_of(&ctx, node).await.filter(|s| s["active"] == true)
        })
        .await;
        assert_eq!(s["kind"], "camera", "{s}");
        assert_eq!(s["app_id"], my_app_id(), "{s}");
        assert_eq!(s["pid"], std::process::id(), "{s}");
        assert_eq!(s["claimed_name"], "VideoCall", "{s}");
        drop(cam);
        eventually(10, "camera capture gone", || async {
            capture_of(&ctx, node).await.is_none().then_some(())
        })
        .await;

        // A source made like xdg-desktop-portal-wlr's: the screen.
        let (_screen, (source, node)) =
            pipewire_client::video_capture(&socket, &[("node.name", "xdpw-stream-ctxdtest")], &[]);
        let s = eventually(20, "screen capture running", || async {
            capture_of(&ctx, node)
                .await
                .filter(|s| s["active"] == true && s["kind"] == "screen")
        })
        .await;
        assert_eq!(s["app_id"], my_app_id(), "{s}");
        // The screen-cast source itself is not reported as anyone's stream.
        let m = dict_to_json(&ctx.get_media().await.expect("media"));
        let all = format!("{}{}", m["media.playback"], m["media.capture"]);
        assert!(!all.contains(&format!("-{source}\"")), "{m}");
        // Both end in the capture list of the day.
        let kinds: Vec<String> = m["capture_sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .map(|s| s["kind"].as_str().unwrap_or("").to_owned())
            .collect();
        assert!(
            kinds.contains(&"camera".to_owned()) && kinds.contains(&"screen".to_owned()),
            "{m}"
        );
    })
    .await
}

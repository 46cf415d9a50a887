//! `pw-play` makes a playback stream: the broker reports it for the pw-play
//! process (app id from its PID), with what it claims as claims, whether
//! it was already playing when the broker started or starts later; a
//! subscriber to `media.playback` is told; stopping it removes it.

use crate::common;
use crate::fdo;
use crate::pipewire_client;

use std::process::Command;
use std::time::Duration;

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use fdo::Changes;
use pipewire_client::Proc;
use serde_json::Value;

fn pw_play(session: &Session, wav: &std::path::Path) -> Proc {
    let mut cmd = session.command("pw-play");
    session.apply(&mut cmd);
    cmd.arg("--properties={application.name=\"TestPlayer\"}")
        .arg(wav)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let p = Proc(cmd.spawn().expect("pw-play (pipewire-bin)"));
    // From a root, pw-play is exec'd by scripts/in-root.sh under the same
    // pid: wait until it is pw-play, as the broker will see it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_link(format!("/proc/{}/exe", p.pid())).is_ok_and(|e| {
        // pw-play is a link to pw-cat.
        e.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("pw-"))
    }) {
        assert!(
            std::time::Instant::now() < deadline,
            "pw-play not exec'd in 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    p
}

/// The version of the session's PipeWire server (the core object's, as
/// `pw-cli info 0` prints it).
fn pipewire_server_version(session: &Session) -> String {
    let mut cmd = Command::new("pw-cli");
    session.apply(&mut cmd);
    let (st, out, err) = run_cmd(cmd.args(["info", "0"]), 10);
    assert!(st.success(), "pw-cli info 0: {out}{err}");
    out.lines()
        .find_map(|l| l.trim().strip_prefix("version: "))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_else(|| panic!("no version in pw-cli info 0: {out}"))
}

async fn playback_of(ctx: &Context1Proxy<'_>, pid: u32) -> Option<Value> {
    let m = dict_to_json(&ctx.get_media().await.ok()?);
    m["media.playback"]
        .as_array()?
        .iter()
        .find(|s| s["pid"] == pid)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pw_play_is_a_playback_stream_of_its_process() {
    pw_play_is_a_playback_stream_of_its_process_in(&[], "0.3").await;
}

/// pw-play before and after the broker starts, in the session of
/// `session.sh start --no-sway FLAGS` (`--root ROOT`: another Debian's
/// PipeWire and pw-play), whose PipeWire's version starts with
/// `pipewire_version`.
pub(crate) async fn pw_play_is_a_playback_stream_of_its_process_in(
    flags: &[&str],
    pipewire_version: &str,
) {
    with_timeout(90, async {
        let mut args = vec!["--no-sway"];
        args.extend_from_slice(flags);
        let session = Session::start(&args);
        let version = pipewire_server_version(&session);
        assert!(
            version.starts_with(pipewire_version),
            "PipeWire {pipewire_version} expected, the server is {version}"
        );
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["media.playback"])]);
        let wav = home.dir.path().join("tone.wav");
        pipewire_client::write_tone(&wav, 30);

        // Playing before the broker starts: listed when it connects.
        let mut early = pw_play(&session, &wav);
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let exe = std::fs::read_link(format!("/proc/{}/exe", early.pid())).expect("exe");
        let s = eventually(20, "the early pw-play listed, running", || async {
            playback_of(&ctx, early.pid())
                .await
                .filter(|s| s["active"] == true && s.get("app_id").is_some())
        })
        .await;
        assert_eq!(s["kind"], "playback", "{s}");
        assert_eq!(s["app_id"], format!("exe:{}", exe.display()), "{s}");
        assert_eq!(s["claimed_name"], "TestPlayer", "{s}");
        assert_eq!(s["claimed_binary"], "pw-cat", "{s}");
        assert_eq!(s["state"], "running", "{s}");
        assert!(
            s["id"].as_str().is_some_and(|i| i.starts_with("pw-")),
            "{s}"
        );
        assert!(
            s["media_name"]
                .as_str()
                .is_some_and(|n| n.ends_with("tone.wav")),
            "{s}"
        );

        // Stopping it removes it.
        early.stop();
        eventually(10, "the early pw-play removed", || async {
            let m = dict_to_json(&ctx.get_media().await.ok()?);
            (m["media.playback"].as_array()?.is_empty()).then_some(())
        })
        .await;

        // A subscriber learns of a new one as it starts, and as it stops.
        let mut changes = Changes::subscribe(&conn, &["media.playback"]).await;
        let mut late = pw_play(&session, &wav);
        let pid = late.pid();
        let (running, _) = changes
            .until(10, "the late pw-play running", |cat, d| {
                assert_eq!(cat, "media.playback");
                d["stream"]["pid"] == pid && d["stream"]["active"] == true
            })
            .await;
        let id = running["stream"]["id"].as_str().unwrap_or("").to_owned();
        late.stop();
        changes
            .until(10, "the late pw-play closed", |cat, d| {
                assert_eq!(cat, "media.playback");
                d["event"] == "closed" && d["stream"]["id"] == id.as_str()
            })
            .await;
    })
    .await
}

/// Streams that end while the broker is still binding them (a click, a
/// notification sound) must not disturb the connection: PipeWire then
/// answers the broker's bind and destroy with errors, and the broker once
/// took those for a lost connection, reported every stream closed and
/// reopened under new ids after a 250 ms backoff. Here one stream plays
/// throughout while short ones are killed as their node appears; the long
/// one must keep its id and never be reported closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_ending_as_they_start_leave_the_others_alone() {
    with_timeout(120, async {
        let session = Session::start(&["--no-sway"]);
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["media.playback"])]);
        let wav = home.dir.path().join("tone.wav");
        pipewire_client::write_tone(&wav, 60);

        let steady = pw_play(&session, &wav);
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let s = eventually(20, "the steady pw-play listed", || async {
            playback_of(&ctx, steady.pid())
                .await
                .filter(|s| s["active"] == true)
        })
        .await;
        let steady_id = s["id"].as_str().expect("id").to_owned();

        let mut changes = Changes::subscribe(&conn, &["media.playback"]).await;
        let socket = pipewire_client::socket_of(session.get("PIPEWIRE_RUNTIME_DIR").expect("pw"));
        let (_listener, seen) = pipewire_client::watch_nodes(&socket);
        let is_stream = |n: &pipewire_client::SeenNode| {
            n.props.get("media.class").map(String::as_str) == Some("Stream/Output/Audio")
        };
        // The listener's first stream is the steady one.
        let steady_node = loop {
            let n = seen
                .recv_timeout(Duration::from_secs(10))
                .expect("the listener sees the steady stream");
            if is_stream(&n) {
                break n.id;
            }
        };
        for _ in 0..40 {
            let mut p = pw_play(&session, &wav);
            // Its node's global is out: the broker is binding it now.
            loop {
                let n = seen
                    .recv_timeout(Duration::from_secs(10))
                    .expect("the listener sees the short stream");
                if is_stream(&n) && n.id != steady_node {
                    break;
                }
            }
            let _ = p.0.kill();
            let _ = p.0.wait();
        }
        // A last stream, played until the broker reports it: every signal
        // about the short ones came before.
        let mut last = pw_play(&session, &wav);
        let last_pid = last.pid();
        changes
            .until(10, "the last pw-play opened", |cat, d| {
                assert_eq!(cat, "media.playback");
                assert!(
                    !(d["event"] == "closed" && d["stream"]["id"] == steady_id.as_str()),
                    "the steady stream {steady_id} was reported closed while it played"
                );
                d["event"] != "closed" && d["stream"]["pid"] == last_pid
            })
            .await;
        let s = playback_of(&ctx, steady.pid())
            .await
            .expect("steady listed");
        assert_eq!(s["id"], steady_id.as_str(), "the steady stream kept its id");
        last.stop();
    })
    .await
}

//! The PipeWire source is the broker's one long-lived use of a C library
//! through handles it must drop in the right order. A stream that ends
//! (`global_remove`) once made the broker drop the node's proxy before its
//! listener, and the listener's removal then wrote into the freed proxy:
//! silent in every functional test, it aborted the daemon with "double
//! free or corruption" under `make soak` once glibc handed the block to
//! someone else. Here the real daemon runs under valgrind's memcheck in a
//! real PipeWire session while streams start and end, and memcheck must
//! report no invalid read, write or free.

use crate::common;
use crate::pipewire_client;

use std::process::{Command, Stdio};

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;

/// How many streams start and end while the daemon is watched.
const STREAMS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_ending_touch_no_freed_memory() {
    if Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        panic!("valgrind is not installed (scripts/deps.sh installs it)");
    }
    with_timeout(240, async {
        let session = Session::start(&["--no-sway"]);
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["media.playback"])]);
        let wav = home.dir.path().join("tone.wav");
        pipewire_client::write_tone(&wav, 30);
        let report = home.dir.path().join("memcheck.txt");
        let address = session
            .get("DBUS_SESSION_BUS_ADDRESS")
            .expect("session bus")
            .to_owned();

        // The daemon under memcheck: only what this test is about (bad
        // reads, writes and frees), no leak or uninitialised-value checks,
        // which the C libraries' own behaviour would drown.
        let mut cmd = Command::new("valgrind");
        cmd.args([
            "-q",
            "--tool=memcheck",
            "--leak-check=no",
            "--undef-value-errors=no",
            "--num-callers=30",
        ])
        .arg(format!("--log-file={}", report.display()))
        .arg(contextd_bin())
        .env_clear()
        .envs(session_env(&session, &home))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let mut daemon = cmd.spawn().expect("valgrind contextd");
        let _kill = KillOnDrop(daemon.id());
        let conn = connect_to(&address).await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("dbus proxy");
        // Starting under memcheck takes many times as long as without.
        eventually(120, "the daemon under valgrind owns its name", || async {
            let name = zbus::names::BusName::try_from(BUS_NAME).ok()?;
            dbus.name_has_owner(name).await.ok()?.then_some(())
        })
        .await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        for i in 0..STREAMS {
            let mut cmd = session.command("pw-play");
            session.apply(&mut cmd);
            cmd.arg(&wav)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut play = pipewire_client::Proc(cmd.spawn().expect("pw-play"));
            let pid = play.pid();
            eventually(60, &format!("stream {i} seen by the broker"), || async {
                let m = dict_to_json(&ctx.get_media().await.ok()?);
                m["media.playback"]
                    .as_array()?
                    .iter()
                    .any(|s| s["pid"] == pid)
                    .then_some(())
            })
            .await;
            // Its end is the global_remove that dropped the node's proxy.
            play.stop();
            eventually(60, &format!("stream {i} gone"), || async {
                let m = dict_to_json(&ctx.get_media().await.ok()?);
                (!m["media.playback"].as_array()?.iter().any(|s| s["pid"] == pid)).then_some(())
            })
            .await;
        }

        // A clean stop, so that the report is complete.
        // SAFETY-free: kill(2) on our own child.
        unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
        let stopped = tokio::task::block_in_place(|| daemon.wait()).expect("wait");
        let text = std::fs::read_to_string(&report).unwrap_or_default();
        let bad: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.contains("Invalid read")
                    || l.contains("Invalid write")
                    || l.contains("Invalid free")
                    || l.contains("Mismatched free")
            })
            .collect();
        assert!(
            bad.is_empty(),
            "memcheck found {} bad accesses; the daemon (exit {stopped}) touched memory it does not own:\n{text}",
            bad.len()
        );
    })
    .await;
}

/// The daemon is killed if the test fails half-way.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY-free: kill(2) on our own child (gone already: ESRCH).
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

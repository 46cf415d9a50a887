//! Cameras opened without PipeWire: a real process opening a `videoN` node
//! in the configured directory is a `camera` capture with that process's
//! identity (the broker's resolver), ends when it closes, and is in the
//! day's capture sessions and the timeline; a node created after start is
//! watched (a character device made with `mknod` when the test runs as
//! root, else a regular file); two openers are two streams; without
//! `media.capture` a reader sees none of it; a directory that cannot be
//! watched makes the source unavailable until it appears. An app that
//! captures a PipeWire camera and holds a video node at once (this test
//! process, with a real PipeWire) shows both streams live and makes one
//! capture session and one timeline interval. A child that inherited the
//! node's descriptor and exits (no inotify event: its parent still holds
//! the open file) ends its stream too.

use crate::common;
use crate::pipewire_client;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Context1Proxy, History1Proxy};
use serde_json::Value;

/// A process that opens and closes files of a directory when told to
/// (`open NAME`, `close NAME`), answering `ok` when done.
struct Opener {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

const OPENER: &str = r#"
import sys
files = {}
for line in sys.stdin:
    cmd, name = line.split()
    if cmd == "open":
        files[name] = open(name, "rb")
    else:
        files.pop(name).close()
    print("ok", flush=True)
"#;

impl Opener {
    fn start(dir: &Path) -> Opener {
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", OPENER])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Opener {
            child,
            stdin,
            stdout,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the broker should call this process: its own resolver's answer.
    fn app_id(&self) -> String {
        contextd::internals::resolve_pid(self.pid())
            .expect("identity")
            .app_id
            .to_string()
    }

    fn tell(&mut self, cmd: &str, name: &str) {
        writeln!(self.stdin, "{cmd} {name}").expect("write");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "ok", "{cmd} {name}");
    }
}

impl Drop for Opener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// config.toml: undecided access denied, the sources in `disabled` off,
/// the video nodes in `dir`.
fn config_with(dir: &Path, disabled: &[&str]) -> String {
    format!(
        "[consent]\nundecided = \"deny\"\n\n[sources]\ndisabled = {disabled:?}\n\n\
         [sources.v4l2]\ndir = {:?}\n",
        dir.display().to_string()
    )
}

/// [`config_with`] with only the V4L2 source on.
fn config(dir: &Path) -> String {
    let others = [
        "pipewire",
        "wayland",
        "login1",
        "upower",
        "networkmanager",
        "notifications",
        "mpris",
    ];
    config_with(dir, &others)
}

async fn media(ctx: &Context1Proxy<'_>) -> Option<Value> {
    Some(dict_to_json(&ctx.get_media().await.ok()?))
}

/// The capture stream of `pid` on node `name`, now.
async fn capture(ctx: &Context1Proxy<'_>, pid: u32, name: &str) -> Option<Value> {
    media(ctx).await?["media.capture"]
        .as_array()?
        .iter()
        .find(|s| s["pid"] == pid && s["media_name"].as_str().is_some_and(|m| m.ends_with(name)))
        .cloned()
}

async fn source(ctx: &Context1Proxy<'_>) -> Option<Value> {
    ctx.list_sources()
        .await
        .ok()?
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == "v4l2")
}

/// A node named `name` in `dir`: a character device (that of `/dev/null`)
/// when we may make one, else a regular file. Either is what the source
/// watches; a device is found by its number, a file by its inode.
fn make_node(dir: &Path, name: &str) -> &'static str {
    let path = dir.join(name);
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: mknod(2) with a valid C string; makedev has no preconditions.
    let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if r == 0 && std::fs::File::open(&path).is_ok() {
        "character device"
    } else {
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, b"").expect("write node");
        "regular file"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_holding_a_video_node_is_a_camera_capture() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        let cams = tempfile::tempdir().expect("tempdir");
        std::fs::write(cams.path().join("video0"), b"").expect("video0");
        home.write_config(&config(cams.path()));
        home.write_policy(&[(&my_app_id(), &["media.capture", "history"])]);
        let since = chrono::Utc::now().timestamp() - 1;
        let d = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "v4l2 available", || async {
            source(&ctx).await.filter(|s| s["available"] == true)
        })
        .await;

        // One opener: a camera capture with its identity.
        let mut a = Opener::start(cams.path());
        a.tell("open", "video0");
        let s = eventually(10, "camera capture", || async {
            capture(&ctx, a.pid(), "video0").await
        })
        .await;
        assert_eq!(s["kind"], "camera", "{s}");
        assert_eq!(s["active"], true, "{s}");
        assert_eq!(s["app_id"], a.app_id(), "{s}");
        assert!(
            s["claimed_name"]
                .as_str()
                .is_some_and(|n| n.starts_with("python")),
            "{s}"
        );
        let video0 = cams.path().join("video0").display().to_string();
        assert_eq!(s["media_name"], video0, "{s}");

        // A second opener: two streams; the first closes, the second stays.
        let mut b = Opener::start(cams.path());
        b.tell("open", "video0");
        eventually(10, "second camera capture", || async {
            capture(&ctx, b.pid(), "video0").await
        })
        .await;
        a.tell("close", "video0");
        eventually(10, "first capture ended", || async {
            capture(&ctx, a.pid(), "video0")
                .await
                .is_none()
                .then_some(())
        })
        .await;
        let m = media(&ctx).await.expect("media");
        assert!(capture(&ctx, b.pid(), "video0").await.is_some(), "{m}");
        // Both are the same app (python3): one capture session, the first's,
        // open while either holds the camera (see `core::captures`).
        let sessions = m["capture_sessions"].as_array().expect("sessions").clone();
        assert_eq!(sessions.len(), 1, "{m}");
        assert_eq!(sessions[0]["pid"], a.pid(), "{m}");
        assert_eq!(sessions[0]["kind"], "camera", "{m}");
        assert_eq!(sessions[0]["active"], true, "{m}");

        // The second exits without closing: its stream ends too.
        let b_pid = b.pid();
        drop(b);
        eventually(10, "second capture ended", || async {
            capture(&ctx, b_pid, "video0").await.is_none().then_some(())
        })
        .await;
        let m = media(&ctx).await.expect("media");
        let ended = &m["capture_sessions"][0];
        assert_eq!(ended["active"], false, "{m}");
        assert!(ended.get("end").is_some(), "{m}");

        // A node made after start is watched.
        let kind = make_node(cams.path(), "video1");
        eprintln!("video1 is a {kind}");
        a.tell("open", "video1");
        let s = eventually(10, "capture of the new node", || async {
            capture(&ctx, a.pid(), "video1").await
        })
        .await;
        assert_eq!(s["app_id"], a.app_id(), "{s}");
        a.tell("close", "video1");
        eventually(10, "capture of the new node ended", || async {
            capture(&ctx, a.pid(), "video1")
                .await
                .is_none()
                .then_some(())
        })
        .await;

        // The timeline has the first opener's camera use, ended.
        let h = History1Proxy::new(&conn).await.expect("proxy");
        let app = a.app_id();
        let row = eventually(10, "timeline row", || async {
            let (events, _) = h.query(since, 0, &[], &[], 100, "").await.ok()?;
            events
                .iter()
                .map(dict_to_json)
                .find(|e| e["kind"] == "capture" && e["app_id"] == app && e.get("end").is_some())
        })
        .await;
        assert_eq!(row["detail"]["device"], "camera", "{row}");
        assert_eq!(row["category"], "media.capture", "{row}");

        // Without media.capture: no stream, no session, no timeline row.
        a.tell("open", "video0");
        eventually(10, "capture again", || async {
            capture(&ctx, a.pid(), "video0").await
        })
        .await;
        home.write_policy(&[(&my_app_id(), &["history", "media.playback"])]);
        let m = eventually(10, "policy reloaded", || async {
            let m = media(&ctx).await?;
            m.get("media.playback").is_some().then_some(m)
        })
        .await;
        assert!(m.get("media.capture").is_none(), "{m}");
        assert!(m.get("capture_sessions").is_none(), "{m}");
        assert!(!m.to_string().contains("video0"), "{m}");
        let (events, _) = h.query(since, 0, &[], &[], 100, "").await.expect("query");
        assert!(
            events
                .iter()
                .map(dict_to_json)
                .all(|e| e["kind"] != "capture"),
            "{events:?}"
        );
        drop(d);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_cannot_be_watched_is_unavailable_until_it_appears() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let base = tempfile::tempdir().expect("tempdir");
        let cams = base.path().join("cams");
        home.write_config(&config(&cams));
        home.write_policy(&[(&my_app_id(), &["media.capture"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let s = eventually(10, "v4l2 unavailable", || async {
            source(&ctx).await.filter(|s| s["available"] == false)
        })
        .await;
        let err = s["last_error"].as_str().unwrap_or_default().to_owned();
        assert!(err.contains(&cams.display().to_string()), "{s}");

        std::fs::create_dir(&cams).expect("mkdir");
        std::fs::write(cams.join("video0"), b"").expect("video0");
        eventually(40, "v4l2 available", || async {
            source(&ctx).await.filter(|s| s["available"] == true)
        })
        .await;
        let mut a = Opener::start(&cams);
        a.tell("open", "video0");
        eventually(10, "camera capture", || async {
            capture(&ctx, a.pid(), "video0").await
        })
        .await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_app_through_pipewire_and_a_video_node_is_one_capture_session() {
    with_timeout(90, async {
        let session = Session::start(&["--no-sway"]);
        let home = Home::new();
        let cams = tempfile::tempdir().expect("tempdir");
        std::fs::write(cams.path().join("video0"), b"").expect("video0");
        home.write_config(&config_with(cams.path(), &["wayland"]));
        home.write_policy(&[(&my_app_id(), &["media.capture", "history"])]);
        let since = chrono::Utc::now().timestamp() - 1;
        let _d = Daemon::start_in_session(&session, &home, &[]).await;
        let conn = connect_to(session.get("DBUS_SESSION_BUS_ADDRESS").expect("bus")).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "v4l2 available", || async {
            source(&ctx).await.filter(|s| s["available"] == true)
        })
        .await;
        let socket = pipewire_client::socket_of(session.get("PIPEWIRE_RUNTIME_DIR").expect("pw"));
        let me = std::process::id();
        let app = my_app_id();

        // This process: a PipeWire camera capture, then the node itself.
        let (cam, (_, node)) = pipewire_client::video_capture(
            &socket,
            &[("node.name", "contextd-test-camera")],
            &[("application.name", "VideoCall")],
        );
        let pw_id = eventually(20, "PipeWire camera capture", || async {
            media(&ctx).await?["media.capture"]
                .as_array()?
                .iter()
                .find(|s| {
                    s["active"] == true
                        && s["id"]
                            .as_str()
                            .is_some_and(|i| i.ends_with(&format!("-{node}")))
                })
                .map(|s| s["id"].as_str().unwrap_or_default().to_owned())
        })
        .await;
        let file = std::fs::File::open(cams.path().join("video0")).expect("open video0");
        let v4l2 = eventually(10, "V4L2 camera capture", || async {
            capture(&ctx, me, "video0").await
        })
        .await;
        assert_eq!(v4l2["app_id"], app, "{v4l2}");

        // Both streams live; one camera session of the app.
        let m = media(&ctx).await.expect("media");
        let mine = |m: &Value| -> Vec<Value> {
            m["capture_sessions"]
                .as_array()
                .map(|a| a.iter().filter(|c| c["app_id"] == app).cloned().collect())
                .unwrap_or_default()
        };
        assert!(m["media.capture"].to_string().contains(&pw_id), "{m}");
        let sessions = mine(&m);
        assert_eq!(sessions.len(), 1, "{m}");
        assert_eq!(sessions[0]["stream_id"], pw_id, "{m}");
        assert_eq!(sessions[0]["kind"], "camera", "{m}");

        // PipeWire's stream ends: the session goes on while the node is held.
        drop(cam);
        let m = eventually(10, "PipeWire capture gone", || async {
            let m = media(&ctx).await?;
            (!m["media.capture"].to_string().contains(&pw_id)).then_some(m)
        })
        .await;
        let sessions = mine(&m);
        assert_eq!(sessions.len(), 1, "{m}");
        assert_eq!(sessions[0]["active"], true, "{m}");

        drop(file);
        let m = eventually(10, "session ended", || async {
            let m = media(&ctx).await?;
            (mine(&m).first()?["active"] == false).then_some(m)
        })
        .await;
        assert_eq!(mine(&m).len(), 1, "{m}");

        // One interval in the timeline, ended.
        let h = History1Proxy::new(&conn).await.expect("proxy");
        let rows = eventually(10, "timeline row ended", || async {
            let (events, _) = h.query(since, 0, &[], &[], 100, "").await.ok()?;
            let rows: Vec<Value> = events
                .iter()
                .map(dict_to_json)
                .filter(|e| e["kind"] == "capture")
                .collect();
            (!rows.is_empty() && rows.iter().all(|e| e.get("end").is_some())).then_some(rows)
        })
        .await;
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0]["app_id"], app, "{rows:?}");
        assert_eq!(rows[0]["detail"]["device"], "camera", "{rows:?}");
    })
    .await
}

/// Kills a process we started (a shell's background child) on drop.
struct Killed(u32);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0) {
            // SAFETY: kill(2) on a process this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_inherited_the_node_and_exits_ends_its_stream() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let cams = tempfile::tempdir().expect("tempdir");
        std::fs::write(cams.path().join("video0"), b"").expect("video0");
        home.write_config(&config(cams.path()));
        home.write_policy(&[(&my_app_id(), &["media.capture"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "v4l2 available", || async {
            source(&ctx).await.filter(|s| s["available"] == true)
        })
        .await;

        // A shell opens the node and starts a child that inherits it.
        let mut sh = Command::new("/bin/sh")
            .args(["-c", "exec 3<video0; sleep 300 & echo $!; exec sleep 301"])
            .current_dir(cams.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        let _sh = Killed(sh.id());
        let mut line = String::new();
        BufReader::new(sh.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("child pid");
        let child: u32 = line.trim().parse().expect("a PID");
        let _child = Killed(child);
        // Another open (and close) makes the source look: both are seen.
        let mut a = Opener::start(cams.path());
        a.tell("open", "video0");
        a.tell("close", "video0");
        eventually(10, "shell and child", || async {
            let sh = capture(&ctx, sh.id(), "video0").await?;
            let ch = capture(&ctx, child, "video0").await?;
            Some((sh, ch))
        })
        .await;

        // The child dies; the shell still holds the open file. (The pause
        // lets the source's second look after an open (30 ms) pass, so that
        // only the child's exit can make it look again; nothing here depends
        // on how long anything takes.)
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        drop(_child);
        eventually(10, "the child's stream ended", || async {
            capture(&ctx, child, "video0").await.is_none().then_some(())
        })
        .await;
        let m = media(&ctx).await.expect("media");
        assert!(capture(&ctx, sh.id(), "video0").await.is_some(), "{m}");
        let _ = sh.kill();
        let _ = sh.wait();
    })
    .await
}

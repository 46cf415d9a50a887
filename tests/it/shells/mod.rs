//! What the tests of the shell sources share (tests/it/shells_gnome.rs,
//! tests/it/shells_kwin.rs): real GTK windows (tests/shells/gtk_window.py on
//! the system's python3 with PyGObject), reading what the broker says,
//! following a subscription's `Changed`; the shells themselves
//! ([`gnome`], [`kwin`]), which benches/shells.rs runs too.

#![allow(dead_code)]

pub mod gnome;
pub mod kwin;
pub mod rogue;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use contextd::client::json::{dict_to_json, to_json};
use contextd::client::proxy::Context1Proxy;
use futures_util::StreamExt;
use serde_json::Value;

/// A real GTK 3 window on a Wayland display.
pub struct GtkWindow {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl GtkWindow {
    /// Open a window with this app id (`GLib.set_prgname`) and title, as a
    /// client of the compositor at `WAYLAND_DISPLAY=display` in
    /// `runtime_dir`, on the session bus at `bus`.
    pub fn open(runtime_dir: &Path, display: &str, bus: &str, app_id: &str, title: &str) -> Self {
        let script = &crate::common::repo_file("tests/shells/gtk_window.py");
        let mut child = Command::new("/usr/bin/python3")
            .args([script, app_id, title])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("XDG_RUNTIME_DIR", runtime_dir)
            .env("WAYLAND_DISPLAY", display)
            .env("GDK_BACKEND", "wayland")
            .env("DBUS_SESSION_BUS_ADDRESS", bus)
            .env("NO_AT_BRIDGE", "1")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 with gir1.2-gtk-3.0 (scripts/deps.sh)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut w = GtkWindow {
            child,
            stdin,
            stdout,
        };
        assert_eq!(w.line(), "ready", "the GTK window did not start");
        w
    }

    /// The window's process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.stdout.read_line(&mut l).expect("read gtk_window");
        l.trim().to_owned()
    }

    pub fn set_title(&mut self, title: &str) {
        writeln!(self.stdin, "title {title}").expect("write gtk_window");
        self.stdin.flush().expect("flush");
        assert_eq!(self.line(), "ok");
    }

    /// Close the window (the app quits).
    pub fn close(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for GtkWindow {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Stop a child: SIGTERM, then SIGKILL after `grace`.
pub fn stop(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: kill(2) on our own child's PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Poll `f` until it returns `Some`, up to `secs`.
pub async fn poll<T, Fut: std::future::Future<Output = Option<T>>>(
    secs: u64,
    what: &str,
    mut f: impl FnMut() -> Fut,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn windows(ctx: &Context1Proxy<'_>) -> Vec<Value> {
    ctx.list_windows()
        .await
        .map(|v| v.iter().map(dict_to_json).collect())
        .unwrap_or_default()
}

pub async fn source(ctx: &Context1Proxy<'_>, name: &str) -> Option<Value> {
    ctx.list_sources()
        .await
        .ok()?
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == name)
}

pub fn find<'a>(ws: &'a [Value], app_id: &str) -> Option<&'a Value> {
    ws.iter().find(|w| w["app_id"] == app_id)
}

pub async fn active(ctx: &Context1Proxy<'_>) -> Value {
    ctx.get_active_window()
        .await
        .map(|d| dict_to_json(&d))
        .unwrap_or(Value::Null)
}

/// Every `Changed` on a subscription, as JSON, gathered as they come.
pub struct Changes {
    stream: contextd::client::proxy::ChangedStream,
    pub seen: Vec<Value>,
}

impl Changes {
    pub fn new(stream: contextd::client::proxy::ChangedStream) -> Changes {
        Changes {
            stream,
            seen: Vec::new(),
        }
    }

    /// Wait for a change that matches `pred` (keeping every one seen).
    pub async fn until(&mut self, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.until_at(secs, what, pred).await.1
    }

    /// [`Changes::until`], with when the matching change arrived.
    pub async fn until_at(
        &mut self,
        secs: u64,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> (Instant, Value) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let sig = tokio::time::timeout(left, self.stream.next())
                .await
                .unwrap_or_else(|_| {
                    panic!("no Changed for {what} within {secs} s: {:#?}", self.seen)
                })
                .expect("stream open");
            let at = Instant::now();
            let args = sig.args().expect("args");
            let data = Value::Object(
                args.data()
                    .iter()
                    .map(|(k, v)| (k.clone(), to_json(v)))
                    .collect(),
            );
            self.seen.push(data.clone());
            if pred(&data) {
                return (at, data);
            }
        }
    }

    /// The next change if one comes within `ms` (kept with the others), for
    /// draining until quiet: a duplicate would come within that.
    pub async fn next_within(&mut self, ms: u64) -> Option<Value> {
        let sig = tokio::time::timeout(Duration::from_millis(ms), self.stream.next())
            .await
            .ok()??;
        let args = sig.args().expect("args");
        let data = Value::Object(
            args.data()
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        );
        self.seen.push(data.clone());
        Some(data)
    }

    /// The focus changes seen so far: the app id focused, or `None`.
    pub fn focuses(&self) -> Vec<Option<String>> {
        self.seen
            .iter()
            .filter(|d| d["event"] == "focus")
            .map(|d| d["window"]["app_id"].as_str().map(str::to_owned))
            .collect()
    }
}

pub fn is_focus_on(d: &Value, app_id: &str) -> bool {
    d["event"] == "focus" && d["window"]["app_id"] == app_id
}

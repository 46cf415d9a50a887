//! The provider examples (examples/provider-gdbus.sh, examples/provider.py,
//! examples/c-provider) work against the real broker: what they publish
//! reaches a reader with `provided.document` (this test process) under the
//! app id the broker takes from their credentials; an entry goes when its
//! app retracts it, exits or crashes, and subscribers are told; a refused
//! app's publish fails with `org.contextd.Error.NotAllowed`.

use crate::common;
use crate::mcp_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::dbusmock::Mock;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy, Subscription1Proxy};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

const NOT_ALLOWED: &str = "org.contextd.Error.NotAllowed";

fn repo() -> &'static Path {
    crate::common::root()
}

/// A broker on a private bus whose policy grants this test process
/// `provided.document` (and polkit, when `sys` is given, lets it manage).
async fn broker(bus: &Bus, home: &Home, sys: Option<&Bus>) -> Daemon {
    home.write_policy(&[(&my_app_id(), &["provided.document"])]);
    match sys {
        Some(sys) => {
            Daemon::start_with(bus, home, &[], &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)]).await
        }
        None => Daemon::start(bus, home, &[]).await,
    }
}

/// Context1.GetProvided(kind) as JSON records; each record's `json` (the
/// entry as JSON text) must be the same entry as its `data`.
async fn provided(ctx: &Context1Proxy<'_>, kind: &str) -> Vec<Value> {
    let records = ctx.get_provided(kind).await.expect("GetProvided");
    records
        .iter()
        .map(|r| {
            let v = dict_to_json(r);
            let text = v["json"].as_str().expect("json is a string");
            let parsed: Value = serde_json::from_str(text).expect("json is JSON");
            assert_eq!(parsed, v["data"], "json and data differ: {v}");
            v
        })
        .collect()
}

/// Wait until `app` has a `kind` entry that `pred` accepts, and return it.
async fn wait_entry(
    ctx: &Context1Proxy<'_>,
    kind: &str,
    app: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    eventually(10, what, || async {
        provided(ctx, kind)
            .await
            .into_iter()
            .find(|r| r["app_id"] == app && pred(r))
    })
    .await
}

/// Wait until no app has a `kind` entry.
async fn wait_empty(ctx: &Context1Proxy<'_>, kind: &str, what: &str) {
    eventually(10, what, || async {
        provided(ctx, kind).await.is_empty().then_some(())
    })
    .await
}

/// A subscription's Changed signals, as (category, data) in JSON.
struct Changes {
    stream: contextd::client::proxy::ChangedStream,
}

impl Changes {
    async fn subscribe(conn: &zbus::Connection, ctx: &Context1Proxy<'_>, cats: &[&str]) -> Self {
        let path = ctx.subscribe(cats).await.expect("Subscribe");
        let sub = Subscription1Proxy::builder(conn)
            .path(path)
            .build()
            .await
            .expect("subscription proxy");
        let stream = sub.receive_changed().await.expect("Changed stream");
        Changes { stream }
    }

    /// The next Changed whose data has event `event`.
    async fn next(&mut self, event: &str) -> (String, Value) {
        within(10, &format!("a Changed signal '{event}'"), async {
            loop {
                let sig = self.stream.next().await.expect("subscription open");
                let args = sig.args().expect("args");
                let data = dict_to_json(args.data());
                if data["event"] == event {
                    return (args.category().clone(), data);
                }
            }
        })
        .await
    }
}

/// A provider process with its output followed line by line; killed on
/// drop (its stderr printed when the test fails).
struct Provider {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: std::thread::JoinHandle<()>,
}

impl Provider {
    /// Spawn `cmd` on `bus` with only PATH, HOME, the bus address and
    /// `extra` in its environment.
    fn spawn(cmd: &mut Command, bus: &Bus, home: &Home, extra: &[(&str, &str)]) -> Provider {
        let mut child = cmd
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.dir.path())
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .envs(extra.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn provider");
        let (tx, lines) = mpsc::unbounded_channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let err = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut e) = sink.lock() {
                    e.push_str(&line);
                    e.push('\n');
                }
            }
        });
        Provider {
            child,
            lines,
            stderr,
            stderr_reader,
        }
    }

    /// Its stderr so far; all of it once it has exited.
    async fn stderr(&self) -> String {
        // The reader ends at the end of the stream, when the process has
        // exited; a running one is not waited for long.
        for _ in 0..200 {
            if self.stderr_reader.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The next line of output that starts with `prefix` (others skipped).
    async fn line(&mut self, prefix: &str) -> String {
        let found = within(15, &format!("a line '{prefix}…'"), async {
            loop {
                match self.lines.recv().await {
                    Some(l) if l.starts_with(prefix) => return Some(l),
                    Some(_) => {}
                    None => return None,
                }
            }
        })
        .await;
        match found {
            Some(l) => l,
            None => panic!(
                "the provider's output ended without '{prefix}…'; stderr:\n{}",
                self.stderr().await
            ),
        }
    }

    fn write_stdin(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("write to the provider");
        stdin.flush().expect("flush");
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the child we spawned (not yet waited for).
        let r = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(r, 0, "kill failed");
    }

    /// Wait for the exit; (status, stderr).
    async fn exit(&mut self) -> (std::process::ExitStatus, String) {
        let st = within(15, "the provider exits", async {
            loop {
                if let Some(st) = self.child.try_wait().expect("try_wait") {
                    return st;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        (st, self.stderr().await)
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- provider stderr ---\n{}",
                self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
            );
        }
    }
}

/// examples/provider.py with `args`.
fn python_provider(bus: &Bus, home: &Home, args: &[&str]) -> Provider {
    Provider::spawn(
        Command::new(mcp_support::python())
            .arg(repo().join("examples/provider.py"))
            .args(args),
        bus,
        home,
        &[],
    )
}

/// The gdbus example: what it publishes reaches a subscribed reader under
/// gdbus's own app id, typed `DigitalDocument`, and is gone once gdbus has
/// exited (its connection was the entry's life); Retract is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gdbus_example_publishes_and_retracts() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = broker(&bus, &home, None).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let mut changes = Changes::subscribe(&conn, &ctx, &["provided.document"]).await;

        let (st, out, err) = run_cmd(
            Command::new(repo().join("examples/provider-gdbus.sh"))
                .args(["notes.txt", "file:///home/me/notes.txt"])
                .env("DBUS_SESSION_BUS_ADDRESS", &bus.address),
            30,
        );
        assert!(st.success(), "provider-gdbus.sh failed: {err}\n{out}");
        assert!(out.contains("published document: notes.txt"), "{out}");
        assert!(out.contains("retracted document"), "{out}");

        let gdbus = std::fs::canonicalize(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("gdbus"))
                .find(|p| p.exists())
                .expect("gdbus on PATH"),
        )
        .expect("gdbus path");
        let app = format!("exe:{}", gdbus.display());
        let (cat, opened) = changes.next("opened").await;
        assert_eq!(cat, "provided.document");
        let entry = &opened["context"];
        assert_eq!(entry["app_id"], app.as_str(), "{opened}");
        assert_eq!(entry["kind"], "document");
        assert_eq!(entry["data"]["@type"], "DigitalDocument", "{opened}");
        assert_eq!(entry["data"]["name"], "notes.txt");
        assert_eq!(entry["data"]["url"], "file:///home/me/notes.txt");
        assert_eq!(entry["data"]["encodingFormat"], "text/plain");

        let (_, closed) = changes.next("closed").await;
        assert_eq!(closed["context"]["app_id"], app.as_str(), "{closed}");
        wait_empty(&ctx, "document", "the gdbus entry gone").await;
    })
    .await
}

/// The Python example publishes a document and updates it; the reader
/// gets both; killed with SIGKILL (a crash), its entry goes and a
/// subscriber is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_provider_publishes_and_its_crash_removes_the_entry() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = broker(&bus, &home, None).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let app = mcp_support::python_script_id(&mcp_support::provider_script());

        let mut p = python_provider(
            &bus,
            &home,
            &[
                "--name",
                "report.odt",
                "--url",
                "file:///home/me/report.odt",
                "--encoding-format",
                "application/vnd.oasis.opendocument.text",
                "--date-modified",
                "2026-11-23T09:30:00Z",
            ],
        );
        let line = p.line("published document:").await;
        assert!(line.contains("report.odt"), "{line}");
        let r = wait_entry(
            &ctx,
            "document",
            &app,
            "the Python provider's document",
            |_| true,
        )
        .await;
        assert_eq!(r["kind"], "document");
        assert_eq!(r["data"]["@type"], "DigitalDocument", "{r}");
        assert_eq!(r["data"]["name"], "report.odt");
        assert_eq!(r["data"]["url"], "file:///home/me/report.odt");
        assert_eq!(
            r["data"]["encodingFormat"],
            "application/vnd.oasis.opendocument.text"
        );
        assert_eq!(r["data"]["dateModified"], "2026-11-23T09:30:00Z");
        assert!(r["updated"].is_string(), "{r}");

        // An update from stdin (as on save): the reader sees the new entry.
        p.write_stdin(r#"{"name": "report-final.odt", "dateModified": "2026-11-23T10:00:00Z"}"#);
        p.line("updated document:").await;
        wait_entry(&ctx, "document", &app, "the updated document", |r| {
            r["data"]["name"] == "report-final.odt"
        })
        .await;

        let mut changes = Changes::subscribe(&conn, &ctx, &["provided.document"]).await;
        p.signal(libc::SIGKILL);
        let (st, _) = p.exit().await;
        assert_eq!(exit_code(st), "signal 9");
        let (cat, closed) = changes.next("closed").await;
        assert_eq!(cat, "provided.document");
        assert_eq!(closed["context"]["app_id"], app.as_str(), "{closed}");
        assert_eq!(closed["context"]["kind"], "document");
        wait_empty(&ctx, "document", "the crashed provider's entry gone").await;
    })
    .await
}

/// The broker restarts (it knows nothing of the entries of before): the
/// Python example sees its name get a new owner and publishes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_provider_publishes_again_when_the_broker_restarts() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut d = broker(&bus, &home, None).await;
        let app = mcp_support::python_script_id(&mcp_support::provider_script());
        let mut p = python_provider(&bus, &home, &["--name", "notes.txt"]);
        p.line("published document:").await;

        d.signal(libc::SIGTERM);
        assert!(d.wait_exit(Duration::from_secs(15)).is_some(), "no exit");
        p.line("the broker went away").await;
        let _d = broker(&bus, &home, None).await;
        let line = p.line("published again document:").await;
        assert!(line.contains("notes.txt"), "{line}");
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let r = wait_entry(
            &ctx,
            "document",
            &app,
            "published to the new broker",
            |_| true,
        )
        .await;
        assert_eq!(r["data"]["name"], "notes.txt");
    })
    .await
}

/// The C example, built from a copy of examples/c-provider (out of the
/// source tree) with its generated proxy: what it publishes is filed under
/// its own executable, whatever it is called and claims; SIGTERM retracts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_provider_publishes_under_its_own_app_id() {
    with_timeout(180, async {
        let build = tempfile::tempdir().expect("tempdir");
        let src = repo().join("examples/c-provider");
        for f in ["provider.c", "Makefile"] {
            std::fs::copy(src.join(f), build.path().join(f)).expect("copy the example");
        }
        let xml = repo().join("dbus-interfaces/org.contextd.Provider1.xml");
        let (st, out, err) = run_cmd(
            Command::new("make")
                .current_dir(build.path())
                .arg(format!("XML={}", xml.display()))
                .arg("CFLAGS=-O2 -Wall -Wextra -Werror"),
            150,
        );
        assert!(st.success(), "make failed:\n{out}\n{err}");
        let exe = std::fs::canonicalize(build.path().join("provider")).expect("built");

        let bus = Bus::start();
        let home = Home::new();
        let _d = broker(&bus, &home, None).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        // Started through a link named like another app, with the variable
        // GLib's launchers set: claims the broker must not believe.
        let claimed = build.path().join("org.gnome.TextEditor");
        std::os::unix::fs::symlink(&exe, &claimed).expect("symlink");
        let mut p = Provider::spawn(
            Command::new(&claimed).args(["notes.txt", "file:///home/me/notes.txt", "text/plain"]),
            &bus,
            &home,
            &[(
                "GIO_LAUNCHED_DESKTOP_FILE",
                "/usr/share/applications/org.gnome.TextEditor.desktop",
            )],
        );
        let line = p.line("published document:").await;
        assert!(line.contains("notes.txt"), "{line}");
        let app = format!("exe:{}", exe.display());
        let r = eventually(10, "the C provider's document", || async {
            provided(&ctx, "document").await.into_iter().next()
        })
        .await;
        assert_eq!(r["app_id"], app.as_str(), "{r}");
        assert_eq!(r["data"]["@type"], "DigitalDocument", "{r}");
        assert_eq!(r["data"]["name"], "notes.txt");
        assert_eq!(r["data"]["url"], "file:///home/me/notes.txt");
        assert_eq!(r["data"]["encodingFormat"], "text/plain");
        assert!(r["data"]["dateModified"].is_string(), "{r}");

        p.signal(libc::SIGTERM);
        p.line("retracted document").await;
        let (st, err) = p.exit().await;
        assert!(st.success(), "{}: {err}", exit_code(st));
        wait_empty(&ctx, "document", "the C provider's entry retracted").await;
    })
    .await
}

/// Refused with Consent1.SetPublishing(app, false): the Python provider's
/// publish fails with NotAllowed (name and message printed, exit 1); a
/// provider already running loses its entry and its next update fails
/// the same way; allowed again, it publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_python_provider_gets_not_allowed() {
    with_timeout(90, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let _d = broker(&bus, &home, Some(&sys)).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let app = mcp_support::python_script_id(&mcp_support::provider_script());

        // Running, then refused: the entry goes, the next update fails.
        let mut p = python_provider(&bus, &home, &["--name", "draft.txt"]);
        p.line("published document:").await;
        wait_entry(&ctx, "document", &app, "the draft", |_| true).await;
        assert!(
            consent
                .set_publishing(&app, false)
                .await
                .expect("SetPublishing"),
            "refusing changed nothing"
        );
        wait_empty(&ctx, "document", "the refused app's entry gone").await;
        p.write_stdin(r#"{"name": "draft-2.txt"}"#);
        let (st, err) = p.exit().await;
        assert_eq!(exit_code(st), "exit 1", "{err}");
        assert!(
            err.contains(&format!("Publish failed: {NOT_ALLOWED}: ")),
            "{err}"
        );

        // Started while refused: the first publish fails.
        let mut p = python_provider(&bus, &home, &["--name", "notes.txt", "--ignore-stdin"]);
        let (st, err) = p.exit().await;
        assert_eq!(exit_code(st), "exit 1", "{err}");
        let line = err
            .lines()
            .find(|l| l.starts_with("Publish failed:"))
            .unwrap_or_else(|| panic!("no error printed: {err}"));
        assert!(
            line.starts_with(&format!("Publish failed: {NOT_ALLOWED}: ")),
            "{line}"
        );
        // The message says something beyond the name (not GDBus's prefix).
        let message = &line[format!("Publish failed: {NOT_ALLOWED}: ").len()..];
        assert!(
            !message.is_empty() && !message.contains("GDBus.Error"),
            "{line}"
        );
        assert!(provided(&ctx, "document").await.is_empty());

        // Allowed again, it publishes.
        assert!(
            consent
                .set_publishing(&app, true)
                .await
                .expect("SetPublishing")
        );
        let mut p = python_provider(&bus, &home, &["--name", "notes.txt"]);
        p.line("published document:").await;
        wait_entry(&ctx, "document", &app, "published once allowed", |_| true).await;
    })
    .await
}

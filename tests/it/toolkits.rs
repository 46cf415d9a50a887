//! Called from any toolkit: a Qt 5 client built on the proxies
//! `qdbusxml2cpp` generates from `dbus-interfaces/`, a GJS client on
//! `Gio.DBusProxy.makeProxyWrapper` and a Python (PyGObject) client on
//! `Gio.DBusNodeInfo.new_for_xml`, all from the same XML files, read the
//! active window from the live broker and receive a `Changed` signal of
//! their subscription. (The C/GLib and Rust proxies are in tests/it/codegen.rs.)

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::dbusmock::Mock;
use common::*;
use contextd::client::proxy::Context1Proxy;

fn repo() -> &'static Path {
    crate::common::root()
}

fn interfaces() -> PathBuf {
    repo().join("dbus-interfaces")
}

/// `name` in PATH, or a failure that says how to install it.
fn which(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no {name} in PATH ({package}): run scripts/deps.sh"))
}

/// The app id the broker gives a process running `exe`: its real path.
fn exe_app_id(exe: &Path) -> String {
    let real = std::fs::canonicalize(exe).expect("canonical path");
    format!("exe:{}", real.display())
}

/// The app id of `interpreter` running `script`: a system interpreter (the
/// default `[identity] interpreters`) is named by what it runs, as
/// `PREFIX:/real/path/of/script`; another by its executable.
fn script_app_id(interpreter: &Path, prefix: &str, script: &Path) -> String {
    let real = std::fs::canonicalize(interpreter).expect("canonical path");
    if contextd::internals::is_system_executable(&real) {
        let script = std::fs::canonicalize(script).expect("script path");
        format!("{prefix}:{}", script.display())
    } else {
        format!("exe:{}", real.display())
    }
}

/// A client whose output the test reads while it runs.
struct Client {
    child: Child,
    out: Arc<Mutex<Vec<String>>>,
    err: Arc<Mutex<String>>,
}

impl Client {
    fn spawn(cmd: &mut Command, bus: &Bus) -> Client {
        let mut child = cmd
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("stdout");
        let o = out.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                o.lock().expect("lock").push(line);
            }
        });
        let mut stderr = child.stderr.take().expect("stderr");
        let e = err.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                e.lock()
                    .expect("lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Client { child, out, err }
    }

    fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            self.out.lock().expect("lock").join("\n"),
            self.err.lock().expect("lock")
        )
    }

    /// The first line starting with `prefix`, waiting up to `secs`; fails
    /// at once if the client exits without printing it.
    async fn line(&mut self, prefix: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let found = self
                .out
                .lock()
                .expect("lock")
                .iter()
                .find(|l| l.starts_with(prefix))
                .cloned();
            if let Some(l) = found {
                return l;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                // Let the readers drain what is left.
                tokio::time::sleep(Duration::from_millis(100)).await;
                if let Some(l) = self
                    .out
                    .lock()
                    .expect("lock")
                    .iter()
                    .find(|l| l.starts_with(prefix))
                {
                    return l.clone();
                }
                panic!(
                    "client exited ({}) without `{prefix}`\n{}",
                    exit_code(st),
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no `{prefix}` from the client in {secs} s\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn exit(&mut self, secs: u64) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "the client did not exit in {secs} s\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs the client `cmd` (known to the broker as `app_id`, granted
/// `windows`) against a broker replaying two windows: it prints the
/// focused window's app id and the interface version, subscribes, and
/// after a focus change prints the `Changed` signal and exits.
async fn check_client(app_id: &str, cmd: &mut Command) {
    let bus = Bus::start();
    // Consent1 is authorised by polkit: a mock that allows managing.
    let sys = Bus::start();
    let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
    let home = Home::new();
    let me = my_app_id();
    home.write_policy(&[(&me, &["windows"]), (app_id, &["windows"])]);
    let mut replay = Replay::new(&home);
    replay.send(&window_line(
        "w1",
        "org.gnome.TextEditor",
        "notes.txt",
        true,
    ));
    replay.send(&window_line("w2", "org.mozilla.firefox", "News", false));
    let _d = Daemon::start_with(
        &bus,
        &home,
        &["--replay", &replay.arg()],
        &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
    )
    .await;
    let conn = bus.connect().await;
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    eventually(10, "windows replayed", || async {
        (ctx.list_windows().await.ok()?.len() == 2).then_some(())
    })
    .await;

    let mut client = Client::spawn(cmd, &bus);
    let app = client.line("app_id=", 60).await;
    assert_eq!(app, "app_id=org.gnome.TextEditor", "{}", client.output());
    let version = client.line("version=", 10).await;
    let want = format!("version={}", contextd::internals::CONTEXT1_VERSION);
    assert_eq!(version, want, "{}", client.output());
    // policy.toml's two grants, read through Consent1.ListGrants (aa{sv}).
    let grants = client.line("grants=", 10).await;
    assert_eq!(grants, "grants=2 first=windows", "{}", client.output());
    client.line("subscribed path=", 10).await;

    replay.send(r#"{"type":"focus","id":"w2"}"#);
    let changed = client
        .line("changed category=windows event=focus", 20)
        .await;
    assert_eq!(
        changed,
        "changed category=windows event=focus window=w2 app_id=org.mozilla.firefox",
        "{}",
        client.output()
    );
    let st = client.exit(20).await;
    assert!(
        st.success(),
        "client failed: {}\n{}",
        exit_code(st),
        client.output()
    );
}

/// Generates the Qt proxies for Context1 and Subscription1 with
/// `qdbusxml2cpp`, runs `moc` on them and builds tests/toolkits/qt/main.cpp.
fn build_qt_client(dir: &Path) -> PathBuf {
    let (st, bins, e) = run_cmd(
        Command::new("pkg-config").args(["--variable=host_bins", "Qt5Core"]),
        10,
    );
    assert!(
        st.success() && !bins.trim().is_empty(),
        "no Qt 5 (qtbase5-dev): run scripts/deps.sh: {e}"
    );
    let bins = PathBuf::from(bins.trim());
    for tool in ["qdbusxml2cpp", "moc"] {
        assert!(
            bins.join(tool).is_file(),
            "no {tool} in {} (qtbase5-dev-tools): run scripts/deps.sh",
            bins.display()
        );
    }
    let mut sources = vec![repo().join("tests/toolkits/qt/main.cpp")];
    for (base, iface) in [
        ("consent1", "org.contextd.Consent1"),
        ("context1", "org.contextd.Context1"),
        ("subscription1", "org.contextd.Subscription1"),
    ] {
        // Copied beside the output: qdbusxml2cpp writes its command line
        // into what it generates, and the compiled client is cached by
        // what was compiled (below), which must not name the clone.
        let xml = interfaces().join(format!("{iface}.xml"));
        std::fs::copy(&xml, dir.join(format!("{iface}.xml"))).expect("copy the XML");
        let (st, _o, e) = run_cmd(
            Command::new(bins.join("qdbusxml2cpp"))
                .current_dir(dir)
                .arg("-p")
                .arg(format!("{base}.h:{base}.cpp"))
                .arg(format!("{iface}.xml")),
            60,
        );
        assert!(st.success(), "qdbusxml2cpp {}: {e}", xml.display());
        let (st, _o, e) = run_cmd(
            Command::new(bins.join("moc"))
                .current_dir(dir)
                .arg(format!("{base}.h"))
                .arg("-o")
                .arg(format!("moc_{base}.cpp")),
            60,
        );
        assert!(st.success(), "moc {base}.h: {e}");
        sources.push(dir.join(format!("{base}.cpp")));
        sources.push(dir.join(format!("moc_{base}.cpp")));
    }
    let (st, flags, e) = run_cmd(
        Command::new("pkg-config").args(["--cflags", "--libs", "Qt5DBus", "Qt5Core"]),
        10,
    );
    assert!(st.success(), "pkg-config Qt5DBus: run scripts/deps.sh: {e}");
    // The compiler's output depends only on these sources and the tools:
    // once compiled on a machine, it is kept (like ccache would), so that
    // each run generates and checks the proxies but does not spend half a
    // minute of CPU compiling the same C++ again.
    let (_, cxx, _) = run_cmd(Command::new("g++").arg("--version"), 10);
    let (_, qt, _) = run_cmd(
        Command::new("pkg-config").args(["--modversion", "Qt5DBus"]),
        10,
    );
    let mut key = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [cxx.as_bytes(), qt.as_bytes(), flags.as_bytes()] {
        key.update(part);
        key.update(b"\0");
    }
    let headers = ["consent1.h", "context1.h", "subscription1.h"].map(|h| dir.join(h));
    for src in sources.iter().chain(&headers) {
        key.update(&std::fs::read(src).expect("a Qt client source"));
        key.update(b"\0");
    }
    let key: String = key.finish().as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("contextd/qt-client"));
    if let Some(cached) = cache.as_ref().map(|c| c.join(&key))
        && cached.is_file()
    {
        return cached;
    }
    let exe = dir.join("qt-client");
    let (st, _o, e) = run_cmd(
        Command::new("g++")
            .current_dir(dir)
            .args(["-std=c++17", "-fPIC", "-Wall", "-Werror", "-I."])
            .arg("-o")
            .arg(&exe)
            .args(&sources)
            .args(flags.split_whitespace()),
        300,
    );
    assert!(st.success(), "the Qt client does not compile: {e}");
    // Kept for the next run: copied under a name of its own, then renamed
    // into place, so a concurrent run never sees half a file.
    if let Some(cache) = cache {
        let tmp = cache.join(format!("{key}.{}", std::process::id()));
        let kept = std::fs::create_dir_all(&cache)
            .and_then(|()| std::fs::copy(&exe, &tmp))
            .and_then(|_| std::fs::rename(&tmp, cache.join(&key)));
        if let Err(e) = kept {
            println!("the Qt client is not cached ({e}); it is compiled again next time");
            let _ = std::fs::remove_file(&tmp);
        }
    }
    exe
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qt_client_from_qdbusxml2cpp_proxies() {
    with_timeout(420, async {
        let dir = tempfile::tempdir().expect("tempdir");
        let exe = build_qt_client(dir.path());
        check_client(&exe_app_id(&exe), &mut Command::new(&exe)).await;
    })
    .await
}

/// Every interface XML goes through qdbusxml2cpp: the Qt type annotations
/// cover every `a{sv}` and `aa{sv}`.
#[test]
fn qdbusxml2cpp_accepts_every_interface() {
    let (st, bins, e) = run_cmd(
        Command::new("pkg-config").args(["--variable=host_bins", "Qt5Core"]),
        10,
    );
    assert!(
        st.success(),
        "no Qt 5 (qtbase5-dev): run scripts/deps.sh: {e}"
    );
    // Qt 5's generator, and Qt 6's (Debian's qt6-base-dev-tools).
    let qt6 = PathBuf::from("/usr/lib/qt6/bin/qdbusxml2cpp");
    assert!(
        qt6.exists(),
        "no Qt 6 qdbusxml2cpp (qt6-base-dev-tools): run scripts/deps.sh"
    );
    for tool in [PathBuf::from(bins.trim()).join("qdbusxml2cpp"), qt6] {
        generates_every_interface(&tool);
    }
}

fn generates_every_interface(tool: &Path) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut n = 0;
    for entry in std::fs::read_dir(interfaces()).expect("dbus-interfaces") {
        let xml = entry.expect("entry").path();
        if xml.extension().and_then(|e| e.to_str()) != Some("xml") {
            continue;
        }
        n += 1;
        for mode in ["-p", "-a"] {
            let (st, _o, e) = run_cmd(
                Command::new(tool)
                    .current_dir(dir.path())
                    .arg(mode)
                    .arg("out.h:out.cpp")
                    .arg(&xml),
                60,
            );
            assert!(
                st.success() && e.is_empty(),
                "{} {mode} {}: {e}",
                tool.display(),
                xml.display()
            );
        }
    }
    assert!(n >= 7, "only {n} interface files");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gjs_client_from_make_proxy_wrapper() {
    with_timeout(120, async {
        let gjs = which("gjs", "Debian's gjs");
        check_client(
            &script_app_id(&gjs, "gjs", &repo().join("tests/toolkits/client.js")),
            Command::new(&gjs)
                .arg(repo().join("tests/toolkits/client.js"))
                .arg(interfaces()),
        )
        .await;
    })
    .await
}

/// The Python with PyGObject: CONTEXTD_PYTHON (the venv `make test` makes,
/// with the system site packages) or Debian's python3, which python3-gi
/// serves.
fn gi_python() -> PathBuf {
    let python = std::env::var_os("CONTEXTD_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/python3"));
    let (st, _o, e) = run_cmd(Command::new(&python).args(["-c", "import gi"]), 30);
    assert!(
        st.success(),
        "{} has no PyGObject (python3-gi): run scripts/deps.sh: {e}",
        python.display()
    );
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_from_dbus_node_info() {
    with_timeout(120, async {
        let python = gi_python();
        check_client(
            &script_app_id(&python, "python3", &repo().join("tests/toolkits/client.py")),
            Command::new(&python)
                .arg(repo().join("tests/toolkits/client.py"))
                .arg(interfaces()),
        )
        .await;
    })
    .await
}

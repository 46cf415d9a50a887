//! Test harness: a private `dbus-daemon`, the real `contextd` binary on
//! it, and helpers. Everything started here is killed on drop, and every
//! wait has a deadline.

#![allow(dead_code)]

use std::future::Future;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use zbus::Connection;

pub mod access;
pub mod agent;
pub mod bus;
pub mod dashboard;
pub mod dbusmock;
pub mod disk;
pub mod flatpak;
pub mod keyring;
pub mod notifyd;
pub mod repo;
pub mod session;

pub use repo::{repo_file, root};

pub const BUS_NAME: &str = "org.contextd.Broker1";
pub const PATH: &str = "/org/contextd/Broker1";

/// Run a test body with a deadline, so that no test can hang CI.
pub async fn with_timeout<F: Future<Output = T>, T>(secs: u64, f: F) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), f).await {
        Ok(v) => v,
        Err(_) => panic!("test timed out after {secs} s"),
    }
}

/// `fut`, or a panic *inside* the test's future (so that the guards of the
/// daemon and the mocks, dropped while panicking, print their logs; the
/// outer `with_timeout` drops the future before it panics).
pub async fn within<T>(secs: u64, what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {secs} s"),
    }
}

/// A private session bus.
pub struct Bus {
    child: Child,
    pub address: String,
    pub dir: tempfile::TempDir,
}

impl Bus {
    pub fn start() -> Bus {
        Bus::start_with("")
    }

    /// A private session bus with more configuration (see
    /// [`bus::spawn_with`]).
    pub fn start_with(extra: &str) -> Bus {
        let dir = tempfile::tempdir().expect("tempdir");
        let (child, address) = bus::spawn_with(dir.path(), extra);
        Bus {
            child,
            address,
            dir,
        }
    }

    pub async fn connect(&self) -> Connection {
        zbus::connection::Builder::address(self.address.as_str())
            .build()
            .await
            .expect("connect to private bus")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The bus daemon dies (SIGKILL), as at the end of a session or in a
    /// crash; its socket file stays behind.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Directories of one broker instance.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["config/contextd", "data", "state", "run"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        let home = Home { dir };
        // Tests that are not about prompts want only explicit grants to
        // count; prompt tests call `ask_undecided`.
        home.deny_undecided();
        home
    }

    pub fn policy_path(&self) -> PathBuf {
        self.dir.path().join("config/contextd/policy.toml")
    }

    /// Write policy.toml atomically (rename), as editors do.
    pub fn write_policy(&self, grants: &[(&str, &[&str])]) {
        let mut text = String::new();
        for (app, cats) in grants {
            text.push_str(&format!(
                "[[grant]]\napp = {:?}\ncategories = [{}]\n\n",
                app,
                cats.iter()
                    .map(|c| format!("{c:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        self.write_policy_text(&text);
    }

    /// Write config.toml.
    pub fn write_config(&self, text: &str) {
        std::fs::write(self.dir.path().join("config/contextd/config.toml"), text)
            .expect("write config");
    }

    /// Only explicit grants count: undecided access is denied, not asked
    /// (the foundation's behaviour, before prompts).
    pub fn deny_undecided(&self) {
        self.write_config("[consent]\nundecided = \"deny\"\n");
    }

    /// The default of a real installation: undecided access is asked.
    pub fn ask_undecided(&self) {
        self.write_config("");
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("data/contextd/contextd.db")
    }

    pub fn write_policy_text(&self, text: &str) {
        let tmp = self.dir.path().join("config/contextd/.policy.toml.tmp");
        std::fs::write(&tmp, text).expect("write policy");
        std::fs::rename(&tmp, self.policy_path()).expect("rename policy");
    }

    pub fn envs(&self, bus: &Bus) -> Vec<(String, String)> {
        self.envs_for(&bus.address)
    }

    /// The broker's environment for a bus at `address`.
    pub fn envs_for(&self, address: &str) -> Vec<(String, String)> {
        let p = self.dir.path();
        vec![
            ("DBUS_SESSION_BUS_ADDRESS".into(), address.to_owned()),
            ("HOME".into(), p.display().to_string()),
            (
                "XDG_CONFIG_HOME".into(),
                p.join("config").display().to_string(),
            ),
            ("XDG_DATA_HOME".into(), p.join("data").display().to_string()),
            (
                "XDG_STATE_HOME".into(),
                p.join("state").display().to_string(),
            ),
            (
                "XDG_RUNTIME_DIR".into(),
                p.join("run").display().to_string(),
            ),
            ("RUST_LOG".into(), "debug,zbus=warn".into()),
        ]
    }
}

/// A D-Bus error's name, or a panic with what came instead.
pub fn error_name<T: std::fmt::Debug>(r: zbus::Result<T>) -> String {
    match r {
        Err(zbus::Error::MethodError(name, _, _)) => name.to_string(),
        other => panic!("expected a D-Bus error, got {other:?}"),
    }
}

/// The app id under which the broker knows this test process.
pub fn my_app_id() -> String {
    let exe = std::fs::read_link("/proc/self/exe").expect("exe");
    format!("exe:{}", exe.display())
}

pub fn contextd_bin() -> &'static str {
    env!("CARGO_BIN_EXE_contextd")
}

pub fn contextctl_bin() -> &'static str {
    env!("CARGO_BIN_EXE_contextctl")
}

/// A broker the user manages: its session bus, a system bus whose polkitd
/// (python-dbusmock) authorises `org.contextd.manage-consent`, the focused
/// window `w1` (org.gnome.TextEditor, "notes.txt") replayed, `config` and
/// policy.toml's `grants` written before it starts, and the MCP socket
/// ready.
pub struct Managed {
    pub bus: Bus,
    pub sys: Bus,
    pub home: Home,
    pub polkit: dbusmock::Mock,
    pub daemon: Daemon,
}

impl Managed {
    pub async fn start(config: &str, grants: &[(&str, &[&str])]) -> Managed {
        let bus = Bus::start();
        let sys = Bus::start();
        let polkit =
            dbusmock::Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        home.write_config(config);
        if !grants.is_empty() {
            home.write_policy(grants);
        }
        let replay = home.dir.path().join("replay.jsonl");
        std::fs::write(
            &replay,
            window_line("w1", "org.gnome.TextEditor", "notes.txt", true),
        )
        .expect("replay");
        let daemon = Daemon::start_with(
            &bus,
            &home,
            &["--replay", &replay.display().to_string()],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let sock = home.dir.path().join("run/contextd/mcp.sock");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            assert!(
                Instant::now() < deadline,
                "no {} within 10 s",
                sock.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Managed {
            bus,
            sys,
            home,
            polkit,
            daemon,
        }
    }
}

/// A running `contextd` process.
pub struct Daemon {
    pub child: Child,
    pub stderr_path: PathBuf,
}

impl Daemon {
    /// Start `contextd` with `args` and wait until it owns its name.
    pub async fn start(bus: &Bus, home: &Home, args: &[&str]) -> Daemon {
        let d = Daemon::spawn(bus, home, args);
        wait_for_owner(bus, true).await;
        d
    }

    /// Start with extra environment (e.g. `DBUS_SYSTEM_BUS_ADDRESS`) and
    /// wait until it owns its name.
    pub async fn start_with(
        bus: &Bus,
        home: &Home,
        args: &[&str],
        extra: &[(&str, &str)],
    ) -> Daemon {
        let mut env = home.envs(bus);
        for (k, v) in extra {
            env.push(((*k).to_owned(), (*v).to_owned()));
        }
        let d = Daemon::spawn_env(home, env, args);
        wait_for_owner(bus, true).await;
        d
    }

    /// Start without waiting.
    pub fn spawn(bus: &Bus, home: &Home, args: &[&str]) -> Daemon {
        Daemon::spawn_env(home, home.envs(bus), args)
    }

    /// Start in a desktop session (its bus, Wayland, PipeWire, system bus),
    /// with the broker's own directories from `home`, and wait for the name.
    pub async fn start_in_session(
        session: &session::Session,
        home: &Home,
        args: &[&str],
    ) -> Daemon {
        let address = session
            .get("DBUS_SESSION_BUS_ADDRESS")
            .expect("session bus")
            .to_owned();
        let d = Daemon::spawn_env(home, session_env(session, home), args);
        wait_for_owner_at(&address, true).await;
        d
    }

    /// Start with exactly this environment (plus PATH).
    pub fn spawn_env(home: &Home, env: Vec<(String, String)>, args: &[&str]) -> Daemon {
        Daemon::spawn_bin(contextd_bin(), home, env, args)
    }

    /// Start daemon binary `bin` (`contextd`, or a build of it such as
    /// `contextd-conformance`) with exactly this environment (plus PATH).
    pub fn spawn_bin(bin: &str, home: &Home, env: Vec<(String, String)>, args: &[&str]) -> Daemon {
        let stderr_path = home
            .dir
            .path()
            .join(format!("contextd-{}.log", uuid_like()));
        let stderr = std::fs::File::create(&stderr_path).expect("log file");
        let child = Command::new(bin)
            .args(args)
            .env_clear()
            .envs(env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn contextd");
        Daemon { child, stderr_path }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's PID.
        let r = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(r, 0, "kill failed");
    }

    /// The exit status if the process has exited, without waiting.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait for the process to exit, up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- contextd stderr ---\n{}", self.stderr());
        }
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn exit_code(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (_, Some(s)) => format!("signal {s}"),
        _ => "unknown".into(),
    }
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`, …).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in {status}"))
}

/// A process's resident memory (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// Wait until the broker's name has (or has no) owner.
pub async fn wait_for_owner(bus: &Bus, owned: bool) {
    wait_for_owner_at(&bus.address, owned).await
}

/// Connect to the bus at `address`.
pub async fn connect_to(address: &str) -> Connection {
    zbus::connection::Builder::address(address)
        .build()
        .await
        .expect("connect to bus")
}

/// [`wait_for_owner`] on the bus at `address`.
pub async fn wait_for_owner_at(address: &str, owned: bool) {
    let conn = connect_to(address).await;
    let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("dbus proxy");
    let name = zbus::names::BusName::try_from(BUS_NAME).expect("name");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if dbus.name_has_owner(name.clone()).await.unwrap_or(false) == owned {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "name owned={owned} not reached in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Poll `f` until it returns `Some`, up to `secs`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A FIFO the broker replays from; the test writes events when it wants.
pub struct Replay {
    pub path: PathBuf,
    writer: std::fs::File,
}

impl Replay {
    pub fn new(home: &Home) -> Replay {
        let path = home.dir.path().join("replay.fifo");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo with a valid C string.
        let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(r, 0, "mkfifo failed");
        // Open read-write so this open does not block waiting for a reader.
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open fifo");
        Replay { path, writer }
    }

    pub fn arg(&self) -> String {
        self.path.display().to_string()
    }

    pub fn send(&mut self, line: &str) {
        writeln!(self.writer, "{line}").expect("write fifo");
        self.writer.flush().expect("flush fifo");
    }
}

/// A window event line for replay.
pub fn window_line(id: &str, app_id: &str, title: &str, activated: bool) -> String {
    serde_json::json!({
        "type": "window",
        "window": {"id": id, "app_id": app_id, "title": title, "states": {"activated": activated}}
    })
    .to_string()
}

/// Run a command with a timeout; returns (status, stdout, stderr).
pub fn run_cmd(cmd: &mut Command, secs: u64) -> (ExitStatus, String, String) {
    run_cmd_with(cmd, None, secs)
}

/// [`run_cmd`] with `input` on the command's stdin (closed after it).
pub fn run_cmd_input(cmd: &mut Command, input: &str, secs: u64) -> (ExitStatus, String, String) {
    run_cmd_with(cmd, Some(input.as_bytes()), secs)
}

fn run_cmd_with(
    cmd: &mut Command,
    input: Option<&[u8]>,
    secs: u64,
) -> (ExitStatus, String, String) {
    // A process group of its own, so that a timeout ends what the command
    // started too: a script's children left behind hold whatever they
    // inherited (a pipe the output is read from, a lock of make test).
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn command");
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // Dropped after: the input ends there. A command that exits before
        // reading it all is not an error here.
        let _ = std::io::Write::write_all(&mut stdin, input);
    }
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(out) => {
            let out = out.expect("output");
            (
                out.status,
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
        Err(_) => {
            // SAFETY: kill(2) on the process group of the child we spawned.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            panic!("command {cmd:?} timed out after {secs} s");
        }
    }
}

/// The daemon's database, opened with its key file.
/// The environment of a program of the broker's user in `session`: the
/// session's, with the broker's own directories from `home`, except the
/// runtime dir, which is the session's (Wayland and PipeWire sockets live
/// there).
pub fn session_env(session: &session::Session, home: &Home) -> Vec<(String, String)> {
    let address = session
        .get("DBUS_SESSION_BUS_ADDRESS")
        .expect("session bus")
        .to_owned();
    let mut env: Vec<(String, String)> = session
        .env
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in home.envs_for(&address) {
        if k != "XDG_RUNTIME_DIR" {
            env.retain(|(ek, _)| *ek != k);
            env.push((k, v));
        }
    }
    env
}

pub async fn open_db(home: &Home) -> contextd::internals::store::Db {
    let key_file = home.dir.path().join("state/contextd/db.key");
    let key = contextd::internals::store::DbKey::parse(&std::fs::read(&key_file).expect("key"))
        .expect("key");
    let (db, _tasks) = contextd::internals::store::Db::open(
        &home.db_path(),
        &key,
        &contextd::internals::store::KeySource::KeyFile(key_file),
    )
    .await
    .expect("the database opens after the stop");
    db
}

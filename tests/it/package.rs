//! The Debian package as users get it (issue 30): `make deb` builds it,
//! lintian accepts it, `dpkg -i` installs it on this machine, a session bus
//! that reads the standard service directories starts the installed daemon
//! by D-Bus activation when a client calls it, and `dpkg -r` and
//! `dpkg --purge` take the package's files but never the user's data.
//!
//! Activation here is dbus-daemon's own: it runs the `Exec=` line of the
//! installed `org.contextd.Broker1.service`. No systemd user manager runs
//! on the CI host, and dbus-daemon hands activation to systemd
//! (`SystemdService=contextd.service`) only when it runs under one
//! (`--systemd-activation`); that path is proven in a booted container by
//! the systemd boot test.
//!
//! The package is built from the binaries cargo built for the tests
//! (`make deb BINARIES_DIR=...`, the same debian/ and scripts/deb.sh as a
//! release `make deb`), into a directory of the test's own, so that a test
//! run never replaces a release build's package in target/deb.
//!
//! The test changes the host, so: it runs as root only (else it says why
//! and does nothing); one run at a time per machine (a lock); the package is
//! purged on every exit path, and one left by a run that died is purged
//! first (a mark says the test installed it); a `contextd` package that the
//! test did not install is left alone (the test says so and does nothing).
//! While it is installed nothing else in the suite can pick it up: the
//! other tests run target/'s binaries, and their private buses read only
//! service directories of their own (`tests/it/common/bus.rs`,
//! `scripts/session.sh`), never /usr/share/dbus-1/services.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::{contextctl_bin, contextd_bin, run_cmd};

/// One package test per machine at a time (the lead and the helpers share
/// one, and `dpkg -i` is machine-wide).
const LOCK: &str = "/run/lock/contextd-package-test.lock";
/// Present while the package on this machine is the test's own.
const MARK: &str = "/var/tmp/contextd-package-test.installed";
const SERVICE_FILE: &str = "/usr/share/dbus-1/services/org.contextd.Broker1.service";
const USER_UNIT: &str = "/usr/lib/systemd/user/contextd.service";
/// Where dh_installsystemduser's `deb-systemd-helper --user enable` puts
/// the unit (`WantedBy=graphical-session.target`), for every user.
const ENABLED_LINK: &str = "/etc/systemd/user/graphical-session.target.wants/contextd.service";
const EXTENSION_LINK: &str = "/usr/share/gnome-shell/extensions/contextd@contextd.org";

#[test]
fn the_package_installs_activates_and_leaves_user_data() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: installing a package needs root (CI runs the tests as root)");
        return;
    }
    for tool in ["dh", "lintian", "dpkg-deb", "busctl", "dbus-daemon"] {
        assert!(
            which(tool),
            "{tool} is missing: run scripts/deps.sh (debhelper, lintian, dpkg-dev, dbus)"
        );
    }
    let _lock = MachineLock::take();
    match dpkg_status().as_str() {
        "" | "not-installed" => {}
        _ if Path::new(MARK).exists() => {
            println!("a previous run left its package installed: purging it first");
            purge_package(Path::new("/nonexistent"));
        }
        other => {
            println!(
                "skipped: a contextd package the test did not install is on this machine \
                 ({other}); the test would replace and purge it"
            );
            return;
        }
    }

    let tmp = tempfile::tempdir().expect("tempdir");
    let deb = shared_package();
    run_lintian(&deb);
    let depends = field(&deb, "Depends");
    for dep in ["libc6", "default-dbus-session-bus | dbus-session-bus"] {
        assert!(depends.contains(dep), "Depends lacks {dep}: {depends}");
    }

    // The user's home, as a login gives it: only HOME and the runtime
    // directory are set, so the daemon uses ~/.local/share/contextd and
    // friends, as it does for users.
    let home = tmp.path().join("home");
    let runtime = tmp.path().join("run");
    for d in [&home, &runtime] {
        std::fs::create_dir_all(d).expect("mkdir");
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }

    let package = Installed::install(&deb, &home);
    for f in [
        "/usr/bin/contextd",
        "/usr/bin/contextctl",
        SERVICE_FILE,
        USER_UNIT,
    ] {
        assert!(Path::new(f).exists(), "{f} not installed");
    }
    let service = std::fs::read_to_string(SERVICE_FILE).expect("service file");
    assert!(service.contains("Exec=/usr/bin/contextd\n"), "{service}");
    assert!(
        service.contains("SystemdService=contextd.service\n"),
        "{service}"
    );
    assert_eq!(
        std::fs::read_link(ENABLED_LINK).ok().as_deref(),
        Some(Path::new(USER_UNIT)),
        "the user unit is enabled for graphical sessions"
    );
    check_extension_link();
    // gnome-shell installed, upgraded or removed (here: its file trigger
    // activated by hand) links the extension again.
    std::fs::remove_file(EXTENSION_LINK).expect("remove the extension link");
    package.tool("dpkg-trigger", &["--no-await", "/usr/bin/gnome-shell"]);
    package.dpkg(&["--triggers-only", "contextd"]);
    check_extension_link();

    // A session bus with the default session configuration: it reads the
    // standard directories (/usr/share/dbus-1/services among them).
    let bus = SessionBus::start(tmp.path(), &home, &runtime);
    let (st, out, _) = bus.busctl(
        &["call", "org.freedesktop.DBus", "/org/freedesktop/DBus"],
        &[
            "org.freedesktop.DBus",
            "NameHasOwner",
            "s",
            "org.contextd.Broker1",
        ],
    );
    assert!(
        st.success() && out.trim() == "b false",
        "nothing runs yet: {out}"
    );
    assert!(bus.activatable(), "the installed service file is not read");

    // A client call starts the daemon, and the daemon answers it.
    let (st, out, err) = bus.busctl(
        &[
            "--timeout=60",
            "call",
            "org.contextd.Broker1",
            "/org/contextd/Broker1",
        ],
        &["org.contextd.Context1", "ListSources"],
    );
    assert!(st.success(), "ListSources through activation failed: {err}");
    assert!(out.starts_with("aa{sv} "), "{out}");
    let pid = bus
        .broker_pid()
        .expect("the activated daemon owns its name");
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .as_deref(),
        Some(Path::new("/usr/bin/contextd")),
        "the daemon that answered is the installed one"
    );
    // The installed client talks to it too.
    let (st, out, err) = run_cmd(
        Command::new("/usr/bin/contextctl")
            .arg("sources")
            .env_clear()
            .envs(bus.envs()),
        60,
    );
    assert!(st.success(), "contextctl sources: {out}{err}");

    // The user's data: the encrypted database and its key file.
    let db = home.join(".local/share/contextd/contextd.db");
    let key = home.join(".local/state/contextd/db.key");
    assert!(db.is_file(), "no database at {}", db.display());
    assert!(key.is_file(), "no key file at {}", key.display());
    bus.stop_broker(pid);
    let before = snapshot(&home);

    // dpkg -r: the package's files go, the user's data stays. dpkg runs with
    // the user's HOME, so that a maintainer script that reached for "~"
    // would be caught here.
    package.dpkg(&["--remove", "contextd"]);
    for f in [
        "/usr/bin/contextd",
        "/usr/bin/contextctl",
        SERVICE_FILE,
        USER_UNIT,
    ] {
        assert!(!Path::new(f).exists(), "{f} left after dpkg -r");
    }
    assert!(
        std::fs::symlink_metadata(EXTENSION_LINK).is_err(),
        "the extension link is left after dpkg -r"
    );
    assert_eq!(before, snapshot(&home), "dpkg -r changed the user's files");
    // The bus notices the service file is gone: nothing to start any more.
    let deadline = Instant::now() + Duration::from_secs(15);
    while bus.activatable() {
        assert!(Instant::now() < deadline, "still activatable after dpkg -r");
        std::thread::sleep(Duration::from_millis(100));
    }

    // dpkg --purge: the rest of the package's state goes (the enabling
    // link), the user's data still stays.
    package.dpkg(&["--purge", "contextd"]);
    assert!(
        std::fs::symlink_metadata(ENABLED_LINK).is_err(),
        "the enabling link is left after dpkg --purge"
    );
    assert_eq!(
        before,
        snapshot(&home),
        "dpkg --purge changed the user's files"
    );
    assert!(
        matches!(dpkg_status().as_str(), "" | "not-installed"),
        "still known to dpkg: {}",
        dpkg_status()
    );

    // And the data is whole: it opens with its key file.
    drop(bus);
    drop(package);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let parsed = contextd::internals::store::DbKey::parse(&std::fs::read(&key).expect("key"))
            .expect("key");
        let source = contextd::internals::store::KeySource::KeyFile(key.clone());
        contextd::internals::store::Db::open(&db, &parsed, &source)
            .await
            .expect("the database opens after dpkg --purge");
    });
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

/// `make deb` with the test's binaries, into `out`: the package's path
/// (the last line it prints). The systemd boot test installs the same.
pub(crate) fn build_package(out: &Path) -> PathBuf {
    let bindir = Path::new(contextd_bin()).parent().expect("bin dir");
    let (st, stdout, stderr) = run_cmd(
        Command::new("make")
            .arg("-C")
            .arg(crate::common::root())
            .arg("--no-print-directory")
            .arg("deb")
            .arg(format!("BINARIES_DIR={}", bindir.display()))
            .env("CONTEXTD_DEB_OUT", out)
            // gzip -1: xz takes most of a minute on these unoptimised
            // binaries, and the test only installs the package.
            .env("CONTEXTD_DEB_FAST", "1")
            // Not cargo's jobserver: make runs on its own here.
            .env_remove("MAKEFLAGS")
            .env_remove("MFLAGS")
            .env_remove("MAKELEVEL")
            .env_remove("CARGO_MAKEFLAGS"),
        900,
    );
    assert!(st.success(), "make deb failed:\n{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_default().trim();
    let deb = PathBuf::from(last);
    assert!(
        deb.is_file() && deb.starts_with(out),
        "make deb's last line is not the package: {last:?}\n{stdout}"
    );
    let name = deb.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        name.starts_with(&format!("contextd_{version}_")) && name.ends_with(".deb"),
        "{name}"
    );
    deb
}

/// The package of this test build, made once for all the tests that
/// install it (the package test, the systemd boot test, Debian 13's), under
/// a lock, and again when a binary or a packaging file changed.
pub(crate) fn shared_package() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shared-deb");
    std::fs::create_dir_all(&dir).expect("mkdir shared-deb");
    let lock = std::fs::File::create(dir.join(".lock")).expect("lock file");
    // SAFETY: flock(2) on a descriptor we own, held until it is closed.
    let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock shared-deb");
    let stamp = package_inputs_stamp();
    let stamp_file = dir.join(".stamp");
    let built = std::fs::read_dir(&dir)
        .expect("list shared-deb")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"));
    if let Some(deb) = built
        && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str())
    {
        return deb;
    }
    for e in std::fs::read_dir(&dir).expect("list shared-deb").flatten() {
        if e.path().extension().is_some_and(|x| x == "deb") {
            std::fs::remove_file(e.path()).expect("remove an old package");
        }
    }
    let deb = build_package(&dir);
    std::fs::write(&stamp_file, stamp).expect("write the stamp");
    deb
}

/// What the package is made of, as (path, length, modification time) of
/// the binaries and of every tracked file of the packaging and its data
/// (tracked: `make deb` writes debhelper's own files into debian/).
fn package_inputs_stamp() -> String {
    let stamp = |p: &Path| {
        let m = std::fs::metadata(p).ok();
        let len = m.as_ref().map(|m| m.len()).unwrap_or_default();
        let t = m
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("{} {len} {t}", p.display())
    };
    let repo = crate::common::root();
    let (st, files, err) = run_cmd(
        Command::new("git").arg("-C").arg(repo).args([
            "ls-files",
            "--",
            "Makefile",
            "Cargo.toml",
            "debian",
            "data",
            "systemd",
            "polkit",
            "dbus-interfaces",
            "scripts/deb.sh",
        ]),
        30,
    );
    assert!(st.success(), "git ls-files: {err}");
    [contextd_bin(), contextctl_bin()]
        .into_iter()
        .map(|b| stamp(Path::new(b)))
        .chain(files.lines().map(|f| stamp(&repo.join(f))))
        .collect::<Vec<_>>()
        .join("\n")
}

/// lintian with the package's own overrides: no error, no warning.
fn run_lintian(deb: &Path) {
    let (st, out, err) = run_cmd(
        Command::new("lintian")
            .args(["--fail-on", "error,warning", "--tag-display-limit", "0"])
            .arg(deb),
        600,
    );
    println!("lintian:\n{out}{err}");
    assert!(
        st.success(),
        "lintian found errors or warnings:\n{out}{err}"
    );
}

/// A control field of the package.
fn field(deb: &Path, name: &str) -> String {
    let (st, out, err) = run_cmd(
        Command::new("dpkg-deb").arg("--field").arg(deb).arg(name),
        60,
    );
    assert!(st.success(), "dpkg-deb --field: {err}");
    out.trim().to_owned()
}

/// dpkg's state of the package: `installed`, `config-files`, ... or empty.
fn dpkg_status() -> String {
    let (_, out, _) = run_cmd(
        Command::new("dpkg-query").args(["-W", "-f=${db:Status-Status}", "contextd"]),
        60,
    );
    out.trim().to_owned()
}

/// dpkg with `args`, as the user whose home is `home`; waits its turn when
/// another dpkg or apt holds the lock (other engineers install packages
/// on this machine).
fn dpkg(args: &[&str], home: &Path) -> (ExitStatus, String, String) {
    dpkg_tool("dpkg", args, home)
}

/// [`dpkg`] for any of dpkg's tools (`dpkg-trigger` takes the lock too).
fn dpkg_tool(tool: &str, args: &[&str], home: &Path) -> (ExitStatus, String, String) {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let r = run_cmd(
            Command::new(tool)
                .args(args)
                .env("HOME", home)
                .env("DEBIAN_FRONTEND", "noninteractive"),
            600,
        );
        let locked = !r.0.success() && r.2.contains("lock");
        if !locked || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

fn purge_package(home: &Path) {
    let (st, out, err) = dpkg(&["--purge", "contextd"], home);
    if st.success() {
        let _ = std::fs::remove_file(MARK);
    } else {
        eprintln!("dpkg --purge contextd failed: {out}{err}");
    }
}

/// The machine-wide lock of this test, held until dropped.
struct MachineLock {
    _file: std::fs::File,
}

impl MachineLock {
    fn take() -> MachineLock {
        if let Some(dir) = Path::new(LOCK).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)
            .expect("open the lock file");
        use std::os::fd::AsRawFd;
        // SAFETY: flock(2) on a file descriptor this process owns.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(r, 0, "flock {LOCK}");
        MachineLock { _file: f }
    }
}

/// The package, installed by this test; purged when dropped (on every exit
/// path).
struct Installed {
    home: PathBuf,
}

impl Installed {
    fn install(deb: &Path, home: &Path) -> Installed {
        std::fs::write(MARK, "contextd's package test installed contextd\n").expect("mark");
        let installed = Installed {
            home: home.to_owned(),
        };
        let deb = deb.to_str().expect("path");
        installed.dpkg(&["--install", deb]);
        assert_eq!(dpkg_status(), "installed");
        installed
    }

    fn dpkg(&self, args: &[&str]) {
        self.tool("dpkg", args);
    }

    fn tool(&self, tool: &str, args: &[&str]) {
        let (st, out, err) = dpkg_tool(tool, args, &self.home);
        assert!(st.success(), "{tool} {args:?} failed:\n{out}\n{err}");
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if !matches!(dpkg_status().as_str(), "" | "not-installed") {
            purge_package(&self.home);
        }
        let _ = std::fs::remove_file(MARK);
    }
}

/// The extension link points at the format the installed gnome-shell
/// loads: legacy before GNOME 45, the ECMAScript module from 45 on (and
/// without gnome-shell).
fn check_extension_link() {
    let (_, status, _) = run_cmd(
        Command::new("dpkg-query").args(["-W", "-f=${db:Status-Status} ${Version}", "gnome-shell"]),
        60,
    );
    let major = status
        .strip_prefix("installed ")
        .map(|v| v.rsplit(':').next().unwrap_or(v))
        .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|m| m.parse::<u32>().ok());
    let format = match major {
        Some(m) if m < 45 => "legacy",
        _ => "esm",
    };
    let target = std::fs::read_link(EXTENSION_LINK).expect("the extension link");
    assert_eq!(
        target,
        Path::new("../../contextd/gnome-shell")
            .join(format)
            .join("contextd@contextd.org"),
        "gnome-shell {status:?}"
    );
    let metadata = Path::new(EXTENSION_LINK).join("metadata.json");
    assert!(
        metadata.is_file(),
        "{} does not resolve",
        metadata.display()
    );
}

/// Every file under `dir`, with its contents.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                files.insert(path, bytes);
            }
        }
    }
    files
}

/// `dbus-daemon --session`: the default session configuration, which
/// reads the standard service directories. Everything it activated is
/// stopped with it.
struct SessionBus {
    child: Child,
    address: String,
    /// The session's environment, but the bus address.
    env: Vec<(String, String)>,
}

impl SessionBus {
    fn start(dir: &Path, home: &Path, runtime: &Path) -> SessionBus {
        let address = format!("unix:path={}", dir.join("bus").display());
        let s = |p: &Path| p.display().to_string();
        let env: Vec<(String, String)> = vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), s(home)),
            ("XDG_RUNTIME_DIR".into(), s(runtime)),
            // No system bus: the sources that need one report themselves
            // unavailable, and nothing reaches the host's.
            (
                "DBUS_SYSTEM_BUS_ADDRESS".into(),
                format!("unix:path={}", dir.join("no-system-bus").display()),
            ),
            ("LANG".into(), "C.UTF-8".into()),
        ];
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!("--address={address}"))
            // The bus passes its environment on to what it starts.
            .env_clear()
            .envs(env.clone())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("bus address");
        assert!(!line.trim().is_empty(), "dbus-daemon printed no address");
        SessionBus {
            child,
            address,
            env,
        }
    }

    /// The environment of the user's session on this bus.
    fn envs(&self) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.push(("DBUS_SESSION_BUS_ADDRESS".into(), self.address.clone()));
        env
    }

    /// `busctl --user` on this bus: `opts` then `args`.
    fn busctl(&self, opts: &[&str], args: &[&str]) -> (ExitStatus, String, String) {
        run_cmd(
            Command::new("busctl")
                .arg("--user")
                .args(opts)
                .args(args)
                .env_clear()
                .envs(self.envs()),
            90,
        )
    }

    /// Whether the bus offers org.contextd.Broker1 for activation.
    fn activatable(&self) -> bool {
        let (st, out, err) = self.busctl(
            &["call", "org.freedesktop.DBus", "/org/freedesktop/DBus"],
            &["org.freedesktop.DBus", "ListActivatableNames"],
        );
        assert!(st.success(), "ListActivatableNames: {err}");
        out.contains("\"org.contextd.Broker1\"")
    }

    /// The PID of the broker's connection, if the name is owned.
    fn broker_pid(&self) -> Option<u32> {
        let (st, out, _) = self.busctl(
            &["call", "org.freedesktop.DBus", "/org/freedesktop/DBus"],
            &[
                "org.freedesktop.DBus",
                "GetConnectionUnixProcessID",
                "s",
                "org.contextd.Broker1",
            ],
        );
        if !st.success() {
            return None;
        }
        out.trim().strip_prefix("u ")?.parse().ok()
    }

    /// SIGTERM to the broker; wait until it has let go of its name and
    /// exited.
    fn stop_broker(&self, pid: u32) {
        // SAFETY: kill(2) on the daemon this test's bus started.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.broker_pid().is_some() || running(pid) {
            assert!(
                Instant::now() < deadline,
                "the broker did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The processes this bus activated: their environment names it as
    /// their starter.
    fn activated(&self) -> Vec<i32> {
        let want = format!("DBUS_STARTER_ADDRESS={}", self.address);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|v| v == want.as_bytes()))
                    .unwrap_or(false)
            })
            .collect()
    }
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
        .unwrap_or(false)
}

impl Drop for SessionBus {
    fn drop(&mut self) {
        for pid in self.activated() {
            // SAFETY: kill(2) on a process this test's bus started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

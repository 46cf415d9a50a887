//! Shared bench plumbing: a private bus and the daemon on it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[path = "../tests/it/common/repo.rs"]
mod repo;
pub use repo::{repo_file, root};

/// Run a bench's `main` future on a runtime of `workers` threads.
pub fn block_on(workers: usize, f: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f);
}

/// A `Changed` signal's data (`a{sv}`) as JSON; `None` if its body does
/// not parse.
pub fn changed_data(sig: &contextd::client::proxy::Changed) -> Option<serde_json::Value> {
    let args = sig.args().ok()?;
    Some(serde_json::Value::Object(
        args.data()
            .iter()
            .map(|(k, v)| (k.clone(), contextd::client::json::to_json(v)))
            .collect(),
    ))
}

/// A subscriber to some categories on a connection and a thread of its
/// own, stamping each `Changed` when it arrives: when, and its data as
/// JSON. The floors the latency benches compare the broker with (a bare
/// Wayland client, a bare PipeWire registry listener, a bus monitor) each
/// stamp on a thread of their own; a subscriber polled by the bench's
/// runtime would add the bench's own scheduling (and, where the bench was
/// still waiting for an answer of the compositor, that wait) to the
/// broker's figure. Dropped: it unsubscribes and its thread ends.
pub struct Subscriber {
    rx: tokio::sync::mpsc::UnboundedReceiver<(std::time::Instant, serde_json::Value)>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Subscriber {
    /// Subscribed (and its stream open) when this returns.
    pub fn new(address: &str, categories: &[&str]) -> Subscriber {
        use futures_util::StreamExt;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let address = address.to_owned();
        let categories: Vec<String> = categories.iter().map(|c| (*c).to_owned()).collect();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let conn = zbus::connection::Builder::address(address.as_str())
                    .build()
                    .await
                    .expect("connect");
                let ctx = contextd::client::proxy::Context1Proxy::new(&conn)
                    .await
                    .expect("proxy");
                let cats: Vec<&str> = categories.iter().map(String::as_str).collect();
                let path = ctx.subscribe(&cats).await.expect("subscribe");
                let sub = contextd::client::proxy::Subscription1Proxy::builder(&conn)
                    .path(path)
                    .build()
                    .await
                    .expect("subscription");
                let mut stream = sub.receive_changed().await.expect("Changed");
                let _ = ready_tx.send(());
                loop {
                    tokio::select! {
                        biased;
                        sig = stream.next() => {
                            let at = std::time::Instant::now();
                            let Some(sig) = sig else { return };
                            let Some(data) = changed_data(&sig) else { continue };
                            let _ = tx.send((at, data));
                        }
                        _ = &mut stopped => {
                            let _ = sub.unsubscribe().await;
                            return;
                        }
                    }
                }
            });
        });
        ready.recv().expect("the subscriber is ready");
        Subscriber {
            rx,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Forget the changes that arrived so far.
    pub fn drain(&mut self) {
        while self.rx.try_recv().is_ok() {}
    }

    /// The next change and when it arrived; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<(std::time::Instant, serde_json::Value)> {
        self.rx.recv().await
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The environment of a broker (and of its contextctl) whose directories
/// are under `dir` (config, data, state, run; run is made, 0700), quiet.
/// The caller adds the bus addresses.
pub fn envs(dir: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let run = dir.join("run");
    std::fs::create_dir_all(&run).expect("mkdir run");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).expect("chmod run");
    let path = |p: &Path| p.display().to_string();
    // Allocator settings pass through, for measuring them.
    let tunables = std::env::var("GLIBC_TUNABLES")
        .ok()
        .map(|t| ("GLIBC_TUNABLES".to_owned(), t));
    vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("XDG_CONFIG_HOME".into(), path(&dir.join("config"))),
        ("XDG_DATA_HOME".into(), path(&dir.join("data"))),
        ("XDG_STATE_HOME".into(), path(&dir.join("state"))),
        ("XDG_RUNTIME_DIR".into(), path(&run)),
        ("HOME".into(), path(dir)),
        ("RUST_LOG".into(), "off".into()),
    ]
    .into_iter()
    .chain(tunables)
    .collect()
}

/// The daemon as a bench starts it: a clean environment ([`envs`]), quiet.
/// The caller adds the bus addresses and arguments.
pub fn contextd(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_contextd"));
    c.env_clear()
        .envs(envs(dir))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

pub fn start_bus(dir: &Path) -> (Proc, String) {
    let mut child = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address=1"])
        .arg(format!("--address=unix:path={}/bus", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address");
    (Proc(child), line.trim().to_owned())
}

/// python-dbusmock's `template` on the bus at `address` (as the system
/// bus with `system`), killed on drop.
pub fn dbusmock(address: &str, system: bool, template: &str) -> Proc {
    let mut c = Command::new("/usr/bin/python3");
    c.args(["-m", "dbusmock"]);
    if system {
        c.arg("--system");
    }
    Proc(
        c.args(["--template", template])
            .env("DBUS_SESSION_BUS_ADDRESS", address)
            .env("DBUS_SYSTEM_BUS_ADDRESS", address)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3-dbusmock"),
    )
}

/// python-dbusmock's polkitd on the system bus at `sys_address`,
/// authorising `org.contextd.manage-consent` once it answers.
pub async fn polkit_allowing_manage(sys_address: &str) -> Proc {
    let polkit = dbusmock(sys_address, true, "polkitd");
    let sys = zbus::connection::Builder::address(sys_address)
        .build()
        .await
        .expect("system bus");
    for _ in 0..200 {
        let r = sys
            .call_method(
                Some("org.freedesktop.PolicyKit1"),
                "/org/freedesktop/PolicyKit1/Authority",
                Some("org.freedesktop.DBus.Mock"),
                "SetAllowed",
                &(vec!["org.contextd.manage-consent"],),
            )
            .await;
        if r.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    polkit
}

/// A process's resident memory (VmRSS), in KiB; 0 when unknown.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Percentile of sorted durations.
pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn median(v: &[f64]) -> f64 {
    min_median_max(v).1
}

/// The smallest, the median and the largest of `v` (not empty).
pub fn min_median_max(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// min / median / max, as ratios.
pub fn spread(v: &[f64]) -> String {
    let (a, m, b) = min_median_max(v);
    format!("min {a:.2}x  median {m:.2}x  max {b:.2}x")
}

pub fn verdict(ok: bool) -> &'static str {
    if ok { "meets target" } else { "MISSES target" }
}

/// Write `XDG_CONFIG_HOME/contextd/policy.toml` (under `config_home`)
/// granting this bench process `categories`.
pub fn grant_self(config_home: &Path, categories: &[&str]) {
    let cfg = config_home.join("contextd");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    let me = std::fs::read_link("/proc/self/exe").expect("exe");
    let cats: Vec<String> = categories.iter().map(|c| format!("{c:?}")).collect();
    std::fs::write(
        cfg.join("policy.toml"),
        format!(
            "[[grant]]\napp = \"exe:{}\"\ncategories = [{}]\n",
            me.display(),
            cats.join(", ")
        ),
    )
    .expect("policy");
}

/// A process's CPU time so far (utime + stime from /proc/PID/stat), in
/// clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the comm: state is field 3, utime 14, stime 15.
    let n = |i: usize| {
        f.get(i - 3)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    n(14) + n(15)
}

/// `perf record` of one process while `f` runs; the top entries of its
/// profile, or why there are none.
///
/// With `CONTEXTD_BENCH_PERF_DIR` set, call graphs are recorded too (DWARF
/// unwinding: release builds keep no frame pointers) and each recording is
/// kept in that directory (`perf-PID-N.data`), for `perf report -g` to say
/// who called what the self-time lines name.
pub async fn profiled<T>(pid: u32, f: impl std::future::Future<Output = T>) -> (T, Vec<String>) {
    static KEPT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let data = tempfile::NamedTempFile::new().expect("tempfile");
    let keep = std::env::var_os("CONTEXTD_BENCH_PERF_DIR").map(PathBuf::from);
    let mut rec = Command::new("perf");
    rec.args(["record", "-q", "-e", "cpu-clock", "-F", "999"]);
    if keep.is_some() {
        rec.args(["--call-graph", "dwarf,32768"]);
    }
    let rec = rec
        .arg("-p")
        .arg(pid.to_string())
        .arg("-o")
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let out = f.await;
    let Ok(rec) = rec else {
        return (out, vec!["(perf not installed: no profile)".into()]);
    };
    // SIGINT ends the recording and writes the file.
    // SAFETY: kill(2) on the pid of our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let _ = Proc(rec).0.wait();
    let report = |sort: &str, n: usize| -> Vec<String> {
        let out = Command::new("perf")
            .args([
                "report",
                "--stdio",
                "--no-children",
                "-q",
                "--sort",
                sort,
                "-i",
            ])
            .arg(data.path())
            .stderr(Stdio::null())
            .output();
        out.map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .take(n)
                .map(|l| {
                    let l = l.trim();
                    l.chars().take(110).collect()
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let mut lines = report("dso", 4);
    lines.extend(report("sym", 12));
    if lines.is_empty() {
        lines.push("(perf recorded nothing: perf_event_paranoid?)".into());
    }
    if let Some(dir) = keep {
        let n = KEPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let to = dir.join(format!("perf-{pid}-{n}.data"));
        match std::fs::copy(data.path(), &to) {
            Ok(_) => lines.push(format!("(kept: {})", to.display())),
            Err(e) => lines.push(format!("(cannot keep {}: {e})", to.display())),
        }
    }
    (out, lines)
}

/// Where a process's RSS is, in KiB: its own binary, shared libraries
/// and anonymous memory (heap, thread stacks, allocator arenas).
pub fn rss_parts(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let (mut bin, mut libs, mut anon) = (0u64, 0u64, 0u64);
    let mut name = String::new();
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("Rss:") => {
                let kib: u64 = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if !exe.is_empty() && name == exe {
                    bin += kib;
                } else if name.starts_with('/') {
                    libs += kib;
                } else {
                    anon += kib;
                }
            }
            // A mapping's header: range, perms, offset, device, inode,
            // then the path (if any).
            Some(first) if first.contains('-') && !first.ends_with(':') => {
                name = f.nth(4).unwrap_or("").to_owned();
            }
            _ => {}
        }
    }
    format!(
        "binary {:.1} MB, libraries {:.1} MB, anonymous {:.1} MB",
        bin as f64 / 1024.0,
        libs as f64 / 1024.0,
        anon as f64 / 1024.0
    )
}

/// `examples/wl_toplevels` of the release build, built if missing: a
/// Wayland client that maps toplevels on demand.
pub fn wl_toplevels_bin() -> std::path::PathBuf {
    // Beside the binaries, in target/<profile>/examples/ (this test's own
    // executable may be in cargo's build dir, elsewhere).
    let bin = Path::new(env!("CARGO_BIN_EXE_contextd"))
        .parent()
        .map(|d| d.join("examples/wl_toplevels"))
        .expect("target dir");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "--release", "--quiet", "--example", "wl_toplevels"])
            .current_dir(crate::common::root())
            .status()
            .expect("cargo build");
        assert!(st.success(), "building wl_toplevels failed");
    }
    bin
}

/// The daemon's MCP HTTP address (`127.0.0.1:PORT`), once it has written
/// `url_file` (`$XDG_RUNTIME_DIR/contextd/mcp-http.url`), within `secs`.
pub async fn mcp_http_addr(url_file: &Path, secs: u64) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let url = loop {
        if let Ok(u) = std::fs::read_to_string(url_file)
            && !u.trim().is_empty()
        {
            break u.trim().to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "contextd did not start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned()
}

/// A new MCP bearer token named `name`, made by `contextctl token create`
/// with the broker's environment.
pub fn create_token(name: &str, env: Vec<(String, String)>) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_contextctl"))
        .args(["token", "create", name])
        .env_clear()
        .envs(env)
        .output()
        .expect("contextctl token create");
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        token.starts_with("ctxd_"),
        "no token: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    token
}

/// The items of a stream, each with the time it arrived.
///
/// A task on the bench's runtime takes each item as soon as the stream
/// yields it (zbus's reader runs on that runtime too), so the time is when
/// the signal reached this process. Timed in the bench's main future
/// instead, a signal that arrived while the main future was blocked (in a
/// child's `wait`, or awaiting a call) would be stamped when the main
/// future got round to it, and a thread hand-off later: the bare floors
/// stamp their events on their own threads as they arrive.
pub struct Stamped<T> {
    rx: tokio::sync::mpsc::UnboundedReceiver<(std::time::Instant, T)>,
    task: tokio::task::JoinHandle<()>,
}

impl<T: Send + 'static> Stamped<T> {
    pub fn new<S>(mut stream: S) -> Stamped<T>
    where
        S: futures_util::Stream<Item = T> + Send + Unpin + 'static,
    {
        use futures_util::StreamExt;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                if tx.send((std::time::Instant::now(), item)).is_err() {
                    return;
                }
            }
        });
        Stamped { rx, task }
    }

    /// The next item and when it arrived; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<(std::time::Instant, T)> {
        self.rx.recv().await
    }
}

impl<T> Drop for Stamped<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The machine's CPUs split in two for a bench that drives a desktop: the
/// desktop's part (a shell and its windows; PipeWire, WirePlumber and the
/// app that starts playing) on one, the bus, the broker and the bench
/// itself on the other.
///
/// Why: the bench makes the desktop busy at the very moment it times the
/// broker. The shells render on the CPU here (llvmpipe, no GPU), and a
/// focus change makes the compositor and both GTK windows redraw while
/// the broker handles the report; on two cores that rendering takes both,
/// and every thread on the measured path (the bus, the broker, the bench's
/// stamping threads) waits for a core: `Peer.Ping` to the broker right
/// after a change reads a p99 of 1-7 ms, and the figure says how busy the
/// compositor was, not what the broker adds. The benches print one round
/// with the cores shared as well, for the record.
pub struct CpuSplit {
    all: libc::cpu_set_t,
    desktop: libc::cpu_set_t,
    measured: libc::cpu_set_t,
}

impl CpuSplit {
    /// `None` with a single CPU to run on.
    pub fn new() -> Option<CpuSplit> {
        // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity
        // writes at most its size.
        let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: as above; pid 0 is the calling thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut all) } != 0 {
            return None;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: cpu is below CPU_SETSIZE.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &all) })
            .collect();
        if cpus.len() < 2 {
            return None;
        }
        // SAFETY: zeroed sets are empty.
        let (mut desktop, mut measured): (libc::cpu_set_t, libc::cpu_set_t) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let half = cpus.len() / 2;
        for (i, &cpu) in cpus.iter().enumerate() {
            // SAFETY: cpu is below CPU_SETSIZE.
            unsafe {
                libc::CPU_SET(
                    cpu,
                    if i < half {
                        &mut desktop
                    } else {
                        &mut measured
                    },
                )
            };
        }
        Some(CpuSplit {
            all,
            desktop,
            measured,
        })
    }

    /// Every process the bench started (and what they started), except
    /// `measured`, on the desktop's CPUs; `measured` and the bench itself
    /// on the others. Threads started later inherit their starter's CPUs.
    pub fn split(&self, measured: &[u32]) {
        for pid in descendants(std::process::id()) {
            if !measured.contains(&pid) {
                self.desktop(pid);
            }
        }
        for &pid in measured {
            self.measured(pid);
        }
        self.measured(std::process::id());
    }

    /// Every thread of `pid` on the desktop's CPUs.
    pub fn desktop(&self, pid: u32) {
        pin(pid, &self.desktop);
    }

    /// Every thread of `pid` on the measured path's CPUs.
    pub fn measured(&self, pid: u32) {
        pin(pid, &self.measured);
    }

    /// `cmd` starts on the desktop's CPUs (an app the bench starts while
    /// it measures, which would otherwise inherit the bench's).
    pub fn desktop_command(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        let set = self.desktop;
        // SAFETY: sched_setaffinity(2) is async-signal-safe, and the
        // closure touches nothing but its own copy of the set.
        unsafe {
            cmd.pre_exec(move || {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        };
    }

    /// Everything back on every CPU: what the bench started, `others`
    /// and the bench.
    pub fn share(&self, others: &[u32]) {
        let me = std::process::id();
        for pid in descendants(me).into_iter().chain(others.iter().copied()) {
            pin(pid, &self.all);
        }
        pin(me, &self.all);
    }

    /// A one-line description: which CPUs are whose, `desktop` being
    /// what the desktop's part runs (e.g. "the shell and its windows").
    pub fn describe(&self, desktop: &str) -> String {
        let list = |set: &libc::cpu_set_t| {
            (0..libc::CPU_SETSIZE as usize)
                // SAFETY: cpu is below CPU_SETSIZE.
                .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, set) })
                .map(|cpu| cpu.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{desktop} on CPU {}, the bus, the broker and the bench on CPU {}",
            list(&self.desktop),
            list(&self.measured)
        )
    }
}

impl Drop for CpuSplit {
    /// The bench goes on with every CPU (the next benches must not inherit
    /// the split).
    fn drop(&mut self) {
        pin(std::process::id(), &self.all);
    }
}

/// The pids scripts/session.sh recorded in the session `dir`
/// (DIR/pids/NAME.pid) for the names `wanted` accepts.
pub fn session_pids(dir: &Path, wanted: impl Fn(&str) -> bool) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(dir.join("pids"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_suffix(".pid")) else {
            continue;
        };
        if !wanted(name) {
            continue;
        }
        let pid: Option<u32> = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        pids.extend(pid);
    }
    pids
}

/// Every thread of `pid` on `set` (a thread that ended meanwhile is
/// skipped).
fn pin(pid: u32, set: &libc::cpu_set_t) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for tid in tasks.flatten() {
        let Some(tid) = tid.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: set is a valid cpu_set_t of the size given.
        unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) };
    }
}

/// The processes below `root` (its children, theirs, ...), from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces and parens.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// The root of `recipe` (scripts/roots/RECIPE.sh), if this machine has it
/// (`scripts/deps.sh --desktop-root` makes it, which `make bench` runs),
/// or why not; `what` names it in that reason. A bench never makes one.
pub fn desktop_root(recipe: &str, what: &str) -> Result<String, String> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(format!("entering {what} needs root"));
    }
    let script = root().join("scripts/roots.sh");
    let ok = Command::new(&script)
        .args([recipe, "--check"])
        .status()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !ok.success() {
        return Err(format!(
            "no {what} (scripts/deps.sh --desktop-root makes it)"
        ));
    }
    let out = Command::new(&script)
        .arg(recipe)
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

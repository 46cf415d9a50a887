//! A process that takes `org.contextd.Broker1` while no broker runs
//! (tests/shells/rogue_broker.py), in the disguises an attacker would pick:
//! any program, a program named `contextd`, and one inside a sandbox as
//! Flatpak makes them (tests/it/shells_gnome_rogue_broker.rs,
//! tests/it/shells_kwin.rs). It records every call it receives.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use super::stop;

/// How the rogue runs.
pub enum Disguise {
    /// The system's python3: not named `contextd`.
    Python,
    /// A copy of python3 named `contextd`, at `dir/contextd`.
    NamedContextd,
    /// A copy of python3 in a bubblewrap sandbox, where it is at `exe_at`
    /// (the path of the real broker, say). The sandbox has the session
    /// bus socket itself (as a Flatpak app given the whole bus), and:
    Sandboxed {
        exe_at: PathBuf,
        /// a `/.flatpak-info` (as the bus proxy of every Flatpak app has);
        flatpak_info: bool,
        /// a PID namespace of its own (as every Flatpak app has);
        own_pid_ns: bool,
        /// `PR_SET_DUMPABLE` 0: its `/proc/PID/{exe,root}` closed to others.
        not_dumpable: bool,
    },
}

pub struct RogueBroker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    calls: PathBuf,
    /// Its unique name on the bus.
    pub unique: String,
    _dir: tempfile::TempDir,
}

/// The socket path of a `unix:path=…` address.
fn socket_of(address: &str) -> PathBuf {
    let path = address
        .split(';')
        .next()
        .and_then(|a| a.strip_prefix("unix:"))
        .and_then(|kv| kv.split(',').find_map(|p| p.strip_prefix("path=")))
        .unwrap_or_else(|| panic!("not a unix:path= address: {address}"));
    PathBuf::from(path)
}

fn python_copy(dir: &Path) -> PathBuf {
    let exe = dir.join("contextd");
    let python = std::fs::canonicalize("/usr/bin/python3").expect("python3");
    std::fs::copy(&python, &exe).expect("copy python3");
    exe
}

impl RogueBroker {
    /// Start it on the bus at `bus` and wait until it owns the name.
    pub fn start(bus: &str, how: Disguise) -> RogueBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        let calls = dir.path().join("calls");
        std::fs::write(&calls, "").expect("calls file");
        let script_src = crate::common::root().join("tests/shells/rogue_broker.py");
        let script = dir.path().join("rogue_broker.py");
        std::fs::copy(&script_src, &script).expect("copy the script");
        let cmd = match how {
            Disguise::Python => {
                let mut c = Command::new("/usr/bin/python3");
                c.arg(&script).arg(&calls);
                c
            }
            Disguise::NamedContextd => {
                let mut c = Command::new(python_copy(dir.path()));
                c.arg(&script).arg(&calls);
                c
            }
            Disguise::Sandboxed {
                exe_at,
                flatpak_info,
                own_pid_ns,
                not_dumpable,
            } => {
                let exe = python_copy(dir.path());
                let mut c = Command::new("bwrap");
                c.args(["--ro-bind", "/usr", "/usr"])
                    .args(["--symlink", "usr/bin", "/bin"])
                    .args(["--symlink", "usr/sbin", "/sbin"])
                    .args(["--symlink", "usr/lib", "/lib"])
                    .args(["--symlink", "usr/lib64", "/lib64"])
                    .args(["--ro-bind", "/etc", "/etc"])
                    .args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"])
                    .arg("--bind")
                    .arg(dir.path())
                    .arg(dir.path())
                    .arg("--bind")
                    .arg(socket_of(bus))
                    .arg(socket_of(bus))
                    .arg("--ro-bind")
                    .arg(&exe)
                    .arg(&exe_at)
                    .arg("--die-with-parent");
                if flatpak_info {
                    let info = dir.path().join("flatpak-info");
                    std::fs::write(
                        &info,
                        "[Application]\nname=org.example.Rogue\n\
                         runtime=runtime/org.freedesktop.Platform/x86_64/24.08\n\n\
                         [Session Bus Policy]\norg.contextd.Broker1=own\n",
                    )
                    .expect("write .flatpak-info");
                    c.arg("--ro-bind").arg(info).arg("/.flatpak-info");
                }
                if own_pid_ns {
                    c.arg("--unshare-pid");
                }
                c.arg("--").arg(&exe_at).arg(&script).arg(&calls);
                if not_dumpable {
                    c.arg("--not-dumpable");
                }
                c
            }
        };
        // As a user's process is: without CAP_SYS_PTRACE, as the shell
        // runs (tests/it/shells/gnome.rs). A process with capabilities the
        // shell lacks has its /proc/PID/exe closed to it, which a user's
        // own processes have not.
        let mut setpriv = Command::new("setpriv");
        setpriv
            .args(["--bounding-set", "-sys_ptrace", "--"])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        let mut child = setpriv
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("DBUS_SESSION_BUS_ADDRESS", bus)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the rogue (python3-gi; bubblewrap: scripts/deps.sh)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut rogue = RogueBroker {
            child,
            stdin,
            stdout,
            calls,
            unique: String::new(),
            _dir: dir,
        };
        let line = rogue.line();
        rogue.unique = line
            .strip_prefix("owned ")
            .unwrap_or_else(|| panic!("the rogue did not take the name: {line:?}"))
            .to_owned();
        rogue
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.stdout.read_line(&mut l).expect("read the rogue");
        l.trim().to_owned()
    }

    /// Every call it received so far: `SENDER INTERFACE MEMBER`.
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.calls)
            .expect("the rogue's calls")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The calls it received from `sender` (a unique name).
    pub fn calls_from(&self, sender: &str) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.split(' ').next() == Some(sender))
            .collect()
    }

    /// Call the GNOME Shell consent agent's `Ask` as a broker would: the
    /// D-Bus error name, or "answered".
    pub fn ask(&mut self) -> String {
        writeln!(self.stdin, "ask").expect("write the rogue");
        self.stdin.flush().expect("flush");
        let line = self.line();
        line.strip_prefix("ask ")
            .unwrap_or_else(|| panic!("the rogue did not ask: {line:?}"))
            .to_owned()
    }

    /// End it (its name goes with it).
    pub fn stop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        stop(&mut self.child, Duration::from_secs(5));
    }
}

impl Drop for RogueBroker {
    fn drop(&mut self) {
        stop(&mut self.child, Duration::from_secs(5));
    }
}

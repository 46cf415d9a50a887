//! The bridge's identity cannot be borrowed (issue 48, item 5), written as
//! the attacks: a process that connects to the MCP socket and then has a
//! granted program take its PID (fork, then exec) is not served as that
//! program; a child of a granted host that starts `contextctl mcp` as a
//! `clone(CLONE_PARENT)` sibling, so that the bridge's parent is the host
//! while the child holds its pipes, does not get the host's grants.

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use mcp_support::*;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"borrower","version":"1"}}}"#;
const CALL: &str =
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_active_window"}}"#;

/// Connects, forks; the parent (the PID the kernel recorded for the
/// connection) execs the granted program, the child waits until it has,
/// says so, waits for "go" and then speaks through the connection,
/// printing every line it gets back until the answer to the call or the
/// end.
const FORK_EXEC: &str = r#"
import os, socket, sys, time
path, granted, inheritable, init, call = sys.argv[1:6]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.set_inheritable(inheritable == "1")
me = os.getpid()
if os.fork() != 0:
    os.execv(granted, [granted, "60"])
real = os.path.realpath(granted)
for _ in range(1000):
    try:
        if os.readlink("/proc/%d/exe" % me) == real:
            break
    except OSError:
        pass
    time.sleep(0.01)
print("execd", flush=True)
sys.stdin.readline()
s.settimeout(20)
s.sendall((init + "\n" + call + "\n").encode())
for line in s.makefile("r"):
    print(line.strip(), flush=True)
    if '"id":2' in line or '"id":null' in line:
        break
print("end", flush=True)
"#;

/// The granted program the attacker execs: `sleep`, by its real path.
fn sleep_path() -> String {
    let p = std::fs::canonicalize("/bin/sleep").expect("sleep");
    p.to_str().expect("utf-8").to_owned()
}

/// Lines of a child's stdout, read on a thread.
fn lines_of(stdout: std::process::ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Everything up to the "end" line (or EOF), within 30 s.
fn until_end(rx: &mpsc::Receiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(30)) {
        if l == "end" {
            break;
        }
        out.push(l);
    }
    out
}

/// Kills a process by PID on drop (the attacker's exec-ed parent).
struct KillPid(u32);
impl Drop for KillPid {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a process this test started.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_then_exec_of_a_granted_program_is_not_served_as_it() {
    with_timeout(180, async {
        let bus = Bus::start();
        let home = Home::new();
        home.deny_undecided();
        let granted = sleep_path();
        home.write_policy(&[(&format!("exe:{granted}"), &["windows"])]);
        let mut replay = Replay::new(&home);
        let d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
        let sock = runtime(&home).join("mcp.sock");

        // Both ways to leave the connection behind: the exec-ed program
        // keeps a copy of it, or only the forked child has it.
        for inheritable in ["1", "0"] {
            // The broker serves at most 64 connections at once: with 64
            // open, the attacker's waits in the backlog (its PID recorded
            // at connect) and is looked at only once one of ours closes,
            // after the exec. Deterministic, without a race to win.
            let mut idle: Vec<UnixStream> = (0..64)
                .map(|_| UnixStream::connect(&sock).expect("connect"))
                .collect();
            let mut attacker = Command::new(python())
                .arg("-c")
                .arg(FORK_EXEC)
                .args([
                    sock.to_str().expect("utf-8"),
                    &granted,
                    inheritable,
                    INIT,
                    CALL,
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("python");
            let _kill = KillPid(attacker.id());
            let lines = lines_of(attacker.stdout.take().expect("stdout"));
            let first = lines.recv_timeout(Duration::from_secs(30)).expect("a line");
            assert_eq!(first, "execd", "the attacker's parent did not exec");
            let exe = std::fs::read_link(format!("/proc/{}/exe", attacker.id())).expect("exe");
            assert_eq!(
                exe.to_str(),
                Some(granted.as_str()),
                "the PID now runs the granted program"
            );
            // Free a slot: the broker accepts the attacker's connection.
            drop(idle.pop());
            let mut stdin = attacker.stdin.take().expect("stdin");
            stdin.write_all(b"go\n").expect("go");
            stdin.flush().expect("flush");
            let out = until_end(&lines);
            assert!(
                !out.is_empty(),
                "no answer at all (inheritable={inheritable})"
            );
            let all = out.join("\n");
            assert!(!all.contains("w1"), "served as the granted program: {all}");
            assert!(
                !all.contains("notes.txt"),
                "served as the granted program: {all}"
            );
            assert!(
                all.contains("-32004") || all.contains("\"isError\":true"),
                "neither refused nor denied (inheritable={inheritable}): {all}"
            );
            drop(idle);
            let _ = attacker.kill();
            let _ = attacker.wait();
        }
        assert!(
            d.stderr().contains("refusing an MCP connection"),
            "{}",
            d.stderr()
        );
    })
    .await;
}

/// A child of the host makes pipes, then `clone(CLONE_PARENT)`s a process
/// that becomes `contextctl mcp` on them: the bridge's parent is the host,
/// but its standard input and output are the child's. Prints the bridge's
/// PID, then what comes back.
const CLONE_PARENT: &str = r#"
import ctypes, os, platform, sys
ctl, init, call = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 56, "aarch64": 220}[platform.machine()]
CLONE_PARENT, SIGCHLD = 0x8000, 17
in_r, in_w = os.pipe()
out_r, out_w = os.pipe()
pid = libc.syscall(nr, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.execv(ctl, [ctl, "mcp"])
    os._exit(127)
if pid < 0:
    print("clone failed", ctypes.get_errno(), flush=True)
    sys.exit(1)
os.close(in_r)
os.close(out_w)
print(pid, flush=True)
w = os.fdopen(in_w, "w")
w.write(init + "\n" + call + "\n")
w.flush()
for line in os.fdopen(out_r, "r"):
    print(line.strip(), flush=True)
    if '"id":2' in line or '"id":null' in line:
        break
print("end", flush=True)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_parent_child_of_a_granted_host_is_asked_as_itself() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = Home::new();
        home.deny_undecided();
        // Granted: this test process, the host.
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let mut replay = Replay::new(&home);
        let d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
        let mut child = Command::new(python())
            .arg("-c")
            .arg(CLONE_PARENT)
            .args([contextctl_bin(), INIT, CALL])
            .env_clear()
            .envs(home.envs(&bus))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python");
        let _kill = KillPid(child.id());
        let lines = lines_of(child.stdout.take().expect("stdout"));
        let bridge: u32 = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the bridge's pid")
            .parse()
            .expect("a pid");
        let _kill_bridge = KillPid(bridge);
        // The attack is real: the bridge is this (granted) process's child.
        let stat = std::fs::read_to_string(format!("/proc/{bridge}/stat")).expect("stat");
        let ppid: u32 = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .expect("ppid");
        assert_eq!(ppid, std::process::id(), "CLONE_PARENT made us its parent");
        let out = until_end(&lines);
        let all = out.join("\n");
        assert!(!all.is_empty(), "no answer at all");
        assert!(!all.contains("w1"), "given the host's grants: {all}");
        assert!(!all.contains("notes.txt"), "given the host's grants: {all}");
        assert!(all.contains("-32004"), "not refused: {all}");
        assert!(d.stderr().contains("not by its parent"), "{}", d.stderr());
        // Reap the bridge (our child by CLONE_PARENT).
        // SAFETY: kill(2) and waitpid(2) on our own child, no status wanted.
        unsafe {
            libc::kill(bridge as i32, libc::SIGKILL);
            libc::waitpid(bridge as i32, std::ptr::null_mut(), 0);
        }
        let _ = child.wait();
    })
    .await;
}

//! `contextctl mcp` as MCP hosts really start it: the Python SDK's
//! `stdio_client` with its default environment (only `HOME LOGNAME PATH
//! SHELL TERM USER`), no `XDG_RUNTIME_DIR`, no `DBUS_SESSION_BUS_ADDRESS`,
//! and no daemon running yet. The bridge finds the user's runtime directory
//! (`/run/user/UID`) and the session bus at its default address, activates
//! the daemon there, and the host reads every tool and resource. Runs in a
//! private mount namespace (tests/mcp/minimal_env.sh) so that /run/user is
//! the test's own.

use crate::common;
use crate::mcp_support;

use std::path::Path;
use std::process::Command;

use common::*;
use mcp_support::*;
use serde_json::Value;

#[test]
fn a_host_with_the_sdk_default_environment_reads_everything() {
    let home = Home::new();
    home.deny_undecided();
    home.write_policy(&[(python_app_id().as_str(), &["*"])]);
    let uid = {
        // SAFETY: getuid(2) has no failure mode.
        unsafe { libc::getuid() }
    };
    let work = tempfile::tempdir().expect("tempdir");
    let script = crate::common::root().join("tests/mcp/minimal_env.sh");
    let mut cmd = Command::new("unshare");
    if uid != 0 {
        // Without privileges: a user namespace in which we are root.
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "--"])
        .arg("bash")
        .arg(&script)
        .arg(contextd_bin())
        .arg(work.path())
        // The host: the SDK's stdio_client with no env=.
        .arg(python())
        .arg(client_script())
        .args(["--transport", "stdio", "--contextctl", contextctl_bin()])
        .args(["--mode", "legacy", "--scenario", "dump"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in home.envs_for("") {
        // The bus and the runtime directory are the defaults found in the
        // namespace, not the test's.
        if k != "DBUS_SESSION_BUS_ADDRESS" && k != "XDG_RUNTIME_DIR" {
            cmd.env(k, v);
        }
    }
    let (st, out, err) = run_cmd(&mut cmd, 120);
    assert!(st.success(), "the host failed ({st}):\n{err}\n{out}");
    let r: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("report is not JSON ({e}):\n{out}\n{err}"));
    assert_eq!(r["server"]["serverInfo"]["name"], "contextd", "{r}");
    let read = r["read"].as_object().expect("read");
    for tool in [
        "get_snapshot",
        "get_active_window",
        "list_windows",
        "get_media_activity",
        "get_session_state",
        "get_power",
        "get_network",
        "list_notifications",
        "get_recent_activity",
        "summarize_time",
    ] {
        let res = &read[&format!("tool {tool}")]["ok"];
        assert!(res.is_object(), "{tool}: {}", read[&format!("tool {tool}")]);
        assert_ne!(res["isError"], Value::Bool(true), "{tool}: {res}");
    }
    for uri in [
        "context://snapshot",
        "context://windows",
        "context://windows/active",
        "context://media",
        "context://session",
        "context://power",
        "context://network",
        "context://notifications",
        "context://history",
    ] {
        let res = &read[&format!("resource {uri}")];
        assert!(res["ok"]["contents"].is_array(), "{uri}: {res}");
    }
}

/// Hosts run by an interpreter are told apart (issue 28, hole 10): two
/// copies of one Python host script, each run by the system's python3
/// with only the six variables of an SDK host, start `contextctl mcp`. Each
/// is known by its own script (`python3:/…/a.py`, `python3:/…/b.py`), not
/// both by `exe:/usr/bin/python3.11`: the grant to `a.py` lets it read,
/// and `b.py` is refused under its own id.
#[test]
fn two_python_scripts_are_two_hosts() {
    let python = Path::new("/usr/bin/python3");
    let real_python = std::fs::canonicalize(python).expect("python3");
    assert!(
        contextd::internals::is_system_executable(&real_python),
        "{} is not a system program",
        real_python.display()
    );
    two_scripts_are_two_hosts(python);
}

/// The same on pyenv's Python (issue 47): `~/.pyenv/versions/3.11.7/bin/
/// python3.11`, not a system program, was one app for every script it
/// ran, asked as ".../python3.11 wants to know what you are doing", and
/// the second host read on the first one's grant. Version managers'
/// interpreters are recognised by their layouts, without configuration.
/// (A copy of Debian's python3.11 there: it finds its library in /usr.)
#[test]
fn two_scripts_on_pyenvs_python_are_two_hosts() {
    let home = tempfile::tempdir().expect("tempdir");
    let real_python = std::fs::canonicalize("/usr/bin/python3").expect("python3");
    let name = real_python
        .file_name()
        .and_then(|n| n.to_str())
        .expect("python3.X")
        .to_owned();
    let pyenv = home.path().join(".pyenv/versions/3.11.7/bin");
    std::fs::create_dir_all(&pyenv).expect("mkdir");
    let python = pyenv.join(&name);
    std::fs::copy(&real_python, &python).expect("copy python");
    assert!(!contextd::internals::is_system_executable(&python));
    two_scripts_are_two_hosts(&python);
}

/// Two copies of the host script run by `python`, one granted.
fn two_scripts_are_two_hosts(python: &Path) {
    let scripts = tempfile::tempdir().expect("tempdir");
    let host = crate::common::root().join("tests/mcp/script_host.py");
    let [a, b] = ["a.py", "b.py"].map(|n| {
        let p = scripts.path().join(n);
        std::fs::copy(&host, &p).expect("copy the host script");
        std::fs::canonicalize(p).expect("script path")
    });
    let id = |p: &Path| format!("python3:{}", p.display());
    let home = Home::new();
    home.deny_undecided();
    home.write_policy(&[(id(&a).as_str(), &["*"])]);
    let uid = {
        // SAFETY: getuid(2) has no failure mode.
        unsafe { libc::getuid() }
    };
    let work = tempfile::tempdir().expect("tempdir");
    let script = crate::common::root().join("tests/mcp/minimal_env.sh");
    let mut cmd = Command::new("unshare");
    if uid != 0 {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "--"])
        .arg("bash")
        .arg(&script)
        .arg(contextd_bin())
        .arg(work.path())
        // The two hosts, one after the other, each the parent of its bridge.
        .args([
            "/bin/sh",
            "-c",
            "\"$0\" \"$1\" \"$3\" && \"$0\" \"$2\" \"$3\"",
        ])
        .arg(python)
        .arg(&a)
        .arg(&b)
        .arg(contextctl_bin())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in home.envs_for("") {
        if k != "DBUS_SESSION_BUS_ADDRESS" && k != "XDG_RUNTIME_DIR" {
            cmd.env(k, v);
        }
    }
    let (st, out, err) = run_cmd(&mut cmd, 120);
    assert!(st.success(), "the hosts failed ({st}):\n{err}\n{out}");
    let reports: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{err}")))
        .collect();
    assert_eq!(reports.len(), 2, "{out}\n{err}");
    let (ra, rb) = (&reports[0], &reports[1]);
    assert_eq!(ra["script"], a.display().to_string(), "{ra}");
    assert_eq!(rb["script"], b.display().to_string(), "{rb}");

    // a.py is granted: it reads.
    let result = &ra["call"]["result"];
    assert!(result.is_object(), "a.py got no result: {ra}");
    assert_ne!(
        result["isError"],
        Value::Bool(true),
        "a.py was refused: {ra}"
    );

    // b.py is another app: refused, under its own id.
    let result = &rb["call"]["result"];
    assert_eq!(result["isError"], Value::Bool(true), "b.py read: {rb}");
    let text = result.to_string();
    assert!(text.contains(&id(&b)), "refused under another id: {rb}");
    assert!(!text.contains(&id(&a)), "{rb}");
}

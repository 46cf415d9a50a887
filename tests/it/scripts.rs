//! The shell tests: integration files (systemd unit, activation file,
//! polkit policy, make install) and the self-contained session used by
//! `make run` and the source tests, with the broker running in it.

use crate::common;

use std::process::Command;

use common::run_cmd;

fn script(name: &str, secs: u64) {
    let path = format!("{}/tests/{name}", crate::common::root().display());
    let (st, out, err) = run_cmd(
        Command::new("bash")
            .arg(&path)
            .current_dir(crate::common::root())
            .env_remove("MAKEFLAGS")
            .env_remove("MAKELEVEL")
            // session-smoke.sh runs the broker in the session.
            .env("CONTEXTD_BIN", env!("CARGO_BIN_EXE_contextd"))
            .env("CONTEXTCTL_BIN", env!("CARGO_BIN_EXE_contextctl")),
        secs,
    );
    assert!(st.success(), "{name} failed:\n{out}\n{err}");
    let last = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        last.contains("passed") && last.contains(", 0 failed"),
        "{name}: {last}\n{out}\n{err}"
    );
}

#[test]
fn integration_files_are_valid_and_install() {
    script("integration-files.sh", 120);
}

#[test]
fn self_contained_session_starts_and_stops() {
    script("session-smoke.sh", 150);
}

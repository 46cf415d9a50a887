//! The daemon started as users start it, under a real systemd (issue 30,
//! item 3b): `tests/systemd-boot/boot-test.sh` boots a minimal Debian 12
//! (`scripts/boot-root.sh`, made once per machine) with `systemd-nspawn
//! --boot` on a throwaway overlay, installs the package there with `dpkg -i`,
//! logs a user in with `machinectl shell USER@.host` (a PAM login session:
//! logind, the user manager, the user bus of dbus-user-session) and checks
//! in that session (`tests/systemd-boot/user-checks.sh`) that `contextctl
//! status` activates `contextd.service` through systemd, that `systemctl
//! --user status` shows it active, that `systemd-analyze --user verify` is
//! clean, that the journal has its log, and that `systemctl --user stop`
//! ends it cleanly (SIGTERM, exit 0, inactive and not failed).
//!
//! No systemd ever runs on the host: the booted one is PID 1 of its own PID
//! namespace with its own root, and it is powered off at the end, also when
//! a check fails.

use crate::common::run_cmd;

use std::path::PathBuf;
use std::process::Command;

/// The first run on a machine also makes the root (debootstrap, about three
/// minutes; `make test` makes it before, in scripts/deps.sh); later runs
/// take seconds.
const DEADLINE_SECS: u64 = 900;

fn repo(path: &str) -> PathBuf {
    crate::common::root().join(path)
}

/// The package the test installs: `make deb` with the test's own binaries,
/// as the package test builds it (the same debian/ and scripts/deb.sh as a
/// release package), made once for the tests that install it.
fn package() -> PathBuf {
    crate::package::shared_package()
}

#[test]
fn systemd_user_manager_activates_and_stops_the_installed_daemon() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "skipped: booting a container with systemd-nspawn needs root \
             (CI runs as root)"
        );
        return;
    }
    let deb = package();
    let (st, stdout, stderr) = run_cmd(
        Command::new("bash")
            .arg(repo("tests/systemd-boot/boot-test.sh"))
            .arg(&deb)
            .env_remove("MAKEFLAGS")
            .env_remove("MAKELEVEL"),
        DEADLINE_SECS,
    );
    // The steps and their times, in the test's output.
    println!("{stdout}");
    assert!(
        st.success() && stdout.lines().any(|l| l == "boot-test: ok"),
        "the boot test failed ({st}):\n{stdout}\n{stderr}"
    );
}

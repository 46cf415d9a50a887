//! A private session bus for tests and benches: its own dbus-daemon with
//! no activatable services (nothing real is started behind a test's back)
//! that lets a monitor see everything. `tests/it/common` and
//! `benches/shells.rs` start theirs here.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Start a dbus-daemon listening at `DIR/bus` (its config written to
/// `DIR/bus.conf`): the daemon and its address.
pub fn spawn(dir: &Path) -> (Child, String) {
    spawn_with(dir, "")
}

/// [`spawn`] with more configuration (`<limit>` elements, say) inside
/// `<busconfig>`.
pub fn spawn_with(dir: &Path, extra: &str) -> (Child, String) {
    let config = dir.join("bus.conf");
    std::fs::write(
        &config,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  {}
</busconfig>"#,
            dir.display(),
            extra
        ),
    )
    .expect("write bus config");
    let mut child = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", config.display()))
        .arg("--nofork")
        .arg("--print-address=1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon must be installed (make deps)");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("bus address");
    let address = line.trim().to_owned();
    assert!(!address.is_empty(), "dbus-daemon printed no address");
    (child, address)
}

//! An app run as `flatpak run` runs it, for the attack tests of the
//! sandbox boundary.
//!
//! What makes a Flatpak app one, as far as the broker can tell, is what
//! the kernel and the bus say about its connection, and `flatpak run` sets
//! that up with two sandboxes (bubblewrap) that share a read-only
//! `/.flatpak-info`:
//! - `xdg-dbus-proxy`, in the first, connects to the session bus for the
//!   app, so the connection the broker sees is the proxy's and its
//!   `/proc/PID/root/.flatpak-info` names the app; with `--filter
//!   --talk=org.contextd.Broker1` it passes only what the app's manifest
//!   grants (here: talking to the broker);
//! - the app, in the second, sees only the proxy's socket as its session
//!   bus (`/run/flatpak/bus`), in a PID namespace of its own.
//!
//! The root of each is a new tmpfs with the host's `/usr` and `/etc`
//! read-only (Debian's merged `/usr` gives `/bin` and `/lib` as links), as
//! Flatpak's runtime gives the app its own `/usr`. Root works (CI runs as
//! root); bubblewrap and xdg-dbus-proxy are Debian packages.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::Bus;

/// A Flatpak app's sandbox and its bus proxy, torn down on drop.
pub struct Flatpak {
    pub app_id: String,
    dir: tempfile::TempDir,
    proxy: Child,
}

/// A bubblewrap sandbox's root: a fresh tmpfs with the host's programs
/// (`/usr`, `/etc` read-only, merged-`/usr` links), `/proc`, `/dev` and
/// a private `/tmp`: what a Flatpak runtime gives an app. (The rogue
/// broker of `tests/it/shells/rogue.rs` builds the same root itself: the
/// benches compile that module without this one.)
fn sandbox_root() -> Command {
    let mut c = Command::new("bwrap");
    c.args(["--ro-bind", "/usr", "/usr"])
        .args(["--symlink", "usr/bin", "/bin"])
        .args(["--symlink", "usr/sbin", "/sbin"])
        .args(["--symlink", "usr/lib", "/lib"])
        .args(["--symlink", "usr/lib64", "/lib64"])
        .args(["--ro-bind", "/etc", "/etc"])
        .args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    c
}

/// The part of a sandbox both the proxy's and the app's have: the root,
/// and the app's `.flatpak-info`.
fn sandbox(info: &Path) -> Command {
    let mut c = sandbox_root();
    c.arg("--ro-bind")
        .arg(info)
        .arg("/.flatpak-info")
        .arg("--die-with-parent");
    c
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

impl Flatpak {
    /// Start `app_id`'s bus proxy (talking to the broker only) on `bus`,
    /// and wait until its socket is there.
    pub fn start(bus: &Bus, app_id: &str) -> Flatpak {
        Flatpak::start_at(&bus.address, app_id)
    }

    /// [`Flatpak::start`] on the bus at `address`.
    pub fn start_at(address: &str, app_id: &str) -> Flatpak {
        let dir = tempfile::tempdir().expect("tempdir");
        let info = dir.path().join("flatpak-info");
        std::fs::write(
            &info,
            format!(
                "[Application]\nname={app_id}\nruntime=runtime/org.freedesktop.Platform/x86_64/24.08\n\n\
                 [Session Bus Policy]\norg.contextd.Broker1=talk\n"
            ),
        )
        .expect("write .flatpak-info");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("run dir");
        let bus_socket = socket_of(address);
        let proxy_socket = run.join("bus");
        let proxy = sandbox(&info)
            .arg("--bind")
            .arg(&run)
            .arg(&run)
            .arg("--bind")
            .arg(&bus_socket)
            .arg(&bus_socket)
            .args(["--", "xdg-dbus-proxy", address])
            .arg(&proxy_socket)
            .args(["--filter", "--talk=org.contextd.Broker1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start xdg-dbus-proxy in bwrap (apt-get install bubblewrap xdg-dbus-proxy)");
        let mut f = Flatpak {
            app_id: app_id.to_owned(),
            dir,
            proxy,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !proxy_socket.exists() {
            if let Ok(Some(st)) = f.proxy.try_wait() {
                panic!("xdg-dbus-proxy exited: {st}");
            }
            assert!(Instant::now() < deadline, "no proxy socket within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        f
    }

    /// `program` with `args` inside the app's sandbox, whose session bus
    /// is the proxy's socket only, with a clean environment.
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        self.command_with(program, args, &[])
    }

    /// [`Flatpak::command`] with host directories the app's manifest
    /// grants (`--filesystem=…`), each bound at its own path.
    pub fn command_with(&self, program: &str, args: &[&str], filesystems: &[&Path]) -> Command {
        let info = self.dir.path().join("flatpak-info");
        let mut c = sandbox(&info);
        for fs in filesystems {
            c.arg("--bind").arg(fs).arg(fs);
        }
        c.arg("--bind")
            .arg(self.dir.path().join("run/bus"))
            .arg("/run/flatpak/bus")
            .args(["--unshare-pid", "--clearenv"])
            .args(["--setenv", "PATH", "/usr/bin"])
            .args(["--setenv", "HOME", "/tmp"])
            .args([
                "--setenv",
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/run/flatpak/bus",
            ])
            .args(["--setenv", "FLATPAK_ID", &self.app_id])
            .arg("--")
            .arg(program)
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// Call `org.contextd.INTERFACE.METHOD` on the broker from inside the
    /// sandbox with `gdbus`, arguments in GVariant text form. `Ok(reply)`
    /// or `Err(error text)` (the D-Bus error name is in it).
    pub fn call(&self, method: &str, args: &[&str]) -> Result<String, String> {
        let mut a = vec![
            "call",
            "--session",
            "--timeout",
            "20",
            "--dest",
            "org.contextd.Broker1",
            "--object-path",
            "/org/contextd/Broker1",
            "--method",
            method,
        ];
        a.extend_from_slice(args);
        let out: Output = self
            .command("gdbus", &a)
            .output()
            .expect("run gdbus in the sandbox");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Flatpak {
    fn drop(&mut self) {
        let _ = self.proxy.kill();
        let _ = self.proxy.wait();
    }
}

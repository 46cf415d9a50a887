//! Reaching the daemon, and what to tell the user when it cannot be
//! reached: what is wrong and the one command that fixes it. Every
//! `contextctl` command reaches the daemon through here (D-Bus commands
//! through [`session_bus`], the MCP bridge and `token` through
//! [`start_by_name`]), so every one of them says the same thing, instead of
//! D-Bus's `org.freedesktop.DBus.Error.ServiceUnknown: The name
//! org.contextd.Broker1 was not provided by any .service files`.

use std::path::{Path, PathBuf};

use zbus::Connection;
use zbus::fdo::DBusProxy;
use zbus::names::BusName;

use crate::names::BUS_NAME;

/// The bus name of the systemd user manager on the session bus: owned when
/// systemd manages the session (and so can start `contextd.service`).
const SYSTEMD: &str = "org.freedesktop.systemd1";

/// Why contextd cannot be reached, each with its remedy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreachable {
    /// No session bus to find contextd on.
    #[error(
        "there is no D-Bus session bus: $DBUS_SESSION_BUS_ADDRESS is not set and there is no bus socket in {}. contextd lives on the session bus of a desktop session. {}",
        runtime.as_deref().map(|p| p.display().to_string()).unwrap_or_else(|| "$XDG_RUNTIME_DIR (not set either)".into()),
        if *systemd {
            "Your systemd user manager runs: start its bus with `systemctl --user start dbus.socket`, or run this in a terminal of your desktop session."
        } else {
            "Run this in a terminal of your desktop session, or start a shell with a session bus and contextd in it: `dbus-run-session -- sh -c 'contextd & exec \"$SHELL\"'`."
        }
    )]
    NoBus {
        runtime: Option<PathBuf>,
        systemd: bool,
    },
    /// A bus address that does not answer.
    #[error(
        "cannot reach the session bus at {address}: {error}. $DBUS_SESSION_BUS_ADDRESS may belong to a session that ended; run this in a terminal of your desktop session."
    )]
    BusUnreachable { address: String, error: String },
    /// Installed as a systemd user unit, not running, and this bus cannot
    /// start it.
    #[error(
        "contextd is not running, and the session bus cannot start it (no D-Bus activation file for {BUS_NAME}); its systemd user unit is installed ({}). Start it now and with every session: `systemctl --user enable --now contextd`",
        unit.display()
    )]
    UnitNotStarted { unit: PathBuf },
    /// The binary is there, nothing can start it for us.
    #[error(
        "contextd is not running, and the session bus cannot start it (no D-Bus activation file for {BUS_NAME}{}). Start it in this session: `{} &`",
        if *systemd { ", no contextd.service user unit" } else { ", no systemd user manager" },
        daemon.display()
    )]
    NotStarted { daemon: PathBuf, systemd: bool },
    /// Nothing of contextd on this machine but this client.
    #[error(
        "contextd is not installed: there is no D-Bus activation file for {BUS_NAME}, no contextd.service user unit and no contextd program beside contextctl or on $PATH. Install the package: `sudo apt install ./contextd_{version}_{arch}.deb` (or, from a source tree, `make install`)"
    )]
    NotInstalled { version: String, arch: String },
    /// Activation was tried and failed: the daemon started and exited, or
    /// systemd refused the unit.
    #[error(
        "contextd could not be started: {detail}. Its log says why: `journalctl --user -u contextd` (under systemd), else run `contextd -v` in a terminal"
    )]
    StartFailed { detail: String },
}

/// Connect to the session bus and make sure contextd is there or can be
/// started by it (D-Bus activation starts it at the first call).
pub async fn session_bus() -> Result<Connection, Unreachable> {
    let conn = connect_bus().await?;
    let Ok(dbus) = DBusProxy::new(&conn).await else {
        // A bus without the bus driver: let the first call tell.
        return Ok(conn);
    };
    if has_owner(&dbus, BUS_NAME).await {
        return Ok(conn);
    }
    let activatable = dbus
        .list_activatable_names()
        .await
        .map(|names| names.iter().any(|n| n.as_str() == BUS_NAME))
        // Unknown: let the call (and its error) decide.
        .unwrap_or(true);
    if activatable {
        return Ok(conn);
    }
    Err(diagnose(&dbus).await)
}

/// `StartServiceByName(org.contextd.Broker1)` on the session bus (the MCP
/// bridge and the admin socket's client, which talk to the daemon's
/// sockets, not over D-Bus): returns once the daemon owns its name.
pub async fn start_by_name(timeout: std::time::Duration) -> Result<(), Unreachable> {
    let conn = connect_bus().await?;
    let dbus = DBusProxy::new(&conn)
        .await
        .map_err(|e| Unreachable::StartFailed {
            detail: e.to_string(),
        })?;
    let name = zbus::names::WellKnownName::from_static_str_unchecked(BUS_NAME);
    // Already there (a daemon that is still starting: its name is taken
    // before its sockets are bound). Asked first because the bus daemon
    // answers StartServiceByName with ServiceUnknown for a name without an
    // activation file even while the name has an owner (a broker started
    // by hand, `make run`).
    if let Ok(true) = dbus
        .name_has_owner(zbus::names::BusName::from(name.clone()))
        .await
    {
        return Ok(());
    }
    let started = tokio::time::timeout(timeout, dbus.start_service_by_name(name, 0)).await;
    match started {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(zbus::fdo::Error::ServiceUnknown(_))) => Err(diagnose(&dbus).await),
        Ok(Err(e)) => Err(Unreachable::StartFailed {
            detail: zbus::DBusError::description(&e)
                .map(str::to_owned)
                .unwrap_or_else(|| e.to_string()),
        }),
        Err(_) => Err(Unreachable::StartFailed {
            detail: format!(
                "it did not take its bus name within {} s",
                timeout.as_secs()
            ),
        }),
    }
}

/// A D-Bus error from a call to the daemon that means it is not there or
/// could not be started (the name was activatable when `session_bus`
/// looked, or the daemon went away since).
pub(crate) fn from_call_error(name: &str, message: &str) -> Option<Unreachable> {
    if name.starts_with("org.freedesktop.DBus.Error.Spawn.")
        || name.starts_with("org.freedesktop.systemd1.")
        || name == "org.freedesktop.DBus.Error.ServiceUnknown"
        || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    {
        // The message says it ("Process org.contextd.Broker1 exited with
        // status 1"); the error's name is for programs.
        let detail = if message.is_empty() { name } else { message };
        return Some(Unreachable::StartFailed {
            detail: detail.to_owned(),
        });
    }
    None
}

async fn connect_bus() -> Result<Connection, Unreachable> {
    let Some(address) = crate::config::session_bus_address() else {
        let runtime = crate::config::user_runtime_dir();
        let systemd = runtime
            .as_deref()
            .is_some_and(|r| r.join("systemd/private").exists());
        return Err(Unreachable::NoBus { runtime, systemd });
    };
    zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .map_err(|e| Unreachable::BusUnreachable {
            address,
            error: e.to_string(),
        })
}

async fn has_owner(dbus: &DBusProxy<'_>, name: &'static str) -> bool {
    match BusName::try_from(name) {
        Ok(n) => dbus.name_has_owner(n).await.unwrap_or(false),
        Err(_) => false,
    }
}

/// contextd is neither running nor activatable: say what is installed and
/// what starts it.
async fn diagnose(dbus: &DBusProxy<'_>) -> Unreachable {
    let systemd = has_owner(dbus, SYSTEMD).await;
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if systemd && let Some(unit) = user_unit(&env) {
        return Unreachable::UnitNotStarted { unit };
    }
    if let Some(daemon) = daemon_program(env("PATH").as_deref()) {
        return Unreachable::NotStarted { daemon, systemd };
    }
    Unreachable::NotInstalled {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        arch: debian_arch().to_owned(),
    }
}

/// `contextd.service` in the systemd user unit search path (systemd.unit(5)).
fn user_unit(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let home = env("HOME").map(PathBuf::from);
    let mut dirs: Vec<PathBuf> = Vec::new();
    let xdg = |var: &str, rel: &str| {
        env(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home.as_ref().map(|h| h.join(rel)))
    };
    if let Some(c) = xdg("XDG_CONFIG_HOME", ".config") {
        dirs.push(c.join("systemd/user"));
    }
    dirs.push("/etc/systemd/user".into());
    if let Some(d) = xdg("XDG_DATA_HOME", ".local/share") {
        dirs.push(d.join("systemd/user"));
    }
    let data_dirs = env("XDG_DATA_DIRS")
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/usr/local/share:/usr/share".into());
    dirs.extend(
        data_dirs
            .split(':')
            .filter(|d| d.starts_with('/'))
            .map(|d| Path::new(d).join("systemd/user")),
    );
    dirs.extend(
        [
            "/usr/local/lib/systemd/user",
            "/usr/lib/systemd/user",
            "/lib/systemd/user",
        ]
        .map(PathBuf::from),
    );
    dirs.into_iter()
        .map(|d| d.join("contextd.service"))
        .find(|p| p.exists())
}

/// The daemon beside this program (an install puts both in one
/// directory), else on `$PATH`.
fn daemon_program(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("contextd")));
    beside
        .into_iter()
        .chain(
            path.into_iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join("contextd")),
        )
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Debian's name for this machine's architecture (the package file's).
fn debian_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "i386",
        "arm" => "armhf",
        "riscv64" => "riscv64",
        "s390x" => "s390x",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_names_the_command_that_fixes_it() {
        let cases = [
            (
                Unreachable::UnitNotStarted {
                    unit: "/usr/lib/systemd/user/contextd.service".into(),
                },
                "systemctl --user enable --now contextd",
            ),
            (
                Unreachable::NotStarted {
                    daemon: "/usr/bin/contextd".into(),
                    systemd: false,
                },
                "`/usr/bin/contextd &`",
            ),
            (
                Unreachable::NotInstalled {
                    version: "0.1.0".into(),
                    arch: "amd64".into(),
                },
                "sudo apt install ./contextd_0.1.0_amd64.deb",
            ),
            (
                Unreachable::NoBus {
                    runtime: Some("/run/user/1000".into()),
                    systemd: true,
                },
                "systemctl --user start dbus.socket",
            ),
        ];
        for (e, fix) in cases {
            assert!(e.to_string().contains(fix), "{e}");
        }
    }
}

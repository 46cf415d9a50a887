//! The clients: `contextctl`'s commands ([`ctl`]), the stdio MCP bridge
//! ([`bridge`]), the admin socket's client ([`admin`]) and the generated
//! D-Bus proxies ([`proxy`]) with the conversion of what they receive back
//! to JSON ([`json`]), and the reader of a page of provided entries
//! ([`page`]). Client code only: the daemon never runs it.

pub mod admin;
pub mod bridge;
pub mod ctl;
pub mod json;
pub mod page;
pub mod privacy;
pub mod proxy;
pub mod reach;

use std::path::PathBuf;

/// `$XDG_RUNTIME_DIR/contextd/NAME`, as clients find the daemon's sockets.
pub fn runtime_path(name: &str) -> Result<PathBuf, NoRuntimeDir> {
    crate::config::Paths::from_env()
        .ok()
        .and_then(|p| p.runtime_dir)
        .map(|d| d.join(name))
        .ok_or_else(NoRuntimeDir::new)
}

/// Without a runtime directory there is no private place for the sockets:
/// there is no login session (`config::user_runtime_dir` says where it is
/// looked for). The message says what to add to an MCP host's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "no user session found: $XDG_RUNTIME_DIR is not set and /run/user/{uid} does not exist (or is not yours with mode 0700), so there is no private place for contextd's sockets. Log in to a desktop session, or pass the session in this server's \"env\" in the MCP host's config: \"env\": {{\"XDG_RUNTIME_DIR\": \"/run/user/{uid}\", \"DBUS_SESSION_BUS_ADDRESS\": \"unix:path=/run/user/{uid}/bus\"}}"
)]
pub struct NoRuntimeDir {
    uid: u32,
}

impl NoRuntimeDir {
    fn new() -> Self {
        // SAFETY: getuid(2) has no failure mode and touches no memory.
        NoRuntimeDir {
            uid: unsafe { libc::getuid() },
        }
    }
}

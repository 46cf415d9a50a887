//! The clients: `contextctl`'s commands ([`ctl`]), the stdio MCP bridge
//! ([`bridge`]), the admin socket's client ([`admin`]) and the generated
//! D-Bus proxies ([`proxy`]) with the conversion of what they receive back
//! to JSON ([`json`]). Client code only: the daemon never runs it.

pub mod admin;
pub mod bridge;
pub mod ctl;
pub mod json;
pub mod proxy;

use std::path::PathBuf;

/// `$XDG_RUNTIME_DIR/contextd/NAME`, as clients find the daemon's sockets.
pub fn runtime_path(name: &str) -> Result<PathBuf, NoRuntimeDir> {
    crate::config::Paths::from_env()
        .ok()
        .and_then(|p| p.runtime_dir)
        .map(|d| d.join(name))
        .ok_or(NoRuntimeDir)
}

/// Without `$XDG_RUNTIME_DIR` there is no private place for the sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "$XDG_RUNTIME_DIR is not set, so there is no private place for the MCP socket; `contextctl mcp` needs it"
)]
pub struct NoRuntimeDir;

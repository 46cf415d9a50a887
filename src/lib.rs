//! contextd: the desktop context broker.
//!
//! Data flows one way: `sources` → `core` → publishers (`dbus`, `mcp`).
//! See DESIGN.md for the rules this crate keeps.

pub mod client;
pub mod config;
pub mod core;
pub mod daemon;
pub mod dashboard;
pub mod dbus;
pub mod desktop_entry;
#[cfg(test)]
mod fuzz;
pub mod hardening;
pub mod httpd;
pub mod logging;
pub mod mcp;
pub mod model;
pub mod names;
pub mod shutdown;
pub mod sources;
pub mod store;

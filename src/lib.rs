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
// The fuzz targets are tests of this crate, kept out of src/: as a module
// of the library's test build they reach the `pub(crate)` parsers without
// widening the API, and no other build compiles them.
#[cfg(test)]
#[path = "../fuzz/mod.rs"]
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

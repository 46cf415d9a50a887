//! contextd: the desktop context broker.
//!
//! Data flows one way: `sources` → `core` → publishers (`dbus`, `mcp`,
//! `dashboard`). See DESIGN.md for the rules this crate keeps and
//! ARCHITECTURE.md for how they are laid out.
//!
//! # What the library exports
//!
//! The crate is a library only so that its two binaries, its benches and
//! its integration tests can share code; it is not a stable API. Everything
//! is `pub(crate)` (the `unreachable_pub` lint keeps it so) except:
//!
//! - [`daemon`], [`config`], [`hardening`], [`logging`]: what `contextd`
//!   needs to run the broker;
//! - [`client`]: `contextctl` (its commands, the MCP stdio bridge, the
//!   generated D-Bus proxies and the JSON forms it prints), which apps and
//!   tests also use as a typed client;
//! - [`model`]: the categories and the window, as clients name them;
//! - [`names`]: the bus name, object path and socket names clients use;
//! - [`internals`]: the few items the integration tests and benches
//!   compare against or drive directly (among them `internals::store`:
//!   opening the encrypted database, for the tests that check what is on
//!   disk and the benches that fill the timeline), and the binaries' command lines
//!   (`internals::cli`, shared with the man page and completion generator)
//!   (hidden from the docs).
//!
//! The layers are modules of one crate; `tests/layering.rs` checks that
//! publishers import neither the store nor each other.

#![warn(unreachable_pub)]

pub(crate) mod cli;
pub mod client;
pub mod config;
pub(crate) mod core;
pub mod daemon;
pub(crate) mod dashboard;
pub(crate) mod dbus;
pub(crate) mod desktop_entry;
// The fuzz targets are tests of this crate, kept out of src/: as a module
// of the library's test build they reach the `pub(crate)` parsers without
// widening the API, and no other build compiles them.
#[cfg(test)]
#[path = "../fuzz/mod.rs"]
mod fuzz;
pub mod hardening;
pub(crate) mod httpd;
pub(crate) mod identity;
pub mod logging;
pub(crate) mod mcp;
pub(crate) mod memory;
pub mod model;
pub mod names;
pub(crate) mod shutdown;
pub(crate) mod sources;
pub(crate) mod store;

/// Items below the public API that integration tests and benches reach
/// directly: a source driven without a daemon, the limits and constants a
/// test compares against, the timeline's event types a bench writes. Not an
/// API: it moves with the code.
#[doc(hidden)]
pub mod internals {
    pub use crate::core::SourceEvent;
    pub use crate::core::history::{HistoryEvent, HistoryKind, HistoryOp, HistorySettings};
    pub use crate::core::state::MAX_TEXT_CHARS;
    pub use crate::identity::{is_system_executable, resolve_pid};
    /// The daemon's counting allocator (src/bin/contextd.rs).
    pub use crate::memory::Counting;
    pub use crate::model::privacy::PrivacySettings;
    /// The vocabulary of provided context, checked against its JSON-LD.
    pub mod vocabulary {
        pub use crate::core::vocabulary::{check_entry, seed_kinds};
    }
    pub use crate::dbus::context1::VERSION as CONTEXT1_VERSION;
    pub use crate::httpd::{FIRST_HEAD_TIMEOUT, HEADER_TIMEOUT};
    pub use crate::mcp::resources::FIXED as MCP_FIXED_RESOURCES;
    pub use crate::mcp::tools::catalog as mcp_tool_catalog;
    /// What the conformance fixtures' daemon (`contextd-conformance`)
    /// serves beside contextd's own MCP catalog.
    pub mod mcp_extension {
        pub use crate::mcp::extension::{Answer, Extension, install};
    }
    pub use crate::sources::wayland::run_at as run_wayland_source_at;
    pub use crate::sources::{Backoff, SourceContext};
    /// The encrypted database, opened by the tests that check what is on
    /// disk and by the benches that fill and read the timeline.
    pub mod store {
        pub use crate::store::db::{Db, DbError};
        pub use crate::store::key::{DbKey, KeyError, KeySource};
        /// The timeline's store, driven directly by the history bench.
        pub mod history {
            pub use crate::store::history::{History, Query, parse_cursor};
        }
    }
    /// The command lines of both binaries, which also render the man pages
    /// and completion scripts (`contextctl generate-files`,
    /// `contextctl completions`).
    pub mod cli {
        #[cfg(feature = "replay")]
        pub use crate::cli::ReplayArgs;
        pub use crate::cli::{
            Command, ConsentCommand, ContextctlArgs, ContextdArgs, KeyCommand, PrivacyCommand,
            ProvidersCommand, ReadersCommand, RecoveryCommand, TokenCommand, completions,
            generate_files,
        };
    }
}

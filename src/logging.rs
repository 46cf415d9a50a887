//! Logs go to stderr, or to journald when started by systemd (it sets
//! `JOURNAL_STREAM`), never to stdout: stdout belongs to `contextctl mcp`.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

/// `verbosity`: 0 = info, 1 = debug, 2+ = trace. `RUST_LOG` wins when set.
pub fn init(verbosity: u8, default_quiet: bool) {
    let level = match (verbosity, default_quiet) {
        (0, true) => "warn",
        (0, false) => "info",
        (1, _) => "debug",
        _ => "trace",
    };
    // wayland-backend logs a lost compositor connection as an error
    // ("Io error: Broken pipe") at every compositor restart or logout; the
    // Wayland source says the same with its context (and is marked
    // unavailable), so the backend's own lines are off unless asked for.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!("{level},zbus=warn,sqlx=warn,wayland_backend=off"))
    });
    let registry = tracing_subscriber::registry().with(filter);
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(journald) = tracing_journald::layer()
    {
        let _ = registry.with(journald).try_init();
        return;
    }
    let _ = registry
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // Colours only on a terminal: a log file or a pipe (the
                // tests' and `make soak`'s logs, a user's `2> FILE`) gets
                // plain `key=value` text that grep and readers can match.
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_target(false),
        )
        .try_init();
}

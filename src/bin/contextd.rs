//! The broker daemon. Thin: parse arguments, set up logging, run.

use std::process::ExitCode;

use clap::Parser;
use contextd::config::{Config, ConfigFile, McpHttpConfig, Paths};
use contextd::daemon::{self, DaemonError};
use contextd::internals::Counting;
use contextd::internals::cli::ContextdArgs as Args;

/// glibc's malloc, counting the bytes the broker holds, which the daemon
/// logs as its heap in use (`contextd::memory`: glibc's own figure counts
/// its per-thread caches too).
#[global_allocator]
static ALLOC: Counting = Counting::new();

/// Eight malloc arenas, one for each thread that allocates while it works
/// (the main thread, the two workers of the main runtime and of the MCP
/// lane, the Wayland, PipeWire and SQLite threads), whatever the machine's
/// core count (glibc's default is eight per core). Two were tried, to keep
/// each thread's freed memory reusable by the others: the two MCP workers
/// then often shared one arena and queued on its lock, and how often
/// depended on how threads happened to meet their arenas at start, so the
/// same build served 47k or 72k stateless tool calls per second from one
/// run to the next (`make bench`, mcp). With eight, 71k-75k in every run.
/// RSS with 302 windows (wayland bench, same hour): 18.8 MB with two or
/// four arenas, 19.2 MB with eight, 19.4 MB with sixteen; the anonymous
/// part is 3.6-4.2 MB, the rest is the binary and libraries.
/// Set before any thread starts. An explicit `glibc.malloc.arena_max` in
/// `GLIBC_TUNABLES` wins (mallopt would override it), so that the choice
/// can be measured again.
fn bounded_malloc_arenas() {
    if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.arena_max")) {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt(3) changes an allocator parameter; called before
    // any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 8);
    }
}

pub(crate) fn main() -> ExitCode {
    ALLOC.publish();
    // Before the key is read or a thread starts (contextd::hardening).
    let hardened = contextd::hardening::protect();
    bounded_malloc_arenas();
    let args = Args::parse();
    contextd::logging::init(args.verbose, false);
    if let Err(e) = hardened {
        tracing::warn!(error = %e, "running without core-dump protection");
    }
    let paths = match Paths::from_env() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("contextd: {e}");
            return ExitCode::from(1);
        }
    };
    let file = match ConfigFile::load(&args.config.clone().unwrap_or_else(|| paths.config_file())) {
        Ok(mut f) => {
            if let Some(addr) = args.http {
                match f.mcp.http.as_mut() {
                    Some(h) => h.listen = addr,
                    None => f.mcp.http = Some(McpHttpConfig::listen_on(addr)),
                }
            }
            f
        }
        Err(e) => {
            eprintln!("contextd: {e}");
            return ExitCode::from(1);
        }
    };
    let config = Config {
        paths,
        file,
        #[cfg(feature = "replay")]
        replay: args.replay,
        replace: args.replace,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("contextd: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(async {
        // Handlers first: a SIGTERM right after the name is taken (systemd
        // starts and stops by it) must stop us cleanly, not kill us.
        let stop = shutdown_signal();
        daemon::run(config, stop).await
    });
    // Do not wait for blocking work (a stuck /proc read) at exit.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    let code: u8 = match result {
        Ok(exit @ (daemon::Exit::Shutdown | daemon::Exit::BusGone)) => {
            tracing::info!(?exit, "stopped");
            0
        }
        // Unexpected (the name is never given away): non-zero, so that
        // systemd (Restart=on-failure) starts the broker again.
        Ok(daemon::Exit::NameLost) => {
            eprintln!(
                "contextd: lost {} to another connection; exiting",
                contextd::names::BUS_NAME
            );
            1
        }
        Err(e @ DaemonError::NameTaken { .. }) => {
            eprintln!("contextd: {e}");
            1
        }
        Err(e) => {
            eprintln!("contextd: {e}");
            1
        }
    };
    if daemon::work_left_behind() {
        // A statement may still run on a SQLite worker thread: the exit
        // handlers (SQLCipher's frees its memory) must not run under it.
        // What was committed is on disk; an unfinished transaction is
        // rolled back by the next open, as after a crash.
        tracing::warn!("work was still running at exit: ending without exit handlers");
        use std::io::Write;
        let _ = std::io::stderr().flush();
        // SAFETY: _exit(2) ends the process at once; nothing after it runs.
        unsafe { libc::_exit(i32::from(code)) };
    }
    ExitCode::from(code)
}

/// SIGTERM or SIGINT. The handlers are installed when this is called, not
/// when the future is first polled.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = handlers else {
            tracing::error!("cannot install signal handlers; stop with SIGKILL");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
    }
}

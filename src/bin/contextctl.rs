//! The command-line client. It is an app like any other: the broker
//! identifies it from its process and applies the same consent rules.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use contextd::ctl;

/// Look at what the desktop context broker knows, as the user sees it.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Print JSON instead of tables (for scripts).
    #[arg(long, global = true)]
    json: bool,
    /// More log detail on stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sources and their health, the active window, counts (default).
    Status,
    /// The open windows.
    Windows,
    /// Who plays audio or video, who uses the microphone, a camera or the
    /// screen now, and who did in the last 24 hours.
    Media,
    /// The sources and their health.
    Sources,
    /// The categories of context and whether contextctl may read each.
    Categories,
    /// Print changes as they happen (Ctrl-C to stop).
    Watch {
        /// Categories to watch (default: every one contextctl may read).
        categories: Vec<String>,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    contextd::logging::init(args.verbose, true);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("contextctl: {e}");
            return ExitCode::from(1);
        }
    };
    let out = ctl::Output { json: args.json };
    let result = rt.block_on(async {
        let conn = ctl::connect().await?;
        match args.command.unwrap_or(Command::Status) {
            Command::Status => ctl::status(&conn, out).await,
            Command::Windows => ctl::windows(&conn, out).await,
            Command::Media => ctl::media(&conn, out).await,
            Command::Sources => ctl::sources(&conn, out).await,
            Command::Categories => ctl::categories(&conn, out).await,
            Command::Watch { categories } => ctl::watch(&conn, out, categories).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("contextctl: {e}");
            ExitCode::from(1)
        }
    }
}

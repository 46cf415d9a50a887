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
    /// The sources and their health.
    Sources,
    /// The categories of context and whether contextctl may read each.
    Categories,
    /// Print changes as they happen (Ctrl-C to stop).
    Watch {
        /// Categories to watch (default: every one contextctl may read).
        categories: Vec<String>,
    },
    /// The MCP stdio server, for MCP hosts (Claude Desktop, Claude Code, ...):
    /// relays stdin/stdout to contextd, starting it if needed. The host that
    /// runs this command is the app asked for consent.
    Mcp,
    /// Bearer tokens for MCP over HTTP.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a token and print it (once: only its hash is kept). Grant it
    /// context as app `token:NAME` in policy.toml.
    Create { name: String },
    /// The tokens and when they were made.
    List,
    /// Revoke a token; its open sessions end at once.
    Revoke { name: String },
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
        let command = args.command.unwrap_or(Command::Status);
        let command = match command {
            Command::Mcp => {
                return contextd::mcp::bridge::run()
                    .await
                    .map_err(|e| ctl::CtlError::Call(e.to_string()));
            }
            Command::Token { command } => {
                let req = match command {
                    TokenCommand::Create { name } => {
                        contextd::mcp::admin::Request::TokenCreate { name }
                    }
                    TokenCommand::List => contextd::mcp::admin::Request::TokenList,
                    TokenCommand::Revoke { name } => {
                        contextd::mcp::admin::Request::TokenRevoke { name }
                    }
                };
                return contextd::mcp::admin::command(&req, args.json)
                    .await
                    .map_err(ctl::CtlError::Call);
            }
            other => other,
        };
        let conn = ctl::connect().await?;
        match command {
            Command::Status => ctl::status(&conn, out).await,
            Command::Windows => ctl::windows(&conn, out).await,
            Command::Sources => ctl::sources(&conn, out).await,
            Command::Categories => ctl::categories(&conn, out).await,
            Command::Watch { categories } => ctl::watch(&conn, out, categories).await,
            Command::Mcp | Command::Token { .. } => Ok(()),
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

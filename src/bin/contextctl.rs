//! The command-line client. It is an app like any other: the broker
//! identifies it from its process and applies the same consent rules.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use contextd::client::ctl;

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
    /// The timeline: what happened, oldest first.
    History {
        /// How far back, e.g. 30m, 2h, 7d.
        #[arg(long, default_value = "1h")]
        since: String,
        /// Only this app id.
        #[arg(long)]
        app: Option<String>,
    },
    /// Time per app, with a bar each.
    Summary {
        /// Since midnight (local time) instead of the last 24 hours.
        #[arg(long)]
        today: bool,
    },
    /// Delete history: the last DURATION, one app, or everything.
    Forget {
        /// e.g. 1h
        #[arg(long, conflicts_with = "all")]
        last: Option<String>,
        #[arg(long, conflicts_with = "all")]
        app: Option<String>,
        #[arg(long)]
        all: bool,
    },
    /// Decide which apps may see what (needs polkit authorisation).
    #[command(subcommand)]
    Consent(ConsentCommand),
    /// Which apps publish context about themselves (the open document, the
    /// current task, ...), which kinds and since when; refuse or allow an
    /// app's publications (needs polkit authorisation).
    Providers {
        #[command(subcommand)]
        command: Option<ProvidersCommand>,
    },
    /// Publish context as contextctl (org.contextd.Provider1), e.g.
    /// `contextctl publish document '{"name":"notes.txt"}'`: the entry
    /// stays while this runs and is retracted on Ctrl-C or SIGTERM. Apps
    /// publish for themselves; this is for scripts and trying it out.
    Publish {
        /// document, selection, task, location, event, person or x-NAME.
        kind: String,
        /// A JSON object in the vocabulary of KIND.
        #[arg(value_name = "JSON")]
        data: String,
    },
    /// Open the privacy dashboard: prints a one-time link (and opens it in
    /// your browser when there is a desktop, through a private file in
    /// $XDG_RUNTIME_DIR/contextd, never on a command line).
    Dashboard {
        /// Only print the link.
        #[arg(long)]
        no_open: bool,
    },
    /// Who is reading now: live D-Bus subscriptions and MCP sessions; end
    /// one (needs polkit authorisation).
    Readers {
        #[command(subcommand)]
        command: Option<ReadersCommand>,
    },
    /// Who accessed what, and what the broker answered.
    Audit {
        /// Only this app id.
        #[arg(long)]
        app: Option<String>,
        /// How far back, e.g. 30m, 2h, 7d (default 24h).
        #[arg(long, default_value = "24h")]
        since: String,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: u32,
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
enum ConsentCommand {
    /// Apps that asked, and every decision (yours and policy.toml's).
    List,
    /// Allow APP to read CATEGORY.
    Grant {
        app: String,
        category: String,
        /// Only for this long, e.g. 30m, 8h, 7d.
        #[arg(long = "for", value_name = "DURATION")]
        duration: Option<String>,
    },
    /// Refuse APP the CATEGORY (no prompt either).
    Deny { app: String, category: String },
    /// Remove your decision: APP will be asked again.
    Revoke { app: String, category: String },
    /// Forget everything about APP.
    Forget { app: String },
    /// Stop handing out any context, until resume.
    Pause,
    /// Hand out context again.
    Resume,
}

#[derive(Debug, Subcommand)]
enum ProvidersCommand {
    /// Who publishes which kinds now, and who is refused (the default).
    List,
    /// Refuse APP's publications: what it published goes at once, and
    /// readers see nothing from it until you allow it again.
    Refuse { app: String },
    /// Let APP publish again.
    Allow { app: String },
}

#[derive(Debug, Subcommand)]
enum ReadersCommand {
    /// Who reads now (the default).
    List,
    /// End reader ID (from the list) now, without changing any decision.
    End { id: u64 },
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
                return contextd::client::bridge::run()
                    .await
                    .map_err(|e| ctl::CtlError::Call(e.to_string()));
            }
            Command::Token { command } => {
                let req = match command {
                    TokenCommand::Create { name } => {
                        contextd::client::admin::Request::TokenCreate { name }
                    }
                    TokenCommand::List => contextd::client::admin::Request::TokenList,
                    TokenCommand::Revoke { name } => {
                        contextd::client::admin::Request::TokenRevoke { name }
                    }
                };
                return contextd::client::admin::command(&req, args.json)
                    .await
                    .map_err(ctl::CtlError::Call);
            }
            other => other,
        };
        let conn = ctl::connect().await?;
        match command {
            Command::Status => ctl::status(&conn, out).await,
            Command::Windows => ctl::windows(&conn, out).await,
            Command::Media => ctl::media(&conn, out).await,
            Command::Sources => ctl::sources(&conn, out).await,
            Command::Categories => ctl::categories(&conn, out).await,
            Command::Watch { categories } => ctl::watch(&conn, out, categories).await,
            Command::Consent(c) => match c {
                ConsentCommand::List => ctl::consent_list(&conn, out).await,
                ConsentCommand::Grant {
                    app,
                    category,
                    duration,
                } => ctl::consent_set(&conn, &app, &category, "allow", duration.as_deref()).await,
                ConsentCommand::Deny { app, category } => {
                    ctl::consent_set(&conn, &app, &category, "deny", None).await
                }
                ConsentCommand::Revoke { app, category } => {
                    ctl::consent_revoke(&conn, &app, &category).await
                }
                ConsentCommand::Forget { app } => ctl::consent_forget(&conn, &app).await,
                ConsentCommand::Pause => ctl::consent_pause(&conn, true).await,
                ConsentCommand::Resume => ctl::consent_pause(&conn, false).await,
            },
            Command::History { since, app } => {
                ctl::history(&conn, out, &since, app.as_deref()).await
            }
            Command::Summary { today } => ctl::summary(&conn, out, today).await,
            Command::Forget { last, app, all } => {
                ctl::forget(&conn, last.as_deref(), app.as_deref(), all).await
            }
            Command::Publish { kind, data } => ctl::publish(&conn, &kind, &data).await,
            Command::Providers { command } => match command.unwrap_or(ProvidersCommand::List) {
                ProvidersCommand::List => ctl::providers(&conn, out).await,
                ProvidersCommand::Refuse { app } => ctl::set_publishing(&conn, &app, false).await,
                ProvidersCommand::Allow { app } => ctl::set_publishing(&conn, &app, true).await,
            },
            Command::Dashboard { no_open } => ctl::dashboard(&conn, no_open).await,
            Command::Readers { command } => match command.unwrap_or(ReadersCommand::List) {
                ReadersCommand::List => ctl::readers(&conn, out).await,
                ReadersCommand::End { id } => ctl::end_reader(&conn, id).await,
            },
            Command::Audit { app, since, limit } => {
                ctl::audit(&conn, out, app.as_deref(), &since, limit).await
            }
            Command::Mcp | Command::Token { .. } => Ok(()),
        }
    });
    // `contextctl mcp` reads stdin on a blocking thread whose read cannot
    // be cancelled: waiting for it would keep the bridge alive after the
    // daemon closed the session (the host would never learn it ended).
    rt.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("contextctl: {e}");
            ExitCode::from(1)
        }
    }
}

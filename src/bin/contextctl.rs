//! The command-line client. It is an app like any other: the broker
//! identifies it from its process and applies the same consent rules.

use std::process::ExitCode;

use clap::Parser;
use contextd::client::ctl;
use contextd::internals::cli::{
    Command, ConsentCommand, ContextctlArgs as Args, KeyCommand, ProvidersCommand, ReadersCommand,
    RecoveryCommand, TokenCommand,
};

fn main() -> ExitCode {
    let args = Args::parse();
    // Files and scripts: no runtime, no bus, no logging needed.
    match &args.command {
        Some(Command::Completions { shell }) => {
            contextd::internals::cli::completions(*shell, &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Some(Command::Privacy { command }) => {
            let command = command
                .clone()
                .unwrap_or(contextd::internals::cli::PrivacyCommand::List);
            return match contextd::client::privacy::command(command, args.json) {
                Ok(out) => {
                    println!("{}", out.trim_end());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("contextctl privacy: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Some(Command::GenerateFiles { dir }) => {
            return match contextd::internals::cli::generate_files(dir) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("contextctl: cannot write into {}: {e}", dir.display());
                    ExitCode::from(1)
                }
            };
        }
        _ => {}
    }
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
                    TokenCommand::Create { name, expires } => {
                        let expires = match expires {
                            Some(when) => Some(
                                contextd::client::admin::expiry(&when, chrono::Utc::now())
                                    .map_err(ctl::CtlError::Call)?,
                            ),
                            None => None,
                        };
                        contextd::client::admin::Request::TokenCreate { name, expires }
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
            Command::Export { history } => ctl::export(&conn, history).await,
            Command::Import { file } => ctl::import(&conn, out, &file).await,
            Command::Key { command } => match command {
                KeyCommand::Rotate => ctl::key_rotate(&conn).await,
            },
            Command::Recovery { command } => match command {
                RecoveryCommand::Dismiss => ctl::recovery_dismiss(&conn).await,
            },
            Command::Audit { app, since, limit } => {
                ctl::audit(&conn, out, app.as_deref(), &since, limit).await
            }
            Command::Mcp
            | Command::Token { .. }
            | Command::Completions { .. }
            | Command::Privacy { .. }
            | Command::GenerateFiles { .. } => Ok(()),
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

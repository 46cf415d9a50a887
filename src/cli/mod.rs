//! The command lines of `contextd` and `contextctl` (clap definitions),
//! here rather than in the binaries so that the man pages and completion
//! scripts are generated from the very definitions that parse the
//! arguments ([`man`], [`completions`]): a new option cannot be missing
//! from them. Not an API: the binaries reach it through
//! `contextd::internals::cli`.

pub(crate) mod man;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser, Subcommand};

/// The desktop context broker: knows what you are doing and tells only
/// the apps you allowed.
///
/// contextd is a per-user daemon on the D-Bus session bus
/// (org.contextd.Broker1). It watches the desktop (the open and focused
/// windows, who plays audio or uses the microphone, a camera or the screen,
/// whether the session is idle or locked, battery, network, notifications,
/// and what apps publish about themselves: the open document, the
/// selection, the current task) and hands that context only to the apps
/// the user allowed, over D-Bus and over the Model Context Protocol (MCP:
/// `contextctl mcp` for stdio hosts, loopback HTTP with a bearer token).
///
/// The first time an app asks for a category of context, contextd asks the
/// user (through the GNOME Shell extension or another consent agent, else a
/// notification); only the user's answer is stored, and a prompt that fails
/// or times out is a refusal for that call. Decisions, the timeline and the
/// MCP tokens live in an encrypted SQLite (SQLCipher) database; its key is
/// kept in the Secret Service when one runs, else in a key file only the
/// user can read.
///
/// contextd is normally started by the systemd user unit contextd.service
/// or by D-Bus activation when a client first calls it; run it by hand in a
/// session without systemd. It stops cleanly on SIGTERM or SIGINT.
#[derive(Debug, Parser)]
#[command(name = "contextd", version)]
pub struct ContextdArgs {
    /// Take the bus name over from a running instance.
    #[arg(long)]
    pub replace: bool,
    /// `--replay`, `--fake-clock`: tests and benchmarks only.
    #[cfg(feature = "replay")]
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Use this config file instead of $XDG_CONFIG_HOME/contextd/config.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve MCP over HTTP on this loopback address (e.g. 127.0.0.1:8765),
    /// as `[mcp.http] listen` in config.toml does.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// More log detail (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// The scripted world of tests and benchmarks: in a build with the cargo
/// feature `replay` only (`make test`, `make bench`), so that a release
/// build has neither option nor the code behind them.
#[cfg(feature = "replay")]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReplayArgs {
    /// Feed scripted events from a JSON-lines file or FIFO instead of the
    /// real sources (tests, benchmarks).
    #[arg(long = "replay", value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// With --replay: a clock that starts at this RFC 3339 time and moves
    /// only when the script says (tests of the timeline).
    #[arg(long, value_name = "TIME", requires = "script")]
    pub fake_clock: Option<chrono::DateTime<chrono::Utc>>,
}

/// Look at what the desktop context broker knows, as the user sees it.
///
/// contextctl shows what contextd, the desktop context broker, knows about
/// the session (windows, media, idle and lock state, battery, network,
/// notifications, what apps publish about themselves, the timeline) and
/// lets the user decide which app may read which category of it. Without a
/// command it prints the status.
///
/// contextctl is an app like any other: the broker identifies it from its
/// process, never from what it claims, and applies the same consent rules
/// (a category contextctl was not granted is shown as not allowed).
/// Commands that change decisions (consent, providers, readers) need polkit
/// authorisation.
///
/// It talks to contextd on the D-Bus session bus (org.contextd.Broker1),
/// which starts contextd when it is installed and not running. When
/// contextd is neither running nor installed, or there is no session bus,
/// every command says so and names the command that fixes it.
#[derive(Debug, Parser)]
#[command(name = "contextctl", version)]
pub struct ContextctlArgs {
    /// Print JSON instead of tables (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    /// More log detail on stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
        /// The last DURATION, e.g. 1h.
        #[arg(long, value_name = "DURATION", conflicts_with = "all")]
        last: Option<String>,
        /// Only what APP did.
        #[arg(long, conflicts_with = "all")]
        app: Option<String>,
        /// Everything.
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
    /// When the database could not be used (see `contextctl status`): end
    /// the degraded state by accepting the new database (needs polkit
    /// authorisation).
    Recovery {
        #[command(subcommand)]
        command: RecoveryCommand,
    },
    /// Write your decisions, token names (never their secrets), refused
    /// publishers and, with --history, the timeline to stdout as JSON Lines
    /// (needs polkit authorisation), e.g. `contextctl export --history >
    /// contextd-backup.jsonl`.
    Export {
        /// Include the timeline.
        #[arg(long)]
        history: bool,
    },
    /// Merge a file written by `contextctl export` into what is here: the
    /// newer decision wins, a deny beats an allow on a tie; a bad line
    /// changes nothing (needs polkit authorisation).
    Import {
        /// The export file.
        file: PathBuf,
    },
    /// The database key (needs polkit authorisation).
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// The MCP stdio server, for MCP hosts (Claude Desktop, Claude Code, ...):
    /// relays stdin/stdout to contextd, starting it if needed. The host that
    /// runs this command is the app asked for consent.
    Mcp,
    /// What is never shared, whatever an app was granted: private browser
    /// windows, password managers, one-time codes and card numbers (built
    /// in), and your own rules. `add app PATTERN` never shares an app
    /// whose id or notification name contains PATTERN; `add title
    /// PATTERN` never shares window titles that contain it. Your rules
    /// are kept in privacy.toml beside config.toml (which may hold a
    /// [privacy] table too); a running contextd applies a change at once.
    /// Needs no daemon.
    Privacy {
        #[command(subcommand)]
        command: Option<PrivacyCommand>,
    },
    /// Bearer tokens for MCP over HTTP.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Print the completion script for SHELL, for installs that did not
    /// bring one, e.g. `contextctl completions bash >
    /// ~/.local/share/bash-completion/completions/contextctl`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages and completion scripts into DIR (for `make
    /// install` and packagers; needs no daemon).
    #[command(hide = true)]
    GenerateFiles {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// `contextctl privacy`.
#[derive(Debug, Clone, Subcommand)]
pub enum PrivacyCommand {
    /// The built-in lists and your rules.
    List,
    /// Never share an app, or window titles that contain PATTERN.
    Add {
        /// `app` or `title`.
        what: RuleKind,
        /// Matched case-insensitively where the app id, notification name
        /// or title contains it.
        pattern: String,
    },
    /// Remove one of your rules (from privacy.toml).
    Remove {
        /// `app` or `title`.
        what: RuleKind,
        pattern: String,
    },
}

/// Which of the user's never-share lists a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuleKind {
    App,
    Title,
}

#[derive(Debug, Subcommand)]
pub enum ConsentCommand {
    /// Apps that asked, and every decision (yours and policy.toml's).
    List,
    /// Allow APP to read CATEGORY.
    Grant {
        /// The app id, as `contextctl consent list` shows it (e.g.
        /// exe:/usr/bin/firefox, systemd:org.mozilla.firefox, token:NAME).
        app: String,
        /// A category, as `contextctl categories` lists them.
        category: String,
        /// Only for this long, e.g. 30m, 8h, 7d.
        #[arg(long = "for", value_name = "DURATION")]
        duration: Option<String>,
    },
    /// Refuse APP the CATEGORY (no prompt either).
    Deny {
        /// The app id, as `contextctl consent list` shows it (e.g.
        /// exe:/usr/bin/firefox, systemd:org.mozilla.firefox, token:NAME).
        app: String,
        /// A category, as `contextctl categories` lists them.
        category: String,
    },
    /// Remove your decision: APP will be asked again.
    Revoke {
        /// The app id, as `contextctl consent list` shows it (e.g.
        /// exe:/usr/bin/firefox, systemd:org.mozilla.firefox, token:NAME).
        app: String,
        /// A category, as `contextctl categories` lists them.
        category: String,
    },
    /// Forget everything about APP.
    Forget {
        /// The app id, as `contextctl consent list` shows it (e.g.
        /// exe:/usr/bin/firefox, systemd:org.mozilla.firefox, token:NAME).
        app: String,
    },
    /// Stop handing out any context, until resume.
    Pause,
    /// Hand out context again.
    Resume,
}

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// Who publishes which kinds now, and who is refused (the default).
    List,
    /// Refuse APP's publications: what it published goes at once, and
    /// readers see nothing from it until you allow it again.
    Refuse {
        /// The app id, as `contextctl consent list` shows it (e.g.
        /// exe:/usr/bin/firefox, systemd:org.mozilla.firefox, token:NAME).
        app: String,
    },
    /// Let APP publish again.
    Allow {
        /// The app id, as `contextctl consent list` shows it (e.g.
        /// exe:/usr/bin/firefox, systemd:org.mozilla.firefox, token:NAME).
        app: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Re-encrypt the database under a new key, kept where the old one was
    /// (the Secret Service, or the key file); the old key no longer opens
    /// it. Back up the new key if you keep backups of the database.
    Rotate,
}

#[derive(Debug, Subcommand)]
pub enum RecoveryCommand {
    /// Accept the new database: apps are asked again for what you have
    /// not decided (the old file stays where it was moved).
    Dismiss,
}

#[derive(Debug, Subcommand)]
pub enum ReadersCommand {
    /// Who reads now (the default).
    List,
    /// End reader ID (from the list) now, without changing any decision.
    End {
        /// The reader's id, from `contextctl readers list`.
        id: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it (once: only its hash is kept); it never
    /// expires unless --expires says when.
    ///
    /// Grant it context as app `token:NAME` in policy.toml. With
    /// --expires, the token stops working at that time (requests get 401
    /// "the token expired", its open sessions and streams end) and stays
    /// listed as expired until revoked.
    Create {
        /// A name for the token: 1-64 of A-Z, a-z, 0-9, ., _ and -.
        name: String,
        /// When the token expires: after a duration (90s, 30m, 12h, 30d,
        /// 2w; at most 10 years) or at an RFC 3339 time
        /// (2027-01-05T10:00:00Z). Default: never.
        #[arg(long, value_name = "WHEN")]
        expires: Option<String>,
    },
    /// The tokens, when they were made and when they expire (or expired).
    List,
    /// Revoke a token, expired or not; its open sessions end at once.
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// The completion script of `contextctl` for `shell`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) {
    let full = ContextctlArgs::command();
    // clap_complete offers hidden subcommands too (bash does); a user has
    // no use for the maintainer's `generate-files`, so the script is made
    // from a copy without them.
    let mut cmd = clap::Command::new("contextctl")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    clap_complete::generate(shell, &mut cmd, "contextctl", out);
}

/// What `make install` takes from `DIR` (`contextctl generate-files DIR`):
/// `man/contextd.1`, `man/contextctl.1`, `completions/contextctl.bash`,
/// `completions/_contextctl` (zsh), `completions/contextctl.fish`.
pub fn generate_files(dir: &Path) -> std::io::Result<()> {
    let man_dir = dir.join("man");
    let comp_dir = dir.join("completions");
    std::fs::create_dir_all(&man_dir)?;
    std::fs::create_dir_all(&comp_dir)?;
    std::fs::write(man_dir.join("contextd.1"), man::contextd()?)?;
    std::fs::write(man_dir.join("contextctl.1"), man::contextctl()?)?;
    for (shell, name) in [
        (clap_complete::Shell::Bash, "contextctl.bash"),
        (clap_complete::Shell::Zsh, "_contextctl"),
        (clap_complete::Shell::Fish, "contextctl.fish"),
    ] {
        let mut buf = Vec::new();
        completions(shell, &mut buf);
        std::fs::write(comp_dir.join(name), buf)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_are_consistent() {
        ContextdArgs::command().debug_assert();
        ContextctlArgs::command().debug_assert();
    }
}

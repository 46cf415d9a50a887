//! The man pages `contextd(1)` and `contextctl(1)`, rendered from the clap
//! definitions with `clap_mangen` plus the sections clap knows nothing of
//! (FILES, ENVIRONMENT, EXIT STATUS, SEE ALSO).
//!
//! One page per binary: `contextctl(1)` documents every subcommand, nested
//! ones included, in its COMMANDS section (clap_mangen's own subcommand
//! section only lists the first level and points at one page per
//! subcommand, `contextctl-consent(1)` and so on: a dozen pages nobody
//! finds with `man contextctl`).

use clap::CommandFactory;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, italic, roman};

use super::{ContextctlArgs, ContextdArgs};

/// The man pages' footer: the manual they belong to.
const MANUAL: &str = "User Commands";

/// A term and its description, one `.TP` entry.
struct Entry {
    term: &'static str,
    text: &'static str,
}

const fn entry(term: &'static str, text: &'static str) -> Entry {
    Entry { term, text }
}

/// The files both pages list: where the broker keeps what it keeps.
const FILES: &[Entry] = &[
    entry(
        "$XDG_CONFIG_HOME/contextd/config.toml",
        "Settings: sources, consent prompts, history, MCP over HTTP, identity. Unknown keys are an error. Default ~/.config/contextd/config.toml.",
    ),
    entry(
        "$XDG_CONFIG_HOME/contextd/policy.toml",
        "Decisions written by hand or by an administrator ([[grant]] app = \"...\", categories = [...]); they show in contextctl consent list beside the user's own.",
    ),
    entry(
        "$XDG_DATA_HOME/contextd/contextd.db",
        "The encrypted database (SQLCipher): decisions, the timeline, the audit log, MCP token hashes. Default ~/.local/share/contextd/contextd.db. Removing the package never removes it.",
    ),
    entry(
        "$XDG_STATE_HOME/contextd/db.key",
        "The database key (mode 0600) when no Secret Service runs; with one, the key is the Secret Service item application=contextd. $CREDENTIALS_DIRECTORY/dbkey (a systemd credential) comes first. A wrong or missing key is an error: contextd never makes a new database over an old one.",
    ),
    entry(
        "$XDG_RUNTIME_DIR/contextd/",
        "Sockets: mcp.sock (the MCP stdio bridge) and admin.sock (contextctl token).",
    ),
    entry(
        "/usr/lib/systemd/user/contextd.service",
        "The systemd user unit (Type=dbus, part of graphical-session.target).",
    ),
    entry(
        "/usr/share/dbus-1/services/org.contextd.Broker1.service",
        "The D-Bus activation file (SystemdService=contextd.service).",
    ),
];

/// The environment both binaries read.
const ENVIRONMENT: &[Entry] = &[
    entry(
        "DBUS_SESSION_BUS_ADDRESS",
        "The session bus; unset, $XDG_RUNTIME_DIR/bus when it exists.",
    ),
    entry(
        "XDG_RUNTIME_DIR",
        "The runtime directory; unset, /run/user/UID when it is the user's own (mode 0700).",
    ),
    entry(
        "XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME",
        "Where the configuration, the database and the key file live (see FILES).",
    ),
    entry(
        "RUST_LOG",
        "Log filter (tracing's EnvFilter syntax, e.g. contextd=debug); overrides -v. Logs go to stderr, or to the journal under systemd.",
    ),
];

/// What only the daemon reads.
const DAEMON_ENVIRONMENT: &[Entry] = &[
    entry(
        "DBUS_SYSTEM_BUS_ADDRESS",
        "The system bus (logind, UPower, NetworkManager, polkit).",
    ),
    entry(
        "WAYLAND_DISPLAY",
        "The Wayland compositor to read windows from.",
    ),
    entry(
        "PIPEWIRE_REMOTE",
        "The PipeWire daemon to read streams from.",
    ),
    entry(
        "CREDENTIALS_DIRECTORY",
        "Set by systemd: a dbkey credential there is the database key.",
    ),
];

fn section(roff: &mut Roff, title: &str, entries: &[&[Entry]]) {
    roff.control("SH", [title]);
    for list in entries {
        for e in *list {
            roff.control("TP", []);
            roff.text([bold(e.term)]);
            roff.text([roman(e.text)]);
        }
    }
}

fn paragraphs(roff: &mut Roff, title: &str, text: &[&str]) {
    roff.control("SH", [title]);
    for (i, p) in text.iter().enumerate() {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(*p)]);
    }
}

/// The page's head and the sections clap_mangen renders from the command:
/// NAME, SYNOPSIS, DESCRIPTION, OPTIONS.
fn head(man: &Man, out: &mut Vec<u8>) -> std::io::Result<()> {
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)
}

fn man_for(cmd: clap::Command) -> Man {
    let man = Man::new(cmd).manual(MANUAL);
    // The page's date: the build's, as packagers pass it for reproducible
    // builds (SOURCE_DATE_EPOCH); none otherwise, so that generating twice
    // gives the same file.
    match std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
    {
        Some(t) => man.date(t.format("%Y-%m-%d").to_string()),
        None => man,
    }
}

/// `contextd(1)`.
pub(crate) fn contextd() -> std::io::Result<Vec<u8>> {
    let man = man_for(ContextdArgs::command());
    let mut out = Vec::new();
    head(&man, &mut out)?;
    let mut roff = Roff::default();
    section(&mut roff, "FILES", &[FILES]);
    section(&mut roff, "ENVIRONMENT", &[ENVIRONMENT, DAEMON_ENVIRONMENT]);
    paragraphs(
        &mut roff,
        "EXIT STATUS",
        &[
            "0 after a clean stop: SIGTERM or SIGINT, or the bus name taken over by another instance started with --replace.",
            "1 when contextd cannot start: an invalid config.toml, no home directory, no session bus, the bus name owned by a running instance, or a database it cannot open (a wrong or missing key). The reason is the last line on stderr (journalctl --user -u contextd under systemd).",
            "2 for invalid arguments.",
        ],
    );
    paragraphs(
        &mut roff,
        "SEE ALSO",
        &["contextctl(1), systemctl(1), journalctl(1), dbus-daemon(1)"],
    );
    roff.to_writer(&mut out)?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// `contextctl(1)`, with every subcommand.
pub(crate) fn contextctl() -> std::io::Result<Vec<u8>> {
    let mut cmd = ContextctlArgs::command();
    // Builds the subcommands' bin names ("contextctl consent grant") and
    // propagates the global options, as parsing does.
    cmd.build();
    let man = man_for(cmd.clone());
    let mut out = Vec::new();
    head(&man, &mut out)?;
    let mut roff = Roff::default();
    roff.control("SH", ["COMMANDS"]);
    roff.text([roman(
        "Without a command, contextctl prints the status. The options above apply to every command.",
    )]);
    for sub in visible(&cmd) {
        command(&mut roff, sub);
    }
    section(&mut roff, "FILES", &[FILES]);
    section(&mut roff, "ENVIRONMENT", &[ENVIRONMENT]);
    paragraphs(
        &mut roff,
        "EXIT STATUS",
        &[
            "0 on success.",
            "1 when the command failed: contextd is not running and cannot be started (the message names the command that fixes it), there is no session bus, or contextd refused (not allowed, not authorised, not found); the reason is on stderr.",
            "2 for invalid arguments.",
        ],
    );
    roff.control("SH", ["EXAMPLES"]);
    for (i, (what, command)) in [
        (
            "Let Firefox see the open windows for eight hours:",
            "contextctl consent grant exe:/usr/bin/firefox windows --for 8h",
        ),
        (
            "What the text editor did in the last two hours:",
            "contextctl history --since 2h --app org.gnome.TextEditor",
        ),
        (
            "Completion for fish, when the package did not install it:",
            "contextctl completions fish > ~/.config/fish/completions/contextctl.fish",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(what)]);
        // A command line as typed: no filling, no hyphenation.
        roff.control("RS", []);
        roff.control("nf", []);
        roff.text([bold(command)]);
        roff.control("fi", []);
        roff.control("RE", []);
    }
    paragraphs(
        &mut roff,
        "SEE ALSO",
        &["contextd(1), systemctl(1), busctl(1), pkexec(1)"],
    );
    roff.to_writer(&mut out)?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// One subcommand, then its own subcommands: the usage line in bold, its
/// long help, its arguments and options (the global ones are in OPTIONS).
fn command(roff: &mut Roff, cmd: &clap::Command) {
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    roff.control("SS", [usage]);
    if let Some(about) = cmd.get_long_about().or_else(|| cmd.get_about()) {
        for (i, p) in about.to_string().split("\n\n").enumerate() {
            if i > 0 {
                roff.control("PP", []);
            }
            roff.text([roman(p.replace('\n', " "))]);
        }
    }
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_global_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !args.is_empty() {
        roff.control("RS", []);
        for a in args {
            argument(roff, a);
        }
        roff.control("RE", []);
    }
    for sub in visible(cmd) {
        command(roff, sub);
    }
}

/// The subcommands a reader needs: not the hidden ones, nor clap's `help`
/// (each command's --help says the same).
fn visible(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

fn argument(roff: &mut Roff, a: &clap::Arg) {
    let value = a
        .get_value_names()
        .and_then(|v| v.first())
        .map(|v| v.to_string())
        .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
    roff.control("TP", []);
    match (a.get_long(), a.get_short()) {
        (Some(long), short) => {
            let mut term = vec![];
            if let Some(s) = short {
                term.push(bold(format!("-{s}, ")));
            }
            term.push(bold(format!("--{long}")));
            if a.get_action().takes_values() {
                term.push(roman(" "));
                term.push(italic(value));
            }
            roff.text(term);
        }
        (None, Some(s)) => {
            roff.text([bold(format!("-{s}"))]);
        }
        (None, None) => {
            roff.text([italic(value)]);
        }
    }
    let mut text = a
        .get_long_help()
        .or_else(|| a.get_help())
        .map(|h| h.to_string().replace('\n', " "))
        .unwrap_or_default();
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && a.get_action().takes_values() {
        text.push_str(&format!(" [default: {}]", defaults.join(", ")));
    }
    let possible: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect();
    if !possible.is_empty() {
        text.push_str(&format!(" [possible values: {}]", possible.join(", ")));
    }
    if !text.is_empty() {
        roff.text([roman(text.trim().to_owned())]);
    }
}

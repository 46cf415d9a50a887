//! The man pages and completion scripts `contextctl generate-files` writes
//! (what `make install` installs): `man -l` renders both pages with every
//! subcommand and the hand-written sections, and each completion script
//! loads in its real shell and completes a subcommand there.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::CommandFactory;
use contextd::internals::cli::ContextctlArgs;

use crate::common::{contextctl_bin, run_cmd};

/// `contextctl generate-files` into a fresh directory.
fn generated() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("generated");
    let (st, _, err) = run_cmd(
        Command::new(contextctl_bin())
            .arg("generate-files")
            .arg(&out),
        30,
    );
    assert!(st.success(), "generate-files: {err}");
    (dir, out)
}

/// `man -l FILE` as plain text, wide enough that no heading wraps; groff's
/// warnings (bad requests, unknown escapes) are errors here.
fn man(file: &Path) -> String {
    let (st, out, err) = run_cmd(
        Command::new("man")
            .args(["--warnings", "-l"])
            .arg(file)
            .env("MANWIDTH", "200")
            .env("MAN_KEEP_FORMATTING", "")
            .env("LC_ALL", "C.UTF-8")
            .env_remove("MANPAGER")
            .env_remove("PAGER"),
        30,
    );
    assert!(st.success(), "man -l {}: {err}", file.display());
    assert!(
        err.trim().is_empty(),
        "man -l {} warns: {err}",
        file.display()
    );
    // Bold and underline as the terminal driver writes them (c\bc, _\bc).
    let mut plain = String::with_capacity(out.len());
    for c in out.chars() {
        if c == '\u{8}' {
            plain.pop();
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Every visible subcommand as its full command line, nested ones too.
fn subcommands(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let line = format!("{prefix} {}", sub.get_name());
        subcommands(sub, &line, out);
        out.push(line);
    }
}

#[test]
fn man_renders_both_pages_with_every_subcommand() {
    let (_dir, out_dir) = generated();
    let ctl = man(&out_dir.join("man/contextctl.1"));
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "COMMANDS",
        "FILES",
        "ENVIRONMENT",
        "EXIT STATUS",
        "SEE ALSO",
    ] {
        assert!(
            ctl.lines().any(|l| l == section),
            "contextctl(1) has no {section} section:\n{ctl}"
        );
    }
    let mut all = Vec::new();
    subcommands(&ContextctlArgs::command(), "contextctl", &mut all);
    assert!(all.len() > 30, "{all:?}");
    for line in &all {
        assert!(
            ctl.lines()
                .any(|l| l.trim_start().starts_with(line.as_str())),
            "contextctl(1) does not document `{line}`:\n{ctl}"
        );
    }
    for text in [
        "contextctl consent grant [OPTIONS] <APP> <CATEGORY>",
        "--for DURATION",
        "[default: 1h]",
        "contextd/policy.toml",
        "contextd/contextd.db",
        "contextd/db.key",
        "DBUS_SESSION_BUS_ADDRESS",
        "contextd(1)",
    ] {
        assert!(ctl.contains(text), "contextctl(1) lacks {text:?}:\n{ctl}");
    }
    // Hidden maintainer commands stay out of the page.
    assert!(!ctl.contains("generate-files"), "{ctl}");

    let d = man(&out_dir.join("man/contextd.1"));
    for text in [
        "contextd - The desktop context broker",
        "--replace",
        "--config <FILE>",
        "contextd/config.toml",
        "contextd/contextd.db",
        "CREDENTIALS_DIRECTORY",
        "WAYLAND_DISPLAY",
        "EXIT STATUS",
        "contextctl(1)",
    ] {
        assert!(d.contains(text), "contextd(1) lacks {text:?}:\n{d}");
    }
}

/// `contextctl completions SHELL` prints what `make install` installs.
#[test]
fn completions_command_prints_the_installed_scripts() {
    let (_dir, out_dir) = generated();
    for (shell, file) in [
        ("bash", "contextctl.bash"),
        ("zsh", "_contextctl"),
        ("fish", "contextctl.fish"),
    ] {
        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin()).args(["completions", shell]),
            30,
        );
        assert!(st.success(), "completions {shell}: {err}");
        let installed =
            std::fs::read_to_string(out_dir.join("completions").join(file)).expect("read");
        assert_eq!(out, installed, "{shell}");
    }
    let (st, _, err) = run_cmd(
        Command::new(contextctl_bin()).args(["completions", "tcsh"]),
        30,
    );
    assert_eq!(
        st.code(),
        Some(2),
        "an unknown shell is a usage error: {err}"
    );
}

/// Each script passes its shell's syntax check (`bash -n`, `zsh -n`,
/// `fish -n`).
#[test]
fn completion_scripts_parse_in_their_shells() {
    let (_dir, out_dir) = generated();
    let c = out_dir.join("completions");
    for (shell, file) in [
        ("bash", "contextctl.bash"),
        ("zsh", "_contextctl"),
        ("fish", "contextctl.fish"),
    ] {
        let (st, _, err) = run_cmd(Command::new(shell).arg("-n").arg(c.join(file)), 30);
        assert!(st.success(), "{shell} -n {file}: {err}");
    }
}

#[test]
fn bash_completes_subcommands() {
    let (_dir, out_dir) = generated();
    let script = out_dir.join("completions/contextctl.bash");
    // What bash-completion does on Tab: the words, the index of the word
    // under the cursor, then the function with (command, current, previous).
    let complete = |words: &[&str]| {
        let line = words.join(" ");
        let cword = words.len() - 1;
        let current = words[cword];
        let previous = words[cword - 1];
        let words = words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let body = format!(
            "source \"$1\"; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{line}'; \
             COMP_POINT=${{#COMP_LINE}}; _contextctl contextctl '{current}' '{previous}'; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let (st, out, err) = run_cmd(
            Command::new("bash")
                .args(["--norc", "--noprofile", "-c", &body, "bash"])
                .arg(&script),
            30,
        );
        assert!(st.success(), "bash: {err}");
        out.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    assert_eq!(complete(&["contextctl", "con"]), ["consent"]);
    assert_eq!(complete(&["contextctl", "consent", "gr"]), ["grant"]);
    let all = complete(&["contextctl", ""]);
    for sub in ["status", "history", "mcp", "completions", "providers"] {
        assert!(all.iter().any(|w| w == sub), "{sub} not in {all:?}");
    }
    assert!(!all.iter().any(|w| w == "generate-files"), "{all:?}");
}

#[test]
fn fish_completes_subcommands() {
    let (_dir, out_dir) = generated();
    let script = out_dir.join("completions/contextctl.fish");
    let (st, out, err) = run_cmd(
        Command::new("fish")
            .args([
                "--no-config",
                "-c",
                "source $argv[1]; complete -C 'contextctl con'; echo SPLIT; complete -C 'contextctl consent gr'",
            ])
            .arg(&script),
        30,
    );
    assert!(st.success(), "fish: {err}");
    let (first, second) = out.split_once("SPLIT\n").expect("two answers");
    let names = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split('\t').next().unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(names(first), ["consent"], "{out}");
    assert_eq!(names(second), ["grant"], "{out}");
    assert!(first.contains("polkit"), "with its description: {out}");
}

/// zsh completes only in its line editor: an interactive `zsh -f` in a
/// pseudo-terminal (zsh's own zpty module) with the script's directory on
/// `fpath` and `compinit` run, given `contextctl consent gr` and a Tab.
#[test]
fn zsh_completes_subcommands() {
    let (dir, out_dir) = generated();
    let driver = dir.path().join("drive.zsh");
    std::fs::write(
        &driver,
        r#"zmodload zsh/zpty || exit 3
zpty -b z "zsh -f -i"
zpty -w z "fpath=($1 \$fpath); autoload -U compinit; compinit -u -D; PS1='%% '"
zpty -w -n z "contextctl consent gr"$'\t'
zpty -w z " ; print DONE\$((6*7))"
out=
for i in {1..400}; do
  zpty -r -t z chunk && out+=$chunk
  [[ $out == *DONE42* ]] && break
  sleep 0.05
done
zpty -d z
print -r -- "$out"
"#,
    )
    .expect("write driver");
    let (st, out, err) = run_cmd(
        Command::new("zsh")
            .arg("-f")
            .arg(&driver)
            .arg(out_dir.join("completions"))
            .env("TERM", "dumb"),
        60,
    );
    assert!(st.success(), "zsh: {err}");
    assert!(out.contains("DONE42"), "the line never ran: {out:?}");
    assert!(
        out.contains("contextctl consent grant"),
        "Tab did not complete `gr` to `grant`: {out:?}"
    );
}

//! Friendly when nothing runs (issue 30, item 6): without a daemon, every
//! `contextctl` command says what is wrong and the one command that fixes
//! it, never D-Bus's raw `ServiceUnknown`: contextd not installed, installed
//! but not started, a systemd user unit to enable, an activation that
//! fails, and no session bus at all. `contextctl mcp` answers the host's
//! `initialize` with the same message as a JSON-RPC error.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use crate::common::{Bus, contextctl_bin, run_cmd_input};

/// Commands that talk to the daemon in the different ways contextctl has:
/// D-Bus reads, a D-Bus change, a subscription, the admin socket.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["status"],
    &["windows"],
    &["consent", "list"],
    &["consent", "grant", "exe:/usr/bin/true", "windows"],
    &["history", "--since", "2h"],
    &["watch"],
    &["token", "list"],
];

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;

/// A user's directories with nothing of contextd in them.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir run");
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod run");
        Env { dir }
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    /// The environment: only what is given, `bus` as the session bus
    /// (none: no bus), and a `PATH` without contextd unless `path` says.
    fn vars(&self, bus: Option<&str>, path: &str) -> Vec<(String, String)> {
        let mut v = vec![
            ("HOME".to_owned(), self.home().display().to_string()),
            (
                "XDG_RUNTIME_DIR".to_owned(),
                self.home().join("run").display().to_string(),
            ),
            ("PATH".to_owned(), path.to_owned()),
        ];
        if let Some(a) = bus {
            v.push(("DBUS_SESSION_BUS_ADDRESS".to_owned(), a.to_owned()));
        }
        v
    }
}

/// Run `program args` in exactly `env`, with `input` on stdin.
fn run(
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    input: &str,
) -> (ExitStatus, String, String) {
    run_cmd_input(
        Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v))),
        input,
        30,
    )
}

/// contextctl alone in a directory, as when only the client is installed
/// (the real one has contextd beside it).
fn lone_contextctl(env: &Env) -> PathBuf {
    let bin = env.home().join("bin");
    std::fs::create_dir(&bin).expect("mkdir bin");
    let ctl = bin.join("contextctl");
    if std::fs::hard_link(contextctl_bin(), &ctl).is_err() {
        std::fs::copy(contextctl_bin(), &ctl).expect("copy contextctl");
    }
    ctl
}

/// Every command fails with exit status 1 and `expected` on stderr (each
/// of them), nothing on stdout, and no raw D-Bus error name.
fn every_command_says(program: &Path, env: &[(String, String)], expected: &[&str]) {
    for args in COMMANDS {
        let (st, out, err) = run(program, args, env, "");
        assert_eq!(st.code(), Some(1), "contextctl {args:?}: {st:?}\n{err}");
        assert!(out.is_empty(), "contextctl {args:?} printed {out:?}");
        for e in expected {
            assert!(
                err.contains(e),
                "contextctl {args:?} does not say {e:?}:\n{err}"
            );
        }
        assert!(
            !err.contains("org.freedesktop.DBus.Error"),
            "contextctl {args:?} shows a raw D-Bus error:\n{err}"
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "one line for contextctl {args:?}:\n{err}"
        );
    }
}

/// `contextctl mcp` answers the host's initialize with a JSON-RPC error
/// carrying `expected`, says the same on stderr, and exits 1.
fn mcp_says(program: &Path, env: &[(String, String)], expected: &[&str]) {
    let (st, out, err) = run(program, &["mcp"], env, &format!("{INITIALIZE}\n"));
    assert_eq!(st.code(), Some(1), "contextctl mcp: {st:?}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "one answer on stdout: {out:?}");
    let answer: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON-RPC answer");
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = answer["error"]["message"].as_str().expect("message");
    for e in expected {
        assert!(message.contains(e), "the host is not told {e:?}: {message}");
        assert!(err.contains(e), "stderr does not say {e:?}: {err}");
    }
}

#[test]
fn not_installed_every_command_says_install_the_package() {
    let bus = Bus::start();
    let env = Env::new();
    let ctl = lone_contextctl(&env);
    let vars = env.vars(Some(&bus.address), "/nonexistent");
    let expected = ["contextd is not installed", "sudo apt install ./contextd_"];
    every_command_says(&ctl, &vars, &expected);
    mcp_says(&ctl, &vars, &expected);
}

#[test]
fn installed_not_started_every_command_names_the_program() {
    let bus = Bus::start();
    let env = Env::new();
    let ctl = PathBuf::from(contextctl_bin());
    let daemon = ctl.with_file_name("contextd");
    let vars = env.vars(Some(&bus.address), "/nonexistent");
    let fix = format!("Start it in this session: `{} &`", daemon.display());
    let expected = ["contextd is not running", fix.as_str()];
    every_command_says(&ctl, &vars, &expected);
    mcp_says(&ctl, &vars, &expected);
}

#[test]
fn systemd_with_the_unit_says_enable_now() {
    let bus = Bus::start();
    let env = Env::new();
    let unit_dir = env.home().join(".config/systemd/user");
    std::fs::create_dir_all(&unit_dir).expect("mkdir");
    std::fs::copy(
        crate::common::root().join("systemd/contextd.service"),
        unit_dir.join("contextd.service"),
    )
    .expect("copy unit");
    // The user manager's name on the bus, as systemd --user owns it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _systemd = rt.block_on(async {
        let conn = bus.connect().await;
        conn.request_name("org.freedesktop.systemd1")
            .await
            .expect("own org.freedesktop.systemd1");
        conn
    });
    let ctl = lone_contextctl(&env);
    let vars = env.vars(Some(&bus.address), "/nonexistent");
    let expected = [
        "contextd is not running",
        "systemctl --user enable --now contextd",
    ];
    every_command_says(&ctl, &vars, &expected);
    mcp_says(&ctl, &vars, &expected);
}

#[test]
fn activation_that_fails_points_at_the_log() {
    let services = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        services.path().join("org.contextd.Broker1.service"),
        "[D-BUS Service]\nName=org.contextd.Broker1\nExec=/bin/false\n",
    )
    .expect("write activation file");
    let bus = Bus::start_with(&format!(
        "<servicedir>{}</servicedir>",
        services.path().display()
    ));
    let env = Env::new();
    let ctl = PathBuf::from(contextctl_bin());
    let vars = env.vars(Some(&bus.address), "/nonexistent");
    let expected = [
        "contextd could not be started",
        "journalctl --user -u contextd",
    ];
    every_command_says(&ctl, &vars, &expected);
    mcp_says(&ctl, &vars, &expected);
}

#[test]
fn no_session_bus_every_command_says_so() {
    let env = Env::new();
    let ctl = PathBuf::from(contextctl_bin());
    let vars = env.vars(None, "/nonexistent");
    every_command_says(
        &ctl,
        &vars,
        &["there is no D-Bus session bus", "dbus-run-session"],
    );
    // An MCP host that passed no session is told which variables to pass.
    mcp_says(
        &ctl,
        &vars,
        &[
            "there is no D-Bus session bus",
            "\"DBUS_SESSION_BUS_ADDRESS\": \"unix:path=/run/user/",
        ],
    );
}

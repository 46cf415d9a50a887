//! The self-contained desktop session of `scripts/session.sh` (private
//! bus, headless sway, PipeWire + WirePlumber), stopped on drop.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::run_cmd;

pub struct Session {
    pub dir: tempfile::TempDir,
    /// The root its desktop parts run from (`--root ROOT`), if any.
    pub root: Option<String>,
    /// The session's environment (`DIR/env.list`); an empty value means
    /// the variable must be unset.
    pub env: HashMap<String, String>,
}

fn script() -> PathBuf {
    crate::common::root()
        .to_path_buf()
        .join("scripts/session.sh")
}

impl Session {
    /// `scripts/session.sh start DIR FLAGS...` (e.g. `--no-pipewire`).
    pub fn start(flags: &[&str]) -> Session {
        let dir = tempfile::tempdir().expect("tempdir");
        let (st, out, err) = run_cmd(
            Command::new(script())
                .arg("start")
                .arg(dir.path())
                .args(flags),
            90,
        );
        assert!(st.success(), "session.sh start failed:\n{out}\n{err}");
        let list = std::fs::read_to_string(dir.path().join("env.list")).expect("env.list");
        let env = list
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let root = flags
            .iter()
            .position(|f| *f == "--root")
            .and_then(|i| flags.get(i + 1))
            .map(|r| (*r).to_owned());
        Session { dir, env, root }
    }

    /// A command for `program` as the session's desktop runs it: from the
    /// session's root when it has one (`scripts/in-root.sh ROOT program`:
    /// that Debian's pw-play talks to that Debian's PipeWire), else the
    /// host's. The session's environment is not applied (see [`Self::apply`]).
    pub fn command(&self, program: &str) -> Command {
        match &self.root {
            Some(root) => {
                let mut c = Command::new(
                    crate::common::root()
                        .to_path_buf()
                        .join("scripts/in-root.sh"),
                );
                c.arg(root).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Run a session.sh subcommand on this session (`kill-sway`, `open-window APP TITLE`, ...).
    pub fn ctl(&self, cmd: &str, args: &[&str]) -> String {
        let (st, out, err) = run_cmd(
            Command::new(script())
                .arg(cmd)
                .arg(self.dir.path())
                .args(args),
            90,
        );
        assert!(st.success(), "session.sh {cmd} failed:\n{out}\n{err}");
        out
    }

    /// Apply the session's environment to a command.
    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in &self.env {
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.env
            .get(k)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = run_cmd(Command::new(script()).arg("stop").arg(self.dir.path()), 60);
    }
}

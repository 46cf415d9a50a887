//! Real notification servers in a headless sway session of
//! `scripts/session.sh`: mako (`makoctl` lists, invokes and dismisses
//! what is on its screen) and dunst (`dunstctl` pauses it). Each is a
//! process of the test, killed on drop; `scripts/deps.sh` installs both.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::eventually;

/// A process killed on drop.
pub struct Proc(pub Child);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `program ARGS` in the session's environment `env`, its stderr in
/// `log`.
fn spawn(program: &str, args: &[&str], env: &[(String, String)], log: &Path) -> Proc {
    let log = std::fs::File::create(log).expect("log");
    Proc(
        Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program} ({e}); scripts/deps.sh installs it")),
    )
}

/// `makoctl ARGS` in `env`: whether it succeeded, and its stdout.
pub fn makoctl(env: &[(String, String)], args: &[&str]) -> (bool, String) {
    match Command::new("makoctl")
        .args(args)
        .env_clear()
        .envs(env.iter().cloned())
        .output()
    {
        Ok(out) => (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ),
        Err(_) => (false, String::new()),
    }
}

/// mako's notifications as `makoctl list` gives them (each a dictionary of
/// `{"type", "data"}`), newest first; `None` while mako does not answer.
pub fn makoctl_list(env: &[(String, String)]) -> Option<Vec<Value>> {
    let (ok, out) = makoctl(env, &["list"]);
    if !ok {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    v["data"].get(0)?.as_array().cloned()
}

/// A field of a notification of [`makoctl_list`] (`summary`, `id`, …).
pub fn mako_field<'a>(n: &'a Value, name: &str) -> &'a Value {
    &n[name]["data"]
}

/// Start mako in the session (`config`: a configuration file of its own
/// instead of the user's) and wait until it answers `makoctl`.
pub async fn mako(env: &[(String, String)], dir: &Path, config: Option<&Path>) -> Proc {
    let config = config.map(|c| c.display().to_string());
    let args: Vec<&str> = match &config {
        Some(c) => vec!["--config", c.as_str()],
        None => vec![],
    };
    let p = spawn("mako", &args, env, &dir.join("mako.log"));
    eventually(20, "mako answers makoctl", || async {
        makoctl_list(env).map(|_| ())
    })
    .await;
    p
}

/// `dunstctl ARGS` in `env`: its stdout; panics when it fails.
pub fn dunstctl(env: &[(String, String)], args: &[&str]) -> String {
    let out = Command::new("dunstctl")
        .args(args)
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .expect("dunstctl (scripts/deps.sh installs dunst)");
    assert!(
        out.status.success(),
        "dunstctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Start dunst in the session (the test's home has no dunstrc: the
/// system's defaults) and wait until it answers `dunstctl is-paused`.
pub async fn dunst(env: &[(String, String)], dir: &Path) -> Proc {
    let p = spawn("dunst", &[], env, &dir.join("dunst.log"));
    eventually(20, "dunst answers dunstctl", || async {
        Command::new("dunstctl")
            .arg("is-paused")
            .env_clear()
            .envs(env.iter().cloned())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|_| ())
    })
    .await;
    p
}

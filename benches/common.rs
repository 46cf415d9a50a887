//! Shared bench plumbing: a private bus and the daemon on it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_bus(dir: &Path) -> (Proc, String) {
    let mut child = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address=1"])
        .arg(format!("--address=unix:path={}/bus", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address");
    (Proc(child), line.trim().to_owned())
}

/// Percentile of sorted durations.
pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn verdict(ok: bool) -> &'static str {
    if ok { "meets target" } else { "MISSES target" }
}

/// Write `XDG_CONFIG_HOME/contextd/policy.toml` (under `config_home`)
/// granting this bench process `categories`.
pub fn grant_self(config_home: &Path, categories: &[&str]) {
    let cfg = config_home.join("contextd");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    let me = std::fs::read_link("/proc/self/exe").expect("exe");
    let cats: Vec<String> = categories.iter().map(|c| format!("{c:?}")).collect();
    std::fs::write(
        cfg.join("policy.toml"),
        format!(
            "[[grant]]\napp = \"exe:{}\"\ncategories = [{}]\n",
            me.display(),
            cats.join(", ")
        ),
    )
    .expect("policy");
}

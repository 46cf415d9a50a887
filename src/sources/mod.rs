//! Sources: each turns its world into `core::SourceEvent`s and nothing
//! else. A missing source reports itself unavailable and retries with a
//! bounded backoff (or waits for a signal that it is back); it never takes
//! the daemon down.
//!
//! To add a source: a module with `pub const NAME` and
//! `pub async fn run(ctx: SourceContext)`, and one line in [`spawn_all`].
//! A source ends when `ctx.cancel` is cancelled, and spawns its helper
//! tasks on `ctx.tasks` and joins its threads, so that the daemon's stop
//! waits for all of it.

pub(crate) mod calendar;
pub(crate) mod dnd;
pub(crate) mod fdo;
pub(crate) mod geoclue;
pub(crate) mod login1;
pub(crate) mod mpris;
pub(crate) mod networkmanager;
pub(crate) mod notifications;
pub(crate) mod pipewire;
pub(crate) mod recent;
#[cfg(feature = "replay")]
pub(crate) mod replay;
pub(crate) mod shells;
pub(crate) mod socket;
pub(crate) mod upower;
pub(crate) mod v4l2;
pub(crate) mod wayland;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::core::SourceEvent;

/// What every source gets.
#[derive(Debug, Clone)]
pub struct SourceContext {
    pub tx: mpsc::Sender<SourceEvent>,
    pub cancel: CancellationToken,
    /// The sources' tracker: a source's own tasks (one per MPRIS player)
    /// are spawned here, so that shutdown joins them.
    pub tasks: TaskTracker,
    pub config: Arc<Config>,
    /// Unique names of the broker's own session-bus connections. Sources
    /// that observe the session bus leave out what the broker itself sent
    /// (its consent prompts are notifications, and must not come back as
    /// context).
    pub own_names: Arc<[String]>,
}

impl SourceContext {
    /// Whether the source `name` may run: not in config.toml's `[sources]
    /// disabled` (where `*` disables every source).
    pub fn enabled(&self, name: &str) -> bool {
        !self
            .config
            .file
            .sources
            .disabled
            .iter()
            .any(|d| d == name || d == "*")
    }

    /// Send an event; `false` when the core is gone (shutting down).
    ///
    /// Then the source yields, so that the event goes out before the
    /// source reads what it observed next. Why: the task that applies
    /// events is woken onto this worker's next-task slot, which the other
    /// worker cannot take, and a source that went on with a burst kept it
    /// waiting. When a stream starts, PipeWire sends the node's info, its
    /// ports and links right behind its global; the new stream's `Changed`
    /// waited for the source to read them in two of three starts (70 µs
    /// at the median, 1.3 ms at the p99, in the PipeWire bench; 10 µs and
    /// 63 µs with the yield).
    pub async fn send(&self, ev: SourceEvent) -> bool {
        let sent = self.tx.send(ev).await.is_ok();
        tokio::task::yield_now().await;
        sent
    }

    /// Report this source's health (shown by `ListSources`).
    pub async fn status(&self, name: &str, available: bool, error: Option<String>) {
        let _ = self
            .tx
            .send(SourceEvent::SourceStatus {
                source: name.to_owned(),
                available,
                error,
            })
            .await;
    }

    /// Sleep, unless cancelled first; `false` when cancelled.
    pub async fn sleep(&self, d: Duration) -> bool {
        tokio::select! {
            _ = self.cancel.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }
}

/// Exponential backoff between reconnection attempts: 250 ms doubling to
/// 30 s, so that a missing service costs nothing noticeable and a
/// returning one is picked up soon.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_millis(250), Duration::from_secs(30))
    }
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            next: min,
            min,
            max,
        }
    }

    /// The delay to wait now; doubles the next one.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    /// Back to the shortest delay after a success.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

/// Start every real source that is not disabled in config.toml. With
/// `--replay` (a build with the `replay` feature) the world is scripted,
/// and no real source runs. Every source is spawned on `ctx.tasks`.
pub(crate) fn spawn_all(ctx: &SourceContext) {
    let tasks = &ctx.tasks;
    #[cfg(feature = "replay")]
    if let Some(path) = &ctx.config.replay.script {
        tasks.spawn(replay::run(
            path.clone(),
            ctx.tx.clone(),
            ctx.cancel.clone(),
        ));
        return;
    }
    let enabled = |name: &str| ctx.enabled(name);
    // Real sources register here, e.g.:
    // if enabled(wayland::NAME) { tasks.spawn(wayland::run(ctx.clone())); }
    if enabled(pipewire::NAME) {
        tasks.spawn(pipewire::run(ctx.clone()));
    }
    if enabled(login1::NAME) {
        tasks.spawn(login1::run(ctx.clone()));
    }
    if enabled(upower::NAME) {
        tasks.spawn(upower::run(ctx.clone()));
    }
    if enabled(networkmanager::NAME) {
        tasks.spawn(networkmanager::run(ctx.clone()));
    }
    if enabled(notifications::NAME) {
        tasks.spawn(notifications::run(ctx.clone()));
    }
    if enabled(dnd::GSETTINGS) || enabled(dnd::SERVER) {
        tasks.spawn(dnd::run(ctx.clone()));
    }
    if enabled(mpris::NAME) {
        tasks.spawn(mpris::run(ctx.clone()));
    }
    if enabled(wayland::NAME) {
        tasks.spawn(wayland::run(ctx.clone()));
    }
    if enabled(v4l2::NAME) {
        tasks.spawn(v4l2::run(ctx.clone()));
    }
    if enabled(wayland::selection::NAME) {
        tasks.spawn(wayland::selection::run(ctx.clone()));
    }
    if enabled(geoclue::NAME) {
        tasks.spawn(geoclue::run(ctx.clone()));
    }
    if enabled(recent::NAME) {
        tasks.spawn(recent::run(ctx.clone()));
    }
    if enabled(calendar::NAME) {
        tasks.spawn(calendar::run(ctx.clone()));
    }
}

/// A stable stand-in for an id or identifier a compositor or shell sent
/// that cannot be used as it is (not printable ASCII, or too long):
/// `h` and its FNV-1a hash, which keeps distinct ones distinct.
pub(crate) fn hashed_id(s: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("h{h:016x}")
}

/// The kernel's identity of a window's process, as for a D-Bus caller
/// (`identity::resolve_pid`): what the compositor or shell told of a
/// window's PID becomes the id consent names the app by. `None` when the
/// PID names no process (any more). A few reads of `/proc/PID`, made once
/// per window by the `wayland` and `shells` sources.
pub(crate) fn window_process(pid: u32) -> Option<crate::model::WindowProcess> {
    match crate::identity::resolve_pid(pid) {
        Ok(id) => Some(crate::model::WindowProcess {
            app_id: id.app_id,
            source: id.source,
        }),
        Err(e) => {
            tracing::debug!(pid, "a window's process: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_bound_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let v: Vec<u128> = (0..5).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(v, vec![100, 200, 400, 500, 500]);
        b.reset();
        assert_eq!(b.next_delay().as_millis(), 100);
    }
}

//! Windows and focus reported by the desktop shell: the sources
//! `gnome-shell` (the contextd GNOME Shell extension) and `kwin` (the KWin
//! script the broker loads), for the desktops whose compositors offer no
//! window list to ordinary clients.
//!
//! The shells call `org.contextd.WindowReports1` on the broker; the core
//! lets only the shell through (its executable, and its connection owns
//! the shell's bus name: `core::reports`) and hands the reports here, in
//! order, where [`tracker::Tracker`] keeps each shell's windows and turns
//! them into `SourceEvent`s. This task also
//! - follows who owns each shell's name, as the core was told
//!   (`ShellFeed::owners`): a report whose sender no longer owns it is
//!   dropped, and when the name changes hands the old owner's windows go;
//! - follows each reporter's connection: when it closes, its windows are
//!   gone and the source is unavailable;
//! - follows `org.gnome.Shell` on the bus, so that `ListSources` says when
//!   GNOME Shell runs but the extension does not report (and how a user
//!   enables it: the broker never does); a source whose shell never ran
//!   since the broker started is not listed at all (on sway, neither is);
//! - follows `org.kde.KWin`, loads the script into each KWin that appears
//!   ([`kwin`]) and unloads it at shutdown.

pub(crate) mod kwin;
pub(crate) mod tracker;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use zbus::Connection;

use super::fdo::{self, BusKind, NameWatch};
use super::{Backoff, SourceContext};
use crate::core::SourceEvent;
use crate::core::reports::{GNOME_SHELL, KWIN, Report, Reported, ShellFeed};
use tracker::Tracker;

/// The extension's UUID, as `gnome-extensions` takes it.
pub(crate) const GNOME_EXTENSION: &str = "contextd@contextd.org";
const GNOME_SHELL_NAME: &str = "org.gnome.Shell";
const KWIN_NAME: &str = "org.kde.KWin";

/// How long the script may take to unload at shutdown.
const UNLOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// Start the source with the receiving end of the reports
/// (`core::reports::Reporters::new`), unless both its names are disabled;
/// then the receiver is dropped and reports fail as unavailable.
pub(crate) fn spawn(ctx: &SourceContext, feed: ShellFeed) {
    let (gnome, kwin) = (ctx.enabled(GNOME_SHELL), ctx.enabled(KWIN));
    if gnome || kwin {
        ctx.tasks.spawn(run(ctx.clone(), feed, gnome, kwin));
    }
}

/// One shell: its windows, its reporter, whether it runs.
struct Shell {
    source: &'static str,
    enabled: bool,
    tracker: Tracker,
    /// Follows the reporter's connection.
    reporter: Option<NameWatch>,
    /// The shell's well-known name has an owner.
    running: bool,
    /// Why the KWin script is not running, when loading it failed.
    script_error: Option<String>,
    /// The shell ran or reported since the broker started: until then the
    /// source is not listed (a desktop without it has nothing to say).
    seen: bool,
    /// The status last told.
    told: Option<(bool, Option<String>)>,
}

impl Shell {
    fn new(source: &'static str, enabled: bool) -> Shell {
        let resolver: tracker::Resolver = Box::new(crate::desktop_entry::for_window);
        Shell {
            source,
            enabled,
            tracker: Tracker::new(source, resolver),
            reporter: None,
            running: false,
            script_error: None,
            seen: false,
            told: None,
        }
    }

    fn status(&self) -> (bool, Option<String>) {
        if self.tracker.owner().is_some() {
            return (true, None);
        }
        let why = match (self.source, self.running) {
            (GNOME_SHELL, false) => "GNOME Shell is not running".to_owned(),
            (GNOME_SHELL, true) => format!(
                "GNOME Shell runs, but the contextd extension does not report its windows; \
                 to share them, enable it: gnome-extensions enable {GNOME_EXTENSION}"
            ),
            (_, false) => "KWin is not running".to_owned(),
            (_, true) => match &self.script_error {
                Some(e) => format!("KWin runs, but the contextd script does not: {e}"),
                None => "KWin runs; waiting for the contextd script to report".to_owned(),
            },
        };
        (false, Some(why))
    }

    async fn tell_status(&mut self, ctx: &SourceContext) {
        self.seen |= self.running || self.tracker.owner().is_some();
        if !self.enabled || !self.seen {
            return;
        }
        let now = self.status();
        if self.told.as_ref() != Some(&now) {
            ctx.status(self.source, now.0, now.1.clone()).await;
            self.told = Some(now);
        }
    }

    /// Send what the tracker made; `false` when the core is gone. A source
    /// that becomes available says so before its windows come, one that
    /// becomes unavailable after they went.
    async fn send(&mut self, ctx: &SourceContext, events: Vec<SourceEvent>) -> bool {
        if self.tracker.owner().is_some() {
            self.tell_status(ctx).await;
        }
        for ev in events {
            if !ctx.send(ev).await {
                return false;
            }
        }
        if self.tracker.owner().is_none() {
            self.reporter = None;
        }
        self.tell_status(ctx).await;
        true
    }

    async fn report(&mut self, ctx: &SourceContext, conn: &Connection, r: Reported) -> bool {
        let stopped = matches!(r.report, Report::Stopped);
        // The kind only: titles stay out of the logs.
        let kind = match &r.report {
            Report::Windows { windows, .. } => format!("{} windows", windows.len()),
            Report::Window { .. } => "window".into(),
            Report::Closed { .. } => "closed".into(),
            Report::Focus { id: None } => "focus none".into(),
            Report::Focus { id: Some(_) } => "focus".into(),
            Report::Stopped => "stopped".into(),
        };
        tracing::trace!(source = self.source, owner = r.owner, kind, "report");
        let (mut events, new_owner) = self.tracker.report(&r.owner, r.report, Instant::now());
        if new_owner && !stopped {
            // Follow the new reporter; one already gone takes its
            // windows with it at once.
            match NameWatch::new(conn, &r.owner).await {
                Ok(w) if w.owner.is_some() => {
                    tracing::info!(
                        source = self.source,
                        owner = r.owner,
                        "a shell reports windows"
                    );
                    self.reporter = Some(w);
                }
                Ok(_) => events.extend(self.tracker.reset()),
                Err(e) => {
                    tracing::warn!(source = self.source, error = %e, "cannot follow the reporter");
                    events.extend(self.tracker.reset());
                }
            }
        }
        if stopped {
            tracing::info!(
                source = self.source,
                owner = r.owner,
                "the shell stopped reporting"
            );
        }
        self.send(ctx, events).await
    }
}

/// A report to its shell (of a disabled one, or from a connection that
/// no longer owns the shell's name: dropped); `false` when the core is
/// gone.
async fn dispatch(
    ctx: &SourceContext,
    conn: &Connection,
    feed: &ShellFeed,
    gnome: &mut Shell,
    kwin: &mut Shell,
    r: Reported,
) -> bool {
    if !feed.owns(r.source, &r.owner) {
        tracing::debug!(
            source = r.source,
            owner = r.owner,
            "a report from a connection that no longer owns the shell's name; dropped"
        );
        return true;
    }
    match r.source {
        GNOME_SHELL if gnome.enabled => gnome.report(ctx, conn, r).await,
        KWIN if kwin.enabled => kwin.report(ctx, conn, r).await,
        _ => true,
    }
}

/// Until the reporter's connection closes (forever without one).
async fn reporter_gone(w: &mut Option<NameWatch>) {
    match w.as_mut() {
        Some(w) => loop {
            match w.next().await {
                Some(Some(_)) => continue,
                _ => return,
            }
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// The next owner change of a well-known name, or forever once the
/// watch ended.
async fn owner_change(w: &mut Option<NameWatch>) -> Option<Option<String>> {
    match w.as_mut() {
        Some(watch) => {
            let r = watch.next().await;
            if r.is_none() {
                *w = None;
            }
            r
        }
        None => std::future::pending().await,
    }
}

async fn watch(conn: &Connection, name: &str, on: bool) -> Option<NameWatch> {
    if !on {
        return None;
    }
    match NameWatch::new(conn, name).await {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(name, error = %e, "cannot follow the name");
            None
        }
    }
}

fn script_dir(ctx: &SourceContext) -> PathBuf {
    ctx.config
        .paths
        .runtime_dir
        .clone()
        .unwrap_or_else(|| ctx.config.paths.state_dir.clone())
}

/// Load the script into the KWin that just appeared, off the source's
/// loop (KWin may be slow to serve /Scripting, and reports must not wait):
/// the result comes back on `done` with `generation`, so that the result
/// for a KWin that has gone since is ignored.
fn start_loading(
    ctx: &SourceContext,
    conn: &Connection,
    generation: u64,
    unique: &str,
    done: &mpsc::Sender<(u64, Result<(), String>)>,
) {
    let (ctx2, conn, done) = (ctx.clone(), conn.clone(), done.clone());
    let unique = unique.to_owned();
    ctx.tasks.spawn(async move {
        let ctx = ctx2;
        // KWin takes its name before it serves /Scripting: a few quick tries.
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let mut result = Err(String::new());
        let dir = script_dir(&ctx);
        for _ in 0..6 {
            result = tokio::select! {
                _ = ctx.cancel.cancelled() => return,
                r = kwin::load(&conn, &dir, &unique) => r,
            };
            match &result {
                Ok(()) => break,
                Err(e) => {
                    tracing::debug!(source = KWIN, error = %e, "loading the KWin script failed")
                }
            }
            if !ctx.sleep(backoff.next_delay()).await {
                return;
            }
        }
        if let Err(e) = &result {
            tracing::warn!(source = KWIN, "cannot load the KWin script: {e}");
        }
        let _ = done.send((generation, result)).await;
    });
}

async fn run(ctx: SourceContext, mut feed: ShellFeed, gnome_on: bool, kwin_on: bool) {
    let mut gnome = Shell::new(GNOME_SHELL, gnome_on);
    let mut kwin = Shell::new(KWIN, kwin_on);
    let mut backoff = Backoff::default();
    let conn = loop {
        match fdo::connect(BusKind::Session).await {
            Ok(c) => break c,
            Err(e) => {
                let sources = [(GNOME_SHELL, gnome_on), (KWIN, kwin_on)];
                for (source, on) in sources {
                    if on {
                        ctx.status(source, false, Some(e.to_string())).await;
                    }
                }
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
            }
        }
    };
    let mut gnome_name = watch(&conn, GNOME_SHELL_NAME, gnome_on).await;
    let mut kwin_name = watch(&conn, KWIN_NAME, kwin_on).await;
    gnome.running = gnome_name.as_ref().is_some_and(|w| w.owner.is_some());
    kwin.running = kwin_name.as_ref().is_some_and(|w| w.owner.is_some());
    gnome.tell_status(&ctx).await;
    kwin.tell_status(&ctx).await;
    // Each KWin that appears is a generation; a load is for one. The
    // script reports as soon as it runs, so it is loaded only once the
    // broker owns its name (the sources start before it asks for it), and
    // it reports to the unique name of the connection that owns it.
    let (loaded_tx, mut loaded_rx) = mpsc::channel(4);
    let mut kwin_generation: u64 = 0;
    let mut loading_for: Option<u64> = None;
    let mut broker_name = watch(&conn, crate::names::BUS_NAME, kwin_on).await;
    let ours = |owner: &Option<String>| {
        owner
            .clone()
            .filter(|o| ctx.own_names.iter().any(|n| n == o))
    };
    let mut named = broker_name.as_ref().and_then(|w| ours(&w.owner));

    loop {
        if let Some(unique) = named.as_deref().filter(|_| kwin.running)
            && loading_for != Some(kwin_generation)
        {
            loading_for = Some(kwin_generation);
            start_loading(&ctx, &conn, kwin_generation, unique, &loaded_tx);
        }
        let deadline = [gnome.tracker.deadline(), kwin.tracker.deadline()]
            .into_iter()
            .flatten()
            .min();
        let alive = tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            r = feed.reports.recv() => match r {
                None => break,
                Some(r) => dispatch(&ctx, &conn, &feed, &mut gnome, &mut kwin, r).await,
            },
            Ok(()) = feed.owners.changed() => {
                // The shell's name changed hands: what the old owner
                // reported goes (its next report would be refused).
                let mut ok = true;
                for shell in [&mut gnome, &mut kwin] {
                    let owner = feed.owner(shell.source);
                    let ev = shell.tracker.name_owner(owner.as_deref());
                    if !ev.is_empty() {
                        tracing::info!(source = shell.source, "the shell's name changed hands; its old reporter's windows go");
                        ok &= shell.send(&ctx, ev).await;
                    }
                }
                ok
            }
            _ = reporter_gone(&mut gnome.reporter) => {
                tracing::info!(source = GNOME_SHELL, "the reporting shell left");
                let ev = gnome.tracker.reset();
                gnome.send(&ctx, ev).await
            }
            _ = reporter_gone(&mut kwin.reporter) => {
                tracing::info!(source = KWIN, "the reporting shell left");
                let ev = kwin.tracker.reset();
                kwin.send(&ctx, ev).await
            }
            Some(owner) = owner_change(&mut gnome_name) => {
                gnome.running = owner.is_some();
                gnome.tell_status(&ctx).await;
                true
            }
            Some(owner) = owner_change(&mut kwin_name) => {
                kwin.running = owner.is_some();
                kwin.script_error = None;
                kwin_generation += 1;
                kwin.tell_status(&ctx).await;
                true
            }
            Some(owner) = owner_change(&mut broker_name) => {
                named = ours(&owner);
                true
            }
            Some((generation, result)) = loaded_rx.recv() => {
                if generation == kwin_generation {
                    kwin.script_error = result.err();
                    kwin.tell_status(&ctx).await;
                }
                true
            }
            _ = sleep_until(deadline) => {
                // Reports already waiting come first: the real focus that
                // follows a null one may be among them (a loop slowed
                // down must not show the null).
                let mut ok = true;
                while let Ok(r) = feed.reports.try_recv() {
                    ok &= dispatch(&ctx, &conn, &feed, &mut gnome, &mut kwin, r).await;
                }
                let now = Instant::now();
                let ev = gnome.tracker.tick(now);
                let ok = ok && gnome.send(&ctx, ev).await;
                let ev = kwin.tracker.tick(now);
                ok && kwin.send(&ctx, ev).await
            }
        };
        if !alive {
            break;
        }
    }
    // Whether or not a load finished: unloading what is not loaded does
    // nothing, and a load still under way was sent before this.
    if kwin.running {
        match tokio::time::timeout(UNLOAD_TIMEOUT, kwin::unload(&conn)).await {
            Ok(Ok(())) => tracing::debug!(source = KWIN, "unloaded the KWin script"),
            Ok(Err(e)) => {
                tracing::debug!(source = KWIN, error = %e, "unloading the KWin script failed")
            }
            Err(_) => tracing::debug!(source = KWIN, "KWin did not answer the unload"),
        }
    }
}

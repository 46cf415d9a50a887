//! Shutdown is one tree: a root [`CancellationToken`] with one child token
//! per [`Level`] (publishers, sources, writers, database), and a
//! [`TaskTracker`] per level that every task of that level is spawned
//! through.
//!
//! The levels stop one after another, each cancelled and then joined with
//! a bound, because each one feeds the next: publishers audit and prompt,
//! sources feed the state (whose observer feeds the timeline), the writers
//! put the last audit and history batches in the database, and the
//! database closes last. Stopping them in any other order loses the last
//! batch; stopping them without joining loses whatever a task was still
//! doing when the runtime went away.
//!
//! Nothing here knows what the levels hold; `daemon` builds the tree and
//! runs its teardown on every exit path.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// One level of the tree: a token its tasks stop on and a tracker that
/// knows every one of them, so that [`Level::stop`] can tell when the last
/// one has ended.
#[derive(Debug, Clone)]
pub(crate) struct Level {
    name: &'static str,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl Level {
    fn under(root: &CancellationToken, name: &'static str) -> Level {
        Level {
            name,
            cancel: root.child_token(),
            tasks: TaskTracker::new(),
        }
    }

    /// A level of its own, outside any tree: for code that runs a part of
    /// the daemon (a test, a tool) and stops it itself.
    #[cfg(test)]
    pub(crate) fn detached(name: &'static str) -> Level {
        Level::under(&CancellationToken::new(), name)
    }

    #[cfg(test)]
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The level's token: cancelled when the level stops (or the root is
    /// cancelled). Tasks that must finish their work on the way out (flush
    /// a batch, answer a request) watch it themselves.
    pub(crate) fn token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// A token that the level cancels, and that can also be cancelled on
    /// its own (one connection, one session).
    pub(crate) fn child_token(&self) -> CancellationToken {
        self.cancel.child_token()
    }

    /// The level's tracker, for code that spawns without holding the
    /// level (a session's tasks, a source's helper tasks).
    pub(crate) fn tracker(&self) -> TaskTracker {
        self.tasks.clone()
    }

    /// Spawn a task that belongs to this level. It must end by itself once
    /// [`Level::token`] is cancelled: the level waits for it.
    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// [`Level::spawn`] on another runtime (a [`Lane`]'s).
    pub(crate) fn spawn_on<F>(
        &self,
        task: F,
        handle: &tokio::runtime::Handle,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn_on(task, handle)
    }

    /// Cancel the level and wait, at most `bound`, for every one of its
    /// tasks. Logs `shutdown: NAME joined` (debug) when all have ended, a
    /// warning naming how many are left when the bound ran out; returns
    /// whether all ended. Tasks left over keep running until the runtime
    /// ends: the next level must not wait for them forever.
    pub(crate) async fn stop(&self, bound: Duration) -> bool {
        self.cancel.cancel();
        self.tasks.close();
        if tokio::time::timeout(bound, self.tasks.wait()).await.is_ok() {
            tracing::debug!("shutdown: {} joined", self.name);
            true
        } else {
            tracing::warn!(
                left = self.tasks.len(),
                "shutdown: {} did not stop within {} ms",
                self.name,
                bound.as_millis()
            );
            false
        }
    }
}

/// Set when a level was left behind at shutdown: its tasks (and the
/// SQLite worker threads they wait on) may still run when `main` returns.
static LEFT_BEHIND: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a level overran its bound and the grace at shutdown
/// ([`Tree::stop`]). The
/// process must then end without running the C library's exit handlers:
/// SQLCipher's frees the memory a SQLite statement still running on its
/// worker thread writes into (memcheck saw it under load).
pub(crate) fn left_behind() -> bool {
    LEFT_BEHIND.load(std::sync::atomic::Ordering::SeqCst)
}

/// The daemon's tree, in teardown order.
#[derive(Debug)]
pub(crate) struct Tree {
    root: CancellationToken,
    /// D-Bus and MCP: every connection, session, subscription and prompt.
    pub(crate) publishers: Level,
    /// Everything that feeds the state: the sources, the policy watcher,
    /// and the task that applies their events.
    pub(crate) sources: Level,
    /// The history and audit writers and the retention of both.
    pub(crate) writers: Level,
    /// The connection pool, closed when this level stops.
    pub(crate) database: Level,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    pub(crate) fn new() -> Tree {
        let root = CancellationToken::new();
        Tree {
            publishers: Level::under(&root, "publishers"),
            sources: Level::under(&root, "sources"),
            writers: Level::under(&root, "writers"),
            database: Level::under(&root, "database"),
            root,
        }
    }

    /// The root: cancelling it cancels every level at once, without the
    /// order that [`Tree::stop`] keeps. The teardown cancels it last, for
    /// anything that watches the whole daemon's life.
    #[cfg(test)]
    pub(crate) fn root(&self) -> &CancellationToken {
        &self.root
    }

    /// Stop the levels in order, each within its bound: the publishers
    /// first (nothing new is asked), then the sources (nothing new
    /// happens), then the writers (the last batches are written), then the
    /// database. A level that overruns its bound is logged and left
    /// behind, and the next level stops anyway, so the whole stop never
    /// takes longer than the sum of the bounds.
    ///
    /// A level left behind gets [`Bounds::grace`] more, all levels
    /// together, at the end: its tasks may hold a SQLite statement (the
    /// last history batch on a slow disk), and the process must not end
    /// under one (see [`left_behind`]). What still runs after that is
    /// flagged for `main`, which then ends with `_exit`.
    pub(crate) async fn stop(&self, bounds: &Bounds) {
        let levels = [
            (&self.publishers, bounds.publishers),
            (&self.sources, bounds.sources),
            (&self.writers, bounds.writers),
            (&self.database, bounds.database),
        ];
        let mut behind = Vec::new();
        for (level, bound) in levels {
            if !level.stop(bound).await {
                behind.push(level);
            }
        }
        if !behind.is_empty() {
            let all = async {
                for level in &behind {
                    level.tasks.wait().await;
                }
            };
            if tokio::time::timeout(bounds.grace, all).await.is_ok() {
                tracing::info!("shutdown: the levels left behind ended within the grace");
            } else {
                LEFT_BEHIND.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        self.root.cancel();
    }
}

/// How long each level may take to stop. Their sum (1.5 s), with the
/// release of the bus name before them and the end of the process after,
/// stays under the 2 s in which a SIGTERM ends the daemon when nothing is
/// stuck; a level that overruns gets `grace` more (a last transaction on
/// a slow disk is worth finishing), far inside systemd's stop timeout.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) publishers: Duration,
    pub(crate) sources: Duration,
    pub(crate) writers: Duration,
    pub(crate) database: Duration,
    /// More time, once, for the levels that overran theirs.
    pub(crate) grace: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            // An HTTP connection gets 300 ms to finish its request.
            publishers: Duration::from_millis(450),
            // A source's thread gets 300 ms to stop.
            sources: Duration::from_millis(350),
            // One transaction each for the last history and audit batch.
            writers: Duration::from_millis(500),
            database: Duration::from_millis(200),
            grace: Duration::from_millis(2000),
        }
    }
}

/// A runtime of its own on its own OS threads, for work whose load must
/// not queue ahead of the rest, or behind it: MCP's HTTP sessions and
/// stdio hosts run on one, so that hundreds of busy hosts do not make a
/// D-Bus call (even `Peer.Ping`) wait its turn behind their tasks on the
/// main runtime's workers; the kernel shares the CPU between the threads
/// instead. The store's calls run on another (`core::lane`), so that a
/// database connection goes back to its pool without waiting behind
/// either.
///
/// Its tasks still belong to a [`Level`] (spawn them with
/// `level.spawn_on(task, lane.handle())`, or from a task already
/// on the lane), which stops and joins them; [`Lane::stop`] then ends the
/// thread, after the levels whose tasks run here.
#[derive(Debug)]
pub(crate) struct Lane {
    name: &'static str,
    handle: tokio::runtime::Handle,
    stop: CancellationToken,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Lane {
    /// A lane of `workers` threads (and one that owns the runtime), all
    /// named `contextd-NAME`; with one worker, the thread that owns the
    /// runtime runs its tasks itself (one thread, not two).
    pub(crate) fn start(name: &'static str, workers: usize) -> std::io::Result<Lane> {
        Lane::start_with(name, workers, None)
    }

    /// A lane of one thread that asks the kernel for a short time slice
    /// (`slice`, see [`short_slice`]): a thread that mostly sleeps and
    /// must answer at once when woken (the bus's, `daemon::Lanes`).
    pub(crate) fn start_answering(name: &'static str, slice: Duration) -> std::io::Result<Lane> {
        Lane::start_with(name, 1, Some(slice))
    }

    fn start_with(
        name: &'static str,
        workers: usize,
        slice: Option<Duration>,
    ) -> std::io::Result<Lane> {
        let mut builder = if workers > 1 {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(workers);
            b
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        let rt = builder
            .thread_name(format!("contextd-{name}"))
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        let stop = CancellationToken::new();
        let until = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("contextd-{name}"))
            .spawn(move || {
                if let Some(slice) = slice {
                    short_slice(slice);
                }
                rt.block_on(until.cancelled());
                // Whatever a level left behind (it logged that) is dropped;
                // a blocking task gets a moment to end.
                rt.shutdown_timeout(Duration::from_millis(100));
            })?;
        Ok(Lane {
            name,
            handle,
            stop,
            thread: std::sync::Mutex::new(Some(thread)),
        })
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// End the thread (its runtime drops what is left on it) and join it
    /// within `bound`.
    pub(crate) async fn stop(&self, bound: Duration) -> bool {
        self.stop.cancel();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        match thread {
            Some(t) => join_thread(t, self.name, bound).await,
            None => true,
        }
    }
}

impl Drop for Lane {
    /// A lane never outlives its owner: the thread ends by itself.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Ask the kernel to run the calling thread in slices of `slice`
/// (`sched_setattr(2)`'s `sched_runtime` for a normal thread, Linux 6.12
/// and later with the EEVDF scheduler); older kernels ignore it or refuse
/// it, and nothing else changes.
///
/// Why: on a loaded machine a woken thread waits for the running ones to
/// use up their slices (3 ms by default on two CPUs) before it runs,
/// however little it has to do. A thread with a shorter slice than the
/// one running gets an earlier deadline and is run at once
/// (`PREEMPT_SHORT`). It gets no more of the CPU than before: its
/// priority (nice) is unchanged, so it cannot take anything from the
/// user's other programs but the wait. No privilege is needed.
pub(crate) fn short_slice(slice: Duration) {
    #[cfg(target_os = "linux")]
    {
        let attr = libc::sched_attr {
            size: std::mem::size_of::<libc::sched_attr>() as u32,
            sched_policy: libc::SCHED_OTHER as u32,
            sched_flags: 0,
            sched_nice: 0,
            sched_priority: 0,
            sched_runtime: u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX),
            sched_deadline: 0,
            sched_period: 0,
        };
        // SAFETY: sched_setattr(2) on the calling thread (0) reads `size`
        // bytes of `attr`, which lives across the call; flags 0.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_setattr,
                0,
                &attr as *const libc::sched_attr,
                0,
            )
        };
        if r != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "the kernel keeps its own time slice for this thread"
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = slice;
}

/// Join an OS thread (a Wayland or PipeWire loop) that has been told to
/// stop, waiting at most `bound`; `false` if it is still running then (it
/// is left to end by itself). Polls instead of blocking a runtime thread in
/// `join`, so that a stuck thread costs nothing but the bound.
pub(crate) async fn join_thread(
    thread: std::thread::JoinHandle<()>,
    what: &str,
    bound: Duration,
) -> bool {
    let start = Instant::now();
    while !thread.is_finished() {
        if start.elapsed() >= bound {
            tracing::warn!(
                "the {what} thread did not stop within {} ms",
                bound.as_millis()
            );
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Finished: join returns at once.
    if thread.join().is_err() {
        tracing::warn!("the {what} thread panicked");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn levels_stop_in_order_and_each_waits_for_its_tasks() {
        let tree = Tree::new();
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        for level in [
            &tree.database,
            &tree.writers,
            &tree.sources,
            &tree.publishers,
        ] {
            let token = level.token();
            let order = order.clone();
            let name = level.name();
            level.spawn(async move {
                token.cancelled().await;
                // Work on the way out: the level waits for it.
                tokio::time::sleep(Duration::from_millis(5)).await;
                order.lock().unwrap_or_else(|e| e.into_inner()).push(name);
            });
        }
        tree.stop(&Bounds::default()).await;
        assert_eq!(
            *order.lock().unwrap_or_else(|e| e.into_inner()),
            vec!["publishers", "sources", "writers", "database"]
        );
        assert!(tree.root().is_cancelled());
    }

    #[tokio::test]
    async fn a_task_that_ignores_its_token_costs_the_bound_only() {
        let level = Level::detached("stuck");
        level.spawn(std::future::pending::<()>());
        assert!(!level.stop(Duration::from_millis(20)).await);
    }

    #[tokio::test]
    async fn a_lane_runs_its_level_s_tasks_on_its_own_thread_and_stops() {
        let lane = Lane::start("test", 1).expect("lane");
        let level = Level::detached("on the lane");
        let token = level.token();
        let on = level.spawn_on(
            async move {
                let name = std::thread::current().name().map(str::to_owned);
                token.cancelled().await;
                name
            },
            lane.handle(),
        );
        assert!(level.stop(Duration::from_secs(5)).await);
        assert_eq!(
            on.await.ok().flatten().as_deref(),
            Some("contextd-test"),
            "the task ran on the lane's threads"
        );
        assert!(lane.stop(Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn a_thread_is_joined_once_it_ends() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        let t2 = std::thread::spawn(|| {});
        assert!(join_thread(t2, "quick", Duration::from_secs(5)).await);
        let waiting = tokio::spawn(join_thread(t, "waiting", Duration::from_secs(5)));
        drop(tx);
        assert!(waiting.await.unwrap_or(false));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod slice_tests {
    use super::*;

    /// The kernel's release as (major, minor).
    fn kernel() -> (u32, u32) {
        let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut n = r.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
        (n.next().unwrap_or(0), n.next().unwrap_or(0))
    }

    /// The calling thread's `sched_runtime` as the kernel reports it.
    fn runtime() -> u64 {
        // SAFETY: an all-zero `sched_attr` is a valid value of the plain
        // C struct; sched_getattr(2) fills at most `size` bytes of it.
        let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::sched_attr>() as u32;
        // SAFETY: the calling thread (0), `attr` lives across the call,
        // `size` is its size, flags 0.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                0,
                &mut attr as *mut libc::sched_attr,
                size,
                0,
            )
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        attr.sched_runtime
    }

    #[test]
    fn an_answering_thread_runs_in_short_slices_where_the_kernel_has_them() {
        let got = std::thread::spawn(|| {
            short_slice(Duration::from_micros(500));
            runtime()
        })
        .join()
        .expect("thread");
        // EEVDF's slice requests for normal threads came with Linux 6.12.
        if kernel() >= (6, 12) {
            assert_eq!(got, 500_000);
        }
        // The other threads keep the kernel's.
        assert_ne!(runtime(), 500_000);
    }
}

//! Memory given back once a burst of work is over.
//!
//! glibc keeps what the broker frees for its own later use: with eight
//! arenas (src/bin/contextd.rs) the blocks freed after a burst (200 MCP
//! sessions, a flood of focus changes) are spread over all of them, and
//! glibc only returns the free top of a heap, never the free pages in
//! its middle. The broker lives all session long on a budget of about
//! 20 MB, so a burst would leave it holding half as much again for good
//! (`make soak`, "RSS after load"). Every [`EVERY`], when the heaps hold
//! more than [`SLACK`] free, `malloc_trim(0)` gives their free pages back
//! to the system (it walks every arena: well under a millisecond on a
//! heap this size). Under steady load little is free at any moment and
//! nothing happens; after the load the next tick gives it all back.
//! Before that, when SQLite holds more than the least it held after a
//! release, and has changed since the last one, the database's idle
//! connections give back their page caches and prepared statements
//! ([`Release`]): blocks made during the burst that would keep their heap
//! pages resident.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the heaps are looked at.
pub(crate) const EVERY: Duration = Duration::from_secs(5);

/// Free memory in the heaps worth giving back, in bytes.
pub(crate) const SLACK: usize = 1024 * 1024;

/// glibc's heaps (every arena): bytes in use, bytes free in them, and
/// bytes in blocks mapped on their own (large allocations).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap() -> (usize, usize, usize) {
    // SAFETY: mallinfo2(3) only reads the allocator's statistics.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks, m.fordblks, m.hblkhd)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap() -> (usize, usize, usize) {
    (0, 0, 0)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim(3) only releases free memory of glibc's heaps;
    // it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

/// SQLite's memory more than this over the least it held after a
/// release makes the next tick release its caches ([`Release`]).
pub(crate) const SQLITE_SLACK: i64 = 256 * 1024;

/// What else holds memory it can give back when asked: the database's
/// page caches and prepared statements (`store::Db::release_caches`),
/// released before the heaps are trimmed so that their pages go back too.
pub(crate) type Release =
    Box<dyn Fn() -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

/// Whether SQLite, holding `now`, should release its caches: over
/// [`SQLITE_SLACK`] above `floor` (the least it held after a release)
/// and changed since the last release left it at `after`.
fn release_due(now: i64, floor: i64, after: i64) -> bool {
    now > floor + SQLITE_SLACK && now != after
}

/// Give free heap memory back every [`EVERY`] while it exceeds
/// [`SLACK`], until `cancel`; first `release` when SQLite holds
/// [`SQLITE_SLACK`] more than the least it held after a release, and
/// has changed since the last one (an idle broker does not release
/// again and again what it cannot).
pub(crate) async fn give_back(cancel: CancellationToken, release: Release) {
    // SAFETY: sqlite3_memory_used only reads SQLite's global counter.
    let mut sqlite_floor = unsafe { libsqlite3_sys::sqlite3_memory_used() };
    let mut sqlite_after = sqlite_floor;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
        // What holds memory, for `make soak`'s "RSS after load" (which
        // reads this line) and for anyone asking why the broker is big.
        let (used, free, mapped) = heap();
        // SAFETY: sqlite3_memory_used only reads SQLite's global counter.
        let sqlite = unsafe { libsqlite3_sys::sqlite3_memory_used() };
        tracing::debug!(
            heap_used = used,
            heap_free = free,
            heap_mapped = mapped,
            sqlite,
            "memory"
        );
        // The floor is the least held after a release, not the last: a
        // release during a burst, with every connection busy, frees
        // little, and measured from there the release once the burst is
        // over would never come.
        if release_due(sqlite, sqlite_floor, sqlite_after) {
            release().await;
            // SAFETY: as above.
            sqlite_after = unsafe { libsqlite3_sys::sqlite3_memory_used() };
            sqlite_floor = sqlite_floor.min(sqlite_after);
            tracing::debug!(
                before = sqlite,
                after = sqlite_after,
                "database caches released"
            );
        }
        if free > SLACK {
            trim();
            tracing::trace!(free_before = free, free_after = heap().1, "heap trimmed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a burst the caches go back even when a release during it
    /// freed little; an idle broker holding what it cannot give back is
    /// not asked again and again.
    #[test]
    fn the_release_after_a_burst_comes_and_an_idle_one_does_not_repeat() {
        let (floor, mb) = (500_000, 1_000_000);
        // During the burst: a release left 1.1 MB (connections busy).
        assert!(release_due(floor + 2 * mb, floor, floor));
        // After it, still 1.1 MB but changed: released again.
        assert!(release_due(floor + mb + 1, floor, floor + mb));
        // Idle, nothing changed since that release: not again.
        assert!(!release_due(floor + mb, floor, floor + mb));
        // Within the slack: nothing to do.
        assert!(!release_due(floor + SQLITE_SLACK, floor, 0));
    }
}

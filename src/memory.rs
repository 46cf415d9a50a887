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
//!
//! What the broker holds is counted by [`Counting`], the daemon's global
//! allocator, and logged as `heap_used`; glibc's own figure, which also
//! counts the blocks its per-thread caches keep, as `malloc_in_use`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicPtr, AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Shards of [`Counting`]'s counter: more than the broker's threads that
/// allocate while they work (src/bin/contextd.rs names eight), so that two
/// rarely share one.
const SHARDS: usize = 16;

/// One shard on a cache line of its own (128 bytes: two lines, as the
/// adjacent-line prefetcher pulls them in pairs), so that threads counting
/// at once do not take the line from each other.
#[repr(align(128))]
struct Shard(AtomicIsize);

/// The bytes the broker's allocations hold now, counted as they are made
/// and freed: a global allocator wrapping [`System`] (glibc's malloc),
/// installed by the daemon's binary (src/bin/contextd.rs) and published
/// with [`Counting::publish`].
///
/// Why not glibc's own figure (`mallinfo2`'s `uordblks`, logged as
/// `malloc_in_use`): it counts the blocks kept in each thread's tcache as
/// in use, though the broker freed them. After a burst those caches hold
/// megabytes across the busy threads (2.3 MB before `make soak`'s load,
/// 7.0 MB after it, while heaptrack found 710 KB of the window's
/// allocations still live), so the soak's target, the heap in use coming
/// back after the load, would measure glibc's caches, not what the broker
/// keeps. This counts the sizes asked for, so it reads a little under
/// glibc's figure at rest (no chunk headers). Only Rust's allocations go
/// through it: SQLite's own mallocs are logged apart (`sqlite`, its
/// `sqlite3_memory_used`), and PipeWire's are in glibc's figure only.
///
/// Each thread adds to one of [`SHARDS`] padded counters (given it on its
/// first allocation), and a read sums them: no lock, no shared line
/// written by every thread, nothing allocated inside the allocator. A
/// shard may go negative (a thread freeing what another made); the sum is
/// exact once the threads are between allocations, and a read racing them
/// is off by what they are doing at that moment.
pub struct Counting {
    shards: [Shard; SHARDS],
}

/// The next shard handed to a thread, round robin.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard plus one (0: none given yet). A `Cell<usize>`
    /// with a `const` initialiser has no destructor and needs no lazy
    /// registration, so reading it in the allocator neither allocates nor
    /// fails while the thread is ending.
    static SHARD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// This thread's shard.
fn shard() -> usize {
    SHARD
        .try_with(|s| match s.get() {
            0 => {
                let n = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
                s.set(n + 1);
                n
            }
            n => n - 1,
        })
        .unwrap_or(0)
}

/// The daemon's counter once published ([`Counting::publish`]).
static PUBLISHED: AtomicPtr<Counting> = AtomicPtr::new(std::ptr::null_mut());

impl Counting {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Counting {
            shards: [const { Shard(AtomicIsize::new(0)) }; SHARDS],
        }
    }

    fn add(&self, bytes: isize) {
        self.shards[shard()].0.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The bytes live now (never negative: see the type's doc).
    pub fn live(&self) -> usize {
        let sum: isize = self
            .shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum();
        sum.max(0).unsigned_abs()
    }

    /// Make this counter the one [`heap_used`] reads: the allocator the
    /// binary installed (the library cannot name it).
    pub fn publish(&'static self) {
        PUBLISHED.store(std::ptr::from_ref(self).cast_mut(), Ordering::Release);
    }
}

/// Sizes fit in `isize` (`Layout` guarantees it).
fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

// SAFETY: every call is passed to `System` unchanged; the counter only
// adds the sizes of what `System` gave or took back, without allocating.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.add(signed(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.add(signed(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        self.add(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.add(signed(new_size) - signed(layout.size()));
        }
        p
    }
}

/// What the broker holds on the heap: the published [`Counting`]'s
/// figure, or glibc's bytes in use where none is (the tests and benches
/// linking the library use the system allocator).
fn heap_used(malloc_in_use: usize) -> usize {
    let counter = PUBLISHED.load(Ordering::Acquire);
    if counter.is_null() {
        return malloc_in_use;
    }
    // SAFETY: only `Counting::publish` stores here, from a `&'static`.
    unsafe { &*counter }.live()
}

/// How often the heaps are looked at while anything changes.
pub(crate) const EVERY: Duration = Duration::from_secs(5);

/// The longest wait between looks while nothing changes: each look that
/// finds the heaps, SQLite and the readers' buffers as the last one left
/// them doubles the wait up to this (an idle broker does not wake every
/// few seconds for nothing: `make bench`'s idle figures count every
/// wake-up); a change brings [`EVERY`] back.
pub(crate) const QUIET_MAX: Duration = Duration::from_secs(300);

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

/// What the broker's own buffers give back when their users are idle
/// (`core::watch::Rendered::release_idle`), asked on every tick before
/// the heaps are measured and trimmed; it decides itself whether it is
/// idle, and says whether it gave anything back.
pub(crate) type Idle = Box<dyn Fn() -> bool + Send + Sync>;

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
/// again and again what it cannot); before all that, `idle` (the
/// broker's buffers kept for readers, given back once readers are idle).
pub(crate) async fn give_back(cancel: CancellationToken, release: Release, idle: Idle) {
    // SAFETY: sqlite3_memory_used only reads SQLite's global counter.
    let mut sqlite_floor = unsafe { libsqlite3_sys::sqlite3_memory_used() };
    let mut sqlite_after = sqlite_floor;
    let mut wait = EVERY;
    // What the last look left: the heaps and SQLite's memory.
    let mut left: Option<((usize, usize, usize), i64)> = None;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        let gave = idle();
        if gave {
            tracing::trace!("buffers kept for idle readers released");
        }
        // What holds memory, for `make soak`'s "heap in use after load"
        // (which reads `heap_used` on this line) and for anyone asking
        // why the broker is big.
        let (in_use, free, mapped) = heap();
        // SAFETY: sqlite3_memory_used only reads SQLite's global counter.
        let sqlite = unsafe { libsqlite3_sys::sqlite3_memory_used() };
        if !gave && left == Some(((in_use, free, mapped), sqlite)) {
            // As the last look left it: nothing to give back that was not
            // tried (the line above still says what holds memory).
            wait = (wait * 2).min(QUIET_MAX);
            continue;
        }
        wait = EVERY;
        tracing::debug!(
            heap_used = heap_used(in_use),
            malloc_in_use = in_use,
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
        // SAFETY: as above.
        left = Some((heap(), unsafe { libsqlite3_sys::sqlite3_memory_used() }));
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

    /// A counter of its own (the tests run on the system allocator), so
    /// that other tests' allocations do not move it.
    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).expect("layout")
    }

    /// alloc adds what was asked, dealloc takes it back, realloc the
    /// difference either way, alloc_zeroed adds and gives zeroes.
    #[test]
    fn the_counter_follows_alloc_dealloc_realloc_and_zeroed() {
        let c = Counting::new();
        assert_eq!(c.live(), 0);
        // SAFETY: every block is made, resized and freed with its layout.
        unsafe {
            let a = c.alloc(layout(1000));
            assert!(!a.is_null());
            assert_eq!(c.live(), 1000);
            let z = c.alloc_zeroed(layout(4096));
            assert!(!z.is_null());
            assert!(std::slice::from_raw_parts(z, 4096).iter().all(|b| *b == 0));
            assert_eq!(c.live(), 5096);
            let a = c.realloc(a, layout(1000), 3000);
            assert!(!a.is_null());
            assert_eq!(c.live(), 7096);
            let a = c.realloc(a, layout(3000), 10);
            assert!(!a.is_null());
            assert_eq!(c.live(), 4106);
            c.dealloc(a, layout(10));
            c.dealloc(z, layout(4096));
        }
        assert_eq!(c.live(), 0);
    }

    /// Many threads allocating and freeing at once, some freeing what
    /// others made: the sum is exact once they are done, whatever shard
    /// each counted on.
    #[test]
    fn the_counter_is_exact_across_many_threads() {
        static C: Counting = Counting::new();
        const THREADS: usize = 24;
        const ROUNDS: usize = 2000;
        // Blocks made on one thread and freed on the next.
        let (tx, rx) = std::sync::mpsc::channel::<usize>();
        let handed = std::sync::Mutex::new(rx);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let tx = tx.clone();
                let handed = &handed;
                s.spawn(move || {
                    for i in 0..ROUNDS {
                        let size = 16 + (t * 7 + i) % 300;
                        // SAFETY: made and freed with the same layout.
                        unsafe {
                            let p = C.alloc(layout(size));
                            assert!(!p.is_null());
                            let p = C.realloc(p, layout(size), size * 2);
                            assert!(!p.is_null());
                            if i % 10 == 0 {
                                C.dealloc(p, layout(size * 2));
                                let q = C.alloc(layout(64));
                                assert!(!q.is_null());
                                tx.send(q as usize).expect("send");
                            } else {
                                C.dealloc(p, layout(size * 2));
                            }
                        }
                    }
                    // Free some of what others made.
                    for _ in 0..ROUNDS / 20 {
                        let q = handed.lock().expect("lock").try_recv();
                        if let Ok(q) = q {
                            // SAFETY: made above with this layout.
                            unsafe { C.dealloc(q as *mut u8, layout(64)) };
                        }
                    }
                });
            }
        });
        drop(tx);
        let left: Vec<usize> = handed.into_inner().expect("lock").into_iter().collect();
        assert_eq!(C.live(), left.len() * 64, "what is still out");
        for q in left {
            // SAFETY: made above with this layout.
            unsafe { C.dealloc(q as *mut u8, layout(64)) };
        }
        assert_eq!(C.live(), 0);
    }

    /// Unpublished (the library's tests, the benches), `heap_used` is
    /// glibc's figure as before.
    #[test]
    fn without_the_counter_the_heap_in_use_is_glibcs() {
        assert!(PUBLISHED.load(Ordering::Acquire).is_null());
        assert_eq!(heap_used(12345), 12345);
    }
}

//! Who reads now, for the privacy indicators: an app or host is reading
//! while it holds a live reader (a D-Bus subscription, an MCP session or
//! listen stream: `core::readers`) or made an allowed read in the last
//! few seconds (10 by default, `[ui] recent_read_s`).
//!
//! Reads are the hot path, so the last read of each app is kept where a
//! read can set it without a lock ([`Marks::note`]): each app has an
//! atomic slot, found through a per-thread cache of the shared table
//! (which is locked only the first time a thread sees an app), and
//! written at most every [`GRANULE_MS`] (the cache line stays shared
//! while an app reads in a loop). Only a read after a quiet spell wakes
//! the core's task ([`run`]), which recomputes the set, publishes it when
//! it changed ([`super::indicators::Indicators::follow_reading`]: a
//! `watch`, so publishers wait on it and never poll), and sleeps until
//! the next read falls out of the window.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::AppId;
use tokio::sync::{Notify, watch};

/// How much a recorded last read may lag the real one (ms): a slot is
/// written only when its time moved by this much.
pub(super) const GRANULE_MS: u64 = 100;

/// The last read of one app: milliseconds since [`MarksInner::base`],
/// plus one (0: never).
#[derive(Debug, Default)]
struct Slot {
    last: AtomicU64,
}

#[derive(Debug)]
struct MarksInner {
    /// Tells this table's entries apart in the per-thread caches.
    id: u64,
    base: Instant,
    /// The window, in ms (set once at start; a read is "recent" within it).
    window_ms: AtomicU64,
    slots: Mutex<HashMap<AppId, Arc<Slot>>>,
    /// Woken by a read that starts an app reading again.
    wake: Notify,
}

/// The last read of each app (the gate notes every allowed access).
#[derive(Debug, Clone)]
pub(crate) struct Marks(Arc<MarksInner>);

static NEXT_MARKS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Per thread: each table's slots this thread has seen.
    static CACHE: RefCell<HashMap<u64, HashMap<AppId, Arc<Slot>>>> = RefCell::new(HashMap::new());
}

/// The default window: an app that read in the last 10 s reads now.
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

impl Default for Marks {
    fn default() -> Self {
        Marks(Arc::new(MarksInner {
            id: NEXT_MARKS.fetch_add(1, Ordering::Relaxed),
            base: Instant::now(),
            window_ms: AtomicU64::new(ms(DEFAULT_WINDOW)),
            slots: Mutex::new(HashMap::new()),
            wake: Notify::new(),
        }))
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Marks {
    /// How long a read counts as recent (`[ui] recent_read_s`).
    pub(super) fn set_window(&self, window: Duration) {
        self.0.window_ms.store(ms(window), Ordering::Relaxed);
    }

    /// Until a read after a quiet spell wakes the indicators' task.
    pub(super) async fn woken(&self) {
        self.0.wake.notified().await;
    }

    fn now(&self) -> u64 {
        ms(self.0.base.elapsed()) + 1
    }

    fn window(&self) -> u64 {
        self.0.window_ms.load(Ordering::Relaxed)
    }

    fn shared_slot(&self, app: &AppId) -> Arc<Slot> {
        self.0
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(app.clone())
            .or_default()
            .clone()
    }

    /// `app` read now (an allowed access). No lock once this thread has
    /// seen `app`; wakes the core's task only when `app` had not read
    /// within the window.
    pub(crate) fn note(&self, app: &AppId) {
        let now = self.now();
        let set = |slot: &Slot| {
            let prev = slot.last.load(Ordering::Relaxed);
            if prev == 0 || now.saturating_sub(prev) >= GRANULE_MS {
                slot.last.store(now, Ordering::Relaxed);
            }
            prev
        };
        let prev = CACHE
            .try_with(|cache| {
                let mut cache = cache.borrow_mut();
                let mine = cache.entry(self.0.id).or_default();
                if let Some(slot) = mine.get(app) {
                    return set(slot);
                }
                let slot = self.shared_slot(app);
                let prev = set(&slot);
                mine.insert(app.clone(), slot);
                prev
            })
            // The thread is ending: its cache is gone, the table is not.
            .unwrap_or_else(|_| set(&self.shared_slot(app)));
        if prev == 0 || now.saturating_sub(prev) >= self.window() {
            self.0.wake.notify_one();
        }
    }

    /// The apps that read within the window, and when the first of them
    /// falls out of it (from now).
    pub(super) fn recent(&self) -> (BTreeSet<AppId>, Option<Duration>) {
        let now = self.now();
        let window = self.window();
        let mut apps = BTreeSet::new();
        let mut next: Option<u64> = None;
        for (app, slot) in self
            .0
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let last = slot.last.load(Ordering::Relaxed);
            if last == 0 {
                continue;
            }
            let age = now.saturating_sub(last);
            if age < window {
                apps.insert(app.clone());
                let left = window - age;
                next = Some(next.map_or(left, |n| n.min(left)));
            }
        }
        (apps, next.map(Duration::from_millis))
    }
}

/// Who reads now, as the indicators show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// Every app reading now (a live reader, or a read in the window).
    pub(crate) apps: BTreeSet<AppId>,
    /// The live readers' ids (what `EndReader` takes), so that a menu
    /// hears of a second reader of an app already listed.
    pub(crate) live: Vec<u64>,
}

impl Reading {
    pub(crate) fn anyone(&self) -> bool {
        !self.apps.is_empty()
    }
}

/// One app reading now, for a menu: its live readers (each can be
/// ended), or none when it only read in the last seconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct ReadingView {
    /// The live reader's id for `EndReader`; 0 when the app only read in
    /// the last seconds (nothing to end: no stream is open).
    pub(crate) id: u64,
    pub(crate) app_id: String,
    /// The desktop name of the app, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) icon: Option<String>,
    /// The MCP host's `clientInfo`, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) client: Option<String>,
    /// `subscription`, `stdio`, `http`, `sse`, or `read` (a recent read).
    pub(crate) transport: &'static str,
    /// How the indicator names it: the client, the name or the app id.
    pub(crate) label: String,
}

/// The watch every indicator follows.
#[derive(Debug)]
pub(crate) struct Feed {
    pub(super) tx: watch::Sender<Reading>,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            tx: watch::channel(Reading::default()).0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_recent_for_the_window_and_wakes_only_after_a_quiet_spell() {
        let m = Marks::default();
        m.0.window_ms.store(1000, Ordering::Relaxed);
        let app = AppId::new("org.example.App").expect("app");
        assert!(m.recent().0.is_empty());
        m.note(&app);
        let (apps, next) = m.recent();
        assert!(apps.contains(&app));
        assert!(next.is_some_and(|n| n <= Duration::from_secs(1)));
        // From another thread (its own cache), the same slot.
        let m2 = m.clone();
        let a2 = app.clone();
        std::thread::spawn(move || m2.note(&a2))
            .join()
            .expect("thread");
        assert_eq!(m.0.slots.lock().expect("lock").len(), 1);
        // Out of the window: nobody.
        for slot in m.0.slots.lock().expect("lock").values() {
            slot.last.store(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(1100));
        assert!(m.recent().0.is_empty());
    }
}

//! What the recorder handed over and the writer has not taken yet.
//!
//! The recorder runs inside the state's `apply`, synchronously, so handing
//! over must never wait for the database, and a burst of changes must not
//! grow memory or a transaction without bound. Three rules keep it so:
//!
//! - **Bounded batches.** The writer takes at most [`BATCH`] operations per
//!   transaction (tens of milliseconds of work), so that under a sustained
//!   burst it commits every batch instead of one ever larger transaction a
//!   second that a crash loses whole.
//! - **A row opened and closed while pending is one insert**, not an
//!   insert and an update.
//! - **Back-pressure drops, never blocks.** Once [`CAPACITY`] slots wait,
//!   new intervals are refused and counted (the writer warns with the
//!   count); their closes are then ignored. Closes of accepted intervals
//!   are always taken (there are only as many as intervals are open: the
//!   focus, the streams, the session states), so nothing already recorded
//!   is left open.

use std::collections::{HashMap, HashSet, VecDeque};

use chrono::{DateTime, Utc};

use crate::core::history::{HistoryEvent, HistoryOp};

/// Operations per transaction.
pub(crate) const BATCH: usize = 1000;
/// Slots held while the writer is behind: a few batches. A title is at
/// most 1024 characters, so this stays within a few megabytes.
pub(crate) const CAPACITY: usize = 4 * BATCH;

#[derive(Debug)]
enum Slot {
    /// A row; closed already when its `end` is set.
    Row(HistoryEvent),
    /// The end of a row the writer has taken.
    Close { id: i64, end: DateTime<Utc> },
}

/// What the writer takes at once.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Batch {
    pub ops: Vec<HistoryOp>,
    /// Intervals refused because the writer was behind, since the last batch.
    pub dropped: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Pending {
    slots: VecDeque<Slot>,
    /// The position of `slots[0]` counted from the first slot ever pushed,
    /// so that the positions below stay valid while the writer takes from
    /// the front.
    base: usize,
    /// Rows still here, by id: their position.
    rows: HashMap<i64, usize>,
    /// Intervals opened and not closed, here or written already.
    open: HashSet<i64>,
    /// Intervals refused while full, open still: their close is ignored.
    refused: HashSet<i64>,
    dropped: u64,
}

impl Pending {
    /// Operations waiting to be written.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn push(&mut self, op: HistoryOp) {
        match op {
            HistoryOp::Open(e) => self.open(e),
            HistoryOp::Close { id, end } => self.close(id, end),
        }
    }

    fn open(&mut self, e: HistoryEvent) {
        if self.slots.len() >= CAPACITY {
            if e.end.is_none() {
                self.refused.insert(e.id);
            }
            self.dropped += 1;
            return;
        }
        if e.end.is_none() {
            self.open.insert(e.id);
        }
        self.rows.insert(e.id, self.base + self.slots.len());
        self.slots.push_back(Slot::Row(e));
    }

    fn close(&mut self, id: i64, end: DateTime<Utc>) {
        if self.refused.remove(&id) {
            return;
        }
        // Not open: closed already, or never recorded.
        if !self.open.remove(&id) {
            return;
        }
        match self.rows.get(&id) {
            Some(&at) => {
                if let Some(Slot::Row(r)) = self.slots.get_mut(at - self.base) {
                    r.end = Some(end);
                }
            }
            None => self.slots.push_back(Slot::Close { id, end }),
        }
    }

    /// Up to `max` operations from the front, in the order they came, and
    /// what was dropped since the last time.
    pub(crate) fn take(&mut self, max: usize) -> Batch {
        let mut ops = Vec::new();
        while ops.len() < max {
            let Some(slot) = self.slots.pop_front() else {
                break;
            };
            self.base += 1;
            match slot {
                Slot::Row(e) => {
                    self.rows.remove(&e.id);
                    ops.push(HistoryOp::Open(e));
                }
                Slot::Close { id, end } => ops.push(HistoryOp::Close { id, end }),
            }
        }
        Batch {
            ops,
            dropped: std::mem::take(&mut self.dropped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::history::HistoryKind;
    use chrono::{TimeDelta, TimeZone};

    fn at(us: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0)
            .single()
            .expect("date")
            + TimeDelta::microseconds(us)
    }

    fn row(id: i64, kind: HistoryKind, app: &str, start: DateTime<Utc>) -> HistoryEvent {
        HistoryEvent {
            id,
            kind,
            app_id: Some(app.into()),
            title: Some(format!("{app} title")),
            detail: None,
            start,
            end: None,
        }
    }

    /// The recorder's operations for a focus change at `us` from the
    /// interval `from` to a new one `to` of `app`.
    fn focus(p: &mut Pending, from: Option<i64>, to: i64, app: &str, us: i64) {
        if let Some(id) = from {
            p.push(HistoryOp::Close { id, end: at(us) });
        }
        p.push(HistoryOp::Open(row(to, HistoryKind::Focus, app, at(us))));
    }

    #[test]
    fn batches_are_bounded_and_keep_the_order() {
        let mut p = Pending::default();
        // 2500 focus intervals of 5 ms, each opened and closed here.
        let n = 2500;
        for i in 0..n {
            let app = ["a", "b"][i as usize % 2];
            focus(&mut p, (i > 0).then_some(i), i + 1, app, i * 5_000);
        }
        assert_eq!(p.len(), n as usize);
        let mut all = Vec::new();
        loop {
            let b = p.take(BATCH);
            if b.ops.is_empty() {
                break;
            }
            assert!(b.ops.len() <= BATCH);
            all.extend(b.ops);
        }
        assert_eq!(all.len(), n as usize);
        let ids: Vec<i64> = all
            .iter()
            .map(|op| match op {
                HistoryOp::Open(e) => e.id,
                HistoryOp::Close { id, .. } => *id,
            })
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order");
        assert!(matches!(&all[0], HistoryOp::Open(e) if e.end == Some(at(5_000))));
        assert!(matches!(all.last(), Some(HistoryOp::Open(e)) if e.end.is_none()));
    }

    #[test]
    fn when_the_writer_is_behind_new_intervals_are_dropped_and_counted() {
        let mut p = Pending::default();
        // A capture stream, written; then the writer stops taking.
        let mic = row(1, HistoryKind::Capture, "rec", at(0));
        p.push(HistoryOp::Open(mic));
        p.take(BATCH);
        let n = CAPACITY as i64 + 100;
        for i in 0..n {
            let app = ["a", "b"][i as usize % 2];
            focus(
                &mut p,
                (i > 0).then_some(i + 1),
                i + 2,
                app,
                1_000 + i * 5_000,
            );
        }
        assert_eq!(p.len(), CAPACITY, "bounded");
        // The stream's end is kept (nothing recorded stays open); the
        // refused interval's end is ignored.
        p.push(HistoryOp::Close {
            id: 1,
            end: at(n * 5_000),
        });
        p.push(HistoryOp::Close {
            id: n + 1,
            end: at(n * 5_000),
        });
        assert_eq!(p.len(), CAPACITY + 1);
        assert!(p.refused.is_empty() && p.open.is_empty());
        let b = p.take(BATCH);
        assert_eq!(b.dropped, 100);
        assert_eq!(b.ops.len(), BATCH);
        let mut rest = Vec::new();
        while p.len() > 0 {
            let b = p.take(BATCH);
            assert_eq!(b.dropped, 0, "counted once");
            rest.extend(b.ops);
        }
        assert_eq!(
            rest.last(),
            Some(&HistoryOp::Close {
                id: 1,
                end: at(n * 5_000)
            })
        );
        // Room again: recorded as before.
        focus(&mut p, None, n + 2, "a", n * 5_000);
        assert_eq!(p.len(), 1);
    }
}

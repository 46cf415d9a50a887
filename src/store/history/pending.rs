//! What the recorder handed over and the writer has not taken yet.
//!
//! The recorder runs inside the state's `apply`, synchronously, so handing
//! over must never wait for the database, and a burst of changes must not
//! grow memory or a transaction without bound. Four rules keep it so:
//!
//! - **Bounded batches.** The writer takes at most [`BATCH`] operations per
//!   transaction (tens of milliseconds of work), so that under a sustained
//!   burst it commits every batch instead of one ever larger transaction a
//!   second that a crash loses whole.
//! - **A row opened and closed while pending is one insert**, not an
//!   insert and an update.
//! - **Focus flapping is coalesced while it is pending** (see [`FLAP`]).
//! - **Back-pressure drops, never blocks.** Once [`CAPACITY`] slots wait,
//!   new intervals are refused and counted (the writer warns with the
//!   count); their closes are then ignored. Closes of accepted intervals
//!   are always taken (there are only as many as intervals are open: the
//!   focus, the streams, the session states), so nothing already recorded
//!   is left open.

use std::collections::{HashMap, HashSet, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};

use crate::core::history::{HistoryEvent, HistoryKind, HistoryOp};

/// Operations per transaction.
pub(crate) const BATCH: usize = 1000;
/// Slots held while the writer is behind: four batches, a fraction of a
/// second of its work. A row is a few hundred bytes, so about a megabyte
/// (16 MB if every title had the 1024 characters a title may have).
pub(crate) const CAPACITY: usize = 4 * BATCH;

/// The slots kept room for once the writer has taken them all (see
/// [`Pending::shrink_when_drained`]): the few operations an idle desktop
/// hands over between two batches.
pub(crate) const KEPT: usize = 32;

/// A focus interval shorter than this is not a timeline row.
///
/// Nobody reads, types into or even sees a window for less than a
/// millisecond: such intervals come from a compositor passing the focus
/// through a window (a workspace switch, a dialog closed and reopened) or
/// from a client that flaps, and a row each would fill the timeline and
/// the disk with noise. When the next focus interval starts within a
/// millisecond of the end of the last one and shows the same app id and
/// title, the earlier row simply goes on: A, B for 0.2 ms, A again is one
/// row of A. So is a move between two windows with the same app id and
/// title, which the timeline could not tell apart anyway (its rows keep no
/// window id).
///
/// Each such step leaves out, or gives to its neighbour, less than a
/// millisecond. In a sustained focus fight between two clients (thousands
/// of sub-millisecond visits a second) the steps add up: the window that
/// had the focus when the fight began keeps its row until the focus stays
/// somewhere for a millisecond or more. The timeline shows where the focus
/// settles, not every visit on the way.
///
/// Only what is still pending is coalesced: a row the writer has taken is
/// written as it is, so the timeline never changes after the fact. Other
/// kinds are never coalesced: a microphone used for a microsecond is still
/// a capture the user may want to know about, and a notification is a
/// point.
pub(crate) const FLAP: TimeDelta = TimeDelta::milliseconds(1);

#[derive(Debug)]
enum Slot {
    /// A row; closed already when its `end` is set.
    Row(HistoryEvent),
    /// The end of a row the writer has taken.
    Close { id: i64, end: DateTime<Utc> },
    /// Coalesced away.
    Gone,
}

/// A focus interval's app id and title.
#[derive(Debug)]
struct Named {
    app_id: Option<String>,
    title: Option<String>,
}

/// The last focus interval that ended, where its end waits.
#[derive(Debug)]
struct Ended {
    id: i64,
    at: usize,
    app_id: Option<String>,
    title: Option<String>,
    end: DateTime<Utc>,
}

/// What the writer takes at once.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Batch {
    pub ops: Vec<HistoryOp>,
    /// Intervals refused because the writer was behind, since the last batch.
    pub dropped: u64,
    /// Focus rows coalesced away or continued, since the last batch.
    pub coalesced: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Pending {
    slots: VecDeque<Slot>,
    /// The position of `slots[0]` counted from the first slot ever pushed,
    /// so that the positions below stay valid while the writer takes from
    /// the front.
    base: usize,
    /// Slots that are not `Gone`.
    live: usize,
    /// Rows still here, by id: their position.
    rows: HashMap<i64, usize>,
    /// Intervals opened and not closed, here or written already: their
    /// kind, and a focus interval's names (`focus`).
    open: HashMap<i64, HistoryKind>,
    /// The app id and title of the focus intervals in `open` (what
    /// [`Pending::resume`] compares). Other kinds keep no copy of their
    /// names: a thousand apps' open documents and tasks held two strings
    /// each, in a map of wide slots, for nothing (heaptrack, the provider
    /// bench).
    focus: HashMap<i64, Named>,
    /// Focus intervals that continue an earlier row: that row's id.
    continues: HashMap<i64, i64>,
    /// Intervals refused while full, open still: their close is ignored.
    refused: HashSet<i64>,
    /// The last focus interval that ended, while its end is here.
    ended: Option<Ended>,
    dropped: u64,
    coalesced: u64,
}

impl Pending {
    /// Operations waiting to be written.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn push(&mut self, op: HistoryOp) {
        match op {
            HistoryOp::Open(e) => self.open(e),
            HistoryOp::Close { id, end } => self.close(id, end),
        }
    }

    fn open(&mut self, e: HistoryEvent) {
        if e.end.is_none() && e.kind == HistoryKind::Focus && self.resume(&e) {
            return;
        }
        if self.slots.len() >= CAPACITY {
            if e.end.is_none() {
                self.refused.insert(e.id);
            }
            self.dropped += 1;
            return;
        }
        if e.end.is_none() {
            if e.kind == HistoryKind::Focus {
                self.focus.insert(
                    e.id,
                    Named {
                        app_id: e.app_id.clone(),
                        title: e.title.clone(),
                    },
                );
            }
            self.open.insert(e.id, e.kind);
        }
        self.rows.insert(e.id, self.base + self.slots.len());
        self.slots.push_back(Slot::Row(e));
        self.live += 1;
    }

    /// When focus interval `e` starts within [`FLAP`] of the end of the
    /// last one, with the same app id and title, and that end is still
    /// here (not written), the last row goes on instead of a new one.
    fn resume(&mut self, e: &HistoryEvent) -> bool {
        let Some(ended) = &self.ended else {
            return false;
        };
        let gap = e.start - ended.end;
        if ended.at < self.base
            || gap < TimeDelta::zero()
            || gap >= FLAP
            || ended.app_id != e.app_id
            || ended.title != e.title
        {
            return false;
        }
        let Some(ended) = self.ended.take() else {
            return false;
        };
        match self.slots.get_mut(ended.at - self.base) {
            Some(Slot::Row(r)) if r.id == ended.id => r.end = None,
            Some(slot @ Slot::Close { .. }) => {
                *slot = Slot::Gone;
                self.live -= 1;
            }
            _ => return false,
        }
        self.open.insert(ended.id, HistoryKind::Focus);
        self.focus.insert(
            ended.id,
            Named {
                app_id: ended.app_id,
                title: ended.title,
            },
        );
        self.continues.insert(e.id, ended.id);
        self.coalesced += 1;
        self.trim();
        true
    }

    fn close(&mut self, id: i64, end: DateTime<Utc>) {
        let id = self.continues.remove(&id).unwrap_or(id);
        if self.refused.remove(&id) {
            return;
        }
        // Not open: closed already, or never recorded.
        let Some(kind) = self.open.remove(&id) else {
            return;
        };
        let focus = kind == HistoryKind::Focus;
        let named = self.focus.remove(&id);
        let at = match self.rows.get(&id) {
            Some(&at) => {
                let Some(Slot::Row(r)) = self.slots.get_mut(at - self.base) else {
                    return;
                };
                if focus && end - r.start < FLAP {
                    self.slots[at - self.base] = Slot::Gone;
                    self.rows.remove(&id);
                    self.live -= 1;
                    self.coalesced += 1;
                    self.trim();
                    return;
                }
                r.end = Some(end);
                at
            }
            None => {
                self.slots.push_back(Slot::Close { id, end });
                self.live += 1;
                self.base + self.slots.len() - 1
            }
        };
        if let Some(Named { app_id, title }) = named {
            self.ended = Some(Ended {
                id,
                at,
                app_id,
                title,
                end,
            });
        }
    }

    /// Coalesced slots at the end go at once; the others when taken.
    fn trim(&mut self) {
        while matches!(self.slots.back(), Some(Slot::Gone)) {
            self.slots.pop_back();
        }
    }

    /// Once the writer has taken everything, give back the room a burst
    /// made beyond [`KEPT`]: the slots and their index grew to thousands
    /// in a focus flood and kept that room for good (heaptrack, `make
    /// soak`: 61 KB after the load). On the way to empty only, so a
    /// steady load pays at most a few regrowths per batch, never one per
    /// operation.
    fn shrink_when_drained(&mut self) {
        if !self.slots.is_empty() {
            return;
        }
        if self.slots.capacity() > KEPT {
            self.slots.shrink_to(KEPT);
        }
        if self.rows.capacity() > KEPT {
            self.rows.shrink_to(KEPT);
        }
    }

    /// Up to `max` operations from the front, in the order they came, and
    /// what was dropped or coalesced since the last time.
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
                    self.live -= 1;
                    ops.push(HistoryOp::Open(e));
                }
                Slot::Close { id, end } => {
                    self.live -= 1;
                    ops.push(HistoryOp::Close { id, end });
                }
                Slot::Gone => {}
            }
        }
        self.shrink_when_drained();
        Batch {
            ops,
            dropped: std::mem::take(&mut self.dropped),
            coalesced: std::mem::take(&mut self.coalesced),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

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

    fn closed(e: &HistoryEvent, end: i64) -> HistoryOp {
        HistoryOp::Open(HistoryEvent {
            end: Some(at(end)),
            ..e.clone()
        })
    }

    #[test]
    fn focus_flapping_under_a_millisecond_is_coalesced() {
        let mut p = Pending::default();
        focus(&mut p, None, 1, "a", 0);
        // A for 10 ms, B for 0.2 ms, A again: one row of A.
        focus(&mut p, Some(1), 2, "b", 10_000);
        focus(&mut p, Some(2), 3, "a", 10_200);
        // Then B for 0.3 ms and C for 0.5 ms: the gap is 0.8 ms, A goes on.
        focus(&mut p, Some(3), 4, "b", 20_000);
        focus(&mut p, Some(4), 5, "c", 20_300);
        focus(&mut p, Some(5), 6, "a", 20_800);
        // B for 2 ms is a row; A after it is a row of its own.
        focus(&mut p, Some(6), 7, "b", 30_000);
        focus(&mut p, Some(7), 8, "a", 32_000);
        p.push(HistoryOp::Close {
            id: 8,
            end: at(40_000),
        });
        // Other kinds are kept however short: a microphone for 10 µs, a
        // notification (a point).
        let mic = row(9, HistoryKind::Capture, "rec", at(41_000));
        p.push(HistoryOp::Open(mic.clone()));
        p.push(HistoryOp::Close {
            id: 9,
            end: at(41_010),
        });
        let note = row(10, HistoryKind::Notification, "chat", at(42_000));
        p.push(HistoryOp::Open(note.clone()));
        p.push(HistoryOp::Close {
            id: 10,
            end: at(42_000),
        });
        assert_eq!(p.len(), 5);
        let b = p.take(BATCH);
        assert_eq!(
            b.ops,
            vec![
                closed(&row(1, HistoryKind::Focus, "a", at(0)), 30_000),
                closed(&row(7, HistoryKind::Focus, "b", at(30_000)), 32_000),
                closed(&row(8, HistoryKind::Focus, "a", at(32_000)), 40_000),
                closed(&mic, 41_010),
                closed(&note, 42_000),
            ]
        );
        // B, C, B dropped; A continued twice.
        assert_eq!((b.coalesced, b.dropped), (5, 0));
        assert_eq!(p.len(), 0);
        assert!(p.slots.is_empty() && p.rows.is_empty() && p.open.is_empty() && p.focus.is_empty());
        assert!(p.continues.is_empty());

        // From one window of A to another with the same title: one row.
        focus(&mut p, None, 11, "a", 50_000);
        focus(&mut p, Some(11), 12, "a", 60_000);
        assert_eq!(
            p.take(BATCH).ops,
            vec![HistoryOp::Open(row(
                11,
                HistoryKind::Focus,
                "a",
                at(50_000)
            ))]
        );
    }

    #[test]
    fn a_row_taken_by_the_writer_is_written_as_it_is() {
        let mut p = Pending::default();
        focus(&mut p, None, 1, "a", 0);
        assert_eq!(p.take(BATCH).ops.len(), 1, "A opened, written");
        // A ends after 0.5 ms: its row exists, so it is closed, not dropped.
        focus(&mut p, Some(1), 2, "b", 500);
        let b = p.take(BATCH);
        assert_eq!(
            b.ops,
            vec![
                HistoryOp::Close {
                    id: 1,
                    end: at(500)
                },
                HistoryOp::Open(row(2, HistoryKind::Focus, "b", at(500))),
            ]
        );
        // B ends at 10 ms, and the focus comes back to B in 0.1 ms while
        // the end is still here: the written row is reopened (its close
        // is not written), and the next close is its close.
        focus(&mut p, Some(2), 3, "c", 10_000);
        focus(&mut p, Some(3), 4, "b", 10_100);
        focus(&mut p, Some(4), 5, "c", 20_000);
        assert_eq!(
            p.take(BATCH).ops,
            vec![
                HistoryOp::Close {
                    id: 2,
                    end: at(20_000)
                },
                HistoryOp::Open(row(5, HistoryKind::Focus, "c", at(20_000))),
            ]
        );
        // C's end taken, then back to C within 0.1 ms: a new row.
        focus(&mut p, Some(5), 6, "d", 30_000);
        p.push(HistoryOp::Close {
            id: 6,
            end: at(30_050),
        });
        assert_eq!(p.take(1).ops.len(), 1, "C's end taken");
        p.push(HistoryOp::Open(row(7, HistoryKind::Focus, "c", at(30_100))));
        assert_eq!(
            p.take(BATCH).ops,
            vec![HistoryOp::Open(row(7, HistoryKind::Focus, "c", at(30_100)))]
        );
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

    /// A focus flood grows the slots to thousands; once the writer has
    /// taken them all the room goes back, and the small batches of an
    /// idle desktop afterwards fit in what is kept (no regrowth).
    #[test]
    fn a_burst_taken_whole_leaves_the_room_of_a_few() {
        let mut p = Pending::default();
        let n = 3000;
        for i in 0..n {
            let app = ["a", "b"][i as usize % 2];
            focus(&mut p, (i > 0).then_some(i), i + 1, app, i * 5_000);
        }
        assert!(p.slots.capacity() >= n as usize);
        let first = p.take(BATCH);
        assert_eq!(first.ops.len(), BATCH);
        assert!(
            p.slots.capacity() >= BATCH,
            "kept while operations still wait"
        );
        while !p.take(BATCH).ops.is_empty() {}
        assert!(p.slots.capacity() <= KEPT, "{}", p.slots.capacity());
        assert!(p.rows.capacity() <= 2 * KEPT, "{}", p.rows.capacity());
        // Idle afterwards: one change at a time, the room stays as it is.
        let kept = p.slots.capacity();
        for i in n..n + 50 {
            let app = ["a", "b"][i as usize % 2];
            focus(&mut p, Some(i), i + 1, app, i * 5_000);
            assert_eq!(p.take(BATCH).ops.len(), 2);
            assert_eq!(p.slots.capacity(), kept);
        }
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
        assert!(p.refused.is_empty() && p.open.is_empty() && p.focus.is_empty());
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

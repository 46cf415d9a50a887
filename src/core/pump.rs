//! The event pump: the hot path's one loop. Every source sends its
//! [`SourceEvent`]s into one channel; the pump applies them to the state
//! one at a time, in the order they arrive, and tells the state's
//! observer (the timeline) when sharing is paused or resumed, so that the
//! observer has one feed, in order: a change and a pause never race.
//!
//! Why in core: what reaches the state, in which order, and what the
//! timeline hears on a pause and at the end are decisions; the daemon
//! only makes the channel, hands the senders to the sources and spawns
//! [`Pump::run`] into the sources' level of the shutdown tree.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::event::SourceEvent;
use super::gate::Gate;
use super::state::State;

/// Events waiting for the pump before a source's `send` waits: a burst
/// (a compositor's first window list, a replay) fits; a source that
/// outruns the state is slowed rather than its events dropped.
const CAPACITY: usize = 1024;

/// The receiving end of the sources' channel, and what the pump needs
/// besides the state and the gate.
#[derive(Debug)]
pub(crate) struct Pump {
    events: mpsc::Receiver<SourceEvent>,
    /// The scripted clock that a replay's `Clock` events move (a build
    /// with the `replay` feature, `--fake-clock`).
    #[cfg(feature = "replay")]
    clock: Option<std::sync::Arc<super::clock::ManualClock>>,
}

/// The sources' channel: the sender for every source (cloned), and the
/// pump that applies what they send.
pub(crate) fn channel() -> (mpsc::Sender<SourceEvent>, Pump) {
    let (tx, events) = mpsc::channel(CAPACITY);
    (
        tx,
        Pump {
            events,
            #[cfg(feature = "replay")]
            clock: None,
        },
    )
}

impl Pump {
    /// A replay's `Clock` events set `clock`, in order with the events
    /// around them (without one they are ignored: the system clock is
    /// not the replay's to move).
    #[cfg(feature = "replay")]
    pub(crate) fn with_clock(
        mut self,
        clock: Option<std::sync::Arc<super::clock::ManualClock>>,
    ) -> Pump {
        self.clock = clock;
        self
    }

    /// Whether `ev` is a replay's clock move (then it is not the
    /// state's).
    #[cfg(feature = "replay")]
    fn moved(&self, ev: &SourceEvent) -> bool {
        let SourceEvent::Clock { at } = ev else {
            return false;
        };
        if let Some(m) = &self.clock {
            m.set(*at);
        }
        true
    }

    #[cfg(not(feature = "replay"))]
    fn moved(&self, _: &SourceEvent) -> bool {
        false
    }

    /// Apply the sources' events to `state` until every sender is gone
    /// or `cancel` fires, following `gate`'s pause for the observer.
    ///
    /// On `cancel` the channel is closed: what was already sent is still
    /// applied, in order, and a source that keeps sending after the stop
    /// is refused (its `send` fails), so nothing reaches the timeline
    /// after its open intervals are closed. At the end the observer is
    /// told "paused": it closes the open intervals, so that the writers'
    /// last batch holds them.
    pub(crate) async fn run(mut self, state: &State, gate: &Gate, cancel: CancellationToken) {
        let mut generation = gate.watch_generation();
        // A pause from before the first poll is heard too.
        generation.mark_changed();
        let mut paused = false;
        let mut gate_alive = true;
        let mut closed = false;
        loop {
            // Biased, the gate first: when the user's pause or resume and
            // an event are both waiting, the timeline hears the pause
            // first, so that an event applied after a resume the user
            // already saw answered is recorded, and one applied after a
            // pause is not (a random pick could do either); the stop
            // before events, so a flood of them cannot hold it off.
            tokio::select! {
                biased;
                r = generation.changed(), if gate_alive => {
                    if r.is_err() {
                        gate_alive = false;
                        continue;
                    }
                    let now = gate.paused();
                    if now != paused {
                        paused = now;
                        state.observer_paused(now);
                    }
                }
                _ = cancel.cancelled(), if !closed => {
                    closed = true;
                    self.events.close();
                }
                ev = self.events.recv() => {
                    let Some(ev) = ev else { break };
                    if self.moved(&ev) {
                        continue;
                    }
                    state.apply(ev);
                }
            }
        }
        state.observer_paused(true);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use chrono::{DateTime, Utc};

    use super::*;
    use crate::core::clock::SystemClock;
    use crate::core::state::{Change, StateObserver};

    /// What the observer saw: a session change (locked or not), another
    /// change, or a pause.
    #[derive(Debug, Clone, PartialEq)]
    enum Seen {
        Locked(bool),
        Other,
        Paused(bool),
    }

    struct Recording(Arc<Mutex<Vec<Seen>>>);

    impl StateObserver for Recording {
        fn changes(&mut self, changes: &[Change], _: DateTime<Utc>) {
            let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
            for c in changes {
                seen.push(match c {
                    Change::Session(s) => Seen::Locked(s.as_ref().is_some_and(|s| s.locked)),
                    _ => Seen::Other,
                });
            }
        }
        fn paused(&mut self, paused: bool, _: DateTime<Utc>) {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Seen::Paused(paused));
        }
    }

    fn parts() -> (Arc<State>, Arc<Gate>, Arc<Mutex<Vec<Seen>>>) {
        let clock = Arc::new(SystemClock);
        let state = Arc::new(State::new(clock.clone()));
        let gate = Arc::new(Gate::denying(
            PathBuf::from("/nonexistent/policy.toml"),
            clock,
        ));
        let seen = Arc::new(Mutex::new(Vec::new()));
        state.set_observer(Box::new(Recording(seen.clone())));
        (state, gate, seen)
    }

    fn status(source: &str) -> SourceEvent {
        SourceEvent::SourceStatus {
            source: source.into(),
            available: true,
            error: None,
        }
    }

    fn session(locked: bool) -> SourceEvent {
        SourceEvent::Session {
            session: Some(crate::model::SessionState {
                active: true,
                locked,
                ..Default::default()
            }),
        }
    }

    fn spawn(
        pump: Pump,
        state: &Arc<State>,
        gate: &Arc<Gate>,
        cancel: &CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let (state, gate, cancel) = (state.clone(), gate.clone(), cancel.clone());
        tokio::spawn(async move { pump.run(&state, &gate, cancel).await })
    }

    async fn wait_for(what: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !what() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("in time");
    }

    fn log(s: &Arc<Mutex<Vec<Seen>>>) -> Vec<Seen> {
        s.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Events reach the state in the order they were sent; when every
    /// source is gone the pump ends and the timeline closes its
    /// intervals (it hears "paused").
    #[tokio::test]
    async fn applies_in_order_and_closes_the_timeline_at_the_end() {
        let (state, gate, seen) = parts();
        let (tx, pump) = channel();
        let task = spawn(pump, &state, &gate, &CancellationToken::new());
        for ev in [status("a"), session(false), session(true)] {
            tx.send(ev).await.expect("open");
        }
        drop(tx);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("ends once the senders are gone")
            .expect("joins");
        let s = log(&seen);
        let locks: Vec<&Seen> = s.iter().filter(|x| matches!(x, Seen::Locked(_))).collect();
        assert_eq!(locks, [&Seen::Locked(false), &Seen::Locked(true)], "{s:?}");
        assert_eq!(s.last(), Some(&Seen::Paused(true)), "{s:?}");
        assert!(state.read(|snap| snap.session.as_ref().is_some_and(|s| s.locked)));
        assert!(state.read(|snap| snap.sources.contains_key("a")));
    }

    /// The user's pause reaches the timeline through the pump, in order
    /// with the events, and so does the resume.
    #[tokio::test]
    async fn the_pause_reaches_the_timeline() {
        let (state, gate, seen) = parts();
        let (tx, pump) = channel();
        let cancel = CancellationToken::new();
        let task = spawn(pump, &state, &gate, &cancel);
        assert!(gate.set_paused(true));
        wait_for(|| log(&seen).contains(&Seen::Paused(true))).await;
        assert!(gate.set_paused(false));
        wait_for(|| log(&seen).contains(&Seen::Paused(false))).await;
        drop(tx);
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("ends")
            .expect("joins");
    }

    /// The attack: a source that keeps sending after the stop (it missed
    /// its cancellation, or holds a sender elsewhere). What it sent
    /// before is applied; afterwards its send fails and nothing it says
    /// reaches the state or the timeline, whose intervals are closed; and
    /// the pump ends although the sender is still alive.
    #[tokio::test]
    async fn a_source_that_talks_after_the_stop_is_refused() {
        let (state, gate, seen) = parts();
        let (tx, pump) = channel();
        let cancel = CancellationToken::new();
        tx.send(status("before")).await.expect("open");
        let task = spawn(pump, &state, &gate, &cancel);
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("ends with a sender alive")
            .expect("joins");
        assert!(tx.send(status("after")).await.is_err(), "refused");
        assert!(state.read(|snap| snap.sources.contains_key("before")));
        assert!(!state.read(|snap| snap.sources.contains_key("after")));
        let s = log(&seen);
        assert_eq!(s.last(), Some(&Seen::Paused(true)), "{s:?}");
    }
}

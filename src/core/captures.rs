//! The capture sessions of the last 24 hours: who used the microphone, a
//! camera or the screen, from when to when.
//!
//! A session is one stretch of a capture stream *running* (see
//! `model::StreamState`): it opens when a capture stream starts running and
//! closes when it stops running (idle, suspended), when the stream goes away,
//! or when its source is reset (PipeWire died). A stream that pauses and
//! resumes therefore makes two sessions, which is what a privacy indicator
//! shows too.
//!
//! The log is kept in memory, bounded two ways: sessions that ended more
//! than [`RETENTION`] ago are dropped, and at most [`MAX_SESSIONS`] are kept
//! (the oldest ended ones go first), so that an app flapping its microphone
//! cannot make the broker grow. Open sessions are never dropped. The log
//! does not survive a restart; the timeline (`core::history`) keeps
//! capture intervals for as long as the user chose.
//!
//! **One app, one device, one session.** An app can be seen capturing the
//! same kind of device by two sources at once: a camera through PipeWire
//! (`pw-…`) and the device node it holds open itself (`v4l2-…`). A stream
//! that starts running while another stream of the same app (its kernel
//! identity, never a claimed name) and the same kind has a session open
//! joins that session instead of opening a second one; the session ends
//! when the last of its streams stops. So the day's list says "this app
//! used the camera from … to …" once, as the user asks it, while the live
//! stream list still shows each stream (each says something the other does
//! not: the PipeWire node, the device node). A stream joins only when it
//! starts running: one whose identity arrives later stays in its own
//! session.
//!
//! Time comes from the state's [`Clock`](super::clock::Clock), so tests move
//! time instead of sleeping.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::change::{Change, ChangeKind};
use crate::model::{AppId, MediaKind, MediaStream, StreamState};

/// How long an ended session is kept.
pub(crate) const RETENTION: Duration = Duration::hours(24);
/// The most sessions kept at once.
pub(crate) const MAX_SESSIONS: usize = 1000;

/// One stretch of capture by one stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CaptureSession {
    /// The stream's id (source-prefixed, e.g. `pw-1-57`).
    pub(crate) stream_id: String,
    /// What was captured: microphone, camera or screen.
    pub(crate) kind: MediaKind,
    /// The app, as derived from the kernel (the stream's PID), when known.
    pub(crate) app_id: Option<AppId>,
    pub(crate) pid: Option<u32>,
    /// What the app claimed to be (`application.name`); never an identity.
    pub(crate) claimed_name: Option<String>,
    pub(crate) start: DateTime<Utc>,
    /// `None` while the capture goes on.
    pub(crate) end: Option<DateTime<Utc>>,
}

/// The bounded log of capture sessions, oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct CaptureLog {
    sessions: VecDeque<CaptureSession>,
    /// Every running capture stream → the `stream_id` of the open session
    /// it belongs to (its own, or the one it joined).
    running: HashMap<String, String>,
}

fn capturing(s: &MediaStream) -> bool {
    s.kind.is_capture() && s.state == StreamState::Running
}

impl CaptureLog {
    /// Follow the stream changes just applied to the snapshot.
    pub(crate) fn observe(&mut self, changes: &[Change], now: DateTime<Utc>) {
        if !changes.iter().any(|c| matches!(c, Change::Stream { .. })) {
            return;
        }
        for c in changes {
            if let Change::Stream { kind, stream } = c {
                let running = *kind != ChangeKind::Closed && capturing(stream);
                match (self.running.get(&stream.id).cloned(), running) {
                    (Some(key), true) => {
                        // Identity can arrive after the stream (the client's
                        // info comes later): keep the session up to date,
                        // from the stream that opened it.
                        if key == stream.id
                            && let Some(s) = self.open_session(&key)
                        {
                            s.app_id.clone_from(&stream.app_id);
                            s.pid = stream.pid;
                            s.claimed_name.clone_from(&stream.claimed_name);
                            s.kind = stream.kind;
                        }
                    }
                    (Some(key), false) => {
                        self.running.remove(&stream.id);
                        if !self.running.values().any(|k| *k == key)
                            && let Some(s) = self.open_session(&key)
                        {
                            s.end = Some(now);
                        }
                    }
                    (None, true) => {
                        let same_app = stream.app_id.as_ref().and_then(|app| {
                            self.sessions.iter().rev().find(|s| {
                                s.end.is_none()
                                    && s.kind == stream.kind
                                    && s.app_id.as_ref() == Some(app)
                            })
                        });
                        let key = match same_app {
                            Some(s) => s.stream_id.clone(),
                            None => {
                                self.sessions.push_back(CaptureSession {
                                    stream_id: stream.id.clone(),
                                    kind: stream.kind,
                                    app_id: stream.app_id.clone(),
                                    pid: stream.pid,
                                    claimed_name: stream.claimed_name.clone(),
                                    start: now,
                                    end: None,
                                });
                                stream.id.clone()
                            }
                        };
                        self.running.insert(stream.id.clone(), key);
                    }
                    (None, false) => {}
                }
            }
        }
        self.prune(now);
    }

    /// The open session of the stream `key`.
    fn open_session(&mut self, key: &str) -> Option<&mut CaptureSession> {
        self.sessions
            .iter_mut()
            .rev()
            .find(|s| s.end.is_none() && s.stream_id == key)
    }

    /// Drop what is older than [`RETENTION`] and keep at most
    /// [`MAX_SESSIONS`].
    pub(crate) fn prune(&mut self, now: DateTime<Utc>) {
        let cutoff = now - RETENTION;
        self.sessions.retain(|s| s.end.is_none_or(|e| e >= cutoff));
        while self.sessions.len() > MAX_SESSIONS {
            match self.sessions.iter().position(|s| s.end.is_some()) {
                Some(i) => {
                    self.sessions.remove(i);
                }
                None => break,
            }
        }
    }

    /// The sessions that were open at some point in the last 24 hours
    /// before `now`, oldest first.
    pub(crate) fn recent(&self, now: DateTime<Utc>) -> impl Iterator<Item = &CaptureSession> {
        let cutoff = now - RETENTION;
        self.sessions
            .iter()
            .filter(move |s| s.end.is_none_or(|e| e >= cutoff))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::ManualClock;
    use crate::core::event::SourceEvent;
    use crate::core::state::State;

    fn mic(id: &str, state: StreamState) -> MediaStream {
        MediaStream {
            id: id.into(),
            kind: MediaKind::Microphone,
            app_id: AppId::from_exe("/usr/bin/pw-record").ok(),
            attributed_by: Default::default(),
            pid: Some(42),
            claimed_name: Some("pw-record".into()),
            claimed_binary: None,
            media_name: None,
            media_role: None,
            state,
            since: Utc::now(),
            player: None,
        }
    }

    fn at(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap_or_default()
    }

    #[test]
    fn sessions_open_while_running_and_close_on_stop_or_removal() {
        let clock = ManualClock::new(at(0));
        let st = State::new(clock.clone());
        st.apply(SourceEvent::Stream {
            stream: mic("pw-1-5", StreamState::Idle),
        });
        assert!(st.read(|s| s.captures.is_empty()), "idle is not capture");
        st.apply(SourceEvent::Stream {
            stream: mic("pw-1-5", StreamState::Running),
        });
        clock.advance(Duration::minutes(5));
        st.apply(SourceEvent::Stream {
            stream: mic("pw-1-5", StreamState::Suspended),
        });
        clock.advance(Duration::minutes(1));
        st.apply(SourceEvent::Stream {
            stream: mic("pw-1-5", StreamState::Running),
        });
        clock.advance(Duration::minutes(1));
        st.apply(SourceEvent::StreamRemoved {
            id: "pw-1-5".into(),
        });
        let v: Vec<CaptureSession> = st.read(|s| s.captures.recent(at(1)).cloned().collect());
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].start, at(0));
        assert_eq!(v[0].end, Some(at(0) + Duration::minutes(5)));
        assert_eq!(v[1].start, at(0) + Duration::minutes(6));
        assert_eq!(v[1].end, Some(at(0) + Duration::minutes(7)));
        assert_eq!(v[1].kind, MediaKind::Microphone);
        assert_eq!(v[1].pid, Some(42));
    }

    #[test]
    fn a_reset_source_ends_its_sessions_and_playback_is_not_capture() {
        let clock = ManualClock::new(at(0));
        let st = State::new(clock.clone());
        st.apply(SourceEvent::Stream {
            stream: mic("pw-1-5", StreamState::Running),
        });
        let mut play = mic("pw-1-6", StreamState::Running);
        play.kind = MediaKind::Playback;
        st.apply(SourceEvent::Stream { stream: play });
        clock.advance(Duration::seconds(3));
        st.apply(SourceEvent::StreamsReset {
            id_prefix: "pw-1-".into(),
        });
        let v: Vec<CaptureSession> = st.read(|s| s.captures.recent(at(0)).cloned().collect());
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].end, Some(at(0) + Duration::seconds(3)));
    }

    #[test]
    fn two_streams_of_one_app_and_kind_are_one_session() {
        let clock = ManualClock::new(at(0));
        let st = State::new(clock.clone());
        let cam = |id: &str, exe: &str| {
            let mut s = mic(id, StreamState::Running);
            s.kind = MediaKind::Camera;
            s.app_id = AppId::from_exe(exe).ok();
            s
        };
        // The app through PipeWire, then its own open device node.
        st.apply(SourceEvent::Stream {
            stream: cam("pw-1-7", "/usr/bin/call"),
        });
        clock.advance(Duration::minutes(1));
        st.apply(SourceEvent::Stream {
            stream: cam("v4l2-1-video0-42", "/usr/bin/call"),
        });
        // Another app, and the same app's microphone: sessions of their own.
        st.apply(SourceEvent::Stream {
            stream: cam("v4l2-1-video0-43", "/usr/bin/other"),
        });
        let mut m = mic("pw-1-8", StreamState::Running);
        m.app_id = AppId::from_exe("/usr/bin/call").ok();
        st.apply(SourceEvent::Stream { stream: m });
        let open = |st: &State| -> Vec<String> {
            st.read(|s| {
                s.captures
                    .recent(at(1))
                    .filter(|c| c.end.is_none())
                    .map(|c| c.stream_id.clone())
                    .collect()
            })
        };
        assert_eq!(open(&st), ["pw-1-7", "v4l2-1-video0-43", "pw-1-8"]);
        // The stream that opened the session stops: the other keeps it open.
        clock.advance(Duration::minutes(1));
        st.apply(SourceEvent::StreamRemoved {
            id: "pw-1-7".into(),
        });
        assert_eq!(open(&st), ["pw-1-7", "v4l2-1-video0-43", "pw-1-8"]);
        clock.advance(Duration::minutes(1));
        st.apply(SourceEvent::StreamsReset {
            id_prefix: "v4l2-1-".into(),
        });
        assert_eq!(open(&st), ["pw-1-8"]);
        let v: Vec<CaptureSession> = st.read(|s| s.captures.recent(at(1)).cloned().collect());
        assert_eq!(v.len(), 3, "{v:?}");
        assert_eq!(v[0].start, at(0));
        assert_eq!(v[0].end, Some(at(0) + Duration::minutes(3)));
    }

    #[test]
    fn old_sessions_expire_and_the_log_is_bounded() {
        let clock = ManualClock::new(at(0));
        let st = State::new(clock.clone());
        st.apply(SourceEvent::Stream {
            stream: mic("pw-1-1", StreamState::Running),
        });
        st.apply(SourceEvent::StreamRemoved {
            id: "pw-1-1".into(),
        });
        // Still listed 23 h later, gone after 24 h (even before any pruning).
        assert_eq!(st.read(|s| s.captures.recent(at(23)).count()), 1);
        assert_eq!(st.read(|s| s.captures.recent(at(25)).count()), 0);

        // A stream that never stops is kept however old.
        st.apply(SourceEvent::Stream {
            stream: mic("pw-1-2", StreamState::Running),
        });
        clock.advance(Duration::hours(30));
        for i in 0..(MAX_SESSIONS + 50) {
            let id = format!("pw-1-flap{i}");
            // Of no known app: one of pw-1-2's app would join its session.
            let mut flap = mic(&id, StreamState::Running);
            flap.app_id = None;
            st.apply(SourceEvent::Stream { stream: flap });
            st.apply(SourceEvent::StreamRemoved { id });
        }
        st.read(|s| {
            assert_eq!(s.captures.len(), MAX_SESSIONS);
            let ids: Vec<&str> = s
                .captures
                .recent(at(30))
                .map(|c| c.stream_id.as_str())
                .collect();
            assert!(ids.contains(&"pw-1-2"), "the open session was dropped");
            assert!(!ids.contains(&"pw-1-1"), "an expired session stayed");
            assert!(!ids.contains(&"pw-1-flap0"), "not the oldest dropped");
        });
    }
}

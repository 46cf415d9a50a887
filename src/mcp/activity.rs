//! Who used the microphone, the camera or the screen in the last 24 hours,
//! for `get_media_activity`.
//!
//! The core keeps only the streams that exist now; the history issue will
//! keep the timeline in the database. Until then this remembers, in memory
//! and since the daemon started, the last time each app ran a capture
//! stream. It records; it decides nothing (reading it needs
//! `media.capture`, checked by the caller).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::core::state::Change;
use crate::core::{Core, view};
use crate::model::{MediaKind, MediaStream, StreamState};

/// How far back [`CaptureLog::recent`] looks.
pub const WINDOW_HOURS: i64 = 24;

#[derive(Debug, Clone, PartialEq)]
struct Use {
    last_active: DateTime<Utc>,
    /// The app id from the kernel when known, else the claimed name.
    app: String,
    app_id_trusted: bool,
}

/// The last capture use per (app, kind).
#[derive(Debug, Default)]
pub struct CaptureLog {
    uses: Mutex<BTreeMap<(String, &'static str), Use>>,
}

fn kind_name(k: MediaKind) -> &'static str {
    match k {
        MediaKind::Playback => "playback",
        MediaKind::Microphone => "microphone",
        MediaKind::Camera => "camera",
        MediaKind::Screen => "screen",
    }
}

impl CaptureLog {
    /// Record a stream if it is a running capture stream.
    pub fn record(&self, s: &MediaStream, now: DateTime<Utc>) {
        if !s.kind.is_capture() || s.state != StreamState::Running {
            return;
        }
        let (app, trusted) = match (&s.app_id, &s.claimed_name) {
            (Some(a), _) => (a.to_string(), true),
            (None, Some(n)) => (n.clone(), false),
            (None, None) => ("unknown".to_owned(), false),
        };
        let mut m = self.uses.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(
            (app.clone(), kind_name(s.kind)),
            Use {
                last_active: now,
                app,
                app_id_trusted: trusted,
            },
        );
        let cutoff = now - Duration::hours(WINDOW_HOURS);
        m.retain(|_, u| u.last_active >= cutoff);
    }

    /// Uses within the last 24 h, newest first. Streams running now count
    /// as used now.
    pub fn recent(&self, core: &Core) -> Vec<Value> {
        let now = core.clock.now();
        let running: Vec<MediaStream> = core.state.read(|s| {
            s.streams
                .values()
                .filter(|s| s.kind.is_capture() && s.state == StreamState::Running)
                .cloned()
                .collect()
        });
        for s in &running {
            self.record(s, now);
        }
        let cutoff = now - Duration::hours(WINDOW_HOURS);
        let m = self.uses.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(&(String, &'static str), &Use)> =
            m.iter().filter(|(_, u)| u.last_active >= cutoff).collect();
        v.sort_by_key(|u| std::cmp::Reverse(u.1.last_active));
        v.into_iter()
            .map(|((_, kind), u)| {
                json!({
                    "app": u.app,
                    "app_id_from_kernel": u.app_id_trusted,
                    "kind": kind,
                    "last_active": view::time(&u.last_active),
                })
            })
            .collect()
    }
}

/// Feed the log from the change broadcast until `cancel`.
pub async fn run(core: Arc<Core>, log: Arc<CaptureLog>, cancel: CancellationToken) {
    let mut rx = core.state.subscribe();
    loop {
        let msg = tokio::select! {
            _ = cancel.cancelled() => break,
            m = rx.recv() => m,
        };
        match msg {
            Ok(c) => {
                if let Change::Stream { stream, .. } = c.as_ref() {
                    log.record(stream, core.clock.now());
                }
            }
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::{Clock, ManualClock};
    use crate::model::AppId;

    #[test]
    fn remembers_capture_for_24_hours() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new("2026-01-01T00:00:00Z".parse().expect("date"));
        let core = Core::new(dir.path().join("policy.toml"), clock.clone());
        let log = CaptureLog::default();
        let mic = MediaStream {
            id: "pw-1".into(),
            kind: MediaKind::Microphone,
            app_id: Some(AppId::new("org.example.Call").expect("id")),
            pid: Some(42),
            claimed_name: None,
            claimed_binary: None,
            media_name: None,
            media_role: None,
            state: StreamState::Running,
            since: clock.now(),
            player: None,
        };
        let mut music = mic.clone();
        music.kind = MediaKind::Playback;
        log.record(&mic, clock.now());
        log.record(&music, clock.now());
        let r = log.recent(&core);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0]["app"], "org.example.Call");
        assert_eq!(r[0]["kind"], "microphone");
        clock.advance(chrono::Duration::hours(WINDOW_HOURS + 1));
        assert!(log.recent(&core).is_empty());
    }
}

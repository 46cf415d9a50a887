//! What a caller may see: renders the snapshot and changes for one caller,
//! leaving out every category (and every detail) it is not allowed.
//!
//! The output is JSON because both publishers speak it (MCP directly, D-Bus
//! through one generic conversion to `a{sv}`), so the redaction rules live
//! here once and cannot drift between D-Bus and MCP.
//!
//! Detail rules:
//! - a window's `title` only with `windows.titles`;
//! - a notification's `body` only with `notifications.content`;
//! - a stream's `media_name` (which can hold a song or a call's title) only
//!   with the stream's own category (`media.playback` for playback,
//!   `media.capture` for capture), which is already needed to see the stream.
//!   A caller with only `media.playback` sees no capture stream and no
//!   capture session, not even that one exists; a caller with only
//!   `media.capture` sees no playback stream;
//! - the capture sessions of the last 24 hours (`capture_sessions`, see
//!   `core::captures`) only with `media.capture`;
//! - an MPRIS player's `player` record (`status`, and the track's `title`,
//!   `artist` and `url`) likewise only with `media.playback`, the category
//!   of every MPRIS stream: it says what is playing exactly as PipeWire's
//!   `media_name` of the same player does, so hiding one behind more than
//!   the other would protect nothing. The `url` never carries a query or a
//!   fragment (where session tokens and tracking ids live) and only the
//!   `http`, `https` and `file` schemes; `sources::mpris` drops the rest
//!   before the url reaches the core;
//! - the network's `ssid` only with `network.name`: connectivity, metered
//!   state and connection type say nothing about where the user is, the
//!   name of the Wi-Fi often does ("Hotel Alpenblick", "ACME-Guest").

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use super::captures::CaptureSession;
use super::state::{Change, Snapshot};
use crate::model::{
    Category, MediaStream, Network, Notification, ProvidedContext, SourceStatus, Window,
};

/// The caller's permissions, as a predicate over categories.
pub type Can<'a> = &'a dyn Fn(&Category) -> bool;

pub fn time(t: &DateTime<Utc>) -> Value {
    Value::String(t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub fn window(w: &Window, titles: bool, active: bool) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(w.id));
    m.insert("app_id".into(), json!(w.app_id));
    // Wayland gives no PID: the app id is what the client told the
    // compositor. Say so, so that nobody mistakes it for an identity.
    m.insert("app_id_source".into(), json!("compositor"));
    if let Some(n) = &w.app_name {
        m.insert("app_name".into(), json!(n));
    }
    if let Some(i) = &w.icon {
        m.insert("icon".into(), json!(i));
    }
    if titles {
        m.insert("title".into(), json!(w.title));
    }
    m.insert("states".into(), json!(w.states.names()));
    m.insert("focused".into(), json!(active));
    m.insert("outputs".into(), json!(w.outputs));
    if let Some(p) = &w.parent {
        m.insert("parent".into(), json!(p));
    }
    m.insert("first_seen".into(), time(&w.first_seen));
    if let Some(t) = &w.last_focused {
        m.insert("last_focused".into(), time(t));
    }
    Value::Object(m)
}

pub fn stream(s: &MediaStream) -> Value {
    let mut m = obj(json!({
        "id": s.id,
        "kind": s.kind,
        "state": s.state,
        "active": s.state == crate::model::StreamState::Running,
        "since": time(&s.since),
    }));
    if let Some(a) = &s.app_id {
        m.insert("app_id".into(), json!(a));
    }
    if let Some(p) = s.pid {
        m.insert("pid".into(), json!(p));
    }
    for (k, v) in [
        ("claimed_name", &s.claimed_name),
        ("claimed_binary", &s.claimed_binary),
        ("media_name", &s.media_name),
        ("media_role", &s.media_role),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    if let Some(p) = &s.player {
        m.insert("player".into(), json!(p));
    }
    Value::Object(m)
}

/// The network as a caller sees it: the `ssid` only with `network.name`.
pub fn network(n: &Network, name: bool) -> Value {
    let mut m = obj(json!(n));
    if !name {
        m.remove("ssid");
    }
    Value::Object(m)
}

pub fn capture_session(c: &CaptureSession) -> Value {
    let mut m = obj(json!({
        "stream_id": c.stream_id,
        "kind": c.kind,
        "start": time(&c.start),
        "active": c.end.is_none(),
    }));
    if let Some(e) = &c.end {
        m.insert("end".into(), time(e));
    }
    if let Some(a) = &c.app_id {
        m.insert("app_id".into(), json!(a));
    }
    if let Some(p) = c.pid {
        m.insert("pid".into(), json!(p));
    }
    if let Some(n) = &c.claimed_name {
        m.insert("claimed_name".into(), json!(n));
    }
    Value::Object(m)
}

/// Who plays and who captures, for one caller: `media.playback` and
/// `media.capture` (streams, as in the snapshot), `capture_sessions` (the
/// last 24 hours before `now`, newest first) and `withheld`. Each key only
/// with its category; `capture_sessions` needs `media.capture`.
pub fn media(snap: &Snapshot, can: Can<'_>, now: DateTime<Utc>) -> Value {
    let mut m = Map::new();
    let mut withheld = Vec::new();
    if can(&Category::MediaPlayback) {
        m.insert(
            Category::MediaPlayback.to_string(),
            Value::Array(streams(snap, false)),
        );
    } else {
        withheld.push(Category::MediaPlayback.to_string());
    }
    if can(&Category::MediaCapture) {
        m.insert(
            Category::MediaCapture.to_string(),
            Value::Array(streams(snap, true)),
        );
        let mut sessions: Vec<Value> = snap.captures.recent(now).map(capture_session).collect();
        sessions.reverse();
        m.insert("capture_sessions".into(), Value::Array(sessions));
    } else {
        withheld.push(Category::MediaCapture.to_string());
    }
    m.insert("withheld".into(), json!(withheld));
    Value::Object(m)
}

pub fn notification(n: &Notification, content: bool) -> Value {
    let mut m = obj(json!({
        "id": n.id,
        "app_name": n.app_name,
        "summary": n.summary,
        "urgency": n.urgency,
        "time": time(&n.time),
    }));
    if content {
        m.insert("body".into(), json!(n.body));
    }
    Value::Object(m)
}

pub fn provided(p: &ProvidedContext) -> Value {
    json!({
        "app_id": p.app_id,
        "kind": p.kind,
        "data": p.data,
        "updated": time(&p.updated),
    })
}

pub fn source(s: &SourceStatus) -> Value {
    let mut m = obj(json!({
        "name": s.name,
        "available": s.available,
        "since": time(&s.since),
    }));
    if let Some(e) = &s.last_error {
        m.insert("last_error".into(), json!(e));
    }
    Value::Object(m)
}

pub fn sources(snap: &Snapshot) -> Vec<Value> {
    snap.sources.values().map(source).collect()
}

pub fn windows(snap: &Snapshot, can: Can<'_>) -> Vec<Value> {
    let titles = can(&Category::WindowsTitles);
    snap.windows_in_order()
        .into_iter()
        .map(|w| {
            window(
                w,
                titles,
                snap.active_window.as_deref() == Some(w.id.as_str()),
            )
        })
        .collect()
}

pub fn active_window(snap: &Snapshot, can: Can<'_>) -> Option<Value> {
    snap.active()
        .map(|w| window(w, can(&Category::WindowsTitles), true))
}

fn streams(snap: &Snapshot, capture: bool) -> Vec<Value> {
    snap.streams
        .values()
        .filter(|s| s.kind.is_capture() == capture)
        .map(stream)
        .collect()
}

pub fn notifications(snap: &Snapshot, can: Can<'_>) -> Vec<Value> {
    let content = can(&Category::NotificationsContent);
    snap.notifications
        .iter()
        .rev()
        .map(|n| notification(n, content))
        .collect()
}

/// The whole snapshot for one caller: one key per category it may see,
/// and `withheld`, the categories it may not.
pub fn snapshot(snap: &Snapshot, can: Can<'_>) -> Value {
    let mut m = Map::new();
    let mut withheld: Vec<String> = Vec::new();
    let section = |cat: Category,
                   m: &mut Map<String, Value>,
                   withheld: &mut Vec<String>,
                   v: Option<Value>| {
        if can(&cat) {
            if let Some(v) = v {
                m.insert(cat.to_string(), v);
            }
        } else {
            withheld.push(cat.to_string());
        }
    };
    section(
        Category::Windows,
        &mut m,
        &mut withheld,
        Some(Value::Array(windows(snap, can))),
    );
    if can(&Category::Windows) {
        if let Some(id) = &snap.active_window {
            m.insert("active_window".into(), json!(id));
        }
        if !can(&Category::WindowsTitles) {
            withheld.push(Category::WindowsTitles.to_string());
        }
    }
    section(
        Category::MediaPlayback,
        &mut m,
        &mut withheld,
        Some(Value::Array(streams(snap, false))),
    );
    section(
        Category::MediaCapture,
        &mut m,
        &mut withheld,
        Some(Value::Array(streams(snap, true))),
    );
    section(
        Category::Session,
        &mut m,
        &mut withheld,
        snap.session.as_ref().map(|s| json!(s)),
    );
    section(
        Category::Power,
        &mut m,
        &mut withheld,
        snap.power.as_ref().map(|s| json!(s)),
    );
    section(
        Category::Network,
        &mut m,
        &mut withheld,
        snap.network
            .as_ref()
            .map(|n| network(n, can(&Category::NetworkName))),
    );
    if can(&Category::Network) && !can(&Category::NetworkName) {
        withheld.push(Category::NetworkName.to_string());
    }
    section(
        Category::Notifications,
        &mut m,
        &mut withheld,
        Some(Value::Array(notifications(snap, can))),
    );
    if can(&Category::Notifications) && !can(&Category::NotificationsContent) {
        withheld.push(Category::NotificationsContent.to_string());
    }
    let mut provided = Vec::new();
    let mut hidden_provided = Vec::new();
    for ((_, kind), p) in &snap.provided {
        let cat = Category::Provided(kind.clone());
        if can(&cat) {
            provided.push(self::provided(p));
        } else if !hidden_provided.contains(&cat.to_string()) {
            hidden_provided.push(cat.to_string());
        }
    }
    m.insert("provided".into(), Value::Array(provided));
    withheld.extend(hidden_provided);
    m.insert("sources".into(), Value::Array(sources(snap)));
    m.insert("withheld".into(), json!(withheld));
    Value::Object(m)
}

/// One change as a subscriber that may see `can` receives it: the category
/// of the `Changed` signal and its data, or `None` when it must not be sent.
pub fn change(c: &Change, can: Can<'_>) -> Option<(Category, Value)> {
    let cat = c.category()?;
    if !can(&cat) {
        return None;
    }
    let data = match c {
        Change::Window { kind, window: w } => json!({
            "event": kind.as_str(),
            "window": window(w, can(&Category::WindowsTitles), w.states.activated),
        }),
        Change::Focus { window: w } => {
            let mut m = obj(json!({ "event": "focus" }));
            if let Some(w) = w {
                m.insert(
                    "window".into(),
                    window(w, can(&Category::WindowsTitles), true),
                );
            }
            Value::Object(m)
        }
        Change::Stream { kind, stream: s } => {
            json!({ "event": kind.as_str(), "stream": stream(s) })
        }
        Change::Session(s) => json!({ "event": "changed", "session": s }),
        Change::Power(p) => json!({ "event": "changed", "power": p }),
        Change::Network(n) => json!({
            "event": "changed",
            "network": n.as_ref().map(|n| network(n, can(&Category::NetworkName))),
        }),
        Change::Notification {
            kind,
            notification: n,
        } => json!({
            "event": kind.as_str(),
            "notification": notification(n, can(&Category::NotificationsContent)),
        }),
        Change::Provided { kind, context } => {
            json!({ "event": kind.as_str(), "context": provided(context) })
        }
        Change::Source(_) => return None,
    };
    // `null` values (an absent session after its service left) carry no
    // information a{sv} can hold; drop them so both wires agree.
    let data = match data {
        Value::Object(mut m) => {
            m.retain(|_, v| !v.is_null());
            Value::Object(m)
        }
        v => v,
    };
    Some((cat, data))
}

/// The categories, for `ListCategories`: name, description, and whether
/// the caller may read each.
pub fn categories(can: Can<'_>, provided_kinds: &[String]) -> Vec<Value> {
    let mut cats: Vec<Category> = Category::fixed().to_vec();
    for k in provided_kinds {
        if let Ok(c) = Category::provided(k) {
            cats.push(c);
        }
    }
    cats.iter()
        .map(|c| {
            let mut m = obj(json!({
                "name": c.to_string(),
                "description": c.description(),
                "sensitive": c.is_sensitive(),
                "allowed": can(c),
            }));
            if let Some(b) = c.base() {
                m.insert("detail_of".into(), json!(b.to_string()));
            }
            Value::Object(m)
        })
        .collect()
}

/// One row as a caller may see it.
pub fn history_event(e: &crate::core::history::HistoryEvent, can: Can<'_>) -> Value {
    let mut v = json!({
        "id": e.id,
        "kind": e.kind.as_str(),
        "category": e.kind.category().to_string(),
        "start": time(&e.start),
    });
    if let Some(end) = &e.end {
        v["end"] = time(end);
        v["duration_s"] = json!(((*end - e.start).num_milliseconds() as f64) / 1000.0);
    }
    if let Some(a) = &e.app_id {
        v["app_id"] = json!(a);
    }
    let title_ok = match e.kind {
        crate::core::history::HistoryKind::Focus => can(&Category::WindowsTitles),
        _ => true,
    };
    if let Some(t) = &e.title
        && title_ok
    {
        v["title"] = json!(t);
    }
    if let Some(d) = &e.detail {
        let mut d = d.clone();
        if e.kind == crate::core::history::HistoryKind::Notification
            && !can(&Category::NotificationsContent)
            && let Some(o) = d.as_object_mut()
        {
            o.remove("body");
        }
        if d.as_object().is_some_and(|o| !o.is_empty()) {
            v["detail"] = d;
        }
    }
    v
}

/// An app's totals as a caller may see them: focus time with `windows`,
/// capture time with `media.capture`, playback time with `media.playback`;
/// `None` when none of what it may see is above zero.
pub fn app_totals(t: &crate::core::history::AppTotals, can: Can<'_>) -> Option<Value> {
    let mut v = json!({ "app_id": t.app_id });
    let mut any = false;
    for (key, ms, cat) in [
        ("focus_s", t.focus_ms, Category::Windows),
        ("capture_s", t.capture_ms, Category::MediaCapture),
        ("playback_s", t.playback_ms, Category::MediaPlayback),
    ] {
        if can(&cat) {
            v[key] = json!(ms as f64 / 1000.0);
            any |= ms > 0;
        }
    }
    any.then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WindowStates;

    #[test]
    fn titles_only_with_the_detail_category() {
        let w = Window {
            id: "w1".into(),
            app_id: "org.a".into(),
            app_name: None,
            icon: None,
            title: "secret.txt".into(),
            states: WindowStates {
                activated: true,
                ..Default::default()
            },
            outputs: vec!["HEADLESS-1".into()],
            parent: None,
            first_seen: Utc::now(),
            last_focused: None,
        };
        let mut snap = Snapshot::default();
        snap.windows.insert("w1".into(), w.clone());
        snap.active_window = Some("w1".into());
        let only_windows = |c: &Category| *c == Category::Windows;
        let v = snapshot(&snap, &only_windows);
        assert!(!v.to_string().contains("secret.txt"));
        assert!(
            v["withheld"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("windows.titles")))
        );
        let (_, d) = change(
            &Change::Focus {
                window: Some(w.clone()),
            },
            &only_windows,
        )
        .expect("allowed");
        assert!(!d.to_string().contains("secret.txt"));
        let all = |_: &Category| true;
        let (_, d) = change(&Change::Focus { window: Some(w) }, &all).expect("allowed");
        assert!(d.to_string().contains("secret.txt"));
        let none = |_: &Category| false;
        assert!(change(&Change::Focus { window: None }, &none).is_none());
        assert!(!snapshot(&snap, &none).to_string().contains("w1"));
    }

    #[test]
    fn capture_streams_and_sessions_only_with_media_capture() {
        use crate::core::captures::CaptureLog;
        use crate::model::{MediaKind, StreamState};
        let stream = |id: &str, kind: MediaKind, name: &str| MediaStream {
            id: id.into(),
            kind,
            app_id: None,
            pid: Some(7),
            claimed_name: None,
            claimed_binary: None,
            media_name: Some(name.into()),
            media_role: None,
            state: StreamState::Running,
            since: Utc::now(),
            player: None,
        };
        let mic = stream("pw-1-2", MediaKind::Microphone, "secret call");
        let song = stream("pw-1-3", MediaKind::Playback, "a song");
        let mut snap = Snapshot::default();
        snap.streams.insert(mic.id.clone(), mic.clone());
        snap.streams.insert(song.id.clone(), song.clone());
        let mut log = CaptureLog::default();
        let now = Utc::now();
        log.observe(
            &[Change::Stream {
                kind: crate::core::ChangeKind::Opened,
                stream: mic.clone(),
            }],
            now,
        );
        snap.captures = log;

        let playback = |c: &Category| *c == Category::MediaPlayback;
        for v in [snapshot(&snap, &playback), media(&snap, &playback, now)] {
            let text = v.to_string();
            assert!(
                !text.contains("pw-1-2") && !text.contains("secret call"),
                "{text}"
            );
            assert!(text.contains("a song"), "{text}");
            assert!(v.get("capture_sessions").is_none());
        }
        let open = Change::Stream {
            kind: crate::core::ChangeKind::Opened,
            stream: mic,
        };
        assert!(change(&open, &playback).is_none());

        let capture = |c: &Category| *c == Category::MediaCapture;
        let v = media(&snap, &capture, now);
        assert!(!v.to_string().contains("a song"));
        assert_eq!(v["capture_sessions"][0]["stream_id"], "pw-1-2");
        assert_eq!(v["capture_sessions"][0]["active"], true);
        assert_eq!(v["media.capture"][0]["media_name"], "secret call");
        let (cat, d) = change(&open, &capture).expect("allowed");
        assert_eq!(cat, Category::MediaCapture);
        assert_eq!(d["stream"]["kind"], "microphone");
    }

    #[test]
    fn ssid_only_with_network_name() {
        let n = Network {
            connectivity: "full".into(),
            metered: true,
            primary_type: Some("wifi".into()),
            ssid: Some("Hotel Alpenblick".into()),
        };
        let snap = Snapshot {
            network: Some(n.clone()),
            ..Snapshot::default()
        };
        let only_network = |c: &Category| *c == Category::Network;
        let v = snapshot(&snap, &only_network);
        assert_eq!(v["network"]["connectivity"], "full");
        assert!(!v.to_string().contains("Alpenblick"), "{v}");
        assert!(
            v["withheld"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("network.name")))
        );
        let (_, d) = change(&Change::Network(Some(n.clone())), &only_network).expect("allowed");
        assert!(!d.to_string().contains("Alpenblick"), "{d}");
        assert_eq!(d["network"]["metered"], true);
        let with_name = |c: &Category| matches!(c, Category::Network | Category::NetworkName);
        let v = snapshot(&snap, &with_name);
        assert_eq!(v["network"]["ssid"], "Hotel Alpenblick");
        let (_, d) = change(&Change::Network(Some(n)), &with_name).expect("allowed");
        assert_eq!(d["network"]["ssid"], "Hotel Alpenblick");
        // Gone: no null on the wire.
        let (_, d) = change(&Change::Network(None), &with_name).expect("allowed");
        assert!(d.get("network").is_none());
    }

    #[test]
    fn player_track_only_with_media_playback() {
        let s = MediaStream {
            id: "mpris-vlc".into(),
            kind: crate::model::MediaKind::Playback,
            app_id: None,
            pid: Some(7),
            claimed_name: Some("VLC".into()),
            claimed_binary: None,
            media_name: None,
            media_role: None,
            state: crate::model::StreamState::Running,
            since: Utc::now(),
            player: Some(crate::model::Player {
                status: Some(crate::model::PlaybackStatus::Playing),
                title: Some("Secret Song".into()),
                artist: Some("Someone".into()),
                url: Some("file:///home/a/x.ogg".into()),
            }),
        };
        let mut snap = Snapshot::default();
        snap.streams.insert(s.id.clone(), s.clone());
        let playback = |c: &Category| *c == Category::MediaPlayback;
        let v = snapshot(&snap, &playback);
        assert_eq!(v["media.playback"][0]["player"]["title"], "Secret Song");
        assert_eq!(v["media.playback"][0]["player"]["status"], "playing");
        let capture = |c: &Category| *c == Category::MediaCapture;
        assert!(!snapshot(&snap, &capture).to_string().contains("Secret"));
        let ch = Change::Stream {
            kind: crate::core::ChangeKind::Changed,
            stream: s,
        };
        assert!(change(&ch, &capture).is_none());
        assert!(change(&ch, &playback).is_some());
    }
}

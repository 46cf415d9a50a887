//! `contextctl status`: the lines for session, power, network, the last
//! notifications and what is playing (the freedesktop sources), rendered
//! from the snapshot as the broker gave it to contextctl (so nothing here
//! shows what contextctl may not read: a withheld key is simply absent).

use serde_json::Value;

/// How many notifications `status` lists.
pub(super) const LAST_NOTIFICATIONS: usize = 5;

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn flag(v: &Value, k: &str) -> bool {
    v.get(k).and_then(Value::as_bool).unwrap_or(false)
}

/// A time from the broker (RFC 3339) as local `HH:MM:SS`.
fn clock(t: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|d| {
            d.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| t.to_owned())
}

/// `1 h 05 min`, `12 min`, `40 s`.
pub(super) fn duration(secs: u64) -> String {
    match secs {
        s if s >= 3600 => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// One line, without newlines and at most `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > max {
        let mut t: String = flat.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    } else {
        flat
    }
}

pub(super) fn session_line(s: &Value) -> String {
    let mut parts = vec![
        if flag(s, "active") {
            "active"
        } else {
            "inactive"
        }
        .to_owned(),
    ];
    parts.push(
        if flag(s, "locked") {
            "locked"
        } else {
            "unlocked"
        }
        .to_owned(),
    );
    if flag(s, "idle") {
        match str_of(s, "idle_since") {
            Some(t) => parts.push(format!("idle since {}", clock(t))),
            None => parts.push("idle".into()),
        }
    }
    if flag(s, "preparing_for_sleep") {
        parts.push("going to sleep".into());
    }
    match s.get("do_not_disturb").and_then(Value::as_bool) {
        Some(true) => match str_of(s, "do_not_disturb_by") {
            Some(by) => parts.push(format!("do not disturb (by {by})")),
            None => parts.push("do not disturb".into()),
        },
        Some(false) => parts.push("do not disturb off".into()),
        None => {}
    }
    parts.join(", ")
}

pub(super) fn power_line(p: &Value) -> String {
    let mut parts = vec![
        if flag(p, "on_battery") {
            "on battery"
        } else {
            "on AC power"
        }
        .to_owned(),
    ];
    if let Some(pc) = p.get("percentage").and_then(Value::as_f64) {
        parts.push(format!("{pc:.0} %"));
    }
    if let Some(st) = str_of(p, "state") {
        parts.push(st.to_owned());
    }
    if let Some(t) = p.get("time_to_empty_s").and_then(Value::as_u64) {
        parts.push(format!("{} left", duration(t)));
    }
    if let Some(t) = p.get("time_to_full_s").and_then(Value::as_u64) {
        parts.push(format!("full in {}", duration(t)));
    }
    if let Some(w) = str_of(p, "warning_level").filter(|w| *w != "none") {
        parts.push(format!("warning: {w}"));
    }
    match p.get("lid_closed").and_then(Value::as_bool) {
        Some(true) => parts.push("lid closed".to_owned()),
        Some(false) => parts.push("lid open".to_owned()),
        None => {}
    }
    parts.join(", ")
}

pub(super) fn network_line(n: &Value) -> String {
    let mut parts = vec![format!(
        "{} connectivity",
        str_of(n, "connectivity").unwrap_or("unknown")
    )];
    match (str_of(n, "primary_type"), str_of(n, "ssid")) {
        (Some(t), Some(name)) => parts.push(format!("{t} \"{}\"", one_line(name, 40))),
        (Some(t), None) => parts.push(t.to_owned()),
        (None, Some(name)) => parts.push(format!("\"{}\"", one_line(name, 40))),
        (None, None) => {}
    }
    if flag(n, "metered") {
        parts.push("metered".into());
    }
    parts.join(", ")
}

/// The newest notifications first (the broker sends them so).
pub(super) fn notification_lines(ns: &[Value]) -> Vec<String> {
    ns.iter()
        .take(LAST_NOTIFICATIONS)
        .map(|n| {
            let app = str_of(n, "app_name").unwrap_or("(no app name)");
            let mut line = format!(
                "{}  {}: {}",
                str_of(n, "time").map(clock).unwrap_or_default(),
                one_line(app, 30),
                one_line(str_of(n, "summary").unwrap_or(""), 60)
            );
            if let Some(b) = str_of(n, "body") {
                line.push_str(" — ");
                line.push_str(&one_line(b, 60));
            }
            if str_of(n, "urgency") == Some("critical") {
                line.push_str(" [critical]");
            }
            line
        })
        .collect()
}

/// What a stream plays: PipeWire's `media_name`, else an MPRIS player's
/// "artist — title" (for the MEDIA column of `contextctl media`).
pub(super) fn media_of(stream: &Value) -> String {
    if let Some(n) = str_of(stream, "media_name") {
        return n.to_owned();
    }
    stream.get("player").map(track).unwrap_or_default()
}

fn track(p: &Value) -> String {
    match (str_of(p, "artist"), str_of(p, "title")) {
        (Some(a), Some(t)) => format!("{} — {}", one_line(a, 40), one_line(t, 60)),
        (None, Some(t)) => one_line(t, 60),
        (Some(a), None) => one_line(a, 40),
        (None, None) => String::new(),
    }
}

/// MPRIS players (streams with a `player` record): name, track, status.
pub(super) fn now_playing_lines(streams: &[Value]) -> Vec<String> {
    streams
        .iter()
        .filter_map(|s| {
            let p = s.get("player")?;
            let who = str_of(s, "claimed_name")
                .or_else(|| str_of(s, "app_id"))
                .or_else(|| str_of(s, "id"))
                .unwrap_or("?");
            let track = track(p);
            let status = str_of(p, "status").unwrap_or("unknown");
            Some(if track.is_empty() {
                format!("{}: ({status})", one_line(who, 30))
            } else {
                format!("{}: {track} ({status})", one_line(who, 30))
            })
        })
        .collect()
}

/// Everything the freedesktop sources add to `status`, one labelled line
/// (or block) per category contextctl may read.
pub(super) fn status_lines(snap: &Value) -> String {
    let mut out = String::new();
    let mut line = |label: &str, text: String| {
        out.push_str(&format!("{label:<15} {text}\n"));
    };
    if let Some(s) = snap.get("session") {
        line("Session:", session_line(s));
    }
    if let Some(p) = snap.get("power") {
        line("Power:", power_line(p));
    }
    if let Some(n) = snap.get("network") {
        line("Network:", network_line(n));
    }
    if let Some(ns) = snap.get("notifications").and_then(Value::as_array) {
        line("Notifications:", ns.len().to_string());
        for l in notification_lines(ns) {
            line("", l);
        }
    }
    if let Some(streams) = snap.get("media.playback").and_then(Value::as_array) {
        let playing = now_playing_lines(streams);
        if playing.is_empty() {
            line("Now playing:", "nothing".into());
        }
        for (i, l) in playing.into_iter().enumerate() {
            line(if i == 0 { "Now playing:" } else { "" }, l);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_each_part_readably() {
        assert_eq!(
            session_line(
                &json!({"active": true, "locked": true, "idle": true, "preparing_for_sleep": true})
            ),
            "active, locked, idle, going to sleep"
        );
        assert_eq!(
            session_line(
                &json!({"active": true, "do_not_disturb": true, "do_not_disturb_by": "gnome"})
            ),
            "active, unlocked, do not disturb (by gnome)"
        );
        assert_eq!(
            session_line(&json!({"active": true, "do_not_disturb": false})),
            "active, unlocked, do not disturb off"
        );
        assert_eq!(
            power_line(
                &json!({"on_battery": true, "percentage": 79.5, "state": "discharging",
                "time_to_empty_s": 5400, "warning_level": "low"})
            ),
            "on battery, 80 %, discharging, 1 h 30 min left, warning: low"
        );
        assert_eq!(
            power_line(&json!({"on_battery": false, "lid_closed": true})),
            "on AC power, lid closed"
        );
        assert_eq!(
            network_line(
                &json!({"connectivity": "full", "metered": true, "primary_type": "wifi", "ssid": "Cafe"})
            ),
            "full connectivity, wifi \"Cafe\", metered"
        );
        assert_eq!(
            network_line(&json!({"connectivity": "none", "metered": false})),
            "none connectivity"
        );
        let ns = notification_lines(&[
            json!({"app_name": "TestApp", "summary": "Hi\nthere", "body": "Body",
            "urgency": "critical", "time": "2026-01-01T00:00:00.000Z"}),
        ]);
        assert!(
            ns[0].contains("TestApp: Hi there — Body [critical]"),
            "{ns:?}"
        );
        let np = now_playing_lines(&[
            json!({"id": "mpris-vlc", "claimed_name": "VLC", "player": {"status": "playing", "title": "T", "artist": "A"}}),
            json!({"id": "pw-1"}),
            json!({"id": "mpris-x", "player": {"status": "stopped"}}),
        ]);
        assert_eq!(np, vec!["VLC: A — T (playing)", "mpris-x: (stopped)"]);
        assert_eq!(
            media_of(&json!({"player": {"title": "T", "artist": "A"}})),
            "A — T"
        );
        assert_eq!(
            media_of(&json!({"media_name": "x", "player": {"title": "T"}})),
            "x"
        );
        let all = status_lines(&json!({"media.playback": [], "notifications": []}));
        assert!(all.contains("Now playing:    nothing"), "{all}");
        assert_eq!(duration(59), "59 s");
    }
}

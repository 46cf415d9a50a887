//! The timeline over MCP: the tools `get_recent_activity` and
//! `summarize_time` and the resource template
//! `context://history{?since,until,app}`, under the rules of History1: the
//! `history` grant to read at all, and of each event only what its own
//! category allows (a focus interval needs `windows`, its title
//! `windows.titles`, …); the rest is left out, never asked for.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use super::Broker;
use super::consent::{self, Allowed, Subject, Wait};
use super::error::Error;
use super::resources::Rendered;
use crate::core::history::HistoryKind;
use crate::core::view;
use crate::model::Category;
use crate::store::history::{History, Query};

/// The resource template of a period of the timeline (RFC 6570 form-style
/// query: `context://history?since=…&until=…&app=…`, every part optional).
pub const HISTORY_TEMPLATE: &str = "context://history{?since,until,app}";
/// Events per call of `get_recent_activity` by default and at most, and
/// per read of the resource (which has no pages: it says `truncated`).
pub const DEFAULT_EVENTS: u32 = 100;
pub const MAX_EVENTS: u32 = 1000;

/// `[since, until)` from optional RFC 3339 date-times: `until` defaults to
/// now, `since` to `default_back` before `until`.
pub fn period(
    since: Option<&str>,
    until: Option<&str>,
    default_back: Duration,
    now: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>), Error> {
    let parse = |k: &str, v: Option<&str>| -> Result<Option<DateTime<Utc>>, Error> {
        let Some(v) = v else { return Ok(None) };
        DateTime::parse_from_rfc3339(v)
            .map(|d| Some(d.with_timezone(&Utc)))
            .map_err(|e| {
                Error::InvalidParams(format!(
                    "{k} '{}': not an RFC 3339 date-time ({e}), e.g. 2026-11-22T09:00:00Z",
                    v.chars().take(64).collect::<String>()
                ))
            })
    };
    let until = parse("until", until)?.unwrap_or(now);
    let since = parse("since", since)?.unwrap_or(until - default_back);
    if until <= since {
        return Err(Error::InvalidParams("until must be after since".into()));
    }
    Ok((since, until))
}

/// The timeline and the categories this reader may see of it, decided up
/// front (asking for `history` when `wait` allows; the details only as
/// already decided).
async fn access<'b>(
    broker: &'b Broker,
    subject: &Subject,
    wait: Wait,
) -> Result<(&'b History, Allowed), Error> {
    let history = broker
        .history
        .as_ref()
        .ok_or_else(|| Error::Unavailable("the timeline is not available".into()))?;
    let allowed = consent::authorize_with_details(
        &broker.core,
        subject,
        Category::History,
        [
            Category::Windows,
            Category::WindowsTitles,
            Category::MediaCapture,
            Category::MediaPlayback,
            Category::Session,
            Category::Notifications,
            Category::NotificationsContent,
        ],
        wait,
    )
    .await?;
    Ok((history, allowed))
}

/// What happened in `[since, until)`, oldest first, at most `limit` events.
pub async fn activity(
    broker: &Broker,
    subject: &Subject,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    app: Option<String>,
    limit: u32,
    wait: Wait,
) -> Result<Rendered, Error> {
    let (history, allowed) = access(broker, subject, wait).await?;
    let can = |c: &Category| allowed.can(c);
    let kinds: Vec<HistoryKind> = HistoryKind::ALL
        .into_iter()
        .filter(|k| can(&k.category()))
        .collect();
    if kinds.is_empty() {
        return Ok(Rendered {
            json: json!({"events": [], "truncated": false}),
            markdown: "Nothing this host may see was recorded.".into(),
        });
    }
    let q = Query {
        since,
        until,
        kinds,
        apps: app.into_iter().collect(),
        limit: limit.clamp(1, MAX_EVENTS),
        cursor: None,
    };
    let (rows, next) = history.query(&q, broker.core.clock.now()).await?;
    let events: Vec<Value> = rows.iter().map(|e| view::history_event(e, &can)).collect();
    let mut md = format!(
        "{} events from {} to {}{}:\n",
        events.len(),
        since.to_rfc3339(),
        until.to_rfc3339(),
        if next.is_some() {
            " (more: ask for a shorter period)"
        } else {
            ""
        }
    );
    for e in &events {
        md.push_str(&format!(
            "- {} {} {}{}\n",
            e["start"].as_str().unwrap_or(""),
            e["kind"].as_str().unwrap_or(""),
            e["app_id"].as_str().unwrap_or(""),
            e["title"]
                .as_str()
                .map(|t| format!(" — {t}"))
                .unwrap_or_default()
        ));
    }
    Ok(Rendered {
        json: json!({"events": events, "truncated": next.is_some()}),
        markdown: md,
    })
}

/// Focus, capture and playback time per app in `[since, until)`, each only
/// with its category.
pub async fn time_per_app(
    broker: &Broker,
    subject: &Subject,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    wait: Wait,
) -> Result<Rendered, Error> {
    let (history, allowed) = access(broker, subject, wait).await?;
    let totals = history
        .summary(since, until, broker.core.clock.now())
        .await?;
    let can = |c: &Category| allowed.can(c);
    let mut apps = Vec::new();
    let mut md = String::from("Time per app:\n");
    for t in &totals {
        if let Some(v) = view::app_totals(t, &can) {
            md.push_str(&format!(
                "- {}: {:.0} min focused\n",
                t.app_id,
                t.focus_ms as f64 / 60000.0
            ));
            apps.push(v);
        }
    }
    Ok(Rendered {
        json: json!({"apps": apps}),
        markdown: md,
    })
}

/// Capture intervals (microphone, camera, screen) in `[since, until)` from
/// the timeline, oldest first, a line each; `None` without a timeline. The
/// caller has checked `history` and `media.capture`.
pub async fn capture_lines(
    broker: &Broker,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Option<Vec<String>>, Error> {
    let Some(history) = broker.history.as_ref() else {
        return Ok(None);
    };
    let q = Query {
        since,
        until,
        kinds: vec![HistoryKind::Capture],
        apps: vec![],
        limit: MAX_EVENTS,
        cursor: None,
    };
    let (rows, next) = history.query(&q, broker.core.clock.now()).await?;
    let mut lines: Vec<String> = rows
        .iter()
        .map(|e| {
            let device = e
                .detail
                .as_ref()
                .and_then(|d| d.get("device"))
                .and_then(Value::as_str)
                .unwrap_or("capture device");
            let time = |t: &DateTime<Utc>| view::time(t).as_str().unwrap_or_default().to_owned();
            super::resources::capture_span(
                e.app_id.as_deref().unwrap_or("an unknown app"),
                device,
                &time(&e.start),
                e.end.as_ref().map(time).as_deref(),
            )
        })
        .collect();
    if next.is_some() {
        lines.push(format!("… and more after the first {MAX_EVENTS}"));
    }
    Ok(Some(lines))
}

/// App ids in the timeline, for completing the template's `app` (only
/// for a reader with the `history` grant).
pub async fn app_ids(broker: &Broker, subject: &Subject) -> Vec<String> {
    let Some(history) = broker.history.as_ref() else {
        return Vec::new();
    };
    if consent::authorize(&broker.core, subject, &[Category::History], Wait::Never)
        .await
        .is_err()
    {
        return Vec::new();
    }
    history.app_ids().await.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_default_and_fail_clearly() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
            .map(|d| d.with_timezone(&Utc))
            .expect("date");
        let (s, u) = period(None, None, Duration::hours(1), now).expect("default");
        assert_eq!((u - s, u), (Duration::hours(1), now));
        let (s, _) = period(
            Some("2026-11-22T10:00:00+01:00"),
            None,
            Duration::hours(1),
            now,
        )
        .expect("offset");
        assert_eq!(s, now - Duration::hours(3));
        let e = period(Some("yesterday"), None, Duration::hours(1), now).expect_err("bad");
        assert!(matches!(e, Error::InvalidParams(m) if m.contains("since 'yesterday'")));
        let e = period(None, Some("2026-11-22T09:00:00Z"), Duration::hours(1), now);
        assert!(e.is_ok(), "until alone moves the default since with it");
        let e = period(Some("2026-11-22T13:00:00Z"), None, Duration::hours(1), now);
        assert!(matches!(e, Err(Error::InvalidParams(_))));
    }
}

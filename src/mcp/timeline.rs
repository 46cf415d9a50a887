//! The timeline over MCP: the tools `get_recent_activity` and
//! `summarize_time` and the resource template
//! `context://history{?since,until,app}`, under the rules of History1: the
//! `history` grant to read at all, and of each event only what its own
//! category allows (a focus interval needs `windows`, its title
//! `windows.titles`, …); the rest is left out, never asked for.

use chrono::{DateTime, Duration, Utc};

use super::Broker;
use super::consent::{Mode, Subject};
use super::error::Error;
use super::output::{ActivityOut, Output, TimeOut};
use super::render::Rendered;
use crate::core::history::{HistoryKind, Query};
use crate::core::read;

/// The resource template of a period of the timeline (RFC 6570 form-style
/// query: `context://history?since=…&until=…&app=…`, every part optional).
pub(crate) const HISTORY_TEMPLATE: &str = "context://history{?since,until,app}";
/// Events per call of `get_recent_activity` by default and at most, and
/// per read of the resource (which has no pages: it says `truncated`).
pub(crate) const DEFAULT_EVENTS: u32 = 100;
pub(crate) const MAX_EVENTS: u32 = 1000;

/// `[since, until)` from optional RFC 3339 date-times: `until` defaults to
/// now, `since` to `default_back` before `until`.
pub(crate) fn period(
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

/// What happened in `[since, until)`, oldest first, at most `limit` events
/// (of `app` only, when given).
pub(crate) async fn activity(
    broker: &Broker,
    subject: &Subject,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    app: Option<String>,
    limit: u32,
    mode: Mode,
) -> Result<Rendered, Error> {
    let q = Query {
        since,
        until,
        kinds: HistoryKind::ALL.to_vec(),
        apps: app.into_iter().collect(),
        limit: limit.clamp(1, MAX_EVENTS),
        cursor: None,
    };
    let page = broker
        .core
        .reads
        .read(subject, read::History(q), mode)
        .await?;
    ActivityOut {
        period: (since, until),
        truncated: page.next_cursor.is_some(),
        events: page.events,
    }
    .rendered()
}

/// Focus, capture and playback time per app in `[since, until)`, each only
/// with its category.
pub(crate) async fn time_per_app(
    broker: &Broker,
    subject: &Subject,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    mode: Mode,
) -> Result<Rendered, Error> {
    let apps = broker
        .core
        .reads
        .read(subject, read::Summary { since, until }, mode)
        .await?;
    TimeOut { apps }.rendered()
}

/// App ids in the timeline, for completing the template's `app` (only
/// for a reader with the `history` grant; never asks).
pub(crate) async fn app_ids(broker: &Broker, subject: &Subject) -> Vec<String> {
    broker
        .core
        .reads
        .read(subject, read::HistoryApps, Mode::Look)
        .await
        .unwrap_or_default()
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

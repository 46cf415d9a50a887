//! `org.contextd.History1`: the timeline. Documented in
//! `dbus-interfaces/org.contextd.History1.xml`.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use zbus::message::Header;
use zbus::{Message, interface};

use super::Shared;
use super::error::{Error, Result};
use super::served::{self, OnePass, Written, answer};
use super::wire::{self, Dict};
use crate::core::history::{HistoryKind, Query, parse_cursor};
use crate::core::read;
use crate::core::view::{AppTotalsView, HistoryPage};
use crate::model::{AppId, Category};

pub(crate) struct History1 {
    pub(crate) shared: Arc<Shared>,
    pub(crate) enabled: bool,
}

/// `[since, until)` from Unix seconds (0: `since_default`/`until_default`);
/// an empty or inverted period is an error, not an empty answer.
pub(crate) fn period_args(
    (since, until): (i64, i64),
    since_default: DateTime<Utc>,
    until_default: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>)> {
    let s = time_arg("since", since, since_default)?;
    let u = time_arg("until", until, until_default)?;
    if u <= s {
        return Err(Error::InvalidArgs("until must be after since".into()));
    }
    Ok((s, u))
}

fn time_arg(name: &str, secs: i64, default: DateTime<Utc>) -> Result<DateTime<Utc>> {
    if secs == 0 {
        return Ok(default);
    }
    Utc.timestamp_opt(secs, 0)
        .single()
        .ok_or_else(|| Error::InvalidArgs(format!("{name}: {secs} is not a valid Unix time")))
}

/// The kinds of the timeline that hold `wanted` (category names; empty:
/// every kind). A name that is not a category is an error.
pub(crate) fn kinds_for(wanted: &[String]) -> Result<Vec<HistoryKind>> {
    let mut cats: Vec<Category> = Vec::new();
    for w in wanted {
        let c: Category = w.parse().map_err(crate::core::Error::from)?;
        cats.push(c);
    }
    Ok(HistoryKind::ALL
        .into_iter()
        .filter(|k| cats.is_empty() || cats.contains(&k.category()))
        .collect())
}

/// The arguments of `Query`: since, until, categories, apps, limit,
/// cursor.
type QueryArgs = (i64, i64, Vec<String>, Vec<String>, u32, String);

/// What `History1` answers, each read once: the macro's methods format it
/// through `Dict`s, [`served::Served`] writes it once ([`OnePass`]).
impl History1 {
    async fn page(
        &self,
        hdr: &Header<'_>,
        (since, until, categories, apps, limit, cursor): QueryArgs,
    ) -> Result<HistoryPage> {
        let now = self.shared.core.manage.now();
        let (q_since, q_until) = period_args(
            (since, until),
            DateTime::<Utc>::MIN_UTC,
            now + chrono::Duration::seconds(1),
        )?;
        let cursor = parse_cursor(&cursor)?;
        for a in &apps {
            AppId::new(a.as_str()).map_err(|e| Error::InvalidArgs(format!("apps: {e}")))?;
        }
        let q = Query {
            since: q_since,
            until: q_until,
            kinds: kinds_for(&categories)?,
            apps,
            limit,
            cursor,
        };
        self.shared
            .read(hdr, read::History(q), super::access(hdr))
            .await
    }

    async fn summary_of(
        &self,
        hdr: &Header<'_>,
        (since, until): (i64, i64),
    ) -> Result<Vec<AppTotalsView>> {
        let now = self.shared.core.manage.now();
        let (q_since, q_until) = period_args((since, until), now - chrono::Duration::days(1), now)?;
        let summary = read::Summary {
            since: q_since,
            until: q_until,
        };
        self.shared.read(hdr, summary, super::access(hdr)).await
    }
}

/// `Query` and `Summary` written once; `Forget` is the macro's.
impl OnePass for History1 {
    fn one_pass<'a>(&'a self, member: &str, msg: &'a Message) -> Option<served::Answer<'a>> {
        Some(match member {
            "Query" => answer(msg, move |args: QueryArgs, hdr| async move {
                let page = self.page(&hdr, args).await?;
                Written::page(
                    &page.events,
                    page.next_cursor.as_deref().unwrap_or_default(),
                )
            }),
            "Summary" => answer(msg, move |args, hdr| async move {
                Written::list(&self.summary_of(&hdr, args).await?)
            }),
            _ => return None,
        })
    }

    fn replies(&self) -> &served::ReplyHeaders {
        &self.shared.replies
    }
}

#[interface(name = "org.contextd.History1", introspection_docs = false)]
impl History1 {
    /// Events overlapping [since, until), oldest first, a page at a time.
    #[zbus(out_args("events", "next_cursor"))]
    #[allow(clippy::too_many_arguments)]
    async fn query(
        &self,
        since: i64,
        until: i64,
        categories: Vec<String>,
        apps: Vec<String>,
        limit: u32,
        cursor: String,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<(Vec<Dict>, String)> {
        let page = self
            .page(&hdr, (since, until, categories, apps, limit, cursor))
            .await?;
        Ok((
            wire::dicts(&page.events)?,
            page.next_cursor.unwrap_or_default(),
        ))
    }

    /// Time per app within [since, until): focus, capture, playback.
    #[zbus(out_args("apps"))]
    async fn summary(
        &self,
        since: i64,
        until: i64,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.summary_of(&hdr, (since, until)).await?)?)
    }

    /// Delete events overlapping [since, until) of `apps` and
    /// `categories` (empty: all); returns how many.
    #[zbus(out_args("removed"))]
    async fn forget(
        &self,
        since: i64,
        until: i64,
        apps: Vec<String>,
        categories: Vec<String>,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<u64> {
        let now = self.shared.core.manage.now();
        let (q_since, q_until) = period_args(
            (since, until),
            DateTime::<Utc>::MIN_UTC,
            now + chrono::Duration::seconds(1),
        )?;
        let kinds = if categories.is_empty() {
            Vec::new()
        } else {
            kinds_for(&categories)?
        };
        if !categories.is_empty() && kinds.is_empty() {
            return Err(Error::InvalidArgs(
                "none of these categories has history".into(),
            ));
        }
        self.shared.authorize_manage(&hdr).await?;
        let n = self
            .shared
            .core
            .manage
            .forget_history(q_since, q_until, apps, kinds)
            .await?;
        tracing::info!(rows = n, "history forgotten");
        Ok(n)
    }

    /// Whether the timeline records now (enabled and not paused): to
    /// callers granted `history` (paused or not; the timeline's gaps tell
    /// them anyway), since it says whether the user paused sharing.
    #[zbus(property(emits_changed_signal = "false"))]
    async fn recording(&self, #[zbus(header)] hdr: Option<Header<'_>>) -> Result<bool> {
        let hdr = hdr.ok_or_else(|| Error::NotAllowed("no caller".into()))?;
        let who = self.shared.subject(&hdr).await?;
        if !self
            .shared
            .core
            .manage
            .granted(&who.app_id, &Category::History)
        {
            return Err(Error::NotAllowed(format!(
                "Recording tells whether the user paused sharing: it needs the category history ({})",
                who.app_id
            )));
        }
        Ok(self.enabled && !self.shared.core.manage.paused())
    }
}

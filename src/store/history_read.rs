//! The timeline store as the core reads it: `core::history::HistoryStore`
//! over [`History`]'s queries.

use chrono::{DateTime, Utc};

use super::history::History;
use crate::core::Error;
use crate::core::consent::BoxFut;
use crate::core::history::{AppTotals, HistoryKind, HistoryStore, Page, Query};

impl HistoryStore for History {
    fn query(&self, q: Query, now: DateTime<Utc>) -> BoxFut<'_, Result<Page, Error>> {
        Box::pin(async move { History::query(self, &q, now).await })
    }

    fn summary(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<Vec<AppTotals>, Error>> {
        Box::pin(History::summary(self, since, until, now))
    }

    fn forget(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        apps: Vec<String>,
        kinds: Vec<HistoryKind>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<u64, Error>> {
        Box::pin(async move { History::forget(self, since, until, &apps, &kinds, now).await })
    }
}

//! The timeline in the encrypted database: batched writes (bounded
//! transactions, see [`pending`]), queries with stable cursors, summaries,
//! forgetting with secure delete, retention.

mod pending;

use std::time::Duration;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqlitePool, SqliteRow};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::health::{Health, Lost, is_write_fault};
use super::{from_ms, ms};
use crate::core::Error;
pub use crate::core::history::AppTotals;
use crate::core::history::{HistoryEvent, HistoryKind, HistoryOp, HistorySettings};
use pending::{BATCH, Pending};

/// How long an operation waits for others to share its transaction: a
/// crash loses at most this much of the timeline plus the transaction's
/// own time. Under a second, so that the two together stay within the
/// promise of losing no more than the last second: with 1 s here, `make
/// soak` (100 kill -9 under load, 2 busy cores) measured up to 1.03 s lost.
const FLUSH: Duration = Duration::from_millis(750);
/// The writer warns that it is behind at most this often, with the count.
const WARN_EVERY: Duration = Duration::from_secs(10);
const HOUR_MS: i64 = 3_600_000;

/// Rows that are open or last at least this long are in the partial index
/// `history_long` (migrations/0003): the only rows that can cross a moment
/// more than this after they started.
const LONG_MS: i64 = HOUR_MS;
/// The WHERE of `history_long`, verbatim: SQLite uses a partial index only
/// for a query that contains its condition as written.
const LONG: &str = "(end_ms IS NULL OR end_ms - start_ms >= 3600000)";

/// The kinds `Summary` adds up, and `history_hourly` keeps.
const SUMMED: [&str; 3] = ["focus", "capture", "playback"];
const SUMMED_SQL: &str = "kind IN ('focus', 'capture', 'playback') AND app_id IS NOT NULL";

fn failed(e: sqlx::Error) -> Error {
    Error::Failed(format!("history database: {e}"))
}

pub use crate::core::history::{Query, parse_cursor};

#[derive(Debug, Clone)]
pub struct History {
    pool: SqlitePool,
    handed: Arc<Handed>,
}

pub struct HistoryWriter {
    pool: SqlitePool,
    handed: Arc<Handed>,
    /// Told of every batch written or not (a full disk).
    health: Health,
}

/// Between `submit` and the writer. The lock is held to push a change's
/// operations or to take one bounded batch, never across an await or a
/// database call, so the state's `apply` waits microseconds at most.
#[derive(Debug, Default)]
struct Handed {
    pending: Mutex<Pending>,
    /// Wakes the writer when the first operation arrives (its wait
    /// starts) and when a batch is full.
    wake: Notify,
}

impl Handed {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The statements built here with `format!` put together constants of this
/// module only; every value is bound as a parameter.
fn trusted(sql: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(sql)
}

/// Ids of the rows overlapping `[a, b)` (an open row ends at `now`): rows
/// that start in it, rows that started in the hour before `a` and end after
/// it, and long or open rows that cross `a` — three disjoint index range
/// scans instead of one scan of everything before `b`. The arguments are
/// SQL parameter placeholders.
fn overlapping(a: &str, b: &str, now: &str) -> String {
    format!(
        "SELECT id FROM history INDEXED BY history_start WHERE start_ms >= {a} AND start_ms < {b}
         UNION ALL
         SELECT id FROM history INDEXED BY history_start
          WHERE start_ms >= {a} - {LONG_MS} AND start_ms < {a} AND start_ms < {b} AND coalesce(end_ms, {now}) > {a}
         UNION ALL
         SELECT id FROM history INDEXED BY history_long
          WHERE start_ms < {a} - {LONG_MS} AND start_ms < {b} AND {LONG} AND coalesce(end_ms, {now}) > {a}"
    )
}

/// A page of `History::query`: ?1 until, ?2 now, ?3 since, ?4 kinds and
/// ?5 apps (JSON arrays), ?6 ?7 the cursor, ?8 the limit.
///
/// The same three ranges as [`overlapping`], written out rather than as
/// `id IN (…)`: each arm comes out of its index in (start, id) order, so
/// SQLite merges them and stops at the limit; an `id IN` would sort the
/// whole period first.
///
/// The cursor's `+start_ms` keeps SQLite from taking `start_ms > ?6` as the
/// lower end of the index range (with no cursor, ?6 is the smallest i64 and
/// the page read every row before the period: 90 ms instead of 2 ms over a
/// million rows); the period's own bound, raised to the cursor, is the range.
fn sql_page() -> String {
    let cols = "id, kind, app_id, title, detail, start_ms, end_ms";
    let filters = "kind IN (SELECT value FROM json_each(?4))
               AND (json_array_length(?5) = 0 OR app_id IN (SELECT value FROM json_each(?5)))
               AND (+start_ms > ?6 OR (+start_ms = ?6 AND id > ?7))";
    format!(
        "SELECT {cols} FROM history INDEXED BY history_start
              WHERE start_ms >= ?3 - {LONG_MS} AND start_ms < ?3 AND start_ms < ?1
                AND coalesce(end_ms, ?2) > ?3
                AND {filters}
             UNION ALL
             SELECT {cols} FROM history INDEXED BY history_long
              WHERE start_ms < ?3 - {LONG_MS} AND start_ms < ?1 AND {LONG}
                AND coalesce(end_ms, ?2) > ?3
                AND {filters}
             UNION ALL
             SELECT {cols} FROM history INDEXED BY history_start
              WHERE start_ms >= max(?3, ?6) AND start_ms < ?1 AND {filters}
             ORDER BY start_ms, id LIMIT ?8"
    )
}

/// Time per app and kind of the rows overlapping [?1, ?2) (open rows end
/// at ?3), only closed rows when `closed_only`.
fn sql_summed(closed_only: bool) -> String {
    format!(
        "SELECT app_id, kind, sum(max(0, min(coalesce(end_ms, ?3), ?2) - max(start_ms, ?1)))
         FROM history WHERE id IN ({}) AND {SUMMED_SQL} {}
         GROUP BY app_id, kind",
        overlapping("?1", "?2", "?3"),
        if closed_only {
            "AND end_ms IS NOT NULL"
        } else {
            ""
        }
    )
}

/// Time per app and kind of the open rows within [?1, ?2), ending at ?3.
fn sql_summed_open() -> String {
    format!(
        "SELECT app_id, kind, sum(max(0, min(?3, ?2) - max(start_ms, ?1)))
         FROM history INDEXED BY history_long
         WHERE {LONG} AND end_ms IS NULL AND start_ms < ?2 AND {SUMMED_SQL}
         GROUP BY app_id, kind"
    )
}

/// Delete the rows overlapping [?1, ?2) (open rows end at ?3) of kinds ?4
/// and apps ?5 (JSON arrays, empty: all).
fn sql_forget() -> String {
    format!(
        "DELETE FROM history
         WHERE id IN ({})
           AND (json_array_length(?4) = 0 OR kind IN (SELECT value FROM json_each(?4)))
           AND (json_array_length(?5) = 0 OR app_id IN (SELECT value FROM json_each(?5)))
         RETURNING kind, app_id, start_ms, end_ms",
        overlapping("?1", "?2", "?3")
    )
}

/// Changes to `history_hourly`, summed in memory and written in the
/// transaction that changes the rows they come from.
#[derive(Default)]
struct Hourly(HashMap<(i64, String, String), i64>);

impl Hourly {
    /// Add (`sign` 1) or take away (-1) the time of a closed interval, hour
    /// by hour. Open intervals, points and kinds that are not summed add
    /// nothing.
    fn add(&mut self, kind: &str, app: Option<&str>, start: i64, end: Option<i64>, sign: i64) {
        let (Some(app), Some(end)) = (app, end) else {
            return;
        };
        if !SUMMED.contains(&kind) || end <= start {
            return;
        }
        let mut hour = start - start.rem_euclid(HOUR_MS);
        while hour < end {
            let part = end.min(hour + HOUR_MS) - start.max(hour);
            *self
                .0
                .entry((hour, app.to_owned(), kind.to_owned()))
                .or_default() += sign * part;
            hour += HOUR_MS;
        }
    }

    /// Add or take away a row as `RETURNING kind, app_id, start_ms, end_ms`
    /// gives it.
    fn add_row(&mut self, r: &SqliteRow, sign: i64) -> Result<(), sqlx::Error> {
        let kind: String = r.try_get(0)?;
        let app: Option<String> = r.try_get(1)?;
        self.add(&kind, app.as_deref(), r.try_get(2)?, r.try_get(3)?, sign);
        Ok(())
    }

    async fn apply(self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        let mut removed = false;
        for ((hour, app, kind), v) in self.0 {
            if v == 0 {
                continue;
            }
            removed |= v < 0;
            sqlx::query(
                "INSERT INTO history_hourly (hour_ms, app_id, kind, ms) VALUES (?, ?, ?, ?)
                 ON CONFLICT (hour_ms, app_id, kind) DO UPDATE SET ms = ms + excluded.ms",
            )
            .bind(hour)
            .bind(app)
            .bind(kind)
            .bind(v)
            .execute(&mut *conn)
            .await?;
        }
        if removed {
            sqlx::query("DELETE FROM history_hourly WHERE ms <= 0")
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }
}

/// Run `sql` (a DELETE or UPDATE … `RETURNING kind, app_id, start_ms,
/// end_ms`) and count what it returns into `hourly` with `sign`; returns the
/// number of rows.
async fn returning(
    conn: &mut SqliteConnection,
    q: sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    hourly: &mut Hourly,
    sign: i64,
) -> Result<u64, sqlx::Error> {
    let mut rows = q.fetch(conn);
    let mut n = 0;
    while let Some(r) = rows.try_next().await? {
        hourly.add_row(&r, sign)?;
        n += 1;
    }
    Ok(n)
}

/// Totals per app being added up.
#[derive(Default)]
struct Totals(BTreeMap<String, AppTotals>);

impl Totals {
    /// Add rows of `app_id, kind, ms`.
    fn add(&mut self, rows: &[SqliteRow]) -> Result<(), Error> {
        for r in rows {
            let app: String = r.try_get(0).map_err(failed)?;
            let kind: String = r.try_get(1).map_err(failed)?;
            let v: i64 = r.try_get(2).map_err(failed)?;
            let t = self.0.entry(app.clone()).or_insert_with(|| AppTotals {
                app_id: app,
                ..Default::default()
            });
            match kind.as_str() {
                "focus" => t.focus_ms += v,
                "capture" => t.capture_ms += v,
                _ => t.playback_ms += v,
            }
        }
        Ok(())
    }

    fn into_sorted(self) -> Vec<AppTotals> {
        let mut v: Vec<AppTotals> = self
            .0
            .into_values()
            .filter(|t| t.focus_ms + t.capture_ms + t.playback_ms > 0)
            .collect();
        v.sort_by(|a, b| {
            b.focus_ms
                .cmp(&a.focus_ms)
                .then(b.capture_ms.cmp(&a.capture_ms))
                .then(b.playback_ms.cmp(&a.playback_ms))
                .then(a.app_id.cmp(&b.app_id))
        });
        v
    }
}

impl History {
    /// Prepare the store: intervals a crash left open end at the last
    /// moment the recorder was known alive. Returns the next free id.
    pub async fn open(pool: SqlitePool) -> Result<(History, HistoryWriter, i64), Error> {
        History::open_reporting(pool, Health::new(std::path::Path::new("the database"))).await
    }

    /// [`History::open`], the writer reporting to the database's `health`
    /// (the daemon's; a full disk shows in `ListSources`).
    pub async fn open_reporting(
        pool: SqlitePool,
        health: Health,
    ) -> Result<(History, HistoryWriter, i64), Error> {
        let mut tx = pool.begin().await.map_err(failed)?;
        let alive: Option<i64> =
            sqlx::query_scalar("SELECT value FROM history_meta WHERE key = 'alive_ms'")
                .fetch_optional(&mut *tx)
                .await
                .map_err(failed)?;
        if let Some(alive) = alive {
            let mut hourly = Hourly::default();
            let sql = format!(
                "UPDATE history INDEXED BY history_long SET end_ms = max(start_ms, ?)
                 WHERE {LONG} AND end_ms IS NULL
                 RETURNING kind, app_id, start_ms, end_ms"
            );
            returning(
                &mut tx,
                sqlx::query(trusted(sql)).bind(alive),
                &mut hourly,
                1,
            )
            .await
            .map_err(failed)?;
            hourly.apply(&mut tx).await.map_err(failed)?;
        }
        let next: i64 = sqlx::query_scalar("SELECT coalesce(max(id), 0) + 1 FROM history")
            .fetch_one(&mut *tx)
            .await
            .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        let handed = Arc::new(Handed::default());
        Ok((
            History {
                pool: pool.clone(),
                handed: handed.clone(),
            },
            HistoryWriter {
                pool,
                handed,
                health,
            },
            next,
        ))
    }

    /// Hand operations to the writer; never waits for it. When it is
    /// behind, new intervals are dropped and counted (see [`pending`]).
    /// Whether the writer takes new intervals now (fewer than its bound
    /// wait): a producer that may wait (an import, the benchmark) waits
    /// for room instead of having intervals refused.
    pub fn has_room(&self) -> bool {
        self.handed.pending().len() < pending::CAPACITY
    }

    pub fn submit(&self, ops: Vec<HistoryOp>) {
        let wake = {
            let mut p = self.handed.pending();
            let before = p.len();
            for op in ops {
                p.push(op);
            }
            let after = p.len();
            (before == 0 && after > 0) || (before < BATCH && after >= BATCH)
        };
        if wake {
            self.handed.wake.notify_one();
        }
    }

    /// A page of rows overlapping `[since, until)` in (start, id) order.
    ///
    /// Three index range scans merged in order (rows crossing `since` that
    /// started within the hour before it, long or open rows crossing it,
    /// rows starting in the period), so the first page costs the page, not
    /// the days before it.
    pub async fn query(
        &self,
        q: &Query,
        now: DateTime<Utc>,
    ) -> Result<(Vec<HistoryEvent>, Option<String>), Error> {
        let limit = if q.limit == 0 { 100 } else { q.limit.min(1000) };
        let kinds: Vec<&str> = q.kinds.iter().map(|k| k.as_str()).collect();
        let kinds_json = serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".into());
        let apps_json = serde_json::to_string(&q.apps).unwrap_or_else(|_| "[]".into());
        let (cs, ci) = q.cursor.unwrap_or((i64::MIN, i64::MIN));
        let sql = sql_page();
        let rows = sqlx::query(trusted(sql))
            .bind(ms(q.until))
            .bind(ms(now))
            .bind(ms(q.since))
            .bind(&kinds_json)
            .bind(&apps_json)
            .bind(cs)
            .bind(ci)
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let kind: String = r.try_get(1).map_err(failed)?;
            let Some(kind) = HistoryKind::parse(&kind) else {
                continue;
            };
            let detail: Option<String> = r.try_get(4).map_err(failed)?;
            out.push(HistoryEvent {
                id: r.try_get(0).map_err(failed)?,
                kind,
                app_id: r.try_get(2).map_err(failed)?,
                title: r.try_get(3).map_err(failed)?,
                detail: detail.and_then(|d| serde_json::from_str(&d).ok()),
                start: from_ms(r.try_get(5).map_err(failed)?),
                end: r.try_get::<Option<i64>, _>(6).map_err(failed)?.map(from_ms),
            });
        }
        let next = if out.len() > limit as usize {
            out.truncate(limit as usize);
            out.last().map(|e| format!("{}:{}", ms(e.start), e.id))
        } else {
            None
        };
        Ok((out, next))
    }

    /// Focus, capture and playback time per app within [since, until)
    /// (open intervals end at `now`), most focused first.
    ///
    /// Whole hours come from `history_hourly`; the parts of the period
    /// before its first and after its last whole hour, and open intervals,
    /// from `history`. All in one read transaction: the writer closing a
    /// row between two of the reads would count it twice or not at all.
    pub async fn summary(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<AppTotals>, Error> {
        let (s, u, n) = (ms(since), ms(until), ms(now));
        let mut totals = Totals::default();
        if u <= s {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await.map_err(failed)?;
        let raw = |a: i64, b: i64, closed_only: bool| (sql_summed(closed_only), a, b);
        let first_hour = s + (HOUR_MS - s.rem_euclid(HOUR_MS)) % HOUR_MS;
        let last_hour = u - u.rem_euclid(HOUR_MS);
        let mut parts = Vec::new();
        if first_hour < last_hour {
            let rows = sqlx::query(
                "SELECT app_id, kind, sum(ms) FROM history_hourly
                 WHERE hour_ms >= ? AND hour_ms < ? GROUP BY app_id, kind",
            )
            .bind(first_hour)
            .bind(last_hour)
            .fetch_all(&mut *tx)
            .await
            .map_err(failed)?;
            totals.add(&rows)?;
            let open = sql_summed_open();
            parts.push((open, s, u));
            if s < first_hour {
                parts.push(raw(s, first_hour, true));
            }
            if last_hour < u {
                parts.push(raw(last_hour, u, true));
            }
        } else {
            parts.push(raw(s, u, false));
        }
        for (sql, a, b) in parts {
            let rows = sqlx::query(trusted(sql))
                .bind(a)
                .bind(b)
                .bind(n)
                .fetch_all(&mut *tx)
                .await
                .map_err(failed)?;
            totals.add(&rows)?;
        }
        tx.commit().await.map_err(failed)?;
        Ok(totals.into_sorted())
    }

    /// Delete rows overlapping [since, until) of `apps` and `kinds` (empty:
    /// all), then checkpoint the WAL so that the overwritten pages replace
    /// the old ones in the database file.
    pub async fn forget(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        apps: &[String],
        kinds: &[HistoryKind],
        now: DateTime<Utc>,
    ) -> Result<u64, Error> {
        let kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let kinds_json = serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".into());
        let apps_json = serde_json::to_string(apps).unwrap_or_else(|_| "[]".into());
        let sql = sql_forget();
        let mut tx = self.pool.begin().await.map_err(failed)?;
        let mut hourly = Hourly::default();
        let q = sqlx::query(trusted(sql))
            .bind(ms(since))
            .bind(ms(until))
            .bind(ms(now))
            .bind(&kinds_json)
            .bind(&apps_json);
        let n = returning(&mut tx, q, &mut hourly, -1)
            .await
            .map_err(failed)?;
        hourly.apply(&mut tx).await.map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        self.checkpoint().await;
        Ok(n)
    }

    async fn checkpoint(&self) {
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await
        {
            tracing::warn!(error = %e, "WAL checkpoint after forgetting failed");
        }
    }

    /// Enforce retention: rows that ended before their kind's limit go.
    pub async fn purge(
        &self,
        settings: &HistorySettings,
        now: DateTime<Utc>,
    ) -> Result<u64, Error> {
        let mut tx = self.pool.begin().await.map_err(failed)?;
        let mut hourly = Hourly::default();
        let mut n = 0;
        for k in HistoryKind::ALL {
            let cutoff = ms(now - settings.retention(k));
            let q = sqlx::query(
                "DELETE FROM history INDEXED BY history_start
                 WHERE start_ms < ?2 AND kind = ?1 AND coalesce(end_ms, start_ms) < ?2
                 RETURNING kind, app_id, start_ms, end_ms",
            )
            .bind(k.as_str())
            .bind(cutoff);
            n += returning(&mut tx, q, &mut hourly, -1)
                .await
                .map_err(failed)?;
        }
        hourly.apply(&mut tx).await.map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        if n > 0 {
            self.checkpoint().await;
        }
        Ok(n)
    }
}

async fn write(
    pool: &SqlitePool,
    batch: &mut Vec<HistoryOp>,
    alive: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut hourly = Hourly::default();
    for op in batch.drain(..) {
        match op {
            HistoryOp::Open(e) => {
                let written = sqlx::query(
                    "INSERT INTO history (id, kind, category, app_id, title, detail, start_ms, end_ms)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                )
                .bind(e.id)
                .bind(e.kind.as_str())
                .bind(e.kind.category().to_string())
                .bind(e.app_id.as_deref())
                .bind(e.title)
                .bind(e.detail.map(|d| d.to_string()))
                .bind(ms(e.start))
                .bind(e.end.map(ms))
                .execute(&mut *tx)
                .await?;
                if written.rows_affected() == 1 {
                    hourly.add(
                        e.kind.as_str(),
                        e.app_id.as_deref(),
                        ms(e.start),
                        e.end.map(ms),
                        1,
                    );
                }
            }
            HistoryOp::Close { id, end } => {
                let q = sqlx::query(
                    "UPDATE history SET end_ms = ? WHERE id = ? AND end_ms IS NULL
                     RETURNING kind, app_id, start_ms, end_ms",
                )
                .bind(ms(end))
                .bind(id);
                returning(&mut tx, q, &mut hourly, 1).await?;
            }
        }
    }
    hourly.apply(&mut tx).await?;
    sqlx::query("INSERT INTO history_meta (key, value) VALUES ('alive_ms', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
        .bind(ms(alive))
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// Intervals the writer had no room for, not yet reported.
#[derive(Default)]
struct Behind {
    dropped: u64,
    warned: Option<std::time::Instant>,
}

impl Behind {
    fn warn(&mut self) {
        if self.dropped > 0 {
            tracing::warn!(
                dropped = self.dropped,
                "the history writer is behind: {} intervals were not recorded",
                self.dropped
            );
            self.dropped = 0;
            self.warned = Some(std::time::Instant::now());
        }
    }
}

impl HistoryWriter {
    /// Write until cancelled, then write what is left.
    ///
    /// An operation waits at most [`FLUSH`] for others to share its
    /// transaction (at most one every 750 ms while changes trickle in, no
    /// timer while idle); a full batch is written at once, so under a
    /// burst the writer commits a bounded transaction after another, and
    /// the timeline on disk is never more than about a second behind.
    pub async fn run(self, cancel: CancellationToken) {
        let mut deadline: Option<tokio::time::Instant> = None;
        let mut behind = Behind::default();
        loop {
            let waiting = self.handed.pending().len();
            if waiting == 0 {
                deadline = None;
            } else {
                let d = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + FLUSH);
                if waiting >= BATCH || d <= tokio::time::Instant::now() {
                    self.write_batch(&mut behind).await;
                    deadline = None;
                    continue;
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.handed.wake.notified() => {}
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
        while self.handed.pending().len() > 0 {
            self.write_batch(&mut behind).await;
        }
        behind.warn();
    }

    /// Take one batch and write it in one transaction.
    async fn write_batch(&self, behind: &mut Behind) {
        let batch = self.handed.pending().take(BATCH);
        behind.dropped += batch.dropped;
        if behind.warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            behind.warn();
        }
        if batch.coalesced > 0 {
            tracing::debug!(
                coalesced = batch.coalesced,
                "history: focus flapping under a millisecond coalesced"
            );
        }
        let mut ops = batch.ops;
        let n = ops.len() as u64;
        // A batch that cannot be written is dropped (and counted in the
        // database's health), not put back: the pending operations stay
        // bounded, and the next batch tries again.
        match write(&self.pool, &mut ops, Utc::now()).await {
            Ok(()) => self.health.wrote(),
            Err(e) if is_write_fault(&e) => self.health.failed(&e, Lost::History(n)),
            Err(e) => tracing::warn!(error = %e, "cannot write the history"),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The indexed queries and the hourly rollup against a plain reading of
    //! the same rows, over a mix of short, long, open and point rows.

    use super::*;
    use crate::store::{Db, DbKey, KeySource};
    use chrono::TimeZone;

    /// A small deterministic generator (no test depends on a seed file).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: i64) -> i64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as i64
        }
    }

    const APPS: [&str; 4] = ["editor", "browser", "term", "recorder"];
    const MIN: i64 = 60_000;

    fn overlaps(e: &HistoryEvent, s: i64, u: i64, now: i64) -> bool {
        let (st, en) = (ms(e.start), e.end.map(ms).unwrap_or(now));
        st < u && (en > s || st >= s)
    }

    fn expected_summary(model: &[HistoryEvent], s: i64, u: i64, now: i64) -> Vec<AppTotals> {
        let mut t = BTreeMap::<String, AppTotals>::new();
        for e in model {
            let Some(app) = &e.app_id else { continue };
            let (st, en) = (ms(e.start), e.end.map(ms).unwrap_or(now));
            let v = (en.min(u) - st.max(s)).max(0);
            let a = t.entry(app.clone()).or_insert_with(|| AppTotals {
                app_id: app.clone(),
                ..Default::default()
            });
            match e.kind {
                HistoryKind::Focus => a.focus_ms += v,
                HistoryKind::Capture => a.capture_ms += v,
                HistoryKind::Playback => a.playback_ms += v,
                _ => {}
            }
        }
        Totals(t).into_sorted()
    }

    /// A fresh encrypted database in a directory that lives as long as it.
    /// Tests close its pool at the end: a SQLCipher connection closed by
    /// its worker thread while the process runs its exit handlers (OpenSSL
    /// cleans up there) can crash the test binary.
    async fn temp_db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = DbKey::random().expect("key");
        let (db, _tasks) = Db::open(
            &dir.path().join("h.db"),
            &key,
            &KeySource::KeyFile(dir.path().join("k")),
        )
        .await
        .expect("open");
        (dir, db)
    }

    async fn all_pages(h: &History, q: &Query, now: DateTime<Utc>) -> Vec<i64> {
        let mut q = q.clone();
        let mut ids = Vec::new();
        loop {
            let (rows, next) = h.query(&q, now).await.expect("query");
            ids.extend(rows.iter().map(|e| e.id));
            match next {
                Some(c) => q.cursor = parse_cursor(&c).expect("cursor"),
                None => return ids,
            }
        }
    }

    async fn check(h: &History, model: &[HistoryEvent], rng: &mut Lcg, t0: i64, now: i64) {
        let now_t = from_ms(now);
        for round in 0..60 {
            // Whole hours, whole days and arbitrary edges; some empty.
            let (s, u) = match round % 3 {
                0 => {
                    let s = t0 + rng.next(72) * HOUR_MS;
                    (s, s + (1 + rng.next(48)) * HOUR_MS)
                }
                1 => (t0 + rng.next(72 * 60) * MIN, t0 + rng.next(72 * 60) * MIN),
                _ => {
                    let s = t0 + rng.next(72 * 3600) * 1000 + 17;
                    (s, s + rng.next(30 * 3600) * 1000 + 3)
                }
            };
            let got = h
                .summary(from_ms(s), from_ms(u), now_t)
                .await
                .expect("summary");
            assert_eq!(
                got,
                expected_summary(model, s, u, now),
                "summary of [{s}, {u})"
            );

            let kinds: Vec<HistoryKind> = HistoryKind::ALL
                .into_iter()
                .filter(|_| rng.next(4) != 0)
                .collect();
            let apps: Vec<String> = if rng.next(3) == 0 {
                vec![APPS[rng.next(4) as usize].to_owned()]
            } else {
                vec![]
            };
            let q = Query {
                since: from_ms(s),
                until: from_ms(u),
                kinds: kinds.clone(),
                apps: apps.clone(),
                limit: 1 + rng.next(40) as u32,
                cursor: None,
            };
            let mut want: Vec<&HistoryEvent> = model
                .iter()
                .filter(|e| overlaps(e, s, u, now) && kinds.contains(&e.kind))
                .filter(|e| apps.is_empty() || e.app_id.as_ref().is_some_and(|a| apps.contains(a)))
                .collect();
            want.sort_by_key(|e| (ms(e.start), e.id));
            let want: Vec<i64> = want.iter().map(|e| e.id).collect();
            assert_eq!(all_pages(h, &q, now_t).await, want, "query of [{s}, {u})");
        }
    }

    #[tokio::test]
    async fn indexed_reads_and_rollup_match_the_rows() {
        let (_dir, db) = temp_db().await;
        let pool = db.pool().clone();
        let (h, _writer, mut id) = History::open(pool.clone()).await.expect("history");
        let t0 = ms(Utc
            .with_ymd_and_hms(2026, 11, 2, 0, 0, 0)
            .single()
            .expect("date"));
        let now = t0 + 72 * HOUR_MS;
        let mut rng = Lcg(7);
        let mut model: Vec<HistoryEvent> = Vec::new();
        let mut batch = Vec::new();
        let mut t = t0 - 3 * HOUR_MS;
        while t < now - 30 * MIN {
            let kind = match rng.next(20) {
                0..=11 => HistoryKind::Focus,
                12..=13 => HistoryKind::Capture,
                14..=15 => HistoryKind::Playback,
                16 => HistoryKind::Locked,
                17 => HistoryKind::Idle,
                _ => HistoryKind::Notification,
            };
            // Mostly seconds to minutes; one in twelve for hours.
            let len = match kind {
                HistoryKind::Notification => 0,
                _ if rng.next(12) == 0 => HOUR_MS + rng.next(9 * HOUR_MS),
                _ => 1000 * rng.next(1200),
            };
            let e = HistoryEvent {
                id,
                kind,
                app_id: Some(APPS[rng.next(4) as usize].to_owned()),
                title: Some(format!("t{id}")),
                detail: None,
                start: from_ms(t),
                end: None,
            };
            id += 1;
            batch.push(HistoryOp::Open(e.clone()));
            let end = t + len;
            // A few stay open; the rest close now or in a later batch.
            let open = rng.next(150) == 0 && kind != HistoryKind::Notification;
            if !open {
                batch.push(HistoryOp::Close {
                    id: e.id,
                    end: from_ms(end),
                });
            }
            model.push(HistoryEvent {
                end: (!open).then(|| from_ms(end)),
                ..e
            });
            if batch.len() > 300 {
                write(&pool, &mut batch, from_ms(t)).await.expect("write");
            }
            t += 1000 * rng.next(300);
        }
        write(&pool, &mut batch, from_ms(now - 20 * MIN))
            .await
            .expect("write");
        assert!(model.iter().filter(|e| e.end.is_none()).count() > 2);
        assert!(model.len() > 1000);
        check(&h, &model, &mut rng, t0, now).await;

        // The backfill of migration 0003 (for rows recorded before it)
        // builds the same rollup as the writer.
        let rollup = || async {
            sqlx::query_as::<_, (i64, String, String, i64)>(
                "SELECT hour_ms, app_id, kind, ms FROM history_hourly ORDER BY 1, 2, 3",
            )
            .fetch_all(&pool)
            .await
            .expect("rollup")
        };
        let by_writer = rollup().await;
        assert!(by_writer.len() > 100);
        let migration = include_str!("../../migrations/0003_history_index.sql");
        let backfill = migration
            .split_once("-- Rows recorded before this migration.")
            .expect("backfill part")
            .1;
        sqlx::query("DELETE FROM history_hourly")
            .execute(&pool)
            .await
            .expect("clear");
        sqlx::raw_sql(backfill)
            .execute(&pool)
            .await
            .expect("backfill");
        assert_eq!(rollup().await, by_writer);

        // Forget an hour of one app, then everything of a kind for a day.
        let (s, u) = (t0 + 30 * HOUR_MS + 7 * MIN, t0 + 31 * HOUR_MS + 7 * MIN);
        let n = h
            .forget(
                from_ms(s),
                from_ms(u),
                &["editor".into()],
                &[],
                from_ms(now),
            )
            .await
            .expect("forget");
        let before = model.len();
        model.retain(|e| !(overlaps(e, s, u, now) && e.app_id.as_deref() == Some("editor")));
        assert_eq!(n as usize, before - model.len());
        assert!(n > 0);
        let (s, u) = (t0 + 40 * HOUR_MS, t0 + 64 * HOUR_MS);
        let n = h
            .forget(
                from_ms(s),
                from_ms(u),
                &[],
                &[HistoryKind::Capture],
                from_ms(now),
            )
            .await
            .expect("forget");
        let before = model.len();
        model.retain(|e| !(overlaps(e, s, u, now) && e.kind == HistoryKind::Capture));
        assert_eq!(n as usize, before - model.len());
        check(&h, &model, &mut rng, t0, now).await;

        // Retention of one day at `now`.
        let settings = HistorySettings {
            retention_days: 1,
            ..Default::default()
        };
        let n = h.purge(&settings, from_ms(now)).await.expect("purge");
        let cutoff = now - 24 * HOUR_MS;
        let before = model.len();
        model.retain(|e| e.end.map(ms).unwrap_or(ms(e.start)) >= cutoff);
        assert_eq!(n as usize, before - model.len());
        check(&h, &model, &mut rng, t0, now).await;

        // A crash: what was open ends where the writer last said it was alive.
        let alive = now - 20 * MIN;
        let (h, _writer, _) = History::open(pool.clone()).await.expect("reopen");
        for e in &mut model {
            if e.end.is_none() {
                e.end = Some(from_ms(alive.max(ms(e.start))));
            }
        }
        check(&h, &model, &mut rng, t0, now).await;
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM history_hourly WHERE ms <= 0")
            .fetch_one(&pool)
            .await
            .expect("count");
        assert_eq!(left, 0, "no empty rollup rows are kept");
        pool.close().await;
    }

    /// A burst through `submit` and the writer: the writer takes bounded
    /// batches (see `pending` for the batches themselves), every interval
    /// reaches the database, and focus flapping under a millisecond is no
    /// row.
    #[tokio::test]
    async fn a_burst_reaches_the_database_without_its_flapping() {
        let (_dir, db) = temp_db().await;
        let pool = db.pool().clone();
        let (h, writer, mut id) = History::open(pool.clone()).await.expect("history");
        let t0 = Utc
            .with_ymd_and_hms(2026, 11, 2, 9, 0, 0)
            .single()
            .expect("date");
        let us = |n: i64| t0 + chrono::Duration::microseconds(n);
        let focus = |id: i64, app: &str, start| {
            HistoryOp::Open(HistoryEvent {
                id,
                kind: HistoryKind::Focus,
                app_id: Some(app.into()),
                title: None,
                detail: None,
                start,
                end: None,
            })
        };
        // Every 5 ms the focus passes for 0.1 ms through "flap", then
        // lands on "a" or "b": 2500 intervals, more than two batches.
        let n = 2500;
        let mut open: Option<i64> = None;
        for i in 0..n {
            let t = i * 5_000;
            let mut ops = Vec::new();
            if let Some(o) = open {
                ops.push(HistoryOp::Close { id: o, end: us(t) });
            }
            ops.push(focus(id, "flap", us(t)));
            ops.push(HistoryOp::Close {
                id,
                end: us(t + 100),
            });
            ops.push(focus(id + 1, ["a", "b"][i as usize % 2], us(t + 100)));
            open = Some(id + 1);
            id += 2;
            h.submit(ops);
        }
        let cancel = CancellationToken::new();
        cancel.cancel();
        writer.run(cancel).await;

        let count = |sql: &'static str| {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(sql)
                    .fetch_one(&pool)
                    .await
                    .expect("count")
            }
        };
        assert_eq!(count("SELECT count(*) FROM history").await, n);
        assert_eq!(
            count("SELECT count(*) FROM history WHERE app_id = 'flap'").await,
            0
        );
        assert_eq!(
            count("SELECT count(*) FROM history WHERE end_ms IS NULL").await,
            1
        );
        // 4.9 ms each, from .1 ms to the next whole 5 ms: 5 ms in whole
        // milliseconds; the last one is open until `now`.
        let now = us(n * 5_000);
        let totals = h.summary(t0, now, now).await.expect("summary");
        let focus_ms: i64 = totals.iter().map(|t| t.focus_ms).sum();
        assert_eq!(focus_ms, n * 5);
        pool.close().await;
    }

    /// What keeps the reads fast is the plan, not the machine: no statement
    /// reads more of the table than the period (plus the long rows), and a page is merged from ordered index scans
    /// instead of sorting the period (timings are in `make bench`).
    #[tokio::test]
    async fn reads_use_index_ranges_only() {
        let (_dir, db) = temp_db().await;
        let statements = [
            ("page", sql_page()),
            ("summed", sql_summed(false)),
            ("summed closed", sql_summed(true)),
            ("summed open", sql_summed_open()),
            ("forget", sql_forget()),
        ];
        for (name, sql) in statements {
            let n = sql.matches('?').count();
            let mut q = sqlx::query(trusted(format!("EXPLAIN QUERY PLAN {sql}")));
            for i in 0..n.min(8) {
                q = match i {
                    3 | 4 => q.bind("[]"),
                    _ => q.bind(1_000_000_i64),
                };
            }
            let plan: Vec<String> = q
                .fetch_all(db.pool())
                .await
                .expect("plan")
                .iter()
                .map(|r| r.try_get::<String, _>(3).expect("detail"))
                .collect();
            // On `history`: a bounded range of history_start, the few rows
            // of history_long, or lookups by id.
            let unbounded = plan.iter().find(|l| {
                (l.starts_with("SCAN history") || l.starts_with("SEARCH history"))
                    && !l.contains("history_long")
                    && !l.contains("(rowid=?)")
                    && !l.contains("(start_ms>? AND start_ms<?)")
            });
            assert!(
                unbounded.is_none(),
                "{name} reads an unbounded part of the table ({unbounded:?}): {plan:#?}"
            );
            assert!(
                !plan.iter().any(|l| l.contains("TEMP B-TREE FOR ORDER BY")),
                "{name} sorts: {plan:#?}"
            );
        }
        db.pool().close().await;
    }
}

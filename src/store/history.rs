//! The timeline in the encrypted database: batched writes (bounded
//! transactions, see [`pending`]), queries with stable cursors, summaries,
//! forgetting with secure delete, retention.

mod pending;

use std::time::Duration;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
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
pub(crate) use crate::core::history::AppTotals;
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
/// `timeline_long` (migrations/0009): the only rows that can cross a moment
/// more than this after they started.
const LONG_MS: i64 = HOUR_MS;
/// The WHERE of `timeline_long`, verbatim: SQLite uses a partial index only
/// for a query that contains its condition as written.
const LONG: &str = "(dur_ms IS NULL OR dur_ms >= 3600000)";
/// The WHERE of `timeline_open`, verbatim.
const OPEN: &str = "dur_ms IS NULL";

/// The kinds `Summary` adds up, and `history_hourly` keeps.
const SUMMED: [HistoryKind; 3] = [
    HistoryKind::Focus,
    HistoryKind::Capture,
    HistoryKind::Playback,
];
/// Their codes (see [`kind_code`]).
const SUMMED_SQL: &str = "kind IN (0, 1, 2) AND app IS NOT NULL";
/// The text of a row's app id (`timeline_text`).
const APP_TEXT: &str = "(SELECT text FROM timeline_text WHERE id = app)";

/// The most rows a retention or forget step deletes in one transaction:
/// a few milliseconds of work, so the writer (and a revocation) never
/// waits long for the database, and the write-ahead log stays small.
const STEP_ROWS: i64 = 1000;
/// The fewest: below this a step is mostly its transaction's fixed cost.
const STEP_ROWS_MIN: i64 = 200;
/// The most free pages an incremental vacuum step gives back (1 MB).
const STEP_PAGES: i64 = 256;
/// The fewest.
const STEP_PAGES_MIN: i64 = 32;
/// The work a step of forgetting or of giving pages back aims at: steps
/// are sized by time, not rows (see [`StepSize`]).
const STEP_TIME: Duration = Duration::from_millis(10);
/// The shortest pause between two steps, in which the writers get their
/// turn.
const STEP_PAUSE: Duration = Duration::from_millis(2);

/// After a step that began at `began`: pause as long as it took (at least
/// [`STEP_PAUSE`]), so that forgetting takes at most half a core and the
/// readers and writers always have the other half.
async fn pause(began: std::time::Instant) {
    tokio::time::sleep(began.elapsed().max(STEP_PAUSE)).await;
}

/// How many rows (or pages) the next step of forgetting (or of giving
/// pages back) takes: about [`STEP_TIME`] of work, whatever the machine.
///
/// A reader never waits for these steps (the write-ahead log; measured
/// with `strace`: no reader ever slept in SQLite's busy handler while a
/// million rows were forgotten), but each step is a burst of CPU on the
/// same cores as the readers and holds the write lock the recorder and a
/// revocation wait for. On a busy machine (load 4 to 8 on 2 cores, the
/// bench's 10 M-event file) a step of 1 000 rows took from 4 to 460 ms,
/// and a vacuum step of 256 pages up to 680 ms: halving after a slow step
/// and doubling after a quick one keeps each burst short where it matters
/// and the count of transactions low where it does not.
#[derive(Debug, Clone, Copy)]
struct StepSize {
    now: i64,
    min: i64,
    max: i64,
}

impl StepSize {
    /// Start at a quarter of the most: the first step is not the slowest.
    fn new(min: i64, max: i64) -> Self {
        StepSize {
            now: (max / 4).max(min),
            min,
            max,
        }
    }

    /// The step just done took `took`.
    fn took(&mut self, took: Duration) {
        if took > STEP_TIME * 2 {
            self.now = (self.now / 2).max(self.min);
        } else if took < STEP_TIME / 2 {
            self.now = (self.now * 2).min(self.max);
        }
    }
}

/// The code of a kind in `timeline.kind` (the rows of `timeline_kind`,
/// migrations/0009; a test compares). Never change one: they are on disk.
pub(crate) fn kind_code(k: HistoryKind) -> i64 {
    match k {
        HistoryKind::Focus => 0,
        HistoryKind::Capture => 1,
        HistoryKind::Playback => 2,
        HistoryKind::Locked => 3,
        HistoryKind::Idle => 4,
        HistoryKind::Sleep => 5,
        HistoryKind::Notification => 6,
        HistoryKind::Document => 7,
        HistoryKind::Task => 8,
        HistoryKind::RecentDocument => 9,
    }
}

fn kind_of(code: i64) -> Option<HistoryKind> {
    HistoryKind::ALL.into_iter().find(|k| kind_code(*k) == code)
}

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
    texts: Texts,
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
    /// Counts the transactions that deleted texts (`timeline_text`), bumped
    /// before they commit: the writer forgets the ids it remembers when it
    /// changed (see [`Texts`]).
    texts_gone: AtomicU64,
}

/// The writer's `timeline_text` ids of the texts it wrote lately, so that
/// a focus change costs one statement, not one more per text. Valid while
/// no transaction deleted texts since ([`Handed::texts_gone`], read under
/// the write lock); emptied when it grows past [`Texts::MAX`] and when a
/// batch fails (its new texts were rolled back).
#[derive(Debug, Default)]
pub(crate) struct Texts {
    gone: u64,
    ids: HashMap<String, i64>,
}

impl Texts {
    const MAX: usize = 4096;
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
        "SELECT id FROM timeline INDEXED BY timeline_start WHERE start_ms >= {a} AND start_ms < {b}
         UNION ALL
         SELECT id FROM timeline INDEXED BY timeline_start
          WHERE start_ms >= {a} - {LONG_MS} AND start_ms < {a} AND start_ms < {b} AND coalesce(start_ms + dur_ms, {now}) > {a}
         UNION ALL
         SELECT id FROM timeline INDEXED BY timeline_long
          WHERE start_ms < {a} - {LONG_MS} AND start_ms < {b} AND {LONG} AND coalesce(start_ms + dur_ms, {now}) > {a}"
    )
}

/// Rows of kinds ?4 (JSON array of codes; empty: all when `empty_all`)
/// and apps ?5 (JSON array of app ids, empty: all).
fn kinds_apps(empty_all: bool) -> String {
    let kinds = "kind IN (SELECT value FROM json_each(?4))";
    let kinds = if empty_all {
        format!("(json_array_length(?4) = 0 OR {kinds})")
    } else {
        kinds.to_owned()
    };
    format!(
        "{kinds} AND (json_array_length(?5) = 0
            OR app IN (SELECT id FROM timeline_text WHERE text IN (SELECT value FROM json_each(?5))))"
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
///
/// The page comes back as one row, a JSON array of [`PageRow`]s: SQLite
/// reads a page of 1 000 rows in about 0.2 ms, and sqlx then spent 4-10 ms
/// handing them over one by one (a copy of each value and a message from
/// its worker thread per row, a context switch every 50 rows: most of
/// `Query 24 h` at 10 M events, `make bench`). One text of ~90 KB crosses
/// once and is parsed in well under a millisecond.
fn sql_page() -> String {
    // The texts by join (cursors kept open), not by a subquery per row.
    let cols =
        "t.id AS id, kind, a.text AS app_text, ti.text AS title_text, detail, start_ms, dur_ms";
    let texts =
        "LEFT JOIN timeline_text a ON a.id = t.app LEFT JOIN timeline_text ti ON ti.id = t.title";
    let filters = format!(
        "{} AND (+start_ms > ?6 OR (+start_ms = ?6 AND t.id > ?7))",
        kinds_apps(false)
    );
    format!(
        "SELECT json_group_array(json_array(id, kind, app_text, title_text, detail, start_ms, dur_ms))
         FROM (
             SELECT {cols} FROM timeline t INDEXED BY timeline_start {texts}
              WHERE start_ms >= ?3 - {LONG_MS} AND start_ms < ?3 AND start_ms < ?1
                AND coalesce(start_ms + dur_ms, ?2) > ?3
                AND {filters}
             UNION ALL
             SELECT {cols} FROM timeline t INDEXED BY timeline_long {texts}
              WHERE start_ms < ?3 - {LONG_MS} AND start_ms < ?1 AND {LONG}
                AND coalesce(start_ms + dur_ms, ?2) > ?3
                AND {filters}
             UNION ALL
             SELECT {cols} FROM timeline t INDEXED BY timeline_start {texts}
              WHERE start_ms >= max(?3, ?6) AND start_ms < ?1 AND {filters}
             ORDER BY start_ms, id LIMIT ?8)"
    )
}

/// A row of [`sql_page`]'s JSON: id, kind code, app id, title, detail
/// (JSON as text), start, duration.
type PageRow = (
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    Option<i64>,
);

/// Time per app and kind of the rows overlapping [?1, ?2) (open rows end
/// at ?3), only closed rows when `closed_only`.
fn sql_summed(closed_only: bool) -> String {
    format!(
        "SELECT {APP_TEXT}, kind, sum(max(0, min(coalesce(start_ms + dur_ms, ?3), ?2) - max(start_ms, ?1)))
         FROM timeline WHERE id IN ({}) AND {SUMMED_SQL} {}
         GROUP BY app, kind",
        overlapping("?1", "?2", "?3"),
        if closed_only {
            "AND dur_ms IS NOT NULL"
        } else {
            ""
        }
    )
}

/// Time per app and kind of the open rows within [?1, ?2), ending at ?3.
fn sql_summed_open() -> String {
    format!(
        "SELECT {APP_TEXT}, kind, sum(max(0, min(?3, ?2) - max(start_ms, ?1)))
         FROM timeline INDEXED BY timeline_open
         WHERE {OPEN} AND start_ms < ?2 AND {SUMMED_SQL}
         GROUP BY app, kind"
    )
}

/// Delete at most ?6 of the rows overlapping [?1, ?2) (open rows end at
/// ?3) of kinds ?4 and apps ?5 (JSON arrays, empty: all).
fn sql_forget() -> String {
    format!(
        "DELETE FROM timeline WHERE id IN (
            SELECT id FROM timeline WHERE id IN ({}) AND {} LIMIT ?6)
         RETURNING {RETURNED}",
        overlapping("?1", "?2", "?3"),
        kinds_apps(true)
    )
}

/// What a statement that changes rows returns, for [`Hourly::add_row`].
const RETURNED: &str = "kind, app, start_ms, start_ms + dur_ms";

/// Delete at most ?1 rows, from start ?2 on, that ended before their
/// kind's cutoff: ?3 for code 0, ?4 for code 1, …; ?13 the latest cutoff.
fn sql_purge() -> String {
    let cutoffs: String = HistoryKind::ALL
        .iter()
        .enumerate()
        .map(|(i, k)| format!(" WHEN {} THEN ?{}", kind_code(*k), i + 3))
        .collect();
    format!(
        "DELETE FROM timeline WHERE id IN (
            SELECT id FROM timeline INDEXED BY timeline_start
            WHERE start_ms >= ?2 AND start_ms < ?13
              AND coalesce(start_ms + dur_ms, start_ms) < (CASE kind{cutoffs} END)
            LIMIT ?1)
         RETURNING {RETURNED}"
    )
}

/// Changes to `history_hourly`, summed in memory and written in the
/// transaction that changes the rows they come from.
/// Keyed by hour, app (`timeline_text.id`) and kind code.
#[derive(Default)]
struct Hourly(HashMap<(i64, i64, i64), i64>);

impl Hourly {
    /// Add (`sign` 1) or take away (-1) the time of a closed interval, hour
    /// by hour. Open intervals, points and kinds that are not summed add
    /// nothing.
    fn add(&mut self, kind: i64, app: Option<i64>, start: i64, end: Option<i64>, sign: i64) {
        let (Some(app), Some(end)) = (app, end) else {
            return;
        };
        if !SUMMED.iter().any(|k| kind_code(*k) == kind) || end <= start {
            return;
        }
        let mut hour = start - start.rem_euclid(HOUR_MS);
        while hour < end {
            let part = end.min(hour + HOUR_MS) - start.max(hour);
            *self.0.entry((hour, app, kind)).or_default() += sign * part;
            hour += HOUR_MS;
        }
    }

    /// Add or take away a row as [`RETURNED`] gives it.
    fn add_row(&mut self, r: &SqliteRow, sign: i64) -> Result<(), sqlx::Error> {
        self.add(
            r.try_get(0)?,
            r.try_get(1)?,
            r.try_get(2)?,
            r.try_get(3)?,
            sign,
        );
        Ok(())
    }

    /// Write the changes, before the texts of forgotten rows go (they name
    /// the app here). An hour's total that reaches 0 is deleted (only the
    /// hours changed here are looked at: the table holds years).
    async fn apply(self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        for ((hour, app, kind), v) in self.0 {
            let Some(kind) = kind_of(kind) else { continue };
            if v == 0 {
                continue;
            }
            sqlx::query(
                "INSERT INTO history_hourly (hour_ms, app_id, kind, ms)
                 SELECT ?1, text, ?3, ?4 FROM timeline_text WHERE id = ?2
                 ON CONFLICT (hour_ms, app_id, kind) DO UPDATE SET ms = ms + excluded.ms",
            )
            .bind(hour)
            .bind(app)
            .bind(kind.as_str())
            .bind(v)
            .execute(&mut *conn)
            .await?;
            if v < 0 {
                sqlx::query(
                    "DELETE FROM history_hourly WHERE hour_ms = ?1 AND kind = ?3 AND ms <= 0
                       AND app_id = (SELECT text FROM timeline_text WHERE id = ?2)",
                )
                .bind(hour)
                .bind(app)
                .bind(kind.as_str())
                .execute(&mut *conn)
                .await?;
            }
        }
        Ok(())
    }
}

/// Run `sql` (a DELETE or UPDATE … `RETURNING` [`RETURNED`]) and count
/// what it returns into `hourly` with `sign`; returns the number of rows
/// and the latest start among them.
async fn returning(
    conn: &mut SqliteConnection,
    q: sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    hourly: &mut Hourly,
    sign: i64,
) -> Result<(u64, i64), sqlx::Error> {
    let mut rows = q.fetch(conn);
    let mut n = 0;
    let mut latest = i64::MIN;
    while let Some(r) = rows.try_next().await? {
        hourly.add_row(&r, sign)?;
        latest = latest.max(r.try_get(2)?);
        n += 1;
    }
    Ok((n, latest))
}

/// Delete the texts no row uses any more (`timeline_text_unused`): a
/// forgotten title is gone with its last row, not kept as a string.
async fn drop_unused_texts(conn: &mut SqliteConnection) -> Result<u64, sqlx::Error> {
    sqlx::query("DELETE FROM timeline_text WHERE refs <= 0")
        .execute(conn)
        .await
        .map(|r| r.rows_affected())
}

/// Totals per app being added up.
#[derive(Default)]
struct Totals(BTreeMap<String, AppTotals>);

impl Totals {
    /// Add rows of `app_id, kind, ms`.
    fn add(&mut self, rows: &[SqliteRow]) -> Result<(), Error> {
        for r in rows {
            let app: String = r.try_get(0).map_err(failed)?;
            let kind: i64 = r.try_get(1).map_err(failed)?;
            let v: i64 = r.try_get(2).map_err(failed)?;
            let t = self.0.entry(app.clone()).or_insert_with(|| AppTotals {
                app_id: app,
                ..Default::default()
            });
            match kind_of(kind) {
                Some(HistoryKind::Focus) => t.focus_ms += v,
                Some(HistoryKind::Capture) => t.capture_ms += v,
                Some(HistoryKind::Playback) => t.playback_ms += v,
                _ => {}
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

/// The timeline's write side as core asks for it (`core::history::Timeline`).
impl crate::core::history::HistorySink for History {
    fn submit(&self, ops: Vec<HistoryOp>) {
        History::submit(self, ops);
    }
}

/// Retention as core runs it (`core::history::retention`).
impl crate::core::history::HistoryPurge for History {
    fn purge<'a>(
        &'a self,
        settings: &'a HistorySettings,
        now: DateTime<Utc>,
    ) -> crate::core::consent::BoxFut<'a, Result<u64, Error>> {
        Box::pin(History::purge(self, settings, now))
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
    pub(crate) async fn open_reporting(
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
                "UPDATE timeline INDEXED BY timeline_open SET dur_ms = max(0, ? - start_ms)
                 WHERE {OPEN}
                 RETURNING {RETURNED}"
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
        // Texts a failed or older step left without rows.
        drop_unused_texts(&mut tx).await.map_err(failed)?;
        let next: i64 = sqlx::query_scalar("SELECT coalesce(max(id), 0) + 1 FROM timeline")
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
                texts: Texts::default(),
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
        let kinds: Vec<i64> = q.kinds.iter().map(|k| kind_code(*k)).collect();
        let kinds_json = serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".into());
        let apps_json = serde_json::to_string(&q.apps).unwrap_or_else(|_| "[]".into());
        let (cs, ci) = q.cursor.unwrap_or((i64::MIN, i64::MIN));
        let sql = sql_page();
        let page: String = sqlx::query_scalar(trusted(sql))
            .bind(ms(q.until))
            .bind(ms(now))
            .bind(ms(q.since))
            .bind(&kinds_json)
            .bind(&apps_json)
            .bind(cs)
            .bind(ci)
            .bind(i64::from(limit) + 1)
            .fetch_one(&self.pool)
            .await
            .map_err(failed)?;
        let mut rows: Vec<PageRow> = serde_json::from_str(&page)
            .map_err(|e| Error::Failed(format!("history database: a page as JSON: {e}")))?;
        drop(page);
        // In (start, id) order whatever order the aggregate kept (already
        // sorted: linear).
        rows.sort_by_key(|r| (r.5, r.0));
        let mut out = Vec::with_capacity(rows.len());
        for (id, kind, app_id, title, detail, start, dur) in rows {
            let Some(kind) = kind_of(kind) else {
                continue;
            };
            out.push(HistoryEvent {
                id,
                kind,
                app_id,
                title,
                detail: detail.and_then(|d| serde_json::from_str(&d).ok()),
                start: from_ms(start),
                end: dur.map(|d| from_ms(start + d)),
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
    /// Whole hours come from `history_hourly`, and so does the last,
    /// partial hour of a period that reaches `now`; the other parts of the
    /// period before its first and after its last whole hour, and open
    /// intervals, from `history`. All in one read transaction: the writer
    /// closing a row between two of the reads would count it twice or not
    /// at all. (Were the wall clock set back, rows recorded before could
    /// end after `now`, and the current hour would count them to their
    /// end; by no more than the step.)
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
        let mut last_hour = u - u.rem_euclid(HOUR_MS);
        // A period that reaches `now` ends in an hour whose closed rows all
        // ended by `now` (the writer closes a row when its interval ended),
        // so their time up to `until` is that hour's `history_hourly`
        // rows, which the writer adds to in the transaction that closes
        // each row. Read there, a summary up to now costs a row per app
        // however busy the current hour, instead of reading all of its
        // rows: under many MCP hosts and a flood of focus changes, those
        // reads queued for the pool's connections for tens of seconds
        // (`make soak`).
        if u >= n && last_hour < u && first_hour <= last_hour {
            last_hour += HOUR_MS;
        }
        let mut parts = Vec::new();
        if first_hour < last_hour {
            let rows = sqlx::query(
                "SELECT app_id, (SELECT code FROM timeline_kind k WHERE k.kind = h.kind), sum(ms)
                 FROM history_hourly h
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
    /// all), in steps of at most [`STEP_ROWS`] sized by time ([`StepSize`]),
    /// then give the freed pages back to the file system
    /// ([`History::shrink`]).
    ///
    /// Each step is a transaction of its own: readers never wait for it
    /// (the write-ahead log lets them read the last commit) and the writer
    /// waits one step at most, not for the whole forget. A crash between
    /// steps leaves part forgotten; the next Forget of the same period
    /// takes the rest.
    pub(crate) async fn forget(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        apps: &[String],
        kinds: &[HistoryKind],
        now: DateTime<Utc>,
    ) -> Result<u64, Error> {
        let kinds: Vec<i64> = kinds.iter().map(|k| kind_code(*k)).collect();
        let kinds_json = serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".into());
        let apps_json = serde_json::to_string(apps).unwrap_or_else(|_| "[]".into());
        let sql = sql_forget();
        let mut n = 0;
        let mut size = StepSize::new(STEP_ROWS_MIN, STEP_ROWS);
        loop {
            let began = std::time::Instant::now();
            let rows = size.now;
            let mut tx = self.pool.begin().await.map_err(failed)?;
            let mut hourly = Hourly::default();
            let q = sqlx::query(trusted(sql.clone()))
                .bind(ms(since))
                .bind(ms(until))
                .bind(ms(now))
                .bind(&kinds_json)
                .bind(&apps_json)
                .bind(rows);
            let (step, _) = returning(&mut tx, q, &mut hourly, -1)
                .await
                .map_err(failed)?;
            hourly.apply(&mut tx).await.map_err(failed)?;
            self.drop_unused_texts(&mut tx).await.map_err(failed)?;
            tx.commit().await.map_err(failed)?;
            n += step;
            if step < rows as u64 {
                break;
            }
            size.took(began.elapsed());
            pause(began).await;
        }
        self.shrink().await;
        Ok(n)
    }

    /// Give the pages freed by forgetting back to the file system, in steps
    /// of at most [`STEP_PAGES`] sized by time (`PRAGMA incremental_vacuum`;
    /// the database is in `auto_vacuum = INCREMENTAL` mode, see
    /// `Db::open`), then checkpoint the write-ahead log so that the file
    /// itself shrinks and the overwritten pages replace the old ones. Failures are logged: the
    /// rows are gone either way.
    pub(crate) async fn shrink(&self) {
        let mut last = i64::MAX;
        let mut size = StepSize::new(STEP_PAGES_MIN, STEP_PAGES);
        loop {
            let free: i64 = match sqlx::query_scalar("PRAGMA freelist_count")
                .fetch_one(&self.pool)
                .await
            {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the free pages failed");
                    break;
                }
            };
            // Nothing left, or no progress (a database not switched to
            // incremental vacuum yet: `PRAGMA incremental_vacuum` does
            // nothing there).
            if free == 0 || free >= last {
                break;
            }
            last = free;
            let began = std::time::Instant::now();
            if let Err(e) = sqlx::query(trusted(format!("PRAGMA incremental_vacuum({})", size.now)))
                .execute(&self.pool)
                .await
            {
                tracing::warn!(error = %e, "giving free pages back failed");
                break;
            }
            size.took(began.elapsed());
            // As long as the step took (it paused 2 ms after steps of up
            // to 680 ms before).
            pause(began).await;
        }
        self.checkpoint().await;
    }

    /// [`drop_unused_texts`], telling the writer before the commit when
    /// ids it may remember are gone.
    async fn drop_unused_texts(&self, conn: &mut SqliteConnection) -> Result<u64, sqlx::Error> {
        let n = drop_unused_texts(conn).await?;
        if n > 0 {
            self.handed.texts_gone.fetch_add(1, Ordering::SeqCst);
        }
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

    /// Enforce retention: rows that ended before their kind's limit go, in
    /// steps sized by time (see [`History::forget`]), oldest first; then
    /// the file shrinks. Each step starts where the last one ended, so a
    /// purge of a million rows reads the index once.
    pub async fn purge(
        &self,
        settings: &HistorySettings,
        now: DateTime<Utc>,
    ) -> Result<u64, Error> {
        let cutoffs: Vec<i64> = HistoryKind::ALL
            .iter()
            .map(|k| ms(now - settings.retention(*k)))
            .collect();
        let latest = cutoffs.iter().copied().max().unwrap_or(i64::MIN);
        let sql = sql_purge();
        let mut from = i64::MIN;
        let mut n = 0;
        let mut size = StepSize::new(STEP_ROWS_MIN, STEP_ROWS);
        loop {
            let began = std::time::Instant::now();
            let rows = size.now;
            let mut tx = self.pool.begin().await.map_err(failed)?;
            let mut hourly = Hourly::default();
            let mut q = sqlx::query(trusted(sql.clone())).bind(rows).bind(from);
            for c in &cutoffs {
                q = q.bind(*c);
            }
            let (step, last_start) = returning(&mut tx, q.bind(latest), &mut hourly, -1)
                .await
                .map_err(failed)?;
            hourly.apply(&mut tx).await.map_err(failed)?;
            self.drop_unused_texts(&mut tx).await.map_err(failed)?;
            tx.commit().await.map_err(failed)?;
            n += step;
            if step < rows as u64 {
                break;
            }
            from = last_start;
            size.took(began.elapsed());
            pause(began).await;
        }
        if n > 0 {
            self.shrink().await;
        }
        Ok(n)
    }
}

/// The `timeline_text` id of `text` (added with no rows yet when new; the
/// insert's trigger counts the row), remembered for the batch in `known`.
async fn text_id(
    conn: &mut SqliteConnection,
    known: &mut Texts,
    text: Option<&str>,
) -> Result<Option<i64>, sqlx::Error> {
    let Some(text) = text else { return Ok(None) };
    if let Some(id) = known.ids.get(text) {
        return Ok(Some(*id));
    }
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO timeline_text (text, refs) VALUES (?, 0)
         ON CONFLICT (text) DO UPDATE SET refs = refs RETURNING id",
    )
    .bind(text)
    .fetch_one(&mut *conn)
    .await?;
    if known.ids.len() >= Texts::MAX {
        known.ids.clear();
    }
    known.ids.insert(text.to_owned(), id);
    Ok(Some(id))
}

/// Write `batch` in one transaction. `known` is valid only while
/// `texts_gone` stays as it was: read after the write lock is taken
/// (`BEGIN IMMEDIATE`), since a forget bumps it before it commits.
async fn write(
    pool: &SqlitePool,
    batch: &mut Vec<HistoryOp>,
    alive: DateTime<Utc>,
    known: &mut Texts,
    texts_gone: &AtomicU64,
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let gone = texts_gone.load(Ordering::SeqCst);
    if gone != known.gone {
        known.ids.clear();
        known.gone = gone;
    }
    let mut hourly = Hourly::default();
    for op in batch.drain(..) {
        match op {
            HistoryOp::Open(e) => {
                let app = text_id(&mut tx, known, e.app_id.as_deref()).await?;
                let title = text_id(&mut tx, known, e.title.as_deref()).await?;
                let (start, end) = (ms(e.start), e.end.map(ms));
                let written = sqlx::query(
                    "INSERT INTO timeline (id, kind, app, title, detail, start_ms, dur_ms)
                     VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                )
                .bind(e.id)
                .bind(kind_code(e.kind))
                .bind(app)
                .bind(title)
                .bind(e.detail.map(|d| d.to_string()))
                .bind(start)
                .bind(end.map(|end| end - start))
                .execute(&mut *tx)
                .await?;
                if written.rows_affected() == 1 {
                    hourly.add(kind_code(e.kind), app, start, end, 1);
                }
            }
            HistoryOp::Close { id, end } => {
                let q = sqlx::query(trusted(format!(
                    "UPDATE timeline SET dur_ms = ? - start_ms WHERE id = ? AND dur_ms IS NULL
                     RETURNING {RETURNED}"
                )))
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
    pub async fn run(mut self, cancel: CancellationToken) {
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
    async fn write_batch(&mut self, behind: &mut Behind) {
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
        let written = write(
            &self.pool,
            &mut ops,
            Utc::now(),
            &mut self.texts,
            &self.handed.texts_gone,
        )
        .await;
        if written.is_err() {
            // Texts this batch added were rolled back with it.
            self.texts.ids.clear();
        }
        match written {
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
    use crate::store::Db;
    use crate::store::key::{DbKey, KeySource};
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
        let (mut texts, gone) = (Texts::default(), AtomicU64::new(0));
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
            // A few stay open; the rest close now or in a later batch. One
            // that would end after `now` is still going on then, open, as
            // the recorder has it: it closes a row when its interval has
            // ended (what `History::summary` relies on for the hour of
            // `now`).
            let open = (rng.next(150) == 0 || end > now) && kind != HistoryKind::Notification;
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
                write(&pool, &mut batch, from_ms(t), &mut texts, &gone)
                    .await
                    .expect("write");
            }
            t += 1000 * rng.next(300);
        }
        write(
            &pool,
            &mut batch,
            from_ms(now - 20 * MIN),
            &mut texts,
            &gone,
        )
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
    /// A page crosses from SQLite as JSON text ([`sql_page`]): texts that
    /// JSON must escape (quotes, backslashes, control characters, NUL,
    /// characters outside the BMP) and details come back byte for byte.
    #[tokio::test]
    async fn a_page_carries_every_text_exactly() {
        let (_dir, db) = temp_db().await;
        let pool = db.pool().clone();
        let (h, writer, id) = History::open(pool.clone()).await.expect("history");
        let t0 = Utc
            .with_ymd_and_hms(2026, 11, 2, 9, 0, 0)
            .single()
            .expect("date");
        let titles = [
            "say \"hi\" \\ back\\slash",
            "tab\tnew\nline\r\u{1}\u{1f}\u{7f}",
            "nul\u{0}inside",
            "🦀 Δ 日本 \u{2028}\u{2029}",
            "[1, 2] {\"not\": \"json\"} null",
        ];
        let events: Vec<HistoryEvent> = titles
            .iter()
            .enumerate()
            .map(|(i, t)| HistoryEvent {
                id: id + i as i64,
                kind: [HistoryKind::Focus, HistoryKind::Notification][i % 2],
                app_id: (i != 2).then(|| format!("org.example.\"App{i}\"")),
                title: Some((*t).to_owned()),
                detail: (i % 2 == 1).then(|| serde_json::json!({"body": *t, "n": i})),
                start: t0 + chrono::Duration::seconds(i as i64),
                end: (i != 4).then(|| t0 + chrono::Duration::seconds(i as i64 + 1)),
            })
            .collect();
        h.submit(events.iter().cloned().map(HistoryOp::Open).collect());
        let cancel = CancellationToken::new();
        cancel.cancel();
        writer.run(cancel).await;
        let q = Query {
            since: t0,
            until: t0 + chrono::Duration::hours(1),
            kinds: HistoryKind::ALL.to_vec(),
            apps: vec![],
            limit: 100,
            cursor: None,
        };
        let (got, next) = h
            .query(&q, t0 + chrono::Duration::hours(1))
            .await
            .expect("query");
        assert_eq!(got, events);
        assert_eq!(next, None);
        pool.close().await;
    }

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
            ("purge", sql_purge()),
        ];
        for (name, sql) in statements {
            let n = sql.matches('?').count();
            let mut q = sqlx::query(trusted(format!("EXPLAIN QUERY PLAN {sql}")));
            for i in 0..n.min(13) {
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
            // On `timeline`: a bounded range of timeline_start, the few
            // rows of timeline_long or timeline_open, or lookups by id.
            let unbounded = plan.iter().find(|l| {
                ["SCAN timeline ", "SEARCH timeline ", "SCAN t ", "SEARCH t "]
                    .iter()
                    .any(|p| l.starts_with(p))
                    && !l.contains("timeline_long")
                    && !l.contains("timeline_open")
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

    /// The codes on disk and `timeline_kind` (migrations/0009) say the same
    /// kind and category as `HistoryKind`.
    #[tokio::test]
    async fn kind_codes_match_the_kind_table() {
        let (_dir, db) = temp_db().await;
        let rows: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT code, kind, category FROM timeline_kind ORDER BY code")
                .fetch_all(db.pool())
                .await
                .expect("kinds");
        let want: Vec<(i64, String, String)> = HistoryKind::ALL
            .iter()
            .map(|k| {
                (
                    kind_code(*k),
                    k.as_str().to_owned(),
                    k.category().to_string(),
                )
            })
            .collect();
        assert_eq!(rows, want);
        let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
            .fetch_one(db.pool())
            .await
            .expect("mode");
        assert_eq!(mode, 2, "a new database vacuums incrementally");
        db.pool().close().await;
    }

    /// Every text is counted exactly as often as rows use it.
    async fn counts_are_right(pool: &SqlitePool) {
        let wrong: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM timeline_text t WHERE refs !=
               (SELECT count(*) FROM timeline WHERE app = t.id)
             + (SELECT count(*) FROM timeline WHERE title = t.id)",
        )
        .fetch_one(pool)
        .await
        .expect("counts");
        assert_eq!(wrong, 0, "texts counted wrong");
    }

    /// A database of the schema before migration 0009 with a timeline in
    /// it (short, long, open and point rows, texts shared and not, no app
    /// or title, JSON details) opens migrated: every row reads the same
    /// through `history`, `Query` and `Summary`, the texts are counted, and
    /// the file is switched to incremental vacuum.
    #[tokio::test]
    async fn an_old_timeline_migrates_and_reads_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.db");
        let key = DbKey::random().expect("key");
        // The database as contextd before 0009 left it.
        let opts = super::super::rotate::options(&path, &key)
            .auto_vacuum(sqlx::sqlite::SqliteAutoVacuum::None);
        let pool = SqlitePool::connect_with(opts).await.expect("old pool");
        sqlx::migrate!("./migrations")
            .run_to(8, &pool)
            .await
            .expect("old schema");
        let t0 = ms(Utc
            .with_ymd_and_hms(2026, 11, 2, 0, 0, 0)
            .single()
            .expect("date"));
        let mut rng = Lcg(11);
        let mut t = t0;
        let mut tx = pool.begin().await.expect("tx");
        for id in 1..=1500_i64 {
            let kind = HistoryKind::ALL[rng.next(10) as usize];
            let len = match rng.next(20) {
                0 => None,
                1 => Some(HOUR_MS + rng.next(5 * HOUR_MS)),
                _ => Some(rng.next(600_000)),
            };
            let app = (rng.next(9) != 0).then(|| APPS[rng.next(4) as usize].to_owned());
            let title = match rng.next(3) {
                0 => None,
                1 => Some(format!("shared {}", rng.next(20))),
                _ => Some(format!("own {id}")),
            };
            let detail = (kind == HistoryKind::Notification).then_some(r#"{"body":"b"}"#);
            sqlx::query(
                "INSERT INTO history (id, kind, category, app_id, title, detail, start_ms, end_ms)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(kind.as_str())
            .bind(kind.category().to_string())
            .bind(app)
            .bind(title)
            .bind(detail)
            .bind(t)
            .bind(len.map(|l| t + l))
            .execute(&mut *tx)
            .await
            .expect("old row");
            t += rng.next(240_000);
        }
        tx.commit().await.expect("commit");
        let migration = include_str!("../../migrations/0003_history_index.sql");
        let backfill = migration
            .split_once("-- Rows recorded before this migration.")
            .expect("backfill part")
            .1;
        sqlx::raw_sql(backfill)
            .execute(&pool)
            .await
            .expect("rollup");
        let all = "SELECT quote(id)||quote(kind)||quote(category)||quote(app_id)||quote(title)
                   ||quote(detail)||quote(start_ms)||quote(end_ms) FROM history ORDER BY id";
        let before: Vec<String> = sqlx::query_scalar(all)
            .fetch_all(&pool)
            .await
            .expect("rows");
        let hourly = "SELECT quote(hour_ms)||quote(app_id)||quote(kind)||quote(ms) FROM history_hourly ORDER BY 1";
        let hourly_before: Vec<String> = sqlx::query_scalar(hourly)
            .fetch_all(&pool)
            .await
            .expect("hourly");
        pool.close().await;

        let (db, _tasks) = Db::open(&path, &key, &KeySource::KeyFile(dir.path().join("k")))
            .await
            .expect("open and migrate");
        let pool = db.pool().clone();
        let after: Vec<String> = sqlx::query_scalar(all)
            .fetch_all(&pool)
            .await
            .expect("rows");
        assert_eq!(after.len(), 1500);
        assert_eq!(after, before, "rows read differently after the migration");
        let hourly_after: Vec<String> = sqlx::query_scalar(hourly)
            .fetch_all(&pool)
            .await
            .expect("hourly");
        assert_eq!(hourly_after, hourly_before);
        counts_are_right(&pool).await;
        let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
            .fetch_one(&pool)
            .await
            .expect("mode");
        assert_eq!(mode, 2, "switched to incremental vacuum");

        // The reads agree with the rows as they were.
        let (h, _writer, next) = History::open(pool.clone()).await.expect("history");
        assert_eq!(next, 1501);
        let model: Vec<HistoryEvent> = h
            .query(
                &Query {
                    since: from_ms(0),
                    until: from_ms(t + 1),
                    kinds: HistoryKind::ALL.to_vec(),
                    apps: vec![],
                    limit: 1000,
                    cursor: None,
                },
                from_ms(t),
            )
            .await
            .expect("query")
            .0;
        assert_eq!(model.len(), 1000);
        let now = t + HOUR_MS;
        // History::open closed the open rows where the writer was last
        // alive (never, here: they stay open).
        let mut all_rows = Vec::new();
        let q = Query {
            since: from_ms(0),
            until: from_ms(now),
            kinds: HistoryKind::ALL.to_vec(),
            apps: vec![],
            limit: 1000,
            cursor: None,
        };
        for id in all_pages(&h, &q, from_ms(now)).await {
            all_rows.push(id);
        }
        assert_eq!(all_rows.len(), 1500);
        let full: Vec<HistoryEvent> = {
            let mut q = q.clone();
            let mut v = Vec::new();
            loop {
                let (rows, next) = h.query(&q, from_ms(now)).await.expect("query");
                v.extend(rows);
                match next {
                    Some(c) => q.cursor = parse_cursor(&c).expect("cursor"),
                    None => break v,
                }
            }
        };
        let mut rng = Lcg(5);
        check(&h, &full, &mut rng, t0, now).await;
        pool.close().await;
    }

    /// Rows over `days` days from `t0`, one every `every_ms`, all of one
    /// kind, with their own titles, straight into the table (the triggers
    /// count the texts).
    async fn many_rows(pool: &SqlitePool, t0: i64, n: i64, every_ms: i64) {
        sqlx::query("INSERT INTO timeline_text (text, refs) VALUES ('org.app', 0)")
            .execute(pool)
            .await
            .expect("app");
        sqlx::query(
            "WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?1)
             INSERT INTO timeline_text (text, refs)
             SELECT printf('title %d %.200c', i, 'x'), 0 FROM g",
        )
        .bind(n)
        .execute(pool)
        .await
        .expect("titles");
        sqlx::query(
            "WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?1)
             INSERT INTO timeline (kind, app, title, start_ms, dur_ms)
             SELECT 0, (SELECT id FROM timeline_text WHERE text = 'org.app'),
                    (SELECT id FROM timeline_text WHERE text = printf('title %d %.200c', i, 'x')),
                    ?2 + i * ?3, ?3 - 1 FROM g",
        )
        .bind(n)
        .bind(t0)
        .bind(every_ms)
        .execute(pool)
        .await
        .expect("rows");
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(pool)
            .await
            .expect("checkpoint");
    }

    fn file_size(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Retention forgets in steps: a reader is answered between two of
    /// them (it sees some of the old rows gone and some still there), the
    /// texts of forgotten rows go with them, and the file gives the freed
    /// pages back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retention_forgets_in_steps_readers_go_on_and_the_file_shrinks() {
        let (dir, db) = temp_db().await;
        let pool = db.pool().clone();
        let t0 = ms(Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("date"));
        let n = 10 * STEP_ROWS;
        many_rows(&pool, t0, n, 1000).await;
        let (h, _writer, _) = History::open(pool.clone()).await.expect("history");
        let full = file_size(dir.path());
        assert!(full > 3_000_000, "{full}");

        let count = |pool: SqlitePool| async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM timeline")
                .fetch_one(&pool)
                .await
                .expect("count")
        };
        let settings = HistorySettings {
            retention_days: 1,
            ..Default::default()
        };
        let purge = {
            let h = h.clone();
            tokio::spawn(async move { h.purge(&settings, from_ms(t0 + 40 * 24 * HOUR_MS)).await })
        };
        let mut between = 0;
        while !purge.is_finished() {
            let c = count(pool.clone()).await;
            if c > 0 && c < n {
                between += 1;
            }
            tokio::task::yield_now().await;
        }
        let forgotten = purge.await.expect("task").expect("purge");
        assert_eq!(forgotten as i64, n);
        assert!(
            between > 0,
            "no read was answered between two steps of the purge"
        );
        assert_eq!(count(pool.clone()).await, 0);
        let texts: i64 = sqlx::query_scalar("SELECT count(*) FROM timeline_text")
            .fetch_one(&pool)
            .await
            .expect("texts");
        assert_eq!(texts, 0, "the titles of forgotten rows are gone");
        let free: i64 = sqlx::query_scalar("PRAGMA freelist_count")
            .fetch_one(&pool)
            .await
            .expect("free");
        assert_eq!(free, 0, "free pages were given back");
        let after = file_size(dir.path());
        assert!(
            after * 4 < full,
            "the file did not shrink: {full} bytes before, {after} after"
        );
        pool.close().await;
    }

    /// Forget in steps counts and forgets exactly what one statement did,
    /// across many steps, and drops the texts only it used.
    #[tokio::test]
    async fn forget_in_steps_takes_exactly_the_period() {
        let (_dir, db) = temp_db().await;
        let pool = db.pool().clone();
        let t0 = ms(Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("date"));
        let n = 3 * STEP_ROWS + 17;
        many_rows(&pool, t0, n, 1000).await;
        let (h, _writer, _) = History::open(pool.clone()).await.expect("history");
        let (a, b) = (t0 + 500_500, t0 + (n - 300) * 1000);
        let forgotten = h
            .forget(from_ms(a), from_ms(b), &[], &[], from_ms(t0 + n * 1000))
            .await
            .expect("forget");
        // Rows [i*1000, i*1000 + 999) overlapping [a, b).
        let want = (0..n)
            .filter(|i| i * 1000 + t0 < b && i * 1000 + 999 + t0 > a)
            .count();
        assert_eq!(forgotten as usize, want);
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM timeline")
            .fetch_one(&pool)
            .await
            .expect("count");
        assert_eq!(left as usize, n as usize - want);
        counts_are_right(&pool).await;
        let unused: i64 = sqlx::query_scalar("SELECT count(*) FROM timeline_text WHERE refs <= 0")
            .fetch_one(&pool)
            .await
            .expect("unused");
        assert_eq!(unused, 0);
        pool.close().await;
    }
}

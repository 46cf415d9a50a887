//! The timeline in the encrypted database: batched writes (one
//! transaction a second at most), queries with stable cursors, summaries,
//! forgetting with secure delete, retention.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use sqlx::Row;
use sqlx::sqlite::SqlitePool;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::Error;
use crate::core::history::{HistoryEvent, HistoryKind, HistoryOp, HistorySettings};

const FLUSH: Duration = Duration::from_secs(1);

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

fn failed(e: sqlx::Error) -> Error {
    Error::Failed(format!("history database: {e}"))
}

/// A query of the timeline.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub kinds: Vec<HistoryKind>,
    pub apps: Vec<String>,
    pub limit: u32,
    /// `start_ms:id` of the last row of the previous page.
    pub cursor: Option<(i64, i64)>,
}

pub fn parse_cursor(s: &str) -> Result<Option<(i64, i64)>, Error> {
    if s.is_empty() {
        return Ok(None);
    }
    let bad = || {
        Error::InvalidArgs(format!(
            "invalid cursor '{}'",
            s.chars().take(40).collect::<String>()
        ))
    };
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    Ok(Some((
        a.parse().map_err(|_| bad())?,
        b.parse().map_err(|_| bad())?,
    )))
}

/// Time per app over a period.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AppTotals {
    pub app_id: String,
    pub focus_ms: i64,
    pub capture_ms: i64,
    pub playback_ms: i64,
}

#[derive(Debug, Clone)]
pub struct History {
    pool: SqlitePool,
    tx: mpsc::UnboundedSender<HistoryOp>,
}

pub struct HistoryWriter {
    pool: SqlitePool,
    rx: mpsc::UnboundedReceiver<HistoryOp>,
}

impl History {
    /// Prepare the store: intervals a crash left open end at the last
    /// moment the recorder was known alive. Returns the next free id.
    pub async fn open(pool: SqlitePool) -> Result<(History, HistoryWriter, i64), Error> {
        let alive: Option<i64> =
            sqlx::query_scalar("SELECT value FROM history_meta WHERE key = 'alive_ms'")
                .fetch_optional(&pool)
                .await
                .map_err(failed)?;
        if let Some(alive) = alive {
            sqlx::query("UPDATE history SET end_ms = max(start_ms, ?) WHERE end_ms IS NULL")
                .bind(alive)
                .execute(&pool)
                .await
                .map_err(failed)?;
        }
        let next: i64 = sqlx::query_scalar("SELECT coalesce(max(id), 0) + 1 FROM history")
            .fetch_one(&pool)
            .await
            .map_err(failed)?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok((
            History {
                pool: pool.clone(),
                tx,
            },
            HistoryWriter { pool, rx },
            next,
        ))
    }

    /// Hand operations to the writer; never waits.
    pub fn submit(&self, ops: Vec<HistoryOp>) {
        for op in ops {
            let _ = self.tx.send(op);
        }
    }

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
        let rows = sqlx::query(
            "SELECT id, kind, app_id, title, detail, start_ms, end_ms FROM history
             WHERE start_ms < ?1 AND (coalesce(end_ms, ?2) > ?3 OR start_ms >= ?3)
               AND kind IN (SELECT value FROM json_each(?4))
               AND (json_array_length(?5) = 0 OR app_id IN (SELECT value FROM json_each(?5)))
               AND (start_ms > ?6 OR (start_ms = ?6 AND id > ?7))
             ORDER BY start_ms, id LIMIT ?8",
        )
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

    /// Focus, capture and playback time per app within [since, until).
    pub async fn summary(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<AppTotals>, Error> {
        let rows = sqlx::query(
            "SELECT app_id, kind,
                    sum(max(0, min(coalesce(end_ms, ?1), ?3) - max(start_ms, ?2))) AS ms
             FROM history
             WHERE kind IN ('focus', 'capture', 'playback') AND app_id IS NOT NULL
               AND start_ms < ?3 AND coalesce(end_ms, ?1) > ?2
             GROUP BY app_id, kind",
        )
        .bind(ms(now))
        .bind(ms(since))
        .bind(ms(until))
        .fetch_all(&self.pool)
        .await
        .map_err(failed)?;
        let mut by_app: std::collections::BTreeMap<String, AppTotals> = Default::default();
        for r in rows {
            let app: String = r.try_get(0).map_err(failed)?;
            let kind: String = r.try_get(1).map_err(failed)?;
            let v: i64 = r.try_get(2).map_err(failed)?;
            let t = by_app.entry(app.clone()).or_insert_with(|| AppTotals {
                app_id: app,
                ..Default::default()
            });
            match kind.as_str() {
                "focus" => t.focus_ms += v,
                "capture" => t.capture_ms += v,
                _ => t.playback_ms += v,
            }
        }
        let mut v: Vec<AppTotals> = by_app.into_values().collect();
        v.sort_by(|a, b| {
            b.focus_ms
                .cmp(&a.focus_ms)
                .then(b.capture_ms.cmp(&a.capture_ms))
        });
        Ok(v)
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
        let r = sqlx::query(
            "DELETE FROM history
             WHERE start_ms < ?1 AND (coalesce(end_ms, ?2) > ?3 OR start_ms >= ?3)
               AND (json_array_length(?4) = 0 OR kind IN (SELECT value FROM json_each(?4)))
               AND (json_array_length(?5) = 0 OR app_id IN (SELECT value FROM json_each(?5)))",
        )
        .bind(ms(until))
        .bind(ms(now))
        .bind(ms(since))
        .bind(&kinds_json)
        .bind(&apps_json)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        self.checkpoint().await;
        Ok(r.rows_affected())
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
        let mut n = 0;
        for k in HistoryKind::ALL {
            let cutoff = ms(now - settings.retention(k));
            n += sqlx::query(
                "DELETE FROM history WHERE kind = ? AND coalesce(end_ms, start_ms) < ?",
            )
            .bind(k.as_str())
            .bind(cutoff)
            .execute(&self.pool)
            .await
            .map_err(failed)?
            .rows_affected();
        }
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
    for op in batch.drain(..) {
        match op {
            HistoryOp::Open(e) => {
                sqlx::query(
                    "INSERT OR REPLACE INTO history (id, kind, category, app_id, title, detail, start_ms, end_ms)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(e.id)
                .bind(e.kind.as_str())
                .bind(e.kind.category().to_string())
                .bind(e.app_id)
                .bind(e.title)
                .bind(e.detail.map(|d| d.to_string()))
                .bind(ms(e.start))
                .bind(e.end.map(ms))
                .execute(&mut *tx)
                .await?;
            }
            HistoryOp::Close { id, end } => {
                sqlx::query("UPDATE history SET end_ms = ? WHERE id = ?")
                    .bind(ms(end))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
    }
    sqlx::query("INSERT INTO history_meta (key, value) VALUES ('alive_ms', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
        .bind(ms(alive))
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

impl HistoryWriter {
    /// Write batches, at most one transaction a second, until cancelled;
    /// then write what is left.
    pub async fn run(mut self, cancel: CancellationToken) {
        // At most one transaction a second, and no timer while idle.
        let mut deadline: Option<tokio::time::Instant> = None;
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                op = self.rx.recv() => match op {
                    Some(op) => {
                        batch.push(op);
                        if deadline.is_none() {
                            deadline = Some(tokio::time::Instant::now() + FLUSH);
                        }
                    }
                    None => break,
                },
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {
                    deadline = None;
                    if let Err(e) = write(&self.pool, &mut batch, Utc::now()).await {
                        tracing::warn!(error = %e, "cannot write the history");
                    }
                }
            }
        }
        while let Ok(op) = self.rx.try_recv() {
            batch.push(op);
        }
        if let Err(e) = write(&self.pool, &mut batch, Utc::now()).await {
            tracing::warn!(error = %e, "cannot write the last history batch");
        }
    }
}

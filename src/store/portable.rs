//! The rows of an export that only the store holds: token names (never
//! their hashes) and the timeline; and the timeline's import, merged into
//! what is there (`core::portable` reads and checks the file).

use sqlx::Row;

use super::Db;
use crate::core::Error;
use crate::core::consent::{BoxFut, HistoryRow, StoreExport};

fn failed(e: sqlx::Error) -> Error {
    Error::Failed(format!("database: {e}"))
}

impl Db {
    pub(crate) fn export_rows(&self, history: bool) -> BoxFut<'_, Result<StoreExport, Error>> {
        Box::pin(async move {
            let mut out = StoreExport::default();
            for r in sqlx::query("SELECT name, created_ms FROM mcp_tokens ORDER BY name")
                .fetch_all(self.pool())
                .await
                .map_err(failed)?
            {
                out.tokens.push((
                    r.try_get(0).unwrap_or_default(),
                    r.try_get(1).unwrap_or_default(),
                ));
            }
            if history {
                for r in sqlx::query(
                    "SELECT kind, category, app_id, title, detail, start_ms, end_ms FROM history ORDER BY start_ms, id",
                )
                .fetch_all(self.pool())
                .await
                .map_err(failed)?
                {
                    out.history.push(HistoryRow {
                        kind: r.try_get(0).unwrap_or_default(),
                        category: r.try_get(1).unwrap_or_default(),
                        app_id: r.try_get(2).unwrap_or_default(),
                        title: r.try_get(3).unwrap_or_default(),
                        detail: r.try_get(4).unwrap_or_default(),
                        start_ms: r.try_get(5).unwrap_or_default(),
                        end_ms: r.try_get(6).unwrap_or_default(),
                    });
                }
            }
            Ok(out)
        })
    }

    /// Add the rows not there yet (an identical row is not added twice),
    /// with their share of the hourly totals, in one transaction.
    pub(crate) fn import_history(&self, rows: Vec<HistoryRow>) -> BoxFut<'_, Result<u64, Error>> {
        Box::pin(async move {
            let err = |e| self.health().error("the imported timeline", e);
            let mut tx = self.pool().begin().await.map_err(err)?;
            sqlx::query(
                "CREATE TEMP TABLE IF NOT EXISTS imported (kind TEXT NOT NULL, category TEXT NOT NULL, app_id TEXT,
                 title TEXT, detail TEXT, start_ms INTEGER NOT NULL, end_ms INTEGER)",
            )
            .execute(&mut *tx)
            .await
            .map_err(err)?;
            sqlx::query("DELETE FROM temp.imported")
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            for r in &rows {
                sqlx::query(
                    "INSERT INTO temp.imported SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (
                       SELECT 1 FROM history h WHERE h.kind = ?1 AND h.category = ?2 AND h.app_id IS ?3
                       AND h.title IS ?4 AND h.detail IS ?5 AND h.start_ms = ?6 AND h.end_ms IS ?7)",
                )
                .bind(&r.kind)
                .bind(&r.category)
                .bind(&r.app_id)
                .bind(&r.title)
                .bind(&r.detail)
                .bind(r.start_ms)
                .bind(r.end_ms)
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            }
            // Into the timeline's own tables (migrations/0009): each app id
            // and title once in `timeline_text` (the insert's trigger counts
            // the rows), the kind as its code; the category follows from
            // the kind.
            sqlx::query(
                "INSERT INTO timeline_text (text, refs)
                 SELECT DISTINCT v, 0 FROM (SELECT app_id AS v FROM temp.imported
                                            UNION ALL SELECT title FROM temp.imported)
                 WHERE v IS NOT NULL
                 ON CONFLICT (text) DO NOTHING",
            )
            .execute(&mut *tx)
            .await
            .map_err(err)?;
            let added = sqlx::query(
                "INSERT INTO timeline (kind, app, title, detail, start_ms, dur_ms)
                 SELECT k.code, (SELECT id FROM timeline_text WHERE text = i.app_id),
                        (SELECT id FROM timeline_text WHERE text = i.title),
                        i.detail, i.start_ms, i.end_ms - i.start_ms
                 FROM temp.imported i JOIN timeline_kind k ON k.kind = i.kind",
            )
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            // Texts no row took (a kind this version does not know) are
            // left for the timeline to delete (store::history: it keeps
            // the writer's ids right when it does).
            // The hourly totals of the rows added (as migration 0003 does).
            sqlx::query(
                "WITH RECURSIVE parts (app_id, kind, hour_ms, s, e) AS (
                    SELECT app_id, kind, start_ms - start_ms % 3600000, start_ms, end_ms
                    FROM temp.imported
                    WHERE kind IN ('focus', 'capture', 'playback') AND app_id IS NOT NULL
                      AND end_ms IS NOT NULL AND end_ms > start_ms
                    UNION ALL
                    SELECT app_id, kind, hour_ms + 3600000, s, e FROM parts WHERE hour_ms + 3600000 < e
                 )
                 INSERT INTO history_hourly (hour_ms, app_id, kind, ms)
                 SELECT hour_ms, app_id, kind, sum(min(e, hour_ms + 3600000) - max(s, hour_ms))
                 FROM parts WHERE true GROUP BY hour_ms, app_id, kind
                 ON CONFLICT (hour_ms, app_id, kind) DO UPDATE SET ms = ms + excluded.ms",
            )
            .execute(&mut *tx)
            .await
            .map_err(err)?;
            sqlx::query("DELETE FROM temp.imported")
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            tx.commit().await.map_err(err)?;
            self.health().wrote();
            Ok(added)
        })
    }
}

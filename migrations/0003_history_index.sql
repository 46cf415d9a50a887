-- Reading a period of the timeline fast (History1.Query, Summary, Forget).
--
-- A row overlaps [a, b) when it starts in [a, b), or starts before a and
-- ends after it. Rows starting in [a, b) come from history_start. A row
-- that crosses a either started in the hour before a (history_start again),
-- or is open or lasts an hour or more: those are few (locks, nights, long
-- focus), and this partial index holds exactly them. The expression must
-- stay identical to LONG in src/store/history.rs.
CREATE INDEX history_long ON history (start_ms, id)
    WHERE end_ms IS NULL OR end_ms - start_ms >= 3600000;

-- Focus, capture and playback time of closed intervals per app, kind and
-- UTC hour, kept by the writer in the transaction that closes, forgets or
-- purges a row, so that Summary over a week reads a few thousand rows
-- instead of every interval. Open intervals and the parts of a period that
-- are not whole hours are read from `history`.
CREATE TABLE history_hourly (
    hour_ms INTEGER NOT NULL,     -- start of the hour, Unix ms (UTC)
    app_id  TEXT NOT NULL,
    kind    TEXT NOT NULL,        -- focus, capture, playback
    ms      INTEGER NOT NULL,     -- time within that hour
    PRIMARY KEY (hour_ms, app_id, kind)
) STRICT, WITHOUT ROWID;

-- Rows recorded before this migration.
WITH RECURSIVE parts (app_id, kind, hour_ms, s, e) AS (
    SELECT app_id, kind, start_ms - start_ms % 3600000, start_ms, end_ms
    FROM history
    WHERE kind IN ('focus', 'capture', 'playback') AND app_id IS NOT NULL
      AND end_ms IS NOT NULL AND end_ms > start_ms
    UNION ALL
    SELECT app_id, kind, hour_ms + 3600000, s, e FROM parts WHERE hour_ms + 3600000 < e
)
INSERT INTO history_hourly (hour_ms, app_id, kind, ms)
SELECT hour_ms, app_id, kind, sum(min(e, hour_ms + 3600000) - max(s, hour_ms))
FROM parts GROUP BY hour_ms, app_id, kind;

-- The timeline. One row per interval (focus, capture, playback, locked,
-- idle, sleep) or point (notification). Times are Unix milliseconds (UTC);
-- end_ms is NULL while an interval is still open.
CREATE TABLE history (
    id        INTEGER PRIMARY KEY,
    kind      TEXT NOT NULL,      -- focus, capture, playback, locked, idle, sleep, notification
    category  TEXT NOT NULL,      -- the consent category a reader needs
    app_id    TEXT,               -- as reported (compositor app id, PipeWire identity, notification app name)
    title     TEXT,               -- window title, media name or notification summary, when recorded
    detail    TEXT,               -- JSON: device kind, notification body when recorded, ...
    start_ms  INTEGER NOT NULL,
    end_ms    INTEGER
) STRICT;
CREATE INDEX history_start ON history (start_ms, id);
CREATE INDEX history_app_start ON history (app_id, start_ms);

-- When the recorder last wrote: intervals left open by a crash end there.
CREATE TABLE history_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) STRICT;

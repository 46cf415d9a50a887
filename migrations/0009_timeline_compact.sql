-- A timeline for years (issue 33): the same rows in about a third of the
-- bytes, so that a heavy user's several million events a year stay a
-- file of a few hundred megabytes.
--
-- Where the bytes went (dbstat, 1 M events, migration 0003's schema): the
-- kind and its category as text in every row, the app id and the title as
-- text in every row although a day repeats the same few dozen of each, an
-- end time of 6 bytes where a duration takes 2 or 3, an index on (app_id,
-- start_ms) that no statement reads, and `history_start` holding the id
-- twice (an index ends with the rowid anyway).
--
-- Now: the kind is a small code (`timeline_kind`, with its category), the
-- app id and the title are each a reference to one row of `timeline_text`
-- (counted, so that forgetting the last row that uses a text forgets the
-- text: the store deletes texts whose count reached 0 in the transaction
-- that forgot their last row, see src/store/history.rs), and the end is a
-- duration. `history` stays, as a view with the old columns, for export,
-- import and anyone reading the file with sqlcipher.

-- The kinds and the category a reader needs for each, as
-- `HistoryKind::as_str` and `HistoryKind::category` say (a unit test
-- compares). A new kind is a new row here, in a migration.
CREATE TABLE timeline_kind (
    code     INTEGER PRIMARY KEY,
    kind     TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL
) STRICT;
INSERT INTO timeline_kind (code, kind, category) VALUES
    (0, 'focus', 'windows'),
    (1, 'capture', 'media.capture'),
    (2, 'playback', 'media.playback'),
    (3, 'locked', 'session'),
    (4, 'idle', 'session'),
    (5, 'sleep', 'session'),
    (6, 'notification', 'notifications'),
    (7, 'document', 'provided.document'),
    (8, 'task', 'provided.task'),
    (9, 'recent-document', 'documents.recent');

-- App ids and titles, each once, with the number of timeline rows that
-- use it (as app id and as title: a text used as both counts twice).
CREATE TABLE timeline_text (
    id   INTEGER PRIMARY KEY,
    refs INTEGER NOT NULL,
    text TEXT NOT NULL UNIQUE
) STRICT;
-- The texts no row uses any more: what the store deletes.
CREATE INDEX timeline_text_unused ON timeline_text (id) WHERE refs <= 0;

-- One row per interval or point; dur_ms is NULL while an interval is open.
CREATE TABLE timeline (
    id       INTEGER PRIMARY KEY,
    kind     INTEGER NOT NULL,   -- timeline_kind.code
    app      INTEGER,            -- timeline_text.id of the app id
    title    INTEGER,            -- timeline_text.id of the title
    detail   TEXT,               -- JSON, as before
    start_ms INTEGER NOT NULL,   -- Unix ms (UTC)
    dur_ms   INTEGER             -- end_ms - start_ms; NULL while open
) STRICT;

-- Rows recorded before this migration. Rows of a kind this version does
-- not know (none was ever written) are not carried over.
INSERT INTO timeline_text (text, refs)
SELECT v, count(*) FROM (
    SELECT app_id AS v FROM history WHERE kind IN (SELECT kind FROM timeline_kind)
    UNION ALL
    SELECT title FROM history WHERE kind IN (SELECT kind FROM timeline_kind)
) WHERE v IS NOT NULL GROUP BY v;
INSERT INTO timeline (id, kind, app, title, detail, start_ms, dur_ms)
SELECT h.id, k.code,
       (SELECT id FROM timeline_text WHERE text = h.app_id),
       (SELECT id FROM timeline_text WHERE text = h.title),
       h.detail, h.start_ms, h.end_ms - h.start_ms
FROM history h JOIN timeline_kind k ON k.kind = h.kind
ORDER BY h.id;
DROP TABLE history;

-- Reading a period: as history_start and history_long (migration 0003),
-- on the new table. The WHERE of timeline_long must stay identical to
-- LONG in src/store/history.rs.
CREATE INDEX timeline_start ON timeline (start_ms);
CREATE INDEX timeline_long ON timeline (start_ms)
    WHERE dur_ms IS NULL OR dur_ms >= 3600000;
-- The open intervals alone (a handful: the focus, the streams, the
-- session states), so that closing them at start and summing them never
-- reads the long rows of years.
CREATE INDEX timeline_open ON timeline (start_ms) WHERE dur_ms IS NULL;

-- The counts follow every insert, change and delete, whoever makes it.
CREATE TRIGGER timeline_text_add AFTER INSERT ON timeline BEGIN
    UPDATE timeline_text SET refs = refs + 1 WHERE id = NEW.app;
    UPDATE timeline_text SET refs = refs + 1 WHERE id = NEW.title;
END;
CREATE TRIGGER timeline_text_drop AFTER DELETE ON timeline BEGIN
    UPDATE timeline_text SET refs = refs - 1 WHERE id = OLD.app;
    UPDATE timeline_text SET refs = refs - 1 WHERE id = OLD.title;
END;
CREATE TRIGGER timeline_text_change AFTER UPDATE OF app, title ON timeline BEGIN
    UPDATE timeline_text SET refs = refs - 1 WHERE id = OLD.app;
    UPDATE timeline_text SET refs = refs - 1 WHERE id = OLD.title;
    UPDATE timeline_text SET refs = refs + 1 WHERE id = NEW.app;
    UPDATE timeline_text SET refs = refs + 1 WHERE id = NEW.title;
END;

-- The old shape, for reading (export, tools, tests).
CREATE VIEW history (id, kind, category, app_id, title, detail, start_ms, end_ms) AS
SELECT t.id, k.kind, k.category,
       (SELECT text FROM timeline_text WHERE id = t.app),
       (SELECT text FROM timeline_text WHERE id = t.title),
       t.detail, t.start_ms, t.start_ms + t.dur_ms
FROM timeline t JOIN timeline_kind k ON k.code = t.kind;

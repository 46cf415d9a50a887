-- Decisions restored from an export (`Consent1.Import`, `contextctl
-- consent import`) are marked `import`: an imported line is a file's
-- claim about who decided, not the user answering here, so it is never
-- shown as a prompt's or a panel's decision. SQLite cannot change a CHECK
-- constraint in place: the table is made again with the same rows.
CREATE TABLE decisions_new (
    app_id      TEXT NOT NULL,
    category    TEXT NOT NULL,
    verdict     TEXT NOT NULL CHECK (verdict IN ('allow', 'deny', 'ask')),
    expires_ms  INTEGER,
    origin      TEXT NOT NULL CHECK (origin IN ('prompt', 'manage', 'import')),
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (app_id, category)
) STRICT;
INSERT INTO decisions_new (app_id, category, verdict, expires_ms, origin, created_ms)
    SELECT app_id, category, verdict, expires_ms, origin, created_ms FROM decisions;
DROP TABLE decisions;
ALTER TABLE decisions_new RENAME TO decisions;

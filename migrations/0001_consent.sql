-- Consent: the apps that asked, the user's decisions, and the audit log.
-- Times are Unix milliseconds (UTC).

-- Every app that asked for context, with how the broker identified it.
CREATE TABLE apps (
    app_id          TEXT PRIMARY KEY NOT NULL,
    identity_source TEXT NOT NULL,
    display_name    TEXT,
    icon            TEXT,
    first_seen_ms   INTEGER NOT NULL,
    last_seen_ms    INTEGER NOT NULL
) STRICT;

-- The user's decisions per (app, category). policy.toml grants are not
-- stored: the file is their home and is read at start and on change.
CREATE TABLE decisions (
    app_id      TEXT NOT NULL,
    category    TEXT NOT NULL,
    verdict     TEXT NOT NULL CHECK (verdict IN ('allow', 'deny', 'ask')),
    expires_ms  INTEGER,
    origin      TEXT NOT NULL CHECK (origin IN ('prompt', 'manage')),
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (app_id, category)
) STRICT;

-- What the gate decided, when, for whom. Identical decisions within the
-- same second are one row with a count, so a busy app costs one row a
-- second, not one per call.
CREATE TABLE audit (
    id        INTEGER PRIMARY KEY,
    time_ms   INTEGER NOT NULL,
    app_id    TEXT NOT NULL,
    category  TEXT NOT NULL,
    channel   TEXT NOT NULL,
    allowed   INTEGER NOT NULL CHECK (allowed IN (0, 1)),
    reason    TEXT NOT NULL,
    count     INTEGER NOT NULL DEFAULT 1
) STRICT;
CREATE INDEX audit_time ON audit (time_ms);
CREATE INDEX audit_app_time ON audit (app_id, time_ms);

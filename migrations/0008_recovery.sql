-- A database that replaced one the broker could not use (empty, cut
-- short, damaged, another program's, of a newer version, not opened by
-- the key): where the old file was moved and why. While a row is here the
-- broker runs degraded (undecided access is denied, never asked), until
-- the user acts (`contextctl recovery dismiss`, or an import).
CREATE TABLE recovery (
    id       INTEGER PRIMARY KEY,
    moved_to TEXT NOT NULL,
    reason   TEXT NOT NULL,
    since_ms INTEGER NOT NULL
) STRICT;

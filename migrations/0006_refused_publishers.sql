-- Apps whose publications (org.contextd.Provider1) the user refused, and
-- since when. An app not listed may publish.
CREATE TABLE refused_publishers (
    app_id   TEXT PRIMARY KEY NOT NULL,
    since_ms INTEGER NOT NULL
) STRICT;

//! The SQLCipher database and the consent store on it.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{Row, SqliteConnection};
use tokio_util::sync::CancellationToken;

use super::health::{Health, Lost, is_write_fault, primary_code};
use super::key::{DbKey, KeySource};
use super::{from_ms, ms};
use crate::core::consent::{
    AppInfo, AuditCount, AuditCountQuery, AuditEntry, AuditQuery, BoxFut, ConsentStore, Loaded,
    Origin, StoredDecision, Verdict,
};
use crate::core::{Channel, Error};
use crate::model::{AppId, Category, IdentitySource};

/// How often audit entries are written, at most.
const AUDIT_FLUSH: Duration = Duration::from_secs(1);
/// A batch is written early when it has this many rows.
const AUDIT_BATCH: usize = 2000;
/// Audit entries waiting for the writer, at most: past this (the writer
/// stuck behind a busy or failing disk) new entries are dropped and
/// counted rather than held in memory without end.
const AUDIT_QUEUE: usize = 4 * AUDIT_BATCH;
/// How many of the newest waiting rows an entry is folded into.
const AUDIT_FOLD: usize = 8;

/// Audit entries waiting for the writer. Every audited read adds one, so
/// this is on the hot path: an entry is folded into an identical one of
/// the same second (`count`) when it can, and the writer is woken only
/// when the first entry arrives (it then waits `AUDIT_FLUSH`) or the batch
/// is full, not once per entry as a channel would.
#[derive(Debug, Default)]
struct AuditQueue {
    waiting: std::sync::Mutex<AuditWaiting>,
    wake: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct AuditWaiting {
    rows: Vec<AuditEntry>,
    dropped: u64,
}

/// `e` stands for the same decision as `o`, in the same second.
fn same_row(o: &AuditEntry, e: &AuditEntry) -> bool {
    o.time.timestamp() == e.time.timestamp()
        && o.allowed == e.allowed
        && o.channel == e.channel
        && o.app == e.app
        && o.category == e.category
        && o.request == e.request
        && o.reason == e.reason
}

impl AuditQueue {
    fn push(&self, e: AuditEntry) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let n = w.rows.len();
        if let Some(o) = w.rows[n.saturating_sub(AUDIT_FOLD)..]
            .iter_mut()
            .rev()
            .find(|o| same_row(o, &e))
        {
            o.count += e.count;
            return;
        }
        if n >= AUDIT_QUEUE {
            w.dropped += e.count;
            return;
        }
        w.rows.push(e);
        if n == 0 || n + 1 == AUDIT_BATCH {
            self.wake.notify_one();
        }
    }

    /// Everything waiting, and how many entries were dropped since the
    /// last take.
    fn take(&self) -> (Vec<AuditEntry>, u64) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let dropped = std::mem::take(&mut w.dropped);
        (std::mem::take(&mut w.rows), dropped)
    }

    /// Drop what waits of `app`: a forget must not see its rows written
    /// after it. How many accesses they stood for.
    fn drop_app(&self, app: &AppId) -> u64 {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = 0;
        w.rows.retain(|e| {
            let of_app = e.app == *app;
            if of_app {
                n += e.count;
            }
            !of_app
        });
        n
    }

    fn len(&self) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .rows
            .len()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(
        "{path}: cannot decrypt with {key}: wrong key, or not a contextd database (random bytes look the same). It was not changed; if the key is the wrong one, put the right one back and move the file back"
    )]
    WrongKey { path: String, key: KeySource },
    #[error("{path}: {error}")]
    Open { path: String, error: String },
    #[error("{path}: migrating the schema failed: {error}")]
    Migrate { path: String, error: String },
    #[error("{path} is damaged: {detail}. It was not changed")]
    Corrupt { path: String, detail: String },
    #[error(
        "{path} is a plain SQLite database, not contextd's encrypted one: another program's file, or one copied there by hand. It was not changed"
    )]
    Foreign { path: String },
    /// A file of no bytes: a crash, a full disk or a sync tool cut it to
    /// nothing. Never taken for a new database.
    #[error(
        "{path} is empty (0 bytes): cut to nothing by a crash, a full disk or a sync tool. It was not changed"
    )]
    Empty { path: String },
    /// Written by a newer contextd: this one does not know its schema.
    #[error(
        "{path} was written by a newer contextd (schema {found}, this version knows up to {known}). It was not changed; run the newer version again to use it"
    )]
    Newer {
        path: String,
        found: i64,
        known: i64,
    },
}

impl DbError {
    /// Whether the file itself is unusable here (empty, cut short,
    /// damaged, another program's, of a newer schema, not opened by the
    /// key in hand), as opposed to a failure around it (permissions, a
    /// migration that failed): such a file is set aside, never used.
    pub(crate) fn file_unusable(&self) -> bool {
        matches!(
            self,
            DbError::WrongKey { .. }
                | DbError::Corrupt { .. }
                | DbError::Foreign { .. }
                | DbError::Empty { .. }
                | DbError::Newer { .. }
        )
    }
}

/// The newest migration this build knows.
fn known_schema() -> i64 {
    sqlx::migrate!("./migrations")
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}

/// A file smaller than this is checked whole at start (tens of
/// milliseconds); a bigger one, its timeline after start.
const CHECK_WHOLE_BELOW: u64 = 16 << 20;
/// How long after start the timeline of a bigger file is checked.
const TIMELINE_CHECK_AFTER: Duration = Duration::from_secs(60);

/// The tables of the timeline, which grow with the years (`history` is
/// the table of databases before migration 0009).
const TIMELINE_TABLES: [&str; 4] = ["timeline", "timeline_text", "history_hourly", "history"];

/// Statements put together from constants and names SQLite itself listed.
fn trusted(sql: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(sql)
}

/// `PRAGMA quick_check` of every table (and its indexes) but the
/// timeline's: the first problem found, or "ok".
async fn quick_check_except_timeline(conn: &mut SqliteConnection) -> Result<String, sqlx::Error> {
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_schema WHERE type = 'table'")
            .fetch_all(&mut *conn)
            .await?;
    for t in tables {
        if TIMELINE_TABLES.contains(&t.as_str()) || t.starts_with("sqlite_") {
            continue;
        }
        let v: String = sqlx::query_scalar(trusted(format!(
            "PRAGMA quick_check(\"{}\")",
            t.replace('"', "\"\"")
        )))
        .fetch_one(&mut *conn)
        .await?;
        if v != "ok" {
            return Ok(v);
        }
    }
    Ok("ok".to_owned())
}

/// The first bytes of an unencrypted SQLite database. SQLCipher encrypts
/// page 1 too (its first 16 bytes are the salt), so a file that starts
/// with them is not ours.
const PLAIN_SQLITE: &[u8; 16] = b"SQLite format 3\0";
/// SQLCipher's page size (its default; contextd never changes it): an
/// encrypted file is a whole number of pages.
const PAGE: u64 = 4096;

/// What can be told of the file at `path` before decrypting it: an empty
/// file, another program's plain SQLite database, or a file cut short
/// (not a whole number of pages). An empty file is never taken for a new
/// database (issue 32): whatever emptied it also took the user's grants.
fn inspect(path: &Path, shown: &str) -> Result<(), DbError> {
    use std::io::Read;
    let open_error = |e: std::io::Error| DbError::Open {
        path: shown.to_owned(),
        error: e.to_string(),
    };
    let mut f = std::fs::File::open(path).map_err(open_error)?;
    let len = f.metadata().map_err(open_error)?.len();
    if len == 0 {
        return Err(DbError::Empty {
            path: shown.to_owned(),
        });
    }
    let mut head = [0u8; 16];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]).map_err(open_error)? {
            0 => break,
            n => got += n,
        }
    }
    if got == head.len() && &head == PLAIN_SQLITE {
        return Err(DbError::Foreign {
            path: shown.to_owned(),
        });
    }
    if len % PAGE != 0 {
        return Err(DbError::Corrupt {
            path: shown.to_owned(),
            detail: format!(
                "it is {len} bytes long, not a whole number of {PAGE}-byte pages (cut short?)"
            ),
        });
    }
    Ok(())
}

/// The pool's options: a connection that comes back to the pool inside a
/// transaction is closed, not handed out again.
///
/// Why: when a write fails with `SQLITE_FULL` (or an I/O error, `BUSY`,
/// `NOMEM`), SQLite may roll the transaction back by itself or keep it
/// open; sqlx's own count of the connection's transactions then no longer
/// matches, its `ROLLBACK TO SAVEPOINT` leaves a transaction open, and a
/// connection returned to the pool that way swallows every later statement
/// into a transaction nobody commits: a revocation written on a disk that
/// just had room again said "stored", and a restart brought the grant
/// back (tests/it/store_revoke_full.rs found it). SQLite itself says
/// whether a connection is in a transaction (`sqlite3_get_autocommit`).
/// The other way round too: when SQLite rolled back by itself, sqlx's
/// `ROLLBACK` then fails and leaves its count at one, and every later
/// `begin` on that connection fails ("non-zero transaction depth"): the
/// timeline stopped recording after a full disk until a restart
/// (tests/it/faults_disk.rs, now and then). A file connection that either
/// side counts in a transaction is closed.
///
/// `in_memory`: the one connection of an in-memory database is the
/// database, so it is rolled back instead of closed.
fn pool_options(in_memory: bool) -> SqlitePoolOptions {
    SqlitePoolOptions::new().after_release(move |conn, _meta| {
        Box::pin(async move {
            let autocommit = {
                let mut handle = conn.lock_handle().await?;
                // SAFETY: the handle is valid while `handle` holds the
                // connection's lock, and sqlite3_get_autocommit only reads it.
                let on = unsafe {
                    libsqlite3_sys::sqlite3_get_autocommit(handle.as_raw_handle().as_ptr())
                };
                on != 0
            };
            // sqlx's count (`is_in_transaction`) as well as SQLite's.
            if autocommit && !sqlx::Connection::is_in_transaction(&*conn) {
                return Ok(true);
            }
            tracing::warn!(
                in_memory,
                sqlite_in_transaction = !autocommit,
                "a database connection came back inside a transaction (after a failed write); {}",
                if in_memory {
                    "rolling it back"
                } else {
                    "closing it"
                }
            );
            if in_memory {
                if !autocommit {
                    sqlx::query("ROLLBACK").execute(&mut *conn).await?;
                }
                return Ok(true);
            }
            Ok(false)
        })
    })
}

fn failed(e: sqlx::Error) -> Error {
    Error::Failed(format!("database: {e}"))
}

/// The open database.
#[derive(Debug, Clone)]
pub struct Db {
    pool: SqlitePool,
    path: PathBuf,
    audit: Arc<AuditQueue>,
    health: Health,
    /// The key and where it came from, for `rotate_key` (none in memory).
    pub(super) key_home: super::rotate::SharedKeyHome,
    /// Room kept for revocations (none in memory): `store::reserve`.
    reserve: Option<Arc<super::reserve::Reserve>>,
}

/// What runs beside the database: the audit writer and the daily purge.
pub struct DbTasks {
    audit: Arc<AuditQueue>,
}

/// `SQLITE_CORRUPT` (11, and its extended codes): "database disk image
/// is malformed".
fn is_corrupt(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => {
            primary_code(e) == Some(11) || d.message().contains("malformed")
        }
        _ => false,
    }
}

fn is_not_a_database(e: &sqlx::Error) -> bool {
    let s = e.to_string();
    s.contains("file is not a database") || s.contains("not a database")
}

impl Db {
    /// What can be told of an existing file at `path` without its key
    /// (another program's plain SQLite database, a file cut short), so
    /// that the daemon says that rather than "no key" or "wrong key".
    pub(crate) fn inspect(path: &Path) -> Result<(), DbError> {
        if !path.exists() {
            return Ok(());
        }
        inspect(path, &path.display().to_string())
    }

    /// Open (or create) the database at `path` with `key`. A wrong key is
    /// reported at once and the file is left as it was.
    pub async fn open(
        path: &Path,
        key: &DbKey,
        source: &KeySource,
    ) -> Result<(Db, DbTasks), DbError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| DbError::Open {
                    path: dir.display().to_string(),
                    error: e.to_string(),
                })?;
        }
        let wrong_key = || DbError::WrongKey {
            path: shown.clone(),
            key: source.clone(),
        };
        // Check the key on one bare connection before anything writes:
        // with a wrong key, `journal_mode = WAL` or a migration would fail
        // half-way, and the file must stay untouched.
        if path.exists() {
            inspect(path, &shown)?;
            use sqlx::ConnectOptions;
            // Statement logging would print the key.
            // Without a write-ahead log (a clean stop) the file is the whole
            // database: open it immutable, so that a refused file stays
            // byte for byte as it was (a read-only connection to a WAL
            // database would leave `-shm` and `-wal` files beside it).
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            let probe = SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(false)
                .read_only(true)
                .immutable(!Path::new(&wal).exists())
                .pragma("key", format!("\"x'{}'\"", key.hex()))
                .disable_statement_logging();
            // Opening and reading page 1: a wrong key, damage, or neither.
            let first_pages = |e: sqlx::Error| {
                if is_not_a_database(&e) {
                    wrong_key()
                } else if is_corrupt(&e) {
                    DbError::Corrupt {
                        path: shown.clone(),
                        detail: format!("its first pages cannot be read ({e})"),
                    }
                } else {
                    DbError::Open {
                        path: shown.clone(),
                        error: e.to_string(),
                    }
                }
            };
            let mut conn: SqliteConnection = probe.connect().await.map_err(first_pages)?;
            let check = sqlx::query("SELECT count(*) FROM sqlite_master")
                .fetch_one(&mut conn)
                .await;
            // The key opens page 1; now every page of what the gate holds,
            // before anything writes to the file: a damaged page found
            // later would be written around (or over) while the user is
            // told nothing. A quick check reads each page once (about a
            // second per few hundred megabytes, most of it decryption), so
            // in a file of [`CHECK_WHOLE_BELOW`] or more the timeline (years
            // of it: hundreds of megabytes) is checked after start instead
            // ([`Db::check_timeline`]), and start stays fast.
            let whole = std::fs::metadata(path).map_or(true, |m| m.len() < CHECK_WHOLE_BELOW);
            let quick = match check {
                Ok(_) if whole => Some(
                    sqlx::query_scalar::<_, String>("PRAGMA quick_check(1)")
                        .fetch_one(&mut conn)
                        .await,
                ),
                Ok(_) => Some(quick_check_except_timeline(&mut conn).await),
                Err(_) => None,
            };
            // A schema newer than this build's: a migration would fail
            // half-way (or worse, succeed around what it does not know).
            let found: Option<i64> = if matches!(quick, Some(Ok(ref v)) if v == "ok") {
                sqlx::query_scalar(
                    // No such table (not migrated yet): an error, so None.
                    "SELECT max(version) FROM _sqlx_migrations",
                )
                .fetch_optional(&mut conn)
                .await
                .ok()
                .flatten()
                .flatten()
            } else {
                None
            };
            use sqlx::Connection;
            let _ = conn.close().await;
            if let Err(e) = check {
                return Err(first_pages(e));
            }
            if let Some(found) = found
                && found > known_schema()
            {
                return Err(DbError::Newer {
                    path: shown.clone(),
                    found,
                    known: known_schema(),
                });
            }
            match quick {
                Some(Ok(v)) if v == "ok" => {}
                Some(Ok(v)) => {
                    // One line: SQLite's report has a heading line and one
                    // line per problem (at most one asked for).
                    let said: Vec<&str> = v
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with("***"))
                        .collect();
                    return Err(DbError::Corrupt {
                        path: shown.clone(),
                        detail: format!("the integrity check says: {}", said.join("; ")),
                    });
                }
                // The key opened page 1, so a page that does not decrypt
                // further on ("not a database") is damage, not a wrong key.
                Some(Err(e)) => {
                    return Err(DbError::Corrupt {
                        path: shown.clone(),
                        detail: format!("a page cannot be read ({e})"),
                    });
                }
                None => {}
            }
        }
        let opts = super::rotate::options(path, key);
        let pool = pool_options(false)
            .max_connections(4)
            .connect_with(opts)
            .await
            .map_err(|e| {
                if is_not_a_database(&e) {
                    wrong_key()
                } else {
                    DbError::Open {
                        path: shown.clone(),
                        error: e.to_string(),
                    }
                }
            })?;
        // The file is ours alone.
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        let (mut db, tasks) = Db::migrated(pool, path, shown).await?;
        db.incremental_vacuum_once().await;
        // Room for revocations, made now if the disk has it (store::reserve).
        let reserve = super::reserve::Reserve::beside(path);
        reserve.keep();
        db.reserve = Some(Arc::new(reserve));
        Ok((db, tasks))
    }

    /// Which crypto provider SQLCipher encrypts with: `contextd` (its own,
    /// src/store/cipher.rs) unless the build fell back to OpenSSL. Logged
    /// at start, so that a build without `.cargo/config.toml`'s flag shows.
    pub(crate) async fn cipher_provider(&self) -> String {
        super::cipher::link();
        let name = sqlx::query_scalar::<_, String>("PRAGMA cipher_provider")
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|e| format!("unknown ({e})"));
        if !super::cipher::in_use(&name) {
            tracing::info!(provider = %name, "SQLCipher uses OpenSSL, not contextd's own crypto: the daemon keeps about 3.5 MB more resident (built without .cargo/config.toml's LIBSQLITE3_FLAGS?)");
        }
        name
    }

    /// Switch a database made before `auto_vacuum = INCREMENTAL` (contextd
    /// before migration 0009) to it, once: SQLite changes that mode only
    /// by rewriting the file (`VACUUM`). Done here, at the start after the
    /// upgrade, before anything is served, so that no writer waits on it;
    /// it costs that one start about a second per few hundred megabytes
    /// and a copy's worth of free disk for the while. A failure (a full
    /// disk) is logged and tried again at the next start: the database
    /// works in either mode, it only does not shrink after forgetting.
    async fn incremental_vacuum_once(&self) {
        let mode: Result<i64, _> = sqlx::query_scalar("PRAGMA auto_vacuum")
            .fetch_one(&self.pool)
            .await;
        if !matches!(mode, Ok(0)) {
            return;
        }
        tracing::info!(
            path = %self.path.display(),
            "compacting the database once, so that it shrinks after forgetting (auto_vacuum = incremental)"
        );
        if let Err(e) = sqlx::query("VACUUM").execute(&self.pool).await {
            tracing::warn!(error = %e, "compacting the database failed; it works, but does not shrink after forgetting until it is compacted at a later start");
            return;
        }
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await
        {
            tracing::warn!(error = %e, "checkpoint after compacting failed");
        }
    }

    /// The quick check of the timeline's tables that start leaves out
    /// (see `Db::open`), run by [`DbTasks::run`] a while after start. A
    /// damaged page is reported in the log (reads of that part fail with
    /// an error); the user's grants were checked at start.
    pub(crate) async fn check_timeline(&self) -> Result<(), String> {
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_schema WHERE type = 'table'")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
        for table in tables
            .iter()
            .filter(|t| TIMELINE_TABLES.contains(&t.as_str()))
        {
            let v: String = sqlx::query_scalar(trusted(format!("PRAGMA quick_check(\"{table}\")")))
                .fetch_one(&self.pool)
                .await
                .map_err(|e| format!("{table}: {e}"))?;
            if v != "ok" {
                return Err(format!("{table}: {v}"));
            }
        }
        Ok(())
    }

    /// The last step of opening: the migrations, then the store.
    async fn migrated(
        pool: SqlitePool,
        path: &Path,
        shown: String,
    ) -> Result<(Db, DbTasks), DbError> {
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .map_err(|e| DbError::Migrate {
                path: shown,
                error: e.to_string(),
            })?;
        let audit = Arc::new(AuditQueue::default());
        Ok((
            Db {
                pool,
                path: path.to_owned(),
                audit: audit.clone(),
                health: Health::new(path),
                key_home: Default::default(),
                reserve: None,
            },
            DbTasks { audit },
        ))
    }

    /// A database in memory, for a broker that must run without its file
    /// (the key of an existing database is missing: the file is left
    /// alone and no new key is made). Nothing written here outlives the
    /// process; `path` names the real file in messages.
    pub(crate) async fn open_memory(path: &Path) -> Result<(Db, DbTasks), DbError> {
        let shown = path.display().to_string();
        let opts = SqliteConnectOptions::from_str("sqlite::memory:")
            .map_err(|e| DbError::Open {
                path: shown.clone(),
                error: e.to_string(),
            })?
            .foreign_keys(true);
        // One connection kept for good: each connection to `:memory:` is
        // a database of its own.
        let pool = pool_options(true)
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(opts)
            .await
            .map_err(|e| DbError::Open {
                path: shown.clone(),
                error: e.to_string(),
            })?;
        Db::migrated(pool, path, shown).await
    }

    /// Note in this (new) database that it replaced an unusable file,
    /// moved to `moved_to`, for `reason`: the broker stays degraded across
    /// restarts until the user acts ([`ConsentStore::clear_recovery`]).
    pub(crate) async fn record_recovery(
        &self,
        moved_to: &Path,
        reason: &str,
        since: DateTime<Utc>,
    ) -> Result<(), Error> {
        sqlx::query("INSERT INTO recovery (moved_to, reason, since_ms) VALUES (?, ?, ?)")
            .bind(moved_to.display().to_string())
            .bind(reason)
            .bind(ms(since))
            .execute(&self.pool)
            .await
            .map_err(|e| self.health.error("the recovery note", e))?;
        Ok(())
    }

    /// Remember the key and where it came from, so that it can be rotated
    /// (`contextctl key rotate`).
    pub(crate) async fn set_key_home(
        &self,
        source: KeySource,
        key: DbKey,
        session: Option<zbus::Connection>,
    ) {
        *self.key_home.lock().await = Some(super::rotate::KeyHome {
            source,
            key,
            session,
        });
    }

    /// Whether the database takes writes; shared with the history writer.
    pub(crate) fn health(&self) -> &Health {
        &self.health
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Give back the page caches and prepared statements of the
    /// connections nobody uses now (`PRAGMA shrink_memory`, sqlx's
    /// statement cache); how many were shrunk.
    ///
    /// Why: each pooled connection keeps up to SQLite's cache size
    /// (2 MiB) of decrypted pages for good. A burst of timeline reads
    /// (many MCP hosts asking for summaries) grows all four, and the pages
    /// stay, each a block allocated in the middle of the burst that keeps
    /// the heap's pages around it resident too (`make soak`, "RSS after
    /// load"). Called when the broker gives memory back after a burst
    /// (crate::memory); the next read decrypts what it needs again, a few
    /// pages. A connection in use is left alone: only idle ones are taken,
    /// without waiting, and handed back at once.
    pub(crate) async fn release_caches(&self) -> usize {
        let mut idle = Vec::new();
        while let Some(conn) = self.pool.try_acquire() {
            idle.push(conn);
        }
        let mut shrunk = 0;
        for conn in &mut idle {
            // The statements sqlx keeps prepared (up to 100 a connection,
            // each its compiled program) go too; the next use prepares
            // again.
            if let Err(e) = sqlx::Connection::clear_cached_statements(&mut **conn).await {
                tracing::debug!(error = %e, "clearing a connection's statements failed");
            }
            match sqlx::query("PRAGMA shrink_memory")
                .persistent(false)
                .execute(&mut **conn)
                .await
            {
                Ok(_) => shrunk += 1,
                Err(e) => tracing::debug!(error = %e, "shrinking a connection's cache failed"),
            }
        }
        shrunk
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `PRAGMA integrity_check`.
    pub async fn integrity_check(&self) -> Result<(), DbError> {
        let row = sqlx::query("PRAGMA integrity_check")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| DbError::Open {
                path: self.path.display().to_string(),
                error: e.to_string(),
            })?;
        let v: String = row.try_get(0).unwrap_or_default();
        if v == "ok" {
            Ok(())
        } else {
            Err(DbError::Corrupt {
                path: self.path.display().to_string(),
                detail: v,
            })
        }
    }

    /// Everything the gate keeps in memory.
    pub(crate) async fn load(&self) -> Result<Loaded, Error> {
        let mut loaded = Loaded::default();
        let rows = sqlx::query(
            "SELECT app_id, category, verdict, expires_ms, origin, created_ms FROM decisions",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(failed)?;
        for r in rows {
            let parsed = (|| -> Result<StoredDecision, String> {
                let app: String = r.try_get(0).map_err(|e| e.to_string())?;
                let cat: String = r.try_get(1).map_err(|e| e.to_string())?;
                let verdict: String = r.try_get(2).map_err(|e| e.to_string())?;
                let expires: Option<i64> = r.try_get(3).map_err(|e| e.to_string())?;
                let origin: String = r.try_get(4).map_err(|e| e.to_string())?;
                let created: i64 = r.try_get(5).map_err(|e| e.to_string())?;
                Ok(StoredDecision {
                    app: AppId::new(app).map_err(|e| e.to_string())?,
                    category: cat
                        .parse()
                        .map_err(|e: crate::model::CategoryError| e.to_string())?,
                    verdict: Verdict::from_str(&verdict).map_err(|e| e.to_string())?,
                    expires: expires.map(from_ms),
                    origin: Origin::from_str(&origin).map_err(|e| e.to_string())?,
                    created: from_ms(created),
                })
            })();
            match parsed {
                Ok(d) => loaded.decisions.push(d),
                Err(e) => tracing::warn!("skipping an unreadable decision in the database: {e}"),
            }
        }
        let rows = sqlx::query(
            "SELECT app_id, identity_source, display_name, icon, first_seen_ms, last_seen_ms FROM apps",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(failed)?;
        for r in rows {
            let app: String = r.try_get(0).unwrap_or_default();
            let source: String = r.try_get(1).unwrap_or_default();
            let Ok(app_id) = AppId::new(app) else {
                continue;
            };
            let identity_source =
                serde_json::from_value::<IdentitySource>(serde_json::Value::String(source))
                    .unwrap_or(IdentitySource::Executable);
            loaded.apps.push(AppInfo {
                app_id,
                identity_source,
                display_name: r.try_get(2).unwrap_or_default(),
                icon: r.try_get(3).unwrap_or_default(),
                first_seen: from_ms(r.try_get(4).unwrap_or_default()),
                last_seen: from_ms(r.try_get(5).unwrap_or_default()),
            });
        }
        let rows = sqlx::query("SELECT moved_to, reason FROM recovery ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
        let notes: Vec<String> = rows
            .iter()
            .map(|r| {
                let moved: String = r.try_get(0).unwrap_or_default();
                let reason: String = r.try_get(1).unwrap_or_default();
                format!("{reason}. It was moved to {moved}.")
            })
            .collect();
        if !notes.is_empty() {
            loaded.recovery = Some(notes.join(" "));
        }
        let rows = sqlx::query("SELECT app_id, since_ms FROM refused_publishers")
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
        for r in rows {
            let app: String = r.try_get(0).unwrap_or_default();
            match AppId::new(app) {
                Ok(app) => loaded
                    .refused_publishers
                    .push((app, from_ms(r.try_get(1).unwrap_or_default()))),
                Err(e) => tracing::warn!("skipping an unreadable refused publisher: {e}"),
            }
        }
        Ok(loaded)
    }

    /// Delete audit rows older than `keep`.
    pub(crate) async fn purge_audit(
        &self,
        now: DateTime<Utc>,
        keep: chrono::Duration,
    ) -> Result<u64, Error> {
        let r = sqlx::query("DELETE FROM audit WHERE time_ms < ?")
            .bind(ms(now - keep))
            .execute(&self.pool)
            .await
            .map_err(|e| self.health.error("the audit purge", e))?;
        Ok(r.rows_affected())
    }
}

/// Write one batch of audit entries in one transaction, folding identical
/// decisions of the same second into one row with a count.
async fn write_audit(pool: &SqlitePool, batch: &mut Vec<AuditEntry>) -> Result<(), sqlx::Error> {
    if batch.is_empty() {
        return Ok(());
    }
    let mut folded: Vec<AuditEntry> = Vec::new();
    type Key = (i64, String, String, Channel, String, bool, String);
    let mut index: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    for e in batch.drain(..) {
        let key = (
            e.time.timestamp(),
            e.app.to_string(),
            e.category.to_string(),
            e.channel,
            e.request.clone(),
            e.allowed,
            e.reason.clone(),
        );
        match index.get(&key) {
            Some(&i) => folded[i].count += e.count,
            None => {
                index.insert(key, folded.len());
                folded.push(e);
            }
        }
    }
    let mut tx = pool.begin().await?;
    for e in &folded {
        sqlx::query(
            "INSERT INTO audit (time_ms, app_id, category, channel, request, allowed, reason, count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(ms(e.time))
        .bind(e.app.as_str())
        .bind(e.category.to_string())
        .bind(e.channel.as_str())
        .bind(&e.request)
        .bind(i64::from(e.allowed))
        .bind(&e.reason)
        .bind(e.count as i64)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

impl DbTasks {
    /// Write audit entries in batches until cancelled (then flush the rest),
    /// and purge old ones at start and once a day. The pool stays open: the
    /// history writer may still be writing its last batch, and the daemon
    /// closes the pool after both. The control surfaces hear of the audit
    /// (`notices`) when a batch is written, so that what they re-read is
    /// there.
    pub(crate) async fn run(
        self,
        db: Db,
        audit_keep: chrono::Duration,
        notices: crate::core::notice::Notices,
        cancel: CancellationToken,
    ) {
        let purge = |db: Db| async move {
            match db.purge_audit(Utc::now(), audit_keep).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(rows = n, "purged old audit entries"),
                Err(e) => tracing::warn!(error = %e, "audit purge failed"),
            }
        };
        purge(db.clone()).await;
        let mut daily = tokio::time::interval(Duration::from_secs(24 * 3600));
        daily.tick().await;
        // The timeline's part of the start check, once, when start left it
        // out (a big file) and the start is well over.
        let big = std::fs::metadata(&db.path).is_ok_and(|m| m.len() >= CHECK_WHOLE_BELOW);
        let check = tokio::time::sleep(TIMELINE_CHECK_AFTER);
        tokio::pin!(check);
        let mut checked = !big;
        // The flush timer runs only while entries wait: an idle broker
        // wakes for nothing.
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.audit.wake.notified() => {
                    if self.audit.len() >= AUDIT_BATCH {
                        flush_audit(&db, &self.audit, &notices).await;
                        deadline = None;
                    } else if deadline.is_none() {
                        deadline = Some(tokio::time::Instant::now() + AUDIT_FLUSH);
                    }
                }
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {
                    deadline = None;
                    flush_audit(&db, &self.audit, &notices).await;
                }
                _ = daily.tick() => purge(db.clone()).await,
                _ = &mut check, if !checked => {
                    checked = true;
                    if let Err(e) = db.check_timeline().await {
                        tracing::error!(
                            path = %db.path.display(),
                            "the timeline in the database is damaged ({e}): reading the damaged part fails; your grants were checked at start and are sound. Export what can be read (contextctl export --history) and see docs/files-and-recovery.md, \"When the database cannot be used\""
                        );
                    }
                }
            }
        }
        flush_audit(&db, &self.audit, &notices).await;
    }
}

/// Write what `batch` holds, then tell the control surfaces. A batch that
/// cannot be written (a full disk) is dropped and counted in the
/// database's health, not kept: the next one is tried a second later.
async fn flush_audit(db: &Db, queue: &AuditQueue, notices: &crate::core::notice::Notices) {
    let (mut batch, n) = queue.take();
    if n > 0 {
        tracing::warn!(
            dropped = n,
            "the audit writer is behind: {n} audit entries were not recorded"
        );
    }
    if batch.is_empty() {
        return;
    }
    let count = batch.iter().map(|e| e.count).sum::<u64>();
    match write_audit(&db.pool, &mut batch).await {
        Ok(()) => {
            db.health.wrote();
            notices.bump(crate::core::notice::Part::Audit);
        }
        Err(e) if is_write_fault(&e) => db.health.failed(&e, Lost::Audit(count)),
        Err(e) => tracing::warn!(error = %e, "cannot write the audit log"),
    }
}

impl ConsentStore for Db {
    fn put_decision(&self, d: StoredDecision) -> BoxFut<'_, Result<(), Error>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO decisions (app_id, category, verdict, expires_ms, origin, created_ms) VALUES (?, ?, ?, ?, ?, ?)
                 ON CONFLICT (app_id, category) DO UPDATE SET verdict = excluded.verdict, expires_ms = excluded.expires_ms,
                 origin = excluded.origin, created_ms = excluded.created_ms",
            )
            .bind(d.app.as_str())
            .bind(d.category.to_string())
            .bind(d.verdict.as_str())
            .bind(d.expires.map(ms))
            .bind(d.origin.as_str())
            .bind(ms(d.created))
            .execute(&self.pool)
            .await
            .map_err(|e| self.health.error("the decision", e))?;
            self.health.wrote();
            Ok(())
        })
    }

    fn set_refused_publisher(
        &self,
        app: AppId,
        since: Option<DateTime<Utc>>,
    ) -> BoxFut<'_, Result<(), Error>> {
        Box::pin(async move {
            let q = match since {
                Some(since) => sqlx::query(
                    "INSERT INTO refused_publishers (app_id, since_ms) VALUES (?, ?)
                     ON CONFLICT (app_id) DO NOTHING",
                )
                .bind(app.as_str().to_owned())
                .bind(ms(since)),
                None => sqlx::query("DELETE FROM refused_publishers WHERE app_id = ?")
                    .bind(app.as_str().to_owned()),
            };
            q.execute(&self.pool)
                .await
                .map_err(|e| self.health.error("the refusal of the publisher", e))?;
            self.health.wrote();
            Ok(())
        })
    }

    fn delete_decision(&self, app: AppId, category: Category) -> BoxFut<'_, Result<bool, Error>> {
        Box::pin(async move {
            let r = sqlx::query("DELETE FROM decisions WHERE app_id = ? AND category = ?")
                .bind(app.as_str())
                .bind(category.to_string())
                .execute(&self.pool)
                .await
                .map_err(|e| self.health.error("the revocation", e))?;
            self.health.wrote();
            Ok(r.rows_affected() > 0)
        })
    }

    fn forget_app(&self, app: AppId) -> BoxFut<'_, Result<u64, Error>> {
        Box::pin(async move {
            let mut tx = self
                .pool
                .begin()
                .await
                .map_err(|e| self.health.error("forgetting the app", e))?;
            let mut n = 0;
            for q in [
                "DELETE FROM decisions WHERE app_id = ?",
                "DELETE FROM apps WHERE app_id = ?",
                "DELETE FROM audit WHERE app_id = ?",
                "DELETE FROM refused_publishers WHERE app_id = ?",
            ] {
                n += sqlx::query(q)
                    .bind(app.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.health.error("forgetting the app", e))?
                    .rows_affected();
            }
            tx.commit()
                .await
                .map_err(|e| self.health.error("forgetting the app", e))?;
            self.health.wrote();
            Ok(n)
        })
    }

    /// The audit of one app only (its rows waiting to be written too);
    /// its decisions and its entry stay.
    fn forget_audit(&self, app: AppId) -> BoxFut<'_, Result<u64, Error>> {
        Box::pin(async move {
            let waiting = self.audit.drop_app(&app);
            let r = sqlx::query("DELETE FROM audit WHERE app_id = ?")
                .bind(app.as_str())
                .execute(&self.pool)
                .await
                .map_err(|e| self.health.error("forgetting the app's audit", e))?;
            self.health.wrote();
            Ok(r.rows_affected() + waiting)
        })
    }

    fn upsert_app(&self, a: AppInfo) -> BoxFut<'_, Result<(), Error>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO apps (app_id, identity_source, display_name, icon, first_seen_ms, last_seen_ms) VALUES (?, ?, ?, ?, ?, ?)
                 ON CONFLICT (app_id) DO UPDATE SET last_seen_ms = excluded.last_seen_ms,
                 display_name = coalesce(excluded.display_name, display_name), icon = coalesce(excluded.icon, icon)",
            )
            .bind(a.app_id.as_str())
            .bind(a.identity_source.as_str())
            .bind(a.display_name)
            .bind(a.icon)
            .bind(ms(a.first_seen))
            .bind(ms(a.last_seen))
            .execute(&self.pool)
            .await
            .map_err(|e| self.health.error("the app", e))?;
            self.health.wrote();
            Ok(())
        })
    }

    fn export_rows(
        &self,
        history: bool,
    ) -> BoxFut<'_, Result<crate::core::consent::StoreExport, Error>> {
        Db::export_rows(self, history)
    }

    fn import_history(
        &self,
        rows: Vec<crate::core::consent::HistoryRow>,
    ) -> BoxFut<'_, Result<u64, Error>> {
        Db::import_history(self, rows)
    }

    fn rotate_key(&self) -> BoxFut<'_, Result<String, Error>> {
        Box::pin(Db::rotate_key(self))
    }

    fn release_reserve(&self) -> bool {
        self.reserve.as_ref().is_some_and(|r| r.release())
    }

    fn keep_reserve(&self) -> bool {
        match &self.reserve {
            Some(r) if self.health.problem().is_none() => r.keep(),
            // A database in trouble: look again on the retries.
            Some(_) => false,
            None => true,
        }
    }

    fn clear_recovery(&self) -> BoxFut<'_, Result<(), Error>> {
        Box::pin(async move {
            sqlx::query("DELETE FROM recovery")
                .execute(&self.pool)
                .await
                .map_err(|e| self.health.error("the end of the recovery", e))?;
            self.health.wrote();
            Ok(())
        })
    }

    fn audit(&self, e: AuditEntry) {
        // Past `AUDIT_QUEUE` waiting rows (the writer stuck behind a busy
        // or full disk) the queue drops and counts; the writer warns.
        self.audit.push(e);
    }

    fn query_audit(&self, q: AuditQuery) -> BoxFut<'_, Result<Vec<AuditEntry>, Error>> {
        Box::pin(async move {
            let limit = if q.limit == 0 {
                1000
            } else {
                q.limit.min(100_000)
            };
            let rows = sqlx::query(
                "SELECT time_ms, app_id, category, channel, allowed, reason, count, request FROM audit
                 WHERE time_ms >= ? AND time_ms < ? AND (? IS NULL OR app_id = ?)
                 ORDER BY time_ms DESC, id DESC LIMIT ?",
            )
            .bind(q.since.map(ms).unwrap_or(i64::MIN))
            .bind(q.until.map(ms).unwrap_or(i64::MAX))
            .bind(q.app.as_ref().map(|a| a.as_str().to_owned()))
            .bind(q.app.as_ref().map(|a| a.as_str().to_owned()))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let app: String = r.try_get(1).unwrap_or_default();
                let cat: String = r.try_get(2).unwrap_or_default();
                let channel: String = r.try_get(3).unwrap_or_default();
                let (Ok(app), Ok(category)) = (AppId::new(app), cat.parse::<Category>()) else {
                    continue;
                };
                let channel = match channel.as_str() {
                    "mcp-stdio" => Channel::McpStdio,
                    "mcp-http" => Channel::McpHttp,
                    _ => Channel::DBus,
                };
                out.push(AuditEntry {
                    time: from_ms(r.try_get(0).unwrap_or_default()),
                    app,
                    category,
                    channel,
                    allowed: r.try_get::<i64, _>(4).unwrap_or_default() != 0,
                    reason: r.try_get(5).unwrap_or_default(),
                    count: r.try_get::<i64, _>(6).unwrap_or(1).max(1) as u64,
                    request: r.try_get(7).unwrap_or_default(),
                });
            }
            Ok(out)
        })
    }

    /// One pass over the audit's time index (`audit_time`, or
    /// `audit_app_time` for one app), grouped in SQLite: the rows
    /// themselves never leave it.
    fn audit_counts(&self, q: AuditCountQuery) -> BoxFut<'_, Result<Vec<AuditCount>, Error>> {
        Box::pin(async move {
            let since = ms(q.since);
            // A period of at least a millisecond; none: one period.
            let period = q
                .period
                .map(|p| p.num_milliseconds().max(1))
                .unwrap_or(i64::MAX);
            let rows = sqlx::query(
                "SELECT (time_ms - ?1) / ?2 AS period, app_id, category,
                        SUM(CASE WHEN allowed != 0 THEN count ELSE 0 END),
                        SUM(CASE WHEN allowed != 0 THEN 0 ELSE count END)
                 FROM audit
                 WHERE time_ms >= ?1 AND time_ms < ?3 AND (?4 IS NULL OR app_id = ?4)
                   AND (?5 IS NULL OR category = ?5)
                 GROUP BY period, app_id, category
                 ORDER BY period, app_id, category",
            )
            .bind(since)
            .bind(period)
            .bind(ms(q.until))
            .bind(q.app.as_ref().map(|a| a.as_str().to_owned()))
            .bind(q.category.as_ref().map(|c| c.to_string()))
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let app: String = r.try_get(1).unwrap_or_default();
                let cat: String = r.try_get(2).unwrap_or_default();
                let (Ok(app), Ok(category)) = (AppId::new(app), cat.parse::<Category>()) else {
                    continue;
                };
                let n: i64 = r.try_get(0).unwrap_or_default();
                let start = if period == i64::MAX {
                    since
                } else {
                    since.saturating_add(n.saturating_mul(period))
                };
                out.push(AuditCount {
                    start: from_ms(start),
                    app,
                    category,
                    allowed: r.try_get::<i64, _>(3).unwrap_or_default().max(0) as u64,
                    refused: r.try_get::<i64, _>(4).unwrap_or_default().max(0) as u64,
                });
            }
            Ok(out)
        })
    }
}

/// An in-memory database with every migration before `version` applied,
/// as a build before that migration left it: for the tests of migration
/// `version` itself (what it does to rows an older build wrote).
#[cfg(test)]
pub(crate) async fn memory_before(version: i64) -> SqlitePool {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await
        .expect("in-memory database");
    for m in sqlx::migrate!("./migrations")
        .iter()
        .filter(|m| m.version < version)
    {
        sqlx::raw_sql(m.sql.clone())
            .execute(&pool)
            .await
            .expect("migration");
    }
    pool
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit counted per day, app and category, folded rows counted
    /// for what they stand for, allowed and refused apart, outside the
    /// window left out.
    #[tokio::test]
    async fn audit_counts_per_day_app_and_category() {
        let (db, _tasks) = Db::open_memory(Path::new("mem.db")).await.expect("db");
        let day0: DateTime<Utc> = "2026-12-01T00:00:00Z".parse().expect("time");
        let at = |h: i64| day0 + chrono::Duration::hours(h);
        let entry = |t, app: &str, cat: Category, allowed, count| AuditEntry {
            time: t,
            app: AppId::new(app).expect("app"),
            category: cat,
            channel: Channel::DBus,
            request: "Context1.ListWindows".into(),
            allowed,
            reason: "manage".into(),
            count,
        };
        let mut batch = vec![
            entry(at(-1), "a", Category::Windows, true, 9),
            entry(at(1), "a", Category::Windows, true, 3),
            entry(at(2), "a", Category::Windows, false, 1),
            entry(at(3), "a", Category::Power, true, 1),
            entry(at(25), "a", Category::Windows, true, 2),
            entry(at(26), "b", Category::Windows, true, 5),
            entry(at(49), "a", Category::Windows, true, 7),
        ];
        write_audit(&db.pool, &mut batch).await.expect("write");
        let q = AuditCountQuery {
            since: day0,
            until: at(48),
            app: None,
            category: None,
            period: Some(chrono::Duration::days(1)),
        };
        let got = db.audit_counts(q.clone()).await.expect("counts");
        let got: Vec<(i64, &str, String, u64, u64)> = got
            .iter()
            .map(|c| {
                (
                    (c.start - day0).num_hours(),
                    c.app.as_str(),
                    c.category.to_string(),
                    c.allowed,
                    c.refused,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, "a", "power".to_owned(), 1, 0),
                (0, "a", "windows".to_owned(), 3, 1),
                (24, "a", "windows".to_owned(), 2, 0),
                (24, "b", "windows".to_owned(), 5, 0),
            ]
        );
        let one = db
            .audit_counts(AuditCountQuery {
                app: Some(AppId::new("a").expect("app")),
                category: Some(Category::Windows),
                period: None,
                ..q
            })
            .await
            .expect("counts");
        assert_eq!(one.len(), 1, "{one:?}");
        assert_eq!((one[0].start, one[0].allowed, one[0].refused), (day0, 5, 1));
    }

    /// Forgetting an app's audit takes its written rows and its rows still
    /// queued for the writer, and nothing of another app's: the queue
    /// written afterwards brings none of them back.
    #[tokio::test]
    async fn forget_audit_takes_one_app_written_and_queued() {
        let (db, _tasks) = Db::open_memory(Path::new("mem.db")).await.expect("db");
        let t: DateTime<Utc> = "2026-12-01T10:00:00Z".parse().expect("time");
        let entry = |app: &str, count| AuditEntry {
            time: t,
            app: AppId::new(app).expect("app"),
            category: Category::Windows,
            channel: Channel::DBus,
            request: "Context1.ListWindows".into(),
            allowed: true,
            reason: "manage".into(),
            count,
        };
        let mut written = vec![entry("a", 2), entry("b", 3)];
        write_audit(&db.pool, &mut written).await.expect("write");
        db.audit(entry("a", 4));
        db.audit(entry("b", 5));
        let n = db
            .forget_audit(AppId::new("a").expect("app"))
            .await
            .expect("forget");
        assert_eq!(n, 1 + 4, "one written row, and four queued accesses");
        let (mut queued, _) = db.audit.take();
        write_audit(&db.pool, &mut queued).await.expect("write");
        let left = db
            .query_audit(AuditQuery {
                since: None,
                until: None,
                app: None,
                limit: 0,
            })
            .await
            .expect("query");
        let left: Vec<(&str, u64)> = left.iter().map(|e| (e.app.as_str(), e.count)).collect();
        assert_eq!(left, [("b", 5), ("b", 3)]);
    }

    /// Until every connection of the pool is back in it (a connection
    /// dropped goes back by a task of the pool's, not at once).
    async fn all_idle(db: &Db) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while db.pool().num_idle() < db.pool().size() as usize {
            assert!(
                std::time::Instant::now() < deadline,
                "the pool's connections did not come back"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// One of SQLite's counters (`sqlite3_db_status`), summed over the
    /// pool's idle connections, in bytes: `SQLITE_DBSTATUS_CACHE_USED`
    /// for the page caches, `SQLITE_DBSTATUS_STMT_USED` for the prepared
    /// statements.
    async fn idle_status(db: &Db, op: i32) -> i64 {
        all_idle(db).await;
        let mut held = Vec::new();
        while let Some(c) = db.pool().try_acquire() {
            held.push(c);
        }
        let mut total = 0;
        for c in &mut held {
            let mut h = c.lock_handle().await.expect("handle");
            let (mut cur, mut high) = (0, 0);
            // SAFETY: the handle is valid while `h` holds the connection's
            // lock; sqlite3_db_status only reads the connection's counters.
            unsafe {
                libsqlite3_sys::sqlite3_db_status(
                    h.as_raw_handle().as_ptr(),
                    op,
                    &mut cur,
                    &mut high,
                    0,
                );
            }
            total += i64::from(cur);
        }
        total
    }

    /// After a burst of reads, the idle connections' page caches go back
    /// (what `crate::memory` asks after a burst), and the data is still
    /// read as before.
    #[tokio::test]
    async fn idle_connections_give_their_page_caches_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = crate::store::key::DbKey::random().expect("key");
        let (db, _tasks) = Db::open(
            &dir.path().join("c.db"),
            &key,
            &crate::store::key::KeySource::KeyFile(dir.path().join("k")),
        )
        .await
        .expect("open");
        sqlx::query("CREATE TABLE filler (id INTEGER PRIMARY KEY, b BLOB)")
            .execute(db.pool())
            .await
            .expect("create");
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO filler (b) SELECT randomblob(600) FROM n",
        )
        .execute(db.pool())
        .await
        .expect("fill");
        let sum = || async {
            sqlx::query_scalar::<_, i64>("SELECT sum(length(b)) FROM filler")
                .fetch_one(db.pool())
                .await
                .expect("read")
        };
        assert_eq!(sum().await, 2000 * 600);
        let before = idle_status(&db, libsqlite3_sys::SQLITE_DBSTATUS_CACHE_USED).await;
        let statements = idle_status(&db, libsqlite3_sys::SQLITE_DBSTATUS_STMT_USED).await;
        assert!(statements > 0, "no statement is kept prepared");
        assert!(
            before > 1_000_000,
            "the reads filled no cache: {before} bytes"
        );
        all_idle(&db).await;
        assert!(db.release_caches().await >= 1);
        let after = idle_status(&db, libsqlite3_sys::SQLITE_DBSTATUS_CACHE_USED).await;
        assert!(
            after < before / 4,
            "the caches were not given back: {before} bytes before, {after} after"
        );
        let statements_after = idle_status(&db, libsqlite3_sys::SQLITE_DBSTATUS_STMT_USED).await;
        assert!(
            statements_after < statements / 8,
            "the prepared statements were kept: {statements} bytes before, {statements_after} after"
        );
        assert_eq!(sum().await, 2000 * 600, "the data reads the same after");
        db.pool().close().await;
    }

    /// SQLite rolled back by itself (as after `SQLITE_FULL`), so sqlx's
    /// own `ROLLBACK` fails and its count stays at one: the pool closes
    /// that connection, and the next `BEGIN IMMEDIATE` (the timeline
    /// writer's) begins on a new one; on the old one sqlx refused it.
    #[tokio::test]
    async fn a_connection_sqlx_counts_in_a_transaction_is_not_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = SqliteConnectOptions::new()
            .filename(dir.path().join("t.db"))
            .create_if_missing(true);
        let pool = pool_options(false)
            .max_connections(1)
            .connect_with(opts)
            .await
            .expect("pool");
        let mut tx = pool.begin().await.expect("begin");
        sqlx::query("ROLLBACK")
            .execute(&mut *tx)
            .await
            .expect("rolled back under sqlx");
        drop(tx);
        let mut tx = pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .expect("a transaction after that one");
        sqlx::query("CREATE TABLE t (x)")
            .execute(&mut *tx)
            .await
            .expect("create");
        tx.commit().await.expect("commit");
    }

    fn entry(app: &str, second: i64, allowed: bool) -> AuditEntry {
        AuditEntry {
            time: DateTime::from_timestamp(second, 0).unwrap_or_default(),
            app: AppId::new(app).expect("app id"),
            category: Category::Windows,
            channel: Channel::DBus,
            request: "Context1.GetActiveWindow".into(),
            allowed,
            reason: "policy".into(),
            count: 1,
        }
    }

    #[test]
    fn the_queue_folds_identical_entries_of_a_second_and_wakes_once() {
        let q = AuditQueue::default();
        for _ in 0..1000 {
            q.push(entry("org.example.A", 10, true));
            q.push(entry("org.example.B", 10, true));
        }
        q.push(entry("org.example.A", 10, false));
        q.push(entry("org.example.A", 11, true));
        let (rows, dropped) = q.take();
        assert_eq!(dropped, 0);
        let counts: Vec<(String, i64, bool, u64)> = rows
            .iter()
            .map(|e| (e.app.to_string(), e.time.timestamp(), e.allowed, e.count))
            .collect();
        assert_eq!(
            counts,
            vec![
                ("org.example.A".into(), 10, true, 1000),
                ("org.example.B".into(), 10, true, 1000),
                ("org.example.A".into(), 10, false, 1),
                ("org.example.A".into(), 11, true, 1),
            ]
        );
        // One permit for the first entry, none per entry after it.
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut first = std::pin::pin!(q.wake.notified());
        assert!(first.as_mut().poll(&mut cx).is_ready());
        let mut second = std::pin::pin!(q.wake.notified());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(q.take().0.is_empty());
    }

    #[test]
    fn the_queue_is_bounded_and_counts_what_it_drops() {
        let q = AuditQueue::default();
        for i in 0..(AUDIT_QUEUE as i64 + 5) {
            q.push(entry("org.example.A", i, true));
        }
        let (rows, dropped) = q.take();
        assert_eq!(rows.len(), AUDIT_QUEUE);
        assert_eq!(dropped, 5);
    }

    /// Migration 0007: decisions of an id first seen from a systemd unit
    /// move to its `systemd:` form; a Flatpak's stay; nothing is renamed
    /// twice.
    #[tokio::test]
    async fn systemd_ids_get_their_prefix_and_flatpak_ids_keep_theirs() {
        let pool = memory_before(7).await;
        sqlx::raw_sql(
            "INSERT INTO apps VALUES ('org.gnome.Foo', 'systemd', NULL, NULL, 1, 1),
                                    ('org.mozilla.firefox', 'flatpak', NULL, NULL, 1, 1),
                                    ('exe:/usr/bin/x', 'executable', NULL, NULL, 1, 1);
             INSERT INTO decisions VALUES ('org.gnome.Foo', 'windows', 'allow', NULL, 'prompt', 1),
                                         ('org.mozilla.firefox', 'windows', 'allow', NULL, 'prompt', 1),
                                         ('exe:/usr/bin/x', 'windows', 'deny', NULL, 'manage', 1);
             INSERT INTO refused_publishers VALUES ('org.gnome.Foo', 1);",
        )
        .execute(&pool)
        .await
        .expect("rows");
        let migration = include_str!("../../migrations/0007_systemd_ids.sql");
        sqlx::raw_sql(migration).execute(&pool).await.expect("0007");
        // Run twice, as a hand-made rerun would: no `systemd:systemd:`.
        sqlx::raw_sql(migration)
            .execute(&pool)
            .await
            .expect("0007 again");
        let ids = |sql: &'static str| {
            let pool = pool.clone();
            async move {
                let rows = sqlx::query(sql).fetch_all(&pool).await.expect("select");
                rows.iter()
                    .map(|r| r.try_get::<String, _>(0).expect("app_id"))
                    .collect::<Vec<_>>()
            }
        };
        let expected = [
            "exe:/usr/bin/x",
            "org.mozilla.firefox",
            "systemd:org.gnome.Foo",
        ];
        let decisions = ids("SELECT app_id FROM decisions ORDER BY app_id").await;
        assert_eq!(decisions, expected);
        let apps = ids("SELECT app_id FROM apps ORDER BY app_id").await;
        assert_eq!(apps, expected);
        let refused = ids("SELECT app_id FROM refused_publishers").await;
        assert_eq!(refused, ["systemd:org.gnome.Foo"]);
    }
}

//! A damaged or foreign file at the database's path: the broker never
//! repairs it nor takes it for a new one. It moves it aside byte for byte
//! (`contextd.db.broken-TIME`, with its `-wal`/`-shm`), starts degraded on
//! a new database and says why, naming the file and what the user can do
//! (issue 32; before, it refused to start). The empty, random-bytes and
//! newer-schema files and the missing key are in
//! tests/it/store_recovery.rs.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::json;

/// Every file of the database's directory and its bytes.
fn files(home: &Home) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = home.dir.path().join("data/contextd");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .expect("data dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        // The room kept for revocations (store::reserve) is ballast, not
        // data: it stays with whichever database is current.
        .filter(|p| !p.ends_with("contextd.db.reserve"))
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect();
    v.sort();
    v
}

/// A database with a timeline of 600 focus changes (titles of 1000
/// characters, so that it spans a few hundred pages), written by the
/// broker and stopped cleanly.
async fn populated(bus: &Bus) -> Home {
    let home = Home::new();
    let replay = home.dir.path().join("replay.jsonl");
    let mut lines = vec![
        json!({"type": "window", "window": {"id": "a", "app_id": "org.a.App", "title": "a".repeat(1000)}}).to_string(),
        json!({"type": "window", "window": {"id": "b", "app_id": "org.b.App", "title": "b".repeat(1000)}}).to_string(),
    ];
    let start: chrono::DateTime<chrono::Utc> = "2026-11-21T08:00:00Z".parse().expect("time");
    for i in 0..600i64 {
        let at = start + chrono::Duration::seconds(10 * i);
        lines.push(json!({"type": "clock", "at": at}).to_string());
        // A title of its own each time (the timeline keeps a title once,
        // however many rows use it): about a kilobyte a row.
        let (w, app) = if i % 2 == 0 {
            ("a", "org.a.App")
        } else {
            ("b", "org.b.App")
        };
        lines.push(json!({"type": "window", "window": {"id": w, "app_id": app, "title": format!("{i} {}", w.repeat(1000))}}).to_string());
        lines.push(json!({"type": "focus", "id": w}).to_string());
    }
    std::fs::write(&replay, lines.join("\n") + "\n").expect("replay");
    let mut d = Daemon::start(
        bus,
        &home,
        &[
            "--replay",
            &replay.display().to_string(),
            "--fake-clock",
            "2026-11-21T08:00:00Z",
        ],
    )
    .await;
    // Wait until the whole timeline is on disk (the writer commits within
    // a second; the database is read beside the broker, as `contextctl
    // history` does), then stop cleanly: the last connection checkpoints.
    // Waiting for a size instead stopped the broker while the replay was
    // still being applied, whenever the writer committed in smaller
    // batches than the whole replay.
    eventually(30, "the timeline is written", || async {
        let db = open_db(&home).await;
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM history")
            .fetch_one(db.pool())
            .await
            .unwrap_or(0);
        db.pool().close().await;
        (rows >= 600).then_some(())
    })
    .await;
    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0),
        "{}",
        d.stderr()
    );
    let db = open_db(&home).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM history")
        .fetch_one(db.pool())
        .await
        .expect("count");
    db.pool().close().await;
    assert!(rows >= 600, "only {rows} rows were recorded");
    home
}

/// Start the broker on `home` and expect it to run degraded, saying so in
/// `ListSources` with the file's name, what is wrong and where it was
/// moved; stop it and return what it said.
async fn refused(bus: &Bus, home: &Home) -> String {
    let mut d = Daemon::start(bus, home, &[]).await;
    let conn = bus.connect().await;
    let ctx = contextd::client::proxy::Context1Proxy::new(&conn)
        .await
        .expect("proxy");
    let src = ctx
        .list_sources()
        .await
        .expect("ListSources")
        .iter()
        .map(contextd::client::json::dict_to_json)
        .find(|s| s["name"] == "recovery")
        .unwrap_or_else(|| panic!("not degraded: {}", d.stderr()));
    let said = src["last_error"].as_str().unwrap_or_default().to_owned();
    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0),
        "{}",
        d.stderr()
    );
    let path = home.db_path().display().to_string();
    assert!(said.contains(&path), "it does not name {path}: {said}");
    assert!(said.contains("was not changed"), "{said}");
    assert!(said.contains("moved to"), "{said}");
    said
}

/// The files are kept: each one's bytes under its name set aside
/// (`contextd.db.broken-TIME[-wal|-shm]`); the database's name now holds
/// a new database.
fn unchanged(home: &Home, before: &[(PathBuf, Vec<u8>)]) {
    let after = files(home);
    for (path, bytes) in before {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let suffix = name.strip_prefix("contextd.db").unwrap_or(name);
        let kept = after.iter().find(|(p, _)| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.starts_with("contextd.db.broken-")
                && if suffix.is_empty() {
                    !n.ends_with("-wal") && !n.ends_with("-shm")
                } else {
                    n.ends_with(suffix)
                }
        });
        let Some((p, b)) = kept else {
            panic!(
                "{} was not kept: {:?}",
                path.display(),
                after.iter().map(|f| &f.0).collect::<Vec<_>>()
            );
        };
        assert!(
            b == bytes,
            "{} changed (kept as {})",
            path.display(),
            p.display()
        );
    }
}

fn overwrite(path: &Path, at: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    f.seek(SeekFrom::Start(at)).expect("seek");
    f.write_all(bytes).expect("write");
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open")
        .set_len(len)
        .expect("truncate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_database_is_set_aside_untouched() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = populated(&bus).await;
        let len = std::fs::metadata(home.db_path()).expect("db").len();
        // Cut at a page boundary: only reading the pages tells.
        truncate(&home.db_path(), (len / 2) / 4096 * 4096);
        let before = files(&home);
        let err = refused(&bus, &home).await;
        eprintln!("cut at a page: {err}");
        assert!(err.contains("is damaged"), "{err}");
        assert!(err.contains("restore a backup"), "{err}");
        unchanged(&home, &before);

        // Cut inside a page: the file set aside is put back (the new
        // database made meanwhile goes) and cut again.
        for (p, _) in files(&home) {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let aside_db = n.starts_with("contextd.db.broken-")
                && !n.ends_with("-wal")
                && !n.ends_with("-shm");
            if aside_db {
                std::fs::rename(&p, home.db_path()).expect("put back");
            } else {
                std::fs::remove_file(&p).expect("rm");
            }
        }
        truncate(&home.db_path(), (len / 2) / 4096 * 4096 - 1000);
        let before = files(&home);
        let err = refused(&bus, &home).await;
        eprintln!("cut in a page: {err}");
        assert!(err.contains("is damaged"), "{err}");
        assert!(err.contains("not a whole number"), "{err}");
        unchanged(&home, &before);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_page_is_set_aside_untouched() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = populated(&bus).await;
        let len = std::fs::metadata(home.db_path()).expect("db").len();
        // Garbage in the middle of a page far from page 1: the key opens
        // the file, and only that page fails its HMAC.
        overwrite(&home.db_path(), (len / 3) / 4096 * 4096 + 1000, &[0x5a; 64]);
        let before = files(&home);
        let err = refused(&bus, &home).await;
        eprintln!("{err}");
        assert!(err.contains("is damaged"), "{err}");
        assert!(
            !err.contains("wrong key"),
            "damage is not a wrong key: {err}"
        );
        unchanged(&home, &before);
    })
    .await
}

/// Another program's plain SQLite database (a browser's history, say).
async fn write_foreign(path: &Path) {
    use sqlx::ConnectOptions;
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .connect()
        .await
        .expect("create a plain SQLite file");
    sqlx::query("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        .execute(&mut conn)
        .await
        .expect("create");
    sqlx::query("INSERT INTO moz_places (url) VALUES ('https://example.org/')")
        .execute(&mut conn)
        .await
        .expect("insert");
    use sqlx::Connection;
    conn.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_sqlite_file_is_set_aside_untouched() {
    with_timeout(120, async {
        let bus = Bus::start();
        // Where contextd never ran (no key yet): the file is what is
        // wrong, not a missing key, and no key is made for it.
        let fresh = Home::new();
        write_foreign(&fresh.db_path()).await;
        let before = files(&fresh);
        let err = refused(&bus, &fresh).await;
        eprintln!("{err}");
        assert!(err.contains("plain SQLite database"), "{err}");
        unchanged(&fresh, &before);

        // In place of contextd's own database.
        let home = populated(&bus).await;
        for f in files(&home) {
            std::fs::remove_file(f.0).expect("rm");
        }
        write_foreign(&home.db_path()).await;
        let before = files(&home);
        let err = refused(&bus, &home).await;
        assert!(err.contains("plain SQLite database"), "{err}");
        unchanged(&home, &before);
    })
    .await
}

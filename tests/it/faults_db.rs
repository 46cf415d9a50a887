//! A damaged or foreign file at the database's path: the broker refuses to
//! start with an error that names the file, says what is wrong and what
//! the user can do, and leaves every file as it was (no repair, no new
//! database made in its place). The wrong key and the missing key are in
//! tests/it/consent_store.rs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::json;

/// Every file of the database's directory and its bytes.
fn files(home: &Home) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = home.dir.path().join("data/contextd");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .expect("data dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
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
        lines.push(json!({"type": "focus", "id": if i % 2 == 0 { "a" } else { "b" }}).to_string());
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
    // Wait until the timeline is on disk (the writer commits within a
    // second), then stop cleanly: the last connection checkpoints.
    eventually(30, "the timeline is written", || async {
        let size = std::fs::metadata(home.db_path().with_extension("db-wal"))
            .map(|m| m.len())
            .unwrap_or(0)
            + std::fs::metadata(home.db_path())
                .map(|m| m.len())
                .unwrap_or(0);
        (size > 100 * 4096).then_some(())
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
    assert!(rows >= 500, "only {rows} rows were recorded");
    home
}

/// Start the broker on `home` and expect it to refuse: exit 1 within 20 s
/// with an error naming the database file; returns its stderr.
fn refused(bus: &Bus, home: &Home) -> String {
    let (st, _out, err) = run_cmd(
        Command::new(contextd_bin())
            .env_clear()
            .envs(home.envs(bus))
            .env("PATH", std::env::var("PATH").unwrap_or_default()),
        20,
    );
    assert_eq!(st.code(), Some(1), "the broker did not refuse: {err}");
    let path = home.db_path().display().to_string();
    assert!(err.contains(&path), "the error does not name {path}: {err}");
    // One line says it all: the file, what is wrong, that it is unchanged.
    let line = err
        .lines()
        .find(|l| l.starts_with("contextd: ") && l.contains(&path))
        .unwrap_or_else(|| panic!("no error line naming {path}: {err}"));
    assert!(
        line.contains("was not changed"),
        "the error does not say the file is unchanged: {err}"
    );
    line.to_owned()
}

/// The files are as they were: the same names and the same bytes.
fn unchanged(home: &Home, before: &[(PathBuf, Vec<u8>)]) {
    let after = files(home);
    let names = |v: &[(PathBuf, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&after), names(before), "files appeared or went");
    for (a, b) in after.iter().zip(before) {
        assert!(a.1 == b.1, "{} changed", a.0.display());
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
async fn a_truncated_database_is_refused_and_left_as_it_is() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = populated(&bus).await;
        let len = std::fs::metadata(home.db_path()).expect("db").len();
        // Cut at a page boundary: only reading the pages tells.
        truncate(&home.db_path(), (len / 2) / 4096 * 4096);
        let before = files(&home);
        let err = refused(&bus, &home);
        eprintln!("cut at a page: {err}");
        assert!(err.contains("is damaged"), "{err}");
        assert!(err.contains("Restore it from a backup"), "{err}");
        unchanged(&home, &before);

        // Cut inside a page.
        truncate(&home.db_path(), (len / 2) / 4096 * 4096 - 1000);
        let before = files(&home);
        let err = refused(&bus, &home);
        eprintln!("cut in a page: {err}");
        assert!(err.contains("is damaged"), "{err}");
        assert!(err.contains("not a whole number"), "{err}");
        unchanged(&home, &before);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_page_is_refused_and_left_as_it_is() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = populated(&bus).await;
        let len = std::fs::metadata(home.db_path()).expect("db").len();
        // Garbage in the middle of a page far from page 1: the key opens
        // the file, and only that page fails its HMAC.
        overwrite(&home.db_path(), (len / 3) / 4096 * 4096 + 1000, &[0x5a; 64]);
        let before = files(&home);
        let err = refused(&bus, &home);
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
async fn a_foreign_sqlite_file_is_refused_and_left_as_it_is() {
    with_timeout(120, async {
        let bus = Bus::start();
        // Where contextd never ran (no key yet): the file is what is
        // wrong, not a missing key, and no key is made for it.
        let fresh = Home::new();
        write_foreign(&fresh.db_path()).await;
        let before = files(&fresh);
        let err = refused(&bus, &fresh);
        eprintln!("{err}");
        assert!(err.contains("plain SQLite database"), "{err}");
        assert!(err.contains("Move it away"), "{err}");
        unchanged(&fresh, &before);
        assert!(
            !fresh.dir.path().join("state/contextd/db.key").exists(),
            "a key was made for another program's file"
        );

        // In place of contextd's own database.
        let home = populated(&bus).await;
        for f in files(&home) {
            std::fs::remove_file(f.0).expect("rm");
        }
        write_foreign(&home.db_path()).await;
        let before = files(&home);
        let err = refused(&bus, &home);
        assert!(err.contains("plain SQLite database"), "{err}");
        unchanged(&home, &before);
    })
    .await
}

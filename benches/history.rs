//! `make bench` for the timeline (issue 33, "a timeline for years").
//!
//! 1. A million events through the store's writer, as the recorder hands
//!    them over (14 days, ~1.2 s apart): the ingest rate with encryption,
//!    `Query` of 24 hours and `Summary` of 7 days, the bytes per million
//!    events, and what the bytes are (dbstat, per table and index).
//! 2. Nine million older events added in bulk straight into the store's
//!    schema (two years before, 7.2 s apart; seconds, not the writer's
//!    minutes): `Query` 24 h, `Summary` 7 d and 30 d at 10 M events, the
//!    bytes per million there.
//! 3. The daemon started on that file: time to the bus name owned, against
//!    the same start on an empty database (the floor).
//! 4. Retention forgetting the oldest million, three times: the longest a
//!    reader (`Query` 24 h in a loop) waited meanwhile, against the same
//!    reader with nothing forgetting (the floor), and the file before and
//!    after.
//!
//! Every timing target is min / median / max of 3 rounds, the verdict on
//! the median. Prints figures; asserts nothing. The database (about a
//! gigabyte at most) lives under the target directory and is deleted at
//! the end.
//!
//! While working on the 10 M figures: `CONTEXTD_BENCH_HISTORY_KEEP=DIR`
//! keeps a copy of the 10 M home (database, key, config) in `DIR` after a
//! whole run; a later run with the same `DIR` starts from a copy of it at
//! part 2's reads (parts 1 and the bulk are skipped; the copy in `DIR`
//! stays as it was). Delete `DIR` when done.

use crate::common;

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use common::*;
use contextd::internals::store::history::{History, Query};
use contextd::internals::store::{Db, DbKey, KeySource};
use contextd::internals::{HistoryEvent, HistoryKind, HistoryOp, HistorySettings};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

const EVENTS: i64 = 1_000_000;
/// Events in the file for the figures "at 10 M".
const TOTAL: i64 = 10_000_000;
/// The older events, one every this many ms: 500 an hour, none crossing
/// an hour, 750 days of them.
const OLD_STEP_MS: i64 = 7_200;
const HOUR_MS: i64 = 3_600_000;
const ROUNDS: usize = 3;
const APPS: [&str; 8] = [
    "org.gnome.TextEditor",
    "org.mozilla.firefox",
    "org.gnome.Terminal",
    "com.slack.Slack",
    "org.gnome.Nautilus",
    "code",
    "org.gnome.Evince",
    "exe:/usr/bin/pw-record",
];
const TITLES: i64 = 977;

fn title(i: i64) -> String {
    format!("Document {} — some window title", i % TITLES)
}

pub(crate) fn main() {
    block_on(2, run());
}

fn size_of(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median_of(v: &mut [Duration]) -> f64 {
    v.sort();
    ms(v[v.len() / 2])
}

/// One target line: min / median / max of the rounds, the verdict on the
/// median.
fn target(label: &str, rounds: &[f64], unit: &str, target: &str, ok: impl Fn(f64) -> bool) {
    let (a, m, b) = min_median_max(rounds);
    println!(
        "  {label:<44} min {a:>7.1} {unit}  median {m:>7.1} {unit}  max {b:>7.1} {unit} (target {target}: {})",
        verdict(ok(m))
    );
}

async fn checkpoint(db: &Db) {
    let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(db.pool())
        .await;
}

async fn last_id(db: &Db) -> i64 {
    sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM timeline")
        .fetch_one(db.pool())
        .await
        .expect("max id")
}

/// Query 24 h (first page of 1000, and pages 2-10 by cursor) and Summary
/// over `days` days, each for 10 periods ending in the 14 recorded days;
/// per-round medians of (query, pages, summary).
async fn reads(
    history: &History,
    start: DateTime<Utc>,
    summary_days: i64,
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let now = start + chrono::Duration::days(14);
    let mut q_times = Vec::new();
    let mut s_times = Vec::new();
    let mut p_times = Vec::new();
    for day in 0..10 {
        // Not on an hour: Summary reads the edges from the rows.
        let until =
            start + chrono::Duration::days(4 + day) + chrono::Duration::seconds(37 * 60 + 13);
        let mut q = Query {
            since: until - chrono::Duration::hours(24),
            until,
            kinds: HistoryKind::ALL.to_vec(),
            apps: vec![],
            limit: 1000,
            cursor: None,
        };
        let t = Instant::now();
        let (rows, next) = history.query(&q, now).await.expect("query");
        q_times.push(t.elapsed());
        assert!(!rows.is_empty());
        // Pages after the first cost the same (keyset cursor).
        let mut next = next;
        for _ in 0..9 {
            q.cursor = next.as_deref().and_then(|c| {
                contextd::internals::store::history::parse_cursor(c)
                    .ok()
                    .flatten()
            });
            let t = Instant::now();
            let (_, n) = history.query(&q, now).await.expect("page");
            p_times.push(t.elapsed());
            next = n;
        }
        let t = Instant::now();
        let totals = history
            .summary(until - chrono::Duration::days(summary_days), until, now)
            .await
            .expect("summary");
        s_times.push(t.elapsed());
        assert!(!totals.is_empty());
    }
    (q_times, p_times, s_times)
}

async fn profile(db: &Db, label: &str) {
    let per: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT name, count(*), sum(pgsize) FROM dbstat GROUP BY name ORDER BY 3 DESC",
    )
    .fetch_all(db.pool())
    .await
    .unwrap_or_default();
    for (name, pages, bytes) in per.iter().take(8) {
        println!(
            "  bytes ({label}): {name:<28} {pages:>8} pages {:>8.1} MB",
            *bytes as f64 / 1e6
        );
    }
}

/// Nine million events before `start`, straight into the store's schema
/// on one connection, in transactions of a million; their hourly totals
/// computed here (500 events an hour, none crossing one).
async fn bulk_older(db: &Db, start: DateTime<Utc>) -> Duration {
    let t = Instant::now();
    let n = TOTAL - EVENTS;
    let base = start.timestamp_millis() - n * OLD_STEP_MS;
    let first_id = last_id(db).await + 1;
    let mut conn = db.pool().acquire().await.expect("connection");
    for sql in [
        "CREATE TEMP TABLE bench_apps (n INTEGER PRIMARY KEY, id INTEGER NOT NULL)",
        "CREATE TEMP TABLE bench_titles (n INTEGER PRIMARY KEY, id INTEGER NOT NULL)",
    ] {
        sqlx::query(sql).execute(&mut *conn).await.expect("temp");
    }
    for (n, app) in APPS.iter().enumerate() {
        sqlx::query("INSERT INTO temp.bench_apps SELECT ?, id FROM timeline_text WHERE text = ?")
            .bind(n as i64)
            .bind(*app)
            .execute(&mut *conn)
            .await
            .expect("app");
    }
    for n in 0..TITLES {
        sqlx::query("INSERT INTO temp.bench_titles SELECT ?, id FROM timeline_text WHERE text = ?")
            .bind(n)
            .bind(title(n))
            .execute(&mut *conn)
            .await
            .expect("title");
    }
    const CHUNK: i64 = 1_000_000;
    let mut from = 0;
    while from < n {
        let to = (from + CHUNK).min(n);
        sqlx::query(
            "WITH RECURSIVE g(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?2)
             INSERT INTO timeline (id, kind, app, title, detail, start_ms, dur_ms)
             SELECT ?3 + i, CASE WHEN i % 10 = 9 THEN 1 ELSE 0 END,
                    (SELECT id FROM temp.bench_apps WHERE n = i % 8),
                    (SELECT id FROM temp.bench_titles WHERE n = i % 977),
                    NULL, ?4 + i * ?5, ?5 FROM g",
        )
        .bind(from)
        .bind(to)
        .bind(first_id)
        .bind(base)
        .bind(OLD_STEP_MS)
        .execute(&mut *conn)
        .await
        .expect("bulk rows");
        let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut *conn)
            .await;
        from = to;
    }
    // The hourly totals, as the writer would have kept them.
    let per_hour = HOUR_MS / OLD_STEP_MS;
    let mut rows = Vec::new();
    for h in 0..n / per_hour {
        let mut ms = [[0i64; 2]; 8];
        for i in h * per_hour..(h + 1) * per_hour {
            ms[(i % 8) as usize][usize::from(i % 10 == 9)] += OLD_STEP_MS;
        }
        for (app, kinds) in ms.iter().enumerate() {
            for (k, v) in kinds.iter().enumerate() {
                if *v > 0 {
                    let kind = ["focus", "capture"][k];
                    rows.push(serde_json::json!([base + h * HOUR_MS, APPS[app], kind, v]));
                }
            }
        }
    }
    for chunk in rows.chunks(20_000) {
        sqlx::query(
            "INSERT INTO history_hourly (hour_ms, app_id, kind, ms)
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?)",
        )
        .bind(serde_json::Value::Array(chunk.to_vec()).to_string())
        .execute(&mut *conn)
        .await
        .expect("hourly");
    }
    for sql in ["DROP TABLE temp.bench_apps", "DROP TABLE temp.bench_titles"] {
        let _ = sqlx::query(sql).execute(&mut *conn).await;
    }
    drop(conn);
    checkpoint(db).await;
    t.elapsed()
}

/// Spawn the daemon on `dir`'s directories `ROUNDS` times: time from spawn
/// to its bus name owned.
async fn starts(dir: &std::path::Path) -> Vec<f64> {
    let (_bus, address) = start_bus(dir);
    let replay = dir.join("replay.jsonl");
    std::fs::write(
        &replay,
        r#"{"type":"window","window":{"id":"w1","app_id":"org.gnome.TextEditor","title":"notes.txt","states":{"activated":true}}}"#,
    )
    .expect("replay");
    let conn = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .expect("connect");
    let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
    let mut out = Vec::new();
    for _ in 0..ROUNDS {
        let mut owners = dbus.receive_name_owner_changed().await.expect("signal");
        let t = Instant::now();
        let child = contextd(dir)
            .arg("--replay")
            .arg(&replay)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .spawn()
            .expect("spawn contextd");
        let mut p = Proc(child);
        loop {
            let sig = tokio::time::timeout(Duration::from_secs(60), owners.next())
                .await
                .expect("name owned within 60 s")
                .expect("stream");
            let args = sig.args().expect("args");
            if args.name().as_str() == "org.contextd.Broker1" && args.new_owner().is_some() {
                break;
            }
        }
        out.push(ms(t.elapsed()));
        // SAFETY: kill(2) on our child.
        unsafe { libc::kill(p.0.id() as i32, libc::SIGTERM) };
        let _ = p.0.wait();
    }
    out
}

/// The directories of a daemon under `dir`, its database opened by the
/// bench with the key the daemon will find (the key file), and a config
/// that keeps ten years (no purge at start).
async fn home(dir: &std::path::Path) -> (Db, std::path::PathBuf) {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let state = dir.join("state/contextd");
    std::fs::create_dir_all(&state).expect("state");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let key_file = state.join("db.key");
    let key = DbKey::random().expect("key");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key_file)
            .expect("key file");
        writeln!(f, "{}", key.hex()).expect("write key");
    }
    let config = dir.join("config/contextd");
    std::fs::create_dir_all(&config).expect("config");
    std::fs::write(
        config.join("config.toml"),
        "[history]\nretention_days = 3650\n",
    )
    .expect("config.toml");
    let path = dir.join("data/contextd/contextd.db");
    let (db, _tasks) = Db::open(&path, &key, &KeySource::KeyFile(key_file.clone()))
        .await
        .expect("open");
    (db, key_file)
}

/// Copy the files under `from` into `to` (directories made as needed).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        match e.file_type() {
            Ok(t) if t.is_dir() => copy_tree(&src, &dst),
            Ok(t) if t.is_file() => {
                std::fs::copy(&src, &dst).expect("copy");
            }
            _ => {}
        }
    }
}

/// The database of a home made by [`home`], opened again with its key file.
async fn reopen(dir: &std::path::Path) -> (Db, std::path::PathBuf) {
    let key_file = dir.join("state/contextd/db.key");
    let key = DbKey::parse(&std::fs::read(&key_file).expect("key")).expect("key");
    let (db, _tasks) = Db::open(
        &dir.join("data/contextd/contextd.db"),
        &key,
        &KeySource::KeyFile(key_file.clone()),
    )
    .await
    .expect("reopen");
    (db, key_file)
}

async fn run() {
    // Under the target directory (big files stay out of /tmp).
    let tmp = std::env::var_os("CARGO_TARGET_DIR")
        .map(|d| std::path::PathBuf::from(d).join("tmp"))
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let tmp = tmp.as_path();
    std::fs::create_dir_all(tmp).expect("tmp");
    let dir = tempfile::tempdir_in(tmp).expect("tempdir");
    println!("contextd history benchmark (SQLCipher, {EVENTS} events over 14 days, then {TOTAL})");
    let keep = std::env::var_os("CONTEXTD_BENCH_HISTORY_KEEP").map(std::path::PathBuf::from);
    let kept = keep
        .as_deref()
        .filter(|k| k.join("data/contextd/contextd.db").exists());
    // 1 000 000 closed intervals over 14 days, ~1.2 s apart, as the
    // recorder would hand them over, in three rounds of a third.
    let start = Utc
        .with_ymd_and_hms(2026, 11, 1, 0, 0, 0)
        .single()
        .expect("date");
    let (db, key_file, history) = if let Some(k) = kept {
        println!(
            "  (the 10 M home kept in {} copied: parts 1 and the bulk skipped)",
            k.display()
        );
        copy_tree(k, dir.path());
        let (db, key_file) = reopen(dir.path()).await;
        let (history, _writer, _) = History::open(db.pool().clone()).await.expect("history");
        (db, key_file, history)
    } else {
        let (db, key_file) = home(dir.path()).await;
        let history = part_one(&db, start).await;
        (db, key_file, history)
    };
    part_two(
        db,
        key_file,
        history,
        start,
        tmp,
        dir,
        keep.as_deref(),
        kept.is_some(),
    )
    .await;
}

/// Part 1 (a million events through the writer) and the bulk of nine
/// million older ones.
async fn part_one(db: &Db, start: DateTime<Utc>) -> History {
    let (history, writer, next) = History::open(db.pool().clone()).await.expect("history");
    let cancel = CancellationToken::new();
    let writer = tokio::spawn(writer.run(cancel.clone()));
    let data_size = || {
        let mut p = std::path::PathBuf::from(db.path());
        p.pop();
        size_of(&p)
    };
    let step_ms = 14 * 24 * 3600 * 1000 / EVENTS;
    let mut rates = Vec::new();
    let t_all = Instant::now();
    for round in 0..ROUNDS as i64 {
        let (from, to) = (
            round * EVENTS / ROUNDS as i64,
            (round + 1) * EVENTS / ROUNDS as i64,
        );
        let t0 = Instant::now();
        for i in from..to {
            // The writer holds a bounded backlog and refuses what does not
            // fit; the import waits for room, so the rate is the writer's.
            while !history.has_room() {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            let s = start + chrono::Duration::milliseconds(i * step_ms);
            let kind = if i % 10 == 9 {
                HistoryKind::Capture
            } else {
                HistoryKind::Focus
            };
            history.submit(vec![HistoryOp::Open(HistoryEvent {
                id: next + i,
                kind,
                app_id: Some(APPS[(i % 8) as usize].to_owned()),
                title: Some(title(i)),
                detail: None,
                start: s,
                end: Some(s + chrono::Duration::milliseconds(step_ms)),
            })]);
        }
        // The writer flushes within a second; wait until every row is in.
        while last_id(db).await < next + to - 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        rates.push((to - from) as f64 / t0.elapsed().as_secs_f64());
    }
    let ingest = t_all.elapsed();
    cancel.cancel();
    let _ = writer.await;
    checkpoint(db).await;

    let (mut q, mut p, mut s) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (mut qt, mut pt, mut st) = reads(&history, start, 7).await;
        q.push(median_of(&mut qt));
        p.push(median_of(&mut pt));
        s.push(median_of(&mut st));
    }
    checkpoint(db).await;
    let size_1m = data_size();
    println!(
        "  ingest: {:.0} events/s median of 3 thirds ({:.1} s for all)",
        median(&rates),
        ingest.as_secs_f64()
    );
    target("ingest (events/s)", &rates, "/s", ">= 10 000/s", |m| {
        m >= 10_000.0
    });
    target(
        "Query 24 h (first page of 1000), 1 M",
        &q,
        "ms",
        "<= 50 ms",
        |m| m <= 50.0,
    );
    let (_, pm, _) = min_median_max(&p);
    println!("  Query 24 h, pages 2-10 by cursor, 1 M:       median {pm:.1} ms");
    target("Summary 7 days, 1 M", &s, "ms", "<= 50 ms", |m| m <= 50.0);
    let per_million = size_1m as f64 / 1e6 * (1_000_000.0 / EVENTS as f64);
    println!(
        "  database size: {per_million:.1} MB per million events (target <= 80 MB: {}; the same every run)",
        verdict(per_million <= 80.0)
    );
    profile(db, "1 M").await;

    // 2. Nine million older events: 10 M in the file.
    let took = bulk_older(db, start).await;
    println!(
        "  (9 M older events added in bulk in {:.0} s; file {:.0} MB)",
        took.as_secs_f64(),
        data_size() as f64 / 1e6
    );
    history
}

/// Part 2's reads at 10 M, then parts 3 and 4; the 10 M home is kept in
/// `keep` first when it was not `kept` there already.
#[allow(clippy::too_many_arguments)]
async fn part_two(
    db: Db,
    key_file: std::path::PathBuf,
    history: History,
    start: DateTime<Utc>,
    tmp: &std::path::Path,
    dir: tempfile::TempDir,
    keep: Option<&std::path::Path>,
    kept: bool,
) {
    let data = dir.path().join("data/contextd");
    let size_10m = size_of(&data);
    let (mut q, mut s7, mut s30) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (mut qt, _, mut st) = reads(&history, start, 7).await;
        q.push(median_of(&mut qt));
        s7.push(median_of(&mut st));
        let (_, _, mut st) = reads(&history, start, 30).await;
        s30.push(median_of(&mut st));
    }
    target(
        "Query 24 h (first page of 1000), 10 M",
        &q,
        "ms",
        "<= 10 ms",
        |m| m <= 10.0,
    );
    target("Summary 7 days, 10 M", &s7, "ms", "<= 15 ms", |m| m <= 15.0);
    target("Summary 30 days, 10 M", &s30, "ms", "<= 50 ms", |m| {
        m <= 50.0
    });
    let per_million_10 = size_10m as f64 / 1e6 * (1_000_000.0 / TOTAL as f64);
    println!(
        "  database size at 10 M: {per_million_10:.1} MB per million events (target <= 80 MB: {}; the same every run)",
        verdict(per_million_10 <= 80.0)
    );
    profile(&db, "10 M").await;

    // 3. Start on the 10 M file, against start on an empty one.
    db.pool().close().await;
    if let Some(keep) = keep.filter(|_| !kept) {
        copy_tree(dir.path(), keep);
        println!("  (the 10 M home kept in {})", keep.display());
    }
    let empty = tempfile::tempdir_in(tmp).expect("tempdir");
    {
        let (db, _) = home(empty.path()).await;
        db.pool().close().await;
    }
    let floor = starts(empty.path()).await;
    let big = starts(dir.path()).await;
    let (_, floor_m, _) = min_median_max(&floor);
    target(
        "start to name owned, empty database (floor)",
        &floor,
        "ms",
        "none",
        |_| true,
    );
    target(
        "start to name owned, 10 M events",
        &big,
        "ms",
        "<= 50 ms",
        |m| m <= 50.0,
    );
    println!(
        "  start with 10 M events / empty: median {:.2}x",
        median(&big) / floor_m
    );

    // 4. Retention forgets the oldest million, three times, while a reader
    // queries the last day; the same reader alone first (the floor).
    let key = DbKey::parse(&std::fs::read(&key_file).expect("key")).expect("key");
    let (db, _tasks) = Db::open(
        &data.join("contextd.db"),
        &key,
        &KeySource::KeyFile(key_file.clone()),
    )
    .await
    .expect("reopen");
    let (history, _writer, _) = History::open(db.pool().clone()).await.expect("history");
    let reader = |history: History, done: CancellationToken| async move {
        let until = start + chrono::Duration::days(13);
        let q = Query {
            since: until - chrono::Duration::hours(24),
            until,
            kinds: HistoryKind::ALL.to_vec(),
            apps: vec![],
            limit: 1000,
            cursor: None,
        };
        let mut lat = Vec::new();
        while !done.is_cancelled() {
            let t = Instant::now();
            history.query(&q, until).await.expect("query");
            lat.push(t.elapsed());
        }
        lat
    };
    let alone = {
        let done = CancellationToken::new();
        let r = tokio::spawn(reader(history.clone(), done.clone()));
        tokio::time::sleep(Duration::from_secs(3)).await;
        done.cancel();
        let mut lat = r.await.expect("reader");
        lat.sort();
        lat
    };
    let base = start.timestamp_millis() - (TOTAL - EVENTS) * OLD_STEP_MS;
    let (mut stalls, mut purge_s, mut shrunk) = (Vec::new(), Vec::new(), true);
    let mut p99s = Vec::new();
    let mut sizes = Vec::new();
    for round in 0..ROUNDS as i64 {
        checkpoint(&db).await;
        let before = size_of(&data);
        let cutoff = base + (round + 1) * 1_000_000 * OLD_STEP_MS;
        let settings = HistorySettings {
            retention_days: 1,
            ..Default::default()
        };
        let now =
            Utc.timestamp_millis_opt(cutoff).single().expect("time") + chrono::Duration::days(1);
        let done = CancellationToken::new();
        let r = tokio::spawn(reader(history.clone(), done.clone()));
        // The reader's first query is under way before the purge starts.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t = Instant::now();
        let n = history.purge(&settings, now).await.expect("purge");
        let took = t.elapsed();
        done.cancel();
        let mut lat = r.await.expect("reader");
        lat.sort();
        let stall = lat.last().copied().unwrap_or_default();
        stalls.push(ms(stall));
        p99s.push(ms(pct(&lat, 0.99)));
        purge_s.push(took.as_secs_f64());
        checkpoint(&db).await;
        let after = size_of(&data);
        sizes.push((before, after, n, lat.len()));
        // At least half of what a million rows take must go back.
        shrunk &= (after as f64) < before as f64 - 0.5 * per_million_10 * 1e6;
    }
    for (i, (before, after, n, reads)) in sizes.iter().enumerate() {
        println!(
            "  forget round {}: {n} rows in {:.1} s, {reads} reads meanwhile; file {:.0} MB -> {:.0} MB",
            i + 1,
            purge_s[i],
            *before as f64 / 1e6,
            *after as f64 / 1e6
        );
    }
    println!(
        "  reader alone (floor): median {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} reads",
        ms(pct(&alone, 0.5)),
        ms(pct(&alone, 0.99)),
        ms(pct(&alone, 1.0)),
        alone.len()
    );
    // The longest of thousands of reads over minutes is also the machine's
    // longest hiccup (the floor's is over 3 s): the p99 against the
    // floor's says what forgetting itself costs a reader.
    println!(
        "  read p99 meanwhile / alone: median {:.2}x ({})",
        median(&p99s) / ms(pct(&alone, 0.99)),
        p99s.iter()
            .map(|v| format!("{v:.1} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  longest read meanwhile / longest read alone: median {:.2}x",
        median(&stalls) / ms(pct(&alone, 1.0))
    );
    target(
        "forget 1 M old events: longest read meanwhile",
        &stalls,
        "ms",
        "<= 50 ms",
        |m| m <= 50.0,
    );
    println!(
        "  the file shrinks after forgetting (by at least half a million events' bytes each time): {}",
        verdict(shrunk)
    );
    db.pool().close().await;
    drop(empty);
    drop(dir);
}

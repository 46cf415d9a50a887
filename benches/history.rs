//! `make bench` for the timeline: ingest rate with encryption, `Query` of
//! 24 hours and `Summary` of 7 days over a million events, and the size of
//! the database per million events. Prints figures; asserts nothing.

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use contextd::internals::{HistoryEvent, HistoryKind, HistoryOp};
use contextd::store::history::{History, Query};
use contextd::store::{Db, DbKey, KeySource};
use tokio_util::sync::CancellationToken;

const EVENTS: i64 = 1_000_000;
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

pub(crate) fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
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

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("contextd.db");
    let key = DbKey::random().expect("key");
    let (db, _tasks) = Db::open(&path, &key, &KeySource::KeyFile(dir.path().join("k")))
        .await
        .expect("open");
    let (history, writer, next) = History::open(db.pool().clone()).await.expect("history");
    let cancel = CancellationToken::new();
    let writer = tokio::spawn(writer.run(cancel.clone()));

    // 1 000 000 closed intervals over 14 days, ~1.2 s apart, as the
    // recorder would hand them over.
    let start = Utc
        .with_ymd_and_hms(2026, 11, 1, 0, 0, 0)
        .single()
        .expect("date");
    let step_ms = 14 * 24 * 3600 * 1000 / EVENTS;
    let t0 = Instant::now();
    for i in 0..EVENTS {
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
            title: Some(format!("Document {} — some window title", i % 977)),
            detail: None,
            start: s,
            end: Some(s + chrono::Duration::milliseconds(step_ms)),
        })]);
    }
    // The writer flushes once a second; wait until every row is in.
    loop {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM history")
            .fetch_one(db.pool())
            .await
            .expect("count");
        if n >= EVENTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ingest = t0.elapsed();
    cancel.cancel();
    let _ = writer.await;
    let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(db.pool())
        .await;
    let rate = EVENTS as f64 / ingest.as_secs_f64();

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
            q.cursor = next
                .as_deref()
                .and_then(|c| contextd::store::history::parse_cursor(c).ok().flatten());
            let t = Instant::now();
            let (_, n) = history.query(&q, now).await.expect("page");
            p_times.push(t.elapsed());
            next = n;
        }
        let t = Instant::now();
        let totals = history
            .summary(until - chrono::Duration::days(7), until, now)
            .await
            .expect("summary");
        s_times.push(t.elapsed());
        assert!(!totals.is_empty());
    }
    q_times.sort();
    s_times.sort();
    p_times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    // Closed before the process ends (a connection closed during exit
    // handlers can crash), and so that the size includes the checkpoint.
    db.pool().close().await;
    let size = size_of(dir.path());
    println!("contextd history benchmark (SQLCipher, {EVENTS} events over 14 days)");
    println!(
        "  ingest: {:.0} events/s ({:.1} s for all; target >= 10 000/s: {})",
        rate,
        ingest.as_secs_f64(),
        if rate >= 10_000.0 {
            "meets target"
        } else {
            "MISSES target"
        }
    );
    println!(
        "  Query 24 h (first page of 1000):  median {:.1} ms, max {:.1} ms (target <= 50 ms: {})",
        ms(q_times[q_times.len() / 2]),
        ms(q_times[q_times.len() - 1]),
        if q_times[q_times.len() / 2] <= Duration::from_millis(50) {
            "meets target"
        } else {
            "MISSES target"
        }
    );
    println!(
        "  Query 24 h, pages 2-10 by cursor:  median {:.1} ms, max {:.1} ms",
        ms(p_times[p_times.len() / 2]),
        ms(p_times[p_times.len() - 1]),
    );
    println!(
        "  Summary 7 days:                   median {:.1} ms, max {:.1} ms (target <= 50 ms: {})",
        ms(s_times[s_times.len() / 2]),
        ms(s_times[s_times.len() - 1]),
        if s_times[s_times.len() / 2] <= Duration::from_millis(50) {
            "meets target"
        } else {
            "MISSES target"
        }
    );
    println!(
        "  database size: {:.1} MB per million events",
        size as f64 / 1e6 * (1_000_000.0 / EVENTS as f64)
    );
}

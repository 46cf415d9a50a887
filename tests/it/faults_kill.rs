//! `kill -9` during writes, a hundred times: a burst of focus changes
//! recorded in the timeline while a client makes audited reads, and the
//! broker killed just after a transaction of this round has committed
//! (detected by the write-ahead log changing), after a delay that varies
//! by round, so that kills land during the next batches and between them;
//! every tenth round outlives the audit writer's one-second batch. After
//! each kill the next broker opens the database again (it checks every
//! page at start and refuses a damaged file); at the end `PRAGMA
//! integrity_check` is `ok`, audit rows were written, and in every round
//! the timeline lost only changes from the last second or so before the
//! kill (measured and printed).
//!
//! The replay runs on a scripted clock, a second between focus changes:
//! sent at full speed, they are still intervals the timeline keeps (a
//! focus held under a millisecond is no row, by design).

use crate::common;

use std::time::{Duration, Instant, SystemTime};

use common::*;
use contextd::client::proxy::Context1Proxy;
use serde_json::json;

const ROUNDS: usize = 100;
/// Focus changes sent per round: a full batch of the timeline writer (an
/// interval opened and closed while pending is one operation of 1000 a
/// batch), which it writes at once rather than after its second.
const FLIPS: usize = 1000;
/// The timeline writer's flush interval (`store::history::FLUSH`): what a
/// crash may lose is what was applied in the last second, plus the time
/// the batch of that second takes to write. The bound checked allows the
/// write a second on a loaded machine; the figure is printed.
const FLUSH_MS: i64 = 1000;
const WRITE_MS: i64 = 1000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The write-ahead log's length and modification time: they change when
/// a transaction commits.
fn wal_stamp(home: &Home) -> Option<(u64, SystemTime)> {
    let m = std::fs::metadata(home.db_path().with_extension("db-wal")).ok()?;
    Some((m.len(), m.modified().ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_survives_a_hundred_kills_during_writes() {
    with_timeout(600, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let mut replay = Replay::new(&home);
        let conn = bus.connect().await;
        let started = Instant::now();
        // Per round: when each focus change was sent, and when the kill came.
        let mut rounds: Vec<(Vec<i64>, i64)> = Vec::new();
        // Where the time goes: start, sending, until a commit, the kill.
        let mut phases = [Duration::ZERO; 4];
        for round in 0..ROUNDS {
            // Three windows of this round's own apps; cycling through
            // three, no change is a sub-millisecond visit back to the
            // window before (which the recorder would coalesce).
            for w in ["a", "b", "c"] {
                replay.send(
                    &json!({"type": "window", "window": {"id": w, "app_id": format!("org.r{round}.{w}"), "title": w}})
                        .to_string(),
                );
            }
            // Each round's scripted time starts after the last round's.
            let base = chrono::DateTime::<chrono::Utc>::from_timestamp(1_795_000_000 + round as i64 * 10_000, 0)
                .expect("time");
            let t_start = Instant::now();
            let mut d = Daemon::start(
                &bus,
                &home,
                &["--replay", &replay.arg(), "--fake-clock", &base.to_rfc3339()],
            )
            .await;
            phases[0] += t_start.elapsed();
            let ctx = Context1Proxy::new(&conn).await.expect("proxy");
            // Audited reads until the kill.
            let mut readers = Vec::new();
            for _ in 0..1 {
                let c = bus.connect().await;
                readers.push(tokio::spawn(async move {
                    let p = Context1Proxy::new(&c).await.expect("proxy");
                    while p.get_active_window().await.is_ok() {}
                }));
            }
            let stamp = wal_stamp(&home);
            let mut sent = Vec::with_capacity(FLIPS);
            let t_send = Instant::now();
            for i in 0..FLIPS {
                let at = base + chrono::Duration::seconds(i as i64 + 1);
                replay.send(&json!({"type": "clock", "at": at}).to_string());
                let id = ["a", "b", "c"][i % 3];
                replay.send(&json!({"type": "focus", "id": id}).to_string());
                sent.push(now_ms());
            }
            phases[1] += t_send.elapsed();
            // A transaction of this round is committed…
            let t_commit = Instant::now();
            eventually(20, "a batch committed", || async {
                (wal_stamp(&home) != stamp).then_some(())
            })
            .await;
            phases[2] += t_commit.elapsed();
            // …then kill at a moment that varies by round.
            let delay = if round % 10 == 9 {
                1200
            } else {
                (round as u64 * 37) % 250
            };
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let killed = now_ms();
            let t_kill = Instant::now();
            d.signal(libc::SIGKILL);
            d.wait_exit(Duration::from_secs(10)).expect("killed");
            for r in readers {
                let _ = r.await;
            }
            drop(ctx);
            wait_for_owner(&bus, false).await;
            phases[3] += t_kill.elapsed();
            rounds.push((sent, killed));
        }
        let took = started.elapsed();

        // The database opens as the daemon opens it, and is sound.
        let db = open_db(&home).await;
        db.integrity_check().await.expect("integrity_check ok");
        let audited: i64 = sqlx::query_scalar("SELECT coalesce(sum(count), 0) FROM audit")
            .fetch_one(db.pool())
            .await
            .expect("count");
        assert!(audited > 0, "no audit entry was ever written");
        // What each round lost: the changes after the last recorded one.
        // The first change not recorded was applied after it was sent, so
        // at the kill it was at most this old (or never applied at all).
        let mut worst = 0i64;
        let mut lost_total = 0usize;
        for (round, (sent, killed)) in rounds.iter().enumerate() {
            let recorded: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM history WHERE kind = 'focus' AND app_id IN (?, ?, ?)",
            )
            .bind(format!("org.r{round}.a"))
            .bind(format!("org.r{round}.b"))
            .bind(format!("org.r{round}.c"))
            .fetch_one(db.pool())
            .await
            .expect("count");
            let recorded = usize::try_from(recorded).unwrap_or(0);
            assert!(recorded <= sent.len(), "round {round}: {recorded} rows of {} changes", sent.len());
            if recorded < sent.len() {
                lost_total += sent.len() - recorded;
                let window = killed - sent[recorded];
                worst = worst.max(window);
                assert!(
                    window <= FLUSH_MS + WRITE_MS,
                    "round {round}: a change applied {window} ms before the kill was lost ({recorded} of {} recorded)",
                    sent.len()
                );
            }
        }
        eprintln!(
            "{ROUNDS} kill -9 in {:.1} s ({:.2} s a round): integrity ok, {audited} audited calls kept, \
             {lost_total} of {} focus changes lost or never applied, the oldest sent {worst} ms before its kill",
            took.as_secs_f64(),
            took.as_secs_f64() / ROUNDS as f64,
            ROUNDS * FLIPS
        );
        eprintln!(
            "a round on average: start {:?}, send {:?}, until a commit {:?}, kill and exit {:?}",
            phases[0] / ROUNDS as u32,
            phases[1] / ROUNDS as u32,
            phases[2] / ROUNDS as u32,
            phases[3] / ROUNDS as u32
        );
        // Close before the process ends: a SQLCipher connection closed by
        // its worker thread while exit handlers run can crash the test.
        db.pool().close().await;
        // And the daemon starts on it again (closing what the last crash
        // left open).
        let _d = Daemon::start(&bus, &home, &["--replay", &replay.arg()]).await;
    })
    .await
}

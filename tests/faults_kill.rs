//! kill -9 during a burst of audited calls, twenty times: the database
//! always opens again and passes `PRAGMA integrity_check`.

mod common;

use std::time::Duration;

use common::*;
use contextd::client::proxy::Context1Proxy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_survives_twenty_kills_during_audited_bursts() {
    with_timeout(240, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let replay = home.dir.path().join("r.jsonl");
        std::fs::write(&replay, window_line("w1", "org.a.App", "one", true)).expect("replay");
        let replay = replay.display().to_string();
        let conn = bus.connect().await;
        for round in 0..20u64 {
            let mut d = Daemon::start(&bus, &home, &["--replay", &replay]).await;
            let ctx = Context1Proxy::new(&conn).await.expect("proxy");
            eventually(10, "window", || async {
                ctx.get_active_window().await.ok()
            })
            .await;
            // A burst from four clients, killed at a varying moment.
            let mut burst = Vec::new();
            for _ in 0..4 {
                let c = bus.connect().await;
                burst.push(tokio::spawn(async move {
                    let p = Context1Proxy::new(&c).await.expect("proxy");
                    while p.get_active_window().await.is_ok() {}
                }));
            }
            // Every other round outlives the audit writer's one-second
            // batch, so that kills land both between and during writes.
            let ms = if round % 2 == 0 {
                1050 + 37 * (round % 9)
            } else {
                150 + 53 * (round % 7)
            };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            d.signal(libc::SIGKILL);
            d.wait_exit(Duration::from_secs(5)).expect("killed");
            for b in burst {
                let _ = b.await;
            }
            wait_for_owner(&bus, false).await;
        }
        // Open it as the daemon does and check it.
        let key_file = home.dir.path().join("state/contextd/db.key");
        let key =
            contextd::store::DbKey::parse(&std::fs::read(&key_file).expect("key")).expect("key");
        let (db, _tasks) = contextd::store::Db::open(
            &home.db_path(),
            &key,
            &contextd::store::KeySource::KeyFile(key_file),
        )
        .await
        .expect("the database opens after 20 kills");
        db.integrity_check().await.expect("integrity_check ok");
        let rows: i64 = sqlx::query_scalar("SELECT coalesce(sum(count), 0) FROM audit")
            .fetch_one(db.pool())
            .await
            .expect("count");
        eprintln!("audited calls that survived 20 kills: {rows}");
        assert!(rows > 0, "no audit entry was ever written");
        // Close before the process ends: a SQLCipher connection closed by
        // its worker thread while exit handlers run can crash the test.
        db.pool().close().await;
        // And the daemon starts on it again.
        let _d = Daemon::start(&bus, &home, &["--replay", &replay]).await;
    })
    .await
}

//! A full disk: `XDG_DATA_HOME` on a small tmpfs, filled while the broker
//! records. Reads go on; a grant asked for meanwhile fails with
//! `org.contextd.Error.Unavailable` saying the disk is full; `ListSources`
//! (and `contextctl sources`) shows the `database` unavailable with "disk
//! full"; when space returns, writing resumes by itself; and the file
//! passes `PRAGMA integrity_check` with everything stored before the disk
//! filled still there.
//!
//! The tmpfs is common::disk's (it needs root, as CI runs; elsewhere the
//! test says so and does nothing).

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::dbusmock::Mock;
use common::disk::{Tmpfs, fill};
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use serde_json::{Value, json};

async fn database_status(ctx: &Context1Proxy<'_>) -> Option<Value> {
    ctx.list_sources()
        .await
        .expect("ListSources")
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == "database")
}

fn window(id: &str, app: &str, title: &str) -> String {
    json!({"type": "window", "window": {"id": id, "app_id": app, "title": title}}).to_string()
}

fn focus(id: &str) -> String {
    json!({"type": "focus", "id": id}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_said_reads_go_on_and_writing_resumes() {
    with_timeout(180, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let data = home.dir.path().join("data");
        let Some(_tmpfs) = Tmpfs::mount_or_skip(&data, "3m") else {
            return;
        };
        home.write_policy(&[(&my_app_id(), &["windows", "windows.titles"])]);
        let mut replay = Replay::new(&home);
        // Long titles: every focus change is a row of about a kilobyte.
        replay.send(&window("a", "org.a.App", &"a".repeat(1000)));
        replay.send(&window("b", "org.b.App", &"b".repeat(1000)));
        replay.send(&focus("a"));
        // A scripted clock, a second between focus changes: a focus held
        // under a millisecond is no row (by design), and on a loaded
        // machine the broker may read several changes of the real clock
        // within one.
        let base = chrono::DateTime::<chrono::Utc>::from_timestamp(1_795_000_000, 0).expect("time");
        let mut d = Daemon::start_with(
            &bus,
            &home,
            &[
                "--replay",
                &replay.arg(),
                "--fake-clock",
                &base.to_rfc3339(),
            ],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let mut next = 0usize;
        let mut flip = |replay: &mut Replay| {
            next += 1;
            let at = base + chrono::Duration::seconds(next as i64);
            replay.send(&json!({"type": "clock", "at": at}).to_string());
            replay.send(&focus(if next.is_multiple_of(2) { "a" } else { "b" }));
        };

        // Before: a grant stored, a timeline written.
        consent
            .set_grant("org.stored.Before", "windows", "allow", 0)
            .await
            .expect("grant before the disk fills");
        for _ in 0..40 {
            flip(&mut replay);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        ctx.get_active_window().await.expect("read");
        let before = eventually(20, "the timeline is written", || async {
            let db = open_db(&home).await;
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM history")
                .fetch_one(db.pool())
                .await
                .expect("count");
            db.pool().close().await;
            (n >= 30).then_some(n)
        })
        .await;
        assert!(
            database_status(&ctx).await.is_none(),
            "a healthy database is no source"
        );

        // The disk fills. Recording goes on until a write finds no room.
        let filler = fill(&data);
        let problem = eventually(60, "the database said to be unavailable", || {
            let ctx = &ctx;
            flip(&mut replay);
            async move {
                // Reads go on all along.
                ctx.get_active_window()
                    .await
                    .expect("a read while the disk is full");
                database_status(ctx)
                    .await
                    .filter(|s| s["available"] == false)
            }
        })
        .await;
        eprintln!("ListSources while full: {problem}");
        let error = problem["last_error"].as_str().unwrap_or_default();
        assert!(error.contains("disk full"), "{problem}");
        assert!(
            error.contains(&home.db_path().display().to_string()),
            "{problem}"
        );
        // contextctl shows it.
        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin())
                .arg("sources")
                .env_clear()
                .envs(home.envs(&bus)),
            20,
        );
        assert!(st.success(), "{err}");
        assert!(
            out.contains("database") && out.contains("disk full"),
            "{out}"
        );

        // A grant now is refused with a clear error, and not half-made.
        match consent
            .set_grant("org.refused.During", "windows", "allow", 0)
            .await
        {
            Err(zbus::Error::MethodError(name, Some(msg), _)) => {
                eprintln!("SetGrant while full: {name}: {msg}");
                assert_eq!(name.as_str(), "org.contextd.Error.Unavailable");
                assert!(msg.contains("disk") && msg.contains("full"), "{msg}");
                assert!(msg.contains("nothing was changed"), "{msg}");
            }
            other => panic!("SetGrant on a full disk: {other:?}"),
        }
        let grants: Vec<Value> = consent
            .list_grants()
            .await
            .expect("ListGrants")
            .iter()
            .map(dict_to_json)
            .collect();
        assert!(
            !format!("{grants:?}").contains("org.refused.During"),
            "a grant that could not be stored is in force: {grants:?}"
        );
        // The broker holds what it cannot write in bounded queues only:
        // its memory is looked at in tests/it/slow_readers.rs; here, that it
        // is alive and answering.
        let sources = ctx.list_sources().await.expect("alive");
        assert!(!sources.is_empty());

        // Space returns: writing resumes by itself.
        std::fs::remove_file(&filler).expect("free the space");
        let freed = Instant::now();
        eventually(60, "the database available again", || {
            let ctx = &ctx;
            flip(&mut replay);
            async move {
                database_status(ctx)
                    .await
                    .filter(|s| s["available"] == true)
            }
        })
        .await;
        eprintln!(
            "writing resumed {:.1} s after the space returned",
            freed.elapsed().as_secs_f64()
        );
        consent
            .set_grant("org.stored.After", "windows", "allow", 0)
            .await
            .expect("a grant once there is room again");

        // Nothing stored before is lost, and the file is sound.
        d.signal(libc::SIGTERM);
        assert_eq!(
            d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(0),
            "{}",
            d.stderr()
        );
        let log = d.stderr();
        assert!(log.contains("disk full"), "the log does not say: {log}");
        let db = open_db(&home).await;
        db.integrity_check().await.expect("integrity_check ok");
        let apps: Vec<String> = sqlx::query_scalar("SELECT app_id FROM decisions ORDER BY app_id")
            .fetch_all(db.pool())
            .await
            .expect("decisions");
        assert_eq!(apps, ["org.stored.After", "org.stored.Before"]);
        let after: i64 = sqlx::query_scalar("SELECT count(*) FROM history")
            .fetch_one(db.pool())
            .await
            .expect("count");
        eprintln!("timeline rows: {before} before the disk filled, {after} at the end");
        assert!(
            after > before,
            "rows were lost or none written after: {before} → {after}"
        );
        db.pool().close().await;
    })
    .await
}

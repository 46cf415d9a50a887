//! The store is encrypted at rest: no plaintext in the files, sqlite3
//! cannot read them, and a wrong key never touches the file's bytes: the
//! broker moves it aside and runs degraded, saying why (issue 32; before,
//! it refused to start). A missing key makes no new key.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;
use contextd::client::proxy::Context1Proxy;

const PLANTED_APP: &str = "org.planted.SecretApp";

/// Start the broker (with `extra` environment), read why it runs
/// degraded (the `recovery` entry of ListSources), stop it.
async fn degraded(bus: &Bus, home: &Home, extra: &[(&str, &str)]) -> String {
    let mut d = Daemon::start_with(bus, home, &[], extra).await;
    let conn = bus.connect().await;
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    let said = ctx
        .list_sources()
        .await
        .expect("ListSources")
        .iter()
        .map(contextd::client::json::dict_to_json)
        .find(|s| s["name"] == "recovery")
        .and_then(|s| s["last_error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("not degraded: {}", d.stderr()));
    d.signal(libc::SIGTERM);
    d.wait_exit(Duration::from_secs(10)).expect("stopped");
    said
}

fn files(home: &Home) -> Vec<std::path::PathBuf> {
    let dir = home.dir.path().join("data/contextd");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .expect("data dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        // The room kept for revocations (store::reserve) is ballast, not
        // data: it stays with whichever database is current.
        .filter(|p| !p.ends_with("contextd.db.reserve"))
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_has_no_plaintext_and_a_wrong_key_keeps_every_byte() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        // A grant in policy.toml for the planted app id and for us: our
        // reads are audited, so app ids land in the database.
        home.write_policy(&[
            (PLANTED_APP, &["windows"]),
            (&my_app_id(), &["windows.titles"]),
        ]);
        let replay = home.dir.path().join("replay.jsonl");
        std::fs::write(
            &replay,
            window_line("w1", PLANTED_APP, "PLANTED secret title", true),
        )
        .expect("replay");
        let mut d = Daemon::start(&bus, &home, &["--replay", &replay.display().to_string()]).await;
        let conn = bus.connect().await;
        let p = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "window replayed", || async {
            p.get_active_window().await.ok()
        })
        .await;
        for _ in 0..20 {
            p.get_active_window().await.expect("read");
        }
        // Let the audit batch land, then stop cleanly.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        d.signal(libc::SIGTERM);
        assert_eq!(
            d.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()),
            Some(0)
        );

        // The database holds our audit rows...
        let db = home.db_path();
        assert!(db.exists());
        let key_file = home.dir.path().join("state/contextd/db.key");
        let key = contextd::internals::store::DbKey::parse(&std::fs::read(&key_file).expect("key"))
            .expect("key parses");
        {
            let (db_open, _t) = contextd::internals::store::Db::open(
                &db,
                &key,
                &contextd::internals::store::KeySource::KeyFile(key_file.clone()),
            )
            .await
            .expect("open with the right key");
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM audit WHERE app_id = ?")
                .bind(my_app_id())
                .fetch_one(db_open.pool())
                .await
                .expect("count");
            assert!(n >= 1, "our reads were audited");
            db_open.integrity_check().await.expect("integrity");
            db_open.pool().close().await;
        }
        // ...yet no file of it shows them in plaintext.
        let me = my_app_id();
        let my_name = me.rsplit('/').next().unwrap_or(&me).to_owned();
        for f in files(&home) {
            let bytes = std::fs::read(&f).expect("read");
            let text = String::from_utf8_lossy(&bytes);
            for needle in [
                PLANTED_APP,
                my_name.as_str(),
                "SQLite format 3",
                "decisions",
                "audit",
            ] {
                assert!(
                    !text.contains(needle),
                    "{} contains {needle:?} in plaintext",
                    f.display()
                );
            }
        }
        let (st, _out, err) = run_cmd(
            Command::new("sqlite3")
                .arg(&db)
                .arg("SELECT * FROM sqlite_master"),
            10,
        );
        assert!(!st.success(), "sqlite3 opened the encrypted database");
        assert!(err.contains("not a database"), "{err}");

        // A wrong key: exit 1, a clear error naming the key source, and the
        // files are byte for byte what they were.
        let before: Vec<(std::path::PathBuf, Vec<u8>)> = files(&home)
            .into_iter()
            .map(|f| (f.clone(), std::fs::read(&f).expect("read")))
            .collect();
        std::fs::remove_file(&key_file).expect("rm key");
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&key_file)
                .expect("key");
            f.write_all(
                contextd::internals::store::DbKey::random()
                    .expect("random")
                    .hex()
                    .as_bytes(),
            )
            .expect("write");
        }
        let err = degraded(&bus, &home, &[]).await;
        assert!(
            err.contains("cannot decrypt") && err.contains("db.key") && err.contains("wrong key"),
            "{err}"
        );
        // Each file's bytes are kept, under the name it was moved to.
        let after: Vec<(std::path::PathBuf, Vec<u8>)> = files(&home)
            .into_iter()
            .map(|f| (f.clone(), std::fs::read(&f).expect("read")))
            .collect();
        for (path, bytes) in &before {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let suffix = name.strip_prefix("contextd.db").unwrap_or(name);
            assert!(
                after.iter().any(|(p, b)| {
                    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    n.starts_with("contextd.db.broken-")
                        && (if suffix.is_empty() {
                            !n.ends_with("-wal") && !n.ends_with("-shm")
                        } else {
                            n.ends_with(suffix)
                        })
                        && b == bytes
                }),
                "{} was not kept byte for byte",
                path.display()
            );
        }

        // A key file others can read: refused.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644))
                .expect("chmod");
        }
        let (st, _out, err) = run_cmd(
            Command::new(contextd_bin())
                .env_clear()
                .envs(home.envs(&bus)),
            20,
        );
        assert_eq!(st.code(), Some(1));
        assert!(err.contains("readable by other users"), "{err}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_for_an_existing_database_is_degraded_not_a_new_key() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut d = Daemon::start(&bus, &home, &[]).await;
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(5)).expect("stopped");
        let key_file = home.dir.path().join("state/contextd/db.key");
        std::fs::remove_file(&key_file).expect("rm");
        let err = degraded(&bus, &home, &[]).await;
        assert!(err.contains("no key was found"), "{err}");
        assert!(
            !key_file.exists(),
            "a new key was created for an existing database"
        );

        // A systemd credential is used first.
        let creds = tempfile::tempdir().expect("creds");
        std::fs::write(
            creds.path().join("dbkey"),
            contextd::internals::store::DbKey::random()
                .expect("k")
                .hex(),
        )
        .expect("write");
        let creds_dir = creds.path().display().to_string();
        let err = degraded(&bus, &home, &[("CREDENTIALS_DIRECTORY", &creds_dir)]).await;
        assert!(err.contains("systemd credential"), "{err}");
    })
    .await
}

//! `contextctl key rotate` (issue 32): the database is re-encrypted under
//! a new key kept where the old one was (the key file, or the item in a
//! real Secret Service, GNOME Keyring: common::keyring); every grant
//! is kept, the broker goes on reading and writing, and the old key no
//! longer opens the file.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::keyring;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_keeps_every_grant_and_the_old_key_no_longer_opens_the_file() {
    with_timeout(120, async {
        let mut m = Managed::start("[consent]\nundecided = \"deny\"\n", &[]).await;
        let conn = m.bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let me = my_app_id();
        consent
            .set_grant(&me, "windows", "allow", 0)
            .await
            .expect("grant");
        consent
            .set_grant("org.example.Other", "media.playback", "deny", 0)
            .await
            .expect("deny");
        let list = || async {
            let mut v: Vec<String> = consent
                .list_grants()
                .await
                .expect("ListGrants")
                .iter()
                .map(|g| {
                    let g = dict_to_json(g);
                    format!("{} {} {}", g["app_id"], g["category"], g["decision"])
                })
                .collect();
            v.sort();
            v
        };
        let before = list().await;
        let key_file = m.home.dir.path().join("state/contextd/db.key");
        let old_key = std::fs::read(&key_file).expect("key");

        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin())
                .args(["key", "rotate"])
                .env_clear()
                .envs(m.home.envs(&m.bus))
                .env("DBUS_SYSTEM_BUS_ADDRESS", &m.sys.address),
            30,
        );
        assert!(st.success(), "{out}{err}");
        assert!(out.contains("db.key"), "{out}");
        let new_key = std::fs::read(&key_file).expect("key");
        assert_ne!(old_key, new_key, "the key file holds the old key");

        // The broker goes on: the same grants, reads, a new write.
        assert_eq!(list().await, before);
        ctx.get_active_window()
            .await
            .expect("a read after the rotation");
        consent
            .set_grant("org.example.After", "power", "allow", 0)
            .await
            .expect("a write after the rotation");
        m.daemon.signal(libc::SIGTERM);
        assert_eq!(
            m.daemon
                .wait_exit(Duration::from_secs(10))
                .and_then(|s| s.code()),
            Some(0),
            "{}",
            m.daemon.stderr()
        );

        // The old key opens nothing.
        {
            use sqlx::{ConnectOptions, Connection};
            let old = contextd::internals::store::DbKey::parse(&old_key).expect("old key");
            let mut c = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(m.home.db_path())
                .read_only(true)
                .pragma("key", format!("\"x'{}'\"", old.hex()))
                .connect()
                .await
                .expect("a connection (the key is checked at the first read)");
            let r = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sqlite_master")
                .fetch_one(&mut c)
                .await;
            assert!(r.is_err(), "the old key still opens the database");
            let _ = c.close().await;
        }
        // The new one opens it, with every grant.
        let db = open_db(&m.home).await;
        let mut apps: Vec<String> =
            sqlx::query_scalar("SELECT app_id || ' ' || category FROM decisions")
                .fetch_all(db.pool())
                .await
                .expect("decisions");
        apps.sort();
        db.pool().close().await;
        let mut want = vec![
            format!("{me} windows"),
            "org.example.After power".to_owned(),
            "org.example.Other media.playback".to_owned(),
        ];
        want.sort();
        assert_eq!(apps, want);
    })
    .await
}

/// Whether `key` opens the database at `path` (read-only, nothing written).
async fn opens(path: &std::path::Path, key: &[u8]) -> bool {
    use sqlx::{ConnectOptions, Connection};
    let key = contextd::internals::store::DbKey::parse(key).expect("a key");
    let Ok(mut c) = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .pragma("key", format!("\"x'{}'\"", key.hex()))
        .connect()
        .await
    else {
        return false;
    };
    let r = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sqlite_master")
        .fetch_one(&mut c)
        .await;
    let _ = c.close().await;
    r.is_ok()
}

/// The key in a real Secret Service (GNOME Keyring): the rotation
/// replaces the item's secret, writes no key file, keeps every grant, and
/// the next start opens the database with the new secret; the old one
/// opens nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_in_the_secret_service_replaces_the_item_and_the_next_start_opens_it() {
    with_timeout(120, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit =
            common::dbusmock::Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"])
                .await;
        let home = Home::new();
        let _keyring = keyring::Keyring::start(&bus, &home).await;
        let key_file = home.dir.path().join("state/contextd/db.key");
        let env = [("DBUS_SYSTEM_BUS_ADDRESS", sys.address.as_str())];
        let start = || Daemon::start_with(&bus, &home, &[], &env);
        let mut d = start().await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        consent
            .set_grant("org.example.Kept", "windows", "allow", 0)
            .await
            .expect("grant");
        let items = keyring::contextd_items(&bus).await;
        assert_eq!(items.len(), 1, "the key is in the keyring");
        let old = keyring::secret(&bus, &items[0]).await;

        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin())
                .args(["key", "rotate"])
                .env_clear()
                .envs(home.envs(&bus))
                .env("DBUS_SYSTEM_BUS_ADDRESS", &sys.address),
            30,
        );
        assert!(st.success(), "{out}{err}");
        assert!(out.contains("Secret Service"), "{out}");
        let items = keyring::contextd_items(&bus).await;
        assert_eq!(items.len(), 1, "one item, replaced: {items:?}");
        let new = keyring::secret(&bus, &items[0]).await;
        assert_ne!(old, new, "the item holds the old key");
        assert!(!key_file.exists(), "a key file beside the keyring");
        consent
            .set_grant("org.example.After", "power", "allow", 0)
            .await
            .expect("a write after the rotation");
        d.signal(libc::SIGTERM);
        assert_eq!(
            d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(0),
            "{}",
            d.stderr()
        );
        assert!(
            !opens(&home.db_path(), &old).await,
            "the old key opens the database"
        );
        assert!(
            opens(&home.db_path(), &new).await,
            "the new key does not open it"
        );

        // The next start takes the new secret from the keyring and opens
        // the same database, every grant in it, not degraded.
        let _d = start().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let sources: Vec<serde_json::Value> = ctx
            .list_sources()
            .await
            .expect("ListSources")
            .iter()
            .map(dict_to_json)
            .collect();
        assert!(
            !sources.iter().any(|s| s["name"] == "recovery"),
            "{sources:?}"
        );
        let mut grants: Vec<String> = consent
            .list_grants()
            .await
            .expect("ListGrants")
            .iter()
            .map(|g| {
                dict_to_json(g)["app_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        grants.sort();
        assert_eq!(grants, ["org.example.After", "org.example.Kept"]);
    })
    .await
}

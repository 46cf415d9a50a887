//! Revocation always wins (issue 32): on a full disk a revoke is in force
//! at once (the next read is refused), the write the disk refused is
//! retried and said (`revocations` in ListSources), and once space is
//! back a restart still refuses: the revoked grant never comes back.
//!
//! A crash while the disk is still full loses nothing either: the store
//! keeps room for revocations (store::reserve) and gives it back when one
//! finds the disk full, so the revocation is in the database before the
//! kill -9; the restart, with the disk still full and after space
//! returns, refuses.
//!
//! `XDG_DATA_HOME` on a small tmpfs, common::disk's (needs root;
//! elsewhere the test says so and does nothing).

use crate::common;

use std::time::Duration;

use common::dbusmock::Mock;
use common::disk::{Tmpfs, fill};
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use serde_json::{Value, json};

/// The `ListSources` entry `name` (the revocation tests share these).
pub(crate) async fn source(ctx: &Context1Proxy<'_>, name: &str) -> Option<Value> {
    ctx.list_sources()
        .await
        .expect("ListSources")
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == name)
}

/// Refused by consent.
pub(crate) fn refused<T>(r: zbus::Result<T>) -> bool {
    matches!(r, Err(zbus::Error::MethodError(ref n, _, _)) if n.as_str() == "org.contextd.Error.NotAllowed")
}

/// The broker on `bus`, with `sys` as its system bus (polkit) and the
/// replay as its sources.
pub(crate) async fn start(bus: &Bus, sys: &Bus, home: &Home, replay: &Replay) -> Daemon {
    Daemon::start_with(
        bus,
        home,
        &["--replay", &replay.arg()],
        &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
    )
    .await
}

/// Our grant to `windows`, stored through Consent1, and a read with it.
pub(crate) async fn granted(
    conn: &zbus::Connection,
) -> (Context1Proxy<'static>, Consent1Proxy<'static>) {
    let ctx = Context1Proxy::new(conn).await.expect("proxy");
    let consent = Consent1Proxy::new(conn).await.expect("proxy");
    consent
        .set_grant(&my_app_id(), "windows", "allow", 0)
        .await
        .expect("grant");
    ctx.get_active_window()
        .await
        .expect("a read with the grant");
    (ctx, consent)
}

/// Fill the disk under `data`, and flip the focus (each change a timeline
/// row) until the broker says its database is unavailable; the filler
/// file.
async fn fill_until_unavailable(
    data: &std::path::Path,
    replay: &mut Replay,
    ctx: &Context1Proxy<'_>,
) -> std::path::PathBuf {
    let filler = fill(data);
    let mut next = 0usize;
    eventually(60, "the database said to be unavailable", || {
        next += 1;
        replay.send(
            &json!({"type": "focus", "id": if next.is_multiple_of(2) { "a" } else { "b" }})
                .to_string(),
        );
        async move {
            source(ctx, "database")
                .await
                .filter(|s| s["available"] == false)
        }
    })
    .await;
    filler
}

/// A broker whose data directory is a 3 MB tmpfs, with two windows of
/// long titles in its replay (the timeline then fills the disk fast):
/// what both tests start from. `None` (and the test does nothing) where
/// no tmpfs can be mounted.
struct OnTmpfs {
    bus: Bus,
    sys: Bus,
    _polkit: Mock,
    home: Home,
    data: std::path::PathBuf,
    _tmpfs: Tmpfs,
    replay: Replay,
    d: Daemon,
}

impl OnTmpfs {
    async fn start() -> Option<OnTmpfs> {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let data = home.dir.path().join("data");
        let _tmpfs = Tmpfs::mount_or_skip(&data, "3m")?;
        let mut replay = Replay::new(&home);
        let window = |id: &str, app: &str| {
            json!({"type": "window", "window": {"id": id, "app_id": app, "title": id.repeat(1000)}})
                .to_string()
        };
        replay.send(&window("a", "org.a.App"));
        replay.send(&window("b", "org.b.App"));
        replay.send(&json!({"type": "focus", "id": "a"}).to_string());
        let d = start(&bus, &sys, &home, &replay).await;
        Some(OnTmpfs {
            bus,
            sys,
            _polkit,
            home,
            data,
            _tmpfs,
            replay,
            d,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_on_a_full_disk_holds_now_and_after_a_restart() {
    with_timeout(180, async {
        let Some(OnTmpfs {
            bus,
            sys,
            _polkit,
            home,
            data,
            _tmpfs,
            mut replay,
            mut d,
        }) = OnTmpfs::start().await
        else {
            return;
        };
        let conn = bus.connect().await;
        // A stored grant: we read.
        let (ctx, consent) = granted(&conn).await;
        let me = my_app_id();

        // The disk fills; recording goes on until a write finds no room.
        let filler = fill_until_unavailable(&data, &mut replay, &ctx).await;

        // The revoke holds at once, stored or not.
        consent
            .revoke(&me, "windows")
            .await
            .expect("a revoke on a full disk");
        assert!(
            refused(ctx.get_active_window().await),
            "the read after a revoke on a full disk was not refused"
        );
        // The write usually finds no room and waits (said as the
        // `revocations` entry); SQLite may still find room in its
        // write-ahead log, and then it is simply stored.
        let deadline = std::time::Instant::now() + Duration::from_secs(8);
        let mut said = None;
        while std::time::Instant::now() < deadline && said.is_none() {
            said = source(&ctx, "revocations")
                .await
                .filter(|s| s["available"] == false);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        match &said {
            Some(said) => {
                eprintln!("while full: {said}");
                assert!(
                    said["last_error"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("not yet stored"),
                    "{said}"
                );
            }
            None => eprintln!("the full disk still took the revocation (room in the WAL)"),
        }
        // Still refused while it waits.
        assert!(refused(ctx.get_active_window().await));

        // Space returns; a restart (a clean stop) still refuses.
        std::fs::remove_file(&filler).expect("free the space");
        d.signal(libc::SIGTERM);
        assert_eq!(
            d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(0),
            "{}",
            d.stderr()
        );
        let _d = start(&bus, &sys, &home, &replay).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert!(
            refused(ctx.get_active_window().await),
            "a restart resurrected the revoked grant; the first broker said:\n{}",
            d.stderr()
        );
        let grants: Vec<Value> = Consent1Proxy::new(&conn)
            .await
            .expect("proxy")
            .list_grants()
            .await
            .expect("ListGrants")
            .iter()
            .map(dict_to_json)
            .collect();
        assert!(
            !grants.iter().any(|g| g["app_id"] == me.as_str()),
            "{grants:?}"
        );
    })
    .await
}

async fn grants_of(conn: &zbus::Connection, app: &str) -> Vec<Value> {
    Consent1Proxy::new(conn)
        .await
        .expect("proxy")
        .list_grants()
        .await
        .expect("ListGrants")
        .iter()
        .map(dict_to_json)
        .filter(|g| g["app_id"] == app)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_the_disk_is_still_full_does_not_bring_the_grant_back() {
    with_timeout(180, async {
        let Some(OnTmpfs {
            bus,
            sys,
            _polkit,
            home,
            data,
            _tmpfs,
            mut replay,
            mut d,
        }) = OnTmpfs::start().await
        else {
            return;
        };
        let conn = bus.connect().await;
        // A stored grant: we read.
        let (ctx, consent) = granted(&conn).await;
        let me = my_app_id();
        let reserve = home.db_path().with_extension("db.reserve");
        assert!(reserve.exists(), "no room kept for revocations");

        // The disk fills while the broker records.
        let filler = fill_until_unavailable(&data, &mut replay, &ctx).await;

        // Revoke, and the broker dies at once, the disk still full.
        consent
            .revoke(&me, "windows")
            .await
            .expect("a revoke on a full disk");
        assert!(refused(ctx.get_active_window().await));
        d.signal(libc::SIGKILL);
        d.wait_exit(Duration::from_secs(10)).expect("killed");
        let first = d.stderr();
        // Usually the revoke finds no room and takes the reserve; SQLite
        // may still find room in its write-ahead log.
        eprintln!(
            "the revoke {}",
            if first.contains("the room reserved for revocations is given back") {
                "took the reserved room"
            } else {
                "found room in the WAL"
            }
        );

        // A restart on the full disk refuses.
        let mut d = start(&bus, &sys, &home, &replay).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert!(
            refused(ctx.get_active_window().await),
            "a restart on the full disk resurrected the revoked grant; the first broker said:\n{first}\nthe second:\n{}",
            d.stderr()
        );
        assert_eq!(grants_of(&conn, &me).await, Vec::<Value>::new());

        // Space returns; another restart still refuses, and room is kept
        // again for the next revocation.
        std::fs::remove_file(&filler).expect("free the space");
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(10)).expect("stopped");
        let _d = start(&bus, &sys, &home, &replay).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert!(refused(ctx.get_active_window().await));
        assert_eq!(grants_of(&conn, &me).await, Vec::<Value>::new());
        assert!(reserve.exists(), "the room for revocations was not kept again");
    })
    .await
}

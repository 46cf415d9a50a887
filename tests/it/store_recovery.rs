//! A file at the database's path that cannot be used is never taken for a
//! new database (issue 32): a 0-byte file, one cut short, random bytes,
//! one written by a newer version. Its bytes are kept (moved aside as
//! `contextd.db.broken-TIME`, with its `-wal`), the broker starts
//! degraded and says why (`ListSources`, `contextctl status`, the
//! `Recovery` property, the dashboard, one notification), and nothing undecided is
//! asked, let alone allowed, until the user acts (`contextctl recovery
//! dismiss`). A missing key for an existing database makes no new key:
//! the file stays where it is and the broker runs degraded in memory.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::dbusmock::Mock;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use serde_json::Value;

/// A broker that ran once (a key and a database) and stopped cleanly;
/// the session bus, the system bus with a polkit that allows managing.
struct Setup {
    bus: Bus,
    sys: Bus,
    _polkit: Mock,
    home: Home,
}

async fn ran_once() -> Setup {
    let bus = Bus::start();
    let sys = Bus::start();
    let polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
    let home = Home::new();
    // A real installation's default: undecided access is asked.
    home.ask_undecided();
    let mut d = start(&bus, &sys, &home).await;
    let conn = bus.connect().await;
    Consent1Proxy::new(&conn)
        .await
        .expect("proxy")
        .set_grant("org.example.Kept", "windows", "allow", 0)
        .await
        .expect("a grant");
    stop(&mut d);
    Setup {
        bus,
        sys,
        _polkit: polkit,
        home,
    }
}

async fn start(bus: &Bus, sys: &Bus, home: &Home) -> Daemon {
    let replay = home.dir.path().join("replay.jsonl");
    std::fs::write(
        &replay,
        window_line("w1", "org.gnome.TextEditor", "notes.txt", true),
    )
    .expect("replay");
    Daemon::start_with(
        bus,
        home,
        &["--replay", &replay.display().to_string()],
        &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
    )
    .await
}

fn stop(d: &mut Daemon) {
    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0),
        "{}",
        d.stderr()
    );
}

fn data_dir(home: &Home) -> PathBuf {
    home.dir.path().join("data/contextd")
}

fn key_file(home: &Home) -> PathBuf {
    home.dir.path().join("state/contextd/db.key")
}

/// The files set aside (`contextd.db.broken-*`, not their -wal/-shm).
fn set_aside(home: &Home) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir(home))
        .expect("data dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.starts_with("contextd.db.broken-") && !n.ends_with("-wal") && !n.ends_with("-shm")
        })
        .collect();
    v.sort();
    v
}

async fn recovery_source(ctx: &Context1Proxy<'_>) -> Option<Value> {
    ctx.list_sources()
        .await
        .expect("ListSources")
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == "recovery")
}

/// The broker runs degraded: it says so (ListSources, the Recovery
/// property, contextctl status), and an undecided read is refused at
/// once, with no prompt. Returns what ListSources says.
async fn says_degraded(s: &Setup, why: &str) -> String {
    let conn = s.bus.connect().await;
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    let consent = Consent1Proxy::new(&conn).await.expect("proxy");
    let src = recovery_source(&ctx)
        .await
        .unwrap_or_else(|| panic!("no recovery entry in ListSources"));
    assert_eq!(src["available"], false, "{src}");
    let said = src["last_error"].as_str().unwrap_or_default().to_owned();
    assert!(said.contains("degraded"), "{said}");
    assert!(
        said.contains(why),
        "ListSources does not say {why:?}: {said}"
    );
    let prop = consent.recovery().await.expect("Recovery");
    assert!(prop.contains(why), "Recovery: {prop}");
    let (st, out, err) = run_cmd(
        Command::new(contextctl_bin())
            .arg("status")
            .env_clear()
            .envs(s.home.envs(&s.bus)),
        20,
    );
    assert!(st.success(), "{err}");
    assert!(out.contains("recovery") && out.contains(why), "{out}");
    // config.toml says "ask": degraded, nothing undecided is asked (a
    // prompt would wait for its timeout); it is refused at once.
    match within(10, "an undecided read", ctx.get_active_window()).await {
        Err(zbus::Error::MethodError(name, Some(msg), _)) => {
            assert_eq!(name.as_str(), "org.contextd.Error.NotAllowed", "{msg}");
            assert!(msg.contains("degraded"), "{msg}");
        }
        other => panic!("an undecided read while degraded: {other:?}"),
    }
    let pending = consent.list_pending().await.expect("ListPending");
    assert!(pending.is_empty(), "a prompt is up while degraded");
    // The dashboard says it on every page, with what to do.
    let page = common::dashboard::page(&consent, "now").await;
    assert!(
        page.contains("Your database could not be used")
            && page.contains(why)
            && page.contains("contextctl recovery dismiss")
            && page.contains("contextctl import FILE"),
        "the dashboard does not say the broker is degraded: {page}"
    );
    said
}

/// Start on the damaged `home`, check the original bytes were moved aside
/// untouched and the broker says `why`; then stop.
async fn degraded_with(s: &Setup, original: &[u8], why: &str) -> PathBuf {
    let key_before = std::fs::read(key_file(&s.home)).ok();
    let mut d = start(&s.bus, &s.sys, &s.home).await;
    let said = says_degraded(s, why).await;
    eprintln!("degraded: {said}");
    let aside = set_aside(&s.home);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(
        std::fs::read(&aside[0]).expect("aside") == original,
        "the bytes set aside are not the original ones"
    );
    assert!(said.contains(&aside[0].display().to_string()), "{said}");
    assert_eq!(
        std::fs::read(key_file(&s.home)).ok(),
        key_before,
        "the key changed"
    );
    stop(&mut d);
    aside[0].clone()
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("write");
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    let mut f = std::fs::File::open("/dev/urandom").expect("urandom");
    std::io::Read::read_exact(&mut f, &mut v).expect("random");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_database_is_set_aside_and_the_broker_runs_degraded_until_dismissed() {
    with_timeout(120, async {
        let notifier_bus_note = "one notification";
        let s = ran_once().await;
        let notifier = Mock::template(
            &s.bus.address,
            false,
            "notification_daemon",
            "org.freedesktop.Notifications",
        )
        .await;
        write(&s.home.db_path(), b"");
        let _ = std::fs::remove_file(s.home.db_path().with_extension("db-wal"));
        degraded_with(&s, b"", "empty").await;
        // The user was told once.
        let conn = s.bus.connect().await;
        let notifies = || async {
            let m = notifier
                .call(
                    &conn,
                    "/org/freedesktop/Notifications",
                    "org.freedesktop.DBus.Mock",
                    "GetCalls",
                    &(),
                )
                .await;
            let calls: Vec<(u64, String, Vec<zbus::wire::OwnedVariant>)> =
                m.body().deserialize().expect("calls");
            calls.into_iter().filter(|c| c.1 == "Notify").count()
        };
        assert_eq!(notifies().await, 1, "{notifier_bus_note}");

        // Still degraded after a restart (no second notification), until
        // the user dismisses it.
        let mut d = start(&s.bus, &s.sys, &s.home).await;
        says_degraded(&s, "empty").await;
        assert_eq!(notifies().await, 1, "told again on restart");
        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin())
                .args(["recovery", "dismiss"])
                .env_clear()
                .envs(s.home.envs(&s.bus))
                .env("DBUS_SYSTEM_BUS_ADDRESS", &s.sys.address),
            20,
        );
        assert!(st.success(), "{out}{err}");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert_eq!(
            recovery_source(&ctx).await.map(|s| s["available"].clone()),
            Some(Value::Bool(true))
        );
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let page = common::dashboard::page(&consent, "").await;
        assert!(
            page.contains("Who may see what") && !page.contains("could not be used"),
            "the dashboard still says degraded after the dismissal: {page}"
        );
        stop(&mut d);
        let _d = start(&s.bus, &s.sys, &s.home).await;
        assert!(
            recovery_source(&ctx).await.is_none(),
            "degraded again after the dismissal"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_database_is_set_aside_byte_for_byte() {
    with_timeout(120, async {
        let s = ran_once().await;
        let db = s.home.db_path();
        let len = std::fs::metadata(&db).expect("db").len();
        assert!(len >= 2 * 4096, "{len}");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&db)
            .expect("open")
            .set_len(len - 1000)
            .expect("truncate");
        let original = std::fs::read(&db).expect("read");
        degraded_with(&s, &original, "damaged").await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_are_set_aside_and_no_new_key_is_made() {
    with_timeout(120, async {
        let s = ran_once().await;
        let original = random_bytes(16 * 4096);
        write(&s.home.db_path(), &original);
        degraded_with(&s, &original, "cannot decrypt").await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_a_newer_version_is_set_aside() {
    with_timeout(120, async {
        let s = ran_once().await;
        {
            let db = open_db(&s.home).await;
            sqlx::query(
                "INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, execution_time)
                 VALUES (9999, 'from the future', CURRENT_TIMESTAMP, 1, x'00', 0)",
            )
            .execute(db.pool())
            .await
            .expect("a newer migration");
            db.pool().close().await;
        }
        let original = std::fs::read(s.home.db_path()).expect("read");
        let wal = s.home.db_path().with_extension("db-wal");
        let wal_bytes = std::fs::read(&wal).ok();
        let aside = degraded_with(&s, &original, "newer contextd").await;
        // Its write-ahead log went with it.
        if let Some(w) = wal_bytes {
            let mut aside_wal = aside.into_os_string();
            aside_wal.push("-wal");
            assert!(std::fs::read(aside_wal).expect("-wal aside") == w);
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_leaves_the_database_in_place_and_makes_no_key() {
    with_timeout(120, async {
        let s = ran_once().await;
        std::fs::remove_file(key_file(&s.home)).expect("rm key");
        let original = std::fs::read(s.home.db_path()).expect("read");
        let mut d = start(&s.bus, &s.sys, &s.home).await;
        says_degraded(&s, "no key was found").await;
        stop(&mut d);
        assert!(!key_file(&s.home).exists(), "a new key was made");
        assert!(set_aside(&s.home).is_empty(), "the file was moved");
        assert!(
            std::fs::read(s.home.db_path()).expect("read") == original,
            "the database changed"
        );
    })
    .await
}

//! `session` follows logind (a python-dbusmock logind on a private system
//! bus): lock, unlock, idle, PrepareForSleep, for methods and subscribers;
//! without logind, the ScreenSaver on the session bus stands in.

use crate::common;
use crate::fdo;

use common::*;
use fdo::*;
use zbus::wire::{ObjectPath, Variant};

const LOGIN1: &str = "org.freedesktop.login1";
const MANAGER: &str = "/org/freedesktop/login1";
const MANAGER_IFACE: &str = "org.freedesktop.login1.Manager";
const SESSION: &str = "/org/freedesktop/login1/session/c1";
const SESSION_IFACE: &str = "org.freedesktop.login1.Session";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_follows_lock_idle_and_sleep() {
    with_timeout(90, async {
        let buses = Buses::start();
        let logind = Mock::template(&buses.system.address, true, "logind", LOGIN1).await;
        let sys = buses.system.connect().await;
        logind
            .call(
                &sys,
                MANAGER,
                MOCK_IFACE,
                "AddSession",
                &("c1", "seat0", 1000u32, "alice", true),
            )
            .await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["session"])]);
        let _d = buses.daemon(&home, &[("XDG_SESSION_ID", "c1")]).await;
        let conn = buses.session.connect().await;

        let s = until_snapshot(&conn, "session known", |s| s["session"]["active"] == true).await;
        assert_eq!(s["session"]["locked"], false, "{s}");
        assert_eq!(until_source(&conn, "login1", true).await["available"], true);
        let mut changes = Changes::subscribe(&conn, &["session"]).await;

        // Lock (the screen locker sets LockedHint).
        logind
            .set(
                &sys,
                SESSION,
                SESSION_IFACE,
                "LockedHint",
                Variant::from(true),
            )
            .await;
        let (d, took) = changes
            .until(5, "locked", |c, d| {
                c == "session" && d["session"]["locked"] == true
            })
            .await;
        eprintln!("lock → Changed in {took:?}");
        assert_eq!(d["event"], "changed");
        until_snapshot(&conn, "locked in the snapshot", |s| {
            s["session"]["locked"] == true
        })
        .await;

        // Idle, with the time it started, in one PropertiesChanged.
        let since_us = (chrono::Utc::now().timestamp_micros() - 90_000_000) as u64;
        logind
            .update(
                &sys,
                SESSION,
                SESSION_IFACE,
                vec![
                    ("IdleHint", Variant::from(true)),
                    ("IdleSinceHint", Variant::from(since_us)),
                ],
            )
            .await;
        let (d, took) = changes
            .until(5, "idle", |_, d| d["session"]["idle"] == true)
            .await;
        eprintln!("idle → Changed in {took:?}");
        let since = d["session"]["idle_since"].as_str().expect("idle_since");
        let since = chrono::DateTime::parse_from_rfc3339(since).expect("rfc3339");
        assert_eq!(since.timestamp_micros() / 1000, since_us as i64 / 1000);

        // Going to sleep and back.
        for going in [true, false] {
            logind
                .emit(
                    &sys,
                    MANAGER,
                    MANAGER_IFACE,
                    "PrepareForSleep",
                    "b",
                    vec![Variant::from(going)],
                )
                .await;
            let (_, took) = changes
                .until(5, "PrepareForSleep", |_, d| {
                    d["session"]["preparing_for_sleep"] == going
                })
                .await;
            eprintln!("PrepareForSleep({going}) → Changed in {took:?}");
            until_snapshot(&conn, "sleep state in the snapshot", |s| {
                s["session"]["preparing_for_sleep"] == going
            })
            .await;
        }

        // Unlock.
        logind
            .set(
                &sys,
                SESSION,
                SESSION_IFACE,
                "LockedHint",
                Variant::from(false),
            )
            .await;
        changes
            .until(5, "unlocked", |_, d| d["session"]["locked"] == false)
            .await;
    })
    .await
}

/// Add an active session `id` for this user to the mock logind and make
/// it the user's display session; its object path.
async fn display_session(logind: &Mock, sys: &zbus::Connection, id: &str) -> ObjectPath<'static> {
    // SAFETY: getuid(2) cannot fail.
    let uid = unsafe { libc::getuid() };
    logind
        .call(
            sys,
            MANAGER,
            MOCK_IFACE,
            "AddSession",
            &(id, "seat0", uid, "me", true),
        )
        .await;
    let session =
        ObjectPath::try_from(format!("/org/freedesktop/login1/session/{id}")).expect("path");
    logind
        .set(
            sys,
            &format!("/org/freedesktop/login1/user/{uid}"),
            "org.freedesktop.login1.User",
            "Display",
            Variant::from((id, session.clone())),
        )
        .await;
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_xdg_session_id_the_users_display_session_is_used() {
    with_timeout(90, async {
        let buses = Buses::start();
        let logind = Mock::template(&buses.system.address, true, "logind", LOGIN1).await;
        let sys = buses.system.connect().await;
        display_session(&logind, &sys, "c7").await;
        logind
            .set(
                &sys,
                "/org/freedesktop/login1/session/c7",
                SESSION_IFACE,
                "LockedHint",
                Variant::from(true),
            )
            .await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["session"])]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        until_snapshot(&conn, "the display session, locked", |s| {
            s["session"]["locked"] == true && s["session"]["active"] == true
        })
        .await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_logind_the_screensaver_stands_in() {
    with_timeout(90, async {
        let buses = Buses::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["session"])]);
        // No system bus at all.
        let _d = buses
            .daemon(
                &home,
                &[(
                    "DBUS_SYSTEM_BUS_ADDRESS",
                    "unix:path=/nonexistent/system_bus",
                )],
            )
            .await;
        let conn = buses.session.connect().await;
        let login1 = until_source(&conn, "login1", false).await;
        let why = login1["last_error"].as_str().unwrap_or_default();
        assert!(why.contains("system bus"), "unclear reason: {login1}");
        let ss = until_source(&conn, "screensaver", false).await;
        assert!(
            ss["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("org.freedesktop.ScreenSaver")),
            "{ss}"
        );

        let saver = Mock::object(
            &buses.session.address,
            "org.freedesktop.ScreenSaver",
            "/org/freedesktop/ScreenSaver",
            "org.freedesktop.ScreenSaver",
        )
        .await;
        let sess = buses.session.connect().await;
        saver
            .call(
                &sess,
                "/org/freedesktop/ScreenSaver",
                MOCK_IFACE,
                "AddMethod",
                &("", "GetActive", "", "b", "ret = False"),
            )
            .await;
        // The method exists only now: the broker may have tried before and
        // retries with backoff.
        until_snapshot(&conn, "session from the screensaver", |s| {
            s["session"]["locked"] == false && s["session"]["active"] == true
        })
        .await;
        let mut changes = Changes::subscribe(&conn, &["session"]).await;
        saver
            .emit(
                &sess,
                "/org/freedesktop/ScreenSaver",
                "org.freedesktop.ScreenSaver",
                "ActiveChanged",
                "b",
                vec![Variant::from(true)],
            )
            .await;
        changes
            .until(5, "locked by the screensaver", |_, d| {
                d["session"]["locked"] == true
            })
            .await;
        assert_eq!(
            until_source(&conn, "screensaver", true).await["available"],
            true
        );
    })
    .await
}

/// A graphical login after the broker started (the broker came up with
/// the user's manager, before the desktop): logind's `SessionNew` makes
/// the broker look again, and the session it did not find is followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_appears_later_is_picked_up() {
    with_timeout(90, async {
        let buses = Buses::start();
        let logind = Mock::template(&buses.system.address, true, "logind", LOGIN1).await;
        let sys = buses.system.connect().await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["session"])]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        let down = until_source(&conn, "login1", false).await;
        assert!(
            down["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("no graphical session")),
            "{down}"
        );

        let session = display_session(&logind, &sys, "c9").await;
        // dbusmock's AddSession does not announce it; logind does.
        logind
            .emit(
                &sys,
                MANAGER,
                MANAGER_IFACE,
                "SessionNew",
                "so",
                vec![Variant::from("c9"), Variant::from(session)],
            )
            .await;
        until_source(&conn, "login1", true).await;
        until_snapshot(&conn, "the new session, active", |s| {
            s["session"]["active"] == true
        })
        .await;
    })
    .await
}

//! The broker's own notifications (its consent prompts) never come back as
//! context: a `Notify` sent on the broker's own main session connection is
//! not recorded, one from any other connection is.
//!
//! The broker runs inside a test process (`daemon::run_on`) on a
//! connection the test holds, so that the test can send from that very
//! connection. The sources find the buses through the environment, which
//! a test thread cannot set safely while other threads may read it: the
//! test runs this binary again with only [`broker_in_this_process`] and
//! the buses' addresses in its environment from the start.

use crate::common;
use crate::fdo;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use contextd::config::{Config, ConfigFile, Paths};
use fdo::*;
use zbus::wire::Variant;

async fn notify(conn: &zbus::Connection, summary: &str) -> u32 {
    conn.call_method(
        Some("org.freedesktop.Notifications"),
        "/org/freedesktop/Notifications",
        Some("org.freedesktop.Notifications"),
        "Notify",
        &(
            "contextd",
            0u32,
            "",
            summary,
            "body",
            Vec::<&str>::new(),
            HashMap::<&str, Variant<'_>>::new(),
            -1i32,
        ),
    )
    .await
    .expect("Notify")
    .body()
    .deserialize()
    .expect("id")
}

/// Where the test tells its second process the home directory.
const HOME_VAR: &str = "CONTEXTD_TEST_OWN_NOTIFICATIONS_HOME";

#[test]
fn notify_from_the_brokers_own_connection_is_not_recorded() {
    let buses = Buses::start();
    let home = Home::new();
    home.write_policy(&[(&my_app_id(), &["notifications"])]);
    let exe = std::env::current_exe().expect("this test binary");
    let (st, out, err) = run_cmd(
        std::process::Command::new(exe)
            .args([
                "--exact",
                "fdo_own_notifications::broker_in_this_process",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("DBUS_SESSION_BUS_ADDRESS", &buses.session.address)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &buses.system.address)
            .env(HOME_VAR, home.dir.path()),
        90,
    );
    assert!(
        st.success() && out.contains("1 passed"),
        "the broker's own process failed ({st}):\n{out}\n{err}"
    );
}

/// The broker and the checks, in a process whose environment names the
/// test's buses (only the test above runs it).
#[test]
#[ignore = "run by notify_from_the_brokers_own_connection_is_not_recorded in a process of its own"]
fn broker_in_this_process() {
    let Some(dir) = std::env::var_os(HOME_VAR) else {
        eprintln!("{HOME_VAR} unset: run notify_from_the_brokers_own_connection_is_not_recorded");
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let session = std::env::var("DBUS_SESSION_BUS_ADDRESS").expect("the session bus");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(with_timeout(60, async {
        let _server = Mock::template(
            &session,
            false,
            "notification_daemon",
            "org.freedesktop.Notifications",
        )
        .await;
        let config = Config {
            paths: Paths {
                config_dir: dir.join("config/contextd"),
                data_dir: dir.join("data/contextd"),
                state_dir: dir.join("state/contextd"),
                runtime_dir: None,
            },
            file: ConfigFile::default(),
            replace: false,
            replay: Default::default(),
        };
        let broker = connect_to(&session).await;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let daemon = tokio::spawn(contextd::daemon::run_on(broker.clone(), config, async {
            let _ = stop_rx.await;
        }));
        wait_for_owner_at(&session, true).await;
        let me = connect_to(&session).await;
        until_source(&me, "notifications", true).await;

        // From the broker's own connection: a consent prompt.
        notify(&broker, "Allow Foo to read your windows?").await;
        // From an app.
        let app = connect_to(&session).await;
        notify(&app, "From an app").await;

        let s = until_snapshot(&me, "the app's notification", |s| {
            s["notifications"]
                .as_array()
                .is_some_and(|a| a.iter().any(|n| n["summary"] == "From an app"))
        })
        .await;
        assert!(
            !s.to_string().contains("Allow Foo"),
            "the broker's own notification was recorded: {s}"
        );
        assert_eq!(s["notifications"].as_array().map(Vec::len), Some(1), "{s}");

        let _ = stop_tx.send(());
        let exit = tokio::time::timeout(Duration::from_secs(5), daemon)
            .await
            .expect("daemon stops")
            .expect("join")
            .expect("run_on");
        assert_eq!(exit, contextd::daemon::Exit::Shutdown);
    }));
}

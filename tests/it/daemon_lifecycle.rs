//! The daemon owns its name, refuses a second instance clearly, hands over
//! with --replace (which stops the running broker), never lets another
//! process take the name, and stops cleanly on SIGTERM.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owns_name_second_instance_exits_1_sigterm_frees_name() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut first = Daemon::start(&bus, &home, &[]).await;

        // A second instance: exit code 1 and one clear line with the PID.
        let (st, _out, err) = run_cmd(
            Command::new(contextd_bin())
                .env_clear()
                .envs(home.envs(&bus))
                .env("RUST_LOG", "off"),
            10,
        );
        assert_eq!(st.code(), Some(1), "second instance: {}", exit_code(st));
        let line = err
            .lines()
            .find(|l| l.contains("already owned"))
            .unwrap_or_default();
        assert!(
            line.contains(&format!("PID {}", first.pid())) && line.contains("--replace"),
            "unclear error: {err}"
        );

        // SIGTERM: exit 0 within 1 s, name released.
        let t0 = Instant::now();
        first.signal(libc::SIGTERM);
        let st = first.wait_exit(Duration::from_secs(5)).expect("exited");
        let took = t0.elapsed();
        assert_eq!(st.code(), Some(0), "SIGTERM: {}", exit_code(st));
        assert!(took < Duration::from_secs(1), "stop took {took:?}");
        wait_for_owner(&bus, false).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_takes_over_and_old_instance_exits_cleanly() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut first = Daemon::start(&bus, &home, &[]).await;
        let mut second = Daemon::spawn(&bus, &home, &["--replace"]);
        // --replace stops the running broker (SIGTERM): a clean stop.
        let st = first
            .wait_exit(Duration::from_secs(10))
            .expect("first stops when replaced");
        assert_eq!(st.code(), Some(0), "{}", exit_code(st));
        // The new one owns the name.
        let conn = bus.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let name = zbus::names::BusName::try_from(BUS_NAME).expect("name");
        let pid = loop {
            if let Ok(owner) = dbus.get_name_owner(name.clone()).await
                && let Ok(pid) = dbus.get_connection_unix_process_id(owner.into()).await
                && pid == second.pid()
            {
                break pid;
            }
            assert!(
                second.try_exit().is_none(),
                "second exited: {}",
                second.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(pid, second.pid());
        second.signal(libc::SIGINT);
        let st = second
            .wait_exit(Duration::from_secs(5))
            .expect("exits on SIGINT");
        assert_eq!(st.code(), Some(0));
    })
    .await
}

/// The attack: another process of the user's asks the bus for the
/// broker's name with `REPLACE_EXISTING` (what took it before: the broker
/// allowed replacement, exited 0, and the shell extension then sent every
/// window to the new owner). The bus refuses, the broker keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_cannot_take_the_name() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let mut broker = Daemon::start(&bus, &home, &[]).await;
        let rogue = bus.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&rogue).await.expect("proxy");
        let name = zbus::names::WellKnownName::try_from(BUS_NAME).expect("name");
        use zbus::fdo::RequestNameFlags as F;
        for flags in [
            F::REPLACE_EXISTING | F::DO_NOT_QUEUE,
            F::REPLACE_EXISTING | F::ALLOW_REPLACEMENT,
            F::REPLACE_EXISTING,
        ] {
            let reply = dbus.request_name(name.clone(), flags).await.expect("reply");
            assert!(
                matches!(
                    reply,
                    zbus::fdo::RequestNameReply::Exists | zbus::fdo::RequestNameReply::InQueue
                ),
                "the bus gave the broker's name away: {reply:?}"
            );
            let owner = dbus
                .get_name_owner(zbus::names::BusName::from(name.clone()))
                .await
                .expect("owner");
            let pid = dbus
                .get_connection_unix_process_id(owner.into())
                .await
                .expect("pid");
            assert_eq!(pid, broker.pid(), "the name changed hands");
        }
        // The rogue queued for it: its queue place gives it nothing while
        // the broker lives. The broker still answers.
        let peer = zbus::Proxy::new(
            &rogue,
            BUS_NAME,
            "/org/contextd/Broker1",
            "org.freedesktop.DBus.Peer",
        )
        .await
        .expect("peer");
        let () = peer.call("Ping", &()).await.expect("broker answers");
        assert!(
            broker.try_exit().is_none(),
            "broker exited: {}",
            broker.stderr()
        );
        broker.signal(libc::SIGTERM);
        let st = broker.wait_exit(Duration::from_secs(5)).expect("exits");
        assert_eq!(st.code(), Some(0));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_that_is_not_utf8_is_a_clear_error() {
    with_timeout(30, async {
        let bus = Bus::start();
        let home = Home::new();
        let cfg = home.dir.path().join("config/contextd/config.toml");
        std::fs::write(&cfg, b"[sources]\ndisabled = [\"\xff\"]\n").expect("write");
        let (st, _out, err) = run_cmd(
            Command::new(contextd_bin())
                .env_clear()
                .envs(home.envs(&bus)),
            10,
        );
        assert_eq!(st.code(), Some(1));
        assert!(
            err.contains("config.toml") && err.contains("not valid UTF-8"),
            "{err}"
        );
        std::fs::write(&cfg, "[sources]\nbogus = 1\n").expect("write");
        let (st, _out, err) = run_cmd(
            Command::new(contextd_bin())
                .env_clear()
                .envs(home.envs(&bus)),
            10,
        );
        assert_eq!(st.code(), Some(1));
        assert!(
            err.contains("config.toml:2:1") && err.contains("bogus"),
            "{err}"
        );
    })
    .await
}

/// The session bus goes away under the daemon (the end of a session, or
/// dbus-daemon crashing): a broker without its bus can serve nobody, so
/// it stops on its own, cleanly (exit 0, as GDBus services do on
/// `exit-on-close`), with one line saying why; and it never outlives
/// its bus waiting for a SIGTERM that may not come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bus_gone_daemon_stops_on_its_own() {
    with_timeout(60, async {
        let mut bus = Bus::start();
        let home = Home::new();
        let mut d = Daemon::start(&bus, &home, &[]).await;
        bus.kill();
        let st = match d.wait_exit(Duration::from_secs(10)) {
            Some(st) => st,
            None => {
                // Not on its own: does SIGTERM still stop it?
                d.signal(libc::SIGTERM);
                let after_term = d.wait_exit(Duration::from_secs(10));
                panic!(
                    "still running 10 s after its bus died (then SIGTERM: {}); stderr: {}",
                    after_term.map_or("still running".into(), exit_code),
                    d.stderr()
                );
            }
        };
        assert_eq!(st.code(), Some(0), "{}: {}", exit_code(st), d.stderr());
        assert!(
            d.stderr().contains("session bus"),
            "no line says why it stopped: {}",
            d.stderr()
        );
    })
    .await
}

//! A system service that goes and comes back leaves nothing behind in the
//! broker: the match rules it adds on the bus for the service's signals
//! are removed with the service, so after any number of restarts the
//! broker holds as many rules (and their queues) as after the first.
//!
//! The queues are zbus's, one per rule, and zbus forgets one only when
//! the bus daemon accepts its `RemoveMatch`: a rule naming the service's
//! unique name as sender is dropped by dbus-daemon itself when that peer
//! leaves, the broker's `RemoveMatch` then failed with `MatchRuleNotFound`
//! and the queue (18 KB) stayed, once per restart (`make soak`'s heap). So
//! a monitor on the bus counts the errors the broker is sent: none.

use crate::common;
use crate::fdo;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use fdo::*;

/// How many match rules the connections of process `pid` hold on the bus
/// (the bus daemon's `Debug.Stats`; the broker has one connection to the
/// system bus per source).
async fn match_rules(conn: &zbus::Connection, pid: u32) -> usize {
    let dbus = zbus::fdo::DBusProxy::new(conn).await.expect("DBus proxy");
    let reply = conn
        .call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus.Debug.Stats"),
            "GetAllMatchRules",
            &(),
        )
        .await
        .expect("GetAllMatchRules");
    let all: HashMap<String, Vec<String>> = reply.body().deserialize().expect("rules");
    let mut n = 0;
    for (name, rules) in all {
        let Ok(bus_name) = zbus::names::BusName::try_from(name.as_str()) else {
            continue;
        };
        if dbus.get_connection_unix_process_id(bus_name).await.ok() == Some(pid) {
            n += rules.len();
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_services_leave_no_match_rules_behind() {
    with_timeout(120, async {
        let buses = Buses::start();
        let sys_addr = buses.system.address.clone();
        let mut up = Mock::template(&sys_addr, true, "upower", "org.freedesktop.UPower").await;
        let mut nm = Mock::template(
            &sys_addr,
            true,
            "networkmanager",
            "org.freedesktop.NetworkManager",
        )
        .await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["power", "network"])]);
        let d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        let sys = buses.system.connect().await;
        until_source(&conn, "upower", true).await;
        until_source(&conn, "networkmanager", true).await;

        // Every error the bus daemon sends, seen from a monitor.
        let monitor = buses.system.connect().await;
        monitor
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus.Monitoring"),
                "BecomeMonitor",
                &(vec!["type='error',sender='org.freedesktop.DBus'"], 0u32),
            )
            .await
            .expect("BecomeMonitor");
        let not_found = std::sync::Arc::new(AtomicUsize::new(0));
        let seen = not_found.clone();
        let mut errors = zbus::MessageStream::from(&monitor);
        let watching = tokio::spawn(async move {
            use futures_util::StreamExt;
            while let Some(Ok(m)) = errors.next().await {
                let h = m.header();
                if h.error_name().map(|e| e.as_str())
                    == Some("org.freedesktop.DBus.Error.MatchRuleNotFound")
                {
                    eprintln!("MatchRuleNotFound to {:?}", h.destination());
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
        });

        let mut counts = Vec::new();
        for _ in 0..6 {
            up.stop();
            nm.stop();
            until_source(&conn, "upower", false).await;
            until_source(&conn, "networkmanager", false).await;
            up.restart().await;
            nm.restart().await;
            until_source(&conn, "upower", true).await;
            until_source(&conn, "networkmanager", true).await;
            // The rules of the services' new instances are added before
            // the source says available; a departed instance's removal is
            // asked when it leaves. Wait until the count settles.
            let last = AtomicUsize::new(match_rules(&sys, d.pid()).await);
            let settled = eventually(10, "the match rules settle", || async {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                let now = match_rules(&sys, d.pid()).await;
                (last.swap(now, Ordering::SeqCst) == now).then_some(now)
            })
            .await;
            counts.push(settled);
        }
        eprintln!("match rules after each restart: {counts:?}");
        assert!(
            counts.windows(2).all(|w| w[1] <= w[0]),
            "match rules grow with each restart: {counts:?}"
        );
        // The monitor saw every reply of the settled rounds above (a
        // departed instance's removals are answered before the count
        // settles).
        watching.abort();
        assert_eq!(
            not_found.load(Ordering::SeqCst),
            0,
            "RemoveMatch failed: zbus kept those rules' queues"
        );
    })
    .await;
}

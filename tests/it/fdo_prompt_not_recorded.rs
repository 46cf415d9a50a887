//! The broker's real consent prompt (a notification, when no consent agent
//! runs) never shows up as context, while an app's notification sent at
//! the same time does: end to end, through the daemon binary.

use crate::common;
use crate::fdo;

use std::process::Command;

use common::*;
use contextd::client::proxy::Context1Proxy;
use fdo::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_brokers_consent_prompt_is_not_a_notification_of_the_user() {
    with_timeout(90, async {
        let buses = Buses::start();
        let server = Mock::template(
            &buses.session.address,
            false,
            "notification_daemon",
            "org.freedesktop.Notifications",
        )
        .await;
        let home = Home::new();
        home.write_config("[consent]\nprompt_timeout_s = 20\n");
        // contextctl reads notifications; this test's app is undecided for
        // `power`, so asking makes the broker prompt.
        home.write_policy(&[(&contextctl_app(), &["notifications.content"])]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        until_source(&conn, "notifications", true).await;

        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        within(
            10,
            "RequestAccess",
            ctx.request_access(&["power"], "to show your battery"),
        )
        .await
        .expect("RequestAccess");
        // The prompt reached the notification server ...
        let sess = buses.session.connect().await;
        eventually(10, "the prompt was shown", || async {
            let m = server
                .call(
                    &sess,
                    "/org/freedesktop/Notifications",
                    MOCK_IFACE,
                    "GetCalls",
                    &(),
                )
                .await;
            let calls: Vec<(u64, String, Vec<zbus::wire::OwnedVariant>)> =
                m.body().deserialize().ok()?;
            calls.iter().any(|c| c.1 == "Notify").then_some(())
        })
        .await;
        // ... and an app notifies too.
        let (st, _, err) = run_cmd(
            Command::new("notify-send")
                .args(["-a", "Mail", "New mail", "from Bob"])
                .env("DBUS_SESSION_BUS_ADDRESS", &buses.session.address),
            20,
        );
        assert!(st.success(), "{err}");

        let v = eventually(10, "the app's notification", || async {
            let (out, _) = contextctl(&buses, &home, &["status", "--json"]);
            let v: Value = serde_json::from_str(&out).ok()?;
            v["notifications"]
                .as_array()
                .is_some_and(|a| a.iter().any(|n| n["app_name"] == "Mail"))
                .then_some(v)
        })
        .await;
        let ns = v["notifications"].as_array().cloned().unwrap_or_default();
        assert_eq!(ns.len(), 1, "only the app's notification: {ns:?}");
        assert!(
            !v.to_string().contains("wants to know"),
            "the broker's prompt was recorded: {v}"
        );
    })
    .await
}

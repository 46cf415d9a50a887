//! What an app learns without consent, tried as another app on the same
//! bus: `withheld` and `ListCategories` are the same whether or not anyone
//! publishes; another connection cannot read (or end) a subscription
//! object; whether sharing is paused is for management callers (and
//! readers of the timeline) only. (Source errors: tests/it/consent_policy.rs.)

use crate::common;

use std::collections::HashMap;

use common::dbusmock::Mock;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy, History1Proxy, Provider1Proxy};
use serde_json::Value;
use zbus::wire::OwnedVariant;

const NOT_ALLOWED: &str = "org.contextd.Error.NotAllowed";

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// What an undecided app learns of the provided kinds: its snapshot's
/// `withheld` and the names `ListCategories` lists.
async fn provided_seen(ctx: &Context1Proxy<'_>) -> (Vec<String>, Vec<String>) {
    let snap = dict_to_json(&ctx.get_snapshot().await.expect("GetSnapshot"));
    let withheld = names(&snap["withheld"]);
    let cats: Vec<String> = ctx
        .list_categories()
        .await
        .expect("ListCategories")
        .iter()
        .map(dict_to_json)
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .filter(|n| n.starts_with("provided."))
        .collect();
    (withheld, cats)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withheld_does_not_tell_whether_anyone_publishes() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[("exe:/usr/bin/busctl", &["provided.document"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let reader = bus.connect().await;
        let ctx = Context1Proxy::new(&reader).await.expect("proxy");
        let before = provided_seen(&ctx).await;
        assert!(
            before.0.contains(&"provided.document".to_owned()),
            "a seed kind is named to an undecided reader: {before:?}"
        );

        // Another app starts publishing its open document.
        let publisher = bus.connect().await;
        Provider1Proxy::new(&publisher)
            .await
            .expect("proxy")
            .publish("document", r#"{"name":"plan.odt"}"#)
            .await
            .expect("publish");
        // busctl, which the user let read documents, sees it published.
        eventually(10, "the document is published", || async {
            let (st, out, _) = run_cmd(
                std::process::Command::new("busctl")
                    .arg(format!("--address={}", bus.address))
                    .args(["call", BUS_NAME, PATH, "org.contextd.Context1"])
                    .args(["GetProvided", "s", "document"]),
                20,
            );
            (st.success() && out.contains("plan.odt")).then_some(())
        })
        .await;
        let after = provided_seen(&ctx).await;
        assert_eq!(
            before, after,
            "what an undecided reader sees changed when someone published"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_connection_cannot_read_a_subscription() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows", "notifications"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let owner = bus.connect().await;
        let path = Context1Proxy::new(&owner)
            .await
            .expect("proxy")
            .subscribe(&["notifications"])
            .await
            .expect("Subscribe");
        let props = |conn: &zbus::Connection| {
            let conn = conn.clone();
            let path = path.clone();
            async move {
                zbus::fdo::PropertiesProxy::builder(&conn)
                    .destination(BUS_NAME)
                    .path(path)
                    .build()
                    .await
                    .expect("proxy")
            }
        };
        let iface =
            zbus::names::InterfaceName::try_from("org.contextd.Subscription1").expect("iface");

        // The owner reads its own subscription.
        let mine = props(&owner)
            .await
            .get(iface.clone(), "Categories")
            .await
            .expect("the owner reads Categories");
        assert_eq!(
            contextd::client::json::to_json(&mine),
            serde_json::json!(["notifications"])
        );

        // Another app on the bus does not.
        let other = bus.connect().await;
        let p = props(&other).await;
        match p.get(iface.clone(), "Categories").await {
            Err(zbus::fdo::Error::ZBus(zbus::Error::MethodError(name, _, _))) => {
                assert_eq!(name.as_str(), NOT_ALLOWED)
            }
            other => panic!("another connection read Categories: {other:?}"),
        }
        let all: HashMap<String, OwnedVariant> = p.get_all(iface.clone()).await.unwrap_or_default();
        assert!(all.is_empty(), "GetAll told another connection: {all:?}");
        // Nor does busctl, another program.
        let (st, out, err) = run_cmd(
            std::process::Command::new("busctl")
                .arg(format!("--address={}", bus.address))
                .args(["get-property", BUS_NAME, path.as_str()])
                .args(["org.contextd.Subscription1", "Categories"]),
            20,
        );
        assert!(
            !st.success() && !out.contains("notifications"),
            "busctl read another app's subscription: {out} {err}"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_management_callers_learn_that_sharing_is_paused() {
    with_timeout(60, async {
        let bus = Bus::start();
        let sys = Bus::start();
        // polkit authorises nothing: this program is no management caller.
        let polkit = Mock::polkit_allowing(&sys.address, &[]).await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let _d = Daemon::start_with(
            &bus,
            &home,
            &[],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let app = bus.connect().await;
        let consent = Consent1Proxy::new(&app).await.expect("proxy");
        assert_eq!(error_name(consent.paused().await), NOT_ALLOWED, "Paused");
        let history = History1Proxy::new(&app).await.expect("proxy");
        assert_eq!(
            error_name(history.recording().await),
            NOT_ALLOWED,
            "Recording without the history category"
        );

        // The user's own panel (polkit says yes) reads it.
        polkit.set_allowed(&["org.contextd.manage-consent"]).await;
        consent.set_paused(true).await.expect("pause");
        assert!(consent.paused().await.expect("Paused for a manager"));
        polkit.set_allowed(&[]).await;
        // An app sees its reads refused, not why.
        let ctx = Context1Proxy::new(&app).await.expect("proxy");
        match ctx.list_windows().await {
            Err(zbus::Error::MethodError(name, msg, _)) => {
                assert_eq!(name.as_str(), NOT_ALLOWED);
                assert!(
                    !msg.unwrap_or_default().to_lowercase().contains("pause"),
                    "the refusal says the user paused"
                );
            }
            other => panic!("read while paused: {other:?}"),
        }
    })
    .await
}

//! The interface XML files never lie: the live introspection of every
//! object equals `dbus-interfaces/*.xml`.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use zbus_xml::{ArgDirection, Node};

/// A comparable digest of an interface: members with their arg names,
/// types and directions.
fn digest(iface: &zbus_xml::Interface<'_>) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for meth in iface.methods() {
        let args: Vec<String> = meth
            .args()
            .iter()
            .map(|a| {
                let dir = match a.direction() {
                    Some(ArgDirection::Out) => "out",
                    _ => "in",
                };
                format!("{dir} {} {}", a.ty(), a.name().unwrap_or("_"))
            })
            .collect();
        m.insert(format!("method {}", meth.name()), args.join(", "));
    }
    for sig in iface.signals() {
        let args: Vec<String> = sig
            .args()
            .iter()
            .map(|a| format!("{} {}", a.ty(), a.name().unwrap_or("_")))
            .collect();
        m.insert(format!("signal {}", sig.name()), args.join(", "));
    }
    for p in iface.properties() {
        m.insert(
            format!("property {}", p.name()),
            format!("{} {:?}", p.ty(), p.access()),
        );
    }
    m
}

fn from_file(name: &str) -> BTreeMap<String, String> {
    let path = format!(
        "{}/dbus-interfaces/{name}.xml",
        crate::common::root().display()
    );
    let text = std::fs::read_to_string(&path).expect("read xml");
    let node = Node::from_reader(text.as_bytes()).expect("parse xml");
    let iface = node
        .interfaces()
        .iter()
        .find(|i| i.name().as_str() == name)
        .unwrap_or_else(|| panic!("{path} has no interface {name}"));
    digest(iface)
}

struct SilentNotifications;

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl SilentNotifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        _app: String,
        _replaces: u32,
        _icon: String,
        _summary: String,
        _body: String,
        _actions: Vec<String>,
        _hints: std::collections::HashMap<String, zbus::wire::OwnedVariant>,
        _timeout: i32,
    ) -> u32 {
        1
    }
    fn close_notification(&self, _id: u32) {}
}

async fn live(conn: &zbus::Connection, path: &str, name: &str) -> BTreeMap<String, String> {
    live_at(conn, BUS_NAME, path, name).await
}

async fn live_at(
    conn: &zbus::Connection,
    dest: &str,
    path: &str,
    name: &str,
) -> BTreeMap<String, String> {
    let proxy = zbus::fdo::IntrospectableProxy::builder(conn)
        .destination(dest.to_owned())
        .path(path)
        .build()
        .await
        .expect("proxy");
    let xml = proxy.introspect().await.expect("introspect");
    let node = Node::from_reader(xml.as_bytes()).expect("parse live xml");
    let iface = node
        .interfaces()
        .iter()
        .find(|i| i.name().as_str() == name)
        .unwrap_or_else(|| panic!("{path} does not serve {name}"));
    digest(iface)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_introspection_matches_the_xml_files() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.ask_undecided();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;

        assert_eq!(
            live(&conn, PATH, "org.contextd.Context1").await,
            from_file("org.contextd.Context1")
        );
        assert_eq!(
            live(&conn, PATH, "org.contextd.Consent1").await,
            from_file("org.contextd.Consent1")
        );
        assert_eq!(
            live(&conn, PATH, "org.contextd.History1").await,
            from_file("org.contextd.History1")
        );
        assert_eq!(
            live(&conn, PATH, "org.contextd.Provider1").await,
            from_file("org.contextd.Provider1")
        );
        assert_eq!(
            live(&conn, PATH, "org.contextd.WindowReports1").await,
            from_file("org.contextd.WindowReports1")
        );
        assert_eq!(
            live(&conn, PATH, "org.contextd.Indicator1").await,
            from_file("org.contextd.Indicator1")
        );

        // A request stays alive while its prompt waits: a notification
        // server that never answers keeps it waiting.
        // Served from the start (Builder::serve_at): an object added to a
        // running connection can miss the first call made to it.
        let _notifier = zbus::connection::Builder::address(bus.address.as_str())
            .serve_at("/org/freedesktop/Notifications", SilentNotifications)
            .name("org.freedesktop.Notifications")
            .build()
            .await
            .expect("serve notifications");
        let asker = bus.connect().await;
        let ctx_a = contextd::client::proxy::Context1Proxy::builder(&asker)
            .build()
            .await
            .expect("proxy");
        let req = ctx_a
            .request_access(&["power"], "introspection test")
            .await
            .expect("request");
        assert_eq!(
            live(&conn, req.as_str(), "org.contextd.Request1").await,
            from_file("org.contextd.Request1")
        );

        // The agent interface is implemented by UIs: the test agent must
        // match the XML that UIs are generated from.
        let ui = zbus::connection::Builder::address(bus.address.as_str())
            .serve_at(
                common::agent::AGENT_PATH,
                common::agent::TestAgent::new("deny"),
            )
            .build()
            .await
            .expect("serve agent");
        let ui_name = ui.unique_name().expect("name").to_string();
        assert_eq!(
            live_at(
                &conn,
                &ui_name,
                common::agent::AGENT_PATH,
                "org.contextd.ConsentAgent1"
            )
            .await,
            from_file("org.contextd.ConsentAgent1")
        );

        let ctx = contextd::client::proxy::Context1Proxy::builder(&conn)
            .build()
            .await
            .expect("proxy");
        let sub = ctx.subscribe(&["windows"]).await.expect("subscribe");
        assert_eq!(
            live(&conn, sub.as_str(), "org.contextd.Subscription1").await,
            from_file("org.contextd.Subscription1")
        );

        // Every XML file describes an interface that is served somewhere
        // (contextd.jsonld, the vocabulary, is the Provider1 property).
        let dir = format!("{}/dbus-interfaces", crate::common::root().display());
        for entry in std::fs::read_dir(dir).expect("dir") {
            let name = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if !name.ends_with(".xml") {
                continue;
            }
            assert!(
                [
                    "org.contextd.Context1.xml",
                    "org.contextd.Consent1.xml",
                    "org.contextd.ConsentAgent1.xml",
                    "org.contextd.History1.xml",
                    "org.contextd.Indicator1.xml",
                    "org.contextd.Provider1.xml",
                    "org.contextd.Request1.xml",
                    "org.contextd.Subscription1.xml",
                    "org.contextd.WindowReports1.xml",
                ]
                .contains(&name.as_str()),
                "{name} is not checked against a live object yet: add it here"
            );
        }
    })
    .await
}

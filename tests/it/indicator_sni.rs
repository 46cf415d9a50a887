//! The broker's privacy indicator on desktops with a system tray: a
//! `org.kde.StatusNotifierItem` registered with a real
//! `org.kde.StatusNotifierWatcher` (a small one written here against the
//! spec: items by bus name or by path, dropped when their name leaves the
//! bus) on a private session bus. It is there while a subscriber reads and
//! gone after it ends and the recent-read window (1 s here, `[ui]
//! recent_read_s`) passed; its `com.canonical.dbusmenu` menu lists the
//! reader, ends it and pauses sharing, for the tray alone (an app that is
//! not the tray sees no names and its clicks do nothing); `[ui] indicator = false` registers
//! nothing; a watcher that starts late is registered with.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use contextd::client::proxy::Context1Proxy;
use contextd::client::proxy::consent::Consent1Proxy;
use futures_util::StreamExt;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::wire::OwnedVariant;

const WATCHER: &str = "org.kde.StatusNotifierWatcher";

/// A StatusNotifierWatcher as the spec describes it: `service` is a bus
/// name (the item at `/StatusNotifierItem`) or an object path on the
/// caller's connection; an item whose name leaves the bus is dropped.
#[derive(Clone, Default)]
struct Watcher {
    items: Arc<Mutex<Vec<String>>>,
}

#[zbus::interface(name = "org.kde.StatusNotifierWatcher")]
impl Watcher {
    async fn register_status_notifier_item(
        &self,
        service: String,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) {
        let sender = hdr.sender().map(|s| s.to_string()).unwrap_or_default();
        let item = if service.starts_with('/') {
            format!("{sender}{service}")
        } else {
            format!("{service}/StatusNotifierItem")
        };
        {
            let mut items = self.items.lock().expect("lock");
            if items.contains(&item) {
                return;
            }
            items.push(item.clone());
        }
        let _ = Self::status_notifier_item_registered(&emitter, &item).await;
    }

    fn register_status_notifier_host(&self, _service: String) {}

    #[zbus(property)]
    fn registered_status_notifier_items(&self) -> Vec<String> {
        self.items.lock().expect("lock").clone()
    }

    #[zbus(property)]
    fn is_status_notifier_host_registered(&self) -> bool {
        true
    }

    #[zbus(property)]
    fn protocol_version(&self) -> i32 {
        0
    }

    #[zbus(signal)]
    async fn status_notifier_item_registered(
        emitter: &SignalEmitter<'_>,
        item: &str,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn status_notifier_item_unregistered(
        emitter: &SignalEmitter<'_>,
        item: &str,
    ) -> zbus::Result<()>;
}

/// The watcher on its own connection, dropping items whose name leaves.
struct RunningWatcher {
    watcher: Watcher,
    conn: zbus::Connection,
    task: tokio::task::JoinHandle<()>,
}

impl RunningWatcher {
    async fn start(bus: &Bus) -> RunningWatcher {
        let watcher = Watcher::default();
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .serve_at("/StatusNotifierWatcher", watcher.clone())
            .name(WATCHER)
            .build()
            .await
            .expect("watcher");
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("dbus");
        let mut gone = dbus.receive_name_owner_changed().await.expect("owners");
        let (items, c) = (watcher.items.clone(), conn.clone());
        let task = tokio::spawn(async move {
            while let Some(sig) = gone.next().await {
                let Ok(a) = sig.args() else { continue };
                if a.new_owner().is_some() {
                    continue;
                }
                let name = a.name().to_string();
                let removed: Vec<String> = {
                    let mut items = items.lock().expect("lock");
                    let (gone, kept) = items
                        .drain(..)
                        .partition(|i: &String| i.starts_with(&format!("{name}/")));
                    *items = kept;
                    gone
                };
                for item in removed {
                    if let Ok(e) = SignalEmitter::new(&c, "/StatusNotifierWatcher") {
                        let _ = Watcher::status_notifier_item_unregistered(&e, &item).await;
                    }
                }
            }
        });
        RunningWatcher {
            watcher,
            conn,
            task,
        }
    }

    fn items(&self) -> Vec<String> {
        self.watcher.items.lock().expect("lock").clone()
    }

    async fn stop(self) {
        self.task.abort();
        let _ = self.conn.close().await;
    }
}

/// The item registered now (`NAME/PATH`), split.
async fn one_item(w: &RunningWatcher) -> (String, String) {
    let item = eventually(10, "the indicator is registered", || async {
        w.items().first().cloned()
    })
    .await;
    let (name, path) = item.split_at(item.find('/').expect("a path"));
    (name.to_owned(), path.to_owned())
}

async fn prop(
    conn: &zbus::Connection,
    name: &str,
    path: &str,
    iface: &str,
    p: &str,
) -> OwnedVariant {
    let reply = conn
        .call_method(
            Some(name),
            path,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(iface, p),
        )
        .await
        .unwrap_or_else(|e| panic!("{iface}.{p}: {e}"));
    reply.body().deserialize::<OwnedVariant>().expect("value")
}

type Props = HashMap<String, OwnedVariant>;
/// `(sa(iiay)ss)`: icon name, pixmaps, title, text.
type ToolTip = (String, Vec<(i32, i32, Vec<u8>)>, String, String);

/// The menu's entries (id, label, enabled) from `GetLayout`.
async fn menu(conn: &zbus::Connection, name: &str) -> Vec<(i32, String, bool)> {
    let path = prop(
        conn,
        name,
        "/StatusNotifierItem",
        "org.kde.StatusNotifierItem",
        "Menu",
    )
    .await;
    let path: zbus::wire::OwnedObjectPath = path.try_into().expect("Menu is a path");
    let reply = conn
        .call_method(
            Some(name),
            path.as_str(),
            Some("com.canonical.dbusmenu"),
            "GetLayout",
            &(0i32, -1i32, Vec::<String>::new()),
        )
        .await
        .expect("GetLayout");
    let (_rev, (root, _props, children)): (u32, (i32, Props, Vec<OwnedVariant>)) =
        reply.body().deserialize().expect("(u(ia{sv}av))");
    assert_eq!(root, 0);
    children
        .into_iter()
        .map(|c| {
            let (id, p, _): (i32, Props, Vec<OwnedVariant>) = c.try_into().expect("(ia{sv}av)");
            let label = p
                .get("label")
                .and_then(|l| String::try_from(l.try_clone().ok()?).ok())
                .unwrap_or_default();
            let enabled = p
                .get("enabled")
                .and_then(|l| bool::try_from(l.try_clone().ok()?).ok())
                .unwrap_or(true);
            (id, label, enabled)
        })
        .collect()
}

/// A tray's host: a connection that owns an `org.kde.StatusNotifierHost-`
/// name, as Plasma's and waybar's hosts do.
async fn tray_host(bus: &Bus) -> zbus::Connection {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    zbus::connection::Builder::address(bus.address.as_str())
        .name(format!(
            "org.kde.StatusNotifierHost-{}-{n}",
            std::process::id()
        ))
        .build()
        .await
        .expect("the tray host connects")
}

async fn click(conn: &zbus::Connection, name: &str, id: i32) {
    conn.call_method(
        Some(name),
        "/MenuBar",
        Some("com.canonical.dbusmenu"),
        "Event",
        &(id, "clicked", zbus::wire::Variant::from(""), 0u32),
    )
    .await
    .expect("Event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_indicator_shows_who_reads_and_its_menu_ends_and_pauses() {
    with_timeout(90, async {
        let m = Managed::start(
            "[consent]\nundecided = \"deny\"\n[ui]\nrecent_read_s = 1\n",
            &[(&my_app_id(), &["windows"])],
        )
        .await;
        let watcher = RunningWatcher::start(&m.bus).await;
        let conn = m.bus.connect().await;
        let host = tray_host(&m.bus).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let consent = Consent1Proxy::new(&conn).await.expect("consent");

        // Nobody reads: nothing is registered.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(watcher.items().is_empty(), "{:?}", watcher.items());

        // A subscriber: the item is there, Active, named after the reader.
        let sub = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let (name, path) = one_item(&watcher).await;
        assert_eq!(path, "/StatusNotifierItem");
        assert!(name.starts_with("org.kde.StatusNotifierItem-"), "{name}");
        let sni = "org.kde.StatusNotifierItem";
        let status: String = prop(&host, &name, &path, sni, "Status")
            .await
            .try_into()
            .expect("s");
        assert_eq!(status, "Active");
        let icon: String = prop(&host, &name, &path, sni, "IconName")
            .await
            .try_into()
            .expect("s");
        assert!(!icon.is_empty());
        let (_, _, title, text): ToolTip = prop(&host, &name, &path, sni, "ToolTip")
            .await
            .try_into()
            .expect("(sa(iiay)ss)");
        assert!(!title.is_empty());
        assert!(
            text.contains(&my_app_id()),
            "the tooltip names the reader: {text}"
        );

        // The menu lists it, with End; Pause; Open the dashboard.
        let entries = menu(&host, &name).await;
        let end = entries
            .iter()
            .find(|(_, l, on)| *on && l.starts_with("End ") && l.contains(&my_app_id()))
            .unwrap_or_else(|| panic!("no End entry for the reader: {entries:?}"))
            .0;
        assert!(
            entries.iter().any(|(_, l, _)| l == "Pause all sharing"),
            "{entries:?}"
        );
        assert!(
            entries
                .iter()
                .any(|(_, l, _)| l.starts_with("Open the dashboard")),
            "{entries:?}"
        );

        // The attack: an app on the bus that is not the tray finds the
        // item (its name is on the bus) and reads who reads, then clicks
        // End and Pause. It sees no names, and its clicks do nothing.
        let app = m.bus.connect().await;
        let (_, _, _, text): ToolTip = prop(&app, &name, &path, sni, "ToolTip")
            .await
            .try_into()
            .expect("(sa(iiay)ss)");
        assert!(!text.contains(&my_app_id()), "{text}");
        let seen = menu(&app, &name).await;
        assert!(
            seen.iter().all(|(_, l, _)| !l.contains(&my_app_id())),
            "an app read who reads: {seen:?}"
        );
        let pause_id = seen
            .iter()
            .find(|(_, l, _)| l == "Pause all sharing")
            .expect("Pause")
            .0;
        click(&app, &name, end).await;
        click(&app, &name, pause_id).await;
        // Its clicks were answered before this round trip's.
        let _ = menu(&host, &name).await;
        assert!(
            !consent.paused().await.expect("Paused"),
            "an app paused sharing"
        );
        assert_eq!(
            consent.list_readers().await.expect("ListReaders").len(),
            1,
            "an app ended a reader"
        );

        // End: the subscription's object goes away, as EndReader does it.
        click(&host, &name, end).await;
        eventually(10, "the subscription is ended", || async {
            let r = conn
                .call_method(
                    Some("org.contextd.Broker1"),
                    sub.as_str(),
                    Some("org.freedesktop.DBus.Properties"),
                    "GetAll",
                    &("org.contextd.Subscription1",),
                )
                .await;
            r.is_err().then_some(())
        })
        .await;
        assert!(
            consent
                .list_readers()
                .await
                .expect("ListReaders")
                .is_empty()
        );
        // And once its last read is older than the window, the item goes.
        eventually(10, "the indicator is taken away", || async {
            watcher.items().is_empty().then_some(())
        })
        .await;

        // A watcher that starts again is registered with again.
        let _sub2 = ctx.subscribe(&["windows"]).await.expect("subscribe again");
        one_item(&watcher).await;
        watcher.stop().await;
        let watcher = RunningWatcher::start(&m.bus).await;
        let (name, _) = one_item(&watcher).await;

        // Pause all sharing: Consent1's Paused says so.
        let host = tray_host(&m.bus).await;
        assert!(!consent.paused().await.expect("Paused"));
        let pause = menu(&host, &name)
            .await
            .into_iter()
            .find(|(_, l, _)| l == "Pause all sharing")
            .expect("Pause")
            .0;
        click(&host, &name, pause).await;
        eventually(10, "sharing is paused", || async {
            consent.paused().await.ok()?.then_some(())
        })
        .await;
        // Resuming is not offered from the indicator.
        eventually(10, "the menu says sharing is paused", || async {
            let e = menu(&host, &name).await;
            e.iter()
                .any(|(id, l, on)| *id == pause && !on && l.contains("paused"))
                .then_some(())
        })
        .await;
        watcher.stop().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_indicator_off_nothing_is_registered() {
    with_timeout(60, async {
        let m = Managed::start(
            "[consent]\nundecided = \"deny\"\n[ui]\nindicator = false\nrecent_read_s = 1\n",
            &[(&my_app_id(), &["windows"])],
        )
        .await;
        let watcher = RunningWatcher::start(&m.bus).await;
        let conn = m.bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let consent = Consent1Proxy::new(&conn).await.expect("consent");
        let _sub = ctx.subscribe(&["windows"]).await.expect("subscribe");
        eventually(10, "the reader is listed", || async {
            (!consent.list_readers().await.ok()?.is_empty()).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(watcher.items().is_empty(), "{:?}", watcher.items());
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("dbus");
        let names = dbus.list_names().await.expect("ListNames");
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("org.kde.StatusNotifierItem")),
            "{names:?}"
        );
        watcher.stop().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_alone_shows_the_indicator_for_the_window() {
    with_timeout(60, async {
        let m = Managed::start(
            "[consent]\nundecided = \"deny\"\n[ui]\nrecent_read_s = 1\n",
            &[(&my_app_id(), &["windows"])],
        )
        .await;
        let watcher = RunningWatcher::start(&m.bus).await;
        let conn = m.bus.connect().await;
        let host = tray_host(&m.bus).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        // One read, no subscription: the app reads now, for the window.
        ctx.list_windows().await.expect("ListWindows");
        let (name, _) = one_item(&watcher).await;
        let entries = menu(&host, &name).await;
        assert!(
            entries
                .iter()
                .any(|(_, l, on)| !*on && l.contains(&my_app_id()) && l.contains("just now")),
            "the reader is listed, with nothing to end: {entries:?}"
        );
        eventually(10, "the indicator goes after the window", || async {
            watcher.items().is_empty().then_some(())
        })
        .await;
        // A refused read is no read.
        ctx.list_recent_documents()
            .await
            .expect_err("recent documents are not granted");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(watcher.items().is_empty(), "{:?}", watcher.items());
        watcher.stop().await;
    })
    .await
}

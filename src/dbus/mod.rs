//! The D-Bus publisher: adapts the core to `org.contextd.*` interfaces on
//! the session bus. Converts wire types to domain types, asks the gate,
//! formats; decides nothing itself.

pub mod callers;
pub mod context1;
pub mod error;
pub mod proxy;
pub mod subscription;
pub mod variant;

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use zbus::Connection;
use zbus::fdo::DBusProxy;

use crate::core::Core;

pub const BUS_NAME: &str = "org.contextd.Broker1";
pub const PATH: &str = "/org/contextd/Broker1";

/// Register every object on `conn` and start the tasks that serve them.
/// Call before requesting the bus name, so that no call finds an empty
/// path.
pub async fn serve(
    conn: &Connection,
    core: Arc<Core>,
    tasks: &mut JoinSet<()>,
    cancel: CancellationToken,
) -> zbus::Result<()> {
    let dbus = DBusProxy::new(conn).await?;
    let callers = Arc::new(callers::Callers::new(dbus.clone()));
    let subs = Arc::new(subscription::Subscriptions::default());

    // Peers leaving: forget their identity and drop their subscriptions.
    let mut owner_changes = dbus.receive_name_owner_changed().await?;
    {
        let conn = conn.clone();
        let callers = callers.clone();
        let subs = subs.clone();
        let cancel = cancel.clone();
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    sig = owner_changes.next() => {
                        let Some(sig) = sig else { break };
                        let Ok(args) = sig.args() else { continue };
                        let name = args.name().as_str();
                        if name.starts_with(':') && args.new_owner().is_none() {
                            callers.forget(name);
                            subscription::drop_owner(&conn, &subs, name).await;
                        }
                    }
                }
            }
        });
    }

    conn.object_server()
        .at(
            PATH,
            context1::Context1 {
                core: core.clone(),
                callers,
                subs: subs.clone(),
            },
        )
        .await?;

    tasks.spawn(subscription::dispatch(conn.clone(), core, subs, cancel));
    until_serving(conn).await
}

/// Wait until the object server answers calls.
///
/// On a connection that is already built, zbus starts the object server's
/// dispatch task in the background when the first object is added; a
/// method call that arrives before that task listens is dropped, and its
/// caller waits forever. That is exactly when a D-Bus-activated client's
/// first call arrives (right after the name is acquired), and it happened
/// in the tests under load. So ping ourselves through the bus until the
/// object server answers, and only then let the caller request the name.
async fn until_serving(conn: &Connection) -> zbus::Result<()> {
    let Some(me) = conn.unique_name().map(|n| n.to_string()) else {
        // A peer-to-peer connection: nothing routes calls before we serve.
        return Ok(());
    };
    let mut wait = std::time::Duration::from_millis(10);
    for _ in 0..20 {
        let ping = conn.call_method(
            Some(me.as_str()),
            PATH,
            Some("org.freedesktop.DBus.Peer"),
            "Ping",
            &(),
        );
        match tokio::time::timeout(wait, ping).await {
            Ok(r) => return r.map(|_| ()),
            Err(_) => {
                tracing::debug!("the object server does not answer yet; pinging again");
                wait = (wait * 2).min(std::time::Duration::from_millis(500));
            }
        }
    }
    Err(zbus::Error::Failure(
        "the object server did not start answering calls".into(),
    ))
}

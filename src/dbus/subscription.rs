//! `org.contextd.Subscription1`: one object per `Context1.Subscribe` call.
//!
//! Its signals are unicast: every `Changed` and `Revoked` carries the
//! subscriber's unique name as destination, so the bus delivers it to that
//! peer only and an eavesdropping match rule sees nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use zbus::message::Header;
use zbus::names::BusName;
use zbus::object_server::SignalEmitter;
use zbus::wire::{OwnedObjectPath, Variant};
use zbus::{Connection, interface};

use super::error::{Error, Result};
use super::variant;
use crate::core::Core;
use crate::core::readers::{ReaderInfo, Registration};
use crate::model::{AppId, Category, IdentitySource};

pub const INTERFACE: &str = "org.contextd.Subscription1";

#[derive(Debug, Clone)]
struct Entry {
    owner: String,
    app: AppId,
    categories: Vec<Category>,
    /// The one-time grants `Subscribe` used up: this subscription carries
    /// them until it ends (or a pause or a deny ends it).
    held: Vec<Category>,
    path: OwnedObjectPath,
    /// Listed in `Consent1.ListReaders` while this entry lives; the user
    /// ending it cancels its token.
    reader: Arc<Registration>,
}

/// Every live subscription, by id.
#[derive(Debug, Default)]
pub struct Subscriptions {
    inner: Mutex<BTreeMap<u64, Entry>>,
    next: Mutex<u64>,
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn allocate(&self) -> u64 {
        let mut n = self.next.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        *n
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }
}

/// The object behind one subscription.
pub struct Subscription {
    id: u64,
    owner: String,
    categories: Vec<String>,
    subs: Arc<Subscriptions>,
}

#[interface(name = "org.contextd.Subscription1", introspection_docs = false)]
impl Subscription {
    /// End this subscription. Only its owner may.
    async fn unsubscribe(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(object_server)] server: &zbus::ObjectServer,
    ) -> Result<()> {
        self.owned_by(hdr.sender().map(|s| s.as_str()))?;
        let path = self.subs.lock().remove(&self.id).map(|e| e.path);
        if let Some(path) = path {
            server.remove::<Subscription, _>(&path).await?;
        }
        Ok(())
    }

    /// The categories this subscription receives: to its owner only (what
    /// another app subscribed to is its business; `GetAll` leaves it out
    /// for anyone else).
    #[zbus(property)]
    fn categories(&self, #[zbus(header)] hdr: Option<Header<'_>>) -> Result<Vec<String>> {
        self.owned_by(hdr.as_ref().and_then(|h| h.sender()).map(|s| s.as_str()))?;
        Ok(self.categories.clone())
    }

    /// A change in one of the subscribed categories, rendered for what the
    /// subscriber may see.
    #[zbus(signal)]
    pub async fn changed(
        emitter: &SignalEmitter<'_>,
        category: &str,
        data: HashMap<String, Variant<'_>>,
    ) -> zbus::Result<()>;

    /// The user withdrew consent for `category`; the subscription is over
    /// and no signal follows this one.
    #[zbus(signal)]
    pub async fn revoked(
        emitter: &SignalEmitter<'_>,
        category: &str,
        reason: &str,
    ) -> zbus::Result<()>;
}

impl Subscription {
    /// Only the connection that subscribed may use or read this object.
    fn owned_by(&self, sender: Option<&str>) -> Result<()> {
        if sender == Some(self.owner.as_str()) {
            Ok(())
        } else {
            Err(Error::NotAllowed(
                "this subscription belongs to another connection".into(),
            ))
        }
    }
}

/// Create a subscription object for `owner` and return its path. `held`:
/// the one-time grants the `Subscribe` call used up.
pub async fn create(
    conn: &Connection,
    core: &Core,
    subs: &Arc<Subscriptions>,
    owner: &str,
    app: (AppId, IdentitySource),
    (categories, held): (Vec<Category>, Vec<Category>),
) -> Result<OwnedObjectPath> {
    let (app, identity_source) = app;
    let id = subs.allocate();
    let reader = core.readers.start(
        ReaderInfo {
            app: app.clone(),
            identity_source,
            channel: crate::core::Channel::DBus,
            transport: "subscription",
            client: None,
            categories: categories.clone(),
        },
        core.clock.now(),
        tokio_util::sync::CancellationToken::new(),
    );
    let path = OwnedObjectPath::try_from(format!("/org/contextd/Broker1/subscription/{id}"))
        .map_err(|e| Error::Failed(e.to_string()))?;
    let obj = Subscription {
        id,
        owner: owner.to_owned(),
        categories: categories.iter().map(ToString::to_string).collect(),
        subs: subs.clone(),
    };
    subs.lock().insert(
        id,
        Entry {
            owner: owner.to_owned(),
            app,
            categories,
            held,
            path: path.clone(),
            reader: Arc::new(reader),
        },
    );
    conn.object_server().at(&path, obj).await?;
    Ok(path)
}

async fn remove_paths(conn: &Connection, paths: Vec<OwnedObjectPath>) {
    for p in paths {
        if let Err(e) = conn.object_server().remove::<Subscription, _>(&p).await {
            tracing::debug!(path = %p, error = %e, "subscription object already gone");
        }
    }
}

/// Drop every subscription of a peer that left the bus.
pub async fn drop_owner(conn: &Connection, subs: &Subscriptions, owner: &str) {
    let paths: Vec<OwnedObjectPath> = {
        let mut m = subs.lock();
        let ids: Vec<u64> = m
            .iter()
            .filter(|(_, e)| e.owner == owner)
            .map(|(k, _)| *k)
            .collect();
        ids.into_iter()
            .filter_map(|k| m.remove(&k))
            .map(|e| e.path)
            .collect()
    };
    if !paths.is_empty() {
        tracing::debug!(
            owner,
            n = paths.len(),
            "subscriber left; dropping its subscriptions"
        );
    }
    remove_paths(conn, paths).await;
}

fn emitter_for<'a>(conn: &Connection, e: &'a Entry) -> Option<SignalEmitter<'a>> {
    let dest = BusName::try_from(e.owner.as_str()).ok()?;
    let em = SignalEmitter::new(conn, e.path.as_ref()).ok()?;
    Some(em.set_destination(dest))
}

/// Re-check every subscription against the gate, and whether the user
/// ended it; end those with a `Revoked` signal, at once.
async fn enforce(conn: &Connection, core: &Core, subs: &Subscriptions) {
    let revoked: Vec<(Entry, Category, String)> = {
        let mut m = subs.lock();
        let mut out = Vec::new();
        m.retain(|_, e| {
            if e.reader.ended().is_cancelled() {
                let Some(c) = e.categories.first().cloned() else {
                    return false;
                };
                out.push((e.clone(), c, "the user ended this subscription".to_owned()));
                return false;
            }
            match core.withdrawn(&e.app, &e.categories, &e.held) {
                Some(c) => {
                    let reason = format!("consent for '{c}' was withdrawn");
                    out.push((e.clone(), c, reason));
                    false
                }
                None => true,
            }
        });
        out
    };
    for (e, c, reason) in &revoked {
        if let Some(em) = emitter_for(conn, e)
            && let Err(err) = Subscription::revoked(&em, &c.to_string(), reason).await
        {
            tracing::debug!(error = %err, "cannot send Revoked");
        }
        tracing::info!(app = %e.app, category = %c, "subscription revoked");
    }
    remove_paths(conn, revoked.into_iter().map(|(e, _, _)| e.path).collect()).await;
}

/// Fan changes out to subscribers until `cancel`. Each change is rendered
/// per subscriber through the gate, so what a subscriber may not see is
/// never put on the wire.
pub async fn dispatch(
    conn: Connection,
    core: Arc<Core>,
    subs: Arc<Subscriptions>,
    cancel: CancellationToken,
) {
    let mut rx = core.state.subscribe();
    let mut generation = core.gate.watch_generation();
    let mut ended = core.readers.watch_ended();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            r = generation.changed() => {
                if r.is_err() { break; }
                enforce(&conn, &core, &subs).await;
            }
            r = ended.changed() => {
                if r.is_err() { break; }
                enforce(&conn, &core, &subs).await;
            }
            msg = rx.recv() => {
                let change = match msg {
                    Ok(c) => c,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "subscribers fell behind; some changes were dropped");
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                let Some(cat) = change.category() else { continue };
                let targets: Vec<Entry> = subs
                    .lock()
                    .values()
                    .filter(|e| e.categories.iter().any(|c| *c == cat || c.base().as_ref() == Some(&cat)))
                    .cloned()
                    .collect();
                for e in targets {
                    let Some((cat, data)) = core.change_for_held(&e.app, &e.held, &change) else {
                        continue;
                    };
                    let Some(em) = emitter_for(&conn, &e) else { continue };
                    let dict = match variant::fields(&data) {
                        Ok(d) => d,
                        Err(err) => {
                            tracing::warn!(error = %err, "cannot put a change on D-Bus");
                            continue;
                        }
                    };
                    if let Err(err) = Subscription::changed(&em, &cat.to_string(), dict).await {
                        tracing::debug!(error = %err, owner = %e.owner, "cannot send Changed");
                    }
                }
            }
        }
    }
}

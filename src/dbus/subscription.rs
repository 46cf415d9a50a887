//! `org.contextd.Subscription1`: one object per `Context1.Subscribe` call.
//!
//! Its signals are unicast: every `Changed` and `Revoked` carries the
//! subscriber's unique name as destination, so the bus delivers it to that
//! peer only and an eavesdropping match rule sees nothing.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::wire::{OwnedObjectPath, Variant};
use zbus::{Connection, interface};

use super::error::{Error, Result};
use super::sendq::SendQueue;
use super::wire::KeptHeader;
use crate::core::drive::{Backpressure, Flow, Sent, Sink, drive};
use crate::core::readers::ReaderInfo;
use crate::core::view::ChangeView;
use crate::core::watch::Watches;
use crate::core::{Follow, Item, Watch, Watcher};
use crate::model::{AppId, Category, IdentitySource};

#[derive(Debug, Clone)]
struct Entry {
    owner: String,
    path: OwnedObjectPath,
    /// Stops the task that forwards the subscription's feed (and takes
    /// it off `Consent1.ListReaders` at once).
    stop: CancellationToken,
}

/// Every live subscription, by id.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    inner: Mutex<BTreeMap<u64, Entry>>,
    next: Mutex<u64>,
    bodies: Bodies,
    outbox: Outbox,
}

/// At most this many signals wait in the [`Outbox`]; a subscription's
/// task waits for room beyond it (and its feed then lags, as it did when
/// each task waited on the socket itself).
const OUTBOX_LIMIT: usize = 1024;

/// Signals written under one turn at the connection's write lock, once
/// the bus daemon has read everything of ours (`SendQueue`): all a reply
/// may find ahead of it. Four signals of 300 to 500 bytes are about what
/// the bus daemon reads of a connection in one turn of its loop (2 KB).
const WRITE_AT_ONCE: usize = 4;

/// The signals of every subscription, in the order their tasks made them,
/// written to the bus by one task ([`write_signals`]) as few writes at a
/// time as the socket takes (`Connection::send_all`).
///
/// Why: one change reaches every subscriber as a signal of its own
/// (unicast, rendered for its grants). When each subscription's task
/// awaited its own `send`, 200 subscribers of one focus change were 200
/// turns at the connection's write lock and 200 writes, one after the
/// other, and the last subscriber waited for all of them (issue 33). Now
/// a task only renders and queues; whichever signals are queued when the
/// writer runs go out together, in turns ([`in_turns`]). Each
/// subscription's signals keep their order (one queue, one writer),
/// `Revoked` and `Lagged` included.
#[derive(Debug, Default)]
struct Outbox {
    /// Each signal with its subscription's id.
    queue: Mutex<Vec<(u64, zbus::Message)>>,
    /// Something was queued (a permit is kept when the writer is busy).
    ready: tokio::sync::Notify,
    /// The writer took the queue: there is room again.
    room: tokio::sync::Notify,
    /// The writer stopped (shutdown): nothing is queued any more.
    closed: std::sync::atomic::AtomicBool,
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, zbus::Message)>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `msg` of subscription `id` for the writer, waiting while the
    /// outbox is full; `false` once the writer has stopped.
    async fn push(&self, id: u64, msg: zbus::Message) -> bool {
        use std::sync::atomic::Ordering;
        loop {
            let room = self.room.notified();
            if self.closed.load(Ordering::Acquire) {
                return false;
            }
            {
                let mut q = self.lock();
                if q.len() < OUTBOX_LIMIT {
                    q.push((id, msg));
                    break;
                }
            }
            room.await;
        }
        self.ready.notify_one();
        true
    }
}

/// Write what the subscriptions queue (see [`Outbox`]) until `cancel`.
///
/// `sendq`, the gauge of the connection's socket when the daemon made it
/// ([`SendQueue`]): each turn waits until the bus daemon has read all but
/// a little of what was written, so that a method's reply is not queued
/// behind a storm of signals in the socket.
pub(crate) async fn write_signals(
    conn: Connection,
    subs: Arc<Subscriptions>,
    mut sendq: Option<SendQueue>,
    cancel: CancellationToken,
) {
    use std::sync::atomic::Ordering;
    let outbox = &subs.outbox;
    let mut taken: Vec<(u64, zbus::Message)> = Vec::new();
    let mut turns: HashMap<u64, u32> = HashMap::new();
    loop {
        std::mem::swap(&mut taken, &mut *outbox.lock());
        if taken.is_empty() {
            // Nothing waits: a reply may have the socket's whole buffer.
            if let Some(q) = &mut sendq {
                q.idle();
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = outbox.ready.notified() => continue,
            }
        }
        outbox.room.notify_waiters();
        let batch = in_turns(&mut taken, &mut turns);
        // A few writes at a time: each takes the connection's write lock,
        // and a method's reply (a `Peer.Ping`, a settings panel's call)
        // waits for the write that holds it, not for a whole storm.
        for chunk in batch.chunks(WRITE_AT_ONCE) {
            if let Some(q) = &mut sendq {
                let waited = std::time::Instant::now();
                q.drained(&cancel).await;
                // The bus daemon stops reading us while a reader's queue
                // holds more than our `max_incoming_bytes` (a stopped
                // subscriber): say so, for whoever wonders where the
                // signals are.
                if waited.elapsed() >= std::time::Duration::from_secs(1) {
                    tracing::debug!(
                        waited_ms = u64::try_from(waited.elapsed().as_millis()).unwrap_or(u64::MAX),
                        "the bus daemon read nothing of ours for a while; signals waited"
                    );
                }
            }
            let sent = tokio::select! {
                _ = cancel.cancelled() => break,
                r = conn.send_all(chunk) => r,
            };
            if let Err(err) = sent {
                tracing::debug!(error = %err, n = chunk.len(), "cannot send subscription signals");
            }
            // For `make bench`'s readers bench: when each reader's signal
            // left the broker (CLOCK_MONOTONIC, comparable across
            // processes).
            crate::core::clock::trace_written("dbus", chunk.len());
        }
        if cancel.is_cancelled() {
            break;
        }
    }
    outbox.closed.store(true, Ordering::Release);
    outbox.room.notify_waiters();
}

/// Order `taken` (signals with their subscription's id, as queued) in
/// turns: every subscription's first signal, then every one's second, and
/// so on, each turn in the order queued (a stable sort by the signal's
/// rank among its subscription's). A subscription's own signals keep
/// their order.
///
/// Why: one focus change is three changes (the new window's states, the
/// focus, the old window's states), and a subscription's task queues its
/// three at once. In the order queued, the last subscriber's focus
/// waited behind 599 signals, which the bus daemon routes one by one
/// (issue 33); in turns, behind 399.
fn in_turns<T>(taken: &mut Vec<(u64, T)>, turns: &mut HashMap<u64, u32>) -> Vec<T> {
    turns.clear();
    let mut ranked: Vec<(u32, T)> = taken
        .drain(..)
        .map(|(id, m)| {
            let n = turns.entry(id).or_insert(0);
            let rank = *n;
            *n += 1;
            (rank, m)
        })
        .collect();
    // `sort_by_key` is stable: each turn stays in the order queued.
    ranked.sort_by_key(|(rank, _)| *rank);
    // The room a burst made goes back (`taken` becomes the outbox's queue
    // again): held for good, the outbox's full 1 024 signals and their
    // turns were kept after a storm (heaptrack, `make soak`).
    if taken.capacity() > OUTBOX_KEPT {
        taken.shrink_to(OUTBOX_KEPT);
    }
    turns.clear();
    if turns.capacity() > OUTBOX_KEPT {
        turns.shrink_to(OUTBOX_KEPT);
    }
    ranked.into_iter().map(|(_, m)| m).collect()
}

/// The room the outbox and its turns keep once written: one focus change
/// to the soak's 50 subscribers is 150 signals, so a steady load does not
/// regrow them per batch.
const OUTBOX_KEPT: usize = 256;

/// How many distinct `Changed` bodies [`Bodies`] keeps.
const BODY_SLOTS: usize = 4;

/// The bodies of the last `Changed` signals, serialised. One change
/// reaches every subscriber of its category, and those that may see the
/// same of it (the same grants: most of them) get the same bytes: the
/// first serialises the `(category, a{sv})` body, the others copy it
/// behind their own header (path, destination). Building the `a{sv}` and
/// serialising it was most of a subscriber's share of a change (issue 33:
/// 200 subscribers of one focus change). The view decides: a body is
/// reused only for an equal view of the same category, so a subscriber
/// never gets what it may not see.
#[derive(Debug, Default)]
struct Bodies {
    slots: Mutex<VecDeque<Body>>,
}

/// A category, a view of a change in it, and the `Changed` body of both.
type Body = (Category, Arc<ChangeView>, Arc<[u8]>);

impl Bodies {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Body>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The body of `Changed(category, view)`, serialised once per distinct
    /// pair.
    fn body(&self, category: &Category, view: &Arc<ChangeView>) -> Result<Arc<[u8]>> {
        // The same view (shared by readers who see the same: see
        // `core::watch::Rendered`) first, then an equal one.
        if let Some((_, _, b)) = self
            .lock()
            .iter()
            .find(|(c, v, _)| c == category && (Arc::ptr_eq(v, view) || v == view))
        {
            return Ok(b.clone());
        }
        let category_name = category.to_string();
        let body = super::wire::changed(&category_name, &**view)?;
        let mut slots = self.lock();
        if slots.len() >= BODY_SLOTS {
            slots.pop_back();
        }
        slots.push_front((category.clone(), view.clone(), body.clone()));
        Ok(body)
    }
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
}

/// The object behind one subscription.
pub(crate) struct Subscription {
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
        let path = self.subs.lock().remove(&self.id).map(|e| {
            e.stop.cancel();
            e.path
        });
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

    /// Changes were dropped before they reached this subscription (the
    /// broker fell behind): read what it follows again. No count: the
    /// changes missed are of every category, not only those it may see.
    #[zbus(signal)]
    pub async fn lagged(emitter: &SignalEmitter<'_>) -> zbus::Result<()>;
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

/// Create a subscription object for `owner` and return its path, and
/// start forwarding its feed (on `tasks`). `held`: the one-time grants the
/// `Subscribe` call used up.
pub(crate) async fn create(
    conn: &Connection,
    core: &Watches,
    (subs, tasks, work): (&Arc<Subscriptions>, &TaskTracker, &tokio::runtime::Handle),
    owner: &str,
    app: (AppId, IdentitySource),
    (categories, held): (Vec<Category>, Vec<Category>),
) -> Result<OwnedObjectPath> {
    let (app, identity_source) = app;
    let id = subs.allocate();
    let stop = CancellationToken::new();
    // The feed starts before `Subscribe` answers: no change after the
    // answer is missed.
    let watch = core
        .watch(
            Watcher::App {
                app: app.clone(),
                held,
            },
            Follow::Only(categories.clone()),
        )
        .register(
            ReaderInfo {
                app: app.clone(),
                identity_source,
                channel: crate::core::Channel::DBus,
                transport: "subscription",
                client: None,
                categories: categories.clone(),
            },
            stop.child_token(),
        );
    let path = OwnedObjectPath::try_from(format!("/org/contextd/Broker1/subscription/{id}"))
        .map_err(|e| Error::Failed(e.to_string()))?;
    let obj = Subscription {
        id,
        owner: owner.to_owned(),
        categories: categories.iter().map(ToString::to_string).collect(),
        subs: subs.clone(),
    };
    let entry = Entry {
        owner: owner.to_owned(),
        path: path.clone(),
        stop: stop.clone(),
    };
    subs.lock().insert(id, entry.clone());
    conn.object_server().at(&path, obj).await?;
    // On the main runtime, not on the bus's thread that runs this call:
    // rendering each change for each subscriber is the heavy part of
    // D-Bus, and the bus's thread stays free to answer (`daemon::Lanes`).
    tasks.spawn_on(
        forward(
            conn.clone(),
            subs.clone(),
            (id, entry),
            (app, categories.first().cloned()),
            watch,
        ),
        work,
    );
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
pub(crate) async fn drop_owner(conn: &Connection, subs: &Subscriptions, owner: &str) {
    let paths: Vec<OwnedObjectPath> = {
        let mut m = subs.lock();
        let ids: Vec<u64> = m
            .iter()
            .filter(|(_, e)| e.owner == owner)
            .map(|(k, _)| *k)
            .collect();
        ids.into_iter()
            .filter_map(|k| m.remove(&k))
            .map(|e| {
                e.stop.cancel();
                e.path
            })
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

/// Forward one subscription's feed as its signals, until it is
/// unsubscribed, its owner leaves, it loses consent, the user ends it, or
/// the broker stops. Each change comes rendered for what the subscriber
/// may see, so what it may not see is never put on the wire.
async fn forward(
    conn: Connection,
    subs: Arc<Subscriptions>,
    (id, e): (u64, Entry),
    (app, first): (AppId, Option<Category>),
    mut watch: Watch,
) {
    let stop = e.stop.clone();
    let mut sink = Signals {
        conn,
        subs,
        id,
        e,
        app,
        first,
        header: None,
    };
    drive(&mut watch, &mut sink, &stop).await;
}

/// One subscription's side of [`drive`]: its feed's items as
/// Subscription1 signals, queued in the [`Outbox`].
struct Signals {
    conn: Connection,
    subs: Arc<Subscriptions>,
    id: u64,
    e: Entry,
    app: AppId,
    /// The category named in `Revoked` when the user ends it.
    first: Option<Category>,
    /// The `Changed` header, made at the first change.
    header: Option<ChangedHeader>,
}

/// A signal for the outbox, or the subscription's end.
enum Signal {
    Queue(zbus::Message),
    /// The subscription is over: `Revoked` (when it was still in
    /// [`Subscriptions`]) goes through the outbox, after every `Changed`
    /// queued before it, then its object goes; `logged` is logged.
    End {
        revoked: Option<zbus::Message>,
        path: Option<OwnedObjectPath>,
        logged: Option<Category>,
    },
}

impl Signals {
    /// The end of the subscription with `Revoked(category, reason)`,
    /// unless it is gone already (an `Unsubscribe` came first: then only
    /// the log line).
    fn end(&self, category: &Category, reason: &str, out: &mut Vec<Signal>) {
        let Some(gone) = self.subs.lock().remove(&self.id) else {
            out.push(Signal::End {
                revoked: None,
                path: None,
                logged: Some(category.clone()),
            });
            return;
        };
        let revoked = signal(
            &self.conn,
            &self.e,
            "Revoked",
            &(category.to_string(), reason),
        )
        .inspect_err(|err| tracing::debug!(error = %err, "cannot send Revoked"))
        .ok();
        out.push(Signal::End {
            revoked,
            path: Some(gone.path),
            logged: Some(category.clone()),
        });
    }
}

impl Sink for Signals {
    type Msg = Signal;

    /// The outbox waits for the socket; a subscription that falls behind
    /// meanwhile hears `Lagged`.
    fn backpressure(&self) -> Backpressure {
        Backpressure::Wait
    }

    async fn convert(&mut self, item: Item, out: &mut Vec<Signal>) -> Flow {
        match item {
            Item::Changed { category, view, .. } => {
                if self.header.is_none() {
                    match ChangedHeader::new(self.conn.unique_name().map(|u| u.inner()), &self.e) {
                        Ok(h) => self.header = Some(h),
                        Err(err) => tracing::warn!(error = %err, "cannot put a change on D-Bus"),
                    }
                }
                let Some(h) = &self.header else {
                    return Flow::Go;
                };
                let msg = self
                    .subs
                    .bodies
                    .body(&category, &view)
                    .and_then(|body| h.message(&body));
                match msg {
                    Ok(msg) => out.push(Signal::Queue(msg)),
                    Err(err) => tracing::warn!(error = %err, "cannot put a change on D-Bus"),
                }
                Flow::Go
            }
            Item::Lagged { missed } => {
                // Info, as for MCP readers (mcp::watch): a reader that is
                // slow in a storm of changes is told at most once a second
                // (core::watch::LAG_QUIET), and 50 of them must not fill
                // the journal with warnings about their own pace.
                tracing::info!(
                    missed,
                    owner = %self.e.owner,
                    "a subscription fell behind; it is told to read again"
                );
                match signal(&self.conn, &self.e, "Lagged", &()) {
                    Ok(msg) => out.push(Signal::Queue(msg)),
                    Err(err) => {
                        tracing::debug!(error = %err, owner = %self.e.owner, "cannot send Lagged")
                    }
                }
                Flow::Go
            }
            Item::Revoked { category } => {
                let reason = format!("consent for '{category}' was withdrawn");
                self.end(&category, &reason, out);
                Flow::Stop
            }
            Item::EndedByUser => {
                if let Some(c) = self.first.clone() {
                    self.end(&c, "the user ended this subscription", out);
                } else if let Some(gone) = self.subs.lock().remove(&self.id) {
                    out.push(Signal::End {
                        revoked: None,
                        path: Some(gone.path),
                        logged: None,
                    });
                }
                Flow::Stop
            }
            Item::Ended => Flow::Stop,
            Item::Sources | Item::GateChanged | Item::Paused | Item::Resumed | Item::Control(_) => {
                Flow::Go
            }
        }
    }

    async fn send(&mut self, msg: Signal) -> Sent {
        match msg {
            Signal::Queue(msg) => {
                if self.subs.outbox.push(self.id, msg).await {
                    Sent::Delivered
                } else {
                    Sent::Gone
                }
            }
            Signal::End {
                revoked,
                path,
                logged,
            } => {
                if let Some(msg) = revoked {
                    self.subs.outbox.push(self.id, msg).await;
                }
                remove_paths(&self.conn, path.into_iter().collect()).await;
                if let Some(category) = logged {
                    tracing::info!(app = %self.app, %category, "subscription revoked");
                }
                Sent::Delivered
            }
        }
    }
}

/// The signature of a `Changed` body.
const CHANGED_SIGNATURE: &str = "sa{sv}";

/// A subscription's `Changed` header, serialised once
/// ([`super::header`]): every `Changed` it sends has the same fields
/// (path, interface, member, destination, sender, signature), and only
/// the body's length and the serial differ.
#[derive(Debug)]
struct ChangedHeader(KeptHeader);

impl ChangedHeader {
    /// The header of `e`'s `Changed` signals, sent as `sender` (the
    /// broker's unique name).
    fn new(sender: Option<&zbus::names::UniqueName<'_>>, e: &Entry) -> Result<Self> {
        let b = builder(sender, e, "Changed");
        // SAFETY: an empty body is no valid `sa{sv}`, but this message is
        // never sent or read: only its header bytes are kept, and each
        // message made from them (`message`) carries a valid body.
        let msg = unsafe { b.build_raw_body(&[], CHANGED_SIGNATURE, Vec::new()) }?;
        Ok(ChangedHeader(KeptHeader::new(&msg)?))
    }

    /// The `Changed` signal with `body` (from [`Bodies::body`]) and a
    /// serial of its own.
    fn message(&self, body: &[u8]) -> Result<zbus::Message> {
        // SAFETY: `body` is the serialisation of a `(&str, a{sv})` in a
        // native-endian D-Bus context at offset 0, without fds
        // (`Bodies::body`): the header's signature.
        unsafe { self.0.message(None, body) }
    }
}

/// Subscription1 signal `member` with `body`, to `e`'s owner on `e`'s
/// path.
fn signal<B>(conn: &Connection, e: &Entry, member: &str, body: &B) -> Result<zbus::Message>
where
    B: serde::Serialize + zbus::wire::DynamicType,
{
    let sender = conn.unique_name().map(|u| u.inner());
    Ok(builder(sender, e, member).build(body)?)
}

/// The builder of Subscription1 signal `member` from `sender` (the
/// broker's unique name, when it has one) to `e`'s owner on `e`'s path:
/// unicast, so that only the subscriber receives it.
fn builder<'a>(
    sender: Option<&zbus::names::UniqueName<'a>>,
    e: &'a Entry,
    member: &'a str,
) -> zbus::message::Builder<'a> {
    let b = zbus::Message::signal(e.path.as_ref(), "org.contextd.Subscription1", member)
        .destination(e.owner.as_str());
    match sender {
        Some(us) => b.sender(us.clone()),
        None => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dbus::wire::header::SERIAL_AT;

    /// Signals go out in turns, and each subscription's keep their order.
    #[test]
    fn signals_go_out_in_turns_each_subscriptions_in_order() {
        let mut turns = HashMap::new();
        let mut taken = vec![
            (1, "1a"),
            (1, "1f"),
            (1, "1b"),
            (2, "2a"),
            (2, "2f"),
            (3, "3f"),
            (2, "2b"),
            (1, "1r"),
        ];
        let out = in_turns(&mut taken, &mut turns);
        assert!(taken.is_empty());
        assert_eq!(
            out,
            ["1a", "2a", "3f", "1f", "2f", "1b", "2b", "1r"],
            "every subscription's first, then second, ..."
        );
        let mut again = vec![(4, "4a"), (5, "5a")];
        assert_eq!(in_turns(&mut again, &mut turns), ["4a", "5a"]);
    }

    /// A storm fills the outbox to its limit; once written, the queue it
    /// hands back and the turns keep only the room of a steady batch.
    #[test]
    fn the_room_of_a_storm_goes_back_once_written() {
        let mut taken: Vec<(u64, u32)> = (0..OUTBOX_LIMIT as u32)
            .map(|i| (u64::from(i % 300), i))
            .collect();
        let mut turns = HashMap::new();
        let out = in_turns(&mut taken, &mut turns);
        assert_eq!(out.len(), OUTBOX_LIMIT);
        assert!(taken.is_empty());
        assert!(taken.capacity() <= OUTBOX_KEPT, "{}", taken.capacity());
        assert!(turns.capacity() <= 2 * OUTBOX_KEPT, "{}", turns.capacity());
        // A steady batch fits in what is kept: no regrowth.
        taken.reserve(OUTBOX_KEPT);
        let kept = taken.capacity();
        for _ in 0..10 {
            taken.extend((0..150u32).map(|i| (u64::from(i % 50), i)));
            assert_eq!(in_turns(&mut taken, &mut turns).len(), 150);
            assert_eq!(taken.capacity(), kept);
        }
    }

    /// A `Changed` made from the kept header is the builder's message,
    /// byte for byte but for the serial, and reads back as the same
    /// signal with the same body.
    #[test]
    fn a_changed_from_the_kept_header_is_the_builders_message() {
        let e = Entry {
            owner: ":1.42".into(),
            path: OwnedObjectPath::try_from("/org/contextd/Broker1/subscription/7").expect("path"),
            stop: CancellationToken::new(),
        };
        let sender = zbus::names::UniqueName::try_from(":1.3").expect("name");
        let header = ChangedHeader::new(Some(&sender), &e).expect("header");
        let mut dict: HashMap<String, Variant<'_>> = HashMap::new();
        dict.insert("event".into(), Variant::from("focus"));
        dict.insert(
            "title".into(),
            Variant::from("a window with a longer title"),
        );
        let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
        for body in [("windows", dict.clone()), ("w", HashMap::new())] {
            let bytes = zbus::wire::to_bytes(ctxt, &body).expect("body");
            let ours = header.message(&bytes).expect("message");
            // SAFETY: as in `ChangedHeader::message`; a test of it.
            let built = unsafe {
                zbus::Message::signal(e.path.as_ref(), "org.contextd.Subscription1", "Changed")
                    .destination(e.owner.as_str())
                    .sender(&sender)
                    .build_raw_body(&bytes, CHANGED_SIGNATURE, Vec::new())
            }
            .expect("built");
            assert_ne!(
                ours.primary_header().serial_num(),
                built.primary_header().serial_num()
            );
            let mut a = ours.data().bytes().to_vec();
            let mut b = built.data().bytes().to_vec();
            a[SERIAL_AT].fill(0);
            b[SERIAL_AT].fill(0);
            assert_eq!(a, b);
            let h = ours.header();
            assert_eq!(h.destination().map(|d| d.as_str()), Some(":1.42"));
            assert_eq!(h.sender().map(|s| s.as_str()), Some(":1.3"));
            assert_eq!(h.member().map(|m| m.as_str()), Some("Changed"));
            let (cat, got): (String, HashMap<String, zbus::wire::OwnedVariant>) =
                ours.body().deserialize().expect("body reads back");
            assert_eq!(cat, body.0);
            assert_eq!(got.len(), body.1.len());
        }
    }
}

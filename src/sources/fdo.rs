//! Plumbing shared by the freedesktop sources (`login1`, `upower`,
//! `networkmanager`, `notifications`, `mpris`): bus connections, following
//! a service's name owner, following an object's properties, tolerant
//! reading of property values, and warnings that are logged once.
//!
//! **Why properties are followed here and not through a `#[proxy]`'s
//! property cache.** The sources call methods and receive plain signals
//! through `#[proxy]` proxies, but they follow properties with
//! [`PropsWatch`], one `PropertiesChanged` match rule plus one `GetAll` per
//! object, for three reasons:
//! - one `PropertiesChanged` signal becomes exactly one state update (UPower
//!   changes `Percentage`, `State` and `TimeToEmpty` in one signal; a proxy
//!   gives one stream per property and so three half-updated states);
//! - a service that sends a property with the wrong type must not make the
//!   source fail: values are read one by one with [`Reader`], a wrong one
//!   is logged once and treated as missing, the rest is still shown;
//! - signals that were queued before the `GetAll` reply are older than it
//!   and are skipped by serial number ([`PropsWatch::new`]), so a stale
//!   value never overwrites a fresh one.
//!
//! Nothing polls: values change only on `PropertiesChanged`, services come
//! and go on `NameOwnerChanged`, a bus that is not there is waited for on
//! its socket ([`super::socket`]). Only a service that is on the bus but
//! answers with errors is retried, with [`Backoff`].

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::future::Future;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use zbus::message::Type as MsgType;
use zbus::wire::{OwnedVariant, Variant};
use zbus::{Connection, MatchRule, Message, MessageStream};

use super::socket::SocketWatch;
use super::{Backoff, SourceContext};
use crate::core::SourceEvent;

/// Property values by name, as `GetAll` returns them.
pub(crate) type Props = HashMap<String, OwnedVariant>;

/// How long a call to a service may take. A service that hangs must not
/// hang its source for zbus's default of 25 s.
pub(crate) const METHOD_TIMEOUT: Duration = Duration::from_secs(5);

/// How many messages a watch may queue before the bus connection waits
/// for it; generous, because the sources drain their streams at once.
const MAX_QUEUED: NonZeroUsize = NonZeroUsize::new(256).unwrap();

pub(crate) const PROPERTIES_IFACE: &str = "org.freedesktop.DBus.Properties";
pub(crate) const DBUS_NAME: &str = "org.freedesktop.DBus";
pub(crate) const DBUS_PATH: &str = "/org/freedesktop/DBus";

#[derive(Debug, thiserror::Error)]
pub(crate) enum FdoError {
    #[error("cannot connect to the {bus} bus: {source}")]
    Connect {
        bus: &'static str,
        #[source]
        source: zbus::Error,
    },
    #[error("{0}")]
    Bus(#[from] zbus::Error),
    #[error("{0}")]
    Fdo(#[from] zbus::fdo::Error),
    #[error("the connection to the bus closed")]
    Closed,
    #[error("{0}")]
    Service(String),
}

impl FdoError {
    /// Whether the bus connection itself is gone (reconnect), rather than
    /// one service misbehaving (retry that service).
    pub(crate) fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            FdoError::Closed
                | FdoError::Connect { .. }
                | FdoError::Bus(zbus::Error::InputOutput(_))
        )
    }
}

/// Which bus a service lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BusKind {
    /// `DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`.
    System,
    /// `DBUS_SESSION_BUS_ADDRESS`.
    Session,
}

impl BusKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BusKind::System => "system",
            BusKind::Session => "session",
        }
    }

    /// The bus's socket file, where its address names one (zbus reads the
    /// address as `connect` will, with its default for the system bus):
    /// what to watch for while the bus is not there.
    pub(crate) fn socket(self) -> Option<PathBuf> {
        let address = match self {
            BusKind::System => zbus::Address::system(),
            BusKind::Session => zbus::Address::session(),
        };
        socket_file(&address.ok()?)
    }
}

/// The socket file of a `unix:path=` address (not an abstract socket,
/// TCP, …).
fn socket_file(address: &zbus::Address) -> Option<PathBuf> {
    use zbus::address::transport::{Transport, UnixSocket};
    match address.transport() {
        Transport::Unix(u) => match u.path() {
            UnixSocket::File(p) => Some(p.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// A new connection to `bus`. Each source has its own, so that a service
/// that floods one source with signals cannot slow the broker's main
/// connection, which serves the apps.
pub(crate) async fn connect(bus: BusKind) -> Result<Connection, FdoError> {
    let builder = match bus {
        BusKind::System => zbus::connection::Builder::system(),
        BusKind::Session => zbus::connection::Builder::session(),
    };
    builder
        .method_timeout(METHOD_TIMEOUT)
        .max_queued(MAX_QUEUED)
        .build()
        .await
        .map_err(|source| FdoError::Connect {
            bus: bus.as_str(),
            source,
        })
}

/// Warnings about bad input from services, each logged once per source
/// (no log flood from a service that sends the same wrong value with every
/// change). Keys name what was wrong (`Percentage: value`). Shared by
/// reference between the watches of one source, hence the lock (never held
/// across an await).
#[derive(Debug)]
pub(crate) struct Warned {
    source: &'static str,
    seen: Mutex<HashSet<String>>,
}

/// After this many distinct warnings a source stops warning at all: a
/// service that invents new bad keys must not flood the log either.
const MAX_WARNINGS: usize = 64;

impl Warned {
    pub(crate) fn new(source: &'static str) -> Self {
        Warned {
            source,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// Log `msg` unless `key` was logged before; `true` if logged.
    pub(crate) fn warn(&self, key: &str, msg: impl Display) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_WARNINGS || seen.contains(key) {
            return false;
        }
        seen.insert(key.to_owned());
        if seen.len() == MAX_WARNINGS {
            tracing::warn!(
                source = self.source,
                "{msg} (further bad input from this source is not logged)"
            );
        } else {
            tracing::warn!(source = self.source, "{msg}");
        }
        true
    }

    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Logs a source's failures at `info` once per distinct failure, and its
/// repeats (every retry of a service that stays broken) at `debug`.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    last: Option<String>,
}

impl Failures {
    pub(crate) fn log(&mut self, source: &str, msg: &str) {
        if self.last.as_deref() == Some(msg) {
            tracing::debug!(source, "{msg}");
        } else {
            tracing::info!(source, "{msg}");
            self.last = Some(msg.to_owned());
        }
    }

    /// Working again: the next failure is news.
    pub(crate) fn clear(&mut self) {
        self.last = None;
    }
}

/// The value inside any number of `v` wrappers (some services wrap twice).
pub(crate) fn unwrap_variant<'a, 'b>(v: &'b Variant<'a>) -> &'b Variant<'a> {
    let mut v = v;
    let mut depth = 0;
    while let Variant::Variant(inner) = v {
        depth += 1;
        if depth > 8 {
            break;
        }
        v = inner;
    }
    v
}

pub(crate) fn as_bool(v: &Variant<'_>) -> Option<bool> {
    match unwrap_variant(v) {
        Variant::Bool(b) => Some(*b),
        _ => None,
    }
}

/// Any integer type, as i128 so that every D-Bus integer fits.
pub(crate) fn as_int(v: &Variant<'_>) -> Option<i128> {
    Some(match unwrap_variant(v) {
        Variant::U8(n) => (*n).into(),
        Variant::I16(n) => (*n).into(),
        Variant::U16(n) => (*n).into(),
        Variant::I32(n) => (*n).into(),
        Variant::U32(n) => (*n).into(),
        Variant::I64(n) => (*n).into(),
        Variant::U64(n) => (*n).into(),
        _ => return None,
    })
}

/// A double, or any integer as one.
pub(crate) fn as_f64(v: &Variant<'_>) -> Option<f64> {
    match unwrap_variant(v) {
        Variant::F64(d) => Some(*d),
        other => as_int(other).map(|n| n as f64),
    }
}

/// A string or an object path.
pub(crate) fn as_str<'a>(v: &'a Variant<'_>) -> Option<&'a str> {
    match unwrap_variant(v) {
        Variant::Str(s) => Some(s.as_str()),
        Variant::ObjectPath(p) => Some(p.as_str()),
        _ => None,
    }
}

/// An array of bytes (`ay`).
pub(crate) fn as_bytes(v: &Variant<'_>) -> Option<Vec<u8>> {
    match unwrap_variant(v) {
        Variant::Array(a) => a
            .inner()
            .iter()
            .map(|b| match b {
                Variant::U8(b) => Some(*b),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// An array of strings, or one string (players send `s` where the spec
/// says `as`).
pub(crate) fn as_str_list(v: &Variant<'_>) -> Option<Vec<String>> {
    match unwrap_variant(v) {
        Variant::Str(s) => Some(vec![s.as_str().to_owned()]),
        Variant::Array(a) => a
            .inner()
            .iter()
            .map(|s| as_str(s).map(str::to_owned))
            .collect(),
        _ => None,
    }
}

/// The D-Bus signature of a value, for warnings.
pub(crate) fn type_of(v: &Variant<'_>) -> String {
    unwrap_variant(v).value_signature().to_string()
}

/// Reads properties of one object, warning once per property that is
/// missing or has the wrong type, and returning `None` for it.
pub(crate) struct Reader<'a> {
    pub(crate) props: &'a Props,
    pub(crate) warned: &'a Warned,
    /// Shown in warnings: `org.freedesktop.UPower.Device`.
    pub(crate) what: &'a str,
}

impl Reader<'_> {
    fn get(&mut self, name: &str, expected: &str) -> Option<&Variant<'static>> {
        match self.props.get(name) {
            Some(v) => Some(v),
            None => {
                let key = format!("{}.{name}: missing", self.what);
                self.warned.warn(
                    &key,
                    format_args!(
                        "{}: property {name} ({expected}) is missing; showing the rest",
                        self.what
                    ),
                );
                None
            }
        }
    }

    fn wrong(&mut self, name: &str, expected: &str, v: &Variant<'_>) {
        let key = format!("{}.{name}: type", self.what);
        self.warned.warn(
            &key,
            format_args!(
                "{}: property {name} has type {} instead of {expected}; ignoring it",
                self.what,
                type_of(v)
            ),
        );
    }

    /// A property that must be valid when present; warns (once) when it is
    /// `absurd` according to `why`.
    pub(crate) fn absurd(&mut self, name: &str, why: impl Display) {
        let key = format!("{}.{name}: value", self.what);
        self.warned.warn(
            &key,
            format_args!("{}: property {name} {why}; ignoring it", self.what),
        );
    }

    pub(crate) fn bool(&mut self, name: &str) -> Option<bool> {
        let v = self.get(name, "b")?.clone();
        as_bool(&v).or_else(|| {
            self.wrong(name, "b", &v);
            None
        })
    }

    pub(crate) fn int(&mut self, name: &str, expected: &str) -> Option<i128> {
        let v = self.get(name, expected)?.clone();
        as_int(&v).or_else(|| {
            self.wrong(name, expected, &v);
            None
        })
    }

    pub(crate) fn f64(&mut self, name: &str) -> Option<f64> {
        let v = self.get(name, "d")?.clone();
        as_f64(&v).or_else(|| {
            self.wrong(name, "d", &v);
            None
        })
    }

    pub(crate) fn str(&mut self, name: &str, expected: &str) -> Option<String> {
        let v = self.get(name, expected)?.clone();
        match as_str(&v) {
            Some(s) => Some(s.to_owned()),
            None => {
                self.wrong(name, expected, &v);
                None
            }
        }
    }

    pub(crate) fn bytes(&mut self, name: &str) -> Option<Vec<u8>> {
        let v = self.get(name, "ay")?.clone();
        as_bytes(&v).or_else(|| {
            self.wrong(name, "ay", &v);
            None
        })
    }

    /// A property whose absence is normal (no warning when missing).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.props.contains_key(name)
    }
}

/// A match rule for `PropertiesChanged` of `iface` on `path` from `sender`.
fn properties_rule<'a>(path: &'a str, iface: &'a str) -> zbus::Result<MatchRule<'a>> {
    MatchRule::builder()
        .msg_type(MsgType::Signal)
        .path(path)
        .interface(PROPERTIES_IFACE)
        .member("PropertiesChanged")
        .add_arg(iface)
        .build()
}

/// A signal stream: `member` of `iface` from `sender` (any path if `path`
/// is `None`).
pub(crate) async fn signal_stream(
    conn: &Connection,
    sender: &str,
    path: Option<&str>,
    iface: &str,
    member: &str,
) -> zbus::Result<SignalStream> {
    let mut b = MatchRule::builder()
        .msg_type(MsgType::Signal)
        .interface(iface)
        .member(member);
    if let Some(p) = path {
        b = b.path(p);
    }
    SignalStream::new(conn, b.build()?, sender, Some(MAX_QUEUED)).await
}

/// The signals of a match rule from one peer, `sender` (a unique name).
///
/// Why the rule itself names no sender: dbus-daemon drops a rule whose
/// sender is a unique name when that peer leaves (the name is never used
/// again), and zbus 6's `remove_match`, run when the stream is dropped,
/// then gets `MatchRuleNotFound` from `RemoveMatch` and returns before it
/// forgets the rule: its broadcast channel (18 KB) stayed for every
/// restart of every followed service, the step `make soak`'s heap did not
/// come back from. The sender is checked here instead, on the header the
/// bus daemon writes (a peer cannot forge it), so nothing from another
/// peer, or from an earlier instance of the service, gets through.
#[derive(Debug, Clone)]
pub(crate) struct SignalStream {
    inner: MessageStream,
    sender: String,
}

impl SignalStream {
    pub(crate) async fn new(
        conn: &Connection,
        rule: MatchRule<'_>,
        sender: &str,
        max_queued: Option<NonZeroUsize>,
    ) -> zbus::Result<SignalStream> {
        Ok(SignalStream {
            inner: MessageStream::for_match_rule(rule, conn, max_queued).await?,
            sender: sender.to_owned(),
        })
    }

    fn sent_by_peer(&self, msg: &Message) -> bool {
        msg.header()
            .sender()
            .is_some_and(|s| s.as_str() == self.sender)
    }
}

impl futures_util::Stream for SignalStream {
    type Item = zbus::Result<Message>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        loop {
            match std::task::ready!(self.inner.poll_next_unpin(cx)) {
                Some(Ok(m)) if !self.sent_by_peer(&m) => continue,
                other => return std::task::Poll::Ready(other),
            }
        }
    }
}

/// The properties of one interface of one object, kept current from
/// `PropertiesChanged`.
pub(crate) struct PropsWatch {
    pub(crate) props: Props,
    stream: SignalStream,
    conn: Connection,
    sender: String,
    path: String,
    iface: String,
    /// Signals with a serial up to this one were sent before the `GetAll`
    /// reply and are already in `props`; 0 once a newer one was seen.
    skip_upto: u32,
}

impl std::fmt::Debug for PropsWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PropsWatch")
            .field("sender", &self.sender)
            .field("path", &self.path)
            .field("iface", &self.iface)
            .finish()
    }
}

impl PropsWatch {
    /// Subscribe to `PropertiesChanged`, then `GetAll`. `sender` should be
    /// the service's unique name, so that a new instance of the service is
    /// never mistaken for the old one.
    pub(crate) async fn new(
        conn: &Connection,
        sender: &str,
        path: &str,
        iface: &str,
    ) -> Result<PropsWatch, FdoError> {
        let mut w = PropsWatch::subscribe(conn, sender, path, iface).await?;
        w.get_all().await?;
        Ok(w)
    }

    /// [`PropsWatch::new`] for an interface the service may not have (an
    /// extension of a spec, such as Plasma's `Inhibited` on the
    /// notification server): a failed `GetAll` means no properties yet,
    /// and the watch stays, so that what the service announces later
    /// with `PropertiesChanged` is seen. Only a lost connection is an
    /// error.
    pub(crate) async fn optional(
        conn: &Connection,
        sender: &str,
        path: &str,
        iface: &str,
    ) -> Result<PropsWatch, FdoError> {
        let mut w = PropsWatch::subscribe(conn, sender, path, iface).await?;
        match w.get_all().await {
            Err(e) if e.is_connection_lost() => Err(e),
            Err(e) => {
                tracing::debug!(%path, %iface, error = %e, "no properties (yet)");
                Ok(w)
            }
            Ok(()) => Ok(w),
        }
    }

    /// The match rule first, so that no change falls before the `GetAll`.
    async fn subscribe(
        conn: &Connection,
        sender: &str,
        path: &str,
        iface: &str,
    ) -> Result<PropsWatch, FdoError> {
        let rule = properties_rule(path, iface)?;
        let stream = SignalStream::new(conn, rule, sender, Some(MAX_QUEUED)).await?;
        Ok(PropsWatch {
            props: Props::new(),
            stream,
            conn: conn.clone(),
            sender: sender.to_owned(),
            path: path.to_owned(),
            iface: iface.to_owned(),
            skip_upto: 0,
        })
    }

    async fn get_all(&mut self) -> Result<(), FdoError> {
        let (path, iface) = (self.path.as_str(), self.iface.as_str());
        let reply = self
            .conn
            .call_method(
                Some(self.sender.as_str()),
                path,
                Some(PROPERTIES_IFACE),
                "GetAll",
                &(iface,),
            )
            .await?;
        self.props = reply.body().deserialize().map_err(|e| {
            FdoError::Service(format!("{path}: GetAll({iface}) returned a bad reply: {e}"))
        })?;
        self.skip_upto = reply.primary_header().serial_num().get();
        Ok(())
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Wait for the next `PropertiesChanged` and apply it; returns the
    /// names of the properties that changed. `Err(Closed)` when the
    /// connection is gone. A malformed signal is skipped (and logged once).
    pub(crate) async fn changed(&mut self, warned: &Warned) -> Result<Vec<String>, FdoError> {
        loop {
            let msg = match self.stream.next().await {
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    warned.warn(
                        "PropertiesChanged: unreadable",
                        format_args!("unreadable signal: {e}"),
                    );
                    continue;
                }
                None => return Err(FdoError::Closed),
            };
            if self.is_stale(&msg) {
                continue;
            }
            match msg.body().deserialize::<(String, Props, Vec<String>)>() {
                Ok((_, changed, invalidated)) => {
                    let mut names: Vec<String> = changed.keys().cloned().collect();
                    self.props.extend(changed);
                    for name in invalidated {
                        self.refetch(&name, warned).await;
                        names.push(name);
                    }
                    return Ok(names);
                }
                Err(e) => {
                    let key = format!("{}: bad PropertiesChanged", self.iface);
                    warned.warn(
                        &key,
                        format_args!(
                            "{} {}: PropertiesChanged with a bad body ({e}); skipped",
                            self.path, self.iface
                        ),
                    );
                }
            }
        }
    }

    fn is_stale(&mut self, msg: &Message) -> bool {
        if self.skip_upto == 0 {
            return false;
        }
        if msg.primary_header().serial_num().get() <= self.skip_upto {
            return true;
        }
        self.skip_upto = 0;
        false
    }

    /// An invalidated property (sent without its value): fetch it.
    async fn refetch(&mut self, name: &str, warned: &Warned) {
        let r = self
            .conn
            .call_method(
                Some(self.sender.as_str()),
                self.path.as_str(),
                Some(PROPERTIES_IFACE),
                "Get",
                &(self.iface.as_str(), name),
            )
            .await;
        match r.and_then(|m| m.body().deserialize::<OwnedVariant>()) {
            Ok(v) => {
                self.props.insert(name.to_owned(), v);
            }
            Err(e) => {
                self.props.remove(name);
                let key = format!("{}.{name}: Get", self.iface);
                warned.warn(
                    &key,
                    format_args!("{}: Get({name}) failed: {e}", self.iface),
                );
            }
        }
    }
}

/// Follows who owns a well-known name.
pub(crate) struct NameWatch {
    stream: MessageStream,
    pub(crate) owner: Option<String>,
}

impl NameWatch {
    /// Subscribe to `NameOwnerChanged` for `name`, then ask for its owner
    /// (in this order, so that no change falls between the two).
    pub(crate) async fn new(conn: &Connection, name: &str) -> Result<NameWatch, FdoError> {
        let rule = MatchRule::builder()
            .msg_type(MsgType::Signal)
            .sender(DBUS_NAME)
            .interface(DBUS_NAME)
            .member("NameOwnerChanged")
            .add_arg(name)
            .build()?;
        let stream = MessageStream::for_match_rule(rule, conn, Some(MAX_QUEUED)).await?;
        let owner = name_owner(conn, name).await?;
        Ok(NameWatch { stream, owner })
    }

    /// The next owner change: `Some(new owner)`, `None` when the stream
    /// ended (the connection closed). Repeats of the current owner (a
    /// signal queued before the initial lookup) are skipped.
    pub(crate) async fn next(&mut self) -> Option<Option<String>> {
        while let Some(msg) = self.stream.next().await {
            let Ok(msg) = msg else { continue };
            let Ok((_, _, new)) = msg.body().deserialize::<(String, String, String)>() else {
                continue;
            };
            let new = (!new.is_empty()).then_some(new);
            if new != self.owner {
                self.owner = new.clone();
                return Some(new);
            }
        }
        None
    }
}

/// The unique name owning `name`, or `None`.
pub(crate) async fn name_owner(conn: &Connection, name: &str) -> Result<Option<String>, FdoError> {
    let r = conn
        .call_method(
            Some(DBUS_NAME),
            DBUS_PATH,
            Some(DBUS_NAME),
            "GetNameOwner",
            &(name,),
        )
        .await;
    match r {
        Ok(m) => Ok(Some(m.body().deserialize::<String>()?)),
        Err(zbus::Error::FDO(e)) if matches!(*e, zbus::fdo::Error::NameHasNoOwner(_)) => Ok(None),
        Err(zbus::Error::MethodError(e, _, _))
            if e.as_str() == "org.freedesktop.DBus.Error.NameHasNoOwner" =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The PID of a peer, from the bus (not from anything the peer says).
pub(crate) async fn peer_pid(conn: &Connection, unique: &str) -> Result<u32, FdoError> {
    let m = conn
        .call_method(
            Some(DBUS_NAME),
            DBUS_PATH,
            Some(DBUS_NAME),
            "GetConnectionUnixProcessID",
            &(unique,),
        )
        .await?;
    Ok(m.body().deserialize::<u32>()?)
}

/// A system-bus (or session-bus) service that a source follows through
/// [`run_service`]: it attaches to the service's current owner and then
/// turns its signals into events.
pub(crate) trait Service: Send {
    /// The source's name in `ListSources`.
    const SOURCE: &'static str;
    /// The service's well-known name.
    const BUS_NAME: &'static str;
    const BUS: BusKind;

    /// The event that says this context is unknown (the service is gone).
    fn gone(&self) -> SourceEvent;

    /// Set up everything against the service owned by `owner` and return
    /// the first state.
    fn attach(
        &mut self,
        conn: &Connection,
        owner: &str,
    ) -> impl Future<Output = Result<SourceEvent, FdoError>> + Send;

    /// Wait for the next change and return the new state.
    fn next(&mut self) -> impl Future<Output = Result<SourceEvent, FdoError>> + Send;

    /// Drop everything `attach` set up.
    fn detach(&mut self);

    /// Signals of the service (interface, member) after which an attach
    /// that failed is worth trying again at once rather than after the
    /// backoff: logind's `SessionNew`, when no session was found.
    const RETRY_ON: &'static [(&'static str, &'static str)] = &[];
}

/// The signals of `S::RETRY_ON` from `owner`, merged; `None` when there
/// are none (or the match rules cannot be added: the backoff still runs).
async fn retry_signals<S: Service>(
    conn: &Connection,
    owner: &str,
) -> Option<futures_util::stream::SelectAll<SignalStream>> {
    if S::RETRY_ON.is_empty() {
        return None;
    }
    let mut streams = Vec::new();
    for (iface, member) in S::RETRY_ON {
        match signal_stream(conn, owner, None, iface, member).await {
            Ok(s) => streams.push(s),
            Err(e) => {
                tracing::debug!(source = S::SOURCE, error = %e, "cannot watch {iface}.{member}");
                return None;
            }
        }
    }
    Some(futures_util::stream::select_all(streams))
}

/// How following a service ended.
enum Flow {
    Cancelled,
    Lost(FdoError),
}

/// Follow `S` until cancelled: connect (with backoff), wait for the
/// service's name, attach, forward its changes to `out`, and start over
/// when it leaves, restarts or the bus goes away. Health goes to
/// `ListSources` through `ctx`.
pub(crate) async fn run_service<S: Service>(
    ctx: SourceContext,
    out: mpsc::Sender<SourceEvent>,
    mut svc: S,
) {
    let mut backoff = Backoff::default();
    let mut failures = Failures::default();
    let socket = S::BUS.socket();
    let mut watch: Option<SocketWatch> = None;
    loop {
        // Watch before each try, so that a bus that appears between a
        // failed try and the wait is not missed.
        if let (None, Some(path)) = (&watch, &socket) {
            watch = Some(SocketWatch::new(S::SOURCE, path));
        }
        let conn = match connect(S::BUS).await {
            Ok(c) => c,
            Err(e) => {
                failures.log(S::SOURCE, &e.to_string());
                let _ = out.send(svc.gone()).await;
                ctx.status(S::SOURCE, false, Some(e.to_string())).await;
                // No bus (a container, a minimal system): wait for its
                // socket rather than knocking every 30 s.
                let waited = match watch.as_mut() {
                    Some(w) => w.wait(&ctx.cancel, &mut backoff).await,
                    None => ctx.sleep(backoff.next_delay()).await,
                };
                if !waited {
                    return;
                }
                continue;
            }
        };
        watch = None;
        match follow(&ctx, &out, &conn, &mut svc, &mut backoff, &mut failures).await {
            Flow::Cancelled => {
                svc.detach();
                return;
            }
            Flow::Lost(e) => {
                svc.detach();
                failures.log(S::SOURCE, &format!("{e}; reconnecting"));
                let _ = out.send(svc.gone()).await;
                ctx.status(S::SOURCE, false, Some(e.to_string())).await;
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
            }
        }
    }
}

async fn follow<S: Service>(
    ctx: &SourceContext,
    out: &mpsc::Sender<SourceEvent>,
    conn: &Connection,
    svc: &mut S,
    backoff: &mut Backoff,
    failures: &mut Failures,
) -> Flow {
    let mut names = match NameWatch::new(conn, S::BUS_NAME).await {
        Ok(n) => n,
        Err(e) => return Flow::Lost(e),
    };
    let bus = S::BUS.as_str();
    loop {
        let Some(owner) = names.owner.clone() else {
            let _ = out.send(svc.gone()).await;
            let why = format!("{} is not running (no owner on the {bus} bus)", S::BUS_NAME);
            failures.log(S::SOURCE, &why);
            ctx.status(S::SOURCE, false, Some(why)).await;
            tokio::select! {
                _ = ctx.cancel.cancelled() => return Flow::Cancelled,
                o = names.next() => if o.is_none() { return Flow::Lost(FdoError::Closed) },
            }
            continue;
        };
        let first = tokio::select! {
            _ = ctx.cancel.cancelled() => return Flow::Cancelled,
            r = svc.attach(conn, &owner) => r,
        };
        match first {
            Ok(ev) => {
                if out.send(ev).await.is_err() {
                    return Flow::Cancelled;
                }
                tracing::info!(source = S::SOURCE, owner = %owner, "following {}", S::BUS_NAME);
                ctx.status(S::SOURCE, true, None).await;
                backoff.reset();
                failures.clear();
            }
            Err(e) => {
                svc.detach();
                if e.is_connection_lost() {
                    return Flow::Lost(e);
                }
                let why = format!("{}: {e}", S::BUS_NAME);
                failures.log(S::SOURCE, &format!("{why}; retrying"));
                let _ = out.send(svc.gone()).await;
                ctx.status(S::SOURCE, false, Some(why)).await;
                let mut retry = retry_signals::<S>(conn, &owner).await;
                let retry_now = async {
                    match retry.as_mut() {
                        Some(r) => {
                            r.next().await;
                        }
                        None => std::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    _ = ctx.cancel.cancelled() => return Flow::Cancelled,
                    o = names.next() => if o.is_none() { return Flow::Lost(FdoError::Closed) },
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                    _ = retry_now => {
                        tracing::debug!(source = S::SOURCE, "trying again at once: the service announced a change");
                        backoff.reset();
                    }
                }
                continue;
            }
        }
        // Attached: forward changes until the owner changes.
        loop {
            tokio::select! {
                _ = ctx.cancel.cancelled() => return Flow::Cancelled,
                o = names.next() => {
                    svc.detach();
                    match o {
                        None => return Flow::Lost(FdoError::Closed),
                        Some(None) => tracing::info!(source = S::SOURCE, "{} left the bus", S::BUS_NAME),
                        Some(Some(o)) => tracing::info!(source = S::SOURCE, owner = %o, "{} has a new owner", S::BUS_NAME),
                    }
                    break;
                }
                ev = svc.next() => match ev {
                    Ok(ev) => {
                        if out.send(ev).await.is_err() {
                            return Flow::Cancelled;
                        }
                    }
                    Err(e) => {
                        svc.detach();
                        if e.is_connection_lost() {
                            return Flow::Lost(e);
                        }
                        // The service misbehaves (an object vanished):
                        // attach again after a pause.
                        let why = format!("{}: {e}", S::BUS_NAME);
                        failures.log(S::SOURCE, &why);
                        ctx.status(S::SOURCE, false, Some(why)).await;
                        if !ctx.sleep(backoff.next_delay()).await {
                            return Flow::Cancelled;
                        }
                        break;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::Str;

    #[test]
    fn a_bus_socket_file_is_read_from_its_address() {
        let file = |a: &str| socket_file(&a.parse().expect("address"));
        assert_eq!(
            file("unix:path=/run/dbus/system_bus_socket"),
            Some(PathBuf::from("/run/dbus/system_bus_socket"))
        );
        // The path zbus connects to, as zbus reads it.
        assert_eq!(
            file("unix:path=/tmp/bus,guid=0123456789abcdef0123456789abcdef"),
            Some(PathBuf::from("/tmp/bus"))
        );
        assert_eq!(file("unix:abstract=/tmp/dbus-x"), None);
        assert_eq!(file("tcp:host=localhost,port=1"), None);
    }

    #[test]
    fn values_are_read_tolerantly() {
        let nested = Variant::Variant(Box::new(Variant::Variant(Box::new(Variant::U32(7)))));
        assert_eq!(as_int(&nested), Some(7));
        assert_eq!(as_f64(&Variant::I32(-3)), Some(-3.0));
        assert_eq!(as_f64(&Variant::F64(0.5)), Some(0.5));
        assert_eq!(as_bool(&Variant::U32(1)), None);
        assert_eq!(as_str(&Variant::Str(Str::from("x"))), Some("x"));
        assert_eq!(
            as_str_list(&Variant::Str(Str::from("one"))),
            Some(vec!["one".to_owned()])
        );
        assert_eq!(
            as_str_list(&Variant::from(vec!["a".to_owned(), "b".to_owned()])),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(as_str_list(&Variant::from(vec![1u32, 2])), None);
        assert_eq!(
            as_bytes(&Variant::from(b"net".to_vec())),
            Some(b"net".to_vec())
        );
    }

    #[test]
    fn warnings_are_logged_once_and_bounded() {
        let w = Warned::new("test");
        assert!(w.warn("a", "first"));
        assert!(!w.warn("a", "again"));
        for i in 0..200 {
            w.warn(&format!("k{i}"), "x");
        }
        assert_eq!(w.count(), MAX_WARNINGS);
        assert!(!w.warn("new", "no more"));
    }

    #[test]
    fn reader_warns_once_and_shows_the_rest() {
        let mut props = Props::new();
        props.insert("Ok".into(), OwnedVariant::from(true));
        props.insert("Wrong".into(), OwnedVariant::from(Str::from("yes")));
        let w = Warned::new("test");
        let mut r = Reader {
            props: &props,
            warned: &w,
            what: "iface",
        };
        assert_eq!(r.bool("Ok"), Some(true));
        assert_eq!(r.bool("Wrong"), None);
        assert_eq!(r.bool("Wrong"), None);
        assert_eq!(r.bool("Missing"), None);
        assert_eq!(w.count(), 2);
    }
}

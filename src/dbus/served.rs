//! Replies written once: an interface whose methods answer views, served
//! so that those methods' replies are the writer's bytes (`wire::body`,
//! `wire::list`, `wire::page`) behind a kept header, not a `Dict` of
//! `OwnedVariant`s that zvariant parsed back from those bytes and zbus
//! serialised again (three passes and an allocation per value).
//!
//! zbus's `#[interface]` cannot take a body as bytes, so [`Served`]
//! implements zbus's `Interface` by delegating to the macro's, except for
//! the members the interface's [`OnePass::one_pass`] table names: for
//! those it reads the arguments as the macro does (same type, same
//! `org.freedesktop.DBus.Error.InvalidArgs` with zvariant's words), runs
//! the same method body (each such method is a `fn` returning the view,
//! which the macro's method wraps too, so both paths decide alike), and
//! sends what the writer wrote. The introspection, properties and every
//! other method are the macro's, unchanged.
//!
//! Why: under the soak the broker answers tens of list calls a second
//! (`ListWindows`, `GetSnapshot`, `GetMedia`, `ListSources`, `Consent1`'s
//! lists, `History1.Query`), and the bus thread's time on them delays
//! everything else on the connection (issue 50).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use zbus::message::Header;
use zbus::object_server::{DispatchResult, Interface, SignalEmitter};
use zbus::wire::{DynamicDeserialize, Variant};
use zbus::{Connection, Message};

use super::error::{Error, Result};
use super::wire::{self, KeptHeader, WireError};

/// The signature of a reply written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `a{sv}`: one view.
    Dict,
    /// `aa{sv}`: a list of views.
    List,
    /// `(aa{sv}, s)`: a page of views and the next page's cursor.
    Page,
}

impl Shape {
    const ALL: usize = 3;

    fn signature(self) -> &'static str {
        match self {
            Shape::Dict => "a{sv}",
            Shape::List => "aa{sv}",
            Shape::Page => "aa{sv}s",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A reply body written once, and its signature.
#[derive(Debug)]
pub(crate) struct Written {
    shape: Shape,
    body: Arc<[u8]>,
}

impl Written {
    /// One view, `a{sv}`.
    pub(crate) fn dict<T: Serialize + ?Sized>(view: &T) -> Result<Self> {
        Self::of(Shape::Dict, wire::body(view))
    }

    /// A list of views, `aa{sv}`.
    pub(crate) fn list<T: Serialize>(items: &[T]) -> Result<Self> {
        Self::of(Shape::List, wire::list(items))
    }

    /// A page of views and the next page's cursor, `(aa{sv}, s)`.
    pub(crate) fn page<T: Serialize>(items: &[T], cursor: &str) -> Result<Self> {
        Self::of(Shape::Page, wire::page(items, cursor))
    }

    fn of(shape: Shape, body: std::result::Result<Arc<[u8]>, WireError>) -> Result<Self> {
        // A view the writer declines is the error the `Dict` path gives
        // (the same writer wrote the bytes that path reads back).
        Ok(Written { shape, body: body? })
    }
}

/// Why a call written once was not answered with a view.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Its arguments are not the method's: the macro's own error.
    Args(zbus::fdo::Error),
    /// The method refused (consent, not found, …), as the macro's
    /// method would have.
    Method(Error),
}

impl From<Error> for Refusal {
    fn from(e: Error) -> Self {
        Refusal::Method(e)
    }
}

impl From<WireError> for Refusal {
    fn from(e: WireError) -> Self {
        Refusal::Method(e.into())
    }
}

/// What a member written once answers.
pub(crate) type Answer<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Written, Refusal>> + Send + 'a>>;

/// An interface some of whose methods are answered in one pass.
pub(crate) trait OnePass: Interface {
    /// The answer of `member` to the call `msg`, or `None` for a member
    /// the macro's method answers. One `match` per interface: member →
    /// [`answer`] with the arguments' type, the view and its shape.
    fn one_pass<'a>(&'a self, member: &str, msg: &'a Message) -> Option<Answer<'a>>;

    /// The kept reply headers (shared by every interface of the broker).
    fn replies(&self) -> &ReplyHeaders;
}

/// The answer of `method` to `msg`: its arguments read as the macro reads
/// them (`A`, the method's argument types as a tuple; a body that is not
/// one is `InvalidArgs` with zvariant's description, as the macro replies),
/// then `method` with them.
pub(crate) fn answer<'a, A, F, Fut>(msg: &'a Message, method: F) -> Answer<'a>
where
    A: for<'d> DynamicDeserialize<'d> + Send + 'a,
    F: FnOnce(A, Header<'a>) -> Fut + Send + 'a,
    Fut: Future<Output = Result<Written>> + Send + 'a,
{
    Box::pin(async move {
        let args: A = msg
            .body()
            .deserialize()
            .map_err(|e| Refusal::Args(zbus::fdo::Error::InvalidArgs(e.to_string())))?;
        Ok(method(args, msg.header()).await?)
    })
}

/// An interface served with its view replies written once (see the
/// module's doc).
pub(crate) struct Served<I>(pub(crate) I);

#[async_trait::async_trait]
impl<I: OnePass> Interface for Served<I> {
    fn name() -> zbus::names::InterfaceName<'static> {
        I::name()
    }

    fn spawn_tasks_for_methods(&self) -> bool {
        self.0.spawn_tasks_for_methods()
    }

    async fn get(
        &self,
        property: &str,
        server: &zbus::ObjectServer,
        conn: &Connection,
        hdr: Option<&Header<'_>>,
        emitter: &SignalEmitter<'_>,
    ) -> Option<std::result::Result<zbus::wire::OwnedVariant, zbus::BoxDBusError>> {
        self.0.get(property, server, conn, hdr, emitter).await
    }

    async fn get_all(
        &self,
        server: &zbus::ObjectServer,
        conn: &Connection,
        hdr: Option<&Header<'_>>,
        emitter: &SignalEmitter<'_>,
    ) -> zbus::fdo::Result<HashMap<String, zbus::wire::OwnedVariant>> {
        self.0.get_all(server, conn, hdr, emitter).await
    }

    fn set<'call>(
        &'call self,
        property: &'call str,
        value: &'call Variant<'_>,
        server: &'call zbus::ObjectServer,
        conn: &'call Connection,
        hdr: Option<&'call Header<'_>>,
        emitter: &'call SignalEmitter<'_>,
    ) -> DispatchResult<'call> {
        self.0.set(property, value, server, conn, hdr, emitter)
    }

    async fn set_mut(
        &mut self,
        property: &str,
        value: &Variant<'_>,
        server: &zbus::ObjectServer,
        conn: &Connection,
        hdr: Option<&Header<'_>>,
        emitter: &SignalEmitter<'_>,
    ) -> Option<std::result::Result<(), zbus::BoxDBusError>> {
        self.0
            .set_mut(property, value, server, conn, hdr, emitter)
            .await
    }

    fn call<'call>(
        &'call self,
        server: &'call zbus::ObjectServer,
        conn: &'call Connection,
        msg: &'call Message,
        name: zbus::names::MemberName<'call>,
    ) -> DispatchResult<'call> {
        match self.0.one_pass(name.as_str(), msg) {
            Some(answer) => DispatchResult::Async(Box::pin(async move {
                let answer = answer.await;
                send(conn, msg, self.0.replies(), answer)
                    .await
                    .map_err(zbus::BoxDBusError::from)
            })),
            None => self.0.call(server, conn, msg, name),
        }
    }

    fn call_mut<'call>(
        &'call mut self,
        server: &'call zbus::ObjectServer,
        conn: &'call Connection,
        msg: &'call Message,
        name: zbus::names::MemberName<'call>,
    ) -> DispatchResult<'call> {
        self.0.call_mut(server, conn, msg, name)
    }

    fn introspect_to_writer(&self, writer: &mut dyn std::fmt::Write, level: usize) {
        self.0.introspect_to_writer(writer, level)
    }
}

/// Send `answer` to the call `msg` as the macro would: nothing when no
/// reply is expected, but for arguments that are not the method's (the
/// macro refuses those before it looks at the flag).
async fn send(
    conn: &Connection,
    msg: &Message,
    replies: &ReplyHeaders,
    answer: std::result::Result<Written, Refusal>,
) -> zbus::Result<()> {
    let hdr = msg.header();
    let quiet = hdr
        .primary()
        .flags()
        .contains(zbus::message::Flags::NO_REPLY_EXPECTED);
    let reply = match answer {
        Err(Refusal::Args(e)) => return conn.reply_dbus_error(&hdr, e).await,
        _ if quiet => return Ok(()),
        Err(Refusal::Method(e)) => Err(e),
        Ok(w) => message(replies, conn.unique_name(), &hdr, &w),
    };
    match reply {
        Ok(reply) => conn.send(&reply).await,
        Err(e) => conn.reply_dbus_error(&hdr, e).await,
    }
}

/// The reply to `call` with `written` as its body, behind the caller's
/// kept header for that shape ([`ReplyHeaders`]).
pub(crate) fn message(
    replies: &ReplyHeaders,
    sender: Option<&zbus::names::OwnedUniqueName>,
    call: &Header<'_>,
    written: &Written,
) -> Result<Message> {
    let kept = replies.of(call, written.shape, || {
        let b = Message::method_return(call);
        let b = match sender {
            Some(name) => b.sender(name),
            None => b,
        };
        // SAFETY: an empty body, never sent: only its header is kept
        // ([`KeptHeader`]).
        Ok(unsafe { b.build_raw_body(&[], written.shape.signature(), Vec::new()) }?)
    })?;
    // SAFETY: the writer writes a valid native-endian value of the shape's
    // signature at offset 0, the kept header's signature (the tests read
    // each reply back and compare it with the `Dict` path's, value and
    // bytes).
    unsafe { kept.message(Some(call.primary().serial_num().get()), &written.body) }
}

/// One caller's kept headers, one per [`Shape`].
type Kept = [Option<Arc<KeptHeader>>; Shape::ALL];

/// The header of the replies to each caller, per shape, kept
/// ([`KeptHeader`]): the same fields every time (the caller as the
/// destination, the broker as the sender, the signature), but for the
/// serial of the call answered. Building it through zbus was 11 % of the
/// daemon's time under the broker bench's audited load, its largest
/// single part.
///
/// Forgotten when the caller leaves the bus (`dbus::serve`'s watch of
/// owner changes), and all of it past [`ReplyHeaders::MAX`] callers.
#[derive(Debug, Default)]
pub(crate) struct ReplyHeaders(std::sync::Mutex<HashMap<String, Kept>>);

impl ReplyHeaders {
    const MAX: usize = 256;

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept header of the replies of `shape` to `call`'s sender, from
    /// `template` (a reply to `call` with an empty body) the first time.
    fn of(
        &self,
        call: &Header<'_>,
        shape: Shape,
        template: impl FnOnce() -> Result<Message>,
    ) -> Result<Arc<KeptHeader>> {
        let caller = call.sender().map(|s| s.as_str()).unwrap_or("");
        if let Some(kept) = self
            .lock()
            .get(caller)
            .and_then(|k| k[shape.index()].clone())
        {
            return Ok(kept);
        }
        let kept = Arc::new(KeptHeader::new(&template()?)?);
        let mut all = self.lock();
        if all.len() >= Self::MAX && !all.contains_key(caller) {
            all.clear();
        }
        all.entry(caller.to_owned()).or_default()[shape.index()] = Some(kept.clone());
        Ok(kept)
    }

    /// `caller` left the bus.
    pub(crate) fn forget(&self, caller: &str) {
        self.lock().remove(caller);
    }

    #[cfg(test)]
    pub(crate) fn callers(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
}

//! `org.contextd.Context1`: reading and subscribing to context.
//! Documented in `dbus-interfaces/org.contextd.Context1.xml`.

use std::collections::HashMap;
use std::sync::Arc;

use zbus::message::Header;
use zbus::wire::{OwnedObjectPath, OwnedVariant, Variant};
use zbus::{Connection, interface};

use super::Shared;
use super::error::{Error, Result};
use super::request;
use super::subscription;
use super::wire::KeptHeader;
use super::wire::{self, Dict};
use crate::core::read::{self, Requested, Settled};
use crate::core::{Mode, prompts, provide, view};
use crate::model::Category;

/// The interface version, bumped when methods are added.
pub const VERSION: u32 = 4;

pub(crate) struct Context1 {
    pub(crate) shared: Arc<Shared>,
}

/// One provided entry as `GetProvided` answers it: `app_id`, `kind`,
/// `updated`, `data` (the entry's JSON as an `a{sv}`, by the one writer,
/// `wire`) and `json` (that text itself, shared, not copied).
fn provided_record(p: &view::ProvidedView) -> std::result::Result<Dict, wire::WireError> {
    let text = |s: &str| OwnedVariant::from(zbus::wire::Str::from(s.to_owned()));
    let mut d = Dict::with_capacity(5);
    d.insert("app_id".into(), text(&p.app_id));
    d.insert("kind".into(), text(&p.kind));
    d.insert("updated".into(), text(&p.updated));
    d.insert("data".into(), wire::dict_variant(&p.data)?);
    d.insert(
        "json".into(),
        OwnedVariant::from(zbus::wire::Str::from(p.data.shared())),
    );
    Ok(d)
}

/// A page of provided entries as `GetProvidedPage` answers it: one
/// `a{sv}` per entry with `app_id`, `kind`, `updated` and `json` (the
/// entry's JSON-LD text), written straight from the views into the reply,
/// each string borrowed, no dict built. Without `data`: the entry once,
/// as text, not again as a tree of variants (which `GetProvided` still
/// carries). Building that tree, then a dict per record, and reading it
/// back in the client was most of a page's cost, several times a
/// `Peer.Ping` (perf, the provider bench); the text is the entry exactly
/// (an `a{sv}` drops `null` members and types a mixed list as `av`), and
/// every client language reads JSON.
pub(crate) struct PageRecords(Vec<view::ProvidedView>);

impl zbus::wire::Type for PageRecords {
    const SIGNATURE: &'static zbus::wire::Signature = <Vec<Dict> as zbus::wire::Type>::SIGNATURE;
}

impl serde::Serialize for PageRecords {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for p in &self.0 {
            seq.serialize_element(&PageRecord(p))?;
        }
        seq.end()
    }
}

/// One record of [`PageRecords`]: four string variants, borrowed.
struct PageRecord<'a>(&'a view::ProvidedView);

impl serde::Serialize for PageRecord<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        use zbus::wire::as_variant::Serialize as V;
        let p = self.0;
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("app_id", &V(&p.app_id.as_str()))?;
        m.serialize_entry("kind", &V(&p.kind.as_str()))?;
        m.serialize_entry("updated", &V(&p.updated.as_str()))?;
        m.serialize_entry("json", &V(&p.data.as_str()))?;
        m.end()
    }
}

impl Context1 {
    /// What `GetActiveWindow` answers.
    async fn active_window(&self, hdr: &Header<'_>) -> Result<view::WindowView> {
        let v = self
            .shared
            .read(hdr, read::ActiveWindow, super::access(hdr))
            .await?;
        v.window
            .ok_or_else(|| Error::NotFound("no window has focus".into()))
    }
}

/// `Context1` as the object server holds it: the interface the macro made
/// for every call but `GetActiveWindow`, whose reply is built around a
/// body written from the view in one pass (`wire::body`, as `Changed`
/// bodies are). Through zbus, the reply's `a{sv}` (a cached `Dict`) was
/// written one `OwnedVariant` at a time, each value's signature worked
/// out, written and parsed again: a tenth of the daemon's time under the
/// broker bench's audited load, the hottest read there is, and zbus's
/// `#[interface]` has no way to hand it bytes. A view the one-pass writer
/// declines is answered through a `Dict`. The introspection, properties
/// and every other method are the macro's, unchanged.
pub(crate) struct Served(pub(crate) Context1);

#[async_trait::async_trait]
impl zbus::object_server::Interface for Served {
    fn name() -> zbus::names::InterfaceName<'static> {
        <Context1 as zbus::object_server::Interface>::name()
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
        emitter: &zbus::object_server::SignalEmitter<'_>,
    ) -> Option<std::result::Result<zbus::wire::OwnedVariant, zbus::BoxDBusError>> {
        self.0.get(property, server, conn, hdr, emitter).await
    }

    async fn get_all(
        &self,
        server: &zbus::ObjectServer,
        conn: &Connection,
        hdr: Option<&Header<'_>>,
        emitter: &zbus::object_server::SignalEmitter<'_>,
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
        emitter: &'call zbus::object_server::SignalEmitter<'_>,
    ) -> zbus::object_server::DispatchResult<'call> {
        self.0.set(property, value, server, conn, hdr, emitter)
    }

    async fn set_mut(
        &mut self,
        property: &str,
        value: &Variant<'_>,
        server: &zbus::ObjectServer,
        conn: &Connection,
        hdr: Option<&Header<'_>>,
        emitter: &zbus::object_server::SignalEmitter<'_>,
    ) -> Option<std::result::Result<(), zbus::BoxDBusError>> {
        self.0
            .set_mut(property, value, server, conn, hdr, emitter)
            .await
    }

    fn call<'call>(
        &'call self,
        server: &'call zbus::ObjectServer,
        conn: &'call Connection,
        msg: &'call zbus::Message,
        name: zbus::names::MemberName<'call>,
    ) -> zbus::object_server::DispatchResult<'call> {
        if name.as_str() != "GetActiveWindow" {
            return self.0.call(server, conn, msg, name);
        }
        zbus::object_server::DispatchResult::Async(Box::pin(async move {
            // No arguments to read (the macro's method reads none either).
            let hdr = msg.header();
            let answer = self.0.active_window(&hdr).await;
            if hdr
                .primary()
                .flags()
                .contains(zbus::message::Flags::NO_REPLY_EXPECTED)
            {
                return Ok(());
            }
            let replies = &self.0.shared.replies;
            let sent =
                match answer.and_then(|w| window_reply(replies, conn.unique_name(), &hdr, &w)) {
                    Ok(reply) => conn.send(&reply).await,
                    Err(e) => conn.reply_dbus_error(&hdr, e).await,
                };
            sent.map_err(zbus::BoxDBusError::from)
        }))
    }

    fn call_mut<'call>(
        &'call mut self,
        server: &'call zbus::ObjectServer,
        conn: &'call Connection,
        msg: &'call zbus::Message,
        name: zbus::names::MemberName<'call>,
    ) -> zbus::object_server::DispatchResult<'call> {
        self.0.call_mut(server, conn, msg, name)
    }

    fn introspect_to_writer(&self, writer: &mut dyn std::fmt::Write, level: usize) {
        self.0.introspect_to_writer(writer, level)
    }
}

/// The reply to `call` with `window` as its `a{sv}`: written in one pass
/// behind the caller's kept header ([`ReplyHeaders`]), or (a view the
/// writer declines) serialised through a `Dict` by the builder.
fn window_reply(
    replies: &ReplyHeaders,
    sender: Option<&zbus::names::OwnedUniqueName>,
    call: &Header<'_>,
    window: &view::WindowView,
) -> Result<zbus::Message> {
    let reply = || {
        let b = zbus::Message::method_return(call);
        match sender {
            Some(name) => b.sender(name),
            None => b,
        }
    };
    let body = wire::body(window)?;
    let kept = replies.of(call, || {
        // SAFETY: an empty body, never sent: only its header is kept
        // ([`KeptHeader`]).
        Ok(unsafe { reply().build_raw_body(&[], "a{sv}", Vec::new()) }?)
    })?;
    // SAFETY: `wire::body` writes a valid native-endian `a{sv}` at offset
    // 0, the kept header's signature (a test reads the reply back and
    // compares it with the `Dict` path).
    unsafe { kept.message(Some(call.primary().serial_num().get()), &body) }
}

/// The header of the replies to each caller's `GetActiveWindow`, kept
/// ([`KeptHeader`]): the same fields every time (the caller as the
/// destination, the broker as the sender, `a{sv}`), but for the serial of
/// the call answered. Building it through zbus was 11 % of the daemon's
/// time under the broker bench's audited load, its largest single part.
///
/// Forgotten when the caller leaves the bus (`dbus::serve`'s watch of
/// owner changes), and all of it past [`ReplyHeaders::MAX`] callers.
#[derive(Debug, Default)]
pub(crate) struct ReplyHeaders(std::sync::Mutex<HashMap<String, Arc<KeptHeader>>>);

impl ReplyHeaders {
    const MAX: usize = 256;

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<KeptHeader>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept header of the replies to `call`'s sender, from `template`
    /// (a reply to `call` with an empty body) the first time.
    fn of(
        &self,
        call: &Header<'_>,
        template: impl FnOnce() -> Result<zbus::Message>,
    ) -> Result<Arc<KeptHeader>> {
        let caller = call.sender().map(|s| s.as_str()).unwrap_or("");
        if let Some(kept) = self.lock().get(caller) {
            return Ok(kept.clone());
        }
        let kept = Arc::new(KeptHeader::new(&template()?)?);
        let mut all = self.lock();
        if all.len() >= Self::MAX {
            all.clear();
        }
        all.insert(caller.to_owned(), kept.clone());
        Ok(kept)
    }

    /// `caller` left the bus.
    pub(crate) fn forget(&self, caller: &str) {
        self.lock().remove(caller);
    }
}

pub(crate) fn parse_categories(categories: &[String]) -> Result<Vec<Category>> {
    if categories.is_empty() {
        return Err(Error::InvalidArgs(
            "no categories given; pass at least one (see ListCategories)".into(),
        ));
    }
    let mut cats: Vec<Category> = Vec::with_capacity(categories.len());
    for c in categories {
        let c: Category = c.parse().map_err(crate::core::Error::from)?;
        if !cats.contains(&c) {
            cats.push(c);
        }
    }
    Ok(cats)
}

#[interface(name = "org.contextd.Context1", introspection_docs = false)]
impl Context1 {
    /// Everything the caller may see, one key per category, plus
    /// `withheld`: the categories it may not.
    #[zbus(out_args("snapshot"))]
    async fn get_snapshot(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let v = self
            .shared
            .read(&hdr, read::Snapshot, super::access(&hdr))
            .await?;
        Ok(wire::dict(&v)?)
    }

    /// The open windows (needs `windows`; titles need `windows.titles`).
    #[zbus(out_args("windows"))]
    async fn list_windows(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let v = self
            .shared
            .read(&hdr, read::Windows, super::access(&hdr))
            .await?;
        Ok(wire::dicts(&v.windows)?)
    }

    /// The window that has focus (needs `windows`).
    #[zbus(out_args("window"))]
    ///
    /// (Answered by [`Served`], in one pass; this is its declaration and
    /// what a `Context1` not wrapped in it would answer.)
    async fn get_active_window(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        Ok(wire::dict(&self.active_window(&hdr).await?)?)
    }

    /// Who plays and who captures now, and the capture sessions of the
    /// last 24 hours. Needs `media.playback` or `media.capture`; each part
    /// only with its own category.
    #[zbus(out_args("media"))]
    async fn get_media(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let v = self
            .shared
            .read(&hdr, read::Media, super::access(&hdr))
            .await?;
        Ok(wire::dict(&v)?)
    }

    /// What apps publish of `kind`, one record per app. Needs
    /// `provided.KIND`. Each record has the entry as `data` (a{sv}) and as
    /// JSON-LD text (`json`), for readers that expand it with the
    /// vocabulary.
    #[zbus(out_args("entries"))]
    async fn get_provided(
        &self,
        kind: String,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<Vec<Dict>> {
        let views = self
            .shared
            .read(&hdr, read::Provided(kind), super::access(&hdr))
            .await?;
        Ok(views
            .iter()
            .map(provided_record)
            .collect::<std::result::Result<_, _>>()?)
    }

    /// One page of what apps publish of `kind`, by app id: at most
    /// `limit` records (1 to 1000; 0 for 100) after `cursor` (empty for
    /// the first page), and the cursor of the next page (empty on the
    /// last). Needs `provided.KIND`, for every page. Each record has the
    /// entry once, as JSON-LD text (`json`; see [`PageRecords`]).
    #[zbus(out_args("entries", "next_cursor"))]
    async fn get_provided_page(
        &self,
        kind: String,
        limit: u32,
        cursor: String,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<(PageRecords, String)> {
        let limit = match usize::try_from(limit) {
            Ok(0) => provide::DEFAULT_PAGE,
            Ok(n) if n <= provide::MAX_PAGE => n,
            _ => {
                return Err(Error::InvalidArgs(format!(
                    "limit must be from 1 to {} (0 for {}), not {limit}",
                    provide::MAX_PAGE,
                    provide::DEFAULT_PAGE
                )));
            }
        };
        let q = read::ProvidedPage {
            kind,
            cursor: (!cursor.is_empty()).then_some(cursor),
            limit,
        };
        let page = self.shared.read(&hdr, q, super::access(&hdr)).await?;
        Ok((
            PageRecords(page.provided),
            page.next_cursor.unwrap_or_default(),
        ))
    }

    /// The text selected last (the primary selection). Needs `selection`.
    /// Read on request only: no signal ever carries it.
    #[zbus(out_args("selection"))]
    async fn get_selection(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let v = self
            .shared
            .read(&hdr, read::Selection, super::access(&hdr))
            .await?;
        match v.value {
            Some(s) => Ok(wire::dict(&s)?),
            None if v.available => Err(Error::NotFound("no text is selected".into())),
            None => Err(Error::Unavailable(
                "the selection is not known (see ListSources: selection)".into(),
            )),
        }
    }

    /// Where the machine is, as a schema.org Place. Needs `location`;
    /// exact coordinates need `location.precise`.
    #[zbus(out_args("place"))]
    async fn get_location(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let v = self
            .shared
            .read(&hdr, read::Location, super::access(&hdr))
            .await?;
        match v.value {
            Some(p) => Ok(wire::dict(&p)?),
            None => Err(Error::Unavailable(
                "the location is not known (see ListSources: geoclue)".into(),
            )),
        }
    }

    /// The files the user opened recently, newest first. Needs
    /// `documents.recent`.
    #[zbus(out_args("documents"))]
    async fn list_recent_documents(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let v = self
            .shared
            .read(&hdr, read::RecentDocuments, super::access(&hdr))
            .await?;
        Ok(wire::dicts(&v.documents)?)
    }

    /// The health of every source. Needs no consent: it says nothing about
    /// what the user does. Errors as they are only to `contextctl`; every
    /// other caller reads that a source failed, not why.
    #[zbus(out_args("sources"))]
    async fn list_sources(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let caller = self.shared.caller(&hdr).await?;
        let sources = read::Sources {
            executable: caller.executable.clone(),
        };
        let v = self.shared.read(&hdr, sources, Mode::Look).await?;
        Ok(wire::dicts(&v)?)
    }

    /// Every category, its description, and whether the caller may read it.
    #[zbus(out_args("categories"))]
    async fn list_categories(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let v = self.shared.read(&hdr, read::Categories, Mode::Look).await?;
        Ok(wire::dicts(&v)?)
    }

    /// Receive `Changed` signals for `categories` on a new subscription
    /// object, sent to the caller only.
    #[zbus(out_args("subscription"))]
    async fn subscribe(
        &self,
        categories: Vec<String>,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &Connection,
    ) -> Result<OwnedObjectPath> {
        let cats = parse_categories(&categories)?;
        let who = self.shared.subject(&hdr).await?;
        let held = self
            .shared
            .core
            .reads
            .subscribe_access(&who, &cats, super::access(&hdr))
            .await?;
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        let path = subscription::create(
            conn,
            &self.shared.core.watches,
            (&self.shared.subs, &self.shared.tasks, &self.shared.work),
            &owner,
            (who.app_id.clone(), who.source),
            (cats, held),
        )
        .await?;
        tracing::debug!(app = %who.app_id, %path, "subscribed");
        Ok(path)
    }

    /// Ask the user for `categories` and learn the answer through the
    /// returned `org.contextd.Request1` object's `Response` signal.
    #[zbus(out_args("handle"))]
    async fn request_access(
        &self,
        categories: Vec<String>,
        reason: String,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<OwnedObjectPath> {
        let cats = parse_categories(&categories)?;
        let who = self.shared.subject(&hdr).await?;
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        let requested = self
            .shared
            .core
            .reads
            .request_access(&who, &cats, &reason)
            .await?;
        let conn = Arc::new(self.shared.conn.clone());
        let respond =
            move |path: OwnedObjectPath, owner: String, code: u32, msg: Option<String>| {
                let results = msg
                    .map(|m| HashMap::from([("message".to_owned(), Variant::from(m))]))
                    .unwrap_or_default();
                request::respond(conn.clone(), path, owner, code, results)
            };
        // Decided already: an object of its own, answered at once.
        let decided = match requested {
            Requested::Denied(msg) => Err((request::DENIED, Some(msg))),
            Requested::Granted => Err((request::GRANTED, None)),
            Requested::Asking(asking) => Ok(asking),
        };
        let asking = match decided {
            Ok(asking) => asking,
            Err((code, msg)) => {
                let n = self.shared.next_request();
                let (path, _) = request::create(&self.shared.conn, n, &owner).await?;
                self.shared
                    .tasks
                    .spawn(respond(path.clone(), owner, code, msg));
                return Ok(path);
            }
        };
        // Calls of this connection merged into one question share its
        // object (bounded by the open questions, `core::prompts`).
        let path = match self
            .shared
            .requests
            .join(&owner, asking.id, &cats, || self.shared.next_request())?
        {
            request::Joined::Existing(path) => return Ok(path),
            request::Joined::New(path) => path,
        };
        let (path, cancel) = match request::create_at(&self.shared.conn, path, &owner).await {
            Ok(made) => made,
            Err(e) => {
                self.shared.requests.take(&owner, asking.id);
                return Err(e);
            }
        };
        let shared = self.shared.clone();
        let p = path.clone();
        let answered = async move {
            tokio::select! {
                _ = cancel.cancelled() => {
                    shared.requests.take(&owner, asking.id);
                }
                outcome = prompts::wait(asking.rx) => {
                    let asked = shared.requests.take(&owner, asking.id);
                    let (code, msg) = match shared.core.reads.settle(&who, &asked, &outcome) {
                        Settled::Granted => (request::GRANTED, "allowed".to_owned()),
                        Settled::Denied(m) => (request::DENIED, m),
                        Settled::Ended(m) => (request::ENDED, m),
                    };
                    respond(p, owner, code, Some(msg)).await;
                }
            }
        };
        self.shared.tasks.spawn(answered);
        Ok(path)
    }

    /// The interface version.
    #[zbus(property)]
    fn version(&self) -> u32 {
        VERSION
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::view::{Names, WindowView};

    fn names(v: &[&str]) -> Names {
        Names(v.iter().map(|s| (*s).to_owned()).collect())
    }

    /// Every optional field, none, empty and full lists, text that is not
    /// ASCII.
    fn windows() -> Vec<WindowView> {
        let full = WindowView {
            id: "w-3f2a".into(),
            app_id: "org.gnome.TextEditor".into(),
            app_id_source: "gnome-shell",
            app_name: Some("Éditeur de texte".into()),
            icon: Some("org.gnome.TextEditor".into()),
            title: Some("notes — ünïcode.txt".into()),
            hidden: None,
            states: names(&["activated", "maximized"]),
            focused: true,
            outputs: names(&["HDMI-A-1", "eDP-1"]),
            parent: Some("w-1".into()),
            first_seen: "2026-11-27T05:40:00.123Z".into(),
            last_focused: Some("2026-11-27T05:41:00Z".into()),
        };
        let bare = WindowView {
            id: "7".into(),
            app_id: String::new(),
            app_id_source: "compositor",
            app_name: None,
            icon: None,
            title: None,
            hidden: None,
            states: names(&[]),
            focused: false,
            outputs: names(&[]),
            parent: None,
            first_seen: "2026-11-27T05:40:00Z".into(),
            last_focused: None,
        };
        vec![full, bare]
    }

    /// Each caller's reply is addressed to it and answers its call,
    /// whoever asked before (the attack: a header kept for one caller
    /// used for another); a caller that left is forgotten.
    #[test]
    fn replies_from_kept_headers_go_to_the_caller_that_asked() {
        let ours = zbus::names::OwnedUniqueName::try_from(":1.3").expect("name");
        let replies = ReplyHeaders::default();
        let w = windows().remove(0);
        let call_from = |caller: &str| {
            zbus::Message::method_call("/org/contextd/Broker1", "GetActiveWindow")
                .interface("org.contextd.Context1")
                .sender(caller)
                .destination(":1.3")
                .build(&())
                .expect("call")
        };
        // In turn, each caller's header kept after its first call; then
        // one leaves and its name's header goes with it.
        for round in 0..3 {
            for caller in [":1.7", ":1.8", ":1.70"] {
                let call = call_from(caller);
                let reply = window_reply(&replies, Some(&ours), &call.header(), &w).expect("reply");
                let h = reply.header();
                assert_eq!(
                    h.destination().map(|d| d.to_string()).as_deref(),
                    Some(caller),
                    "round {round}"
                );
                assert_eq!(h.reply_serial(), Some(call.primary_header().serial_num()));
            }
        }
        assert_eq!(replies.lock().len(), 3);
        replies.forget(":1.8");
        assert_eq!(replies.lock().len(), 2);
        assert!(!replies.lock().contains_key(":1.8"));
    }

    /// The reply written in one pass answers the call (its serial, the
    /// caller, `a{sv}`) and reads back as the `Dict` the macro's method
    /// would have sent, key for key and value for value.
    #[test]
    fn the_one_pass_window_reply_is_the_dict_reply() {
        let call = zbus::Message::method_call("/org/contextd/Broker1", "GetActiveWindow")
            .interface("org.contextd.Context1")
            .sender(":1.7")
            .destination(":1.3")
            .build(&())
            .expect("call");
        let ours = zbus::names::OwnedUniqueName::try_from(":1.3").expect("name");
        let replies = ReplyHeaders::default();
        for w in windows() {
            let reply = window_reply(&replies, Some(&ours), &call.header(), &w).expect("reply");
            let h = reply.header();
            assert_eq!(
                h.reply_serial(),
                Some(call.primary_header().serial_num()),
                "answers the call"
            );
            assert_eq!(
                h.destination().map(|d| d.to_string()).as_deref(),
                Some(":1.7")
            );
            assert_eq!(h.sender().map(|s| s.as_str()), Some(":1.3"));
            assert_eq!(reply.body().signature().to_string(), "a{sv}");
            let got: Dict = reply.body().deserialize().expect("reads back");
            assert_eq!(got, wire::dict(&w).expect("dict"), "{w:?}");
        }
    }
}

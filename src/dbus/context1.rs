//! `org.contextd.Context1`: reading and subscribing to context.
//! Documented in `dbus-interfaces/org.contextd.Context1.xml`.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use zbus::message::Header;
use zbus::wire::{OwnedObjectPath, OwnedVariant, Variant};
use zbus::{Connection, Message, interface};

use super::Shared;
use super::error::{Error, Result};
use super::request;
use super::served::{Answer, OnePass, Written, answer};
pub(crate) use super::served::{ReplyHeaders, Served};
use super::subscription;
use super::wire::{self, Dict};
use crate::core::read::{self, Requested, Settled};
use crate::core::{Mode, prompts, provide, view};
use crate::model::Category;

/// The interface version, bumped when methods are added.
pub const VERSION: u32 = 5;

pub(crate) struct Context1 {
    pub(crate) shared: Arc<Shared>,
}

/// One provided entry as `GetProvided` answers it: `app_id`, `kind`,
/// `updated`, `data` (the entry's JSON as an `a{sv}`, by the one writer,
/// `wire`) and `json` (that text itself, shared, not copied).
fn provided_record(p: &view::ProvidedView) -> std::result::Result<Dict, wire::WireError> {
    let text = |s: &str| OwnedVariant::from(zbus::wire::Str::from(s.to_owned()));
    let mut d = Dict::with_capacity(5);
    d.insert("app_id".into(), text(p.app_id.as_str()));
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
        m.serialize_entry("kind", &V(&&*p.kind))?;
        m.serialize_entry("updated", &V(&p.updated.as_str()))?;
        m.serialize_entry("json", &V(&p.data.as_str()))?;
        m.end()
    }
}

/// One entry of [`PageRecords`] as the one writer writes it: the same
/// four strings.
///
/// The fields are in the order of their keys, as an `a{sv}` is sent: the
/// writer then keeps each record as written instead of sorting and
/// copying it again (a tenth of a page's cost in the broker).
#[derive(Serialize)]
struct PageEntry<'a> {
    app_id: &'a str,
    json: &'a str,
    kind: &'a str,
    updated: &'a str,
}

impl<'a> PageEntry<'a> {
    fn of(p: &'a view::ProvidedView) -> Self {
        PageEntry {
            app_id: p.app_id.as_str(),
            kind: &p.kind,
            updated: &p.updated,
            json: p.data.as_str(),
        }
    }
}

/// One record of `GetProvided` as the one writer writes it: the fields
/// of [`provided_record`], `data` as the entry's `a{sv}`; in key order,
/// as [`PageEntry`].
#[derive(Serialize)]
struct ProvidedEntry<'a> {
    app_id: &'a str,
    data: &'a crate::model::ProvidedData,
    json: &'a str,
    kind: &'a str,
    updated: &'a str,
}

impl<'a> ProvidedEntry<'a> {
    fn of(p: &'a view::ProvidedView) -> Self {
        ProvidedEntry {
            app_id: p.app_id.as_str(),
            kind: &p.kind,
            updated: &p.updated,
            data: &p.data,
            json: p.data.as_str(),
        }
    }
}

/// The views `Context1`'s methods answer, each decided once: the macro's
/// methods format them through a `Dict`, [`Served`] writes them once
/// ([`OnePass`]), so both paths ask the same consent and refuse alike.
impl Context1 {
    async fn snapshot(&self, hdr: &Header<'_>) -> Result<view::SnapshotView> {
        self.shared
            .read(hdr, read::Snapshot, super::access(hdr))
            .await
    }

    async fn windows(&self, hdr: &Header<'_>) -> Result<view::WindowsView> {
        self.shared
            .read(hdr, read::Windows, super::access(hdr))
            .await
    }

    /// What `GetActiveWindow` answers.
    async fn active_window(&self, hdr: &Header<'_>) -> Result<view::WindowView> {
        let v = self
            .shared
            .read(hdr, read::ActiveWindow, super::access(hdr))
            .await?;
        v.window
            .ok_or_else(|| Error::NotFound("no window has focus".into()))
    }

    async fn media(&self, hdr: &Header<'_>) -> Result<view::MediaView> {
        self.shared.read(hdr, read::Media, super::access(hdr)).await
    }

    async fn provided(&self, hdr: &Header<'_>, kind: String) -> Result<Vec<view::ProvidedView>> {
        self.shared
            .read(hdr, read::Provided(kind), super::access(hdr))
            .await
    }

    async fn provided_page(
        &self,
        hdr: &Header<'_>,
        (kind, limit, cursor): (String, u32, String),
    ) -> Result<view::ProvidedPageView> {
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
        self.shared.read(hdr, q, super::access(hdr)).await
    }

    async fn selection(&self, hdr: &Header<'_>) -> Result<view::SelectionView> {
        let v = self
            .shared
            .read(hdr, read::Selection, super::access(hdr))
            .await?;
        match v.value {
            Some(s) => Ok(s),
            None if v.available => Err(Error::NotFound("no text is selected".into())),
            None => Err(Error::Unavailable(
                "the selection is not known (see ListSources: selection)".into(),
            )),
        }
    }

    async fn location(&self, hdr: &Header<'_>) -> Result<view::PlaceView> {
        let v = self
            .shared
            .read(hdr, read::Location, super::access(hdr))
            .await?;
        v.value.ok_or_else(|| {
            Error::Unavailable("the location is not known (see ListSources: geoclue)".into())
        })
    }

    async fn calendar(&self, hdr: &Header<'_>) -> Result<view::CalendarView> {
        let v = self
            .shared
            .read(hdr, read::Calendar, super::access(hdr))
            .await?;
        if !v.available {
            return Err(Error::Unavailable(
                "no calendar service answers (see ListSources: calendar)".into(),
            ));
        }
        Ok(v)
    }

    async fn recent_documents(&self, hdr: &Header<'_>) -> Result<view::RecentDocumentsView> {
        self.shared
            .read(hdr, read::RecentDocuments, super::access(hdr))
            .await
    }

    async fn sources(&self, hdr: &Header<'_>) -> Result<Vec<view::SourceView>> {
        let caller = self.shared.caller(hdr).await?;
        let sources = read::Sources {
            executable: caller.executable.clone(),
        };
        self.shared.read(hdr, sources, Mode::Look).await
    }

    async fn categories(&self, hdr: &Header<'_>) -> Result<Vec<view::CategoryView>> {
        self.shared.read(hdr, read::Categories, Mode::Look).await
    }
}

/// `GetProvided`'s records written once ([`ProvidedEntry`]).
fn provided_written(views: &[view::ProvidedView]) -> Result<Written> {
    let entries: Vec<_> = views.iter().map(ProvidedEntry::of).collect();
    Written::list(&entries)
}

/// `GetProvidedPage`'s page written once ([`PageEntry`]).
fn page_written(page: &view::ProvidedPageView) -> Result<Written> {
    let entries: Vec<_> = page.provided.iter().map(PageEntry::of).collect();
    Written::page(&entries, page.next_cursor.as_deref().unwrap_or_default())
}

/// `Context1`'s methods that answer views, written once: member → the
/// arguments' type (the macro's method's), the view, its shape. Every
/// other member (`Subscribe`, `RequestAccess`) is the macro's.
impl OnePass for Context1 {
    fn one_pass<'a>(&'a self, member: &str, msg: &'a Message) -> Option<Answer<'a>> {
        Some(match member {
            "GetSnapshot" => answer(msg, move |(), hdr| async move {
                Written::dict(&self.snapshot(&hdr).await?)
            }),
            "ListWindows" => answer(msg, move |(), hdr| async move {
                Written::list(&self.windows(&hdr).await?.windows)
            }),
            "GetActiveWindow" => answer(msg, move |(), hdr| async move {
                Written::dict(&self.active_window(&hdr).await?)
            }),
            "GetMedia" => answer(msg, move |(), hdr| async move {
                Written::dict(&self.media(&hdr).await?)
            }),
            "GetProvided" => answer(msg, move |(kind,): (String,), hdr| async move {
                provided_written(&self.provided(&hdr, kind).await?)
            }),
            "GetProvidedPage" => answer(msg, move |args, hdr| async move {
                page_written(&self.provided_page(&hdr, args).await?)
            }),
            "GetSelection" => answer(msg, move |(), hdr| async move {
                Written::dict(&self.selection(&hdr).await?)
            }),
            "GetLocation" => answer(msg, move |(), hdr| async move {
                Written::dict(&self.location(&hdr).await?)
            }),
            "GetCalendar" => answer(msg, move |(), hdr| async move {
                Written::dict(&self.calendar(&hdr).await?)
            }),
            "ListRecentDocuments" => answer(msg, move |(), hdr| async move {
                Written::list(&self.recent_documents(&hdr).await?.documents)
            }),
            "ListSources" => answer(msg, move |(), hdr| async move {
                Written::list(&self.sources(&hdr).await?)
            }),
            "ListCategories" => answer(msg, move |(), hdr| async move {
                Written::list(&self.categories(&hdr).await?)
            }),
            _ => return None,
        })
    }

    fn replies(&self) -> &ReplyHeaders {
        &self.shared.replies
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
        Ok(wire::dict(&self.snapshot(&hdr).await?)?)
    }

    /// The open windows (needs `windows`; titles need `windows.titles`).
    #[zbus(out_args("windows"))]
    async fn list_windows(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.windows(&hdr).await?.windows)?)
    }

    /// The window that has focus (needs `windows`).
    #[zbus(out_args("window"))]
    async fn get_active_window(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        Ok(wire::dict(&self.active_window(&hdr).await?)?)
    }

    /// Who plays and who captures now, and the capture sessions of the
    /// last 24 hours. Needs `media.playback` or `media.capture`; each part
    /// only with its own category.
    #[zbus(out_args("media"))]
    async fn get_media(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        Ok(wire::dict(&self.media(&hdr).await?)?)
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
        let views = self.provided(&hdr, kind).await?;
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
        let page = self.provided_page(&hdr, (kind, limit, cursor)).await?;
        Ok((
            PageRecords(page.provided),
            page.next_cursor.unwrap_or_default(),
        ))
    }

    /// The text selected last (the primary selection). Needs `selection`.
    /// Read on request only: no signal ever carries it.
    #[zbus(out_args("selection"))]
    async fn get_selection(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        Ok(wire::dict(&self.selection(&hdr).await?)?)
    }

    /// Where the machine is, as a schema.org Place. Needs `location`;
    /// exact coordinates need `location.precise`.
    #[zbus(out_args("place"))]
    async fn get_location(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        Ok(wire::dict(&self.location(&hdr).await?)?)
    }

    /// The next events (schema.org Events) and the open tasks (Actions)
    /// of the user's calendars. Needs `calendar`; titles, places and
    /// attendees need `calendar.details`.
    #[zbus(out_args("calendar"))]
    async fn get_calendar(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        Ok(wire::dict(&self.calendar(&hdr).await?)?)
    }

    /// The files the user opened recently, newest first. Needs
    /// `documents.recent`.
    #[zbus(out_args("documents"))]
    async fn list_recent_documents(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.recent_documents(&hdr).await?.documents)?)
    }

    /// The health of every source. Needs no consent: it says nothing about
    /// what the user does. Errors as they are only to `contextctl`; every
    /// other caller reads that a source failed, not why.
    #[zbus(out_args("sources"))]
    async fn list_sources(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.sources(&hdr).await?)?)
    }

    /// Every category, its description, and whether the caller may read it.
    #[zbus(out_args("categories"))]
    async fn list_categories(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.categories(&hdr).await?)?)
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
    use crate::core::view::{Names, WindowIdentityView, WindowSandboxView, WindowView};
    use crate::dbus::served;

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
            identity: WindowIdentityView {
                known_by: "compositor",
                app: Some("org.gnome.TextEditor".into()),
                app_source: Some("flatpak"),
                sandbox: Some(WindowSandboxView {
                    engine: "org.flatpak".into(),
                    app_id: Some("org.gnome.TextEditor".into()),
                    instance_id: Some("1234".into()),
                }),
            },
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
            identity: WindowIdentityView {
                known_by: "claimed",
                app: None,
                app_source: None,
                sandbox: None,
            },
        };
        vec![full, bare]
    }

    fn call(member: &str, caller: &str) -> zbus::Message {
        zbus::Message::method_call("/org/contextd/Broker1", member)
            .interface("org.contextd.Context1")
            .sender(caller)
            .destination(":1.3")
            .build(&())
            .expect("call")
    }

    fn ours() -> zbus::names::OwnedUniqueName {
        zbus::names::OwnedUniqueName::try_from(":1.3").expect("name")
    }

    /// Each caller's reply is addressed to it and answers its call,
    /// whoever asked before and whatever the shape (the attack: a header
    /// kept for one caller, or one signature, used for another); a caller
    /// that left is forgotten.
    #[test]
    fn replies_from_kept_headers_go_to_the_caller_that_asked() {
        let replies = ReplyHeaders::default();
        let ws = windows();
        let written = [
            (
                "GetActiveWindow",
                "a{sv}",
                Written::dict(&ws[0]).expect("dict"),
            ),
            ("ListWindows", "aa{sv}", Written::list(&ws).expect("list")),
            (
                "GetProvidedPage",
                // zbus shows a body of several values as a struct.
                "(aa{sv}s)",
                page_written(&view::ProvidedPageView {
                    provided: vec![],
                    next_cursor: Some("c".into()),
                })
                .expect("page"),
            ),
        ];
        // In turn, each caller's header kept after its first call; then
        // one leaves and its name's headers go with it.
        for round in 0..3 {
            for caller in [":1.7", ":1.8", ":1.70"] {
                for (member, sig, w) in &written {
                    let call = call(member, caller);
                    let reply =
                        served::message(&replies, Some(&ours()), &call.header(), w).expect("reply");
                    let h = reply.header();
                    assert_eq!(
                        h.destination().map(|d| d.to_string()).as_deref(),
                        Some(caller),
                        "round {round}"
                    );
                    assert_eq!(h.reply_serial(), Some(call.primary_header().serial_num()));
                    assert_eq!(reply.body().signature().to_string(), *sig, "{member}");
                }
            }
        }
        assert_eq!(replies.callers().len(), 3);
        replies.forget(":1.8");
        let left = replies.callers();
        assert_eq!(left.len(), 2);
        assert!(!left.contains(&":1.8".to_owned()));
    }

    /// A reply value in a canonical byte form: every dict's entries in
    /// key order (zbus writes a top-level `HashMap` in an order of its
    /// own; nested dicts are in key order already).
    trait Canon: for<'d> zbus::wire::DynamicDeserialize<'d> + PartialEq + std::fmt::Debug {
        fn canonical(&self) -> Vec<u8>;
    }

    type Sorted = std::collections::BTreeMap<String, OwnedVariant>;

    fn sorted(d: &Dict) -> Sorted {
        d.iter()
            .map(|(k, v)| (k.clone(), v.try_clone().expect("clone")))
            .collect()
    }

    fn to_bytes<T: serde::Serialize + zbus::wire::DynamicType>(v: &T) -> Vec<u8> {
        let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
        zbus::wire::to_bytes(ctxt, v).expect("bytes").to_vec()
    }

    impl Canon for Dict {
        fn canonical(&self) -> Vec<u8> {
            to_bytes(&sorted(self))
        }
    }

    impl Canon for Vec<Dict> {
        fn canonical(&self) -> Vec<u8> {
            to_bytes(&self.iter().map(sorted).collect::<Vec<_>>())
        }
    }

    impl Canon for (Vec<Dict>, String) {
        fn canonical(&self) -> Vec<u8> {
            to_bytes(&(
                self.0.iter().map(sorted).collect::<Vec<_>>(),
                self.1.clone(),
            ))
        }
    }

    /// The reply written once is the macro's reply for the same view:
    /// the same header fields, the same value read back, and the bytes
    /// of that value (dicts in key order).
    #[track_caller]
    fn same_reply<T: Canon, B>(what: &str, written: Result<Written>, macro_value: &B)
    where
        B: serde::Serialize + zbus::wire::DynamicType,
    {
        let call = call("Any", ":1.7");
        let replies = ReplyHeaders::default();
        let one = served::message(
            &replies,
            Some(&ours()),
            &call.header(),
            &written.expect("written"),
        )
        .expect("reply");
        let old = zbus::Message::method_return(&call.header())
            .sender(ours())
            .build(macro_value)
            .expect("macro reply");
        let (h1, h0) = (one.header(), old.header());
        assert_eq!(h1.reply_serial(), h0.reply_serial(), "{what}");
        assert_eq!(h1.destination(), h0.destination(), "{what}");
        assert_eq!(h1.sender(), h0.sender(), "{what}");
        assert_eq!(
            one.body().signature().to_string(),
            old.body().signature().to_string(),
            "{what}"
        );
        let got: T = one.body().deserialize().expect("ours reads back");
        let want: T = old.body().deserialize().expect("the macro's reads back");
        assert_eq!(got, want, "{what}");
        assert_eq!(&one.body().data()[..], &want.canonical()[..], "{what}");
    }

    fn stream(n: u32) -> view::StreamView {
        view::StreamView {
            id: format!("pw-{n}"),
            kind: crate::model::MediaKind::Screen,
            state: crate::model::StreamState::Running,
            active: n.is_multiple_of(2),
            since: "2026-11-27T05:40:00Z".into(),
            app_id: Some("org.mozilla.firefox".into()),
            app_id_source: Some("kernel"),
            pid: Some(u32::MAX - n),
            claimed_name: None,
            claimed_binary: Some("firefox-bin".into()),
            media_name: Some("Meeting — ünïcødé 🎥".into()),
            media_role: None,
            player: (n > 0).then(|| crate::model::Player {
                status: Some(crate::model::PlaybackStatus::Paused),
                title: Some("Track".into()),
                artist: None,
                url: Some("https://example.org/x".into()),
            }),
        }
    }

    fn provided(data: serde_json::Value) -> view::ProvidedView {
        view::ProvidedView {
            app_id: crate::model::AppId::new("org.example.App").expect("app id"),
            kind: "document".into(),
            data: data.into(),
            updated: "2026-11-27T05:40:00Z".into(),
        }
    }

    /// Published entries of every shape: scalars, nested objects, lists
    /// of strings, of objects, mixed (`av`), empty, null members.
    fn entries() -> Vec<view::ProvidedView> {
        vec![
            provided(serde_json::json!({"@type": "DigitalDocument", "name": "n"})),
            provided(serde_json::json!({
                "z": 1, "a": -1, "m": 1.5, "big": u64::MAX, "t": true,
                "nested": {"b": {"c": {"d": "deep"}}, "a": []},
                "names": ["x", "y"], "objs": [{"k": 1}, {"k": 2, "j": null}],
                "empty": {}, "null": null, "unicode": "日本語 ✓",
            })),
            provided(serde_json::json!({"mixed": [1, "a", {"k": 1}], "nums": [1, 2]})),
            provided(serde_json::json!({})),
        ]
    }

    fn source(name: &str, error: Option<&str>) -> view::SourceView {
        view::SourceView {
            name: name.into(),
            available: error.is_none(),
            since: "2026-11-27T05:40:00Z".into(),
            last_error: error.map(Into::into),
        }
    }

    /// Every view `Context1` answers with one dict, empty and full.
    #[test]
    fn dict_replies_are_the_macro_replies() {
        for w in windows() {
            same_reply::<Dict, _>("window", Written::dict(&w), &wire::dict(&w).expect("dict"));
        }
        let full = view::SnapshotView {
            windows: Some(windows()),
            active_window: Some("w-3f2a".into()),
            playback: Some(vec![stream(1)]),
            capture: Some(vec![]),
            recent_documents: Some(vec![]),
            provided: entries(),
            sources: vec![source("wayland", None), source("geoclue", Some("gone"))],
            withheld: names(&["location", "notifications"]),
            ..Default::default()
        };
        for v in [view::SnapshotView::default(), full] {
            same_reply::<Dict, _>(
                "snapshot",
                Written::dict(&v),
                &wire::dict(&v).expect("dict"),
            );
        }
        let media = [
            view::MediaView::default(),
            view::MediaView {
                playback: Some(vec![stream(0), stream(1), stream(2)]),
                capture: Some(vec![]),
                capture_sessions: Some(vec![]),
                withheld: names(&[]),
            },
        ];
        for v in media {
            same_reply::<Dict, _>("media", Written::dict(&v), &wire::dict(&v).expect("dict"));
        }
        let sel = view::SelectionView {
            schema_type: "Quotation",
            text: "sélection\n2".into(),
            length: 11,
            mime_type: "text/plain".into(),
            truncated: false,
            updated: "2026-11-27T05:40:00Z".into(),
        };
        same_reply::<Dict, _>(
            "selection",
            Written::dict(&sel),
            &wire::dict(&sel).expect("dict"),
        );
        for precise in [false, true] {
            let p = view::PlaceView {
                schema_type: "Place",
                geo: view::GeoView {
                    latitude: 52.52,
                    longitude: -13.4,
                    elevation: precise.then_some(34.0),
                },
                accuracy: 1000.0,
                name: precise.then(|| "Berlin".into()),
                updated: precise.then(|| "2026-11-27T05:40:00Z".into()),
            };
            same_reply::<Dict, _>("place", Written::dict(&p), &wire::dict(&p).expect("dict"));
        }
    }

    /// Every list `Context1` answers: none, one, many.
    #[test]
    fn list_replies_are_the_macro_replies() {
        let ws = windows();
        for n in 0..=ws.len() {
            let items = &ws[..n];
            same_reply::<Vec<Dict>, _>(
                "windows",
                Written::list(items),
                &wire::dicts(items).expect("dicts"),
            );
        }
        let cats = vec![
            view::CategoryView {
                name: "windows".into(),
                description: "Open windows".into(),
                sensitive: false,
                allowed: true,
                detail_of: None,
            },
            view::CategoryView {
                name: "windows.titles".into(),
                description: "Titles — ü".into(),
                sensitive: true,
                allowed: false,
                detail_of: Some("windows".into()),
            },
        ];
        same_reply::<Vec<Dict>, _>(
            "categories",
            Written::list(&cats),
            &wire::dicts(&cats).expect("d"),
        );
        let sources = vec![source("wayland", None), source("geoclue", Some("x"))];
        same_reply::<Vec<Dict>, _>(
            "sources",
            Written::list(&sources),
            &wire::dicts(&sources).expect("d"),
        );
        let docs = vec![view::RecentDocumentView {
            uri: "file:///home/u/a%20b.txt".into(),
            path: Some("/home/u/a b.txt".into()),
            name: "a b.txt".into(),
            mime_type: Some("text/plain".into()),
            app: None,
            modified: Some("2026-11-27T05:40:00Z".into()),
            visited: None,
        }];
        same_reply::<Vec<Dict>, _>(
            "documents",
            Written::list(&docs),
            &wire::dicts(&docs).expect("d"),
        );
    }

    /// `GetProvided` (each record's `data` a dict of the entry) and
    /// `GetProvidedPage` (the entry as text), none, one, many, with and
    /// without a next page.
    #[test]
    fn provided_replies_are_the_macro_replies() {
        let all = entries();
        for n in 0..=all.len() {
            let views = &all[..n];
            let records: Vec<Dict> = views
                .iter()
                .map(provided_record)
                .collect::<std::result::Result<_, _>>()
                .expect("records");
            same_reply::<Vec<Dict>, _>("provided", provided_written(views), &records);
            for next_cursor in [None, Some("org.example.App".to_owned())] {
                let page = view::ProvidedPageView {
                    provided: views.to_vec(),
                    next_cursor: next_cursor.clone(),
                };
                let old = (PageRecords(views.to_vec()), next_cursor.unwrap_or_default());
                same_reply::<(Vec<Dict>, String), _>("page", page_written(&page), &old);
            }
        }
    }
}

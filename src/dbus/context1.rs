//! `org.contextd.Context1`: reading and subscribing to context.
//! Documented in `dbus-interfaces/org.contextd.Context1.xml`.

use std::collections::HashMap;
use std::sync::Arc;

use zbus::message::Header;
use zbus::wire::{OwnedObjectPath, Variant};
use zbus::{Connection, interface};

use super::Shared;
use super::error::{Error, Result};
use super::request;
use super::subscription;
use super::variant::{self, Dict};
use crate::core::read::{self, Requested};
use crate::core::{Mode, prompts, provide, view};
use crate::model::Category;

/// The interface version, bumped when methods are added.
pub const VERSION: u32 = 4;

pub(crate) struct Context1 {
    pub(crate) shared: Arc<Shared>,
    /// `GetActiveWindow` is the hottest read; between focus changes it
    /// answers the same view.
    pub(crate) active: variant::DictCache<view::WindowView>,
}

/// One provided entry as `GetProvided` answers it: `app_id`, `kind`,
/// `updated`, `data` (`a{sv}`, read straight from the entry's JSON text)
/// and `json` (that text itself, shared, not copied).
fn provided_record(p: &view::ProvidedView) -> std::result::Result<Dict, variant::VariantError> {
    let mut d = Dict::with_capacity(5);
    d.insert("app_id".into(), variant::string(p.app_id.clone())?);
    d.insert("kind".into(), variant::string(p.kind.clone())?);
    d.insert("updated".into(), variant::string(p.updated.clone())?);
    d.insert("data".into(), variant::json_object(p.data.as_str())?);
    d.insert("json".into(), variant::shared_string(p.data.shared()));
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
        Ok(variant::dict(&v)?)
    }

    /// The open windows (needs `windows`; titles need `windows.titles`).
    #[zbus(out_args("windows"))]
    async fn list_windows(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let v = self
            .shared
            .read(&hdr, read::Windows, super::access(&hdr))
            .await?;
        Ok(variant::dicts(&v.windows)?)
    }

    /// The window that has focus (needs `windows`).
    #[zbus(out_args("window"))]
    async fn get_active_window(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Arc<Dict>> {
        let v = self
            .shared
            .read(&hdr, read::ActiveWindow, super::access(&hdr))
            .await?;
        match v.window {
            Some(w) => Ok(self.active.dict(w)?),
            None => Err(Error::NotFound("no window has focus".into())),
        }
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
        Ok(variant::dict(&v)?)
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
            Some(s) => Ok(variant::dict(&s)?),
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
            Some(p) => Ok(variant::dict(&p)?),
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
        Ok(variant::dicts(&v.documents)?)
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
        Ok(variant::dicts(&v)?)
    }

    /// Every category, its description, and whether the caller may read it.
    #[zbus(out_args("categories"))]
    async fn list_categories(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let v = self.shared.read(&hdr, read::Categories, Mode::Look).await?;
        Ok(variant::dicts(&v)?)
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
            .subscribe_access(&who, &cats, super::access(&hdr))
            .await?;
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        let path = subscription::create(
            conn,
            &self.shared.core,
            (&self.shared.subs, &self.shared.tasks),
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
        let requested = self.shared.core.request_access(&who, &cats, &reason).await;
        let n = self.shared.next_request();
        let (path, cancel) = request::create(&self.shared.conn, n, &owner).await?;
        let conn = Arc::new(self.shared.conn.clone());
        let p = path.clone();
        let respond = move |code: u32, msg: Option<String>| {
            let results = msg
                .map(|m| HashMap::from([("message".to_owned(), Variant::from(m))]))
                .unwrap_or_default();
            request::respond(conn.clone(), p.clone(), owner.clone(), code, results)
        };
        match requested {
            Requested::Denied(msg) => {
                self.shared.tasks.spawn(respond(request::DENIED, Some(msg)));
            }
            Requested::Granted => {
                self.shared.tasks.spawn(respond(request::GRANTED, None));
            }
            Requested::Asking(rx) => {
                let answered = async move {
                    tokio::select! {
                        _ = cancel.cancelled() => {}
                        outcome = prompts::wait(rx) => {
                            let (code, msg) = match &outcome {
                                o if o.allowed() => (request::GRANTED, "allowed".to_owned()),
                                prompts::Outcome::Answered(_) => (request::DENIED, "the user denied it".to_owned()),
                                // Escape: the user's own "no" to this call.
                                prompts::Outcome::NoAnswer(e @ prompts::PromptError::Declined) => (request::DENIED, e.to_string()),
                                prompts::Outcome::NoAnswer(e) => (request::ENDED, e.to_string()),
                            };
                            respond(code, Some(msg)).await;
                        }
                    }
                };
                self.shared.tasks.spawn(answered);
            }
        }
        Ok(path)
    }

    /// The interface version.
    #[zbus(property)]
    fn version(&self) -> u32 {
        VERSION
    }
}

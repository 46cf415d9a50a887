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
use crate::core::prompts;
use crate::core::{Channel, Decision, view};
use crate::model::Category;

/// The interface version, bumped when methods are added.
pub const VERSION: u32 = 1;

pub struct Context1 {
    pub(crate) shared: Arc<Shared>,
}

fn parse_categories(categories: &[String]) -> Result<Vec<Category>> {
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
        let who = self.shared.caller(&hdr).await?;
        let gate = &self.shared.core.gate;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        let v = self.shared.core.state.read(|s| view::snapshot(s, &can));
        Ok(variant::dict(&v))
    }

    /// The open windows (needs `windows`; titles need `windows.titles`).
    #[zbus(out_args("windows"))]
    async fn list_windows(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let who = self.shared.caller(&hdr).await?;
        self.shared.access(&who, &[Category::Windows], "").await?;
        let gate = &self.shared.core.gate;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        let v = self.shared.core.state.read(|s| view::windows(s, &can));
        Ok(variant::dicts(&v))
    }

    /// The window that has focus (needs `windows`).
    #[zbus(out_args("window"))]
    async fn get_active_window(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let who = self.shared.caller(&hdr).await?;
        self.shared.access(&who, &[Category::Windows], "").await?;
        let gate = &self.shared.core.gate;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        match self
            .shared
            .core
            .state
            .read(|s| view::active_window(s, &can))
        {
            Some(v) => Ok(variant::dict(&v)),
            None => Err(Error::NotFound("no window has focus".into())),
        }
    }

    /// Who plays and who captures now, and the capture sessions of the
    /// last 24 hours. Needs `media.playback` or `media.capture`; each part
    /// only with its own category.
    #[zbus(out_args("media"))]
    async fn get_media(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let who = self.shared.caller(&hdr).await?;
        let gate = &self.shared.core.gate;
        // Either category will do; without playback, the access (and a
        // prompt) is about media.capture, the one that answers "who uses
        // my microphone".
        let first = if gate.allows(&who.app_id, &Category::MediaPlayback) {
            Category::MediaPlayback
        } else {
            Category::MediaCapture
        };
        self.shared.access(&who, &[first], "").await?;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        let now = self.shared.core.clock.now();
        let v = self.shared.core.state.read(|s| view::media(s, &can, now));
        Ok(variant::dict(&v))
    }

    /// The health of every source. Needs no consent: it says nothing about
    /// what the user does.
    #[zbus(out_args("sources"))]
    async fn list_sources(&self) -> Vec<Dict> {
        let v = self.shared.core.state.read(view::sources);
        variant::dicts(&v)
    }

    /// Every category, its description, and whether the caller may read it.
    #[zbus(out_args("categories"))]
    async fn list_categories(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let who = self.shared.caller(&hdr).await?;
        let gate = &self.shared.core.gate;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        let kinds: Vec<String> = self.shared.core.state.read(|s| {
            let mut k: Vec<String> = s.provided.keys().map(|(_, k)| k.clone()).collect();
            k.dedup();
            k
        });
        Ok(variant::dicts(&view::categories(&can, &kinds)))
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
        let who = self.shared.caller(&hdr).await?;
        self.shared.access(&who, &cats, "").await?;
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        let path =
            subscription::create(conn, &self.shared.subs, &owner, who.app_id.clone(), cats).await?;
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
        let who = self.shared.caller(&hdr).await?;
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        let gate = &self.shared.core.gate;
        gate.seen(&who.app_id, who.source, None, None).await;
        let mut ask = Vec::new();
        let mut denied: Option<String> = None;
        for c in &cats {
            match gate.decide(&who.app_id, c) {
                Decision::Allow => {}
                Decision::Deny(e) => denied = Some(e.to_string()),
                Decision::Ask => ask.push(c.clone()),
            }
        }
        let n = self.shared.next_request();
        let (path, cancel) = request::create(&self.shared.conn, n, &owner).await?;
        let conn = Arc::new(self.shared.conn.clone());
        let p = path.clone();
        if let Some(msg) = denied {
            self.shared.tasks.spawn(async move {
                let results = HashMap::from([("message".to_owned(), Variant::from(msg))]);
                request::respond(conn, p, owner, request::DENIED, results).await;
            });
            return Ok(path);
        }
        if ask.is_empty() {
            self.shared.tasks.spawn(request::respond(
                conn,
                p,
                owner,
                request::GRANTED,
                HashMap::new(),
            ));
            return Ok(path);
        }
        let rx = prompts::start(&self.shared.core, {
            let mut r = self.shared.prompt_request(&who, ask, &reason);
            r.channel = Channel::DBus;
            r
        });
        self.shared.tasks.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                outcome = prompts::wait(rx) => {
                    let (code, msg) = match &outcome {
                        o if o.allowed() => (request::GRANTED, "allowed".to_owned()),
                        prompts::Outcome::Answered(_) => (request::DENIED, "the user denied it".to_owned()),
                        prompts::Outcome::NoAnswer(e) => (request::ENDED, e.to_string()),
                    };
                    let results = HashMap::from([("message".to_owned(), Variant::from(msg))]);
                    request::respond(conn, p, owner, code, results).await;
                }
            }
        });
        Ok(path)
    }

    /// The interface version.
    #[zbus(property)]
    fn version(&self) -> u32 {
        VERSION
    }
}

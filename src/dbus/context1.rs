//! `org.contextd.Context1`: reading and subscribing to context.
//! Documented in `dbus-interfaces/org.contextd.Context1.xml`.

use std::sync::Arc;

use zbus::message::Header;
use zbus::wire::OwnedObjectPath;
use zbus::{Connection, interface};

use super::callers::Callers;
use super::error::{Error, Result};
use super::subscription::{self, Subscriptions};
use super::variant::{self, Dict};
use crate::core::identity::Identity;
use crate::core::{Core, view};
use crate::model::Category;

/// The interface version, bumped when methods are added.
pub const VERSION: u32 = 1;

pub struct Context1 {
    pub(crate) core: Arc<Core>,
    pub(crate) callers: Arc<Callers>,
    pub(crate) subs: Arc<Subscriptions>,
}

impl Context1 {
    async fn caller(&self, hdr: &Header<'_>) -> Result<Arc<Identity>> {
        self.callers
            .identify(hdr.sender().map(|s| s.as_str()))
            .await
    }
}

#[interface(name = "org.contextd.Context1", introspection_docs = false)]
impl Context1 {
    /// Everything the caller may see, one key per category, plus
    /// `withheld`: the categories it may not.
    #[zbus(out_args("snapshot"))]
    async fn get_snapshot(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let who = self.caller(&hdr).await?;
        let gate = &self.core.gate;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        let v = self.core.state.read(|s| view::snapshot(s, &can));
        Ok(variant::dict(&v))
    }

    /// The open windows (needs `windows`; titles need `windows.titles`).
    #[zbus(out_args("windows"))]
    async fn list_windows(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let who = self.caller(&hdr).await?;
        let gate = &self.core.gate;
        gate.check(&who.app_id, &Category::Windows)?;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        let v = self.core.state.read(|s| view::windows(s, &can));
        Ok(variant::dicts(&v))
    }

    /// The window that has focus (needs `windows`).
    #[zbus(out_args("window"))]
    async fn get_active_window(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let who = self.caller(&hdr).await?;
        let gate = &self.core.gate;
        gate.check(&who.app_id, &Category::Windows)?;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        match self.core.state.read(|s| view::active_window(s, &can)) {
            Some(v) => Ok(variant::dict(&v)),
            None => Err(Error::NotFound("no window has focus".into())),
        }
    }

    /// Who plays and who captures now, and the capture sessions of the
    /// last 24 hours. Needs `media.playback` or `media.capture`; each part
    /// only with its own category.
    #[zbus(out_args("media"))]
    async fn get_media(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let who = self.caller(&hdr).await?;
        let gate = &self.core.gate;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        if !can(&Category::MediaPlayback) {
            // Neither: the error names media.capture, the one that answers
            // "who uses my microphone".
            gate.check(&who.app_id, &Category::MediaCapture)?;
        }
        let now = self.core.clock.now();
        let v = self.core.state.read(|s| view::media(s, &can, now));
        Ok(variant::dict(&v))
    }

    /// The health of every source. Needs no consent: it says nothing about
    /// what the user does.
    #[zbus(out_args("sources"))]
    async fn list_sources(&self) -> Vec<Dict> {
        let v = self.core.state.read(view::sources);
        variant::dicts(&v)
    }

    /// Every category, its description, and whether the caller may read it.
    #[zbus(out_args("categories"))]
    async fn list_categories(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        let who = self.caller(&hdr).await?;
        let gate = &self.core.gate;
        let can = |c: &Category| gate.allows(&who.app_id, c);
        let kinds: Vec<String> = self.core.state.read(|s| {
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
        if categories.is_empty() {
            return Err(Error::InvalidArgs(
                "no categories given; pass at least one (see ListCategories)".into(),
            ));
        }
        let mut cats: Vec<Category> = Vec::with_capacity(categories.len());
        for c in &categories {
            let c: Category = c.parse().map_err(crate::core::Error::from)?;
            if !cats.contains(&c) {
                cats.push(c);
            }
        }
        let who = self.caller(&hdr).await?;
        for c in &cats {
            self.core.gate.check(&who.app_id, c)?;
        }
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        let path = subscription::create(conn, &self.subs, &owner, who.app_id.clone(), cats).await?;
        tracing::debug!(app = %who.app_id, %path, "subscribed");
        Ok(path)
    }

    /// The interface version.
    #[zbus(property)]
    fn version(&self) -> u32 {
        VERSION
    }
}

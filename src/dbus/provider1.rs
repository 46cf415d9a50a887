//! `org.contextd.Provider1`: apps publish context about themselves.
//! Documented in `dbus-interfaces/org.contextd.Provider1.xml`.
//!
//! The publisher is identified from its credentials like every caller;
//! its unique bus name is the owner of what it publishes (an entry is
//! keyed by it and the kind), so that only that connection replaces or
//! retracts it, and its entries go when its connection does (see
//! `serve`'s `NameOwnerChanged`), whatever other connections of the same
//! app do.

use std::sync::Arc;

use zbus::interface;
use zbus::message::Header;

use super::Shared;
use super::error::{Error, Result};
use crate::core::vocabulary;

pub(crate) struct Provider1 {
    pub(crate) shared: Arc<Shared>,
}

fn owner(hdr: &Header<'_>) -> Result<String> {
    hdr.sender()
        .map(|s| s.to_string())
        .ok_or_else(|| Error::Failed("a call without a sender".into()))
}

#[interface(name = "org.contextd.Provider1", introspection_docs = false)]
impl Provider1 {
    /// Set the caller's entry of `kind` (a JSON object in the vocabulary).
    async fn publish(
        &self,
        kind: String,
        data: String,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<()> {
        let who = self.shared.subject(&hdr).await?;
        self.shared
            .core
            .provide
            .publish(&who, &owner(&hdr)?, &kind, &data)?;
        Ok(())
    }

    /// Remove the caller's entry of `kind` (this connection's).
    async fn retract(&self, kind: String, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        let who = self.shared.subject(&hdr).await?;
        self.shared
            .core
            .provide
            .retract(&who, &owner(&hdr)?, &kind)?;
        Ok(())
    }

    /// The JSON-LD `@context` of the vocabulary.
    #[zbus(property)]
    fn vocabulary(&self) -> &str {
        vocabulary::CONTEXT
    }
}

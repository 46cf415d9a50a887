//! `org.contextd.Request1`: the answer to `Context1.RequestAccess`, in the
//! Request/Response pattern of xdg-desktop-portal. The `Response` signal is
//! sent to the requester only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use zbus::message::Header;
use zbus::names::BusName;
use zbus::object_server::SignalEmitter;
use zbus::wire::{OwnedObjectPath, Variant};
use zbus::{Connection, interface};

use super::error::{Error, Result};
use crate::model::Category;

/// Response codes, as the portals use them.
pub(crate) const GRANTED: u32 = 0;
pub(crate) const DENIED: u32 = 1;
pub(crate) const ENDED: u32 = 2;

pub(crate) struct Request {
    owner: String,
    cancel: tokio_util::sync::CancellationToken,
}

#[interface(name = "org.contextd.Request1", introspection_docs = false)]
impl Request {
    /// Stop waiting; no Response follows.
    async fn close(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(object_server)] server: &zbus::ObjectServer,
    ) -> Result<()> {
        let sender = hdr.sender().map(|s| s.as_str()).unwrap_or_default();
        if sender != self.owner {
            return Err(Error::NotAllowed(
                "only the requester may close a request".into(),
            ));
        }
        self.cancel.cancel();
        if let Some(path) = hdr.path() {
            server.remove::<Request, _>(path).await?;
        }
        Ok(())
    }

    /// The outcome: 0 granted, 1 denied, 2 ended without an answer.
    #[zbus(signal)]
    pub async fn response(
        emitter: &SignalEmitter<'_>,
        response: u32,
        results: HashMap<String, Variant<'_>>,
    ) -> zbus::Result<()>;
}

/// The request objects of questions still open: one per requester's
/// connection and question. `RequestAccess` calls of a connection that
/// merge into one question (`core::prompts`) get the same object, so that
/// a flood of calls makes no more objects than there are open questions;
/// each goes when its question ends (or its requester closes it).
#[derive(Debug, Default)]
pub(crate) struct Open {
    slots: Mutex<HashMap<(String, u64), Slot>>,
}

#[derive(Debug)]
struct Slot {
    path: OwnedObjectPath,
    /// Every category asked for through this object: its `Response`
    /// answers for all of them.
    categories: Vec<Category>,
}

/// A requester's object for a question: one already open, or a new one
/// to create (with [`create`]) and answer.
#[derive(Debug)]
pub(crate) enum Joined {
    Existing(OwnedObjectPath),
    New(OwnedObjectPath),
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u64), Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The object of `owner`'s requests merged into question `question`,
    /// now asking for `categories` too; a new one at `/request/{n}` when
    /// it has none.
    pub(crate) fn join(
        &self,
        owner: &str,
        question: u64,
        categories: &[Category],
        n: impl FnOnce() -> u64,
    ) -> Result<Joined> {
        let mut slots = self.lock();
        if let Some(slot) = slots.get_mut(&(owner.to_owned(), question)) {
            for c in categories {
                if !slot.categories.contains(c) {
                    slot.categories.push(c.clone());
                }
            }
            return Ok(Joined::Existing(slot.path.clone()));
        }
        let path = path_of(n())?;
        slots.insert(
            (owner.to_owned(), question),
            Slot {
                path: path.clone(),
                categories: categories.to_vec(),
            },
        );
        Ok(Joined::New(path))
    }

    /// The object of `owner` for `question` is done: what it asked for.
    pub(crate) fn take(&self, owner: &str, question: u64) -> Vec<Category> {
        self.lock()
            .remove(&(owner.to_owned(), question))
            .map(|s| s.categories)
            .unwrap_or_default()
    }
}

fn path_of(n: u64) -> Result<OwnedObjectPath> {
    OwnedObjectPath::try_from(format!("/org/contextd/Broker1/request/{n}"))
        .map_err(|e| Error::Failed(e.to_string()))
}

/// Create a request object at `/request/{n}`; returns its path and a
/// token cancelled by `Close()`.
pub(crate) async fn create(
    conn: &Connection,
    n: u64,
    owner: &str,
) -> Result<(OwnedObjectPath, tokio_util::sync::CancellationToken)> {
    let path = path_of(n)?;
    create_at(conn, path, owner).await
}

/// Create a request object at `path` (from [`Open::join`]).
pub(crate) async fn create_at(
    conn: &Connection,
    path: OwnedObjectPath,
    owner: &str,
) -> Result<(OwnedObjectPath, tokio_util::sync::CancellationToken)> {
    let cancel = tokio_util::sync::CancellationToken::new();
    conn.object_server()
        .at(
            &path,
            Request {
                owner: owner.to_owned(),
                cancel: cancel.clone(),
            },
        )
        .await?;
    Ok((path, cancel))
}

/// Send the response to the requester and remove the object.
pub(crate) async fn respond(
    conn: Arc<Connection>,
    path: OwnedObjectPath,
    owner: String,
    code: u32,
    results: HashMap<String, Variant<'static>>,
) {
    if let (Ok(em), Ok(dest)) = (
        SignalEmitter::new(&conn, path.as_ref()),
        BusName::try_from(owner.as_str()),
    ) {
        let em = em.set_destination(dest);
        if let Err(e) = Request::response(&em, code, results).await {
            tracing::debug!(error = %e, "cannot send Response");
        }
    }
    let _ = conn.object_server().remove::<Request, _>(&path).await;
}

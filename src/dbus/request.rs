//! `org.contextd.Request1`: the answer to `Context1.RequestAccess`, in the
//! Request/Response pattern of xdg-desktop-portal. The `Response` signal is
//! sent to the requester only.

use std::collections::HashMap;
use std::sync::Arc;

use zbus::message::Header;
use zbus::names::BusName;
use zbus::object_server::SignalEmitter;
use zbus::wire::{OwnedObjectPath, Variant};
use zbus::{Connection, interface};

use super::error::{Error, Result};

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

/// Create a request object; returns its path and a token cancelled by
/// `Close()`.
pub(crate) async fn create(
    conn: &Connection,
    n: u64,
    owner: &str,
) -> Result<(OwnedObjectPath, tokio_util::sync::CancellationToken)> {
    let path = OwnedObjectPath::try_from(format!("/org/contextd/Broker1/request/{n}"))
        .map_err(|e| Error::Failed(e.to_string()))?;
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

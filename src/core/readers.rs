//! Who is reading right now: live D-Bus subscriptions and MCP sessions,
//! for `Consent1.ListReaders` and the dashboard's "Now" page, with a way
//! for the user to end one.
//!
//! A publisher registers a reader when it starts (a `Subscribe` call, an
//! MCP `initialize`) and keeps the [`Registration`]; dropping it is the
//! reader going away. Ending a reader cancels the token the publisher gave
//! at registration, which the publisher already watches to close the
//! stream (the subscription's object, the MCP connection), so the core
//! never needs to know how a transport is closed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::gate::Gate;
use super::notice::{Notices, Part};
use super::subject::Channel;
use crate::model::{AppId, Category, IdentitySource};

/// What a publisher knows of a reader when it starts.
#[derive(Debug, Clone)]
pub(crate) struct ReaderInfo {
    pub(crate) app: AppId,
    pub(crate) identity_source: IdentitySource,
    pub(crate) channel: Channel,
    /// How it reads: `subscription` (D-Bus), `stdio`, `http`, `sse` (MCP).
    pub(crate) transport: &'static str,
    /// The MCP host's `clientInfo` (name and version), if it gave one.
    pub(crate) client: Option<String>,
    /// What it follows (a subscription's categories; an MCP session's
    /// subscribed resources' categories, which grow as it subscribes).
    pub(crate) categories: Vec<Category>,
}

#[derive(Debug)]
struct Entry {
    info: ReaderInfo,
    since: DateTime<Utc>,
    end: CancellationToken,
}

#[derive(Debug)]
struct Inner {
    map: Mutex<BTreeMap<u64, Entry>>,
    next: AtomicU64,
    notices: Notices,
    /// Bumped when the user ends a reader, for publishers that check
    /// their readers in one loop rather than a task each.
    ended: tokio::sync::watch::Sender<u64>,
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.notices.bump(Part::Readers);
    }
}

/// The registry of live readers.
#[derive(Debug, Clone)]
pub(crate) struct Readers(Arc<Inner>);

impl Readers {
    pub(crate) fn new(notices: Notices) -> Self {
        Readers(Arc::new(Inner {
            map: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(1),
            notices,
            ended: tokio::sync::watch::channel(0).0,
        }))
    }

    /// Register a reader; `end` is what ending it cancels. The reader is
    /// listed until the returned registration is dropped.
    pub(crate) fn start(
        &self,
        info: ReaderInfo,
        now: DateTime<Utc>,
        end: CancellationToken,
    ) -> Registration {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        self.0.lock().insert(
            id,
            Entry {
                info,
                since: now,
                end: end.clone(),
            },
        );
        self.0.changed();
        Registration {
            id,
            end,
            readers: Arc::downgrade(&self.0),
        }
    }

    /// End the reader `id` (the user asked). False when there is none.
    pub(crate) fn end(&self, id: u64) -> bool {
        self.end_where(|rid, _| rid == id) > 0
    }

    /// End every reader of `app` (forgetting an app ends what it has
    /// open).
    pub(crate) fn end_app(&self, app: &AppId) -> usize {
        self.end_where(|_, info| &info.app == app)
    }

    /// Cancel the readers `which` picks and tell the loops that watch
    /// [`Readers::watch_ended`]; how many.
    fn end_where(&self, which: impl Fn(u64, &ReaderInfo) -> bool) -> usize {
        let ends: Vec<CancellationToken> = self
            .0
            .lock()
            .iter()
            .filter(|(id, e)| which(**id, &e.info))
            .map(|(_, e)| e.end.clone())
            .collect();
        ends.iter().for_each(CancellationToken::cancel);
        if !ends.is_empty() {
            self.0.ended.send_modify(|n| *n = n.wrapping_add(1));
        }
        ends.len()
    }

    fn list(&self) -> Vec<(u64, ReaderInfo, DateTime<Utc>)> {
        self.0
            .lock()
            .iter()
            .filter(|(_, e)| !e.end.is_cancelled())
            .map(|(id, e)| (*id, e.info.clone(), e.since))
            .collect()
    }
}

/// A live reader; dropping it takes the reader off the list.
#[derive(Debug)]
pub(crate) struct Registration {
    id: u64,
    end: CancellationToken,
    readers: Weak<Inner>,
}

impl Registration {
    /// Cancelled when the user ends this reader.
    pub(crate) fn ended(&self) -> &CancellationToken {
        &self.end
    }

    /// The reader now follows `category` too.
    pub(crate) fn add_category(&self, category: Category) {
        let Some(inner) = self.readers.upgrade() else {
            return;
        };
        let added = match inner.lock().get_mut(&self.id) {
            Some(e) if !e.info.categories.contains(&category) => {
                e.info.categories.push(category);
                true
            }
            _ => false,
        };
        if added {
            inner.changed();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(inner) = self.readers.upgrade()
            && inner.lock().remove(&self.id).is_some()
        {
            inner.changed();
        }
    }
}

/// A live reader, for `Consent1.ListReaders` and the dashboard.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ReaderView {
    /// What `Consent1.EndReader` takes.
    pub(crate) id: u64,
    pub(crate) app_id: String,
    pub(crate) identity_source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) icon: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) client: Option<String>,
    pub(crate) channel: &'static str,
    pub(crate) transport: &'static str,
    pub(crate) since: String,
    pub(crate) categories: super::view::Names,
}

impl Readers {
    /// Every live reader, oldest first, with the app's desktop name and
    /// icon when the broker knows them.
    pub(crate) fn views(&self, gate: &Gate) -> Vec<ReaderView> {
        let apps = gate.apps();
        self.list()
            .into_iter()
            .map(|(id, info, since)| {
                let app = apps.iter().find(|a| a.app_id == info.app);
                let mut categories: Vec<String> =
                    info.categories.iter().map(ToString::to_string).collect();
                categories.sort();
                ReaderView {
                    id,
                    app_id: info.app.to_string(),
                    identity_source: info.identity_source.as_str(),
                    name: app.and_then(|a| a.display_name.clone()),
                    icon: app.and_then(|a| a.icon.clone()),
                    client: info.client,
                    channel: info.channel.as_str(),
                    transport: info.transport,
                    since: super::view::time(&since),
                    categories: super::view::Names(categories),
                }
            })
            .collect()
    }
}

//! Server-to-host notifications: `notifications/resources/updated` for
//! subscribed resources when their context changes (only while the host
//! may see it), and `notifications/resources/list_changed` when consent
//! changes what the host may see.
//!
//! Back-pressure: every notification waits until the session's queue
//! takes it; a queue that stays full for `[limits] reader_stall_s` (the
//! host stopped reading) ends the connection, with the reason in the log
//! ([`Backpressure::DisconnectAfter`], applied by [`drive`]). Meanwhile the loop holds no backlog: the core's feed
//! drops what the loop could not take and says so once
//! ([`Item::Lagged`]); the host then gets one
//! `notifications/resources/list_changed` ("what you can see may have
//! changed: list again"; to a `subscriptions/listen` stream only when it
//! asked for list changes) and `resources/updated` for every resource it
//! subscribed to and may still see: the current state to re-read. Why
//! `list_changed` and not a `notifications/message`: every host acts on
//! it, a lag may indeed have changed the list (provided contexts come and
//! go), and logging is deprecated (SEP-2577) and filtered by the host's
//! level.
//!
//! One loop per session serves both protocol generations: handshake
//! sessions (`resources/subscribe`, notifications through the session's
//! peer) and 2026-07-28 `subscriptions/listen` streams (notifications
//! through rmcp's filtering sink).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use tokio_util::sync::CancellationToken;

use super::Broker;
use super::consent::Subject;
use super::resources::{self, FIXED, Res};
use crate::core::drive::{Backpressure, Ended, Flow, Sent, Sink, drive};
use crate::core::watch::Interest;
use crate::core::{Item, Watch};
use crate::model::Category;

/// The resources `subject` is shown in `resources/list`: the snapshot, and
/// every resource one of whose categories it may see or has not been asked
/// about yet.
pub(crate) async fn visible_resources(broker: &Broker, subject: &Subject) -> Vec<Res> {
    let mut out = Vec::new();
    for r in FIXED {
        let cats = r.categories();
        let mut show = cats.is_empty();
        for c in &cats {
            if broker.core.reads.offered(subject, c) {
                show = true;
                break;
            }
        }
        if show {
            out.push(r);
        }
    }
    out
}

/// Where a session's notifications go.
#[derive(Debug, Clone)]
pub(crate) enum Out {
    /// A handshake session: subscriptions are `subscribed`, changed by
    /// `resources/subscribe` and `resources/unsubscribe`.
    Session {
        peer: Peer<RoleServer>,
        subscribed: Arc<Mutex<BTreeSet<String>>>,
    },
    /// One `subscriptions/listen` request (2026-07-28): its accepted filter
    /// is fixed for its life.
    Listen(SubscriptionSink),
}

impl Out {
    /// What the feed needs to render for this host now: the changes of the
    /// categories behind the resources it subscribed to (all of them for
    /// the snapshot), none while it subscribed to nothing.
    fn interest(&self) -> Interest {
        match self {
            Out::Session { subscribed, .. } => {
                let subscribed = subscribed.clone();
                Arc::new(move |cat: &Category| {
                    subscribed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .iter()
                        .any(|uri| touches(uri, cat))
                })
            }
            Out::Listen(sink) => {
                let uris = sink
                    .accepted()
                    .resource_subscriptions
                    .clone()
                    .unwrap_or_default();
                Arc::new(move |cat: &Category| uris.iter().any(|uri| touches(uri, cat)))
            }
        }
    }

    fn subscribed(&self) -> Vec<String> {
        match self {
            Out::Session { subscribed, .. } => subscribed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect(),
            Out::Listen(sink) => sink
                .accepted()
                .resource_subscriptions
                .clone()
                .unwrap_or_default(),
        }
    }

    /// Whether the host subscribed to `uri` (without copying the list).
    fn subscribes(&self, uri: &str) -> bool {
        match self {
            Out::Session { subscribed, .. } => subscribed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(uri),
            Out::Listen(sink) => sink
                .accepted()
                .resource_subscriptions
                .as_ref()
                .is_some_and(|s| s.iter().any(|u| u == uri)),
        }
    }

    fn wants_list_changed(&self) -> bool {
        match self {
            Out::Session { .. } => true,
            Out::Listen(sink) => sink.accepted().resources_list_changed == Some(true),
        }
    }

    /// Send `updated` for `uri`; `false` when the host is gone.
    async fn updated(&self, uri: &str) -> bool {
        let r = match self {
            Out::Session { peer, .. } => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .map_err(|e| e.to_string()),
            Out::Listen(sink) => sink
                .notify_resource_updated(uri)
                .await
                .map_err(|e| e.to_string()),
        };
        if let Err(e) = &r {
            tracing::debug!(uri, error = %e, "cannot send resources/updated");
        }
        r.is_ok()
    }

    async fn list_changed(&self) -> bool {
        let r = match self {
            Out::Session { peer, .. } => peer
                .notify_resource_list_changed()
                .await
                .map_err(|e| e.to_string()),
            Out::Listen(sink) => sink
                .notify_resource_list_changed()
                .await
                .map_err(|e| e.to_string()),
        };
        if let Err(e) = &r {
            tracing::debug!(error = %e, "cannot send resources/list_changed");
        }
        r.is_ok()
    }

    fn closed(&self) -> bool {
        match self {
            Out::Session { peer, .. } => peer.is_transport_closed(),
            Out::Listen(_) => false,
        }
    }
}

/// Whether a change in `cat` can touch the resource `uri` (one we cannot
/// parse: yes, to be safe).
fn touches(uri: &str, cat: &Category) -> bool {
    let Some(res) = Res::parse(uri) else {
        return true;
    };
    if matches!(res, Res::Snapshot) {
        return true;
    }
    res.categories()
        .iter()
        .any(|c| c == cat || c.base().as_ref() == Some(cat) || cat.base().as_ref() == Some(c))
}

/// Notify `subject` of what `watch` (the core's feed for it) yields until
/// `cancel` (the session or the listen request ended), the feed is over,
/// or the host goes away. A host that does not take a notification within
/// the broker's stall limit is disconnected ([`Backpressure::DisconnectAfter`]):
/// `end` is cancelled (the connection's token on stdio and SSE, the
/// session's on Streamable HTTP).
pub(crate) async fn run(
    broker: Arc<Broker>,
    subject: Subject,
    out: Out,
    watch: Watch,
    (cancel, end): (CancellationToken, CancellationToken),
) {
    let limit = broker.stall;
    let mut watch = watch.interested(out.interest());
    // The awaits of the notifier are boxed: this loop lives as long as
    // its session, and its task is as large as the largest future it
    // awaits (a notification's send is kilobytes); boxed, that costs only
    // while it runs.
    let listed = Box::pin(visible_resources(&broker, &subject)).await;
    let mut notifier = Notifier {
        broker,
        subject,
        out,
        listed,
    };
    if drive(&mut watch, &mut notifier, &cancel).await == Ended::Stalled {
        tracing::warn!(
            app = %notifier.subject.app_id,
            channel = notifier.subject.channel.as_str(),
            "disconnecting an MCP reader: its queue stayed full for {} s (it stopped reading); its notifications are dropped",
            limit.as_secs()
        );
        end.cancel();
    }
}

/// One notification to a host.
#[derive(Debug)]
enum Notice {
    /// `notifications/resources/list_changed`; a host gone ends the loop.
    ListChanged,
    /// `notifications/resources/updated` for this URI, if the host
    /// subscribed to it when it is sent; a host gone drops the rest of
    /// the item's notices.
    Updated(String),
}

/// A session's side of [`drive`]: the feed's items as the notifications
/// of the resources the host subscribed to.
struct Notifier {
    broker: Arc<Broker>,
    subject: Subject,
    out: Out,
    /// What `resources/list` showed the host last.
    listed: Vec<Res>,
}

impl Sink for Notifier {
    type Msg = Notice;

    fn backpressure(&self) -> Backpressure {
        Backpressure::DisconnectAfter(self.broker.stall)
    }

    async fn convert(&mut self, item: Item, out: &mut Vec<Notice>) -> Flow {
        let uris: Vec<String> = match item {
            Item::Ended | Item::EndedByUser | Item::Revoked { .. } => return Flow::Stop,
            Item::GateChanged | Item::Paused | Item::Resumed => {
                let now = Box::pin(visible_resources(&self.broker, &self.subject)).await;
                if now != self.listed {
                    self.listed = now;
                    tracing::debug!(app = %self.subject.app_id, "resource list changed for this host");
                    if self.out.wants_list_changed() {
                        out.push(Notice::ListChanged);
                    }
                }
                return Flow::Go;
            }
            Item::Control(_) => return Flow::Go,
            // Source health needs no consent; every other change comes
            // only when the host may see it: its category, and a change
            // it can tell at all (the core compared what the host sees
            // before and after: a title change is none without
            // windows.titles, a new SSID none without network.name, a
            // move within the same city none without location.precise).
            Item::Sources => vec![Res::Snapshot.uri()],
            Item::Changed { change, .. } => resources::affected(
                &change,
                self.broker.core.watches.active_window_id().as_deref(),
            ),
            Item::Lagged { missed } => {
                // We missed changes: tell the host to re-read everything
                // it subscribed to and may still see.
                tracing::info!(app = %self.subject.app_id, missed, "an MCP reader fell behind; it is told to re-read");
                if self.out.wants_list_changed() {
                    out.push(Notice::ListChanged);
                }
                let mut all = Vec::new();
                for uri in self.out.subscribed() {
                    if let Some(res) = Res::parse(&uri)
                        && Box::pin(may_see(&self.broker, &self.subject, &res)).await
                    {
                        all.push(uri);
                    }
                }
                all
            }
        };
        out.extend(uris.into_iter().map(Notice::Updated));
        Flow::Go
    }

    async fn send(&mut self, notice: Notice) -> Sent {
        match notice {
            Notice::ListChanged => {
                if Box::pin(self.out.list_changed()).await {
                    Sent::Delivered
                } else {
                    Sent::Gone
                }
            }
            // Whether the host subscribed is asked as the notice goes
            // out: a `resources/unsubscribe` meanwhile stops it.
            Notice::Updated(uri) if !self.out.subscribes(&uri) => Sent::Delivered,
            Notice::Updated(uri) => {
                if Box::pin(self.out.updated(&uri)).await {
                    Sent::Delivered
                } else {
                    Sent::Dropped
                }
            }
        }
    }

    fn closed(&self) -> bool {
        self.out.closed()
    }
}

/// Whether `subject` may read `res` now (without asking).
pub(crate) async fn may_see(broker: &Broker, subject: &Subject, res: &Res) -> bool {
    let cats = res.categories();
    if cats.is_empty() {
        return true;
    }
    cats.iter().any(|c| broker.core.reads.allows(subject, c))
}

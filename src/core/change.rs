//! What changed in the state, as the state broadcasts it to publishers and
//! hands it to its observers (the capture log, the timeline).

use serde::Serialize;

use crate::model::{
    Category, Location, MediaStream, Network, Notification, Power, ProvidedContext, RecentDocument,
    SessionState, SourceStatus, Window,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ChangeKind {
    Opened,
    Changed,
    Closed,
}

impl ChangeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Opened => "opened",
            ChangeKind::Changed => "changed",
            ChangeKind::Closed => "closed",
        }
    }
}

/// A change to the snapshot, as broadcast to publishers. It carries the full
/// data; each publisher renders it per subscriber through `core::view`, so
/// what a subscriber may not see never leaves the core.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Window {
        kind: ChangeKind,
        window: Window,
    },
    Focus {
        window: Option<Window>,
    },
    Stream {
        kind: ChangeKind,
        stream: MediaStream,
    },
    Session(Option<SessionState>),
    Power(Option<Power>),
    Network(Option<Network>),
    Notification {
        kind: ChangeKind,
        notification: Notification,
    },
    Provided {
        kind: ChangeKind,
        context: ProvidedContext,
    },
    /// The location moved (`None`: unknown); `coarse_changed` when the
    /// city-level place a reader without `location.precise` sees moved too.
    Location {
        location: Option<Location>,
        coarse_changed: bool,
    },
    /// The recently used files changed: the whole list (`None`: unknown),
    /// and the entries used since the previous list (for the timeline;
    /// empty for the first list the source reads).
    RecentDocuments {
        documents: Option<Vec<RecentDocument>>,
        new: Vec<RecentDocument>,
    },
    Source(SourceStatus),
}

impl Change {
    /// The category a subscriber needs to receive this change, or `None`
    /// for changes that need no consent (source health).
    pub(crate) fn category(&self) -> Option<Category> {
        Some(match self {
            Change::Window { .. } | Change::Focus { .. } => Category::Windows,
            Change::Stream { stream, .. } if stream.kind.is_capture() => Category::MediaCapture,
            Change::Stream { .. } => Category::MediaPlayback,
            Change::Session(_) => Category::Session,
            Change::Power(_) => Category::Power,
            Change::Network(_) => Category::Network,
            Change::Notification { .. } => Category::Notifications,
            Change::Provided { context, .. } => Category::Provided(context.kind.to_string()),
            Change::RecentDocuments { .. } => Category::DocumentsRecent,
            Change::Location { .. } => Category::Location,
            Change::Source(_) => return None,
        })
    }
}

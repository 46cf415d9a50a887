//! What changed in the state, as the state broadcasts it to publishers and
//! hands it to its observers (the capture log, the timeline).

use serde::Serialize;

use crate::model::{
    Calendar, Category, Location, MediaStream, Network, Notification, Power, ProvidedContext,
    RecentDocument, SessionState, SourceStatus, Window,
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
///
/// A change of something that has a detail category (a window's title, a
/// notification's body, the network's name, the exact place) also carries
/// what it replaced (`before`): `core::view::change` renders both for a
/// reader and sends nothing when the two read the same to it. Without
/// that, a reader granted `windows` but not `windows.titles` would be told
/// of every title change (when a chat's unread count moves, when the user
/// navigates), the withheld detail announced by its changes (issue 48).
/// `before` is what the state replaced, moved there, never a copy.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Window {
        kind: ChangeKind,
        window: Window,
        /// The window as it was, for a `Changed`; `None` otherwise.
        before: Option<Box<Window>>,
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
    /// The network now and before (`None`: unknown).
    Network {
        network: Option<Network>,
        before: Option<Network>,
    },
    Notification {
        kind: ChangeKind,
        notification: Notification,
        /// The notification an `Opened` one replaced (same id), if any.
        before: Option<Box<Notification>>,
    },
    Provided {
        kind: ChangeKind,
        context: ProvidedContext,
    },
    /// The location moved (`None`: unknown); `before` is where it was. A
    /// move within the city-level place is no change to a reader without
    /// `location.precise`.
    Location {
        location: Option<Location>,
        before: Option<Location>,
    },
    /// The recently used files changed: the whole list (`None`: unknown),
    /// and the entries used since the previous list (for the timeline;
    /// empty for the first list the source reads).
    RecentDocuments {
        documents: Option<Vec<RecentDocument>>,
        new: Vec<RecentDocument>,
    },
    /// The calendar changed (`None`: unknown); `before` is what it was.
    /// A change of titles, places or attendees only is no change to a
    /// reader without `calendar.details`.
    Calendar {
        calendar: Option<Calendar>,
        before: Option<Calendar>,
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
            Change::Network { .. } => Category::Network,
            Change::Notification { .. } => Category::Notifications,
            Change::Provided { context, .. } => Category::Provided(context.kind.to_string()),
            Change::RecentDocuments { .. } => Category::DocumentsRecent,
            Change::Location { .. } => Category::Location,
            Change::Calendar { .. } => Category::Calendar,
            Change::Source(_) => return None,
        })
    }
}

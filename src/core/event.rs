use serde::{Deserialize, Serialize};

use crate::model::{
    AppId, Calendar, CloseReason, DoNotDisturb, Location, MediaStream, Network, Notification,
    Power, ProvidedContext, RecentDocument, Selection, SessionState, Window,
};

/// What a source tells the core. Sources produce these and nothing else;
/// the replay source reads them as JSON lines (`{"type": "window", ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SourceEvent {
    /// A source became available or unavailable.
    SourceStatus {
        source: String,
        available: bool,
        #[serde(default)]
        error: Option<String>,
    },
    /// A window appeared or changed (the whole new state of it). A window
    /// whose `states.activated` is set becomes the active window.
    Window {
        window: Window,
    },
    WindowClosed {
        id: String,
    },
    /// Focus moved to a window (or to none).
    Focus {
        #[serde(default)]
        id: Option<String>,
    },
    /// Every window is gone (the compositor went away).
    WindowsReset,
    Stream {
        stream: MediaStream,
    },
    StreamRemoved {
        id: String,
    },
    /// Every stream of a source is gone (PipeWire restarted); streams are
    /// matched by the prefix of their id, which each source owns.
    StreamsReset {
        id_prefix: String,
    },
    Session {
        session: Option<SessionState>,
    },
    /// Do Not Disturb (`None`: no desktop source knows). The core puts
    /// it on the session state, which comes from another source.
    DoNotDisturb {
        dnd: Option<DoNotDisturb>,
    },
    Power {
        power: Option<Power>,
    },
    Network {
        network: Option<Network>,
    },
    Notification {
        notification: Notification,
    },
    NotificationClosed {
        id: String,
        /// Why, when the server said (`None`: the server or the bus went).
        #[serde(default)]
        reason: Option<CloseReason>,
    },
    Provided {
        context: ProvidedContext,
    },
    /// The primary selection now (`None`: nothing, or no text). Only the
    /// current value is kept, and it changes nothing that is broadcast or
    /// recorded.
    Selection {
        selection: Option<Selection>,
    },
    /// Where the machine is (`None`: unknown).
    Location {
        location: Option<Location>,
    },
    /// The recently used files, newest first, already without the paths
    /// the user excluded; `None` while unknown.
    RecentDocuments {
        documents: Option<Vec<RecentDocument>>,
    },
    /// The next events and open tasks (`None`: no calendar service).
    Calendar {
        calendar: Option<Calendar>,
    },
    ProvidedRemoved {
        app_id: AppId,
        kind: std::sync::Arc<str>,
    },
    /// Replay only: move the broker's clock (started with `--fake-clock`)
    /// to `at`, in order with the events around it, so that a scripted
    /// day has real timestamps. Ignored with the system clock.
    #[cfg(feature = "replay")]
    Clock {
        at: chrono::DateTime<chrono::Utc>,
    },
}

//! The context model: plain data, no I/O.
//!
//! Everything the broker knows is one of these types. Sources produce them,
//! `core` keeps them, publishers render them. Fields whose value comes from
//! what a client *claims* (a Wayland app id, a PipeWire `application.name`)
//! are named so (`claimed_*`, or documented as reported), because the only
//! identity the broker trusts is the one it derives from the kernel.

pub mod admin;
mod app;
mod calendar;
mod category;
mod context;
pub mod privacy;

pub use app::{AppId, AppIdError, IdentitySource, SYSTEMD_PREFIX};
pub use calendar::{Calendar, CalendarEvent, CalendarTask};
pub use category::{Category, CategoryError};
pub use context::{
    CloseReason, DndSource, DoNotDisturb, Hidden, Location, MediaKind, MediaStream, Network,
    Notification, PlaybackStatus, Player, Power, ProvidedContext, ProvidedData, RecentDocument,
    Selection, SessionState, SourceStatus, StreamAttribution, StreamState, Urgency, Window,
    WindowAttribution, WindowProcess, WindowSandbox, WindowStates,
};

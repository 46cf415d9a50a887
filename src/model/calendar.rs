//! The user's calendar as the desktop's calendar service keeps it
//! (Evolution Data Server, `sources::calendar`): the next events and the
//! open tasks. The times say that the user is busy and when; what the
//! events are (titles, places, who takes part) is a detail
//! (`calendar.details`), kept here and shown only under that grant by
//! `core::view`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Hidden;

/// The next events and the open tasks of every enabled calendar and task
/// list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calendar {
    /// Events that have not ended, soonest first (each occurrence of a
    /// recurring event is one).
    #[serde(default)]
    pub events: Vec<CalendarEvent>,
    /// Tasks not completed or cancelled, those with the soonest due date
    /// first, then those without one.
    #[serde(default)]
    pub tasks: Vec<CalendarTask>,
}

/// One event, or one occurrence of a recurring event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalendarEvent {
    /// Opaque and stable while the event exists: a hash of the calendar's
    /// and the event's ids (and the occurrence), so that neither tells
    /// anything itself.
    pub id: String,
    pub start: DateTime<Utc>,
    /// `None` for an event without an end or a duration (a moment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// A whole-day event (`DTSTART;VALUE=DATE`): `start` and `end` are
    /// the local midnights.
    #[serde(default)]
    pub all_day: bool,
    /// Whether the event was going on when the source last looked (it
    /// looks again at every start and end).
    #[serde(default)]
    pub ongoing: bool,
    /// Whether it is an occurrence of a recurring event.
    #[serde(default)]
    pub recurring: bool,
    /// `SUMMARY`: what the calendar's owner (or an inviter) wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `LOCATION`, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Each `ATTENDEE`'s name (`CN`), else its address without `mailto:`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attendees: Vec<String>,
    /// Why the title, place and attendees were held back (the user's
    /// never-share rules matched the title), if they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
}

impl CalendarEvent {
    /// Whether it is going on at `now`.
    pub fn covers(&self, now: DateTime<Utc>) -> bool {
        self.start <= now && self.end.is_some_and(|e| now < e)
    }
}

/// One open task (a `VTODO` not completed or cancelled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalendarTask {
    /// Opaque, as [`CalendarEvent::id`].
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<DateTime<Utc>>,
    /// `STATUS: IN-PROCESS` (or a percentage done above 0).
    #[serde(default)]
    pub in_progress: bool,
    /// `SUMMARY`, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why the summary was held back, if it was (as for an event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
}

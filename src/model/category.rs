use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A category of context: the unit of consent.
///
/// Users grant an app a category, never a single field. Three categories are
/// *details* of another one ([`Category::base`]): `windows.titles` adds
/// window titles to `windows`, `notifications.content` adds bodies to
/// `notifications`, `network.name` adds the network's name (SSID) to
/// `network`, `calendar.details` adds what events and tasks are to
/// `calendar`. Granting a detail implies its base, because a user who
/// lets an app read window titles obviously lets it know the windows exist.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Category {
    Windows,
    WindowsTitles,
    MediaPlayback,
    MediaCapture,
    Session,
    Power,
    Network,
    /// The network's name (Wi-Fi SSID): a detail of `network`, because a
    /// name like "Hotel Alpenblick" or "ACME-Guest" tells where the user is,
    /// while connectivity and metered state do not.
    NetworkName,
    Notifications,
    NotificationsContent,
    /// The files the user opened recently (`recently-used.xbel`).
    DocumentsRecent,
    /// Where the machine is, at about the level of a city.
    Location,
    /// Where the machine is, as precisely as the location service knows:
    /// a detail of `location`.
    LocationPrecise,
    /// The text selected last (the primary selection): read on request
    /// only, never in a signal or the timeline.
    Selection,
    /// The next events and open tasks of the user's calendars: when the
    /// user is busy, and that there are tasks and when they are due.
    Calendar,
    /// What the events and tasks are: titles, places and who takes part
    /// (a detail of `calendar`).
    CalendarDetails,
    /// Context an app publishes itself, by kind (`provided.document`,
    /// `provided.selection`, `provided.task`, ...).
    Provided(String),
    History,
    /// Not a read: the right to send desktop notifications through the
    /// broker (used by the MCP `send_notification` tool).
    ActionsNotify,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CategoryError {
    #[error("unknown category '{0}' (see ListCategories for the valid ones)")]
    Unknown(String),
    #[error("invalid provided kind '{0}': use 1-64 characters of a-z, 0-9, '-' and '_'")]
    BadKind(String),
}

/// Every fixed category, in the order users see them.
const FIXED: [Category; 18] = [
    Category::Windows,
    Category::WindowsTitles,
    Category::MediaPlayback,
    Category::MediaCapture,
    Category::Session,
    Category::Power,
    Category::Network,
    Category::NetworkName,
    Category::Notifications,
    Category::NotificationsContent,
    Category::DocumentsRecent,
    Category::Location,
    Category::LocationPrecise,
    Category::Selection,
    Category::Calendar,
    Category::CalendarDetails,
    Category::History,
    Category::ActionsNotify,
];

impl Category {
    /// The fixed categories (every `provided.<kind>` is one more).
    pub fn fixed() -> &'static [Category] {
        &FIXED
    }

    pub fn provided(kind: &str) -> Result<Self, CategoryError> {
        let ok = !kind.is_empty()
            && kind.len() <= 64
            && kind
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if ok {
            Ok(Category::Provided(kind.to_owned()))
        } else {
            Err(CategoryError::BadKind(kind.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Category::Windows => "windows",
            Category::WindowsTitles => "windows.titles",
            Category::MediaPlayback => "media.playback",
            Category::MediaCapture => "media.capture",
            Category::Session => "session",
            Category::Power => "power",
            Category::Network => "network",
            Category::NetworkName => "network.name",
            Category::Notifications => "notifications",
            Category::NotificationsContent => "notifications.content",
            Category::DocumentsRecent => "documents.recent",
            Category::Location => "location",
            Category::LocationPrecise => "location.precise",
            Category::Selection => "selection",
            Category::Calendar => "calendar",
            Category::CalendarDetails => "calendar.details",
            Category::Provided(_) => "provided",
            Category::History => "history",
            Category::ActionsNotify => "actions.notify",
        }
    }

    /// The category this one adds detail to, if it is a detail.
    pub fn base(&self) -> Option<Category> {
        match self {
            Category::WindowsTitles => Some(Category::Windows),
            Category::NotificationsContent => Some(Category::Notifications),
            Category::NetworkName => Some(Category::Network),
            Category::LocationPrecise => Some(Category::Location),
            Category::CalendarDetails => Some(Category::Calendar),
            _ => None,
        }
    }

    /// The one line shown to users when they are asked or list grants.
    pub fn description(&self) -> String {
        match self {
            Category::Windows => "Which apps and windows are open and which one has focus".into(),
            Category::WindowsTitles => {
                "The titles of your windows (may show documents, web pages, chats)".into()
            }
            Category::MediaPlayback => "Which apps play audio or video, and what is playing".into(),
            Category::MediaCapture => "Which apps use your microphone, camera or screen".into(),
            Category::Session => {
                "Whether your session is active, idle, locked or going to sleep".into()
            }
            Category::Power => "Battery level and whether you are on battery".into(),
            Category::Network => "Network connectivity, metered state and connection type".into(),
            Category::NetworkName => {
                "The name of your network (Wi-Fi SSID), which can show where you are".into()
            }
            Category::Notifications => {
                "Which apps sent you notifications, with their summaries".into()
            }
            Category::NotificationsContent => "The full text of your notifications".into(),
            Category::DocumentsRecent => {
                "The files you opened recently, with which app and when".into()
            }
            Category::Location => "Where you are, at about the level of a city".into(),
            Category::LocationPrecise => {
                "Where you are exactly (coordinates finer than a city)".into()
            }
            Category::Selection => "The text you selected last, when the app asks for it".into(),
            Category::Calendar => {
                "When your next events are and whether you are in one, and your open tasks' due dates"
                    .into()
            }
            Category::CalendarDetails => {
                "What your events and tasks are: titles, places and who takes part".into()
            }
            Category::Provided(kind) => {
                format!("What apps publish about their {kind} (e.g. the open document)")
            }
            Category::History => {
                "What you did in the past (focus, media and session timeline)".into()
            }
            Category::ActionsNotify => "Show you desktop notifications".into(),
        }
    }

    /// Whether a read of this category can reveal where the user is or who
    /// they talk to; used to order prompts and flag grants in UIs.
    pub fn is_sensitive(&self) -> bool {
        matches!(
            self,
            Category::WindowsTitles
                | Category::MediaCapture
                | Category::NotificationsContent
                | Category::History
                | Category::NetworkName
                | Category::DocumentsRecent
                | Category::Location
                | Category::LocationPrecise
                | Category::Selection
                | Category::CalendarDetails
        )
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Category::Provided(kind) => write!(f, "provided.{kind}"),
            other => f.write_str(other.as_str()),
        }
    }
}

impl FromStr for Category {
    type Err = CategoryError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(kind) = s.strip_prefix("provided.") {
            return Category::provided(kind);
        }
        FIXED
            .iter()
            .find(|c| c.as_str() == s)
            .cloned()
            .ok_or_else(|| CategoryError::Unknown(s.chars().take(100).collect()))
    }
}

impl TryFrom<String> for Category {
    type Error = CategoryError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Category> for String {
    fn from(c: Category) -> String {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_fixed_category() {
        for c in Category::fixed() {
            assert_eq!(c.to_string().parse::<Category>().as_ref(), Ok(c));
            assert!(!c.description().is_empty());
        }
        assert_eq!(
            "provided.document".parse::<Category>(),
            Ok(Category::Provided("document".into()))
        );
    }

    #[test]
    fn rejects_unknown_and_bad_kinds() {
        assert!(matches!(
            "window".parse::<Category>(),
            Err(CategoryError::Unknown(_))
        ));
        assert!(matches!(
            "".parse::<Category>(),
            Err(CategoryError::Unknown(_))
        ));
        assert!(matches!(
            "provided.".parse::<Category>(),
            Err(CategoryError::BadKind(_))
        ));
        assert!(matches!(
            "provided.A B".parse::<Category>(),
            Err(CategoryError::BadKind(_))
        ));
    }

    #[test]
    fn details_have_bases() {
        assert_eq!(Category::WindowsTitles.base(), Some(Category::Windows));
        assert_eq!(
            Category::NotificationsContent.base(),
            Some(Category::Notifications)
        );
        assert_eq!(Category::NetworkName.base(), Some(Category::Network));
        assert_eq!(Category::LocationPrecise.base(), Some(Category::Location));
        assert_eq!(Category::CalendarDetails.base(), Some(Category::Calendar));
        assert_eq!(Category::Windows.base(), None);
    }
}

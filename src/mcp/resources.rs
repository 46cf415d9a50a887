//! The `context://` resources: what each URI means, which category it
//! needs, and its rendering (JSON, the same as D-Bus shows through
//! `core::view`, plus a short `text/markdown` summary for people and
//! models).

use serde_json::{Value, json};

use super::Broker;
use super::consent::{Mode, Subject};
use super::error::Error;
use super::output::{
    self, EventsOut, LocationOut, NetworkOut, Output, Paged, PowerOut, ProvidedOut, SelectionOut,
    SessionOut, TasksOut,
};
pub(crate) use super::render::{Rendered, fit};
use crate::core::state::Change;
use crate::core::view::CategoryView;
use crate::core::{read, vocabulary};
use crate::model::Category;

pub(crate) const SCHEME: &str = "context://";
pub(crate) const JSON_MIME: &str = "application/json";
pub(crate) const MARKDOWN_MIME: &str = "text/markdown";
/// The vocabulary is a JSON-LD `@context` document.
pub(crate) const JSON_LD_MIME: &str = "application/ld+json";

/// A resource we serve.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Res {
    Snapshot,
    Windows,
    ActiveWindow,
    Window(String),
    Media,
    Session,
    Power,
    Network,
    Notifications,
    /// The recently used files (`context://documents/recent`).
    RecentDocuments,
    /// Where the machine is (`context://location`).
    Location,
    /// The primary selection (`context://selection`): read on request
    /// only, so no change ever notifies it.
    Selection,
    /// The next events (`context://calendar/events`).
    CalendarEvents,
    /// The open tasks (`context://calendar/tasks`).
    CalendarTasks,
    /// One event by id (`context://calendar/events/{id}`).
    CalendarEvent(String),
    /// A period of the timeline (`context://history{?since,until,app}`).
    History(HistoryParams),
    /// The shared vocabulary of what apps publish: the JSON-LD `@context`
    /// (public, needs no consent).
    Vocabulary,
    /// What apps publish of one kind (`context://provided/{kind}`), its
    /// first page; the kind is one that can be published (checked by
    /// [`Res::provided`]).
    Provided(String),
    /// A later page of a kind (`context://provided/{kind}?cursor=…`, the
    /// `nextCursor` of the page before, as given: checked when read).
    /// Changes are announced for the kind's first page only.
    ProvidedPage(String, String),
}

/// The query of a `context://history` URI, as given (checked when read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HistoryParams {
    pub since: Option<String>,
    pub until: Option<String>,
    pub app: Option<String>,
}

impl HistoryParams {
    /// `history?since=…&until=…&app=…` (RFC 6570 form-style, values
    /// percent-encoded; any part may be missing, none may repeat, nothing
    /// else may be there).
    fn parse(path: &str) -> Option<HistoryParams> {
        let mut p = HistoryParams::default();
        let query = match path.strip_prefix("history") {
            Some("") => return Some(p),
            Some(rest) => rest.strip_prefix('?')?,
            None => return None,
        };
        for pair in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair.split_once('=')?;
            let v = percent_encoding::percent_decode_str(v)
                .decode_utf8()
                .ok()?
                .into_owned();
            if v.len() > 256 || v.chars().any(char::is_control) {
                return None;
            }
            let slot = match k {
                "since" => &mut p.since,
                "until" => &mut p.until,
                "app" => &mut p.app,
                _ => return None,
            };
            if slot.replace(v).is_some() {
                return None;
            }
        }
        Some(p)
    }

    fn uri(&self) -> String {
        // RFC 3986 unreserved characters stay; everything else is encoded.
        const VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'.')
            .remove(b'_')
            .remove(b'~');
        let parts: Vec<String> = [
            ("since", &self.since),
            ("until", &self.until),
            ("app", &self.app),
        ]
        .into_iter()
        .filter_map(|(k, v)| {
            v.as_ref()
                .map(|v| format!("{k}={}", percent_encoding::utf8_percent_encode(v, VALUE)))
        })
        .collect();
        if parts.is_empty() {
            "context://history".into()
        } else {
            format!("context://history?{}", parts.join("&"))
        }
    }
}

/// The fixed resources, in listing order.
pub const FIXED: [Res; 14] = [
    Res::Snapshot,
    Res::Windows,
    Res::ActiveWindow,
    Res::Media,
    Res::Session,
    Res::Power,
    Res::Network,
    Res::Notifications,
    Res::RecentDocuments,
    Res::Location,
    Res::Selection,
    Res::CalendarEvents,
    Res::CalendarTasks,
    Res::Vocabulary,
];

/// Entries on one page of `context://provided/{kind}` (the most a page of
/// the tool `get_provided_context` holds).
const PROVIDED_PAGE: usize = 100;

/// The template of per-window resources.
pub(crate) const WINDOW_TEMPLATE: &str = "context://windows/{id}";
/// The template of one event by its id.
pub(crate) const EVENT_TEMPLATE: &str = "context://calendar/events/{id}";
const EVENT_PREFIX: &str = "context://calendar/events/";

/// The template of what apps publish, by kind.
pub(crate) const PROVIDED_TEMPLATE: &str = "context://provided/{kind}";
const PROVIDED_PREFIX: &str = "context://provided/";

/// The kinds of provided context, as said to a host.
pub(crate) fn kinds_said() -> String {
    format!(
        "{}, or x-NAME for an app's own (lower-case letters, digits, dashes)",
        vocabulary::seed_kinds().collect::<Vec<_>>().join(", ")
    )
}

/// Why `kind` is no kind a host can read, naming the ones it can.
pub(crate) fn kind_error(kind: &str) -> String {
    format!(
        "unknown kind '{}': the kinds are {}; context://vocabulary describes them",
        kind.chars().take(64).collect::<String>(),
        kinds_said()
    )
}

impl Res {
    /// The resource of provided context of `kind`, if `kind` is one that
    /// can be published (a seed kind or `x-NAME`).
    pub fn provided(kind: &str) -> Option<Res> {
        vocabulary::check_kind(kind).ok()?;
        Some(Res::Provided(kind.to_owned()))
    }

    pub fn parse(uri: &str) -> Option<Res> {
        let path = uri.strip_prefix(SCHEME)?;
        Some(match path {
            "snapshot" => Res::Snapshot,
            "windows" => Res::Windows,
            "windows/active" => Res::ActiveWindow,
            "media" => Res::Media,
            "session" => Res::Session,
            "power" => Res::Power,
            "network" => Res::Network,
            "notifications" => Res::Notifications,
            "documents/recent" => Res::RecentDocuments,
            "location" => Res::Location,
            "selection" => Res::Selection,
            "calendar/events" => Res::CalendarEvents,
            "calendar/tasks" => Res::CalendarTasks,
            "vocabulary" => Res::Vocabulary,
            p if p.starts_with("history") => Res::History(HistoryParams::parse(p)?),
            p if p.starts_with("calendar/events/") => {
                let id = p.strip_prefix("calendar/events/")?;
                // Event ids are the broker's own (`h` and 16 hex digits).
                if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric())
                {
                    return None;
                }
                Res::CalendarEvent(id.to_owned())
            }
            p if p.starts_with("provided/") => {
                let p = p.strip_prefix("provided/")?;
                match p.split_once('?') {
                    None => Res::provided(p)?,
                    Some((kind, query)) => {
                        let Res::Provided(kind) = Res::provided(kind)? else {
                            return None;
                        };
                        let cursor =
                            percent_encoding::percent_decode_str(query.strip_prefix("cursor=")?)
                                .decode_utf8()
                                .ok()?;
                        if cursor.is_empty() || cursor.len() > 1024 {
                            return None;
                        }
                        Res::ProvidedPage(kind, cursor.into_owned())
                    }
                }
            }
            p => {
                let id = p.strip_prefix("windows/")?;
                // Window ids are the broker's own; anything odd cannot be one.
                if id.is_empty()
                    || id.len() > 256
                    || id.contains('/')
                    || id.chars().any(char::is_control)
                {
                    return None;
                }
                Res::Window(id.to_owned())
            }
        })
    }

    /// The resource whose changes are announced for this one: a later
    /// page of provided context is its kind's (its first page's URI).
    pub fn watched(self) -> Res {
        match self {
            Res::ProvidedPage(kind, _) => Res::Provided(kind),
            r => r,
        }
    }

    pub fn uri(&self) -> String {
        match self {
            Res::Snapshot => "context://snapshot".into(),
            Res::Windows => "context://windows".into(),
            Res::ActiveWindow => "context://windows/active".into(),
            Res::Window(id) => format!("context://windows/{id}"),
            Res::Media => "context://media".into(),
            Res::Session => "context://session".into(),
            Res::Power => "context://power".into(),
            Res::Network => "context://network".into(),
            Res::Notifications => "context://notifications".into(),
            Res::RecentDocuments => "context://documents/recent".into(),
            Res::Location => "context://location".into(),
            Res::Selection => "context://selection".into(),
            Res::CalendarEvents => "context://calendar/events".into(),
            Res::CalendarTasks => "context://calendar/tasks".into(),
            Res::CalendarEvent(id) => format!("{EVENT_PREFIX}{id}"),
            Res::History(p) => p.uri(),
            Res::Vocabulary => "context://vocabulary".into(),
            Res::Provided(kind) => format!("{PROVIDED_PREFIX}{kind}"),
            Res::ProvidedPage(kind, cursor) => {
                let c = percent_encoding::utf8_percent_encode(
                    cursor,
                    percent_encoding::NON_ALPHANUMERIC,
                );
                format!("{PROVIDED_PREFIX}{kind}?cursor={c}")
            }
        }
    }

    /// The media type of the resource's first content (the second, if
    /// any, is its Markdown summary).
    pub fn mime(&self) -> &'static str {
        match self {
            Res::Vocabulary => JSON_LD_MIME,
            _ => JSON_MIME,
        }
    }

    /// The categories that let a host read this resource: any one of them
    /// is enough (media needs playback or capture); the snapshot needs none
    /// (it shows what the host may see and lists the rest as `withheld`),
    /// nor does the vocabulary (public: it says what kinds mean, not what
    /// anyone published).
    pub fn categories(&self) -> Vec<Category> {
        match self {
            Res::Snapshot | Res::Vocabulary => vec![],
            Res::Provided(kind) | Res::ProvidedPage(kind, _) => {
                vec![Category::Provided(kind.clone())]
            }
            Res::Windows | Res::ActiveWindow | Res::Window(_) => vec![Category::Windows],
            Res::Media => vec![Category::MediaPlayback, Category::MediaCapture],
            Res::Session => vec![Category::Session],
            Res::Power => vec![Category::Power],
            Res::Network => vec![Category::Network],
            Res::Notifications => vec![Category::Notifications],
            Res::RecentDocuments => vec![Category::DocumentsRecent],
            Res::Location => vec![Category::Location],
            Res::Selection => vec![Category::Selection],
            Res::CalendarEvents | Res::CalendarTasks | Res::CalendarEvent(_) => {
                vec![Category::Calendar]
            }
            Res::History(_) => vec![Category::History],
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Res::Snapshot => "Desktop context snapshot",
            Res::Windows => "Open windows",
            Res::ActiveWindow => "Focused window",
            Res::Window(_) => "Window",
            Res::Media => "Media activity",
            Res::Session => "Session state",
            Res::Power => "Power",
            Res::Network => "Network",
            Res::Notifications => "Recent notifications",
            Res::RecentDocuments => "Recent documents",
            Res::Location => "Location",
            Res::Selection => "Selected text",
            Res::CalendarEvents => "Upcoming events",
            Res::CalendarTasks => "Open tasks",
            Res::CalendarEvent(_) => "Event",
            Res::History(_) => "Timeline",
            Res::Vocabulary => "Vocabulary of app-provided context",
            Res::Provided(_) | Res::ProvidedPage(..) => "What apps publish",
        }
    }

    fn description(&self) -> String {
        let what = match self {
            Res::Snapshot => {
                "Everything the user allowed this host to see, one key per category; `withheld` lists the rest"
                    .to_owned()
            }
            Res::Windows => "The open windows, oldest first; titles only with windows.titles".into(),
            Res::ActiveWindow => "The window that has keyboard focus, or null".into(),
            Res::Window(_) => "One window by its id".into(),
            Res::Media => "Who plays audio/video and who uses the microphone, camera or screen".into(),
            Res::Session => "Whether the session is active, idle, locked, going to sleep or in Do Not Disturb".into(),
            Res::Power => "Battery level and whether the machine runs on battery".into(),
            Res::Network => "Connectivity, metered state and the network's name".into(),
            Res::Notifications => {
                "Notifications apps sent, newest first; bodies only with notifications.content".into()
            }
            Res::RecentDocuments => {
                "The files the user opened recently, newest first: path, type, the app and when (paths the user excluded never show)".into()
            }
            Res::Location => {
                "Where the user is, as a schema.org Place: about a city (coordinates rounded to 0.1°), exact with location.precise".into()
            }
            Res::Selection => {
                "The text the user selected last (the primary selection; text only, at most 64 KiB), read when asked: never sent as a change".into()
            }
            Res::CalendarEvents => {
                "The user's events of the next 14 days that have not ended, soonest first, as schema.org Events: start, end, whether the user is in one now; titles, places and attendees only with calendar.details".into()
            }
            Res::CalendarTasks => {
                "The user's open tasks, soonest due first, as schema.org Actions: due date and status; what each task is only with calendar.details".into()
            }
            Res::CalendarEvent(_) => EVENT_DESCRIPTION.into(),
            Res::History(_) => HISTORY_DESCRIPTION.into(),
            Res::Vocabulary => VOCABULARY_DESCRIPTION.into(),
            Res::Provided(kind) | Res::ProvidedPage(kind, _) => {
                format!("What apps publish about their {kind}")
            }
        };
        let cats = self.categories();
        if cats.is_empty() {
            what
        } else {
            let names: Vec<String> = cats.iter().map(ToString::to_string).collect();
            format!("{what}. Needs consent for: {}.", names.join(" or "))
        }
    }

    /// The entry of `resources/list`.
    pub fn listing(&self) -> Value {
        json!({
            "uri": self.uri(),
            "name": self.uri().trim_start_matches(SCHEME),
            "title": self.title(),
            "description": self.description(),
            "mimeType": self.mime(),
        })
    }
}

const VOCABULARY_DESCRIPTION: &str = "The JSON-LD @context of what apps publish about themselves (context://provided/{kind}): the keys of each kind's entries as schema.org terms. Public: needs no consent";

const PROVIDED_DESCRIPTION: &str = "What apps publish about themselves of one kind (the open document, the selection, the current task, ...): each app's id, its entry (JSON with a schema.org @type, see context://vocabulary) and when it was updated. kind is document, selection, task, location, event, person or an app's own x-NAME. Up to 100 entries by app id; when there are more, `nextCursor` is set: read context://provided/{kind}?cursor=NEXTCURSOR (percent-encoded) for the next page (changes are announced for the first page's URI)";

const EVENT_DESCRIPTION: &str = "One upcoming event, by the id that context://calendar/events lists: a schema.org Event with its times and whether the user is in it now; title, place and attendees only with calendar.details";

const HISTORY_DESCRIPTION: &str = "What happened in a period, oldest first: focus intervals, microphone/camera/screen use, playback, locked/idle/sleep, notifications, the documents and tasks apps published (by name). since and until are RFC 3339 date-times (default: the hour before now), app an app id. Up to 1000 events; `truncated` says when there were more (read a shorter period). Each event only with its own category (titles with windows.titles, documents with provided.document, ...)";

/// The entries of `resources/templates/list`.
pub(crate) fn templates() -> Vec<Value> {
    vec![
        json!({
            "uriTemplate": WINDOW_TEMPLATE,
            "name": "window",
            "title": "Window by id",
            "description": "One window, by the id that context://windows lists. Needs consent for: windows.",
            "mimeType": JSON_MIME,
        }),
        json!({
            "uriTemplate": super::timeline::HISTORY_TEMPLATE,
            "name": "history",
            "title": "Timeline of a period",
            "description": format!("{HISTORY_DESCRIPTION}. Needs consent for: history."),
            "mimeType": JSON_MIME,
        }),
        json!({
            "uriTemplate": PROVIDED_TEMPLATE,
            "name": "provided",
            "title": "What apps publish, by kind",
            "description": format!("{PROVIDED_DESCRIPTION}. Needs consent for: provided.KIND (provided.document, ...)."),
            "mimeType": JSON_MIME,
        }),
        json!({
            "uriTemplate": EVENT_TEMPLATE,
            "name": "calendar-event",
            "title": "Event by id",
            "description": format!("{EVENT_DESCRIPTION}. Needs consent for: calendar."),
            "mimeType": JSON_MIME,
        }),
    ]
}

/// The kinds to offer for the `{kind}` of [`PROVIDED_TEMPLATE`]: the seed
/// kinds (public vocabulary), then the other kinds apps publish now that
/// `subject` may see; a kind it may not see is not named.
pub(crate) async fn provided_kinds(broker: &Broker, subject: &Subject) -> Vec<String> {
    let mut kinds: Vec<String> = vocabulary::seed_kinds().map(str::to_owned).collect();
    let categories: Vec<CategoryView> = broker
        .core
        .reads
        .read(subject, read::Categories, Mode::Look)
        .await
        .unwrap_or_default();
    for c in categories.iter().filter(|c| c.allowed) {
        if let Some(kind) = c.name.strip_prefix("provided.")
            && Res::provided(kind).is_some()
            && !kinds.iter().any(|k| k == kind)
        {
            kinds.push(kind.to_owned());
        }
    }
    kinds
}

/// The text of a read's first content: the JSON of its view, or the
/// vocabulary exactly as installed.
pub(crate) fn json_text(res: &Res, r: &Rendered) -> Result<String, Error> {
    match res {
        Res::Vocabulary => Ok(vocabulary::CONTEXT.to_owned()),
        _ => serde_json::to_string(&r.json)
            .map_err(|e| Error::Internal(format!("cannot write JSON: {e}"))),
    }
}

/// Read `res` for `subject` through the core's read service (asking the
/// user as `mode` allows) and render the view as JSON and Markdown.
pub(crate) async fn read(
    broker: &Broker,
    subject: &Subject,
    res: &Res,
    mode: Mode,
) -> Result<Rendered, Error> {
    let core = &broker.core;
    Ok(fit(match res {
        Res::Snapshot => core
            .reads
            .read(subject, read::Snapshot, mode)
            .await?
            .rendered()?,
        Res::Windows => core
            .reads
            .read(subject, read::Windows, mode)
            .await?
            .rendered()?,
        Res::ActiveWindow => core
            .reads
            .read(subject, read::ActiveWindow, mode)
            .await?
            .rendered()?,
        Res::Window(id) => {
            let v = core
                .reads
                .read(subject, read::Window(id.clone()), mode)
                .await?;
            output::window(&v, Some(id))?
        }
        Res::Media => core
            .reads
            .read(subject, read::Media, mode)
            .await?
            .rendered()?,
        Res::Session => {
            SessionOut::from(core.reads.read(subject, read::Session, mode).await?).rendered()?
        }
        Res::Power => {
            PowerOut::from(core.reads.read(subject, read::Power, mode).await?).rendered()?
        }
        Res::Network => {
            NetworkOut::from(core.reads.read(subject, read::Network, mode).await?).rendered()?
        }
        Res::Notifications => core
            .reads
            .read(subject, read::Notifications, mode)
            .await?
            .rendered()?,
        Res::RecentDocuments => core
            .reads
            .read(subject, read::RecentDocuments, mode)
            .await?
            .rendered()?,
        Res::Location => {
            LocationOut::from(core.reads.read(subject, read::Location, mode).await?).rendered()?
        }
        Res::Selection => {
            SelectionOut::from(core.reads.read(subject, read::Selection, mode).await?).rendered()?
        }
        Res::CalendarEvents => {
            EventsOut::of(core.reads.read(subject, read::Calendar, mode).await?).rendered()?
        }
        Res::CalendarTasks => {
            TasksOut::of(core.reads.read(subject, read::Calendar, mode).await?).rendered()?
        }
        Res::CalendarEvent(id) => core
            .reads
            .read(subject, read::CalendarEvent(id.clone()), mode)
            .await?
            .rendered()?,
        Res::Provided(kind) => {
            provided_page(broker, subject, kind, None, PROVIDED_PAGE, mode).await?
        }
        Res::ProvidedPage(kind, cursor) => {
            provided_page(
                broker,
                subject,
                kind,
                Some(cursor.clone()),
                PROVIDED_PAGE,
                mode,
            )
            .await?
        }
        Res::Vocabulary => return vocabulary_rendered(),
        Res::History(p) => {
            let period = super::timeline::period(
                p.since.as_deref(),
                p.until.as_deref(),
                chrono::Duration::hours(1),
                core.manage.now(),
            )?;
            super::timeline::activity(
                broker,
                subject,
                period,
                p.app.clone(),
                super::timeline::MAX_EVENTS,
                mode,
            )
            .await?
        }
    }))
}

/// One page of what apps publish of `kind` (at most `limit` entries after
/// `cursor`, the first page without one) and the cursor of the next, as
/// `get_provided_context` and `context://provided/{kind}` answer it.
pub(crate) async fn provided_page(
    broker: &Broker,
    subject: &Subject,
    kind: &str,
    cursor: Option<String>,
    limit: usize,
    mode: Mode,
) -> Result<Rendered, Error> {
    let page = broker
        .core
        .reads
        .read(
            subject,
            read::ProvidedPage {
                kind: kind.to_owned(),
                cursor,
                limit,
            },
            mode,
        )
        .await?;
    Paged {
        view: ProvidedOut {
            kind: kind.to_owned(),
            provided: page.provided,
        },
        next_cursor: page.next_cursor,
    }
    .rendered()
}

/// The vocabulary: the JSON-LD `@context` (served as installed, see
/// [`json_text`]) and a Markdown list of the kinds.
fn vocabulary_rendered() -> Result<Rendered, Error> {
    let json: Value = serde_json::from_str(vocabulary::CONTEXT)
        .map_err(|e| Error::Internal(format!("the vocabulary is not JSON: {e}")))?;
    let mut md = String::from(
        "# Vocabulary of app-provided context

Apps publish context about themselves by kind. Each entry is a JSON object whose keys are schema.org terms (this JSON-LD @context maps them) and whose `@type` is the kind's schema.org type:

",
    );
    for kind in vocabulary::seed_kinds() {
        let ty = vocabulary::schema_type(kind).unwrap_or("Thing");
        md.push_str(&format!(
            "- {kind}: {ty}
"
        ));
    }
    md.push_str("- x-NAME: an app's own kind, free-form

Read a kind with context://provided/{kind} or the tool get_provided_context; each kind needs consent for provided.KIND.
");
    Ok(Rendered { json, markdown: md })
}

/// The resources whose content a change touches, for `updated`
/// notifications. The caller checks consent for the change's category.
pub(crate) fn affected(change: &Change, active: Option<&str>) -> Vec<String> {
    let mut v = vec![Res::Snapshot.uri()];
    match change {
        Change::Window { window, .. } => {
            v.push(Res::Windows.uri());
            v.push(Res::Window(window.id.clone()).uri());
            if window.states.activated || active == Some(window.id.as_str()) {
                v.push(Res::ActiveWindow.uri());
            }
        }
        Change::Focus { window } => {
            v.push(Res::Windows.uri());
            v.push(Res::ActiveWindow.uri());
            if let Some(w) = window {
                v.push(Res::Window(w.id.clone()).uri());
            }
        }
        Change::Stream { .. } => v.push(Res::Media.uri()),
        Change::Session(_) => v.push(Res::Session.uri()),
        Change::Power(_) => v.push(Res::Power.uri()),
        Change::Network { .. } => v.push(Res::Network.uri()),
        Change::Notification { .. } => v.push(Res::Notifications.uri()),
        Change::Provided { context, .. } => v.push(Res::Provided(context.kind.to_string()).uri()),
        Change::RecentDocuments { .. } => v.push(Res::RecentDocuments.uri()),
        Change::Location { .. } => v.push(Res::Location.uri()),
        Change::Calendar { .. } => {
            v.push(Res::CalendarEvents.uri());
            v.push(Res::CalendarTasks.uri());
        }
        Change::Source(_) => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_odd_ones_are_refused() {
        for r in FIXED {
            assert_eq!(Res::parse(&r.uri()), Some(r.clone()));
        }
        assert_eq!(
            Res::parse("context://windows/w1"),
            Some(Res::Window("w1".into()))
        );
        for bad in [
            "context://nope",
            "context://windows/",
            "context://windows/a/b",
            "file:///etc/passwd",
            "context://",
            "context://historyx",
            "context://history?since",
            "context://history?when=1",
            "context://history?app=a&app=b",
            "context://history?app=%FF",
            "context://history?app=a%0Ab",
            "context://provided",
            "context://provided/",
            "context://provided/spreadsheet",
            "context://provided/Document",
            "context://provided/document/x",
            "context://provided/x-",
            "context://vocabulary/x",
            "context://calendar/events/",
            "context://calendar/events/a/b",
            "context://calendar/events/h%20x",
            "context://calendar",
        ] {
            assert_eq!(Res::parse(bad), None, "{bad}");
        }
        for good in [
            "context://provided/document",
            "context://provided/x-my-kind2",
            "context://calendar/events/h0123456789abcdef",
        ] {
            let r = Res::parse(good).unwrap_or_else(|| panic!("{good}"));
            assert_eq!(r.uri(), good);
        }
        assert_eq!(Res::Vocabulary.mime(), JSON_LD_MIME);
        assert!(Res::Vocabulary.categories().is_empty());
        assert_eq!(
            Res::Provided("task".into()).categories(),
            vec![Category::Provided("task".into())]
        );
        let e = kind_error("spreadsheet");
        assert!(e.contains("document") && e.contains("x-NAME"), "{e}");
    }

    #[test]
    fn the_vocabulary_is_the_json_ld_context() {
        let r = vocabulary_rendered().expect("vocabulary");
        assert!(r.json["@context"].is_object(), "{}", r.json);
        assert!(
            r.markdown.contains("document: DigitalDocument"),
            "{}",
            r.markdown
        );
        let text = json_text(&Res::Vocabulary, &r).expect("text");
        assert_eq!(text, vocabulary::CONTEXT);
    }

    #[test]
    fn provided_context_is_summed_up_and_its_changes_touch_its_resource() {
        let entry = crate::core::view::ProvidedView {
            app_id: crate::model::AppId::new("exe:/usr/bin/docs").expect("app id"),
            kind: "document".into(),
            data: json!({"@type": "DigitalDocument", "name": "notes.odt"}).into(),
            updated: "2026-11-23T09:00:00.000Z".into(),
        };
        let out = |kind: &str, provided| ProvidedOut {
            kind: kind.into(),
            provided,
        };
        let md = out("document", vec![entry.clone()]).markdown();
        assert!(
            md.starts_with("# Open document (1)")
                && md.contains(" document from exe:/usr/bin/docs⟧notes.odt⟦/")
                && md.contains("⟧ [DigitalDocument] (updated"),
            "{md}"
        );
        let empty = out("x-mine", vec![]).markdown();
        assert!(empty.contains("No app publishes"), "{empty}");
        let snapshot = crate::core::view::SnapshotView {
            provided: vec![entry],
            ..Default::default()
        };
        let md = snapshot.markdown();
        assert!(
            md.contains("Open document: ⟦")
                && md.contains(" document from exe:/usr/bin/docs⟧notes.odt⟦/"),
            "{md}"
        );

        let context = crate::model::ProvidedContext {
            app_id: crate::model::AppId::new("exe:/usr/bin/docs").unwrap_or_else(|e| panic!("{e}")),
            kind: "document".into(),
            data: json!({}).into(),
            updated: chrono::Utc::now(),
        };
        let uris = affected(
            &Change::Provided {
                kind: crate::core::state::ChangeKind::Closed,
                context,
            },
            None,
        );
        assert_eq!(uris, ["context://snapshot", "context://provided/document"]);
    }

    #[test]
    fn history_uris_follow_the_template() {
        assert_eq!(
            Res::parse("context://history"),
            Some(Res::History(HistoryParams::default()))
        );
        // As an RFC 6570 client expands {?since,until,app}: ':' and '+'
        // encoded, parts in any order, missing ones left out.
        let r = Res::parse(
            "context://history?until=2026-11-22T10%3A00%3A00%2B01%3A00&app=org.gnome.TextEditor",
        );
        let want = HistoryParams {
            since: None,
            until: Some("2026-11-22T10:00:00+01:00".into()),
            app: Some("org.gnome.TextEditor".into()),
        };
        assert_eq!(r, Some(Res::History(want.clone())));
        let uri = Res::History(want.clone()).uri();
        assert_eq!(Res::parse(&uri), Some(Res::History(want)), "{uri}");
        // Left unencoded, the date-time still reads the same.
        assert_eq!(
            Res::parse("context://history?since=2026-11-22T09:00:00Z"),
            Some(Res::History(HistoryParams {
                since: Some("2026-11-22T09:00:00Z".into()),
                ..Default::default()
            }))
        );
    }
}

//! The `context://` resources: what each URI means, which category it
//! needs, and its rendering (JSON, the same as D-Bus shows through
//! `core::view`, plus a short `text/markdown` summary for people and
//! models).

use serde_json::{Map, Value, json};

use super::Broker;
use super::consent::{Mode, Subject};
use super::error::Error;
pub(crate) use super::render::{Rendered, fit, to_json};
use super::render::{clean, data, ident, json_line};
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
    /// A period of the timeline (`context://history{?since,until,app}`).
    History(HistoryParams),
    /// The shared vocabulary of what apps publish: the JSON-LD `@context`
    /// (public, needs no consent).
    Vocabulary,
    /// What apps publish of one kind (`context://provided/{kind}`); the
    /// kind is one that can be published (checked by [`Res::provided`]).
    Provided(String),
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
pub const FIXED: [Res; 12] = [
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
    Res::Vocabulary,
];

/// The template of per-window resources.
pub(crate) const WINDOW_TEMPLATE: &str = "context://windows/{id}";
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
            "vocabulary" => Res::Vocabulary,
            p if p.starts_with("history") => Res::History(HistoryParams::parse(p)?),
            p if p.starts_with("provided/") => Res::provided(p.strip_prefix("provided/")?)?,
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
            Res::History(p) => p.uri(),
            Res::Vocabulary => "context://vocabulary".into(),
            Res::Provided(kind) => format!("{PROVIDED_PREFIX}{kind}"),
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
            Res::Provided(kind) => vec![Category::Provided(kind.clone())],
            Res::Windows | Res::ActiveWindow | Res::Window(_) => vec![Category::Windows],
            Res::Media => vec![Category::MediaPlayback, Category::MediaCapture],
            Res::Session => vec![Category::Session],
            Res::Power => vec![Category::Power],
            Res::Network => vec![Category::Network],
            Res::Notifications => vec![Category::Notifications],
            Res::RecentDocuments => vec![Category::DocumentsRecent],
            Res::Location => vec![Category::Location],
            Res::Selection => vec![Category::Selection],
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
            Res::History(_) => "Timeline",
            Res::Vocabulary => "Vocabulary of app-provided context",
            Res::Provided(_) => "What apps publish",
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
            Res::Session => "Whether the session is active, idle, locked or going to sleep".into(),
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
            Res::History(_) => HISTORY_DESCRIPTION.into(),
            Res::Vocabulary => VOCABULARY_DESCRIPTION.into(),
            Res::Provided(kind) => format!("What apps publish about their {kind}"),
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

const PROVIDED_DESCRIPTION: &str = "What apps publish about themselves of one kind (the open document, the selection, the current task, ...): each app's id, its entry (JSON with a schema.org @type, see context://vocabulary) and when it was updated. kind is document, selection, task, location, event, person or an app's own x-NAME";

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
    ]
}

/// The kinds to offer for the `{kind}` of [`PROVIDED_TEMPLATE`]: the seed
/// kinds (public vocabulary), then the other kinds apps publish now that
/// `subject` may see; a kind it may not see is not named.
pub(crate) async fn provided_kinds(broker: &Broker, subject: &Subject) -> Vec<String> {
    let mut kinds: Vec<String> = vocabulary::seed_kinds().map(str::to_owned).collect();
    let categories: Vec<CategoryView> = broker
        .core
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
        Res::Snapshot => {
            let json = to_json(&core.read(subject, read::Snapshot, mode).await?)?;
            let markdown = snapshot_markdown(&json);
            Rendered { json, markdown }
        }
        Res::Windows => windows_rendered(
            to_json(&core.read(subject, read::Windows, mode).await?)?,
            None,
        ),
        Res::ActiveWindow => {
            window_rendered(None, &core.read(subject, read::ActiveWindow, mode).await?)?
        }
        Res::Window(id) => {
            let v = core.read(subject, read::Window(id.clone()), mode).await?;
            window_rendered(Some(id), &v)?
        }
        Res::Media => media_rendered(to_json(&core.read(subject, read::Media, mode).await?)?),
        Res::Session => state_rendered("session", core.read(subject, read::Session, mode).await?)?,
        Res::Power => state_rendered("power", core.read(subject, read::Power, mode).await?)?,
        Res::Network => state_rendered("network", core.read(subject, read::Network, mode).await?)?,
        Res::Notifications => notifications_rendered(
            to_json(&core.read(subject, read::Notifications, mode).await?)?,
            None,
        ),
        Res::RecentDocuments => recent_documents_rendered(to_json(
            &core.read(subject, read::RecentDocuments, mode).await?,
        )?),
        Res::Location => {
            state_rendered("location", core.read(subject, read::Location, mode).await?)?
        }
        Res::Selection => selection_rendered(core.read(subject, read::Selection, mode).await?)?,
        Res::Provided(kind) => {
            let v = core
                .read(subject, read::Provided(kind.clone()), mode)
                .await?;
            provided_rendered(kind, json!({ "provided": to_json(&v)? }))
        }
        Res::Vocabulary => return vocabulary_rendered(),
        Res::History(p) => {
            let period = super::timeline::period(
                p.since.as_deref(),
                p.until.as_deref(),
                chrono::Duration::hours(1),
                core.now(),
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

/// One window (`Some(id)`) or the focused one.
fn window_rendered(
    id: Option<&str>,
    v: &crate::core::view::WindowOneView,
) -> Result<Rendered, Error> {
    let json = to_json(v)?;
    let line = json.get("window").filter(|w| !w.is_null()).map(window_line);
    let markdown = match (id, line) {
        (Some(id), Some(l)) => format!("# Window {id}\n\n{l}\n"),
        (None, Some(l)) => format!("# Focused window\n\n{l}\n"),
        (_, None) => "# Focused window\n\nNo window has focus.\n".into(),
    };
    Ok(Rendered { json, markdown })
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

/// The selection: `available` and `selection`, and the text as a quote.
fn selection_rendered(
    v: crate::core::view::StateView<crate::core::view::SelectionView>,
) -> Result<Rendered, Error> {
    let markdown = match &v.value {
        Some(s) => {
            let cut = if s.truncated { " (cut at 64 KiB)" } else { "" };
            format!(
                "# Selected text\n\n{}\n\n({} characters, {}{cut})\n",
                data("selected text", None, &s.text),
                s.length,
                ident("MIME type", &s.mime_type)
            )
        }
        None if v.available => "# Selected text\n\nNo text is selected.\n".into(),
        None => "# Selected text\n\nUnknown: the compositor does not offer the selection (see the sources).\n".into(),
    };
    Ok(Rendered {
        json: json!({"available": v.available, "selection": to_json(&v.value)?}),
        markdown,
    })
}

/// The JSON (a `RecentDocumentsView`) and Markdown of the recent files.
fn recent_documents_rendered(json: Value) -> Rendered {
    let empty = Vec::new();
    let docs = json
        .get("documents")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut md = format!("# Recent documents ({})\n\n", docs.len());
    if json.get("available") == Some(&Value::Bool(false)) {
        md.push_str("Unknown: no list of recently used files was read.\n");
    } else if docs.is_empty() {
        md.push_str("No recent documents.\n");
    }
    for d in docs {
        let place = d
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_else(|| str_of(d, "uri"));
        // File names are anyone's (a download names its file); the app
        // that opened it is the one the list names.
        let app = d.get("app").and_then(Value::as_str);
        md.push_str(&format!("- {}", data("recent file", app, place)));
        if let Some(m) = d.get("mime_type").and_then(Value::as_str) {
            md.push_str(&format!(" ({})", ident("MIME type", m)));
        }
        let when = d
            .get("modified")
            .or_else(|| d.get("visited"))
            .and_then(Value::as_str);
        if let Some(t) = when {
            md.push_str(&format!(", {t}"));
        }
        md.push('\n');
    }
    Rendered { json, markdown: md }
}

/// The JSON (`{"provided": [ProvidedView]}`) and Markdown of what apps
/// publish of `kind`.
pub(crate) fn provided_rendered(kind: &str, json: Value) -> Rendered {
    let empty = Vec::new();
    let entries = json
        .get("provided")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut md = format!(
        "# {} ({})

",
        provided_label(kind),
        entries.len()
    );
    if entries.is_empty() {
        md.push_str(
            "No app publishes this now.
",
        );
    }
    for e in entries {
        md.push_str(&format!(
            "- {} (updated {})
",
            provided_line(e),
            str_of(e, "updated")
        ));
    }
    Rendered { json, markdown: md }
}

/// How a kind is said in summaries.
fn provided_label(kind: &str) -> String {
    match kind {
        "document" => "Open document".into(),
        "selection" => "Selected text".into(),
        "task" => "Current task".into(),
        "location" => "Location".into(),
        "event" => "Event".into(),
        "person" => "Person".into(),
        other => format!("Provided context: {other}"),
    }
}

/// One entry an app published: its name (or its data) fenced as the
/// app's, then `[schema type]`.
pub(crate) fn provided_line(e: &Value) -> String {
    const MAX: usize = 200;
    let cut = |s: &str| {
        if s.chars().count() > MAX {
            format!("{}…", s.chars().take(MAX).collect::<String>())
        } else {
            s.to_owned()
        }
    };
    let d = e.get("data").unwrap_or(&Value::Null);
    let (app, kind) = (str_of(e, "app_id"), str_of(e, "kind"));
    let mut line = match vocabulary::title(d).or_else(|| d.get("text").and_then(Value::as_str)) {
        Some(t) => data(kind, Some(app), &cut(t)),
        None => data(&format!("{kind} as JSON"), Some(app), &cut(&json_line(d))),
    };
    if let Some(t) = d.get("@type").and_then(Value::as_str) {
        line.push_str(&format!(" [{}]", ident("type", t)));
    }
    line
}

/// Session, power or network: `available` and the value under its name.
fn state_rendered<T: serde::Serialize>(
    key: &str,
    v: crate::core::view::StateView<T>,
) -> Result<Rendered, Error> {
    let value = to_json(&v.value)?;
    let markdown = if value.is_null() {
        format!(
            "# {}\n\nUnknown: the source that reports it is not running.\n",
            capitalize(key)
        )
    } else {
        format!(
            "# {}\n\n- {}\n",
            capitalize(key),
            kv_pairs(&value).join("\n- ")
        )
    };
    let mut m = Map::new();
    m.insert("available".into(), json!(v.available));
    m.insert(key.into(), value);
    Ok(Rendered {
        json: Value::Object(m),
        markdown,
    })
}

/// Media activity: JSON as the core's `MediaView`, and a summary.
fn media_rendered(json: Value) -> Rendered {
    let mut md = String::from("# Media activity\n\n");
    if let Some(v) = json.get("media.playback").and_then(Value::as_array) {
        md.push_str(&format!("Playing: {}\n", stream_summary(v)));
    }
    if let Some(v) = json.get("media.capture").and_then(Value::as_array) {
        md.push_str(&format!("Capturing now: {}\n", stream_summary(v)));
    }
    if let Some(sessions) = json
        .get("capture_sessions")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
    {
        md.push_str("\nUsed the microphone, camera or screen in the last 24 h:\n");
        for c in sessions {
            md.push_str(&format!("- {}\n", capture_line(c)));
        }
    }
    Rendered { json, markdown: md }
}

fn withheld_has(json: &Value, c: Category) -> bool {
    json.get("withheld")
        .and_then(Value::as_array)
        .is_some_and(|w| w.iter().any(|x| x.as_str() == Some(c.to_string().as_str())))
}

/// The JSON (a `WindowsView`) and markdown of a window list, or a page of
/// it when `next` is given (`Some(None)`: the last page).
pub(crate) fn windows_rendered(mut json: Value, next: Option<Option<String>>) -> Rendered {
    let empty = Vec::new();
    let ws = json
        .get("windows")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut md = format!("# Open windows ({})\n\n", ws.len());
    if ws.is_empty() {
        md.push_str("No windows.\n");
    }
    for w in ws {
        md.push_str(&format!("- {}\n", window_line(w)));
    }
    if withheld_has(&json, Category::WindowsTitles) {
        md.push_str("\n(Titles withheld: the user has not granted windows.titles.)\n");
    }
    if let (Some(Some(c)), Value::Object(m)) = (&next, &mut json) {
        m.insert("nextCursor".into(), json!(c));
    }
    Rendered { json, markdown: md }
}

/// The JSON (a `NotificationsView`) and markdown of a notification list,
/// or a page of it.
pub(crate) fn notifications_rendered(mut json: Value, next: Option<Option<String>>) -> Rendered {
    let empty = Vec::new();
    let ns = json
        .get("notifications")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut md = format!("# Notifications ({})\n\n", ns.len());
    if ns.is_empty() {
        md.push_str("No notifications.\n");
    }
    for n in ns {
        // The app name is what the sender says; summary and body are its.
        let mut text = str_of(n, "summary").to_owned();
        if let Some(b) = n
            .get("body")
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
        {
            text.push_str(" — ");
            text.push_str(b);
        }
        md.push_str(&format!(
            "- {} ({})\n",
            data("notification", Some(str_of(n, "app_name")), &text),
            str_of(n, "time")
        ));
    }
    if let (Some(Some(c)), Value::Object(m)) = (&next, &mut json) {
        m.insert("nextCursor".into(), json!(c));
    }
    Rendered { json, markdown: md }
}

pub(crate) fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// One line about a capture session: `app (microphone) from … to …`; a
/// name that is only what the app claims is fenced as that.
pub(crate) fn capture_line(c: &Value) -> String {
    let end = match c.get("active").and_then(Value::as_bool) {
        Some(true) => None,
        _ => Some(str_of(c, "end")),
    };
    capture_span(&stream_who(c), str_of(c, "kind"), str_of(c, "start"), end)
}

/// `who (device) from START to END` (or `until now` while it goes on): a
/// capture session or a capture interval of the timeline, said the same way.
pub(crate) fn capture_span(who: &str, device: &str, start: &str, end: Option<&str>) -> String {
    match end {
        Some(end) => format!("{who} ({device}) from {start} to {end}"),
        None => format!("{who} ({device}) from {start} until now"),
    }
}

/// One line about a window: `Name (app.id) — title [focused] (id …)`, the
/// title fenced as the app's.
pub(crate) fn window_line(w: &Value) -> String {
    let app = str_of(w, "app_id");
    let mut s = match w.get("app_name").and_then(Value::as_str) {
        Some(name) if name != app => format!("{} ({})", clean(name), ident("app id", app)),
        _ => ident("app id", app),
    };
    if let Some(t) = w.get("title").and_then(Value::as_str) {
        s.push_str(&format!(" — {}", data("window title", Some(app), t)));
    }
    if w.get("focused").and_then(Value::as_bool) == Some(true) {
        s.push_str(" [focused]");
    }
    s.push_str(&format!(" (id {})", ident("window id", str_of(w, "id"))));
    s
}

fn stream_summary(v: &[Value]) -> String {
    if v.is_empty() {
        return "nothing".into();
    }
    v.iter()
        .map(|s| format!("{} ({})", stream_who(s), str_of(s, "kind")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Who a stream or capture session is: its app id (from the kernel), else
/// the name the app claims, fenced as that.
fn stream_who(s: &Value) -> String {
    match (
        s.get("app_id").and_then(Value::as_str),
        s.get("claimed_name").and_then(Value::as_str),
    ) {
        (Some(a), _) => ident("app id", a),
        (None, Some(n)) => data("name the app claims", None, n),
        (None, None) => "an unknown app".into(),
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// `key: value` of a state (session, power, network, location). Names
/// that others chose (the network's, the place's description) are fenced;
/// other strings are shown when they are plain words of the source
/// (`charging`, `wifi`), fenced otherwise.
fn kv_pairs(v: &Value) -> Vec<String> {
    fn has_text(v: &Value) -> bool {
        match v {
            Value::String(_) => true,
            Value::Array(a) => a.iter().any(has_text),
            Value::Object(m) => m.values().any(has_text),
            _ => false,
        }
    }
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => match k.as_str() {
                        "ssid" => data("network name", None, s),
                        "name" | "description" => data("place name", None, s),
                        _ => ident(k, s),
                    },
                    v if has_text(v) => data(k, None, &json_line(v)),
                    v => v.to_string(),
                };
                format!("{k}: {v}")
            })
            .collect(),
        other if has_text(other) => vec![data("value", None, &json_line(other))],
        other => vec![other.to_string()],
    }
}

/// A short summary of a rendered snapshot.
pub(crate) fn snapshot_markdown(snap: &Value) -> String {
    let mut md = String::from("# What the user is doing\n\n");
    if let Some(ws) = snap.get("windows").and_then(Value::as_array) {
        let active = snap.get("active_window").and_then(Value::as_str);
        match ws.iter().find(|w| Some(str_of(w, "id")) == active) {
            Some(w) => md.push_str(&format!("Focused: {}\n", window_line(w))),
            None => md.push_str("Focused: no window\n"),
        }
        md.push_str(&format!("Open windows: {}\n", ws.len()));
    }
    for (key, label) in [
        ("media.playback", "Playing"),
        ("media.capture", "Capturing"),
    ] {
        if let Some(a) = snap.get(key).and_then(Value::as_array) {
            md.push_str(&format!("{label}: {}\n", stream_summary(a)));
        }
    }
    for key in ["session", "power", "network", "location"] {
        if let Some(v) = snap.get(key) {
            md.push_str(&format!(
                "{}: {}\n",
                capitalize(key),
                kv_pairs(v).join("; ")
            ));
        }
    }
    if let Some(n) = snap.get("notifications").and_then(Value::as_array) {
        md.push_str(&format!("Recent notifications: {}\n", n.len()));
    }
    if let Some(d) = snap.get("documents.recent").and_then(Value::as_array) {
        let names: Vec<String> = d
            .iter()
            .take(5)
            .map(|d| data("file name", None, str_of(d, "name")))
            .collect();
        md.push_str(&format!(
            "Recent documents: {} ({})\n",
            d.len(),
            names.join(", ")
        ));
    }
    // What apps publish (only the kinds the host may see are in the
    // snapshot), the kinds that say what the user works on first.
    if let Some(p) = snap.get("provided").and_then(Value::as_array)
        && !p.is_empty()
    {
        md.push_str("\nWhat apps say about themselves:\n");
        let rank = |e: &Value| match str_of(e, "kind") {
            "document" => 0,
            "task" => 1,
            "selection" => 2,
            "event" => 3,
            _ => 4,
        };
        let mut entries: Vec<&Value> = p.iter().collect();
        entries.sort_by_key(|e| rank(e));
        for e in entries {
            md.push_str(&format!(
                "- {}: {}\n",
                provided_label(str_of(e, "kind")),
                provided_line(e)
            ));
        }
    }
    if let Some(w) = snap.get("withheld").and_then(Value::as_array)
        && !w.is_empty()
    {
        let names: Vec<&str> = w.iter().filter_map(Value::as_str).collect();
        md.push_str(&format!(
            "\nWithheld (not granted to this host): {}\n",
            names.join(", ")
        ));
    }
    md
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
        Change::Network(_) => v.push(Res::Network.uri()),
        Change::Notification { .. } => v.push(Res::Notifications.uri()),
        Change::Provided { context, .. } => v.push(Res::Provided(context.kind.clone()).uri()),
        Change::RecentDocuments { .. } => v.push(Res::RecentDocuments.uri()),
        Change::Location { .. } => v.push(Res::Location.uri()),
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
        ] {
            assert_eq!(Res::parse(bad), None, "{bad}");
        }
        for good in [
            "context://provided/document",
            "context://provided/x-my-kind2",
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
        let entry = json!({
            "app_id": "exe:/usr/bin/docs", "kind": "document", "updated": "2026-11-23T09:00:00.000Z",
            "data": {"@type": "DigitalDocument", "name": "notes.odt"}
        });
        let r = provided_rendered("document", json!({"provided": [entry.clone()]}));
        assert!(
            r.markdown.starts_with("# Open document (1)")
                && r.markdown
                    .contains(" document from exe:/usr/bin/docs⟧notes.odt⟦/")
                && r.markdown.contains("⟧ [DigitalDocument] (updated"),
            "{}",
            r.markdown
        );
        let empty = provided_rendered("x-mine", json!({"provided": []}));
        assert!(
            empty.markdown.contains("No app publishes"),
            "{}",
            empty.markdown
        );
        let md = snapshot_markdown(&json!({"provided": [entry], "withheld": []}));
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

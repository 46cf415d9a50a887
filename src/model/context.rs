use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::AppId;

/// The states a compositor reports for a toplevel window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WindowStates {
    pub activated: bool,
    pub maximized: bool,
    pub minimized: bool,
    pub fullscreen: bool,
}

impl WindowStates {
    /// The set states as names, e.g. `["activated", "maximized"]`.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.activated {
            v.push("activated");
        }
        if self.maximized {
            v.push("maximized");
        }
        if self.minimized {
            v.push("minimized");
        }
        if self.fullscreen {
            v.push("fullscreen");
        }
        v
    }
}

/// Who said which app a window belongs to. Either way a claim, not an
/// identity: the compositor passes on what the client told it; a shell
/// (GNOME Shell's extension, the KWin script) says what it decided, and
/// the broker takes its word only because it comes from the connection
/// that owns the shell's well-known name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WindowAttribution {
    /// A Wayland compositor's toplevel protocol (the `wayland` source).
    #[default]
    Compositor,
    /// GNOME Shell (the `gnome-shell` source).
    GnomeShell,
    /// KWin (the `kwin` source).
    Kwin,
}

impl WindowAttribution {
    /// The name both wires carry (`app_id_source`).
    pub fn as_str(self) -> &'static str {
        match self {
            WindowAttribution::Compositor => "compositor",
            WindowAttribution::GnomeShell => "gnome-shell",
            WindowAttribution::Kwin => "kwin",
        }
    }

    fn is_compositor(&self) -> bool {
        *self == WindowAttribution::Compositor
    }
}

/// The process a window belongs to, as the kernel names it: the
/// compositor or the shell told the window's PID (sway's IPC, GNOME
/// Shell's `Meta.Window.get_pid()`, KWin's `Window.pid`, each from the
/// Wayland client's socket credentials) and the broker resolved that PID
/// the way it resolves a D-Bus caller (`identity::resolve_pid`: Flatpak,
/// Snap, systemd unit, executable). So it is the same id consent names the
/// app by, and a window cannot choose it: the app id a client tells the
/// compositor stays in [`Window::app_id`], a claim.
///
/// As racy as every PID lookup: a PID read after its process exited may
/// name a newer process (the window is then usually gone too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowProcess {
    pub app_id: AppId,
    pub source: super::IdentitySource,
}

/// The security context a sandbox engine put the window's client in
/// (`wp_security_context_v1`, which sway 1.12 tells in its IPC as
/// `sandbox_engine`, `sandbox_app_id`, `sandbox_instance_id`). The engine
/// (`org.flatpak`) set these when it made the sandbox's Wayland socket,
/// so they mark the window as sandboxed; the names are the engine's word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSandbox {
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
}

/// A toplevel window as the compositor (or the shell) reports it.
///
/// `app_id` is what the client told the compositor (Wayland gives no PID),
/// or what the shell attributed (`attributed_by`), so it is a claim, not an
/// identity; `app_name` and `icon` come from the desktop entry that matches
/// it, when one does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Stable for the window's lifetime, unique within the broker's run.
    pub id: String,
    pub app_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub states: WindowStates,
    #[serde(default)]
    pub outputs: Vec<String>,
    /// Id of the parent window (dialogs), when the compositor says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default = "Utc::now")]
    pub first_seen: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_focused: Option<DateTime<Utc>>,
    /// Who said what `app_id` is.
    #[serde(default, skip_serializing_if = "WindowAttribution::is_compositor")]
    pub attributed_by: WindowAttribution,
    /// Who the window's process is, from the kernel, where the compositor
    /// or the shell told its PID; `None` where nothing did (wlr
    /// foreign-toplevel alone, labwc) or the PID named no process: then
    /// all that is known of the window's app is the claim in `app_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<WindowProcess>,
    /// The sandbox the compositor says the window's client is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<WindowSandbox>,
    /// Why the title was held back (`core::privacy`): then `title` is
    /// empty. Set by the core as the window enters its state, never
    /// trusted to be absent from a source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_hidden: Option<Hidden>,
}

/// Why the broker held something back that nobody means to share
/// (`core::privacy`). Readers see this reason, never the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Hidden {
    /// A private or incognito browser window.
    PrivateWindow,
    /// An app on the built-in list of password managers and keyrings.
    SensitiveApp,
    /// One of the user's own rules (`[privacy]`).
    UserRule,
    /// A one-time code, verification code, PIN or passcode.
    Code,
    /// A card number (Luhn-valid).
    CardNumber,
}

impl Hidden {
    /// The name both wires carry.
    pub fn as_str(self) -> &'static str {
        match self {
            Hidden::PrivateWindow => "private-window",
            Hidden::SensitiveApp => "sensitive-app",
            Hidden::UserRule => "user-rule",
            Hidden::Code => "code",
            Hidden::CardNumber => "card-number",
        }
    }
}

/// What a media stream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MediaKind {
    /// Audio or video going out (`Stream/Output/*`).
    Playback,
    /// Audio coming in (`Stream/Input/Audio`).
    Microphone,
    /// Video coming in from a camera (`Stream/Input/Video`).
    Camera,
    /// A screen cast.
    Screen,
}

impl MediaKind {
    pub fn is_capture(self) -> bool {
        !matches!(self, MediaKind::Playback)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StreamState {
    Running,
    Idle,
    Suspended,
    Other,
}

/// Who said which app a stream is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamAttribution {
    /// The broker, from the process behind the stream (its PID, or the
    /// D-Bus connection of an MPRIS player).
    #[default]
    Kernel,
    /// xdg-desktop-portal, which opened the PipeWire connection for a
    /// sandboxed app and named the app on it: a claim of the portal's,
    /// accepted only from a connection whose process runs the portal's
    /// executable (`sources::pipewire::tracker`).
    Portal,
}

impl StreamAttribution {
    /// The name both wires carry (`app_id_source`).
    pub fn as_str(self) -> &'static str {
        match self {
            StreamAttribution::Kernel => "kernel",
            StreamAttribution::Portal => "portal",
        }
    }

    fn is_kernel(&self) -> bool {
        *self == StreamAttribution::Kernel
    }
}

/// A media stream (a PipeWire node of a client, or an MPRIS player).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaStream {
    pub id: String,
    pub kind: MediaKind,
    /// Identity derived from the kernel (the client's PID), when known, or
    /// named by the portal (`attributed_by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<AppId>,
    /// Who said what `app_id` is.
    #[serde(default, skip_serializing_if = "StreamAttribution::is_kernel")]
    pub attributed_by: StreamAttribution,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `application.name`: what the app claims to be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_name: Option<String>,
    /// `application.process.binary`: what the app claims to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_binary: Option<String>,
    /// `media.name`: may hold a song or a call's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_role: Option<String>,
    pub state: StreamState,
    /// When the stream last started running (or appeared).
    #[serde(default = "Utc::now")]
    pub since: DateTime<Utc>,
    /// What an MPRIS player says it plays; `None` for PipeWire streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub player: Option<Player>,
}

/// An MPRIS player's `PlaybackStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PlaybackStatus {
    Playing,
    Paused,
    Stopped,
}

/// What an MPRIS player reports about the current track. Every field is
/// the player's claim (its `Identity` goes to the stream's `claimed_name`);
/// the stream's `app_id` is what the broker derived from its process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Player {
    /// `None` when the player does not say (or says something invalid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<PlaybackStatus>,
    /// `xesam:title`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `xesam:artist`, joined with ", ".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artist: Option<String>,
    /// `xesam:url`, without query and fragment (see `sources::mpris`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The user's graphical session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SessionState {
    pub active: bool,
    pub locked: bool,
    pub idle: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_since: Option<DateTime<Utc>>,
    /// True between `PrepareForSleep(true)` and `PrepareForSleep(false)`.
    pub preparing_for_sleep: bool,
    /// Do Not Disturb: whether the desktop holds notification banners
    /// back (`sources::dnd`). Absent while no desktop source says, which
    /// is not the same as off. The core sets it from
    /// `SourceEvent::DoNotDisturb`; a session source never does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub do_not_disturb: Option<bool>,
    /// Who turned Do Not Disturb on (only while it is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub do_not_disturb_by: Option<DndSource>,
}

/// Who says Do Not Disturb is on: each desktop keeps it in its own place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DndSource {
    /// GNOME's setting (`org.gnome.desktop.notifications show-banners`
    /// false), read through GSettings.
    Gnome,
    /// The notification server's `Inhibited` property (Plasma's
    /// extension of the notification spec).
    NotificationServer,
    /// dunst's `paused` (`org.dunstproject.cmd0`).
    Dunst,
}

impl DndSource {
    /// The name both wires carry.
    pub fn as_str(self) -> &'static str {
        match self {
            DndSource::Gnome => "gnome",
            DndSource::NotificationServer => "notification-server",
            DndSource::Dunst => "dunst",
        }
    }
}

/// What the desktop says of Do Not Disturb (`SourceEvent::DoNotDisturb`):
/// on or off, and while on, who said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoNotDisturb {
    pub on: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<DndSource>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Power {
    pub on_battery: bool,
    /// Whether the lid is closed (UPower's `LidIsClosed`), on a machine
    /// that has one (`LidIsPresent`); absent on one without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lid_closed: Option<bool>,
    /// 0..=100, when a battery is present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<f64>,
    /// `charging`, `discharging`, `fully-charged`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_empty_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_full_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning_level: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Network {
    /// `none`, `portal`, `limited`, `full`, `unknown`.
    pub connectivity: String,
    pub metered: bool,
    /// `wifi`, `ethernet`, `vpn`, ... of the primary connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_type: Option<String>,
    /// The network's name; reveals location.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssid: Option<String>,
}

/// Ordered from least to most urgent (`list_notifications`' `min_urgency`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Urgency {
    Low,
    #[default]
    Normal,
    Critical,
}

/// Why the notification server closed a notification
/// (`NotificationClosed`'s reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CloseReason {
    /// 1: it expired (went away by itself, maybe unseen).
    Expired,
    /// 2: the user dismissed it (or acted on it): read.
    Dismissed,
    /// 3: closed by a `CloseNotification` call (the app withdrew it).
    Closed,
    /// 4, or a reason the spec does not name.
    Undefined,
}

impl CloseReason {
    /// The spec's number, as a reason.
    pub fn from_code(code: u32) -> Self {
        match code {
            1 => CloseReason::Expired,
            2 => CloseReason::Dismissed,
            3 => CloseReason::Closed,
            _ => CloseReason::Undefined,
        }
    }

    /// The name both wires carry.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Expired => "expired",
            CloseReason::Dismissed => "dismissed",
            CloseReason::Closed => "closed",
            CloseReason::Undefined => "undefined",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A desktop notification some app sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub id: String,
    /// The `app_name` argument of `Notify`: a claim.
    pub app_name: String,
    pub summary: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub urgency: Urgency,
    #[serde(default = "Utc::now")]
    pub time: DateTime<Utc>,
    /// Why (part of) the summary was held back (`core::privacy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_hidden: Option<Hidden>,
    /// Why (part of) the body was held back (`core::privacy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_hidden: Option<Hidden>,
    /// An icon name, or a file path or URI: `app_icon`, else the
    /// `image-path` or `desktop-entry` hint. Never image data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// The labels of its actions (the buttons), plain text; not their
    /// keys, not the `default` action (a click on the notification).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
    /// The `transient` hint: the server should not keep it once shown.
    #[serde(default, skip_serializing_if = "is_false")]
    pub transient: bool,
    /// The `resident` hint: it stays when an action is invoked.
    #[serde(default, skip_serializing_if = "is_false")]
    pub resident: bool,
    /// Why the server closed it: set on the closing change only (a
    /// closed notification leaves the list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<CloseReason>,
}

/// Context an app publishes about itself (the open document, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvidedContext {
    pub app_id: AppId,
    /// Shared by every entry of the kind (`core::provide` holds each kind
    /// once): a copy per entry, in the entry and in the state's key, was
    /// two allocations of each of a thousand apps' entries.
    pub kind: std::sync::Arc<str>,
    /// Shared, not copied: the state, the change broadcast and every
    /// reader's view point at the one entry (an entry can be 64 KiB).
    pub data: ProvidedData,
    #[serde(default = "Utc::now")]
    pub updated: DateTime<Utc>,
}

/// What an app published, held as the checked JSON text of its object
/// (compact, keys in order), once: the state, the change broadcast, the
/// publishers' bookkeeping and every reader's view share the one text.
/// A `serde_json::Value` tree per entry weighed several times its text
/// (a map node, a `String` and a `Value` per key and value), with 1000
/// apps × 6 kinds most of what they cost; readers that need a field
/// parse it out on demand ([`ProvidedData::title`]), and answers are
/// written from the text.
#[derive(Clone, PartialEq, Eq)]
pub struct ProvidedData(std::sync::Arc<str>);

impl ProvidedData {
    /// Hold `v` as text (an object: `core::vocabulary::check_entry`
    /// checks every entry).
    pub fn new(v: &serde_json::Value) -> Self {
        // Writing a JSON value to a string cannot fail.
        let text = serde_json::to_string(v).unwrap_or_else(|_| "{}".to_owned());
        ProvidedData(text.into())
    }

    /// The JSON text of the object.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shared text itself (D-Bus strings can point at it).
    pub fn shared(&self) -> std::sync::Arc<str> {
        self.0.clone()
    }

    /// The bytes of text held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The object as a tree, for readers that walk it (a summary's line).
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// A top-level string field, parsed out of the text without building
    /// the rest.
    pub fn string(&self, key: &str) -> Option<String> {
        use serde::de::{self, IgnoredAny, MapAccess, Visitor};
        struct Field<'k>(&'k str);
        impl<'de> Visitor<'de> for Field<'_> {
            type Value = Option<String>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut found = None;
                while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if k == self.0 {
                        found = match map.next_value::<serde_json::Value>()? {
                            serde_json::Value::String(s) => Some(s),
                            _ => None,
                        };
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(found)
            }
        }
        let mut de = serde_json::Deserializer::from_str(&self.0);
        de::Deserializer::deserialize_map(&mut de, Field(key))
            .ok()
            .flatten()
    }
}

impl std::fmt::Debug for ProvidedData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for ProvidedData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Written as the JSON object it is, through a tree parsed for the
/// occasion (a change, an MCP answer, `GetProvided`'s `data` on D-Bus,
/// which also shares the text as its `json`).
impl Serialize for ProvidedData {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v: serde_json::Value =
            serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        v.serialize(s)
    }
}

impl From<serde_json::Value> for ProvidedData {
    fn from(v: serde_json::Value) -> Self {
        ProvidedData::new(&v)
    }
}

impl<'de> Deserialize<'de> for ProvidedData {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let obj = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        Ok(ProvidedData::new(&serde_json::Value::Object(obj)))
    }
}

/// The text the user selected last (the primary selection), as the
/// compositor's data-control protocol gives it: text only, at most
/// [`Selection::MAX_BYTES`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub text: String,
    /// The type it was read as (`text/plain;charset=utf-8`, …).
    pub mime_type: String,
    /// Longer than [`Selection::MAX_BYTES`], and cut there.
    #[serde(default)]
    pub truncated: bool,
    /// When it was selected (read).
    #[serde(default = "Utc::now")]
    pub since: DateTime<Utc>,
}

impl Selection {
    /// The most of a selection the broker reads (64 KiB).
    pub const MAX_BYTES: usize = 64 * 1024;
}

/// Where the machine is, as the location service (GeoClue) says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    /// Degrees, -90..=90.
    pub latitude: f64,
    /// Degrees, -180..=180.
    pub longitude: f64,
    /// Radius of the uncertainty, in metres.
    pub accuracy: f64,
    /// Metres above sea level, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub altitude: Option<f64>,
    /// The service's description of the location, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When the location was determined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<DateTime<Utc>>,
}

impl Location {
    /// How far a city-level place's coordinates are rounded, in degrees
    /// (0.1° of latitude is about 11 km).
    pub const COARSE_DEGREES: f64 = 0.1;
    /// The accuracy a city-level place claims at least, in metres.
    pub const COARSE_ACCURACY_M: f64 = 10_000.0;

    /// About a city (what a reader without `location.precise` may know):
    /// latitude and longitude rounded to [`Self::COARSE_DEGREES`], and the
    /// accuracy, at least [`Self::COARSE_ACCURACY_M`].
    pub fn coarse(&self) -> (f64, f64, f64) {
        // Rounded, then written with one decimal (0.30000000000000004 → 0.3).
        let round = |x: f64| {
            ((x / Self::COARSE_DEGREES).round() * Self::COARSE_DEGREES * 10.0).round() / 10.0
        };
        (
            round(self.latitude),
            round(self.longitude),
            self.accuracy.max(Self::COARSE_ACCURACY_M),
        )
    }
}

/// A file in the user's recently used list (`recently-used.xbel`, the
/// freedesktop desktop-bookmark spec that GTK and KDE apps write). The
/// app is what the writing app put there: a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecentDocument {
    /// The bookmark's `href` (`file:///...`, or another scheme).
    pub uri: String,
    /// The local path of a `file://` URI, percent-decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The last part of the path (or of the URI).
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The application that registered it last (`bookmark:application`
    /// `name`), as it claims to be called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visited: Option<DateTime<Utc>>,
}

impl RecentDocument {
    /// When it was last used: the latest of its times.
    pub fn used(&self) -> Option<DateTime<Utc>> {
        self.modified.max(self.visited)
    }
}

/// Health of one source, shown by `ListSources` (needs no consent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    pub name: String,
    pub available: bool,
    pub since: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

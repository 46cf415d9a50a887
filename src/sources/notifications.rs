//! Desktop notifications (session bus) → `notifications` (app name,
//! summary, urgency, time, icon, transient/resident, why it closed) and
//! `notifications.content` (the body, the actions' labels).
//!
//! **How, and why this way.** The broker must see the notifications that
//! apps send without replacing the user's notification server. It opens a
//! second session-bus connection and turns it into a *monitor* with
//! `org.freedesktop.DBus.Monitoring.BecomeMonitor`, with match rules for
//! exactly what it needs:
//! - `Notify` method calls (to learn app name, summary, body, urgency),
//! - method returns and errors from the owner of
//!   `org.freedesktop.Notifications` (the returned id of each `Notify`,
//!   paired with its call by the caller's unique name and the call's serial
//!   (`reply_serial`); a `Notify` that no server accepted is never shown,
//!   and one sent to a peer that is not the server, to plant a fake
//!   notification, never gets a reply from the server),
//! - `NotificationClosed` signals from the server (often unicast to the
//!   app, which a plain match rule would not see),
//! - `NameOwnerChanged` of `org.freedesktop.Notifications` (a server that
//!   leaves takes its notifications with it).
//!
//! Eavesdropping (`eavesdrop='true'` match rules) is the old way to see
//! messages addressed to others; it is deprecated, and dbus-daemon's
//! default session policy refuses it. `BecomeMonitor` is the supported way:
//! dbus-daemon allows it to connections of the same user as the bus (the
//! session bus is the user's own), and a monitor cannot send anything, so
//! this connection only reads (every query is made before it becomes a
//! monitor). `ActionInvoked` (and `ActivationToken`) are not monitored:
//! whether the user read a notification is told by `NotificationClosed`'s
//! reason (2, dismissed by the user, which is also how servers close one
//! whose action was invoked), and which button the user pressed in
//! another app is the user's business with that app, not context the
//! broker needs; what it does not need it should not read. A `Notify` sent with `NO_REPLY_EXPECTED` gets no reply and so is
//! not recorded (libnotify, GLib and Qt all wait for the id).
//!
//! **Privacy.** A monitor sees every notification of every app, with its
//! body, whatever the user granted; consent applies when the broker hands
//! them out (`core::view`), and nothing else about other messages is
//! matched. Only the last `core::state::NOTIFICATIONS_LEN` stay in memory.
//!
//! **The broker's own notifications** (its consent prompts) are left out:
//! a `Notify` whose sender is one of [`SourceContext::own_names`] (the
//! broker's main session connection) is dropped before anything of it is
//! kept.
//!
//! **Whole notifications.** The icon is `app_icon`, else the
//! `image-path` or `desktop-entry` hint, as a name, path or URI, never
//! image data (`image-data` is not read; a `data:` URI is dropped). The
//! actions are kept as their labels only (keys are the app's), one line
//! each, markup stripped like bodies, at most `MAX_ACTIONS`; they are
//! content (an app writes them, and a label can quote the message: "Reply
//! to Ann"). `transient` and `resident` come from the hints; why a
//! notification closed from `NotificationClosed` (expired, dismissed by
//! the user, closed by a call).
//!
//! **Markup.** Bodies may carry the spec's markup (`<b>`, `<i>`, `<u>`,
//! `<a href>`, `<img>`) or broken markup. The broker keeps plain text: tags
//! are removed, the XML entities decoded, control characters (but newlines
//! and tabs) dropped. Apps reading context want the text; a link target or
//! image source is not text and can be a tracking URL. A `<` that starts no
//! tag stays as it is. The body is then cut at `core::state::MAX_TEXT_CHARS`
//! characters (a 1 MiB body costs one linear pass and keeps 1 KiB).

use std::collections::{HashMap, HashSet, VecDeque};

use chrono::Utc;
use futures_util::StreamExt;
use zbus::message::Type as MsgType;
use zbus::wire::OwnedVariant;
use zbus::{Connection, Message, MessageStream};

use super::fdo::{self, BusKind, FdoError, Warned};
use super::{Backoff, SourceContext};
use crate::core::SourceEvent;
use crate::core::state::{MAX_ACTIONS, MAX_TEXT_CHARS, NOTIFICATIONS_LEN, truncate_text};
use crate::model::{CloseReason, Notification, Urgency};

pub(crate) const NAME: &str = "notifications";
const SERVER: &str = "org.freedesktop.Notifications";
const IFACE: &str = "org.freedesktop.Notifications";
/// `Notify` calls waiting for their reply; a server that never answers
/// must not make this grow.
const MAX_PENDING: usize = 64;

/// The monitor's match rules (see the module docs).
pub(crate) const RULES: [&str; 5] = [
    "type='method_call',interface='org.freedesktop.Notifications',member='Notify'",
    "type='method_return',sender='org.freedesktop.Notifications'",
    "type='error',sender='org.freedesktop.Notifications'",
    "type='signal',sender='org.freedesktop.Notifications',interface='org.freedesktop.Notifications',member='NotificationClosed'",
    "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.freedesktop.Notifications'",
];

/// The body of `Notify`: `susssasa{sv}i`.
type NotifyArgs = (
    String,
    u32,
    String,
    String,
    String,
    Vec<String>,
    HashMap<String, OwnedVariant>,
    i32,
);

enum Flow {
    Cancelled,
    Lost(FdoError),
}

/// Monitor notifications until cancelled.
pub(crate) async fn run(ctx: SourceContext) {
    let mut tracker = Tracker::new(ctx.own_names.iter().cloned().collect());
    let mut backoff = Backoff::default();
    let mut failures = fdo::Failures::default();
    loop {
        match monitor(&ctx, &mut tracker, &mut backoff, &mut failures).await {
            Flow::Cancelled => return,
            Flow::Lost(e) => {
                failures.log(NAME, &format!("{e}; retrying"));
                for ev in tracker.close_all() {
                    ctx.send(ev).await;
                }
                ctx.status(NAME, false, Some(e.to_string())).await;
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
            }
        }
    }
}

async fn monitor(
    ctx: &SourceContext,
    tracker: &mut Tracker,
    backoff: &mut Backoff,
    failures: &mut fdo::Failures,
) -> Flow {
    let conn = match fdo::connect(BusKind::Session).await {
        Ok(c) => c,
        Err(e) => return Flow::Lost(e),
    };
    // Every question first: a monitor cannot send.
    let server = match fdo::name_owner(&conn, SERVER).await {
        Ok(s) => s,
        Err(e) => return Flow::Lost(e),
    };
    // The stream before the switch, so that nothing after it is missed.
    let mut stream = MessageStream::from(&conn);
    if let Err(e) = become_monitor(&conn).await {
        return Flow::Lost(FdoError::Service(format!(
            "the session bus refused BecomeMonitor: {e}"
        )));
    }
    backoff.reset();
    failures.clear();
    tracker.server = server;
    tracing::info!(source = NAME, "monitoring notifications");
    ctx.status(NAME, tracker.server.is_some(), tracker.server_error())
        .await;
    loop {
        let msg = tokio::select! {
            _ = ctx.cancel.cancelled() => return Flow::Cancelled,
            m = stream.next() => m,
        };
        let msg = match msg {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                tracker
                    .warned
                    .warn("unreadable", format_args!("unreadable message: {e}"));
                continue;
            }
            None => return Flow::Lost(FdoError::Closed),
        };
        let had_server = tracker.server.is_some();
        for ev in tracker.on_message(&msg) {
            if !ctx.send(ev).await {
                return Flow::Cancelled;
            }
        }
        if had_server != tracker.server.is_some() {
            ctx.status(NAME, tracker.server.is_some(), tracker.server_error())
                .await;
        }
    }
}

async fn become_monitor(conn: &Connection) -> zbus::Result<()> {
    conn.call_method(
        Some(fdo::DBUS_NAME),
        fdo::DBUS_PATH,
        Some("org.freedesktop.DBus.Monitoring"),
        "BecomeMonitor",
        &(&RULES[..], 0u32),
    )
    .await
    .map(|_| ())
}

/// A `Notify` call waiting for the server's reply.
#[derive(Debug)]
struct Pending {
    caller: String,
    serial: u32,
    notification: Notification,
}

/// Turns monitored messages into events. No I/O, so that it can be tested
/// with hand-made messages.
#[derive(Debug)]
pub(crate) struct Tracker {
    own: HashSet<String>,
    pending: VecDeque<Pending>,
    /// Ids of the notifications reported and not closed yet, oldest first.
    shown: VecDeque<String>,
    /// Unique name of the notification server, if one runs.
    pub(crate) server: Option<String>,
    pub(crate) warned: Warned,
}

impl Tracker {
    pub(crate) fn new(own: HashSet<String>) -> Self {
        Tracker {
            own,
            pending: VecDeque::new(),
            shown: VecDeque::new(),
            server: None,
            warned: Warned::new(NAME),
        }
    }

    fn server_error(&self) -> Option<String> {
        self.server.is_none().then(|| {
            format!("no notification server ({SERVER}) on the session bus; waiting for one")
        })
    }

    /// Close every notification reported (the server or the bus went).
    pub(crate) fn close_all(&mut self) -> Vec<SourceEvent> {
        self.pending.clear();
        self.shown
            .drain(..)
            .map(|id| SourceEvent::NotificationClosed { id, reason: None })
            .collect()
    }

    pub(crate) fn on_message(&mut self, msg: &Message) -> Vec<SourceEvent> {
        let hdr = msg.header();
        match msg.message_type() {
            MsgType::MethodCall => {
                let is_notify = hdr.interface().is_some_and(|i| i.as_str() == IFACE)
                    && hdr.member().is_some_and(|m| m.as_str() == "Notify");
                let Some(caller) = hdr.sender().map(|s| s.as_str().to_owned()) else {
                    return vec![];
                };
                if !is_notify {
                    return vec![];
                }
                if self.own.contains(&caller) {
                    tracing::trace!(source = NAME, "leaving out the broker's own notification");
                    return vec![];
                }
                match msg.body().deserialize::<NotifyArgs>() {
                    Ok(args) => {
                        if self.pending.len() >= MAX_PENDING {
                            self.pending.pop_front();
                        }
                        self.pending.push_back(Pending {
                            caller,
                            serial: msg.primary_header().serial_num().get(),
                            notification: notification_from(args, &self.warned),
                        });
                    }
                    Err(e) => {
                        self.warned.warn(
                            "Notify: body",
                            format_args!("a Notify call with a bad body ({e}); ignored"),
                        );
                    }
                }
                vec![]
            }
            MsgType::MethodReturn | MsgType::Error => {
                let (Some(dest), Some(serial)) = (hdr.destination(), hdr.reply_serial()) else {
                    return vec![];
                };
                let Some(pos) = self
                    .pending
                    .iter()
                    .position(|p| p.serial == serial.get() && p.caller == dest.as_str())
                else {
                    return vec![];
                };
                let Some(p) = self.pending.remove(pos) else {
                    return vec![];
                };
                if msg.message_type() == MsgType::Error {
                    return vec![];
                }
                let Ok(id) = msg.body().deserialize::<u32>() else {
                    self.warned
                        .warn("Notify: reply", "a Notify reply without an id; ignored");
                    return vec![];
                };
                let mut notification = p.notification;
                notification.id = notification_id(id);
                self.shown.retain(|s| *s != notification.id);
                self.shown.push_back(notification.id.clone());
                // The core keeps NOTIFICATIONS_LEN; so do we.
                while self.shown.len() > NOTIFICATIONS_LEN {
                    self.shown.pop_front();
                }
                vec![SourceEvent::Notification { notification }]
            }
            MsgType::Signal => {
                let member = hdr.member().map(|m| m.as_str()).unwrap_or_default();
                if member == "NameOwnerChanged" {
                    let Ok((name, _, new)) = msg.body().deserialize::<(String, String, String)>()
                    else {
                        return vec![];
                    };
                    if name != SERVER {
                        return vec![];
                    }
                    let closed = self.close_all();
                    self.server = (!new.is_empty()).then_some(new);
                    tracing::info!(source = NAME, server = ?self.server, "the notification server changed");
                    closed
                } else if member == "NotificationClosed" {
                    match msg.body().deserialize::<(u32, u32)>() {
                        Ok((id, reason)) => {
                            let id = notification_id(id);
                            self.shown.retain(|s| *s != id);
                            vec![SourceEvent::NotificationClosed {
                                id,
                                reason: Some(CloseReason::from_code(reason)),
                            }]
                        }
                        Err(e) => {
                            self.warned.warn(
                                "NotificationClosed: body",
                                format_args!("NotificationClosed with a bad body ({e}); ignored"),
                            );
                            vec![]
                        }
                    }
                } else {
                    vec![]
                }
            }
        }
    }
}

/// The broker's id of the server's notification `id`.
pub(crate) fn notification_id(id: u32) -> String {
    format!("notify-{id}")
}

/// A notification from the arguments of `Notify` (its id comes with the
/// reply).
fn notification_from(args: NotifyArgs, warned: &Warned) -> Notification {
    let (app_name, _replaces, app_icon, summary, body, actions, hints, _timeout) = args;
    let mut app_name = plain(&app_name);
    truncate_text(&mut app_name);
    let mut summary = plain(&summary);
    truncate_text(&mut summary);
    let mut body = strip_markup(&body);
    truncate_text(&mut body);
    let hint_str = |k: &str| hints.get(k).and_then(|v| fdo::as_str(v).map(str::to_owned));
    let icon = [
        Some(app_icon),
        hint_str("image-path"),
        hint_str("image_path"),
        hint_str("desktop-entry"),
    ]
    .into_iter()
    .flatten()
    .find_map(|s| icon_name(&s));
    Notification {
        app_name,
        summary,
        body,
        urgency: urgency(hints.get("urgency"), warned),
        time: Utc::now(),
        icon,
        actions: action_labels(&actions),
        transient: flag(hints.get("transient")),
        resident: flag(hints.get("resident")),
        ..Notification::default()
    }
}

/// How many characters of an action label are kept: a button's words.
const MAX_LABEL_CHARS: usize = 100;

/// The labels of `Notify`'s `actions` (key, label, key, label, …): plain
/// text on one line, bounded; the `default` action (a click on the
/// notification, not a button) and empty labels are left out. Labels are
/// text an app wrote, which reaches AI hosts: markup is stripped as in
/// bodies, so that a label cannot smuggle a link or a tag.
pub(crate) fn action_labels(actions: &[String]) -> Vec<String> {
    actions
        .chunks(2)
        .filter_map(|pair| match pair {
            [key, label] if key != "default" => {
                let one_line: String = strip_markup(label)
                    .chars()
                    .map(|c| if c.is_whitespace() { ' ' } else { c })
                    .collect();
                let mut l: String = one_line.trim().chars().take(MAX_LABEL_CHARS).collect();
                if one_line.trim().chars().count() > MAX_LABEL_CHARS {
                    l.push('…');
                }
                (!l.is_empty()).then_some(l)
            }
            _ => None,
        })
        .take(MAX_ACTIONS)
        .collect()
}

/// An icon as a name, path or URI: without control characters, never
/// image data (`data:` URIs), at most `MAX_TEXT_CHARS` characters (a
/// longer one is no icon name).
pub(crate) fn icon_name(s: &str) -> Option<String> {
    let s: String = s.chars().filter(|c| !c.is_control()).collect();
    let s = s.trim();
    let is_data = s.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("data:"));
    (!s.is_empty() && !is_data && s.chars().count() <= MAX_TEXT_CHARS).then(|| s.to_owned())
}

/// A boolean hint (`transient`, `resident`): a boolean, or a number that
/// is not 0 (some apps send a byte).
fn flag(v: Option<&OwnedVariant>) -> bool {
    v.is_some_and(|v| fdo::as_bool(v).or_else(|| fdo::as_int(v).map(|n| n != 0)) == Some(true))
}

/// The `urgency` hint (a byte: 0 low, 1 normal, 2 critical).
pub(crate) fn urgency(v: Option<&OwnedVariant>, warned: &Warned) -> Urgency {
    let Some(v) = v else {
        return Urgency::Normal;
    };
    match fdo::as_int(v) {
        Some(0) => Urgency::Low,
        Some(1) => Urgency::Normal,
        Some(2) => Urgency::Critical,
        _ => {
            warned.warn(
                "urgency",
                format_args!(
                    "an urgency hint of {} that is not 0, 1 or 2; read as normal",
                    fdo::type_of(v)
                ),
            );
            Urgency::Normal
        }
    }
}

/// Text without control characters (newlines and tabs stay).
pub(crate) fn plain(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// Plain text from notification markup (see the module docs). Linear in
/// the input, and stops once it has more than `MAX_TEXT_CHARS` characters.
pub(crate) fn strip_markup(s: &str) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    let mut rest = s;
    let push = |out: &mut String, count: &mut usize, c: char| {
        if !c.is_control() || c == '\n' || c == '\t' {
            out.push(c);
            *count += 1;
        }
    };
    while let Some(c) = rest.chars().next() {
        if count > MAX_TEXT_CHARS {
            break;
        }
        if c == '<' {
            let after = &rest[1..];
            // The tag ends at the next '>', unless another '<' comes first
            // (then this '<' is text).
            match after.find(['<', '>']) {
                Some(i) if after.as_bytes()[i] == b'>' && looks_like_tag(&after[..i]) => {
                    rest = &after[i + 1..];
                    continue;
                }
                _ => {
                    push(&mut out, &mut count, '<');
                    rest = after;
                    continue;
                }
            }
        }
        if c == '&'
            && let Some((decoded, len)) = entity(rest)
        {
            push(&mut out, &mut count, decoded);
            rest = &rest[len..];
            continue;
        }
        push(&mut out, &mut count, c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether the text between `<` and `>` is a tag (`b`, `/i`, `a href=..`,
/// `img src=.. /`, `br/`, `!-- --`).
fn looks_like_tag(inner: &str) -> bool {
    let inner = inner.strip_prefix('/').unwrap_or(inner);
    inner.starts_with("!--")
        || inner
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
}

/// An XML entity at the start of `s` (`&amp;`, `&#39;`, `&#x27;`): the
/// character and the entity's length in bytes.
fn entity(s: &str) -> Option<(char, usize)> {
    let end = s.as_bytes().iter().take(12).position(|&b| b == b';')?;
    let name = &s[1..end];
    let c = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        n if n.starts_with("#x") || n.starts_with("#X") => {
            char::from_u32(u32::from_str_radix(&n[2..], 16).ok()?)?
        }
        n if n.starts_with('#') => char::from_u32(n[1..].parse().ok()?)?,
        _ => return None,
    };
    Some((c, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;
    use zbus::wire::Variant;

    fn notify(sender: &str, serial: u32, body: &str) -> Message {
        let hints: HashMap<String, Variant<'_>> = [("urgency".to_owned(), Variant::U8(2))]
            .into_iter()
            .collect();
        Message::method_call("/org/freedesktop/Notifications", "Notify")
            .interface(IFACE)
            .sender(sender)
            .destination(":1.1")
            .serial(NonZeroU32::new(serial).expect("serial"))
            .build(&(
                "TestApp",
                0u32,
                "",
                "Summary",
                body,
                Vec::<String>::new(),
                hints,
                -1i32,
            ))
            .expect("message")
    }

    fn reply(to: &Message, id: u32) -> Message {
        Message::method_return(&to.header())
            .sender(":1.1")
            .build(&id)
            .expect("reply")
    }

    #[test]
    fn notify_becomes_a_notification_when_the_server_answers() {
        let mut t = Tracker::new(HashSet::new());
        let call = notify(
            ":1.7",
            5,
            "Hello <b>there</b> &amp; <a href=\"https://t.example/x\">here</a>",
        );
        assert!(t.on_message(&call).is_empty());
        let evs = t.on_message(&reply(&call, 42));
        let [SourceEvent::Notification { notification: n }] = evs.as_slice() else {
            panic!("{evs:?}");
        };
        assert_eq!(n.id, "notify-42");
        assert_eq!(n.app_name, "TestApp");
        assert_eq!(n.summary, "Summary");
        assert_eq!(n.body, "Hello there & here");
        assert_eq!(n.urgency, Urgency::Critical);
        // A second reply to the same call finds nothing.
        assert!(t.on_message(&reply(&call, 42)).is_empty());
        let closed = Message::signal(
            "/org/freedesktop/Notifications",
            IFACE,
            "NotificationClosed",
        )
        .sender(":1.1")
        .build(&(42u32, 2u32))
        .expect("signal");
        assert!(matches!(
            t.on_message(&closed).as_slice(),
            [SourceEvent::NotificationClosed { id, reason: Some(CloseReason::Dismissed) }] if id == "notify-42"
        ));
    }

    #[test]
    fn icon_actions_and_hints_are_kept_as_plain_names_and_labels() {
        let hints: HashMap<String, Variant<'_>> = [
            ("transient".to_owned(), Variant::Bool(true)),
            ("resident".to_owned(), Variant::U8(1)),
            (
                "desktop-entry".to_owned(),
                Variant::from("org.example.Mail"),
            ),
            (
                "image-data".to_owned(),
                Variant::from((1i32, 1i32, 4i32, true, 8i32, 4i32, vec![0u8; 4])),
            ),
        ]
        .into_iter()
        .collect();
        let actions = [
            "default",
            "Open",
            "reply",
            "<b>Reply</b> to\nAnn &amp; <a href=\"https://evil.example\">co</a>",
            "later",
            "",
            "x",
        ];
        let call = Message::method_call("/org/freedesktop/Notifications", "Notify")
            .interface(IFACE)
            .sender(":1.7")
            .destination(":1.1")
            .serial(NonZeroU32::new(3).expect("serial"))
            .build(&("Mail", 0u32, "", "S", "B", actions.to_vec(), hints, -1i32))
            .expect("message");
        let mut t = Tracker::new(HashSet::new());
        t.on_message(&call);
        let evs = t.on_message(&reply(&call, 9));
        let [SourceEvent::Notification { notification: n }] = evs.as_slice() else {
            panic!("{evs:?}");
        };
        // The default action is a click, not a button; an empty label and
        // a key without a label are no buttons either.
        assert_eq!(n.actions, ["Reply to Ann & co"]);
        assert_eq!(n.icon.as_deref(), Some("org.example.Mail"));
        assert!(n.transient && n.resident);
        assert_eq!(n.closed, None);
    }

    #[test]
    fn icons_are_names_paths_or_uris_never_data() {
        assert_eq!(icon_name("mail-unread").as_deref(), Some("mail-unread"));
        assert_eq!(
            icon_name("file:///usr/share/icons/x.png").as_deref(),
            Some("file:///usr/share/icons/x.png")
        );
        assert_eq!(icon_name("DATA:image/png;base64,AAAA"), None);
        assert_eq!(icon_name("  "), None);
        assert_eq!(icon_name("a\u{7}b").as_deref(), Some("ab"));
        assert_eq!(icon_name(&"x".repeat(MAX_TEXT_CHARS + 1)), None);
        // At most MAX_ACTIONS labels, each at most a button's words.
        let many: Vec<String> = (0..40)
            .flat_map(|i| [format!("k{i}"), "y".repeat(500)])
            .collect();
        let labels = action_labels(&many);
        assert_eq!(labels.len(), MAX_ACTIONS);
        assert_eq!(labels[0].chars().count(), MAX_LABEL_CHARS + 1);
    }

    #[test]
    fn the_brokers_own_notifications_are_left_out() {
        let mut t = Tracker::new([":1.3".to_owned()].into_iter().collect());
        let own = notify(":1.3", 9, "Allow Foo to read your windows?");
        assert!(t.on_message(&own).is_empty());
        assert!(
            t.on_message(&reply(&own, 1)).is_empty(),
            "own notification recorded"
        );
        let other = notify(":1.4", 9, "from someone else");
        t.on_message(&other);
        assert_eq!(t.on_message(&reply(&other, 2)).len(), 1);
    }

    #[test]
    fn errors_and_unanswered_calls_show_nothing_and_pending_is_bounded() {
        let mut t = Tracker::new(HashSet::new());
        let call = notify(":1.7", 5, "x");
        t.on_message(&call);
        let err = Message::error(&call.header(), "org.freedesktop.DBus.Error.Failed")
            .sender(":1.1")
            .build(&"no")
            .expect("error");
        assert!(t.on_message(&err).is_empty());
        assert!(t.on_message(&reply(&call, 3)).is_empty());
        for i in 1..1000 {
            t.on_message(&notify(":1.8", i, "x"));
        }
        assert!(t.pending.len() <= MAX_PENDING);
    }

    #[test]
    fn a_server_that_leaves_closes_its_notifications() {
        let mut t = Tracker::new(HashSet::new());
        t.server = Some(":1.1".into());
        let call = notify(":1.7", 5, "x");
        t.on_message(&call);
        t.on_message(&reply(&call, 7));
        let noc = Message::signal(
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "NameOwnerChanged",
        )
        .sender("org.freedesktop.DBus")
        .build(&(SERVER, ":1.1", ""))
        .expect("signal");
        assert!(matches!(
            t.on_message(&noc).as_slice(),
            [SourceEvent::NotificationClosed { id, reason: None }] if id == "notify-7"
        ));
        assert_eq!(t.server, None);
    }

    #[test]
    fn markup_is_stripped_linearly_and_bad_markup_survives() {
        assert_eq!(strip_markup("<i>a</i> &lt; b"), "a < b");
        assert_eq!(strip_markup("1 < 2 and 3 > 2"), "1 < 2 and 3 > 2");
        assert_eq!(strip_markup("<<b>x"), "<x");
        assert_eq!(strip_markup("<b unclosed"), "<b unclosed");
        assert_eq!(strip_markup("a<br/>b<img src=\"x\"/>"), "ab");
        assert_eq!(strip_markup("&#65;&#x42;&bogus; &"), "AB&bogus; &");
        assert_eq!(strip_markup("bell\u{7}"), "bell");
        // A megabyte of '<' with no '>' and of tags: cut (and linear: a
        // quadratic pass over a megabyte would outlast the test's timeout;
        // no time is asserted here, the bench's job).
        let s = strip_markup(&"<".repeat(1 << 20));
        assert_eq!(s.chars().count(), MAX_TEXT_CHARS + 1);
        let s = strip_markup(&"<b>x</b>".repeat(1 << 17));
        assert_eq!(s.chars().count(), MAX_TEXT_CHARS + 1);
    }

    #[test]
    fn bad_urgency_reads_as_normal() {
        let w = Warned::new("test");
        assert_eq!(urgency(Some(&OwnedVariant::from(7u8)), &w), Urgency::Normal);
        assert_eq!(urgency(Some(&OwnedVariant::from(0u32)), &w), Urgency::Low);
        assert_eq!(urgency(None, &w), Urgency::Normal);
        assert_eq!(w.count(), 1);
    }
}

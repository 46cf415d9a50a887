//! Desktop notifications for the `send_notification` tool, through
//! `org.freedesktop.Notifications` on the session bus.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use zbus::wire::Variant;
use zbus::{Connection, MatchRule, MessageStream};

use crate::core;
use crate::model::{CloseReason, Urgency};

/// How long a notification server may take to answer (it may be
/// D-Bus-activated on first use).
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends desktop notifications on behalf of MCP hosts.
///
/// On a session bus connection of its own when the daemon made its
/// connection from the session's address (made on first use, on the MCP
/// lane that calls): a call takes its connection's write lock, a fair
/// async lock handed from holder to waiter, and from a task of the busy
/// MCP lane each hand-over waited for that lane to poll the task. On the
/// desktop's connection, a `Peer.Ping`'s or a settings panel's reply
/// queued behind the AI hosts' notifications (`make soak`: 85 a second)
/// waited for them. What MCP hosts do never holds the desktop's socket.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    /// The daemon's connection: used when it was not made from the
    /// session's address (a test's private bus), or when a connection of
    /// our own cannot be made.
    shared: Connection,
    own: Option<std::sync::Arc<tokio::sync::OnceCell<Option<Connection>>>>,
}

impl Notifier {
    /// `own`: whether to make a connection of our own to the session bus
    /// (the daemon's connection was made from the session's address).
    pub(crate) fn new(shared: Connection, own: bool) -> Self {
        Notifier {
            shared,
            own: own.then(Default::default),
        }
    }

    /// The connection to call on: ours, made on first use, or the
    /// daemon's.
    async fn conn(&self) -> &Connection {
        let Some(own) = &self.own else {
            return &self.shared;
        };
        let made = own
            .get_or_init(|| async {
                zbus::connection::Builder::session()
                    .build()
                    .await
                    .inspect_err(|e| {
                        tracing::warn!(error = %e, "no connection of its own for MCP's notifications; they share the daemon's");
                    })
                    .ok()
            })
            .await;
        made.as_ref().unwrap_or(&self.shared)
    }

    /// Show a notification. `sender` (the host's app id) is shown as the
    /// app name, so that the user sees who speaks, not just "contextd".
    ///
    /// With `actions` (their labels; the keys are ours, `contextd-N`) it
    /// waits for the user's answer: the server's `ActionInvoked` or
    /// `NotificationClosed` for this notification, followed from before
    /// the `Notify` (no answer can come first) and only from the server's
    /// unique name (another peer cannot answer for the user), or
    /// `timeout` (default [`DEFAULT_WAIT`]), after which the notification
    /// is withdrawn so that a late click goes nowhere unseen. Once the
    /// user chose an action it is taken down too (the question is
    /// answered).
    ///
    /// A server that shows no buttons (`GetCapabilities` without
    /// `actions`, such as mako with `actions=0`) would never
    /// answer, and the call would only learn that after `timeout`: the
    /// notification is shown without its actions, at once, and the answer
    /// says so ([`Answer::NoActions`]), so that the host asks another way.
    pub(crate) async fn notify(&self, n: Outgoing<'_>) -> Result<Notified, core::Error> {
        let conn = self.conn().await;
        let no_actions = !n.actions.is_empty() && !shows_actions(conn).await;
        let labels: &[String] = if no_actions { &[] } else { n.actions };
        let level: u8 = match n.urgency {
            Urgency::Low => 0,
            Urgency::Normal => 1,
            Urgency::Critical => 2,
        };
        let mut hints: HashMap<&str, Variant<'_>> = HashMap::new();
        hints.insert("urgency", Variant::U8(level));
        let app_name = format!("{} (via contextd)", n.sender);
        let keys: Vec<String> = (0..labels.len())
            .map(|i| format!("{ACTION_PREFIX}{i}"))
            .collect();
        let actions: Vec<&str> = keys
            .iter()
            .zip(labels)
            .flat_map(|(k, l)| [k.as_str(), l.as_str()])
            .collect();
        let mut answers = if actions.is_empty() {
            None
        } else {
            Some(follow_answers(conn).await?)
        };
        let expire = n
            .timeout
            .map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
        let args = (
            app_name.as_str(),
            0u32,
            "",
            n.summary,
            n.body,
            actions,
            hints,
            expire,
        );
        let call = conn.call_method(Some(SERVER), PATH, Some(SERVER), "Notify", &args);
        let reply = tokio::time::timeout(NOTIFY_TIMEOUT, call)
            .await
            .map_err(|_| {
                core::Error::Unavailable(
                    "the notification service did not answer within 5 s".into(),
                )
            })?
            .map_err(|e| {
                core::Error::Unavailable(format!("the notification service refused: {e}"))
            })?;
        let server = reply
            .header()
            .sender()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let id = reply.body().deserialize::<u32>().map_err(|e| {
            core::Error::Failed(format!("odd reply from the notification service: {e}"))
        })?;
        let Some(stream) = answers.as_mut() else {
            return Ok(Notified {
                id,
                answer: no_actions.then_some(Answer::NoActions),
            });
        };
        let wait = n.timeout.unwrap_or(DEFAULT_WAIT);
        let answer =
            match tokio::time::timeout(wait, answer_to(stream, &server, id, &keys, labels)).await {
                Ok(Some(a)) => a,
                Ok(None) => {
                    return Err(core::Error::Unavailable(
                    "the connection to the notification service closed while waiting for the user"
                        .into(),
                ));
                }
                Err(_) => Answer::Unanswered,
            };
        // Unanswered: withdrawn, nobody waits for its answer any more.
        // Answered with an action: taken down, as libnotify does for its
        // apps; the spec lets a server remove it by itself, and some do
        // not (mako's `makoctl invoke` only signals, and the question would
        // stay on screen after the user answered it).
        if matches!(answer, Answer::Unanswered | Answer::Action(_)) {
            withdraw(conn, id).await;
        }
        Ok(Notified {
            id,
            answer: Some(answer),
        })
    }
}

/// `CloseNotification(id)`, waited for at most [`NOTIFY_TIMEOUT`]; a
/// failure (already closed, a server that does not answer) is only
/// logged: nothing waits for this notification any more.
async fn withdraw(conn: &Connection, id: u32) {
    let which = (id,);
    let close = conn.call_method(
        Some(SERVER),
        PATH,
        Some(SERVER),
        "CloseNotification",
        &which,
    );
    match tokio::time::timeout(NOTIFY_TIMEOUT, close).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::debug!(error = %e, id, "could not withdraw a notification");
        }
        Err(_) => {
            tracing::debug!(
                id,
                "the notification service did not answer CloseNotification"
            );
        }
    }
}

/// The notification server's name, object and interface.
const SERVER: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";
/// The keys of our actions: `contextd-0`, `contextd-1`, …
const ACTION_PREFIX: &str = "contextd-";
/// How long a call with actions waits for the user without `timeout_s`.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// What `send_notification` shows.
#[derive(Debug)]
pub(crate) struct Outgoing<'a> {
    /// The host's app id.
    pub(crate) sender: &'a str,
    pub(crate) summary: &'a str,
    pub(crate) body: &'a str,
    pub(crate) urgency: Urgency,
    /// Button labels (none: the call does not wait).
    pub(crate) actions: &'a [String],
    /// How long it stays (the server's default when `None`), and with
    /// actions how long the call waits.
    pub(crate) timeout: Option<Duration>,
}

/// The server's id, and with actions what the user did.
#[derive(Debug)]
pub(crate) struct Notified {
    pub(crate) id: u32,
    pub(crate) answer: Option<Answer>,
}

/// What became of a notification with actions.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    /// The user chose this action (its label).
    Action(String),
    /// It closed without a choice (expired, dismissed, withdrawn).
    Closed(CloseReason),
    /// Nobody answered in time; it was withdrawn.
    Unanswered,
    /// The server shows no actions: it was shown without them, and no
    /// answer can come.
    NoActions,
}

/// Whether the notification server shows actions (`actions` among its
/// capabilities). When it cannot be asked (no server, no answer in
/// [`NOTIFY_TIMEOUT`]) it is taken to: the `Notify` that follows says
/// what is wrong with the server, and a server that never answers
/// `GetCapabilities` is no reason to withhold the buttons.
async fn shows_actions(conn: &Connection) -> bool {
    let call = conn.call_method(Some(SERVER), PATH, Some(SERVER), "GetCapabilities", &());
    let caps = match tokio::time::timeout(NOTIFY_TIMEOUT, call).await {
        Ok(Ok(reply)) => reply.body().deserialize::<Vec<String>>(),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "GetCapabilities failed; assuming actions are shown");
            return true;
        }
        Err(_) => {
            tracing::debug!("GetCapabilities did not answer; assuming actions are shown");
            return true;
        }
    };
    match caps {
        Ok(caps) => caps.iter().any(|c| c == "actions"),
        Err(e) => {
            tracing::debug!(error = %e, "odd GetCapabilities reply; assuming actions are shown");
            true
        }
    }
}

/// The server's `ActionInvoked` and `NotificationClosed`, followed before
/// the `Notify` that they answer (an answer may come at once).
///
/// The rule names no sender: dbus-daemon drops a rule whose sender is a
/// unique name when that peer leaves, and zbus's `remove_match` then keeps
/// the rule's queue for good (see `sources::fdo::SignalStream`); a server
/// restarting while a question waits would leak one. [`answer_to`] takes
/// only what the unique name that answered `Notify` sends, from the header
/// the bus daemon writes.
async fn follow_answers(conn: &Connection) -> Result<MessageStream, core::Error> {
    let unavailable = |e: zbus::Error| {
        core::Error::Unavailable(format!("cannot follow the notification service: {e}"))
    };
    let rule = MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .path(PATH)
        .interface(SERVER)
        .build()
        .map_err(unavailable)?;
    MessageStream::for_match_rule(rule, conn, None)
        .await
        .map_err(unavailable)
}

/// The answer to notification `id` in `stream`, from `server` (the unique
/// name that answered `Notify`): `None` when the stream ends. Signals of
/// other notifications or other peers, or of actions that are not ours,
/// are skipped.
async fn answer_to(
    stream: &mut MessageStream,
    server: &str,
    id: u32,
    keys: &[String],
    labels: &[String],
) -> Option<Answer> {
    while let Some(msg) = stream.next().await {
        let Ok(msg) = msg else { continue };
        if msg.header().sender().map(|s| s.as_str()) != Some(server) {
            continue;
        }
        let member = msg.header().member().map(|m| m.to_string());
        match member.as_deref() {
            Some("ActionInvoked") => {
                let Ok((nid, key)) = msg.body().deserialize::<(u32, String)>() else {
                    continue;
                };
                if nid != id {
                    continue;
                }
                if let Some(label) = keys
                    .iter()
                    .position(|k| *k == key)
                    .and_then(|i| labels.get(i))
                {
                    return Some(Answer::Action(label.clone()));
                }
            }
            Some("NotificationClosed") => {
                let Ok((nid, reason)) = msg.body().deserialize::<(u32, u32)>() else {
                    continue;
                };
                if nid == id {
                    return Some(Answer::Closed(CloseReason::from_code(reason)));
                }
            }
            _ => {}
        }
    }
    None
}

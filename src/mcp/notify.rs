//! Desktop notifications for the `send_notification` tool, through
//! `org.freedesktop.Notifications` on the session bus.

use std::collections::HashMap;
use std::time::Duration;

use zbus::Connection;
use zbus::wire::Variant;

use crate::core;
use crate::model::Urgency;

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
    pub(crate) async fn notify(
        &self,
        sender: &str,
        summary: &str,
        body: &str,
        urgency: Urgency,
    ) -> Result<u32, core::Error> {
        let conn = self.conn().await;
        let level: u8 = match urgency {
            Urgency::Low => 0,
            Urgency::Normal => 1,
            Urgency::Critical => 2,
        };
        let mut hints: HashMap<&str, Variant<'_>> = HashMap::new();
        hints.insert("urgency", Variant::U8(level));
        let app_name = format!("{sender} (via contextd)");
        let actions: Vec<&str> = Vec::new();
        let args = (
            app_name.as_str(),
            0u32,
            "",
            summary,
            body,
            actions,
            hints,
            -1i32,
        );
        let call = conn.call_method(
            Some("org.freedesktop.Notifications"),
            "/org/freedesktop/Notifications",
            Some("org.freedesktop.Notifications"),
            "Notify",
            &args,
        );
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
        reply.body().deserialize::<u32>().map_err(|e| {
            core::Error::Failed(format!("odd reply from the notification service: {e}"))
        })
    }
}

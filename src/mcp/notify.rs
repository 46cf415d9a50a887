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
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    conn: Connection,
}

impl Notifier {
    pub(crate) fn new(conn: Connection) -> Self {
        Notifier { conn }
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
        let conn = &self.conn;
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

//! Authorisation of management calls through polkit
//! (`org.freedesktop.PolicyKit1.Authority.CheckAuthorization` on the system
//! bus), for the calling process, with interaction allowed so that the
//! user's authentication agent can ask for their password.
//!
//! The subject is the caller as it was **identified** (`dbus::callers`):
//! its PID with the start time read when the broker resolved its
//! identity, not one read again at check time through an unpinned
//! `/proc/PID`. polkit compares that start time with the process that now
//! has the PID and refuses when they differ, so a caller that exits and
//! leaves its PID to another process while the dialog is up (the classic
//! polkit PID race) authorises nothing. The caller's connection is on the
//! *session* bus, so the `system-bus-name` subject, which lets polkit
//! read credentials itself, is not available to us.
//!
//! Each check carries `details` naming what is asked and who asks
//! (`operation`, `app`, `categories`, `caller`, and `summary` in words,
//! ending with the caller), which the action's message
//! shows (`$(summary)` in `polkit/org.contextd.policy`) and polkit rules
//! can test (`action.lookup("app")`).

use std::collections::HashMap;

use tokio::sync::OnceCell;
use zbus::Connection;
use zbus::wire::Variant;

use super::error::Error;

pub(crate) const MANAGE_CONSENT: &str = "org.contextd.manage-consent";

/// Allow the user's authentication agent to interact.
const ALLOW_USER_INTERACTION: u32 = 1;

#[derive(Debug, Default)]
pub(crate) struct Polkit {
    system: OnceCell<Option<Connection>>,
}

/// The process polkit is asked about, as the broker identified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Process {
    pub(crate) pid: u32,
    pub(crate) uid: u32,
    /// Read when the caller was identified; 0 if it could not be read
    /// (polkit then reads it itself, the old, racy way).
    pub(crate) start_time: u64,
}

/// What a management call asks, for polkit's `details` (shown by the
/// authentication dialog through the action's `$(summary)`, and
/// available to rules).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Request {
    /// The D-Bus member (`SetGrant`, `Revoke`, …).
    pub(crate) operation: String,
    /// The app the call is about, if one.
    pub(crate) app: Option<String>,
    /// The categories the call is about, if any.
    pub(crate) categories: Vec<String>,
    /// What it does, in words: "allow exe:/usr/bin/foo to see windows".
    pub(crate) summary: String,
    /// Who asks: the caller's app id as the broker identified it, and its
    /// PID ("exe:/usr/bin/busctl (PID 4242)"). Shown in the dialog, so
    /// that a request the user did not make does not pass for theirs.
    pub(crate) caller: String,
}

impl Request {
    /// The details polkit gets. Values are the app's id and category
    /// names (no control characters: both are validated before a check).
    fn details(&self) -> HashMap<&'static str, String> {
        let mut d = HashMap::new();
        d.insert("operation", self.operation.clone());
        d.insert(
            "app",
            self.app.clone().unwrap_or_else(|| "every app".to_owned()),
        );
        d.insert(
            "categories",
            if self.categories.is_empty() {
                "every category".to_owned()
            } else {
                self.categories.join(", ")
            },
        );
        let summary = if self.summary.is_empty() {
            "change which apps may see your desktop context".to_owned()
        } else {
            self.summary.clone()
        };
        // The message is "Authentication is required to $(summary)": the
        // change, then who asks for it.
        let summary = if self.caller.is_empty() {
            summary
        } else {
            format!("{summary}, as asked by {}", self.caller)
        };
        d.insert("summary", summary);
        d.insert("caller", self.caller.clone());
        d
    }
}

impl Polkit {
    async fn system(&self) -> Option<&Connection> {
        self.system
            .get_or_init(|| async {
                match Connection::system().await {
                    Ok(c) => Some(c),
                    Err(e) => {
                        tracing::warn!(error = %e, "no system bus: management calls cannot be authorised");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// `Ok` when polkit authorises `process` for `action`, asked with
    /// `request` as its details.
    pub(crate) async fn check(
        &self,
        process: Process,
        action: &str,
        request: &Request,
    ) -> Result<(), Error> {
        let unavailable = |why: String| {
            Error::NotAllowed(format!(
                "cannot check authorisation with polkit ({why}); without polkit, change decisions in policy.toml or through a consent agent"
            ))
        };
        let Some(conn) = self.system().await else {
            return Err(unavailable("no system bus".into()));
        };
        let mut subject: HashMap<&str, Variant<'_>> = HashMap::new();
        subject.insert("pid", Variant::from(process.pid));
        subject.insert("start-time", Variant::from(process.start_time));
        subject.insert("uid", Variant::from(process.uid as i32));
        let details = request.details();
        let reply = conn
            .call_method(
                Some("org.freedesktop.PolicyKit1"),
                "/org/freedesktop/PolicyKit1/Authority",
                Some("org.freedesktop.PolicyKit1.Authority"),
                "CheckAuthorization",
                &(
                    ("unix-process", subject),
                    action,
                    details,
                    ALLOW_USER_INTERACTION,
                    "",
                ),
            )
            .await
            .map_err(|e| match &e {
                zbus::Error::MethodError(name, _, _)
                    if name.as_str() == "org.freedesktop.DBus.Error.ServiceUnknown"
                        || name.as_str() == "org.freedesktop.DBus.Error.NameHasNoOwner" =>
                {
                    unavailable("polkit is not running".into())
                }
                _ => unavailable(e.to_string()),
            })?;
        let (authorized, challenge, _details): (bool, bool, HashMap<String, String>) = reply
            .body()
            .deserialize()
            .map_err(|e| unavailable(format!("unexpected reply: {e}")))?;
        if authorized {
            Ok(())
        } else if challenge {
            Err(Error::NotAllowed(format!(
                "polkit needs authentication for {action}, and no authentication agent answered"
            )))
        } else {
            Err(Error::NotAllowed(format!(
                "polkit does not authorise {action} for this process"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_name_what_is_asked() {
        let r = Request {
            operation: "SetGrant".into(),
            app: Some("exe:/usr/bin/x".into()),
            categories: vec!["windows".into(), "windows.titles".into()],
            summary: "allow exe:/usr/bin/x to see windows, windows.titles".into(),
            caller: "org.example.Panel (PID 42)".into(),
        };
        let d = r.details();
        assert_eq!(
            d["summary"],
            "allow exe:/usr/bin/x to see windows, windows.titles, as asked by org.example.Panel (PID 42)"
        );
        assert_eq!(d["caller"], "org.example.Panel (PID 42)");
        assert_eq!(d["app"], "exe:/usr/bin/x");
        assert_eq!(d["categories"], "windows, windows.titles");
        assert_eq!(d["operation"], "SetGrant");
        let d = Request::default().details();
        assert_eq!(d["app"], "every app");
        assert_eq!(
            d["summary"],
            "change which apps may see your desktop context"
        );
    }
}

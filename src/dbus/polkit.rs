//! Authorisation of management calls through polkit
//! (`org.freedesktop.PolicyKit1.Authority.CheckAuthorization` on the system
//! bus), for the calling process, with interaction allowed so that the
//! user's authentication agent can ask for their password.

use std::collections::HashMap;

use tokio::sync::OnceCell;
use zbus::Connection;
use zbus::wire::Variant;

use super::error::Error;

pub const MANAGE_CONSENT: &str = "org.contextd.manage-consent";

/// Allow the user's authentication agent to interact.
const ALLOW_USER_INTERACTION: u32 = 1;

#[derive(Debug, Default)]
pub struct Polkit {
    system: OnceCell<Option<Connection>>,
}

/// The process start time (field 22 of /proc/PID/stat), which polkit uses
/// with the PID to tell a process from a later one with the same PID.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
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

    /// `Ok` when polkit authorises `pid` (running as `uid`) for `action`.
    pub async fn check(&self, pid: u32, uid: u32, action: &str) -> Result<(), Error> {
        let unavailable = |why: String| {
            Error::NotAllowed(format!(
                "cannot check authorisation with polkit ({why}); without polkit, change decisions in policy.toml or through a consent agent"
            ))
        };
        let Some(conn) = self.system().await else {
            return Err(unavailable("no system bus".into()));
        };
        let mut subject: HashMap<&str, Variant<'_>> = HashMap::new();
        subject.insert("pid", Variant::from(pid));
        subject.insert("start-time", Variant::from(start_time(pid).unwrap_or(0)));
        subject.insert("uid", Variant::from(uid as i32));
        let details: HashMap<&str, &str> = HashMap::new();
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

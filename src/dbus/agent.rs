//! Showing consent prompts: through a registered consent agent
//! (`org.contextd.ConsentAgent1`, implemented by a UI), else in the desktop
//! portal backend's Access dialog (`super::portal`), else through a
//! desktop notification with actions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use zbus::Connection;
use zbus::wire::{OwnedObjectPath, OwnedVariant, Variant};

use crate::core::agents::TrustedAgent;
use crate::core::consent::{Answer, BoxFut};
use crate::core::display;
use crate::core::prompts::{Ask, PromptError, PromptRequest, Prompter};

use super::callers::Callers;
use super::portal;

pub(crate) const AGENT_INTERFACE: &str = "org.contextd.ConsentAgent1";

/// One registered agent: a peer and the object path it serves, and why
/// the core trusted it (`core::agents`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Agent {
    pub(crate) owner: String,
    pub(crate) path: OwnedObjectPath,
    pub(crate) trusted: TrustedAgent,
}

/// Registered agents; the most recent one answers.
#[derive(Debug, Default)]
pub(crate) struct Agents {
    list: Mutex<Vec<Agent>>,
}

impl Agents {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Agent>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn register(&self, a: Agent) {
        let mut l = self.lock();
        l.retain(|x| !(x.owner == a.owner && x.path == a.path));
        l.push(a);
    }

    pub(crate) fn unregister(&self, owner: &str, path: &str) -> bool {
        let mut l = self.lock();
        let n = l.len();
        l.retain(|x| !(x.owner == owner && x.path.as_str() == path));
        l.len() != n
    }

    /// Forget the agents of `owner` (it left the bus): whether it had any.
    pub(crate) fn drop_owner(&self, owner: &str) -> bool {
        let mut l = self.lock();
        let n = l.len();
        l.retain(|x| x.owner != owner);
        l.len() != n
    }

    /// Forget the agents trusted as the shell on the connection that just
    /// lost the shell's name: whether there were any.
    pub(crate) fn drop_shell(&self, owner: &str) -> bool {
        let mut l = self.lock();
        let n = l.len();
        l.retain(|x| !(x.owner == owner && x.trusted == TrustedAgent::Shell));
        l.len() != n
    }

    pub(crate) fn current(&self) -> Option<Agent> {
        self.lock().last().cloned()
    }
}

pub(crate) use super::callers::name_owner;
pub(crate) use crate::core::agents::SHELL_NAME;

/// Tell the core how prompts are asked now (for `ListSources`): the
/// agent, else the desktop portal's dialog when its backend runs or the
/// bus can start it, else a notification and why.
pub(crate) async fn announce(conn: &Connection, ask: &Ask, agents: &Agents) {
    use crate::core::agents::AskedBy;
    if let Some(a) = agents.current() {
        ask.prompts_asked_by(AskedBy::Agent(&a.trusted));
        return;
    }
    match portal::choose_on(conn, &portal::Places::from_env()).await {
        Ok(b) => ask.prompts_asked_by(AskedBy::Portal(&b.describe())),
        Err(why) => ask.prompts_asked_by(AskedBy::Notification(&why)),
    }
}

/// The D-Bus prompter.
#[derive(Debug, Clone)]
pub(crate) struct DBusPrompter {
    pub(crate) conn: Connection,
    pub(crate) agents: Arc<Agents>,
    /// Who owns the portal backend's name (`portal::trusted_owner`).
    pub(crate) callers: Arc<Callers>,
}

impl DBusPrompter {
    /// Ask in the desktop portal's dialog when its backend is there and
    /// trusted; `None` when the question must go elsewhere (no backend, an
    /// impostor owning its name, or a dialog that could not be shown), with
    /// the reason logged.
    async fn ask_portal(
        &self,
        req: &PromptRequest,
        timeout: Duration,
        withdraw: &CancellationToken,
    ) -> Option<Result<Answer, PromptError>> {
        let backend = match portal::choose_on(&self.conn, &portal::Places::from_env()).await {
            Ok(b) => b,
            Err(why) => {
                tracing::debug!(%why, "no desktop portal dialog");
                return None;
            }
        };
        let owner = match portal::trusted_owner(&self.conn, &self.callers, &backend).await {
            Ok(o) => o,
            Err(why) => {
                tracing::warn!(%why, "the desktop portal's dialog is not used");
                return None;
            }
        };
        match portal::ask(
            &self.conn,
            (&owner, &backend),
            req,
            timeout,
            withdraw.clone(),
        )
        .await
        {
            Err(PromptError::NoUi(why)) => {
                tracing::warn!(%why, portal = %backend.name, "the desktop portal's dialog failed");
                None
            }
            r => Some(r),
        }
    }
}

pub(crate) fn parse_answer(
    answer: &str,
    options: &HashMap<String, OwnedVariant>,
) -> Result<Answer, PromptError> {
    let secs = options.get("duration_s").and_then(|v| match &**v {
        Variant::U32(n) => Some(i64::from(*n)),
        Variant::I32(n) => Some(i64::from(*n)),
        Variant::U64(n) => i64::try_from(*n).ok(),
        Variant::I64(n) => Some(*n),
        _ => None,
    });
    match Answer::parse(answer, secs).map_err(PromptError::Failed)? {
        Some(a) => Ok(a),
        // The user closed the dialog without choosing (Escape).
        None if answer == "cancel" => Err(PromptError::Declined),
        None => Err(PromptError::Dismissed),
    }
}

/// Who asks, as `Ask` and `Cancel` describe the app.
fn app_dict(req: &PromptRequest) -> HashMap<&str, Variant<'_>> {
    let mut app: HashMap<&str, Variant<'_>> = HashMap::new();
    // Every text here is as `PromptRequest::cleaned` made it (one line,
    // no control or bidirectional characters, bounded); the id too.
    app.insert("id", Variant::from(req.shown_id()));
    app.insert(
        "identity_source",
        Variant::from(req.identity_source.as_str()),
    );
    if let Some(n) = &req.display_name {
        app.insert("name", Variant::from(n.as_str()));
    }
    if let Some(i) = &req.icon {
        app.insert("icon", Variant::from(i.as_str()));
    }
    // What is asked, and for a host what it called: keys added to this
    // dict (agents ignore the keys they do not know), documented in
    // dbus-interfaces/org.contextd.ConsentAgent1.xml.
    app.insert(
        "identity",
        Variant::from(req.identity_source.meaning().to_owned()),
    );
    let questions: Vec<HashMap<&str, Variant<'_>>> = req
        .categories
        .iter()
        .map(|c| {
            let mut q: HashMap<&str, Variant<'_>> = HashMap::new();
            q.insert("category", Variant::from(c.to_string()));
            q.insert("description", Variant::from(c.description()));
            q.insert("sensitive", Variant::from(c.is_sensitive()));
            if let Some(base) = c.base() {
                q.insert("detail_of", Variant::from(base.to_string()));
            }
            q
        })
        .collect();
    app.insert("questions", Variant::from(questions));
    if let Some(call) = &req.call {
        if let Some(h) = &call.host {
            app.insert("host", Variant::from(h.as_str()));
        }
        app.insert("call", Variant::from(call.method.as_str()));
        app.insert("call_name", Variant::from(call.name.as_str()));
        if let Some(a) = &call.arguments {
            app.insert("arguments", Variant::from(a.as_str()));
        }
    }
    app
}

async fn ask_agent(
    conn: &Connection,
    agent: &Agent,
    req: &PromptRequest,
) -> Result<Answer, PromptError> {
    let app = app_dict(req);
    let cats: Vec<String> = req.categories.iter().map(ToString::to_string).collect();
    let reply = conn
        .call_method(
            Some(agent.owner.as_str()),
            agent.path.as_str(),
            Some(AGENT_INTERFACE),
            "Ask",
            &(app, cats, req.channel.as_str(), req.reason.as_str()),
        )
        .await
        .map_err(|e| PromptError::Failed(format!("the consent agent failed: {e}")))?;
    let (answer, options): (String, HashMap<String, OwnedVariant>) =
        reply.body().deserialize().map_err(|e| {
            PromptError::Failed(format!("the consent agent's answer is malformed: {e}"))
        })?;
    parse_answer(&answer, &options)
}

/// Tell the agent that the question for this app and these categories is
/// no longer asked (`Cancel`), so that it closes its dialog. An agent that
/// does not implement it just keeps the dialog: its answer is then ignored.
async fn cancel_agent(conn: &Connection, agent: &Agent, req: &PromptRequest) {
    let cats: Vec<String> = req.categories.iter().map(ToString::to_string).collect();
    if let Err(e) = conn
        .call_method(
            Some(agent.owner.as_str()),
            agent.path.as_str(),
            Some(AGENT_INTERFACE),
            "Cancel",
            &(app_dict(req), cats),
        )
        .await
    {
        tracing::debug!(error = %e, "the consent agent did not take the cancel");
    }
}

const NOTIFICATIONS: &str = "org.freedesktop.Notifications";
const NOTIFICATIONS_PATH: &str = "/org/freedesktop/Notifications";

async fn ask_notification(
    conn: &Connection,
    req: &PromptRequest,
    timeout: Duration,
    withdraw: CancellationToken,
) -> Result<Answer, PromptError> {
    let proxy = zbus::Proxy::new(conn, NOTIFICATIONS, NOTIFICATIONS_PATH, NOTIFICATIONS)
        .await
        .map_err(|e| PromptError::NoUi(e.to_string()))?;
    // Listen before showing, so that a quick click is not missed.
    let mut invoked = proxy
        .receive_signal("ActionInvoked")
        .await
        .map_err(|e| PromptError::NoUi(e.to_string()))?;
    let mut closed = proxy
        .receive_signal("NotificationClosed")
        .await
        .map_err(|e| PromptError::NoUi(e.to_string()))?;
    // Whether the server renders markup in the body (the specification's
    // `body-markup`): then the body's every text is escaped, or an app's
    // reason could be a link or a hidden span.
    let markup = proxy
        .call_method("GetCapabilities", &())
        .await
        .ok()
        .and_then(|r| r.body().deserialize::<Vec<String>>().ok())
        .is_some_and(|caps| caps.iter().any(|c| c == "body-markup"));
    // Its id is always shown beside the name it claims.
    let id = req.shown_id();
    let who = req.shown_name();
    let what = req.asked_in_words();
    // The summary is plain text by the specification, yet some servers
    // render markup there too: without its characters, where they might.
    let summary = format!(
        "{} wants to know what you are doing",
        if markup {
            display::without_markup(&who)
        } else {
            who.clone()
        }
    );
    let mut body = format!(
        "{who} ({id}, known by {}) asks to see: {}.",
        req.identity_source.meaning(),
        what.join("; ")
    );
    if !req.reason.is_empty() {
        body.push_str(&format!(" Reason given: {}", req.reason));
    }
    if markup {
        body = display::markup(&body);
    }
    let actions = vec![
        "once",
        "Allow once",
        "always",
        "Always allow",
        "deny",
        "Deny",
    ];
    // Critical (urgency 2): the spec's servers keep it until answered, and
    // KDE Plasma shows critical popups during Do Not Disturb (its
    // notification applet's `urgencies` take CriticalUrgency while
    // inhibited when "Show critical notifications" is on, the default:
    // NotificationManager::Settings::criticalPopupsInDoNotDisturbMode) and
    // can keep them on top (`keepCriticalAlwaysOnTop`). `resident`: the
    // notification stays after an action until it is closed (we close
    // it). `x-kde-display-appname`: the name Plasma shows as the sender,
    // instead of the raw app name. Servers ignore hints they do not know.
    let mut hints: HashMap<&str, Variant<'_>> = HashMap::new();
    hints.insert("urgency", Variant::U8(2));
    hints.insert("resident", Variant::Bool(true));
    hints.insert("transient", Variant::Bool(false));
    hints.insert(
        "x-kde-display-appname",
        Variant::from("Desktop context (contextd)"),
    );
    hints.insert("x-contextd-prompt", Variant::Bool(true));
    let icon = req.icon.clone().unwrap_or_else(|| "dialog-question".into());
    let reply = proxy
        .call_method(
            "Notify",
            &(
                "contextd",
                0u32,
                icon.as_str(),
                summary.as_str(),
                body.as_str(),
                actions,
                hints,
                i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
            ),
        )
        .await
        .map_err(|e| PromptError::NoUi(format!("no notification server: {e}")))?;
    let id: u32 = reply
        .body()
        .deserialize()
        .map_err(|e| PromptError::Failed(format!("Notify replied oddly: {e}")))?;
    let wait = async {
        loop {
            tokio::select! {
                _ = withdraw.cancelled() => return Err(PromptError::Withdrawn),
                m = invoked.next() => {
                    let Some(m) = m else { return Err(PromptError::Failed("the notification server left".into())) };
                    let Ok((nid, key)) = m.body().deserialize::<(u32, String)>() else { continue };
                    if nid != id { continue }
                    return match key.as_str() {
                        "once" => Ok(Answer::Once),
                        "always" => Ok(Answer::Always),
                        "deny" => Ok(Answer::Deny),
                        _ => Err(PromptError::Dismissed),
                    };
                }
                m = closed.next() => {
                    let Some(m) = m else { return Err(PromptError::Failed("the notification server left".into())) };
                    let Ok((nid, reason)) = m.body().deserialize::<(u32, u32)>() else { continue };
                    // 1: it expired (the user may be away: no refusal
                    // of theirs); else they dismissed it (or it closed).
                    if nid == id {
                        return Err(if reason == 1 { PromptError::Timeout } else { PromptError::Dismissed });
                    }
                }
            }
        }
    };
    let r = tokio::time::timeout(timeout, wait)
        .await
        .unwrap_or(Err(PromptError::Timeout));
    // Take the prompt off the screen, whatever happened.
    let _ = proxy.call_method("CloseNotification", &(id,)).await;
    r
}

impl Prompter for DBusPrompter {
    fn ask(
        &self,
        req: PromptRequest,
        timeout: Duration,
        withdraw: CancellationToken,
    ) -> BoxFut<'static, Result<Answer, PromptError>> {
        let this = self.clone();
        let mut req = req;
        Box::pin(async move {
            if req.display_name.is_none() {
                let id = req.app.to_string();
                if let Ok(Some(found)) =
                    tokio::task::spawn_blocking(move || crate::desktop_entry::display_of(&id)).await
                {
                    req.display_name = Some(found.name);
                    req.icon = found.icon;
                }
            }
            // The name and icon a desktop entry claims, as every prompt
            // surface shows text from apps.
            let req = req.cleaned();
            if let Some(agent) = this.agents.current() {
                let asked = tokio::time::timeout(timeout, ask_agent(&this.conn, &agent, &req));
                return tokio::select! {
                    r = asked => r.unwrap_or(Err(PromptError::Timeout)),
                    _ = withdraw.cancelled() => {
                        cancel_agent(&this.conn, &agent, &req).await;
                        Err(PromptError::Withdrawn)
                    }
                };
            }
            if let Some(r) = this.ask_portal(&req, timeout, &withdraw).await {
                return r;
            }
            ask_notification(&this.conn, &req, timeout, withdraw).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        let none = HashMap::new();
        assert_eq!(parse_answer("once", &none), Ok(Answer::Once));
        assert_eq!(parse_answer("always", &none), Ok(Answer::Always));
        assert_eq!(parse_answer("deny", &none), Ok(Answer::Deny));
        assert!(parse_answer("duration", &none).is_err());
        // Escape: declined (no cool-down), unlike an empty answer.
        assert_eq!(parse_answer("cancel", &none), Err(PromptError::Declined));
        assert_eq!(parse_answer("", &none), Err(PromptError::Dismissed));
        let mut o = HashMap::new();
        o.insert("duration_s".to_owned(), OwnedVariant::from(3600u32));
        assert_eq!(
            parse_answer("duration", &o),
            Ok(Answer::For(chrono::Duration::seconds(3600)))
        );
        assert!(matches!(
            parse_answer("maybe", &none),
            Err(PromptError::Failed(_))
        ));
    }
}

//! What the user's own management tools see (`Consent1` for settings
//! panels, `contextctl consent`, the dashboard): the apps that asked, the
//! decisions, the audit. Typed views like `core::view`'s, rendered by each
//! publisher.
//!
//! Who may call them is decided in two steps. First here, for every
//! publisher ([`Core::may_manage`]): the user's controls are the user's
//! alone, so a sandboxed app (Flatpak, Snap: the boundary consent binds)
//! never reaches them, whatever polkit would say, and nobody answers its
//! own question ([`Core::may_answer`]). Then the publisher's
//! authentication (polkit on D-Bus, naming the caller and the change).

use serde::Serialize;

use super::Core;
use super::consent::{AuditQuery, Origin};
use super::error::{Error, Result};
use super::subject::Subject;
use super::view::time;
use crate::model::Category;

/// Why a sandboxed caller is refused, for its error and the journal.
const SANDBOXED: &str = "an app in a sandbox never reaches the user's own controls \
     (the user decides in the dashboard, a settings panel or contextctl)";

/// An app that asked for context, and how it was identified.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AppView {
    pub(crate) app_id: String,
    pub(crate) identity_source: &'static str,
    pub(crate) first_seen: String,
    pub(crate) last_seen: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) icon: Option<String>,
}

/// A live decision: the user's, or policy.toml's (origin `policy`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct GrantView {
    pub(crate) app_id: String,
    /// A category, or `*` for a policy grant of everything.
    pub(crate) category: String,
    pub(crate) decision: &'static str,
    pub(crate) origin: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expires: Option<String>,
}

/// One row of the audit log (identical decisions folded, with a count).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AuditView {
    pub(crate) time: String,
    pub(crate) app_id: String,
    pub(crate) category: String,
    pub(crate) channel: &'static str,
    /// What the app called (see `core::consent::AuditEntry::request`).
    pub(crate) request: String,
    pub(crate) allowed: bool,
    pub(crate) reason: String,
    pub(crate) count: u64,
}

impl Core {
    /// Whether `who` may use the user's own controls for `what` (the
    /// call, for the message and the journal). Refused, before any
    /// authentication is asked, for a sandboxed app: its id comes from its
    /// sandbox, and a polkit dialog it caused would look like the user's
    /// own action. Every refusal is logged with the caller and the call.
    pub(crate) fn may_manage(&self, who: &Subject, what: &str) -> Result<()> {
        if who.source.is_sandboxed() {
            tracing::warn!(
                app = %who.app_id,
                identity = who.source.as_str(),
                channel = who.channel.as_str(),
                call = what,
                "refused: a sandboxed app reached for the user's controls"
            );
            return Err(Error::NotTheUser {
                app: who.app_id.clone(),
                what: what.to_owned(),
                why: SANDBOXED.to_owned(),
            });
        }
        Ok(())
    }

    /// Whether `who` may answer the waiting question `id`: never its own
    /// (an app that answers its own question grants itself). The
    /// question's app is the one the broker identified when it asked.
    /// The question, when it still waits (for the publisher's words of
    /// what is answered).
    pub(crate) fn may_answer(
        &self,
        who: &Subject,
        id: u64,
    ) -> Result<Option<super::prompts::PendingView>> {
        self.may_manage(who, "answer a consent question")?;
        let question = self.prompts.pending_one(id);
        if question
            .as_ref()
            .is_some_and(|q| q.app_id == who.app_id.as_str())
        {
            tracing::warn!(app = %who.app_id, id, "refused: an app answered its own question");
            return Err(Error::NotTheUser {
                app: who.app_id.clone(),
                what: "answer a consent question".to_owned(),
                why: "nobody answers its own question: the user answers it".to_owned(),
            });
        }
        Ok(question)
    }

    /// The user's own view of who uses the microphone, camera or screen
    /// since `since` (the dashboard): every app, no consent (it is the
    /// user asking), from the timeline when there is one.
    pub(crate) async fn owner_captures(
        &self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<super::read::CapturesView> {
        self.capture_sessions(since, self.clock.now(), true).await
    }

    /// The user's own view of what plays and records now.
    pub(crate) fn owner_media(&self) -> super::view::MediaView {
        let now = self.clock.now();
        self.state
            .read(|s| super::view::media(s, &|_: &Category| true, now))
    }

    /// The user's own time per app in `[since, until)`.
    pub(crate) async fn owner_summary(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<super::view::AppTotalsView>> {
        let totals = self.totals(since, until).await?;
        Ok(totals
            .iter()
            .filter_map(|t| super::view::AppTotalsView::new(t, &|_: &Category| true))
            .collect())
    }

    /// Every app that asked.
    pub(crate) fn apps(&self) -> Vec<AppView> {
        self.gate
            .apps()
            .iter()
            .map(|a| AppView {
                app_id: a.app_id.to_string(),
                identity_source: a.identity_source.as_str(),
                first_seen: time(&a.first_seen),
                last_seen: time(&a.last_seen),
                name: a.display_name.clone(),
                icon: a.icon.clone(),
            })
            .collect()
    }

    /// Every live decision.
    pub(crate) fn grants(&self) -> Vec<GrantView> {
        self.gate
            .grants()
            .iter()
            .map(|d| GrantView {
                app_id: d.app.to_string(),
                category: match &d.category {
                    Category::Provided(k) if k == "*" => "*".to_owned(),
                    c => c.to_string(),
                },
                decision: d.verdict.as_str(),
                origin: d.origin.as_str(),
                created: (d.origin != Origin::Policy).then(|| time(&d.created)),
                expires: d.expires.as_ref().map(time),
            })
            .collect()
    }

    /// The audit log, newest first.
    pub(crate) async fn audit(&self, q: AuditQuery) -> Result<Vec<AuditView>> {
        let store = self
            .gate
            .store()
            .ok_or_else(|| Error::Unavailable("no database: the audit log is not kept".into()))?;
        Ok(store
            .query_audit(q)
            .await?
            .iter()
            .map(|e| AuditView {
                time: time(&e.time),
                app_id: e.app.to_string(),
                category: e.category.to_string(),
                channel: e.channel.as_str(),
                request: e.request.clone(),
                allowed: e.allowed,
                reason: e.reason.clone(),
                count: e.count,
            })
            .collect())
    }
}

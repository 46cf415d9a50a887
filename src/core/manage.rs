//! What the user's own management tools see (`Consent1` for settings
//! panels, `contextctl consent`, the dashboard): the apps that asked, the
//! decisions, the audit. Typed views like `core::view`'s, rendered by each
//! publisher; who may call them (polkit on D-Bus) is the publisher's
//! authentication, decided before these are called.

use serde::Serialize;

use super::Core;
use super::consent::{AuditQuery, Origin};
use super::error::{Error, Result};
use super::view::time;
use crate::model::Category;

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

//! `org.contextd.Consent1`: the user manages what apps may see.
//! Documented in `dbus-interfaces/org.contextd.Consent1.xml`. Every call
//! is refused to sandboxed apps by the core (`Manage::may_manage`) and then
//! authorised with polkit (`org.contextd.manage-consent`), the dialog
//! naming the change and the caller; but `RegisterAgent`, which the
//! core's agent trust decides (`core::agents`). `AnswerPending` is also
//! refused to the app whose question it is (`Manage::may_answer`).

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use tokio_util::sync::CancellationToken;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::wire::ObjectPath;
use zbus::{Message, interface};

use super::Shared;
use super::agent::Agent;
use super::error::{Error, Result};
use super::polkit;
use super::served::{self, OnePass, Written, answer};
use super::wire::{self, Dict};
use crate::core::consent::{Answer, AuditQuery, Origin, Verdict};
use crate::core::manage::{AppView, AuditView, GrantView};
use crate::core::prompts::PendingView;
use crate::core::provide::ProviderView;
use crate::core::readers::ReaderView;
use crate::model::{AppId, Category};

pub(crate) struct Consent1 {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) fn app_arg(s: &str) -> Result<AppId> {
    AppId::new(s).map_err(|e| Error::InvalidArgs(format!("app: {e}")))
}

pub(crate) fn category_arg(s: &str) -> Result<Category> {
    s.parse::<Category>()
        .map_err(|e| Error::InvalidArgs(e.to_string()))
}

pub(crate) fn time_arg(name: &str, secs: i64) -> Result<Option<chrono::DateTime<Utc>>> {
    if secs == 0 {
        return Ok(None);
    }
    Utc.timestamp_opt(secs, 0)
        .single()
        .map(Some)
        .ok_or_else(|| Error::InvalidArgs(format!("{name}: {secs} is not a valid Unix time")))
}

/// polkit's details for a decision on one app and category.
fn manage_request(app: &AppId, category: &Category, summary: String) -> polkit::Request {
    polkit::Request {
        app: Some(app.to_string()),
        categories: vec![category.to_string()],
        summary,
        ..Default::default()
    }
}

/// The lists `Consent1` answers, each authorised once: the macro's
/// methods format them through `Dict`s, [`Served`] writes them once
/// ([`OnePass`]).
impl Consent1 {
    async fn apps(&self, hdr: &Header<'_>) -> Result<Vec<AppView>> {
        self.shared.authorize_manage(hdr).await?;
        Ok(self.shared.core.manage.apps())
    }

    async fn grants(&self, hdr: &Header<'_>) -> Result<Vec<GrantView>> {
        self.shared.authorize_manage(hdr).await?;
        Ok(self.shared.core.manage.grants())
    }

    async fn providers(&self, hdr: &Header<'_>) -> Result<Vec<ProviderView>> {
        self.shared.authorize_manage(hdr).await?;
        Ok(self.shared.core.provide.providers())
    }

    async fn audit(
        &self,
        hdr: &Header<'_>,
        (since, until, app, limit): (i64, i64, String, u32),
    ) -> Result<Vec<AuditView>> {
        let q = AuditQuery {
            since: time_arg("since", since)?,
            until: time_arg("until", until)?,
            app: if app.is_empty() {
                None
            } else {
                Some(app_arg(&app)?)
            },
            limit,
        };
        self.shared.authorize_manage(hdr).await?;
        Ok(self.shared.core.manage.audit(q).await?)
    }

    async fn pending(&self, hdr: &Header<'_>) -> Result<Vec<PendingView>> {
        self.shared.authorize_manage(hdr).await?;
        Ok(self.shared.core.ask.pending_prompts())
    }

    async fn readers(&self, hdr: &Header<'_>) -> Result<Vec<ReaderView>> {
        self.shared.authorize_manage(hdr).await?;
        Ok(self.shared.core.manage.readers())
    }
}

/// `Consent1`'s lists written once: member → arguments, view. Every
/// other member is the macro's.
impl OnePass for Consent1 {
    fn one_pass<'a>(&'a self, member: &str, msg: &'a Message) -> Option<served::Answer<'a>> {
        Some(match member {
            "ListApps" => answer(msg, move |(), hdr| async move {
                Written::list(&self.apps(&hdr).await?)
            }),
            "ListGrants" => answer(msg, move |(), hdr| async move {
                Written::list(&self.grants(&hdr).await?)
            }),
            "ListProviders" => answer(msg, move |(), hdr| async move {
                Written::list(&self.providers(&hdr).await?)
            }),
            "GetAudit" => answer(msg, move |args, hdr| async move {
                Written::list(&self.audit(&hdr, args).await?)
            }),
            "ListPending" => answer(msg, move |(), hdr| async move {
                Written::list(&self.pending(&hdr).await?)
            }),
            "ListReaders" => answer(msg, move |(), hdr| async move {
                Written::list(&self.readers(&hdr).await?)
            }),
            _ => return None,
        })
    }

    fn replies(&self) -> &served::ReplyHeaders {
        &self.shared.replies
    }
}

#[interface(name = "org.contextd.Consent1", introspection_docs = false)]
impl Consent1 {
    /// Every app that asked for context, with how it was identified.
    #[zbus(out_args("apps"))]
    async fn list_apps(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.apps(&hdr).await?)?)
    }

    /// Every live decision: the user's, and policy.toml's (origin `policy`).
    #[zbus(out_args("grants"))]
    async fn list_grants(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.grants(&hdr).await?)?)
    }

    /// Decide for `app` and `category`: `allow`, `deny` or `ask`, until
    /// `expires` (Unix seconds; 0 for never).
    async fn set_grant(
        &self,
        app: String,
        category: String,
        decision: String,
        expires: i64,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<()> {
        let app = app_arg(&app)?;
        let category = category_arg(&category)?;
        let verdict: Verdict = decision.parse()?;
        let expires = time_arg("expires", expires)?;
        if let Some(e) = expires
            && e <= self.shared.core.manage.now()
        {
            return Err(Error::InvalidArgs("expires is in the past".into()));
        }
        let who = self
            .shared
            .authorize_manage_for(
                &hdr,
                manage_request(
                    &app,
                    &category,
                    format!("{} {app} to see {category}", verdict.as_str()),
                ),
            )
            .await?;
        self.shared
            .core
            .manage
            .record_decision(&app, &category, verdict, expires, Origin::Manage)
            .await?;
        tracing::info!(by = %who.app_id, %app, %category, decision = verdict.as_str(), "decision set");
        Ok(())
    }

    /// Remove the user's decision for `app` and `category` (back to
    /// undecided). Live subscriptions that lose consent end at once.
    #[zbus(out_args("removed"))]
    async fn revoke(
        &self,
        app: String,
        category: String,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<bool> {
        let app = app_arg(&app)?;
        let category = category_arg(&category)?;
        self.shared
            .authorize_manage_for(
                &hdr,
                manage_request(
                    &app,
                    &category,
                    format!("remove the decision on {category} for {app}"),
                ),
            )
            .await?;
        Ok(self.shared.core.manage.revoke(&app, &category).await?)
    }

    /// Forget everything about `app`: decisions, its entry, its audit;
    /// what it has open (subscriptions, MCP sessions) ends.
    #[zbus(out_args("removed"))]
    async fn forget_app(&self, app: String, #[zbus(header)] hdr: Header<'_>) -> Result<u64> {
        let app = app_arg(&app)?;
        self.shared
            .authorize_manage_for(
                &hdr,
                polkit::Request {
                    summary: format!("forget every decision and the audit of {app}"),
                    app: Some(app.to_string()),
                    ..Default::default()
                },
            )
            .await?;
        Ok(self.shared.core.manage.forget_app(&app).await?)
    }

    /// Who publishes what now (kinds and since when, never the data), and
    /// the apps whose publications the user refused.
    #[zbus(out_args("providers"))]
    async fn list_providers(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.providers(&hdr).await?)?)
    }

    /// Let `app` publish context (org.contextd.Provider1), or refuse its
    /// publications: what it published goes at once, and its publishes
    /// fail with `NotAllowed` until allowed again.
    #[zbus(out_args("changed"))]
    async fn set_publishing(
        &self,
        app: String,
        allowed: bool,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<bool> {
        let app = app_arg(&app)?;
        let summary = if allowed {
            format!("let {app} publish context")
        } else {
            format!("refuse what {app} publishes")
        };
        self.shared
            .authorize_manage_for(
                &hdr,
                polkit::Request {
                    summary,
                    app: Some(app.to_string()),
                    ..Default::default()
                },
            )
            .await?;
        Ok(self
            .shared
            .core
            .provide
            .set_publishing(&app, allowed)
            .await?)
    }

    /// The audit log, newest first.
    #[zbus(out_args("entries"))]
    async fn get_audit(
        &self,
        since: i64,
        until: i64,
        app: String,
        limit: u32,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<Vec<Dict>> {
        Ok(wire::dicts(
            &self.audit(&hdr, (since, until, app, limit)).await?,
        )?)
    }

    /// Become the UI that answers prompts: the broker calls
    /// `org.contextd.ConsentAgent1.Ask` on `agent` at the caller. Only a
    /// trusted agent may (`core::agents`: GNOME Shell owning its name, or
    /// a program named in config.toml); that is the whole check, no polkit
    /// (the shell is the one that would show polkit's dialog).
    async fn register_agent(
        &self,
        agent: ObjectPath<'_>,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<()> {
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        let who = self.shared.caller(&hdr).await?;
        let subject = self.shared.subject(&hdr).await?;
        // Asked of the bus now, never taken from the caller.
        let owns_shell_name = super::agent::name_owner(&self.shared.conn, super::agent::SHELL_NAME)
            .await
            .is_some_and(|o| o == owner);
        let trusted = match self.shared.core.ask.trust_agent(
            &subject,
            who.executable.as_deref(),
            owns_shell_name,
        ) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(app = %who.app_id, error = %e, "consent agent refused");
                return Err(e.into());
            }
        };
        self.shared.agents.register(Agent {
            owner,
            path: agent.into(),
            trusted,
        });
        super::agent::announce(
            &self.shared.conn,
            &self.shared.core.ask,
            &self.shared.agents,
        )
        .await;
        tracing::info!(app = %who.app_id, "consent agent registered");
        Ok(())
    }

    async fn unregister_agent(
        &self,
        agent: ObjectPath<'_>,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<()> {
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default();
        if self.shared.agents.unregister(&owner, agent.as_str()) {
            super::agent::announce(
                &self.shared.conn,
                &self.shared.core.ask,
                &self.shared.agents,
            )
            .await;
            Ok(())
        } else {
            Err(Error::NotFound(format!(
                "no agent of yours at {}",
                agent.as_str()
            )))
        }
    }

    /// The global privacy switch: while set, nothing is handed out.
    async fn set_paused(&self, paused: bool, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        self.shared.authorize_manage(&hdr).await?;
        if self.shared.core.manage.set_paused(paused) {
            // No PropertiesChanged: it is broadcast, and the switch is the
            // user's business. Panels hear it as `Changed` (`grants`).
            tracing::info!(paused, "sharing paused state changed");
        }
        Ok(())
    }

    /// Whether sharing is paused: to management callers only (polkit, like
    /// every call here). An app learns of a pause only as refusals.
    #[zbus(property(emits_changed_signal = "false"))]
    async fn paused(&self, #[zbus(header)] hdr: Option<Header<'_>>) -> Result<bool> {
        let hdr = hdr.ok_or_else(|| Error::NotAllowed("no caller".into()))?;
        self.shared.authorize_manage(&hdr).await?;
        Ok(self.shared.core.manage.paused())
    }

    /// End the degraded state after the database could not be used: the
    /// user accepts the new database (undecided access is asked again).
    /// False when the broker was not degraded.
    #[zbus(out_args("ended"))]
    async fn dismiss_recovery(&self, #[zbus(header)] hdr: Header<'_>) -> Result<bool> {
        let who = self
            .shared
            .authorize_manage_for(
                &hdr,
                polkit::Request {
                    summary: "accept the new consent database and ask apps again".into(),
                    ..Default::default()
                },
            )
            .await?;
        let ended = self.shared.core.manage.end_recovery().await?;
        if ended {
            tracing::info!(by = %who.app_id, "recovery dismissed: no longer degraded");
        }
        Ok(ended)
    }

    /// The user's decisions, token names, refused publishers and (with
    /// `history`) the timeline, as versioned JSON Lines.
    #[zbus(out_args("data"))]
    async fn export(&self, history: bool, #[zbus(header)] hdr: Header<'_>) -> Result<String> {
        let who = self
            .shared
            .authorize_manage_for(
                &hdr,
                polkit::Request {
                    summary: "export your consent decisions".into(),
                    ..Default::default()
                },
            )
            .await?;
        let data = self.shared.core.manage.export(history).await?;
        tracing::info!(by = %who.app_id, history, "exported");
        Ok(data)
    }

    /// Merge an export (see Export) into what is here: the newer decision
    /// wins, a deny beats an allow on a tie. A bad line changes nothing.
    #[zbus(out_args("report"))]
    async fn import(&self, data: String, #[zbus(header)] hdr: Header<'_>) -> Result<Dict> {
        let who = self
            .shared
            .authorize_manage_for(
                &hdr,
                polkit::Request {
                    summary: "import consent decisions and history from a file".into(),
                    ..Default::default()
                },
            )
            .await?;
        let report = self.shared.core.manage.import(&data).await?;
        tracing::info!(by = %who.app_id, decisions = report.decisions, history = report.history, "imported");
        Ok(wire::dict(&report)?)
    }

    /// Re-encrypt the database under a new key, stored where the old one
    /// was; returns where that is.
    #[zbus(out_args("kept_in"))]
    async fn rotate_key(&self, #[zbus(header)] hdr: Header<'_>) -> Result<String> {
        let who = self
            .shared
            .authorize_manage_for(
                &hdr,
                polkit::Request {
                    summary: "re-encrypt the consent database under a new key".into(),
                    ..Default::default()
                },
            )
            .await?;
        let at = self.shared.core.manage.rotate_key().await?;
        tracing::info!(by = %who.app_id, "database key rotated");
        Ok(at)
    }

    /// Why the broker runs degraded (its database could not be used), or
    /// the empty string.
    #[zbus(property(emits_changed_signal = "false"))]
    async fn recovery(&self, #[zbus(header)] hdr: Option<Header<'_>>) -> Result<String> {
        let hdr = hdr.ok_or_else(|| Error::NotAllowed("no caller".into()))?;
        self.shared.authorize_manage(&hdr).await?;
        Ok(self.shared.core.manage.recovery().unwrap_or_default())
    }

    /// Send the caller `Changed` (only to it) until it leaves the bus.
    async fn watch_changes(&self, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        self.shared.authorize_manage(&hdr).await?;
        let owner = hdr
            .sender()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| Error::Failed("message has no sender".into()))?;
        self.shared
            .consent_watchers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(owner);
        Ok(())
    }

    /// The consent prompts waiting for the user, oldest first.
    #[zbus(out_args("prompts"))]
    async fn list_pending(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.pending(&hdr).await?)?)
    }

    /// Answer the waiting prompt `id` (from `ListPending`).
    #[zbus(out_args("answered"))]
    async fn answer_pending(
        &self,
        id: u64,
        answer: String,
        duration_s: u32,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<bool> {
        let parsed = Answer::parse(&answer, Some(i64::from(duration_s)))
            .map_err(Error::InvalidArgs)?
            .ok_or_else(|| {
                Error::InvalidArgs("answer with once, always, duration or deny".into())
            })?;
        let subject = self.shared.subject(&hdr).await?;
        let question = self.shared.core.manage.may_answer(&subject, id)?;
        let who = self
            .shared
            .authorize_manage_for(
                &hdr,
                match question {
                    Some(p) => polkit::Request {
                        summary: format!(
                            "answer \"{answer}\" to {}'s question about {}",
                            p.app_id,
                            p.categories.0.join(", ")
                        ),
                        app: Some(p.app_id),
                        categories: p.categories.0,
                        ..Default::default()
                    },
                    None => polkit::Request {
                        summary: format!("answer \"{answer}\" to consent question {id}"),
                        ..Default::default()
                    },
                },
            )
            .await?;
        let answered = self.shared.core.ask.answer_prompt(id, parsed);
        tracing::info!(by = %who.app_id, id, answer, answered, "prompt answered from a panel");
        Ok(answered)
    }

    /// A URL that opens the privacy dashboard, with a one-time ticket.
    #[zbus(out_args("url"))]
    async fn open_dashboard(&self, #[zbus(header)] hdr: Header<'_>) -> Result<String> {
        let who = self.shared.authorize_manage(&hdr).await?;
        let url = self.shared.core.manage.dashboard_url()?;
        tracing::info!(by = %who.app_id, "dashboard link issued");
        Ok(url)
    }

    /// Who is reading now: live subscriptions and MCP sessions.
    #[zbus(out_args("readers"))]
    async fn list_readers(&self, #[zbus(header)] hdr: Header<'_>) -> Result<Vec<Dict>> {
        Ok(wire::dicts(&self.readers(&hdr).await?)?)
    }

    /// End the reader `id` (from `ListReaders`) now: a subscription gets
    /// `Revoked`, an MCP session is closed. False when it is gone already.
    #[zbus(out_args("ended"))]
    async fn end_reader(&self, id: u64, #[zbus(header)] hdr: Header<'_>) -> Result<bool> {
        let who = self.shared.authorize_manage(&hdr).await?;
        let ended = self.shared.core.manage.end_reader(id);
        if ended {
            tracing::info!(by = %who.app_id, id, "reader ended by the user");
        }
        Ok(ended)
    }

    /// What changed, so that a panel re-reads only that: `grants`,
    /// `apps`, `audit`, `pending`, `providers`, `readers`.
    #[zbus(signal)]
    async fn changed(emitter: &SignalEmitter<'_>, parts: &[&str]) -> zbus::Result<()>;
}

/// Announce what changed (`Changed`) to the panels that asked, gathered
/// as `core::notice::Listener` gathers it.
pub(crate) async fn watch_changes(shared: Arc<Shared>, cancel: CancellationToken) {
    let mut listener = shared.core.manage.control_changes();
    while let Some(parts) = listener.next(&cancel).await {
        let names: Vec<&str> = parts.iter().map(|p| p.as_str()).collect();
        let watchers: Vec<String> = shared
            .consent_watchers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        for w in watchers {
            let Ok(dest) = zbus::names::BusName::try_from(w.as_str()) else {
                continue;
            };
            let emitter = match SignalEmitter::new(&shared.conn, super::PATH) {
                Ok(e) => e.set_destination(dest),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot announce consent changes");
                    break;
                }
            };
            if let Err(e) = Consent1::changed(&emitter, &names).await {
                tracing::debug!(error = %e, watcher = %w, "cannot send Consent1.Changed");
            }
        }
    }
}

//! The D-Bus publisher: adapts the core to `org.contextd.*` interfaces on
//! the session bus. Converts wire types to domain types, asks the gate,
//! formats; decides nothing itself.

pub(crate) mod agent;
pub(crate) mod callers;
pub(crate) mod consent1;
pub(crate) mod context1;
pub(crate) mod error;
pub(crate) mod history1;
pub(crate) mod indicator1;
pub(crate) mod polkit;
pub(crate) mod portal;
pub(crate) mod provider1;
pub(crate) mod request;
pub(crate) mod sendq;
pub(crate) mod served;
pub(crate) mod sni;
pub(crate) mod subscription;
pub(crate) mod window_reports1;
pub(crate) mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::StreamExt;
use tokio_util::task::TaskTracker;
use zbus::Connection;
use zbus::fdo::DBusProxy;
use zbus::message::Header;

use crate::core::indicators::Indicators;
use crate::core::manage::Manage;
use crate::core::prompts::Ask;
use crate::core::provide::Provide;
use crate::core::read::Read;
use crate::core::read::Reads;
use crate::core::reports::Reports;
use crate::core::watch::Watches;
use crate::core::{Mode, Subject};
use crate::shutdown::Level;
use callers::Caller;
use error::Result;

pub(crate) use crate::names::{BUS_NAME, PATH};

/// The core's handles the D-Bus publisher uses: its interfaces cover
/// every area (reads and subscriptions, the user's controls, providers,
/// the consent agents, the shell's window reports, the indicators).
#[derive(Debug)]
pub(crate) struct Handles {
    pub(crate) reads: Reads,
    pub(crate) watches: Watches,
    pub(crate) manage: Manage,
    pub(crate) provide: Provide,
    pub(crate) ask: Ask,
    pub(crate) reports: Reports,
    pub(crate) indicators: Indicators,
}

/// What every interface of the D-Bus publisher shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) core: Arc<Handles>,
    pub(crate) conn: Connection,
    pub(crate) callers: callers::Callers,
    pub(crate) subs: Arc<subscription::Subscriptions>,
    pub(crate) agents: Arc<agent::Agents>,
    /// Unique names of the panels that asked for `Consent1.Changed`
    /// (`WatchChanges`): the signal goes to each, never to the bus.
    pub(crate) consent_watchers: std::sync::Mutex<std::collections::BTreeSet<String>>,
    pub(crate) polkit: polkit::Polkit,
    /// The publishers' tracker: tasks that outlive a call (a request's
    /// answer) are spawned here, so that shutdown joins them.
    pub(crate) tasks: TaskTracker,
    /// The runtime that renders subscriptions' signals (the main one):
    /// method calls run on the bus's own thread (`daemon::Lanes`), which
    /// must stay free to answer.
    pub(crate) work: tokio::runtime::Handle,
    next_request: AtomicU64,
    /// `RequestAccess`'s objects of open questions (`request::Open`).
    pub(crate) requests: request::Open,
    /// The privacy indicator: on or off, and the shell that shows its own
    /// (`Indicator1.Watch`; no StatusNotifierItem meanwhile).
    pub(crate) indicator: indicator1::IndicatorState,
    /// `GetActiveWindow`'s reply header for each caller.
    pub(crate) replies: context1::ReplyHeaders,
}

impl Shared {
    /// The identity of the sender of `hdr`.
    pub(crate) async fn caller(&self, hdr: &Header<'_>) -> Result<Arc<Caller>> {
        self.callers
            .identify(hdr.sender().map(|s| s.as_str()))
            .await
    }

    /// The consent subject of the sender of `hdr`.
    pub(crate) async fn subject(&self, hdr: &Header<'_>) -> Result<Subject> {
        Ok(self.caller(hdr).await?.subject())
    }

    /// A read by the sender of `hdr` through the core's read service. An
    /// undecided category answers `Pending` at once (`Mode::Access`): a
    /// D-Bus read never blocks on the user.
    pub(crate) async fn read<Q: Read>(
        &self,
        hdr: &Header<'_>,
        question: Q,
        mode: Mode,
    ) -> Result<Q::View> {
        let who = self.subject(hdr).await?;
        Ok(self.core.reads.read(&who, question, mode).await?)
    }

    /// Management calls: polkit `org.contextd.manage-consent` for the
    /// calling process, the details saying only which call it is.
    pub(crate) async fn authorize_manage(&self, hdr: &Header<'_>) -> Result<Arc<Caller>> {
        let operation = hdr.member().map(|m| m.to_string()).unwrap_or_default();
        self.authorize_manage_for(
            hdr,
            polkit::Request {
                summary: summary_of(&operation),
                operation,
                ..Default::default()
            },
        )
        .await
    }

    /// [`Self::authorize_manage`] with details naming the app and the
    /// categories the call changes, for the dialog and polkit's rules.
    pub(crate) async fn authorize_manage_for(
        &self,
        hdr: &Header<'_>,
        mut request: polkit::Request,
    ) -> Result<Arc<Caller>> {
        let who = self.caller(hdr).await?;
        if request.operation.is_empty() {
            request.operation = hdr.member().map(|m| m.to_string()).unwrap_or_default();
        }
        if request.summary.is_empty() {
            request.summary = summary_of(&request.operation);
        }
        // The core's rule first: a sandboxed caller is refused before
        // polkit shows anything (a dialog it caused would pass for the
        // user's own action).
        self.core
            .manage
            .may_manage(&who.subject(), &request.summary)?;
        // polkit's dialog names who asks, as pkexec names the program.
        request.caller = format!("{} (PID {})", who.app_id, who.pid);
        self.polkit
            .check(who.process(), polkit::MANAGE_CONSENT, &request)
            .await?;
        tracing::debug!(
            by = %who.app_id,
            pid = who.pid,
            call = %request.operation,
            change = %request.summary,
            "management call authorised"
        );
        Ok(who)
    }

    pub(crate) fn next_request(&self) -> u64 {
        self.next_request.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// The words polkit's dialog shows for a management call that names no
/// app or category.
fn summary_of(member: &str) -> String {
    match member {
        m if m.starts_with("List") || m.starts_with("Get") || m == "Audit" => {
            "see which apps may see your desktop context".to_owned()
        }
        "SetPaused" => "pause or resume sharing your desktop context".to_owned(),
        "OpenDashboard" => "open the privacy dashboard".to_owned(),
        _ => "change which apps may see your desktop context".to_owned(),
    }
}

/// The mode of a D-Bus read: an audited access that answers `Pending` at
/// once, recording the member called (`Context1.GetActiveWindow`).
pub(crate) fn access(hdr: &Header<'_>) -> Mode {
    let iface = hdr
        .interface()
        .map(|i| i.as_str().trim_start_matches("org.contextd."))
        .unwrap_or_default();
    let member = hdr.member().map(|m| m.as_str()).unwrap_or_default();
    // One allocation, no formatting machinery: every audited read makes one.
    let mut request = String::with_capacity(iface.len() + 1 + member.len());
    request.push_str(iface);
    request.push('.');
    request.push_str(member);
    Mode::Access { request }
}

/// Register every object on `conn` and start the tasks that serve them.
/// Call before requesting the bus name, so that no call finds an empty
/// path.
pub(crate) async fn serve(
    conn: &Connection,
    core: Arc<Handles>,
    history_enabled: bool,
    (sendq, bus): (Option<sendq::SendQueue>, Option<tokio::runtime::Handle>),
    level: &Level,
) -> zbus::Result<Arc<Shared>> {
    let dbus = DBusProxy::new(conn).await?;
    let agents = Arc::new(agent::Agents::default());
    core.ask.set_prompter(Arc::new(agent::DBusPrompter {
        conn: conn.clone(),
        agents: agents.clone(),
        callers: Arc::new(callers::Callers::new(dbus.clone())),
    }));
    agent::announce(conn, &core.ask, &agents).await;
    let shared = Arc::new(Shared {
        core: core.clone(),
        conn: conn.clone(),
        callers: callers::Callers::new(dbus.clone()),
        subs: Arc::new(subscription::Subscriptions::default()),
        agents,
        consent_watchers: std::sync::Mutex::new(std::collections::BTreeSet::new()),
        polkit: polkit::Polkit::default(),
        tasks: level.tracker(),
        work: tokio::runtime::Handle::current(),
        next_request: AtomicU64::new(0),
        requests: request::Open::default(),
        indicator: indicator1::IndicatorState::default(),
        replies: context1::ReplyHeaders::default(),
    });

    // The subscriptions' signals, written together (subscription::Outbox),
    // on the thread that answers method calls (`bus`, the runtime the
    // connection was built on) when there is one. Every write takes the
    // connection's write lock (a fair, async one), handed from holder to
    // waiter; from a task on the main runtime, each hand-over to or from
    // the signals' writer waited for that thread to be scheduled, and on a
    // saturated machine a `Peer.Ping`'s reply, queued behind a few such
    // hand-overs, waited tens of milliseconds for threads that were not
    // running. On one thread the lock passes without a wake-up.
    let writer =
        subscription::write_signals(conn.clone(), shared.subs.clone(), sendq, level.token());
    match &bus {
        Some(bus) => level.spawn_on(writer, bus),
        None => level.spawn(writer),
    };

    // Peers leaving: forget their identity, drop their subscriptions and
    // agents, retract what they published.
    let mut owner_changes = dbus.receive_name_owner_changed().await?;
    {
        let shared = shared.clone();
        let cancel = level.token();
        level.spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    sig = owner_changes.next() => {
                        let Some(sig) = sig else { break };
                        let Ok(args) = sig.args() else { continue };
                        let name = args.name().as_str();
                        if name == agent::SHELL_NAME
                            && let Some(old) = args.old_owner().as_ref()
                            && shared.agents.drop_shell(old.as_str())
                        {
                            agent::announce(&shared.conn, &shared.core.ask, &shared.agents).await;
                        }
                        if name.starts_with(':') && args.new_owner().is_none() {
                            shared.callers.forget(name);
                            shared.replies.forget(name);
                            if shared.agents.drop_owner(name) {
                                agent::announce(&shared.conn, &shared.core.ask, &shared.agents).await;
                            }
                            shared.core.provide.provider_gone(name);
                            indicator1::peer_gone(&shared, name);
                            shared
                                .consent_watchers
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .remove(name);
                            subscription::drop_owner(&shared.conn, &shared.subs, name).await;
                        }
                    }
                }
            }
        });
    }

    conn.object_server()
        .at(
            PATH,
            context1::Served(context1::Context1 {
                shared: shared.clone(),
            }),
        )
        .await?;
    conn.object_server()
        .at(
            PATH,
            served::Served(history1::History1 {
                shared: shared.clone(),
                enabled: history_enabled,
            }),
        )
        .await?;
    conn.object_server()
        .at(
            PATH,
            provider1::Provider1 {
                shared: shared.clone(),
            },
        )
        .await?;
    conn.object_server()
        .at(
            PATH,
            served::Served(consent1::Consent1 {
                shared: shared.clone(),
            }),
        )
        .await?;
    // Who owns the shells' names, followed before WindowReports1 is served.
    let shell_owners = Arc::new(window_reports1::NameOwners::default());
    level.spawn(window_reports1::follow_shell_names(
        core.clone(),
        shell_owners.clone(),
        window_reports1::shell_name_changes(&dbus).await,
        level.token(),
    ));
    let shell_owners_for_indicator = shell_owners.clone();
    conn.object_server()
        .at(
            PATH,
            window_reports1::WindowReports1 {
                shared: shared.clone(),
                owners: shell_owners,
            },
        )
        .await?;
    level.spawn(consent1::watch_changes(shared.clone(), level.token()));
    indicator1::serve(&shared, shell_owners_for_indicator, level).await?;
    until_serving(conn).await?;
    Ok(shared)
}

/// Wait until the object server answers calls.
///
/// On a connection that is already built, zbus starts the object server's
/// dispatch task in the background when the first object is added; a
/// method call that arrives before that task listens is dropped, and its
/// caller waits forever. That is exactly when a D-Bus-activated client's
/// first call arrives (right after the name is acquired), and it happened
/// in the tests under load. So ping ourselves through the bus until the
/// object server answers, and only then let the caller request the name.
async fn until_serving(conn: &Connection) -> zbus::Result<()> {
    let Some(me) = conn.unique_name().map(|n| n.to_string()) else {
        // A peer-to-peer connection: nothing routes calls before we serve.
        return Ok(());
    };
    let mut wait = std::time::Duration::from_millis(10);
    for _ in 0..20 {
        let ping = conn.call_method(
            Some(me.as_str()),
            PATH,
            Some("org.freedesktop.DBus.Peer"),
            "Ping",
            &(),
        );
        match tokio::time::timeout(wait, ping).await {
            Ok(r) => return r.map(|_| ()),
            Err(_) => {
                tracing::debug!("the object server does not answer yet; pinging again");
                wait = (wait * 2).min(std::time::Duration::from_millis(500));
            }
        }
    }
    Err(zbus::Error::Failure(
        "the object server did not start answering calls".into(),
    ))
}

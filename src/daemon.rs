//! The daemon: wires sources → core → publishers, owns the bus name, and
//! shuts everything down in order.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use inotify::{Inotify, WatchMask};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use zbus::Connection;
use zbus::fdo::{DBusProxy, RequestNameFlags, RequestNameReply};
use zbus::names::{BusName, WellKnownName};

use crate::config::{Config, UndecidedMode};
use crate::core::consent::{ConsentStore, Verdict};
use crate::core::{Core, Gate, GateSettings, SourceEvent, SystemClock};
use crate::dbus::{self, BUS_NAME};
use crate::sources;
use crate::store;

/// Name of the pseudo-source that reports the health of policy.toml.
pub const POLICY_SOURCE: &str = "policy";

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{BUS_NAME} is already owned by {owner}{}; run with --replace to take it over", .pid.map(|p| format!(" (PID {p})")).unwrap_or_default())]
    NameTaken { owner: String, pid: Option<u32> },
    #[error("cannot connect to the session bus: {0}")]
    Bus(#[source] zbus::Error),
    #[error("D-Bus error: {0}")]
    DBus(#[from] zbus::Error),
    #[error("D-Bus error: {0}")]
    Fdo(#[from] zbus::fdo::Error),
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{0}")]
    Store(String),
    #[error("{0}")]
    Mcp(#[from] crate::mcp::McpError),
}

/// How the daemon ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop (signal, or the shutdown future).
    Shutdown,
    /// Another instance took the bus name (`--replace`).
    NameLost,
}

/// Run the daemon until `shutdown` completes or the bus name is lost.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<Exit, DaemonError> {
    let conn = zbus::connection::Builder::session()
        .build()
        .await
        .map_err(DaemonError::Bus)?;
    run_on(conn, config, shutdown).await
}

/// [`run`] on an existing connection (tests use a private bus).
pub async fn run_on(
    conn: Connection,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<Exit, DaemonError> {
    // A bad [mcp.http] (a non-loopback address without allow_remote) stops
    // the start before anything else happens.
    crate::mcp::preflight(&config)?;
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    // A scripted clock only for replays that ask for one (timeline tests).
    let manual = match (&config.replay, config.fake_clock) {
        (Some(_), Some(at)) => Some(crate::core::clock::ManualClock::new(at)),
        _ => None,
    };
    let clock: Arc<dyn crate::core::Clock> = match &manual {
        Some(m) => m.clone(),
        None => Arc::new(SystemClock),
    };

    // The encrypted store first: a wrong key must stop the daemon before
    // anything is served.
    let consent = &config.file.consent;
    let db_path = config.paths.database();
    let (key, key_source) = store::key::load(&config.paths.state_dir, &db_path, Some(&conn))
        .await
        .map_err(|e| DaemonError::Store(e.to_string()))?;
    let (db, db_tasks) = store::Db::open(&db_path, &key, &key_source)
        .await
        .map_err(|e| DaemonError::Store(e.to_string()))?;
    drop(key);
    let loaded = db
        .load()
        .await
        .map_err(|e| DaemonError::Store(e.to_string()))?;
    tracing::info!(path = %db_path.display(), key = %key_source, decisions = loaded.decisions.len(), "database open");
    let settings = GateSettings {
        undecided: match consent.undecided {
            UndecidedMode::Ask => Verdict::Ask,
            UndecidedMode::Deny => Verdict::Deny,
        },
        cooldown: chrono::Duration::seconds(i64::try_from(consent.cooldown_s).unwrap_or(30)),
    };
    let store: Arc<dyn ConsentStore> = Arc::new(db.clone());
    let gate = Gate::with_store(
        config.paths.policy_file(),
        clock.clone(),
        Some(store),
        loaded,
        settings,
    );
    let core = Core::with_gate(
        gate,
        clock,
        Duration::from_secs(consent.prompt_timeout_s.max(1)),
    );
    let audit_keep = chrono::Duration::days(i64::from(consent.audit_days.max(1)));
    // The database task has its own token: it is stopped last, after every
    // task that audits, so that the last entries are written.
    let db_cancel = CancellationToken::new();
    // The timeline: recorded from every change, in order, as it is
    // applied; written by its own task in batches.
    let (history, history_writer, next_id) = store::history::History::open(db.pool().clone())
        .await
        .map_err(|e| DaemonError::Store(e.to_string()))?;
    core.set_history(Arc::new(history.clone()));
    let history_settings = config.file.history.clone();
    core.state.set_observer(Box::new(HistoryObserver {
        recorder: crate::core::history::Recorder::new(history_settings.clone(), next_id),
        history: history.clone(),
    }));
    let history_cancel = CancellationToken::new();
    let history_task = tokio::spawn(history_writer.run(history_cancel.clone()));
    {
        // Retention: at start and once a day.
        let history = history.clone();
        let core = core.clone();
        let settings = history_settings.clone();
        let cancel = cancel.child_token();
        tasks.spawn(async move {
            let mut daily = tokio::time::interval(Duration::from_secs(24 * 3600));
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = daily.tick() => {
                        match history.purge(&settings, core.clock.now()).await {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(rows = n, "history retention: purged"),
                            Err(e) => tracing::warn!(error = %e, "history retention failed"),
                        }
                    }
                }
            }
        });
    }
    {
        // Pause stops recording at once.
        let core = core.clone();
        let cancel = cancel.child_token();
        let mut generation = core.gate.watch_generation();
        tasks.spawn(async move {
            let mut paused = false;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    r = generation.changed() => {
                        if r.is_err() { break; }
                        let now = core.gate.paused();
                        if now != paused {
                            paused = now;
                            core.state.observer_paused(now);
                        }
                    }
                }
            }
        });
    }
    let tokens: Arc<dyn crate::core::tokens::TokenStore> = Arc::new(
        store::tokens::DbTokenStore::open(db.pool().clone())
            .await
            .map_err(|e| DaemonError::Store(e.to_string()))?,
    );
    let db_task = tokio::spawn(db_tasks.run(db, audit_keep, db_cancel.clone()));

    // Events from every source go through one channel to the state.
    let (tx, mut rx) = mpsc::channel::<SourceEvent>(1024);
    {
        let core = core.clone();
        tasks.spawn(async move {
            while let Some(ev) = rx.recv().await {
                if let SourceEvent::Clock { at } = ev {
                    if let Some(m) = &manual {
                        m.set(at);
                    }
                    continue;
                }
                core.state.apply(ev);
            }
        });
    }

    load_policy(&core, &tx).await;
    let inotify = watch_config_dir(&config.paths.config_dir);
    tasks.spawn(policy_watcher(
        core.clone(),
        tx.clone(),
        inotify,
        cancel.child_token(),
    ));

    let ctx = sources::SourceContext {
        tx: tx.clone(),
        cancel: cancel.child_token(),
        config: Arc::new(config.clone()),
        own_names: conn
            .unique_name()
            .map(|n| n.to_string())
            .into_iter()
            .collect(),
    };
    sources::spawn_all(&ctx, &mut tasks);
    drop(ctx);
    drop(tx);

    // Every object is served before the name is requested, so that no
    // activated client finds an empty path.
    let _shared = dbus::serve(
        &conn,
        core.clone(),
        history_settings.enabled,
        &mut tasks,
        cancel.child_token(),
    )
    .await?;
    let dbus_proxy = DBusProxy::new(&conn).await?;
    let mut lost = dbus_proxy.receive_name_lost().await?;
    let mut flags = RequestNameFlags::DO_NOT_QUEUE | RequestNameFlags::ALLOW_REPLACEMENT;
    if config.replace {
        flags |= RequestNameFlags::REPLACE_EXISTING;
    }
    let name = WellKnownName::from_static_str_unchecked(BUS_NAME);
    match dbus_proxy.request_name(name.clone(), flags).await? {
        RequestNameReply::PrimaryOwner | RequestNameReply::AlreadyOwner => {}
        RequestNameReply::Exists | RequestNameReply::InQueue => {
            cancel.cancel();
            let (owner, pid) = name_owner(&dbus_proxy).await;
            stop(tasks).await;
            history_cancel.cancel();
            let _ = history_task.await;
            db_cancel.cancel();
            let _ = db_task.await;
            return Err(DaemonError::NameTaken { owner, pid });
        }
    }
    tracing::info!(name = BUS_NAME, "serving on the session bus");

    // MCP after the name is ours: a second instance must not take the
    // first one's socket. Clients that activated us wait for the socket.
    if let Err(e) = crate::mcp::serve(
        &config,
        core.clone(),
        Some(conn.clone()),
        tokens,
        &mut tasks,
        cancel.child_token(),
    )
    .await
    {
        cancel.cancel();
        let _ = dbus_proxy.release_name(name).await;
        stop(tasks).await;
        return Err(e.into());
    }

    tokio::pin!(shutdown);
    let exit = loop {
        tokio::select! {
            _ = &mut shutdown => break Exit::Shutdown,
            sig = lost.next() => {
                match sig {
                    Some(sig) => {
                        if sig.args().is_ok_and(|a| a.name().as_str() == BUS_NAME) {
                            tracing::info!("another instance took {BUS_NAME}; exiting");
                            break Exit::NameLost;
                        }
                    }
                    None => break Exit::NameLost,
                }
            }
        }
    };
    cancel.cancel();
    if exit == Exit::Shutdown {
        // Release first, so that a new instance can start at once.
        if let Err(e) = dbus_proxy.release_name(name).await {
            tracing::debug!(error = %e, "release of the name failed");
        }
    }
    stop(tasks).await;
    // Close the open intervals and let the writers finish.
    core.state.observer_paused(true);
    history_cancel.cancel();
    let _ = tokio::time::timeout(Duration::from_millis(150), history_task).await;
    db_cancel.cancel();
    if tokio::time::timeout(Duration::from_millis(250), db_task)
        .await
        .is_err()
    {
        tracing::warn!("the database did not close in time");
    }
    Ok(exit)
}

/// Wait for every task, but never longer than the 1 s a stop may take.
async fn stop(mut tasks: JoinSet<()>) {
    let joined = tokio::time::timeout(Duration::from_millis(700), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        tracing::warn!(
            left = tasks.len(),
            "tasks did not stop in time; aborting them"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

async fn name_owner(dbus: &DBusProxy<'_>) -> (String, Option<u32>) {
    let name = BusName::from(WellKnownName::from_static_str_unchecked(BUS_NAME));
    let Ok(owner) = dbus.get_name_owner(name).await else {
        return ("another process".into(), None);
    };
    let pid = dbus
        .get_connection_unix_process_id(BusName::from(owner.clone().into_inner()))
        .await
        .ok();
    (owner.to_string(), pid)
}

/// Load policy.toml and report its health as the `policy` source: an error
/// (with its line) shows in `ListSources`, and the last good policy stays.
async fn load_policy(core: &Core, tx: &mpsc::Sender<SourceEvent>) {
    let error = match core.gate.reload() {
        Ok(()) => {
            tracing::info!(path = %core.gate.policy_path().display(), "policy loaded");
            None
        }
        Err(e) => {
            tracing::error!("{e}; keeping the last good policy");
            Some(e.to_string())
        }
    };
    let _ = tx
        .send(SourceEvent::SourceStatus {
            source: POLICY_SOURCE.into(),
            available: true,
            error,
        })
        .await;
}

fn watch_config_dir(dir: &Path) -> Option<Inotify> {
    let setup = || -> std::io::Result<Inotify> {
        std::fs::create_dir_all(dir)?;
        let ino = Inotify::init()?;
        ino.watches().add(
            dir,
            WatchMask::CLOSE_WRITE
                | WatchMask::MOVED_TO
                | WatchMask::MOVED_FROM
                | WatchMask::CREATE
                | WatchMask::DELETE,
        )?;
        Ok(ino)
    };
    match setup() {
        Ok(i) => Some(i),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the config directory; policy.toml changes need a restart");
            None
        }
    }
}

/// Reload the policy when its file changes, and wake the gate when a grant
/// expires so that subscriptions end on time.
async fn policy_watcher(
    core: Arc<Core>,
    tx: mpsc::Sender<SourceEvent>,
    inotify: Option<Inotify>,
    cancel: CancellationToken,
) {
    let file_name = core
        .gate
        .policy_path()
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut stream = inotify.and_then(|i| i.into_event_stream(vec![0u8; 4096]).ok());
    // A new decision may bring a sooner expiry: recompute on every change.
    let mut generation = core.gate.watch_generation();
    loop {
        let expiry = core.gate.next_expiry();
        let sleep_for = expiry
            .and_then(|e| (e - core.clock.now()).to_std().ok())
            .unwrap_or(Duration::from_secs(24 * 3600));
        tokio::select! {
            _ = cancel.cancelled() => break,
            r = generation.changed() => {
                if r.is_err() {
                    break;
                }
            }
            _ = tokio::time::sleep(sleep_for + Duration::from_millis(1)) => {
                if expiry.is_some() {
                    core.gate.bump();
                }
            }
            ev = async {
                match stream.as_mut() {
                    Some(s) => s.next().await,
                    None => std::future::pending().await,
                }
            } => {
                match ev {
                    Some(Ok(ev)) if ev.name.as_deref().map(PathBuf::from) == Some(file_name.clone()) => {
                        // Editors write in several steps; let them finish.
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        load_policy(&core, &tx).await;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "inotify failed; policy.toml changes need a restart");
                        stream = None;
                    }
                    None => stream = None,
                }
            }
        }
    }
}

/// Feeds the timeline from the state, synchronously and in order.
struct HistoryObserver {
    recorder: crate::core::history::Recorder,
    history: store::history::History,
}

impl crate::core::state::StateObserver for HistoryObserver {
    fn changes(&mut self, changes: &[crate::core::Change], now: chrono::DateTime<chrono::Utc>) {
        for c in changes {
            let ops = self.recorder.observe(c, now);
            if !ops.is_empty() {
                self.history.submit(ops);
            }
        }
    }

    fn paused(&mut self, paused: bool, now: chrono::DateTime<chrono::Utc>) {
        let ops = self.recorder.set_paused(paused, now);
        self.history.submit(ops);
    }
}

//! The daemon: wires sources → core → publishers, owns the bus name, and
//! shuts everything down in order, the same way on every exit path.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use zbus::Connection;
use zbus::fdo::{DBusProxy, RequestNameFlags, RequestNameReply};
use zbus::names::{BusName, WellKnownName};

use crate::config::{Config, UndecidedMode};
use crate::core::consent::{ConsentStore, Verdict};
use crate::core::lane::{OnLane, StoreLane};
use crate::core::{Core, Gate, GateSettings, SourceEvent, SystemClock};
use crate::dbus::{self, BUS_NAME, sendq::SendQueue};
use crate::shutdown::{Bounds, Lane, Tree};
use crate::sources;
use crate::store;

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
    /// The database key could not be found, made or read.
    #[error(transparent)]
    Key(#[from] store::KeyError),
    /// The database could not be opened (a wrong key among others).
    #[error(transparent)]
    Db(#[from] store::DbError),
    /// The database could not be opened nor set aside.
    #[error(transparent)]
    Recovery(#[from] store::recovery::RecoveryError),
    /// Reading the open database through core's store traits failed.
    #[error(transparent)]
    Store(#[from] crate::core::Error),
    /// The MCP tokens in the database could not be read or made.
    #[error("MCP tokens: {0}")]
    Tokens(#[from] crate::core::tokens::TokenError),
    #[error("{0}")]
    Mcp(#[from] crate::mcp::McpError),
    #[error(transparent)]
    Dashboard(#[from] crate::dashboard::DashboardError),
}

/// How the daemon ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop (signal, or the shutdown future).
    Shutdown,
    /// The session bus closed the connection (the session ended).
    BusGone,
    /// The bus name was lost, which never happens by our will (it is
    /// not given to `REPLACE_EXISTING`; `--replace` stops the running
    /// broker instead): `contextd` exits non-zero, and systemd restarts it.
    NameLost,
}

/// Whether the last [`run`] left work running when it returned (a level
/// of its shutdown overran its bound: a slow disk, a stuck read). The
/// caller must then end the process with `_exit`, without the exit
/// handlers, which would free SQLCipher's memory under a statement still
/// running on a SQLite worker thread.
pub fn work_left_behind() -> bool {
    crate::shutdown::left_behind()
}

/// Run the daemon until `shutdown` completes or the bus name is lost.
///
/// The session bus connection is made on a thread of its own (the `bus`
/// lane, see [`Lanes`]): zbus reads the socket and runs each method call
/// on the runtime the connection was built on.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<Exit, DaemonError> {
    // Its thread wakes for each message and answers in well under a
    // millisecond: a short slice lets it run as soon as it is woken.
    let bus = Lane::start_answering("bus", BUS_SLICE).map_err(|error| DaemonError::Io {
        path: "the D-Bus thread".into(),
        error,
    })?;
    let (conn, sendq) = bus
        .handle()
        .spawn(connect_session())
        .await
        .map_err(|e| DaemonError::Io {
            path: "the D-Bus thread".into(),
            error: std::io::Error::other(e.to_string()),
        })?
        .map_err(DaemonError::Bus)?;
    run_with(conn, Some((bus, sendq)), config, shutdown).await
}

/// The session bus connection, and the gauge of its socket's queue
/// (`dbus::sendq`) when the bus is at a Unix socket path or abstract name
/// (always, in practice): the socket is made here so that the daemon keeps
/// a descriptor of it. Any other address goes through zbus alone.
async fn connect_session() -> zbus::Result<(Connection, Option<SendQueue>)> {
    use std::os::unix::net::UnixStream;
    use zbus::address::transport::{Transport, UnixSocket};
    let address = zbus::Address::session()?;
    let stream = match address.transport() {
        Transport::Unix(unix) => match unix.path() {
            UnixSocket::File(path) => Some(UnixStream::connect(path)),
            UnixSocket::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                Some(
                    std::os::unix::net::SocketAddr::from_abstract_name(name.as_encoded_bytes())
                        .and_then(|a| UnixStream::connect_addr(&a)),
                )
            }
            _ => None,
        },
        _ => None,
    };
    let Some(stream) = stream else {
        let conn = zbus::connection::Builder::session().build().await?;
        return Ok((conn, None));
    };
    let stream = stream.map_err(|e| zbus::Error::InputOutput(Arc::new(e)))?;
    let gauge = stream
        .try_clone()
        .map(|s| SendQueue::new(std::os::fd::OwnedFd::from(s)))
        .ok();
    let conn = zbus::connection::Builder::unix_stream(stream)
        .build()
        .await?;
    Ok((conn, gauge))
}

/// The bus thread's time slice (`shutdown::short_slice`): a sixth of
/// the kernel's default on two CPUs.
const BUS_SLICE: Duration = Duration::from_micros(500);

/// [`run`] on an existing connection (tests use a private bus).
pub async fn run_on(
    conn: Connection,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<Exit, DaemonError> {
    run_with(conn, None, config, shutdown).await
}

/// Every task is spawned into the levels of one [`Tree`], and every way
/// out (the shutdown future, `NameLost`, the name taken by another
/// instance, a publisher that fails to start, any other error once the
/// tree exists) ends in the same [`teardown`]. `bus`: the lane `conn` was
/// built on, if it has one, stopped last.
async fn run_with(
    conn: Connection,
    bus: Option<(Lane, Option<SendQueue>)>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<Exit, DaemonError> {
    // A bad [mcp.http] (a non-loopback address without allow_remote) stops
    // the start before anything else happens.
    crate::mcp::preflight(&config)?;
    crate::dashboard::check(&config.file.dashboard)?;
    // Before any process is identified: every source names processes alike.
    crate::identity::set_interpreters(config.file.identity.interpreters.clone());
    let tree = Tree::new();
    let (bus, sendq) = bus.map_or((None, None), |(lane, q)| (Some(lane), q));
    let lanes = Lanes::start(bus)?;
    let result = serve(&conn, &config, &tree, (&lanes, sendq), shutdown).await;
    teardown(&conn, &tree, &lanes).await;
    result
}

/// The runtimes beside the main one (`shutdown::Lane`).
///
/// Why lanes: on one runtime, whatever is busiest decides how long
/// everything else waits for a worker. The desktop comes first: a
/// `Peer.Ping`, the shell's focus report or a settings panel's call must
/// not wait behind AI hosts (the `mcp` lane) or behind rendering each
/// change for fifty subscribers (which stays on the main runtime: the
/// `bus` lane only reads the socket and runs the calls). A thread that
/// sleeps until a message arrives is woken at once by the kernel; a task
/// queued behind others on a busy worker waits for all of them.
struct Lanes {
    /// The session bus connection's own tasks and every method call
    /// (`run`); `None` when the caller brought its connection (tests).
    bus: Option<Lane>,
    /// MCP's hosts: their load must not queue ahead of D-Bus callers.
    mcp: Lane,
    /// The store's calls and writers (`core::lane`): a connection goes
    /// back to the pool without waiting behind the publishers' tasks.
    store: Lane,
}

impl Lanes {
    fn start(bus: Option<Lane>) -> Result<Lanes, DaemonError> {
        let io = |path: &str| {
            let path = path.to_owned();
            move |error| DaemonError::Io { path, error }
        };
        Ok(Lanes {
            bus,
            // Two workers, as many as the main runtime has
            // (src/bin/contextd.rs).
            mcp: Lane::start("mcp", 2).map_err(io("the MCP thread"))?,
            // One thread: the store's tasks only hand work to SQLite's
            // threads and wait.
            store: Lane::start("store", 1).map_err(io("the database thread"))?,
        })
    }
}

/// The one way out: give the name back, then stop the tree level by level
/// (publishers, sources, writers, database), each joined within its bound,
/// so that the last audit and history batches are on disk before the
/// database closes.
async fn teardown(conn: &Connection, tree: &Tree, lanes: &Lanes) {
    // First, so that a new instance can start while this one stops. When
    // the name is not ours (lost, taken, never asked for) the bus says so
    // and nothing happens; a bus that does not answer costs a bound.
    let release = async {
        let proxy = DBusProxy::new(conn).await?;
        proxy
            .release_name(WellKnownName::from_static_str_unchecked(BUS_NAME))
            .await
    };
    match tokio::time::timeout(Duration::from_millis(150), release).await {
        Ok(Ok(reply)) => tracing::debug!(?reply, "released {BUS_NAME}"),
        Ok(Err(e)) => tracing::debug!(error = %e, "release of the name failed"),
        Err(_) => tracing::debug!("the bus did not answer the release of the name"),
    }
    tree.stop(&Bounds::default()).await;
    // Their tasks (publishers; writers and the database's calls) are
    // joined: the threads have nothing left.
    lanes.mcp.stop(Duration::from_millis(150)).await;
    lanes.store.stop(Duration::from_millis(150)).await;
    // Last: the connection's reader runs there.
    if let Some(bus) = &lanes.bus {
        bus.stop(Duration::from_millis(150)).await;
    }
}

/// Start everything into `tree`, serve until `shutdown` or the loss of the
/// name, and say why it ended. Stopping is [`teardown`]'s job. The steps
/// run in this order, each starting its tasks into its level of `tree`.
async fn serve(
    conn: &Connection,
    config: &Config,
    tree: &Tree,
    (lanes, sendq): (&Lanes, Option<SendQueue>),
    shutdown: impl Future<Output = ()>,
) -> Result<Exit, DaemonError> {
    let clocks = Clocks::of(config);
    let store = open_store(conn, config, tree).await?;
    let notify = store.notify;
    let (core, tokens) =
        build_core(config, tree, &lanes.store, clocks.clock.clone(), store).await?;
    start_sources(conn, config, tree, &core, clocks).await;
    let publishers = start_publishers(conn, config, tree, (lanes, sendq), &core, tokens).await?;
    if notify && let Some(reason) = core.recovery() {
        tree.publishers.spawn(notify_degraded(
            conn.clone(),
            reason,
            tree.publishers.token(),
        ));
    }
    Ok(wait(shutdown, publishers).await)
}

/// The clock of the core: the system's, or (a build with the `replay`
/// feature) a scripted one for replays that ask for one (timeline tests),
/// which the replay's `Clock` events set.
struct Clocks {
    clock: Arc<dyn crate::core::Clock>,
    #[cfg(feature = "replay")]
    manual: Option<Arc<crate::core::clock::ManualClock>>,
}

#[cfg(not(feature = "replay"))]
impl Clocks {
    fn of(_: &Config) -> Clocks {
        Clocks {
            clock: Arc::new(SystemClock),
        }
    }
}

#[cfg(feature = "replay")]
impl Clocks {
    fn of(config: &Config) -> Clocks {
        let manual = match (&config.replay.script, config.replay.fake_clock) {
            (Some(_), Some(at)) => Some(crate::core::clock::ManualClock::new(at)),
            _ => None,
        };
        let clock: Arc<dyn crate::core::Clock> = match &manual {
            Some(m) => m.clone(),
            None => Arc::new(SystemClock),
        };
        Clocks { clock, manual }
    }
}

/// The open database, what it held at start, and its writer task (not yet
/// started: it needs the core's notices).
struct OpenStore {
    db: store::Db,
    db_tasks: store::db::DbTasks,
    loaded: crate::core::consent::Loaded,
    /// The database could not be used and this start found it: the user
    /// gets one notification.
    notify: bool,
}

/// Step 1: the encrypted store, first: a wrong key must stop the daemon
/// before anything is served. Its pool closes when the database level
/// stops.
async fn open_store(
    conn: &Connection,
    config: &Config,
    tree: &Tree,
) -> Result<OpenStore, DaemonError> {
    let db_path = config.paths.database();
    // A file that cannot be used is set aside and the broker runs
    // degraded; a missing key for an existing file runs it in memory
    // (store::recovery). Never a new database or key silently.
    let opened = store::recovery::open(
        &config.paths.state_dir,
        &db_path,
        Some(conn),
        chrono::Utc::now(),
    )
    .await?;
    let store::recovery::Opened {
        db,
        tasks: db_tasks,
        key_source,
        degraded,
        found_now,
    } = opened;
    {
        // The pool closes when the database level stops, after the
        // writers have written their last batches.
        let pool = db.pool().clone();
        let closing = tree.database.token();
        tree.database.spawn(async move {
            closing.cancelled().await;
            pool.close().await;
            tracing::debug!("database closed");
        });
    }
    let mut loaded = db.load().await?;
    if degraded.is_some() {
        loaded.recovery = degraded;
    }
    let key = key_source.map_or_else(|| "none (in memory)".to_owned(), |k| k.to_string());
    let cipher = db.cipher_provider().await;
    tracing::info!(path = %db_path.display(), %key, %cipher, decisions = loaded.decisions.len(), degraded = loaded.recovery.is_some(), "database open");
    Ok(OpenStore {
        db,
        db_tasks,
        loaded,
        notify: found_now,
    })
}

/// Step 2: the core on the store: the gate with the decisions loaded, the
/// database's health as a source, the timeline and its writers, and the
/// MCP token store (handed to the MCP publisher in step 4). The store's
/// calls and its writers run on `store_lane` (`core::lane`).
async fn build_core(
    config: &Config,
    tree: &Tree,
    store_lane: &Lane,
    clock: Arc<dyn crate::core::Clock>,
    store: OpenStore,
) -> Result<(Arc<Core>, Arc<dyn crate::core::tokens::TokenStore>), DaemonError> {
    let OpenStore {
        db,
        db_tasks,
        loaded,
        notify: _,
    } = store;
    let consent = &config.file.consent;
    let settings = GateSettings {
        undecided: match consent.undecided {
            UndecidedMode::Ask => Verdict::Ask,
            UndecidedMode::Deny => Verdict::Deny,
        },
        cooldown: chrono::Duration::seconds(i64::try_from(consent.cooldown_s).unwrap_or(60)),
    };
    let lane = StoreLane::new(store_lane.handle().clone(), tree.database.clone());
    let store: Arc<dyn ConsentStore> = Arc::new(OnLane::new(Arc::new(db.clone()), lane.clone()));
    let gate = Gate::with_store(
        config.paths.policy_file(),
        clock.clone(),
        Some(store),
        loaded,
        settings,
    );
    // Prompts are asked for the publishers: they stop with them.
    let core = Core::with_gate(
        gate,
        clock.clone(),
        Duration::from_secs(consent.prompt_timeout_s.max(1)),
        tree.publishers.clone(),
        config.file.limits.change_feed,
    );
    // What nobody means to share (core::privacy): in force before any
    // source's first event, so that nothing reaches the state uncleaned.
    crate::config::follow::load_privacy(&core.manage(), &config.paths, Some(&config.file));
    // Who may answer prompts: GNOME Shell (also where [sources.shells]
    // says it is installed) and the programs config.toml names.
    core.set_agent_trust(crate::core::agents::AgentTrust::new(
        config.file.sources.shells.gnome_shell.as_deref(),
        &consent.agents,
    ));
    // A database that stops taking writes (a full disk) is the `database`
    // entry of ListSources until it takes them again (store::health).
    {
        let core = Arc::downgrade(&core);
        db.health().on_change(move |problem| {
            if let Some(core) = core.upgrade() {
                core.state().apply(SourceEvent::SourceStatus {
                    source: "database".into(),
                    available: problem.is_none(),
                    error: problem,
                });
            }
        });
    }
    // Degraded (store::recovery): said in ListSources until the user acts.
    if let Some(reason) = core.recovery() {
        core.state().apply(SourceEvent::SourceStatus {
            source: crate::core::RECOVERY_SOURCE.into(),
            available: false,
            error: Some(format!(
                "degraded: {reason} Undecided access is denied, never asked, until you act: restore a backup (contextctl import FILE) or accept the new database (contextctl recovery dismiss); see docs/files-and-recovery.md, \"When the database cannot be used\""
            )),
        });
    }
    // Revocations the disk did not take before a crash are in force again
    // (their journal, off the database's disk), then written (core::pending).
    if let Some(dir) = &config.paths.runtime_dir {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        if core
            .gate()
            .open_journal(dir.join(crate::core::pending::JOURNAL))
            > 0
        {
            core.gate().write_pending().await;
        }
    }
    // Revocations the disk did not take are retried until written, the
    // last time after the publishers stopped (core::pending).
    tree.writers
        .spawn(core.write_revocations(tree.writers.token()));
    // Memory freed after a burst of work goes back to the system
    // (crate::memory).
    let caches = db.clone();
    tree.writers.spawn_on(
        crate::memory::give_back(
            tree.writers.token(),
            Box::new(move || {
                let db = caches.clone();
                Box::pin(async move {
                    db.release_caches().await;
                })
            }),
            Box::new(core.watches().idle_release()),
        ),
        store_lane.handle(),
    );
    let audit_keep = chrono::Duration::days(i64::from(consent.audit_days.max(1)));
    // The timeline: recorded from every change, in order, as it is
    // applied; written by its own task in batches.
    let (history, history_writer, next_id) =
        store::history::History::open_reporting(db.pool().clone(), db.health().clone()).await?;
    core.set_history(Arc::new(OnLane::new(
        Arc::new(history.clone()),
        lane.clone(),
    )));
    let history_settings = config.file.history.clone();
    core.state()
        .set_observer(Box::new(crate::core::history::Timeline::new(
            crate::core::history::Recorder::new(history_settings.clone(), next_id)
                .with_privacy(core.state().privacy().clone()),
            history.clone(),
        )));
    // The writers flush what they hold when their level is cancelled,
    // which happens only after every source and publisher has stopped.
    tree.writers.spawn_on(
        history_writer.run(tree.writers.token()),
        store_lane.handle(),
    );
    // Retention: at start and once a day (`core::history::retention`).
    tree.writers.spawn_on(
        crate::core::history::retention(
            history.clone(),
            history_settings,
            clock,
            crate::core::history::RETENTION_EVERY,
            tree.writers.token(),
        ),
        store_lane.handle(),
    );
    let tokens: Arc<dyn crate::core::tokens::TokenStore> = Arc::new(OnLane::new(
        // Expiry is a time of day on the system clock, whatever a replay
        // scripts for the core (core::tokens).
        Arc::new(
            store::tokens::DbTokenStore::open(db.pool().clone(), Arc::new(SystemClock)).await?,
        ),
        lane.clone(),
    ));
    tree.writers.spawn_on(
        db_tasks.run(
            db,
            audit_keep,
            core.gate().notices.clone(),
            tree.writers.token(),
        ),
        store_lane.handle(),
    );
    Ok((core, tokens))
}

/// Step 3: the sources, and the one task that applies their events to the
/// state; the policy file counts as a source (its health, and its reload
/// on change).
async fn start_sources(
    conn: &Connection,
    config: &Config,
    tree: &Tree,
    core: &Arc<Core>,
    clocks: Clocks,
) {
    // Events from every source go through one channel to the state
    // (`core::pump`), which also tells the timeline of the pause, and ends
    // with the sources' level.
    let (tx, pump) = crate::core::pump::channel();
    #[cfg(feature = "replay")]
    let pump = pump.with_clock(clocks.manual);
    #[cfg(not(feature = "replay"))]
    let _ = clocks;
    {
        let core = core.clone();
        let cancel = tree.sources.token();
        tree.sources
            .spawn(async move { pump.run(core.state(), core.gate(), cancel).await });
    }

    crate::config::follow::load_policy(core.gate(), &tx).await;
    let inotify = crate::config::follow::watch_dir(&config.paths.config_dir);
    tree.sources.spawn(crate::config::follow::follow(
        (core.gate().clone(), core.manage()),
        tx.clone(),
        inotify,
        config.paths.clone(),
        tree.sources.token(),
    ));
    tree.sources
        .spawn(core.gate().clone().wake_at_expiries(tree.sources.token()));

    let ctx = sources::SourceContext {
        tx: tx.clone(),
        cancel: tree.sources.token(),
        tasks: tree.sources.tracker(),
        config: Arc::new(config.clone()),
        own_names: conn
            .unique_name()
            .map(|n| n.to_string())
            .into_iter()
            .collect(),
    };
    sources::spawn_all(&ctx);
    // Windows the shells report (org.contextd.WindowReports1): the core
    // checks the reporter and hands the reports to their source.
    let shells = &config.file.sources.shells;
    let extra: Vec<(&'static str, &Path)> = [
        (crate::core::reports::GNOME_SHELL, &shells.gnome_shell),
        (crate::core::reports::KWIN, &shells.kwin),
    ]
    .into_iter()
    .filter_map(|(s, p)| p.as_deref().map(|p| (s, p)))
    .collect();
    let (reporters, reports) = crate::core::reports::Reporters::new(&extra);
    core.set_window_reports(reporters);
    sources::shells::spawn(&ctx, reports);
}

/// What serving holds on to until the end: the D-Bus objects' shared state
/// and the stream that says the name was lost.
struct Serving {
    _dbus: Arc<dbus::Shared>,
    lost: zbus::fdo::NameLostStream,
}

/// Step 4: the publishers. D-Bus first, every object served before the
/// name is requested, so that no activated client finds an empty path;
/// then MCP (on its own lane) and the dashboard, once the name is ours.
async fn start_publishers(
    conn: &Connection,
    config: &Config,
    tree: &Tree,
    (lanes, sendq): (&Lanes, Option<SendQueue>),
    core: &Arc<Core>,
    tokens: Arc<dyn crate::core::tokens::TokenStore>,
) -> Result<Serving, DaemonError> {
    // Each publisher receives the core's handles it uses, not the core.
    let dbus_core = Arc::new(dbus::Handles {
        reads: core.reads(),
        watches: core.watches(),
        manage: core.manage(),
        provide: core.provide(),
        ask: core.ask(),
        reports: core.reports(),
        indicators: core.indicators(),
    });
    let shared = dbus::serve(
        conn,
        dbus_core.clone(),
        config.file.history.enabled,
        (sendq, lanes.bus.as_ref().map(|b| b.handle().clone())),
        &tree.publishers,
    )
    .await?;
    // Before the name is ours: the shell's first Indicator1.Watch hears it.
    shared.indicator.enabled.store(
        config.file.ui.indicator,
        std::sync::atomic::Ordering::Relaxed,
    );
    let lost = claim_name(conn, config.replace).await?;
    tracing::info!(name = BUS_NAME, "serving on the session bus");

    // Who reads now (live readers, reads of the last seconds), and the
    // privacy indicator that shows it: the broker's StatusNotifierItem,
    // unless the GNOME Shell extension shows its own (dbus::sni).
    let ui = &config.file.ui;
    tree.publishers.spawn(core.run_reading(
        Duration::from_secs(ui.recent_read_s),
        tree.publishers.token(),
    ));
    if ui.indicator {
        dbus::sni::start(
            dbus_core,
            None,
            shared.indicator.shell.subscribe(),
            &tree.publishers,
        );
    }

    // MCP after the name is ours: a second instance must not take the
    // first one's socket. Clients that activated us wait for the socket.
    // On its own threads (`mcp_lane`): what MCP's hosts ask must not queue
    // ahead of D-Bus callers on the main runtime (`make soak` measures a
    // `Peer.Ping` under 200 busy HTTP hosts). Everything it spawns runs
    // there, in the publishers level.
    let dashboard_tokens = tokens.clone();
    let mcp = {
        let core = Arc::new(crate::mcp::Handles {
            reads: core.reads(),
            watches: core.watches(),
            manage: core.manage(),
        });
        let (config, conn) = (config.clone(), conn.clone());
        // With a bus lane, `conn` came from the session's address: MCP's
        // notifications go on a connection of their own (mcp::notify).
        let own_connection = lanes.bus.is_some();
        let level = tree.publishers.clone();
        tree.publishers.spawn_on(
            async move {
                crate::mcp::serve(&config, core, (conn, own_connection), tokens, &level).await
            },
            lanes.mcp.handle(),
        )
    };
    match mcp.await {
        Ok(started) => started?,
        Err(e) => {
            return Err(DaemonError::Io {
                path: "the MCP thread".into(),
                error: std::io::Error::other(e.to_string()),
            });
        }
    }
    crate::dashboard::serve(
        &config.file.dashboard,
        config.paths.privacy_file(),
        Arc::new(crate::dashboard::Handles {
            manage: core.manage(),
            ask: core.ask(),
            watches: core.watches(),
            tokens: dashboard_tokens,
        }),
        &tree.publishers,
    )
    .await?;
    Ok(Serving {
        _dbus: shared,
        lost,
    })
}

/// Request the bus name; the stream of its loss, subscribed to before
/// asking so that no loss is missed.
///
/// The name is ours alone: it is requested without `ALLOW_REPLACEMENT`,
/// so no other connection can take it with `REPLACE_EXISTING` (a process
/// that held it would receive every window the shell reports and draw the
/// consent dialogs). `--replace` therefore does not ask the bus: it asks
/// the running broker to stop ([`stop_owner`]), which only works when the
/// owner is a contextd of this user, and then requests the free name.
async fn claim_name(
    conn: &Connection,
    replace: bool,
) -> Result<zbus::fdo::NameLostStream, DaemonError> {
    let dbus_proxy = DBusProxy::new(conn).await?;
    let lost = dbus_proxy.receive_name_lost().await?;
    let name = WellKnownName::from_static_str_unchecked(BUS_NAME);
    let mut stopped = false;
    loop {
        match dbus_proxy
            .request_name(name.clone(), RequestNameFlags::DO_NOT_QUEUE)
            .await?
        {
            RequestNameReply::PrimaryOwner | RequestNameReply::AlreadyOwner => return Ok(lost),
            RequestNameReply::Exists | RequestNameReply::InQueue => {
                let (owner, pid) = name_owner(&dbus_proxy).await;
                if !replace || stopped {
                    return Err(DaemonError::NameTaken { owner, pid });
                }
                stop_owner(&dbus_proxy, &owner, pid).await?;
                stopped = true;
            }
        }
    }
}

/// How long `--replace` waits for the running broker to let go.
const REPLACE_WAIT: Duration = Duration::from_secs(10);

/// `--replace`: ask the broker that owns the name to stop (SIGTERM, as
/// systemd stops it), and wait until the name is free. Refused when the
/// owner is not a contextd: its executable's file name must be ours.
async fn stop_owner(
    dbus: &DBusProxy<'_>,
    owner: &str,
    pid: Option<u32>,
) -> Result<(), DaemonError> {
    let refuse = |why: String| DaemonError::NameTaken {
        owner: format!("{owner} ({why})"),
        pid,
    };
    let pid = pid.ok_or_else(|| refuse("the bus does not say its process".into()))?;
    let theirs = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| refuse(format!("cannot read its executable: {e}")))?;
    let ours = std::env::current_exe().ok();
    let is_contextd = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.trim_end_matches(" (deleted)") == "contextd")
    };
    if !is_contextd(&theirs) && ours.as_deref() != Some(theirs.as_path()) {
        return Err(refuse(format!(
            "{} is not contextd: not replacing it",
            theirs.display()
        )));
    }
    let mut gone = dbus.receive_name_owner_changed().await?;
    let pid_t = i32::try_from(pid).map_err(|_| refuse("its PID is out of range".into()))?;
    // SAFETY: kill(2) with a valid signal touches no memory of ours.
    if unsafe { libc::kill(pid_t, libc::SIGTERM) } != 0 {
        return Err(refuse(format!(
            "cannot stop it: {}",
            std::io::Error::last_os_error()
        )));
    }
    tracing::info!(pid, "asked the running broker to stop (--replace)");
    let name = BusName::from(WellKnownName::from_static_str_unchecked(BUS_NAME));
    let freed = async {
        loop {
            // Asked after subscribing: a release in between is not missed.
            if !dbus.name_has_owner(name.clone()).await.unwrap_or(true) {
                return;
            }
            match gone.next().await {
                Some(sig) => {
                    if sig
                        .args()
                        .is_ok_and(|a| a.name().as_str() == BUS_NAME && a.new_owner().is_none())
                    {
                        return;
                    }
                }
                None => return,
            }
        }
    };
    tokio::time::timeout(REPLACE_WAIT, freed)
        .await
        .map_err(|_| {
            refuse(format!(
                "still running {} s after SIGTERM",
                REPLACE_WAIT.as_secs()
            ))
        })
}

/// Step 5: serve until `shutdown` completes or another instance takes the
/// name.
async fn wait(shutdown: impl Future<Output = ()>, serving: Serving) -> Exit {
    let Serving { _dbus, mut lost } = serving;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break Exit::Shutdown,
            sig = lost.next() => {
                match sig {
                    Some(sig) => {
                        if sig.args().is_ok_and(|a| a.name().as_str() == BUS_NAME) {
                            // Never given away (`claim_name`): a loss is
                            // an error, so that systemd starts us again.
                            tracing::error!("lost {BUS_NAME} unexpectedly; exiting");
                            break Exit::NameLost;
                        }
                    }
                    // The bus itself went away (the session ended, or
                    // dbus-daemon died): nobody to serve, a clean stop.
                    None => {
                        tracing::info!("the session bus closed; stopping");
                        break Exit::BusGone;
                    }
                }
            }
        }
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

/// Tell the user, once, that the broker runs degraded: a desktop
/// notification (org.freedesktop.Notifications), if a server runs. The
/// details are in `contextctl status`, the dashboard and the log.
async fn notify_degraded(conn: Connection, reason: String, cancel: CancellationToken) {
    let hints: std::collections::HashMap<&str, zbus::wire::Variant<'_>> =
        [("urgency", zbus::wire::Variant::from(2u8))]
            .into_iter()
            .collect();
    let body = format!(
        "{reason}\nApps are denied anything you have not decided until you act: see contextctl status."
    );
    let args = (
        "contextd",
        0u32,
        "dialog-warning",
        "Your context permissions could not be read",
        body.as_str(),
        Vec::<&str>::new(),
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
    tokio::select! {
        _ = cancel.cancelled() => {}
        r = tokio::time::timeout(Duration::from_secs(5), call) => match r {
            Ok(Ok(_)) => tracing::info!("the user was notified that contextd runs degraded"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot notify the user that contextd runs degraded"),
            Err(_) => tracing::warn!("the notification server did not answer"),
        },
    }
}

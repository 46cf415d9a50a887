//! The PipeWire client: one thread per connection, running PipeWire's own
//! loop (its objects are not `Send`, so they are created, used and dropped
//! on this thread only).
//!
//! Out of the thread go [`Msg`]s on an unbounded channel (sending never
//! blocks PipeWire's loop; what flows is bounded by the size of the graph
//! and how often it changes). Into it goes one thing: "quit", on a
//! `pipewire::channel`, which wakes the loop through its own fd. The thread
//! ends when told to quit or when PipeWire goes away (the core reports
//! `EPIPE` on its id 0; other errors there answer one request and leave
//! the connection as it was), and drops every PipeWire object before it
//! ends.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::thread::JoinHandle;

use pipewire as pw;
use pw::client::{Client, ClientChangeMask};
use pw::node::{Node, NodeChangeMask, NodeState};
use pw::proxy::Listener;
use pw::types::ObjectType;
use tokio::sync::mpsc::UnboundedSender;

use super::classify::Props;
use super::tracker::Obs;
use crate::model::StreamState;

/// What the thread tells the source.
#[derive(Debug)]
pub(super) enum Msg {
    Obs(Obs),
    /// The first enumeration of the registry is complete: connected.
    Synced,
    /// The connection could not be made or was lost; the thread ends.
    Lost(String),
}

/// A running connection thread.
pub(super) struct Connection {
    quit: pw::channel::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Connection {
    /// Start a thread that connects to PipeWire (the remote that
    /// `PIPEWIRE_REMOTE` / `PIPEWIRE_RUNTIME_DIR` / `XDG_RUNTIME_DIR` name,
    /// as for every PipeWire client) and reports to `tx`.
    pub(super) fn start(tx: UnboundedSender<Msg>) -> std::io::Result<Connection> {
        let (quit, quit_rx) = pw::channel::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("pipewire".into())
            .spawn(move || {
                if let Err(reason) = run(&tx, quit_rx) {
                    let _ = tx.send(Msg::Lost(reason));
                }
            })?;
        Ok(Connection {
            quit,
            thread: Some(thread),
        })
    }

    /// Tell the thread to quit and join it, waiting at most 300 ms (its
    /// loop quits at once; the bound keeps a stuck libpipewire from
    /// holding the daemon's stop).
    pub(super) async fn stop(mut self) {
        // The thread may have ended already (connection lost): then the
        // receiver is gone and there is nothing to tell.
        let _ = self.quit.send(());
        if let Some(t) = self.thread.take() {
            crate::shutdown::join_thread(t, "PipeWire", std::time::Duration::from_millis(300))
                .await;
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Not joined here (no blocking in drop); the thread ends by itself.
        let _ = self.quit.send(());
    }
}

fn dict_to_props(d: &pw::spa::utils::dict::DictRef) -> Props {
    d.iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn node_state(s: &NodeState<'_>) -> StreamState {
    match s {
        NodeState::Running => StreamState::Running,
        NodeState::Idle => StreamState::Idle,
        NodeState::Suspended => StreamState::Suspended,
        NodeState::Creating | NodeState::Error(_) => StreamState::Other,
    }
}

/// Whether a node's global properties make it worth binding: streams and
/// video sources (the upstream of video capture). Devices' nodes, sinks
/// and the like are left alone, which keeps this client's footprint in
/// the graph small.
fn wanted_node(props: Option<&pw::spa::utils::dict::DictRef>) -> bool {
    let class = props.and_then(|p| p.get("media.class")).unwrap_or("");
    class.starts_with("Stream/") || class.starts_with("Video/")
}

/// A bound object: its proxy and listener live as long as the global.
///
/// The listener is declared first because fields drop in declaration
/// order, and it must go before its proxy: dropping a listener unlinks
/// its hook from the list inside the proxy (`spa_hook_remove`), and
/// dropping the proxy frees that list (`pw_proxy_destroy`). The other way
/// round wrote 16 bytes into freed memory at every global_remove (each
/// stream that ended), which valgrind showed and which, once glibc
/// reused the block, aborted the daemon with "double free or corruption"
/// under `make soak` (tests/it/pipewire_memory.rs).
struct Bound {
    _listener: Box<dyn Listener>,
    _proxy: Box<dyn pw::proxy::ProxyT>,
}

/// Whether an error the core reports means the connection is gone.
///
/// libpipewire reports a closed socket as `-EPIPE` on the core's id 0
/// (KWin's and OBS's PipeWire clients test for exactly this), and a
/// failed read as its errno there.
/// The server also answers a request on id 0 that it cannot serve, such as
/// the destroy of a proxy whose object vanished before our bind reached
/// it ("unknown resource N op:7"), which happens whenever a stream ends
/// within a round trip of starting: treating that as a lost connection
/// reset every stream and reconnected after the backoff (`make bench`
/// saw a 250 ms gap in one start of a hundred).
fn connection_lost(id: u32, res: i32) -> bool {
    id == pw::core::PW_ID_CORE
        && [libc::EPIPE, libc::ECONNRESET, libc::ENOTCONN].contains(&res.saturating_neg())
}

fn strerror(res: i32) -> String {
    std::io::Error::from_raw_os_error(res.saturating_abs()).to_string()
}

/// The thread's body: returns when told to quit (`Ok`) or with why the
/// connection could not be made. A connection lost later is reported from
/// the core's error callback.
fn run(tx: &UnboundedSender<Msg>, quit: pw::channel::Receiver<()>) -> Result<(), String> {
    pw::init();
    let mainloop = pw::main_loop::MainLoopRc::new(None)
        .map_err(|e| format!("cannot create a PipeWire loop: {e}"))?;
    let context = pw::context::ContextRc::new(&mainloop, None)
        .map_err(|e| format!("cannot create a PipeWire context: {e}"))?;
    let core = context.connect_rc(None).map_err(|_| {
        // libpipewire leaves the reason in errno (EHOSTDOWN: nothing listens).
        let os = std::io::Error::last_os_error();
        format!("cannot connect to PipeWire at {}: {os}", remote_path())
    })?;

    let weak = mainloop.downgrade();
    let _quit = quit.attach(mainloop.loop_(), move |()| {
        if let Some(ml) = weak.upgrade() {
            ml.quit();
        }
    });

    let registry = core
        .get_registry_rc()
        .map_err(|e| format!("cannot get PipeWire's registry: {e}"))?;
    // Two round trips: the first ends the registry's burst of globals, the
    // second the first info of every object bound during that burst.
    let sync = Rc::new(RefCell::new((
        None::<pw::spa::utils::result::AsyncSeq>,
        0u8,
    )));

    let _core_listener = {
        let tx_done = tx.clone();
        let tx_err = tx.clone();
        let sync = sync.clone();
        let weak = mainloop.downgrade();
        let weak_core = core.downgrade();
        core.add_listener_local()
            .done(move |id, seq| {
                let mut s = sync.borrow_mut();
                if id != pw::core::PW_ID_CORE || s.0 != Some(seq) {
                    return;
                }
                s.1 += 1;
                if s.1 == 1 {
                    s.0 = weak_core.upgrade().and_then(|c| c.sync(0).ok());
                }
                if s.1 >= 2 || s.0.is_none() {
                    s.0 = None;
                    let _ = tx_done.send(Msg::Synced);
                }
            })
            .error(move |id, _seq, res, message| {
                if connection_lost(id, res) {
                    let _ = tx_err.send(Msg::Lost(format!(
                        "lost the connection to PipeWire: {message} ({})",
                        strerror(res)
                    )));
                    if let Some(ml) = weak.upgrade() {
                        ml.quit();
                    }
                } else {
                    // An object went away while we bound it ("no global"
                    // on its id), or our proxy's destroy reached a
                    // resource that was already gone ("unknown resource"
                    // on id 0), and the like: the connection is fine.
                    tracing::debug!(source = super::NAME, id, res, message, "PipeWire error");
                }
            })
            .register()
    };

    let bound: Rc<RefCell<HashMap<u32, Bound>>> = Rc::new(RefCell::new(HashMap::new()));
    let _registry_listener = {
        let tx_global = tx.clone();
        let tx_remove = tx.clone();
        let weak_registry = registry.downgrade();
        let bound_add = bound.clone();
        let bound_remove = bound.clone();
        registry
            .add_listener_local()
            .global(move |g| {
                let Some(registry) = weak_registry.upgrade() else {
                    return;
                };
                let id = g.id;
                match g.type_ {
                    ObjectType::Node if wanted_node(g.props) => {
                        // What the global says goes out before the bind:
                        // the node's info is a round trip away, and
                        // PipeWire is busiest just when a stream starts.
                        let props = g.props.map(dict_to_props).unwrap_or_default();
                        let _ = tx_global.send(Msg::Obs(Obs::NodeGlobal { id, props }));
                        let node: Node = match registry.bind(g) {
                            Ok(n) => n,
                            Err(e) => {
                                tracing::debug!(source = super::NAME, id, error = %e, "cannot bind node");
                                return;
                            }
                        };
                        let tx = tx_global.clone();
                        let listener = node
                            .add_listener_local()
                            .info(move |info| {
                                let mask = info.change_mask();
                                let props = mask
                                    .contains(NodeChangeMask::PROPS)
                                    .then(|| info.props().map(dict_to_props).unwrap_or_default());
                                let state = mask
                                    .contains(NodeChangeMask::STATE)
                                    .then(|| node_state(&info.state()));
                                let _ = tx.send(Msg::Obs(Obs::Node {
                                    id: info.id(),
                                    props,
                                    state,
                                }));
                            })
                            .register();
                        bound_add.borrow_mut().insert(
                            id,
                            Bound {
                                _proxy: Box::new(node),
                                _listener: Box::new(listener),
                            },
                        );
                    }
                    ObjectType::Client => {
                        let client: Client = match registry.bind(g) {
                            Ok(c) => c,
                            Err(e) => {
                                tracing::debug!(source = super::NAME, id, error = %e, "cannot bind client");
                                return;
                            }
                        };
                        let tx = tx_global.clone();
                        let listener = client
                            .add_listener_local()
                            .info(move |info| {
                                if info.change_mask().contains(ClientChangeMask::PROPS) {
                                    let props = info.props().map(dict_to_props).unwrap_or_default();
                                    let _ = tx.send(Msg::Obs(Obs::Client {
                                        id: info.id(),
                                        props,
                                    }));
                                }
                            })
                            .register();
                        bound_add.borrow_mut().insert(
                            id,
                            Bound {
                                _proxy: Box::new(client),
                                _listener: Box::new(listener),
                            },
                        );
                    }
                    ObjectType::Device => {
                        // The global properties carry device.api; no bind.
                        let props = g.props.map(dict_to_props).unwrap_or_default();
                        let _ = tx_global.send(Msg::Obs(Obs::Device { id, props }));
                    }
                    ObjectType::Link => {
                        let p = g.props;
                        let num = |k: &str| p.and_then(|p| p.get(k)).and_then(|v| v.parse().ok());
                        if let (Some(output), Some(input)) =
                            (num("link.output.node"), num("link.input.node"))
                        {
                            let _ = tx_global.send(Msg::Obs(Obs::Link { id, output, input }));
                        }
                    }
                    _ => {}
                }
            })
            .global_remove(move |id| {
                bound_remove.borrow_mut().remove(&id);
                let _ = tx_remove.send(Msg::Obs(Obs::Removed { id }));
            })
            .register()
    };

    match core.sync(0) {
        Ok(seq) => sync.borrow_mut().0 = Some(seq),
        Err(e) => return Err(format!("cannot sync with PipeWire: {e}")),
    }

    mainloop.run();
    // Proxies before the registry, core and loop they belong to.
    bound.borrow_mut().clear();
    Ok(())
}

/// Where PipeWire's socket is, as libpipewire looks for it (for messages
/// and for watching it appear): `PIPEWIRE_REMOTE` (absolute, or relative to
/// the runtime dir; default `pipewire-0`) in `PIPEWIRE_RUNTIME_DIR`, else
/// `XDG_RUNTIME_DIR`, else `USERPROFILE`.
pub(crate) fn remote_path() -> String {
    let name = std::env::var("PIPEWIRE_REMOTE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "pipewire-0".into());
    if name.starts_with('/') {
        return name;
    }
    let dir = ["PIPEWIRE_RUNTIME_DIR", "XDG_RUNTIME_DIR", "USERPROFILE"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
    match dir {
        Some(d) => format!("{}/{name}", d.trim_end_matches('/')),
        None => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_broken_pipe_on_the_core_ends_the_connection() {
        assert!(connection_lost(pw::core::PW_ID_CORE, -libc::EPIPE));
        assert!(connection_lost(pw::core::PW_ID_CORE, -libc::ECONNRESET));
        // "unknown resource 8 op:7": our destroy of a proxy whose node
        // vanished before the bind reached it.
        assert!(!connection_lost(pw::core::PW_ID_CORE, -libc::ENOENT));
        // "no global 48" on the proxy itself.
        assert!(!connection_lost(8, -libc::ENOENT));
        assert!(!connection_lost(8, -libc::EPIPE));
    }
}

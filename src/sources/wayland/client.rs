//! One compositor connection, on its own thread.
//!
//! The thread binds `zwlr_foreign_toplevel_manager_v1` (up to v3),
//! `ext_foreign_toplevel_list_v1` (v1) and every `wl_output` (up to v4,
//! for output names), feeds the events into a [`Tracker`], and after each
//! batch read from the socket sends what changed into the core's channel.
//! It blocks in `poll(2)` on two descriptors: the display's socket and an
//! eventfd that [`Connection::stop`] writes, so it costs nothing while
//! nothing happens and stops at once when asked.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot};
use wayland_client::backend::protocol::Message;
use wayland_client::backend::{Backend, ObjectData, ObjectId, ReadEventsGuard, WaylandError};
use wayland_client::protocol::{wl_callback, wl_display, wl_output, wl_registry};
use wayland_client::{Connection as WlConnection, Proxy};
use wayland_protocols::ext::foreign_toplevel_list::v1::client::{
    ext_foreign_toplevel_handle_v1 as ext_handle, ext_foreign_toplevel_list_v1 as ext_list,
};
use wayland_protocols_wlr::foreign_toplevel::v1::client::{
    zwlr_foreign_toplevel_handle_v1 as wlr_handle, zwlr_foreign_toplevel_manager_v1 as wlr_manager,
};

use super::NAME;
use super::toplevels::{Finder, Resolver, Tracker};
use crate::core::SourceEvent;

pub(crate) const WLR_MANAGER: &str = "zwlr_foreign_toplevel_manager_v1";
pub(crate) const EXT_LIST: &str = "ext_foreign_toplevel_list_v1";
const WLR_MAX_VERSION: u32 = 3;
const EXT_MAX_VERSION: u32 = 1;
const OUTPUT_MAX_VERSION: u32 = 4;

/// Why a connection's thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// [`Connection::stop`] was called.
    Stopped,
    /// The core's channel closed (the daemon is stopping).
    CoreGone,
    /// The compositor went away or broke the protocol.
    Lost(String),
}

/// A running connection thread.
#[derive(Debug)]
pub(crate) struct Connection {
    stop: Arc<OwnedFd>,
    pub(crate) ended: oneshot::Receiver<Ended>,
    thread: Option<JoinHandle<()>>,
}

impl Connection {
    /// Start the thread on a connected socket. Windows get ids of
    /// connection `generation`.
    pub(crate) fn start(
        stream: UnixStream,
        generation: u64,
        tx: mpsc::Sender<SourceEvent>,
        resolver: Resolver,
        finder: Option<Finder>,
    ) -> std::io::Result<Connection> {
        Connection::spawn("wayland", move |stop| {
            run(stream, generation, &tx, resolver, finder, stop)
        })
    }

    /// Start a thread named `name` that runs `body` with the eventfd that
    /// [`Connection::stop`] writes (the selection's thread uses it too).
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(&OwnedFd) -> Ended + Send + 'static,
    ) -> std::io::Result<Connection> {
        // SAFETY: eventfd(2) with valid flags; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let stop = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let (done_tx, ended) = oneshot::channel();
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let end = body(&stop2);
                tracing::debug!(source = NAME, ?end, "connection thread ends");
                let _ = done_tx.send(end);
            })?;
        Ok(Connection {
            stop,
            ended,
            thread: Some(thread),
        })
    }

    /// Stop the thread and join it, waiting at most `bound`: the daemon's
    /// stop must not end while the thread still sends into the core.
    pub(crate) async fn join(mut self, bound: std::time::Duration) -> bool {
        self.stop();
        match self.thread.take() {
            Some(t) => crate::shutdown::join_thread(t, "Wayland", bound).await,
            None => true,
        }
    }

    /// Ask the thread to stop; it ends at its next wake-up, which is now.
    pub(crate) fn stop(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a live u64 to our eventfd.
        unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop();
        // Never wait on the thread here: it may be blocked sending to a
        // full channel whose reader is gone; it notices and exits alone.
        drop(self.thread.take());
    }
}

/// Send from a Wayland thread; false when the core is gone.
pub(super) fn send(tx: &mpsc::Sender<SourceEvent>, ev: SourceEvent) -> bool {
    tx.blocking_send(ev).is_ok()
}

/// `source`'s status, from a Wayland thread.
pub(super) fn status(
    tx: &mpsc::Sender<SourceEvent>,
    source: &str,
    available: bool,
    error: Option<String>,
) -> bool {
    send(
        tx,
        SourceEvent::SourceStatus {
            source: source.into(),
            available,
            error,
        },
    )
}

/// How soon the toplevel thread tries again to hand the core what it kept
/// while the core's channel was full (see [`run`]).
const RETRY: std::time::Duration = std::time::Duration::from_millis(2);

/// Flush what we sent, then wait for the compositor or `stop` (or at most
/// `within`) and read what came (dispatched by the caller's next round).
/// `Some` when the thread must end: stopped, the core gone, or the
/// connection lost.
pub(super) fn wait_and_read(
    conn: &WlConnection,
    prepare_read: impl FnOnce() -> Option<ReadEventsGuard>,
    stop: &OwnedFd,
    tx: &mpsc::Sender<SourceEvent>,
    within: Option<std::time::Duration>,
) -> Option<Ended> {
    if let Err(e) = conn.flush()
        && !matches!(&e, WaylandError::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock)
    {
        return Some(Ended::Lost(describe(&e, conn)));
    }
    // Events are queued already: the caller dispatches them first.
    let guard = prepare_read()?;
    let mut fds = [
        libc::pollfd {
            fd: guard.connection_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        let timeout = within.map_or(-1, |d| {
            libc::c_int::try_from(d.as_millis().max(1)).unwrap_or(libc::c_int::MAX)
        });
        // SAFETY: poll(2) on two valid descriptors we hold.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if r >= 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Some(Ended::Lost(format!("poll failed: {err}")));
        }
    }
    if fds[1].revents != 0 {
        return Some(Ended::Stopped);
    }
    if tx.is_closed() {
        return Some(Ended::CoreGone);
    }
    match guard.read() {
        Ok(_) => None,
        Err(WaylandError::Io(io)) if io.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) => Some(Ended::Lost(describe(&e, conn))),
    }
}

/// A lost connection in words: the compositor's protocol error when it
/// sent one.
fn describe(e: &WaylandError, conn: &WlConnection) -> String {
    match conn.protocol_error() {
        Some(p) => format!(
            "compositor reported a protocol error: {} on {}@{}: {}",
            p.code, p.object_interface, p.object_id, p.message
        ),
        None => match e {
            WaylandError::Io(io) => format!("compositor connection lost: {io}"),
            WaylandError::Protocol(p) => format!("protocol error: {p}"),
        },
    }
}

fn run(
    stream: UnixStream,
    generation: u64,
    tx: &mpsc::Sender<SourceEvent>,
    resolver: Resolver,
    finder: Option<Finder>,
    stop: &OwnedFd,
) -> Ended {
    let conn = match WlConnection::from_socket(stream) {
        Ok(c) => c,
        Err(e) => return Ended::Lost(format!("cannot set up the Wayland connection: {e}")),
    };
    let events = Arc::new(Events {
        state: Mutex::new(State {
            tracker: None,
            generation,
            resolver: Some(resolver),
            finder,
            wlr: None,
            ext: None,
            outputs: Vec::new(),
            synced: false,
            broken: None,
        }),
    });
    let end = serve(&conn, &events, tx, stop);
    // The proxies kept in the state hold the handler (their object data):
    // dropped here, or the handler and its proxies would keep each other.
    let mut state = events.lock();
    state.wlr = None;
    state.ext = None;
    state.outputs.clear();
    end
}

/// The connection's loop: dispatch what libwayland read, hand the
/// tracker's changes to the core, wait for more.
fn serve(
    conn: &WlConnection,
    events: &Arc<Events>,
    tx: &mpsc::Sender<SourceEvent>,
    stop: &OwnedFd,
) -> Ended {
    let data: Arc<dyn ObjectData> = events.clone();
    let display = conn.display();
    let made = display
        .send_constructor::<wl_registry::WlRegistry>(
            wl_display::Request::GetRegistry {},
            data.clone(),
        )
        .and_then(|_| {
            display.send_constructor::<wl_callback::WlCallback>(wl_display::Request::Sync {}, data)
        });
    if let Err(e) = made {
        return Ended::Lost(format!("cannot send the first requests: {e}"));
    }
    let mut announced = false;
    loop {
        // Events that libwayland read but did not dispatch yet (a read
        // dispatches what it read itself: see `wait_and_read`).
        if let Err(e) = conn.backend().dispatch_inner_queue() {
            return Ended::Lost(describe(&e, conn));
        }
        let mut state = events.lock();
        if let Some(why) = state.broken.take() {
            return Ended::Lost(why);
        }
        if state.synced && !announced {
            announced = true;
            let ok = match (&state.wlr, &state.ext) {
                (None, None) => {
                    tracing::warn!(
                        source = NAME,
                        "the compositor offers neither {WLR_MANAGER} nor {EXT_LIST}"
                    );
                    status(
                        tx,
                        NAME,
                        false,
                        Some(format!(
                            "the compositor offers neither {WLR_MANAGER} nor {EXT_LIST}"
                        )),
                    )
                }
                (w, e) => {
                    tracing::info!(
                        source = NAME,
                        wlr = w.as_ref().map(|w| w.version()),
                        ext = e.as_ref().map(|e| e.version()),
                        "bound the toplevel protocols"
                    );
                    status(tx, NAME, true, None)
                }
            };
            if !ok {
                return Ended::CoreGone;
            }
        }
        // Never wait on the core here: while this thread waited for room
        // in the core's channel, the compositor kept writing (a thousand
        // focus changes a second in `make soak`), and what it wrote would
        // pile up in libwayland's buffers. What the channel has no room
        // for goes back to the tracker, which keeps only each window's
        // newest state, and is offered again within `RETRY` or after the
        // next read.
        let mut kept = false;
        if let Some(t) = state.tracker.as_mut() {
            let mut pending = t.flush().into_iter();
            while let Some(ev) = pending.next() {
                match tx.try_send(ev) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(ev)) => {
                        t.unsent(std::iter::once(ev).chain(pending));
                        kept = true;
                        break;
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return Ended::CoreGone,
                }
            }
        }
        // Unlocked before the read: the read dispatches into the handler,
        // which takes the lock.
        drop(state);
        if let Some(end) = wait_and_read(
            conn,
            || conn.prepare_read(),
            stop,
            tx,
            kept.then_some(RETRY),
        ) {
            return end;
        }
    }
}

/// The handler of every object of the connection: each event goes to the
/// tracker as libwayland dispatches it.
///
/// **Why not wayland-client's `EventQueue`.** An `EventQueue` copies each
/// event into a `VecDeque` of its own, to be dispatched later; a read
/// while the thread was behind (the compositor writes a thousand focus
/// changes a second in `make soak`) grows that deque to the whole batch,
/// and a `VecDeque` never gives its room back: 119 KB of the broker's heap
/// stayed after the soak's load (heaptrack, `QueueProxyData::event`).
/// Handled here, an event is parsed and applied in place; the tracker
/// keeps only each window's newest state, so a burst costs nothing after
/// it.
struct Events {
    state: Mutex<State>,
}

impl Events {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ObjectData for Events {
    fn event(
        self: Arc<Self>,
        backend: &Backend,
        msg: Message<ObjectId, OwnedFd>,
    ) -> Option<Arc<dyn ObjectData>> {
        let conn = WlConnection::from_backend(backend.clone());
        let data: Arc<dyn ObjectData> = self.clone();
        let mut state = self.lock();
        let iface = msg.sender_id.interface().name;
        // The objects an event creates (a toplevel's handle) get this
        // handler too.
        let child = Some(data.clone());
        let result = if iface == wl_registry::WlRegistry::interface().name {
            parse::<wl_registry::WlRegistry>(&conn, msg)
                .map(|(p, e)| state.registry(&p, e, &data))
                .map(|()| None)
        } else if iface == wl_callback::WlCallback::interface().name {
            parse::<wl_callback::WlCallback>(&conn, msg)
                .map(|(_, e)| state.callback(e))
                .map(|()| None)
        } else if iface == wl_output::WlOutput::interface().name {
            parse::<wl_output::WlOutput>(&conn, msg)
                .map(|(p, e)| state.output(&p, e))
                .map(|()| None)
        } else if iface == wlr_manager::ZwlrForeignToplevelManagerV1::interface().name {
            parse::<wlr_manager::ZwlrForeignToplevelManagerV1>(&conn, msg)
                .map(|(_, e)| state.wlr_manager(e))
                .map(|()| child)
        } else if iface == wlr_handle::ZwlrForeignToplevelHandleV1::interface().name {
            parse::<wlr_handle::ZwlrForeignToplevelHandleV1>(&conn, msg)
                .map(|(p, e)| state.wlr_handle(&p, e))
                .map(|()| None)
        } else if iface == ext_list::ExtForeignToplevelListV1::interface().name {
            parse::<ext_list::ExtForeignToplevelListV1>(&conn, msg)
                .map(|(p, e)| state.ext_list(&p, e))
                .map(|()| child)
        } else if iface == ext_handle::ExtForeignToplevelHandleV1::interface().name {
            parse::<ext_handle::ExtForeignToplevelHandleV1>(&conn, msg)
                .map(|(p, e)| state.ext_handle(&p, e))
                .map(|()| None)
        } else {
            Err(format!(
                "an event for {iface}, which this client never made"
            ))
        };
        match result {
            Ok(child) => child,
            Err(why) => {
                // The connection is ended by the thread's loop; an object
                // a bad event would have made still needs a handler.
                state.broken.get_or_insert(why);
                Some(data)
            }
        }
    }

    fn destroyed(&self, _: ObjectId) {}
}

/// One event of `I`, or why it could not be read.
fn parse<I: Proxy>(
    conn: &WlConnection,
    msg: Message<ObjectId, OwnedFd>,
) -> Result<(I, I::Event), String> {
    I::parse_event(conn, msg).map_err(|e| format!("a bad event from the compositor: {e}"))
}

/// The dispatch state of the thread.
struct State {
    tracker: Option<Tracker>,
    generation: u64,
    resolver: Option<Resolver>,
    /// Who the windows' processes are (sway's IPC), handed to the tracker.
    finder: Option<Finder>,
    wlr: Option<wlr_manager::ZwlrForeignToplevelManagerV1>,
    ext: Option<ext_list::ExtForeignToplevelListV1>,
    /// wl_output globals: registry name → the bound output.
    outputs: Vec<(u32, wl_output::WlOutput)>,
    synced: bool,
    /// Why the connection must end (an event that could not be read).
    broken: Option<String>,
}

impl State {
    fn tracker(&mut self) -> &mut Tracker {
        // The tracker is made when the first sync completes (when it is
        // known which protocols are bound). Toplevel events cannot come
        // before: they answer binds made while the registry is read, and
        // the sync was sent after the registry request.
        let ext = self.ext.is_some();
        let generation = self.generation;
        let resolver = &mut self.resolver;
        let finder = &mut self.finder;
        self.tracker.get_or_insert_with(|| {
            let r = resolver.take().unwrap_or_else(|| Box::new(|_, _| None));
            Tracker::new(generation, ext, r).with_finder(finder.take())
        })
    }

    /// Bind global `name` as `I`, its events handled by `data`.
    fn bind<I: Proxy>(
        &mut self,
        registry: &wl_registry::WlRegistry,
        name: u32,
        version: u32,
        data: &Arc<dyn ObjectData>,
    ) -> Option<I> {
        let req = wl_registry::Request::Bind {
            name,
            id: (I::interface(), version),
        };
        match registry.send_constructor::<I>(req, data.clone()) {
            Ok(p) => Some(p),
            Err(e) => {
                self.broken
                    .get_or_insert(format!("cannot bind {}: {e}", I::interface().name));
                None
            }
        }
    }

    fn registry(
        &mut self,
        registry: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        data: &Arc<dyn ObjectData>,
    ) {
        match event {
            wl_registry::Event::Global {
                name,
                interface,
                version,
            } => match interface.as_str() {
                WLR_MANAGER if self.wlr.is_none() => {
                    if self.synced {
                        tracing::info!(
                            source = NAME,
                            "{WLR_MANAGER} appeared late; ignored until reconnect"
                        );
                        return;
                    }
                    self.wlr = self.bind(registry, name, version.min(WLR_MAX_VERSION), data);
                }
                EXT_LIST if self.ext.is_none() => {
                    if self.synced {
                        tracing::info!(
                            source = NAME,
                            "{EXT_LIST} appeared late; ignored until reconnect"
                        );
                        return;
                    }
                    self.ext = self.bind(registry, name, version.min(EXT_MAX_VERSION), data);
                }
                "wl_output" => {
                    if let Some(o) = self.bind::<wl_output::WlOutput>(
                        registry,
                        name,
                        version.min(OUTPUT_MAX_VERSION),
                        data,
                    ) {
                        self.outputs.push((name, o));
                    }
                }
                _ => {}
            },
            wl_registry::Event::GlobalRemove { name } => {
                if let Some(pos) = self.outputs.iter().position(|(n, _)| *n == name) {
                    let (_, o) = self.outputs.swap_remove(pos);
                    let key = o.id().protocol_id();
                    self.tracker().output_removed(key);
                    if o.version() >= 3 {
                        o.release();
                    }
                }
            }
            _ => {}
        }
    }

    fn callback(&mut self, event: wl_callback::Event) {
        if let wl_callback::Event::Done { .. } = event {
            self.synced = true;
            self.tracker();
        }
    }

    fn output(&mut self, output: &wl_output::WlOutput, event: wl_output::Event) {
        if let wl_output::Event::Name { name } = event {
            self.tracker().output_name(output.id().protocol_id(), name);
        }
    }

    fn wlr_manager(&mut self, event: wlr_manager::Event) {
        match event {
            wlr_manager::Event::Toplevel { toplevel } => {
                self.tracker().wlr_new(toplevel.id().protocol_id());
            }
            wlr_manager::Event::Finished => {
                tracing::info!(source = NAME, "{WLR_MANAGER} finished");
                self.tracker().wlr_finished();
                self.wlr = None;
            }
            _ => {}
        }
    }

    fn wlr_handle(
        &mut self,
        handle: &wlr_handle::ZwlrForeignToplevelHandleV1,
        event: wlr_handle::Event,
    ) {
        let key = handle.id().protocol_id();
        let t = self.tracker();
        match event {
            wlr_handle::Event::Title { title } => t.wlr_title(key, title),
            wlr_handle::Event::AppId { app_id } => t.wlr_app_id(key, app_id),
            wlr_handle::Event::OutputEnter { output } => {
                t.wlr_output_enter(key, output.id().protocol_id())
            }
            wlr_handle::Event::OutputLeave { output } => {
                t.wlr_output_leave(key, output.id().protocol_id())
            }
            wlr_handle::Event::State { state: bytes } => {
                let values: Vec<u32> = bytes
                    .chunks_exact(4)
                    .take(64)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                t.wlr_state(key, &values);
            }
            wlr_handle::Event::Parent { parent } => {
                t.wlr_parent(key, parent.map(|p| p.id().protocol_id()))
            }
            wlr_handle::Event::Done => t.wlr_done(key),
            wlr_handle::Event::Closed => {
                t.wlr_closed(key);
                handle.destroy();
            }
            _ => {}
        }
    }

    fn ext_list(&mut self, list: &ext_list::ExtForeignToplevelListV1, event: ext_list::Event) {
        match event {
            ext_list::Event::Toplevel { toplevel } => {
                self.tracker().ext_new(toplevel.id().protocol_id());
            }
            ext_list::Event::Finished => {
                tracing::info!(source = NAME, "{EXT_LIST} finished");
                self.tracker().ext_finished();
                list.destroy();
                self.ext = None;
            }
            _ => {}
        }
    }

    fn ext_handle(
        &mut self,
        handle: &ext_handle::ExtForeignToplevelHandleV1,
        event: ext_handle::Event,
    ) {
        let key = handle.id().protocol_id();
        let t = self.tracker();
        match event {
            ext_handle::Event::Title { title } => t.ext_title(key, title),
            ext_handle::Event::AppId { app_id } => t.ext_app_id(key, app_id),
            ext_handle::Event::Identifier { identifier } => t.ext_identifier(key, identifier),
            ext_handle::Event::Done => t.ext_done(key),
            ext_handle::Event::Closed => {
                t.ext_closed(key);
                handle.destroy();
            }
            _ => {}
        }
    }
}

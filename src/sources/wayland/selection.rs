//! The primary selection (source `selection`, category `selection`) from
//! a wlroots compositor, through `ext_data_control_manager_v1` when it is
//! offered, else `zwlr_data_control_manager_v1` (v2 or later: v1 has no
//! primary selection; sway 1.7 offers v2).
//!
//! Its own compositor connection, on its own thread (the toplevels' one
//! stays as it is; a compositor without data control costs the windows
//! nothing). When the primary selection changes, the thread reads it at
//! once, if it is offered as text (`text/plain;charset=utf-8`,
//! `UTF8_STRING` or `text/plain`, in this order), at most 64 KiB (the rest
//! is read and dropped, so the selecting app is not cut off), waiting at
//! most a second for the app to write it. The core keeps only the current
//! value (`SourceEvent::Selection`), which changes nothing that is
//! broadcast or recorded: readers get it only by asking (`GetSelection`,
//! `get_selection`), never in a `Changed` signal, an MCP notification or
//! the timeline. The regular clipboard is never read.
//!
//! Without `WAYLAND_DISPLAY`, or with a compositor that offers neither
//! protocol (or no seat), the source is `unavailable` with the reason; a
//! lost connection is tried again with a backoff (up to 30 s).

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use wayland_client::backend::ObjectId;
use wayland_client::protocol::{wl_callback, wl_registry, wl_seat};
use wayland_client::{
    Connection as WlConnection, Dispatch, EventQueue, Proxy, QueueHandle, event_created_child,
};
use wayland_protocols::ext::data_control::v1::client::{
    ext_data_control_device_v1 as ext_device, ext_data_control_manager_v1 as ext_manager,
    ext_data_control_offer_v1 as ext_offer,
};
use wayland_protocols_wlr::data_control::v1::client::{
    zwlr_data_control_device_v1 as wlr_device, zwlr_data_control_manager_v1 as wlr_manager,
    zwlr_data_control_offer_v1 as wlr_offer,
};

use super::client::{Connection, Ended, send, status, wait_and_read};
use crate::core::SourceEvent;
use crate::model::Selection;
use crate::sources::{Backoff, SourceContext};

pub(crate) const NAME: &str = "selection";
pub(crate) const EXT_MANAGER: &str = "ext_data_control_manager_v1";
pub(crate) const WLR_MANAGER: &str = "zwlr_data_control_manager_v1";
/// The text types read, best first.
pub(crate) const TEXT_TYPES: [&str; 3] = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain"];
/// How long the selecting app has to write its selection.
const READ_TIMEOUT: Duration = Duration::from_secs(1);
/// What is read of a selection at most, the kept part included.
const DRAIN_MAX: usize = 16 * 1024 * 1024;
/// How long the thread may take to stop.
const THREAD_STOP: Duration = Duration::from_millis(300);
/// A connection that lasted this long resets the backoff.
const LIVED_LONG: Duration = Duration::from_secs(5);

/// The source, on the compositor of `WAYLAND_DISPLAY`.
pub(crate) async fn run(ctx: SourceContext) {
    let path = match super::socket_from_env() {
        Ok(p) => p,
        Err(reason) => {
            ctx.status(NAME, false, Some(reason)).await;
            ctx.cancel.cancelled().await;
            return;
        }
    };
    let mut backoff = Backoff::default();
    loop {
        let stream = match super::connect(&path) {
            Ok(s) => s,
            Err(reason) => {
                ctx.status(NAME, false, Some(reason)).await;
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
                continue;
            }
        };
        let tx = ctx.tx.clone();
        let mut conn =
            match Connection::spawn("wayland-selection", move |stop| thread(stream, &tx, stop)) {
                Ok(c) => c,
                Err(e) => {
                    ctx.status(NAME, false, Some(format!("cannot start its thread: {e}")))
                        .await;
                    if !ctx.sleep(backoff.next_delay()).await {
                        return;
                    }
                    continue;
                }
            };
        let started = Instant::now();
        let ended = tokio::select! {
            _ = ctx.cancel.cancelled() => {
                conn.join(THREAD_STOP).await;
                return;
            }
            e = &mut conn.ended => e.unwrap_or(Ended::Lost("the selection thread died".into())),
        };
        conn.join(THREAD_STOP).await;
        match ended {
            Ended::Stopped | Ended::CoreGone => return,
            Ended::Lost(reason) => {
                tracing::info!(source = NAME, "{reason}");
                if !ctx.send(SourceEvent::Selection { selection: None }).await {
                    return;
                }
                ctx.status(NAME, false, Some(reason)).await;
                if started.elapsed() >= LIVED_LONG {
                    backoff.reset();
                }
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
            }
        }
    }
}

/// An offer of either protocol.
#[derive(Debug, Clone)]
enum Offer {
    Ext(ext_offer::ExtDataControlOfferV1),
    Wlr(wlr_offer::ZwlrDataControlOfferV1),
}

impl Offer {
    fn id(&self) -> ObjectId {
        match self {
            Offer::Ext(o) => o.id(),
            Offer::Wlr(o) => o.id(),
        }
    }

    fn receive(&self, mime: &str, fd: std::os::fd::BorrowedFd<'_>) {
        match self {
            Offer::Ext(o) => o.receive(mime.to_owned(), fd),
            Offer::Wlr(o) => o.receive(mime.to_owned(), fd),
        }
    }

    fn destroy(&self) {
        match self {
            Offer::Ext(o) => o.destroy(),
            Offer::Wlr(o) => o.destroy(),
        }
    }
}

#[derive(Default)]
struct State {
    seat: Option<wl_seat::WlSeat>,
    ext: Option<ext_manager::ExtDataControlManagerV1>,
    wlr: Option<wlr_manager::ZwlrDataControlManagerV1>,
    synced: bool,
    /// The offers announced and not yet destroyed, with their types.
    offers: HashMap<ObjectId, (Offer, Vec<String>)>,
    /// The current primary selection's offer.
    primary: Option<ObjectId>,
    /// A primary selection to read once this batch is dispatched:
    /// `Some(None)` when it was cleared.
    pending: Option<Option<ObjectId>>,
    finished: bool,
}

impl State {
    fn new_offer(&mut self, offer: Offer) {
        self.offers.insert(offer.id(), (offer, Vec::new()));
    }

    fn offered(&mut self, id: ObjectId, mime: String) {
        if let Some((_, types)) = self.offers.get_mut(&id)
            && types.len() < 64
        {
            types.push(mime);
        }
    }

    fn drop_offer(&mut self, id: &ObjectId) {
        if let Some((o, _)) = self.offers.remove(id) {
            o.destroy();
        }
    }

    /// The regular clipboard: never read, its offer dropped at once.
    fn clipboard(&mut self, id: Option<ObjectId>) {
        if let Some(id) = id {
            self.drop_offer(&id);
        }
    }

    fn primary(&mut self, id: Option<ObjectId>) {
        if let Some(old) = self.primary.take()
            && Some(&old) != id.as_ref()
        {
            self.drop_offer(&old);
        }
        self.primary = id.clone();
        self.pending = Some(id);
    }
}

/// Read what the app that owns `offer` writes as `mime`: at most
/// [`Selection::MAX_BYTES`] kept, `None` when it does not answer in time.
fn read_offer(conn: &WlConnection, offer: &Offer, mime: &str) -> Option<(Vec<u8>, bool)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) with a two-int array and valid flags; checked.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        tracing::debug!(source = NAME, error = %std::io::Error::last_os_error(), "pipe2");
        return None;
    }
    // SAFETY: two new descriptors that nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    offer.receive(mime, w.as_fd());
    drop(w);
    if conn.flush().is_err() {
        return None;
    }
    let mut file = std::fs::File::from(r);
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::debug!(source = NAME, "the selecting app did not write in time");
            return None;
        }
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
        // SAFETY: poll(2) on one valid descriptor we hold.
        if unsafe { libc::poll(&mut pfd, 1, ms) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return None;
        }
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n;
                let room = Selection::MAX_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                if total > DRAIN_MAX {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some((kept, total > Selection::MAX_BYTES))
}

/// The selection `id` offers, as text, or `None`.
fn selection_of(conn: &WlConnection, state: &State, id: &ObjectId) -> Option<Selection> {
    let (offer, types) = state.offers.get(id)?;
    let mime = TEXT_TYPES.iter().find(|t| types.iter().any(|o| o == *t))?;
    let (bytes, truncated) = read_offer(conn, offer, mime)?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if truncated && text.ends_with('\u{FFFD}') {
        // A character cut at the limit.
        text.pop();
    }
    Some(Selection {
        text,
        mime_type: (*mime).to_owned(),
        truncated,
        since: chrono::Utc::now(),
    })
}

fn thread(stream: UnixStream, tx: &mpsc::Sender<SourceEvent>, stop: &OwnedFd) -> Ended {
    let conn = match WlConnection::from_socket(stream) {
        Ok(c) => c,
        Err(e) => return Ended::Lost(format!("cannot set up the Wayland connection: {e}")),
    };
    let mut queue: EventQueue<State> = conn.new_event_queue();
    let qh = queue.handle();
    conn.display().get_registry(&qh, ());
    conn.display().sync(&qh, ());
    let mut state = State::default();
    let mut announced = false;
    // The text last sent, so that the same selection is not sent twice.
    let mut last: Option<String> = None;
    loop {
        if let Err(e) = queue.dispatch_pending(&mut state) {
            return Ended::Lost(format!("dispatch failed: {e}"));
        }
        if state.synced && !announced {
            announced = true;
            let seat = state.seat.clone();
            let device = match (&state.ext, &state.wlr, seat) {
                (_, _, None) => Err("the compositor offers no seat".to_owned()),
                (Some(m), _, Some(seat)) => {
                    m.get_data_device(&seat, &qh, ());
                    Ok(format!("{EXT_MANAGER} v{}", m.version()))
                }
                (None, Some(m), Some(seat)) if m.version() >= 2 => {
                    m.get_data_device(&seat, &qh, ());
                    Ok(format!("{WLR_MANAGER} v{}", m.version()))
                }
                (None, Some(m), Some(_)) => Err(format!(
                    "the compositor offers {WLR_MANAGER} v{}, which has no primary selection (v2 has)",
                    m.version()
                )),
                (None, None, Some(_)) => Err(format!(
                    "the compositor offers neither {EXT_MANAGER} nor {WLR_MANAGER}"
                )),
            };
            let ok = match device {
                Ok(which) => {
                    tracing::info!(
                        source = NAME,
                        "following the primary selection through {which}"
                    );
                    status(tx, NAME, true, None)
                }
                Err(why) => {
                    tracing::info!(source = NAME, "{why}");
                    // Nothing to follow on this compositor; the backoff
                    // tries again (a restarted compositor may offer it).
                    return Ended::Lost(why);
                }
            };
            if !ok {
                return Ended::CoreGone;
            }
        }
        if state.finished {
            return Ended::Lost("the compositor ended the data-control device".into());
        }
        if let Some(id) = state.pending.take() {
            let sel = id.and_then(|id| selection_of(&conn, &state, &id));
            let text = sel.as_ref().map(|s| s.text.clone());
            if text != last {
                last = text;
                if !send(tx, SourceEvent::Selection { selection: sel }) {
                    return Ended::CoreGone;
                }
            }
        }
        if let Some(end) = wait_and_read(&conn, || queue.prepare_read(), stop, tx, None) {
            return end;
        }
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        registry: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &WlConnection,
        qh: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
        {
            if state.synced {
                return;
            }
            match interface.as_str() {
                "wl_seat" if state.seat.is_none() => {
                    state.seat = Some(registry.bind(name, version.min(1), qh, ()));
                }
                EXT_MANAGER if state.ext.is_none() => {
                    state.ext = Some(registry.bind(name, version.min(1), qh, ()));
                }
                WLR_MANAGER if state.wlr.is_none() => {
                    state.wlr = Some(registry.bind(name, version.min(2), qh, ()));
                }
                _ => {}
            }
        }
    }
}

impl Dispatch<wl_callback::WlCallback, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        event: wl_callback::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_callback::Event::Done { .. } = event {
            state.synced = true;
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(
        _: &mut Self,
        _: &wl_seat::WlSeat,
        _: wl_seat::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ext_manager::ExtDataControlManagerV1, ()> for State {
    fn event(
        _: &mut Self,
        _: &ext_manager::ExtDataControlManagerV1,
        _: ext_manager::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<wlr_manager::ZwlrDataControlManagerV1, ()> for State {
    fn event(
        _: &mut Self,
        _: &wlr_manager::ZwlrDataControlManagerV1,
        _: wlr_manager::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ext_device::ExtDataControlDeviceV1, ()> for State {
    fn event(
        state: &mut Self,
        device: &ext_device::ExtDataControlDeviceV1,
        event: ext_device::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            ext_device::Event::DataOffer { id } => state.new_offer(Offer::Ext(id)),
            ext_device::Event::Selection { id } => state.clipboard(id.map(|o| o.id())),
            ext_device::Event::PrimarySelection { id } => state.primary(id.map(|o| o.id())),
            ext_device::Event::Finished => {
                device.destroy();
                state.finished = true;
            }
            _ => {}
        }
    }

    event_created_child!(State, ext_device::ExtDataControlDeviceV1, [
        ext_device::EVT_DATA_OFFER_OPCODE => (ext_offer::ExtDataControlOfferV1, ()),
    ]);
}

impl Dispatch<wlr_device::ZwlrDataControlDeviceV1, ()> for State {
    fn event(
        state: &mut Self,
        device: &wlr_device::ZwlrDataControlDeviceV1,
        event: wlr_device::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            wlr_device::Event::DataOffer { id } => state.new_offer(Offer::Wlr(id)),
            wlr_device::Event::Selection { id } => state.clipboard(id.map(|o| o.id())),
            wlr_device::Event::PrimarySelection { id } => state.primary(id.map(|o| o.id())),
            wlr_device::Event::Finished => {
                device.destroy();
                state.finished = true;
            }
            _ => {}
        }
    }

    event_created_child!(State, wlr_device::ZwlrDataControlDeviceV1, [
        wlr_device::EVT_DATA_OFFER_OPCODE => (wlr_offer::ZwlrDataControlOfferV1, ()),
    ]);
}

impl Dispatch<ext_offer::ExtDataControlOfferV1, ()> for State {
    fn event(
        state: &mut Self,
        offer: &ext_offer::ExtDataControlOfferV1,
        event: ext_offer::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
        if let ext_offer::Event::Offer { mime_type } = event {
            state.offered(offer.id(), mime_type);
        }
    }
}

impl Dispatch<wlr_offer::ZwlrDataControlOfferV1, ()> for State {
    fn event(
        state: &mut Self,
        offer: &wlr_offer::ZwlrDataControlOfferV1,
        event: wlr_offer::Event,
        _: &(),
        _: &WlConnection,
        _: &QueueHandle<Self>,
    ) {
        if let wlr_offer::Event::Offer { mime_type } = event {
            state.offered(offer.id(), mime_type);
        }
    }
}

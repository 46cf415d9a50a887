//! The Wayland source against a small fake compositor (wayland-server)
//! that offers `ext_foreign_toplevel_list_v1`, which Debian 12's sway 1.7
//! does not: the source's real client thread and reconnect logic, over a
//! real Wayland socket, with either protocol, both, or neither.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use contextd::config::{Config, ConfigFile, Paths};
use contextd::internals::SourceEvent;
use contextd::internals::{Backoff, SourceContext, run_wayland_source_at};
use contextd::model::Window;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wayland_protocols::ext::foreign_toplevel_list::v1::server::{
    ext_foreign_toplevel_handle_v1::{self as ext_h, ExtForeignToplevelHandleV1},
    ext_foreign_toplevel_list_v1::{self as ext_l, ExtForeignToplevelListV1},
};
use wayland_protocols_wlr::foreign_toplevel::v1::server::{
    zwlr_foreign_toplevel_handle_v1::{self as wlr_h, ZwlrForeignToplevelHandleV1},
    zwlr_foreign_toplevel_manager_v1::{self as wlr_m, ZwlrForeignToplevelManagerV1},
};
use wayland_server::backend::{ClientData, ClientId, DisconnectReason};
use wayland_server::{
    Client, DataInit, Dispatch, Display, DisplayHandle, GlobalDispatch, ListeningSocket, New,
    Resource,
};

// ---------------------------------------------------------------- the fake

struct Top {
    ident: String,
    app_id: String,
    title: String,
    activated: bool,
    ext: Vec<ExtForeignToplevelHandleV1>,
    wlr: Vec<ZwlrForeignToplevelHandleV1>,
}

#[derive(Default)]
struct Srv {
    tops: Vec<Top>,
    ext_lists: Vec<ExtForeignToplevelListV1>,
    wlr_mgrs: Vec<ZwlrForeignToplevelManagerV1>,
}

fn wlr_states(activated: bool) -> Vec<u8> {
    if activated {
        2u32.to_ne_bytes().to_vec()
    } else {
        Vec::new()
    }
}

impl Srv {
    fn announce_ext(dh: &DisplayHandle, list: &ExtForeignToplevelListV1, top: &mut Top) {
        let Some(client) = list.client() else { return };
        let Ok(h) =
            client.create_resource::<ExtForeignToplevelHandleV1, (), Srv>(dh, list.version(), ())
        else {
            return;
        };
        list.toplevel(&h);
        h.identifier(top.ident.clone());
        h.app_id(top.app_id.clone());
        h.title(top.title.clone());
        h.done();
        top.ext.push(h);
    }

    fn announce_wlr(dh: &DisplayHandle, mgr: &ZwlrForeignToplevelManagerV1, top: &mut Top) {
        let Some(client) = mgr.client() else { return };
        let Ok(h) =
            client.create_resource::<ZwlrForeignToplevelHandleV1, (), Srv>(dh, mgr.version(), ())
        else {
            return;
        };
        mgr.toplevel(&h);
        h.app_id(top.app_id.clone());
        h.title(top.title.clone());
        h.state(wlr_states(top.activated));
        h.done();
        top.wlr.push(h);
    }
}

impl GlobalDispatch<ExtForeignToplevelListV1, ()> for Srv {
    fn bind(
        srv: &mut Self,
        dh: &DisplayHandle,
        _: &Client,
        resource: New<ExtForeignToplevelListV1>,
        _: &(),
        data_init: &mut DataInit<'_, Self>,
    ) {
        let list = data_init.init(resource, ());
        for top in &mut srv.tops {
            Srv::announce_ext(dh, &list, top);
        }
        srv.ext_lists.push(list);
    }
}

impl Dispatch<ExtForeignToplevelListV1, ()> for Srv {
    fn request(
        _: &mut Self,
        _: &Client,
        list: &ExtForeignToplevelListV1,
        request: ext_l::Request,
        _: &(),
        _: &DisplayHandle,
        _: &mut DataInit<'_, Self>,
    ) {
        if let ext_l::Request::Stop = request {
            list.finished();
        }
    }
}

impl Dispatch<ExtForeignToplevelHandleV1, ()> for Srv {
    fn request(
        _: &mut Self,
        _: &Client,
        _: &ExtForeignToplevelHandleV1,
        _: ext_h::Request,
        _: &(),
        _: &DisplayHandle,
        _: &mut DataInit<'_, Self>,
    ) {
    }
}

impl GlobalDispatch<ZwlrForeignToplevelManagerV1, ()> for Srv {
    fn bind(
        srv: &mut Self,
        dh: &DisplayHandle,
        _: &Client,
        resource: New<ZwlrForeignToplevelManagerV1>,
        _: &(),
        data_init: &mut DataInit<'_, Self>,
    ) {
        let mgr = data_init.init(resource, ());
        for top in &mut srv.tops {
            Srv::announce_wlr(dh, &mgr, top);
        }
        srv.wlr_mgrs.push(mgr);
    }
}

impl Dispatch<ZwlrForeignToplevelManagerV1, ()> for Srv {
    fn request(
        _: &mut Self,
        _: &Client,
        mgr: &ZwlrForeignToplevelManagerV1,
        request: wlr_m::Request,
        _: &(),
        _: &DisplayHandle,
        _: &mut DataInit<'_, Self>,
    ) {
        if let wlr_m::Request::Stop = request {
            mgr.finished();
        }
    }
}

impl Dispatch<ZwlrForeignToplevelHandleV1, ()> for Srv {
    fn request(
        _: &mut Self,
        _: &Client,
        _: &ZwlrForeignToplevelHandleV1,
        _: wlr_h::Request,
        _: &(),
        _: &DisplayHandle,
        _: &mut DataInit<'_, Self>,
    ) {
    }
}

struct NoData;
impl ClientData for NoData {
    fn initialized(&self, _: ClientId) {}
    fn disconnected(&self, _: ClientId, _: DisconnectReason) {}
}

enum Cmd {
    Open(&'static str, &'static str, &'static str),
    Title(&'static str, &'static str),
    Focus(&'static str),
    Close(&'static str),
}

/// A fake compositor on its own thread, listening at `path`.
struct Fake {
    tx: Option<std_mpsc::Sender<Cmd>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Fake {
    fn start(path: &Path, ext: bool, wlr: bool) -> Fake {
        let _ = std::fs::remove_file(path);
        let socket = ListeningSocket::bind_absolute(path.to_path_buf()).expect("bind socket");
        let (tx, rx) = std_mpsc::channel::<Cmd>();
        let thread = std::thread::spawn(move || {
            let mut display: Display<Srv> = Display::new().expect("display");
            let dh = display.handle();
            if ext {
                dh.create_global::<Srv, ExtForeignToplevelListV1, ()>(1, ());
            }
            if wlr {
                dh.create_global::<Srv, ZwlrForeignToplevelManagerV1, ()>(3, ());
            }
            let mut srv = Srv::default();
            loop {
                while let Ok(Some(stream)) = socket.accept() {
                    display
                        .handle()
                        .insert_client(stream, Arc::new(NoData))
                        .expect("insert client");
                }
                let _ = display.dispatch_clients(&mut srv);
                loop {
                    match rx.try_recv() {
                        Ok(cmd) => apply(&mut srv, &dh, cmd),
                        Err(std_mpsc::TryRecvError::Empty) => break,
                        // Dropped: the compositor "dies" (sockets close).
                        Err(std_mpsc::TryRecvError::Disconnected) => return,
                    }
                }
                let _ = display.flush_clients();
                let mut fds = [
                    libc::pollfd {
                        fd: socket.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: display.backend().poll_fd().as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: poll(2) on two descriptors we hold; 5 ms so that
                // commands are picked up promptly.
                unsafe { libc::poll(fds.as_mut_ptr(), 2, 5) };
            }
        });
        Fake {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    fn send(&self, cmd: Cmd) {
        self.tx
            .as_ref()
            .expect("running")
            .send(cmd)
            .expect("fake alive");
    }

    /// Stop the compositor: every client connection closes, the socket
    /// file is removed.
    fn kill(&mut self, path: &Path) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            t.join().expect("fake thread");
        }
        let _ = std::fs::remove_file(path);
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn apply(srv: &mut Srv, dh: &DisplayHandle, cmd: Cmd) {
    match cmd {
        Cmd::Open(ident, app_id, title) => {
            let mut top = Top {
                ident: ident.into(),
                app_id: app_id.into(),
                title: title.into(),
                activated: false,
                ext: Vec::new(),
                wlr: Vec::new(),
            };
            for l in &srv.ext_lists {
                Srv::announce_ext(dh, l, &mut top);
            }
            for m in &srv.wlr_mgrs {
                Srv::announce_wlr(dh, m, &mut top);
            }
            srv.tops.push(top);
        }
        Cmd::Title(ident, title) => {
            if let Some(t) = srv.tops.iter_mut().find(|t| t.ident == ident) {
                t.title = title.into();
                for h in &t.ext {
                    h.title(title.into());
                    h.done();
                }
                for h in &t.wlr {
                    h.title(title.into());
                    h.done();
                }
            }
        }
        Cmd::Focus(ident) => {
            // As wlroots does: the old one is deactivated first.
            let mut order: Vec<usize> = (0..srv.tops.len()).collect();
            order.sort_by_key(|i| srv.tops[*i].ident == ident);
            for i in order {
                let t = &mut srv.tops[i];
                let want = t.ident == ident;
                if t.activated != want {
                    t.activated = want;
                    for h in &t.wlr {
                        h.state(wlr_states(want));
                        h.done();
                    }
                }
            }
        }
        Cmd::Close(ident) => {
            if let Some(pos) = srv.tops.iter().position(|t| t.ident == ident) {
                let t = srv.tops.remove(pos);
                for h in &t.ext {
                    h.closed();
                }
                for h in &t.wlr {
                    h.closed();
                }
            }
        }
    }
}

// ---------------------------------------------------------------- harness

struct Source {
    rx: mpsc::Receiver<SourceEvent>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn config(dir: &Path) -> Arc<Config> {
    Arc::new(Config {
        paths: Paths {
            config_dir: dir.join("config"),
            data_dir: dir.join("data"),
            state_dir: dir.join("state"),
            runtime_dir: None,
        },
        file: ConfigFile::default(),
        replace: false,
        replay: Default::default(),
    })
}

impl Source {
    /// The source on `path`, with a backoff so long that only inotify
    /// can explain a prompt reconnect.
    fn start(dir: &Path, path: &Path) -> Source {
        let (tx, rx) = mpsc::channel(1024);
        let cancel = CancellationToken::new();
        let ctx = SourceContext {
            tx,
            cancel: cancel.clone(),
            tasks: tokio_util::task::TaskTracker::new(),
            config: config(dir),
            own_names: Arc::from(Vec::<String>::new()),
        };
        let backoff = Backoff::new(Duration::from_secs(60), Duration::from_secs(60));
        let task = tokio::spawn(run_wayland_source_at(ctx, path.to_path_buf(), backoff));
        Source { rx, cancel, task }
    }

    /// Events until `pred` holds for one, within `secs`; returns them all.
    async fn until(
        &mut self,
        secs: u64,
        what: &str,
        pred: impl Fn(&SourceEvent) -> bool,
    ) -> Vec<SourceEvent> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Ok(Some(ev)) => {
                    let hit = pred(&ev);
                    seen.push(ev);
                    if hit {
                        return seen;
                    }
                }
                Ok(None) => panic!("source ended while waiting for {what}; saw {seen:?}"),
                Err(_) => panic!("no {what} within {secs} s; saw {seen:?}"),
            }
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(2), self.task)
            .await
            .expect("source stops within 2 s")
            .expect("source task");
    }
}

fn window<'a>(ev: &'a SourceEvent, app_id: &str) -> Option<&'a Window> {
    match ev {
        SourceEvent::Window { window } if window.app_id == app_id => Some(window),
        _ => None,
    }
}

fn status(ev: &SourceEvent, available: bool) -> bool {
    matches!(ev, SourceEvent::SourceStatus { source, available: a, .. } if source == "wayland" && *a == available)
}

fn sock(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("wayland-fake")
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ext_identifier_is_the_id_and_states_come_from_wlr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock(&dir);
    let fake = Fake::start(&path, true, true);
    fake.send(Cmd::Open("aaaa0001", "org.a.App", "First"));
    fake.send(Cmd::Focus("aaaa0001"));
    let mut src = Source::start(dir.path(), &path);
    src.until(5, "available", |e| status(e, true)).await;
    let seen = src
        .until(5, "the window", |e| {
            window(e, "org.a.App").is_some_and(|w| w.states.activated)
        })
        .await;
    let w = seen
        .iter()
        .rev()
        .find_map(|e| window(e, "org.a.App"))
        .expect("window");
    assert_eq!(w.id, "ext-1-aaaa0001");
    assert_eq!(w.title, "First");

    // A second window takes focus; a title change; a close.
    fake.send(Cmd::Open("bbbb0002", "org.b.App", "Second"));
    src.until(5, "second window", |e| window(e, "org.b.App").is_some())
        .await;
    fake.send(Cmd::Focus("bbbb0002"));
    let seen = src
        .until(5, "focus on the second", |e| {
            window(e, "org.a.App").is_some_and(|w| !w.states.activated)
        })
        .await;
    // The newly active window comes first (no "no focus" in between).
    let first = seen.iter().find_map(|e| match e {
        SourceEvent::Window { window } => Some(window),
        _ => None,
    });
    assert!(
        first.is_some_and(|w| w.id == "ext-1-bbbb0002" && w.states.activated),
        "{seen:?}"
    );
    fake.send(Cmd::Title("aaaa0001", "First, renamed"));
    let seen = src
        .until(5, "title", |e| {
            window(e, "org.a.App").is_some_and(|w| w.title == "First, renamed")
        })
        .await;
    assert_eq!(
        seen.iter()
            .filter(|e| window(e, "org.a.App").is_some())
            .count(),
        1,
        "one change per title change, though both protocols send it: {seen:?}"
    );
    fake.send(Cmd::Close("bbbb0002"));
    src.until(
        5,
        "close",
        |e| matches!(e, SourceEvent::WindowClosed { id } if id == "ext-1-bbbb0002"),
    )
    .await;
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ext_alone_lists_windows_without_states_and_wlr_alone_uses_broker_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock(&dir);
    let fake = Fake::start(&path, true, false);
    fake.send(Cmd::Open("only-ext", "org.e.App", "E"));
    let mut src = Source::start(dir.path(), &path);
    let seen = src
        .until(5, "window", |e| window(e, "org.e.App").is_some())
        .await;
    let w = seen.iter().find_map(|e| window(e, "org.e.App")).expect("w");
    assert_eq!(w.id, "ext-1-only-ext");
    assert!(!w.states.activated);
    src.stop().await;
    drop(fake);

    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock(&dir);
    let fake = Fake::start(&path, false, true);
    fake.send(Cmd::Open("ignored", "org.w.App", "W"));
    fake.send(Cmd::Focus("ignored"));
    let mut src = Source::start(dir.path(), &path);
    let seen = src
        .until(5, "window", |e| {
            window(e, "org.w.App").is_some_and(|w| w.states.activated)
        })
        .await;
    let w = seen
        .iter()
        .rev()
        .find_map(|e| window(e, "org.w.App"))
        .expect("w");
    assert_eq!(w.id, "wl-1-1");
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_protocol_is_unavailable_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock(&dir);
    let _fake = Fake::start(&path, false, false);
    let mut src = Source::start(dir.path(), &path);
    let seen = src.until(5, "unavailable", |e| status(e, false)).await;
    let Some(SourceEvent::SourceStatus { error: Some(e), .. }) = seen.last() else {
        panic!("{seen:?}")
    };
    assert!(
        e.contains("neither") && e.contains("ext_foreign_toplevel_list_v1"),
        "{e}"
    );
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compositor_gone_resets_windows_and_inotify_brings_it_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock(&dir);
    let mut fake = Fake::start(&path, true, true);
    fake.send(Cmd::Open("one", "org.a.App", "A"));
    let mut src = Source::start(dir.path(), &path);
    src.until(5, "window", |e| window(e, "org.a.App").is_some())
        .await;

    fake.kill(&path);
    let seen = src.until(5, "unavailable", |e| status(e, false)).await;
    assert!(seen.contains(&SourceEvent::WindowsReset), "{seen:?}");
    // The source now waits on inotify (its backoff is 60 s).
    tokio::time::sleep(Duration::from_millis(300)).await;

    let t0 = Instant::now();
    let fake = Fake::start(&path, true, true);
    fake.send(Cmd::Open("one", "org.a.App", "A again"));
    let seen = src
        .until(5, "window again", |e| window(e, "org.a.App").is_some())
        .await;
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "reconnect took {:?}",
        t0.elapsed()
    );
    let w = seen.iter().find_map(|e| window(e, "org.a.App")).expect("w");
    // The same identifier on a new compositor: a new window id.
    assert_eq!(w.id, "ext-2-one");
    src.stop().await;
}

//! Test helper (not shipped): a Wayland client that opens toplevels
//! (xdg-shell, a 1×1 shm buffer each) so that tests and benchmarks can
//! make many windows and long titles without a terminal per window.
//!
//! Usage: `wl_toplevels COUNT APP_ID_PREFIX TITLE_PREFIX`
//! opens COUNT windows, app id `APP_ID_PREFIX<i>` and title
//! `TITLE_PREFIX<i>` (i from 1; with COUNT 1 both without the number),
//! prints `ready` once the compositor has mapped them all, then reads
//! commands on stdin, one a line, and prints `ok` after each:
//! - `title I TEXT`: retitle window I;
//! - `long-title I BYTES`: retitle window I with BYTES bytes of text;
//! - `close I`: close window I;
//! - `quit` (or end of input): exit.
//!
//! The Wayland wire caps a message at 4096 bytes, so a title is cut to
//! [`MAX_TITLE_BYTES`] before it is sent: a client cannot send more, and
//! the broker is shown the longest title a compositor can pass on.

use std::io::{BufRead, Write};
use std::os::fd::{AsFd, AsRawFd};

use wayland_client::protocol::{
    wl_buffer, wl_compositor, wl_registry, wl_shm, wl_shm_pool, wl_surface,
};
use wayland_client::{Connection, Dispatch, QueueHandle, delegate_noop};
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel, xdg_wm_base};

/// The longest title this client sends (the wire's 4096-byte message
/// minus the header, length and padding, with room to spare).
pub const MAX_TITLE_BYTES: usize = 4000;

struct Win {
    surface: wl_surface::WlSurface,
    xdg: xdg_surface::XdgSurface,
    top: xdg_toplevel::XdgToplevel,
    configured: bool,
}

#[derive(Default)]
struct App {
    compositor: Option<wl_compositor::WlCompositor>,
    shm: Option<wl_shm::WlShm>,
    wm: Option<xdg_wm_base::XdgWmBase>,
    buffer: Option<wl_buffer::WlBuffer>,
    wins: Vec<Option<Win>>,
}

fn cut(s: &str) -> &str {
    if s.len() <= MAX_TITLE_BYTES {
        return s;
    }
    let mut i = MAX_TITLE_BYTES;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

impl App {
    fn open(&mut self, qh: &QueueHandle<App>, app_id: &str, title: &str) {
        let (Some(c), Some(wm)) = (&self.compositor, &self.wm) else {
            panic!("compositor lacks wl_compositor or xdg_wm_base");
        };
        let surface = c.create_surface(qh, ());
        let idx = self.wins.len();
        let xdg = wm.get_xdg_surface(&surface, qh, idx);
        let top = xdg.get_toplevel(qh, idx);
        top.set_app_id(app_id.into());
        top.set_title(cut(title).into());
        surface.commit();
        self.wins.push(Some(Win {
            surface,
            xdg,
            top,
            configured: false,
        }));
    }

    fn all_configured(&self) -> bool {
        self.wins.iter().flatten().all(|w| w.configured)
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for App {
    fn event(
        app: &mut Self,
        reg: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
        {
            match interface.as_str() {
                "wl_compositor" => app.compositor = Some(reg.bind(name, version.min(4), qh, ())),
                "wl_shm" => app.shm = Some(reg.bind(name, 1, qh, ())),
                "xdg_wm_base" => app.wm = Some(reg.bind(name, 1, qh, ())),
                _ => {}
            }
        }
    }
}

impl Dispatch<xdg_wm_base::XdgWmBase, ()> for App {
    fn event(
        _: &mut Self,
        wm: &xdg_wm_base::XdgWmBase,
        event: xdg_wm_base::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let xdg_wm_base::Event::Ping { serial } = event {
            wm.pong(serial);
        }
    }
}

impl Dispatch<xdg_surface::XdgSurface, usize> for App {
    fn event(
        app: &mut Self,
        xdg: &xdg_surface::XdgSurface,
        event: xdg_surface::Event,
        idx: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let xdg_surface::Event::Configure { serial } = event {
            xdg.ack_configure(serial);
            let buffer = app.buffer.clone();
            if let Some(Some(w)) = app.wins.get_mut(*idx) {
                if !w.configured {
                    w.surface.attach(buffer.as_ref(), 0, 0);
                    w.configured = true;
                }
                w.surface.commit();
            }
        }
    }
}

impl Dispatch<xdg_toplevel::XdgToplevel, usize> for App {
    fn event(
        app: &mut Self,
        _: &xdg_toplevel::XdgToplevel,
        event: xdg_toplevel::Event,
        idx: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let xdg_toplevel::Event::Close = event
            && let Some(slot) = app.wins.get_mut(*idx)
            && let Some(w) = slot.take()
        {
            w.top.destroy();
            w.xdg.destroy();
            w.surface.destroy();
        }
    }
}

delegate_noop!(App: ignore wl_compositor::WlCompositor);
delegate_noop!(App: ignore wl_surface::WlSurface);
delegate_noop!(App: ignore wl_shm::WlShm);
delegate_noop!(App: ignore wl_shm_pool::WlShmPool);
delegate_noop!(App: ignore wl_buffer::WlBuffer);

fn shm_buffer(app: &mut App, qh: &QueueHandle<App>) {
    let shm = app.shm.as_ref().expect("compositor lacks wl_shm");
    let name = std::ffi::CString::new("wl_toplevels").expect("name");
    // SAFETY: memfd_create with a valid name; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create failed");
    // SAFETY: a fresh descriptor we own.
    let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    file.set_len(4).expect("size the buffer");
    let pool = shm.create_pool(file.as_fd(), 4, qh, ());
    app.buffer = Some(pool.create_buffer(0, 1, 1, 4, wl_shm::Format::Argb8888, qh, ()));
    pool.destroy();
}

/// Wait until stdin has a line or the display has events; true for stdin.
fn wait(conn: &Connection, queue: &mut wayland_client::EventQueue<App>, app: &mut App) -> bool {
    queue.dispatch_pending(app).expect("dispatch");
    conn.flush().expect("flush");
    let Some(guard) = queue.prepare_read() else {
        return false;
    };
    let mut fds = [
        libc::pollfd {
            fd: guard.connection_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: poll(2) on two valid descriptors.
    unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
    if fds[0].revents != 0 {
        guard.read().expect("compositor connection lost");
    } else {
        drop(guard);
    }
    queue.dispatch_pending(app).expect("dispatch");
    fds[1].revents != 0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: wl_toplevels COUNT APP_ID_PREFIX TITLE_PREFIX");
        std::process::exit(2);
    }
    let count: usize = args[1].parse().expect("COUNT");
    let conn = Connection::connect_to_env().expect("connect to the compositor");
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    conn.display().get_registry(&qh, ());
    let mut app = App::default();
    queue.roundtrip(&mut app).expect("roundtrip");
    shm_buffer(&mut app, &qh);
    for i in 1..=count {
        let (a, t) = if count == 1 {
            (args[2].clone(), args[3].clone())
        } else {
            (format!("{}{i}", args[2]), format!("{}{i}", args[3]))
        };
        app.open(&qh, &a, &t);
    }
    while !app.all_configured() {
        queue.blocking_dispatch(&mut app).expect("dispatch");
    }
    queue.roundtrip(&mut app).expect("roundtrip");
    let out = std::io::stdout();
    writeln!(out.lock(), "ready").expect("stdout");
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        if !wait(&conn, &mut queue, &mut app) {
            continue;
        }
        let Some(Ok(line)) = lines.next() else { break };
        let mut parts = line.splitn(3, ' ');
        let cmd = parts.next().unwrap_or("");
        let idx = |p: Option<&str>| -> usize {
            p.and_then(|s| s.parse::<usize>().ok())
                .filter(|i| *i >= 1)
                .expect("window number from 1")
                - 1
        };
        match cmd {
            "title" => {
                let i = idx(parts.next());
                let t = parts.next().unwrap_or("");
                if let Some(Some(w)) = app.wins.get(i) {
                    w.top.set_title(cut(t).into());
                }
            }
            "long-title" => {
                let i = idx(parts.next());
                let n: usize = parts.next().and_then(|s| s.parse().ok()).expect("BYTES");
                let t: String = "0123456789abcdef".repeat(n / 16 + 1)[..n].to_owned();
                if let Some(Some(w)) = app.wins.get(i) {
                    w.top.set_title(cut(&t).into());
                }
            }
            "close" => {
                let i = idx(parts.next());
                if let Some(slot) = app.wins.get_mut(i)
                    && let Some(w) = slot.take()
                {
                    w.top.destroy();
                    w.xdg.destroy();
                    w.surface.destroy();
                }
            }
            "quit" => break,
            "" => continue,
            other => {
                eprintln!("unknown command: {other}");
                continue;
            }
        }
        queue.roundtrip(&mut app).expect("roundtrip");
        writeln!(out.lock(), "ok").expect("stdout");
    }
}

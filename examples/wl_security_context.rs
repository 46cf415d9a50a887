//! Test helper (not shipped): what a sandbox engine (Flatpak, a browser's
//! sandbox) does with `wp_security_context_v1` before it starts an app:
//! make a Wayland socket of its own, hand it to the compositor with the
//! sandbox's metadata, and give the app only that socket. Every client
//! that connects through it is, to the compositor, in that security
//! context (sway 1.12 tells it in its IPC: `sandbox_engine`,
//! `sandbox_app_id`, `sandbox_instance_id`).
//!
//! Usage: `wl_security_context SOCKET ENGINE APP_ID INSTANCE_ID`
//! makes the listening socket SOCKET (a path), registers it with the
//! compositor of `WAYLAND_DISPLAY`, prints `ready` once the compositor
//! has it, and keeps it served until its standard input ends (then the
//! compositor is told to stop listening).

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;

use wayland_client::protocol::wl_registry;
use wayland_client::{Connection, Dispatch, QueueHandle, delegate_noop};
use wayland_protocols::wp::security_context::v1::client::{
    wp_security_context_manager_v1::WpSecurityContextManagerV1,
    wp_security_context_v1::WpSecurityContextV1,
};

#[derive(Default)]
struct App {
    manager: Option<WpSecurityContextManagerV1>,
}

impl Dispatch<wl_registry::WlRegistry, ()> for App {
    fn event(
        state: &mut Self,
        registry: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name, interface, ..
        } = event
            && interface == "wp_security_context_manager_v1"
        {
            state.manager = Some(registry.bind(name, 1, qh, ()));
        }
    }
}

delegate_noop!(App: ignore WpSecurityContextManagerV1);
delegate_noop!(App: ignore WpSecurityContextV1);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, engine, app_id, instance] = args.as_slice() else {
        eprintln!("usage: wl_security_context SOCKET ENGINE APP_ID INSTANCE_ID");
        std::process::exit(2);
    };
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).expect("bind the sandbox's socket");
    // The compositor stops listening when this pipe's read end turns
    // readable: when the write end closes, at exit.
    let (close_read, close_write) = std::io::pipe().expect("pipe");
    let conn = Connection::connect_to_env().expect("connect to the compositor");
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    conn.display().get_registry(&qh, ());
    let mut app = App::default();
    queue.roundtrip(&mut app).expect("roundtrip");
    let Some(manager) = app.manager.clone() else {
        eprintln!("the compositor offers no wp_security_context_manager_v1");
        std::process::exit(3);
    };
    let context = manager.create_listener(listener.as_fd(), close_read.as_fd(), &qh, ());
    context.set_sandbox_engine(engine.clone());
    context.set_app_id(app_id.clone());
    context.set_instance_id(instance.clone());
    context.commit();
    queue.roundtrip(&mut app).expect("roundtrip");
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(close_write);
    drop(listener);
    let _ = std::fs::remove_file(socket);
}

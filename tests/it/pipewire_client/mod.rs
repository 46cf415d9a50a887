//! Small pipewire-rs clients for the PipeWire tests and the bench: a video
//! source with a video capture stream linked to it (PipeWire 0.3.65 has no
//! command-line tool that makes a video stream: pw-cat is audio and MIDI
//! only, and the server's `videotestsrc` factory is not mapped in Debian's
//! pipewire.conf), and a bare registry listener.
//!
//! Each runs PipeWire's loop on its own thread and is stopped and joined
//! on drop. They connect to the socket given (an absolute path), never to
//! the user's own PipeWire.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pipewire as pw;
use pw::properties::PropertiesBox;
use pw::spa;
use pw::spa::pod::Pod;

/// A PipeWire client thread; quits and is joined on drop.
pub struct PwThread {
    quit: Option<pw::channel::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for PwThread {
    fn drop(&mut self) {
        if let Some(q) = self.quit.take() {
            let _ = q.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn props(kv: &[(&str, &str)]) -> PropertiesBox {
    let mut p = PropertiesBox::new();
    for (k, v) in kv {
        p.insert(*k, *v);
    }
    p
}

/// The socket of the PipeWire of a session (`PIPEWIRE_RUNTIME_DIR`).
pub fn socket_of(runtime_dir: &str) -> PathBuf {
    Path::new(runtime_dir).join("pipewire-0")
}

fn video_format() -> Vec<u8> {
    let obj = pw::spa::pod::object!(
        spa::utils::SpaTypes::ObjectParamFormat,
        spa::param::ParamType::EnumFormat,
        pw::spa::pod::property!(
            spa::param::format::FormatProperties::MediaType,
            Id,
            spa::param::format::MediaType::Video
        ),
        pw::spa::pod::property!(
            spa::param::format::FormatProperties::MediaSubtype,
            Id,
            spa::param::format::MediaSubtype::Raw
        ),
        pw::spa::pod::property!(
            spa::param::format::FormatProperties::VideoFormat,
            Id,
            spa::param::video::VideoFormat::RGB
        ),
        pw::spa::pod::property!(
            spa::param::format::FormatProperties::VideoSize,
            Rectangle,
            spa::utils::Rectangle {
                width: 32,
                height: 24
            }
        ),
        pw::spa::pod::property!(
            spa::param::format::FormatProperties::VideoFramerate,
            Fraction,
            spa::utils::Fraction { num: 25, denom: 1 }
        ),
    );
    pw::spa::pod::serialize::PodSerializer::serialize(
        std::io::Cursor::new(Vec::new()),
        &pw::spa::pod::Value::Object(obj),
    )
    .expect("serialize format")
    .0
    .into_inner()
}

/// A `Video/Source` stream with `source_props` and a video capture stream
/// (`Stream/Input/Video`) with `consumer_props`, connected to it, both in
/// this process. Returns once both are connected; the capture runs until
/// drop. `node_ids` receives (source node, capture node).
pub fn video_capture(
    socket: &Path,
    source_props: &[(&str, &str)],
    consumer_props: &[(&str, &str)],
) -> (PwThread, (u32, u32)) {
    let socket = socket.display().to_string();
    let source_props: Vec<(String, String)> = source_props
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let consumer_props: Vec<(String, String)> = consumer_props
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let (quit, quit_rx) = pw::channel::channel::<()>();
    let (ids_tx, ids_rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        pw::init();
        let mainloop = pw::main_loop::MainLoopRc::new(None).expect("loop");
        let context = pw::context::ContextRc::new(&mainloop, None).expect("context");
        let core = context
            .connect_rc(Some(props(&[("remote.name", socket.as_str())])))
            .expect("connect to the session's PipeWire");
        let weak = mainloop.downgrade();
        let _quit = quit_rx.attach(mainloop.loop_(), move |()| {
            if let Some(ml) = weak.upgrade() {
                ml.quit();
            }
        });

        let mut sp: Vec<(&str, &str)> = vec![("media.class", "Video/Source")];
        sp.extend(source_props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let source = pw::stream::StreamRc::new(core.clone(), "contextd-test-source", props(&sp))
            .expect("source stream");
        let _source_listener = source
            .add_local_listener_with_user_data(())
            .process(|stream, _| {
                if let Some(mut buffer) = stream.dequeue_buffer() {
                    for d in buffer.datas_mut() {
                        let size = d.as_raw().maxsize;
                        let chunk = d.chunk_mut();
                        *chunk.size_mut() = size;
                        *chunk.stride_mut() = 32 * 3;
                    }
                }
            })
            .register()
            .expect("source listener");
        let fmt = video_format();
        let mut params = [Pod::from_bytes(&fmt).expect("pod")];
        source
            .connect(
                spa::utils::Direction::Output,
                None,
                pw::stream::StreamFlags::MAP_BUFFERS,
                &mut params,
            )
            .expect("connect source");
        // The source's node id, for the capture stream's target.
        let deadline = Instant::now() + Duration::from_secs(10);
        while source.node_id() == pw::constants::ID_ANY {
            assert!(Instant::now() < deadline, "the video source got no node id");
            mainloop
                .loop_()
                .iterate(pw::loop_::Timeout::Finite(Duration::from_millis(20)));
        }
        let source_id = source.node_id();

        let mut cp: Vec<(&str, &str)> =
            vec![("media.type", "Video"), ("media.category", "Capture")];
        cp.extend(consumer_props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let consumer = pw::stream::StreamRc::new(core.clone(), "contextd-test-capture", props(&cp))
            .expect("capture stream");
        let _consumer_listener = consumer
            .add_local_listener_with_user_data(())
            .process(|stream, _| {
                // Take the frame and give it back.
                let _ = stream.dequeue_buffer();
            })
            .register()
            .expect("capture listener");
        let fmt = video_format();
        let mut params = [Pod::from_bytes(&fmt).expect("pod")];
        consumer
            .connect(
                spa::utils::Direction::Input,
                Some(source_id),
                pw::stream::StreamFlags::AUTOCONNECT | pw::stream::StreamFlags::MAP_BUFFERS,
                &mut params,
            )
            .expect("connect capture");
        while consumer.node_id() == pw::constants::ID_ANY {
            assert!(
                Instant::now() < deadline,
                "the capture stream got no node id"
            );
            mainloop
                .loop_()
                .iterate(pw::loop_::Timeout::Finite(Duration::from_millis(20)));
        }
        let _ = ids_tx.send((source_id, consumer.node_id()));
        mainloop.run();
        let _ = consumer.disconnect();
        let _ = source.disconnect();
    });
    let ids = ids_rx
        .recv_timeout(Duration::from_secs(15))
        .expect("video streams connected within 15 s");
    (
        PwThread {
            quit: Some(quit),
            thread: Some(thread),
        },
        ids,
    )
}

/// A node the bare listener saw appear, and when.
#[derive(Debug, Clone)]
pub struct SeenNode {
    pub at: Instant,
    pub id: u32,
    pub props: BTreeMap<String, String>,
}

/// A bare registry listener: every new node global with its global
/// properties and the time it arrived, on `rx`. What a PipeWire client
/// can know at the earliest that a node exists.
pub fn watch_nodes(socket: &Path) -> (PwThread, mpsc::Receiver<SeenNode>) {
    let socket = socket.display().to_string();
    let (quit, quit_rx) = pw::channel::channel::<()>();
    let (tx, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        pw::init();
        let mainloop = pw::main_loop::MainLoopRc::new(None).expect("loop");
        let context = pw::context::ContextRc::new(&mainloop, None).expect("context");
        let core = context
            .connect_rc(Some(props(&[("remote.name", socket.as_str())])))
            .expect("connect to the session's PipeWire");
        let weak = mainloop.downgrade();
        let _quit = quit_rx.attach(mainloop.loop_(), move |()| {
            if let Some(ml) = weak.upgrade() {
                ml.quit();
            }
        });
        let registry = core.get_registry_rc().expect("registry");
        let _listener = registry
            .add_listener_local()
            .global(move |g| {
                if g.type_ == pw::types::ObjectType::Node {
                    let at = Instant::now();
                    let props = g
                        .props
                        .map(|p| {
                            p.iter()
                                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                                .collect()
                        })
                        .unwrap_or_default();
                    let _ = tx.send(SeenNode {
                        at,
                        id: g.id,
                        props,
                    });
                }
            })
            .register();
        let _ = ready_tx.send(());
        mainloop.run();
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("registry listener ready");
    (
        PwThread {
            quit: Some(quit),
            thread: Some(thread),
        },
        rx,
    )
}

/// Write a mono 16-bit 48 kHz WAV file with a 440 Hz tone of `secs`.
pub fn write_tone(path: &Path, secs: u32) {
    let rate: u32 = 48_000;
    let n = rate * secs;
    let mut data = Vec::with_capacity(44 + n as usize * 2);
    let len = n * 2;
    data.extend_from_slice(b"RIFF");
    data.extend_from_slice(&(36 + len).to_le_bytes());
    data.extend_from_slice(b"WAVEfmt ");
    data.extend_from_slice(&16u32.to_le_bytes());
    data.extend_from_slice(&1u16.to_le_bytes()); // PCM
    data.extend_from_slice(&1u16.to_le_bytes()); // mono
    data.extend_from_slice(&rate.to_le_bytes());
    data.extend_from_slice(&(rate * 2).to_le_bytes());
    data.extend_from_slice(&2u16.to_le_bytes());
    data.extend_from_slice(&16u16.to_le_bytes());
    data.extend_from_slice(b"data");
    data.extend_from_slice(&len.to_le_bytes());
    for i in 0..n {
        let t = i as f64 / rate as f64;
        let s = (8000.0 * (t * 440.0 * std::f64::consts::TAU).sin()) as i16;
        data.extend_from_slice(&s.to_le_bytes());
    }
    std::fs::write(path, data).expect("write tone.wav");
}

/// A child process killed and reaped on drop.
pub struct Proc(pub std::process::Child);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Stop it now (SIGTERM, then reap).
    pub fn stop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

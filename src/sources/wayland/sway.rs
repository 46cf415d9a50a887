//! Who a window's process is, from sway's IPC (`SWAYSOCK`, the i3 IPC
//! protocol, `GET_TREE`): the foreign-toplevel protocols give a window's
//! app id only as the app claims it, while sway's tree gives each window
//! the PID of its client (from the Wayland socket's credentials, or
//! Xwayland's client ids), and since sway 1.11 the ext-foreign-toplevel
//! identifier and the security context (`sandbox_engine`,
//! `sandbox_app_id`, `sandbox_instance_id`) as well. The PID is resolved
//! like a D-Bus caller's (`identity::resolve_pid`), so a window carries
//! the id consent names its app by.
//!
//! Which tree node is which window:
//! - with the ext identifier on both sides (sway 1.11+): that identifier,
//!   exactly;
//! - else (sway 1.7 to 1.10, wlr foreign-toplevel alone): the node of the
//!   same (app id, title) that no other window holds, and only when
//!   exactly one node and one asking window have that pair. Anything less
//!   certain leaves the window `claimed`: a window that copies another's
//!   app id and title makes both unknown, never one the other.
//!
//! Asked once per window, right after the batch that announced it: sway
//! is single-threaded, so a window it announced on Wayland is already in
//! the tree it answers next. The socket is the broker's own environment's
//! (`SWAYSOCK`, which sway's systemd integration exports along with
//! `WAYLAND_DISPLAY`); no socket or no answer makes every window
//! `claimed`, never an error of the source.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::toplevels::{Ask, Finder, Found};
use crate::model::{WindowProcess, WindowSandbox};

const MAGIC: &[u8; 6] = b"i3-ipc";
const GET_TREE: u32 = 4;
/// The largest tree taken (a desktop with thousands of windows is a few
/// megabytes).
const MAX_REPLY: usize = 32 * 1024 * 1024;
/// How long the Wayland thread waits for sway's answer at most.
const TIMEOUT: Duration = Duration::from_secs(1);
/// At most this many characters of each sandbox field are kept.
const MAX_SANDBOX_CHARS: usize = 255;

/// The finder for the sway whose IPC socket `SWAYSOCK` names, if it does.
pub(crate) fn finder_from_env() -> Option<Finder> {
    let path = std::env::var_os("SWAYSOCK").filter(|p| !p.is_empty())?;
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return None;
    }
    let mut sway = Sway {
        path,
        held: HashMap::new(),
    };
    Some(Box::new(move |asks| sway.find(asks)))
}

/// One window of sway's tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Node {
    pub(crate) con_id: i64,
    pub(crate) pid: Option<u32>,
    /// `app_id`, or an Xwayland window's class (what foreign-toplevel
    /// reports as its app id).
    pub(crate) app_id: String,
    pub(crate) title: String,
    pub(crate) identifier: Option<String>,
    pub(crate) sandbox: Option<WindowSandbox>,
}

struct Sway {
    path: PathBuf,
    /// con id → the window (tracker id) it was given to, for the pairing
    /// by (app id, title): a node is never given twice.
    held: HashMap<i64, String>,
}

impl Sway {
    fn find(&mut self, asks: &[Ask]) -> Vec<Found> {
        let nodes = match get_tree(&self.path) {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(source = super::NAME, "sway's tree is not available: {e}");
                return asks.iter().map(|_| Found::default()).collect();
            }
        };
        let live: HashSet<i64> = nodes.iter().map(|n| n.con_id).collect();
        self.held.retain(|con, _| live.contains(con));
        let matched = match_nodes(&nodes, asks, &self.held);
        let mut pids: HashMap<u32, Option<WindowProcess>> = HashMap::new();
        asks.iter()
            .zip(matched)
            .map(|(ask, node)| {
                let Some(node) = node else {
                    return Found::default();
                };
                self.held.insert(node.con_id, ask.window.clone());
                let process = node.pid.and_then(|pid| {
                    pids.entry(pid)
                        .or_insert_with(|| crate::sources::window_process(pid))
                        .clone()
                });
                Found {
                    process,
                    sandbox: node.sandbox.clone(),
                }
            })
            .collect()
    }
}

/// Which node each ask is, by the rules of the module docs; `held` is who
/// holds which node already.
pub(crate) fn match_nodes<'a>(
    nodes: &'a [Node],
    asks: &[Ask],
    held: &HashMap<i64, String>,
) -> Vec<Option<&'a Node>> {
    // Whether this sway names the ext identifier in its tree at all: then
    // a window with an identifier is that identifier's node or none.
    let by_identifier = nodes.iter().any(|n| n.identifier.is_some());
    let key = |app: &str, title: &str| (app.to_owned(), title.to_owned());
    let mut asked: HashMap<(String, String), usize> = HashMap::new();
    for a in asks {
        *asked.entry(key(&a.app_id, &a.title)).or_default() += 1;
    }
    asks.iter()
        .map(|a| {
            if by_identifier && let Some(ident) = a.identifier.as_deref() {
                return nodes
                    .iter()
                    .find(|n| n.identifier.as_deref() == Some(ident));
            }
            if asked.get(&key(&a.app_id, &a.title)) != Some(&1) {
                return None;
            }
            let mut same = nodes
                .iter()
                .filter(|n| n.app_id == a.app_id && n.title == a.title);
            let one = same.next()?;
            if same.next().is_some() {
                return None;
            }
            match held.get(&one.con_id) {
                Some(w) if *w != a.window => None,
                _ => Some(one),
            }
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SwayError {
    #[error("cannot talk to {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not an i3 IPC answer: {0}")]
    Protocol(&'static str),
    #[error("the tree is not JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Ask sway at `path` for its tree: every window in it.
pub(crate) fn get_tree(path: &Path) -> Result<Vec<Node>, SwayError> {
    let io = |source| SwayError::Io {
        path: path.to_owned(),
        source,
    };
    let mut s = UnixStream::connect(path).map_err(io)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    let mut msg = Vec::with_capacity(14);
    msg.extend_from_slice(MAGIC);
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&GET_TREE.to_ne_bytes());
    s.write_all(&msg).map_err(io)?;
    let mut header = [0u8; 14];
    s.read_exact(&mut header).map_err(io)?;
    if &header[..6] != MAGIC {
        return Err(SwayError::Protocol("no i3-ipc magic"));
    }
    let len = u32::from_ne_bytes([header[6], header[7], header[8], header[9]]) as usize;
    let kind = u32::from_ne_bytes([header[10], header[11], header[12], header[13]]);
    if kind != GET_TREE {
        return Err(SwayError::Protocol("an answer to another request"));
    }
    if len > MAX_REPLY {
        return Err(SwayError::Protocol("a tree larger than 32 MiB"));
    }
    // Read as it comes, into the few fields a window needs: a tree of
    // 300 windows is some 500 KB of JSON, and as a `serde_json::Value`
    // several megabytes of small blocks per new window, which stayed in
    // the heap (`make bench`: anonymous memory 3.7 → 7.0 MB with 302
    // windows).
    let body = std::io::BufReader::new(Read::take(&mut s, len as u64));
    let tree: RawNode = serde_json::from_reader(body)?;
    let mut out = Vec::new();
    windows(tree, &mut out);
    Ok(out)
}

/// A node of sway's tree as `GET_TREE` gives it, only what a window needs
/// (every other key is skipped unread).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RawNode {
    #[serde(default)]
    id: Option<i64>,
    /// Only views carry `pid` (an output, a workspace or a split has
    /// none): present, even `null`, makes the node a window.
    #[serde(default, deserialize_with = "present")]
    pid: Option<Option<i64>>,
    #[serde(default)]
    app_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    window_properties: Option<RawProperties>,
    #[serde(default)]
    foreign_toplevel_identifier: Option<String>,
    #[serde(default)]
    sandbox_engine: Option<String>,
    #[serde(default)]
    sandbox_app_id: Option<String>,
    #[serde(default)]
    sandbox_instance_id: Option<String>,
    #[serde(default)]
    nodes: Vec<RawNode>,
    #[serde(default)]
    floating_nodes: Vec<RawNode>,
}

/// An Xwayland window's X11 properties: its class is what
/// foreign-toplevel reports as its app id.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RawProperties {
    #[serde(default)]
    class: Option<String>,
}

/// A key that is present, with its value or `null`: `Some(value)`; with
/// `#[serde(default)]`, an absent key is `None`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    use serde::Deserialize;
    Option::<i64>::deserialize(d).map(Some)
}

/// The windows in `node` and below, through `nodes` and `floating_nodes`.
/// serde_json refuses JSON nested deeper than 128, so the recursion is
/// bounded.
pub(crate) fn windows(mut node: RawNode, out: &mut Vec<Node>) {
    let nodes = std::mem::take(&mut node.nodes);
    let floating = std::mem::take(&mut node.floating_nodes);
    if let Some(n) = window(node) {
        out.push(n);
    }
    for c in nodes.into_iter().chain(floating) {
        windows(c, out);
    }
}

fn bounded(s: Option<String>) -> Option<String> {
    s.map(|mut s| {
        if let Some((i, _)) = s.char_indices().nth(MAX_SANDBOX_CHARS) {
            s.truncate(i);
        }
        s
    })
}

fn window(v: RawNode) -> Option<Node> {
    let con_id = v.id?;
    let pid = v
        .pid?
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0);
    let app_id = v
        .app_id
        .or_else(|| v.window_properties.and_then(|p| p.class))
        .unwrap_or_default();
    let sandbox = bounded(v.sandbox_engine).map(|engine| WindowSandbox {
        engine,
        app_id: bounded(v.sandbox_app_id),
        instance_id: bounded(v.sandbox_instance_id),
    });
    Some(Node {
        con_id,
        pid,
        app_id: super::toplevels::bounded_app_id(app_id),
        title: super::toplevels::bounded_title(v.name.unwrap_or_default()),
        identifier: v.foreign_toplevel_identifier,
        sandbox,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn ask(window: &str, identifier: Option<&str>, app: &str, title: &str) -> Ask {
        Ask {
            window: window.into(),
            identifier: identifier.map(Into::into),
            app_id: app.into(),
            title: title.into(),
        }
    }

    fn tree() -> Value {
        json!({
            "id": 1, "type": "root", "nodes": [{
                "id": 3, "type": "output", "name": "HEADLESS-1", "nodes": [{
                    "id": 4, "type": "workspace", "name": "1",
                    "nodes": [
                        {"id": 10, "type": "con", "pid": 100, "app_id": "org.mozilla.firefox",
                         "name": "Home", "foreign_toplevel_identifier": "abc"},
                        {"id": 11, "type": "con", "pid": 200, "app_id": null,
                         "window_properties": {"class": "XTerm"}, "name": "xterm",
                         "foreign_toplevel_identifier": "def",
                         "sandbox_engine": "org.flatpak", "sandbox_app_id": "org.x.App",
                         "sandbox_instance_id": "42"}
                    ],
                    "floating_nodes": [
                        {"id": 12, "type": "floating_con", "pid": 0, "app_id": "foo", "name": "f"},
                        {"id": 13, "type": "floating_con", "pid": null, "app_id": "bar", "name": "b",
                         "rect": {"x": 0, "y": 0}, "marks": [], "focus": [1, 2]}
                    ]
                }]
            }]
        })
    }

    #[test]
    fn windows_are_the_nodes_with_a_pid_with_class_and_sandbox() {
        let mut out = Vec::new();
        windows(serde_json::from_value(tree()).expect("tree"), &mut out);
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(out[0].pid, Some(100));
        assert_eq!(out[1].app_id, "XTerm");
        assert_eq!(
            out[1].sandbox,
            Some(WindowSandbox {
                engine: "org.flatpak".into(),
                app_id: Some("org.x.App".into()),
                instance_id: Some("42".into()),
            })
        );
        assert_eq!(out[2].pid, None, "pid 0 is no process");
        assert_eq!(out[2].con_id, 12);
        assert_eq!(
            (out[3].con_id, out[3].pid),
            (13, None),
            "a null pid is still a view"
        );
    }

    #[test]
    fn the_identifier_decides_where_sway_names_it() {
        let mut nodes = Vec::new();
        windows(serde_json::from_value(tree()).expect("tree"), &mut nodes);
        let asks = [
            ask("ext-1-def", Some("def"), "org.mozilla.firefox", "Home"),
            ask("ext-1-zzz", Some("zzz"), "org.mozilla.firefox", "Home"),
        ];
        let m = match_nodes(&nodes, &asks, &HashMap::new());
        // The claim of the app id and title counts for nothing.
        assert_eq!(m[0].map(|n| n.con_id), Some(11));
        assert_eq!(m[1], None);
    }

    fn plain(id: i64, pid: u32, app: &str, title: &str) -> Node {
        Node {
            con_id: id,
            pid: Some(pid),
            app_id: app.into(),
            title: title.into(),
            identifier: None,
            sandbox: None,
        }
    }

    /// The attack on sway before 1.11: a window that copies Firefox's app
    /// id and title makes the pair ambiguous, and then no window gets
    /// either node.
    #[test]
    fn without_identifiers_only_a_unique_pair_decides() {
        let nodes = [
            plain(10, 100, "org.mozilla.firefox", "Home"),
            plain(11, 200, "org.mozilla.firefox", "Home"),
            plain(12, 300, "org.gnome.Nautilus", "Files"),
        ];
        let asks = [
            ask("wl-1-1", None, "org.mozilla.firefox", "Home"),
            ask("wl-1-2", None, "org.gnome.Nautilus", "Files"),
            ask("wl-1-3", None, "org.gnome.Nautilus", "Other"),
        ];
        let m = match_nodes(&nodes, &asks, &HashMap::new());
        assert_eq!(m[0], None, "two nodes of the pair");
        assert_eq!(m[1].map(|n| n.pid), Some(Some(300)));
        assert_eq!(m[2], None, "no node of the pair");
        // Two windows asking for one pair at once get nothing.
        let twice = [
            ask("wl-1-4", None, "org.gnome.Nautilus", "Files"),
            ask("wl-1-5", None, "org.gnome.Nautilus", "Files"),
        ];
        assert_eq!(
            match_nodes(&nodes, &twice, &HashMap::new()),
            vec![None, None]
        );
        // A node another window holds is not given again.
        let held = HashMap::from([(12, "wl-1-2".to_owned())]);
        let again = [ask("wl-1-6", None, "org.gnome.Nautilus", "Files")];
        assert_eq!(match_nodes(&nodes, &again, &held), vec![None]);
    }

    #[test]
    fn a_socket_that_is_not_sways_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ipc");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let server = std::thread::spawn(move || {
            if let Ok((mut c, _)) = listener.accept() {
                let mut buf = [0u8; 14];
                let _ = c.read_exact(&mut buf);
                let mut reply = Vec::from(*MAGIC);
                reply.extend_from_slice(&u32::MAX.to_ne_bytes());
                reply.extend_from_slice(&GET_TREE.to_ne_bytes());
                let _ = c.write_all(&reply);
            }
        });
        assert!(matches!(get_tree(&path), Err(SwayError::Protocol(_))));
        let _ = server.join();
        assert!(matches!(
            get_tree(&dir.path().join("none")),
            Err(SwayError::Io { .. })
        ));
    }
}

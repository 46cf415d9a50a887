//! The PipeWire graph as the source knows it, and the events it makes.
//!
//! The PipeWire thread reports what it sees ([`Obs`]: node info, client
//! info, devices, links, removals); the tracker keeps that, classifies the
//! nodes (`classify`), and turns every difference in what it would report
//! into a [`SourceEvent`]. It does no I/O but resolving a client's PID into
//! an app id, which goes through the function given to it, so that it can
//! be tested with recorded property sets and no PipeWire.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::classify::{self, NodeRole, Props};
use crate::core::SourceEvent;
use crate::core::state::truncate_text;
use crate::model::{AppId, MediaStream, StreamAttribution, StreamState};

/// What the PipeWire thread saw.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Obs {
    /// Node info: its properties when they changed, its state when it
    /// changed (PipeWire sends only what changed after the first info).
    Node {
        id: u32,
        props: Option<Props>,
        state: Option<StreamState>,
    },
    /// A node's global: the properties the registry announces it with
    /// (`media.class`, `client.id`, `node.name`, `application.name`,
    /// `media.role`, …), before its first info. A stream whose class alone
    /// decides what it is (`classify::decided_by_class`) is reported from
    /// these at once, a round trip before its info (which a busy PipeWire
    /// answers last: `make bench` measured the bind's round trip at p50
    /// 125 µs, p99 1.1 ms); the info then adds the rest (media name, state).
    NodeGlobal { id: u32, props: Props },
    /// Client info (its properties, with `pipewire.sec.pid`).
    Client { id: u32, props: Props },
    /// A device (its global properties).
    Device { id: u32, props: Props },
    /// A link from the output node to the input node.
    Link { id: u32, output: u32, input: u32 },
    /// Any global went away.
    Removed { id: u32 },
}

/// Turns a PID into the app id the D-Bus side would give that process.
pub(crate) type Resolver = Box<dyn Fn(u32) -> Option<AppId> + Send>;

/// The resolver the daemon uses: `identity::resolve_pid`.
pub(crate) fn resolve_with_proc() -> Resolver {
    Box::new(|pid| match crate::identity::resolve_pid(pid) {
        Ok(id) => Some(id.app_id),
        Err(e) => {
            tracing::debug!(source = super::NAME, pid, error = %e, "no app id for a PipeWire client");
            None
        }
    })
}

#[derive(Debug)]
struct Node {
    props: Props,
    state: StreamState,
    since: DateTime<Utc>,
    reported: Option<MediaStream>,
}

#[derive(Debug, Default)]
struct Client {
    props: Props,
    /// `pipewire.sec.pid`: the process that made the connection.
    pid: Option<u32>,
    /// That process's app id.
    pid_app: Option<AppId>,
}

/// The app ids of xdg-desktop-portal's executable where distributions
/// install it (Debian and Fedora: libexec; Arch: lib).
const PORTAL_EXES: [&str; 4] = [
    "exe:/usr/libexec/xdg-desktop-portal",
    "exe:/usr/lib/xdg-desktop-portal",
    "exe:/usr/lib64/xdg-desktop-portal",
    "exe:/usr/local/libexec/xdg-desktop-portal",
];

impl Client {
    /// Who the client is: `(app id, pid)`.
    ///
    /// Normally the process that connected (`pipewire.sec.pid`, which
    /// PipeWire takes from the socket and no client can change). A
    /// sandboxed app that captures the screen or a camera does not connect
    /// itself: xdg-desktop-portal opens the connection, sets
    /// `pipewire.access.portal.app_id` on it and hands it to the app, so
    /// the PID is the portal's. Such a client is the app the portal named,
    /// but only if the connection really is the portal's (its PID runs the
    /// portal's executable): any client could add that property to its own
    /// connection. For an unsandboxed app the portal names none, and the
    /// app is unknown (not "the portal").
    fn identity(&self) -> (Option<AppId>, Option<u32>, StreamAttribution) {
        let via_portal = self
            .pid_app
            .as_ref()
            .is_some_and(|a| PORTAL_EXES.contains(&a.as_str()));
        if via_portal && let Some(app) = self.props.get("pipewire.access.portal.app_id") {
            let app = AppId::new(app.as_str()).ok();
            let by = if app.is_some() {
                StreamAttribution::Portal
            } else {
                StreamAttribution::Kernel
            };
            return (app, None, by);
        }
        (self.pid_app.clone(), self.pid, StreamAttribution::Kernel)
    }
}

/// See the module documentation.
pub(crate) struct Tracker {
    prefix: String,
    nodes: BTreeMap<u32, Node>,
    clients: BTreeMap<u32, Client>,
    devices: BTreeMap<u32, Props>,
    links: BTreeMap<u32, (u32, u32)>,
    resolve: Resolver,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("prefix", &self.prefix)
            .field("nodes", &self.nodes.len())
            .field("clients", &self.clients.len())
            .finish_non_exhaustive()
    }
}

fn text(v: Option<&String>) -> Option<String> {
    v.filter(|s| !s.is_empty()).map(|s| {
        let mut s = s.clone();
        truncate_text(&mut s);
        s
    })
}

impl Tracker {
    /// A tracker whose stream ids start with `prefix` (`pw-N-`).
    pub(crate) fn new(prefix: String, resolve: Resolver) -> Self {
        Tracker {
            prefix,
            nodes: BTreeMap::new(),
            clients: BTreeMap::new(),
            devices: BTreeMap::new(),
            links: BTreeMap::new(),
            resolve,
        }
    }

    /// Take one observation; return the events that make the core agree.
    pub(crate) fn observe(&mut self, obs: Obs, now: DateTime<Utc>) -> Vec<SourceEvent> {
        let mut out = Vec::new();
        match obs {
            Obs::Node { id, props, state } => {
                let node = self.nodes.entry(id).or_insert_with(|| Node {
                    props: Props::new(),
                    state: StreamState::Other,
                    since: now,
                    reported: None,
                });
                if let Some(p) = props {
                    node.props = p;
                }
                if let Some(s) = state {
                    if s == StreamState::Running && node.state != StreamState::Running {
                        node.since = now;
                    }
                    node.state = s;
                }
            }
            Obs::NodeGlobal { id, props } => {
                // The info normally follows the global; if it came first it
                // is the better record, and a class that does not decide
                // waits for the info's full properties.
                if !self.nodes.contains_key(&id) && classify::decided_by_class(&props) {
                    self.nodes.insert(
                        id,
                        Node {
                            props,
                            state: StreamState::Other,
                            since: now,
                            reported: None,
                        },
                    );
                }
            }
            Obs::Client { id, props } => {
                let pid = props
                    .get("pipewire.sec.pid")
                    .and_then(|p| p.parse::<u32>().ok())
                    .filter(|p| *p > 0);
                let c = self.clients.entry(id).or_default();
                if pid != c.pid {
                    c.pid_app = pid.and_then(|p| (self.resolve)(p));
                    c.pid = pid;
                }
                c.props = props;
            }
            Obs::Device { id, props } => {
                self.devices.insert(id, props);
            }
            Obs::Link { id, output, input } => {
                self.links.insert(id, (output, input));
            }
            Obs::Removed { id } => {
                self.clients.remove(&id);
                self.devices.remove(&id);
                self.links.remove(&id);
                if let Some(n) = self.nodes.remove(&id)
                    && n.reported.is_some()
                {
                    out.push(SourceEvent::StreamRemoved {
                        id: self.stream_id(id),
                    });
                }
            }
        }
        out.extend(self.refresh());
        out
    }

    fn stream_id(&self, node: u32) -> String {
        format!("{}{node}", self.prefix)
    }

    fn role(&self, node: &Node) -> NodeRole {
        let device = node
            .props
            .get("device.id")
            .and_then(|d| d.parse::<u32>().ok())
            .and_then(|d| self.devices.get(&d));
        classify::node_role(&node.props, device)
    }

    /// The roles of the nodes a video consumer takes its video from: those
    /// linked into it, else the one its `target.object` names.
    fn upstream(&self, id: u32, node: &Node) -> Vec<NodeRole> {
        let mut v: Vec<NodeRole> = self
            .links
            .values()
            .filter(|(_, input)| *input == id)
            .filter_map(|(output, _)| self.nodes.get(output))
            .map(|n| self.role(n))
            .collect();
        if v.is_empty() {
            let target = node
                .props
                .get("target.object")
                .or_else(|| node.props.get("node.target"));
            if let Some(t) = target {
                v.extend(
                    self.nodes
                        .iter()
                        .filter(|(nid, n)| {
                            nid.to_string() == *t
                                || n.props.get("object.serial") == Some(t)
                                || n.props.get("node.name") == Some(t)
                        })
                        .map(|(_, n)| self.role(n)),
                );
            }
        }
        v
    }

    /// What the source would report for node `id` now.
    fn render(&self, id: u32, node: &Node) -> Option<MediaStream> {
        let role = self.role(node);
        if !role.is_stream() {
            return None;
        }
        let up = if role == NodeRole::VideoCapture {
            self.upstream(id, node)
        } else {
            Vec::new()
        };
        let kind = classify::stream_kind(role, &node.props, &up)?;
        let client = node
            .props
            .get("client.id")
            .and_then(|c| c.parse::<u32>().ok())
            .and_then(|c| self.clients.get(&c));
        let claim = |k: &str| {
            text(
                node.props
                    .get(k)
                    .or_else(|| client.and_then(|c| c.props.get(k))),
            )
        };
        let (app_id, pid, attributed_by) = client.map(Client::identity).unwrap_or_default();
        Some(MediaStream {
            id: self.stream_id(id),
            kind,
            app_id,
            attributed_by,
            pid,
            claimed_name: claim("application.name"),
            claimed_binary: claim("application.process.binary"),
            media_name: text(node.props.get("media.name")),
            media_role: text(node.props.get("media.role")),
            state: node.state,
            since: node.since,
            player: None,
        })
    }

    /// Re-render every node; report what differs from what was reported.
    /// The graph of one PipeWire instance holds tens of nodes, and this
    /// runs once per observation, so a full pass is cheap and never misses
    /// a dependency (a link or a client changing a node's record).
    fn refresh(&mut self) -> Vec<SourceEvent> {
        let rendered: Vec<(u32, Option<MediaStream>)> = self
            .nodes
            .iter()
            .map(|(id, n)| (*id, self.render(*id, n)))
            .collect();
        let mut out = Vec::new();
        for (id, now) in rendered {
            let Some(node) = self.nodes.get_mut(&id) else {
                continue;
            };
            if node.reported == now {
                continue;
            }
            match &now {
                Some(s) => out.push(SourceEvent::Stream { stream: s.clone() }),
                None => out.push(SourceEvent::StreamRemoved {
                    id: format!("{}{id}", self.prefix),
                }),
            }
            node.reported = now;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::classify::{self, recorded};
    use super::*;
    use crate::model::MediaKind;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap_or_default()
    }

    fn tracker() -> Tracker {
        Tracker::new(
            "pw-1-".into(),
            Box::new(|pid| AppId::from_exe(&format!("/proc-{pid}/exe")).ok()),
        )
    }

    fn client(id: u32, pid: u32) -> Obs {
        let mut props = recorded::pw_cat_client();
        props.insert("pipewire.sec.pid".into(), pid.to_string());
        Obs::Client { id, props }
    }

    fn streams(ev: &[SourceEvent]) -> Vec<&MediaStream> {
        ev.iter()
            .filter_map(|e| match e {
                SourceEvent::Stream { stream } => Some(stream),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn playback_with_identity_from_the_client_pid() {
        let mut tr = tracker();
        assert!(tr.observe(client(46, 4242), t(0)).is_empty());
        let ev = tr.observe(
            Obs::Node {
                id: 57,
                props: Some(recorded::pw_play()),
                state: Some(StreamState::Suspended),
            },
            t(1),
        );
        let s = streams(&ev);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].id, "pw-1-57");
        assert_eq!(s[0].kind, MediaKind::Playback);
        assert_eq!(s[0].pid, Some(4242));
        assert_eq!(
            s[0].app_id.as_ref().map(AppId::as_str),
            Some("exe:/proc-4242/exe")
        );
        // What the app claims comes from the node, else from its client,
        // and is only a claim.
        assert_eq!(s[0].claimed_name.as_deref(), Some("TestPlayer"));
        assert_eq!(s[0].claimed_binary.as_deref(), Some("pw-cat"));
        assert_eq!(s[0].media_name.as_deref(), Some("/tmp/pwhome/tone.wav"));
        assert_eq!(s[0].since, t(1));

        // Running later: `since` moves; the same info again changes nothing.
        let run = Obs::Node {
            id: 57,
            props: None,
            state: Some(StreamState::Running),
        };
        let ev = tr.observe(run.clone(), t(5));
        assert_eq!(streams(&ev)[0].state, StreamState::Running);
        assert_eq!(streams(&ev)[0].since, t(5));
        assert!(tr.observe(run, t(6)).is_empty());

        let ev = tr.observe(Obs::Removed { id: 57 }, t(9));
        assert_eq!(
            ev,
            vec![SourceEvent::StreamRemoved {
                id: "pw-1-57".into()
            }]
        );
    }

    /// The keys a node's global carries (`pw-cli ls Node` on PipeWire
    /// 0.3.65 with pw-play running); the rest come with its info.
    fn global_of(full: &Props) -> Props {
        const GLOBAL_KEYS: [&str; 10] = [
            "object.serial",
            "factory.id",
            "client.id",
            "device.id",
            "application.name",
            "node.name",
            "media.class",
            "media.type",
            "media.category",
            "media.role",
        ];
        full.iter()
            .filter(|(k, _)| GLOBAL_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn an_audio_stream_is_reported_from_its_global_then_its_info() {
        let mut tr = tracker();
        assert!(tr.observe(client(46, 4242), t(0)).is_empty());
        let full = recorded::pw_play();
        let ev = tr.observe(
            Obs::NodeGlobal {
                id: 57,
                props: global_of(&full),
            },
            t(1),
        );
        let s = streams(&ev);
        assert_eq!(s.len(), 1, "{ev:?}");
        assert_eq!(s[0].id, "pw-1-57");
        assert_eq!(s[0].kind, MediaKind::Playback);
        assert_eq!(
            s[0].app_id.as_ref().map(AppId::as_str),
            Some("exe:/proc-4242/exe")
        );
        assert_eq!(s[0].state, StreamState::Other);
        // The info brings the rest: one update of the same stream.
        let ev = tr.observe(
            Obs::Node {
                id: 57,
                props: Some(full),
                state: Some(StreamState::Running),
            },
            t(2),
        );
        let s = streams(&ev);
        assert_eq!(s.len(), 1, "{ev:?}");
        assert_eq!(s[0].id, "pw-1-57");
        assert_eq!(s[0].state, StreamState::Running);
        assert_eq!(s[0].media_name.as_deref(), Some("/tmp/pwhome/tone.wav"));
        assert_eq!(s[0].claimed_name.as_deref(), Some("TestPlayer"));
        // A microphone too.
        let ev = tr.observe(
            Obs::NodeGlobal {
                id: 60,
                props: global_of(&recorded::pw_record()),
            },
            t(3),
        );
        assert_eq!(streams(&ev)[0].kind, MediaKind::Microphone);
    }

    #[test]
    fn a_video_output_waits_for_its_info() {
        // A screen-cast producer is told apart by media.name, which the
        // global does not carry: reported from the global, the compositor
        // would show as playing video.
        let mut tr = tracker();
        for (id, full) in [
            (70, recorded::mutter_screencast()),
            (71, recorded::kwin_screencast()),
            (72, recorded::null_sink()),
        ] {
            let props = global_of(&full);
            assert!(!classify::decided_by_class(&props), "{full:?}");
            assert!(
                tr.observe(Obs::NodeGlobal { id, props }, t(0)).is_empty(),
                "{full:?}"
            );
        }
        let ev = tr.observe(
            Obs::Node {
                id: 70,
                props: Some(recorded::mutter_screencast()),
                state: Some(StreamState::Running),
            },
            t(1),
        );
        assert!(streams(&ev).is_empty(), "{ev:?}");
    }

    #[test]
    fn a_global_after_the_info_changes_nothing() {
        let mut tr = tracker();
        let full = recorded::pw_play();
        let ev = tr.observe(
            Obs::Node {
                id: 57,
                props: Some(full.clone()),
                state: Some(StreamState::Running),
            },
            t(0),
        );
        assert_eq!(streams(&ev).len(), 1);
        let ev = tr.observe(
            Obs::NodeGlobal {
                id: 57,
                props: global_of(&full),
            },
            t(1),
        );
        assert!(ev.is_empty(), "{ev:?}");
    }

    #[test]
    fn identity_that_arrives_after_the_node_updates_the_stream() {
        let mut tr = tracker();
        let ev = tr.observe(
            Obs::Node {
                id: 60,
                props: Some(recorded::pw_record()),
                state: Some(StreamState::Running),
            },
            t(0),
        );
        assert_eq!(streams(&ev)[0].app_id, None);
        assert_eq!(streams(&ev)[0].kind, MediaKind::Microphone);
        let ev = tr.observe(client(52, 77), t(1));
        assert_eq!(streams(&ev)[0].pid, Some(77));
        // A client without a PID (or PID 0) gets none.
        let ev = tr.observe(
            Obs::Client {
                id: 52,
                props: Props::new(),
            },
            t(2),
        );
        assert_eq!(streams(&ev)[0].pid, None);
        assert_eq!(streams(&ev)[0].app_id, None);
    }

    #[test]
    fn non_streams_are_not_reported_and_screen_sources_make_screen_capture() {
        let mut tr = tracker();
        assert!(
            tr.observe(
                Obs::Node {
                    id: 30,
                    props: Some(recorded::null_sink()),
                    state: Some(StreamState::Running),
                },
                t(0)
            )
            .is_empty()
        );
        assert!(
            tr.observe(
                Obs::Node {
                    id: 40,
                    props: Some(recorded::mutter_screencast()),
                    state: Some(StreamState::Running),
                },
                t(0)
            )
            .is_empty(),
            "the compositor's screen-cast node is not playback"
        );
        let ev = tr.observe(
            Obs::Node {
                id: 41,
                props: Some(recorded::plain_video_consumer()),
                state: Some(StreamState::Running),
            },
            t(1),
        );
        assert_eq!(streams(&ev)[0].kind, MediaKind::Camera);
        // Linked to the screen cast: screen.
        let ev = tr.observe(
            Obs::Link {
                id: 42,
                output: 40,
                input: 41,
            },
            t(2),
        );
        assert_eq!(streams(&ev)[0].kind, MediaKind::Screen);
        assert_eq!(streams(&ev)[0].id, "pw-1-41");
        // The link goes: back to the guess.
        let ev = tr.observe(Obs::Removed { id: 42 }, t(3));
        assert_eq!(streams(&ev)[0].kind, MediaKind::Camera);
    }

    #[test]
    fn a_target_names_the_source_before_the_link_exists() {
        let mut tr = tracker();
        tr.observe(
            Obs::Node {
                id: 50,
                props: Some(recorded::xdpw_screencast()),
                state: Some(StreamState::Idle),
            },
            t(0),
        );
        let mut consumer = recorded::plain_video_consumer();
        consumer.insert("target.object".into(), "50".into());
        let ev = tr.observe(
            Obs::Node {
                id: 51,
                props: Some(consumer),
                state: Some(StreamState::Idle),
            },
            t(0),
        );
        assert_eq!(streams(&ev)[0].kind, MediaKind::Screen);
    }

    #[test]
    fn long_claims_are_cut() {
        let mut tr = tracker();
        let mut p = recorded::pw_play();
        p.insert("media.name".into(), "x".repeat(100_000));
        let ev = tr.observe(
            Obs::Node {
                id: 1,
                props: Some(p),
                state: None,
            },
            t(0),
        );
        let name = streams(&ev)[0].media_name.clone().unwrap_or_default();
        assert!(name.len() < 2000, "{}", name.len());
    }

    #[test]
    fn portal_connections_are_the_app_the_portal_names() {
        // PID 500 runs the portal; 600 is any other program.
        let mut tr = Tracker::new(
            "pw-1-".into(),
            Box::new(|pid| match pid {
                500 => AppId::from_exe("/usr/libexec/xdg-desktop-portal").ok(),
                _ => AppId::from_exe("/usr/bin/evil").ok(),
            }),
        );
        let portal_client = |id: u32, pid: u32, app: &str| {
            let mut props = recorded::pw_cat_client();
            props.insert("pipewire.sec.pid".into(), pid.to_string());
            props.insert("pipewire.access.portal.app_id".into(), app.into());
            Obs::Client { id, props }
        };
        let consumer = |id: u32, client: u32| {
            let mut p = recorded::chromium_screen_consumer();
            p.insert("client.id".into(), client.to_string());
            Obs::Node {
                id,
                props: Some(p),
                state: Some(StreamState::Running),
            }
        };
        tr.observe(portal_client(10, 500, "org.chromium.Chromium"), t(0));
        let ev = tr.observe(consumer(11, 10), t(0));
        let s = streams(&ev)[0];
        assert_eq!(
            s.app_id.as_ref().map(AppId::as_str),
            Some("org.chromium.Chromium")
        );
        assert_eq!(s.pid, None, "the portal's PID is not the app's");
        assert_eq!(s.attributed_by, StreamAttribution::Portal);
        assert_eq!(s.kind, MediaKind::Screen);

        // The same property on a connection the portal did not make is
        // ignored: that client is who its PID says.
        tr.observe(portal_client(20, 600, "org.gnome.Calculator"), t(0));
        let ev = tr.observe(consumer(21, 20), t(0));
        let s = streams(&ev)[0];
        assert_eq!(
            s.app_id.as_ref().map(AppId::as_str),
            Some("exe:/usr/bin/evil")
        );
        assert_eq!(s.pid, Some(600));
        assert_eq!(s.attributed_by, StreamAttribution::Kernel);

        // An unsandboxed app through the portal: unknown, not the portal.
        tr.observe(portal_client(30, 500, ""), t(0));
        let ev = tr.observe(consumer(31, 30), t(0));
        let s = streams(&ev)[0];
        assert_eq!(s.app_id, None);
        assert_eq!(s.pid, None);
    }
}

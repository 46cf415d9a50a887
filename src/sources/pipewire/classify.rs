//! What a PipeWire node is, from its properties: a stream of an app
//! (playback, microphone, video capture), a screen-cast source, a camera,
//! or none of our business.
//!
//! # The rules
//!
//! `media.class` is set by PipeWire's stream code from the stream's
//! direction and media type (`Stream/<Input|Output>/<Audio|Video>`), or by
//! the client:
//!
//! | `media.class`         | what it is                                   |
//! |-----------------------|----------------------------------------------|
//! | `Stream/Output/Audio` | playback                                     |
//! | `Stream/Output/Video` | a screen-cast source if it looks like one (below), else playback |
//! | `Stream/Input/Audio`  | microphone capture                           |
//! | `Stream/Input/Video`  | video capture: screen or camera (below)      |
//! | `Video/Source…`       | a screen-cast source if it looks like one, a camera if it belongs to a camera device, else an unknown video source |
//! | anything else         | not reported (sinks, devices, filters, …)    |
//!
//! **Screen-cast sources.** Screen sharing goes through
//! xdg-desktop-portal: the portal backend or the compositor *produces* a
//! video node and the app *consumes* it with a `Stream/Input/Video`
//! stream. The producers, as recorded from the real programs (see the
//! tests), are:
//!
//! - GNOME (mutter): `media.class = Stream/Output/Video`,
//!   `media.name = meta-screen-cast-src`, `node.name = gnome-shell`;
//! - KDE (KWin): `media.class = Stream/Output/Video`,
//!   `media.name = kwin-screencast-…`;
//! - wlroots (xdg-desktop-portal-wlr): `media.class = Video/Source`,
//!   `node.name = xdpw-stream-XXXXXX` (older versions: `xdpw-stream`);
//! - Hyprland (xdg-desktop-portal-hyprland): `media.class = Video/Source`,
//!   `node.name = xdph-streaming-N`.
//!
//! A video output node is a screen-cast source when its `media.name` or
//! `node.name` starts with one of those names, when the program behind it
//! says it is an `xdg-desktop-portal-*` backend, or when its `media.role` is
//! `Screen`. Such a node is not reported itself (the compositor is not the
//! one watching the screen): the consumers linked to it are.
//!
//! **Cameras** are device nodes: `media.class = Video/Source` with
//! `device.api = v4l2` or `libcamera` (or a `device.id`, or
//! `media.role = Camera`).
//!
//! **Screen or camera.** A `Stream/Input/Video` stream is a *screen*
//! capture when it is linked to a screen-cast source, a *camera* capture
//! when it is linked to a camera. Before it is linked (or when what it is
//! linked to is unknown) its `target.object` decides the same way, then its
//! own `media.role` (`Screen`, as Chromium's WebRTC and OBS set it for screen
//! capture), and otherwise it counts as a camera. The links are PipeWire's
//! own record of where the video comes from; the names and roles are what
//! the producing program says. Either way the stream is capture, so the
//! consent category (`media.capture`) does not depend on this guess.

use std::collections::BTreeMap;

use crate::model::MediaKind;

/// A node's (or client's, or device's) properties.
pub(crate) type Props = BTreeMap<String, String>;

/// What a node is to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeRole {
    /// An app plays audio or video.
    Playback,
    /// An app records audio.
    Microphone,
    /// An app consumes video: a camera or the screen.
    VideoCapture,
    /// A screen-cast source made by a compositor or a portal backend.
    ScreenSource,
    /// A camera device's node.
    CameraSource,
    /// Some other video source (a test pattern, a virtual camera).
    VideoSource,
    /// Not a stream and not a video source: not reported.
    Other,
}

impl NodeRole {
    /// Whether nodes of this role are reported as streams.
    pub(crate) fn is_stream(self) -> bool {
        matches!(
            self,
            NodeRole::Playback | NodeRole::Microphone | NodeRole::VideoCapture
        )
    }
}

/// Names (prefixes of `media.name` or `node.name`) of screen-cast
/// producers, from the programs' sources and real `pw-dump` output.
const SCREEN_PRODUCER_NAMES: [&str; 4] = [
    "meta-screen-cast-src",
    "kwin-screencast-",
    "xdpw-stream",
    "xdph-streaming",
];

/// Camera device APIs.
const CAMERA_APIS: [&str; 2] = ["v4l2", "libcamera"];

fn get<'a>(p: &'a Props, k: &str) -> &'a str {
    p.get(k).map(String::as_str).unwrap_or("")
}

fn role_is(p: &Props, role: &str) -> bool {
    get(p, "media.role").eq_ignore_ascii_case(role)
}

/// Whether a video *output* node is a screen-cast producer.
fn looks_like_screen_producer(p: &Props) -> bool {
    let named = |k: &str| {
        let v = get(p, k);
        SCREEN_PRODUCER_NAMES.iter().any(|n| v.starts_with(n))
    };
    let portal = |k: &str| get(p, k).starts_with("xdg-desktop-portal-");
    named("media.name")
        || named("node.name")
        || portal("application.name")
        || portal("application.process.binary")
        || role_is(p, "Screen")
}

fn looks_like_camera(p: &Props, device: Option<&Props>) -> bool {
    let api = |p: &Props| CAMERA_APIS.contains(&get(p, "device.api"));
    api(p) || device.is_some_and(api) || p.contains_key("device.id") || role_is(p, "Camera")
}

/// The role of a node from its properties and, for device nodes, the
/// properties of its device (`device.id`), when known.
pub(crate) fn node_role(p: &Props, device: Option<&Props>) -> NodeRole {
    let class = get(p, "media.class");
    if class.starts_with("Stream/Output/Audio") {
        NodeRole::Playback
    } else if class.starts_with("Stream/Output/Video") {
        if looks_like_screen_producer(p) {
            NodeRole::ScreenSource
        } else {
            NodeRole::Playback
        }
    } else if class.starts_with("Stream/Input/Audio") {
        NodeRole::Microphone
    } else if class.starts_with("Stream/Input/Video") {
        NodeRole::VideoCapture
    } else if class.starts_with("Video/Source") {
        if looks_like_screen_producer(p) {
            NodeRole::ScreenSource
        } else if looks_like_camera(p, device) {
            NodeRole::CameraSource
        } else {
            NodeRole::VideoSource
        }
    } else {
        NodeRole::Other
    }
}

/// Whether `media.class` alone decides a node's role and consent
/// category, so that the node can be reported from its registry global
/// (which carries the class but not `media.name`) without waiting for its
/// info: audio streams either way, and video capture (screen or camera is
/// refined from links, as always, but it is `media.capture` either way).
/// A video *output* stream may be a screen-cast producer, which is never
/// reported, so it waits.
pub(crate) fn decided_by_class(p: &Props) -> bool {
    let class = get(p, "media.class");
    [
        "Stream/Output/Audio",
        "Stream/Input/Audio",
        "Stream/Input/Video",
    ]
    .iter()
    .any(|c| class.starts_with(c))
}

/// Screen or camera, for a `Stream/Input/Video` stream with properties `p`
/// whose video comes from nodes of the roles `upstream` (the nodes linked
/// to it, or else the node its `target.object` names; empty when unknown).
pub(crate) fn video_capture_kind(p: &Props, upstream: &[NodeRole]) -> MediaKind {
    if upstream.contains(&NodeRole::ScreenSource) {
        MediaKind::Screen
    } else if upstream.contains(&NodeRole::CameraSource) {
        MediaKind::Camera
    } else if role_is(p, "Screen") {
        MediaKind::Screen
    } else {
        MediaKind::Camera
    }
}

/// The kind of a stream node, given its role and upstream roles.
pub(crate) fn stream_kind(role: NodeRole, p: &Props, upstream: &[NodeRole]) -> Option<MediaKind> {
    match role {
        NodeRole::Playback => Some(MediaKind::Playback),
        NodeRole::Microphone => Some(MediaKind::Microphone),
        NodeRole::VideoCapture => Some(video_capture_kind(p, upstream)),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod recorded {
    //! Node property sets as real programs create them. The pw-cat ones
    //! are `pw-dump` output from this machine (Debian 12, PipeWire 0.3.65);
    //! the others are rebuilt from the programs' sources (the name and
    //! properties they pass to `pw_stream_new`; PipeWire adds `media.class`
    //! from the direction and media type, `application.*` from the process
    //! and `client.id` itself) and from `pw-dump` output published by their
    //! users. Only the keys that matter here and a few around them are kept.

    use super::Props;

    fn props(kv: &[(&str, &str)]) -> Props {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// `pw-play --properties='{application.name="TestPlayer"}' tone.wav`,
    /// recorded with `pw-dump` on Debian 12 (PipeWire 0.3.65, pw-cat).
    /// `application.process.binary` is on the client, not the node.
    pub(crate) fn pw_play() -> Props {
        props(&[
            ("application.name", "TestPlayer"),
            ("client.id", "46"),
            ("factory.id", "8"),
            ("factory.mode", "split"),
            ("library.name", "audioconvert/libspa-audioconvert"),
            ("media.category", "Playback"),
            ("media.class", "Stream/Output/Audio"),
            ("media.filename", "/tmp/pwhome/tone.wav"),
            ("media.format", "WAV (Microsoft)"),
            ("media.name", "/tmp/pwhome/tone.wav"),
            ("media.role", "Music"),
            ("media.type", "Audio"),
            ("node.autoconnect", "true"),
            ("node.name", "pw-play"),
            ("object.id", "47"),
            ("object.serial", "57"),
            ("stream.is-live", "true"),
        ])
    }

    /// `pw-record out.wav`, recorded the same way.
    pub(crate) fn pw_record() -> Props {
        props(&[
            ("application.name", "pw-record"),
            ("client.id", "52"),
            ("factory.mode", "merge"),
            ("media.category", "Capture"),
            ("media.class", "Stream/Input/Audio"),
            ("media.filename", "/tmp/pwhome/out.wav"),
            ("media.name", "/tmp/pwhome/out.wav"),
            ("media.role", "Music"),
            ("media.type", "Audio"),
            ("node.autoconnect", "true"),
            ("node.name", "pw-record"),
            ("object.id", "53"),
            ("object.serial", "63"),
            ("stream.is-live", "true"),
        ])
    }

    /// The client of that pw-play (its `pipewire.*` keys are PipeWire's).
    pub(crate) fn pw_cat_client() -> Props {
        props(&[
            ("application.language", "C.UTF-8"),
            ("application.name", "pw-cat"),
            ("application.process.binary", "pw-cat"),
            ("application.process.id", "8532"),
            ("pipewire.access", "unrestricted"),
            ("pipewire.protocol", "protocol-native"),
            ("pipewire.sec.gid", "0"),
            ("pipewire.sec.pid", "8532"),
            ("pipewire.sec.uid", "0"),
        ])
    }

    /// Firefox playing a video through pipewire-pulse.
    pub(crate) fn firefox_playback() -> Props {
        props(&[
            ("media.class", "Stream/Output/Audio"),
            ("media.name", "AudioStream"),
            ("application.name", "Firefox"),
            ("application.process.binary", "firefox"),
            ("application.id", "firefox"),
            ("client.api", "pipewire-pulse"),
            ("node.name", "Firefox"),
            ("client.id", "78"),
        ])
    }

    /// GNOME's screen cast (mutter's `meta-screen-cast-src` stream, created
    /// with no properties, so PipeWire names the node after the process),
    /// as `pw-dump` shows it during a GNOME screen share.
    pub(crate) fn mutter_screencast() -> Props {
        props(&[
            ("media.class", "Stream/Output/Video"),
            ("media.name", "meta-screen-cast-src"),
            ("node.name", "gnome-shell"),
            ("stream.is-live", "true"),
            ("application.name", "gnome-shell"),
            ("client.id", "40"),
        ])
    }

    /// KDE's screen cast (`kwin-screencast-<object>`, no properties, in
    /// KWin's `ScreenCastStream::createStream`).
    pub(crate) fn kwin_screencast() -> Props {
        props(&[
            ("media.class", "Stream/Output/Video"),
            ("media.name", "kwin-screencast-Screen 0"),
            ("node.name", "kwin_wayland"),
            ("application.name", "kwin_wayland"),
            ("client.id", "52"),
        ])
    }

    /// xdg-desktop-portal-wlr (`xdpw-stream-XXXXXX` with
    /// `media.class = Video/Source`, in `xdpw_pwr_stream_create`).
    pub(crate) fn xdpw_screencast() -> Props {
        props(&[
            ("media.class", "Video/Source"),
            ("media.name", "xdpw-stream-k3Jd9q"),
            ("node.name", "xdpw-stream-k3Jd9q"),
            ("application.name", "xdg-desktop-portal-wlr"),
            ("application.process.binary", "xdg-desktop-portal-wlr"),
            ("client.id", "61"),
        ])
    }

    /// xdg-desktop-portal-hyprland.
    pub(crate) fn xdph_screencast() -> Props {
        props(&[
            ("media.class", "Video/Source"),
            ("node.name", "xdph-streaming-0"),
            ("object.serial", "1423"),
            ("client.id", "70"),
        ])
    }

    /// A USB webcam as WirePlumber's v4l2 monitor creates it.
    pub(crate) fn v4l2_webcam() -> Props {
        props(&[
            ("media.class", "Video/Source"),
            ("device.api", "v4l2"),
            ("device.id", "45"),
            ("media.role", "Camera"),
            ("node.name", "v4l2_input.pci-0000_00_14.0-usb-0_6_1.0"),
            ("node.description", "Integrated Camera (V4L2)"),
            ("object.path", "v4l2:/dev/video0"),
            ("factory.name", "api.v4l2.source"),
        ])
    }

    /// A libcamera camera node.
    pub(crate) fn libcamera_camera() -> Props {
        props(&[
            ("media.class", "Video/Source"),
            ("device.api", "libcamera"),
            ("media.role", "Camera"),
            ("node.name", "libcamera_input.LNK0"),
        ])
    }

    /// Chromium's WebRTC screen-capture consumer
    /// (`webrtc-consume-stream`, `media.role = Screen`).
    pub(crate) fn chromium_screen_consumer() -> Props {
        props(&[
            ("media.class", "Stream/Input/Video"),
            ("media.type", "Video"),
            ("media.category", "Capture"),
            ("media.role", "Screen"),
            ("media.name", "webrtc-consume-stream"),
            ("node.name", "webrtc-consume-stream"),
            ("application.name", "Chromium"),
            ("client.id", "90"),
        ])
    }

    /// OBS Studio's PipeWire capture source (`media.role = Screen`).
    pub(crate) fn obs_screen_consumer() -> Props {
        props(&[
            ("media.class", "Stream/Input/Video"),
            ("media.type", "Video"),
            ("media.category", "Capture"),
            ("media.role", "Screen"),
            ("media.name", "OBS Studio"),
            ("node.name", "OBS Studio"),
            ("client.id", "95"),
        ])
    }

    /// Chromium's WebRTC camera consumer through the Camera portal.
    pub(crate) fn chromium_camera_consumer() -> Props {
        props(&[
            ("media.class", "Stream/Input/Video"),
            ("media.type", "Video"),
            ("media.category", "Capture"),
            ("media.role", "Camera"),
            ("node.name", "webrtc-consume-stream"),
            ("client.id", "91"),
        ])
    }

    /// A consumer that says nothing about itself (e.g. GStreamer's
    /// `pipewiresrc` with default properties).
    pub(crate) fn plain_video_consumer() -> Props {
        props(&[
            ("media.class", "Stream/Input/Video"),
            ("media.type", "Video"),
            ("node.name", "gst-launch-1.0"),
            ("client.id", "99"),
        ])
    }

    /// PipeWire's own null sink from our test session: a device-like node.
    pub(crate) fn null_sink() -> Props {
        props(&[
            ("media.class", "Audio/Sink"),
            ("node.name", "contextd-null-sink"),
            ("factory.name", "support.null-audio-sink"),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::recorded::*;
    use super::*;

    #[test]
    fn audio_streams() {
        assert_eq!(node_role(&pw_play(), None), NodeRole::Playback);
        assert_eq!(node_role(&firefox_playback(), None), NodeRole::Playback);
        assert_eq!(node_role(&pw_record(), None), NodeRole::Microphone);
        assert_eq!(node_role(&null_sink(), None), NodeRole::Other);
        assert!(!NodeRole::Other.is_stream());
        assert_eq!(
            stream_kind(NodeRole::Microphone, &pw_record(), &[]),
            Some(MediaKind::Microphone)
        );
    }

    #[test]
    fn screen_cast_producers_are_sources_not_playback() {
        for p in [
            mutter_screencast(),
            kwin_screencast(),
            xdpw_screencast(),
            xdph_screencast(),
        ] {
            assert_eq!(node_role(&p, None), NodeRole::ScreenSource, "{p:?}");
            assert!(!node_role(&p, None).is_stream());
        }
        // A video player's output is playback.
        let mut mpv = pw_play();
        mpv.insert("media.class".into(), "Stream/Output/Video".into());
        mpv.insert("media.name".into(), "movie.mkv".into());
        assert_eq!(node_role(&mpv, None), NodeRole::Playback);
    }

    #[test]
    fn cameras() {
        assert_eq!(node_role(&v4l2_webcam(), None), NodeRole::CameraSource);
        assert_eq!(node_role(&libcamera_camera(), None), NodeRole::CameraSource);
        // The device says v4l2 even when the node does not.
        let mut bare = Props::new();
        bare.insert("media.class".into(), "Video/Source".into());
        assert_eq!(node_role(&bare, None), NodeRole::VideoSource);
        let dev: Props = [("device.api".to_owned(), "v4l2".to_owned())].into();
        assert_eq!(node_role(&bare, Some(&dev)), NodeRole::CameraSource);
    }

    #[test]
    fn video_consumers_by_link_then_role() {
        let kind =
            |p: &Props, up: &[NodeRole]| stream_kind(node_role(p, None), p, up).expect("a stream");
        // Linked: the link decides, whatever the consumer says.
        assert_eq!(
            kind(&plain_video_consumer(), &[NodeRole::ScreenSource]),
            MediaKind::Screen
        );
        assert_eq!(
            kind(&chromium_screen_consumer(), &[NodeRole::CameraSource]),
            MediaKind::Camera
        );
        assert_eq!(
            kind(&chromium_camera_consumer(), &[NodeRole::CameraSource]),
            MediaKind::Camera
        );
        // Not linked (yet): the consumer's role.
        assert_eq!(kind(&chromium_screen_consumer(), &[]), MediaKind::Screen);
        assert_eq!(kind(&obs_screen_consumer(), &[]), MediaKind::Screen);
        assert_eq!(kind(&chromium_camera_consumer(), &[]), MediaKind::Camera);
        // Says nothing, linked to an unknown source: a camera.
        assert_eq!(kind(&plain_video_consumer(), &[]), MediaKind::Camera);
        assert_eq!(
            kind(&plain_video_consumer(), &[NodeRole::VideoSource]),
            MediaKind::Camera
        );
    }
}

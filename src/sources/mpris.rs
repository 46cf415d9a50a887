//! MPRIS players (session bus, `org.mpris.MediaPlayer2.*`) → category
//! `media.playback`: one stream per player (id `mpris-` + the part of the
//! bus name after `org.mpris.MediaPlayer2.`), with the player's `Identity`
//! as `claimed_name`, and a `player` record: `PlaybackStatus` and, from
//! `Metadata`, `xesam:title`, `xesam:artist` and `xesam:url` (shown under
//! the detail rule in `core::view`).
//!
//! Players are found with `ListNames` and followed with `NameOwnerChanged`
//! (`arg0namespace='org.mpris.MediaPlayer2'`): a player that appears gets a
//! task that follows its properties, one that leaves is removed. The
//! stream's `app_id` and `pid` come from the player's connection
//! (`GetConnectionUnixProcessID` → `identity::resolve_pid`), never
//! from what the player says.
//!
//! Stream states: `Playing` is `running`, `Paused` is `idle`, `Stopped` is
//! `suspended`; the player's own word is in `player.status`.
//!
//! **Urls.** Only `http`, `https` and `file` urls are kept, without their
//! query and fragment (where session tokens and tracking ids live) and
//! without user:password; anything else (`data:` urls of megabytes, custom
//! schemes) is dropped.
//!
//! Bad input: metadata of the wrong type, a title that is not a string, an
//! artist that is neither `as` nor `s`, an unknown status: logged once per
//! player and left out, the rest is shown. At most [`MAX_PLAYERS`] players
//! are followed, so that a peer cannot make the broker follow thousands.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use zbus::message::Type as MsgType;
use zbus::wire::Variant;
use zbus::{Connection, MatchRule, MessageStream};

use super::fdo::{self, BusKind, FdoError, Props, PropsWatch, Reader, Warned};
use super::{Backoff, SourceContext};
use crate::core::SourceEvent;
use crate::core::state::truncate_text;
use crate::identity;
use crate::model::{AppId, MediaKind, MediaStream, PlaybackStatus, Player, StreamState};

pub(crate) const NAME: &str = "mpris";
pub(crate) const ID_PREFIX: &str = "mpris-";
const NAMESPACE: &str = "org.mpris.MediaPlayer2";
const PATH: &str = "/org/mpris/MediaPlayer2";
const ROOT_IFACE: &str = "org.mpris.MediaPlayer2";
const PLAYER_IFACE: &str = "org.mpris.MediaPlayer2.Player";
/// Players followed at once.
pub(crate) const MAX_PLAYERS: usize = 64;

enum Flow {
    Cancelled,
    Lost(FdoError),
}

/// Follow MPRIS players until cancelled.
pub(crate) async fn run(ctx: SourceContext) {
    let warned = Arc::new(Warned::new(NAME));
    let mut backoff = Backoff::default();
    let mut failures = fdo::Failures::default();
    loop {
        let flow = match fdo::connect(BusKind::Session).await {
            Ok(conn) => follow(&ctx, &conn, &warned, &mut backoff, &mut failures).await,
            Err(e) => Flow::Lost(e),
        };
        match flow {
            Flow::Cancelled => return,
            Flow::Lost(e) => {
                failures.log(NAME, &format!("{e}; retrying"));
                ctx.send(SourceEvent::StreamsReset {
                    id_prefix: ID_PREFIX.into(),
                })
                .await;
                ctx.status(NAME, false, Some(e.to_string())).await;
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
            }
        }
    }
}

/// One followed player.
struct Task {
    owner: String,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

impl Task {
    /// Stop it and wait until it has sent its last event.
    async fn stop(self) {
        self.cancel.cancel();
        if let Err(e) = self.handle.await {
            tracing::debug!(source = NAME, "player task ended badly: {e}");
        }
    }
}

async fn stop_all(players: &mut HashMap<String, Task>) {
    for (_, t) in players.drain() {
        t.stop().await;
    }
}

async fn follow(
    ctx: &SourceContext,
    conn: &Connection,
    warned: &Arc<Warned>,
    backoff: &mut Backoff,
    failures: &mut fdo::Failures,
) -> Flow {
    let rule = match MatchRule::builder()
        .msg_type(MsgType::Signal)
        .sender(fdo::DBUS_NAME)
        .interface(fdo::DBUS_NAME)
        .member("NameOwnerChanged")
        .arg0ns(NAMESPACE)
        .build()
    {
        Ok(r) => r,
        Err(e) => return Flow::Lost(e.into()),
    };
    // Subscribe first, then list, so that no player falls between.
    let mut changes = match MessageStream::for_match_rule(rule, conn, None).await {
        Ok(s) => s,
        Err(e) => return Flow::Lost(e.into()),
    };
    let names: Vec<String> = match zbus::fdo::DBusProxy::new(conn).await {
        Ok(p) => match p.list_names().await {
            Ok(n) => n.into_iter().map(|n| n.to_string()).collect(),
            Err(e) => return Flow::Lost(e.into()),
        },
        Err(e) => return Flow::Lost(e.into()),
    };
    let mut players: HashMap<String, Task> = HashMap::new();
    for name in names.into_iter().filter(|n| is_player_name(n)) {
        if let Ok(Some(owner)) = fdo::name_owner(conn, &name).await {
            start(ctx, conn, warned, &mut players, name, owner);
        }
    }
    backoff.reset();
    failures.clear();
    ctx.status(NAME, true, None).await;
    loop {
        let msg = tokio::select! {
            _ = ctx.cancel.cancelled() => {
                stop_all(&mut players).await;
                return Flow::Cancelled;
            }
            m = changes.next() => m,
        };
        let Some(msg) = msg else {
            stop_all(&mut players).await;
            return Flow::Lost(FdoError::Closed);
        };
        let Ok(msg) = msg else { continue };
        let Ok((name, _, new)) = msg.body().deserialize::<(String, String, String)>() else {
            continue;
        };
        if !is_player_name(&name) {
            continue;
        }
        if players.get(&name).is_some_and(|t| t.owner == new) {
            continue;
        }
        if let Some(t) = players.remove(&name) {
            t.stop().await;
        }
        if !new.is_empty() {
            start(ctx, conn, warned, &mut players, name, new);
        }
    }
}

fn is_player_name(name: &str) -> bool {
    name.strip_prefix(NAMESPACE)
        .and_then(|r| r.strip_prefix('.'))
        .is_some_and(|r| !r.is_empty())
}

/// The stream id of a player's bus name.
pub(crate) fn stream_id(name: &str) -> String {
    let suffix = name
        .strip_prefix(NAMESPACE)
        .and_then(|r| r.strip_prefix('.'))
        .unwrap_or(name);
    format!("{ID_PREFIX}{suffix}")
}

fn start(
    ctx: &SourceContext,
    conn: &Connection,
    warned: &Arc<Warned>,
    players: &mut HashMap<String, Task>,
    name: String,
    owner: String,
) {
    if players.len() >= MAX_PLAYERS {
        warned.warn(
            "too many players",
            format_args!("more than {MAX_PLAYERS} MPRIS players; not following {name}"),
        );
        return;
    }
    let cancel = ctx.cancel.child_token();
    let handle = ctx.tasks.spawn(player(
        ctx.clone(),
        conn.clone(),
        name.clone(),
        owner.clone(),
        cancel.clone(),
        warned.clone(),
    ));
    players.insert(
        name,
        Task {
            owner,
            cancel,
            handle,
        },
    );
}

/// The app behind a player's connection, from the kernel.
async fn identify(conn: &Connection, owner: &str) -> (Option<u32>, Option<AppId>) {
    let pid = match fdo::peer_pid(conn, owner).await {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(source = NAME, owner, "no PID: {e}");
            return (None, None);
        }
    };
    let app = tokio::task::spawn_blocking(move || identity::resolve_pid(pid))
        .await
        .ok()
        .and_then(|r| {
            r.map_err(|e| tracing::debug!(source = NAME, pid, "no identity: {e}"))
                .ok()
        })
        .map(|i| i.app_id);
    (Some(pid), app)
}

/// Follow one player until it leaves (`cancel`); its stream is removed at
/// the end, after its last update, so the two never cross.
async fn player(
    ctx: SourceContext,
    conn: Connection,
    name: String,
    owner: String,
    cancel: CancellationToken,
    warned: Arc<Warned>,
) {
    let id = stream_id(&name);
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = follow_player(&ctx, &conn, &name, &owner, &id, &warned) => {}
    }
    ctx.send(SourceEvent::StreamRemoved { id }).await;
}

async fn follow_player(
    ctx: &SourceContext,
    conn: &Connection,
    name: &str,
    owner: &str,
    id: &str,
    warned: &Warned,
) {
    let (pid, app_id) = identify(conn, owner).await;
    let watch = |iface: &'static str| async move {
        match PropsWatch::new(conn, owner, PATH, iface).await {
            Ok(w) => Some(w),
            Err(e) => {
                warned.warn(
                    &format!("{name} {iface}: GetAll"),
                    format_args!("{name}: cannot read {iface} ({e}); showing the rest"),
                );
                None
            }
        }
    };
    let mut root = watch(ROOT_IFACE).await;
    let mut player = watch(PLAYER_IFACE).await;
    let what_root = format!("{name} {ROOT_IFACE}");
    let what_player = format!("{name} {PLAYER_IFACE}");
    let mut since = Utc::now();
    let mut last_status = None;
    loop {
        let empty = Props::new();
        let identity = root.as_ref().and_then(|w| {
            let mut r = Reader {
                props: &w.props,
                warned,
                what: &what_root,
            };
            r.has("Identity").then(|| r.str("Identity", "s")).flatten()
        });
        let p = player_from(
            player.as_ref().map_or(&empty, |w| &w.props),
            warned,
            &what_player,
        );
        if p.status == Some(PlaybackStatus::Playing) && last_status != p.status {
            since = Utc::now();
        }
        last_status = p.status;
        let stream = media_stream(id, pid, app_id.clone(), identity, p, since);
        if !ctx.send(SourceEvent::Stream { stream }).await {
            return;
        }
        let changed = tokio::select! {
            Some(r) = async { match root.as_mut() { Some(w) => Some(w.changed(warned).await), None => None } } => r,
            Some(r) = async { match player.as_mut() { Some(w) => Some(w.changed(warned).await), None => None } } => r,
            else => {
                // Nothing to follow: the player shows as it is until it leaves.
                std::future::pending::<()>().await;
                return;
            }
        };
        if changed.is_err() {
            return;
        }
    }
}

/// The stream of a player.
pub(crate) fn media_stream(
    id: &str,
    pid: Option<u32>,
    app_id: Option<AppId>,
    identity: Option<String>,
    player: Player,
    since: DateTime<Utc>,
) -> MediaStream {
    let state = match player.status {
        Some(PlaybackStatus::Playing) => StreamState::Running,
        Some(PlaybackStatus::Paused) => StreamState::Idle,
        Some(PlaybackStatus::Stopped) => StreamState::Suspended,
        None => StreamState::Other,
    };
    MediaStream {
        id: id.to_owned(),
        kind: MediaKind::Playback,
        app_id,
        attributed_by: Default::default(),
        pid,
        claimed_name: identity.map(|mut s| {
            truncate_text(&mut s);
            s
        }),
        claimed_binary: None,
        media_name: None,
        media_role: None,
        state,
        since,
        player: Some(player),
    }
}

/// `PlaybackStatus` and the track from a player's `Player` properties.
pub(crate) fn player_from(props: &Props, warned: &Warned, what: &str) -> Player {
    let mut r = Reader {
        props,
        warned,
        what,
    };
    let status = r.str("PlaybackStatus", "s").and_then(|s| match s.as_str() {
        "Playing" => Some(PlaybackStatus::Playing),
        "Paused" => Some(PlaybackStatus::Paused),
        "Stopped" => Some(PlaybackStatus::Stopped),
        other => {
            let shown: String = other.chars().take(40).collect();
            r.absurd("PlaybackStatus", format_args!("is '{shown}'"));
            None
        }
    });
    let mut player = Player {
        status,
        ..Player::default()
    };
    let Some(meta) = props.get("Metadata") else {
        return player;
    };
    let Variant::Dict(dict) = fdo::unwrap_variant(meta) else {
        r.absurd(
            "Metadata",
            format_args!("has type {} instead of a{{sv}}", fdo::type_of(meta)),
        );
        return player;
    };
    for (k, v) in dict.iter() {
        let Some(key) = fdo::as_str(k) else { continue };
        match key {
            "xesam:title" => match fdo::as_str(v) {
                Some(s) => player.title = Some(text(s)),
                None => r.absurd("Metadata[xesam:title]", "is not a string"),
            },
            "xesam:artist" => match fdo::as_str_list(v) {
                Some(a) => {
                    let joined = text(&a.join(", "));
                    player.artist = (!joined.is_empty()).then_some(joined);
                }
                None => r.absurd(
                    "Metadata[xesam:artist]",
                    "is neither a list of strings nor a string",
                ),
            },
            "xesam:url" => match fdo::as_str(v) {
                Some(s) => {
                    player.url = sanitize_url(s);
                    if player.url.is_none() && !s.is_empty() {
                        r.absurd("Metadata[xesam:url]", "is not an http, https or file url");
                    }
                }
                None => r.absurd("Metadata[xesam:url]", "is not a string"),
            },
            _ => {}
        }
    }
    player
}

/// Text without control characters, cut to the core's limit.
fn text(s: &str) -> String {
    let mut t: String = s
        .chars()
        .take(crate::core::state::MAX_TEXT_CHARS + 1)
        .filter(|c| !c.is_control())
        .collect();
    truncate_text(&mut t);
    t
}

/// An `http`, `https` or `file` url without query, fragment and
/// user:password; `None` for anything else (see the module docs).
pub(crate) fn sanitize_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once(':')?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https" | "file") {
        return None;
    }
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    if rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return None;
    }
    let rest = match rest.strip_prefix("//") {
        Some(after) if scheme != "file" => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            let host = authority.rsplit('@').next().unwrap_or(authority);
            if host.is_empty() {
                return None;
            }
            format!("//{host}{path}")
        }
        _ => rest.to_owned(),
    };
    let mut out = format!("{scheme}:{rest}");
    truncate_text(&mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::{OwnedVariant, Str};

    fn metadata(entries: Vec<(&str, Variant<'static>)>) -> OwnedVariant {
        let m: HashMap<String, Variant<'static>> = entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        OwnedVariant::try_from(Variant::from(m)).expect("owned")
    }

    fn props(status: &str, meta: OwnedVariant) -> Props {
        [
            (
                "PlaybackStatus".to_owned(),
                OwnedVariant::from(Str::from(status.to_owned())),
            ),
            ("Metadata".to_owned(), meta),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn reads_status_and_track() {
        let w = Warned::new("test");
        let p = player_from(
            &props(
                "Playing",
                metadata(vec![
                    ("xesam:title", Variant::from("Song")),
                    (
                        "xesam:artist",
                        Variant::from(vec!["A".to_owned(), "B".to_owned()]),
                    ),
                    (
                        "xesam:url",
                        Variant::from("https://user:pw@music.example/watch?v=1&token=s3cret#t=5"),
                    ),
                    ("mpris:length", Variant::I64(1)),
                ]),
            ),
            &w,
            "p",
        );
        assert_eq!(
            p,
            Player {
                status: Some(PlaybackStatus::Playing),
                title: Some("Song".into()),
                artist: Some("A, B".into()),
                url: Some("https://music.example/watch".into()),
            }
        );
        assert_eq!(w.count(), 0);
        let s = media_stream("mpris-x", Some(1), None, Some("X".into()), p, Utc::now());
        assert_eq!(s.state, StreamState::Running);
        assert_eq!(s.kind, MediaKind::Playback);
    }

    #[test]
    fn broken_metadata_shows_what_it_can() {
        let w = Warned::new("test");
        let p = player_from(
            &props(
                "Dancing",
                metadata(vec![
                    ("xesam:title", Variant::U32(5)),
                    ("xesam:artist", Variant::from("Solo")),
                    ("xesam:url", Variant::from("data:text/plain,xxxx")),
                ]),
            ),
            &w,
            "p",
        );
        assert_eq!(p.status, None);
        assert_eq!(p.title, None);
        assert_eq!(p.artist.as_deref(), Some("Solo"));
        assert_eq!(p.url, None);
        assert_eq!(w.count(), 3);
        // Metadata that is not a dict.
        let p = player_from(&props("Paused", OwnedVariant::from(7u32)), &w, "p");
        assert_eq!(p.status, Some(PlaybackStatus::Paused));
        assert_eq!(w.count(), 4);
        // A huge title is cut.
        let p = player_from(
            &props(
                "Stopped",
                metadata(vec![("xesam:title", Variant::from("t".repeat(1 << 20)))]),
            ),
            &w,
            "q",
        );
        assert!(p.title.expect("title").chars().count() < 1100);
    }

    #[test]
    fn urls_and_ids() {
        assert_eq!(
            sanitize_url("file:///home/a/Music/x.ogg?x#y").as_deref(),
            Some("file:///home/a/Music/x.ogg")
        );
        assert_eq!(sanitize_url("HTTP://h/p").as_deref(), Some("http://h/p"));
        assert_eq!(sanitize_url("spotify:track:1"), None);
        assert_eq!(sanitize_url("https://@/"), None);
        assert_eq!(sanitize_url("no scheme"), None);
        assert_eq!(
            stream_id("org.mpris.MediaPlayer2.vlc.instance7"),
            "mpris-vlc.instance7"
        );
        assert!(is_player_name("org.mpris.MediaPlayer2.vlc"));
        assert!(!is_player_name("org.mpris.MediaPlayer2"));
        assert!(!is_player_name("org.mpris.MediaPlayer2Foo"));
    }
}

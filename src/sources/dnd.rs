//! Do Not Disturb → category `session` (`do_not_disturb`,
//! `do_not_disturb_by` on the session state), from each desktop's own
//! place, as two sources in `ListSources`:
//!
//! - **`dnd-gsettings`**: GNOME's `org.gnome.desktop.notifications
//!   show-banners` (false: Do Not Disturb on), read with `gsettings get`
//!   (the real GSettings, with whatever backend and defaults the user's
//!   session has; xdg-desktop-portal's Settings interface does not expose
//!   that schema, and reading dconf's database format ourselves would
//!   miss the schema's default and the system's overrides). Changes are
//!   followed through dconf's own signal (`ca.desrt.dconf.Writer.Notify`
//!   on the session bus, which every dconf write sends): a match rule,
//!   added and confirmed *before* each first read so that no change falls
//!   between the two, and a new `gsettings get` when a signal names the
//!   key or a directory above it. The signal is only a prompt to read
//!   again, so a peer that forges one changes nothing. This costs no
//!   process while nothing changes (a `gsettings monitor` child would
//!   live as long as the broker, and could not say when it started
//!   listening). A missing `gsettings` or schema (not a GNOME machine) is
//!   `unavailable`, tried again after a long pause or at a dconf signal,
//!   never an error. A backend other than dconf (keyfile, memory) is read
//!   at start and after a reconnect only.
//! - **`dnd-server`**: the notification server's own state, on
//!   `/org/freedesktop/Notifications` of the owner of
//!   `org.freedesktop.Notifications`: `Inhibited` (b) of
//!   `org.freedesktop.Notifications` (Plasma's extension of the spec) and
//!   `paused` (b) of `org.dunstproject.cmd0` (dunst), followed with
//!   `PropertiesChanged`. Both are optional: a server without them (GNOME
//!   Shell's, mako) says nothing, and the watch stays so that a property
//!   announced later is seen. A server that leaves takes what it said
//!   with it; the next owner is attached to ([`fdo::run_service`]).
//!
//! **Together.** Do Not Disturb is on when any of them says so
//! (`do_not_disturb_by` names the first: GNOME, the server, dunst), off
//! when one that knows says off and none says on, and unknown (absent,
//! not false) when none knows. A desktop that keeps its setting in none
//! of these places (mako's modes, a shell of its own) leaves it unknown.
//! GNOME's setting is read on other desktops too where its schema is
//! installed; there it is usually the default (banners shown), which
//! says "off" and never hides another desktop's "on".

use std::process::Stdio;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use zbus::message::Type as MsgType;
use zbus::{Connection, MatchRule, Message, MessageStream};

use super::fdo::{
    self, BusKind, Failures, FdoError, Props, PropsWatch, Reader, Service, Warned, run_service,
};
use super::{Backoff, SourceContext};
use crate::core::SourceEvent;
use crate::model::{DndSource, DoNotDisturb};

/// GNOME's setting, in `ListSources`.
pub(crate) const GSETTINGS: &str = "dnd-gsettings";
/// The notification server's state, in `ListSources`.
pub(crate) const SERVER: &str = "dnd-server";

const SCHEMA: &str = "org.gnome.desktop.notifications";
const KEY: &str = "show-banners";
/// Where dconf keeps the key (the schema's path and the key's name).
const DCONF_KEY: &str = "/org/gnome/desktop/notifications/show-banners";
const DCONF_WRITER: &str = "ca.desrt.dconf.Writer";
/// How long `gsettings get` may take (it reads a file; a hang is a bug).
const READ_TIMEOUT: Duration = Duration::from_secs(5);

const NOTIFICATIONS: &str = "org.freedesktop.Notifications";
const NOTIFICATIONS_PATH: &str = "/org/freedesktop/Notifications";
const DUNST_IFACE: &str = "org.dunstproject.cmd0";

/// Follow both until cancelled (each only where not disabled in
/// `[sources]`), and tell the core what they say together.
pub(crate) async fn run(ctx: SourceContext) {
    let (gtx, grx) = mpsc::channel(16);
    let (stx, srx) = mpsc::channel(16);
    let gnome = async {
        if ctx.enabled(GSETTINGS) {
            follow_gsettings(ctx.clone(), gtx).await;
        }
    };
    let server = async {
        if ctx.enabled(SERVER) {
            run_service(ctx.clone(), stx, Server::default()).await;
        }
    };
    tokio::join!(gnome, server, combine(ctx.clone(), grx, srx));
}

/// What GNOME's setting says of Do Not Disturb.
fn gnome_dnd(show_banners: Option<bool>) -> Option<DoNotDisturb> {
    show_banners.map(|shown| DoNotDisturb {
        on: !shown,
        by: (!shown).then_some(DndSource::Gnome),
    })
}

/// Any that says on wins (the first of them names it); else off if one
/// knows; else unknown.
pub(crate) fn either(a: Option<DoNotDisturb>, b: Option<DoNotDisturb>) -> Option<DoNotDisturb> {
    match (a, b) {
        (Some(x), _) if x.on => Some(x),
        (_, Some(y)) if y.on => Some(y),
        (Some(x), _) => Some(x),
        (None, y) => y,
    }
}

/// GNOME's part and the server's part, merged; only changes go out.
async fn combine(
    ctx: SourceContext,
    mut gnome: mpsc::Receiver<Option<bool>>,
    mut server: mpsc::Receiver<SourceEvent>,
) {
    let (mut g, mut s): (Option<DoNotDisturb>, Option<DoNotDisturb>) = (None, None);
    let mut last: Option<Option<DoNotDisturb>> = None;
    loop {
        tokio::select! {
            Some(v) = gnome.recv() => g = gnome_dnd(v),
            Some(ev) = server.recv() => {
                if let SourceEvent::DoNotDisturb { dnd } = ev {
                    s = dnd;
                }
            }
            else => break,
        }
        let now = either(g, s);
        if last != Some(now) {
            last = Some(now);
            if !ctx.send(SourceEvent::DoNotDisturb { dnd: now }).await {
                break;
            }
        }
    }
}

/// Why `show-banners` could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    /// Not a GNOME machine: no `gsettings`, or no schema or key.
    #[error("{0}")]
    Missing(String),
    #[error("{0}")]
    Failed(String),
}

/// `gsettings get org.gnome.desktop.notifications show-banners`, killed
/// if it outlives [`READ_TIMEOUT`] or the caller.
async fn read_show_banners() -> Result<bool, ReadError> {
    let child = tokio::process::Command::new("gsettings")
        .args(["get", SCHEMA, KEY])
        // Its messages in English, whatever the user's language.
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ReadError::Missing("gsettings is not installed (not a GNOME machine)".into())
            }
            _ => ReadError::Failed(format!("cannot run gsettings: {e}")),
        })?;
    let out = tokio::time::timeout(READ_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| ReadError::Failed("gsettings get did not answer within 5 s".into()))?
        .map_err(|e| ReadError::Failed(format!("gsettings get: {e}")))?;
    parse_get(out.status.success(), &out.stdout, &out.stderr)
}

/// What `gsettings get` printed, as `show-banners`.
fn parse_get(success: bool, stdout: &[u8], stderr: &[u8]) -> Result<bool, ReadError> {
    let said = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let line = s.lines().next().unwrap_or_default().trim().to_owned();
        line.chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect::<String>()
    };
    if !success {
        let err = said(stderr);
        let missing = ["No such schema", "No such key", "No schemas installed"];
        return Err(if missing.iter().any(|m| err.starts_with(m)) {
            ReadError::Missing(format!("{SCHEMA} {KEY}: {err} (not a GNOME machine)"))
        } else {
            ReadError::Failed(format!("gsettings get {SCHEMA} {KEY}: {err}"))
        });
    }
    match said(stdout).as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(ReadError::Failed(format!(
            "gsettings get {SCHEMA} {KEY} printed {other:?}, not a boolean"
        ))),
    }
}

/// Whether dconf's `Notify(prefix, changes, tag)` touches the key: a
/// change of the key itself or of a directory above it (a reset).
fn touches_key(msg: &Message) -> bool {
    let Ok((prefix, changes, _tag)) = msg.body().deserialize::<(String, Vec<String>, String)>()
    else {
        return false;
    };
    changes.iter().any(|rel| {
        let path = format!("{prefix}{rel}");
        path == DCONF_KEY || (path.ends_with('/') && DCONF_KEY.starts_with(&path))
    })
}

/// dconf's change signal, from whoever sends it (only a prompt to read).
async fn dconf_changes(conn: &Connection) -> Result<MessageStream, FdoError> {
    let rule = MatchRule::builder()
        .msg_type(MsgType::Signal)
        .interface(DCONF_WRITER)
        .member("Notify")
        .build()?;
    Ok(MessageStream::for_match_rule(rule, conn, None).await?)
}

/// GNOME's part until cancelled: `Some(show-banners)` or `None` (unknown)
/// on `out`, each time it may have changed.
async fn follow_gsettings(ctx: SourceContext, out: mpsc::Sender<Option<bool>>) {
    let mut backoff = Backoff::default();
    // Not GNOME: asking again every 30 s would cost a process each time
    // for nothing; a dconf signal for the key still asks at once.
    let mut missing = Backoff::new(Duration::from_secs(60), Duration::from_secs(600));
    let mut failures = Failures::default();
    let mut known: Option<Result<bool, String>> = None;
    loop {
        let conn = match fdo::connect(BusKind::Session).await {
            Ok(c) => c,
            Err(e) => {
                failures.log(GSETTINGS, &e.to_string());
                let _ = out.send(None).await;
                ctx.status(GSETTINGS, false, Some(e.to_string())).await;
                known = None;
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
                continue;
            }
        };
        let mut changes = match dconf_changes(&conn).await {
            Ok(s) => s,
            Err(e) => {
                failures.log(GSETTINGS, &format!("{e}; reconnecting"));
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
                continue;
            }
        };
        backoff.reset();
        // Read, then wait for a reason to read again.
        'read: loop {
            let read = tokio::select! {
                _ = ctx.cancel.cancelled() => return,
                r = read_show_banners() => r,
            };
            let retry = match read {
                Ok(shown) => {
                    failures.clear();
                    missing.reset();
                    backoff.reset();
                    if known != Some(Ok(shown)) {
                        tracing::debug!(source = GSETTINGS, show_banners = shown, "read");
                        if out.send(Some(shown)).await.is_err() {
                            return;
                        }
                        if !matches!(known, Some(Ok(_))) {
                            ctx.status(GSETTINGS, true, None).await;
                        }
                        known = Some(Ok(shown));
                    }
                    None
                }
                Err(e) => {
                    let why = e.to_string();
                    failures.log(GSETTINGS, &why);
                    if known.as_ref() != Some(&Err(why.clone())) {
                        if out.send(None).await.is_err() {
                            return;
                        }
                        ctx.status(GSETTINGS, false, Some(why.clone())).await;
                        known = Some(Err(why));
                    }
                    Some(match e {
                        ReadError::Missing(_) => missing.next_delay(),
                        ReadError::Failed(_) => backoff.next_delay(),
                    })
                }
            };
            let again = async {
                match retry {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(again);
            loop {
                tokio::select! {
                    _ = ctx.cancel.cancelled() => return,
                    () = &mut again => continue 'read,
                    m = changes.next() => match m {
                        Some(Ok(m)) if touches_key(&m) => continue 'read,
                        Some(_) => {}
                        // The bus went: unknown until it is back.
                        None => {
                            failures.log(GSETTINGS, "the session bus closed; reconnecting");
                            let _ = out.send(None).await;
                            ctx.status(GSETTINGS, false, Some(FdoError::Closed.to_string())).await;
                            known = None;
                            break 'read;
                        }
                    },
                }
            }
        }
        if !ctx.sleep(backoff.next_delay()).await {
            return;
        }
    }
}

/// The notification server's `Inhibited` and dunst's `paused`.
#[derive(Debug)]
struct Server {
    warned: Warned,
    fdo: Option<PropsWatch>,
    dunst: Option<PropsWatch>,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            warned: Warned::new(SERVER),
            fdo: None,
            dunst: None,
        }
    }
}

/// What the server's properties say (`None`: neither is there).
pub(crate) fn server_dnd(
    fdo: Option<&Props>,
    dunst: Option<&Props>,
    warned: &Warned,
) -> Option<DoNotDisturb> {
    let read = |props: Option<&Props>, what: &str, name: &str| {
        let props = props.filter(|p| p.contains_key(name))?;
        Reader {
            props,
            warned,
            what,
        }
        .bool(name)
    };
    let said = |v: Option<bool>, by| {
        v.map(|on| DoNotDisturb {
            on,
            by: on.then_some(by),
        })
    };
    either(
        said(
            read(fdo, NOTIFICATIONS, "Inhibited"),
            DndSource::NotificationServer,
        ),
        said(read(dunst, DUNST_IFACE, "paused"), DndSource::Dunst),
    )
}

impl Server {
    fn event(&self) -> SourceEvent {
        SourceEvent::DoNotDisturb {
            dnd: server_dnd(
                self.fdo.as_ref().map(|w| &w.props),
                self.dunst.as_ref().map(|w| &w.props),
                &self.warned,
            ),
        }
    }
}

impl Service for Server {
    const SOURCE: &'static str = SERVER;
    const BUS_NAME: &'static str = NOTIFICATIONS;
    const BUS: BusKind = BusKind::Session;

    fn gone(&self) -> SourceEvent {
        SourceEvent::DoNotDisturb { dnd: None }
    }

    async fn attach(&mut self, conn: &Connection, owner: &str) -> Result<SourceEvent, FdoError> {
        self.fdo =
            Some(PropsWatch::optional(conn, owner, NOTIFICATIONS_PATH, NOTIFICATIONS).await?);
        self.dunst =
            Some(PropsWatch::optional(conn, owner, NOTIFICATIONS_PATH, DUNST_IFACE).await?);
        Ok(self.event())
    }

    async fn next(&mut self) -> Result<SourceEvent, FdoError> {
        let (Some(fdo), Some(dunst)) = (self.fdo.as_mut(), self.dunst.as_mut()) else {
            return Err(FdoError::Service("not attached".into()));
        };
        let warned = &self.warned;
        tokio::select! {
            r = fdo.changed(warned) => { r?; }
            r = dunst.changed(warned) => { r?; }
        }
        Ok(self.event())
    }

    fn detach(&mut self) {
        self.fdo = None;
        self.dunst = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::{OwnedVariant, Str};

    fn on(by: DndSource) -> Option<DoNotDisturb> {
        Some(DoNotDisturb {
            on: true,
            by: Some(by),
        })
    }
    const OFF: Option<DoNotDisturb> = Some(DoNotDisturb {
        on: false,
        by: None,
    });

    #[test]
    fn any_on_wins_off_needs_one_that_knows_and_none_is_unknown() {
        assert_eq!(either(None, None), None);
        assert_eq!(either(OFF, None), OFF);
        assert_eq!(either(None, OFF), OFF);
        assert_eq!(either(OFF, on(DndSource::Dunst)), on(DndSource::Dunst));
        assert_eq!(
            either(on(DndSource::Gnome), on(DndSource::Dunst)),
            on(DndSource::Gnome)
        );
        assert_eq!(gnome_dnd(Some(false)), on(DndSource::Gnome));
        assert_eq!(gnome_dnd(Some(true)), OFF);
        assert_eq!(gnome_dnd(None), None);
    }

    fn props(v: &[(&str, OwnedVariant)]) -> Props {
        v.iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn the_servers_properties_are_optional_and_read_tolerantly() {
        let w = Warned::new("test");
        // GNOME Shell's or mako's server: nothing said, nothing warned.
        assert_eq!(
            server_dnd(Some(&Props::new()), Some(&Props::new()), &w),
            None
        );
        assert_eq!(server_dnd(None, None, &w), None);
        let plasma = |b: bool| props(&[("Inhibited", b.into())]);
        assert_eq!(
            server_dnd(Some(&plasma(true)), None, &w),
            on(DndSource::NotificationServer)
        );
        assert_eq!(server_dnd(Some(&plasma(false)), None, &w), OFF);
        let dunst = props(&[("paused", true.into())]);
        assert_eq!(
            server_dnd(Some(&plasma(false)), Some(&dunst), &w),
            on(DndSource::Dunst)
        );
        assert_eq!(w.count(), 0);
        // A value of the wrong type: unknown, warned once.
        let odd = props(&[("Inhibited", OwnedVariant::from(Str::from("yes")))]);
        assert_eq!(server_dnd(Some(&odd), None, &w), None);
        assert_eq!(server_dnd(Some(&odd), None, &w), None);
        assert_eq!(w.count(), 1);
    }

    #[test]
    fn gsettings_output_is_a_boolean_or_says_why_not() {
        assert!(matches!(parse_get(true, b"true\n", b""), Ok(true)));
        assert!(matches!(parse_get(true, b"false\n", b""), Ok(false)));
        assert!(matches!(
            parse_get(true, b"'maybe'\n", b""),
            Err(ReadError::Failed(_))
        ));
        assert!(matches!(
            parse_get(
                false,
                b"",
                b"No such schema \xe2\x80\x9corg.gnome.desktop.notifications\xe2\x80\x9d\n"
            ),
            Err(ReadError::Missing(_))
        ));
        assert!(matches!(
            parse_get(
                false,
                b"",
                b"No such key \xe2\x80\x9cshow-banners\xe2\x80\x9d\n"
            ),
            Err(ReadError::Missing(_))
        ));
        assert!(matches!(
            parse_get(false, b"", b"No schemas installed\n"),
            Err(ReadError::Missing(_))
        ));
        assert!(matches!(
            parse_get(false, b"", b"failed to commit changes to dconf\n"),
            Err(ReadError::Failed(_))
        ));
    }

    fn notify(prefix: &str, changes: &[&str]) -> Message {
        Message::signal("/ca/desrt/dconf/Writer/user", DCONF_WRITER, "Notify")
            .build(&(prefix, changes.to_vec(), ":1.0:user:0"))
            .expect("body")
    }

    #[test]
    fn dconf_signals_that_touch_the_key_or_a_directory_above_it() {
        assert!(touches_key(&notify(DCONF_KEY, &[""])));
        assert!(touches_key(&notify(
            "/org/gnome/desktop/notifications/",
            &["application-children", "show-banners"]
        )));
        // `dconf reset -f /org/gnome/`: a directory above.
        assert!(touches_key(&notify("/org/gnome/", &[""])));
        assert!(touches_key(&notify("/", &["org/gnome/desktop/"])));
        assert!(!touches_key(&notify(
            "/org/gnome/desktop/notifications/show-banners-x",
            &[""]
        )));
        assert!(!touches_key(&notify(
            "/org/gnome/desktop/interface/",
            &["gtk-theme"]
        )));
        // A directory that only starts like ours.
        assert!(!touches_key(&notify("/org/gnome/desktop/notif", &["/"])));
    }
}

//! logind (system bus, `org.freedesktop.login1`) → category `session`, with
//! `org.freedesktop.ScreenSaver` on the session bus as the fallback.
//!
//! **Which session.** The user's graphical session: the one named by
//! `XDG_SESSION_ID` (set when the broker runs inside the session), else
//! the session of the broker's own process (`GetSessionByPID`), else the
//! user's display session (`org.freedesktop.login1.User.Display`), which is
//! what a broker started by `systemd --user` (outside any session) needs.
//! In the last case the user's `Display` is followed too, so that a new
//! graphical login is picked up.
//!
//! **What.** `Active`, `LockedHint` (set by the screen locker), `IdleHint`
//! and `IdleSinceHint` of the session (through `PropertiesChanged`), and
//! `PrepareForSleep(true/false)` of the manager (a signal; the manager's
//! `PreparingForSleep` gives the state at start).
//!
//! **Fallback.** Without logind (no system bus, logind not running, no
//! session found), `org.freedesktop.ScreenSaver` (`GetActive`,
//! `ActiveChanged`) on the session bus is used when a desktop provides it:
//! it only says whether the screen saver is on, which the broker reports
//! as locked and idle, in a session assumed active. Both run as their own
//! source (`login1`, `screensaver` in `ListSources`); logind wins whenever
//! it has a session.

use chrono::{DateTime, TimeZone, Utc};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use zbus::Connection;
use zbus::wire::OwnedObjectPath;

use super::SourceContext;
use super::fdo::{
    BusKind, FdoError, Props, PropsWatch, Reader, Service, SignalStream, Warned, run_service,
    signal_stream,
};
use crate::core::SourceEvent;
use crate::model::SessionState;

pub(crate) const NAME: &str = "login1";
pub(crate) const SCREENSAVER: &str = "screensaver";
const BUS_NAME: &str = "org.freedesktop.login1";
const MANAGER_PATH: &str = "/org/freedesktop/login1";
const MANAGER_IFACE: &str = "org.freedesktop.login1.Manager";
const SESSION_IFACE: &str = "org.freedesktop.login1.Session";
const USER_IFACE: &str = "org.freedesktop.login1.User";
const SCREENSAVER_NAME: &str = "org.freedesktop.ScreenSaver";
const SCREENSAVER_PATH: &str = "/org/freedesktop/ScreenSaver";

/// An `IdleSinceHint` before this (2001-09-09) is not a time the user
/// went idle but a clock or service gone wrong.
const MIN_PLAUSIBLE_US: i128 = 1_000_000_000_000_000;

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_path = "/org/freedesktop/login1"
)]
trait LoginManager {
    fn get_session(&self, session_id: &str) -> zbus::Result<OwnedObjectPath>;
    #[zbus(name = "GetSessionByPID")]
    fn get_session_by_pid(&self, pid: u32) -> zbus::Result<OwnedObjectPath>;
    fn get_user(&self, uid: u32) -> zbus::Result<OwnedObjectPath>;
    fn list_users(&self) -> zbus::Result<Vec<(u32, String, OwnedObjectPath)>>;
}

#[zbus::proxy(
    interface = "org.freedesktop.ScreenSaver",
    default_path = "/org/freedesktop/ScreenSaver"
)]
trait ScreenSaverIface {
    fn get_active(&self) -> zbus::Result<bool>;
}

/// Follow logind and the ScreenSaver until cancelled, and report the
/// session from logind when it knows one, else from the ScreenSaver.
pub(crate) async fn run(ctx: SourceContext) {
    let (ltx, lrx) = mpsc::channel(16);
    let (stx, srx) = mpsc::channel(16);
    let session_id = std::env::var("XDG_SESSION_ID")
        .ok()
        .filter(|s| !s.is_empty());
    tokio::join!(
        run_service(ctx.clone(), ltx, Login1::new(session_id)),
        run_service(ctx.clone(), stx, ScreenSaver::default()),
        combine(ctx.clone(), lrx, srx),
    );
}

fn session_of(ev: SourceEvent) -> Option<SessionState> {
    match ev {
        SourceEvent::Session { session } => session,
        _ => None,
    }
}

/// logind's session when there is one, else the ScreenSaver's.
async fn combine(
    ctx: SourceContext,
    mut logind: mpsc::Receiver<SourceEvent>,
    mut screensaver: mpsc::Receiver<SourceEvent>,
) {
    let (mut l, mut s): (Option<SessionState>, Option<SessionState>) = (None, None);
    let mut last: Option<Option<SessionState>> = None;
    loop {
        tokio::select! {
            Some(ev) = logind.recv() => l = session_of(ev),
            Some(ev) = screensaver.recv() => s = session_of(ev),
            else => break,
        }
        let now = l.clone().or_else(|| s.clone());
        if last.as_ref() != Some(&now) {
            last = Some(now.clone());
            if !ctx.send(SourceEvent::Session { session: now }).await {
                break;
            }
        }
    }
}

#[derive(Debug)]
struct Login1 {
    warned: Warned,
    session_id: Option<String>,
    conn: Option<Connection>,
    owner: String,
    session: Option<PropsWatch>,
    /// Followed when the session came from the user's `Display`.
    user: Option<PropsWatch>,
    sleep: Option<SignalStream>,
    preparing_for_sleep: bool,
}

impl Login1 {
    fn new(session_id: Option<String>) -> Self {
        Login1 {
            warned: Warned::new(NAME),
            session_id,
            conn: None,
            owner: String::new(),
            session: None,
            user: None,
            sleep: None,
            preparing_for_sleep: false,
        }
    }

    /// The session to follow, in the order of the module docs.
    async fn find_session(&mut self, conn: &Connection) -> Result<String, FdoError> {
        let manager = LoginManagerProxy::builder(conn)
            .destination(self.owner.clone())
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        let mut tried = Vec::new();
        if let Some(id) = &self.session_id {
            match manager.get_session(id).await {
                Ok(p) => return Ok(p.to_string()),
                Err(e) => tried.push(format!("XDG_SESSION_ID={id}: {e}")),
            }
        }
        match manager.get_session_by_pid(std::process::id()).await {
            Ok(p) => return Ok(p.to_string()),
            Err(e) => tried.push(format!("own process: {e}")),
        }
        // SAFETY: getuid(2) cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        // GetUser, else the user's entry in ListUsers (some logind
        // implementations, python-dbusmock's among them, fail GetUser).
        let user = match manager.get_user(uid).await {
            Ok(p) => p,
            Err(e) => {
                tried.push(format!("GetUser({uid}): {e}"));
                manager
                    .list_users()
                    .await?
                    .into_iter()
                    .find(|(u, _, _)| *u == uid)
                    .map(|(_, _, p)| p)
                    .ok_or_else(|| {
                        FdoError::Service(format!(
                            "no graphical session found ({})",
                            tried.join("; ")
                        ))
                    })?
            }
        };
        let watch = PropsWatch::new(conn, &self.owner, user.as_str(), USER_IFACE).await?;
        let display = display_session(&watch.props, &self.warned);
        self.user = Some(watch);
        match display {
            Some(p) => Ok(p),
            None => {
                tried.push(format!("user {uid} has no display session"));
                Err(FdoError::Service(format!(
                    "no graphical session found ({})",
                    tried.join("; ")
                )))
            }
        }
    }

    fn event(&self) -> SourceEvent {
        SourceEvent::Session {
            session: self.session.as_ref().map(|w| {
                session_from(&w.props, self.preparing_for_sleep, &self.warned, Utc::now())
            }),
        }
    }
}

/// The session path in a user's `Display` (`(so)`), if it names one.
fn display_session(user: &Props, warned: &Warned) -> Option<String> {
    let v = user.get("Display")?;
    let zbus::wire::Variant::Structure(s) = super::fdo::unwrap_variant(v) else {
        warned.warn(
            "User.Display: type",
            format_args!(
                "{USER_IFACE}: Display has type {} instead of (so)",
                super::fdo::type_of(v)
            ),
        );
        return None;
    };
    s.fields()
        .get(1)
        .and_then(super::fdo::as_str)
        .filter(|p| p.starts_with('/') && *p != "/")
        .map(str::to_owned)
}

impl Service for Login1 {
    const SOURCE: &'static str = NAME;
    const BUS_NAME: &'static str = BUS_NAME;
    const BUS: BusKind = BusKind::System;
    /// A login (a new session, a new user) may be the graphical session
    /// that was not there yet.
    const RETRY_ON: &'static [(&'static str, &'static str)] =
        &[(MANAGER_IFACE, "SessionNew"), (MANAGER_IFACE, "UserNew")];

    fn gone(&self) -> SourceEvent {
        SourceEvent::Session { session: None }
    }

    async fn attach(&mut self, conn: &Connection, owner: &str) -> Result<SourceEvent, FdoError> {
        self.conn = Some(conn.clone());
        self.owner = owner.to_owned();
        // The signal first, then the state, so that no change falls between.
        self.sleep = Some(
            signal_stream(
                conn,
                owner,
                Some(MANAGER_PATH),
                MANAGER_IFACE,
                "PrepareForSleep",
            )
            .await?,
        );
        let reply = conn
            .call_method(
                Some(owner),
                MANAGER_PATH,
                Some(super::fdo::PROPERTIES_IFACE),
                "Get",
                &(MANAGER_IFACE, "PreparingForSleep"),
            )
            .await;
        self.preparing_for_sleep = reply
            .ok()
            .and_then(|m| m.body().deserialize::<zbus::wire::OwnedVariant>().ok())
            .and_then(|v| super::fdo::as_bool(&v))
            .unwrap_or(false);
        let path = self.find_session(conn).await?;
        tracing::debug!(source = NAME, session = %path, "following the session");
        self.session = Some(PropsWatch::new(conn, owner, &path, SESSION_IFACE).await?);
        Ok(self.event())
    }

    async fn next(&mut self) -> Result<SourceEvent, FdoError> {
        let (Some(session), Some(sleep)) = (self.session.as_mut(), self.sleep.as_mut()) else {
            return Err(FdoError::Service("not attached".into()));
        };
        let warned = &self.warned;
        let user = self.user.as_mut();
        enum What {
            Session,
            Sleep(Option<bool>),
            User,
        }
        let what = tokio::select! {
            r = session.changed(warned) => { r?; What::Session }
            m = sleep.next() => match m {
                None => return Err(FdoError::Closed),
                Some(m) => What::Sleep(m.ok().and_then(|m| m.body().deserialize::<bool>().ok())),
            },
            Some(r) = async { match user { Some(u) => Some(u.changed(warned).await), None => None } } => {
                r?;
                What::User
            }
        };
        match what {
            What::Session => {}
            What::Sleep(Some(b)) => self.preparing_for_sleep = b,
            What::Sleep(None) => {
                self.warned.warn(
                    "PrepareForSleep: body",
                    "PrepareForSleep without a boolean; ignored",
                );
            }
            What::User => {
                let now = self
                    .user
                    .as_ref()
                    .and_then(|u| display_session(&u.props, &self.warned));
                let current = self.session.as_ref().map(|s| s.path().to_owned());
                if now.is_some()
                    && now != current
                    && let (Some(conn), Some(path)) = (self.conn.clone(), now)
                {
                    tracing::info!(source = NAME, session = %path, "the user's display session changed");
                    self.session =
                        Some(PropsWatch::new(&conn, &self.owner, &path, SESSION_IFACE).await?);
                }
            }
        }
        Ok(self.event())
    }

    fn detach(&mut self) {
        self.session = None;
        self.user = None;
        self.sleep = None;
        self.conn = None;
        self.preparing_for_sleep = false;
    }
}

/// `IdleSinceHint` (µs since the epoch) as a time, if it is a plausible
/// one: `Ok(None)` for 0 (never idle), `Err` for a time before 2001 or in
/// the future.
pub(crate) fn idle_since(
    us: i128,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, &'static str> {
    if us == 0 {
        return Ok(None);
    }
    if us < MIN_PLAUSIBLE_US {
        return Err("is before 2001");
    }
    let secs = i64::try_from(us / 1_000_000).map_err(|_| "is out of range")?;
    let nanos = u32::try_from((us % 1_000_000) * 1000).map_err(|_| "is out of range")?;
    let t = Utc
        .timestamp_opt(secs, nanos)
        .single()
        .ok_or("is out of range")?;
    // A minute of slack for clocks that disagree a little.
    if t > now + chrono::Duration::minutes(1) {
        return Err("is in the future");
    }
    Ok(Some(t))
}

/// The session state from the session's properties.
pub(crate) fn session_from(
    props: &Props,
    preparing_for_sleep: bool,
    warned: &Warned,
    now: DateTime<Utc>,
) -> SessionState {
    let mut r = Reader {
        props,
        warned,
        what: SESSION_IFACE,
    };
    let idle = r.bool("IdleHint").unwrap_or(false);
    let idle_since = if idle {
        match r.int("IdleSinceHint", "t").map(|us| idle_since(us, now)) {
            Some(Ok(t)) => t,
            Some(Err(why)) => {
                r.absurd("IdleSinceHint", why);
                None
            }
            None => None,
        }
    } else {
        None
    };
    SessionState {
        active: r.bool("Active").unwrap_or(false),
        locked: r.bool("LockedHint").unwrap_or(false),
        idle,
        idle_since,
        preparing_for_sleep,
        ..SessionState::default()
    }
}

/// The fallback: `org.freedesktop.ScreenSaver` on the session bus.
#[derive(Debug, Default)]
struct ScreenSaver {
    changes: Option<SignalStream>,
    active: bool,
}

/// What the ScreenSaver's "active" says about the session.
pub(crate) fn screensaver_session(active: bool) -> SessionState {
    SessionState {
        active: true,
        locked: active,
        idle: active,
        idle_since: None,
        preparing_for_sleep: false,
        ..SessionState::default()
    }
}

impl Service for ScreenSaver {
    const SOURCE: &'static str = SCREENSAVER;
    const BUS_NAME: &'static str = SCREENSAVER_NAME;
    const BUS: BusKind = BusKind::Session;

    fn gone(&self) -> SourceEvent {
        SourceEvent::Session { session: None }
    }

    async fn attach(&mut self, conn: &Connection, owner: &str) -> Result<SourceEvent, FdoError> {
        self.changes =
            Some(signal_stream(conn, owner, None, SCREENSAVER_NAME, "ActiveChanged").await?);
        let proxy = ScreenSaverIfaceProxy::builder(conn)
            .destination(owner.to_owned())
            .path(SCREENSAVER_PATH)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        self.active = proxy.get_active().await?;
        Ok(SourceEvent::Session {
            session: Some(screensaver_session(self.active)),
        })
    }

    async fn next(&mut self) -> Result<SourceEvent, FdoError> {
        let Some(changes) = self.changes.as_mut() else {
            return Err(FdoError::Service("not attached".into()));
        };
        loop {
            let Some(m) = changes.next().await else {
                return Err(FdoError::Closed);
            };
            if let Some(b) = m.ok().and_then(|m| m.body().deserialize::<bool>().ok()) {
                self.active = b;
                return Ok(SourceEvent::Session {
                    session: Some(screensaver_session(b)),
                });
            }
        }
    }

    fn detach(&mut self) {
        self.changes = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::{OwnedVariant, Str};

    fn props(kv: Vec<(&str, OwnedVariant)>) -> Props {
        kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn reads_a_locked_idle_session() {
        let now = Utc::now();
        let since_us = (now.timestamp_micros() - 60_000_000) as u64;
        let p = props(vec![
            ("Active", true.into()),
            ("LockedHint", true.into()),
            ("IdleHint", true.into()),
            ("IdleSinceHint", since_us.into()),
        ]);
        let w = Warned::new("test");
        let s = session_from(&p, true, &w, now);
        assert!(s.active && s.locked && s.idle && s.preparing_for_sleep);
        assert_eq!(
            s.idle_since.map(|t| t.timestamp_micros()),
            Some(since_us as i64)
        );
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn absurd_idle_times_and_wrong_types_are_left_out() {
        let now = Utc::now();
        let w = Warned::new("test");
        for bad in [
            5u64,
            (now.timestamp_micros() as u64) + 3_600_000_000,
            u64::MAX,
        ] {
            let p = props(vec![
                ("Active", Str::from("yes").into()),
                ("IdleHint", true.into()),
                ("IdleSinceHint", bad.into()),
            ]);
            let s = session_from(&p, false, &w, now);
            assert!(
                s.idle && s.idle_since.is_none() && !s.active,
                "{bad}: {s:?}"
            );
        }
        // Active has the wrong type, LockedHint is missing, IdleSinceHint
        // is absurd: three warnings however often it comes.
        assert_eq!(w.count(), 3);
        assert_eq!(idle_since(0, now), Ok(None));
    }

    #[test]
    fn display_session_reads_the_path() {
        let w = Warned::new("test");
        let p = props(vec![(
            "Display",
            OwnedVariant::try_from(zbus::wire::Variant::from((
                "c1",
                zbus::wire::ObjectPath::from_static_str("/org/freedesktop/login1/session/c1")
                    .expect("path"),
            )))
            .expect("owned"),
        )]);
        assert_eq!(
            display_session(&p, &w).as_deref(),
            Some("/org/freedesktop/login1/session/c1")
        );
        let none = props(vec![(
            "Display",
            OwnedVariant::try_from(zbus::wire::Variant::from((
                "",
                zbus::wire::ObjectPath::from_static_str("/").expect("path"),
            )))
            .expect("owned"),
        )]);
        assert_eq!(display_session(&none, &w), None);
        assert_eq!(w.count(), 0);
        assert!(screensaver_session(true).locked);
    }
}

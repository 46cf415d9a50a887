//! The user's calendars and task lists, from Evolution Data Server (EDS),
//! where GNOME Calendar, Evolution, GNOME Online Accounts and GNOME
//! Shell's clock keep them → category `calendar` (details:
//! `calendar.details`): the events of the next [`HORIZON_DAYS`] days that
//! have not ended, and the open tasks.
//!
//! Everything goes over the session bus (no C library): the registry of
//! sources ([`REGISTRY`], an ObjectManager whose objects' `Data` is a key
//! file saying whether a source is a `[Calendar]` or a `[Task List]` and
//! whether it is enabled), the calendar factory ([`FACTORY`]:
//! `OpenCalendar`/`OpenTaskList` name the backend that serves a source),
//! and each backend's calendar object (`GetObjectList` with an
//! S-expression) and a live view of it (`GetView`, `Start`, and its
//! `ObjectsAdded`/`ObjectsModified`/`ObjectsRemoved` signals).
//!
//! **Live.** A view's signal, a source added, removed or changed in the
//! registry, or the start or end of an event (so that `ongoing` is right)
//! make the source read the lists again and send the whole calendar; the
//! core sends a change only when what a reader sees changed. Signals that
//! arrive together make one read. The source also reads again every
//! [`REFRESH`], because the window of days moves.
//!
//! **Not running.** The source follows the registry's name and never
//! starts EDS itself (it is running in every GNOME session, and what the
//! broker starts would be its doing): without it the calendar is unknown
//! and the source `unavailable`, and it attaches when the registry
//! appears. The calendar factory is started by the bus when the source
//! opens a calendar, as for every EDS client. A backend that leaves makes
//! the source attach again after a short backoff.
//!
//! **Recurring events** are expanded here ([`recur`]: RRULE, EXDATE, and
//! the moved or cancelled instances, `RECURRENCE-ID`), in the event's own
//! wall time, so a weekly 09:00 stays at 09:00 across daylight saving
//! time: the bus interface hands out only the series, the instances are
//! made in the C client library. RDATE and recurring tasks are not
//! expanded (a task is shown once, with its due date). Time zones are
//! those of the system's tzdata that a `TZID` names ([`tzif`], read at run
//! time from `/usr/share/zoneinfo` or `$TZDIR`; Evolution writes
//! `/freeassociation.sourceforge.net/Europe/Berlin`); a `TZID` that names
//! none (Outlook's `W. Europe Standard Time`) is read as the user's own
//! zone, with a warning, as are floating times and whole days. The
//! `VTIMEZONE` components a calendar may carry are not read: EDS's
//! `GetObjectList` hands out the events without them (its `GetTimezone`
//! would give them), Evolution's own zones are IANA ones, and an
//! imported invitation's custom zone falls back as said.
//!
//! **Bad input.** What a calendar holds was written by anyone who sent an
//! invitation: an object that does not parse, a time that is none, a rule
//! that does not validate is logged once (per calendar and kind of fault,
//! [`Warned`]) and left out (a rule: the event is shown once); texts lose
//! their control characters and are cut to the core's limit; at most
//! [`MAX_EVENTS`] events, [`MAX_TASKS`] tasks and [`MAX_ATTENDEES`]
//! attendees an event are kept.

mod ical;
pub(crate) mod recur;
pub(crate) mod tzif;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration as StdDuration;

#[cfg(test)]
use chrono::TimeZone;
use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, Utc};
use futures_util::stream::{BoxStream, SelectAll};
use futures_util::{FutureExt, StreamExt};
use zbus::message::Type as MsgType;
use zbus::wire::{OwnedObjectPath, OwnedVariant};
use zbus::{Connection, MatchRule, MessageStream};

use self::ical::{Component, When};
use self::tzif::Zone;
use super::SourceContext;
use super::fdo::{self, BusKind, FdoError, Service, SignalStream, Warned, run_service};
use crate::core::SourceEvent;
use crate::core::state::{MAX_TEXT_CHARS, truncate_text};
use crate::model::{Calendar, CalendarEvent, CalendarTask};

pub(crate) const NAME: &str = "calendar";

/// The registry of sources (EDS 3.46 in Debian 12 and later releases
/// alike), its object manager's path and its sources' interface.
pub(crate) const REGISTRY: &str = "org.gnome.evolution.dataserver.Sources5";
const REGISTRY_PATH: &str = "/org/gnome/evolution/dataserver/SourceManager";
const SOURCE_IFACE: &str = "org.gnome.evolution.dataserver.Source";
/// The calendar factory.
pub(crate) const FACTORY: &str = "org.gnome.evolution.dataserver.Calendar8";
const FACTORY_PATH: &str = "/org/gnome/evolution/dataserver/CalendarFactory";
const FACTORY_IFACE: &str = "org.gnome.evolution.dataserver.CalendarFactory";
const CALENDAR_IFACE: &str = "org.gnome.evolution.dataserver.Calendar";
const VIEW_IFACE: &str = "org.gnome.evolution.dataserver.CalendarView";
const OBJECT_MANAGER_IFACE: &str = "org.freedesktop.DBus.ObjectManager";

/// How far ahead events are read (days).
pub(crate) const HORIZON_DAYS: i64 = 14;
/// Events kept (the soonest), tasks kept (the soonest due).
pub(crate) const MAX_EVENTS: usize = 100;
pub(crate) const MAX_TASKS: usize = 100;
pub(crate) const MAX_ATTENDEES: usize = 50;
/// Occurrences of one series within the window (a rule every minute
/// must not fill the list).
const MAX_OCCURRENCES: usize = 100;
/// Calendars and task lists followed at once.
const MAX_LISTS: usize = 64;
/// How often the lists are read again without a signal: the window of
/// days moves, and an event that enters it changes nothing in a view.
pub(crate) const REFRESH: StdDuration = StdDuration::from_secs(3600);
/// How often the views are made again (their time range is fixed when
/// they are made).
const REVIEW: StdDuration = StdDuration::from_secs(24 * 3600);

/// Follow the calendar service until cancelled.
pub(crate) async fn run(ctx: SourceContext) {
    let out = ctx.tx.clone();
    run_service(ctx, out, Eds::new()).await
}

/// Whether a list holds events or tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ListKind {
    Events,
    Tasks,
}

/// A calendar or task list the registry lists, enabled.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ListSource {
    uid: String,
    kind: ListKind,
}

/// One opened list: where its backend serves it.
#[derive(Debug, Clone)]
struct OpenList {
    source: ListSource,
    /// The backend's unique name (signals come from it).
    backend: String,
    path: OwnedObjectPath,
    view: Option<OwnedObjectPath>,
    /// What the list held at the last read that worked: kept when a read
    /// fails (a backend busy past the call timeout), so that one slow
    /// answer does not empty the calendar.
    last: Vec<Component>,
}

/// What woke the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// The registry's sources changed.
    Registry,
    /// A view's objects changed.
    Objects,
    /// A backend left the bus.
    BackendGone,
}

struct Attached {
    conn: Connection,
    registry: String,
    lists: Vec<OpenList>,
    triggers: SelectAll<BoxStream<'static, Trigger>>,
    /// The registry's own signals, kept across view rebuilds.
    registry_streams: Vec<SignalStream>,
    next_read: tokio::time::Instant,
    next_review: tokio::time::Instant,
}

struct Eds {
    warned: Arc<Warned>,
    attached: Option<Attached>,
}

impl Eds {
    fn new() -> Self {
        Eds {
            warned: Arc::new(Warned::new(NAME)),
            attached: None,
        }
    }
}

impl Service for Eds {
    const SOURCE: &'static str = NAME;
    const BUS_NAME: &'static str = REGISTRY;
    const BUS: BusKind = BusKind::Session;

    fn gone(&self) -> SourceEvent {
        SourceEvent::Calendar { calendar: None }
    }

    async fn attach(&mut self, conn: &Connection, owner: &str) -> Result<SourceEvent, FdoError> {
        let registry_streams = vec![
            signal_rule(conn, owner, None, OBJECT_MANAGER_IFACE).await?,
            signal_rule(conn, owner, None, fdo::PROPERTIES_IFACE).await?,
        ];
        let now = tokio::time::Instant::now();
        let mut a = Attached {
            conn: conn.clone(),
            registry: owner.to_owned(),
            lists: Vec::new(),
            triggers: SelectAll::new(),
            registry_streams,
            next_read: now,
            next_review: now + REVIEW,
        };
        open_all(&mut a, &self.warned).await?;
        let calendar = read_all(&mut a, &self.warned).await?;
        self.attached = Some(a);
        Ok(SourceEvent::Calendar {
            calendar: Some(calendar),
        })
    }

    async fn next(&mut self) -> Result<SourceEvent, FdoError> {
        let Some(a) = self.attached.as_mut() else {
            return Err(FdoError::Service("not attached".into()));
        };
        let mut reopen = false;
        tokio::select! {
            t = a.triggers.next() => match t {
                Some(Trigger::BackendGone) => {
                    return Err(FdoError::Service("a calendar backend left the bus".into()));
                }
                Some(Trigger::Registry) => reopen = true,
                Some(Trigger::Objects) => {}
                None => return Err(FdoError::Closed),
            },
            _ = tokio::time::sleep_until(a.next_read) => {}
            _ = tokio::time::sleep_until(a.next_review) => reopen = true,
        }
        // What arrived together makes one read.
        while let Some(t) = a.triggers.next().now_or_never().flatten() {
            match t {
                Trigger::BackendGone => {
                    return Err(FdoError::Service("a calendar backend left the bus".into()));
                }
                Trigger::Registry => reopen = true,
                Trigger::Objects => {}
            }
        }
        if reopen {
            tracing::debug!(
                source = NAME,
                "the registry changed: opening the lists again"
            );
            close_all(a).await;
            open_all(a, &self.warned).await?;
        }
        let calendar = read_all(a, &self.warned).await?;
        Ok(SourceEvent::Calendar {
            calendar: Some(calendar),
        })
    }

    fn detach(&mut self) {
        // The views and calendars close with the backend or with this
        // connection (EDS follows its clients' names); the source makes a
        // new connection after a detach only when the bus went away.
        self.attached = None;
    }
}

/// A stream of every signal of `iface` from `sender` (at `path`).
async fn signal_rule(
    conn: &Connection,
    sender: &str,
    path: Option<&str>,
    iface: &str,
) -> Result<SignalStream, FdoError> {
    let mut b = MatchRule::builder()
        .msg_type(MsgType::Signal)
        .interface(iface);
    if let Some(p) = path {
        b = b.path(p);
    }
    Ok(SignalStream::new(conn, b.build()?, sender, None).await?)
}

/// A stream's messages as triggers `t`.
fn tagged<S>(s: S, t: Trigger) -> BoxStream<'static, Trigger>
where
    S: futures_util::Stream + Send + 'static,
{
    s.map(move |_| t).boxed()
}

/// The registry's `PropertiesChanged` as triggers, only when a source's
/// `Data` (what it is, whether it is enabled) changed: its
/// `ConnectionStatus` changes whenever a backend opens it, and reopening
/// for that would open again and again.
fn data_changes(s: SignalStream) -> BoxStream<'static, Trigger> {
    s.filter_map(|m| async move {
        let m = m.ok()?;
        let (_, changed, invalidated): (String, HashMap<String, OwnedVariant>, Vec<String>) =
            m.body().deserialize().ok()?;
        (changed.contains_key("Data") || invalidated.iter().any(|p| p == "Data"))
            .then_some(Trigger::Registry)
    })
    .boxed()
}

/// Open every enabled list the registry has, with a live view each.
async fn open_all(a: &mut Attached, warned: &Warned) -> Result<(), FdoError> {
    let mut triggers = SelectAll::new();
    let mut streams = a.registry_streams.drain(..);
    // The registry's streams move into the set (made again below, for
    // the next rebuild): objects added and removed, and Data changed.
    if let (Some(objects), Some(props)) = (streams.next(), streams.next()) {
        triggers.push(tagged(objects, Trigger::Registry));
        triggers.push(data_changes(props));
    }
    drop(streams);
    // Re-arm the registry's streams for the next rebuild: new match rules
    // on the same connection (the old ones went into the set).
    a.registry_streams = vec![
        signal_rule(&a.conn, &a.registry, None, OBJECT_MANAGER_IFACE).await?,
        signal_rule(&a.conn, &a.registry, None, fdo::PROPERTIES_IFACE).await?,
    ];
    let sources = list_sources(&a.conn, &a.registry, warned).await?;
    let now = Utc::now();
    let mut lists = Vec::new();
    for source in sources.into_iter().take(MAX_LISTS) {
        match open_list(&a.conn, &source, now).await {
            Ok((list, streams)) => {
                triggers.extend(streams);
                lists.push(list);
            }
            Err(e) if e.is_connection_lost() => return Err(e),
            Err(e) => {
                warned.warn(
                    &format!("open {}", source.uid),
                    format_args!(
                        "cannot open the calendar source {} ({e}); leaving it out",
                        source.uid
                    ),
                );
            }
        }
    }
    a.lists = lists;
    a.triggers = triggers;
    a.next_review = tokio::time::Instant::now() + REVIEW;
    Ok(())
}

/// Stop and let go of every view (best effort: the backend may be gone).
async fn close_all(a: &mut Attached) {
    for l in a.lists.drain(..) {
        if let Some(v) = &l.view {
            let _ = a
                .conn
                .call_method(
                    Some(l.backend.as_str()),
                    v.as_str(),
                    Some(VIEW_IFACE),
                    "Dispose",
                    &(),
                )
                .await;
        }
        let _ = a
            .conn
            .call_method(
                Some(l.backend.as_str()),
                l.path.as_str(),
                Some(CALENDAR_IFACE),
                "Close",
                &(),
            )
            .await;
    }
}

type Managed = HashMap<OwnedObjectPath, HashMap<String, HashMap<String, OwnedVariant>>>;

/// The enabled calendars and task lists of the registry, by uid.
async fn list_sources(
    conn: &Connection,
    registry: &str,
    warned: &Warned,
) -> Result<Vec<ListSource>, FdoError> {
    let reply = conn
        .call_method(
            Some(registry),
            REGISTRY_PATH,
            Some(OBJECT_MANAGER_IFACE),
            "GetManagedObjects",
            &(),
        )
        .await?;
    let objects: Managed = reply.body().deserialize()?;
    // uid → its key file.
    let mut files: BTreeMap<String, KeyFile> = BTreeMap::new();
    for (path, ifaces) in &objects {
        let Some(props) = ifaces.get(SOURCE_IFACE) else {
            continue;
        };
        let uid = props
            .get("UID")
            .and_then(|v| fdo::as_str(v))
            .map(str::to_owned);
        let data = props.get("Data").and_then(|v| fdo::as_str(v));
        let (Some(uid), Some(data)) = (uid, data) else {
            warned.warn(
                &format!("source {}", path.as_str()),
                format_args!(
                    "registry object {} has no UID or Data; ignored",
                    path.as_str()
                ),
            );
            continue;
        };
        files.insert(uid, KeyFile::parse(data));
    }
    Ok(enabled_lists(&files))
}

/// Which sources are calendars or task lists that are enabled, and whose
/// account (the collection they belong to) is enabled, with its
/// calendars.
fn enabled_lists(files: &BTreeMap<String, KeyFile>) -> Vec<ListSource> {
    let on = |f: &KeyFile, group: &str, key: &str| f.get(group, key).is_none_or(|v| v != "false");
    let mut out = Vec::new();
    for (uid, f) in files {
        if !on(f, "Data Source", "Enabled") {
            continue;
        }
        if let Some(parent) = f.get("Data Source", "Parent").and_then(|p| files.get(p))
            && (!on(parent, "Data Source", "Enabled")
                || !on(parent, "Collection", "CalendarEnabled"))
        {
            continue;
        }
        for (group, kind) in [
            ("Calendar", ListKind::Events),
            ("Task List", ListKind::Tasks),
        ] {
            if f.has(group) {
                out.push(ListSource {
                    uid: uid.clone(),
                    kind,
                });
            }
        }
    }
    out.sort();
    out
}

/// A GLib key file, as much as the registry's `Data` needs: groups and
/// `key=value` lines.
#[derive(Debug, Default)]
struct KeyFile {
    groups: HashMap<String, HashMap<String, String>>,
}

impl KeyFile {
    fn parse(text: &str) -> Self {
        let mut groups: HashMap<String, HashMap<String, String>> = HashMap::new();
        let mut current: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(g) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                groups.entry(g.to_owned()).or_default();
                current = Some(g.to_owned());
            } else if let (Some(g), Some((k, v))) = (&current, line.split_once('=')) {
                groups
                    .entry(g.clone())
                    .or_default()
                    .insert(k.trim().to_owned(), v.trim().to_owned());
            }
        }
        KeyFile { groups }
    }

    fn has(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    fn get(&self, group: &str, key: &str) -> Option<&str> {
        self.groups.get(group)?.get(key).map(String::as_str)
    }
}

/// The S-expression of the events that overlap `[from, to)`.
fn range_query(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let t = |d: DateTime<Utc>| d.format("%Y%m%dT%H%M%SZ").to_string();
    format!(
        "(occur-in-time-range? (make-time \"{}\") (make-time \"{}\"))",
        t(from),
        t(to)
    )
}

/// What a list's objects are read with.
fn list_query(kind: ListKind, now: DateTime<Utc>) -> String {
    match kind {
        ListKind::Events => range_query(now, now + Duration::days(HORIZON_DAYS)),
        ListKind::Tasks => "#t".into(),
    }
}

/// Open one list and start a view of it; the streams that follow it.
async fn open_list(
    conn: &Connection,
    source: &ListSource,
    now: DateTime<Utc>,
) -> Result<(OpenList, Vec<BoxStream<'static, Trigger>>), FdoError> {
    let method = match source.kind {
        ListKind::Events => "OpenCalendar",
        ListKind::Tasks => "OpenTaskList",
    };
    let reply = conn
        .call_method(
            Some(FACTORY),
            FACTORY_PATH,
            Some(FACTORY_IFACE),
            method,
            &(source.uid.as_str(),),
        )
        .await?;
    let (path, bus_name): (String, String) = reply.body().deserialize()?;
    let path = OwnedObjectPath::try_from(path)
        .map_err(|e| FdoError::Service(format!("{method} answered no object path: {e}")))?;
    // Signals carry the sender's unique name; follow that one.
    let backend = fdo::name_owner(conn, &bus_name)
        .await?
        .ok_or_else(|| FdoError::Service(format!("the backend {bus_name} is not on the bus")))?;
    let gone = MessageStream::for_match_rule(
        MatchRule::builder()
            .msg_type(MsgType::Signal)
            .sender(fdo::DBUS_NAME)
            .interface(fdo::DBUS_NAME)
            .member("NameOwnerChanged")
            .add_arg(backend.as_str())
            .build()?,
        conn,
        None,
    )
    .await?;
    conn.call_method(
        Some(backend.as_str()),
        path.as_str(),
        Some(CALENDAR_IFACE),
        "Open",
        &(),
    )
    .await?;
    // The view's range reaches past the list's, so that an event moved in
    // from later still signals until the views are made again.
    let view_query = match source.kind {
        ListKind::Events => range_query(
            now - Duration::days(1),
            now + Duration::days(HORIZON_DAYS) + Duration::from_std(REVIEW).unwrap_or_default() * 2,
        ),
        ListKind::Tasks => "#t".into(),
    };
    let reply = conn
        .call_method(
            Some(backend.as_str()),
            path.as_str(),
            Some(CALENDAR_IFACE),
            "GetView",
            &(view_query.as_str(),),
        )
        .await?;
    let view: OwnedObjectPath = reply.body().deserialize()?;
    let objects = signal_rule(conn, &backend, Some(view.as_str()), VIEW_IFACE).await?;
    conn.call_method(
        Some(backend.as_str()),
        view.as_str(),
        Some(VIEW_IFACE),
        "Start",
        &(),
    )
    .await?;
    Ok((
        OpenList {
            source: source.clone(),
            backend,
            path,
            view: Some(view),
            last: Vec::new(),
        },
        vec![
            tagged(gone, Trigger::BackendGone),
            tagged(objects, Trigger::Objects),
        ],
    ))
}

/// Read every open list and make the calendar; set when to read again.
async fn read_all(a: &mut Attached, warned: &Warned) -> Result<Calendar, FdoError> {
    let now = Utc::now();
    let mut events = Vec::new();
    let mut tasks = Vec::new();
    for l in &mut a.lists {
        let q = list_query(l.source.kind, now);
        let reply = a
            .conn
            .call_method(
                Some(l.backend.as_str()),
                l.path.as_str(),
                Some(CALENDAR_IFACE),
                "GetObjectList",
                &(q.as_str(),),
            )
            .await;
        match reply {
            Ok(r) => {
                let objects: Vec<String> = r.body().deserialize()?;
                l.last = parse_objects(&l.source.uid, &objects, warned);
            }
            Err(e) => {
                let e = FdoError::from(e);
                if e.is_connection_lost() {
                    return Err(e);
                }
                warned.warn(
                    &format!("read {}", l.source.uid),
                    format_args!(
                        "cannot read {} ({e}); showing what it held before",
                        l.source.uid
                    ),
                );
            }
        }
        match l.source.kind {
            ListKind::Events => events.extend(events_of(&l.source.uid, &l.last, now, warned)),
            ListKind::Tasks => tasks.extend(tasks_of(&l.source.uid, &l.last, warned)),
        }
    }
    let calendar = finish(events, tasks, now);
    tracing::debug!(
        source = NAME,
        lists = a.lists.len(),
        events = calendar.events.len(),
        tasks = calendar.tasks.len(),
        "read the calendar"
    );
    let next = next_boundary(&calendar, now)
        .and_then(|t| (t - now).to_std().ok())
        .map_or(REFRESH, |d| d.min(REFRESH));
    a.next_read = tokio::time::Instant::now() + next;
    Ok(calendar)
}

/// Sorted, bounded, with `ongoing` set as of `now`.
fn finish(
    mut events: Vec<CalendarEvent>,
    mut tasks: Vec<CalendarTask>,
    now: DateTime<Utc>,
) -> Calendar {
    for e in &mut events {
        e.ongoing = e.covers(now);
    }
    events.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.id.cmp(&b.id)));
    events.dedup_by(|a, b| a.id == b.id);
    events.truncate(MAX_EVENTS);
    tasks.sort_by(|a, b| match (a.due, b.due) {
        (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.id.cmp(&b.id)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.id.cmp(&b.id),
    });
    tasks.truncate(MAX_TASKS);
    Calendar { events, tasks }
}

/// The next moment an event starts or ends after `now`.
fn next_boundary(c: &Calendar, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    c.events
        .iter()
        .flat_map(|e| [Some(e.start), e.end])
        .flatten()
        .filter(|t| *t > now)
        .min()
}

/// The objects of one list, parsed; those that do not parse are warned
/// about once per list and kind of fault.
fn parse_objects(list: &str, objects: &[String], warned: &Warned) -> Vec<Component> {
    objects
        .iter()
        .filter_map(|o| match ical::parse(o) {
            Ok(c) => Some(c),
            Err(e) => {
                warned.warn(
                    &format!("parse {list} {}", std::mem::discriminant(&e).hash_key()),
                    format_args!("an object of {list} is no iCalendar ({e}); left out"),
                );
                None
            }
        })
        .collect()
}

/// A stable key of an error's kind for [`Warned`].
trait HashKey {
    fn hash_key(&self) -> String;
}

impl<T> HashKey for std::mem::Discriminant<T> {
    fn hash_key(&self) -> String {
        format!("{self:?}")
    }
}

/// Text for readers: line breaks as spaces, no control characters,
/// trimmed, cut to the core's limit; `None` when nothing is left.
fn text(s: &str) -> Option<String> {
    let mut t: String = s
        .chars()
        .take(MAX_TEXT_CHARS + 1)
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect();
    t = t.trim().to_owned();
    truncate_text(&mut t);
    (!t.is_empty()).then_some(t)
}

/// Who takes part: the name (`CN`), else the address without `mailto:`.
fn attendee(p: &ical::Prop) -> Option<String> {
    if let Some(cn) = p.param("CN").and_then(text) {
        return Some(cn);
    }
    let v = p.value.trim();
    let v = if v.len() >= 7 && v[..7].eq_ignore_ascii_case("mailto:") {
        &v[7..]
    } else {
        v
    };
    text(v)
}

/// A time as the calendar reads it: the zone its recurrences are
/// expanded in, its wall-clock reading there, and its instant.
#[derive(Debug, Clone)]
struct Zoned {
    zone: Zone,
    local: NaiveDateTime,
    utc: DateTime<Utc>,
}

/// A time in its zone: the `TZID`'s, the user's own for a floating time
/// or a whole day (and, with a warning, for a `TZID` that names no zone
/// of the system's). `None` only at the ends of chrono's range.
fn zoned(w: &When, warned: &Warned) -> Option<Zoned> {
    let (zone, local) = match w {
        When::Utc(t) => (Zone::Utc, *t),
        When::Local(t, tzid) => {
            let zone = match tzid.as_deref() {
                None => Zone::Local,
                Some(id) => ical::zone(id).unwrap_or_else(|| {
                    let shown: String = id.chars().take(64).collect();
                    warned.warn(
                        &format!("tzid {shown}"),
                        format_args!("unknown time zone '{shown}'; read as the local one"),
                    );
                    Zone::Local
                }),
            };
            (zone, *t)
        }
        When::Date(d) => (Zone::Local, ical::midnight(*d)),
    };
    let utc = zone.to_utc(local)?;
    Some(Zoned { zone, local, utc })
}

fn utc_of(w: &When, warned: &Warned) -> Option<DateTime<Utc>> {
    zoned(w, warned).map(|z| z.utc)
}

/// The events of one list that overlap `[now, now + HORIZON_DAYS)`, each
/// occurrence of a series one.
fn events_of(
    list: &str,
    components: &[Component],
    now: DateTime<Utc>,
    warned: &Warned,
) -> Vec<CalendarEvent> {
    let end = now + Duration::days(HORIZON_DAYS);
    let mut vevents = Vec::new();
    for c in components {
        c.find("VEVENT", &mut vevents);
    }
    // The instances each series has of its own (moved or cancelled), by
    // the start they replace.
    let mut replaced: HashMap<String, HashSet<DateTime<Utc>>> = HashMap::new();
    for v in &vevents {
        if let (Some(uid), Some(rid)) = (v.text("UID"), v.prop("RECURRENCE-ID"))
            && let Some(t) = ical::when(rid, "RECURRENCE-ID")
                .ok()
                .and_then(|w| utc_of(&w, warned))
        {
            replaced.entry(uid).or_default().insert(t);
        }
    }
    let mut out = Vec::new();
    for v in vevents {
        match event_occurrences(list, v, now, end, &replaced, warned) {
            Ok(mut evs) => out.append(&mut evs),
            Err(why) => {
                warned.warn(
                    &format!("event {list} {}", why.split(':').next().unwrap_or_default()),
                    format_args!("an event of {list} is left out: {why}"),
                );
            }
        }
    }
    out
}

fn event_occurrences(
    list: &str,
    v: &Component,
    now: DateTime<Utc>,
    end: DateTime<Utc>,
    replaced: &HashMap<String, HashSet<DateTime<Utc>>>,
    warned: &Warned,
) -> Result<Vec<CalendarEvent>, String> {
    if v.text("STATUS")
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("CANCELLED"))
    {
        return Ok(Vec::new());
    }
    let uid = v.text("UID").ok_or("no UID")?;
    let start_prop = v.prop("DTSTART").ok_or("no DTSTART")?;
    let start = ical::when(start_prop, "DTSTART").map_err(|e| e.to_string())?;
    let all_day = start.is_date();
    let start_z = zoned(&start, warned).ok_or("DTSTART does not exist in its time zone")?;
    // How long each occurrence lasts: DTEND - DTSTART, or DURATION, or a
    // day for a whole-day event and nothing for a moment.
    let length: Option<Duration> = if let Some(p) = v.prop("DTEND") {
        let e = ical::when(p, "DTEND").map_err(|e| e.to_string())?;
        let e = utc_of(&e, warned).ok_or("DTEND does not exist in its time zone")?;
        Some((e - start_z.utc).max(Duration::zero()))
    } else if let Some(p) = v.prop("DURATION") {
        Some(
            ical::duration(&p.value)
                .map_err(|e| e.to_string())?
                .max(Duration::zero()),
        )
    } else if all_day {
        Some(Duration::days(1))
    } else {
        None
    };
    let recurrence_id = v.prop("RECURRENCE-ID").is_some();
    let rule = v.prop("RRULE").filter(|_| !recurrence_id);
    let mut starts: Vec<DateTime<Utc>> = Vec::new();
    let mut recurring = recurrence_id;
    if let Some(rule) = rule {
        recurring = true;
        match expand(
            v,
            &rule.value,
            &start_z,
            now - length.unwrap_or_default(),
            end,
            warned,
        ) {
            Ok(s) => {
                let own = replaced.get(&uid);
                starts.extend(
                    s.into_iter()
                        .filter(|t| !own.is_some_and(|o| o.contains(t))),
                );
            }
            Err(e) => {
                warned.warn(
                    &format!("rrule {list}"),
                    format_args!("a recurrence rule of {list} is not understood ({e}); its event is shown once"),
                );
                starts.push(start_z.utc);
            }
        }
    } else {
        starts.push(start_z.utc);
    }
    let title = v.text("SUMMARY").as_deref().and_then(text);
    let location = v.text("LOCATION").as_deref().and_then(text);
    let attendees: Vec<String> = v
        .all("ATTENDEE")
        .filter_map(attendee)
        .take(MAX_ATTENDEES)
        .collect();
    let mut out = Vec::new();
    for s in starts {
        let e = length.map(|l| s + l);
        let visible = match e {
            Some(e) => e > now && s < end,
            None => s >= now && s < end,
        };
        if !visible {
            continue;
        }
        out.push(CalendarEvent {
            id: super::hashed_id(&format!("{list}\n{uid}\n{}", s.timestamp())),
            start: s,
            end: e.filter(|e| *e > s),
            all_day,
            ongoing: false,
            recurring,
            title: title.clone(),
            location: location.clone(),
            attendees: attendees.clone(),
            hidden: None,
        });
    }
    Ok(out)
}

/// The starts of a series' occurrences in `[from, to]`, without its
/// EXDATEs: expanded in the wall time of the start's zone
/// ([`recur::Rule::expand`]). An EXDATE is an instant, or a whole day
/// (in the start's zone) that loses its occurrences.
fn expand(
    v: &Component,
    rule: &str,
    start: &Zoned,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    warned: &Warned,
) -> Result<Vec<DateTime<Utc>>, String> {
    let rule: recur::Rule = rule.parse().map_err(|e: recur::RuleError| e.to_string())?;
    let mut instants: HashSet<DateTime<Utc>> = HashSet::new();
    let mut days: HashSet<NaiveDate> = HashSet::new();
    for p in v.all("EXDATE") {
        for w in ical::whens(p, "EXDATE").map_err(|e| e.to_string())? {
            match w {
                When::Date(d) => {
                    days.insert(d);
                }
                w => {
                    if let Some(z) = zoned(&w, warned) {
                        instants.insert(z.utc);
                    }
                }
            }
        }
    }
    // Expanded past the cap by the EXDATEs, which then drop out.
    let starts = rule
        .expand(
            start.local,
            &start.zone,
            from,
            to,
            MAX_OCCURRENCES + instants.len() + days.len(),
        )
        .map_err(|e| e.to_string())?;
    Ok(starts
        .into_iter()
        .filter(|t| !instants.contains(t) && !days.contains(&start.zone.to_local(*t).date()))
        .take(MAX_OCCURRENCES)
        .collect())
}

/// The open tasks of one list.
fn tasks_of(list: &str, components: &[Component], warned: &Warned) -> Vec<CalendarTask> {
    let mut todos = Vec::new();
    for c in components {
        c.find("VTODO", &mut todos);
    }
    let mut out = Vec::new();
    for t in todos {
        let status = t.text("STATUS").map(|s| s.trim().to_ascii_uppercase());
        let percent: u32 = t
            .text("PERCENT-COMPLETE")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0);
        if matches!(status.as_deref(), Some("COMPLETED" | "CANCELLED"))
            || t.prop("COMPLETED").is_some()
            || percent >= 100
        {
            continue;
        }
        let Some(uid) = t.text("UID") else {
            warned.warn(
                &format!("task {list} uid"),
                format_args!("a task of {list} has no UID; left out"),
            );
            continue;
        };
        let due = match t.prop("DUE").map(|p| ical::when(p, "DUE")) {
            None => None,
            Some(Ok(w)) => utc_of(&w, warned),
            Some(Err(e)) => {
                warned.warn(
                    &format!("task {list} due"),
                    format_args!("a task of {list}: {e}; shown without it"),
                );
                None
            }
        };
        out.push(CalendarTask {
            id: super::hashed_id(&format!("{list}\n{uid}")),
            due,
            in_progress: status.as_deref() == Some("IN-PROCESS") || percent > 0,
            summary: t.text("SUMMARY").as_deref().and_then(text),
            hidden: None,
        });
    }
    out
}

/// What the source makes of one list's objects as of `now` (the fuzz
/// target `calendar_object`: parse, zones, recurrences, tasks).
#[cfg(test)]
pub(crate) fn read_for_fuzz(objects: &[String], now: DateTime<Utc>) -> Calendar {
    let w = Warned::new(NAME);
    let comps = parse_objects("fuzz", objects, &w);
    finish(
        events_of("fuzz", &comps, now, &w),
        tasks_of("fuzz", &comps, &w),
        now,
    )
}

/// A local date and time as written, for tests.
#[cfg(test)]
fn naive(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").expect("time")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        Utc.from_utc_datetime(&naive(s))
    }

    fn comps(objs: &[&str]) -> Vec<Component> {
        let w = Warned::new("test");
        let owned: Vec<String> = objs.iter().map(|s| s.to_string()).collect();
        parse_objects("cal", &owned, &w)
    }

    #[test]
    fn events_in_the_window_with_details_and_now() {
        let now = utc("2026-12-07 10:30");
        let c = comps(&[
            "BEGIN:VEVENT\nUID:a\nDTSTART:20261207T100000Z\nDTEND:20261207T110000Z\nSUMMARY:Stand\\nup\u{7}\nLOCATION:Room 1\nATTENDEE;CN=Ann:mailto:ann@example.com\nATTENDEE:MAILTO:bob@example.com\nEND:VEVENT",
            "BEGIN:VEVENT\nUID:past\nDTSTART:20261207T080000Z\nDURATION:PT1H\nEND:VEVENT",
            "BEGIN:VEVENT\nUID:far\nDTSTART:20270107T080000Z\nEND:VEVENT",
            "BEGIN:VEVENT\nUID:cancelled\nSTATUS:CANCELLED\nDTSTART:20261207T120000Z\nEND:VEVENT",
            "not ical",
            "BEGIN:VEVENT\nUID:nostart\nEND:VEVENT",
        ]);
        let w = Warned::new("test");
        let evs = events_of("cal", &c, now, &w);
        let cal = finish(evs, vec![], now);
        assert_eq!(cal.events.len(), 1, "{cal:?}");
        let e = &cal.events[0];
        assert!(e.ongoing);
        assert_eq!(e.title.as_deref(), Some("Stand up"));
        assert_eq!(e.location.as_deref(), Some("Room 1"));
        assert_eq!(e.attendees, vec!["Ann", "bob@example.com"]);
        assert_eq!(e.end, Some(utc("2026-12-07 11:00")));
        assert_eq!(next_boundary(&cal, now), Some(utc("2026-12-07 11:00")));
    }

    #[test]
    fn a_weekly_series_with_an_exception_and_a_moved_instance() {
        let now = utc("2026-12-01 00:00");
        let c = comps(&[
            "BEGIN:VEVENT\nUID:s\nDTSTART;TZID=Europe/Berlin:20261102T100000\nDTEND;TZID=Europe/Berlin:20261102T103000\nRRULE:FREQ=WEEKLY;BYDAY=MO\nEXDATE;TZID=Europe/Berlin:20261207T100000\nSUMMARY:Weekly\nEND:VEVENT",
            "BEGIN:VEVENT\nUID:s\nRECURRENCE-ID;TZID=Europe/Berlin:20261214T100000\nDTSTART;TZID=Europe/Berlin:20261214T150000\nDTEND;TZID=Europe/Berlin:20261214T153000\nSUMMARY:Moved\nEND:VEVENT",
        ]);
        let w = Warned::new("test");
        let cal = finish(events_of("cal", &c, now, &w), vec![], now);
        let got: Vec<(String, String)> = cal
            .events
            .iter()
            .map(|e| (e.start.to_rfc3339(), e.title.clone().unwrap_or_default()))
            .collect();
        // 7 Dec excluded, 14 Dec moved to 15:00 (14:00 UTC).
        assert_eq!(
            got,
            vec![("2026-12-14T14:00:00+00:00".into(), "Moved".into()),],
            "{cal:?}"
        );
        assert!(cal.events.iter().all(|e| e.recurring));
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn whole_days_and_tasks() {
        let now = utc("2026-12-07 10:30");
        let c = comps(&[
            "BEGIN:VEVENT\nUID:d\nDTSTART;VALUE=DATE:20261208\nSUMMARY:Holiday\nEND:VEVENT",
        ]);
        let w = Warned::new("test");
        let evs = events_of("cal", &c, now, &w);
        assert_eq!(evs.len(), 1);
        assert!(evs[0].all_day);
        assert_eq!(
            evs[0].end.map(|e| e - evs[0].start),
            Some(Duration::days(1))
        );
        let t = comps(&[
            "BEGIN:VTODO\nUID:1\nSUMMARY:Later\nEND:VTODO",
            "BEGIN:VTODO\nUID:2\nSUMMARY:Soon\nDUE:20261208T090000Z\nSTATUS:IN-PROCESS\nEND:VTODO",
            "BEGIN:VTODO\nUID:3\nSUMMARY:Done\nSTATUS:COMPLETED\nEND:VTODO",
            "BEGIN:VTODO\nUID:4\nSUMMARY:Done too\nPERCENT-COMPLETE:100\nEND:VTODO",
            "BEGIN:VTODO\nUID:5\nSUMMARY:Bad due\nDUE:tomorrow\nEND:VTODO",
        ]);
        let cal = finish(vec![], tasks_of("tasks", &t, &w), now);
        let names: Vec<&str> = cal
            .tasks
            .iter()
            .filter_map(|t| t.summary.as_deref())
            .collect();
        assert_eq!(names[0], "Soon");
        assert_eq!(cal.tasks.len(), 3);
        assert!(cal.tasks[0].in_progress);
        assert_eq!(w.count(), 1);
    }

    #[test]
    fn bad_rules_show_the_event_once_and_hostile_text_is_cleaned() {
        let now = utc("2026-12-07 00:00");
        let c = comps(&[&format!(
            "BEGIN:VEVENT\nUID:r\nDTSTART:20261207T100000Z\nRRULE:FREQ=SOMETIMES\nSUMMARY:{}\u{1b}[31m\nEND:VEVENT",
            "x".repeat(5000)
        )]);
        let w = Warned::new("test");
        let evs = events_of("cal", &c, now, &w);
        assert_eq!(evs.len(), 1);
        let t = evs[0].title.as_deref().expect("title");
        assert!(t.chars().count() < MAX_TEXT_CHARS + 20);
        assert!(!t.chars().any(char::is_control));
        assert_eq!(w.count(), 1);
    }

    #[test]
    fn which_sources_are_lists() {
        let mut files = BTreeMap::new();
        files.insert(
            "cal".to_owned(),
            KeyFile::parse(
                "[Data Source]\nDisplayName=Mine\nEnabled=true\n\n[Calendar]\nBackendName=local\n",
            ),
        );
        files.insert(
            "tasks".to_owned(),
            KeyFile::parse("[Data Source]\n[Task List]\nBackendName=local\n"),
        );
        files.insert(
            "off".to_owned(),
            KeyFile::parse("[Data Source]\nEnabled=false\n[Calendar]\n"),
        );
        files.insert(
            "acct".to_owned(),
            KeyFile::parse("[Data Source]\n[Collection]\nCalendarEnabled=false\n"),
        );
        files.insert(
            "child".to_owned(),
            KeyFile::parse("[Data Source]\nParent=acct\n[Calendar]\n"),
        );
        files.insert(
            "book".to_owned(),
            KeyFile::parse("[Data Source]\n[Address Book]\n"),
        );
        let l = enabled_lists(&files);
        assert_eq!(
            l,
            vec![
                ListSource {
                    uid: "cal".into(),
                    kind: ListKind::Events
                },
                ListSource {
                    uid: "tasks".into(),
                    kind: ListKind::Tasks
                },
            ]
        );
        assert_eq!(
            range_query(utc("2026-12-07 10:30"), utc("2026-12-21 10:30")),
            "(occur-in-time-range? (make-time \"20261207T103000Z\") (make-time \"20261221T103000Z\"))"
        );
    }
}

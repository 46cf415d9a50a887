//! The current snapshot of everything the broker knows, and the broadcast
//! of what changes in it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::broadcast;

mod provided;

use super::captures::CaptureLog;
pub(crate) use super::change::{Change, ChangeKind};
use super::clock::Clock;
use super::event::SourceEvent;
use super::privacy::{Privacy, Rules};
use crate::model::{
    Calendar, DoNotDisturb, Location, MediaStream, Network, Notification, Power, RecentDocument,
    Selection, SessionState, SourceStatus, Window,
};
pub(crate) use provided::{Provided, ProvidedEntry};

/// How many focus changes the core remembers.
pub(crate) const FOCUS_HISTORY_LEN: usize = 100;
/// How many notifications the core remembers.
pub(crate) const NOTIFICATIONS_LEN: usize = 50;
/// How many action labels of a notification the core keeps (servers
/// show three or four buttons).
pub(crate) const MAX_ACTIONS: usize = 8;
/// Titles, summaries and bodies longer than this many characters are cut and
/// end with [`TRUNCATION_MARKER`]; a client cannot make the broker hold or
/// send megabytes per window.
pub const MAX_TEXT_CHARS: usize = 1024;
pub(crate) const TRUNCATION_MARKER: &str = "…[truncated]";
/// Capacity of the change broadcast by default (`[limits] change_feed`);
/// a subscriber that falls further behind is told to re-read the snapshot.
pub(crate) const CHANGE_CAPACITY: usize = 4096;

/// One focus change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FocusChange {
    pub(crate) window_id: Option<String>,
    pub(crate) app_id: Option<String>,
    pub(crate) at: DateTime<Utc>,
}

/// Everything the broker knows right now.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    pub(crate) windows: BTreeMap<String, Window>,
    pub(crate) active_window: Option<String>,
    pub(crate) focus_history: VecDeque<FocusChange>,
    pub(crate) streams: BTreeMap<String, MediaStream>,
    pub(crate) session: Option<SessionState>,
    /// Do Not Disturb as the `dnd` source last said, kept apart because
    /// the session comes from another source: each event of either is
    /// merged into `session` (see [`with_dnd`]).
    pub(crate) dnd: Option<DoNotDisturb>,
    pub(crate) power: Option<Power>,
    pub(crate) network: Option<Network>,
    pub(crate) notifications: VecDeque<Notification>,
    /// What apps publish, as readers see it (one entry per app and kind).
    pub(crate) provided: Provided,
    /// Where the machine is (`None` while unknown).
    pub(crate) location: Option<Location>,
    /// The primary selection: only its current value, read on request
    /// (see `SourceEvent::Selection`).
    pub(crate) selection: Option<Selection>,
    /// The recently used files, newest first (`None` while unknown).
    pub(crate) recent_documents: Option<Vec<RecentDocument>>,
    /// The next events and open tasks (`None` while no calendar service
    /// answers).
    pub(crate) calendar: Option<Calendar>,
    pub(crate) sources: BTreeMap<String, SourceStatus>,
    /// Capture sessions of the last 24 hours (see `core::captures`).
    pub(crate) captures: CaptureLog,
}

impl Snapshot {
    /// Windows in the order they appeared.
    pub(crate) fn windows_in_order(&self) -> Vec<&Window> {
        let mut v: Vec<&Window> = self.windows.values().collect();
        v.sort_by(|a, b| {
            a.first_seen
                .cmp(&b.first_seen)
                .then_with(|| a.id.cmp(&b.id))
        });
        v
    }

    pub(crate) fn active(&self) -> Option<&Window> {
        self.active_window
            .as_ref()
            .and_then(|id| self.windows.get(id))
    }
}

/// Sees every change synchronously, in order, with the time it was
/// applied at (the history recorder): what a broadcast receiver cannot
/// promise under load.
pub(crate) trait StateObserver: Send {
    fn changes(&mut self, changes: &[Change], now: DateTime<Utc>);
    fn paused(&mut self, paused: bool, now: DateTime<Utc>);
}

/// The state: the snapshot behind a lock that is never held across an
/// await, and a broadcast channel of changes.
pub(crate) struct State {
    snapshot: RwLock<Snapshot>,
    tx: broadcast::Sender<Arc<Change>>,
    clock: Arc<dyn Clock>,
    observer: std::sync::Mutex<Option<Box<dyn StateObserver>>>,
    /// What nobody means to share (`core::privacy`), applied to every
    /// event before it reaches the snapshot, the feed or the observer.
    privacy: Arc<Privacy>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}

pub(crate) fn truncate_text(s: &mut String) {
    if let Some((idx, _)) = s.char_indices().nth(MAX_TEXT_CHARS) {
        s.truncate(idx);
        s.push_str(TRUNCATION_MARKER);
    }
}

/// `session` with Do Not Disturb as the `dnd` source says (a session
/// source's own values for it are not taken: only the core merges them).
fn with_dnd(mut session: SessionState, dnd: Option<DoNotDisturb>) -> SessionState {
    session.do_not_disturb = dnd.map(|d| d.on);
    session.do_not_disturb_by = dnd.filter(|d| d.on).and_then(|d| d.by);
    session
}

fn same_window(a: &Window, b: &Window) -> bool {
    a.app_id == b.app_id
        && a.title == b.title
        && a.title_hidden == b.title_hidden
        && a.states == b.states
        && a.outputs == b.outputs
        && a.parent == b.parent
        && a.app_name == b.app_name
        && a.icon == b.icon
}

impl State {
    #[cfg(test)]
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        State::with_capacity(clock, CHANGE_CAPACITY)
    }

    /// A state whose change broadcast keeps `capacity` changes (at least
    /// one) for the slowest reader.
    pub(crate) fn with_capacity(clock: Arc<dyn Clock>, capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        State {
            snapshot: RwLock::new(Snapshot::default()),
            tx,
            clock,
            observer: std::sync::Mutex::new(None),
            privacy: Arc::default(),
        }
    }

    /// The never-share rules in force, shared with whoever must ask them
    /// beyond the state (the history recorder, `core::provide`).
    pub(crate) fn privacy(&self) -> &Arc<Privacy> {
        &self.privacy
    }

    /// Put new never-share rules in force, at once: what the state holds
    /// that they hide (a window's title, an app's notifications) is
    /// hidden and readers and the observer told by ordinary changes.
    /// Returns the changes.
    pub(crate) fn set_privacy(&self, rules: Rules) -> Vec<Arc<Change>> {
        // Under the snapshot's lock, as `apply` reads them: an event is
        // cleaned by the rules in force when it is applied, so none
        // cleaned by the old rules lands after this sweep.
        self.commit(|snap, _| {
            let mut out = Vec::new();
            if !self.privacy.set(rules) {
                return out;
            }
            let rules = self.privacy.rules();
            for w in snap.windows.values_mut() {
                let before = w.clone();
                if rules.clean_window(w) {
                    out.push(Change::Window {
                        kind: ChangeKind::Changed,
                        window: w.clone(),
                        before: Some(Box::new(before)),
                    });
                }
            }
            for n in snap.notifications.iter_mut() {
                let before = n.clone();
                if rules.app(&n.app_name).is_some() && rules.clean_notification(n) {
                    out.push(Change::Notification {
                        kind: ChangeKind::Opened,
                        notification: n.clone(),
                        before: Some(Box::new(before)),
                    });
                }
            }
            if let Some(c) = snap.calendar.as_mut() {
                let before = c.clone();
                if rules.clean_calendar(c) {
                    out.push(Change::Calendar {
                        calendar: Some(c.clone()),
                        before: Some(before),
                    });
                }
            }
            out
        })
    }

    pub(crate) fn set_observer(&self, o: Box<dyn StateObserver>) {
        *self.observer.lock().unwrap_or_else(|e| e.into_inner()) = Some(o);
    }

    /// Tell the observer that sharing was paused or resumed.
    pub(crate) fn observer_paused(&self, paused: bool) {
        let now = self.clock.now();
        if let Some(o) = self
            .observer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            o.paused(paused, now);
        }
    }

    /// Read the snapshot. Keep `f` short: writers wait for it.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        let guard = self.snapshot.read().unwrap_or_else(|e| e.into_inner());
        f(&guard)
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.tx.subscribe()
    }

    /// Apply one event and broadcast what changed. Returns the changes.
    pub(crate) fn apply(&self, event: SourceEvent) -> Vec<Arc<Change>> {
        self.commit(|snap, now| {
            // Read under the snapshot's lock (see `set_privacy`).
            let event = clean(&self.privacy.rules(), event);
            apply_to(snap, event, now)
        })
    }

    /// Change the snapshot with `f` and tell the captures, the observer
    /// and the feed what changed.
    fn commit(
        &self,
        f: impl FnOnce(&mut Snapshot, DateTime<Utc>) -> Vec<Change>,
    ) -> Vec<Arc<Change>> {
        let now = self.clock.now();
        let changes = {
            let mut snap = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
            let changes = f(&mut snap, now);
            snap.captures.observe(&changes, now);
            if !changes.is_empty()
                && let Some(o) = self
                    .observer
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_mut()
            {
                o.changes(&changes, now);
            }
            changes
        };
        // Each change moves into the `Arc` its readers share: a focus
        // change is three, each a whole window, and copying them for the
        // feed was a third of the windows cloned per focus change
        // (issue 33).
        let changes: Vec<Arc<Change>> = changes.into_iter().map(Arc::new).collect();
        for c in &changes {
            // No receiver is not an error: nobody listens yet.
            let _ = self.tx.send(c.clone());
        }
        changes
    }
}

/// `event` as the never-share rules let it in: a window's title held
/// back, a notification's codes replaced, a never-shared app's published
/// context and recent files left out.
fn clean(rules: &Rules, event: SourceEvent) -> SourceEvent {
    match event {
        SourceEvent::Window { mut window } => {
            rules.clean_window(&mut window);
            SourceEvent::Window { window }
        }
        SourceEvent::Notification { mut notification } => {
            rules.clean_notification(&mut notification);
            SourceEvent::Notification { notification }
        }
        SourceEvent::Provided { context }
            if rules.app(context.app_id.as_str()).is_some()
                || super::vocabulary::title(&context.data)
                    .is_some_and(|name| rules.title(&name).is_some()) =>
        {
            SourceEvent::ProvidedRemoved {
                app_id: context.app_id,
                kind: context.kind,
            }
        }
        SourceEvent::Calendar {
            calendar: Some(mut c),
        } => {
            rules.clean_calendar(&mut c);
            SourceEvent::Calendar { calendar: Some(c) }
        }
        SourceEvent::RecentDocuments {
            documents: Some(mut docs),
        } => {
            docs.retain(|d| rules.document_shown(d));
            SourceEvent::RecentDocuments {
                documents: Some(docs),
            }
        }
        other => other,
    }
}

/// The most events and tasks the state keeps of a calendar: what a
/// reader pages through, bounded whatever a source sends.
pub(crate) const CALENDAR_LEN: usize = 500;

/// A calendar as the state keeps it: at most [`CALENDAR_LEN`] events and
/// tasks, every text without control characters and cut to
/// [`MAX_TEXT_CHARS`], at most 50 attendees an event. The source does the
/// same; this holds for every source (the replay too).
fn bound_calendar(c: &mut Calendar) {
    let clean = |s: &mut String| {
        if s.chars().any(char::is_control) {
            s.retain(|ch| !ch.is_control());
        }
        truncate_text(s);
    };
    c.events.truncate(CALENDAR_LEN);
    c.tasks.truncate(CALENDAR_LEN);
    for e in &mut c.events {
        e.title
            .iter_mut()
            .chain(e.location.iter_mut())
            .for_each(clean);
        e.attendees.truncate(50);
        e.attendees.iter_mut().for_each(clean);
    }
    for t in &mut c.tasks {
        t.summary.iter_mut().for_each(clean);
    }
}

fn set_focus(snap: &mut Snapshot, id: Option<String>, now: DateTime<Utc>, out: &mut Vec<Change>) {
    if snap.active_window == id {
        return;
    }
    let app_id = id
        .as_ref()
        .and_then(|id| snap.windows.get(id))
        .map(|w| w.app_id.clone());
    snap.active_window = id.clone();
    if let Some(w) = id.as_ref().and_then(|id| snap.windows.get_mut(id)) {
        w.last_focused = Some(now);
    }
    snap.focus_history.push_back(FocusChange {
        window_id: id,
        app_id,
        at: now,
    });
    while snap.focus_history.len() > FOCUS_HISTORY_LEN {
        snap.focus_history.pop_front();
    }
    out.push(Change::Focus {
        window: snap.active().cloned(),
    });
}

fn apply_to(snap: &mut Snapshot, event: SourceEvent, now: DateTime<Utc>) -> Vec<Change> {
    let mut out = Vec::new();
    match event {
        SourceEvent::SourceStatus {
            source,
            available,
            error,
        } => {
            let changed = snap
                .sources
                .get(&source)
                .is_none_or(|s| s.available != available || s.last_error != error);
            if changed {
                let since = match snap.sources.get(&source) {
                    Some(s) if s.available == available => s.since,
                    _ => now,
                };
                let st = SourceStatus {
                    name: source.clone(),
                    available,
                    since,
                    last_error: error,
                };
                snap.sources.insert(source, st.clone());
                out.push(Change::Source(st));
            }
        }
        SourceEvent::Window { mut window } => {
            truncate_text(&mut window.title);
            let activated = window.states.activated;
            let id = window.id.clone();
            match snap.windows.get(&id) {
                Some(old) if same_window(old, &window) => {}
                Some(old) => {
                    window.first_seen = old.first_seen;
                    window.last_focused = old.last_focused;
                    let before = snap.windows.insert(id.clone(), window.clone());
                    out.push(Change::Window {
                        kind: ChangeKind::Changed,
                        window,
                        before: before.map(Box::new),
                    });
                }
                None => {
                    window.last_focused = None;
                    snap.windows.insert(id.clone(), window.clone());
                    out.push(Change::Window {
                        kind: ChangeKind::Opened,
                        window,
                        before: None,
                    });
                }
            }
            if activated {
                set_focus(snap, Some(id), now, &mut out);
            } else if snap.active_window.as_deref() == Some(id.as_str()) {
                set_focus(snap, None, now, &mut out);
            }
        }
        SourceEvent::WindowClosed { id } => {
            if let Some(w) = snap.windows.remove(&id) {
                out.push(Change::Window {
                    kind: ChangeKind::Closed,
                    window: w,
                    before: None,
                });
                if snap.active_window.as_deref() == Some(id.as_str()) {
                    set_focus(snap, None, now, &mut out);
                }
            }
        }
        SourceEvent::Focus { id } => {
            let id = id.filter(|id| snap.windows.contains_key(id));
            for (wid, w) in snap.windows.iter_mut() {
                let should = Some(wid) == id.as_ref();
                if w.states.activated != should {
                    w.states.activated = should;
                }
            }
            set_focus(snap, id, now, &mut out);
        }
        SourceEvent::WindowsReset => {
            let ids: Vec<String> = snap.windows.keys().cloned().collect();
            for id in ids {
                out.extend(apply_to(snap, SourceEvent::WindowClosed { id }, now));
            }
        }
        SourceEvent::Stream { mut stream } => {
            if let Some(p) = &mut stream.player {
                for t in [&mut p.title, &mut p.artist, &mut p.url]
                    .into_iter()
                    .flatten()
                {
                    truncate_text(t);
                }
            }
            let id = stream.id.clone();
            let kind = match snap.streams.get(&id) {
                Some(old) if *old == stream => None,
                Some(_) => Some(ChangeKind::Changed),
                None => Some(ChangeKind::Opened),
            };
            if let Some(kind) = kind {
                snap.streams.insert(id, stream.clone());
                out.push(Change::Stream { kind, stream });
            }
        }
        SourceEvent::StreamRemoved { id } => {
            if let Some(stream) = snap.streams.remove(&id) {
                out.push(Change::Stream {
                    kind: ChangeKind::Closed,
                    stream,
                });
            }
        }
        SourceEvent::StreamsReset { id_prefix } => {
            let ids: Vec<String> = snap
                .streams
                .keys()
                .filter(|k| k.starts_with(&id_prefix))
                .cloned()
                .collect();
            for id in ids {
                out.extend(apply_to(snap, SourceEvent::StreamRemoved { id }, now));
            }
        }
        SourceEvent::Session { session } => {
            let session = session.map(|s| with_dnd(s, snap.dnd));
            if snap.session != session {
                snap.session = session.clone();
                out.push(Change::Session(session));
            }
        }
        SourceEvent::DoNotDisturb { dnd } => {
            snap.dnd = dnd;
            // Without a session nothing carries it yet; the session's
            // first event will.
            if let Some(old) = &snap.session {
                let session = with_dnd(old.clone(), dnd);
                if *old != session {
                    snap.session = Some(session.clone());
                    out.push(Change::Session(Some(session)));
                }
            }
        }
        SourceEvent::Power { power } => {
            if snap.power != power {
                snap.power = power.clone();
                out.push(Change::Power(power));
            }
        }
        SourceEvent::Network { network } => {
            if snap.network != network {
                let before = std::mem::replace(&mut snap.network, network.clone());
                out.push(Change::Network { network, before });
            }
        }
        SourceEvent::Notification { mut notification } => {
            truncate_text(&mut notification.summary);
            truncate_text(&mut notification.body);
            // Open, whatever a source said.
            notification.closed = None;
            notification.actions.truncate(MAX_ACTIONS);
            for t in notification
                .actions
                .iter_mut()
                .chain(&mut notification.icon)
            {
                truncate_text(t);
            }
            // Ids are unique in the list: at most one is replaced.
            let before = snap
                .notifications
                .iter()
                .position(|n| n.id == notification.id)
                .and_then(|i| snap.notifications.remove(i));
            snap.notifications.push_back(notification.clone());
            while snap.notifications.len() > NOTIFICATIONS_LEN {
                snap.notifications.pop_front();
            }
            out.push(Change::Notification {
                kind: ChangeKind::Opened,
                notification,
                before: before.map(Box::new),
            });
        }
        SourceEvent::NotificationClosed { id, reason } => {
            if let Some(pos) = snap.notifications.iter().position(|n| n.id == id)
                && let Some(mut notification) = snap.notifications.remove(pos)
            {
                notification.closed = reason;
                out.push(Change::Notification {
                    kind: ChangeKind::Closed,
                    notification,
                    before: None,
                });
            }
        }
        SourceEvent::Provided { context } => {
            let kind = if snap.provided.insert(context.clone()) {
                ChangeKind::Changed
            } else {
                ChangeKind::Opened
            };
            out.push(Change::Provided { kind, context });
        }
        SourceEvent::Selection { mut selection } => {
            // Replaced, never broadcast: no `Change`, so no signal, no MCP
            // notification and no timeline row ever carries it.
            if let Some(s) = selection.as_mut()
                && s.text.len() > Selection::MAX_BYTES
            {
                let mut end = Selection::MAX_BYTES;
                while !s.text.is_char_boundary(end) {
                    end -= 1;
                }
                s.text.truncate(end);
                s.truncated = true;
            }
            snap.selection = selection;
        }
        SourceEvent::Location { mut location } => {
            if let Some(d) = location.as_mut().and_then(|l| l.description.as_mut()) {
                truncate_text(d);
            }
            if snap.location != location {
                let before = std::mem::replace(&mut snap.location, location.clone());
                out.push(Change::Location { location, before });
            }
        }
        SourceEvent::RecentDocuments { documents } => {
            if snap.recent_documents != documents {
                let old = snap.recent_documents.take();
                let new = match (&old, &documents) {
                    (Some(old), Some(docs)) => docs
                        .iter()
                        .filter(|d| !old.iter().any(|o| o.uri == d.uri && o.used() >= d.used()))
                        .cloned()
                        .collect(),
                    _ => Vec::new(),
                };
                snap.recent_documents = documents.clone();
                out.push(Change::RecentDocuments { documents, new });
            }
        }
        SourceEvent::Calendar { mut calendar } => {
            if let Some(c) = calendar.as_mut() {
                bound_calendar(c);
            }
            if snap.calendar != calendar {
                let before = std::mem::replace(&mut snap.calendar, calendar.clone());
                out.push(Change::Calendar { calendar, before });
            }
        }
        #[cfg(feature = "replay")]
        SourceEvent::Clock { .. } => {}
        SourceEvent::ProvidedRemoved { app_id, kind } => {
            if let Some(context) = snap.provided.remove(&app_id, &kind) {
                out.push(Change::Provided {
                    kind: ChangeKind::Closed,
                    context,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::SystemClock;
    use crate::model::WindowStates;

    fn win(id: &str, app: &str, activated: bool) -> Window {
        Window {
            id: id.into(),
            app_id: app.into(),
            app_name: None,
            icon: None,
            title: format!("title of {id}"),
            states: WindowStates {
                activated,
                ..Default::default()
            },
            outputs: vec![],
            parent: None,
            first_seen: Utc::now(),
            last_focused: None,
            attributed_by: Default::default(),
            title_hidden: None,
            process: None,
            sandbox: None,
        }
    }

    #[test]
    fn focus_follows_activated_and_history_is_bounded() {
        let st = State::new(Arc::new(SystemClock));
        st.apply(SourceEvent::Window {
            window: win("a", "org.a", true),
        });
        st.apply(SourceEvent::Window {
            window: win("b", "org.b", false),
        });
        assert_eq!(st.read(|s| s.active_window.clone()), Some("a".into()));
        for i in 0..150 {
            let id = if i % 2 == 0 { "b" } else { "a" };
            let ch = st.apply(SourceEvent::Focus {
                id: Some(id.into()),
            });
            assert!(
                matches!(ch.last().map(|c| &**c), Some(Change::Focus { window: Some(w) }) if w.id == id)
            );
        }
        st.read(|s| {
            assert_eq!(s.focus_history.len(), FOCUS_HISTORY_LEN);
            assert!(s.windows.values().filter(|w| w.states.activated).count() == 1);
        });
        let ch = st.apply(SourceEvent::WindowClosed { id: "a".into() });
        assert!(ch.iter().any(|c| matches!(
            &**c,
            Change::Window {
                kind: ChangeKind::Closed,
                ..
            }
        )));
    }

    #[test]
    fn do_not_disturb_rides_on_the_session_whichever_comes_first() {
        use crate::model::DndSource;
        let st = State::new(Arc::new(SystemClock));
        let on = |by| SourceEvent::DoNotDisturb {
            dnd: Some(DoNotDisturb { on: true, by }),
        };
        // Known before the session: kept, nothing to tell yet.
        assert!(st.apply(on(Some(DndSource::Gnome))).is_empty());
        let session = |locked| SourceEvent::Session {
            session: Some(SessionState {
                active: true,
                locked,
                // A session source's own value is not taken.
                do_not_disturb: Some(false),
                ..Default::default()
            }),
        };
        let ch = st.apply(session(false));
        let [c] = ch.as_slice() else { panic!("{ch:?}") };
        let Change::Session(Some(s)) = &**c else {
            panic!("{c:?}")
        };
        assert_eq!(s.do_not_disturb, Some(true));
        assert_eq!(s.do_not_disturb_by, Some(DndSource::Gnome));
        // The same again changes nothing; off drops who said on.
        assert!(st.apply(on(Some(DndSource::Gnome))).is_empty());
        let ch = st.apply(SourceEvent::DoNotDisturb {
            dnd: Some(DoNotDisturb {
                on: false,
                by: None,
            }),
        });
        assert_eq!(ch.len(), 1);
        st.read(|s| {
            let s = s.session.as_ref().expect("session");
            assert_eq!((s.do_not_disturb, s.do_not_disturb_by), (Some(false), None));
        });
        // A lock keeps it; unknown again takes it away.
        st.apply(session(true));
        st.read(|s| {
            assert_eq!(
                s.session.as_ref().and_then(|s| s.do_not_disturb),
                Some(false)
            )
        });
        st.apply(SourceEvent::DoNotDisturb { dnd: None });
        st.read(|s| {
            let s = s.session.as_ref().expect("session");
            assert!(s.locked && s.do_not_disturb.is_none());
        });
    }

    #[test]
    fn unchanged_window_emits_nothing_and_titles_are_truncated() {
        let st = State::new(Arc::new(SystemClock));
        let mut w = win("a", "org.a", false);
        w.title = "x".repeat(100 * 1024);
        assert_eq!(st.apply(SourceEvent::Window { window: w.clone() }).len(), 1);
        assert!(st.apply(SourceEvent::Window { window: w }).is_empty());
        st.read(|s| {
            let t = &s.windows["a"].title;
            assert!(t.ends_with(TRUNCATION_MARKER));
            assert_eq!(
                t.chars().count(),
                MAX_TEXT_CHARS + TRUNCATION_MARKER.chars().count()
            );
        });
    }

    /// The attack: a private window's title and a code in a notification
    /// arrive from a source; the snapshot, the feed and the observer get
    /// them already cleaned. A rule added later hides a title the state
    /// holds, told as an ordinary change.
    #[test]
    fn secrets_never_enter_the_state_and_new_rules_apply_at_once() {
        let st = State::new(Arc::new(SystemClock));
        let mut feed = st.subscribe();
        let mut w = win("p", "firefox", true);
        w.title = "Bank — Mozilla Firefox Private Browsing".into();
        st.apply(SourceEvent::Window { window: w });
        st.apply(SourceEvent::Notification {
            notification: Notification {
                id: "n".into(),
                app_name: "Messages".into(),
                summary: "339120 is your Amazon OTP".into(),
                body: String::new(),
                urgency: Default::default(),
                time: Utc::now(),
                ..Notification::default()
            },
        });
        st.read(|s| {
            assert_eq!(s.windows["p"].title, "");
            assert_eq!(
                s.windows["p"].title_hidden,
                Some(crate::model::Hidden::PrivateWindow)
            );
            assert_eq!(
                s.notifications[0].summary,
                "[code hidden] is your Amazon OTP"
            );
        });
        while let Ok(c) = feed.try_recv() {
            let text = format!("{c:?}");
            assert!(!text.contains("Bank") && !text.contains("339120"), "{text}");
        }
        st.apply(SourceEvent::Window {
            window: win("d", "org.example.Diary", false),
        });
        let changes = st.set_privacy(Rules::new(crate::core::privacy::PrivacySettings {
            apps: vec![],
            titles: vec!["title of d".into()],
        }));
        assert!(
            matches!(changes.as_slice(), [c] if matches!(&**c, Change::Window { window, .. } if window.title.is_empty() && window.title_hidden == Some(crate::model::Hidden::UserRule))),
            "{changes:?}"
        );
        // The same rules again: nothing to tell.
        assert!(
            st.set_privacy(Rules::new(crate::core::privacy::PrivacySettings {
                apps: vec![],
                titles: vec!["title of d".into()],
            }))
            .is_empty()
        );
    }
}

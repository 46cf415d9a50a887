//! The windows of one reporting shell, free of D-Bus so that it can be
//! tested alone: the shell's reports in, `SourceEvent`s out.
//!
//! - Ids: the broker's id of a window is `SOURCE-N-ID`, where `ID` is the
//!   shell's (sanitised like the Wayland source's identifiers) and `N`
//!   counts the reporting sessions of this source (a new connection, or
//!   reports again after a stop), so that the windows of a restarted shell
//!   never take the ids of the old one's.
//! - Focus: the core's active window is one of ours only through
//!   [`Tracker`]'s `focus`; every window event carries `activated` as
//!   that says, so that a change of a title never moves the focus.
//! - A report of no focus (KWin sends one before every activation) is held
//!   for [`NULL_FOCUS_DELAY`]: a real focus within it replaces it, and
//!   subscribers never see a moment without focus. Closing the focused
//!   window is held the same way (the state would clear the focus at the
//!   close), so that when the shell focuses the next window at once, the
//!   focus moves and then the window closes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use chrono::Utc;

use crate::core::SourceEvent;
use crate::core::reports::{MAX_WINDOWS, Report, ReportedWindow};
use crate::core::state::truncate_text;
use crate::desktop_entry::AppInfo;
use crate::model::{Window, WindowAttribution, WindowProcess};

/// How long a report of no focus waits for a real one.
pub(crate) const NULL_FOCUS_DELAY: Duration = Duration::from_millis(80);

const MAX_ID_CHARS: usize = 64;
const MAX_APP_ID_CHARS: usize = 255;
const MAX_OUTPUT_CHARS: usize = 64;
const MAX_OUTPUTS: usize = 16;

/// Resolves a window's claimed app id, and its process where the shell
/// told its PID, to the desktop entry that names the window
/// (`desktop_entry::for_window`).
pub(crate) type Resolver = Box<dyn FnMut(&str, Option<&WindowProcess>) -> Option<AppInfo> + Send>;

/// Resolves a window's PID to the kernel's identity of its process.
pub(crate) type Processes = Box<dyn FnMut(u32) -> Option<WindowProcess> + Send>;

/// The shell's id as part of ours: printable ASCII kept, anything else
/// (or an overlong one) hashed.
fn sanitize(s: &str) -> String {
    if s.len() <= MAX_ID_CHARS && s.bytes().all(|b| b.is_ascii_graphic()) {
        return s.to_owned();
    }
    crate::sources::hashed_id(s)
}

fn bounded(mut s: String, max: usize) -> String {
    if let Some((i, _)) = s.char_indices().nth(max) {
        s.truncate(i);
    }
    s
}

pub(crate) struct Tracker {
    source: &'static str,
    /// What the windows say attributed them (`app_id_source`).
    attribution: WindowAttribution,
    /// Reporting sessions seen, the `N` of the ids.
    generation: u64,
    owner: Option<String>,
    /// The shell's ids (sanitised) to what the core was told.
    windows: BTreeMap<String, Window>,
    /// The shell's id of the window the core has as active.
    focus: Option<String>,
    /// A report of no focus waits until then.
    pending_none: Option<Instant>,
    /// Closed while focused: told to the core once the focus moved (or
    /// the wait ended). Broker ids.
    held_closes: BTreeSet<String>,
    /// A focus reported for a window not reported yet: taken when it is
    /// (unless another focus was reported since).
    awaited: Option<String>,
    resolver: Resolver,
    processes: Processes,
    /// The PID each window (shell id) was reported with, whose identity
    /// its `process` is.
    pids: BTreeMap<String, u32>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("source", &self.source)
            .field("generation", &self.generation)
            .field("owner", &self.owner)
            .field("windows", &self.windows.len())
            .finish_non_exhaustive()
    }
}

impl Tracker {
    pub(crate) fn new(source: &'static str, resolver: Resolver) -> Tracker {
        Tracker {
            source,
            attribution: crate::core::reports::attribution(source),
            generation: 0,
            owner: None,
            windows: BTreeMap::new(),
            focus: None,
            pending_none: None,
            held_closes: BTreeSet::new(),
            awaited: None,
            resolver,
            processes: Box::new(crate::sources::window_process),
            pids: BTreeMap::new(),
        }
    }

    /// Resolve the windows' PIDs with `processes` rather than
    /// [`crate::sources::window_process`].
    #[cfg(test)]
    pub(crate) fn with_processes(mut self, processes: Processes) -> Tracker {
        self.processes = processes;
        self
    }

    /// The connection whose reports these are.
    pub(crate) fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// When [`Tracker::tick`] has something to do.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.pending_none
    }

    fn broker_id(&self, id: &str) -> String {
        format!("{}-{}-{}", self.source, self.generation, sanitize(id))
    }

    /// Everything reported is gone (the reporter left or stopped).
    pub(crate) fn reset(&mut self) -> Vec<SourceEvent> {
        let mut out = Vec::new();
        self.owner = None;
        self.pending_none = None;
        self.focus = None;
        self.awaited = None;
        for id in std::mem::take(&mut self.held_closes) {
            out.push(SourceEvent::WindowClosed { id });
        }
        for (_, w) in std::mem::take(&mut self.windows) {
            out.push(SourceEvent::WindowClosed { id: w.id });
        }
        self.pids.clear();
        out
    }

    /// The shell's well-known name changed hands (to `owner`, or to
    /// nobody): what another connection reported is gone, since it is not
    /// the shell any more.
    pub(crate) fn name_owner(&mut self, owner: Option<&str>) -> Vec<SourceEvent> {
        match self.owner.as_deref() {
            Some(o) if Some(o) != owner => self.reset(),
            _ => Vec::new(),
        }
    }

    /// A report from `owner`; `true` in the second place when `owner` is
    /// a new reporter (the previous one's windows are gone).
    pub(crate) fn report(
        &mut self,
        owner: &str,
        report: Report,
        now: Instant,
    ) -> (Vec<SourceEvent>, bool) {
        let mut out = Vec::new();
        let new_owner = self.owner.as_deref() != Some(owner);
        if new_owner {
            out.extend(self.reset());
            self.owner = Some(owner.to_owned());
            self.generation += 1;
        }
        match report {
            Report::Windows { windows, focus } => {
                let ids: BTreeSet<String> = windows.iter().map(|(id, _)| sanitize(id)).collect();
                let gone: Vec<String> = self
                    .windows
                    .keys()
                    .filter(|k| !ids.contains(*k))
                    .cloned()
                    .collect();
                for id in gone {
                    self.close(&id, now, &mut out);
                }
                let focus = focus.map(|f| sanitize(&f));
                // The focused window first, so that the focus is set
                // before the others are told (they are not active).
                let (first, rest): (Vec<_>, Vec<_>) = windows
                    .into_iter()
                    .partition(|(id, _)| focus.as_deref() == Some(sanitize(id).as_str()));
                for (id, w) in first.into_iter().chain(rest) {
                    self.upsert(&id, w, &mut out);
                }
                self.set_focus(focus, now, &mut out);
            }
            Report::Window { id, window } => self.upsert(&id, window, &mut out),
            Report::Closed { id } => self.close(&sanitize(&id), now, &mut out),
            Report::Focus { id } => self.set_focus(id.map(|i| sanitize(&i)), now, &mut out),
            Report::Stopped => out.extend(self.reset()),
        }
        (out, new_owner)
    }

    /// The wait for a real focus ended: apply the none.
    pub(crate) fn tick(&mut self, now: Instant) -> Vec<SourceEvent> {
        let mut out = Vec::new();
        if self.pending_none.is_some_and(|d| d <= now) {
            self.pending_none = None;
            // `awaited` stays: the shell said that window has the focus,
            // and nothing since said otherwise.
            let was = self.focus.take();
            let held = std::mem::take(&mut self.held_closes);
            for id in &held {
                out.push(SourceEvent::WindowClosed { id: id.clone() });
            }
            // A focused window that closed took the focus with it (the
            // state clears it); one that is still open loses it.
            if let Some(f) = was
                && self.windows.contains_key(&f)
            {
                out.push(SourceEvent::Focus { id: None });
                if let Some(w) = self.windows.get_mut(&f) {
                    w.states.activated = false;
                }
            }
        }
        out
    }

    fn set_focus(&mut self, id: Option<String>, now: Instant, out: &mut Vec<SourceEvent>) {
        // A window the shell has not reported yet (its report may follow
        // the focus): wait for it like for a real focus after a null one.
        self.awaited = id.clone().filter(|i| !self.windows.contains_key(i));
        let id = id.filter(|i| self.windows.contains_key(i));
        match id {
            Some(id) => {
                self.pending_none = None;
                if self.focus.as_deref() != Some(id.as_str()) {
                    if let Some(old) = self.focus.take()
                        && let Some(w) = self.windows.get_mut(&old)
                    {
                        w.states.activated = false;
                    }
                    if let Some(w) = self.windows.get_mut(&id) {
                        w.states.activated = true;
                        out.push(SourceEvent::Focus {
                            id: Some(w.id.clone()),
                        });
                    }
                    self.focus = Some(id);
                }
                for id in std::mem::take(&mut self.held_closes) {
                    out.push(SourceEvent::WindowClosed { id });
                }
            }
            None => {
                if (self.focus.is_some() || !self.held_closes.is_empty())
                    && self.pending_none.is_none()
                {
                    self.pending_none = Some(now + NULL_FOCUS_DELAY);
                }
            }
        }
    }

    fn close(&mut self, id: &str, now: Instant, out: &mut Vec<SourceEvent>) {
        let Some(w) = self.windows.remove(id) else {
            return;
        };
        self.pids.remove(id);
        if self.focus.as_deref() == Some(id) {
            // Held until the focus moves (or the wait ends).
            self.focus = None;
            self.held_closes.insert(w.id);
            if self.pending_none.is_none() {
                self.pending_none = Some(now + NULL_FOCUS_DELAY);
            }
        } else {
            out.push(SourceEvent::WindowClosed { id: w.id });
        }
    }

    fn upsert(&mut self, id: &str, r: ReportedWindow, out: &mut Vec<SourceEvent>) {
        let key = sanitize(id);
        if !self.windows.contains_key(&key) && self.windows.len() >= MAX_WINDOWS {
            tracing::debug!(
                source = self.source,
                "more than {MAX_WINDOWS} windows reported; ignored"
            );
            return;
        }
        let broker_id = self.broker_id(&key);
        let parent = r
            .parent
            .map(|p| sanitize(&p))
            .filter(|p| *p != key && self.windows.contains_key(p))
            .map(|p| self.broker_id(&p));
        let app_id = bounded(r.app_id, MAX_APP_ID_CHARS);
        let mut title = r.title;
        truncate_text(&mut title);
        let mut states = r.states;
        states.activated = self.focus.as_deref() == Some(key.as_str());
        let outputs: Vec<String> = r
            .outputs
            .into_iter()
            .take(MAX_OUTPUTS)
            .map(|o| bounded(o, MAX_OUTPUT_CHARS))
            .collect();
        // The shell's word on the PID (it has it from the client's socket);
        // the identity is the kernel's, resolved once per PID.
        let process = match (r.pid, self.windows.get(&key)) {
            (None, _) => None,
            (Some(pid), Some(old)) if self.pids.get(&key) == Some(&pid) => old.process.clone(),
            (Some(pid), _) => (self.processes)(pid),
        };
        let (app_name, icon, first_seen) = match self.windows.get(&key) {
            Some(old) if old.app_id == app_id && old.process == process => {
                (old.app_name.clone(), old.icon.clone(), old.first_seen)
            }
            old => {
                let info = if app_id.is_empty() {
                    None
                } else {
                    (self.resolver)(&app_id, process.as_ref())
                };
                (
                    info.as_ref().map(|i| i.name.clone()),
                    info.and_then(|i| i.icon),
                    old.map_or_else(Utc::now, |o| o.first_seen),
                )
            }
        };
        match r.pid {
            Some(pid) => self.pids.insert(key.clone(), pid),
            None => self.pids.remove(&key),
        };
        let window = Window {
            id: broker_id,
            app_id,
            app_name,
            icon,
            title,
            states,
            outputs,
            parent,
            first_seen,
            last_focused: None,
            attributed_by: self.attribution,
            title_hidden: None,
            process,
            sandbox: None,
        };
        if self.windows.get(&key) == Some(&window) {
            return;
        }
        self.windows.insert(key.clone(), window.clone());
        out.push(SourceEvent::Window { window });
        if self.awaited.as_deref() == Some(key.as_str()) {
            self.set_focus(Some(key), Instant::now(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::State;
    use crate::core::clock::SystemClock;
    use std::sync::Arc;

    fn tracker() -> Tracker {
        Tracker::new("kwin", Box::new(|_, _| None))
    }

    fn w(app: &str, title: &str) -> ReportedWindow {
        ReportedWindow {
            app_id: app.into(),
            title: title.into(),
            ..Default::default()
        }
    }

    fn focus(id: Option<&str>) -> Report {
        Report::Focus {
            id: id.map(str::to_owned),
        }
    }

    /// Every focus the state saw, as window ids.
    fn focuses(state: &State, events: Vec<SourceEvent>) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for ev in events {
            for c in state.apply(ev) {
                if let crate::core::change::Change::Focus { window } = &*c {
                    out.push(window.as_ref().map(|w| w.id.clone()));
                }
            }
        }
        out
    }

    /// A reported PID is resolved once (again only when it changes) and
    /// the window carries the kernel's identity beside its claim; a
    /// window without a PID has none.
    #[test]
    fn a_reported_pid_is_the_kernel_identity_resolved_once() {
        use crate::model::{AppId, IdentitySource};
        use std::sync::Mutex;
        let asked: Arc<Mutex<Vec<u32>>> = Arc::default();
        let log = asked.clone();
        let mut t = tracker().with_processes(Box::new(move |pid| {
            log.lock().expect("lock").push(pid);
            Some(WindowProcess {
                app_id: AppId::new(format!("exe:/usr/bin/p{pid}")).expect("id"),
                source: IdentitySource::Executable,
            })
        }));
        let now = Instant::now();
        let claim = |title: &str, pid: Option<u32>| ReportedWindow {
            pid,
            ..w("org.mozilla.firefox", title)
        };
        let process = |ev: &[SourceEvent]| match ev.last() {
            Some(SourceEvent::Window { window }) => {
                window.process.as_ref().map(|p| p.app_id.to_string())
            }
            other => panic!("{other:?}"),
        };
        let mut report = |title: &str, pid| {
            t.report(
                ":1.5",
                Report::Window {
                    id: "a".into(),
                    window: claim(title, pid),
                },
                now,
            )
            .0
        };
        let ev = report("A", Some(7));
        assert_eq!(process(&ev).as_deref(), Some("exe:/usr/bin/p7"));
        let ev = report("B", Some(7));
        assert_eq!(process(&ev).as_deref(), Some("exe:/usr/bin/p7"));
        let ev = report("C", Some(8));
        assert_eq!(process(&ev).as_deref(), Some("exe:/usr/bin/p8"));
        let ev = report("D", None);
        assert_eq!(process(&ev), None, "no PID, no identity");
        assert_eq!(*asked.lock().expect("lock"), vec![7, 8]);
    }

    #[test]
    fn ids_are_namespaced_and_a_new_reporter_replaces_the_old() {
        let mut t = tracker();
        let now = Instant::now();
        let (ev, new) = t.report(
            ":1.5",
            Report::Windows {
                windows: vec![("a".into(), w("org.x.A", "A")), ("b c".into(), w("b", "B"))],
                focus: Some("a".into()),
            },
            now,
        );
        assert!(new);
        let ids: Vec<String> = ev
            .iter()
            .filter_map(|e| match e {
                SourceEvent::Window { window } => Some(window.id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ids[0], "kwin-1-a");
        assert!(ids[1].starts_with("kwin-1-h"), "{ids:?}");
        assert!(ev.contains(&SourceEvent::Focus {
            id: Some("kwin-1-a".into())
        }));
        // Same owner: not new; another: the old windows close first.
        let (_, new) = t.report(":1.5", Report::Closed { id: "zz".into() }, now);
        assert!(!new);
        let (ev, new) = t.report(
            ":1.9",
            Report::Window {
                id: "a".into(),
                window: w("x", ""),
            },
            now,
        );
        assert!(new);
        assert!(ev.contains(&SourceEvent::WindowClosed {
            id: "kwin-1-a".into()
        }));
        assert!(
            ev.iter()
                .any(|e| matches!(e, SourceEvent::Window { window } if window.id == "kwin-2-a"))
        );
    }

    #[test]
    fn a_null_focus_followed_by_a_real_one_never_shows() {
        let state = State::new(Arc::new(SystemClock));
        let mut t = tracker();
        let t0 = Instant::now();
        let all = Report::Windows {
            windows: vec![("a".into(), w("a", "A")), ("b".into(), w("b", "B"))],
            focus: Some("a".into()),
        };
        let mut seen = focuses(&state, t.report(":1", all, t0).0);
        seen.extend(focuses(&state, t.report(":1", focus(None), t0).0));
        seen.extend(focuses(&state, t.tick(t0 + Duration::from_millis(10))));
        seen.extend(focuses(
            &state,
            t.report(":1", focus(Some("b")), t0 + Duration::from_millis(20))
                .0,
        ));
        seen.extend(focuses(&state, t.tick(t0 + Duration::from_secs(1))));
        assert_eq!(seen, vec![Some("kwin-1-a".into()), Some("kwin-1-b".into())]);

        // A title change of the focused window keeps the focus.
        let ev = t
            .report(
                ":1",
                Report::Window {
                    id: "b".into(),
                    window: w("b", "B2"),
                },
                t0,
            )
            .0;
        assert!(focuses(&state, ev).is_empty());
        assert_eq!(
            state.read(|s| s.active_window.clone()).as_deref(),
            Some("kwin-1-b")
        );

        // A null focus with nothing after it is applied after the wait.
        let t1 = t0 + Duration::from_secs(2);
        assert!(focuses(&state, t.report(":1", focus(None), t1).0).is_empty());
        assert!(focuses(&state, t.tick(t1 + Duration::from_millis(10))).is_empty());
        assert_eq!(t.deadline(), Some(t1 + NULL_FOCUS_DELAY));
        assert_eq!(focuses(&state, t.tick(t1 + NULL_FOCUS_DELAY)), vec![None]);
        assert_eq!(state.read(|s| s.active_window.clone()), None);
    }

    #[test]
    fn closing_the_focused_window_moves_the_focus_first() {
        let state = State::new(Arc::new(SystemClock));
        let mut t = tracker();
        let t0 = Instant::now();
        let all = Report::Windows {
            windows: vec![("a".into(), w("a", "A")), ("b".into(), w("b", "B"))],
            focus: Some("a".into()),
        };
        focuses(&state, t.report(":1", all, t0).0);
        let mut seen = focuses(
            &state,
            t.report(":1", Report::Closed { id: "a".into() }, t0).0,
        );
        assert!(state.read(|s| s.windows.contains_key("kwin-1-a")), "held");
        seen.extend(focuses(&state, t.report(":1", focus(None), t0).0));
        seen.extend(focuses(&state, t.report(":1", focus(Some("b")), t0).0));
        assert_eq!(seen, vec![Some("kwin-1-b".into())]);
        assert!(!state.read(|s| s.windows.contains_key("kwin-1-a")));

        // Closing the last one: the focus goes after the wait.
        let ev = t.report(":1", Report::Closed { id: "b".into() }, t0).0;
        assert!(focuses(&state, ev).is_empty());
        assert_eq!(focuses(&state, t.tick(t0 + NULL_FOCUS_DELAY)), vec![None]);
        assert!(state.read(|s| s.windows.is_empty()));
    }

    #[test]
    fn a_focus_reported_before_its_window_is_taken_when_it_comes() {
        let state = State::new(Arc::new(SystemClock));
        let mut t = tracker();
        let t0 = Instant::now();
        let all = Report::Windows {
            windows: vec![("a".into(), w("a", "A"))],
            focus: Some("a".into()),
        };
        let mut seen = focuses(&state, t.report(":1", all, t0).0);
        seen.extend(focuses(&state, t.report(":1", focus(Some("b")), t0).0));
        let b = Report::Window {
            id: "b".into(),
            window: w("b", "B"),
        };
        seen.extend(focuses(&state, t.report(":1", b, t0).0));
        seen.extend(focuses(&state, t.tick(t0 + NULL_FOCUS_DELAY)));
        assert_eq!(seen, vec![Some("kwin-1-a".into()), Some("kwin-1-b".into())]);
    }

    #[test]
    fn reset_and_stop_close_everything() {
        let state = State::new(Arc::new(SystemClock));
        let mut t = tracker();
        let t0 = Instant::now();
        let all = Report::Windows {
            windows: vec![("a".into(), w("a", "A")), ("b".into(), w("b", "B"))],
            focus: Some("a".into()),
        };
        focuses(&state, t.report(":1", all, t0).0);
        focuses(
            &state,
            t.report(":1", Report::Closed { id: "a".into() }, t0).0,
        );
        focuses(&state, t.report(":1", Report::Stopped, t0).0);
        assert!(state.read(|s| s.windows.is_empty()));
        assert_eq!(state.read(|s| s.active_window.clone()), None);
        assert_eq!(t.owner(), None);
        assert_eq!(t.deadline(), None);
        // A full list replaces: windows not in it close.
        let all = Report::Windows {
            windows: vec![("a".into(), w("a", "A")), ("b".into(), w("b", "B"))],
            focus: None,
        };
        focuses(&state, t.report(":2", all, t0).0);
        let one = Report::Windows {
            windows: vec![("b".into(), w("b", "B"))],
            focus: Some("b".into()),
        };
        focuses(&state, t.report(":2", one, t0).0);
        let (ids, active) = state.read(|s| {
            (
                s.windows.keys().cloned().collect::<Vec<_>>(),
                s.active_window.clone(),
            )
        });
        assert_eq!(ids, vec!["kwin-2-b"]);
        assert_eq!(active.as_deref(), Some("kwin-2-b"));
    }

    #[test]
    fn hostile_ids_and_text_are_bounded() {
        let mut t = tracker();
        let long = "x".repeat(10_000);
        let (ev, _) = t.report(
            ":1",
            Report::Window {
                id: long.clone(),
                window: ReportedWindow {
                    app_id: long.clone(),
                    title: long.clone(),
                    outputs: vec![long.clone(); 100],
                    parent: Some(long.clone()),
                    ..Default::default()
                },
            },
            Instant::now(),
        );
        let SourceEvent::Window { window } = &ev[0] else {
            panic!("{ev:?}")
        };
        assert!(window.id.len() < 100);
        assert!(window.app_id.chars().count() <= MAX_APP_ID_CHARS);
        assert!(window.title.len() < long.len());
        assert_eq!(window.outputs.len(), MAX_OUTPUTS);
        assert_eq!(window.parent, None, "itself is no parent");
    }
}

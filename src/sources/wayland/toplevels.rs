//! The toplevel bookkeeping of one compositor connection, free of Wayland
//! types so that it can be tested without a compositor.
//!
//! The client feeds it the protocol events of both toplevel protocols
//! (handles are keyed by their protocol object id, outputs likewise); it
//! double-buffers each handle's properties until the handle's `done`, and
//! [`Tracker::flush`] returns what changed since the last flush as
//! [`SourceEvent`]s, which the client sends after each batch of events it
//! read from the socket: a window is only ever reported with a complete,
//! `done` state, and the changes of one batch leave together.
//!
//! Which protocol makes the windows:
//! - only `zwlr_foreign_toplevel_manager_v1`: one window per wlr handle,
//!   id `wl-<generation>-<n>` (the connection generation makes ids unique
//!   across reconnects, `n` counts handles of this connection);
//! - `ext_foreign_toplevel_list_v1` (alone or with wlr): one window per ext
//!   handle, id `ext-<generation>-<identifier>`; the compositor's stable
//!   `identifier` (sanitised, bounded) is the window's identity. When wlr is
//!   bound too, each ext handle is paired with the wlr handle of the same
//!   toplevel, and the states, outputs and parent come from it (ext has no
//!   states). The protocols do not link their handles, so pairs are made
//!   by (app id, title) once both are `done`, oldest first, which is exact
//!   for compositors that announce a toplevel on both at once (they do);
//!   a pair, once made, holds until one side closes.
//!
//! Nothing here is unbounded per window: titles are cut at
//! [`MAX_TEXT_CHARS`] with the marker, app ids at [`MAX_APP_ID_CHARS`],
//! identifiers at [`MAX_IDENTIFIER_CHARS`].

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::core::SourceEvent;
#[cfg(doc)]
use crate::core::state::MAX_TEXT_CHARS;
use crate::core::state::truncate_text;
use crate::desktop_entry::AppInfo;
use crate::model::{Window, WindowAttribution, WindowProcess, WindowSandbox, WindowStates};

pub(crate) const MAX_APP_ID_CHARS: usize = 255;
pub(crate) const MAX_IDENTIFIER_CHARS: usize = 64;
/// At most this many outputs are kept per window.
const MAX_OUTPUTS: usize = 16;

/// `zwlr_foreign_toplevel_handle_v1.state` values.
const WLR_MAXIMIZED: u32 = 0;
const WLR_MINIMIZED: u32 = 1;
const WLR_ACTIVATED: u32 = 2;
const WLR_FULLSCREEN: u32 = 3;

/// Resolves a window's claimed app id, and the process the compositor
/// told for it if it did, to the desktop entry that names the window
/// (`desktop_entry::for_window`).
pub(crate) type Resolver = Box<dyn FnMut(&str, Option<&WindowProcess>) -> Option<AppInfo> + Send>;

/// A window's claimed app id and the process the compositor told for it:
/// what its desktop entry is looked up by.
type Named = (String, Option<WindowProcess>);

/// A new window whose process the compositor may know (see
/// [`Tracker::with_finder`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ask {
    /// The window's id.
    pub(crate) window: String,
    /// The ext-foreign-toplevel identifier, as the compositor sent it.
    pub(crate) identifier: Option<String>,
    pub(crate) app_id: String,
    pub(crate) title: String,
}

/// What the compositor knows of a window's process: nothing, by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Found {
    pub(crate) process: Option<WindowProcess>,
    pub(crate) sandbox: Option<WindowSandbox>,
}

/// Asks the compositor (sway's IPC) who the processes of new windows are:
/// one answer per ask, in order.
pub(crate) type Finder = Box<dyn FnMut(&[Ask]) -> Vec<Found> + Send>;

pub(crate) fn bounded_app_id(mut s: String) -> String {
    if let Some((i, _)) = s.char_indices().nth(MAX_APP_ID_CHARS) {
        s.truncate(i);
    }
    s
}

pub(crate) fn bounded_title(mut s: String) -> String {
    truncate_text(&mut s);
    s
}

/// The identifier as part of a window id: printable ASCII other than
/// space kept, anything else (or an overlong one) replaced by a hash.
fn sanitize_identifier(s: &str) -> String {
    let clean =
        !s.is_empty() && s.len() <= MAX_IDENTIFIER_CHARS && s.bytes().all(|b| b.is_ascii_graphic());
    if clean {
        return s.to_owned();
    }
    crate::sources::hashed_id(s)
}

#[derive(Debug, Clone, Default, PartialEq)]
struct WlrProps {
    title: String,
    app_id: String,
    states: WindowStates,
    outputs: Vec<u32>,
    parent: Option<u32>,
}

#[derive(Debug, Default)]
struct WlrPending {
    title: Option<String>,
    app_id: Option<String>,
    states: Option<WindowStates>,
    outputs: Option<Vec<u32>>,
    parent: Option<Option<u32>>,
}

#[derive(Debug)]
struct WlrHandle {
    seq: u64,
    cur: WlrProps,
    pending: WlrPending,
    done_once: bool,
    /// wlr-only mode: the window this handle is.
    window: Option<WindowMeta>,
    /// ext mode: the ext handle this one is paired with.
    paired: Option<u32>,
    /// Was paired once and lost its partner: never pair again.
    orphan: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct ExtProps {
    title: String,
    app_id: String,
    identifier: Option<String>,
}

#[derive(Debug, Default)]
struct ExtPending {
    title: Option<String>,
    app_id: Option<String>,
    identifier: Option<String>,
}

#[derive(Debug)]
struct ExtHandle {
    seq: u64,
    cur: ExtProps,
    pending: ExtPending,
    done_once: bool,
    window: Option<WindowMeta>,
    paired: Option<u32>,
}

/// What the tracker keeps per reported window.
#[derive(Debug, Clone)]
struct WindowMeta {
    id: String,
    first_seen: DateTime<Utc>,
    /// What the window's name and icon were resolved for, and the result.
    app: Option<(Named, Option<AppInfo>)>,
    /// What the compositor said of its process, once asked (`None`: not
    /// asked yet; asked once, right after the window's first `done`).
    known: Option<Found>,
}

/// Which handle a window id belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Wlr(u32),
    Ext(u32),
}

pub(crate) struct Tracker {
    generation: u64,
    next_seq: u64,
    next_n: u64,
    ext_mode: bool,
    wlr: HashMap<u32, WlrHandle>,
    ext: HashMap<u32, ExtHandle>,
    outputs: HashMap<u32, String>,
    owners: HashMap<String, Owner>,
    /// Windows whose state changed since the last flush.
    dirty: BTreeSet<String>,
    /// Windows closed since the last flush (only those reported before).
    closed: Vec<String>,
    /// Windows the core knows (reported and not closed).
    reported: HashSet<String>,
    resolver: Resolver,
    finder: Option<Finder>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("generation", &self.generation)
            .field("ext_mode", &self.ext_mode)
            .field("wlr", &self.wlr.len())
            .field("ext", &self.ext.len())
            .finish_non_exhaustive()
    }
}

impl Tracker {
    /// A tracker for connection number `generation`; `ext_mode` when
    /// `ext_foreign_toplevel_list_v1` is bound (the windows are then its
    /// handles).
    pub(crate) fn new(generation: u64, ext_mode: bool, resolver: Resolver) -> Self {
        Tracker {
            generation,
            next_seq: 0,
            next_n: 0,
            ext_mode,
            wlr: HashMap::new(),
            ext: HashMap::new(),
            outputs: HashMap::new(),
            owners: HashMap::new(),
            dirty: BTreeSet::new(),
            closed: Vec::new(),
            reported: HashSet::new(),
            resolver,
            finder: None,
        }
    }

    /// Ask `finder` who the process of each new window is (the compositor
    /// tells it: sway's IPC); without one every window is `claimed`.
    pub(crate) fn with_finder(mut self, finder: Option<Finder>) -> Self {
        self.finder = finder;
        self
    }

    fn meta_mut(&mut self, owner: Owner) -> Option<&mut WindowMeta> {
        match owner {
            Owner::Wlr(k) => self.wlr.get_mut(&k).and_then(|h| h.window.as_mut()),
            Owner::Ext(k) => self.ext.get_mut(&k).and_then(|h| h.window.as_mut()),
        }
    }

    /// Ask the finder about the windows in `ids` it was not asked about,
    /// all at once, and keep its answers on the windows.
    fn ask_finder(&mut self, ids: &BTreeSet<String>) {
        if self.finder.is_none() {
            return;
        }
        let mut asks = Vec::new();
        for id in ids {
            let Some(&owner) = self.owners.get(id) else {
                continue;
            };
            let ask = match owner {
                Owner::Wlr(k) => self.wlr.get(&k).and_then(|h| {
                    let w = h.window.as_ref()?;
                    w.known.is_none().then(|| Ask {
                        window: w.id.clone(),
                        identifier: None,
                        app_id: h.cur.app_id.clone(),
                        title: h.cur.title.clone(),
                    })
                }),
                Owner::Ext(k) => self.ext.get(&k).and_then(|h| {
                    let w = h.window.as_ref()?;
                    w.known.is_none().then(|| Ask {
                        window: w.id.clone(),
                        identifier: h.cur.identifier.clone(),
                        app_id: h.cur.app_id.clone(),
                        title: h.cur.title.clone(),
                    })
                }),
            };
            if let Some(a) = ask {
                asks.push((owner, a));
            }
        }
        if asks.is_empty() {
            return;
        }
        let only: Vec<Ask> = asks.iter().map(|(_, a)| a.clone()).collect();
        let found = match self.finder.as_mut() {
            Some(f) => f(&only),
            None => return,
        };
        let mut found = found.into_iter();
        for (owner, _) in asks {
            let f = found.next().unwrap_or_default();
            if let Some(m) = self.meta_mut(owner) {
                m.known = Some(f);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn ext_mode(&self) -> bool {
        self.ext_mode
    }

    /// How many windows the core has been told about and not told closed.
    #[cfg(test)]
    pub(crate) fn window_count(&self) -> usize {
        self.reported.len()
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn new_meta(&mut self, id: String) -> WindowMeta {
        WindowMeta {
            id,
            first_seen: Utc::now(),
            app: None,
            known: None,
        }
    }

    // ------------------------------------------------------------ outputs

    pub(crate) fn output_name(&mut self, output: u32, name: String) {
        let mut name = name;
        if let Some((i, _)) = name.char_indices().nth(64) {
            name.truncate(i);
        }
        self.outputs.insert(output, name);
    }

    pub(crate) fn output_removed(&mut self, output: u32) {
        self.outputs.remove(&output);
        let keys: Vec<u32> = self
            .wlr
            .iter()
            .filter(|(_, h)| h.cur.outputs.contains(&output))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            if let Some(h) = self.wlr.get_mut(&k) {
                h.cur.outputs.retain(|o| *o != output);
            }
            self.mark_wlr(k);
        }
    }

    // ------------------------------------------------------------ wlr

    pub(crate) fn wlr_new(&mut self, key: u32) {
        let seq = self.seq();
        self.wlr.insert(
            key,
            WlrHandle {
                seq,
                cur: WlrProps::default(),
                pending: WlrPending::default(),
                done_once: false,
                window: None,
                paired: None,
                orphan: false,
            },
        );
    }

    pub(crate) fn wlr_title(&mut self, key: u32, title: String) {
        if let Some(h) = self.wlr.get_mut(&key) {
            h.pending.title = Some(bounded_title(title));
        }
    }

    pub(crate) fn wlr_app_id(&mut self, key: u32, app_id: String) {
        if let Some(h) = self.wlr.get_mut(&key) {
            h.pending.app_id = Some(bounded_app_id(app_id));
        }
    }

    /// The `state` array, as native-endian `u32`s.
    pub(crate) fn wlr_state(&mut self, key: u32, values: &[u32]) {
        if let Some(h) = self.wlr.get_mut(&key) {
            let mut s = WindowStates::default();
            for v in values {
                match *v {
                    WLR_MAXIMIZED => s.maximized = true,
                    WLR_MINIMIZED => s.minimized = true,
                    WLR_ACTIVATED => s.activated = true,
                    WLR_FULLSCREEN => s.fullscreen = true,
                    _ => {}
                }
            }
            h.pending.states = Some(s);
        }
    }

    pub(crate) fn wlr_output_enter(&mut self, key: u32, output: u32) {
        if let Some(h) = self.wlr.get_mut(&key) {
            let v = h
                .pending
                .outputs
                .get_or_insert_with(|| h.cur.outputs.clone());
            if !v.contains(&output) && v.len() < MAX_OUTPUTS {
                v.push(output);
            }
        }
    }

    pub(crate) fn wlr_output_leave(&mut self, key: u32, output: u32) {
        if let Some(h) = self.wlr.get_mut(&key) {
            let v = h
                .pending
                .outputs
                .get_or_insert_with(|| h.cur.outputs.clone());
            v.retain(|o| *o != output);
        }
    }

    pub(crate) fn wlr_parent(&mut self, key: u32, parent: Option<u32>) {
        if let Some(h) = self.wlr.get_mut(&key) {
            h.pending.parent = Some(parent.filter(|p| *p != key));
        }
    }

    pub(crate) fn wlr_done(&mut self, key: u32) {
        let Some(h) = self.wlr.get_mut(&key) else {
            return;
        };
        let p = std::mem::take(&mut h.pending);
        let before = h.cur.clone();
        if let Some(t) = p.title {
            h.cur.title = t;
        }
        if let Some(a) = p.app_id {
            h.cur.app_id = a;
        }
        if let Some(s) = p.states {
            h.cur.states = s;
        }
        if let Some(o) = p.outputs {
            h.cur.outputs = o;
        }
        if let Some(pa) = p.parent {
            h.cur.parent = pa;
        }
        let first = !h.done_once;
        h.done_once = true;
        if !first && before == h.cur {
            return;
        }
        if self.ext_mode {
            if self.wlr.get(&key).is_some_and(|h| h.paired.is_none()) {
                self.try_pair_wlr(key);
            }
        } else if self.wlr.get(&key).is_some_and(|h| h.window.is_none()) {
            self.next_n += 1;
            let id = format!("wl-{}-{}", self.generation, self.next_n);
            let meta = self.new_meta(id.clone());
            if let Some(h) = self.wlr.get_mut(&key) {
                h.window = Some(meta);
            }
            self.owners.insert(id, Owner::Wlr(key));
        }
        self.mark_wlr(key);
        // Children name this window as parent by id: nothing else changes.
    }

    pub(crate) fn wlr_closed(&mut self, key: u32) {
        let Some(h) = self.wlr.remove(&key) else {
            return;
        };
        if let Some(w) = h.window {
            self.close(w.id);
        }
        if let Some(e) = h.paired
            && let Some(eh) = self.ext.get_mut(&e)
        {
            eh.paired = None;
            self.mark_ext(e);
        }
    }

    /// The compositor stopped sending wlr toplevels: all of them are gone.
    pub(crate) fn wlr_finished(&mut self) {
        let keys: Vec<u32> = self.wlr.keys().copied().collect();
        for k in keys {
            self.wlr_closed(k);
        }
    }

    fn mark_wlr(&mut self, key: u32) {
        let Some(h) = self.wlr.get(&key) else {
            return;
        };
        if let Some(w) = &h.window {
            self.dirty.insert(w.id.clone());
        }
        if let Some(e) = h.paired {
            self.mark_ext(e);
        }
    }

    // ------------------------------------------------------------ ext

    pub(crate) fn ext_new(&mut self, key: u32) {
        let seq = self.seq();
        self.ext.insert(
            key,
            ExtHandle {
                seq,
                cur: ExtProps::default(),
                pending: ExtPending::default(),
                done_once: false,
                window: None,
                paired: None,
            },
        );
    }

    pub(crate) fn ext_title(&mut self, key: u32, title: String) {
        if let Some(h) = self.ext.get_mut(&key) {
            h.pending.title = Some(bounded_title(title));
        }
    }

    pub(crate) fn ext_app_id(&mut self, key: u32, app_id: String) {
        if let Some(h) = self.ext.get_mut(&key) {
            h.pending.app_id = Some(bounded_app_id(app_id));
        }
    }

    pub(crate) fn ext_identifier(&mut self, key: u32, identifier: String) {
        if let Some(h) = self.ext.get_mut(&key) {
            // The identifier is sent once and never changes; bound what is
            // kept before it is sanitised at `done`.
            let mut identifier = identifier;
            if identifier.len() > 4 * MAX_IDENTIFIER_CHARS {
                identifier = sanitize_identifier(&identifier);
            }
            h.pending.identifier = Some(identifier);
        }
    }

    pub(crate) fn ext_done(&mut self, key: u32) {
        let Some(h) = self.ext.get_mut(&key) else {
            return;
        };
        let p = std::mem::take(&mut h.pending);
        let before = h.cur.clone();
        if let Some(t) = p.title {
            h.cur.title = t;
        }
        if let Some(a) = p.app_id {
            h.cur.app_id = a;
        }
        if h.cur.identifier.is_none() {
            h.cur.identifier = p.identifier;
        }
        let first = !h.done_once;
        h.done_once = true;
        if !first && before == h.cur {
            return;
        }
        if !self.ext_mode {
            return;
        }
        if self.ext.get(&key).is_some_and(|h| h.window.is_none()) {
            let (seq, ident) = self
                .ext
                .get(&key)
                .map(|h| (h.seq, h.cur.identifier.clone()))
                .unwrap_or_default();
            let part = match ident {
                Some(i) => sanitize_identifier(&i),
                // A compositor that sends no identifier breaks the
                // protocol; still give the window a unique id.
                None => format!("n{seq}"),
            };
            let mut id = format!("ext-{}-{part}", self.generation);
            if self.owners.contains_key(&id) {
                id = format!("{id}-{seq}");
            }
            let meta = self.new_meta(id.clone());
            if let Some(h) = self.ext.get_mut(&key) {
                h.window = Some(meta);
            }
            self.owners.insert(id, Owner::Ext(key));
        }
        if self.ext.get(&key).is_some_and(|h| h.paired.is_none()) {
            self.try_pair_ext(key);
        }
        self.mark_ext(key);
    }

    pub(crate) fn ext_closed(&mut self, key: u32) {
        let Some(h) = self.ext.remove(&key) else {
            return;
        };
        if let Some(w) = h.window {
            self.close(w.id);
        }
        if let Some(k) = h.paired
            && let Some(wh) = self.wlr.get_mut(&k)
        {
            wh.paired = None;
            wh.orphan = true;
        }
    }

    pub(crate) fn ext_finished(&mut self) {
        let keys: Vec<u32> = self.ext.keys().copied().collect();
        for k in keys {
            self.ext_closed(k);
        }
    }

    fn mark_ext(&mut self, key: u32) {
        if let Some(w) = self.ext.get(&key).and_then(|h| h.window.as_ref()) {
            self.dirty.insert(w.id.clone());
        }
    }

    // ------------------------------------------------------------ pairing

    fn try_pair_ext(&mut self, ext_key: u32) {
        let Some(e) = self.ext.get(&ext_key) else {
            return;
        };
        let (app_id, title) = (&e.cur.app_id, &e.cur.title);
        let best = self
            .wlr
            .iter()
            .filter(|(_, w)| {
                w.done_once
                    && w.paired.is_none()
                    && !w.orphan
                    && w.cur.app_id == *app_id
                    && w.cur.title == *title
            })
            .min_by_key(|(_, w)| w.seq)
            .map(|(k, _)| *k);
        if let Some(wk) = best {
            self.pair(ext_key, wk);
        }
    }

    fn try_pair_wlr(&mut self, wlr_key: u32) {
        let Some(w) = self.wlr.get(&wlr_key) else {
            return;
        };
        if w.orphan {
            return;
        }
        let (app_id, title) = (&w.cur.app_id, &w.cur.title);
        let best = self
            .ext
            .iter()
            .filter(|(_, e)| {
                e.done_once
                    && e.paired.is_none()
                    && e.cur.app_id == *app_id
                    && e.cur.title == *title
            })
            .min_by_key(|(_, e)| e.seq)
            .map(|(k, _)| *k);
        if let Some(ek) = best {
            self.pair(ek, wlr_key);
        }
    }

    fn pair(&mut self, ext_key: u32, wlr_key: u32) {
        if let Some(e) = self.ext.get_mut(&ext_key) {
            e.paired = Some(wlr_key);
        }
        if let Some(w) = self.wlr.get_mut(&wlr_key) {
            w.paired = Some(ext_key);
        }
        self.mark_ext(ext_key);
    }

    // ------------------------------------------------------------ output

    fn close(&mut self, id: String) {
        self.owners.remove(&id);
        self.dirty.remove(&id);
        if self.reported.remove(&id) {
            self.closed.push(id);
        }
    }

    fn window_id_of_wlr(&self, key: u32) -> Option<String> {
        let h = self.wlr.get(&key)?;
        if self.ext_mode {
            let e = self.ext.get(&h.paired?)?;
            e.window.as_ref().map(|w| w.id.clone())
        } else {
            h.window.as_ref().map(|w| w.id.clone())
        }
    }

    fn output_names(&self, outs: &[u32]) -> Vec<String> {
        outs.iter()
            .map(|o| {
                self.outputs
                    .get(o)
                    .cloned()
                    .unwrap_or_else(|| format!("output-{o}"))
            })
            .collect()
    }

    /// Resolve (and cache on the window) the desktop entry of `app_id`.
    fn app_info(
        &mut self,
        owner: Owner,
        app_id: &str,
        process: Option<&WindowProcess>,
    ) -> Option<AppInfo> {
        let cached = match owner {
            Owner::Wlr(k) => self.wlr.get(&k).and_then(|h| h.window.as_ref()),
            Owner::Ext(k) => self.ext.get(&k).and_then(|h| h.window.as_ref()),
        }
        .and_then(|w| w.app.clone());
        if let Some(((a, p), info)) = cached
            && a == app_id
            && p.as_ref() == process
        {
            return info;
        }
        let info = (self.resolver)(app_id, process);
        let meta = match owner {
            Owner::Wlr(k) => self.wlr.get_mut(&k).and_then(|h| h.window.as_mut()),
            Owner::Ext(k) => self.ext.get_mut(&k).and_then(|h| h.window.as_mut()),
        };
        if let Some(m) = meta {
            m.app = Some(((app_id.to_owned(), process.cloned()), info.clone()));
        }
        info
    }

    fn render(&mut self, id: &str) -> Option<Window> {
        let owner = *self.owners.get(id)?;
        let (app_id, title, states, outputs, parent, first_seen, known) = match owner {
            Owner::Wlr(k) => {
                let h = self.wlr.get(&k)?;
                let w = h.window.as_ref()?;
                (
                    h.cur.app_id.clone(),
                    h.cur.title.clone(),
                    h.cur.states,
                    self.output_names(&h.cur.outputs),
                    h.cur.parent.and_then(|p| self.window_id_of_wlr(p)),
                    w.first_seen,
                    w.known.clone().unwrap_or_default(),
                )
            }
            Owner::Ext(k) => {
                let h = self.ext.get(&k)?;
                let w = h.window.as_ref()?;
                let wlr = h.paired.and_then(|p| self.wlr.get(&p));
                (
                    h.cur.app_id.clone(),
                    h.cur.title.clone(),
                    wlr.map(|w| w.cur.states).unwrap_or_default(),
                    wlr.map(|w| self.output_names(&w.cur.outputs))
                        .unwrap_or_default(),
                    wlr.and_then(|w| w.cur.parent)
                        .and_then(|p| self.window_id_of_wlr(p)),
                    w.first_seen,
                    w.known.clone().unwrap_or_default(),
                )
            }
        };
        let (app_name, icon) = match self.app_info(owner, &app_id, known.process.as_ref()) {
            Some(i) => (Some(i.name), i.icon),
            None => (None, None),
        };
        Some(Window {
            id: id.to_owned(),
            app_id,
            app_name,
            icon,
            title,
            states,
            outputs,
            parent,
            first_seen,
            last_focused: None,
            attributed_by: WindowAttribution::Compositor,
            title_hidden: None,
            process: known.process,
            sandbox: known.sandbox,
        })
    }

    /// Events of a flush that the core had no room for: marked again, so
    /// that the next flush gives each window's newest state (and the
    /// closes, first among the closes, in their order). Under a flood this
    /// is where changes coalesce, per window, instead of queueing.
    pub(crate) fn unsent(&mut self, events: impl IntoIterator<Item = SourceEvent>) {
        let mut closed = Vec::new();
        for ev in events {
            match ev {
                SourceEvent::Window { window } => {
                    self.dirty.insert(window.id);
                }
                SourceEvent::WindowClosed { id } => closed.push(id),
                _ => {}
            }
        }
        closed.append(&mut self.closed);
        self.closed = closed;
    }

    /// What changed since the last flush. Windows that became active come
    /// first, then closed windows, then the other changes, so that a focus
    /// move (or the close of the focused window) never shows as "no focus"
    /// in between.
    pub(crate) fn flush(&mut self) -> Vec<SourceEvent> {
        let dirty = std::mem::take(&mut self.dirty);
        let closed = std::mem::take(&mut self.closed);
        self.ask_finder(&dirty);
        let mut active = Vec::new();
        let mut rest = Vec::new();
        for id in dirty {
            if let Some(w) = self.render(&id) {
                self.reported.insert(id);
                if w.states.activated {
                    active.push(w);
                } else {
                    rest.push(w);
                }
            }
        }
        let mut out = Vec::with_capacity(active.len() + closed.len() + rest.len());
        out.extend(
            active
                .into_iter()
                .map(|window| SourceEvent::Window { window }),
        );
        out.extend(
            closed
                .into_iter()
                .map(|id| SourceEvent::WindowClosed { id }),
        );
        out.extend(
            rest.into_iter()
                .map(|window| SourceEvent::Window { window }),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(ext: bool) -> Tracker {
        Tracker::new(
            3,
            ext,
            Box::new(|a: &str, _: Option<&WindowProcess>| {
                (a == "org.known.App").then(|| AppInfo {
                    desktop_id: "org.known.App.desktop".into(),
                    name: "Known".into(),
                    icon: Some("known-icon".into()),
                    program: None,
                })
            }),
        )
    }

    fn windows(ev: &[SourceEvent]) -> Vec<&Window> {
        ev.iter()
            .filter_map(|e| match e {
                SourceEvent::Window { window } => Some(window),
                _ => None,
            })
            .collect()
    }

    fn wlr_open(t: &mut Tracker, key: u32, app: &str, title: &str, states: &[u32]) {
        t.wlr_new(key);
        t.wlr_app_id(key, app.into());
        t.wlr_title(key, title.into());
        t.wlr_state(key, states);
        t.wlr_output_enter(key, 100);
        t.wlr_done(key);
    }

    fn ext_open(t: &mut Tracker, key: u32, ident: &str, app: &str, title: &str) {
        t.ext_new(key);
        t.ext_identifier(key, ident.into());
        t.ext_app_id(key, app.into());
        t.ext_title(key, title.into());
        t.ext_done(key);
    }

    #[test]
    fn wlr_windows_are_reported_at_done_only_and_with_stable_ids() {
        let mut t = tracker(false);
        t.output_name(100, "HEADLESS-1".into());
        t.wlr_new(7);
        t.wlr_app_id(7, "org.known.App".into());
        t.wlr_title(7, "half".into());
        assert!(t.flush().is_empty(), "nothing before done");
        t.wlr_state(7, &[WLR_ACTIVATED, WLR_MAXIMIZED]);
        t.wlr_output_enter(7, 100);
        t.wlr_done(7);
        let ev = t.flush();
        let w = windows(&ev)[0].clone();
        assert_eq!(w.id, "wl-3-1");
        assert_eq!(w.title, "half");
        assert_eq!(w.app_name.as_deref(), Some("Known"));
        assert_eq!(w.icon.as_deref(), Some("known-icon"));
        assert!(w.states.activated && w.states.maximized && !w.states.minimized);
        assert_eq!(w.outputs, vec!["HEADLESS-1"]);

        // A title change without done is not visible; with done it is, same id.
        t.wlr_title(7, "full".into());
        assert!(t.flush().is_empty());
        t.wlr_done(7);
        let ev = t.flush();
        assert_eq!(windows(&ev)[0].id, "wl-3-1");
        assert_eq!(windows(&ev)[0].title, "full");
        // A done with nothing new reports nothing.
        t.wlr_done(7);
        assert!(t.flush().is_empty());
        // Closed: reported once; a second window gets a new id.
        t.wlr_closed(7);
        assert_eq!(
            t.flush(),
            vec![SourceEvent::WindowClosed {
                id: "wl-3-1".into()
            }]
        );
        wlr_open(&mut t, 9, "a", "b", &[]);
        assert_eq!(windows(&t.flush())[0].id, "wl-3-2");
        assert_eq!(t.window_count(), 1);
    }

    /// What the core had no room for is offered again as each window's
    /// newest state, once, and the closes first, in their order: a flood
    /// coalesces per window in the tracker instead of queueing.
    #[test]
    fn what_the_core_had_no_room_for_comes_again_as_the_newest_state() {
        let mut t = tracker(false);
        wlr_open(&mut t, 1, "a", "A", &[WLR_ACTIVATED]);
        wlr_open(&mut t, 2, "b", "B", &[]);
        wlr_open(&mut t, 3, "c", "C", &[]);
        t.flush();
        // Window 1's title changes, window 2 and 3 close: none of it sent.
        t.wlr_title(1, "A1".into());
        t.wlr_done(1);
        t.wlr_closed(2);
        t.wlr_closed(3);
        let kept = t.flush();
        assert_eq!(kept.len(), 3);
        t.unsent(kept);
        // Meanwhile the title moves on twice.
        t.wlr_title(1, "A2".into());
        t.wlr_done(1);
        t.wlr_title(1, "A3".into());
        t.wlr_done(1);
        let ev = t.flush();
        let titles: Vec<&str> = windows(&ev).iter().map(|w| w.title.as_str()).collect();
        assert_eq!(titles, vec!["A3"], "one newest state, not each step");
        let closed: Vec<&SourceEvent> = ev
            .iter()
            .filter(|e| matches!(e, SourceEvent::WindowClosed { .. }))
            .collect();
        assert_eq!(
            closed,
            vec![
                &SourceEvent::WindowClosed {
                    id: "wl-3-2".into()
                },
                &SourceEvent::WindowClosed {
                    id: "wl-3-3".into()
                },
            ]
        );
        assert!(t.flush().is_empty(), "nothing twice");
    }

    #[test]
    fn focus_move_reports_the_new_active_window_first() {
        let mut t = tracker(false);
        wlr_open(&mut t, 1, "a", "A", &[WLR_ACTIVATED]);
        wlr_open(&mut t, 2, "b", "B", &[]);
        t.flush();
        // The compositor deactivates the old one first.
        t.wlr_state(1, &[]);
        t.wlr_done(1);
        t.wlr_state(2, &[WLR_ACTIVATED]);
        t.wlr_done(2);
        let ev = t.flush();
        let ws = windows(&ev);
        assert_eq!(ws.len(), 2);
        assert_eq!(ws[0].id, "wl-3-2");
        assert!(ws[0].states.activated);
        assert!(!ws[1].states.activated);

        // Closing the focused window while another gets focus: the new
        // active one comes before the close.
        t.wlr_closed(2);
        t.wlr_state(1, &[WLR_ACTIVATED]);
        t.wlr_done(1);
        let ev = t.flush();
        assert!(matches!(&ev[0], SourceEvent::Window { window } if window.id == "wl-3-1"));
        assert_eq!(
            ev[1],
            SourceEvent::WindowClosed {
                id: "wl-3-2".into()
            }
        );
    }

    #[test]
    fn closed_before_first_flush_is_never_reported() {
        let mut t = tracker(false);
        wlr_open(&mut t, 1, "a", "A", &[]);
        t.wlr_closed(1);
        assert!(t.flush().is_empty());
        assert_eq!(t.window_count(), 0);
    }

    #[test]
    fn long_titles_and_app_ids_are_bounded_in_the_source() {
        let mut t = tracker(false);
        wlr_open(&mut t, 1, &"a".repeat(10_000), &"é".repeat(100 * 1024), &[]);
        let ev = t.flush();
        let w = windows(&ev)[0];
        assert!(w.title.ends_with(crate::core::state::TRUNCATION_MARKER));
        assert!(w.title.chars().count() <= crate::core::state::MAX_TEXT_CHARS + 20);
        assert_eq!(w.app_id.chars().count(), MAX_APP_ID_CHARS);
    }

    #[test]
    fn parent_and_outputs_follow_handles() {
        let mut t = tracker(false);
        t.output_name(100, "HEADLESS-1".into());
        wlr_open(&mut t, 1, "a", "main", &[]);
        t.wlr_new(2);
        t.wlr_app_id(2, "a".into());
        t.wlr_title(2, "dialog".into());
        t.wlr_parent(2, Some(1));
        t.wlr_done(2);
        let ev = t.flush();
        let dialog = windows(&ev)
            .into_iter()
            .find(|w| w.title == "dialog")
            .cloned();
        assert_eq!(dialog.and_then(|d| d.parent).as_deref(), Some("wl-3-1"));
        t.wlr_output_leave(1, 100);
        t.wlr_done(1);
        assert!(windows(&t.flush())[0].outputs.is_empty());
        t.wlr_output_enter(1, 100);
        t.wlr_done(1);
        t.output_removed(100);
        assert!(windows(&t.flush())[0].outputs.is_empty());
    }

    #[test]
    fn ext_identifier_is_the_window_id_and_states_come_from_wlr() {
        let mut t = tracker(true);
        t.output_name(100, "HEADLESS-1".into());
        // The compositor announces each toplevel on both protocols.
        ext_open(&mut t, 10, "a1b2c3", "org.known.App", "Doc");
        wlr_open(&mut t, 20, "org.known.App", "Doc", &[WLR_ACTIVATED]);
        ext_open(&mut t, 11, "d4e5f6", "org.other", "Other");
        wlr_open(&mut t, 21, "org.other", "Other", &[]);
        let ev = t.flush();
        let ws = windows(&ev);
        assert_eq!(ws.len(), 2, "one window per ext handle, not per handle");
        assert_eq!(ws[0].id, "ext-3-a1b2c3");
        assert!(ws[0].states.activated);
        assert_eq!(ws[0].outputs, vec!["HEADLESS-1"]);
        assert_eq!(ws[0].app_name.as_deref(), Some("Known"));
        assert_eq!(ws[1].id, "ext-3-d4e5f6");
        assert!(!ws[1].states.activated);

        // Focus moves (wlr), the ids stay the ext ones.
        t.wlr_state(20, &[]);
        t.wlr_done(20);
        t.wlr_state(21, &[WLR_ACTIVATED]);
        t.wlr_done(21);
        let ev = t.flush();
        let ws = windows(&ev);
        assert_eq!(ws[0].id, "ext-3-d4e5f6");
        assert!(ws[0].states.activated);
        assert_eq!(ws[1].id, "ext-3-a1b2c3");

        // A title change arrives on both; the ext window changes once.
        t.ext_title(10, "Doc 2".into());
        t.ext_done(10);
        t.wlr_title(20, "Doc 2".into());
        t.wlr_done(20);
        let ev = t.flush();
        assert_eq!(windows(&ev).len(), 1);
        assert_eq!(windows(&ev)[0].title, "Doc 2");

        // Close: the ext handle decides.
        t.ext_closed(11);
        t.wlr_closed(21);
        assert_eq!(
            t.flush(),
            vec![SourceEvent::WindowClosed {
                id: "ext-3-d4e5f6".into()
            }]
        );
    }

    #[test]
    fn ext_pairs_same_title_windows_in_order_and_works_without_wlr() {
        let mut t = tracker(true);
        // wlr handles first this time, two identical toplevels.
        wlr_open(&mut t, 20, "foot", "~", &[]);
        wlr_open(&mut t, 21, "foot", "~", &[WLR_ACTIVATED]);
        assert!(
            t.flush().is_empty(),
            "wlr handles alone make no window in ext mode"
        );
        ext_open(&mut t, 10, "one", "foot", "~");
        ext_open(&mut t, 11, "two", "foot", "~");
        let ev = t.flush();
        let ws = windows(&ev);
        let one = ws.iter().find(|w| w.id == "ext-3-one").expect("one");
        let two = ws.iter().find(|w| w.id == "ext-3-two").expect("two");
        assert!(!one.states.activated && two.states.activated);

        // An ext-only compositor: windows without states.
        let mut t = tracker(true);
        ext_open(&mut t, 10, "x", "a", "A");
        let ev = t.flush();
        assert_eq!(windows(&ev)[0].id, "ext-3-x");
        assert_eq!(windows(&ev)[0].states, WindowStates::default());
        t.ext_finished();
        assert_eq!(
            t.flush(),
            vec![SourceEvent::WindowClosed {
                id: "ext-3-x".into()
            }]
        );
    }

    #[test]
    fn odd_identifiers_are_sanitised_and_unique() {
        let mut t = tracker(true);
        ext_open(&mut t, 1, "has space", "a", "A");
        ext_open(&mut t, 2, &"z".repeat(10_000), "a", "B");
        ext_open(&mut t, 3, "", "a", "C");
        let ev = t.flush();
        let ids: Vec<&str> = windows(&ev).iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids.len(), 3);
        for id in &ids {
            assert!(
                id.len() < 40 && id.bytes().all(|b| b.is_ascii_graphic()),
                "{id}"
            );
        }
        assert!(ids.iter().collect::<HashSet<_>>().len() == 3);
        assert_ne!(
            sanitize_identifier("has space"),
            sanitize_identifier("has  space")
        );
    }

    /// The finder is asked once per new window, all of a flush together,
    /// and what it found stays with the window; without an answer the
    /// window has no process (it is `claimed`).
    #[test]
    fn the_finder_is_asked_once_per_window_and_its_answer_kept() {
        use crate::model::{AppId, IdentitySource};
        use std::sync::{Arc, Mutex};
        let asked: Arc<Mutex<Vec<Ask>>> = Arc::default();
        let log = asked.clone();
        let finder: Finder = Box::new(move |asks: &[Ask]| {
            log.lock().expect("lock").extend(asks.iter().cloned());
            asks.iter()
                .map(|a| Found {
                    process: (a.identifier.as_deref() == Some("a")).then(|| WindowProcess {
                        app_id: AppId::new("exe:/usr/bin/python3").expect("id"),
                        source: IdentitySource::Executable,
                    }),
                    sandbox: None,
                })
                .collect()
        });
        let mut t = tracker(true).with_finder(Some(finder));
        ext_open(&mut t, 1, "a", "org.mozilla.firefox", "Home");
        ext_open(&mut t, 2, "b", "org.gnome.Nautilus", "Files");
        let ev = t.flush();
        let ws = windows(&ev);
        let a = ws.iter().find(|w| w.id == "ext-3-a").expect("a");
        assert_eq!(a.app_id, "org.mozilla.firefox", "the claim stays the claim");
        assert_eq!(
            a.process.as_ref().map(|p| p.app_id.as_str()),
            Some("exe:/usr/bin/python3")
        );
        let b = ws.iter().find(|w| w.id == "ext-3-b").expect("b");
        assert_eq!(b.process, None);
        assert_eq!(asked.lock().expect("lock").len(), 2);
        t.ext_title(1, "Other".into());
        t.ext_done(1);
        let ev = t.flush();
        assert_eq!(
            windows(&ev)[0].process.as_ref().map(|p| p.app_id.as_str()),
            Some("exe:/usr/bin/python3"),
            "kept across changes"
        );
        assert_eq!(asked.lock().expect("lock").len(), 2, "not asked again");
    }

    #[test]
    fn ext_handles_are_ignored_when_not_in_ext_mode() {
        let mut t = tracker(false);
        ext_open(&mut t, 1, "x", "a", "A");
        assert!(t.flush().is_empty());
        assert!(!t.ext_mode());
    }
}

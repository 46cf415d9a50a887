//! The one change feed every publisher formats: a D-Bus subscription's
//! signals, an MCP session's notifications, the dashboard's server-sent
//! events. [`Watches::watch`] gives a reader a [`Watch`]; its
//! [`Watch::next`] yields what that reader may learn, already decided:
//! changes rendered for what it may see, that it fell behind (told, never
//! skipped in silence), that decisions or the pause changed, that it lost
//! consent or the user ended it, and that the core stops. The lag, the
//! gate's generation, revocation and the reader's registration in
//! `Consent1.ListReaders` live here once; publishers only format.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::gate::Gate;
use super::notice::{Listener, Part};
use super::readers::{ReaderInfo, Readers, Registration};
use super::state::{Change, State};
use super::view::{self, ChangeView};
use crate::model::{AppId, Category};

/// Who watches.
#[derive(Debug, Clone)]
pub(crate) enum Watcher {
    /// An app: it sees what it may see on a lasting grant, or on a
    /// one-time grant in `held` (those its subscription used up).
    App { app: AppId, held: Vec<Category> },
    /// The user's own surface (the dashboard): every change, and what
    /// changed of what the user controls ([`Item::Control`]).
    Owner,
}

/// Which changes a watch carries.
#[derive(Debug, Clone)]
pub(crate) enum Follow {
    /// Every category (an MCP session, which picks by resource itself).
    /// Decisions changing never end such a watch.
    All,
    /// These categories (a detail category follows its base's changes
    /// too). The watch ends with [`Item::Revoked`] when the app may no
    /// longer see one of them.
    Only(Vec<Category>),
}

/// What a reader hears.
#[derive(Debug)]
pub(crate) enum Item {
    /// A change the reader may see, rendered as it may see it. `change`
    /// is the change itself, for the publisher to name what it touches
    /// (an MCP resource's URI); only `view` goes on a wire.
    Changed {
        category: Category,
        view: Arc<ChangeView>,
        change: Arc<Change>,
    },
    /// A source's health changed (needs no consent).
    Sources,
    /// The feed fell behind and dropped `missed` changes (of every
    /// category, so the number is for logs, never for a reader): what the
    /// reader follows may have changed unseen, it should read it again.
    /// The backlog is dropped with it: what follows is current. A reader
    /// that falls `[limits] change_feed` behind again within a second
    /// hears one more `Lagged` at the end of that second, not one per
    /// burst.
    Lagged { missed: u64 },
    /// Decisions changed (a grant, policy.toml, an expiry): what the
    /// reader may see may differ now.
    GateChanged,
    /// The user paused sharing (every reader hears it; a watch that
    /// follows categories ends with [`Item::Revoked`] right after).
    Paused,
    /// The user resumed sharing.
    Resumed,
    /// Parts of what the user controls moved (owner watches only),
    /// gathered as [`Listener`] gathers them.
    Control(Vec<Part>),
    /// The app may no longer see `category`; the watch is over.
    Revoked { category: Category },
    /// The user ended this reader (`Consent1.EndReader`, the dashboard);
    /// the watch is over.
    EndedByUser,
    /// The core stops; the watch is over.
    Ended,
}

impl Item {
    /// Whether nothing follows this item.
    pub(crate) fn is_last(&self) -> bool {
        matches!(self, Item::Revoked { .. } | Item::EndedByUser | Item::Ended)
    }
}

/// One reader's feed; see [`Watches::watch`].
#[derive(Debug)]
pub(crate) struct Watch {
    watches: Watches,
    who: Watcher,
    follow: Follow,
    rx: broadcast::Receiver<Arc<Change>>,
    generation: watch::Receiver<u64>,
    paused: bool,
    control: Option<Listener>,
    stop: CancellationToken,
    reader: Option<Arc<Registration>>,
    queue: VecDeque<Item>,
    over: bool,
    /// When the last `Lagged` was given, and whether the feed fell behind
    /// again since (told at the end of [`LAG_QUIET`]).
    lagged_at: Option<tokio::time::Instant>,
    lag_again: Option<u64>,
    /// Changes taken in a row without waiting ([`Watch::take_ready`]).
    ready_run: u8,
    /// The categories whose changes the publisher wants rendered now
    /// ([`Watch::interested`]); `None`: all it follows.
    interest: Option<Wants>,
}

/// An [`Interest`], shown by its presence alone.
struct Wants(Interest);

impl std::fmt::Debug for Wants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Wants(..)")
    }
}

/// Whether a publisher wants the changes of a category now: an MCP
/// session wants only those of the resources it subscribed to. Asked for
/// each change before it is rendered for the reader, so a reader that
/// follows nothing now costs no rendering (200 sessions that never
/// subscribe rendered every focus change each, the MCP threads' main cost
/// under `make soak`).
pub(crate) type Interest = Arc<dyn Fn(&Category) -> bool + Send + Sync>;

/// At most this many changes are taken in a row without the wait, which
/// yields to other tasks when the runtime's budget is spent.
const READY_RUN: u8 = 16;

/// Falling behind again within this long after a `Lagged` is told once,
/// at its end: a reader in a storm of changes hears one `Lagged`, not one
/// per burst.
const LAG_QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// The watches' handle: gives a reader its feed of changes
/// ([`Watches::watch`]). It holds what a feed follows: the state's
/// changes, the gate (consent, the pause, the notices of the user's
/// controls), the readers listed in `Consent1.ListReaders`, the clock,
/// the views shared between readers ([`Rendered`]) and the publishers'
/// level of the shutdown tree (a feed ends when it stops).
#[derive(Debug, Clone)]
pub(crate) struct Watches {
    state: Arc<State>,
    gate: Arc<Gate>,
    readers: Readers,
    clock: Arc<dyn Clock>,
    tasks: crate::shutdown::Level,
    rendered: Arc<Rendered>,
}

impl Watches {
    pub(crate) fn new(
        state: Arc<State>,
        gate: Arc<Gate>,
        readers: Readers,
        clock: Arc<dyn Clock>,
        tasks: crate::shutdown::Level,
    ) -> Self {
        Watches {
            state,
            gate,
            readers,
            clock,
            tasks,
            rendered: Arc::default(),
        }
    }

    /// A feed of what `who` may learn of changes in `follow`, from now
    /// until it is dropped, the user ends it, it loses consent, or the
    /// core stops.
    pub(crate) fn watch(&self, who: Watcher, follow: Follow) -> Watch {
        let control = matches!(who, Watcher::Owner).then(|| Listener::new(&self.gate.notices));
        Watch {
            watches: self.clone(),
            who,
            follow,
            rx: self.state.subscribe(),
            generation: self.gate.watch_generation(),
            paused: self.gate.paused(),
            control,
            stop: self.tasks.token(),
            reader: None,
            queue: VecDeque::new(),
            over: false,
            lagged_at: None,
            lag_again: None,
            ready_run: 0,
            interest: None,
        }
    }

    /// The first of `categories` that `app` may no longer see (a live
    /// subscription ends then), if any. `held` are the one-time grants the
    /// subscription used up when it was made
    /// ([`super::read::Reads::subscribe_access`]): they last as long as it
    /// does, until a pause or a deny.
    fn withdrawn(
        &self,
        app: &AppId,
        categories: &[Category],
        held: &[Category],
    ) -> Option<Category> {
        categories
            .iter()
            .find(|c| !self.streams(app, c, held))
            .cloned()
    }

    /// Whether a stream of changes (a subscription, a host's listen) may
    /// carry `c` to `app`: on a lasting grant, or on a one-time grant the
    /// subscription itself used up. A signal is a look: it never uses a
    /// one-time grant, so one not used yet does not count.
    fn streams(&self, app: &AppId, c: &Category, held: &[Category]) -> bool {
        self.gate.allows_lasting(app, c) || (held.contains(c) && self.gate.holds(app, c))
    }

    /// One change as subscriber `app` may see it, or `None` when it must
    /// not be sent (looks only: subscribing was the access). Only what
    /// `app` may see on a lasting grant, or on a one-time grant in `held`
    /// (see [`Watches::withdrawn`]).
    fn change_for_held(&self, app: &AppId, held: &[Category], c: &Arc<Change>) -> Seen {
        self.rendered
            .view(c, &|cat: &Category| self.streams(app, cat, held))
    }
}

impl Watch {
    /// List this reader in `Consent1.ListReaders` while the watch lives;
    /// the user ending it cancels `end` and the watch yields
    /// [`Item::EndedByUser`].
    pub(crate) fn register(mut self, info: ReaderInfo, end: CancellationToken) -> Watch {
        let now = self.watches.clock.now();
        self.reader = Some(Arc::new(self.watches.readers.start(info, now, end)));
        self
    }

    /// Render only the changes of categories `interest` wants (asked at
    /// each change, so it may follow what the reader subscribes to).
    pub(crate) fn interested(mut self, interest: Interest) -> Watch {
        self.interest = Some(Wants(interest));
        self
    }

    /// The app it watches for (`None` for the owner).
    pub(crate) fn app(&self) -> Option<&AppId> {
        match &self.who {
            Watcher::App { app, .. } => Some(app),
            Watcher::Owner => None,
        }
    }

    /// The reader's registration, for a publisher whose reader follows
    /// more as it goes (an MCP session subscribing).
    pub(crate) fn registration(&self) -> Option<Arc<Registration>> {
        self.reader.clone()
    }

    /// The next item; `None` once the watch is over (after its last item).
    /// Cancel-safe: an item is never lost when the future is dropped.
    pub(crate) async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                if item.is_last() {
                    self.over = true;
                    self.queue.clear();
                }
                return Some(item);
            }
            if self.over {
                return None;
            }
            if self.take_ready() {
                continue;
            }
            self.ready_run = 0;
            let ended = self.reader.as_ref().map(|r| r.ended().clone());
            let ended = async {
                match ended {
                    Some(t) => t.cancelled_owned().await,
                    None => std::future::pending().await,
                }
            };
            let control = async {
                match self.control.as_mut() {
                    Some(l) => l.next(&CancellationToken::new()).await,
                    None => std::future::pending().await,
                }
            };
            let told_again = self
                .lagged_at
                .map(|t| t + LAG_QUIET)
                .filter(|_| self.lag_again.is_some());
            let told_again = async {
                match told_again {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => self.queue.push_back(Item::Ended),
                _ = told_again => {
                    let missed = self.lag_again.take().unwrap_or_default();
                    self.lagged_at = Some(tokio::time::Instant::now());
                    self.queue.push_back(Item::Lagged { missed });
                }
                _ = ended => self.queue.push_back(Item::EndedByUser),
                r = self.generation.changed() => match r {
                    Ok(()) => self.gate_changed(),
                    Err(_) => self.queue.push_back(Item::Ended),
                },
                parts = control => match parts {
                    Some(p) => self.queue.push_back(Item::Control(p)),
                    None => self.queue.push_back(Item::Ended),
                },
                msg = self.rx.recv() => self.received(msg),
            }
        }
    }

    /// Take a change that is already waiting, as the wait in
    /// [`Watch::next`] would take it now: only when nothing it puts
    /// before changes is pending (the stop, a `Lagged` to tell again, the
    /// user ending the reader, decisions changing; owner watches always
    /// wait). `false` when there is none: then the wait decides.
    ///
    /// Why: a focus change is three changes, and setting up the wait for
    /// each (six futures, a waiter registered and dropped on each token)
    /// cost more than the change itself once it was there (issue 33).
    fn take_ready(&mut self) -> bool {
        use broadcast::error::{RecvError, TryRecvError};
        if self.control.is_some()
            || self.ready_run >= READY_RUN
            || self.lag_again.is_some()
            || self.stop.is_cancelled()
            || self
                .reader
                .as_ref()
                .is_some_and(|r| r.ended().is_cancelled())
            || self.generation.has_changed().unwrap_or(true)
        {
            return false;
        }
        let msg = match self.rx.try_recv() {
            Ok(c) => Ok(c),
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Lagged(missed)) => Err(RecvError::Lagged(missed)),
            Err(TryRecvError::Closed) => Err(RecvError::Closed),
        };
        self.ready_run += 1;
        self.received(msg);
        true
    }

    /// What the change feed gave.
    fn received(&mut self, msg: Result<Arc<Change>, broadcast::error::RecvError>) {
        match msg {
            Ok(c) => self.changed(c),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                // What is still queued is stale too: skip to now, so that
                // the reader hears one `Lagged` and then only what changes
                // from the current state on (never a replay of a backlog).
                self.rx = self.rx.resubscribe();
                let now = tokio::time::Instant::now();
                if self.lagged_at.is_some_and(|t| now < t + LAG_QUIET) {
                    *self.lag_again.get_or_insert(0) += missed;
                } else {
                    self.lagged_at = Some(now);
                    self.queue.push_back(Item::Lagged { missed });
                }
            }
            Err(broadcast::error::RecvError::Closed) => self.queue.push_back(Item::Ended),
        }
    }

    fn gate_changed(&mut self) {
        let paused = self.watches.gate.paused();
        if paused != self.paused {
            self.paused = paused;
            self.queue
                .push_back(if paused { Item::Paused } else { Item::Resumed });
        } else {
            self.queue.push_back(Item::GateChanged);
        }
        if let (Watcher::App { app, held }, Follow::Only(categories)) = (&self.who, &self.follow)
            && let Some(category) = self.watches.withdrawn(app, categories, held)
        {
            self.queue.push_back(Item::Revoked { category });
        }
    }

    fn changed(&mut self, change: Arc<Change>) {
        let Some(cat) = change.category() else {
            if matches!(self.follow, Follow::All) {
                self.queue.push_back(Item::Sources);
            }
            return;
        };
        if let Follow::Only(categories) = &self.follow
            && !categories
                .iter()
                .any(|c| *c == cat || c.base().as_ref() == Some(&cat))
        {
            return;
        }
        if self
            .interest
            .as_ref()
            .is_some_and(|Wants(wants)| !wants(&cat))
        {
            return;
        }
        let seen = match &self.who {
            Watcher::App { app, held } => self.watches.change_for_held(app, held, &change),
            Watcher::Owner => self.watches.rendered.view(&change, &|_: &Category| true),
        };
        if let Some((category, view)) = seen {
            self.queue.push_back(Item::Changed {
                category,
                view,
                change,
            });
        }
    }
}

/// How many recent changes [`Rendered`] keeps views of.
const RENDERED_SLOTS: usize = 64;

/// The views of the last few changes, each with the answers that decided
/// it: one change reaches every reader, and readers with the same grants
/// (most of them) see the same view of it. The first reader's view is
/// rendered (`view::change`) with every question it asked of the reader's
/// grants recorded; a later reader whose own grants answer each of those
/// questions the same gets the same view, shared, without rendering it
/// again. Rendering is a function of the change and those answers alone
/// (it asks nothing else), so the shared view is exactly the one the
/// reader's own rendering would make; every reader's grants are still
/// asked, each time, for each change.
///
/// Why: rendering every change for each of 250 readers (cloning a
/// window's names and title per reader) was a tenth of the daemon's time
/// in the fan-out of one focus change (issue 33).
///
/// The slots go once the fan-out is over: a view is only worth keeping
/// while readers are still to render the same change, and kept after a
/// burst the last [`RENDERED_SLOTS`] changes' views (every window's names
/// and titles) stayed on the heap for good (heaptrack, `make soak`: 77 KB
/// after the load). [`Rendered::release_idle`], on the memory tick
/// (`crate::memory`), drops them when no reader rendered anything since
/// the tick before.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    slots: Mutex<VecDeque<Slot>>,
    /// A view was asked for since the last [`Rendered::release_idle`].
    used: std::sync::atomic::AtomicBool,
}

/// One change's views so far.
#[derive(Debug)]
struct Slot {
    change: Arc<Change>,
    views: Vec<(Asked, Seen)>,
}

/// The questions a rendering asked of a reader's grants, with the answers,
/// in order.
type Asked = Vec<(Category, bool)>;
/// What a reader sees of a change: nothing, or a view in a category.
pub(crate) type Seen = Option<(Category, Arc<ChangeView>)>;

impl Rendered {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `change` as a reader whose grants are `can` sees it (see
    /// [`view::change`]).
    pub(crate) fn view(&self, change: &Arc<Change>, can: view::Can<'_>) -> Seen {
        self.used.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(slot) = self.lock().iter().find(|s| Arc::ptr_eq(&s.change, change)) {
            for (asked, seen) in &slot.views {
                if asked.iter().all(|(c, answer)| can(c) == *answer) {
                    return seen.clone();
                }
            }
        }
        let asked = RefCell::new(Vec::new());
        let recording = |c: &Category| {
            let answer = can(c);
            asked.borrow_mut().push((c.clone(), answer));
            answer
        };
        let seen = view::change(change, &recording).map(|(c, v)| (c, Arc::new(v)));
        let mut slots = self.lock();
        match slots.iter_mut().find(|s| Arc::ptr_eq(&s.change, change)) {
            Some(slot) => slot.views.push((asked.into_inner(), seen.clone())),
            None => {
                if slots.len() >= RENDERED_SLOTS {
                    slots.pop_back();
                }
                slots.push_front(Slot {
                    change: change.clone(),
                    views: vec![(asked.into_inner(), seen.clone())],
                });
            }
        }
        seen
    }

    /// Drop every view when none was asked for since the last call (the
    /// readers are idle), giving back the slots' memory; `true` when it
    /// did. Under load a call only clears the mark, so the views stay
    /// shared.
    pub(crate) fn release_idle(&self) -> bool {
        if self.used.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let mut slots = self.lock();
        if slots.capacity() == 0 {
            return false;
        }
        *slots = VecDeque::new();
        true
    }
}

impl Watches {
    /// What gives back the views kept for readers when they are idle
    /// ([`Rendered::release_idle`]), for the memory tick. It holds the
    /// views only, not the feeds' state or shutdown level.
    pub(crate) fn idle_release(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let rendered = self.rendered.clone();
        move || rendered.release_idle()
    }

    /// The id of the focused window, for a publisher naming what a change
    /// it was given touches (MCP's `context://window/active`); never put
    /// on a wire by itself.
    pub(crate) fn active_window_id(&self) -> Option<String> {
        self.state.read(|s| s.active_window.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Window, WindowStates};

    fn focus(title: &str) -> Arc<Change> {
        Arc::new(Change::Focus {
            window: Some(Window {
                id: "w1".into(),
                app_id: "org.a".into(),
                app_name: None,
                icon: None,
                title: title.into(),
                states: WindowStates {
                    activated: true,
                    ..Default::default()
                },
                outputs: vec!["HEADLESS-1".into()],
                parent: None,
                first_seen: chrono::Utc::now(),
                last_focused: None,
                attributed_by: Default::default(),
                title_hidden: None,
                process: None,
                sandbox: None,
            }),
        })
    }

    /// Readers with the same grants share one view; a reader with other
    /// grants gets its own, exactly what rendering for it makes; one who
    /// may not see the category gets nothing; another change is rendered
    /// anew.
    #[test]
    fn a_view_is_shared_only_by_readers_whose_grants_answer_alike() {
        let r = Rendered::default();
        let c = focus("secret.txt");
        let titles = |c: &Category| matches!(c, Category::Windows | Category::WindowsTitles);
        let no_titles = |c: &Category| *c == Category::Windows;
        let nothing = |_: &Category| false;

        let (_, a) = r.view(&c, &titles).expect("seen");
        let (_, b) = r.view(&c, &titles).expect("seen");
        assert!(Arc::ptr_eq(&a, &b), "the same grants share the view");

        let (_, d) = r.view(&c, &no_titles).expect("seen");
        assert!(!Arc::ptr_eq(&a, &d));
        assert_eq!(
            Some(&*d),
            view::change(&c, &no_titles).map(|(_, v)| v).as_ref()
        );
        assert_eq!(
            Some(&*a),
            view::change(&c, &titles).map(|(_, v)| v).as_ref()
        );
        assert_ne!(*a, *d, "the title only where it may be seen");
        let (_, d2) = r.view(&c, &no_titles).expect("seen");
        assert!(Arc::ptr_eq(&d, &d2));

        assert!(r.view(&c, &nothing).is_none());
        assert!(r.view(&c, &nothing).is_none());

        let other = focus("another.txt");
        let (_, e) = r.view(&other, &titles).expect("seen");
        assert!(!Arc::ptr_eq(&a, &e), "another change, another view");
        assert_ne!(*a, *e);
    }

    /// After a burst of changes rendered for readers, the views go once
    /// the readers are idle for a tick, and not while they are busy.
    #[test]
    fn the_views_go_once_the_readers_are_idle() {
        let r = Rendered::default();
        let titles = |c: &Category| matches!(c, Category::Windows | Category::WindowsTitles);
        let mut kept = Vec::new();
        for i in 0..200 {
            let c = focus(&format!("title {i}"));
            assert!(r.view(&c, &titles).is_some());
            kept.push(c);
        }
        assert_eq!(r.lock().len(), RENDERED_SLOTS);
        // The tick during the burst: the readers rendered since the last.
        assert!(!r.release_idle());
        assert_eq!(r.lock().len(), RENDERED_SLOTS, "kept while in use");
        // The next tick, nothing rendered since: all given back.
        assert!(r.release_idle());
        assert_eq!(r.lock().len(), 0);
        assert_eq!(r.lock().capacity(), 0, "the memory, not only the items");
        // Rendering again works as before.
        let (_, a) = r.view(&kept[0], &titles).expect("seen");
        let (_, b) = r.view(&kept[0], &titles).expect("seen");
        assert!(Arc::ptr_eq(&a, &b));
    }
}

//! The one change feed every publisher formats: a D-Bus subscription's
//! signals, an MCP session's notifications, the dashboard's server-sent
//! events. [`Core::watch`] gives a reader a [`Watch`]; its
//! [`Watch::next`] yields what that reader may learn, already decided:
//! changes rendered for what it may see, that it fell behind (told, never
//! skipped in silence), that decisions or the pause changed, that it lost
//! consent or the user ended it, and that the core stops. The lag, the
//! gate's generation, revocation and the reader's registration in
//! `Consent1.ListReaders` live here once; publishers only format.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::Core;
use super::notice::{Listener, Part};
use super::readers::{ReaderInfo, Registration};
use super::state::Change;
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
        view: Box<ChangeView>,
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

/// One reader's feed; see [`Core::watch`].
#[derive(Debug)]
pub(crate) struct Watch {
    core: Arc<Core>,
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
}

/// Falling behind again within this long after a `Lagged` is told once,
/// at its end: a reader in a storm of changes hears one `Lagged`, not one
/// per burst.
const LAG_QUIET: std::time::Duration = std::time::Duration::from_secs(1);

impl Core {
    /// A feed of what `who` may learn of changes in `follow`, from now
    /// until it is dropped, the user ends it, it loses consent, or the
    /// core stops.
    pub(crate) fn watch(self: &Arc<Self>, who: Watcher, follow: Follow) -> Watch {
        let control = matches!(who, Watcher::Owner).then(|| Listener::new(&self.gate.notices));
        Watch {
            core: self.clone(),
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
        }
    }
}

impl Watch {
    /// List this reader in `Consent1.ListReaders` while the watch lives;
    /// the user ending it cancels `end` and the watch yields
    /// [`Item::EndedByUser`].
    pub(crate) fn register(mut self, info: ReaderInfo, end: CancellationToken) -> Watch {
        let now = self.core.clock.now();
        self.reader = Some(Arc::new(self.core.readers.start(info, now, end)));
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
                msg = self.rx.recv() => match msg {
                    Ok(c) => self.changed(c),
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        // What is still queued is stale too: skip to now,
                        // so that the reader hears one `Lagged` and then
                        // only what changes from the current state on
                        // (never a replay of a backlog).
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
                },
            }
        }
    }

    fn gate_changed(&mut self) {
        let paused = self.core.gate.paused();
        if paused != self.paused {
            self.paused = paused;
            self.queue
                .push_back(if paused { Item::Paused } else { Item::Resumed });
        } else {
            self.queue.push_back(Item::GateChanged);
        }
        if let (Watcher::App { app, held }, Follow::Only(categories)) = (&self.who, &self.follow)
            && let Some(category) = self.core.withdrawn(app, categories, held)
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
        let seen = match &self.who {
            Watcher::App { app, held } => self.core.change_for_held(app, held, &change),
            Watcher::Owner => view::change(&change, &|_: &Category| true),
        };
        if let Some((category, view)) = seen {
            self.queue.push_back(Item::Changed {
                category,
                view: Box::new(view),
                change,
            });
        }
    }
}

impl Core {
    /// The id of the focused window, for a publisher naming what a change
    /// it was given touches (MCP's `context://window/active`); never put
    /// on a wire by itself.
    pub(crate) fn active_window_id(&self) -> Option<String> {
        self.state.read(|s| s.active_window.clone())
    }
}

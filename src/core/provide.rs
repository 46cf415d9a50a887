//! What apps publish about themselves (org.contextd.Provider1): the core
//! decides who may publish what, keeps the rules and the limits, and turns
//! a publish into the same state change a source's event is, so that every
//! reader (D-Bus, MCP, subscriptions, the timeline) sees it through the
//! one read path.
//!
//! An entry belongs to the app the publisher identified from the caller's
//! credentials ([`Subject`]) and is keyed by its owner, an opaque name of
//! the publisher's connection (a D-Bus unique name), and its kind: only
//! that connection replaces or retracts it, and it lives as long as that
//! connection ([`Provide::provider_gone`]). Two connections of one app (two
//! processes of one executable, two windows of a Flatpak) can each
//! publish a kind; readers see one entry per app and kind, the one
//! published last, and when it goes (retracted, its connection closed)
//! the other one is shown again. The app's limits (the rate, the kinds)
//! count every connection of the app together.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::clock::Clock;
use super::error::{Error, Result};
use super::event::SourceEvent;
use super::gate::Gate;
use super::state::State;
use super::subject::Subject;
use super::view::time;
use super::vocabulary;
use crate::model::{AppId, ProvidedContext, ProvidedData};

/// Entries one app may have at once, over all its connections (each
/// connection's kinds count).
pub(crate) const MAX_KINDS_PER_APP: usize = 16;
/// Publishes per second one app may make, on average ...
pub(crate) const PUBLISHES_PER_SECOND: f64 = 10.0;
/// ... and in a burst.
pub(crate) const PUBLISH_BURST: f64 = 10.0;
/// What one app's entries may hold, over all its connections, in bytes
/// the broker holds for them ([`held`]): 256 KiB, four full-size entries
/// or a thousand small ones' worth, so that one app cannot take what
/// the broker keeps for everyone.
pub(crate) const MAX_APP_BYTES: usize = 256 * 1024;
/// What every app's entries may hold together (bytes, as [`held`]), so
/// that many apps cannot grow the daemon without bound: 16 MiB, 64 apps
/// at their budget.
pub(crate) const MAX_TOTAL_BYTES: usize = 16 * 1024 * 1024;
/// What an entry costs beyond its text and names: its place in its
/// connection's list, its slot in the state's map (what readers see),
/// the timestamps and the allocator's rounding, as heaptrack showed them
/// with the provider bench (1000 apps × 6 kinds); an estimate, so that
/// an app of many tiny entries is not counted as free.
const ENTRY_OVERHEAD: usize = 256;

/// The bytes an entry holds: its text once (shared by the state, the
/// changes and the readers), the names it is kept under (the app id, the
/// connection's name and the kind, each counted once per entry although
/// its entries share them) and the rest of its bookkeeping.
fn held(data: &ProvidedData, app: &AppId, owner: &str, kind: &str) -> usize {
    data.len() + app.as_str().len() + owner.len() + kind.len() + ENTRY_OVERHEAD
}

/// The most entries one page of a kind holds (`read::ProvidedPage`) ...
pub(crate) const MAX_PAGE: usize = 1000;
/// ... and how many when the reader does not say.
pub(crate) const DEFAULT_PAGE: usize = 100;

/// The cursor of the page after `app`'s entry of `kind` (the core's one
/// cursor, [`super::cursor`], over the list `provided.KIND`): it tells no
/// more than the page it ends, the app id of its last entry.
pub(crate) fn encode_cursor(kind: &str, app: &str) -> String {
    super::cursor::encode(&format!("provided.{kind}"), app)
}

/// The app a cursor of `kind` ends at; a cursor of another kind, or
/// anything not made by [`encode_cursor`], is `InvalidArgs`.
pub(crate) fn decode_cursor(kind: &str, cursor: &str) -> Result<AppId> {
    let bad = |e: super::cursor::InvalidCursor| {
        Error::InvalidArgs(format!(
            "{e}: pass back a next_cursor a page of provided.{kind} returned"
        ))
    };
    let app: String = super::cursor::decode(&format!("provided.{kind}"), cursor).map_err(bad)?;
    AppId::new(app).map_err(|_| bad(super::cursor::InvalidCursor::of(cursor)))
}

/// Rate buckets kept before idle ones are dropped on a publish (they are
/// also dropped when an app retracts or goes): apps that only ever fail
/// to publish leave no more than this behind.
const PRUNE_BUCKETS_AT: usize = 1024;

/// One live entry: a connection's entry of a kind, in its connection's
/// list. The names it is kept under are shared, not copied: the kind with
/// every entry of that kind, the app id with the caller's identity, the
/// connection's name with its other entries.
#[derive(Debug)]
struct Entry {
    kind: Arc<str>,
    /// The app of the connection that published it.
    app: AppId,
    data: ProvidedData,
    updated: DateTime<Utc>,
    since: DateTime<Utc>,
    /// When it was published, in publish order: readers see the newest
    /// of an app's entries of a kind.
    seq: u64,
    bytes: usize,
}

impl Entry {
    /// The entry as readers see it.
    fn context(&self) -> ProvidedContext {
        ProvidedContext {
            app_id: self.app.clone(),
            kind: self.kind.clone(),
            data: self.data.clone(),
            updated: self.updated,
        }
    }
}

/// A token bucket: [`PUBLISH_BURST`] tokens, refilled at
/// [`PUBLISHES_PER_SECOND`].
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self, now: Instant) -> bool {
        let refill = now.duration_since(self.at).as_secs_f64() * PUBLISHES_PER_SECOND;
        self.tokens = (self.tokens + refill).min(PUBLISH_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn full(&self, now: Instant) -> bool {
        self.tokens + now.duration_since(self.at).as_secs_f64() * PUBLISHES_PER_SECOND
            >= PUBLISH_BURST
    }
}

/// The smallest name, where the connections of an app start in
/// [`Inner::apps`].
static NO_NAME: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));

/// The publishers' entries, held compactly: with 1000 apps × 6 kinds a map
/// of every entry by connection and kind, a set of kinds per connection
/// and a list per app and kind (each with its own copies of the names)
/// weighed several times the entries' text (heaptrack, the provider
/// bench); one short list per connection and one set of the apps'
/// connections answer the same questions, at a scan of an app's few
/// entries.
#[derive(Debug, Default)]
struct Inner {
    /// Each publishing connection's entries, one per kind (at most
    /// [`MAX_KINDS_PER_APP`]), in a list sized to them.
    owners: HashMap<Arc<str>, Vec<Entry>>,
    /// Each app's publishing connections, nearly always one (two
    /// processes of one executable, two windows of a Flatpak are two).
    apps: BTreeSet<(AppId, Arc<str>)>,
    /// The kinds published now, each held once and shared by its entries.
    kinds: HashSet<Arc<str>>,
    buckets: HashMap<AppId, Bucket>,
    bytes: usize,
    /// The last publish's number.
    seq: u64,
}

impl Inner {
    /// `app`'s connections.
    fn owners_of<'a>(&'a self, app: &'a AppId) -> impl Iterator<Item = &'a Arc<str>> + 'a {
        self.apps
            .range((app.clone(), NO_NAME.clone())..)
            .take_while(move |(a, _)| a == app)
            .map(|(_, owner)| owner)
    }

    /// `app`'s entries, over all its connections, each with its
    /// connection.
    fn of_app<'a>(&'a self, app: &'a AppId) -> impl Iterator<Item = (&'a Arc<str>, &'a Entry)> {
        self.owners_of(app).flat_map(move |owner| {
            self.owners
                .get(owner)
                .into_iter()
                .flatten()
                .filter(move |e| e.app == *app)
                .map(move |e| (owner, e))
        })
    }

    /// How many entries `app` has, over all its connections.
    fn entries_of(&self, app: &AppId) -> usize {
        self.of_app(app).count()
    }

    /// The bytes `app`'s entries hold, over all its connections.
    fn bytes_of(&self, app: &AppId) -> usize {
        self.of_app(app).map(|(_, e)| e.bytes).sum()
    }

    /// The entry of `kind` of the connection `owner`.
    fn get(&self, owner: &str, kind: &str) -> Option<&Entry> {
        self.owners.get(owner)?.iter().find(|e| &*e.kind == kind)
    }

    /// The entry readers see of `app`'s `kind`: the newest of its
    /// connections', with its connection.
    fn shown<'a>(&'a self, app: &'a AppId, kind: &str) -> Option<(&'a Arc<str>, &'a Entry)> {
        self.of_app(app)
            .filter(|(_, e)| &*e.kind == kind)
            .max_by_key(|(_, e)| e.seq)
    }

    /// `kind`, shared with the entries that have it.
    fn intern(&mut self, kind: &str) -> Arc<str> {
        if let Some(k) = self.kinds.get(kind) {
            return k.clone();
        }
        let k: Arc<str> = Arc::from(kind);
        self.kinds.insert(k.clone());
        k
    }

    fn insert(&mut self, owner: &str, entry: Entry) {
        self.bytes += entry.bytes;
        let owner: Arc<str> = match self.owners.get_key_value(owner) {
            Some((name, _)) => name.clone(),
            None => Arc::from(owner),
        };
        self.apps.insert((entry.app.clone(), owner.clone()));
        let list = self.owners.entry(owner).or_default();
        // At most 16, and nearly always the same few: no room to spare.
        list.reserve_exact(1);
        list.push(entry);
    }

    fn remove(&mut self, owner: &str, kind: &str) -> Option<Entry> {
        let (name, list) = self.owners.get_key_value(owner)?;
        let name = name.clone();
        let i = list.iter().position(|e| &*e.kind == kind)?;
        let list = self.owners.get_mut(owner)?;
        let e = list.swap_remove(i);
        let app_left = !list.iter().any(|x| x.app == e.app);
        if list.is_empty() {
            self.owners.remove(owner);
        } else {
            list.shrink_to_fit();
        }
        if app_left {
            self.apps.remove(&(e.app.clone(), name));
        }
        self.bytes = self.bytes.saturating_sub(e.bytes);
        Some(e)
    }

    /// Forget the buckets of apps that publish nothing and are idle, and
    /// the kinds nothing holds any more (no entry, and no longer the state
    /// or a change), so that a crowd of short-lived publishers, or one
    /// that publishes ever new `x-` kinds, leaves nothing behind.
    fn prune(&mut self, now: Instant) {
        self.kinds.retain(|k| Arc::strong_count(k) > 1);
        let apps = &self.apps;
        self.buckets.retain(|app, b| {
            !b.full(now)
                || apps
                    .range((app.clone(), NO_NAME.clone())..)
                    .next()
                    .is_some_and(|(a, _)| a == app)
        });
    }
}

/// The publishers' bookkeeping (the entries readers see are in the state).
#[derive(Debug, Default)]
pub(crate) struct Providers {
    inner: Mutex<Inner>,
}

impl Providers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether some app publishes `kind` now: only then may an app ask
    /// the user for `provided.<kind>` (`core::prompts`), so that a flood
    /// of invented kinds asks nothing.
    pub(crate) fn publishes(&self, kind: &str) -> bool {
        self.lock()
            .owners
            .values()
            .any(|entries| entries.iter().any(|e| &*e.kind == kind))
    }
}

/// One app that publishes (or was refused), for `contextctl providers`
/// and `Consent1.ListProviders`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ProviderView {
    pub(crate) app_id: String,
    /// The app's name from its desktop entry, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) app_name: Option<String>,
    /// What it publishes now, by kind.
    pub(crate) kinds: Vec<ProvidedKindView>,
    /// Whether the user lets it publish.
    pub(crate) allowed: bool,
    /// Since when it may not (RFC 3339), when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) refused_since: Option<String>,
}

/// One kind an app publishes now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ProvidedKindView {
    pub(crate) kind: String,
    /// When the app first published it (since it last appeared).
    pub(crate) since: String,
    /// When it last changed it.
    pub(crate) updated: String,
    /// The entry's `name`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
}

/// The providers' handle: what apps publish (`org.contextd.Provider1`)
/// and the user's say over who may. It holds the entries beside the
/// state they reach readers through, the gate (the user's refusals, the
/// notices of the user's panels) and the clock.
#[derive(Debug, Clone)]
pub(crate) struct Provide {
    providers: Arc<Providers>,
    state: Arc<State>,
    gate: Arc<Gate>,
    clock: Arc<dyn Clock>,
}

impl Provide {
    pub(crate) fn new(
        providers: Arc<Providers>,
        state: Arc<State>,
        gate: Arc<Gate>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Provide {
            providers,
            state,
            gate,
            clock,
        }
    }

    /// Set the entry of `kind` of the connection `owner` (of the app
    /// `who`) to `json` (a JSON object in the vocabulary), until that
    /// connection goes. Checked in this order: the user's refusal, the
    /// rate, the data, the number of entries, the bytes the app holds and
    /// the bytes all apps hold; a publish that fails leaves every entry as
    /// it was.
    pub(crate) fn publish(&self, who: &Subject, owner: &str, kind: &str, json: &str) -> Result<()> {
        let app = &who.app_id;
        if !self.gate.may_publish(app) {
            return Err(Error::PublishRefused { app: app.clone() });
        }
        // Before anything is kept: a password manager's open vault is
        // never in the broker at all (`core::privacy`).
        if self.state.privacy().rules().app(app.as_str()).is_some() {
            return Err(Error::NeverShared { app: app.clone() });
        }
        let now = Instant::now();
        {
            let mut inner = self.providers.lock();
            if inner.buckets.len() >= PRUNE_BUCKETS_AT {
                inner.prune(now);
            }
            let bucket = inner.buckets.entry(app.clone()).or_insert(Bucket {
                tokens: PUBLISH_BURST,
                at: now,
            });
            if !bucket.take(now) {
                return Err(Error::LimitExceeded(format!(
                    "{app} publishes more than {PUBLISHES_PER_SECOND} times a second (a burst of {PUBLISH_BURST}); publish when the context changes, not on a timer"
                )));
            }
        }
        let data = ProvidedData::new(&vocabulary::check_entry(kind, json)?);
        let bytes = held(&data, app, owner, kind);
        let stamp = self.clock.now();
        let mut inner = self.providers.lock();
        // A connection is one app (its identity is its credentials'); an
        // entry of another app under its name would be a bug, and is not
        // replaced in place.
        let old = inner
            .get(owner, kind)
            .filter(|e| e.app == *app)
            .map(|e| (e.bytes, e.since));
        if old.is_none() && inner.entries_of(app) >= MAX_KINDS_PER_APP {
            return Err(Error::LimitExceeded(format!(
                "{app} already publishes {MAX_KINDS_PER_APP} kinds (its connections' entries count together), the most an app may; retract one first"
            )));
        }
        let old_bytes = inner.get(owner, kind).map_or(0, |e| e.bytes);
        let app_bytes = inner
            .bytes_of(app)
            .saturating_sub(old.map_or(0, |(b, _)| b))
            + bytes;
        if app_bytes > MAX_APP_BYTES {
            return Err(Error::LimitExceeded(format!(
                "{app} would hold {app_bytes} bytes of published context (its connections' entries count together, each with {ENTRY_OVERHEAD} bytes of bookkeeping), more than the {MAX_APP_BYTES} an app may; publish less, or retract a kind first"
            )));
        }
        let total = inner.bytes - old_bytes + bytes;
        if total > MAX_TOTAL_BYTES {
            return Err(Error::LimitExceeded(format!(
                "the broker holds {MAX_TOTAL_BYTES} bytes of published context, the most it keeps; try again when apps retract"
            )));
        }
        let since = match old {
            Some((_, since)) => since,
            None => {
                self.gate.notices.bump(super::notice::Part::Providers);
                stamp
            }
        };
        // The old entry goes without a word to readers: the new one,
        // shown at once, replaces it (or, of another app, is removed
        // the ordinary way).
        if old.is_some() {
            inner.remove(owner, kind);
        } else if inner.get(owner, kind).is_some() {
            self.remove_entries(&mut inner, vec![(Arc::from(owner), Arc::from(kind))]);
        }
        inner.seq += 1;
        let entry = Entry {
            kind: inner.intern(kind),
            app: app.clone(),
            data,
            updated: stamp,
            since,
            seq: inner.seq,
            bytes,
        };
        let context = entry.context();
        inner.insert(owner, entry);
        // Applied under the lock, so that a publish and the owner's
        // going cannot reach the state in the other order. The newest
        // entry is the one readers see.
        self.state.apply(SourceEvent::Provided { context });
        Ok(())
    }

    /// Remove the entry of `kind` of the connection `owner`. Nothing to
    /// remove is not an error; another connection's entry, even of the
    /// same app, is not this one's to remove.
    pub(crate) fn retract(&self, who: &Subject, owner: &str, kind: &str) -> Result<()> {
        vocabulary::check_kind(kind)?;
        let mut inner = self.providers.lock();
        if inner.get(owner, kind).is_some_and(|e| e.app == who.app_id) {
            self.remove_entries(&mut inner, vec![(Arc::from(owner), Arc::from(kind))]);
        }
        Ok(())
    }

    /// Remove the entries `keys` (connection, kind) that are live, tell
    /// the state what readers see now (for each app and kind whose shown
    /// entry went: the app's next newest entry of that kind, or nothing),
    /// tell the user's panels, and forget idle rate buckets. Called with
    /// the lock held, so that removals and publishes reach the state in
    /// order.
    fn remove_entries(&self, inner: &mut Inner, keys: Vec<(Arc<str>, Arc<str>)>) {
        // What readers saw of each app and kind touched, before.
        let mut touched: BTreeMap<(AppId, Arc<str>), Option<u64>> = BTreeMap::new();
        let mut removed = false;
        for (owner, kind) in keys {
            let Some(app) = inner.get(&owner, &kind).map(|e| e.app.clone()) else {
                continue;
            };
            let before = inner.shown(&app, &kind).map(|(_, e)| e.seq);
            touched.entry((app, kind.clone())).or_insert(before);
            removed |= inner.remove(&owner, &kind).is_some();
        }
        for ((app, kind), before) in touched {
            match inner.shown(&app, &kind) {
                Some((_, e)) if Some(e.seq) == before => {}
                Some((_, e)) => {
                    self.state.apply(SourceEvent::Provided {
                        context: e.context(),
                    });
                }
                None => {
                    self.state
                        .apply(SourceEvent::ProvidedRemoved { app_id: app, kind });
                }
            }
        }
        if removed {
            self.gate.notices.bump(super::notice::Part::Providers);
        }
        inner.prune(Instant::now());
    }

    /// The never-share rules changed: every entry of an app they now
    /// hold back goes, and its readers are told it is gone.
    pub(crate) fn withdraw_never_shared(&self) {
        let rules = self.state.privacy().rules();
        let mut inner = self.providers.lock();
        let keys: Vec<(Arc<str>, Arc<str>)> = inner
            .owners
            .iter()
            .flat_map(|(owner, list)| {
                list.iter()
                    .filter(|e| rules.app(e.app.as_str()).is_some())
                    .map(|e| (owner.clone(), e.kind.clone()))
            })
            .collect();
        if !keys.is_empty() {
            self.remove_entries(&mut inner, keys);
        }
    }

    /// The publisher `owner` is gone (its bus connection closed): its
    /// entries go, and their readers are told (of another connection's
    /// entry of the app, shown again, or that there is none).
    pub(crate) fn provider_gone(&self, owner: &str) {
        let mut inner = self.providers.lock();
        let Some((name, list)) = inner.owners.get_key_value(owner) else {
            return;
        };
        let keys = list
            .iter()
            .map(|e| (name.clone(), e.kind.clone()))
            .collect();
        self.remove_entries(&mut inner, keys);
    }

    /// Let `app` publish, or refuse its publications (its entries go at
    /// once). Returns whether anything changed.
    pub(crate) async fn set_publishing(&self, app: &AppId, allowed: bool) -> Result<bool> {
        let changed = self.gate.set_publishing(app, allowed).await?;
        if changed && !allowed {
            let mut inner = self.providers.lock();
            let keys = inner
                .of_app(app)
                .map(|(owner, e)| (owner.clone(), e.kind.clone()))
                .collect();
            self.remove_entries(&mut inner, keys);
        }
        Ok(changed)
    }

    /// Who publishes what now, and who was refused (for the user: this
    /// shows app ids and kinds, never the data).
    pub(crate) fn providers(&self) -> Vec<ProviderView> {
        let mut by_app: BTreeMap<AppId, Vec<ProvidedKindView>> = BTreeMap::new();
        {
            let inner = self.providers.lock();
            self.state.read(|s| {
                for (app, p) in s.provided.iter() {
                    let kind = &p.kind;
                    let since = inner.shown(app, kind).map_or(p.updated, |(_, e)| e.since);
                    by_app
                        .entry(app.clone())
                        .or_default()
                        .push(ProvidedKindView {
                            kind: kind.to_string(),
                            since: time(&since),
                            updated: time(&p.updated),
                            name: vocabulary::title(&p.data),
                        });
                }
            });
        }
        let refused: HashMap<AppId, DateTime<Utc>> =
            self.gate.refused_publishers().into_iter().collect();
        for app in refused.keys() {
            by_app.entry(app.clone()).or_default();
        }
        let apps: HashMap<AppId, Option<String>> = self
            .gate
            .apps()
            .into_iter()
            .map(|a| (a.app_id, a.display_name))
            .collect();
        by_app
            .into_iter()
            .map(|(app, kinds)| ProviderView {
                app_name: apps.get(&app).cloned().flatten(),
                allowed: !refused.contains_key(&app),
                refused_since: refused.get(&app).map(time),
                app_id: app.to_string(),
                kinds,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut b = Bucket {
            tokens: PUBLISH_BURST,
            at: t0,
        };
        for _ in 0..10 {
            assert!(b.take(t0));
        }
        assert!(!b.take(t0), "the 11th in the same instant is refused");
        assert!(b.take(t0 + std::time::Duration::from_millis(100)));
        assert!(!b.take(t0 + std::time::Duration::from_millis(100)));
        assert!(b.full(t0 + std::time::Duration::from_secs(2)));
    }
}

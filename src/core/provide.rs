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
//! connection ([`Core::provider_gone`]). Two connections of one app (two
//! processes of one executable, two windows of a Flatpak) can each
//! publish a kind; readers see one entry per app and kind, the one
//! published last, and when it goes (retracted, its connection closed)
//! the other one is shown again. The app's limits (the rate, the kinds)
//! count every connection of the app together.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::error::{Error, Result};
use super::event::SourceEvent;
use super::read::Subject;
use super::view::time;
use super::{Core, vocabulary};
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
/// What an entry costs beyond its text and names: its slots in the
/// state's map and in the maps here (entries, owners, publish order),
/// the timestamps and the allocator's rounding, as heaptrack showed them
/// with the provider bench (1000 apps × 6 kinds); an estimate, so that
/// an app of many tiny entries is not counted as free.
const ENTRY_OVERHEAD: usize = 256;

/// The bytes an entry holds: its text once (shared by the state, the
/// changes and the readers), the names it is kept under (the app id
/// twice, the owner three times, the kind four times) and the rest of
/// its bookkeeping.
fn held(data: &ProvidedData, app: &AppId, owner: &str, kind: &str) -> usize {
    data.len() + 2 * app.as_str().len() + 3 * owner.len() + 4 * kind.len() + ENTRY_OVERHEAD
}

/// The most entries one page of a kind holds (`read::ProvidedPage`) ...
pub(crate) const MAX_PAGE: usize = 1000;
/// ... and how many when the reader does not say.
pub(crate) const DEFAULT_PAGE: usize = 100;

/// The cursor of the page after `app`'s entry of `kind`: opaque to
/// readers (URL-safe base64 of `kind:app`), so that its form can change.
/// It tells no more than the page it ends: the app id of its last entry.
pub(crate) fn encode_cursor(kind: &str, app: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{kind}:{app}"))
}

/// The app a cursor of `kind` ends at; a cursor of another kind, or
/// anything not made by [`encode_cursor`], is `InvalidArgs`.
pub(crate) fn decode_cursor(kind: &str, cursor: &str) -> Result<AppId> {
    use base64::Engine;
    let bad = || {
        Error::InvalidArgs(format!(
            "invalid cursor '{}': pass back a next_cursor a page of provided.{kind} returned",
            cursor.chars().take(64).collect::<String>()
        ))
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (k, app) = text.split_once(':').ok_or_else(bad)?;
    if k != kind {
        return Err(bad());
    }
    AppId::new(app).map_err(|_| bad())
}

/// Rate buckets kept before idle ones are dropped on a publish (they are
/// also dropped when an app retracts or goes): apps that only ever fail
/// to publish leave no more than this behind.
const PRUNE_BUCKETS_AT: usize = 1024;

/// An entry: the publishing connection and the kind.
type Key = (String, String);
/// What readers see one entry of: the app and the kind.
type Shown = (AppId, String);

/// One live entry: whose it is, since when, how big, and what it says.
#[derive(Debug)]
struct Entry {
    since: DateTime<Utc>,
    bytes: usize,
    /// When it was published, in publish order: readers see the newest
    /// of an app's entries of a kind.
    seq: u64,
    context: ProvidedContext,
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

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    /// Each connection's kinds.
    by_owner: HashMap<String, HashSet<String>>,
    /// Each app's entries of a kind, by publish order: the last is
    /// shown. Nearly always one (one connection publishes a kind): a list,
    /// not a map, whose smallest node would weigh more than the entry.
    by_app: BTreeMap<Shown, Vec<(u64, String)>>,
    buckets: HashMap<AppId, Bucket>,
    bytes: usize,
    /// The last publish's number.
    seq: u64,
}

impl Inner {
    /// `app`'s entries, over all its connections.
    fn entries_of(&self, app: &AppId) -> usize {
        self.by_app
            .range((app.clone(), String::new())..)
            .take_while(|((a, _), _)| a == app)
            .map(|(_, owners)| owners.len())
            .sum()
    }

    /// The bytes `app`'s entries hold, over all its connections.
    fn bytes_of(&self, app: &AppId) -> usize {
        self.by_app
            .range((app.clone(), String::new())..)
            .take_while(|((a, _), _)| a == app)
            .flat_map(|((_, kind), owners)| {
                owners.iter().filter_map(|(_, owner)| {
                    self.entries
                        .get(&(owner.clone(), kind.clone()))
                        .map(|e| e.bytes)
                })
            })
            .sum()
    }

    /// The connection whose entry readers see for `shown`, with its
    /// publish number.
    fn shown(&self, shown: &Shown) -> Option<(u64, &str)> {
        self.by_app
            .get(shown)
            .and_then(|o| o.last())
            .map(|(seq, owner)| (*seq, owner.as_str()))
    }

    fn insert(&mut self, owner: &str, entry: Entry) {
        let kind = entry.context.kind.clone();
        self.bytes += entry.bytes;
        self.by_owner
            .entry(owner.to_owned())
            .or_default()
            .insert(kind.clone());
        self.by_app
            .entry((entry.context.app_id.clone(), kind.clone()))
            .or_default()
            .push((entry.seq, owner.to_owned()));
        self.entries.insert((owner.to_owned(), kind), entry);
    }

    fn remove(&mut self, key: &Key) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.bytes = self.bytes.saturating_sub(e.bytes);
        let (owner, kind) = key;
        if let Some(kinds) = self.by_owner.get_mut(owner) {
            kinds.remove(kind);
            if kinds.is_empty() {
                self.by_owner.remove(owner);
            }
        }
        let shown = (e.context.app_id.clone(), kind.clone());
        if let Some(owners) = self.by_app.get_mut(&shown) {
            owners.retain(|(seq, _)| *seq != e.seq);
            if owners.is_empty() {
                self.by_app.remove(&shown);
            }
        }
        Some(e)
    }

    /// Forget the buckets of apps that publish nothing and are idle, so
    /// that a crowd of short-lived publishers leaves nothing behind.
    fn prune(&mut self, now: Instant) {
        let by_app = &self.by_app;
        self.buckets.retain(|app, b| {
            !b.full(now)
                || by_app
                    .range((app.clone(), String::new())..)
                    .next()
                    .is_some_and(|((a, _), _)| a == app)
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

impl Core {
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
        let key: Key = (owner.to_owned(), kind.to_owned());
        let stamp = self.clock.now();
        let mut inner = self.providers.lock();
        // A connection is one app (its identity is its credentials'); an
        // entry of another app under its name would be a bug, and is not
        // replaced in place.
        let old = inner
            .entries
            .get(&key)
            .filter(|e| e.context.app_id == *app)
            .map(|e| (e.bytes, e.since));
        if old.is_none() && inner.entries_of(app) >= MAX_KINDS_PER_APP {
            return Err(Error::LimitExceeded(format!(
                "{app} already publishes {MAX_KINDS_PER_APP} kinds (its connections' entries count together), the most an app may; retract one first"
            )));
        }
        let old_bytes = inner.entries.get(&key).map_or(0, |e| e.bytes);
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
            inner.remove(&key);
        } else if inner.entries.contains_key(&key) {
            self.remove_entries(&mut inner, vec![key.clone()]);
        }
        inner.seq += 1;
        let context = ProvidedContext {
            app_id: app.clone(),
            kind: kind.to_owned(),
            data,
            updated: stamp,
        };
        let seq = inner.seq;
        inner.insert(
            owner,
            Entry {
                since,
                bytes,
                seq,
                context: context.clone(),
            },
        );
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
        let key: Key = (owner.to_owned(), kind.to_owned());
        let mut inner = self.providers.lock();
        if inner
            .entries
            .get(&key)
            .is_some_and(|e| e.context.app_id == who.app_id)
        {
            self.remove_entries(&mut inner, vec![key]);
        }
        Ok(())
    }

    /// Remove `keys` (those that are live), tell the state what readers
    /// see now (for each app and kind whose shown entry went: the app's
    /// next newest entry of that kind, or nothing), tell the user's
    /// panels, and forget idle rate buckets. Called with the lock held,
    /// so that removals and publishes reach the state in order.
    fn remove_entries(&self, inner: &mut Inner, keys: Vec<Key>) {
        // What readers saw of each app and kind touched, before.
        let mut touched: BTreeMap<Shown, Option<u64>> = BTreeMap::new();
        let mut removed = Vec::new();
        for key in keys {
            let Some(e) = inner.entries.get(&key) else {
                continue;
            };
            let shown = (e.context.app_id.clone(), key.1.clone());
            let before = inner.shown(&shown).map(|(seq, _)| seq);
            touched.entry(shown).or_insert(before);
            removed.extend(inner.remove(&key));
        }
        for (shown, before) in touched {
            let now = inner
                .shown(&shown)
                .map(|(seq, owner)| (seq, owner.to_owned()));
            match now {
                Some((seq, _)) if Some(seq) == before => {}
                Some((_, owner)) => {
                    if let Some(e) = inner.entries.get(&(owner, shown.1.clone())) {
                        self.state.apply(SourceEvent::Provided {
                            context: e.context.clone(),
                        });
                    }
                }
                None => {
                    self.state.apply(SourceEvent::ProvidedRemoved {
                        app_id: shown.0,
                        kind: shown.1,
                    });
                }
            }
        }
        if !removed.is_empty() {
            self.gate.notices.bump(super::notice::Part::Providers);
        }
        inner.prune(Instant::now());
    }

    /// The publisher `owner` is gone (its bus connection closed): its
    /// entries go, and their readers are told (of another connection's
    /// entry of the app, shown again, or that there is none).
    pub(crate) fn provider_gone(&self, owner: &str) {
        let mut inner = self.providers.lock();
        let Some(kinds) = inner.by_owner.get(owner).cloned() else {
            return;
        };
        let keys = kinds.into_iter().map(|k| (owner.to_owned(), k)).collect();
        self.remove_entries(&mut inner, keys);
    }

    /// Let `app` publish, or refuse its publications (its entries go at
    /// once). Returns whether anything changed.
    pub(crate) async fn set_publishing(&self, app: &AppId, allowed: bool) -> Result<bool> {
        let changed = self.gate.set_publishing(app, allowed).await?;
        if changed && !allowed {
            let mut inner = self.providers.lock();
            let keys: Vec<Key> = inner
                .entries
                .iter()
                .filter(|(_, e)| e.context.app_id == *app)
                .map(|(k, _)| k.clone())
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
                for ((app, kind), p) in &s.provided {
                    let since = inner
                        .shown(&(app.clone(), kind.clone()))
                        .and_then(|(_, owner)| inner.entries.get(&(owner.to_owned(), kind.clone())))
                        .map_or(p.updated, |e| e.since);
                    by_app
                        .entry(app.clone())
                        .or_default()
                        .push(ProvidedKindView {
                            kind: kind.clone(),
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

//! What apps publish about themselves (org.contextd.Provider1): the core
//! decides who may publish what, keeps the rules and the limits, and turns
//! a publish into the same state change a source's event is, so that every
//! reader (D-Bus, MCP, subscriptions, the timeline) sees it through the
//! one read path.
//!
//! An entry belongs to the app the publisher identified from the caller's
//! credentials ([`Subject`]) and lives as long as its owner: an opaque
//! name of the publisher's connection (a D-Bus unique name). When the owner
//! goes ([`Core::provider_gone`]), its entries go too.

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
use crate::model::{AppId, ProvidedContext};

/// Kinds one app may have published at once.
pub const MAX_KINDS_PER_APP: usize = 16;
/// Publishes per second one app may make, on average ...
pub const PUBLISHES_PER_SECOND: f64 = 10.0;
/// ... and in a burst.
pub const PUBLISH_BURST: f64 = 10.0;
/// What every app's entries may weigh together (JSON bytes), so that many
/// apps cannot grow the daemon without bound: 16 MiB, 256 apps with 4
/// full-size entries each.
pub const MAX_TOTAL_BYTES: usize = 16 * 1024 * 1024;

/// Rate buckets kept before idle ones are dropped on a publish (they are
/// also dropped when an app retracts or goes): apps that only ever fail
/// to publish leave no more than this behind.
const PRUNE_BUCKETS_AT: usize = 1024;

type Key = (AppId, String);

/// One live entry: who owns it, since when, how big it is.
#[derive(Debug)]
struct Entry {
    owner: String,
    since: DateTime<Utc>,
    bytes: usize,
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
    by_owner: HashMap<String, HashSet<Key>>,
    buckets: HashMap<AppId, Bucket>,
    bytes: usize,
}

impl Inner {
    fn kinds_of(&self, app: &AppId) -> usize {
        self.entries.keys().filter(|(a, _)| a == app).count()
    }

    fn remove(&mut self, key: &Key) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.bytes = self.bytes.saturating_sub(e.bytes);
        if let Some(keys) = self.by_owner.get_mut(&e.owner) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_owner.remove(&e.owner);
            }
        }
        Some(e)
    }

    /// Forget the buckets of apps that publish nothing and are idle, so
    /// that a crowd of short-lived publishers leaves nothing behind.
    fn prune(&mut self, now: Instant) {
        let entries = &self.entries;
        self.buckets
            .retain(|app, b| !b.full(now) || entries.keys().any(|(a, _)| a == app));
    }
}

/// The publishers' bookkeeping (the entries themselves are in the state).
#[derive(Debug, Default)]
pub struct Providers {
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
pub struct ProviderView {
    pub app_id: String,
    /// The app's name from its desktop entry, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    /// What it publishes now, by kind.
    pub kinds: Vec<ProvidedKindView>,
    /// Whether the user lets it publish.
    pub allowed: bool,
    /// Since when it may not (RFC 3339), when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_since: Option<String>,
}

/// One kind an app publishes now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProvidedKindView {
    pub kind: String,
    /// When the app first published it (since it last appeared).
    pub since: String,
    /// When it last changed it.
    pub updated: String,
    /// The entry's `name`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Core {
    /// Set `who`'s entry of `kind` to `json` (a JSON object in the
    /// vocabulary), owned by `owner` until it goes. Checked in this order:
    /// the user's refusal, the rate, the data, the number of kinds and the
    /// total size; a publish that fails leaves the previous entry as it was.
    pub fn publish(&self, who: &Subject, owner: &str, kind: &str, json: &str) -> Result<()> {
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
        let data = vocabulary::check_entry(kind, json)?;
        let bytes = json.len();
        let key: Key = (app.clone(), kind.to_owned());
        let stamp = self.clock.now();
        {
            let mut inner = self.providers.lock();
            let old = inner.entries.get(&key).map(|e| e.bytes);
            if old.is_none() && inner.kinds_of(app) >= MAX_KINDS_PER_APP {
                return Err(Error::LimitExceeded(format!(
                    "{app} already publishes {MAX_KINDS_PER_APP} kinds, the most an app may; retract one first"
                )));
            }
            let total = inner.bytes - old.unwrap_or(0) + bytes;
            if total > MAX_TOTAL_BYTES {
                return Err(Error::LimitExceeded(format!(
                    "the broker holds {MAX_TOTAL_BYTES} bytes of published context, the most it keeps; try again when apps retract"
                )));
            }
            let since = match inner.remove(&key) {
                Some(e) => e.since,
                None => {
                    self.gate.notices.bump(super::notice::Part::Providers);
                    stamp
                }
            };
            inner.bytes += bytes;
            inner
                .by_owner
                .entry(owner.to_owned())
                .or_default()
                .insert(key.clone());
            inner.entries.insert(
                key,
                Entry {
                    owner: owner.to_owned(),
                    since,
                    bytes,
                },
            );
            // Applied under the lock, so that a publish and the owner's
            // going cannot reach the state in the other order.
            self.state.apply(SourceEvent::Provided {
                context: ProvidedContext {
                    app_id: app.clone(),
                    kind: kind.to_owned(),
                    data: std::sync::Arc::new(data),
                    updated: stamp,
                },
            });
        }
        Ok(())
    }

    /// Remove `who`'s entry of `kind`, whichever of its connections
    /// published it. Nothing to remove is not an error.
    pub fn retract(&self, who: &Subject, kind: &str) -> Result<()> {
        vocabulary::check_kind(kind)?;
        let key: Key = (who.app_id.clone(), kind.to_owned());
        let mut inner = self.providers.lock();
        self.remove_entries(&mut inner, vec![key]);
        Ok(())
    }

    /// Remove `keys` (those that are live), tell the state and the user's
    /// panels, and forget idle rate buckets. Called with the lock held, so
    /// that removals and publishes reach the state in order.
    fn remove_entries(&self, inner: &mut Inner, keys: Vec<Key>) {
        let mut removed = false;
        for key in keys {
            if inner.remove(&key).is_some() {
                removed = true;
                self.state.apply(SourceEvent::ProvidedRemoved {
                    app_id: key.0,
                    kind: key.1,
                });
            }
        }
        if removed {
            self.gate.notices.bump(super::notice::Part::Providers);
        }
        inner.prune(Instant::now());
    }

    /// The publisher `owner` is gone (its bus connection closed): its
    /// entries go, and their readers are told.
    pub fn provider_gone(&self, owner: &str) {
        let mut inner = self.providers.lock();
        let Some(keys) = inner.by_owner.get(owner).cloned() else {
            return;
        };
        self.remove_entries(&mut inner, keys.into_iter().collect());
    }

    /// Let `app` publish, or refuse its publications (its entries go at
    /// once). Returns whether anything changed.
    pub async fn set_publishing(&self, app: &AppId, allowed: bool) -> Result<bool> {
        let changed = self.gate.set_publishing(app, allowed).await?;
        if changed && !allowed {
            let mut inner = self.providers.lock();
            let keys: Vec<Key> = inner
                .entries
                .keys()
                .filter(|(a, _)| a == app)
                .cloned()
                .collect();
            self.remove_entries(&mut inner, keys);
        }
        Ok(changed)
    }

    /// Who publishes what now, and who was refused (for the user: this
    /// shows app ids and kinds, never the data).
    pub fn providers(&self) -> Vec<ProviderView> {
        let mut by_app: BTreeMap<AppId, Vec<ProvidedKindView>> = BTreeMap::new();
        {
            let inner = self.providers.lock();
            self.state.read(|s| {
                for ((app, kind), p) in &s.provided {
                    let since = inner
                        .entries
                        .get(&(app.clone(), kind.clone()))
                        .map_or(p.updated, |e| e.since);
                    by_app
                        .entry(app.clone())
                        .or_default()
                        .push(ProvidedKindView {
                            kind: kind.clone(),
                            since: time(&since),
                            updated: time(&p.updated),
                            name: vocabulary::title(&p.data).map(str::to_owned),
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

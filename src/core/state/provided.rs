//! What readers see of the context apps publish: each app's shown entries,
//! one per kind, held once per app.
//!
//! A map keyed by (app id, kind) with the whole `ProvidedContext` as its
//! value held the app id and the kind twice per entry, in B-tree leaves
//! about half full (entries arrive in app order): with 1000 apps × 6
//! kinds, 1.07 MB (heaptrack, the provider bench) for 6000 entries whose
//! text is 0.7 MB. Here an app is one key, and its entries a list sized
//! to them, sorted by kind, each its kind (shared), its text (shared) and
//! when it changed: a third of that.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::model::{AppId, ProvidedContext, ProvidedData};

/// One app's shown entry of a kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProvidedEntry {
    pub(crate) kind: Arc<str>,
    pub(crate) data: ProvidedData,
    pub(crate) updated: DateTime<Utc>,
}

impl ProvidedEntry {
    /// The entry of `app` as changes and readers carry it.
    pub(crate) fn context(&self, app: &AppId) -> ProvidedContext {
        ProvidedContext {
            app_id: app.clone(),
            kind: self.kind.clone(),
            data: self.data.clone(),
            updated: self.updated,
        }
    }
}

/// Every app's shown entries, in (app id, kind) order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Provided(BTreeMap<AppId, Box<[ProvidedEntry]>>);

impl Provided {
    /// Set `context` as its app's entry of its kind; whether the app had
    /// one of that kind already.
    pub(crate) fn insert(&mut self, context: ProvidedContext) -> bool {
        let ProvidedContext {
            app_id,
            kind,
            data,
            updated,
        } = context;
        let entry = ProvidedEntry {
            kind,
            data,
            updated,
        };
        let list = self.0.entry(app_id).or_default();
        match list.binary_search_by(|e| e.kind.cmp(&entry.kind)) {
            Ok(i) => {
                list[i] = entry;
                true
            }
            Err(i) => {
                // A list exactly as long as the app's kinds (a few): a
                // `Vec` would keep room for as many again.
                let mut v = std::mem::take(list).into_vec();
                v.insert(i, entry);
                *list = v.into_boxed_slice();
                false
            }
        }
    }

    /// Remove `app`'s entry of `kind`, and return it.
    pub(crate) fn remove(&mut self, app: &AppId, kind: &str) -> Option<ProvidedContext> {
        let list = self.0.get_mut(app)?;
        let i = list.binary_search_by(|e| (*e.kind).cmp(kind)).ok()?;
        let mut v = std::mem::take(list).into_vec();
        let entry = v.remove(i);
        let context = entry.context(app);
        if v.is_empty() {
            self.0.remove(app);
        } else {
            *list = v.into_boxed_slice();
        }
        Some(context)
    }

    /// Every entry with its app, in (app id, kind) order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&AppId, &ProvidedEntry)> {
        self.0
            .iter()
            .flat_map(|(app, list)| list.iter().map(move |e| (app, e)))
    }

    /// The entries of `kind`, by app id, of the apps after `after` (all
    /// when `None`).
    pub(crate) fn of_kind_after<'a>(
        &'a self,
        kind: &'a str,
        after: Option<&AppId>,
    ) -> impl Iterator<Item = (&'a AppId, &'a ProvidedEntry)> + 'a {
        let start = match after {
            Some(app) => std::ops::Bound::Excluded(app.clone()),
            None => std::ops::Bound::Unbounded,
        };
        self.0
            .range((start, std::ops::Bound::Unbounded))
            .filter_map(move |(app, list)| {
                let i = list.binary_search_by(|e| (*e.kind).cmp(kind)).ok()?;
                list.get(i).map(|e| (app, e))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(app: &str, kind: &str, name: &str) -> ProvidedContext {
        ProvidedContext {
            app_id: AppId::new(app).expect("app"),
            kind: kind.into(),
            data: serde_json::json!({ "name": name }).into(),
            updated: Utc::now(),
        }
    }

    #[test]
    fn entries_are_kept_by_app_and_kind_in_order() {
        let mut p = Provided::default();
        assert!(!p.insert(ctx("b", "task", "1")));
        assert!(!p.insert(ctx("a", "task", "2")));
        assert!(!p.insert(ctx("b", "document", "3")));
        assert!(p.insert(ctx("b", "task", "4")));
        let order: Vec<(String, String, Option<String>)> = p
            .iter()
            .map(|(a, e)| (a.to_string(), e.kind.to_string(), e.data.string("name")))
            .collect();
        let want = [
            ("a", "task", "2"),
            ("b", "document", "3"),
            ("b", "task", "4"),
        ];
        assert_eq!(
            order,
            want.map(|(a, k, n)| (a.to_owned(), k.to_owned(), Some(n.to_owned())))
        );
        assert_eq!(p.iter().count(), 3);
        let a = AppId::new("a").expect("app");
        let tasks: Vec<String> = p
            .of_kind_after("task", Some(&a))
            .map(|(a, _)| a.to_string())
            .collect();
        assert_eq!(tasks, ["b"]);
        assert_eq!(p.of_kind_after("task", None).count(), 2);
        let b = AppId::new("b").expect("app");
        assert_eq!(
            p.remove(&b, "document").map(|c| c.data.string("name")),
            Some(Some("3".to_owned()))
        );
        assert!(p.remove(&b, "document").is_none());
        assert!(p.remove(&b, "task").is_some());
        assert!(p.remove(&a, "task").is_some());
        assert_eq!(p.iter().count(), 0);
    }
}

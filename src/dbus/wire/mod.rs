//! The D-Bus wire: how the broker's views become D-Bus bytes, in one
//! place. One serde writer ([`write`]) turns a view (a plain `Serialize`
//! struct of `core::view`) into `a{sv}` bytes for everything that sends a
//! dict: `Changed` signal bodies, the raw replies of every method that
//! answers views (`dbus::served`: `a{sv}`, `aa{sv}`, `(aa{sv}, s)`), and
//! (read back by zvariant into a [`Dict`]) what else carries a dict; and
//! the kept headers ([`header`]) that those raw messages are sent behind.
//!
//! The mapping (the keys are the views' own field names, the same as
//! MCP's JSON; the types come from the Rust types, never from a key):
//! struct or map → `a{sv}` (a `None` field left out, entries in the order
//! of their keys' bytes, a key said twice keeps its last value), string
//! and unit enum variant → `s`, bool → `b`, integer → `x` (or `t` above
//! `i64::MAX`), float → `d`, bytes → `ay`, list of strings and
//! `core::view::Names` → `as`, list of structs → `aa{sv}`, other or mixed
//! lists → `av`. An empty list is `aa{sv}` unless its type is `Names`
//! (`as`).
//!
//! Why one writer: there were two (a tree of zvariant values for replies,
//! and this one-pass byte writer for the hot signals, falling back to the
//! tree for shapes it did not write); two mappings can drift, and a
//! client would then read one field two ways. The tree writer is kept
//! only as the tests' reference ([`reference`]), whose bytes are
//! zvariant's own.

pub(crate) mod header;
#[cfg(test)]
mod reference;
mod write;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use zbus::wire::{OwnedVariant, Variant};

pub(crate) use header::KeptHeader;

/// An `a{sv}` as zbus's typed replies carry it.
pub(crate) type Dict = HashMap<String, OwnedVariant>;

/// A value that does not fit D-Bus: not a dict where one is needed, a
/// map key that is not a string or a number, nesting deeper than D-Bus
/// allows, an array over the specification's 64 MiB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError(String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

impl From<WireError> for super::error::Error {
    fn from(e: WireError) -> Self {
        super::error::Error::Failed(format!("cannot put a value on D-Bus: {e}"))
    }
}

/// The body of `Changed(category, view)`, `(s, a{sv})`: native-endian,
/// at offset 0 (a message body's start).
pub(crate) fn changed<T: Serialize + ?Sized>(
    category: &str,
    view: &T,
) -> Result<Arc<[u8]>, WireError> {
    write::changed(category, view)
}

/// A view as a bare `a{sv}` body (a raw method reply: `dbus::context1`).
pub(crate) fn body<T: Serialize + ?Sized>(view: &T) -> Result<Arc<[u8]>, WireError> {
    write::dict(view)
}

/// Views as a bare `aa{sv}` body (a raw list reply: `dbus::served`).
pub(crate) fn list<T: Serialize>(items: &[T]) -> Result<Arc<[u8]>, WireError> {
    write::dicts(items, None)
}

/// Views and the next page's cursor as a bare `(aa{sv}, s)` body (a raw
/// page reply: `dbus::served`).
pub(crate) fn page<T: Serialize>(items: &[T], cursor: &str) -> Result<Arc<[u8]>, WireError> {
    write::dicts(items, Some(cursor))
}

/// A view as an `a{sv}` method reply through zbus: the bytes the writer
/// wrote, read back by zvariant.
pub(crate) fn dict<T: Serialize + ?Sized>(view: &T) -> Result<Dict, WireError> {
    let bytes = write::dict(view)?;
    let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
    let data = zbus::wire::serialized::Data::new(&bytes[..], ctxt);
    data.deserialize::<Dict>()
        .map(|(d, _)| d)
        .map_err(|e| WireError(format!("reading back a dict: {e}")))
}

/// Views as `aa{sv}` method replies.
pub(crate) fn dicts<T: Serialize>(items: &[T]) -> Result<Vec<Dict>, WireError> {
    items.iter().map(dict).collect()
}

/// A view as one `a{sv}` variant (a dict inside a hand-built reply).
pub(crate) fn dict_variant<T: Serialize + ?Sized>(view: &T) -> Result<OwnedVariant, WireError> {
    let fields: HashMap<String, Variant<'static>> = dict(view)?
        .into_iter()
        .map(|(k, v)| (k, Variant::from(v)))
        .collect();
    OwnedVariant::try_from(Variant::from(fields)).map_err(|e| WireError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::json::dict_to_json;
    use crate::core::view::Names;
    use zbus::wire::DynamicType;

    #[derive(Serialize)]
    struct Item {
        a: i64,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "kebab-case")]
    enum Kind {
        ScreenCast,
    }

    #[derive(Serialize)]
    struct Sample {
        s: &'static str,
        b: bool,
        i: i32,
        u: u32,
        f: f64,
        none: Option<String>,
        states: Names,
        outputs: Names,
        windows: Vec<Item>,
        objs: Vec<Item>,
        kind: Kind,
        json: serde_json::Value,
        #[serde(rename = "media.playback")]
        playback: Option<Vec<Item>>,
    }

    #[test]
    fn types_come_from_the_view_types() {
        let d = dict(&Sample {
            s: "x",
            b: true,
            i: -3,
            u: 7,
            f: 1.5,
            none: None,
            states: Names::default(),
            outputs: Names(vec!["A".into()]),
            windows: vec![],
            objs: vec![Item { a: 1 }],
            kind: Kind::ScreenCast,
            json: serde_json::json!({"mixed": [1, "a"], "n": null}),
            playback: Some(vec![]),
        })
        .expect("fits");
        let sig = |k: &str| d[k].value_signature().to_string();
        assert_eq!(sig("s"), "s");
        assert_eq!(sig("b"), "b");
        assert_eq!(sig("i"), "x");
        assert_eq!(sig("u"), "x");
        assert_eq!(sig("f"), "d");
        assert!(!d.contains_key("none"));
        assert_eq!(sig("states"), "as");
        assert_eq!(sig("outputs"), "as");
        assert_eq!(sig("windows"), "aa{sv}");
        assert_eq!(sig("objs"), "aa{sv}");
        assert_eq!(sig("kind"), "s");
        assert_eq!(sig("json"), "a{sv}");
        assert_eq!(sig("media.playback"), "aa{sv}");
        assert_eq!(dict_to_json(&d)["kind"], "screen-cast");
        assert_eq!(
            dict_to_json(&d)["json"]["mixed"],
            serde_json::json!([1, "a"])
        );
        assert_eq!(d.signature().to_string(), "a{sv}");
    }

    #[test]
    fn map_keys_are_strings_or_numbers() {
        let m = std::collections::BTreeMap::from([(7u32, "seven")]);
        let d = dict(&m).expect("numbers are written out");
        assert_eq!(dict_to_json(&d)["7"], "seven");
        let bad = std::collections::BTreeMap::from([(true, 1)]);
        assert!(dict(&bad).is_err());
    }

    #[test]
    fn a_view_reads_back_as_its_json() {
        let v = crate::core::view::NetworkView {
            connectivity: "full".into(),
            metered: false,
            primary_type: Some("wifi".into()),
            ssid: None,
        };
        let back = dict_to_json(&dict(&v).expect("fits"));
        assert_eq!(back, serde_json::to_value(&v).unwrap_or_default());
    }

    /// A dict as a variant is the same dict, and the reference path's.
    #[test]
    fn a_dict_variant_is_the_reference_paths() {
        let v = serde_json::json!({"name": "a.txt", "n": 3, "l": [1, "x"], "null": null});
        let got = dict_variant(&v).expect("fits");
        let want = reference::dict_variant(&v).expect("reference");
        assert_eq!(got, want);
    }
}

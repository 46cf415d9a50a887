//! JSON views (from `core::view`) to D-Bus values.
//!
//! Mapping: object → `a{sv}` (null members left out), string → `s`,
//! bool → `b`, integer → `x` (or `t` above `i64::MAX`), other number → `d`,
//! array of objects → `aa{sv}`, array of strings → `as`, other arrays → `av`.
//! An empty array has no element to take its type from, so its type comes
//! from its key, as documented in the interface XML: the keys in
//! [`STRING_LIST_KEYS`] are `as`, every other list is `aa{sv}`.

use std::collections::HashMap;

use serde_json::{Map, Value};
use zbus::wire::{OwnedVariant, Variant};

/// Keys whose values are lists of strings (`as`) even when empty.
pub const STRING_LIST_KEYS: &[&str] = &["states", "outputs", "withheld", "categories"];

pub type Dict = HashMap<String, OwnedVariant>;

fn to_variant(key: &str, v: &Value) -> Option<Variant<'static>> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => Variant::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Variant::I64(i)
            } else if let Some(u) = n.as_u64() {
                Variant::U64(u)
            } else {
                Variant::F64(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Variant::from(s.clone()),
        Value::Object(m) => Variant::from(map(m)),
        Value::Array(items) => {
            if items.is_empty() {
                if STRING_LIST_KEYS.contains(&key) {
                    Variant::from(Vec::<String>::new())
                } else {
                    Variant::from(Vec::<HashMap<String, Variant<'static>>>::new())
                }
            } else if items.iter().all(Value::is_object) {
                Variant::from(
                    items
                        .iter()
                        .filter_map(|i| i.as_object().map(map))
                        .collect::<Vec<_>>(),
                )
            } else if items.iter().all(Value::is_string) {
                Variant::from(
                    items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_owned))
                        .collect::<Vec<String>>(),
                )
            } else {
                Variant::from(
                    items
                        .iter()
                        .filter_map(|i| to_variant("", i))
                        .map(|v| Variant::Variant(Box::new(v)))
                        .collect::<Vec<Variant<'static>>>(),
                )
            }
        }
    })
}

fn map(m: &Map<String, Value>) -> HashMap<String, Variant<'static>> {
    m.iter()
        .filter_map(|(k, v)| to_variant(k, v).map(|v| (k.clone(), v)))
        .collect()
}

/// A JSON object as an `a{sv}`; anything else gives an empty dict.
pub fn dict(v: &Value) -> Dict {
    let Value::Object(m) = v else {
        return Dict::new();
    };
    m.iter()
        .filter_map(|(k, v)| {
            let var = to_variant(k, v)?;
            // Only fds can fail to be owned, and JSON holds none.
            OwnedVariant::try_from(var).ok().map(|o| (k.clone(), o))
        })
        .collect()
}

/// A list of JSON objects as `aa{sv}`.
pub fn dicts(items: &[Value]) -> Vec<Dict> {
    items.iter().map(dict).collect()
}

/// A borrowed-free `a{sv}` for signal bodies.
pub fn signal_dict(v: &Value) -> HashMap<String, Variant<'static>> {
    match v {
        Value::Object(m) => map(m),
        _ => HashMap::new(),
    }
}

/// A D-Bus value back to JSON (for `contextctl --json` and tests).
pub fn to_json(v: &Variant<'_>) -> Value {
    match v {
        Variant::U8(n) => Value::from(*n),
        Variant::Bool(b) => Value::Bool(*b),
        Variant::I16(n) => Value::from(*n),
        Variant::U16(n) => Value::from(*n),
        Variant::I32(n) => Value::from(*n),
        Variant::U32(n) => Value::from(*n),
        Variant::I64(n) => Value::from(*n),
        Variant::U64(n) => Value::from(*n),
        Variant::F64(n) => Value::from(*n),
        Variant::Str(s) => Value::String(s.as_str().to_owned()),
        Variant::Signature(s) => Value::String(s.to_string()),
        Variant::ObjectPath(p) => Value::String(p.as_str().to_owned()),
        Variant::Variant(inner) => to_json(inner),
        Variant::Array(a) => Value::Array(a.inner().iter().map(to_json).collect()),
        Variant::Dict(d) => {
            let mut m = Map::new();
            for (k, v) in d.iter() {
                let key = match k {
                    Variant::Str(s) => s.as_str().to_owned(),
                    other => to_json(other).to_string(),
                };
                m.insert(key, to_json(v));
            }
            Value::Object(m)
        }
        Variant::Structure(s) => Value::Array(s.fields().iter().map(to_json).collect()),
        #[cfg(unix)]
        Variant::Fd(_) => Value::Null,
    }
}

/// An `a{sv}` as received by a proxy, as JSON.
pub fn dict_to_json(d: &Dict) -> Value {
    Value::Object(d.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use zbus::wire::DynamicType;

    #[test]
    fn maps_types_and_keeps_empty_list_types() {
        let d = dict(&json!({
            "s": "x", "b": true, "i": -3, "f": 1.5, "null": null,
            "states": [], "windows": [], "outputs": ["A"], "objs": [{"a": 1}], "mixed": [1, "a"],
        }));
        let sig = |k: &str| d[k].value_signature().to_string();
        assert_eq!(sig("s"), "s");
        assert_eq!(sig("b"), "b");
        assert_eq!(sig("i"), "x");
        assert_eq!(sig("f"), "d");
        assert!(!d.contains_key("null"));
        assert_eq!(sig("states"), "as");
        assert_eq!(sig("windows"), "aa{sv}");
        assert_eq!(sig("outputs"), "as");
        assert_eq!(sig("objs"), "aa{sv}");
        assert_eq!(sig("mixed"), "av");
        assert_eq!(d.signature().to_string(), "a{sv}");
    }
}

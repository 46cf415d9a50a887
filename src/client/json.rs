//! What a proxy receives, as JSON (for `contextctl --json`, its tables,
//! and tests).

use std::collections::HashMap;

use serde_json::{Map, Value};
use zbus::wire::{OwnedVariant, Variant};

/// An `a{sv}` as a proxy receives it.
pub type Dict = HashMap<String, OwnedVariant>;

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

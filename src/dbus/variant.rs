//! Core views (`core::view`, plain `Serialize` structs) as D-Bus values.
//!
//! A serde serializer that writes `zvariant` values, so the keys on D-Bus
//! are the views' own field names (the same as MCP's JSON) and the types
//! come from the Rust types:
//! struct or map → `a{sv}` (a `None` field left out), string and unit enum
//! variant → `s`, bool → `b`, integer → `x` (or `t` above `i64::MAX`),
//! float → `d`, list of structs → `aa{sv}`, list of strings and
//! `core::view::Names` → `as`, other lists → `av`. An empty list is
//! `aa{sv}` unless its type is `Names` (`as`): the element type comes from
//! the view's type, never from the key it sits under.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde::{de, ser};
use zbus::wire::{OwnedVariant, Variant};

pub(crate) type Dict = HashMap<String, OwnedVariant>;
type Fields = HashMap<String, Variant<'static>>;

/// A value that did not fit D-Bus (a map with non-string keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VariantError(String);

impl fmt::Display for VariantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VariantError {}

impl ser::Error for VariantError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        VariantError(msg.to_string())
    }
}

impl From<VariantError> for super::error::Error {
    fn from(e: VariantError) -> Self {
        super::error::Error::Failed(format!("cannot put a value on D-Bus: {e}"))
    }
}

/// What one serialized value became.
enum Node {
    /// `None` or `()`: left out of its dict.
    Skip,
    Str(String),
    Dict(Fields),
    Other(Variant<'static>),
}

impl Node {
    fn into_variant(self) -> Option<Variant<'static>> {
        match self {
            Node::Skip => None,
            Node::Str(s) => Some(Variant::from(s)),
            Node::Dict(d) => Some(Variant::from(d)),
            Node::Other(v) => Some(v),
        }
    }
}

/// The name of `core::view::Names` as serde reports it.
const NAMES: &str = "Names";

fn list(items: Vec<Node>, names: bool) -> Variant<'static> {
    let items: Vec<Node> = items
        .into_iter()
        .filter(|n| !matches!(n, Node::Skip))
        .collect();
    if items.is_empty() {
        return if names {
            Variant::from(Vec::<String>::new())
        } else {
            Variant::from(Vec::<Fields>::new())
        };
    }
    if items.iter().all(|n| matches!(n, Node::Str(_))) {
        return Variant::from(
            items
                .into_iter()
                .filter_map(|n| match n {
                    Node::Str(s) => Some(s),
                    _ => None,
                })
                .collect::<Vec<String>>(),
        );
    }
    if items.iter().all(|n| matches!(n, Node::Dict(_))) {
        return Variant::from(
            items
                .into_iter()
                .filter_map(|n| match n {
                    Node::Dict(d) => Some(d),
                    _ => None,
                })
                .collect::<Vec<Fields>>(),
        );
    }
    Variant::from(
        items
            .into_iter()
            .filter_map(Node::into_variant)
            .map(|v| Variant::Variant(Box::new(v)))
            .collect::<Vec<Variant<'static>>>(),
    )
}

struct To;

struct Seq {
    items: Vec<Node>,
    names: bool,
}

struct Dictionary {
    fields: Fields,
    key: Option<String>,
    /// For struct and tuple variants: the variant's name, the one key.
    variant: Option<&'static str>,
}

impl Dictionary {
    fn new(variant: Option<&'static str>) -> Self {
        Dictionary {
            fields: Fields::new(),
            key: None,
            variant,
        }
    }

    fn put<T: ?Sized + Serialize>(&mut self, key: &str, value: &T) -> Result<(), VariantError> {
        if let Some(v) = value.serialize(To)?.into_variant() {
            self.fields.insert(key.to_owned(), v);
        }
        Ok(())
    }

    fn finish(self) -> Node {
        match self.variant {
            None => Node::Dict(self.fields),
            Some(name) => Node::Dict(Fields::from([(
                name.to_owned(),
                Variant::from(self.fields),
            )])),
        }
    }
}

fn int(i: i64) -> Result<Node, VariantError> {
    Ok(Node::Other(Variant::I64(i)))
}

impl ser::Serializer for To {
    type Ok = Node;
    type Error = VariantError;
    type SerializeSeq = Seq;
    type SerializeTuple = Seq;
    type SerializeTupleStruct = Seq;
    type SerializeTupleVariant = Seq;
    type SerializeMap = Dictionary;
    type SerializeStruct = Dictionary;
    type SerializeStructVariant = Dictionary;

    fn serialize_bool(self, v: bool) -> Result<Node, VariantError> {
        Ok(Node::Other(Variant::Bool(v)))
    }
    fn serialize_i8(self, v: i8) -> Result<Node, VariantError> {
        int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Node, VariantError> {
        int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Node, VariantError> {
        int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<Node, VariantError> {
        int(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Node, VariantError> {
        int(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<Node, VariantError> {
        int(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<Node, VariantError> {
        int(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<Node, VariantError> {
        match i64::try_from(v) {
            Ok(i) => int(i),
            Err(_) => Ok(Node::Other(Variant::U64(v))),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<Node, VariantError> {
        Ok(Node::Other(Variant::F64(v.into())))
    }
    fn serialize_f64(self, v: f64) -> Result<Node, VariantError> {
        Ok(Node::Other(Variant::F64(v)))
    }
    fn serialize_char(self, v: char) -> Result<Node, VariantError> {
        Ok(Node::Str(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Node, VariantError> {
        Ok(Node::Str(v.to_owned()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Node, VariantError> {
        Ok(Node::Other(Variant::from(v.to_vec())))
    }
    fn serialize_none(self) -> Result<Node, VariantError> {
        Ok(Node::Skip)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<Node, VariantError> {
        value.serialize(To)
    }
    fn serialize_unit(self) -> Result<Node, VariantError> {
        Ok(Node::Skip)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Node, VariantError> {
        Ok(Node::Skip)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Node, VariantError> {
        Ok(Node::Str(variant.to_owned()))
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<Node, VariantError> {
        if name == NAMES {
            // Already typed when it has elements; an empty one gets `as`.
            return Ok(match value.serialize(To)? {
                Node::Other(Variant::Array(a)) if !a.inner().is_empty() => {
                    Node::Other(Variant::Array(a))
                }
                _ => Node::Other(list(Vec::new(), true)),
            });
        }
        value.serialize(To)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Node, VariantError> {
        let mut d = Dictionary::new(None);
        d.put(variant, value)?;
        Ok(d.finish())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq, VariantError> {
        Ok(Seq {
            items: Vec::with_capacity(len.unwrap_or(0)),
            names: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq, VariantError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq, VariantError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        len: usize,
    ) -> Result<Seq, VariantError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Dictionary, VariantError> {
        Ok(Dictionary::new(None))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Dictionary, VariantError> {
        Ok(Dictionary::new(None))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Dictionary, VariantError> {
        Ok(Dictionary::new(Some(variant)))
    }
}

impl ser::SerializeSeq for Seq {
    type Ok = Node;
    type Error = VariantError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), VariantError> {
        self.items.push(value.serialize(To)?);
        Ok(())
    }
    fn end(self) -> Result<Node, VariantError> {
        Ok(Node::Other(list(self.items, self.names)))
    }
}

impl ser::SerializeTuple for Seq {
    type Ok = Node;
    type Error = VariantError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), VariantError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Node, VariantError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for Seq {
    type Ok = Node;
    type Error = VariantError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), VariantError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Node, VariantError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleVariant for Seq {
    type Ok = Node;
    type Error = VariantError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), VariantError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Node, VariantError> {
        ser::SerializeSeq::end(self)
    }
}

/// A map key as an `a{sv}` key: a string, or a number written out (as
/// JSON writes integer keys); anything else does not fit.
fn key<T: ?Sized + Serialize>(key: &T) -> Result<String, VariantError> {
    match key.serialize(To)? {
        Node::Str(s) => Ok(s),
        Node::Other(Variant::I64(i)) => Ok(i.to_string()),
        Node::Other(Variant::U64(u)) => Ok(u.to_string()),
        _ => Err(VariantError("a dict key must be a string".into())),
    }
}

impl ser::SerializeMap for Dictionary {
    type Ok = Node;
    type Error = VariantError;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key_value: &T) -> Result<(), VariantError> {
        self.key = Some(key(key_value)?);
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), VariantError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| VariantError("a dict value without a key".into()))?;
        self.put(&key, value)
    }
    fn end(self) -> Result<Node, VariantError> {
        Ok(self.finish())
    }
}

impl ser::SerializeStruct for Dictionary {
    type Ok = Node;
    type Error = VariantError;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), VariantError> {
        self.put(key, value)
    }
    fn end(self) -> Result<Node, VariantError> {
        Ok(self.finish())
    }
}

impl ser::SerializeStructVariant for Dictionary {
    type Ok = Node;
    type Error = VariantError;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), VariantError> {
        self.put(key, value)
    }
    fn end(self) -> Result<Node, VariantError> {
        Ok(self.finish())
    }
}

/// A view as the fields of an `a{sv}` (for signal bodies).
pub(crate) fn fields<T: Serialize + ?Sized>(v: &T) -> Result<Fields, VariantError> {
    match v.serialize(To)? {
        Node::Dict(d) => Ok(d),
        Node::Skip => Ok(Fields::new()),
        _ => Err(VariantError("only a struct or a map is an a{sv}".into())),
    }
}

/// A view as an `a{sv}` method reply.
pub(crate) fn dict<T: Serialize + ?Sized>(v: &T) -> Result<Dict, VariantError> {
    fields(v)?
        .into_iter()
        .map(|(k, v)| {
            OwnedVariant::try_from(v)
                .map(|o| (k, o))
                .map_err(|e| VariantError(e.to_string()))
        })
        .collect()
}

/// JSON text, read straight into D-Bus values by the rules above (object
/// → `a{sv}` with `null` members left out, string → `s`, integer → `x`
/// or `t`, number → `d`, bool → `b`, array → `as`/`aa{sv}`/`av`), with no
/// `serde_json::Value` tree between: provided context is held as text
/// (`model::ProvidedData`), and `GetProvided` writes its entries this way.
struct FromJson;

impl<'de> de::Visitor<'de> for FromJson {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Other(Variant::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Other(Variant::I64(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Other(match i64::try_from(v) {
            Ok(i) => Variant::I64(i),
            Err(_) => Variant::U64(v),
        }))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Other(Variant::F64(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Skip)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(n) = seq.next_element_seed(FromJson)? {
            items.push(n);
        }
        Ok(Node::Other(list(items, false)))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut fields = Fields::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(k) = map.next_key::<String>()? {
            if let Some(v) = map.next_value_seed(FromJson)?.into_variant() {
                fields.insert(k, v);
            }
        }
        Ok(Node::Dict(fields))
    }
}

impl<'de> de::DeserializeSeed<'de> for FromJson {
    type Value = Node;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(self)
    }
}

/// A JSON object's text as an `a{sv}` variant (see [`FromJson`]).
pub(crate) fn json_object(text: &str) -> Result<OwnedVariant, VariantError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let node = de::DeserializeSeed::deserialize(FromJson, &mut de)
        .map_err(|e| VariantError(format!("not JSON: {e}")))?;
    match node {
        Node::Dict(d) => {
            OwnedVariant::try_from(Variant::from(d)).map_err(|e| VariantError(e.to_string()))
        }
        _ => Err(VariantError("only a JSON object is an a{sv}".into())),
    }
}

/// A shared string as an owned variant, without copying it.
pub(crate) fn shared_string(s: Arc<str>) -> OwnedVariant {
    OwnedVariant::from(zbus::wire::Str::from(s))
}

/// One string as an owned variant.
pub(crate) fn string(s: String) -> Result<OwnedVariant, VariantError> {
    OwnedVariant::try_from(Variant::from(s)).map_err(|e| VariantError(e.to_string()))
}

pub(crate) fn dicts<T: Serialize>(items: &[T]) -> Result<Vec<Dict>, VariantError> {
    items.iter().map(dict).collect()
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
}

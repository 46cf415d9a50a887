//! The tests' reference for [`super::write`]: the mapping of the module
//! doc as a tree of zvariant values (the broker's only writer until the
//! one-pass writer took over), which zvariant then serialises. Test code
//! only: the writer's bytes must be these.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use serde::ser;
use zbus::wire::{OwnedVariant, Variant};

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

/// A view as the fields of an `a{sv}`.
pub(crate) fn fields<T: Serialize + ?Sized>(v: &T) -> Result<Fields, VariantError> {
    match v.serialize(To)? {
        Node::Dict(d) => Ok(d),
        Node::Skip => Ok(Fields::new()),
        _ => Err(VariantError("only a struct or a map is an a{sv}".into())),
    }
}

/// A view as one `a{sv}` variant.
pub(crate) fn dict_variant<T: Serialize + ?Sized>(v: &T) -> Result<OwnedVariant, VariantError> {
    OwnedVariant::try_from(Variant::from(fields(v)?)).map_err(|e| VariantError(e.to_string()))
}

//! The shared vocabulary of what apps publish (org.contextd.Provider1): the
//! seed kinds, each a schema.org type, their rules, and the JSON-LD
//! `@context` that maps their keys to schema.org IRIs.
//!
//! Apps write plain JSON with natural keys (`name`, `url`, `due`); the
//! `@context` (dbus-interfaces/contextd.jsonld, installed, served as the
//! `Vocabulary` property and `context://vocabulary`) is what a JSON-LD
//! processor expands them with. The broker checks each entry here before it
//! is stored, so that a reader can rely on the required fields and their
//! types, and sets `@type` (and a selection's `length`).
//!
//! No JSON-LD keyword but `@type` is taken, at any depth ([`check_entry`]):
//! keywords change what an entry means to a reader's JSON-LD processor
//! (`@id` makes it a statement about another node, `@reverse` turns its
//! relations around, `@included` and `@graph` add nodes, `@value` and
//! `@language` retype values, a nested `@context` redefines the terms or
//! has the reader fetch a remote one). An entry means what the vocabulary
//! says its keys mean.

use chrono::DateTime;
use serde_json::{Map, Value};

use super::error::{Error, Result};

/// The JSON-LD `@context` document, as installed.
pub(crate) const CONTEXT: &str = include_str!("../../dbus-interfaces/contextd.jsonld");

/// The largest entry, as JSON text.
pub(crate) const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// A seed kind: its schema.org type and the rules of its fields.
struct Kind {
    name: &'static str,
    schema_type: &'static str,
    fields: &'static [Field],
}

/// One field of a seed kind.
struct Field {
    key: &'static str,
    ty: Ty,
    required: bool,
}

#[derive(Clone, Copy)]
enum Ty {
    /// A non-empty string.
    Text,
    /// An RFC 3339 date and time.
    Date,
    /// A string with an `@` in it.
    Email,
    /// A URL (a string with a scheme) or an object describing the thing.
    UrlOrThing,
    /// A string or an object.
    TextOrThing,
    /// A list of strings or objects.
    Things,
    /// One of schema.org's ActionStatusType names.
    ActionStatus,
    /// A non-negative number.
    NonNegative,
    /// A non-negative integer.
    Count,
    /// `{latitude, longitude}` in range.
    Geo,
}

const fn f(key: &'static str, ty: Ty, required: bool) -> Field {
    Field { key, ty, required }
}

const KINDS: &[Kind] = &[
    Kind {
        name: "document",
        schema_type: "DigitalDocument",
        fields: &[
            f("name", Ty::Text, true),
            f("url", Ty::UrlOrThing, false),
            f("encodingFormat", Ty::Text, false),
            f("dateModified", Ty::Date, false),
        ],
    },
    Kind {
        name: "selection",
        schema_type: "Quotation",
        fields: &[
            f("text", Ty::Text, true),
            f("isPartOf", Ty::UrlOrThing, false),
            f("length", Ty::Count, false),
        ],
    },
    Kind {
        name: "task",
        schema_type: "Action",
        fields: &[
            f("name", Ty::Text, true),
            f("status", Ty::ActionStatus, false),
            f("due", Ty::Date, false),
        ],
    },
    Kind {
        name: "location",
        schema_type: "Place",
        fields: &[
            f("geo", Ty::Geo, true),
            f("name", Ty::Text, false),
            f("accuracy", Ty::NonNegative, false),
        ],
    },
    Kind {
        name: "event",
        schema_type: "Event",
        fields: &[
            f("name", Ty::Text, true),
            f("startDate", Ty::Date, true),
            f("endDate", Ty::Date, false),
            f("location", Ty::TextOrThing, false),
            f("attendees", Ty::Things, false),
        ],
    },
    Kind {
        name: "person",
        schema_type: "Person",
        fields: &[
            f("name", Ty::Text, true),
            f("email", Ty::Email, false),
            f("channel", Ty::Text, false),
        ],
    },
];

const ACTION_STATUS: &[&str] = &[
    "PotentialActionStatus",
    "ActiveActionStatus",
    "CompletedActionStatus",
    "FailedActionStatus",
];

/// The seed kinds, in the order the vocabulary documents them.
pub fn seed_kinds() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|k| k.name)
}

/// The schema.org type of a seed kind.
pub(crate) fn schema_type(kind: &str) -> Option<&'static str> {
    KINDS.iter().find(|k| k.name == kind).map(|k| k.schema_type)
}

/// Whether `kind` may be published: a seed kind, or `x-NAME` (lower-case
/// letters, digits and dashes, at most 64 bytes in all).
pub(crate) fn check_kind(kind: &str) -> Result<()> {
    if schema_type(kind).is_some() {
        return Ok(());
    }
    let ok = kind.strip_prefix("x-").is_some_and(|n| {
        !n.is_empty()
            && kind.len() <= 64
            && n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    });
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgs(format!(
            "unknown kind '{}': publish one of {} or x-NAME (lower-case letters, digits, dashes)",
            kind.chars().take(64).collect::<String>(),
            seed_kinds().collect::<Vec<_>>().join(", ")
        )))
    }
}

fn invalid(kind: &str, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgs(format!("{kind}: {why}"))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn check_field(kind: &str, field: &Field, v: &Value) -> Result<()> {
    let key = field.key;
    let want = |what: &str| {
        invalid(
            kind,
            format!("'{key}' must be {what}, not {}", type_name(v)),
        )
    };
    match field.ty {
        Ty::Text => match v {
            Value::String(s) if !s.trim().is_empty() => Ok(()),
            Value::String(_) => Err(invalid(kind, format!("'{key}' must not be empty"))),
            _ => Err(want("a string")),
        },
        Ty::Date => match v {
            Value::String(s) => DateTime::parse_from_rfc3339(s).map(drop).map_err(|e| {
                invalid(
                    kind,
                    format!(
                        "'{key}' must be an RFC 3339 date and time (2026-11-23T09:30:00Z): {e}"
                    ),
                )
            }),
            _ => Err(want("an RFC 3339 date and time string")),
        },
        Ty::Email => match v {
            Value::String(s) if s.contains('@') => Ok(()),
            Value::String(_) => Err(invalid(kind, format!("'{key}' must be an e-mail address"))),
            _ => Err(want("a string")),
        },
        Ty::UrlOrThing => match v {
            Value::String(s)
                if s.split_once(':').is_some_and(|(scheme, rest)| {
                    !scheme.is_empty()
                        && !rest.is_empty()
                        && scheme
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                }) =>
            {
                Ok(())
            }
            Value::String(_) => Err(invalid(
                kind,
                format!("'{key}' must be a URL with a scheme (file:///..., https://...)"),
            )),
            Value::Object(_) => Ok(()),
            _ => Err(want("a URL string or an object")),
        },
        Ty::TextOrThing => match v {
            Value::String(_) | Value::Object(_) => Ok(()),
            _ => Err(want("a string or an object")),
        },
        Ty::Things => match v {
            Value::Array(a) => match a.iter().find(|x| !(x.is_string() || x.is_object())) {
                None => Ok(()),
                Some(x) => Err(invalid(
                    kind,
                    format!("'{key}' must list strings or objects, not {}", type_name(x)),
                )),
            },
            _ => Err(want("a list")),
        },
        Ty::ActionStatus => match v {
            Value::String(s) if ACTION_STATUS.contains(&s.as_str()) => Ok(()),
            _ => Err(invalid(
                kind,
                format!("'{key}' must be one of {}", ACTION_STATUS.join(", ")),
            )),
        },
        Ty::NonNegative => match v.as_f64() {
            Some(n) if n >= 0.0 && n.is_finite() => Ok(()),
            _ => Err(want("a number ≥ 0")),
        },
        Ty::Count => match v.as_u64() {
            Some(_) => Ok(()),
            None => Err(want("an integer ≥ 0")),
        },
        Ty::Geo => {
            let Value::Object(g) = v else {
                return Err(want("an object with latitude and longitude"));
            };
            for (k, range) in [("latitude", 90.0), ("longitude", 180.0)] {
                match g.get(k).and_then(Value::as_f64) {
                    Some(x) if (-range..=range).contains(&x) => {}
                    _ => {
                        return Err(invalid(
                            kind,
                            format!("'{key}.{k}' must be a number from -{range} to {range}"),
                        ));
                    }
                }
            }
            Ok(())
        }
    }
}

/// Check one entry of `kind` (JSON text from the app) and return it as the
/// broker stores and serves it: the object, with `@type` set (and a
/// selection's `length`), without an `@context` (the vocabulary is the
/// context). The error names the rule that was broken.
pub fn check_entry(kind: &str, json: &str) -> Result<Value> {
    check_kind(kind)?;
    if json.len() > MAX_ENTRY_BYTES {
        return Err(Error::InvalidArgs(format!(
            "{kind}: the entry is {} bytes of JSON; at most {MAX_ENTRY_BYTES}",
            json.len()
        )));
    }
    let v: Value = serde_json::from_str(json)
        .map_err(|e| invalid(kind, format!("the data is not JSON: {e}")))?;
    let Value::Object(mut obj) = v else {
        return Err(invalid(
            kind,
            format!("the data must be a JSON object, not {}", type_name(&v)),
        ));
    };
    if let Some(c) = obj.remove("@context")
        && c != Value::String(CONTEXT_IRI.into())
    {
        return Err(invalid(
            kind,
            format!("'@context' may only be \"{CONTEXT_IRI}\" (the broker's vocabulary)"),
        ));
    }
    for (key, v) in &obj {
        check_keys(kind, key, Some(key), v)?;
    }
    let Some(k) = KINDS.iter().find(|k| k.name == kind) else {
        // x-NAME: free-form, any object.
        return Ok(Value::Object(obj));
    };
    match obj.get("@type") {
        None => {}
        Some(Value::String(t)) if t == k.schema_type => {}
        Some(t) => {
            return Err(invalid(
                kind,
                format!("'@type' must be \"{}\", not {t}", k.schema_type),
            ));
        }
    }
    for field in k.fields {
        match obj.get(field.key) {
            Some(v) => check_field(kind, field, v)?,
            None if field.required => {
                return Err(invalid(kind, format!("'{}' is required", field.key)));
            }
            None => {}
        }
    }
    if kind == "selection"
        && let Some(Value::String(text)) = obj.get("text")
    {
        let n = text.chars().count();
        match obj.get("length").and_then(Value::as_u64) {
            Some(l) if l as usize != n => {
                return Err(invalid(
                    kind,
                    format!("'length' is {l} but 'text' has {n} characters"),
                ));
            }
            _ => {
                obj.insert("length".into(), Value::from(n));
            }
        }
    }
    let mut out = Map::with_capacity(obj.len() + 1);
    out.insert("@type".into(), Value::String(k.schema_type.into()));
    obj.remove("@type");
    out.extend(obj);
    Ok(Value::Object(out))
}

/// `@`: what every JSON-LD keyword starts with.
fn is_keyword(key: &str) -> bool {
    key.starts_with('@')
}

/// A key of an entry as an error names it: its path, shortened.
fn shown_path(path: &str) -> String {
    let mut p: String = path.chars().take(80).collect();
    if p.len() < path.len() {
        p.push('…');
    }
    p
}

/// Refuse every key that starts with `@` but `@type`, at any depth of the
/// value `v` of `key` (`None` for a list's item), whose place in the entry
/// is `path` (dotted, for the error); and a `@type` that is not a name (a
/// string, or a list of strings, none of them a keyword).
fn check_keys(kind: &str, path: &str, key: Option<&str>, v: &Value) -> Result<()> {
    let leaf = key.unwrap_or_default();
    if leaf == "@type" {
        let names: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        if names
            .iter()
            .any(|n| !n.as_str().is_some_and(|s| !s.is_empty() && !is_keyword(s)))
        {
            return Err(invalid(
                kind,
                format!(
                    "'{}' must be a type name (a string, or a list of them, not a JSON-LD keyword)",
                    shown_path(path)
                ),
            ));
        }
        return Ok(());
    }
    if is_keyword(leaf) {
        return Err(invalid(
            kind,
            format!(
                "'{}': a key that starts with '@' is a JSON-LD keyword, which changes what an entry means; none is taken but '@type' (and, at the top, the vocabulary's '@context')",
                shown_path(path)
            ),
        ));
    }
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                check_keys(kind, &format!("{path}.{k}"), Some(k), v)?;
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                if let Value::Object(_) | Value::Array(_) = v {
                    check_keys(kind, &format!("{path}[{i}]"), None, v)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The IRI an app may name as its `@context`: this vocabulary.
pub(crate) const CONTEXT_IRI: &str = "urn:contextd:vocabulary";

/// The name of an entry, for the timeline and short listings.
pub(crate) fn title(data: &crate::model::ProvidedData) -> Option<String> {
    data.string("name")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: &str, json: &str) -> String {
        match check_entry(kind, json) {
            Err(Error::InvalidArgs(m)) => m,
            other => panic!("{kind} {json}: {other:?}"),
        }
    }

    #[test]
    fn the_context_is_json_ld_and_maps_every_seed_field() {
        let v: Value = serde_json::from_str(CONTEXT).expect("contextd.jsonld is JSON");
        let ctx = v["@context"].as_object().expect("@context");
        assert_eq!(ctx["@vocab"], "http://schema.org/");
        // Every field is either a schema.org term (through @vocab) with the
        // same name, or mapped explicitly.
        for k in KINDS {
            for f in k.fields {
                let mapped = ctx.contains_key(f.key);
                let schema_named =
                    ["name", "encodingFormat", "text", "geo", "location", "email"].contains(&f.key);
                assert!(
                    mapped || schema_named,
                    "{}.{} is not in the context",
                    k.name,
                    f.key
                );
            }
        }
    }

    #[test]
    fn entries_are_checked_and_typed() {
        let d = check_entry(
            "document",
            r#"{"name":"notes.txt","url":"file:///h/notes.txt"}"#,
        )
        .expect("document");
        assert_eq!(d["@type"], "DigitalDocument");
        assert_eq!(d["name"], "notes.txt");
        let s = check_entry("selection", r#"{"text":"héllo"}"#).expect("selection");
        assert_eq!(s["length"], 5);
        assert!(err("document", "{}").contains("'name' is required"));
        assert!(err("document", r#"{"name":5}"#).contains("'name' must be a string"));
        assert!(err("document", r#"{"name":"a","url":"notes"}"#).contains("URL"));
        assert!(err("task", r#"{"name":"a","status":"done"}"#).contains("must be one of"));
        assert!(err("task", r#"{"name":"a","due":"tomorrow"}"#).contains("RFC 3339"));
        assert!(err("location", r#"{"geo":{"latitude":91,"longitude":0}}"#).contains("latitude"));
        assert!(err("event", r#"{"name":"standup"}"#).contains("'startDate' is required"));
        assert!(err("person", r#"{"name":"Ana","email":"ana"}"#).contains("e-mail"));
        assert!(err("document", "[1]").contains("JSON object"));
        assert!(err("document", "{").contains("not JSON"));
        assert!(err("document", r#"{"@type":"Person","name":"a"}"#).contains("@type"));
        assert!(err("selection", r#"{"text":"ab","length":3}"#).contains("length"));
        let big = format!(r#"{{"name":"{}"}}"#, "a".repeat(MAX_ENTRY_BYTES));
        assert!(err("document", &big).contains("at most 65536"));
        assert!(err("spreadsheet", "{}").contains("unknown kind"));
        assert!(err("x-", "{}").contains("unknown kind"));
        assert!(err("x-Foo", "{}").contains("unknown kind"));
        assert_eq!(
            check_entry("x-mood", r#"{"feeling":"fine"}"#).expect("x-")["feeling"],
            "fine"
        );
        assert!(
            check_entry(
                "document",
                r#"{"@context":"urn:contextd:vocabulary","name":"a"}"#
            )
            .is_ok()
        );
        assert!(
            err(
                "document",
                r#"{"@context":"https://schema.org","name":"a"}"#
            )
            .contains("@context")
        );
    }

    #[test]
    fn no_keyword_but_type_at_any_depth() {
        for (kind, json, key) in [
            (
                "document",
                r#"{"name":"a","@id":"https://bank.example/"}"#,
                "'@id'",
            ),
            (
                "document",
                r#"{"name":"a","@included":[{"name":"b"}]}"#,
                "'@included'",
            ),
            (
                "document",
                r#"{"name":"a","@reverse":{"author":"x"}}"#,
                "'@reverse'",
            ),
            ("document", r#"{"name":"a","@graph":[]}"#, "'@graph'"),
            (
                "document",
                r#"{"name":"a","url":{"@context":"https://evil.example/ctx.jsonld","name":"b"}}"#,
                "'url.@context'",
            ),
            (
                "event",
                r#"{"name":"a","startDate":"2026-01-01T00:00:00Z","attendees":[{"name":"b","@id":"mailto:x"}]}"#,
                "'attendees[0].@id'",
            ),
            (
                "x-mood",
                r#"{"a":{"b":[[{"@value":"x"}]]}}"#,
                "'a.b[0][0].@value'",
            ),
            ("x-mood", r#"{"@ID":"x"}"#, "'@ID'"),
            ("x-mood", r#"{"@":"x"}"#, "'@'"),
        ] {
            let m = err(kind, json);
            assert!(
                m.contains(key) && m.contains("JSON-LD keyword"),
                "{json}: {m}"
            );
        }
        for (kind, json) in [
            ("x-mood", r#"{"@type":{"@id":"x"}}"#),
            ("x-mood", r#"{"@type":"@id"}"#),
            ("document", r#"{"name":"a","url":{"@type":["Thing",3]}}"#),
        ] {
            assert!(err(kind, json).contains("type name"), "{json}");
        }
        // `@type` is a name at any depth; keys with `@` inside are keys.
        let d = check_entry(
            "document",
            r#"{"name":"a","url":{"@type":"WebPage","name":"b"},"x@y":1}"#,
        )
        .expect("@type nested");
        assert_eq!(d["url"]["@type"], "WebPage");
        assert!(check_entry("x-mood", r#"{"@type":["Thing","CreativeWork"]}"#).is_ok());
    }
}

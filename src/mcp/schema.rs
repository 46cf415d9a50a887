//! The JSON Schemas of the tools, derived from types: `outputSchema` from
//! what a tool returns ([`super::output`], the core's views), `inputSchema`
//! from its argument struct, which is also what the call's arguments are
//! parsed into ([`parse`]): one type says what is sent, what is accepted
//! and what the host is told about both.
//!
//! The schemas are written the way the MCP specification reads them: an
//! object at the root, JSON Schema 2020-12 (the default dialect of tool
//! schemas since 2025-11-25, so no `$schema` is written: the TypeScript
//! SDK's default Ajv is draft-07 and refuses a schema naming 2020-12), and
//! every subschema inline: no `$ref`/`$defs`, which some hosts do not
//! resolve. Output schemas describe what serializing writes
//! (`skip_serializing_if` fields optional); input schemas what
//! deserializing accepts.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::timeline;
use crate::model::Urgency;

/// Default and largest page of `list_windows` / `list_notifications`.
pub(crate) const DEFAULT_PAGE: usize = 50;
pub(crate) const MAX_PAGE: usize = 100;
/// Limits of `send_notification`.
pub(crate) const MAX_SUMMARY: usize = 256;
pub(crate) const MAX_BODY: usize = 4096;

fn settings() -> SchemaSettings {
    let mut s = SchemaSettings::draft2020_12();
    s.meta_schema = None;
    s.inline_subschemas = true;
    s
}

/// The schema as a JSON object, with the root's title and description
/// taken off (the tool's description says it) and the integer formats
/// schemars writes (`uint32`, `int64`, `double`, …), which JSON Schema
/// does not define and some validators warn about, left out.
fn finish(schema: schemars::Schema) -> Map<String, Value> {
    let mut v = schema.to_value();
    tidy(&mut v);
    let mut m = match v {
        Value::Object(m) => m,
        // `true`/`false` schemas: no type of ours derives one at the root.
        _ => Map::new(),
    };
    m.remove("title");
    m.remove("description");
    m
}

/// Leave out the formats JSON Schema does not define, and `null` from
/// the type of a property that is not required: such a property is left
/// out (`skip_serializing_if`), never written as `null`; an argument
/// likewise is left out (a `null` one is accepted all the same).
fn tidy(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| f != "date-time")
            {
                m.remove("format");
            }
            let required: Vec<Value> = match m.get("required") {
                Some(Value::Array(r)) => r.clone(),
                _ => Vec::new(),
            };
            if let Some(Value::Object(props)) = m.get_mut("properties") {
                for (k, p) in props.iter_mut() {
                    if let Value::Object(p) = p
                        && !required.iter().any(|r| r == k.as_str())
                    {
                        not_null(p);
                    }
                }
            }
            m.values_mut().for_each(tidy);
        }
        Value::Array(a) => a.iter_mut().for_each(tidy),
        _ => {}
    }
}

fn not_null(p: &mut Map<String, Value>) {
    for k in ["type", "enum"] {
        if let Some(Value::Array(a)) = p.get_mut(k) {
            a.retain(|x| !x.is_null() && x != "null");
            if k == "type" && a.len() == 1 {
                let t = a.remove(0);
                p.insert(k.into(), t);
            }
        }
    }
}

/// The `outputSchema` of a tool that returns `T`. Every result may also
/// say that it was cut to size (`truncated`, `truncation`: see
/// [`super::render::fit`]).
pub(crate) fn output<T: JsonSchema>() -> Value {
    let mut m = finish(
        settings()
            .for_serialize()
            .into_generator()
            .into_root_schema_for::<T>(),
    );
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props
            .entry("truncated")
            .or_insert_with(|| json!({"type": "boolean"}));
        props.entry("truncation").or_insert_with(
            || json!({"type": "string", "description": "Why and how the result was cut to size"}),
        );
    }
    Value::Object(m)
}

/// The `inputSchema` of a tool that takes `T` (with its `properties`
/// even when there are none, as hosts' forms expect).
pub(crate) fn input<T: JsonSchema>() -> Value {
    let mut m = finish(settings().into_generator().into_root_schema_for::<T>());
    m.entry("properties").or_insert_with(|| json!({}));
    Value::Object(m)
}

/// Parse a call's arguments into `T`, checking them against `T`'s schema
/// first so that the model reads what to change in words the schema
/// gives: an argument the tool does not take, a missing one, one of the
/// wrong type or out of range.
pub(crate) fn parse<T: JsonSchema + DeserializeOwned>(
    args: Option<Map<String, Value>>,
) -> Result<T, String> {
    let schema = input::<T>();
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let m = args.unwrap_or_default();
    if let Some(k) = m.keys().find(|k| !props.contains_key(k.as_str())) {
        let k: String = k.chars().take(64).collect();
        return Err(if props.is_empty() {
            format!("unexpected argument '{k}': this tool takes no arguments")
        } else {
            let names: Vec<&str> = props.keys().map(String::as_str).collect();
            format!(
                "unexpected argument '{k}'; the arguments are: {}",
                names.join(", ")
            )
        });
    }
    for k in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if m.get(k).is_none_or(Value::is_null) {
            return Err(match props.get(k).and_then(|p| p.get("description")) {
                Some(Value::String(d)) => format!("'{k}' is required: {d}"),
                _ => format!("'{k}' is required"),
            });
        }
    }
    for (k, v) in &m {
        if let Some(p) = props.get(k)
            && !v.is_null()
        {
            check(k, p, v)?;
        }
    }
    serde_json::from_value(Value::Object(m)).map_err(|e| format!("invalid arguments: {e}"))
}

/// One argument against its property's schema (the keywords our argument
/// types derive: a type, `enum`, integer bounds, a string's largest
/// length).
fn check(k: &str, p: &Value, v: &Value) -> Result<(), String> {
    let has = |t: &str| match p.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(a)) => a.iter().any(|x| x == t),
        _ => false,
    };
    if let Some(Value::Array(allowed)) = p.get("enum") {
        if !allowed.contains(v) {
            let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
            return Err(format!("'{k}' must be one of {}", names.join(", ")));
        }
        return Ok(());
    }
    if has("integer") {
        let min = p.get("minimum").and_then(Value::as_u64).unwrap_or(0);
        let max = p.get("maximum").and_then(Value::as_u64).unwrap_or(u64::MAX);
        return match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Ok(()),
            _ => Err(format!("'{k}' must be a whole number from {min} to {max}")),
        };
    }
    if has("string") {
        let Some(s) = v.as_str() else {
            return Err(format!("'{k}' must be a string"));
        };
        if let Some(max) = p.get("maxLength").and_then(Value::as_u64)
            && s.chars().count() as u64 > max
        {
            return Err(format!("'{k}' is longer than {max} characters"));
        }
    }
    Ok(())
}

/// The arguments of a tool that takes none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// A page of a list: `cursor` and `limit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageArgs {
    /// Opaque cursor from a previous call's nextCursor, to get the next
    /// page.
    #[schemars(
        description = "Opaque cursor from a previous call's nextCursor, to get the next page"
    )]
    pub(crate) cursor: Option<String>,
    #[schemars(
        range(min = 1, max = MAX_PAGE),
        extend("default" = DEFAULT_PAGE),
        description = format!("How many per page (1-{MAX_PAGE}, default {DEFAULT_PAGE})")
    )]
    pub(crate) limit: Option<u64>,
}

impl PageArgs {
    pub(crate) fn limit(&self) -> usize {
        self.limit
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(DEFAULT_PAGE)
    }
}

/// `get_provided_context`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProvidedArgs {
    #[schemars(description = super::resources::kinds_said())]
    pub(crate) kind: String,
    #[schemars(
        description = "Opaque cursor from a previous call's nextCursor, to get the next page"
    )]
    pub(crate) cursor: Option<String>,
    #[schemars(
        range(min = 1, max = MAX_PAGE),
        extend("default" = DEFAULT_PAGE),
        description = format!("How many entries per page (1-{MAX_PAGE}, default {DEFAULT_PAGE})")
    )]
    pub(crate) limit: Option<u64>,
}

/// `send_notification`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotifyArgs {
    #[schemars(length(min = 1, max = MAX_SUMMARY), description = "The one-line title")]
    pub(crate) summary: String,
    #[schemars(length(max = MAX_BODY), description = "Optional longer text")]
    pub(crate) body: Option<String>,
    #[schemars(
        extend("default" = "normal"),
        description = "How urgent (default normal)"
    )]
    pub(crate) urgency: Option<Urgency>,
}

/// `get_recent_activity`: a period, an app, at most how many events.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActivityArgs {
    #[schemars(extend("format" = "date-time"), description = SINCE)]
    pub(crate) since: Option<String>,
    #[schemars(extend("format" = "date-time"), description = UNTIL)]
    pub(crate) until: Option<String>,
    #[schemars(description = "Only this app id")]
    pub(crate) app: Option<String>,
    #[schemars(
        range(min = 1, max = timeline::MAX_EVENTS),
        extend("default" = timeline::DEFAULT_EVENTS),
        description = "At most this many events; `truncated` says when there were more"
    )]
    pub(crate) limit: Option<u32>,
}

/// `summarize_time`: a period.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PeriodArgs {
    #[schemars(extend("format" = "date-time"), description = SINCE)]
    pub(crate) since: Option<String>,
    #[schemars(extend("format" = "date-time"), description = UNTIL)]
    pub(crate) until: Option<String>,
}

const SINCE: &str = "Start (RFC 3339); default one hour ago (24 hours for summarize_time)";
const UNTIL: &str = "End (RFC 3339); default now";

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

/// Parse a call's arguments into `T`: serde alone decides, from the
/// same type the `inputSchema` is derived from (unknown arguments by
/// `deny_unknown_fields`, ranges and lengths by [`Bounded`] and [`Text`]),
/// and the model reads which argument to change and why; for a missing
/// one, what its schema says it is (the kinds `get_provided_context`
/// takes, say).
pub(crate) fn parse<T: DeserializeOwned + JsonSchema>(
    args: Option<Map<String, Value>>,
) -> Result<T, String> {
    let args = args.unwrap_or_default();
    let missing = |args: &Map<String, Value>| {
        let schema = input::<T>();
        let k = schema["required"]
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .find(|k| args.get(*k).is_none_or(Value::is_null))?;
        Some(match schema["properties"][k]["description"].as_str() {
            Some(d) => format!("'{k}' is required: {d}"),
            None => format!("'{k}' is required"),
        })
    };
    let v = Value::Object(args);
    serde_path_to_error::deserialize(&v).map_err(|e| {
        let at: String = e.path().to_string().chars().take(64).collect();
        let inner = e.into_inner();
        if at != "." {
            return format!("invalid argument '{at}': {inner}");
        }
        match &v {
            Value::Object(args) => missing(args),
            _ => None,
        }
        .unwrap_or_else(|| format!("invalid arguments: {inner}"))
    })
}

/// A whole number from `MIN` to `MAX`, in the schema (`minimum`,
/// `maximum`) and when parsed: one declaration of the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounded<const MIN: u64, const MAX: u64>(pub(crate) u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const MIN: u64, const MAX: u64>;
        impl<const MIN: u64, const MAX: u64> serde::de::Visitor<'_> for V<MIN, MAX> {
            type Value = u64;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a whole number from {MIN} to {MAX}")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<u64, E> {
                if (MIN..=MAX).contains(&n) {
                    Ok(n)
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Unsigned(n), &self))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<u64, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
                }
            }
        }
        d.deserialize_u64(V::<MIN, MAX>).map(Self)
    }
}

impl<const MIN: u64, const MAX: u64> JsonSchema for Bounded<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Bounded_{MIN}_{MAX}").into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "integer", "minimum": MIN, "maximum": MAX})
    }
}

impl<const MIN: u64, const MAX: u64> Bounded<MIN, MAX> {
    pub(crate) fn get(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// A string of `MIN` to `MAX` characters, in the schema (`minLength`,
/// `maxLength`) and when parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Text<const MIN: usize, const MAX: usize>(pub(crate) String);

impl<'de, const MIN: usize, const MAX: usize> Deserialize<'de> for Text<MIN, MAX> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let n = s.chars().count();
        if n < MIN || n > MAX {
            return Err(serde::de::Error::custom(format!(
                "{n} characters; it must have {MIN} to {MAX}"
            )));
        }
        Ok(Self(s))
    }
}

impl<const MIN: usize, const MAX: usize> JsonSchema for Text<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Text_{MIN}_{MAX}").into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut s = schemars::json_schema!({"type": "string", "maxLength": MAX});
        if MIN > 0 {
            s.insert("minLength".into(), MIN.into());
        }
        s
    }
}

/// A list of at most `MAX` items, in the schema (`maxItems`) and when
/// parsed: one declaration of the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct List<T, const MAX: usize>(pub(crate) Vec<T>);

impl<'de, T: Deserialize<'de>, const MAX: usize> Deserialize<'de> for List<T, MAX> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Vec::<T>::deserialize(d)?;
        if v.len() > MAX {
            return Err(serde::de::Error::custom(format!(
                "{} items; it must have at most {MAX}",
                v.len()
            )));
        }
        Ok(Self(v))
    }
}

impl<T: JsonSchema, const MAX: usize> JsonSchema for List<T, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("List_{}_{MAX}", T::schema_name()).into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let items = g.subschema_for::<T>();
        schemars::json_schema!({"type": "array", "items": items, "maxItems": MAX})
    }
}

/// The arguments of a tool that takes none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// How many per page of a list tool.
pub(crate) type PageLimit = Bounded<1, { MAX_PAGE as u64 }>;

/// A page of a list: `cursor` and `limit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageArgs {
    #[schemars(
        description = "Opaque cursor from a previous call's nextCursor, to get the next page"
    )]
    pub(crate) cursor: Option<String>,
    #[schemars(
        extend("default" = DEFAULT_PAGE),
        description = format!("How many per page (1-{MAX_PAGE}, default {DEFAULT_PAGE})")
    )]
    pub(crate) limit: Option<PageLimit>,
}

impl PageArgs {
    pub(crate) fn limit(&self) -> usize {
        self.limit.map_or(DEFAULT_PAGE, PageLimit::get)
    }
}

/// `list_notifications`: a page, of one app's or of the urgent ones.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotificationListArgs {
    #[schemars(
        description = "Opaque cursor from a previous call's nextCursor (with the same filters), to get the next page"
    )]
    pub(crate) cursor: Option<String>,
    #[schemars(
        extend("default" = DEFAULT_PAGE),
        description = format!("How many per page (1-{MAX_PAGE}, default {DEFAULT_PAGE})")
    )]
    pub(crate) limit: Option<PageLimit>,
    #[schemars(
        description = "Only the notifications of this app: its name as the notifications give it (app_name), compared without regard to case"
    )]
    pub(crate) app: Option<Text<1, 256>>,
    #[schemars(
        description = "Only notifications at least this urgent: low (all), normal (normal and critical) or critical"
    )]
    pub(crate) min_urgency: Option<Urgency>,
}

impl NotificationListArgs {
    /// The page asked for, of the notifications the filters keep.
    pub(crate) fn page(&self) -> PageArgs {
        PageArgs {
            cursor: self.cursor.clone(),
            limit: self.limit,
        }
    }

    /// Whether the notification of `app_name` with `urgency` is one asked for.
    pub(crate) fn keeps(&self, app_name: &str, urgency: Urgency) -> bool {
        self.app
            .as_ref()
            .is_none_or(|a| a.0.to_lowercase() == app_name.to_lowercase())
            && self.min_urgency.is_none_or(|m| urgency >= m)
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
        extend("default" = DEFAULT_PAGE),
        description = format!("How many entries per page (1-{MAX_PAGE}, default {DEFAULT_PAGE})")
    )]
    pub(crate) limit: Option<PageLimit>,
}

/// `send_notification`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotifyArgs {
    #[schemars(description = "The one-line title")]
    pub(crate) summary: Text<1, MAX_SUMMARY>,
    #[schemars(description = "Optional longer text")]
    pub(crate) body: Option<Text<0, MAX_BODY>>,
    #[schemars(
        extend("default" = "normal"),
        description = "How urgent (default normal)"
    )]
    pub(crate) urgency: Option<Urgency>,
    #[schemars(
        description = "Up to 3 button labels. With actions the call waits for the user: it returns the label they chose, or that they dismissed the notification, that it expired, or that nobody answered within `timeout_s` (then the notification is withdrawn). A notification server that shows no buttons gets the notification without them, and the call returns at once with `actions_unsupported`"
    )]
    pub(crate) actions: Option<List<Text<1, MAX_ACTION_LABEL>, MAX_NOTIFY_ACTIONS>>,
    #[schemars(
        description = "Seconds the notification stays on screen, and with actions how long the call waits for an answer (default: the notification server's own time, and 60 s of waiting)"
    )]
    pub(crate) timeout_s: Option<Bounded<1, MAX_NOTIFY_TIMEOUT_S>>,
}

/// `send_notification`: at most this many actions (servers show three).
pub(crate) const MAX_NOTIFY_ACTIONS: usize = 3;
/// A button's label, in characters.
pub(crate) const MAX_ACTION_LABEL: usize = 64;
/// At most ten minutes on screen, and of waiting for the user.
pub(crate) const MAX_NOTIFY_TIMEOUT_S: u64 = 600;

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
        extend("default" = timeline::DEFAULT_EVENTS),
        description = "At most this many events; `truncated` says when there were more"
    )]
    pub(crate) limit: Option<Bounded<1, { timeline::MAX_EVENTS as u64 }>>,
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

//! Screening of incoming JSON-RPC messages, before rmcp sees them.
//!
//! rmcp silently drops input that is not JSON (its stdio transport follows
//! the other SDKs there), answers HTTP bodies that are not JSON with a
//! plain-text 415, and reports a known method with unusable parameters as
//! "invalid request". Hosts need the JSON-RPC codes (-32700 parse
//! error, -32600 invalid request, -32602 invalid params), so every
//! transport runs each message through [`screen`] first: a message that
//! passes goes to rmcp unchanged; one that does not is answered here with
//! the right code. This layer frames and checks; the protocol itself stays
//! rmcp's.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, RequestId};
use serde_json::Value;

/// The largest JSON-RPC message accepted on any transport: 1 MiB, the same
/// as the HTTP body limit, so that what one transport refuses the others
/// refuse too. Context results are far smaller (lists are paginated).
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// What to do with one incoming message.
#[derive(Debug)]
pub(crate) enum Screened {
    /// Hand it to rmcp.
    Pass(Box<ClientJsonRpcMessage>),
    /// Answer with this error (and do not pass the message on).
    Reject(Rejection),
    /// Drop it without an answer (a notification or response we cannot
    /// use: JSON-RPC forbids answering those).
    Ignore(String),
}

/// A JSON-RPC error answer to a message that did not pass.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejection {
    /// The id of the request when it could be read; `null` otherwise, as
    /// JSON-RPC 2.0 asks for parse errors and invalid requests.
    pub(crate) id: Option<RequestId>,
    pub(crate) error: ErrorData,
}

impl Rejection {
    fn new(id: Option<RequestId>, code: ErrorCode, message: String) -> Self {
        Rejection {
            id,
            error: ErrorData::new(code, message, None),
        }
    }

    /// The answer as rmcp's message type.
    #[cfg(test)]
    pub(crate) fn into_message(self) -> rmcp::model::ServerJsonRpcMessage {
        rmcp::model::ServerJsonRpcMessage::error(self.error, self.id)
    }

    /// The answer as one line of JSON. `id` is written as `null` when it is
    /// unknown (rmcp's serializer would leave it out).
    pub(crate) fn to_json(&self) -> Value {
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": self.id.as_ref().map_or(Value::Null, |id| id.clone().into_json_value()),
            "error": self.error,
        })
    }

    pub(crate) fn too_large(limit: usize) -> Self {
        Rejection::new(
            None,
            ErrorCode::INVALID_REQUEST,
            format!(
                "message larger than {limit} bytes; contextd accepts at most {limit} bytes per JSON-RPC message"
            ),
        )
    }
}

/// Methods whose parameters rmcp parses into a fixed shape: a message with
/// one of these methods that rmcp cannot parse has invalid params.
pub(crate) const KNOWN_REQUESTS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/templates/list",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// Methods that 2026-07-28 removed (SEP-2575): a request of that era naming
/// one is an unknown method (-32601, HTTP 404), whatever its params, not a
/// request with invalid params.
pub(crate) const REMOVED_IN_2026_07_28: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// A request of the 2026-07-28 era carries its protocol version in every
/// request's `_meta` (there is no session that remembers it).
fn stateless_era(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .is_some()
}

/// Whether rmcp parses `method` into a fixed shape for this request, so
/// that params it cannot parse are invalid params.
fn known(method: &str, params: Option<&Value>) -> bool {
    KNOWN_REQUESTS.contains(&method)
        && !(REMOVED_IN_2026_07_28.contains(&method) && stateless_era(params))
}

/// Whether `params` fit the type rmcp parses `method`'s params into, in
/// serde's words when they do not; `None` for a method this does not know
/// the shape of. Absent params are `null`, as rmcp sees them.
pub(crate) fn fit_params(method: &str, params: Option<&Value>) -> Option<Result<(), String>> {
    use rmcp::model::{
        CallToolRequestParams, CompleteRequestParams, GetPromptRequestParams,
        InitializeRequestParams, PaginatedRequestParams, ReadResourceRequestParams,
        SubscribeRequestParams,
    };
    use serde::Deserialize;
    static NULL: Value = Value::Null;
    fn fit<'a, T: Deserialize<'a>>(p: Option<&'a Value>) -> Result<(), String> {
        T::deserialize(p.unwrap_or(&NULL))
            .map(drop)
            .map_err(|e| e.to_string())
    }
    fn fit_opt<'a, T: Deserialize<'a>>(p: Option<&'a Value>) -> Result<(), String> {
        p.map_or(Ok(()), |p| fit::<T>(Some(p)))
    }
    Some(match method {
        "tools/call" => fit::<CallToolRequestParams>(params),
        "resources/read" => fit::<ReadResourceRequestParams>(params),
        "prompts/get" => fit::<GetPromptRequestParams>(params),
        "completion/complete" => fit::<CompleteRequestParams>(params),
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            fit_opt::<PaginatedRequestParams>(params)
        }
        "resources/subscribe" | "resources/unsubscribe" => fit::<SubscribeRequestParams>(params),
        "initialize" => fit::<InitializeRequestParams>(params),
        _ => return None,
    })
}

/// Why `params` do not fit `method`, in serde's words where we can say.
fn param_error(method: &str, params: Option<&Value>) -> String {
    fit_params(method, params)
        .and_then(Result::err)
        .unwrap_or_else(|| "the params do not match the method".into())
}

fn request_id(v: &Value) -> Option<RequestId> {
    match v {
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        Value::String(s) => Some(RequestId::String(s.as_str().into())),
        _ => None,
    }
}

/// The verdict of [`check`]: [`Screened`] without rmcp's message.
#[derive(Debug)]
pub(crate) enum Checked {
    /// Good; the id when the message is a request (it gets an answer).
    Pass(Option<RequestId>),
    Reject(Rejection),
    Ignore(String),
}

/// Methods whose params [`check`] fits against their type directly: the
/// ones hosts send all the time. Building rmcp's whole message (a flattened,
/// buffered deserializer) cost a sixth of the daemon's time under load, and
/// rmcp builds it again on `/mcp`. The others (and the methods 2026-07-28
/// removed, which need [`screen_value`]'s care) go through the full screen.
const FITTED_DIRECTLY: &[&str] = &[
    "tools/call",
    "resources/read",
    "prompts/get",
    "completion/complete",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
];

/// Parse one message's bytes (a UTF-8 byte-order mark is allowed).
fn parse(bytes: &[u8]) -> Result<Value, Rejection> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    serde_json::from_slice(bytes).map_err(|e| {
        Rejection::new(
            None,
            ErrorCode::PARSE_ERROR,
            format!("parse error: not valid JSON ({e})"),
        )
    })
}

/// Check one message as [`screen`] does, without building rmcp's message
/// when its method is one of [`FITTED_DIRECTLY`]: for `/mcp`, where rmcp
/// parses the body itself. What `check` passes, `screen` passes too; a
/// list request whose cursor is not a string `check` refuses (-32602) where
/// rmcp ignores it.
pub(crate) fn check(bytes: &[u8]) -> Checked {
    let v = match parse(bytes) {
        Ok(v) => v,
        Err(r) => return Checked::Reject(r),
    };
    if let Err(answer) = envelope(&v) {
        return answer.into();
    }
    let method = v.get("method").and_then(Value::as_str);
    let is_request = v.get("id").is_some();
    // Params that are not an object (JSON-RPC allows an array; MCP's
    // methods take objects) go through the full screen: serde would fit
    // an array to a struct field by field where rmcp refuses it.
    let params_object = v.get("params").is_none_or(Value::is_object);
    if let (Some(m), true, true) = (method, is_request, params_object)
        && FITTED_DIRECTLY.contains(&m)
        && let Some(fit) = fit_params(m, v.get("params"))
    {
        return match fit {
            Ok(()) => Checked::Pass(v.get("id").and_then(request_id)),
            Err(e) => Checked::Reject(Rejection::new(
                v.get("id").and_then(request_id),
                ErrorCode::INVALID_PARAMS,
                format!("invalid params for {m}: {e}"),
            )),
        };
    }
    screen_value(v).into()
}

impl From<Screened> for Checked {
    fn from(s: Screened) -> Checked {
        match s {
            Screened::Pass(m) => Checked::Pass(match *m {
                ClientJsonRpcMessage::Request(r) => Some(r.id),
                _ => None,
            }),
            Screened::Reject(r) => Checked::Reject(r),
            Screened::Ignore(why) => Checked::Ignore(why),
        }
    }
}

/// Screen the bytes of one message.
pub(crate) fn screen(bytes: &[u8]) -> Screened {
    match parse(bytes) {
        Ok(v) => screen_value(v),
        Err(r) => Screened::Reject(r),
    }
}

/// The JSON-RPC envelope of one message: an object, `"jsonrpc": "2.0"`, a
/// usable id, a method or a result, object params. `Err` carries the answer
/// (a rejection, or an ignored notification).
fn envelope(v: &Value) -> Result<(), Screened> {
    let invalid = |id: Option<RequestId>, why: &str| {
        Err(Screened::Reject(Rejection::new(
            id,
            ErrorCode::INVALID_REQUEST,
            format!("invalid request: {why}"),
        )))
    };
    let Value::Object(obj) = v else {
        return match v {
            Value::Array(_) => invalid(
                None,
                "JSON-RPC batches are not supported by MCP (since 2025-06-18); send one message at a time",
            ),
            _ => invalid(None, "a JSON-RPC message must be a JSON object"),
        };
    };
    let raw_id = obj.get("id");
    let id = raw_id.and_then(request_id);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "\"jsonrpc\" must be \"2.0\"");
    }
    if let Some(raw) = raw_id
        && id.is_none()
    {
        let why = if raw.is_null() {
            "\"id\" must not be null"
        } else {
            "\"id\" must be a string or an integer"
        };
        return invalid(None, why);
    }
    let method = match obj.get("method") {
        None => None,
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => return invalid(id, "\"method\" must be a string"),
    };
    let is_response = obj.contains_key("result") || obj.contains_key("error");
    match (&method, &id, is_response) {
        (Some(_), _, true) => {
            return invalid(id, "a message cannot have both a method and a result");
        }
        (None, Some(_), false) => return invalid(id, "no \"method\", \"result\" or \"error\""),
        (None, None, _) => return invalid(None, "no \"method\" and no \"id\""),
        _ => {}
    }
    if let Some(p) = obj.get("params")
        && !(p.is_object() || p.is_array())
    {
        return match (&method, id) {
            (Some(m), Some(id)) => Err(Screened::Reject(Rejection::new(
                Some(id),
                ErrorCode::INVALID_PARAMS,
                format!("invalid params for {m}: \"params\" must be an object"),
            ))),
            (Some(m), None) => Err(Screened::Ignore(format!(
                "notification {m} with bad params"
            ))),
            _ => invalid(None, "\"params\" must be an object"),
        };
    }
    Ok(())
}

/// Screen a message already parsed as JSON.
pub(crate) fn screen_value(v: Value) -> Screened {
    if let Err(answer) = envelope(&v) {
        return answer;
    }
    if let Some(msg) = typed_request(&v) {
        return Screened::Pass(Box::new(msg));
    }
    let id = v.get("id").and_then(request_id);
    let method = v.get("method").and_then(Value::as_str).map(str::to_owned);
    let params = v.get("params").cloned();
    match serde_json::from_value::<ClientJsonRpcMessage>(v) {
        // rmcp falls back to a custom request when a known method's params
        // do not parse; that is invalid params, not an unknown method.
        Ok(ClientJsonRpcMessage::Request(r))
            if matches!(r.request, ClientRequest::CustomRequest(_))
                && method.as_deref().is_some_and(|m| known(m, params.as_ref())) =>
        {
            let m = method.unwrap_or_default();
            Screened::Reject(Rejection::new(
                Some(r.id),
                ErrorCode::INVALID_PARAMS,
                format!(
                    "invalid params for {m}: {}",
                    param_error(&m, params.as_ref())
                ),
            ))
        }
        Ok(msg) => Screened::Pass(Box::new(msg)),
        Err(e) => match (method, id) {
            (Some(m), Some(id)) if known(&m, params.as_ref()) => Screened::Reject(Rejection::new(
                Some(id),
                ErrorCode::INVALID_PARAMS,
                format!("invalid params for {m}: {e}"),
            )),
            (Some(m), Some(id)) => Screened::Reject(Rejection::new(
                Some(id),
                ErrorCode::INVALID_REQUEST,
                format!("invalid request {m}: {e}"),
            )),
            (Some(m), None) => {
                Screened::Ignore(format!("notification {m} that does not parse: {e}"))
            }
            (None, _) => Screened::Ignore(format!("response that does not parse: {e}")),
        },
    }
}

/// A request of one of the methods hosts call most, parsed as that
/// method's own type: `None` for anything else, and for a request whose
/// params do not parse (the general path then answers it).
///
/// rmcp's `ClientRequest` is an untagged enum of 22 request types: serde
/// tries each in order until one parses, and every miss builds an error
/// message. `tools/call` is the 14th, so parsing one cost some 35 000
/// instructions more than a `ping` (the first), a quarter of all the
/// broker did for a tool call beyond a ping (callgrind, `make bench`'s
/// `get_active_window`). Every type before the method's own fails on the
/// method name alone, so the general path would reach this same type and
/// yield this same value: only the misses are skipped.
fn typed_request(v: &Value) -> Option<ClientJsonRpcMessage> {
    use rmcp::model::{
        CallToolRequest, CompleteRequest, GetPromptRequest, JsonRpcRequest, ListPromptsRequest,
        ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest, ReadResourceRequest,
    };
    use serde::Deserialize;
    fn parse<'a, R>(v: &'a Value) -> Option<ClientJsonRpcMessage>
    where
        R: Deserialize<'a> + Into<ClientRequest>,
    {
        let r = JsonRpcRequest::<R>::deserialize(v).ok()?;
        Some(ClientJsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc: r.jsonrpc,
            id: r.id,
            request: r.request.into(),
        }))
    }
    // A request: a method and an id (`envelope` checked their types), no
    // result or error.
    let obj = v.as_object()?;
    if !obj.contains_key("id") {
        return None;
    }
    match obj.get("method")?.as_str()? {
        "tools/call" => parse::<CallToolRequest>(v),
        "tools/list" => parse::<ListToolsRequest>(v),
        "resources/read" => parse::<ReadResourceRequest>(v),
        "resources/list" => parse::<ListResourcesRequest>(v),
        "resources/templates/list" => parse::<ListResourceTemplatesRequest>(v),
        "prompts/get" => parse::<GetPromptRequest>(v),
        "prompts/list" => parse::<ListPromptsRequest>(v),
        "completion/complete" => parse::<CompleteRequest>(v),
        _ => None,
    }
}

/// A message the HTTP guard already screened, handed to the handlers that
/// want it parsed (the legacy `/messages` endpoint) in the request's
/// extensions.
#[derive(Debug, Clone)]
pub(crate) struct Screen(
    pub(crate) std::sync::Arc<std::sync::Mutex<Option<rmcp::model::ClientJsonRpcMessage>>>,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn code(s: &str) -> Option<i32> {
        match screen(s.as_bytes()) {
            Screened::Reject(r) => Some(r.error.code.0),
            _ => None,
        }
    }

    /// The typed fast path gives what rmcp's untagged parse gives, and
    /// leaves what does not parse as its method's type to the general path.
    #[test]
    fn typed_requests_parse_as_rmcp_does() {
        for m in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_active_window","arguments":{"n":1,"x":[1.5,"a",null]}}}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"t","_meta":{"progressToken":3}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"context://windows"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/templates/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"prompts/list"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}"#,
        ] {
            let v: Value = serde_json::from_str(m).expect("json");
            let typed = typed_request(&v).expect("typed");
            let general = serde_json::from_value::<ClientJsonRpcMessage>(v).expect("general");
            assert_eq!(format!("{typed:?}"), format!("{general:?}"), "{m}");
        }
        for m in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
        ] {
            let v: Value = serde_json::from_str(m).expect("json");
            assert!(typed_request(&v).is_none(), "{m}");
        }
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}}"#),
            Some(-32602)
        );
    }

    #[test]
    fn codes() {
        assert_eq!(code("{not json"), Some(-32700));
        assert_eq!(code("[]"), Some(-32600));
        assert_eq!(code("42"), Some(-32600));
        assert_eq!(code(r#"{"id":1,"method":"ping"}"#), Some(-32600));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            Some(-32600)
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), Some(-32600));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5}}"#),
            Some(-32602)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}"#),
            Some(-32602)
        );
        assert!(matches!(
            screen(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Screened::Pass(_)
        ));
        // Unknown methods pass: rmcp answers them with -32601.
        assert!(matches!(
            screen(br#"{"jsonrpc":"2.0","id":"a","method":"no/such","params":{}}"#),
            Screened::Pass(_)
        ));
        assert!(matches!(
            screen(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Screened::Pass(_)
        ));
        // A method 2026-07-28 removed, in a request of that era, goes on to
        // be answered as unknown; the same in a session has invalid params.
        let removed = br#"{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(matches!(screen(removed), Screened::Pass(_)));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{}}"#),
            Some(-32602)
        );
        // `check` (for /mcp, where rmcp parses) and `screen` agree.
        for m in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"context://x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"a":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/templates/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            // Found by the fuzzer (fuzz/mod.rs): array params, which serde
            // fits to a struct field by field and rmcp refuses.
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/list","params":[null,"jsonrpc"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["x",{}]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":["context://snapshot"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"no/such"}"#,
            "{",
            "[]",
        ] {
            let screened = match screen(m.as_bytes()) {
                Screened::Pass(_) => None,
                Screened::Reject(r) => Some(r.error.code.0),
                Screened::Ignore(_) => Some(0),
            };
            let checked = match check(m.as_bytes()) {
                Checked::Pass(_) => None,
                Checked::Reject(r) => Some(r.error.code.0),
                Checked::Ignore(_) => Some(0),
            };
            // Where rmcp shrugs at a bad cursor, check is stricter.
            if !(screened.is_none() && checked == Some(-32602)) {
                assert_eq!(checked, screened, "{m}");
            }
        }
        let r = match screen(b"{") {
            Screened::Reject(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(r.to_json()["id"], Value::Null);
    }
}

//! Stateless 2026-07-28 `tools/call` requests answered directly.
//!
//! rmcp serves a request without a session by building a whole service
//! for it: a handler, a one-shot transport, a spawned serve loop and a
//! channel for its answer. That machinery, not the tool, sets the
//! throughput of the stateless mode (`make bench`: `server/discover`, which
//! does nothing, is no faster than a consent-checked `tools/call`, at a
//! quarter of what a bare hyper server reaches on the same machine).
//!
//! The HTTP guard (`http::guard`), which has read the body already, hands
//! it here first: this answers the request hosts send most, a `tools/call`
//! of one of our tools, when it is plainly well formed, without parsing it
//! a second time for the guard's own check (what [`accept`] takes, that
//! check passes); it calls the same tool code (`tools::call`) with the same
//! consent mode, audit name and prompt text as the rmcp handler
//! (`server::ContextServer::call_tool`), and writes what rmcp would (JSON,
//! or with `responses = "sse"` an event stream of that one message).
//! Anything it is not sure of goes to rmcp untouched: another method, a
//! session, another protocol version, a progress token, a `logLevel` or
//! another `_meta` key it does not know, `Mcp-Param-*` headers,
//! `Mcp-Method`/`Mcp-Name` missing or disagreeing with the body, a tool it
//! does not serve.
//! So rmcp stays the one place that decides what is wrong with a request.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::model::{
    ClientCapabilities, ErrorCode, Implementation, RequestId, ServerJsonRpcMessage, ServerResult,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::Broker;
use super::consent::{self, Subject};
use super::tools;

/// The only protocol version answered here: the one without sessions.
const VERSION: &str = "2026-07-28";

/// What answering needs.
#[derive(Debug)]
pub(crate) struct Direct {
    pub(crate) broker: Arc<Broker>,
    /// `[mcp.http] responses = "json"`: rmcp answers a request without a
    /// session as JSON; otherwise on an event stream that carries the
    /// answer and ends. This writes the same.
    pub(crate) json: bool,
}

/// A `tools/call` as this module accepts it: exactly these members.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Call {
    jsonrpc: String,
    id: WireId,
    method: String,
    params: Params,
}

/// A request id as the guard's check takes it: an integer that fits
/// `i64`, or a string. (rmcp would also read `1.0` as 1; the check refuses
/// it, and so a float goes to the check.)
#[derive(Debug, PartialEq)]
enum WireId {
    Int(i64),
    Str(String),
}

impl<'de> Deserialize<'de> for WireId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = WireId;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<WireId, E> {
                Ok(WireId::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<WireId, E> {
                i64::try_from(v)
                    .map(WireId::Int)
                    .map_err(|_| E::custom("id too large"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<WireId, E> {
                Ok(WireId::Str(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Call {
    /// The request's id, as rmcp names it.
    pub(super) fn request_id(&self) -> RequestId {
        match &self.id {
            WireId::Int(n) => RequestId::Number(*n),
            WireId::Str(s) => RequestId::String(s.as_str().into()),
        }
    }
}

impl From<WireId> for RequestId {
    fn from(id: WireId) -> RequestId {
        match id {
            WireId::Int(n) => RequestId::Number(n),
            WireId::Str(s) => RequestId::String(s.into()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(rename = "_meta")]
    meta: Meta,
}

/// The request's `_meta`: exactly the three keys a 2026-07-28 request
/// carries (any other, such as a progress token or a `logLevel`, goes to
/// rmcp), read straight into rmcp's types, which judge them as rmcp would.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    version: String,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    _capabilities: ClientCapabilities,
    /// Optional, but not `null`.
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        deserialize_with = "present"
    )]
    client: Option<Implementation>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Implementation>, D::Error> {
    Implementation::deserialize(d).map(Some)
}

/// The host's name from a request that plainly is one this module serves
/// (see the module docs), with the call; `None` sends it to rmcp.
pub(super) fn accept(headers: &HeaderMap, body: &[u8]) -> Option<(Call, Option<String>)> {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().ok());
    if headers.contains_key("mcp-session-id")
        || header("mcp-protocol-version")? != Some(VERSION)
        || headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
    {
        return None;
    }
    // rmcp answers 406 and 415 itself; accept only what it plainly takes.
    let accept = header("accept")??.to_ascii_lowercase();
    if accept.contains("q=")
        || !accept.contains("application/json")
        || !accept.contains("text/event-stream")
    {
        return None;
    }
    let content_type = header("content-type")??;
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return None;
    }
    let call: Call = serde_json::from_slice(body).ok()?;
    if call.jsonrpc != "2.0" || call.method != "tools/call" {
        return None;
    }
    // SEP-2243: the headers name the method and the tool. rmcp decides
    // what a missing or contradicting one deserves.
    if header("mcp-method")? != Some("tools/call")
        || header("mcp-name")? != Some(call.params.name.as_str())
    {
        return None;
    }
    if call.params.meta.version != VERSION {
        return None;
    }
    let client = call
        .params
        .meta
        .client
        .as_ref()
        .map(|i| format!("{} {}", i.name, i.version));
    if !tools::tools()
        .ok()?
        .iter()
        .any(|t| t.name == call.params.name)
    {
        return None;
    }
    Some((call, client))
}

/// Call the tool as `ContextServer::call_tool` does and write what rmcp
/// would write for it.
pub(super) async fn answer(
    d: &Direct,
    subject: &Subject,
    life: &CancellationToken,
    call: Call,
    client: Option<String>,
) -> Response {
    let (broker, json_answers) = (&d.broker, d.json);
    let Call { id, params, .. } = call;
    let id = RequestId::from(id);
    let (request, what) = consent::named("tools/call", "tool", &params.name, &params.arguments);
    // A host that goes away drops this future: the wait for the user ends
    // with it, as rmcp cancels a request whose connection closed. So does
    // revoking the token (`life`).
    let cancel = life.child_token();
    let _ends_with_request = cancel.clone().drop_guard();
    let arguments = consent::arguments_text(&params.arguments);
    let mode = consent::asking(client, None, cancel, &request, &what, arguments);
    // No log message goes with a failed call: this request set no
    // `logLevel` in its `_meta` (one that does goes to rmcp), and SEP-2575
    // sends none without (`ContextServer::log`).
    match tools::call(broker, subject, &params.name, params.arguments, mode).await {
        Ok(result) => reply(
            StatusCode::OK,
            &ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id),
            json_answers,
        ),
        Err(e) => {
            // rmcp's status for an error answer to a request without a
            // session (`jsonrpc_http_status`): only "no such method" and
            // the version and header errors are not 200, and none of
            // those comes from a tool.
            let status = if e.code == ErrorCode::METHOD_NOT_FOUND {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::OK
            };
            reply(
                status,
                &ServerJsonRpcMessage::error(e, Some(id)),
                json_answers,
            )
        }
    }
}

/// The answer as rmcp writes a request's only message: JSON when so
/// configured or when the status is not 200 (it must be known before a
/// stream opens), else an event stream with that one event (`data: JSON`
/// and a blank line), which then ends.
fn reply(status: StatusCode, message: &ServerJsonRpcMessage, json_answers: bool) -> Response {
    let json = json_answers || status != StatusCode::OK;
    // One buffer, sized for a typical answer (a focused window's is about
    // 1 KiB), instead of doubling from 128 bytes.
    let mut body = Vec::with_capacity(2048);
    if !json {
        body.extend_from_slice(b"data: ");
    }
    if let Err(e) = serde_json::to_writer(&mut body, message) {
        tracing::warn!(error = %e, "cannot serialise an MCP answer");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    if json {
        return (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response();
    }
    body.extend_from_slice(b"\n\n");
    (
        status,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    const GOOD: &[(&str, &str)] = &[
        ("mcp-protocol-version", "2026-07-28"),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "get_active_window"),
    ];

    fn body_named(name: &str, meta: &str, extra: &str) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{name}","arguments":{{}},"_meta":{{{meta}}}{extra}}}}}"#
        )
        .into_bytes()
    }

    fn body(meta: &str, extra: &str) -> Vec<u8> {
        body_named("get_active_window", meta, extra)
    }

    fn with_id(id: &str) -> Vec<u8> {
        String::from_utf8_lossy(&body(META, ""))
            .replacen("\"id\":7", &format!("\"id\":{id}"), 1)
            .into_bytes()
    }

    const META: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"Host","version":"2.1"}"#;

    #[test]
    fn a_plain_stateless_tool_call_is_answered_here() {
        let (call, client) = accept(&headers(GOOD), &body(META, "")).expect("accepted");
        assert_eq!(call.params.name, "get_active_window");
        assert_eq!(call.id, WireId::Int(7));
        assert_eq!(client.as_deref(), Some("Host 2.1"));
    }

    #[test]
    fn anything_unusual_goes_to_rmcp() {
        let good = body(META, "");
        let mut h = headers(GOOD);
        h.insert("mcp-session-id", HeaderValue::from_static("s"));
        assert!(accept(&h, &good).is_none(), "a session");
        for (k, v) in [
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", "tools/list"),
            ("mcp-name", "get_snapshot"),
            ("accept", "application/json"),
            ("accept", "application/json;q=0, text/event-stream"),
            ("content-type", "text/plain"),
        ] {
            let mut h = headers(GOOD);
            h.insert(k, HeaderValue::from_static(v));
            assert!(accept(&h, &good).is_none(), "{k}: {v}");
        }
        let mut h = headers(GOOD);
        h.insert("mcp-param-x", HeaderValue::from_static("1"));
        assert!(accept(&h, &good).is_none(), "Mcp-Param-*");
        h = headers(GOOD);
        h.remove("mcp-protocol-version");
        assert!(accept(&h, &good).is_none(), "no version header");

        let h = headers(GOOD);
        for b in [
            body(&format!(r#"{META},"progressToken":1"#), ""),
            body(&format!(r#"{META},"io.example/trace":1"#), ""),
            body(
                r#""io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}"#,
                "",
            ),
            body(r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#, ""),
            body(
                r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]"#,
                "",
            ),
            body(META, r#","task":{}"#),
            body(
                r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null"#,
                "",
            ),
            body(
                r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"x"}"#,
                "",
            ),
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]"#.to_vec(),
            // Ids the guard's check refuses (rmcp would read 1.0 as 1).
            with_id("7.0"),
            with_id("9223372036854775808"),
            with_id("null"),
            br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_active_window","_meta":{}}}"#.to_vec(),
        ] {
            assert!(
                accept(&h, &b).is_none(),
                "{}",
                String::from_utf8_lossy(&b)
            );
        }
        // A tool that is not ours (an extension's are rmcp's to run).
        let mut h = headers(GOOD);
        h.insert("mcp-name", HeaderValue::from_static("no_such_tool"));
        assert!(accept(&h, &body_named("no_such_tool", META, "")).is_none());
        let h = headers(GOOD);
        // Without clientInfo (optional in 2026-07-28) it is still ours.
        let (_, client) = accept(
            &h,
            &body(
                r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}"#,
                "",
            ),
        )
        .expect("accepted");
        assert_eq!(client, None);
        // A string id is kept as it came.
        let (call, _) = accept(&h, &with_id("\"a-1\"")).expect("accepted");
        assert_eq!(call.id, WireId::Str("a-1".into()));
    }
}

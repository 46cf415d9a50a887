//! Fixtures of the official MCP conformance suite: the tools, resources
//! and prompts its server scenarios call by name (`test_simple_text`,
//! `test://static-text`, `test_simple_prompt`, ...), as the suite's
//! reference "everything server" defines them. They carry no desktop
//! context and need no consent; they exist so that the suite exercises
//! rmcp and our transports end to end.
//!
//! They are no part of the library: [`Fixtures`] is an MCP extension
//! (`contextd::internals::mcp_extension`) that the `contextd-conformance`
//! binary (daemon.rs beside this file, built only with the `conformance`
//! cargo feature) installs before it runs the ordinary daemon.

#![allow(deprecated)] // sampling and logging are deprecated by 2026-07-28 but the suite tests them

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequests, InputRequiredResult,
    InputResponses, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ReadResourceResult, RequestStateCodec, ServerRequest,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use serde_json::{Map, Value, json};

use contextd::internals::mcp_extension::{Answer, Extension};
use rmcp::task_manager::TaskManager as Tasks;

/// An rmcp type from its JSON wire form.
fn wire<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The fixtures, as the extension the daemon serves beside its own.
pub(crate) struct Fixtures;

impl Extension for Fixtures {
    fn declare(&self, caps: &mut rmcp::model::ServerCapabilities) {
        declare(caps)
    }
    /// The suite's client sends no bearer token: its requests are the
    /// subject `token:conformance` (the test grants it everything).
    fn anonymous(&self) -> Option<&str> {
        Some("conformance")
    }
    fn tools(&self) -> Vec<Value> {
        tools()
    }
    fn call_tool<'a>(
        &'a self,
        req: &'a CallToolRequestParams,
        ctx: &'a RequestContext<RoleServer>,
    ) -> Answer<'a> {
        Box::pin(async move {
            if let Some(r) = call_with_context(req, ctx).await {
                return Some(r);
            }
            call(&req.name, req.arguments.clone())
                .await
                .map(|r| r.map(CallToolResponse::from))
        })
    }
    fn prompts(&self) -> Vec<Value> {
        prompts()
    }
    fn get_prompt(
        &self,
        req: &GetPromptRequestParams,
    ) -> Option<Result<GetPromptResponse, ErrorData>> {
        get_prompt(req).or_else(|| prompt(&req.name, &req.arguments).map(|r| r.map(Into::into)))
    }
    fn complete(&self, prompt: &str, _arg: &str) -> Option<Vec<String>> {
        prompt.starts_with("test_").then(Vec::new)
    }
    fn resources(&self) -> Vec<Value> {
        resources()
    }
    fn templates(&self) -> Vec<Value> {
        templates()
    }
    fn owns(&self, uri: &str) -> bool {
        uri.starts_with("test://")
    }
    fn read(&self, uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
        read(uri)
    }
    fn tasks(&self) -> Option<&Tasks> {
        Some(tasks())
    }
}

/// A 1x1 red PNG.
const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

fn tools() -> Vec<Value> {
    let simple = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": empty_schema()});
    vec![
        simple("test_simple_text", "Tests simple text content response"),
        simple("test_image_content", "Tests image content response"),
        simple("test_audio_content", "Tests audio content response"),
        simple(
            "test_embedded_resource",
            "Tests embedded resource content response",
        ),
        simple(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
        ),
        simple(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
        ),
        simple(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
        ),
        simple("test_error_handling", "Tests error response handling"),
        json!({
            "name": "test_sampling",
            "description": "Tests server-initiated sampling (LLM completion request)",
            "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}}, "required": ["prompt"]}
        }),
        json!({
            "name": "test_elicitation",
            "description": "Tests server-initiated elicitation (user input request)",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "description": "The message to show the user"}}, "required": ["message"]}
        }),
        simple(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
        ),
        simple(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
        ),
        json!({
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "address", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
                "if": {"required": ["address"]},
                "then": {"properties": {"address": {"required": ["street"]}}},
                "else": {"required": ["name"]},
                "additionalProperties": false
            }
        }),
        json!({
            "name": "test_custom_header",
            "description": "Validates SEP-2243 custom parameter headers",
            "inputSchema": {"type": "object", "properties": {"value": {"type": "string", "x-mcp-header": "Value"}}, "required": ["value"]}
        }),
        simple(
            "test_missing_capability",
            "Requires the sampling client capability",
        ),
        simple(
            "test_streaming_elicitation",
            "Returns an input_required result containing an elicitation request",
        ),
        simple(
            "test_logging_tool",
            "Emits notifications/message only when logLevel is requested",
        ),
        simple(
            "test_input_required_result_elicitation",
            "Requires an elicitation input via InputRequiredResult (SEP-2322)",
        ),
        simple(
            "test_input_required_result_sampling",
            "Requires a sampling input via InputRequiredResult (SEP-2322)",
        ),
        simple(
            "test_input_required_result_list_roots",
            "Requires a roots/list input via InputRequiredResult (SEP-2322)",
        ),
        simple(
            "test_input_required_result_request_state",
            "Round-trips integrity-protected requestState (SEP-2322)",
        ),
        simple(
            "test_input_required_result_multiple_inputs",
            "Requires elicitation + sampling + roots inputs in one round (SEP-2322)",
        ),
        simple(
            "test_input_required_result_multi_round",
            "Drives multiple input_required rounds with evolving requestState (SEP-2322)",
        ),
        simple(
            "test_input_required_result_tampered_state",
            "Rejects tampered requestState with a JSON-RPC error (SEP-2322)",
        ),
        simple(
            "test_input_required_result_capabilities",
            "Only requests inputs for declared client capabilities (SEP-2322)",
        ),
        // The Tasks extension (SEP-2663).
        json!({"name": "greet", "description": "Sync-only greeting fixture (SEP-2663)",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}),
        json!({"name": "slow_compute", "description": "Task-supporting fixture: sleeps `seconds` then returns a result (SEP-2663)",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}}}),
        simple(
            "failing_job",
            "Task-supporting fixture (task support: required): returns a tool execution error (SEP-2663)",
        ),
        simple(
            "protocol_error_job",
            "Task-supporting fixture: fails with a protocol-level error (SEP-2663)",
        ),
        json!({"name": "confirm_delete", "description": "Task-supporting fixture: parks on a single elicitation inputRequest (SEP-2663)",
            "inputSchema": {"type": "object", "properties": {"filename": {"type": "string"}}}}),
        simple(
            "multi_input",
            "Task-supporting fixture: parks on two parallel elicitation inputRequests (SEP-2663)",
        ),
        simple(
            "test_tool_with_task",
            "MRTR round 1 gathers user_name, round 2 escalates to a task (SEP-2663 composition)",
        ),
    ]
}

fn result(v: Value) -> Result<CallToolResult, ErrorData> {
    let mut v = v;
    if let Value::Object(m) = &mut v {
        m.insert("resultType".into(), json!("complete"));
    }
    wire(v)
}

fn text(t: &str) -> Result<CallToolResult, ErrorData> {
    result(json!({"content": [{"type": "text", "text": t}]}))
}

/// Fixture tools that need nothing from the session.
async fn call(
    name: &str,
    args: Option<Map<String, Value>>,
) -> Option<Result<CallToolResult, ErrorData>> {
    Some(match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => {
            result(json!({"content": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]}))
        }
        "test_audio_content" => {
            result(json!({"content": [{"type": "audio", "data": AUDIO, "mimeType": "audio/wav"}]}))
        }
        "test_embedded_resource" => result(json!({"content": [{"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content."
        }}]})),
        "test_multiple_content_types" => result(json!({"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": IMAGE, "mimeType": "image/png"},
            {"type": "resource", "resource": {
                "uri": "test://mixed-content-resource", "mimeType": "application/json",
                "text": json!({"test": "data", "value": 123}).to_string()
            }}
        ]})),
        "test_error_handling" => result(json!({
            "isError": true,
            "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}]
        })),
        "json_schema_2020_12_tool" => text(&format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(args.unwrap_or_default())
        )),
        "test_custom_header" => text(&format!(
            "Custom header value: {}",
            args.as_ref()
                .and_then(|a| a.get("value"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        )),
        _ => return None,
    })
}

fn arg(req: &CallToolRequestParams, k: &str) -> String {
    req.arguments
        .as_ref()
        .and_then(|a| a.get(k))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

async fn elicit(
    ctx: &RequestContext<RoleServer>,
    params: Value,
) -> Result<CallToolResult, ErrorData> {
    let req: ServerRequest = wire(json!({"method": "elicitation/create", "params": params}))?;
    match ctx.peer.send_request(req).await {
        Ok(ClientResult::ElicitResult(r)) => {
            let r = serde_json::to_value(&r).unwrap_or_default();
            text(&format!(
                "Elicitation completed: action={}, content={}",
                r["action"].as_str().unwrap_or_default(),
                r.get("content").cloned().unwrap_or(json!({}))
            ))
        }
        Ok(other) => text(&format!(
            "Elicitation not supported or error: odd answer {other:?}"
        )),
        Err(e) => text(&format!("Elicitation not supported or error: {e}")),
    }
}

/// Fixture tools that depend on the request (its `_meta`, the inputs a
/// 2026-07-28 host sends back) or talk back to the host during the call.
async fn call_with_context(
    req: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, ErrorData>> {
    if let Some(r) = input_required(req, ctx) {
        return Some(r);
    }
    if let Some(r) = task(req, ctx).await {
        return Some(r);
    }
    talking_back(req, ctx)
        .await
        .map(|r| r.map(CallToolResponse::from))
}

// --- SEP-2322 multi round-trip requests (2026-07-28) -----------------------
//
// A tool (or prompt) answers `InputRequiredResult` with the inputs it needs
// (elicitation, sampling, roots) and, where it keeps progress, a sealed
// `requestState`; the host fulfils them and calls again with
// `inputResponses` and the state echoed. rmcp has the types and the codec;
// these fixtures are the suite's reference ones.

/// The codec that seals `requestState`: HMAC with a key drawn once per
/// process, so that a state is good only for the daemon that issued it.
fn codec() -> Result<&'static RequestStateCodec, ErrorData> {
    static CODEC: std::sync::OnceLock<Option<RequestStateCodec>> = std::sync::OnceLock::new();
    CODEC
        .get_or_init(|| {
            let mut key = [0u8; 32];
            ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key).ok()?;
            RequestStateCodec::try_new(key.to_vec()).ok()
        })
        .as_ref()
        .ok_or_else(|| ErrorData::internal_error("no random key for requestState", None))
}

fn seal(state: Value) -> Result<String, ErrorData> {
    codec()?
        .seal_json(&state)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The state a host echoed, checked: a state we did not seal is refused.
fn open(sealed: &str) -> Result<Value, ErrorData> {
    codec()?
        .open_json(sealed)
        .map_err(|_| ErrorData::invalid_params("requestState failed integrity verification", None))
}

fn elicitation(message: &str, field: &str, ty: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": ty}}, "required": [field]}
    }})
}

fn sampling(prompt: &str) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    }})
}

fn roots() -> Value {
    json!({"method": "roots/list"})
}

/// `InputRequiredResult` asking for `requests` (a JSON object of named
/// input requests), with a sealed state when given.
fn needs(requests: Value, state: Option<Value>) -> Result<InputRequiredResult, ErrorData> {
    let requests: InputRequests = wire(requests)?;
    Ok(InputRequiredResult::new(
        Some(requests),
        state.map(seal).transpose()?,
    ))
}

/// One answer of the host, when it is an object (a bare number or string
/// counts as missing, and the input is asked for again).
fn answer<'a>(responses: Option<&'a InputResponses>, key: &str) -> Option<&'a Map<String, Value>> {
    responses
        .and_then(|r| r.get(key))
        .and_then(Value::as_object)
}

fn answered(responses: Option<&InputResponses>, key: &str, path: &[&str]) -> Option<String> {
    let mut v = answer(responses, key)?.get(path[0])?;
    for p in &path[1..] {
        v = v.get(p)?;
    }
    Some(
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string()),
    )
}

fn done(t: &str) -> Result<CallToolResponse, ErrorData> {
    text(t).map(CallToolResponse::from)
}

fn input_required(
    req: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, ErrorData>> {
    let responses = req.input_responses.as_ref();
    let state = req.request_state.as_deref();
    let asked = |requests: Value, state: Option<Value>| needs(requests, state).map(Into::into);
    Some(match req.name.as_ref() {
        "test_input_required_result_elicitation" => {
            match answered(responses, "user_name", &["content", "name"]) {
                Some(name) => done(&format!("Hello, {name}!")),
                None => asked(
                    json!({"user_name": elicitation("What is your name?", "name", "string")}),
                    None,
                ),
            }
        }
        "test_input_required_result_sampling" => {
            match answered(responses, "capital_question", &["content", "text"]) {
                Some(t) => done(&format!("Sampling response: {t}")),
                None => asked(
                    json!({"capital_question": sampling("What is the capital of France?")}),
                    None,
                ),
            }
        }
        "test_input_required_result_list_roots" => match answer(responses, "client_roots") {
            Some(r) => {
                let uris: Vec<&str> = r
                    .get("roots")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|r| r.get("uri").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                done(&format!("Client roots: [{}]", uris.join(", ")))
            }
            None => asked(json!({"client_roots": roots()}), None),
        },
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => match state {
            None => asked(
                json!({"confirm": elicitation("Please confirm", "ok", "boolean")}),
                Some(json!({"stage": "confirm"})),
            ),
            Some(sealed) => open(sealed).and_then(|_| done("Confirmed: state-ok")),
        },
        "test_input_required_result_multiple_inputs" => {
            if let Some(sealed) = state
                && let Err(e) = open(sealed)
            {
                return Some(Err(e));
            }
            let all = ["user_name", "greeting", "client_roots"]
                .iter()
                .all(|k| answer(responses, k).is_some());
            if all && state.is_some() {
                done("All inputs received")
            } else {
                asked(
                    json!({
                        "user_name": elicitation("What is your name?", "name", "string"),
                        "greeting": sampling("Generate a greeting"),
                        "client_roots": roots(),
                    }),
                    Some(json!({"stage": "gather"})),
                )
            }
        }
        "test_input_required_result_multi_round" => {
            let round = match state.map(open).transpose() {
                Ok(s) => s
                    .and_then(|s| s.get("round").and_then(Value::as_i64))
                    .unwrap_or(0),
                Err(e) => return Some(Err(e)),
            };
            match round {
                0 => asked(
                    json!({"step1": elicitation("Step 1: What is your name?", "name", "string")}),
                    Some(json!({"round": 1})),
                ),
                1 => asked(
                    json!({"step2": elicitation("Step 2: What is your favorite color?", "color", "string")}),
                    Some(json!({"round": 2})),
                ),
                _ => done("Multi-round flow complete"),
            }
        }
        "test_input_required_result_capabilities" => {
            if responses.is_some() {
                return Some(done("Capability-aware flow complete"));
            }
            // Only what the host declared it can do may be asked for.
            let caps = ctx.meta.client_capabilities().unwrap_or_default();
            let mut requests = Map::new();
            if caps.elicitation.is_some() {
                requests.insert(
                    "user_name".into(),
                    elicitation("What is your name?", "name", "string"),
                );
            }
            if caps.sampling.is_some() {
                requests.insert("greeting".into(), sampling("Generate a greeting"));
            }
            if caps.roots.is_some() {
                requests.insert("client_roots".into(), roots());
            }
            if requests.is_empty() {
                done("Client declared no MRTR-capable capabilities")
            } else {
                asked(Value::Object(requests), None)
            }
        }
        "test_streaming_elicitation" => asked(
            json!({"streaming_elicitation": elicitation("Provide a value", "value", "string")}),
            None,
        ),
        "test_missing_capability" => {
            if ctx
                .meta
                .client_capabilities()
                .unwrap_or_default()
                .sampling
                .is_none()
            {
                Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_sampling().build(),
                ))
            } else {
                done("Required capability declared")
            }
        }
        _ => return None,
    })
}

// --- The Tasks extension (SEP-2663) ----------------------------------------
//
// rmcp's TaskManager runs the work and answers tasks/get, tasks/update and
// tasks/cancel; these are the suite's reference fixtures. The manager's
// tasks are its own (rmcp spawns them); they are short and end with the
// process, and a conformance build is never a user's daemon.

/// The tasks of this process.
fn tasks() -> &'static TaskManager {
    static TASKS: std::sync::OnceLock<TaskManager> = std::sync::OnceLock::new();
    TASKS.get_or_init(TaskManager::new)
}

/// The capabilities a conformance build declares beyond the product's: the
/// Tasks extension.
fn declare(caps: &mut rmcp::model::ServerCapabilities) {
    caps.extensions
        .get_or_insert_with(Default::default)
        .insert(rmcp::model::TASKS_EXTENSION_ID.to_owned(), Map::new());
}

/// Tools that cannot run without a task: a host that did not declare the
/// extension is told which capability is missing.
const TASK_REQUIRED: &[&str] = &[
    "failing_job",
    "test_tool_with_task",
    "confirm_delete",
    "multi_input",
];
const TASK_SUPPORTING: &[&str] = &[
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
];

fn tool_text(t: String) -> CallToolResult {
    CallToolResult::success(vec![rmcp::model::ContentBlock::text(t)])
}

fn elicited(v: &Value, field: &str) -> Option<Value> {
    v.get("content")?.get(field).cloned()
}

async fn task(
    req: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, ErrorData>> {
    let name = req.name.as_ref();
    if name != "greet" && !TASK_SUPPORTING.contains(&name) {
        return None;
    }
    let as_task = ctx
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks());
    if TASK_REQUIRED.contains(&name) && !as_task {
        return Some(Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )));
    }
    let args = req.arguments.clone().unwrap_or_default();
    let s = |k: &str, default: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    let created = |t| Ok(rmcp::model::CreateTaskResult::new(t).into());
    Some(match name {
        "greet" => Ok(tool_text(format!("Hello, {}!", s("name", "friend"))).into()),
        "slow_compute" => {
            let seconds = args
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 60.0);
            let label = s("label", "compute");
            let done = move || tool_text(format!("slow_compute({label}) done after {seconds}s"));
            if as_task {
                created(tasks().spawn(TaskOptions::default(), move |t| {
                    Box::pin(async move {
                        tokio::select! {
                            _ = t.cancelled() => Err(TaskExit::Cancelled),
                            _ = tokio::time::sleep(Duration::from_secs_f64(seconds)) => Ok(done()),
                        }
                    })
                }))
            } else {
                tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                Ok(done().into())
            }
        }
        "failing_job" => created(tasks().spawn(TaskOptions::default(), |_| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(
                        "failing_job: intentional tool execution error",
                    ),
                ]))
            })
        })),
        "protocol_error_job" => {
            let fail = || {
                ErrorData::internal_error(
                    "protocol_error_job: intentional protocol-level failure",
                    None,
                )
            };
            if as_task {
                created(tasks().spawn(TaskOptions::default(), move |_| {
                    Box::pin(async move {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        Err(TaskExit::Error(fail()))
                    })
                }))
            } else {
                Err(fail())
            }
        }
        "confirm_delete" => {
            let file = s("filename", "file.txt");
            created(tasks().spawn(TaskOptions::default(), move |t| {
                Box::pin(async move {
                    let ask = wire(elicitation(
                        &format!("Delete {file}?"),
                        "confirm",
                        "boolean",
                    ))
                    .map_err(TaskExit::Error)?;
                    let r = t.request_input("confirm", ask).await?;
                    let yes = elicited(&r, "confirm")
                        .and_then(|v| v.as_bool())
                        .unwrap_or(false);
                    Ok(tool_text(format!(
                        "confirm_delete({file}): confirmed = {yes}"
                    )))
                })
            }))
        }
        "multi_input" => created(tasks().spawn(TaskOptions::default(), |t| {
            Box::pin(async move {
                let ask =
                    |m: &str| wire(elicitation(m, "value", "string")).map_err(TaskExit::Error);
                let (a, b) = (ask("Provide value A")?, ask("Provide value B")?);
                let (a, b) =
                    tokio::join!(t.request_input("input-a", a), t.request_input("input-b", b));
                let get = |v: &Value| {
                    elicited(v, "value")
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| "(none)".into())
                };
                Ok(tool_text(format!(
                    "multi_input: a = {}, b = {}",
                    get(&a?),
                    get(&b?)
                )))
            })
        })),
        "test_tool_with_task" => match answered(
            req.input_responses.as_ref(),
            "user_name",
            &["content", "name"],
        ) {
            None => needs(
                json!({"user_name": elicitation("What is your name?", "name", "string")}),
                None,
            )
            .map(Into::into),
            Some(who) => created(tasks().spawn(TaskOptions::default(), move |_| {
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok(tool_text(format!("Hello, {who}! (async)")))
                })
            })),
        },
        _ => return None,
    })
}

/// The multi-round fixture prompt (an `InputRequiredResult` on a request
/// that is not a tool call).
fn get_prompt(req: &GetPromptRequestParams) -> Option<Result<GetPromptResponse, ErrorData>> {
    if req.name != "test_input_required_result_prompt" {
        return None;
    }
    Some(
        match answered(req.input_responses.as_ref(), "user_context", &["content", "context"]) {
            Some(c) => wire::<GetPromptResult>(json!({
                "resultType": "complete",
                "description": "A prompt built from elicited context",
                "messages": [{"role": "user", "content": {"type": "text", "text": format!("Prompt with elicited context: {c}")}}]
            }))
            .map(Into::into),
            None => needs(
                json!({"user_context": elicitation("What context should the prompt use?", "context", "string")}),
                None,
            )
            .map(Into::into),
        },
    )
}

/// Fixture tools that talk back to the host during the call.
async fn talking_back(
    req: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResult, ErrorData>> {
    Some(match req.name.as_ref() {
        "test_logging_tool" => {
            // 2026-07-28: log only when the request asked for a level.
            if let Some(level) = ctx.meta.log_level() {
                let p = LoggingMessageNotificationParam::new(level, json!("logLevel was requested"))
                    .with_logger("contextd-conformance");
                let _ = ctx.peer.notify_logging_message(p).await;
            }
            text("Logging tool completed")
        }
        "test_tool_with_logging" => {
            for (i, m) in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ]
            .iter()
            .enumerate()
            {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let p = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(m));
                let _ = ctx.peer.notify_logging_message(p).await;
            }
            text("Tool with logging executed successfully")
        }
        "test_tool_with_progress" => {
            let token = ctx.meta.get_progress_token();
            for (i, p) in [0.0, 50.0, 100.0].iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if let Some(t) = &token {
                    let n = ProgressNotificationParam::new(t.clone(), *p)
                        .with_total(100.0)
                        .with_message(format!("Completed step {p} of 100"));
                    let _ = ctx.peer.notify_progress(n).await;
                }
            }
            text(
                &token
                    .map(|t| serde_json::to_value(&t).unwrap_or_default().to_string())
                    .unwrap_or_else(|| "0".into()),
            )
        }
        "test_sampling" => {
            let params = wire(json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": arg(req, "prompt")}}],
                "maxTokens": 100
            }));
            let params = match params {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            match ctx.peer.create_message(params).await {
                Ok(r) => {
                    let v = serde_json::to_value(&r).unwrap_or_default();
                    let said = v["content"]["text"]
                        .as_str()
                        .or(v["content"][0]["text"].as_str())
                        .unwrap_or("No response")
                        .to_owned();
                    text(&format!("LLM response: {said}"))
                }
                Err(e) => text(&format!("Sampling not supported or error: {e}")),
            }
        }
        "test_elicitation" => {
            elicit(
                ctx,
                json!({
                    "mode": "form",
                    "message": arg(req, "message"),
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"response": {"type": "string", "description": "User's response"}},
                        "required": ["response"]
                    }
                }),
            )
            .await
        }
        "test_elicitation_sep1034_defaults" => {
            elicit(
                ctx,
                json!({
                    "mode": "form",
                    "message": "Please review and update the form fields with defaults",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "description": "User name", "default": "John Doe"},
                            "age": {"type": "integer", "description": "User age", "default": 30},
                            "score": {"type": "number", "description": "User score", "default": 95.5},
                            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                            "verified": {"type": "boolean", "description": "Verification status", "default": true}
                        },
                        "required": []
                    }
                }),
            )
            .await
        }
        "test_elicitation_sep1330_enums" => {
            elicit(
                ctx,
                json!({
                    "mode": "form",
                    "message": "Please select options from the enum fields",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                            "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                                {"const": "value1", "title": "First Option"},
                                {"const": "value2", "title": "Second Option"},
                                {"const": "value3", "title": "Third Option"}
                            ]},
                            "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                            "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                            "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
                                {"const": "value1", "title": "First Choice"},
                                {"const": "value2", "title": "Second Choice"},
                                {"const": "value3", "title": "Third Choice"}
                            ]}}
                        },
                        "required": []
                    }
                }),
            )
            .await
        }
        _ => return None,
    })
}

fn prompts() -> Vec<Value> {
    vec![
        json!({"name": "test_simple_prompt", "title": "Simple Test Prompt", "description": "A simple prompt without arguments"}),
        json!({"name": "test_prompt_with_arguments", "title": "Prompt With Arguments", "description": "A prompt with required arguments", "arguments": [
            {"name": "arg1", "description": "First test argument", "required": true},
            {"name": "arg2", "description": "Second test argument", "required": true}
        ]}),
        json!({"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource", "description": "A prompt that includes an embedded resource", "arguments": [
            {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}
        ]}),
        json!({"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt that includes image content"}),
        json!({"name": "test_input_required_result_prompt", "description": "A prompt that elicits its context first (SEP-2322)"}),
    ]
}

fn prompt(
    name: &str,
    args: &Option<Map<String, Value>>,
) -> Option<Result<GetPromptResult, ErrorData>> {
    let a = |k: &str| {
        args.as_ref()
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let messages = match name {
        "test_simple_prompt" => {
            json!([{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}])
        }
        "test_prompt_with_arguments" => {
            json!([{"role": "user", "content": {"type": "text", "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", a("arg1"), a("arg2"))}}])
        }
        "test_prompt_with_embedded_resource" => json!([
            {"role": "user", "content": {"type": "resource", "resource": {"uri": a("resourceUri"), "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
            {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}
        ]),
        "test_prompt_with_image" => json!([
            {"role": "user", "content": {"type": "image", "data": IMAGE, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
        ]),
        _ => return None,
    };
    Some(wire(
        json!({"resultType": "complete", "messages": messages}),
    ))
}

fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource", "description": "A static text resource for testing", "mimeType": "text/plain"}),
        json!({"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource", "description": "A static binary resource (image) for testing", "mimeType": "image/png"}),
        json!({"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource", "description": "A resource that auto-updates every 3 seconds", "mimeType": "text/plain"}),
    ]
}

fn templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
        "description": "A resource template with parameter substitution", "mimeType": "application/json"
    })]
}

fn read(uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
    let contents = match uri {
        "test://static-text" => {
            json!([{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}])
        }
        "test://static-binary" => json!([{"uri": uri, "mimeType": "image/png", "blob": IMAGE}]),
        "test://watched-resource" => {
            json!([{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}])
        }
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")?;
            json!([{"uri": uri, "mimeType": "application/json", "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()}])
        }
    };
    Some(wire(
        json!({"resultType": "complete", "contents": contents}),
    ))
}

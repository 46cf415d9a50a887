//! Fixtures of the official MCP conformance suite (`conformance` cargo
//! feature only, never in a release build): the tools, resources and
//! prompts its server scenarios call by name (`test_simple_text`,
//! `test://static-text`, `test_simple_prompt`, ...), as the suite's
//! reference "everything server" defines them. They carry no desktop
//! context and need no consent; they exist so that the suite exercises
//! rmcp and our transports end to end.

#![allow(deprecated)] // sampling and logging are deprecated by 2026-07-28 but the suite tests them

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientResult, GetPromptResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ReadResourceResult, ServerRequest,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

use super::error::{Error, wire};

/// A 1x1 red PNG.
const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

pub fn tools() -> Vec<Value> {
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
                "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                "additionalProperties": false
            }
        }),
    ]
}

fn result(v: Value) -> Result<CallToolResult, ErrorData> {
    let mut v = v;
    if let Value::Object(m) = &mut v {
        m.insert("resultType".into(), json!("complete"));
    }
    wire(v).map_err(Into::into)
}

fn text(t: &str) -> Result<CallToolResult, ErrorData> {
    result(json!({"content": [{"type": "text", "text": t}]}))
}

/// Fixture tools that need nothing from the session.
pub async fn call(
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

/// Fixture tools that talk back to the host during the call.
pub async fn call_with_context(
    req: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResult, ErrorData>> {
    Some(match req.name.as_ref() {
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
                Err(e) => return Some(Err(e.into())),
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

pub fn prompts() -> Vec<Value> {
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
    ]
}

pub fn prompt(
    name: &str,
    args: &Option<Map<String, Value>>,
) -> Option<Result<GetPromptResult, Error>> {
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

pub fn completes(name: &str) -> bool {
    name.starts_with("test_")
}

pub fn complete(_name: &str, _arg: &str, _prefix: &str) -> Vec<String> {
    Vec::new()
}

pub fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource", "description": "A static text resource for testing", "mimeType": "text/plain"}),
        json!({"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource", "description": "A static binary resource (image) for testing", "mimeType": "image/png"}),
        json!({"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource", "description": "A resource that auto-updates every 3 seconds", "mimeType": "text/plain"}),
    ]
}

pub fn templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
        "description": "A resource template with parameter substitution", "mimeType": "application/json"
    })]
}

pub fn read(uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
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
    Some(wire(json!({"resultType": "complete", "contents": contents})).map_err(Into::into))
}

pub fn is_fixture(uri: &str) -> bool {
    uri.starts_with("test://")
}

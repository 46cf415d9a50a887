//! Fixtures of the official MCP conformance suite (`conformance` feature
//! only): the tools, resources and prompts its server scenarios call by
//! name. Never in a release build.

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult, GetPromptResult, ReadResourceResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};

use super::error::Error;

pub fn tools() -> Vec<Value> {
    Vec::new()
}

pub async fn call(
    _name: &str,
    _args: Option<Map<String, Value>>,
) -> Option<Result<CallToolResult, ErrorData>> {
    None
}

pub async fn call_with_context(
    _req: &CallToolRequestParams,
    _ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResult, ErrorData>> {
    None
}

pub fn prompts() -> Vec<Value> {
    Vec::new()
}

pub fn prompt(
    _name: &str,
    _args: &Option<Map<String, Value>>,
) -> Option<Result<GetPromptResult, Error>> {
    None
}

pub fn completes(_name: &str) -> bool {
    false
}

pub fn complete(_name: &str, _arg: &str, _prefix: &str) -> Vec<String> {
    Vec::new()
}

pub fn resources() -> Vec<Value> {
    Vec::new()
}

pub fn templates() -> Vec<Value> {
    Vec::new()
}

pub fn read(_uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
    None
}

pub fn is_fixture(_uri: &str) -> bool {
    false
}

//! What a daemon may serve over MCP beside its own tools, prompts and
//! resources: an [`Extension`], installed before the daemon starts. The
//! product installs none (`contextd` never calls [`install`]), so every
//! method here answers "nothing of mine" and the server serves exactly its
//! own catalog.
//!
//! It exists for the official MCP conformance suite: its fixtures (tools
//! named `test_simple_text`, resources `test://...`, the 2026-07-28
//! multi-round and Tasks fixtures) are a separate binary,
//! `contextd-conformance` (tests/mcp_conformance/, built only with the
//! `conformance` cargo feature), that installs them and then runs the
//! ordinary daemon. No fixture code and no `cfg` for it is in the
//! library, so a release build cannot serve them.
//!
//! Why a process-wide hook and not a parameter of the daemon: the
//! extension must reach the MCP server through the same `contextd` start
//! (arguments, config, daemon wiring) the product uses, and nothing
//! between `main` and the MCP server should carry a test's concern.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    ReadResourceResult, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::TaskManager;
use serde_json::Value;

/// A call's answer, `None` when the name is not the extension's.
pub type Answer<'a> =
    Pin<Box<dyn Future<Output = Option<Result<CallToolResponse, ErrorData>>> + Send + 'a>>;

/// Tools, prompts and resources served beside the daemon's own. Every
/// method has a default that serves nothing. Lists are in the wire form
/// of `tools/list`, `prompts/list`, `resources/list` and
/// `resources/templates/list` entries; they are checked when listed (an
/// entry rmcp cannot read fails the listing, as a bad entry of ours
/// would). Names and URIs must not be the daemon's: the daemon's own
/// are looked up first where a name could be both.
pub trait Extension: Send + Sync + 'static {
    /// Capabilities to declare beyond the daemon's (an extension's id).
    fn declare(&self, caps: &mut ServerCapabilities) {
        let _ = caps;
    }
    /// The subject (a token name) that HTTP requests without a bearer
    /// token are served as, instead of 401. The conformance suite's client
    /// sends no token. `None`: every request needs a token.
    fn anonymous(&self) -> Option<&str> {
        None
    }
    fn tools(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Run tool `req.name` if it is the extension's.
    fn call_tool<'a>(
        &'a self,
        req: &'a CallToolRequestParams,
        ctx: &'a RequestContext<RoleServer>,
    ) -> Answer<'a> {
        let _ = (req, ctx);
        Box::pin(std::future::ready(None))
    }
    fn prompts(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Build prompt `req.name` if it is the extension's.
    fn get_prompt(
        &self,
        req: &GetPromptRequestParams,
    ) -> Option<Result<GetPromptResponse, ErrorData>> {
        let _ = req;
        None
    }
    /// The values `completion/complete` offers for argument `arg` of the
    /// extension's prompt `prompt`; `None` when the prompt is not its.
    fn complete(&self, prompt: &str, arg: &str) -> Option<Vec<String>> {
        let _ = (prompt, arg);
        None
    }
    fn resources(&self) -> Vec<Value> {
        Vec::new()
    }
    fn templates(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Whether `uri` is the extension's (read by [`Self::read`],
    /// subscribed to without a consent check: it carries no context).
    fn owns(&self, uri: &str) -> bool {
        let _ = uri;
        false
    }
    /// Read resource `uri` if it is the extension's.
    fn read(&self, uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
        let _ = uri;
        None
    }
    /// The tasks (SEP-2663) `tasks/get`, `tasks/update` and `tasks/cancel`
    /// answer for; `None`: those methods are not found.
    fn tasks(&self) -> Option<&TaskManager> {
        None
    }
}

static EXTENSION: OnceLock<Box<dyn Extension>> = OnceLock::new();

/// Serve `extension` beside the daemon's own, in every MCP session of this
/// process; call before the daemon starts. A second call is refused (the
/// extension given back).
#[allow(clippy::result_large_err)]
pub fn install(extension: Box<dyn Extension>) -> Result<(), Box<dyn Extension>> {
    EXTENSION.set(extension)
}

/// The installed extension; `None` in the product.
pub(crate) fn get() -> Option<&'static dyn Extension> {
    EXTENSION.get().map(|e| &**e)
}

//! The MCP wire errors: JSON-RPC codes.
//!
//! Two tiers, as on D-Bus: `core::Error` is the domain error, [`Error`] is
//! what an MCP host sees, and there is exactly one `From` between them, so
//! that a consent refusal is -32004 on every transport and every method.

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use serde_json::json;

use crate::core;

/// `PERMISSION_DENIED`: the host may not see this (MCP has no standard
/// code; -32004 is what the other contextd clients use, in
/// the server-defined range next to the spec's -32002).
pub(crate) const PERMISSION_DENIED: ErrorCode = ErrorCode(-32004);
/// The host has too many requests running, or all hosts do: come back
/// after `retryAfter` seconds (`admission`).
pub(crate) const BUSY: ErrorCode = ErrorCode(-32005);
/// The spec's "resource not found".
pub(crate) const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode::RESOURCE_NOT_FOUND;

/// Every error an MCP request of contextd can end with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The consent gate refused (or the user has not answered); the message
    /// names the app id, the category and how to grant it.
    #[error("{message}")]
    PermissionDenied {
        message: String,
        app: String,
        category: String,
    },
    /// No such resource (a URI we do not serve, a window that is gone).
    #[error("{0}")]
    NotFound(String),
    /// Parameters that do not fit the method.
    #[error("{0}")]
    InvalidParams(String),
    /// A source the answer needs is not running.
    #[error("{0}")]
    Unavailable(String),
    /// Anything else; a bug or an I/O failure on our side.
    #[error("{0}")]
    Internal(String),
}

impl From<core::Error> for Error {
    fn from(e: core::Error) -> Self {
        let message = e.to_string();
        match e {
            core::Error::NotAllowed { app, category, .. }
            | core::Error::Pending { app, category } => Error::PermissionDenied {
                message,
                app: app.to_string(),
                category: category.to_string(),
            },
            core::Error::NotFound(_) => Error::NotFound(message),
            core::Error::InvalidArgs(_) | core::Error::LimitExceeded(_) => {
                Error::InvalidParams(message)
            }
            core::Error::PublishRefused { .. }
            | core::Error::NeverShared { .. }
            | core::Error::NotAReporter { .. }
            | core::Error::NotAnAgent { .. }
            | core::Error::NotTheUser { .. } => Error::Unavailable(message),
            core::Error::Unavailable(_) => Error::Unavailable(message),
            core::Error::Failed(_) => Error::Internal(message),
        }
    }
}

impl From<Error> for ErrorData {
    fn from(e: Error) -> Self {
        match e {
            Error::PermissionDenied {
                message,
                app,
                category,
            } => ErrorData::new(
                PERMISSION_DENIED,
                message,
                Some(json!({ "app_id": app, "category": category })),
            ),
            Error::NotFound(m) => ErrorData::new(RESOURCE_NOT_FOUND, m, None),
            Error::InvalidParams(m) => ErrorData::invalid_params(m, None),
            Error::Unavailable(m) => {
                ErrorData::internal_error(m, Some(json!({ "reason": "unavailable" })))
            }
            Error::Internal(m) => ErrorData::internal_error(m, None),
        }
    }
}

/// Build an rmcp wire type from its JSON form. The catalog (tools,
/// resources, prompts) is written as JSON because that is the form the spec
/// and hosts document, and rmcp's types are `non_exhaustive`; a shape that
/// does not parse is a bug of ours, reported as an internal error (and
/// caught by the unit tests, which build every one).
pub(crate) fn wire<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, Error> {
    serde_json::from_value(v).map_err(|e| Error::Internal(format!("internal wire shape: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AppId, Category};

    #[test]
    fn consent_refusals_are_permission_denied_with_the_grant_hint() {
        let e = core::Error::NotAllowed {
            app: AppId::new("org.example.Host").expect("id"),
            category: Category::Windows,
            hint: "add a grant".into(),
        };
        let wire: ErrorData = Error::from(e).into();
        assert_eq!(wire.code, PERMISSION_DENIED);
        assert!(wire.message.contains("org.example.Host") && wire.message.contains("add a grant"));
        let nf: ErrorData = Error::from(core::Error::NotFound("x".into())).into();
        assert_eq!(nf.code.0, -32002);
        let ia: ErrorData = Error::from(core::Error::InvalidArgs("x".into())).into();
        assert_eq!(ia.code.0, -32602);
    }
}

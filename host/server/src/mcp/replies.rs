//! A tool's answer when it is not a run's output: a failure as the model reads it, or
//! JSON. Every tool answers through these, so they stand apart from the tools.

use rmcp::model::{CallToolResult, ContentBlock};
use sandlot_core::error::Error;
use serde_json::json;

/// Any failure of a tool, as a result the model reads (not a protocol error, which
/// clients tend to hide from it): `error [KIND]: message`, KIND being the error's
/// stable [`ErrorKind`](sandlot_core::ErrorKind) name, and a hint when trying again may help.
pub(super) fn refused(error: Error) -> CallToolResult {
    let kind = error.kind();
    let again = if kind.is_retryable() {
        " (this may pass if tried again shortly)"
    } else {
        ""
    };
    CallToolResult::error(vec![ContentBlock::text(format!(
        "error [{kind}]: {error}{again}"
    ))])
}

/// A tool's arguments that cannot be used as given.
pub(super) fn invalid(reason: impl Into<String>) -> CallToolResult {
    refused(Error::InvalidRequest {
        reason: reason.into(),
    })
}

/// What a model is told of a session it opened (or restored).
pub(super) fn opened(info: &crate::manager::SessionInfo) -> serde_json::Value {
    json!({
        "session_id": info.id,
        "language": info.language,
        "backend": info.backend,
        "runs_with": info.runs_with,
        "keeps_variables": info.persistent,
        "idle_timeout_seconds": info.idle_timeout_seconds,
    })
}

/// A JSON answer.
pub(super) fn answer(value: serde_json::Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

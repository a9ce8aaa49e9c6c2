//! An [`Execution`] as MCP content: a JSON summary a model reads, plots as images, and
//! the other files as embedded resources.

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use sandlot_core::execution::Execution;
use serde_json::json;

/// Most bytes of each stream put in the summary; the rest is said to be cut.
const STREAM_CAP: usize = 64 << 10;

/// The result of a tool that ran code: an error result when the code did not end
/// well (so a model sees at once that it failed), with the same content either way.
pub(super) fn execution(run: &Execution, uri_base: &str) -> CallToolResult {
    let mut blocks = vec![ContentBlock::text(summary(run).to_string())];
    for artifact in &run.artifacts {
        blocks.push(if artifact.mime.starts_with("image/") {
            ContentBlock::image(base64_of(&artifact.bytes), artifact.mime)
        } else {
            // Percent-encoded: a name is one component whatever bytes it holds.
            let uri = format!("{uri_base}/{}", artifact.path.to_uri_path());
            ContentBlock::resource(resource(&artifact.bytes, uri, artifact.mime))
        });
    }
    if run.exit_code == 0 && run.end == sandlot_core::EndReason::Completed {
        CallToolResult::success(blocks)
    } else {
        CallToolResult::error(blocks)
    }
}

/// What a model needs to read of a run, as JSON.
fn summary(run: &Execution) -> serde_json::Value {
    let stream = |bytes: &[u8], truncated: bool| {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(STREAM_CAP)]);
        (text.into_owned(), truncated || bytes.len() > STREAM_CAP)
    };
    let (stdout, stdout_cut) = stream(&run.stdout, run.stdout_truncated);
    let (stderr, stderr_cut) = stream(&run.stderr, run.stderr_truncated);
    json!({
        "exit_code": run.exit_code,
        "end": run.end,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": stdout_cut,
        "stderr_truncated": stderr_cut,
        "duration_ms": run.duration.as_secs_f64() * 1000.0,
        "tool_calls": run.tool_calls.len(),
        "files": run.artifacts.iter().map(|a| json!({
            "path": a.path, "size": a.size, "mime": a.mime, "plot": a.is_plot,
        })).collect::<Vec<_>>(),
        "files_truncated": run.artifacts_truncated,
        "files_refused": run.artifacts_refused,
        "findings": run.findings,
        "backend": run.backend,
        "unenforced_policy": run.unenforced,
    })
}

/// A file read from a session: text when it is UTF-8, else base64.
pub(super) fn file(path: &str, bytes: &[u8], uri: String) -> CallToolResult {
    let mime = sandlot_core::artifact::mime_of(path);
    CallToolResult::success(vec![
        ContentBlock::text(json!({ "path": path, "size": bytes.len(), "mime": mime }).to_string()),
        ContentBlock::resource(resource(bytes, uri, mime)),
    ])
}

/// A file's contents as a resource: text when it is UTF-8, else base64.
fn resource(bytes: &[u8], uri: String, mime: &str) -> ResourceContents {
    match std::str::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(text, uri),
        Err(_) => ResourceContents::blob(base64_of(bytes), uri),
    }
    .with_mime_type(mime)
}

fn base64_of(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

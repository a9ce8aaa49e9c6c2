//! The API's OpenAPI 3.1 document, served at `/openapi.json`: the request and answer
//! schemas generated from the types the handlers take and give (schemars), the
//! operations listed next to the router. Built in the process, from nothing but code.

use super::requests::{
    Fork, OpenSession, Restore, RunOnce, SessionRun, Shell, TakeSnapshot, ToolResult, UpdateNetwork,
};
use crate::manager::{SessionInfo, SnapshotInfo};
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

/// One operation of the API, as the document lists it.
struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    /// The request body's schema (JSON), if it takes one.
    body: Option<Value>,
    /// The success status and its answer.
    answer: (&'static str, Value),
    /// Whether it needs no token.
    public: bool,
}

/// The document.
pub(super) fn document() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    let mut generator = settings.into_generator();
    let schema = |reference: schemars::Schema| reference.to_value();
    let open_session = schema(generator.subschema_for::<OpenSession>());
    let tool_result = schema(generator.subschema_for::<ToolResult>());
    let run_once = schema(generator.subschema_for::<RunOnce>());
    let session_run = schema(generator.subschema_for::<SessionRun>());
    let shell = schema(generator.subschema_for::<Shell>());
    let session = schema(generator.subschema_for::<SessionInfo>());
    let take_snapshot = schema(generator.subschema_for::<TakeSnapshot>());
    let fork = schema(generator.subschema_for::<Fork>());
    let update_network = schema(generator.subschema_for::<UpdateNetwork>());
    let restore = schema(generator.subschema_for::<Restore>());
    let snapshot = schema(generator.subschema_for::<SnapshotInfo>());
    let binary = json!({ "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } });
    let execution = json!({ "$ref": "#/components/schemas/Execution" });
    let json_body = |schema: Value| json!({ "application/json": { "schema": schema } });
    let operations = [
        Operation {
            method: "get",
            path: "/health",
            summary: "Whether the server answers",
            body: None,
            answer: ("200", json_body(json!({ "type": "object" }))),
            public: true,
        },
        Operation {
            method: "get",
            path: "/openapi.json",
            summary: "This document",
            body: None,
            answer: ("200", json_body(json!({ "type": "object" }))),
            public: true,
        },
        Operation {
            method: "get",
            path: "/metrics",
            summary: "Sessions and runs, as Prometheus text",
            body: None,
            answer: (
                "200",
                json!({ "text/plain": { "schema": { "type": "string" } } }),
            ),
            public: false,
        },
        Operation {
            method: "get",
            path: "/v1/languages",
            summary: "The languages and backends",
            body: None,
            answer: ("200", json_body(json!({ "type": "object" }))),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/run",
            summary: "Runs a program once in a fresh sandbox",
            body: Some(run_once),
            answer: ("200", json_body(execution.clone())),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/sessions",
            summary: "Opens a session; variables and files stay between its runs",
            body: Some(open_session),
            answer: ("201", json_body(session.clone())),
            public: false,
        },
        Operation {
            method: "get",
            path: "/v1/sessions",
            summary: "The caller's open sessions",
            body: None,
            answer: (
                "200",
                json_body(json!({
                    "type": "object",
                    "properties": { "sessions": { "type": "array", "items": session } },
                })),
            ),
            public: false,
        },
        Operation {
            method: "delete",
            path: "/v1/sessions/{id}",
            summary: "Closes a session and removes its sandbox",
            body: None,
            answer: ("204", Value::Null),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/run",
            summary: "Runs code in a session; with `Accept: text/event-stream` the output \
                      streams as `stdout` and `stderr` events, the calls of the client's \
                      tools as `tool_call` events, each tool call's end as a `tool_call_end` \
                      event, then one `result` (or `error`)",
            body: Some(session_run),
            answer: (
                "200",
                json!({
                    "application/json": { "schema": execution.clone() },
                    "text/event-stream": { "schema": { "type": "string" } },
                }),
            ),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/shell",
            summary: "Runs a shell command line in a container session",
            body: Some(shell),
            answer: ("200", json_body(execution)),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/tool_calls/{call}",
            summary: "Answers a call of the tools the client declared (a `tool_call` event \
                      of the streamed run), with its `value` or an `error`",
            body: Some(tool_result),
            answer: ("204", Value::Null),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/snapshot",
            summary: "Takes a snapshot of a session (its variables, imports and files; with \
                      `files_only`, its files alone), kept by the server",
            body: Some(take_snapshot),
            answer: ("201", json_body(snapshot.clone())),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/fork",
            summary: "Opens `count` sessions, each starting from what this one holds now",
            body: Some(fork),
            answer: (
                "201",
                json_body(json!({
                    "type": "object",
                    "properties": { "sessions": { "type": "array", "items": session.clone() } },
                })),
            ),
            public: false,
        },
        Operation {
            method: "put",
            path: "/v1/sessions/{id}/network",
            summary: "Changes a live session's request rules, from its code's next request on \
                      (never past what the server's policy allows)",
            body: Some(update_network),
            answer: (
                "200",
                json_body(json!({
                    "type": "object",
                    "properties": { "requests": { "type": "array", "items": { "type": "string" } } },
                })),
            ),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/pause",
            summary: "Pauses a session now: its state goes to disk, its sandbox is released, \
                      its next call resumes it (`paused` false: its backend cannot)",
            body: None,
            answer: (
                "200",
                json_body(json!({
                    "type": "object",
                    "properties": { "paused": { "type": "boolean" } },
                })),
            ),
            public: false,
        },
        Operation {
            method: "get",
            path: "/v1/snapshots",
            summary: "The caller's snapshots, newest first",
            body: None,
            answer: (
                "200",
                json_body(json!({
                    "type": "object",
                    "properties": { "snapshots": { "type": "array", "items": snapshot.clone() } },
                })),
            ),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/snapshots",
            summary: "Keeps a snapshot file (the raw body) this server made, or one it trusts",
            body: Some(json!({ "type": "string", "format": "binary" })),
            answer: ("201", json_body(snapshot)),
            public: false,
        },
        Operation {
            method: "get",
            path: "/v1/snapshots/{id}",
            summary: "A snapshot's file, to keep elsewhere or give back later",
            body: None,
            answer: ("200", binary),
            public: false,
        },
        Operation {
            method: "delete",
            path: "/v1/snapshots/{id}",
            summary: "Deletes a snapshot",
            body: None,
            answer: ("204", Value::Null),
            public: false,
        },
        Operation {
            method: "post",
            path: "/v1/snapshots/{id}/restore",
            summary: "Opens a session holding what the snapshot holds, on the backend it \
                      was taken on; the server's policy and limits apply",
            body: Some(restore),
            answer: ("201", json_body(session.clone())),
            public: false,
        },
        Operation {
            method: "put",
            path: "/v1/sessions/{id}/files/{path}",
            summary: "Writes a file into the session (the raw body)",
            body: Some(json!({ "type": "string", "format": "binary" })),
            answer: ("200", json_body(json!({ "type": "object" }))),
            public: false,
        },
        Operation {
            method: "get",
            path: "/v1/sessions/{id}/files/{path}",
            summary: "Reads a file of the session",
            body: None,
            answer: (
                "200",
                json!({ "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } }),
            ),
            public: false,
        },
    ];
    let mut paths = Map::new();
    for operation in operations {
        let mut entry = json!({
            "summary": operation.summary,
            "responses": {
                operation.answer.0: if operation.answer.1.is_null() {
                    json!({ "description": "done" })
                } else {
                    json!({ "description": "done", "content": operation.answer.1 })
                },
                "default": {
                    "description": "an error: 401 no or wrong token, 403 looser than the server \
                                    allows, 404 no such session, 413 body too large, 422 a \
                                    malformed body, 429 too many sessions, 503 shutting down",
                    "content": json_body(json!({ "$ref": "#/components/schemas/Error" })),
                },
            },
        });
        if let Some(body) = operation.body {
            let media = if operation.method == "put" || operation.path == "/v1/snapshots" {
                "application/octet-stream"
            } else {
                "application/json"
            };
            // These take their defaults without a body.
            let required = !["/snapshot", "/fork", "/restore"]
                .iter()
                .any(|end| operation.path.ends_with(end));
            entry["requestBody"] =
                json!({ "required": required, "content": { media: { "schema": body } } });
        }
        if operation.public {
            entry["security"] = json!([]);
        }
        let parameters: Vec<Value> = ["id", "path", "call"]
            .iter()
            .filter(|name| operation.path.contains(&format!("{{{name}}}")))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        if !parameters.is_empty() {
            entry["parameters"] = Value::Array(parameters);
        }
        let item = paths
            .entry(operation.path.to_string())
            .or_insert_with(|| json!({}));
        item[operation.method] = entry;
    }
    let mut schemas = generator.take_definitions(true);
    schemas.insert("Execution".into(), execution_schema());
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": { "error": {
                "type": "object",
                "required": ["kind", "message", "retryable"],
                "properties": {
                    "kind": {
                        "type": "string",
                        "enum": error_kinds(),
                        "description": "what kind of failure: stable, for programs to match on",
                    },
                    "message": { "type": "string", "description": "what was wrong and what to do" },
                    "retryable": {
                        "type": "boolean",
                        "description": "whether the same request may succeed later (the Retry-After header says when)",
                    },
                },
            }},
        }),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "sandlot",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Runs untrusted code in sandboxes: one-off runs and sessions that keep state.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
        },
        "security": [{ "bearer": [] }],
    })
}

/// `sandlot.execution/1`, as `sandlot_core::execution` writes it (by hand there, so here
/// too).
fn execution_schema() -> Value {
    let text = json!({ "type": "string" });
    let flag = json!({ "type": "boolean" });
    json!({
        "type": "object",
        "description": "One run: what it printed, how it ended, what it made (sandlot.execution/1)",
        "required": ["schema", "language", "stdout", "stderr", "exit_code", "end", "duration_ms", "artifacts", "backend"],
        "properties": {
            "schema": { "const": sandlot_core::execution::EXECUTION_SCHEMA },
            "language": text,
            "stdout": text,
            "stderr": text,
            "exit_code": { "type": "integer", "description": "the program's; 124 after a timeout, 137 at the memory cap" },
            "end": { "type": "object", "properties": { "reason": text }, "description": "why it ended" },
            "session": { "type": "object", "description": "what the session is after the run" },
            "stdout_truncated": flag,
            "stderr_truncated": flag,
            "artifacts_truncated": flag,
            "duration_ms": { "type": "number" },
            "artifacts": { "type": "array", "items": {
                "type": "object",
                "properties": {
                    "path": text, "size": { "type": "integer" }, "mime": text,
                    "is_plot": flag, "base64": text,
                },
            }},
            "findings": { "type": "array", "items": { "type": "object" } },
            "backend": text,
            "policy": { "type": "object" },
            "unenforced": { "type": "array", "items": text },
        },
    })
}

/// Every `error.kind` the API answers: the library's kinds and the API's own.
fn error_kinds() -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = sandlot_core::error::ErrorKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    for own in ["unauthorized", "forbidden_origin", "no_route"] {
        kinds.push(own);
    }
    kinds
}

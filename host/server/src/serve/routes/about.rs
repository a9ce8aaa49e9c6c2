//! What the server says of itself: health, its OpenAPI document, Prometheus metrics and
//! the languages it runs. None touches a session, so they stand apart from those that do.

use super::api::{blocking, Api};
use super::errors::Answer;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

pub(super) async fn openapi() -> Json<Value> {
    static DOCUMENT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    Json(
        DOCUMENT
            .get_or_init(crate::serve::openapi::document)
            .clone(),
    )
}

pub(super) async fn health() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

pub(super) async fn metrics(State(api): State<Api>) -> Response {
    let stats = api.manager.stats();
    let mut text = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        text.push_str(&format!(
            "# HELP sandlot_{name} {help}\n# TYPE sandlot_{name} {kind}\nsandlot_{name} {value}\n"
        ));
    };
    metric(
        "sessions_open",
        "gauge",
        "Sessions open now.",
        stats.open as f64,
    );
    metric(
        "sessions_opened_total",
        "counter",
        "Sessions opened.",
        stats.opened as f64,
    );
    metric(
        "session_open_failures_total",
        "counter",
        "Sessions that could not be opened, refusals included.",
        stats.open_failures as f64,
    );
    metric(
        "sessions_closed_total",
        "counter",
        "Sessions closed by clients.",
        stats.closed as f64,
    );
    metric(
        "sessions_expired_total",
        "counter",
        "Sessions closed for idleness or lifetime.",
        stats.expired as f64,
    );
    metric(
        "runs_total",
        "counter",
        "Runs and commands.",
        stats.runs as f64,
    );
    metric(
        "run_failures_total",
        "counter",
        "Runs that failed with an error (not a non-zero exit).",
        stats.run_failures as f64,
    );
    metric(
        "run_seconds_total",
        "counter",
        "Seconds spent running code.",
        stats.run_seconds,
    );
    metric(
        "tool_calls_total",
        "counter",
        "Tool calls made by sandboxed code.",
        stats.tool_calls as f64,
    );
    metric(
        "tool_call_failures_total",
        "counter",
        "Tool calls that failed: the tool's error, a limit, a timeout, a bad request.",
        stats.tool_call_failures as f64,
    );
    metric(
        "memory_held_bytes",
        "gauge",
        "Bytes of the host's memory the open sessions may hold: memory limits, and wasm workspaces.",
        stats.memory_held as f64,
    );
    metric(
        "memory_budget_bytes",
        "gauge",
        "The memory budget the open sessions are admitted within.",
        stats.memory_budget as f64,
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub(super) async fn languages(State(api): State<Api>) -> Answer<Json<Value>> {
    let manager = api.manager.clone();
    // Off the async workers: a runtime install may hold the service for a while.
    let languages =
        blocking(move || Ok(manager.with_service(sandlot_core::service::Service::languages_json)))
            .await?;
    Ok(Json(languages))
}

//! Running code: once in a fresh sandbox, in a session (answered whole or streamed as
//! server-sent events), a shell command, and the client's answers to its tools' calls.

use super::api::{blocking, Api};
use super::bodies::body;
use super::errors::{Answer, ApiError};
use crate::manager::{seconds, ClientId, SessionId};
use crate::serve::client_tools::ToolHub;
use crate::serve::events::masked_event;
use crate::serve::requests::{RunOnce, SessionRun, Shell, ToolResult};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use sandlot_core::error::Error;
use sandlot_core::execution::Execution;
use sandlot_core::secret::Masker;
use sandlot_core::session::RunOptions;
use serde_json::{json, Value};
use std::sync::Arc;

pub(super) async fn run_once(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    parsed: Result<Json<RunOnce>, JsonRejection>,
) -> Answer<Json<Value>> {
    let RunOnce { ask, code } = body(parsed)?;
    let mut request = api.manager.request_for(&ask)?;
    request.one_shot = true;
    let masker = Masker::new(request.secrets.clone());
    let manager = api.manager.clone();
    let run =
        blocking(move || manager.run_once(&client, request, &code, RunOptions::default())).await?;
    Ok(Json(masker.json(run.to_json())))
}

/// The answer of the client to one call of its tools.
pub(super) async fn tool_result(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path((id, call)): Path<(String, String)>,
    parsed: Result<Json<ToolResult>, JsonRejection>,
) -> Answer<StatusCode> {
    let ToolResult { value, error } = body(parsed)?;
    let id = SessionId::from(id);
    // Another client's session is as missing as one that never was.
    let Some(hub) = api.hubs.get(&id).filter(|hub| hub.owned_by(&client)) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("you have no session {id} with tools of its client"),
        ));
    };
    let answer = match error {
        Some(message) => Err(sandlot_core::tool::ToolError::new(message)),
        None => Ok(value.unwrap_or(Value::Null)),
    };
    if hub.answer(&call, answer) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "no call {call} waits in session {id}: it was answered already, it timed \
                 out, or its run ended"
            ),
        ))
    }
}

pub(super) async fn run(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    headers: HeaderMap,
    parsed: Result<Json<SessionRun>, JsonRejection>,
) -> Answer<Response> {
    let SessionRun {
        code,
        timeout_seconds,
        stdin,
    } = body(parsed)?;
    let options = RunOptions {
        timeout: seconds("timeout_seconds", timeout_seconds)?,
        stdin: stdin.map(String::into_bytes).unwrap_or_default(),
        ..RunOptions::default()
    };
    let id = SessionId::from(id);
    let streams = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    let manager = api.manager.clone();
    // What the client gets is masked as it leaves, whatever built it.
    let masker = manager.masker(&client, &id)?;
    if !streams {
        let run = blocking(move || manager.run(&client, &id, &code, options)).await?;
        return Ok(Json(masker.json(run.to_json())).into_response());
    }
    // Only the session's own client hears its tool calls.
    let hub = api.hubs.get(&id).filter(|hub| hub.owned_by(&client));
    Ok(streamed(
        move |options| manager.run(&client, &id, &code, options),
        options,
        hub,
        masker,
    )
    .into_response())
}

/// A run whose output goes out as server-sent events while it runs: `stdout` and
/// `stderr` events (`{"text": ...}`), a `tool_call` event for each call of the
/// client's tools (see [`crate::serve::client_tools`]), a `tool_call_end` event as each tool
/// call of the run ends, whoever answered it (the record the result's `tool_calls`
/// will hold), then one `result` (the execution's JSON) or `error` (as the API's
/// errors). Every event's data is masked with `masker` as it goes out.
fn streamed(
    work: impl FnOnce(RunOptions) -> Result<Execution, Error> + Send + 'static,
    mut options: RunOptions,
    hub: Option<Arc<ToolHub>>,
    masker: Masker,
) -> impl IntoResponse {
    let (events, received) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let sink = |name: &'static str| {
        let (events, masker) = (events.clone(), masker.clone());
        Box::new(move |bytes: &[u8]| {
            let text = String::from_utf8_lossy(bytes);
            if let Ok(event) = masked_event(&masker, name, json!({ "text": text })) {
                let _ = events.send(event);
            }
        }) as sandlot_core::backend::Sink
    };
    options.on_stdout = Some(sink("stdout"));
    options.on_stderr = Some(sink("stderr"));
    // Emptied once the run is over: a handler still running then (abandoned at the
    // run's deadline) must not hold the stream open.
    let ends = Arc::new(std::sync::Mutex::new(Some(events.clone())));
    let ended = ends.clone();
    let ending = masker.clone();
    options.on_tool_call = Some(Arc::new(move |call: &sandlot_core::tool::ToolCall| {
        let ends = ended.lock().unwrap_or_else(|e| e.into_inner());
        let call = serde_json::to_value(call).unwrap_or_default();
        if let (Some(events), Ok(event)) =
            (ends.as_ref(), masked_event(&ending, "tool_call_end", call))
        {
            let _ = events.send(event);
        }
    }));
    let listening = hub.map(|hub| hub.listen(events.clone(), masker.clone()));
    tokio::task::spawn_blocking(move || {
        let ran = work(options);
        // No call of the client's tools goes out after the run, nor word of one.
        drop(listening);
        ends.lock().unwrap_or_else(|e| e.into_inner()).take();
        let last = match ran {
            Ok(run) => masked_event(&masker, "result", run.to_json()),
            Err(e) => {
                let e = ApiError::from(e);
                let error = json!({ "error": {
                    "kind": e.kind,
                    "message": e.message,
                    "retryable": e.retry_after.is_some(),
                } });
                masked_event(&masker, "error", error)
            }
        };
        if let Ok(last) = last {
            let _ = events.send(last);
        }
        // Dropping the last sender ends the stream.
    });
    let stream = futures_util::stream::unfold(received, |mut received| async move {
        received
            .recv()
            .await
            .map(|event| (Ok::<Event, std::convert::Infallible>(event), received))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

pub(super) async fn shell(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    parsed: Result<Json<Shell>, JsonRejection>,
) -> Answer<Json<Value>> {
    let Shell { command } = body(parsed)?;
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let masker = manager.masker(&client, &id)?;
    let run = blocking(move || manager.run_command(&client, &id, &command)).await?;
    Ok(Json(masker.json(run.to_json())))
}

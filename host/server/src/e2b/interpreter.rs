//! The code interpreter's API (E2B's port 49999): `POST /execute`, whose answer is
//! a stream of JSON lines (output, rich results, the error, the execution count),
//! and the contexts each with its own interpreter state (`/contexts`).

use super::display;
use super::sandboxes::{lock, Context, E2bSandbox};
use super::{blocking, to_the_end, E2b, E2bError};
use crate::manager::SessionId;
use axum::body::{Body, Bytes};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use base64::Engine as _;
use sandlot_core::backend::EndReason;
use sandlot_core::execution::Execution;
use sandlot_core::session::RunOptions;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

pub(super) fn router(e2b: E2b) -> Router {
    Router::new()
        .route("/execute", post(execute))
        .route("/contexts", post(create_context).get(list_contexts))
        .route("/contexts/{id}", delete(remove_context))
        .route("/contexts/{id}/restart", post(restart_context))
        .route("/health", get(health))
        .with_state(e2b)
}

async fn health() -> Json<Value> {
    Json(json!("OK"))
}

/// The body of `POST /execute`.
#[derive(Debug, Deserialize)]
struct Execute {
    code: String,
    context_id: Option<String>,
    language: Option<String>,
    /// The SDKs send `null` for none.
    env_vars: Option<BTreeMap<String, String>>,
}

/// The body of `POST /contexts`.
#[derive(Debug, Deserialize, Default)]
struct NewContext {
    language: Option<String>,
    cwd: Option<String>,
}

fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Result<T, E2bError> {
    parsed
        .map(|Json(value)| value)
        .map_err(|e| E2bError::new(StatusCode::BAD_REQUEST, e.body_text()))
}

/// The sandlot language of an E2B language name.
fn language_of(e2b_language: &str) -> String {
    match e2b_language.trim().to_ascii_lowercase().as_str() {
        "" | "python" | "python3" => "python".into(),
        "js" | "javascript" | "node" => "javascript".into(),
        "ts" | "typescript" => "typescript".into(),
        other => other.to_string(),
    }
}

/// Whether `sandbox` is still one of the server's: not killed or reaped.
fn registered(e2b: &E2b, sandbox: &Arc<E2bSandbox>) -> bool {
    e2b.sandboxes
        .get(&sandbox.id)
        .is_some_and(|s| Arc::ptr_eq(&s, sandbox))
}

/// Closes `session`, opened for `sandbox` while it was killed or reaped (whose end
/// closed the sessions it had then), and says the sandbox is gone.
async fn orphaned(e2b: &E2b, sandbox: &E2bSandbox, session: SessionId) -> E2bError {
    let manager = e2b.manager.clone();
    let client = sandbox.client.clone();
    let _ = blocking(move || manager.close(&client, &session)).await;
    E2bError::new(
        StatusCode::NOT_FOUND,
        format!("sandbox {} ended while the context opened", sandbox.id),
    )
}

/// Adds `context` to `sandbox`, unless the sandbox ended meanwhile.
async fn adopt(e2b: &E2b, sandbox: &Arc<E2bSandbox>, context: Context) -> Result<(), E2bError> {
    lock(&sandbox.contexts).push(context.clone());
    if registered(e2b, sandbox) {
        return Ok(());
    }
    Err(orphaned(e2b, sandbox, context.session).await)
}

/// Opens a context of `language` in `sandbox` on the sandbox's backend.
async fn open_context(
    e2b: &E2b,
    sandbox: &E2bSandbox,
    language: &str,
    cwd: Option<String>,
) -> Result<Context, E2bError> {
    let cwd = cwd.unwrap_or_else(|| super::files::HOME.to_string());
    super::files::workspace_path(&cwd)
        .map_err(|e| E2bError::new(StatusCode::BAD_REQUEST, e.message))?;
    let language = language_of(language);
    // The sandbox's own opening, never the server's: a context is the same sandbox.
    let ask = sandbox.opening.ask(&language);
    let manager = e2b.manager.clone();
    let client = sandbox.client.clone();
    let opened = blocking(move || manager.open_asked(&client, &ask)).await?;
    Ok(Context {
        id: super::sandboxes::unguessable(),
        language,
        cwd,
        session: opened.id,
        executions: 0,
        displays: false,
    })
}

fn context_json(context: &Context) -> Value {
    let language = match context.language.as_str() {
        "javascript" => "js",
        "typescript" => "ts",
        other => other,
    };
    json!({ "id": context.id, "language": language, "cwd": context.cwd })
}

async fn create_context(
    State(e2b): State<E2b>,
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    parsed: Result<Json<NewContext>, JsonRejection>,
) -> Result<Json<Value>, E2bError> {
    let new = body(parsed)?;
    to_the_end(async move {
        let context = open_context(
            &e2b,
            &sandbox,
            new.language.as_deref().unwrap_or("python"),
            new.cwd,
        )
        .await?;
        let answer = context_json(&context);
        adopt(&e2b, &sandbox, context).await?;
        Ok(Json(answer))
    })
    .await
}

async fn list_contexts(Extension(sandbox): Extension<Arc<E2bSandbox>>) -> Json<Value> {
    Json(Value::Array(
        lock(&sandbox.contexts).iter().map(context_json).collect(),
    ))
}

fn no_context(id: &str) -> E2bError {
    E2bError::new(
        StatusCode::NOT_FOUND,
        format!("context {} not found", crate::serve::shown(id)),
    )
}

async fn remove_context(
    State(e2b): State<E2b>,
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    Path(id): Path<String>,
) -> Result<StatusCode, E2bError> {
    let removed = {
        let mut contexts = lock(&sandbox.contexts);
        match contexts.iter().position(|c| c.id == id) {
            // The first context holds the sandbox's commands and files.
            Some(0) => {
                return Err(E2bError::new(
                    StatusCode::BAD_REQUEST,
                    "the default context holds the sandbox's files and commands; restart it \
                     instead, or kill the sandbox",
                ))
            }
            Some(at) => contexts.remove(at),
            None => return Err(no_context(&id)),
        }
    };
    let manager = e2b.manager.clone();
    let client = sandbox.client.clone();
    blocking(move || manager.close(&client, &removed.session)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Restarting a context gives it a fresh interpreter: a new session in its place.
/// The default context holds the sandbox's files, which a new session would not
/// have, so it is not restarted.
async fn restart_context(
    State(e2b): State<E2b>,
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    Path(id): Path<String>,
) -> Result<StatusCode, E2bError> {
    let (at, language, cwd) = {
        let contexts = lock(&sandbox.contexts);
        let at = contexts
            .iter()
            .position(|c| c.id == id)
            .ok_or_else(|| no_context(&id))?;
        (at, contexts[at].language.clone(), contexts[at].cwd.clone())
    };
    if at == 0 {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            "sandlot cannot restart the default context: its session holds the sandbox's \
             files; create a context of its language for a fresh interpreter",
        ));
    }
    to_the_end(async move {
        let fresh = open_context(&e2b, &sandbox, &language, Some(cwd)).await?;
        replace(&e2b, &sandbox, &id, fresh).await
    })
    .await
}

/// Puts `fresh` in context `id`'s place and closes the session it had.
async fn replace(
    e2b: &E2b,
    sandbox: &Arc<E2bSandbox>,
    id: &str,
    fresh: Context,
) -> Result<StatusCode, E2bError> {
    let old = {
        let mut contexts = lock(&sandbox.contexts);
        match contexts.iter_mut().find(|c| c.id == id) {
            Some(context) => {
                let old = context.session.clone();
                context.session = fresh.session.clone();
                context.executions = 0;
                // A fresh interpreter has no hook yet.
                context.displays = false;
                Some(old)
            }
            None => None,
        }
    };
    let manager = e2b.manager.clone();
    let client = sandbox.client.clone();
    // Removed meanwhile: the fresh session is not wanted either.
    let closing = old.unwrap_or(fresh.session.clone());
    blocking(move || manager.close(&client, &closing)).await?;
    if !registered(e2b, sandbox) {
        return Err(orphaned(e2b, sandbox, fresh.session).await);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The context a run goes to: the one named, else the first of its language (made
/// when there is none), else the default one.
async fn context_for(
    e2b: &E2b,
    sandbox: &Arc<E2bSandbox>,
    context_id: Option<&str>,
    language: Option<&str>,
) -> Result<Context, E2bError> {
    let found = {
        let contexts = lock(&sandbox.contexts);
        let context = match (context_id, language) {
            (Some(_), Some(_)) => {
                return Err(E2bError::new(
                    StatusCode::BAD_REQUEST,
                    "give a context_id or a language, not both",
                ))
            }
            (Some(id), None) => Some(
                contexts
                    .iter()
                    .find(|c| c.id == id)
                    .ok_or_else(|| no_context(id))?,
            ),
            (None, Some(language)) => {
                let language = language_of(language);
                contexts.iter().find(|c| c.language == language)
            }
            (None, None) => contexts.first(),
        };
        context.cloned()
    };
    match found {
        Some(found) => Ok(found),
        None => {
            let (e2b, sandbox) = (e2b.clone(), sandbox.clone());
            let language = language.unwrap_or("python").to_string();
            to_the_end(async move {
                let context = open_context(&e2b, &sandbox, &language, None).await?;
                adopt(&e2b, &sandbox, context.clone()).await?;
                Ok(context)
            })
            .await
        }
    }
}

async fn execute(
    State(e2b): State<E2b>,
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    parsed: Result<Json<Execute>, JsonRejection>,
) -> Result<Response, E2bError> {
    let run = body(parsed)?;
    let context = context_for(
        &e2b,
        &sandbox,
        run.context_id.as_deref(),
        run.language.as_deref(),
    )
    .await?;
    let workdir = super::files::workspace_path(&context.cwd)
        .map_err(|e| E2bError::new(StatusCode::BAD_REQUEST, e.message))?;
    let mut env: BTreeMap<String, String> = sandbox.env.clone();
    env.extend(run.env_vars.unwrap_or_default());
    // Every message is masked as it leaves: after what the display hook printed was
    // decoded from its JSON, whose escapes the session's own masking of the output
    // could not see through (a `"` or a non-ASCII letter in a secret).
    let masker = e2b.manager.masker(&sandbox.client, &context.session)?;
    let (lines, received) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let stderr = Arc::new(Mutex::new(Stderr::default()));
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let options = RunOptions {
        env: env.into_iter().collect(),
        workdir: (!workdir.is_empty()).then_some(workdir),
        on_stdout: Some(stdout_sink(lines.clone(), stdout.clone())),
        on_stderr: Some(stderr_sink(lines.clone(), stderr.clone())),
        ..RunOptions::default()
    };
    let manager = e2b.manager.clone();
    let client = sandbox.client.clone();
    let sandbox = sandbox.clone();
    tokio::task::spawn_blocking(move || {
        let session = &context.session;
        // The first run in a Python interpreter claims installing the hook, so that
        // two first runs at once install it once.
        let install = context.language == "python" && {
            let mut contexts = lock(&sandbox.contexts);
            contexts
                .iter_mut()
                .find(|c| c.id == context.id && c.session == *session && !c.displays)
                .map(|c| c.displays = true)
                .is_some()
        };
        if install {
            // Without the hook a last value is output, as before: a run it fails in
            // (a policy that refuses it) is no reason to refuse the code.
            let _ = manager.run(&client, session, display::HOOK, RunOptions::default());
        }
        let ran = manager.run(&client, session, &run.code, options);
        let count = {
            let mut contexts = lock(&sandbox.contexts);
            contexts
                .iter_mut()
                .find(|c| c.id == context.id)
                .map(|c| {
                    c.executions += 1;
                    c.executions
                })
                .unwrap_or(1)
        };
        let rest = std::mem::take(&mut *lock(&stdout));
        if !rest.is_empty() {
            for message in stdout_messages(&String::from_utf8_lossy(&rest)) {
                let _ = lines.send(message);
            }
        }
        let held = std::mem::take(&mut *lock(&stderr));
        for line in ended(ran, held, count) {
            let _ = lines.send(line);
        }
    });
    let stream = futures_util::stream::unfold(received, move |mut received| {
        let masker = masker.clone();
        async move {
            received.recv().await.map(|message| {
                let line = line(masker.json(message));
                (Ok::<Bytes, std::convert::Infallible>(line), received)
            })
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// One JSON line of the answer.
fn line(message: Value) -> Bytes {
    let mut text = message.to_string();
    text.push('\n');
    Bytes::from(text)
}

fn now() -> String {
    super::sandboxes::rfc3339(std::time::SystemTime::now())
}

fn output(kind: &str, text: &str) -> Value {
    json!({ "type": kind, "text": text, "timestamp": now() })
}

/// Sends stdout a line at a time, as a notebook shows it: a `print` is one message,
/// not one per write. What is left of a line goes out when the run ends.
fn stdout_sink(
    lines: UnboundedSender<Value>,
    pending: Arc<Mutex<Vec<u8>>>,
) -> sandlot_core::backend::Sink {
    Box::new(move |bytes: &[u8]| {
        let mut pending = lock(&pending);
        pending.extend_from_slice(bytes);
        let Some(end) = pending.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        let rest = pending.split_off(end + 1);
        let text = String::from_utf8_lossy(&pending).into_owned();
        *pending = rest;
        for message in stdout_messages(&text) {
            let _ = lines.send(message);
        }
    })
}

/// Lines of stdout as messages: the output, and a `result` for each line the display
/// hook wrote ([`display::result_in`]); consecutive output lines go as one message.
fn stdout_messages(text: &str) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut plain = String::new();
    for piece in text.split_inclusive('\n') {
        match display::result_in(piece) {
            Some((before, result)) => {
                plain.push_str(before);
                if !plain.is_empty() {
                    messages.push(output("stdout", &std::mem::take(&mut plain)));
                }
                messages.extend(result);
            }
            None => plain.push_str(piece),
        }
    }
    if !plain.is_empty() {
        messages.push(output("stdout", &plain));
    }
    messages
}

/// What a run wrote to stderr that did not go out yet: an error report is held from
/// its first line ([`starts_error`]), so that it arrives once, as the run's error.
#[derive(Debug, Default)]
struct Stderr {
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    /// Lines held back since a traceback began.
    held: String,
}

const TRACEBACK: &str = "Traceback (most recent call last):";

/// Whether a line of stderr starts an error report: a Python traceback, or an
/// uncaught JavaScript error (QuickJS's REPL writes `Uncaught NAME: ...`).
fn starts_error(line: &str) -> bool {
    line.starts_with(TRACEBACK) || line.starts_with("Uncaught ")
}

fn stderr_sink(
    lines: UnboundedSender<Value>,
    state: Arc<Mutex<Stderr>>,
) -> sandlot_core::backend::Sink {
    Box::new(move |bytes: &[u8]| {
        let mut state = lock(&state);
        state.partial.extend_from_slice(bytes);
        let mut out = String::new();
        // Whole lines only: a traceback's first line must be seen whole.
        while let Some(end) = state.partial.iter().position(|b| *b == b'\n') {
            let rest = state.partial.split_off(end + 1);
            let text = String::from_utf8_lossy(&state.partial).into_owned();
            state.partial = rest;
            if !state.held.is_empty() || starts_error(&text) {
                state.held.push_str(&text);
            } else {
                out.push_str(&text);
            }
        }
        if !out.is_empty() {
            let _ = lines.send(output("stderr", &out));
        }
    })
}

/// The error of a run, E2B's way: the exception's class name, its message, and the
/// traceback; `None` for a run that ended well.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RunError {
    name: String,
    value: String,
    traceback: String,
}

/// The exception of a failed run from what it wrote to stderr: the last line of the
/// form `Name: message` (a Python traceback's last line, or a JavaScript error's
/// first), with the stderr from the traceback's start as its traceback.
fn exception(stderr: &str) -> Option<RunError> {
    let lines: Vec<&str> = stderr.lines().collect();
    let (at, name, value) = lines.iter().enumerate().rev().find_map(|(at, line)| {
        let line = line.strip_prefix("Uncaught ").unwrap_or(line);
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.trim()),
            None => (line.trim_end(), ""),
        };
        let class = name.rsplit('.').next().unwrap_or(name);
        let named = !name.is_empty()
            && name.split('.').all(|part| {
                !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_')
            })
            && [
                "Error",
                "Exception",
                "Interrupt",
                "Exit",
                "Warning",
                "Iteration",
            ]
            .iter()
            .any(|end| class.ends_with(end));
        named.then(|| (at, class.to_string(), value.to_string()))
    })?;
    let start = lines[..=at]
        .iter()
        .rposition(|l| l.starts_with(TRACEBACK))
        .unwrap_or(0);
    Some(RunError {
        name,
        value,
        traceback: lines[start..].join("\n"),
    })
}

/// The last lines of an execution: its plots as results, its error, the count.
fn ended(
    ran: Result<Execution, sandlot_core::error::Error>,
    held: Stderr,
    count: u64,
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut held_text = held.held;
    let partial = String::from_utf8_lossy(&held.partial).into_owned();
    if held_text.is_empty() && !starts_error(&partial) {
        if !partial.is_empty() {
            out.push(output("stderr", &partial));
        }
    } else {
        held_text.push_str(&partial);
    }
    let execution = match ran {
        Ok(execution) => execution,
        Err(error) => {
            if !held_text.is_empty() {
                out.push(output("stderr", &held_text));
            }
            out.push(json!({
                "type": "error",
                "name": "SandlotError",
                "value": error.to_string(),
                "traceback": "",
            }));
            out.push(json!({ "type": "end_of_execution" }));
            return out;
        }
    };
    for artifact in &execution.artifacts {
        let key = match artifact.mime {
            "image/png" => "png",
            "image/jpeg" => "jpeg",
            "image/svg+xml" => "svg",
            "application/pdf" => "pdf",
            _ => continue,
        };
        let data = if key == "svg" {
            String::from_utf8_lossy(&artifact.bytes).into_owned()
        } else {
            base64::engine::general_purpose::STANDARD.encode(&artifact.bytes)
        };
        let mut result = serde_json::Map::new();
        result.insert("type".into(), json!("result"));
        result.insert(key.into(), json!(data));
        result.insert("text".into(), json!(format!("<{}>", artifact.path)));
        result.insert("is_main_result".into(), json!(false));
        out.push(Value::Object(result));
    }
    let error = match &execution.end {
        EndReason::Completed if execution.exit_code == 0 => None,
        EndReason::Completed => exception(&held_text)
            .or_else(|| exception(&execution.stderr_text()))
            .or(Some(RunError {
                name: "ExitError".into(),
                value: format!("the code exited with status {}", execution.exit_code),
                traceback: String::new(),
            })),
        EndReason::TimedOut { limit } => Some(RunError {
            name: "TimeoutError".into(),
            value: format!("the run passed its time limit of {} s", limit.as_secs_f64()),
            traceback: String::new(),
        }),
        EndReason::MemoryLimit => Some(RunError {
            name: "MemoryError".into(),
            value: "the run used more memory than the sandbox allows".into(),
            traceback: String::new(),
        }),
        EndReason::OutputLimit => Some(RunError {
            name: "OutputLimitError".into(),
            value: "the run kept writing past the output cap".into(),
            traceback: String::new(),
        }),
        EndReason::Interrupted => Some(RunError {
            name: "KeyboardInterrupt".into(),
            value: "the run was interrupted".into(),
            traceback: String::new(),
        }),
        other => Some(RunError {
            name: "UnexpectedEndOfExecution".into(),
            value: format!("{other:?}"),
            traceback: String::new(),
        }),
    };
    match error {
        Some(error) => out.push(json!({
            "type": "error",
            "name": error.name,
            "value": error.value,
            "traceback": error.traceback,
        })),
        // A traceback held for a run that went on and ended well was only output.
        None if !held_text.is_empty() => out.push(output("stderr", &held_text)),
        None => {}
    }
    out.push(json!({ "type": "number_of_executions", "execution_count": count }));
    out.push(json!({ "type": "end_of_execution" }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_tracebacks_become_errors() {
        let stderr = "Traceback (most recent call last):\n  File \"<cell 2>\", line 1, in <module>\n    1/0\nZeroDivisionError: division by zero\n";
        let error = exception(stderr).unwrap();
        assert_eq!(error.name, "ZeroDivisionError");
        assert_eq!(error.value, "division by zero");
        assert!(error.traceback.starts_with(TRACEBACK));
        assert!(error.traceback.ends_with("division by zero"));
        let syntax =
            "  File \"<cell 1>\", line 1\n    x = \n        ^\nSyntaxError: invalid syntax\n";
        assert_eq!(exception(syntax).unwrap().name, "SyntaxError");
        let dotted = "Traceback (most recent call last):\n  x\nmodule.sub.CustomError: bad\n";
        assert_eq!(exception(dotted).unwrap().name, "CustomError");
    }

    #[test]
    fn javascript_errors_become_errors() {
        let error =
            exception("ReferenceError: x is not defined\n    at <eval> (<input>:1)\n").unwrap();
        assert_eq!(error.name, "ReferenceError");
        assert_eq!(error.value, "x is not defined");
        assert!(exception("Uncaught TypeError: no").is_some());
        assert!(exception("just a warning line\n").is_none());
    }

    #[test]
    fn stdout_goes_out_a_line_at_a_time() {
        let (lines, mut received) = tokio::sync::mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(Vec::new()));
        let mut sink = stdout_sink(lines, pending.clone());
        sink(b"4");
        sink("2 é".as_bytes());
        assert!(received.try_recv().is_err());
        sink(b"\nnext");
        let first: Value = received.try_recv().unwrap();
        assert_eq!(first["text"], "42 é\n");
        assert_eq!(lock(&pending).as_slice(), b"next");
    }

    #[test]
    fn a_traceback_is_held_and_other_stderr_flows() {
        let (lines, mut received) = tokio::sync::mpsc::unbounded_channel();
        let state = Arc::new(Mutex::new(Stderr::default()));
        let mut sink = stderr_sink(lines, state.clone());
        sink(b"warn");
        sink(b"ing\nTraceback (most recent call last):\n  File");
        let first: Value = received.try_recv().unwrap();
        assert_eq!(first["type"], "stderr");
        assert_eq!(first["text"], "warning\n");
        assert!(first["timestamp"].is_string());
        assert!(received.try_recv().is_err());
        assert!(lock(&state).held.starts_with(TRACEBACK));

        let (lines, mut received) = tokio::sync::mpsc::unbounded_channel();
        let state = Arc::new(Mutex::new(Stderr::default()));
        let mut sink = stderr_sink(lines, state.clone());
        sink(b"Uncaught ReferenceError: x is not defined\n    at <eval>\n");
        assert!(received.try_recv().is_err());
        let error = exception(&lock(&state).held).unwrap();
        assert_eq!(error.name, "ReferenceError");
    }
}

//! The routes of the HTTP API, its authentication and its errors.

use super::client_tools::{Hubs, ToolHub};
use super::events::masked_event;
use super::requests::{
    Fork, OpenSession, Restore, RunOnce, SessionRun, Shell, TakeSnapshot, ToolResult,
};
use super::Token;
use crate::manager::{seconds, ClientId, SessionId, SessionManager, SnapshotId};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use sandlot_core::error::{Error, ErrorKind};
use sandlot_core::execution::Execution;
use sandlot_core::secret::Masker;
use sandlot_core::session::RunOptions;
use serde_json::{json, Value};
use std::sync::Arc;

/// What every handler shares.
#[derive(Clone)]
struct Api {
    manager: SessionManager,
    tokens: Arc<Vec<Token>>,
    /// The client tools of the sessions that declared some.
    hubs: Arc<Hubs>,
}

/// The client of a request without tokens configured (loopback only).
const LOCAL_CLIENT: &str = "local";

pub(super) fn router(manager: SessionManager, tokens: Vec<Token>, max_body: usize) -> Router {
    let api = Api {
        manager,
        tokens: Arc::new(tokens),
        hubs: Arc::new(Hubs::default()),
    };
    let protected = Router::new()
        .route("/metrics", get(metrics))
        .route("/v1/languages", get(languages))
        .route("/v1/run", post(run_once))
        .route("/v1/sessions", post(open).get(list))
        .route("/v1/sessions/{id}", axum::routing::delete(close))
        .route("/v1/sessions/{id}/run", post(run))
        .route("/v1/sessions/{id}/shell", post(shell))
        .route("/v1/sessions/{id}/tool_calls/{call}", post(tool_result))
        .route("/v1/sessions/{id}/snapshot", post(snapshot))
        .route("/v1/sessions/{id}/fork", post(fork))
        .route("/v1/sessions/{id}/pause", post(pause))
        .route("/v1/snapshots", get(snapshots).post(upload_snapshot))
        .route(
            "/v1/snapshots/{id}",
            get(download_snapshot).delete(delete_snapshot),
        )
        .route("/v1/snapshots/{id}/restore", post(restore))
        .route(
            "/v1/sessions/{id}/files/{*path}",
            axum::routing::put(upload).get(download),
        )
        .route_layer(middleware::from_fn_with_state(api.clone(), authenticate));
    let tokenless = api.tokens.is_empty();
    let router = Router::new()
        .route("/", get(playground))
        .route("/playground.js", get(playground_script))
        .route("/playground.css", get(playground_style))
        .route("/health", get(health))
        .route("/openapi.json", get(openapi))
        .merge(protected)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body));
    // Without tokens the loopback address is the only guard, and a web page the user
    // visits can reach it too: by DNS rebinding (a name of the attacker's that now
    // resolves to 127.0.0.1) or by a cross-site request. Both show in the request's
    // Host or Origin, which must then name this machine.
    let router = if tokenless {
        router.layer(middleware::from_fn(loopback_only))
    } else {
        router
    };
    router.with_state(api)
}

/// Refuses (403) a request whose `Host` is not a loopback name or address, or whose
/// `Origin`, if it has one, is not a loopback origin.
pub(crate) async fn loopback_only(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin = headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("?"));
    let problem = match (host, origin) {
        (None, _) => Some("it has no Host header".to_string()),
        (Some(host), _) if !is_loopback_authority(host) => {
            Some(format!("its Host `{}` is not this machine", shown(host)))
        }
        (_, Some(origin)) if !is_loopback_origin(origin) => Some(format!(
            "its Origin `{}` is not a page of this machine",
            shown(origin)
        )),
        _ => None,
    };
    match problem {
        None => next.run(request).await,
        Some(problem) => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_origin",
            format!(
                "refused: {problem}; without tokens this server answers only requests made \
                 on this machine (set SANDLOT_API_TOKENS to serve others)"
            ),
        )
        .into_response(),
    }
}

/// A header value as an error message may quote it: short, without control characters.
pub(crate) fn shown(value: &str) -> String {
    let value: String = value.chars().take(100).collect();
    sandlot_core::sandbox_path::escape_controls(&value).into_owned()
}

/// Whether `authority` (`host[:port]`) names this machine: `localhost`, or a loopback
/// address (`127.0.0.0/8`, `[::1]`).
fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((address, port))
                if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) =>
            {
                return address
                    .parse::<std::net::Ipv6Addr>()
                    .is_ok_and(|a| a.is_loopback());
            }
            _ => return false,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return false,
            None => authority,
        }
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

fn is_port(digits: &str) -> bool {
    !digits.is_empty() && digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Whether an `Origin` is a page of this machine: `http(s)://` and a loopback
/// authority, nothing after it. `null` (a sandboxed frame, a file) is not.
fn is_loopback_origin(origin: &str) -> bool {
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|authority| !authority.contains('/') && is_loopback_authority(authority))
}

/// An error as the API answers it: a status and
/// `{"error": {"kind", "message", "retryable"}}`. A library error's kind is its
/// [`ErrorKind`]; the API's own are `unauthorized`, `forbidden_origin`,
/// `invalid_input` (a body it cannot read) and `no_route`.
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    /// Seconds a client should wait before trying again, for a retryable failure.
    retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
            retry_after: None,
        }
    }
}

/// The status a library error answers with: 4xx where the request is at fault,
/// 503 where the server cannot serve it now, 500 where it failed.
pub(crate) fn status_of(error: &Error) -> StatusCode {
    match error.kind() {
        ErrorKind::Blocked | ErrorKind::Unsupported => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
        // The session and its files are the URL's resources; a language or backend
        // is a field of the body, which names something this server does not have.
        ErrorKind::NotFound
            if matches!(
                error,
                Error::NoSuchSession { .. }
                    | Error::NoSuchFile { .. }
                    | Error::NoSuchSnapshot { .. }
            ) =>
        {
            StatusCode::NOT_FOUND
        }
        ErrorKind::NotFound => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::NotAllowed => StatusCode::FORBIDDEN,
        ErrorKind::Exhausted => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::SessionEnded => StatusCode::GONE,
        ErrorKind::Unavailable | ErrorKind::NotInstalled => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let kind = error.kind();
        let retry_after = match kind {
            // A pool's sandbox or a session slot frees up in about a run's time.
            ErrorKind::Exhausted => Some(1),
            ErrorKind::Unavailable => Some(5),
            _ => None,
        };
        ApiError {
            status: status_of(&error),
            kind: kind.as_str(),
            message: error.to_string(),
            retry_after,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": {
            "kind": self.kind,
            "message": self.message,
            "retryable": self.retry_after.is_some(),
        } }));
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        response
    }
}

type Answer<T> = Result<T, ApiError>;

/// A JSON body, or a 400 that says what is wrong with it.
fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Answer<T> {
    parsed
        .map(|Json(value)| value)
        .map_err(|e| unreadable(e.status(), e.body_text()))
}

/// A request body axum could not take (malformed, too large, the wrong type), in the
/// API's one error shape.
fn unreadable(status: StatusCode, text: String) -> ApiError {
    ApiError::new(status, "invalid_input", text)
}

/// Runs blocking manager work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Answer<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("the call failed inside the server: {e}"),
            )
        })?
        .map_err(ApiError::from)
}

/// Finds the client of the request's bearer token, or answers 401.
async fn authenticate(State(api): State<Api>, mut request: Request, next: Next) -> Response {
    let client = if api.tokens.is_empty() {
        Some(ClientId::new(LOCAL_CLIENT))
    } else {
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                // The scheme's name is case-insensitive (RFC 9110).
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(token)
            })
            .and_then(|given| api.tokens.iter().find(|t| t.matches(given.trim())))
            .map(|t| t.client.clone())
    };
    match client {
        Some(client) => {
            request.extensions_mut().insert(client);
            next.run(request).await
        }
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this API needs `Authorization: Bearer TOKEN` with one of the server's tokens",
        )
        .into_response(),
    }
}

/// The web playground: one page, no build step, no third-party code. It reads
/// nothing without a token where the server needs one; the page itself is public.
async fn playground() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, PLAYGROUND_CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        include_str!("playground.html"),
    )
        .into_response()
}

/// Only the page's own script and style files (nothing inline, so markup that ever
/// got into the page could not run), images from data: URLs (plots), requests to
/// this server.
const PLAYGROUND_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                              img-src data:; connect-src 'self'; base-uri 'none'; \
                              form-action 'none'; frame-ancestors 'none'";

async fn playground_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("playground.js"),
    )
}

async fn playground_style() -> Response {
    asset("text/css; charset=utf-8", include_str!("playground.css"))
}

/// One of the playground's own files, as `content_type` and nothing else.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

async fn openapi() -> Json<Value> {
    static DOCUMENT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    Json(DOCUMENT.get_or_init(super::openapi::document).clone())
}

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_route",
        "no such route; the API is under /v1 (see docs/servers.md, or GET /openapi.json)",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "no_route",
        "this route does not take that method (see docs/servers.md, or GET /openapi.json)",
    )
}

async fn metrics(State(api): State<Api>) -> Response {
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

async fn languages(State(api): State<Api>) -> Answer<Json<Value>> {
    let manager = api.manager.clone();
    // Off the async workers: a runtime install may hold the service for a while.
    let languages =
        blocking(move || Ok(manager.with_service(crate::service::Service::languages_json))).await?;
    Ok(Json(languages))
}

async fn run_once(
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

async fn open(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    parsed: Result<Json<OpenSession>, JsonRejection>,
) -> Answer<(StatusCode, Json<Value>)> {
    let OpenSession { ask, tools } = body(parsed)?;
    let mut request = api.manager.request_for(&ask)?;
    let hub = if tools.is_empty() {
        None
    } else {
        let (hub, declared) = ToolHub::new(client.clone(), tools)?;
        request.tools.extend(&declared)?;
        Some(hub)
    };
    let manager = api.manager.clone();
    let owner = client.clone();
    // A session with tools of its client is not kept across a restart: its client's
    // end of them is this process's.
    let info = if hub.is_some() {
        blocking(move || manager.open(&owner, request)).await?
    } else {
        blocking(move || manager.open_asked(&owner, &ask)).await?
    };
    if let Some(hub) = hub {
        // The hubs of sessions that expired since go with this one's arrival.
        let open: Vec<SessionId> = api
            .manager
            .list(&client)
            .into_iter()
            .map(|s| s.id)
            .collect();
        api.hubs.keep_open(&client, &open);
        api.hubs.insert(info.id.clone(), hub);
    }
    Ok((StatusCode::CREATED, Json(json!(info))))
}

/// The answer of the client to one call of its tools.
async fn tool_result(
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

async fn list(State(api): State<Api>, Extension(client): Extension<ClientId>) -> Json<Value> {
    Json(json!({ "sessions": api.manager.list(&client) }))
}

async fn close(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
) -> Answer<StatusCode> {
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let closing = id.clone();
    blocking(move || manager.close(&client, &closing)).await?;
    api.hubs.remove(&id);
    Ok(StatusCode::NO_CONTENT)
}

async fn run(
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
/// client's tools (see [`super::client_tools`]), a `tool_call_end` event as each tool
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

/// A JSON body that may be left out (empty: the type's default), or a 400 that says
/// what is wrong with it.
fn optional_body<T: serde::de::DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
) -> Answer<T> {
    let body = body.map_err(|e| unreadable(e.status(), e.body_text()))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&body).map_err(|e| {
        unreadable(
            StatusCode::BAD_REQUEST,
            format!("Failed to deserialize the JSON body: {e}"),
        )
    })
}

async fn snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<(StatusCode, Json<Value>)> {
    let TakeSnapshot { files_only } = optional_body(body)?;
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let info = blocking(move || {
        if files_only {
            manager.snapshot_files(&client, &id)
        } else {
            manager.snapshot(&client, &id)
        }
    })
    .await?;
    Ok((StatusCode::CREATED, Json(json!(info))))
}

async fn fork(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<(StatusCode, Json<Value>)> {
    let Fork { count } = optional_body(body)?;
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let forks = blocking(move || manager.fork(&client, &id, count.unwrap_or(1))).await?;
    Ok((StatusCode::CREATED, Json(json!({ "sessions": forks }))))
}

async fn pause(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
) -> Answer<Json<Value>> {
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let paused = blocking(move || manager.pause(&client, &id)).await?;
    Ok(Json(json!({ "paused": paused })))
}

async fn snapshots(State(api): State<Api>, Extension(client): Extension<ClientId>) -> Json<Value> {
    Json(json!({ "snapshots": api.manager.snapshots(&client) }))
}

/// A snapshot sent whole: streamed to a private file (it may be gigabytes, beyond
/// the API's body limit; at most the room left in the store), then checked and kept.
async fn upload_snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    body: axum::body::Body,
) -> Answer<(StatusCode, Json<Value>)> {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let limit = api.manager.settings().max_stored_bytes;
    let failed = |e: std::io::Error| {
        ApiError::from(Error::Io {
            context: "cannot take the snapshot's bytes".into(),
            source: e,
        })
    };
    let file = blocking(|| {
        tempfile::tempfile().map_err(|e| Error::Io {
            context: "cannot make a file for the snapshot".into(),
            source: e,
        })
    })
    .await?;
    let mut file = tokio::fs::File::from_std(file);
    let mut stream = body.into_data_stream();
    let mut received: u64 = 0;
    // Taken as the bytes arrive, so uploads under way and what the store holds
    // together stay within its room; given back before the snapshot is kept, which
    // takes its own.
    let mut room = api.manager.incoming(&client);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| unreadable(StatusCode::BAD_REQUEST, e.to_string()))?;
        received += chunk.len() as u64;
        if received <= limit {
            room.take(chunk.len() as u64)?;
        } else {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_input",
                format!(
                    "a snapshot of more than {limit} bytes, the server's store, cannot be kept"
                ),
            ));
        }
        file.write_all(&chunk).await.map_err(failed)?;
    }
    file.flush().await.map_err(failed)?;
    drop(room);
    let mut file = file.into_std().await;
    let manager = api.manager.clone();
    let info = blocking(move || {
        use std::io::Seek as _;
        file.rewind().map_err(|e| Error::Io {
            context: "cannot read the snapshot's bytes".into(),
            source: e,
        })?;
        manager.upload_snapshot(
            &client,
            &mut std::io::BufReader::with_capacity(1 << 20, file),
        )
    })
    .await?;
    Ok((StatusCode::CREATED, Json(json!(info))))
}

/// A snapshot's bytes, streamed from its file: they may be gigabytes.
async fn download_snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
) -> Answer<Response> {
    let id = SnapshotId::from(id);
    let (path, info) = api.manager.snapshot_file(&client, &id)?;
    let file = tokio::fs::File::open(&path).await.map_err(|e| {
        ApiError::from(Error::Io {
            context: format!("cannot read snapshot {id}"),
            source: e,
        })
    })?;
    let stream = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20);
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, info.bytes.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}.sandlot\""),
            ),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response())
}

async fn delete_snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
) -> Answer<StatusCode> {
    api.manager
        .delete_snapshot(&client, &SnapshotId::from(id))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn restore(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<(StatusCode, Json<Value>)> {
    let ask = optional_body::<Restore>(body)?.ask();
    let manager = api.manager.clone();
    let id = SnapshotId::from(id);
    let info = blocking(move || manager.restore(&client, &id, Some(ask))).await?;
    Ok((StatusCode::CREATED, Json(json!(info))))
}

async fn shell(
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

async fn upload(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path((id, path)): Path<(String, String)>,
    contents: Result<Bytes, BytesRejection>,
) -> Answer<Json<Value>> {
    let contents = contents.map_err(|e| unreadable(e.status(), e.body_text()))?;
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let size = contents.len();
    let written = path.clone();
    blocking(move || manager.with_session(&client, &id, |s| s.write_file(&path, &contents)))
        .await?;
    Ok(Json(json!({ "written": written, "size": size })))
}

async fn download(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path((id, path)): Path<(String, String)>,
) -> Answer<Response> {
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let mime = sandlot_core::artifact::mime_of(&path);
    let bytes =
        blocking(move || manager.with_session(&client, &id, |s| s.read_file(&path))).await?;
    Ok(([(header::CONTENT_TYPE, mime)], bytes).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error table of docs/servers.md names every kind in the row of the status it
    /// answers with (`tests/serve.rs` provokes the rows over HTTP).
    #[test]
    fn the_documented_error_table_is_this_mapping() {
        let docs = include_str!("../../../../docs/servers.md");
        let row = |status: StatusCode| {
            docs.lines()
                .find(|line| line.starts_with(&format!("| {} |", status.as_u16())))
                .unwrap_or_else(|| panic!("no row for {status} in docs/servers.md"))
        };
        for &kind in ErrorKind::ALL {
            let error = Error::Masked {
                message: String::new(),
                kind,
            };
            let status = status_of(&error);
            assert!(
                row(status).contains(&format!("`{kind}`")),
                "the row of {status} does not name {kind}: {}",
                row(status)
            );
        }
        let missing = Error::NoSuchFile { path: "x".into() };
        assert_eq!(status_of(&missing), StatusCode::NOT_FOUND);
        assert!(row(StatusCode::NOT_FOUND).contains("`not_found`"));
    }

    #[test]
    fn only_this_machines_names_pass_without_tokens() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:9",
            "127.1.2.3",
            "[::1]:80",
            "[::1]",
        ] {
            assert!(is_loopback_authority(host), "{host}");
        }
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1",
            "[::2]:80",
            "127.0.0.1:",
            "127.0.0.1:80:80",
            "",
        ] {
            assert!(!is_loopback_authority(host), "{host}");
        }
        assert!(is_loopback_origin("http://127.0.0.1:8080"));
        assert!(is_loopback_origin("https://localhost"));
        for origin in [
            "null",
            "http://evil.example",
            "http://127.0.0.1:8080/x",
            "file://",
        ] {
            assert!(!is_loopback_origin(origin), "{origin}");
        }
    }
}

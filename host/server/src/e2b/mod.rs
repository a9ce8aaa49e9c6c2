//! E2B's protocol, served over the [`SessionManager`]: the official E2B SDKs (`e2b`,
//! `e2b-code-interpreter`, `@e2b/code-interpreter`), and what is built on them, run
//! against a sandlot server by changing their environment, not their code:
//!
//! ```text
//! E2B_API_KEY=e2b_<one of the server's token secrets>
//! E2B_API_URL=http://HOST:PORT
//! E2B_SANDBOX_URL=http://HOST:PORT
//! ```
//!
//! One listener serves the three APIs an E2B client talks to, told apart as E2B's own
//! proxy tells them: a request with `E2b-Sandbox-Port: 49983` goes to the sandbox's
//! envd (commands over Connect, files), `49999` to its code interpreter (`run_code`,
//! contexts), and one without the header to the control API (create, list, connect,
//! timeout, kill). [`docs/e2b.md`](https://github.com/sandlot-dev/sandlot/blob/main/docs/e2b.md)
//! maps each E2B operation and field to what sandlot does with it.
//!
//! **Keys and isolation**: an E2B API key (`X-API-Key`) is one of the server's
//! [`Token`] secrets, and a sandbox belongs to the client of the key that made it:
//! another key's sandboxes are as missing as ones that never were. Requests to a
//! sandbox carry the access token the create call returned. Every sandbox is a
//! session of the manager, under the server's policy, limits and allow-lists.

pub mod connect;
mod control;
mod display;
mod files;
mod filesystem;
mod interpreter;
mod process;
mod program;
pub mod sandboxes;

use super::serve::Token;
use crate::manager::{ClientId, SessionId, SessionManager};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use sandboxes::{E2bSandbox, Sandboxes};
use sandlot_core::error::Error;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tower::ServiceExt;

/// The port E2B's SDKs address a sandbox's envd on.
pub const ENVD_PORT: u16 = 49983;
/// The port they address its code interpreter on.
pub const INTERPRETER_PORT: u16 = 49999;

/// Largest file upload accepted, in bytes.
pub const MAX_UPLOAD: usize = 64 << 20;

/// Largest body of any other request (a JSON message, code, standard input), in
/// bytes: a message is parsed into values that take several times its size, so an
/// upload's limit on every route would let a few requests take gigabytes.
pub const MAX_REQUEST: usize = 2 << 20;

/// The E2B front end's options.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct E2bOptions {
    /// Where to listen.
    pub address: SocketAddr,
    /// The accepted keys; empty means any key, on loopback only.
    pub tokens: Vec<Token>,
    /// The timeout of a sandbox created without one (E2B's default: 300 s).
    pub default_timeout: Duration,
    /// Largest upload, in bytes.
    pub max_upload: usize,
}

impl E2bOptions {
    /// Listens on `address`, taking the keys of `tokens`.
    pub fn new(address: SocketAddr, tokens: Vec<Token>) -> E2bOptions {
        E2bOptions {
            address,
            tokens,
            default_timeout: Duration::from_secs(300),
            max_upload: MAX_UPLOAD,
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
struct E2b {
    manager: SessionManager,
    tokens: Arc<Vec<Token>>,
    sandboxes: Arc<Sandboxes>,
    default_timeout: Duration,
    max_upload: usize,
}

/// The client of every key when the server has no tokens (loopback only).
const LOCAL_CLIENT: &str = "local";

/// The E2B protocol, listening until [`E2bApi::shutdown`].
#[derive(Debug)]
pub struct E2bApi {
    listener: crate::listener::Listener,
    reaper: tokio::task::JoinHandle<()>,
    sandboxes: Arc<Sandboxes>,
    manager: SessionManager,
}

impl E2bApi {
    /// Binds and serves on the current tokio runtime. Refuses to serve without tokens
    /// anywhere but on a loopback address.
    pub async fn bind(manager: SessionManager, options: E2bOptions) -> Result<E2bApi, Error> {
        let address = options.address;
        if options.tokens.is_empty() && !address.ip().is_loopback() {
            return Err(Error::Serve {
                reason: format!(
                    "{address} is not a loopback address and no token is set: set \
                     SANDLOT_API_TOKENS (NAME:SECRET,...) to serve E2B clients beyond this \
                     machine"
                ),
            });
        }
        let e2b = E2b {
            manager: manager.clone(),
            tokens: Arc::new(options.tokens),
            sandboxes: Arc::new(Sandboxes::default()),
            default_timeout: options.default_timeout,
            max_upload: options.max_upload,
        };
        let kept = take_kept(&manager, &e2b.sandboxes);
        if kept > 0 {
            tracing::info!(
                sandboxes = kept,
                "E2B sandboxes kept by the last server taken back"
            );
        }
        let sandboxes = e2b.sandboxes.clone();
        let reaper = tokio::spawn(reap(e2b.clone()));
        let router = router(e2b, options.max_upload);
        let stop = tokio_util::sync::CancellationToken::new();
        Ok(E2bApi {
            listener: crate::listener::Listener::serve(router, address, stop).await?,
            reaper,
            sandboxes,
            manager,
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.listener.address()
    }

    /// Stops taking requests, waits for those in progress, and ends every sandbox;
    /// with a state directory, keeps them instead (their commands stop), for the next
    /// server to take back: their sessions are paused by the manager's shutdown.
    pub async fn shutdown(self) {
        self.listener.shutdown().await;
        self.reaper.abort();
        let manager = self.manager.clone();
        let ended = self.sandboxes.take_all();
        let _ = tokio::task::spawn_blocking(move || {
            for sandbox in ended {
                if !keep_sandbox(&manager, &sandbox) {
                    end_sandbox(&manager, &sandbox);
                }
            }
        })
        .await;
    }
}

/// Where E2B keeps its sandboxes in the state directory.
const KEPT: &str = "e2b";

/// Keeps `sandbox` for the next server, its commands stopped; `false` where nothing
/// outlives the process (or it could not be written: then it ends).
fn keep_sandbox(manager: &SessionManager, sandbox: &E2bSandbox) -> bool {
    if !manager.keeps_state() {
        return false;
    }
    stop_commands(sandbox);
    let kept = serde_json::to_vec(&sandbox.kept())
        .map_err(|e| e.to_string())
        .and_then(|json| {
            manager
                .keep_record(KEPT, &sandbox.id, &json)
                .map_err(|e| e.to_string())
        });
    match kept {
        Ok(kept) => kept,
        Err(reason) => {
            tracing::warn!(sandbox = %sandbox.id, %reason, "E2B sandbox not kept across the restart");
            false
        }
    }
}

/// Takes back the sandboxes the last server kept whose sessions the manager still
/// has; returns how many.
fn take_kept(manager: &SessionManager, sandboxes: &Sandboxes) -> usize {
    let mut taken = 0;
    for (key, json) in manager.take_records(KEPT) {
        let Ok(kept) = serde_json::from_slice::<sandboxes::Kept>(&json) else {
            tracing::warn!(sandbox = %key, "a kept E2B sandbox could not be read: dropped");
            continue;
        };
        let sandbox = E2bSandbox::from_kept(kept);
        let held: Vec<SessionId> = manager
            .list(&sandbox.client)
            .into_iter()
            .map(|s| s.id)
            .collect();
        let sessions = sandbox.sessions();
        if sessions.is_empty() || !sessions.iter().all(|s| held.contains(s)) {
            // Its sessions did not outlive the restart (a backend that cannot pause):
            // the sandbox is gone; what is left of it is closed.
            end_sandbox(manager, &sandbox);
            continue;
        }
        sandboxes.insert(Arc::new(sandbox));
        taken += 1;
    }
    taken
}

/// Stops the commands running in `sandbox`.
fn stop_commands(sandbox: &E2bSandbox) {
    for process in sandbox
        .processes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
    {
        process.interrupt.interrupt();
    }
}

/// Closes the sessions of `sandbox` and stops its commands.
fn end_sandbox(manager: &SessionManager, sandbox: &E2bSandbox) {
    stop_commands(sandbox);
    for session in sandbox.sessions() {
        let _ = manager.close(&sandbox.client, &session);
    }
}

/// Ends sandboxes as their time comes.
async fn reap(e2b: E2b) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let ended = e2b.sandboxes.take_expired(SystemTime::now());
        if ended.is_empty() {
            continue;
        }
        let keeper = e2b.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let manager = &keeper.manager;
            for sandbox in ended {
                // `autoPause`: paused rather than killed, where its backend can;
                // its sessions then end at the server's idle timeout.
                let paused_now = sandbox.auto_pause
                    && !manager
                        .list(&sandbox.client)
                        .iter()
                        .any(|s| s.paused && Some(&s.id) == sandbox.main_session().as_ref())
                    && control::pause_sandbox(manager, &sandbox).is_ok();
                if paused_now {
                    tracing::info!(sandbox = %sandbox.id, client = %sandbox.client, "E2B sandbox timed out: paused");
                    sandbox.set_timeout(manager.settings().max_lifetime);
                    keeper.sandboxes.insert(sandbox);
                    continue;
                }
                tracing::info!(sandbox = %sandbox.id, client = %sandbox.client, "E2B sandbox timed out");
                end_sandbox(manager, &sandbox);
            }
        })
        .await;
    }
}

/// The three APIs, for the dispatcher to pick from.
#[derive(Clone)]
struct Apis {
    e2b: E2b,
    control: Router,
    envd: Router,
    interpreter: Router,
}

fn router(e2b: E2b, max_upload: usize) -> Router {
    let tokenless = e2b.tokens.is_empty();
    let apis = Apis {
        control: control::router(e2b.clone()),
        envd: process::router(e2b.clone())
            .merge(files::router(e2b.clone()))
            .merge(filesystem::router(e2b.clone())),
        interpreter: interpreter::router(e2b.clone()),
        e2b,
    };
    let router = Router::new()
        .fallback(dispatch)
        // Uploads have a limit of their own (`files::router`).
        .layer(DefaultBodyLimit::max(MAX_REQUEST.min(max_upload)))
        .with_state(apis);
    if tokenless {
        router.layer(axum::middleware::from_fn(crate::serve::loopback_only))
    } else {
        router
    }
}

/// Sends a request to the API its `E2b-Sandbox-Port` names: none is the control API.
async fn dispatch(State(apis): State<Apis>, request: Request) -> Response {
    let port = request
        .headers()
        .get("e2b-sandbox-port")
        .map(|v| v.to_str().ok().and_then(|p| p.parse::<u16>().ok()));
    let routed =
        match port {
            None => apis.control,
            Some(Some(ENVD_PORT)) => apis.envd,
            Some(Some(INTERPRETER_PORT)) => apis.interpreter,
            Some(_) => return E2bError::new(
                StatusCode::BAD_GATEWAY,
                "this port is not served: sandlot serves a sandbox's envd (49983) and its code \
                 interpreter (49999)",
            )
            .into_response(),
        };
    let request = if port.is_some() {
        match sandbox_of(&apis.e2b, request) {
            Ok(request) => request,
            Err(refused) => return refused,
        }
    } else {
        request
    };
    match routed.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Finds the sandbox a request to envd or the code interpreter names and checks its
/// access token; the handlers find it in the request's extensions.
#[allow(clippy::result_large_err)]
fn sandbox_of(e2b: &E2b, mut request: Request) -> Result<Request, Response> {
    let headers = request.headers();
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let id = text("e2b-sandbox-id").unwrap_or("");
    // The SDKs send the envd token to envd, and to the code interpreter the traffic
    // token (which this server makes the same) or, for runs, the envd token.
    let token = text("x-access-token").or_else(|| text("e2b-traffic-access-token"));
    let found = e2b.sandboxes.get(id);
    let admitted = match (&found, token) {
        (Some(sandbox), Some(token)) => sandbox.admits(token),
        _ => false,
    };
    match found {
        Some(sandbox) if admitted => {
            request.extensions_mut().insert(sandbox);
            Ok(request)
        }
        // Unknown, or known to the caller only by its id: both are missing.
        _ => Err(E2bError::new(
            StatusCode::BAD_GATEWAY,
            format!(
                "no sandbox {} runs here for this access token: it ended, timed out, or was \
                 never made with your key",
                crate::serve::shown(id)
            ),
        )
        .into_response()),
    }
}

/// The client of a control request's `X-API-Key`.
fn client_of(e2b: &E2b, headers: &HeaderMap) -> Result<ClientId, E2bError> {
    if e2b.tokens.is_empty() {
        return Ok(ClientId::new(LOCAL_CLIENT));
    }
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .and_then(|given| e2b.tokens.iter().find(|t| t.matches(given.trim())))
        .map(|t| t.client().clone())
        .ok_or_else(|| {
            E2bError::new(
                StatusCode::UNAUTHORIZED,
                "this server needs `X-API-Key` with one of its tokens (E2B_API_KEY)",
            )
        })
}

/// An error as E2B's REST APIs answer it: a status and `{"code", "message"}`, the
/// code being the status (the SDKs read it to tell a missing sandbox from others).
#[derive(Debug)]
struct E2bError {
    status: StatusCode,
    message: String,
}

impl E2bError {
    fn new(status: StatusCode, message: impl Into<String>) -> E2bError {
        E2bError {
            status,
            message: message.into(),
        }
    }

    fn no_sandbox(id: &str) -> E2bError {
        E2bError::new(
            StatusCode::NOT_FOUND,
            format!(
                "sandbox {} not found: it ended, timed out, or was made with another key",
                crate::serve::shown(id)
            ),
        )
    }
}

impl From<Error> for E2bError {
    fn from(error: Error) -> E2bError {
        let status = crate::serve::status_of(&error);
        let mut e = E2bError::new(status, error.to_string());
        // A refused template, language or backend is the request's fault.
        if status == StatusCode::UNPROCESSABLE_ENTITY {
            e.status = StatusCode::BAD_REQUEST;
        }
        e
    }
}

impl IntoResponse for E2bError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            axum::Json(json!({ "code": self.status.as_u16(), "message": self.message })),
        )
            .into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS
            || self.status == StatusCode::SERVICE_UNAVAILABLE
        {
            // The SDKs retry a 429 only with a whole number of seconds to wait.
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, 1.into());
        }
        response
    }
}

/// Runs `work` to its end even if the request that started it is dropped (its
/// client hung up or timed out): a sandbox or context it opens is then registered,
/// and so listed, killable and reaped, instead of holding a session no one sees
/// until its idle timeout.
async fn to_the_end<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, E2bError>> + Send + 'static,
) -> Result<T, E2bError> {
    tokio::spawn(work).await.unwrap_or_else(|e| {
        Err(E2bError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the call failed inside the server: {e}"),
        ))
    })
}

/// Runs blocking manager work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Serve {
            reason: format!("the call failed inside the server: {e}"),
        })?
}

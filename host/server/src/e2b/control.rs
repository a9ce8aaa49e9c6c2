//! E2B's control API: create, list, inspect, connect to, time and kill sandboxes.

use super::sandboxes::{Context, E2bSandbox, Opening};
use super::{blocking, client_of, end_sandbox, to_the_end, E2b, E2bError};
use crate::manager::{ClientId, SessionInfo};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sandlot_core::egress::http::percent_decode;
use sandlot_core::error::Error;
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn router(e2b: E2b) -> Router {
    Router::new()
        .route("/sandboxes", post(create).get(list))
        .route("/v2/sandboxes", post(create).get(list))
        .route("/sandboxes/{id}", get(info).delete(kill))
        .route("/v2/sandboxes/{id}", get(info).delete(kill))
        .route("/sandboxes/{id}/timeout", post(set_timeout))
        .route("/sandboxes/{id}/connect", post(connect))
        .route("/v2/sandboxes/{id}/connect", post(connect))
        .route("/sandboxes/{id}/resume", post(connect))
        .route("/sandboxes/{id}/pause", post(pause))
        .route("/sandboxes/{id}/metrics", get(unserved))
        .route("/health", get(health))
        .fallback(no_route)
        .with_state(e2b)
}

/// The body of `POST /sandboxes`: what of E2B's `NewSandbox` sandlot takes. Fields
/// E2B adds later are ignored; those that ask for what sandlot cannot do are refused
/// by [`create`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSandbox {
    #[serde(rename = "templateID", default)]
    template_id: String,
    /// Seconds.
    timeout: Option<u64>,
    // The SDKs send `null` for none.
    metadata: Option<BTreeMap<String, String>>,
    env_vars: Option<BTreeMap<String, String>>,
    #[serde(rename = "allow_internet_access")]
    allow_internet_access: Option<bool>,
    auto_pause: Option<bool>,
    volume_mounts: Option<Vec<Value>>,
}

/// The body of `POST /sandboxes/{id}/timeout` and of connect.
#[derive(Debug, Deserialize, Default)]
struct Timeout {
    /// Seconds.
    timeout: Option<u64>,
}

fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Result<T, E2bError> {
    parsed
        .map(|Json(value)| value)
        .map_err(|e| E2bError::new(StatusCode::BAD_REQUEST, e.body_text()))
}

/// The language and backend of a template: E2B's own templates are Python on the
/// server's choice of backend; any other is a sandlot language id, with `@BACKEND`
/// to pick one (`javascript`, `python@docker`).
pub(super) fn template(name: &str) -> Result<(String, Option<String>), E2bError> {
    let name = name.trim();
    match name {
        "" | "base" | "code-interpreter-v1" | "code-interpreter" | "code-interpreter-beta" => {
            return Ok(("python".into(), None))
        }
        _ => {}
    }
    let (language, backend) = match name.split_once('@') {
        Some((language, backend)) => (language, Some(backend.to_string())),
        None => (name, None),
    };
    let plain = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.+#".contains(&b))
    };
    if !plain(language) || !backend.as_deref().is_none_or(plain) {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "template `{}` is not one sandlot knows: use `base` or `code-interpreter-v1` \
                 (Python), or a sandlot language id with an optional `@BACKEND` \
                 (`javascript`, `python@docker`)",
                crate::serve::shown(name)
            ),
        ));
    }
    Ok((language.to_string(), backend))
}

/// The most pairs, and bytes of keys and values, a sandbox's metadata may hold: it
/// is kept for the sandbox's life and copied into every listing.
const MAX_METADATA: (usize, usize) = (64, 64 << 10);
/// The same for the environment a sandbox's runs get.
const MAX_ENV: (usize, usize) = (1024, 1 << 20);

/// Refuses a map of more than `max.0` pairs or `max.1` bytes.
fn bounded(
    what: &str,
    map: Option<&BTreeMap<String, String>>,
    (pairs, bytes): (usize, usize),
) -> Result<(), E2bError> {
    let Some(map) = map else { return Ok(()) };
    let size: usize = map.iter().map(|(k, v)| k.len() + v.len()).sum();
    if map.len() > pairs || size > bytes {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{what} holds {} pairs of {size} bytes; a sandbox takes at most {pairs} \
                 pairs of {bytes} bytes",
                map.len()
            ),
        ));
    }
    Ok(())
}

/// Whether `wanted` more would take a sandbox that has run `started_ago` past
/// `lifetime`. A client's number of seconds may be anything up to `u64::MAX`.
fn outlives(started_ago: Duration, wanted: Duration, lifetime: Duration) -> bool {
    started_ago
        .checked_add(wanted)
        .is_none_or(|end| end > lifetime)
}

/// The seconds a sandbox may live from now, within the server's session lifetime.
fn timeout_within(
    e2b: &E2b,
    seconds: Option<u64>,
    started_ago: Duration,
) -> Result<Duration, E2bError> {
    let wanted = seconds.map_or(e2b.default_timeout, Duration::from_secs);
    let lifetime = e2b.manager.settings().max_lifetime;
    if wanted.is_zero() {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            "timeout must be at least 1 second",
        ));
    }
    if outlives(started_ago, wanted, lifetime) {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "a timeout of {} s would keep the sandbox past this server's session lifetime \
                 of {} s (it has run {} s); ask for less, or raise the server's max_lifetime",
                wanted.as_secs(),
                lifetime.as_secs(),
                started_ago.as_secs()
            ),
        ));
    }
    Ok(wanted)
}

async fn create(
    State(e2b): State<E2b>,
    headers: HeaderMap,
    parsed: Result<Json<NewSandbox>, JsonRejection>,
) -> Result<Response, E2bError> {
    let client = client_of(&e2b, &headers)?;
    let new = body(parsed)?;
    if new.volume_mounts.as_ref().is_some_and(|v| !v.is_empty()) {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            "volumeMounts are not supported by sandlot: move files in with files.write",
        ));
    }
    let timeout = timeout_within(&e2b, new.timeout, Duration::ZERO)?;
    bounded("metadata", new.metadata.as_ref(), MAX_METADATA)?;
    bounded("envVars", new.env_vars.as_ref(), MAX_ENV)?;
    let (language, backend) = template(&new.template_id)?;
    let opening = Opening {
        backend,
        network: (new.allow_internet_access == Some(false)).then_some(sandlot_core::Network::Off),
    };
    to_the_end(register(e2b, client, new, opening, language, timeout)).await
}

/// Opens the sandbox `create` asked for and registers it.
async fn register(
    e2b: E2b,
    client: ClientId,
    new: NewSandbox,
    opening: Opening,
    language: String,
    timeout: Duration,
) -> Result<Response, E2bError> {
    let manager = e2b.manager.clone();
    let owner = client.clone();
    let ask = opening.ask(&language);
    let opened = blocking(move || {
        // Opened from the ask, so that a server with a state directory keeps it.
        let opened = manager.open_asked(&owner, &ask)?;
        let shell = manager.with_session(&owner, &opened.id, |s| {
            Ok(s.capabilities().has(sandlot_core::Capability::Shell))
        });
        match shell {
            Ok(shell) => Ok((opened, shell)),
            Err(e) => {
                let _ = manager.close(&owner, &opened.id);
                Err(e)
            }
        }
    })
    .await?;
    let (opened, shell) = opened;
    let first = Context {
        id: super::sandboxes::unguessable(),
        language: language.clone(),
        cwd: super::files::HOME.into(),
        session: opened.id,
        executions: 0,
        displays: false,
    };
    let mut sandbox = E2bSandbox::new(client, new.template_id.clone(), opening, first, timeout);
    if sandbox.template.is_empty() {
        sandbox.template = "base".into();
    }
    sandbox.shell = shell;
    sandbox.auto_pause = new.auto_pause == Some(true);
    sandbox.metadata = new.metadata.unwrap_or_default();
    sandbox.env = new.env_vars.unwrap_or_default();
    let sandbox = Arc::new(sandbox);
    e2b.sandboxes.insert(sandbox.clone());
    tracing::info!(sandbox = %sandbox.id, client = %sandbox.client, template = %sandbox.template, "E2B sandbox created");
    Ok((StatusCode::CREATED, Json(sandbox.created())).into_response())
}

/// Sandbox `id` of `client` whose sessions are still open; one whose sessions the
/// manager ended (idle, lifetime) is forgotten here.
fn live(e2b: &E2b, client: &ClientId, id: &str) -> Result<Arc<E2bSandbox>, E2bError> {
    let sandbox = e2b
        .sandboxes
        .of(client, id)
        .ok_or_else(|| E2bError::no_sandbox(id))?;
    let open = e2b.manager.list(client);
    let alive = sandbox
        .main_session()
        .is_some_and(|main| open.iter().any(|s| s.id == main));
    if alive {
        Ok(sandbox)
    } else {
        e2b.sandboxes.remove(id);
        // Its other contexts may be running: closing them waits for their runs, which
        // must not hold an async worker.
        let manager = e2b.manager.clone();
        tokio::task::spawn_blocking(move || end_sandbox(&manager, &sandbox));
        Err(E2bError::no_sandbox(id))
    }
}

/// Whether `sandbox` is paused: its default context's session is, of those `open`.
fn paused(sandbox: &E2bSandbox, open: &[SessionInfo]) -> bool {
    sandbox
        .main_session()
        .and_then(|main| open.iter().find(|s| s.id == main))
        .is_some_and(|s| s.paused)
}

fn info_of(e2b: &E2b, sandbox: &E2bSandbox, open: &[SessionInfo]) -> Value {
    let policy = e2b.manager.policy();
    let cpus = policy.cpu_millis.div_ceil(1000).max(1);
    let memory_mb = (e2b.manager.settings().limits.memory >> 20) as u64;
    sandbox.info(cpus, memory_mb, paused(sandbox, open))
}

async fn info(
    State(e2b): State<E2b>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, E2bError> {
    let client = client_of(&e2b, &headers)?;
    let sandbox = live(&e2b, &client, &id)?;
    Ok(Json(info_of(&e2b, &sandbox, &e2b.manager.list(&client))))
}

/// `GET /sandboxes`: the caller's sandboxes, filtered by `metadata` (E2B sends it
/// URL-encoded twice) and `state`, `limit` at a time with `X-Next-Token`.
async fn list(
    State(e2b): State<E2b>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, E2bError> {
    let client = client_of(&e2b, &headers)?;
    let wanted = match query.get("metadata") {
        Some(filter) => metadata_filter(filter)?,
        None => Vec::new(),
    };
    let state_wanted = |paused: bool| {
        let state = if paused { "paused" } else { "running" };
        query
            .get("state")
            .is_none_or(|states| states.split(',').any(|s| s.trim() == state))
    };
    let limit = match query.get("limit") {
        Some(n) => n.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
            E2bError::new(StatusCode::BAD_REQUEST, "limit must be a positive number")
        })?,
        None => usize::MAX,
    };
    let skip = match query.get("nextToken") {
        Some(token) => token.parse::<usize>().map_err(|_| {
            E2bError::new(
                StatusCode::BAD_REQUEST,
                "nextToken is not one this server gave",
            )
        })?,
        None => 0,
    };
    let open = e2b.manager.list(&client);
    let matching: Vec<Value> = e2b
        .sandboxes
        .of_client(&client)
        .into_iter()
        .filter(|s| {
            s.main_session()
                .is_some_and(|main| open.iter().any(|o| o.id == main))
        })
        .filter(|s| state_wanted(paused(s, &open)))
        .filter(|s| {
            wanted
                .iter()
                .all(|(k, v)| s.metadata.get(k).is_some_and(|have| have == v))
        })
        .map(|s| info_of(&e2b, &s, &open))
        .collect();
    let page: Vec<Value> = matching.iter().skip(skip).take(limit).cloned().collect();
    let mut response = Json(Value::Array(page)).into_response();
    let next = skip.saturating_add(limit);
    if next < matching.len() {
        if let Ok(value) = next.to_string().parse() {
            response.headers_mut().insert("x-next-token", value);
        }
    }
    Ok(response)
}

/// The `key=value` pairs of a `metadata` filter, as it arrives after the query's
/// own decoding: form-encoded pairs whose keys and values are encoded once more.
fn metadata_filter(filter: &str) -> Result<Vec<(String, String)>, E2bError> {
    let bad = || {
        E2bError::new(
            StatusCode::BAD_REQUEST,
            "metadata must be URL-encoded key=value pairs joined by &",
        )
    };
    let mut pairs = Vec::new();
    for pair in filter.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(bad)?;
        let form = |s: &str| percent_decode(&s.replace('+', " "));
        let key = form(key).and_then(|k| percent_decode(&k)).ok_or_else(bad)?;
        let value = form(value)
            .and_then(|v| percent_decode(&v))
            .ok_or_else(bad)?;
        pairs.push((key, value));
    }
    Ok(pairs)
}

async fn kill(
    State(e2b): State<E2b>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, E2bError> {
    let client = client_of(&e2b, &headers)?;
    let sandbox = live(&e2b, &client, &id)?;
    e2b.sandboxes.remove(&sandbox.id);
    let manager = e2b.manager.clone();
    blocking(move || {
        end_sandbox(&manager, &sandbox);
        Ok(())
    })
    .await?;
    tracing::info!(sandbox = %id, %client, "E2B sandbox killed");
    Ok(StatusCode::NO_CONTENT)
}

async fn set_timeout(
    State(e2b): State<E2b>,
    headers: HeaderMap,
    Path(id): Path<String>,
    parsed: Result<Json<Timeout>, JsonRejection>,
) -> Result<StatusCode, E2bError> {
    let client = client_of(&e2b, &headers)?;
    let Timeout { timeout } = body(parsed)?;
    let seconds = timeout
        .ok_or_else(|| E2bError::new(StatusCode::BAD_REQUEST, "timeout (seconds) is required"))?;
    let sandbox = live(&e2b, &client, &id)?;
    let ran = sandbox.started.elapsed().unwrap_or_default();
    sandbox.set_timeout(timeout_within(&e2b, Some(seconds), ran)?);
    Ok(StatusCode::NO_CONTENT)
}

async fn connect(
    State(e2b): State<E2b>,
    headers: HeaderMap,
    Path(id): Path<String>,
    parsed: Option<Json<Timeout>>,
) -> Result<Json<Value>, E2bError> {
    let client = client_of(&e2b, &headers)?;
    let sandbox = live(&e2b, &client, &id)?;
    let seconds = parsed.and_then(|Json(Timeout { timeout })| timeout);
    if paused(&sandbox, &e2b.manager.list(&client)) {
        // Its sessions resume now, not on the first call after: the SDK expects a
        // sandbox ready to use. Its time starts again.
        let manager = e2b.manager.clone();
        let resuming = sandbox.clone();
        blocking(move || {
            for session in resuming.sessions() {
                manager.resume(&resuming.client, &session)?;
            }
            Ok(())
        })
        .await?;
        sandbox.set_timeout(timeout_within(&e2b, seconds, Duration::ZERO)?);
        tracing::info!(sandbox = %id, %client, "E2B sandbox resumed");
    } else if let Some(seconds) = seconds {
        let ran = sandbox.started.elapsed().unwrap_or_default();
        let wanted = timeout_within(&e2b, Some(seconds), ran)?;
        // Connecting extends a sandbox's life, never shortens it.
        if std::time::SystemTime::now() + wanted > sandbox.end() {
            sandbox.set_timeout(wanted);
        }
    }
    Ok(Json(sandbox.created()))
}

/// The body of `POST /sandboxes/{id}/pause`.
#[derive(Debug, Deserialize, Default)]
struct Pause {
    /// Whether the memory is kept (E2B's default); sandlot pauses with it or not at
    /// all.
    memory: Option<bool>,
}

async fn pause(
    State(e2b): State<E2b>,
    headers: HeaderMap,
    Path(id): Path<String>,
    parsed: Option<Json<Pause>>,
) -> Result<StatusCode, E2bError> {
    let client = client_of(&e2b, &headers)?;
    let sandbox = live(&e2b, &client, &id)?;
    if parsed.is_some_and(|Json(p)| p.memory == Some(false)) {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            "pausing without the memory (keep_memory=False) is not supported by sandlot: \
             pause with it",
        ));
    }
    if paused(&sandbox, &e2b.manager.list(&client)) {
        return Err(E2bError::new(
            StatusCode::CONFLICT,
            "the sandbox is paused already",
        ));
    }
    let manager = e2b.manager.clone();
    let pausing = sandbox.clone();
    blocking(move || pause_sandbox(&manager, &pausing)).await?;
    // A paused sandbox waits for its connect until the server's idle timeout ends its
    // sessions, not until its own timeout.
    sandbox.set_timeout(e2b.manager.settings().max_lifetime);
    tracing::info!(sandbox = %id, %client, "E2B sandbox paused");
    Ok(StatusCode::NO_CONTENT)
}

/// Pauses the sessions of `sandbox`: its default context's first, refused if it
/// cannot be (then nothing is paused); other contexts that cannot be keep running.
pub(super) fn pause_sandbox(
    manager: &crate::manager::SessionManager,
    sandbox: &E2bSandbox,
) -> Result<(), Error> {
    let sessions = sandbox.sessions();
    let Some((main, others)) = sessions.split_first() else {
        return Ok(());
    };
    if !manager.pause(&sandbox.client, main)? {
        return Err(Error::BackendCannot {
            backend: sandbox
                .opening
                .backend
                .clone()
                .unwrap_or_else(|| "auto".into()),
            capability: sandlot_core::Capability::SnapshotMemory,
            hint: "a sandbox pauses with its interpreter's memory, which Python on wasm \
                   keeps; this one keeps running until its timeout"
                .into(),
        });
    }
    for session in others {
        let _ = manager.pause(&sandbox.client, session);
    }
    Ok(())
}

async fn unserved(State(e2b): State<E2b>, headers: HeaderMap) -> Result<Response, E2bError> {
    client_of(&e2b, &headers)?;
    Err(E2bError::new(
        StatusCode::NOT_IMPLEMENTED,
        "sandbox metrics are not served by sandlot; its Prometheus counters are at `sandlot \
         serve`'s /metrics",
    ))
}

async fn health() -> StatusCode {
    StatusCode::NO_CONTENT
}

async fn no_route() -> E2bError {
    E2bError::new(
        StatusCode::NOT_FOUND,
        "no such route in sandlot's E2B API (docs/e2b.md lists what it serves)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_a_language_and_maybe_a_backend() {
        assert_eq!(template("base").unwrap(), ("python".into(), None));
        assert_eq!(
            template("code-interpreter-v1").unwrap(),
            ("python".into(), None)
        );
        assert_eq!(
            template("python@docker").unwrap(),
            ("python".into(), Some("docker".into()))
        );
        assert_eq!(template("javascript").unwrap(), ("javascript".into(), None));
        assert!(template("../etc").is_err());
        assert!(template("python@").is_err());
    }

    #[test]
    fn metadata_and_env_are_bounded() {
        let map = |n: usize, value: &str| -> BTreeMap<String, String> {
            (0..n)
                .map(|i| (format!("k{i}"), value.to_string()))
                .collect()
        };
        assert!(bounded("metadata", None, MAX_METADATA).is_ok());
        assert!(bounded("metadata", Some(&map(64, "v")), MAX_METADATA).is_ok());
        let many = bounded("metadata", Some(&map(65, "v")), MAX_METADATA).unwrap_err();
        assert!(
            many.message.contains("at most 64 pairs"),
            "{}",
            many.message
        );
        let big = "x".repeat(64 << 10);
        assert!(bounded("metadata", Some(&map(1, &big)), MAX_METADATA).is_err());
        assert!(bounded("envVars", Some(&map(1, &big)), MAX_ENV).is_ok());
    }

    #[test]
    fn any_timeout_a_client_sends_is_checked_without_overflow() {
        let hour = Duration::from_secs(3600);
        let second = Duration::from_secs(1);
        assert!(outlives(second, Duration::from_secs(u64::MAX), hour));
        assert!(outlives(Duration::ZERO, hour + second, hour));
        assert!(!outlives(second, hour - second, hour));
    }

    #[test]
    fn metadata_filters_decode_twice() {
        // `{user: 'a b', k: 'x&y'}` as the SDKs send it, after the query's decoding.
        let pairs = metadata_filter("user=a%2520b&k=x%2526y").unwrap();
        assert_eq!(
            pairs,
            [("user".into(), "a b".into()), ("k".into(), "x&y".into())]
        );
        assert!(metadata_filter("novalue").is_err());
        assert!(metadata_filter("k=%zz").is_err());
    }
}

//! A session's life: opening (with the tools its client answers), listing, closing,
//! pausing and forking. What runs inside a session is the room of runs.

use super::api::{blocking, Api};
use super::bodies::{body, optional_body};
use super::errors::Answer;
use crate::manager::{ClientId, SessionId};
use crate::serve::client_tools::ToolHub;
use crate::serve::requests::{Fork, OpenSession, UpdateNetwork};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{json, Value};

pub(super) async fn open(
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

pub(super) async fn list(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
) -> Json<Value> {
    Json(json!({ "sessions": api.manager.list(&client) }))
}

pub(super) async fn close(
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

pub(super) async fn fork(
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

pub(super) async fn pause(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
) -> Answer<Json<Value>> {
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let paused = blocking(move || manager.pause(&client, &id)).await?;
    Ok(Json(json!({ "paused": paused })))
}

pub(super) async fn update_network(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    update: Result<Json<UpdateNetwork>, JsonRejection>,
) -> Answer<Json<Value>> {
    let update = body(update)?.update();
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let policy = blocking(move || manager.update_network(&client, &id, update)).await?;
    Ok(Json(json!({ "requests": policy.requests })))
}

//! The routes of the HTTP API, its authentication and its errors. This file is the
//! route table; each area of the API, the guard in front of it and the error shape
//! they all answer in are rooms of their own.

mod about;
mod api;
mod bodies;
mod errors;
mod files;
mod guard;
mod playground;
mod runs;
mod sessions;
mod snapshots;
#[cfg(test)]
mod tests;

pub(crate) use errors::status_of;
pub(crate) use guard::{loopback_only, shown};

use crate::manager::SessionManager;
use crate::serve::client_tools::Hubs;
use crate::serve::token::Token;
use api::Api;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

pub(super) fn router(manager: SessionManager, tokens: Vec<Token>, max_body: usize) -> Router {
    let api = Api {
        manager,
        tokens: Arc::new(tokens),
        hubs: Arc::new(Hubs::default()),
    };
    let protected = Router::new()
        .route("/metrics", get(about::metrics))
        .route("/v1/languages", get(about::languages))
        .route("/v1/run", post(runs::run_once))
        .route("/v1/sessions", post(sessions::open).get(sessions::list))
        .route("/v1/sessions/{id}", axum::routing::delete(sessions::close))
        .route("/v1/sessions/{id}/run", post(runs::run))
        .route("/v1/sessions/{id}/shell", post(runs::shell))
        .route(
            "/v1/sessions/{id}/tool_calls/{call}",
            post(runs::tool_result),
        )
        .route("/v1/sessions/{id}/snapshot", post(snapshots::snapshot))
        .route("/v1/sessions/{id}/fork", post(sessions::fork))
        .route("/v1/sessions/{id}/pause", post(sessions::pause))
        .route(
            "/v1/sessions/{id}/network",
            axum::routing::put(sessions::update_network),
        )
        .route(
            "/v1/snapshots",
            get(snapshots::snapshots).post(snapshots::upload_snapshot),
        )
        .route(
            "/v1/snapshots/{id}",
            get(snapshots::download_snapshot).delete(snapshots::delete_snapshot),
        )
        .route("/v1/snapshots/{id}/restore", post(snapshots::restore))
        .route(
            "/v1/sessions/{id}/files/{*path}",
            axum::routing::put(files::upload).get(files::download),
        )
        .route_layer(middleware::from_fn_with_state(
            api.clone(),
            guard::authenticate,
        ));
    let tokenless = api.tokens.is_empty();
    let router = Router::new()
        .route("/", get(playground::playground))
        .route("/playground.js", get(playground::playground_script))
        .route("/playground.css", get(playground::playground_style))
        .route("/health", get(about::health))
        .route("/openapi.json", get(about::openapi))
        .merge(protected)
        .fallback(errors::not_found)
        .method_not_allowed_fallback(errors::method_not_allowed)
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

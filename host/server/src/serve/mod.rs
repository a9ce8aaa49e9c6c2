//! `sandlot serve`: an HTTP/JSON API over the [`SessionManager`], for agents written
//! in any language. Every route but `/health` needs a bearer token; each token is a
//! client of the manager, which sees only its own sessions. Without tokens the API
//! serves on a loopback address only, and says so.
//!
//! | route | what it does |
//! | --- | --- |
//! | `GET /` | the web playground: edit, run, see output stream in and plots |
//! | `GET /health` | `{"status":"ok"}`, without a token |
//! | `GET /openapi.json` | the OpenAPI 3.1 document of all this, without a token |
//! | `GET /metrics` | Prometheus text: sessions, runs, failures |
//! | `GET /v1/languages` | the languages and backends |
//! | `POST /v1/run` | one program in a fresh sandbox (an [`Ask`](crate::manager::Ask) plus `code`) |
//! | `POST /v1/sessions` / `GET /v1/sessions` | open a session (an [`Ask`](crate::manager::Ask), and `tools` the client answers) / list yours |
//! | `DELETE /v1/sessions/{id}` | close it |
//! | `POST /v1/sessions/{id}/run` | run `code`; with `Accept: text/event-stream`, output streams as server-sent events |
//! | `POST /v1/sessions/{id}/shell` | run a shell `command` |
//! | `POST /v1/sessions/{id}/tool_calls/{call}` | the `value` (or `error`) of a call of the tools the client declared when it opened the session |
//! | `PUT` / `GET /v1/sessions/{id}/files/{path}` | a file in, as the raw body / out |
//!
//! Runs answer with the `sandlot.execution/1` JSON of [`sandlot_core::execution`].

mod client_tools;
mod events;
mod openapi;
mod requests;
mod routes;
mod token;

pub(crate) use routes::{loopback_only, shown, status_of};
pub(crate) use token::same_secret;
pub use token::Token;

use crate::manager::SessionManager;
use sandlot_core::error::Error;
use std::net::SocketAddr;

/// Largest request body accepted (a file upload, mostly).
pub const MAX_BODY: usize = 32 << 20;

/// How `sandlot serve` serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Where to listen.
    pub address: SocketAddr,
    /// The accepted tokens; empty means no authentication, on loopback only.
    pub tokens: Vec<Token>,
    /// Largest request body, in bytes.
    pub max_body: usize,
}

impl ServeOptions {
    /// Listens on `address` with `tokens`.
    pub fn new(address: SocketAddr, tokens: Vec<Token>) -> ServeOptions {
        ServeOptions {
            address,
            tokens,
            max_body: MAX_BODY,
        }
    }
}

/// The HTTP API as an axum [`Router`](axum::Router), for an application that serves
/// it beside its own routes (`Router::new().nest("/sandbox", router)`), on its own
/// listener. Every request needs one of `tokens`: the application, not sandlot,
/// decides where it listens, so a router without tokens is refused
/// ([`Error::InvalidRequest`]).
///
/// The manager's sessions outlive the router: call [`SessionManager::shutdown`]
/// when the application stops.
pub fn router(manager: SessionManager, tokens: Vec<Token>) -> Result<axum::Router, Error> {
    if tokens.is_empty() {
        return Err(Error::InvalidRequest {
            reason: "an embedded HTTP API needs at least one token: the application decides \
                     where it listens, so sandlot cannot keep it to loopback"
                .into(),
        });
    }
    Ok(routes::router(manager, tokens, MAX_BODY))
}

/// The HTTP API, listening until [`HttpApi::shutdown`].
#[derive(Debug)]
pub struct HttpApi {
    listener: crate::listener::Listener,
    authenticated: bool,
}

impl HttpApi {
    /// Binds and serves on the current tokio runtime. Refuses to serve without
    /// tokens anywhere but on a loopback address.
    pub async fn bind(manager: SessionManager, options: ServeOptions) -> Result<HttpApi, Error> {
        let address = options.address;
        if options.tokens.is_empty() && !address.ip().is_loopback() {
            return Err(Error::Serve {
                reason: format!(
                    "{address} is not a loopback address and no token is set: set \
                     SANDLOT_API_TOKENS (NAME:SECRET,...) to serve beyond this machine"
                ),
            });
        }
        let authenticated = !options.tokens.is_empty();
        let router = routes::router(manager, options.tokens, options.max_body);
        let stop = tokio_util::sync::CancellationToken::new();
        Ok(HttpApi {
            listener: crate::listener::Listener::serve(router, address, stop).await?,
            authenticated,
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.listener.address()
    }

    /// Whether requests need a token.
    pub fn authenticated(&self) -> bool {
        self.authenticated
    }

    /// Stops taking requests and waits for those in progress (streams included).
    pub async fn shutdown(self) {
        self.listener.shutdown().await;
    }
}

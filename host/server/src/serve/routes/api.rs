//! What every handler shares: the state (manager, tokens, client tools) and the way to
//! run manager work off the async workers. Each area of the API takes it from here.

use super::errors::{Answer, ApiError};
use crate::manager::SessionManager;
use crate::serve::client_tools::Hubs;
use crate::serve::token::Token;
use axum::http::StatusCode;
use sandlot_core::error::Error;
use std::sync::Arc;

/// What every handler shares.
#[derive(Clone)]
pub(super) struct Api {
    pub(super) manager: SessionManager,
    pub(super) tokens: Arc<Vec<Token>>,
    /// The client tools of the sessions that declared some.
    pub(super) hubs: Arc<Hubs>,
}

/// Runs blocking manager work on tokio's blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
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

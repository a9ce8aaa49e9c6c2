//! The async face of a session: the same calls on tokio's blocking pool, for callers
//! that must not block their runtime.

use super::options::RunOptions;
use super::state::Session;
use crate::error::{Error, Result};
use crate::execution::Execution;
use std::sync::Arc;

/// A [`Session`] for async code: each call runs on tokio's blocking pool. Open one with
/// [`crate::SessionBuilder::open_async`].
#[derive(Clone)]
pub struct AsyncSession {
    inner: Arc<std::sync::Mutex<Session>>,
}

impl From<Session> for AsyncSession {
    fn from(session: Session) -> Self {
        AsyncSession {
            inner: Arc::new(std::sync::Mutex::new(session)),
        }
    }
}

impl AsyncSession {
    /// Runs `code` with `options` without blocking the async runtime.
    pub async fn run_with(&self, code: String, options: RunOptions) -> Result<Execution> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .run_with(&code, options)
        })
        .await
        .map_err(|e| Error::Cancelled {
            what: format!("the run: {e}"),
        })?
    }

    /// Runs `code` with the session's limits.
    pub async fn run(&self, code: &str) -> Result<Execution> {
        self.run_with(code.to_string(), RunOptions::default()).await
    }
}

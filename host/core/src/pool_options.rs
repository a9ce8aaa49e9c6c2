//! How a pool of sandboxes behaves ([`PoolOptions`]), as the API and `sandlot.toml`
//! give it. The pool itself is [`crate::backend::pool::Pool`].

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What an acquire does when every sandbox the pool may hold is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Exhausted {
    /// Waits for a session to end, up to [`PoolOptions::acquire_timeout`], then fails
    /// with [`crate::Error::PoolTimeout`].
    #[default]
    Wait,
    /// Fails at once with [`crate::Error::PoolExhausted`] when every slot is in use by
    /// a session. A slot whose sandbox is still being warmed is not in use: the caller
    /// waits for that sandbox (at most [`PoolOptions::acquire_timeout`]) and gets it.
    FailFast,
    /// Opens a temporary extra sandbox on the caller's time, destroyed when its session
    /// ends and never kept.
    Overflow,
}

/// How a [`crate::backend::pool::Pool`] behaves.
///
/// Build one with `..PoolOptions::default()` for the fields you leave as they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolOptions {
    /// Sandboxes kept ready per warm key.
    pub min_idle: usize,
    /// Most sandboxes the pool holds at once, in use, ready or being warmed, over all
    /// keys (temporary extras under [`Exhausted::Overflow`] not counted).
    pub max_size: usize,
    /// A ready sandbox unused this long is destroyed (and replaced while its key is
    /// warm). `None`: never.
    pub idle_timeout: Option<Duration>,
    /// A ready sandbox older than this is destroyed and replaced. `None`: never.
    pub max_lifetime: Option<Duration>,
    /// Whether a ready sandbox is checked (one request to it) before it is handed out;
    /// one that fails is destroyed and counted, never handed out.
    pub health_check: bool,
    /// How long [`Exhausted::Wait`] waits, and [`Exhausted::FailFast`] for a sandbox
    /// being warmed.
    pub acquire_timeout: Duration,
    /// What an acquire does when the pool is at `max_size`.
    pub when_exhausted: Exhausted,
}

impl Default for PoolOptions {
    /// Two ready per key, at most eight, health checks on, wait up to 30 s, ready
    /// sandboxes kept 10 minutes idle and at most an hour.
    fn default() -> Self {
        PoolOptions {
            min_idle: 2,
            max_size: 8,
            idle_timeout: Some(Duration::from_secs(600)),
            max_lifetime: Some(Duration::from_secs(3600)),
            health_check: true,
            acquire_timeout: Duration::from_secs(30),
            when_exhausted: Exhausted::Wait,
        }
    }
}

impl PoolOptions {
    /// Why these options cannot work, if they cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        (self.max_size == 0 || self.min_idle > self.max_size).then(|| {
            format!(
                "max_size must be at least 1 and at least min_idle (got min_idle {}, \
                 max_size {})",
                self.min_idle, self.max_size
            )
        })
    }
}

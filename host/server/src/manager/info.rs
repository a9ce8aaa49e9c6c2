//! What a client sees of a session ([`SessionInfo`]), and why one ended ([`Ended`]).

use super::ids::SessionId;
use sandlot_core::backend::BackendName;
use serde::Serialize;
use std::fmt;

/// An open session, as its client sees it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[non_exhaustive]
pub struct SessionInfo {
    /// The name to pass back.
    pub id: SessionId,
    /// The language id.
    pub language: String,
    /// The backend it runs on.
    #[schemars(with = "String")]
    pub backend: BackendName,
    /// What it runs the code with there, e.g. `CPython 3.11.2`; `None` where the
    /// backend cannot tell.
    pub runs_with: Option<String>,
    /// Whether variables persist from one run to the next.
    pub persistent: bool,
    /// Seconds since it opened.
    pub age_seconds: f64,
    /// Seconds since it was last used.
    pub idle_seconds: f64,
    /// Seconds of idleness after which it closes.
    pub idle_timeout_seconds: f64,
    /// Whether it is paused: its state is on disk and its next call resumes it.
    pub paused: bool,
}

/// Why a session ended, for the message of a late call on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Ended {
    /// Its client closed it.
    Closed,
    /// Nobody used it for the idle timeout.
    Idle,
    /// It reached its maximum lifetime.
    Lifetime,
    /// Its client went away.
    ClientGone,
    /// The manager shut down.
    Shutdown,
    /// It was paused, and its state could not be taken back.
    Unresumable,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ended::Closed => "it was closed",
            Ended::Idle => "it was idle for longer than the idle timeout",
            Ended::Lifetime => "it reached its maximum lifetime",
            Ended::ClientGone => "its client went away",
            Ended::Shutdown => "the server shut down",
            Ended::Unresumable => "it was paused, and its state could not be taken back",
        })
    }
}

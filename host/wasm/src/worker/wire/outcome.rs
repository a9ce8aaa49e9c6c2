//! A run's [`Outcome`] as it crosses the socket: the backend contract's type carries
//! no serde of its own, so its wire twin and the conversions both ways live here.

use sandlot_core::backend::{EndReason, Outcome, SessionState};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// An [`Outcome`] of a wasm run (which never reaches a network, so it has no egress
/// denials).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireOutcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub exit_code: i32,
    pub end: WireEnd,
    pub session: WireSession,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WireEnd {
    Completed,
    TimedOut { limit: Duration },
    MemoryLimit,
    OutputLimit,
    Interrupted,
    Killed { signal: i32 },
    SandboxLost { cause: String },
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WireSession {
    Open,
    Restarted { reason: String },
    Ended { reason: String },
}

impl From<Outcome> for WireOutcome {
    fn from(outcome: Outcome) -> WireOutcome {
        WireOutcome {
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            stdout_truncated: outcome.stdout_truncated,
            stderr_truncated: outcome.stderr_truncated,
            exit_code: outcome.exit_code,
            end: match outcome.end {
                EndReason::Completed => WireEnd::Completed,
                EndReason::TimedOut { limit } => WireEnd::TimedOut { limit },
                EndReason::MemoryLimit => WireEnd::MemoryLimit,
                EndReason::OutputLimit => WireEnd::OutputLimit,
                EndReason::Interrupted => WireEnd::Interrupted,
                EndReason::Killed { signal } => WireEnd::Killed { signal },
                EndReason::SandboxLost { cause } => WireEnd::SandboxLost { cause },
                other => WireEnd::SandboxLost {
                    cause: other.to_string(),
                },
            },
            session: match outcome.session {
                SessionState::Open => WireSession::Open,
                SessionState::Restarted { reason } => WireSession::Restarted { reason },
                SessionState::Ended { reason } => WireSession::Ended { reason },
                other => WireSession::Ended {
                    reason: format!("{other:?}"),
                },
            },
        }
    }
}

impl From<WireOutcome> for Outcome {
    fn from(wire: WireOutcome) -> Outcome {
        Outcome {
            stdout: wire.stdout,
            stderr: wire.stderr,
            stdout_truncated: wire.stdout_truncated,
            stderr_truncated: wire.stderr_truncated,
            exit_code: wire.exit_code,
            end: match wire.end {
                WireEnd::Completed => EndReason::Completed,
                WireEnd::TimedOut { limit } => EndReason::TimedOut { limit },
                WireEnd::MemoryLimit => EndReason::MemoryLimit,
                WireEnd::OutputLimit => EndReason::OutputLimit,
                WireEnd::Interrupted => EndReason::Interrupted,
                WireEnd::Killed { signal } => EndReason::Killed { signal },
                WireEnd::SandboxLost { cause } => EndReason::SandboxLost { cause },
            },
            session: match wire.session {
                WireSession::Open => SessionState::Open,
                WireSession::Restarted { reason } => SessionState::Restarted { reason },
                WireSession::Ended { reason } => SessionState::Ended { reason },
            },
            ..Outcome::default()
        }
    }
}

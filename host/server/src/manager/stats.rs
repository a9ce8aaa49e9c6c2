//! The manager's counters ([`ManagerStats`]), as kept and as read.

use serde::Serialize;
use std::sync::atomic::AtomicU64;

/// Counters since the manager started.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ManagerStats {
    /// Sessions open now.
    pub open: usize,
    /// Sessions opened.
    pub opened: u64,
    /// Sessions that could not be opened (refusals included).
    pub open_failures: u64,
    /// Sessions closed by their clients.
    pub closed: u64,
    /// Sessions closed for idleness or lifetime.
    pub expired: u64,
    /// Runs and commands.
    pub runs: u64,
    /// Runs and commands that failed (an error, not a non-zero exit).
    pub run_failures: u64,
    /// Seconds spent running code, over every run that came back.
    pub run_seconds: f64,
    /// Tool calls the code of those runs made.
    pub tool_calls: u64,
    /// Tool calls that failed: the tool's error, a limit, a timeout, a bad request.
    pub tool_call_failures: u64,
    /// Bytes of the host's memory the open sessions (and opens in progress) may hold.
    pub memory_held: u64,
    /// The memory budget ([`ManagerSettings::memory_budget`](super::ManagerSettings::memory_budget)).
    pub memory_budget: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) opened: AtomicU64,
    pub(super) open_failures: AtomicU64,
    pub(super) closed: AtomicU64,
    pub(super) expired: AtomicU64,
    pub(super) runs: AtomicU64,
    pub(super) run_failures: AtomicU64,
    pub(super) run_micros: AtomicU64,
    pub(super) tool_calls: AtomicU64,
    pub(super) tool_call_failures: AtomicU64,
}

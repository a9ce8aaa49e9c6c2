//! What a pool reports about itself: a snapshot taken under the lock, for
//! monitoring and benches, apart from the paths that change the counts.

use super::handle::Pool;
use serde::Serialize;
use std::time::Duration;

/// What a pool holds and has done, from [`Pool::stats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PoolStats {
    /// Sandboxes held: in use, ready and being warmed.
    pub size: usize,
    /// Ready to hand out.
    pub idle: usize,
    /// The names of the sandboxes ready to hand out (containers' names), oldest first.
    pub ready_sandboxes: Vec<String>,
    /// Handed out to sessions (temporary extras included).
    pub in_use: usize,
    /// Being opened and warmed.
    pub warming: usize,
    /// Callers waiting for a sandbox.
    pub waiting: usize,
    /// Sandboxes opened, in all.
    pub created: u64,
    /// Sandboxes destroyed, in all.
    pub destroyed: u64,
    /// Ready sandboxes that failed their health check.
    pub failed_health_checks: u64,
    /// Sandboxes that could not be opened or warmed.
    pub failed_warms: u64,
    /// The last reason a sandbox could not be opened or warmed.
    pub last_warm_error: Option<String>,
    /// Acquires served from a ready sandbox, and acquires that opened one on the
    /// caller's time.
    pub hits: u64,
    /// See `hits`.
    pub misses: u64,
    /// Acquire times over the last acquires (at most 4,096): median, 90th and 99th
    /// percentile.
    pub acquire_p50: Option<Duration>,
    /// See `acquire_p50`.
    pub acquire_p90: Option<Duration>,
    /// See `acquire_p50`.
    pub acquire_p99: Option<Duration>,
}

impl Pool {
    /// What it holds and has done.
    pub fn stats(&self) -> PoolStats {
        let state = self.shared.lock();
        let mut times: Vec<Duration> = state.acquire_times.iter().copied().collect();
        times.sort();
        let percentile = |p: f64| {
            (!times.is_empty()).then(|| times[((times.len() - 1) as f64 * p).round() as usize])
        };
        let idle: usize = state.buckets.iter().map(|b| b.ready.len()).sum();
        let warming: usize = state.buckets.iter().map(|b| b.warming).sum();
        PoolStats {
            size: state.held,
            idle,
            ready_sandboxes: state
                .buckets
                .iter()
                .flat_map(|b| b.ready.iter().map(|r| r.sandbox.name()))
                .collect(),
            in_use: state.in_use,
            warming,
            waiting: state.waiting,
            created: state.created,
            destroyed: state.destroyed,
            failed_health_checks: state.failed_health_checks,
            failed_warms: state.failed_warms,
            last_warm_error: state.last_warm_error.clone(),
            hits: state.hits,
            misses: state.misses,
            acquire_p50: percentile(0.5),
            acquire_p90: percentile(0.9),
            acquire_p99: percentile(0.99),
        }
    }
}

//! Closing with a deadline: sessions in use get until then, then their sandboxes are
//! taken, and nothing the pool made outlives it.

use super::state::{Lent, Shared};
use crate::backend::Sandbox;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ends the pool when the last [`Pool`](super::handle::Pool) handle is dropped.
pub(super) struct Owner(pub(super) Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        let shared = self.0.clone();
        // In the background: a drop never waits for sessions.
        let _ = std::thread::Builder::new()
            .name("sandlot-pool-close".into())
            .spawn(move || close(&shared, CLOSE_DEADLINE_ON_DROP));
    }
}

/// How long a dropped pool waits for sessions in use before taking their sandboxes.
const CLOSE_DEADLINE_ON_DROP: Duration = Duration::from_secs(30);

/// Closes `shared`: refuses new acquires, waits for sessions in use until `deadline`,
/// then takes their sandboxes, and destroys everything.
pub(super) fn close(shared: &Arc<Shared>, deadline: Duration) {
    let until = Instant::now() + deadline;
    let mut state = shared.lock();
    state.closed = true;
    shared.changed.notify_all();
    // Ready sandboxes go at once.
    let ready: Vec<Box<dyn Sandbox>> = state
        .buckets
        .iter_mut()
        .flat_map(|b| b.ready.drain(..).map(|r| r.sandbox))
        .collect();
    state.held -= ready.len();
    drop(state);
    for sandbox in ready {
        shared.destroy(sandbox);
    }
    let mut state = shared.lock();
    while state.in_use > 0 || state.buckets.iter().any(|b| b.warming > 0) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        state = shared
            .changed
            .wait_timeout(state, until - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    let lent: Vec<Lent> = state.lent.drain(..).filter_map(|w| w.upgrade()).collect();
    drop(state);
    for lent in lent {
        // A run in progress holds the lock: it is bounded by its own time limit, and
        // the sandbox is taken when it ends.
        let taken = lent.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(sandbox) = taken {
            drop(sandbox);
            shared.lock().destroyed += 1;
        }
    }
    // Everything handed to the reaper is destroyed before `close` returns, and so is
    // what a warm still opening makes: the warmer destroys it once it sees the pool
    // closed (a pod can take seconds to start, longer than the deadline).
    let mut state = shared.lock();
    while (state.destroyed < state.created || state.buckets.iter().any(|b| b.warming > 0))
        && Instant::now() < until + REAP_WAIT
    {
        state = shared
            .changed
            .wait_timeout(state, Duration::from_millis(50))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// How long `close` waits past its deadline for the reaper to finish.
const REAP_WAIT: Duration = Duration::from_secs(60);

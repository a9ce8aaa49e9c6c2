//! What the pool's callers, its warmer and its reaper share under one lock: every
//! count and every ready sandbox, kept apart from the code that moves them.

use super::key::Key;
use crate::backend::{Backend, Sandbox};
use crate::pool_options::PoolOptions;
use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// A sandbox ready to hand out.
pub(super) struct Ready {
    pub(super) sandbox: Box<dyn Sandbox>,
    pub(super) born: Instant,
    pub(super) idle_since: Instant,
}

/// The sandboxes of one key.
pub(super) struct Bucket {
    pub(super) key: Key,
    pub(super) ready: VecDeque<Ready>,
    pub(super) warming: usize,
    /// Whether the pool keeps `min_idle` ready for it.
    pub(super) warm: bool,
    /// Until when warming waits after a failure, so a broken key does not spin.
    pub(super) backoff_until: Option<Instant>,
}

/// A sandbox handed out: shared with the pool so that closing it can take the sandbox
/// from a session that outlives the close deadline.
pub(super) type Lent = Arc<LentSlot>;
pub(super) type LentSlot = Mutex<Option<Box<dyn Sandbox>>>;

#[derive(Default)]
pub(super) struct State {
    pub(super) buckets: Vec<Bucket>,
    /// In use, ready and warming, extras not counted.
    pub(super) held: usize,
    pub(super) in_use: usize,
    pub(super) waiting: usize,
    pub(super) closed: bool,
    pub(super) created: u64,
    pub(super) destroyed: u64,
    pub(super) failed_health_checks: u64,
    pub(super) failed_warms: u64,
    pub(super) last_warm_error: Option<String>,
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) acquire_times: VecDeque<Duration>,
    pub(super) lent: Vec<Weak<LentSlot>>,
}

impl State {
    pub(super) fn bucket(&mut self, key: &Key) -> usize {
        match self.buckets.iter().position(|b| &b.key == key) {
            Some(index) => index,
            None => {
                self.buckets.push(Bucket {
                    key: key.clone(),
                    ready: VecDeque::new(),
                    warming: 0,
                    warm: false,
                    backoff_until: None,
                });
                self.buckets.len() - 1
            }
        }
    }

    /// Takes the oldest ready sandbox of a kind other than `key`, to be destroyed; its
    /// slot stays counted in `held`, for the caller to reuse.
    pub(super) fn evict_ready_except(&mut self, key: &Key) -> Option<Box<dyn Sandbox>> {
        let oldest = self
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, b)| &b.key != key)
            .filter_map(|(index, b)| b.ready.front().map(|r| (r.idle_since, index)))
            .min_by_key(|(since, _)| *since)?
            .1;
        self.buckets[oldest]
            .ready
            .pop_front()
            .map(|ready| ready.sandbox)
    }

    pub(super) fn record_acquire(&mut self, took: Duration) {
        if self.acquire_times.len() == 4096 {
            self.acquire_times.pop_front();
        }
        self.acquire_times.push_back(took);
    }
}

/// What the pool's threads and its sandboxes share.
pub(super) struct Shared {
    pub(super) inner: Arc<dyn Backend>,
    pub(super) options: PoolOptions,
    pub(super) state: Mutex<State>,
    /// Signalled whenever a sandbox becomes ready or a slot frees, and on close.
    pub(super) changed: Condvar,
    /// Sandboxes to destroy, off the callers' time.
    pub(super) reaper: Mutex<mpsc::Sender<Box<dyn Sandbox>>>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn destroy(&self, sandbox: Box<dyn Sandbox>) {
        let sender = self.reaper.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(mpsc::SendError(sandbox)) = sender.send(sandbox) {
            // The reaper is gone (the process is ending): destroy it here.
            drop(sandbox);
        }
    }
}

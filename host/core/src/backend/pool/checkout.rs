//! Checkout: how a session gets a sandbox, from a ready one, one opened on its time,
//! or a wait, as `when_exhausted` says. The pool's busiest path, read on its own.

use super::handle::Pool;
use super::key::{Key, Preinstall};
use super::lent::Pooled;
use super::state::Lent;
use super::warm::open_ready;
use crate::backend::{Sandbox, SandboxSpec};
use crate::error::{Error, Result};
use crate::pool_options::Exhausted;
use std::sync::{Arc, Mutex};
use std::time::Instant;

impl Pool {
    /// A sandbox of `spec` with `preinstall`'s libraries installed: a ready one if
    /// there is one (checked first when health checks are on), else one opened (and
    /// its libraries installed) now while the pool has room, else what
    /// [`PoolOptions::when_exhausted`](crate::pool_options::PoolOptions::when_exhausted)
    /// says. [`Backend::open`](crate::backend::Backend::open) is this without libraries.
    pub fn open_with(
        &self,
        spec: &SandboxSpec<'_>,
        preinstall: Option<&Preinstall>,
    ) -> Result<Box<dyn Sandbox>> {
        let started = Instant::now();
        let key = Key::of(spec, preinstall);
        let options = &self.shared.options;
        let mut state = self.shared.lock();
        let index = state.bucket(&key);
        // A key sessions use is kept warm from now on.
        if !state.buckets[index].warm {
            state.buckets[index].warm = true;
            self.shared.changed.notify_all();
        }
        loop {
            if state.closed {
                return Err(self.closed());
            }
            let index = state.bucket(&key);
            if let Some(ready) = state.buckets[index].ready.pop_front() {
                state.in_use += 1;
                drop(state);
                let mut sandbox = ready.sandbox;
                if options.health_check && !healthy(sandbox.as_mut()) {
                    let mut again = self.shared.lock();
                    again.in_use -= 1;
                    again.held -= 1;
                    again.failed_health_checks += 1;
                    drop(again);
                    self.shared.destroy(sandbox);
                    self.shared.changed.notify_all();
                    state = self.shared.lock();
                    continue;
                }
                let mut state = self.shared.lock();
                state.hits += 1;
                state.record_acquire(started.elapsed());
                drop(state);
                return self.lend(sandbox, false);
            }
            // Full, but with sandboxes of other kinds waiting: the oldest of them
            // makes room, rather than a caller waiting behind idle sandboxes.
            let evicted = if state.held >= options.max_size {
                state.evict_ready_except(&key)
            } else {
                None
            };
            if state.held < options.max_size || evicted.is_some() {
                if evicted.is_none() {
                    state.held += 1;
                }
                state.in_use += 1;
                state.misses += 1;
                drop(state);
                if let Some(sandbox) = evicted {
                    self.shared.destroy(sandbox);
                }
                return self.open_now(&key, started, false);
            }
            // A sandbox being warmed holds a slot that no session uses yet: failing
            // fast means every slot is in use, so a caller waits for that warm rather
            // than being refused beside it.
            let warming = state.buckets.iter().any(|b| b.warming > 0);
            match options.when_exhausted {
                Exhausted::FailFast if !warming => {
                    return Err(Error::PoolExhausted {
                        backend: self.shared.inner.name().to_string(),
                        max_size: options.max_size,
                    })
                }
                Exhausted::Overflow => {
                    state.in_use += 1;
                    state.misses += 1;
                    drop(state);
                    return self.open_now(&key, started, true);
                }
                Exhausted::FailFast | Exhausted::Wait => {
                    let elapsed = started.elapsed();
                    if elapsed >= options.acquire_timeout {
                        return Err(Error::PoolTimeout {
                            backend: self.shared.inner.name().to_string(),
                            waited: elapsed,
                        });
                    }
                    state.waiting += 1;
                    state = self
                        .shared
                        .changed
                        .wait_timeout(state, options.acquire_timeout - elapsed)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    state.waiting -= 1;
                }
            }
        }
    }

    /// Opens a sandbox on the caller's time; the slot is already counted.
    fn open_now(&self, key: &Key, started: Instant, extra: bool) -> Result<Box<dyn Sandbox>> {
        match open_ready(self.shared.inner.as_ref(), key) {
            Ok(sandbox) => {
                let mut state = self.shared.lock();
                state.created += 1;
                state.record_acquire(started.elapsed());
                drop(state);
                self.lend(sandbox, extra)
            }
            Err(error) => {
                let mut state = self.shared.lock();
                state.in_use -= 1;
                if !extra {
                    state.held -= 1;
                }
                drop(state);
                self.shared.changed.notify_all();
                Err(error)
            }
        }
    }

    /// Hands `sandbox` to a session; its slot is already counted. A pool closed while
    /// the sandbox was being checked or opened destroys it instead.
    fn lend(&self, sandbox: Box<dyn Sandbox>, extra: bool) -> Result<Box<dyn Sandbox>> {
        let name = sandbox.name();
        let mut state = self.shared.lock();
        if state.closed {
            state.in_use -= 1;
            if !extra {
                state.held -= 1;
            }
            drop(state);
            self.shared.destroy(sandbox);
            self.shared.changed.notify_all();
            return Err(self.closed());
        }
        let lent: Lent = Arc::new(Mutex::new(Some(sandbox)));
        state.lent.retain(|weak| weak.strong_count() > 0);
        state.lent.push(Arc::downgrade(&lent));
        drop(state);
        Ok(Box::new(Pooled {
            lent,
            name,
            extra,
            shared: self.shared.clone(),
        }))
    }
}

/// One request the sandbox must answer: its workspace can be listed.
fn healthy(sandbox: &mut dyn Sandbox) -> bool {
    sandbox.files().list("").is_ok()
}

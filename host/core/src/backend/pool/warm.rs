//! Warming: opening a sandbox ready for its key (libraries installed, kernel started)
//! and the warmer thread that keeps every warm key topped up, off the callers' time.

use super::key::Key;
use super::state::{Ready, Shared};
use crate::backend::{Backend, RunRequest, Sandbox, Workload};
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::sync::Weak;
use std::time::{Duration, Instant};

/// How long installing a key's libraries may take while warming.
const PREINSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Opens a sandbox of `key` and installs its libraries: what every sandbox of the key
/// has before it is handed out.
pub(super) fn open_ready(backend: &dyn Backend, key: &Key) -> Result<Box<dyn Sandbox>> {
    let mut sandbox = backend.open(&key.spec())?;
    if let Some(preinstall) = &key.preinstall {
        let outcome = sandbox.run(RunRequest {
            timeout: PREINSTALL_TIMEOUT,
            ..RunRequest::new(Workload::Plan(&preinstall.plan))
        })?;
        if outcome.exit_code != 0 {
            return Err(Error::PoolWarm {
                backend: backend.name().to_string(),
                reason: format!(
                    "installing {} failed ({}): {}",
                    preinstall.libraries.join(", "),
                    outcome.end,
                    tail(&outcome.stderr)
                ),
            });
        }
    }
    Ok(sandbox)
}

/// The last lines of a command's error output, for an error message.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// [`open_ready`], then an empty cell, off any caller's time: that starts a container's
/// kernel, and brings an in-process interpreter's memory in, so the session's first
/// run costs what a later one does.
fn open_warm(backend: &dyn Backend, key: &Key) -> Result<Box<dyn Sandbox>> {
    let mut sandbox = open_ready(backend, key)?;
    let interprets = key.kernel.is_some()
        || backend
            .capabilities(&key.language)
            .has(crate::backend::Capability::PersistentState);
    if interprets {
        let outcome = sandbox.run(RunRequest::new(Workload::Code("")))?;
        if outcome.exit_code != 0 {
            return Err(Error::PoolWarm {
                backend: backend.name().to_string(),
                reason: format!(
                    "the kernel's first, empty cell exited with {}: {}",
                    outcome.exit_code,
                    tail(&outcome.stderr)
                ),
            });
        }
    }
    Ok(sandbox)
}

/// How long warming a key waits after it failed, before trying again.
const WARM_BACKOFF: Duration = Duration::from_secs(5);

/// The warmer: destroys ready sandboxes past their idle time or lifetime, and opens
/// sandboxes until every warm key has `min_idle` ready, one at a time (opening is
/// CPU-bound, and the sessions need the cores).
pub(super) fn warm_loop(shared: Weak<Shared>) {
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let options = shared.options.clone();
        let mut state = shared.lock();
        if state.closed {
            return;
        }
        let now = Instant::now();
        let mut expired = Vec::new();
        for bucket in &mut state.buckets {
            let mut kept = VecDeque::new();
            for ready in bucket.ready.drain(..) {
                let old = options.max_lifetime.is_some_and(|l| now - ready.born >= l);
                let idle = options
                    .idle_timeout
                    .is_some_and(|l| now - ready.idle_since >= l);
                if old || idle {
                    expired.push(ready.sandbox);
                } else {
                    kept.push_back(ready);
                }
            }
            bucket.ready = kept;
        }
        state.held -= expired.len();
        // A caller waiting for a slot gets the one that frees, not the warmer.
        let job = if state.held < options.max_size && state.waiting == 0 {
            state.buckets.iter().position(|b| {
                b.warm
                    && b.ready.len() + b.warming < options.min_idle
                    && b.backoff_until.is_none_or(|t| now >= t)
            })
        } else {
            None
        };
        let Some(index) = job else {
            let next_backoff = state
                .buckets
                .iter()
                .filter_map(|b| b.backoff_until)
                .filter(|t| *t > now)
                .min()
                .map(|t| t.saturating_duration_since(now));
            let wait = next_backoff
                .unwrap_or(Duration::from_secs(1))
                .clamp(Duration::from_millis(10), Duration::from_secs(1));
            drop(
                shared
                    .changed
                    .wait_timeout(state, wait)
                    .unwrap_or_else(|e| e.into_inner()),
            );
            for sandbox in expired {
                shared.destroy(sandbox);
            }
            continue;
        };
        state.held += 1;
        state.buckets[index].warming += 1;
        let key = state.buckets[index].key.clone();
        drop(state);
        for sandbox in expired {
            shared.destroy(sandbox);
        }
        let opened = open_warm(shared.inner.as_ref(), &key);
        let mut state = shared.lock();
        let index = state.bucket(&key);
        state.buckets[index].warming -= 1;
        match opened {
            Ok(sandbox) if !state.closed => {
                state.created += 1;
                state.buckets[index].backoff_until = None;
                let now = Instant::now();
                state.buckets[index].ready.push_back(Ready {
                    sandbox,
                    born: now,
                    idle_since: now,
                });
            }
            Ok(sandbox) => {
                state.created += 1;
                state.held -= 1;
                drop(state);
                shared.destroy(sandbox);
                shared.changed.notify_all();
                return;
            }
            Err(error) => {
                state.held -= 1;
                state.failed_warms += 1;
                state.last_warm_error = Some(error.to_string());
                state.buckets[index].backoff_until = Some(Instant::now() + WARM_BACKOFF);
            }
        }
        drop(state);
        shared.changed.notify_all();
    }
}

//! The sweep: a background thread that ends sessions past their idle timeout or
//! lifetime, and pauses idle ones.

use super::entry::{Entry, Slot};
use super::ids::SessionId;
use super::info::Ended;
use super::table::Inner;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often expired sessions are looked for.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// Starts the thread that sweeps `inner` until the manager shuts down or is gone.
pub(super) fn start(inner: &Arc<Inner>) {
    let (weak, stop) = (Arc::downgrade(inner), inner.sweeper.clone());
    let spawned = std::thread::Builder::new()
        .name("sandlot-sessions".into())
        .spawn(move || sweep_until_gone(weak, stop));
    if let Err(e) = spawned {
        // Without the thread nothing expires; the server still works, and says so.
        eprintln!("sandlot: cannot start the session sweeper ({e}); sessions will not expire");
    }
}

impl Inner {
    /// Closes sessions past their idle timeout or lifetime. A session in the middle of
    /// a run is not idle.
    pub(super) fn sweep(self: &Arc<Self>) {
        let now = Instant::now();
        let expired: Vec<(SessionId, Ended)> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter_map(|entry| {
                if now.duration_since(entry.opened) >= self.settings.max_lifetime {
                    return Some((entry.id.clone(), Ended::Lifetime));
                }
                let busy = matches!(
                    entry.session.try_lock(),
                    Err(std::sync::TryLockError::WouldBlock)
                );
                let last = *entry.last_used.lock().unwrap_or_else(|e| e.into_inner());
                (!busy && now.duration_since(last) >= self.settings.idle_timeout)
                    .then(|| (entry.id.clone(), Ended::Idle))
            })
            .collect();
        if let Some(pause_after) = self.settings.pause_after {
            let idle: Vec<Arc<Entry>> = self
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .filter(|entry| {
                    let last = *entry.last_used.lock().unwrap_or_else(|e| e.into_inner());
                    entry.pausable.load(Ordering::Relaxed)
                        && now.duration_since(last) >= pause_after
                        && matches!(entry.session.try_lock().as_deref(), Ok(Slot::Live(_)))
                })
                .cloned()
                .collect();
            for entry in idle {
                let inner = self.clone();
                let spawned = std::thread::Builder::new()
                    .name("sandlot-pause".into())
                    .spawn(move || inner.pause(&entry, false));
                if spawned.is_err() {
                    // No thread to spare: the next sweep tries again.
                    break;
                }
            }
        }
        for (id, why) in expired {
            // Each on its own: a session past its lifetime in the middle of a run
            // ends after the run, and must not hold up the others.
            let inner = self.clone();
            let spawned = std::thread::Builder::new()
                .name("sandlot-expire".into())
                .spawn(move || inner.end(&id, why));
            if spawned.is_err() {
                // No thread to spare: the next sweep tries again.
                continue;
            }
        }
    }
}

/// The sweeper's loop: ends when the manager shuts down or is gone. It holds the
/// manager only while it sweeps, so that the last handle's drop closes the sessions
/// on the caller's thread.
fn sweep_until_gone(inner: Weak<Inner>, stop: Arc<(Mutex<bool>, Condvar)>) {
    loop {
        {
            let (stopped, wake) = &*stop;
            let stopped = stopped.lock().unwrap_or_else(|e| e.into_inner());
            let (stopped, _) = wake
                .wait_timeout_while(stopped, SWEEP_EVERY, |stopped| !*stopped)
                .unwrap_or_else(|e| e.into_inner());
            if *stopped {
                return;
            }
        }
        match inner.upgrade() {
            Some(inner) => inner.sweep(),
            None => return,
        }
    }
}

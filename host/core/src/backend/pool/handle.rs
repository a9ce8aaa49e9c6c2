//! The pool itself: the handle sessions and builders hold, how it starts its threads,
//! and how it stands in for the backend it wraps.

use super::close::{close, Owner};
use super::key::{Key, Preinstall};
use super::state::{Shared, State};
use super::warm::warm_loop;
use crate::backend::{Backend, BackendName, Capabilities, Needs, Sandbox, SandboxSpec, Unsuitable};
use crate::error::{Error, Result};
use crate::policy::Policy;
use crate::pool_options::PoolOptions;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A pool of pre-warmed sandboxes over a backend. Cheap to clone; every clone is the
/// same pool, usable from any thread. See the [module documentation](super).
#[derive(Clone)]
pub struct Pool {
    pub(super) shared: Arc<Shared>,
    _owner: Arc<Owner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("backend", &self.shared.inner.name())
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool over `backend`. Starts its two threads (one warms, one destroys); holds
    /// nothing until a key is warmed or opened.
    pub fn new(backend: Arc<dyn Backend>, options: PoolOptions) -> Result<Pool> {
        if let Some(reason) = options.problem() {
            return Err(Error::InvalidPool { reason });
        }
        let (sender, receiver) = mpsc::channel::<Box<dyn Sandbox>>();
        let shared = Arc::new(Shared {
            inner: backend,
            options,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            reaper: Mutex::new(sender),
        });
        let reaper = Arc::downgrade(&shared);
        spawn("sandlot-pool-reaper", move || {
            for sandbox in receiver {
                drop(sandbox);
                match reaper.upgrade() {
                    Some(shared) => {
                        shared.lock().destroyed += 1;
                        shared.changed.notify_all();
                    }
                    None => continue,
                }
            }
        })?;
        let warmer = Arc::downgrade(&shared);
        spawn("sandlot-pool-warmer", move || warm_loop(warmer))?;
        Ok(Pool {
            _owner: Arc::new(Owner(shared.clone())),
            shared,
        })
    }

    /// The backend it pools.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.shared.inner
    }

    /// Its options.
    pub fn options(&self) -> &PoolOptions {
        &self.shared.options
    }

    /// Keeps [`PoolOptions::min_idle`] sandboxes of `spec` ready from now on, and
    /// waits until the first of them is (so a session opened next starts warm), or
    /// until opening one failed.
    pub fn warm(&self, spec: &SandboxSpec<'_>) -> Result<()> {
        self.warm_with(spec, None)
    }

    /// [`Pool::warm`] for sandboxes that also have `preinstall`'s libraries installed
    /// before they are handed out.
    pub fn warm_with(&self, spec: &SandboxSpec<'_>, preinstall: Option<&Preinstall>) -> Result<()> {
        let key = Key::of(spec, preinstall);
        let mut state = self.shared.lock();
        if state.closed {
            return Err(self.closed());
        }
        let index = state.bucket(&key);
        state.buckets[index].warm = true;
        let failures = state.failed_warms;
        self.shared.changed.notify_all();
        if self.shared.options.min_idle == 0 {
            return Ok(());
        }
        let deadline = Instant::now() + self.shared.options.acquire_timeout.max(WARM_WAIT);
        loop {
            let index = state.bucket(&key);
            if state.closed {
                return Err(self.closed());
            }
            if !state.buckets[index].ready.is_empty() {
                return Ok(());
            }
            if state.failed_warms > failures {
                return Err(Error::PoolWarm {
                    backend: self.shared.inner.name().to_string(),
                    reason: state.last_warm_error.clone().unwrap_or_default(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::PoolTimeout {
                    backend: self.shared.inner.name().to_string(),
                    waited: now.duration_since(deadline) + WARM_WAIT,
                });
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Closes the pool: no more sandboxes are handed out; sessions in use get until
    /// `deadline` to end, then their sandboxes are taken from them (their next run
    /// says the pool was closed); every sandbox the pool made is destroyed before this
    /// returns.
    pub fn close(&self, deadline: Duration) {
        close(&self.shared, deadline);
    }

    pub(super) fn closed(&self) -> Error {
        Error::PoolClosed {
            backend: self.shared.inner.name().to_string(),
        }
    }
}

/// How long [`Pool::warm`] waits at least for its first sandbox.
const WARM_WAIT: Duration = Duration::from_secs(120);

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map(|_| ())
        .map_err(|e| Error::Io {
            context: format!("cannot start the pool's {name} thread"),
            source: e,
        })
}

impl Backend for Pool {
    fn name(&self) -> BackendName {
        self.shared.inner.name()
    }

    fn capabilities(&self, language: &str) -> Capabilities {
        self.shared.inner.capabilities(language)
    }

    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
        self.shared.inner.supports(needs)
    }

    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        self.open_with(spec, None)
    }

    fn unenforced(&self, policy: &Policy) -> Vec<crate::policy::PolicyField> {
        self.shared.inner.unenforced(policy)
    }

    fn workspace_in_memory(&self) -> bool {
        self.shared.inner.workspace_in_memory()
    }

    fn checks(&self) -> Vec<crate::backend::Check> {
        self.shared.inner.checks()
    }

    fn toolchain(
        &self,
        language: &str,
        image: &str,
    ) -> Result<Option<crate::toolchain::Toolchain>> {
        self.shared.inner.toolchain(language, image)
    }
}

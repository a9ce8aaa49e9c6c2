//! Pools of pre-warmed sandboxes: sessions start at once, and state never passes from
//! one session to the next.
//!
//! A [`Pool`] wraps any [`Backend`] and is one itself, so a pooled session takes the
//! same code path as any other: [`crate::SandlotBuilder::pool`] puts a pool in place of
//! a backend, and every session opened on that backend name draws from it. Sandboxes
//! are kept per [`SandboxSpec`] (language, image, policy, memory, kernel): the key. A
//! key is kept warm once [`Pool::warm`] names it, or once a session first opens it.
//!
//! **One sandbox per session.** A sandbox handed out is never handed out again: when
//! its session ends, the sandbox is destroyed on a thread of the pool (never on the
//! caller's time), and a fresh one is warmed to replace it. Warming opens the sandbox
//! and, where the spec has a kernel, starts it with an empty cell, so the first run of
//! a pooled session is as fast as a later one.
//!
//! ```no_run
//! use sandlot::backend::pool::{Exhausted, PoolOptions};
//! use std::time::Duration;
//! # fn main() -> Result<(), sandlot::Error> {
//! let plugins = sandlot::PluginHost::builder().load()?;
//! let sandlot = sandlot::builder(plugins)
//!     .pool("docker", PoolOptions {
//!         min_idle: 2,
//!         max_size: 4,
//!         when_exhausted: Exhausted::Wait,
//!         acquire_timeout: Duration::from_secs(10),
//!         ..PoolOptions::default()
//!     })
//!     .build()?;
//! sandlot.session("python").backend("docker").warm()?;
//! let mut session = sandlot.session("python").backend("docker").open()?;
//! assert_eq!(session.run("print(1)")?.stdout_text(), "1\n");
//! # Ok(())
//! # }
//! ```

use super::{
    Backend, BackendName, Capabilities, Needs, Outcome, RunRequest, Sandbox, SandboxFiles,
    SandboxSpec, Unsuitable, Workload,
};
use crate::artifact::FileScan;
use crate::error::{Error, Result};
use crate::language::{KernelSpec, Plan};
use crate::policy::Policy;
pub use crate::pool_options::{Exhausted, PoolOptions};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

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

/// Libraries every sandbox of a key has before it is handed out, and the plan that
/// installs them (from the language handler's `install`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preinstall {
    /// The libraries, as the session names them.
    pub libraries: Vec<String>,
    /// The commands that install them in a fresh sandbox.
    pub plan: Plan,
}

/// How long installing a key's libraries may take while warming.
const PREINSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// A [`SandboxSpec`] the pool owns, and what is installed beforehand: what one sandbox
/// is fixed to, the key.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    language: String,
    image: String,
    policy: Policy,
    memory: usize,
    kernel: Option<KernelSpec>,
    preinstall: Option<Preinstall>,
}

impl Key {
    fn of(spec: &SandboxSpec<'_>, preinstall: Option<&Preinstall>) -> Key {
        Key {
            language: spec.language.to_string(),
            image: spec.image.to_string(),
            policy: spec.policy.clone(),
            memory: spec.memory,
            kernel: spec.kernel.cloned(),
            preinstall: preinstall.cloned(),
        }
    }

    fn spec(&self) -> SandboxSpec<'_> {
        SandboxSpec::new(&self.language, &self.image, &self.policy, self.memory)
            .with_kernel(self.kernel.as_ref())
    }
}

/// A sandbox ready to hand out.
struct Ready {
    sandbox: Box<dyn Sandbox>,
    born: Instant,
    idle_since: Instant,
}

/// The sandboxes of one key.
struct Bucket {
    key: Key,
    ready: VecDeque<Ready>,
    warming: usize,
    /// Whether the pool keeps `min_idle` ready for it.
    warm: bool,
    /// Until when warming waits after a failure, so a broken key does not spin.
    backoff_until: Option<Instant>,
}

/// A sandbox handed out: shared with the pool so that closing it can take the sandbox
/// from a session that outlives the close deadline.
type Lent = Arc<LentSlot>;
type LentSlot = Mutex<Option<Box<dyn Sandbox>>>;

#[derive(Default)]
struct State {
    buckets: Vec<Bucket>,
    /// In use, ready and warming, extras not counted.
    held: usize,
    in_use: usize,
    waiting: usize,
    closed: bool,
    created: u64,
    destroyed: u64,
    failed_health_checks: u64,
    failed_warms: u64,
    last_warm_error: Option<String>,
    hits: u64,
    misses: u64,
    acquire_times: VecDeque<Duration>,
    lent: Vec<Weak<LentSlot>>,
}

impl State {
    fn bucket(&mut self, key: &Key) -> usize {
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
    fn evict_ready_except(&mut self, key: &Key) -> Option<Box<dyn Sandbox>> {
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

    fn record_acquire(&mut self, took: Duration) {
        if self.acquire_times.len() == 4096 {
            self.acquire_times.pop_front();
        }
        self.acquire_times.push_back(took);
    }
}

/// What the pool's threads and its sandboxes share.
struct Shared {
    inner: Arc<dyn Backend>,
    options: PoolOptions,
    state: Mutex<State>,
    /// Signalled whenever a sandbox becomes ready or a slot frees, and on close.
    changed: Condvar,
    /// Sandboxes to destroy, off the callers' time.
    reaper: Mutex<mpsc::Sender<Box<dyn Sandbox>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn destroy(&self, sandbox: Box<dyn Sandbox>) {
        let sender = self.reaper.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(mpsc::SendError(sandbox)) = sender.send(sandbox) {
            // The reaper is gone (the process is ending): destroy it here.
            drop(sandbox);
        }
    }
}

/// Ends the pool when the last [`Pool`] handle is dropped.
struct Owner(Arc<Shared>);

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

/// A pool of pre-warmed sandboxes over a backend. Cheap to clone; every clone is the
/// same pool, usable from any thread. See the [module documentation](self).
#[derive(Clone)]
pub struct Pool {
    shared: Arc<Shared>,
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

    /// Closes the pool: no more sandboxes are handed out; sessions in use get until
    /// `deadline` to end, then their sandboxes are taken from them (their next run
    /// says the pool was closed); every sandbox the pool made is destroyed before this
    /// returns.
    pub fn close(&self, deadline: Duration) {
        close(&self.shared, deadline);
    }

    fn closed(&self) -> Error {
        Error::PoolClosed {
            backend: self.shared.inner.name().to_string(),
        }
    }

    /// A sandbox of `spec` with `preinstall`'s libraries installed: a ready one if
    /// there is one (checked first when health checks are on), else one opened (and
    /// its libraries installed) now while the pool has room, else what
    /// [`PoolOptions::when_exhausted`] says. [`Backend::open`] is this without
    /// libraries.
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

/// One request the sandbox must answer: its workspace can be listed.
fn healthy(sandbox: &mut dyn Sandbox) -> bool {
    sandbox.files().list("").is_ok()
}

/// Opens a sandbox of `key` and installs its libraries: what every sandbox of the key
/// has before it is handed out.
fn open_ready(backend: &dyn Backend, key: &Key) -> Result<Box<dyn Sandbox>> {
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
            .has(super::Capability::PersistentState);
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
fn warm_loop(shared: Weak<Shared>) {
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

/// Closes `shared`: refuses new acquires, waits for sessions in use until `deadline`,
/// then takes their sandboxes, and destroys everything.
fn close(shared: &Arc<Shared>, deadline: Duration) {
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

/// A sandbox lent to a session. Dropped, it goes back to the pool to be destroyed.
struct Pooled {
    lent: Lent,
    name: String,
    extra: bool,
    shared: Arc<Shared>,
}

impl Pooled {
    fn with<T>(&mut self, f: impl FnOnce(&mut dyn Sandbox) -> Result<T>) -> Result<T> {
        let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
        match lent.as_mut() {
            Some(sandbox) => f(sandbox.as_mut()),
            None => Err(Error::PoolClosed {
                backend: self.shared.inner.name().to_string(),
            }),
        }
    }
}

impl Sandbox for Pooled {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        match self.with(|sandbox| sandbox.run(request)) {
            Err(Error::PoolClosed { .. }) => Ok(Outcome::lost(
                "the pool was closed and took this session's sandbox",
            )),
            other => other,
        }
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        self
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

impl SandboxFiles for Pooled {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.with(|s| s.files().write(path, data))
    }
    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with(|s| s.files().read(path, max))
    }
    fn list(&mut self, path: &str) -> Result<Vec<super::DirEntry>> {
        self.with(|s| s.files().list(path))
    }
    fn scan(&mut self, path: &str) -> Result<FileScan> {
        self.with(|s| s.files().scan(path))
    }
    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with(|s| s.files().pack(path, max))
    }
    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        self.with(|s| s.files().unpack(path, archive))
    }
    fn clear(&mut self, path: &str) -> Result<()> {
        self.with(|s| s.files().clear(path))
    }
    fn stat(&mut self, path: &str) -> Result<super::FileInfo> {
        self.with(|s| s.files().stat(path))
    }
    fn make_dir(&mut self, path: &str) -> Result<bool> {
        self.with(|s| s.files().make_dir(path))
    }
    fn remove(&mut self, path: &str) -> Result<()> {
        self.with(|s| s.files().remove(path))
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        self.with(|s| s.files().rename(from, to))
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let taken = self.lent.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut state = self.shared.lock();
        state.in_use -= 1;
        if !self.extra {
            state.held -= 1;
        }
        drop(state);
        if let Some(sandbox) = taken {
            self.shared.destroy(sandbox);
        }
        // A slot is free: a waiter may open, the warmer may replace.
        self.shared.changed.notify_all();
    }
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

    fn checks(&self) -> Vec<super::Check> {
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

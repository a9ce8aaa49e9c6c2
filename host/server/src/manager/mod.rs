//! Named sessions for long-lived front ends (the MCP server, the HTTP API): each owned
//! by a client, closed when it has been idle too long, when it reaches its maximum
//! lifetime, when its client goes away, or when the manager shuts down. The policy and
//! limits come from the server's configuration; a client may tighten them, never loosen
//! them.
//!
//! ```no_run
//! use sandlot::server::manager::{ClientId, ManagerSettings, SessionManager};
//! use sandlot::server::service::{OpenRequest, Service};
//! # fn main() -> Result<(), sandlot::Error> {
//! let manager = SessionManager::new(Service::from_environment(sandlot::providers())?, ManagerSettings::default())?;
//! let client = ClientId::new("agent-7");
//! let opened = manager.open(&client, OpenRequest::new("python"))?;
//! manager.run(&client, &opened.id, "x = 6 * 7", Default::default())?;
//! let run = manager.run(&client, &opened.id, "print(x)", Default::default())?;
//! assert_eq!(run.stdout_text(), "42\n");
//! manager.close(&client, &opened.id)?;
//! # Ok(())
//! # }
//! ```

mod store;

pub use store::{SnapshotId, SnapshotInfo};

use crate::service::{OpenRequest, Service};
use sandlot_core::backend::BackendName;
use sandlot_core::error::{Error, Result};
use sandlot_core::execution::Execution;
use sandlot_core::policy::Policy;
use sandlot_core::secret::Masker;
use sandlot_core::session::{Limits, RunOptions, Session};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};
use store::{PausedRecord, Store};

/// How often expired sessions are looked for.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// How many ended sessions are remembered, so that a late call on one says why it
/// ended instead of only that it is unknown.
const REMEMBERED_ENDS: usize = 1024;

/// Who owns sessions: an MCP connection, an HTTP API token. A client sees and uses
/// only its own sessions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ClientId(String);

impl ClientId {
    /// The client called `name`.
    pub fn new(name: impl Into<String>) -> ClientId {
        ClientId(name.into())
    }

    /// A client of its own, for a connection that has no name (an MCP connection).
    pub fn unique(prefix: &str) -> ClientId {
        ClientId(format!(
            "{prefix}-{}",
            sandlot_core::backend::owner::sandbox_id()
        ))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A session's name as clients pass it back: `s-` and 32 hexadecimal digits, from
/// randomly keyed hashes, so that one client cannot guess another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    fn fresh() -> SessionId {
        let (a, b) = (
            sandlot_core::backend::owner::sandbox_id(),
            sandlot_core::backend::owner::sandbox_id(),
        );
        SessionId(format!("s-{a}{b}"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SessionId {
    fn from(id: &str) -> SessionId {
        SessionId(id.to_string())
    }
}

impl From<String> for SessionId {
    fn from(id: String) -> SessionId {
        SessionId(id)
    }
}

/// How a [`SessionManager`] treats sessions.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ManagerSettings {
    /// A session nobody has used for this long is closed (default 10 min).
    pub idle_timeout: Duration,
    /// A session is closed this long after it opened, used or not (default 1 h).
    pub max_lifetime: Duration,
    /// Most sessions one client may have open at once (default 8).
    pub max_per_client: usize,
    /// Most sessions open at once, over all clients (default 64).
    pub max_sessions: usize,
    /// The policy of every session; a client may ask for a stricter one (default: the
    /// configuration's `[policy]`, else [`Policy::default`]).
    pub policy: Option<Policy>,
    /// The limits of every session; a client may ask for lower ones.
    pub limits: Limits,
    /// Secrets every session gets, on top of those its client sends: the operator's
    /// keys reach the code, never the client (their values are masked).
    pub secrets: Vec<sandlot_core::secret::Secret>,
    /// Fields of the policy a session's backend may leave unenforced. A session
    /// whose backend cannot apply any other field is refused: the server's policy
    /// would be a label nobody enforces (default: none).
    pub accept_unenforced: Vec<sandlot_core::PolicyField>,
    /// Tools every session gets: functions of the server (or of the upstream MCP
    /// servers of `sandlot mcp`'s code mode) that its code may call, under the
    /// limits' `tools` (default: none).
    pub tools: sandlot_core::tool::ToolSet,
    /// A session idle for this long is paused: its state goes to disk and its sandbox
    /// is released; its next call resumes it where it was. Only sessions whose
    /// backend captures the interpreter's memory are paused (the others stay open
    /// until their idle timeout). Default: never.
    pub pause_after: Option<Duration>,
    /// Where snapshots and paused sessions are kept. With it, paused sessions and
    /// stored snapshots survive a restart of the server, and a shutdown pauses the
    /// sessions it can instead of closing them. Default: none (a private temporary
    /// directory, gone with the server).
    pub state_dir: Option<PathBuf>,
    /// Most bytes the snapshots and paused sessions may take on disk (default 8 GiB).
    pub max_stored_bytes: u64,
    /// Most bytes of the host's memory the open sessions may hold in all, each
    /// counted at the most it may hold ([`Session::memory_bound`]): its memory limit,
    /// and its workspace where that is memory no limit of its counts (the wasm
    /// backend's). An open, restore, fork or resume past it is refused until a
    /// session closes or pauses (default: the machine's physical memory).
    pub memory_budget: Option<u64>,
    /// Most bytes of those one client's may take, its uploads under way included:
    /// one client that fills its share leaves the rest to the others (default: a
    /// quarter of [`ManagerSettings::max_stored_bytes`]).
    pub max_stored_bytes_per_client: Option<u64>,
}

impl Default for ManagerSettings {
    fn default() -> Self {
        ManagerSettings {
            idle_timeout: Duration::from_secs(600),
            max_lifetime: Duration::from_secs(3600),
            max_per_client: 8,
            max_sessions: 64,
            policy: None,
            limits: Limits::default(),
            secrets: Vec::new(),
            accept_unenforced: Vec::new(),
            tools: sandlot_core::tool::ToolSet::new(),
            pause_after: None,
            state_dir: None,
            max_stored_bytes: 8 << 30,
            max_stored_bytes_per_client: None,
            memory_budget: None,
        }
    }
}

impl ManagerSettings {
    /// Sessions close after `idle` without use.
    pub fn idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// Sessions close `lifetime` after they opened.
    pub fn max_lifetime(mut self, lifetime: Duration) -> Self {
        self.max_lifetime = lifetime;
        self
    }

    /// At most `count` sessions per client.
    pub fn max_per_client(mut self, count: usize) -> Self {
        self.max_per_client = count;
        self
    }

    /// At most `count` sessions in all.
    pub fn max_sessions(mut self, count: usize) -> Self {
        self.max_sessions = count;
        self
    }

    /// The policy clients may tighten.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The limits clients may lower.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Every session gets `secrets` (see [`ManagerSettings::secrets`]).
    pub fn secrets(mut self, secrets: Vec<sandlot_core::secret::Secret>) -> Self {
        self.secrets = secrets;
        self
    }

    /// Sessions may run on backends that leave `fields` of the policy unenforced
    /// (see [`ManagerSettings::accept_unenforced`]).
    pub fn accept_unenforced(
        mut self,
        fields: impl IntoIterator<Item = sandlot_core::PolicyField>,
    ) -> Self {
        self.accept_unenforced = fields.into_iter().collect();
        self
    }

    /// Every session gets `tools`.
    pub fn tools(mut self, tools: sandlot_core::tool::ToolSet) -> Self {
        self.tools = tools;
        self
    }

    /// Sessions idle for `idle` are paused (see [`ManagerSettings::pause_after`]).
    pub fn pause_after(mut self, idle: Duration) -> Self {
        self.pause_after = Some(idle);
        self
    }

    /// Snapshots and paused sessions are kept in `dir`, across restarts.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// At most `bytes` of snapshots and paused sessions on disk.
    pub fn max_stored_bytes(mut self, bytes: u64) -> Self {
        self.max_stored_bytes = bytes;
        self
    }

    /// At most `bytes` of them per client.
    pub fn max_stored_bytes_per_client(mut self, bytes: u64) -> Self {
        self.max_stored_bytes_per_client = Some(bytes);
        self
    }

    /// The open sessions hold at most `bytes` of the host's memory in all (see
    /// [`ManagerSettings::memory_budget`]).
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// The memory budget in force: its own setting, or the machine's physical memory.
    pub fn budget(&self) -> u64 {
        self.memory_budget.unwrap_or_else(physical_memory)
    }

    /// What one client's snapshots and paused sessions may take: its own setting, or
    /// a quarter of the store's.
    pub fn client_share(&self) -> u64 {
        self.max_stored_bytes_per_client
            .unwrap_or(self.max_stored_bytes / 4)
            .min(self.max_stored_bytes)
    }
}

/// An open session, as its client sees it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[non_exhaustive]
pub struct SessionInfo {
    /// The name to pass back.
    pub id: SessionId,
    /// The language id.
    pub language: String,
    /// The backend it runs on.
    #[schemars(with = "String")]
    pub backend: BackendName,
    /// What it runs the code with there, e.g. `CPython 3.11.2`; `None` where the
    /// backend cannot tell.
    pub runs_with: Option<String>,
    /// Whether variables persist from one run to the next.
    pub persistent: bool,
    /// Seconds since it opened.
    pub age_seconds: f64,
    /// Seconds since it was last used.
    pub idle_seconds: f64,
    /// Seconds of idleness after which it closes.
    pub idle_timeout_seconds: f64,
    /// Whether it is paused: its state is on disk and its next call resumes it.
    pub paused: bool,
}

/// What a client of a server may ask of a session, as the MCP tools and the HTTP API
/// take it: everything but the language may be left to the server.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Ask {
    /// Language id or alias.
    pub language: String,
    /// `auto` or a backend's name.
    #[serde(default)]
    pub backend: Option<String>,
    /// Libraries every run needs.
    #[serde(default)]
    pub libraries: Vec<String>,
    /// Network access, at most the server's.
    #[serde(default)]
    pub network: Option<sandlot_core::Network>,
    /// Time limit of a run in seconds, at most the server's.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// Memory cap in MiB, at most the server's.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Secrets by name: every run gets them as environment variables, and their
    /// values are masked (`***`) in output and files returned.
    #[serde(default)]
    pub secrets: sandlot_core::secret::SecretValues,
}

impl Ask {
    /// Asks for a session of `language`, the rest left to the server.
    pub fn new(language: &str) -> Ask {
        Ask {
            language: language.to_string(),
            ..Ask::default()
        }
    }
}

/// `value` seconds as a duration: a positive number, or an error naming `field`.
pub fn seconds(field: &str, value: Option<f64>) -> Result<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(Error::InvalidRequest {
            reason: format!("{field} must be a positive number of seconds, not {s}"),
        }),
    }
}

/// Why a session ended, for the message of a late call on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Ended {
    /// Its client closed it.
    Closed,
    /// Nobody used it for the idle timeout.
    Idle,
    /// It reached its maximum lifetime.
    Lifetime,
    /// Its client went away.
    ClientGone,
    /// The manager shut down.
    Shutdown,
    /// It was paused, and its state could not be taken back.
    Unresumable,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ended::Closed => "it was closed",
            Ended::Idle => "it was idle for longer than the idle timeout",
            Ended::Lifetime => "it reached its maximum lifetime",
            Ended::ClientGone => "its client went away",
            Ended::Shutdown => "the server shut down",
            Ended::Unresumable => "it was paused, and its state could not be taken back",
        })
    }
}

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
    /// The memory budget ([`ManagerSettings::memory_budget`]).
    pub memory_budget: u64,
}

/// Named sessions shared by a server's connections. Cheap to clone; every clone is
/// the same manager. Its calls block (a run takes as long as the code runs): async
/// servers call them through `spawn_blocking`.
#[derive(Clone)]
pub struct SessionManager {
    inner: Arc<Inner>,
}

impl fmt::Debug for SessionManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionManager")
            .field("settings", &self.inner.settings)
            .field("open", &self.inner.sessions.lock().map(|s| s.len()).ok())
            .finish_non_exhaustive()
    }
}

struct Inner {
    service: RwLock<Service>,
    settings: ManagerSettings,
    policy: Policy,
    sessions: Mutex<HashMap<SessionId, Arc<Entry>>>,
    /// Opens and closes in progress; locked after `sessions` when both are.
    pending: Mutex<Pending>,
    /// Signalled when `pending.in_flight` drops.
    settled: Condvar,
    ended: Mutex<VecDeque<(SessionId, ClientId, Ended)>>,
    shut: AtomicBool,
    /// Set (and signalled) when the sweeper should stop.
    sweeper: Arc<(Mutex<bool>, Condvar)>,
    counters: Counters,
    /// Snapshots clients took, and paused sessions.
    store: Store,
}

/// What is on its way in or out.
#[derive(Default)]
struct Pending {
    /// Opens in progress per client: they count against the limits.
    opening: HashMap<ClientId, usize>,
    /// Opens and closes in progress, which a shutdown waits for.
    in_flight: usize,
    /// Bytes of the memory budget that opens, restores, forks and resumes in progress
    /// hold.
    memory: u64,
    /// Clients that went away: an open of theirs that ends after is closed at once.
    gone: VecDeque<ClientId>,
}

/// How many gone clients are remembered.
const REMEMBERED_GONE: usize = 4096;

/// How long a shutdown waits for opens and closes in progress (a Kubernetes pod may
/// take its start timeout to come up, then to be deleted).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(300);

/// The machine's physical memory, in bytes (`u64::MAX` where it cannot be read).
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
        .unwrap_or(u64::MAX)
}

/// What the open `sessions` and the opens in progress (`pending`) may hold of the
/// host's memory.
fn memory_held(sessions: &HashMap<SessionId, Arc<Entry>>, pending: &Pending) -> u64 {
    sessions
        .values()
        .map(|e| e.memory.load(Ordering::Relaxed))
        .fold(pending.memory, u64::saturating_add)
}

/// What a session of `request` may hold of the host's memory before its backend is
/// known: its memory limit and its workspace, as on the backend that counts most.
fn bound_of(request: &OpenRequest) -> u64 {
    match request.limits.memory {
        0 => u64::MAX,
        memory => (memory as u64).saturating_add(request.policy.workdir_size),
    }
}

/// One open or close in progress; its end is counted when it drops.
struct InFlight<'a> {
    inner: &'a Inner,
    opening: Option<ClientId>,
    /// Bytes of the memory budget it holds until the session it opens is counted.
    memory: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = &self.opening {
            if let Some(count) = pending.opening.get_mut(client) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    pending.opening.remove(client);
                }
            }
        }
        pending.in_flight = pending.in_flight.saturating_sub(1);
        pending.memory = pending.memory.saturating_sub(self.memory);
        self.inner.settled.notify_all();
    }
}

#[derive(Default)]
struct Counters {
    opened: AtomicU64,
    open_failures: AtomicU64,
    closed: AtomicU64,
    expired: AtomicU64,
    runs: AtomicU64,
    run_failures: AtomicU64,
    run_micros: AtomicU64,
    tool_calls: AtomicU64,
    tool_call_failures: AtomicU64,
}

struct Entry {
    id: SessionId,
    client: ClientId,
    language: String,
    backend: BackendName,
    runs_with: Option<String>,
    persistent: bool,
    opened: Instant,
    /// `opened` on the wall clock, which a record on disk keeps across a restart.
    opened_wall: SystemTime,
    last_used: Mutex<Instant>,
    /// What it was opened with: a resume opens its sandbox again with it.
    request: OpenRequest,
    /// What masks its secrets (the server's and its client's) in what the front
    /// ends build for its client.
    masker: Masker,
    /// What its client asked, where the session was opened from an [`Ask`]: what a
    /// server after a restart rebuilds the request from. A session without one is
    /// not kept across a restart.
    ask: Option<Ask>,
    /// Whether it may be paused: its backend captures the interpreter's memory, and
    /// no pause of it has failed.
    pausable: AtomicBool,
    /// The most of the host's memory its sandbox may hold, live.
    bound: AtomicU64,
    /// What of the memory budget it holds now: `bound` while its sandbox is live,
    /// nothing while it is paused.
    memory: AtomicU64,
    /// Held for the length of a run, so runs of one session take turns.
    session: Mutex<Slot>,
    /// Callers waiting for `session` or holding it: each holds a thread of the
    /// server's blocking pool while it waits, so they are capped ([`MAX_WAITING`]).
    waiting: AtomicUsize,
    /// Set when the session is being ended: callers that get their turn after it
    /// find it ended instead of running first.
    ending: AtomicBool,
    /// The interrupt of the run or command under way, which closing the session
    /// triggers.
    running: Mutex<Option<sandlot_core::Interrupt>>,
}

/// The most callers one session has waiting for their turn (and the one whose turn
/// it is): more are refused. Runs of a session take turns and may each take the
/// server's whole time limit; without a cap one client's burst of requests to one
/// session would hold every thread of the blocking pool that all sessions share.
const MAX_WAITING: usize = 8;

/// A caller's place in a session's queue, given back when dropped.
struct Turn<'a>(&'a AtomicUsize);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Room in the store held for a snapshot being received ([`SessionManager::incoming`]).
pub struct Incoming {
    inner: Arc<Inner>,
    client: ClientId,
    bytes: u64,
}

impl Incoming {
    /// Takes `bytes` more of the store's room, or says it is full
    /// ([`Error::StoreFull`]) or the client's share is ([`Error::StoreShareFull`]).
    pub fn take(&mut self, bytes: u64) -> Result<()> {
        self.inner.store.take_room(self.client.as_str(), bytes)?;
        self.bytes += bytes;
        Ok(())
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.inner.store.release(self.client.as_str(), self.bytes);
    }
}

/// Where a session's state is.
enum Slot {
    /// In its sandbox (boxed: a session is large, and most slots of a busy server
    /// hold one anyway; the box keeps a paused one small).
    Live(Box<Session>),
    /// In the store, its sandbox released.
    Paused,
    /// Nowhere: it ended.
    Ended,
}

impl Entry {
    fn info(&self, idle_timeout: Duration) -> SessionInfo {
        let last = *self.last_used.lock().unwrap_or_else(|e| e.into_inner());
        let paused = matches!(self.session.try_lock().as_deref(), Ok(Slot::Paused));
        SessionInfo {
            id: self.id.clone(),
            language: self.language.clone(),
            backend: self.backend.clone(),
            runs_with: self.runs_with.clone(),
            persistent: self.persistent,
            age_seconds: self.opened.elapsed().as_secs_f64(),
            idle_seconds: last.elapsed().as_secs_f64(),
            idle_timeout_seconds: idle_timeout.as_secs_f64(),
            paused,
        }
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// When it was last used, on the wall clock.
    fn last_used_wall(&self) -> SystemTime {
        let last = *self.last_used.lock().unwrap_or_else(|e| e.into_inner());
        SystemTime::now()
            .checked_sub(last.elapsed())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// The record that lets a server after a restart resume it, if it can be.
    fn record(&self) -> Option<PausedRecord> {
        let ask = self.ask.as_ref()?;
        Some(PausedRecord::new(
            store::Recorded {
                id: &self.id,
                client: &self.client,
                language: &self.language,
                backend: self.backend.as_str(),
                runs_with: self.runs_with.as_deref(),
            },
            self.opened_wall,
            self.last_used_wall(),
            ask,
        ))
    }

    /// A place in the session's queue, or the error that says it is full.
    fn queue(&self) -> Result<Turn<'_>> {
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let turn = Turn(&self.waiting);
        if ahead >= MAX_WAITING {
            return Err(Error::SessionBusy {
                id: self.id.to_string(),
                waiting: ahead,
            });
        }
        Ok(turn)
    }

    /// Ends the session, after a run in progress finishes (a run ends by its timeout
    /// at the latest), or is interrupted first if `interrupt`; callers still waiting
    /// then find it ended.
    fn end(&self, interrupt: bool) {
        self.ending.store(true, Ordering::Release);
        if interrupt {
            if let Some(running) = &*self.running.lock().unwrap_or_else(|e| e.into_inner()) {
                running.interrupt();
            }
        }
        let slot = std::mem::replace(
            &mut *self.session.lock().unwrap_or_else(|e| e.into_inner()),
            Slot::Ended,
        );
        drop(slot);
    }
}

/// `Instant::now()` less what has passed since `then` on the wall clock: the
/// instant of a time read back from disk.
fn instant_of(then: SystemTime) -> Instant {
    let ago = SystemTime::now().duration_since(then).unwrap_or_default();
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}

impl SessionManager {
    /// A manager over `service`, with a background thread that closes expired
    /// sessions (and pauses idle ones, with [`ManagerSettings::pause_after`]). With
    /// a [`ManagerSettings::state_dir`], the sessions an earlier manager paused there
    /// are back, paused. Fails if the state directory cannot be made or read.
    pub fn new(service: Service, settings: ManagerSettings) -> Result<SessionManager> {
        let policy = settings
            .policy
            .clone()
            .or_else(|| service.sandlot().config().policy.clone())
            .unwrap_or_default();
        let (store, paused) = Store::open(
            settings.state_dir.as_deref(),
            settings.max_stored_bytes,
            settings.client_share(),
        )?;
        let inner = Arc::new(Inner {
            service: RwLock::new(service),
            settings,
            policy,
            sessions: Mutex::new(HashMap::new()),
            pending: Mutex::new(Pending::default()),
            settled: Condvar::new(),
            ended: Mutex::new(VecDeque::new()),
            shut: AtomicBool::new(false),
            sweeper: Arc::new((Mutex::new(false), Condvar::new())),
            counters: Counters::default(),
            store,
        });
        let manager = SessionManager { inner };
        for record in paused {
            manager.adopt(record);
        }
        let inner = manager.inner;
        let (weak, stop) = (Arc::downgrade(&inner), inner.sweeper.clone());
        let spawned = std::thread::Builder::new()
            .name("sandlot-sessions".into())
            .spawn(move || sweep_until_gone(weak, stop));
        if let Err(e) = spawned {
            // Without the thread nothing expires; the server still works, and says so.
            eprintln!("sandlot: cannot start the session sweeper ({e}); sessions will not expire");
        }
        Ok(SessionManager { inner })
    }

    /// Takes back a session an earlier manager paused, if this one's policy and
    /// limits still allow what its client asked; else its state is removed.
    fn adopt(&self, record: PausedRecord) {
        let id = SessionId::from(record.id.clone());
        let ask = Ask::from(record.ask.clone());
        let adopted = self
            .request_for(&ask)
            .and_then(|request| self.check_allowed(&request).map(|()| request))
            .and_then(|request| Ok((request, BackendName::new(record.backend.clone())?)));
        let (request, backend) = match adopted {
            Ok(adopted) => adopted,
            Err(error) => {
                tracing::warn!(session = %id, %error, "paused session dropped: this server no longer allows it");
                self.inner.store.unpause(&id);
                return;
            }
        };
        let opened_wall = store::from_unix(record.opened_unix);
        let bound = bound_of(&request);
        let entry = Arc::new(Entry {
            id: id.clone(),
            client: ClientId::new(record.client),
            language: record.language,
            backend,
            runs_with: record.runs_with,
            persistent: true,
            opened: instant_of(opened_wall),
            opened_wall,
            last_used: Mutex::new(instant_of(store::from_unix(record.last_used_unix))),
            masker: Masker::new(request.secrets.clone()),
            request,
            ask: Some(ask),
            pausable: AtomicBool::new(true),
            // Paused: it holds nothing until it resumes, and its backend says then.
            bound: AtomicU64::new(bound),
            memory: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            ending: AtomicBool::new(false),
            running: Mutex::new(None),
            session: Mutex::new(Slot::Paused),
        });
        tracing::info!(session = %id, client = %entry.client, "paused session taken back");
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry);
    }

    /// The settings in force.
    pub fn settings(&self) -> &ManagerSettings {
        &self.inner.settings
    }

    /// The policy every session gets unless its client asks for a stricter one.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// Runs `f` with the service (for the languages, the configuration, ...).
    pub fn with_service<T>(&self, f: impl FnOnce(&Service) -> T) -> T {
        f(&self.inner.service.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// An [`OpenRequest`] for `language` with the server's policy and limits, for a
    /// client to tighten.
    pub fn request(&self, language: &str) -> OpenRequest {
        let mut request = OpenRequest::new(language);
        request.policy = self.inner.policy.clone();
        request.limits = self.inner.settings.limits;
        request.secrets = self.inner.settings.secrets.clone();
        request.tools = self.inner.settings.tools.clone();
        request
    }

    /// The [`OpenRequest`] for what a client asked, over the server's policy and
    /// limits: refused here if a number is not one, and by [`SessionManager::open`]
    /// if it loosens anything.
    pub fn request_for(&self, ask: &Ask) -> Result<OpenRequest> {
        let mut request = self.request(&ask.language);
        request.libraries = ask.libraries.clone();
        if let Some(backend) = &ask.backend {
            request.backend = backend.as_str().into();
        }
        if let Some(network) = ask.network {
            request.policy.network = network;
        }
        if let Some(timeout) = seconds("timeout_seconds", ask.timeout_seconds)? {
            request.limits.timeout = timeout;
        }
        if let Some(mb) = ask.memory_mb {
            if mb == 0 {
                return Err(Error::InvalidRequest {
                    reason: "memory_mb must be at least 1".into(),
                });
            }
            request.limits.memory =
                usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        }
        for secret in ask.secrets.secrets()? {
            request.secrets.retain(|s| s.name() != secret.name());
            request.secrets.push(secret);
        }
        Ok(request)
    }

    /// Opens a session for `client`. Refuses a policy or limits looser than the
    /// server's, and a client or a server at its session limit.
    pub fn open(&self, client: &ClientId, request: OpenRequest) -> Result<SessionInfo> {
        self.open_with(client, request, None)
    }

    /// Opens the session `client` asked for ([`SessionManager::request_for`]). Unlike
    /// a session opened from a request, it can be resumed by a server after a
    /// restart, which rebuilds its request from the ask.
    pub fn open_asked(&self, client: &ClientId, ask: &Ask) -> Result<SessionInfo> {
        let request = self.request_for(ask)?;
        self.open_with(client, request, Some(ask.clone()))
    }

    fn open_with(
        &self,
        client: &ClientId,
        request: OpenRequest,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        let language = request.language.clone();
        let started = Instant::now();
        let opened = self.open_inner(client, request, ask);
        let counter = match &opened {
            Ok(info) => {
                tracing::info!(
                    session = %info.id,
                    %client,
                    language = %info.language,
                    backend = %info.backend,
                    ms = started.elapsed().as_millis() as u64,
                    "session opened"
                );
                &self.inner.counters.opened
            }
            Err(error) => {
                tracing::warn!(%client, %language, %error, "session not opened");
                &self.inner.counters.open_failures
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        opened
    }

    fn open_inner(
        &self,
        client: &ClientId,
        request: OpenRequest,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        self.check_open()?;
        self.check_allowed(&request)?;
        // The slot is taken before the slow open, so that concurrent opens cannot
        // together pass a limit; a shutdown waits for it.
        let slot = self.reserve(client, bound_of(&request))?;
        let session = self.open_session(&request)?;
        let info = self.admit(client, session, request, ask)?;
        drop(slot);
        Ok(info)
    }

    /// Makes `session`, opened in a slot of `client`, one of the manager's, if it
    /// enforces the server's policy.
    fn admit(
        &self,
        client: &ClientId,
        session: Session,
        request: OpenRequest,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        // The server's policy would be a label nobody enforces there.
        let gaps: Vec<String> = session
            .unenforced()
            .iter()
            .filter(|field| !self.inner.settings.accept_unenforced.contains(field))
            .filter(|field| {
                **field != sandlot_core::PolicyField::Network
                    || request.policy.network != sandlot_core::Network::On
            })
            .map(ToString::to_string)
            .collect();
        if !gaps.is_empty() {
            let network = if gaps.iter().any(|g| g == "network") {
                " (network policy: network is not `on`)"
            } else {
                ""
            };
            return Err(Error::BackendUnsuitable {
                backend: session.backend().to_string(),
                language: session.language().to_string(),
                reason: format!(
                    "it cannot enforce this server's policy here: {}{network}; choose another \
                     backend, or start the server with --accept-unenforced {}",
                    gaps.join(", "),
                    gaps.join(",")
                ),
            });
        }
        let bound = session.memory_bound();
        let capabilities = session.capabilities();
        let persistent = capabilities.has(sandlot_core::Capability::PersistentState);
        let pausable = persistent
            && !request.one_shot
            && capabilities.has(sandlot_core::Capability::SnapshotMemory);
        let entry = Arc::new(Entry {
            id: SessionId::fresh(),
            client: client.clone(),
            language: session.language().to_string(),
            backend: session.backend().clone(),
            runs_with: session.toolchain().map(ToString::to_string),
            persistent,
            opened: Instant::now(),
            opened_wall: SystemTime::now(),
            last_used: Mutex::new(Instant::now()),
            masker: Masker::new(request.secrets.clone()),
            request,
            ask,
            pausable: AtomicBool::new(pausable),
            bound: AtomicU64::new(bound),
            memory: AtomicU64::new(bound),
            waiting: AtomicUsize::new(0),
            ending: AtomicBool::new(false),
            running: Mutex::new(None),
            session: Mutex::new(Slot::Live(Box::new(session))),
        });
        {
            let mut sessions = self
                .inner
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let gone = self
                .inner
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .gone
                .contains(client);
            let refusal = if gone {
                Some(Error::SessionEnded {
                    reason: "its client went away while it opened".into(),
                })
            } else {
                self.check_open().err()
            };
            if let Some(e) = refusal {
                drop(sessions);
                entry.end(false);
                return Err(e);
            }
            sessions.insert(entry.id.clone(), entry.clone());
        }
        Ok(entry.info(self.inner.settings.idle_timeout))
    }

    /// Takes a slot for an open of `client`, or says which limit is reached.
    fn reserve(&self, client: &ClientId, memory: u64) -> Result<InFlight<'_>> {
        let sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        let settings = &self.inner.settings;
        let opening_mine = pending.opening.get(client).copied().unwrap_or(0);
        let opening_all: usize = pending.opening.values().sum();
        let mine = sessions.values().filter(|e| e.client == *client).count() + opening_mine;
        if mine >= settings.max_per_client {
            return Err(Error::TooManySessions {
                scope: format!("client {client}"),
                limit: settings.max_per_client,
            });
        }
        if sessions.len() + opening_all >= settings.max_sessions {
            return Err(Error::TooManySessions {
                scope: "this server".into(),
                limit: settings.max_sessions,
            });
        }
        self.inner.within_budget(&sessions, &pending, memory)?;
        // A client that opens again is back.
        pending.gone.retain(|c| c != client);
        *pending.opening.entry(client.clone()).or_default() += 1;
        pending.in_flight += 1;
        pending.memory = pending.memory.saturating_add(memory);
        Ok(InFlight {
            inner: &self.inner,
            opening: Some(client.clone()),
            memory,
        })
    }

    fn open_session(&self, request: &OpenRequest) -> Result<Session> {
        let prepared = self
            .inner
            .service
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_prepared(request)?;
        if !prepared {
            // Installing a runtime changes the service: the one slow step that takes
            // it for itself (once per runtime).
            self.inner
                .service
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .prepare(request, |_| {})?;
        }
        // The builder has its own handle to the backends: the service is not held
        // while the sandbox starts, which can take a Kubernetes start timeout.
        let builder = self
            .inner
            .service
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .builder_for(request);
        builder.open()
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.shut.load(Ordering::SeqCst) {
            return Err(Error::ManagerClosed);
        }
        Ok(())
    }

    fn check_allowed(&self, request: &OpenRequest) -> Result<()> {
        let mut looser: Vec<String> = request
            .policy
            .looser_than(&self.inner.policy)
            .iter()
            .map(|field| format!("policy.{field}"))
            .collect();
        looser.extend(
            request
                .limits
                .looser_than(&self.inner.settings.limits)
                .iter()
                .map(|name| format!("limits.{name}")),
        );
        if looser.is_empty() {
            Ok(())
        } else {
            Err(Error::NotAllowed { fields: looser })
        }
    }

    /// The entry `id` of `client`, or why there is none.
    fn entry(&self, client: &ClientId, id: &SessionId) -> Result<Arc<Entry>> {
        let found = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .filter(|e| e.client == *client)
            .cloned();
        if let Some(entry) = found {
            return Ok(entry);
        }
        let ended = self
            .inner
            .ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(ended, owner, _)| ended == id && owner == client)
            .map(|(_, _, why)| *why);
        Err(Error::NoSuchSession {
            id: id.to_string(),
            reason: match ended {
                Some(why) => format!("it has ended: {why}"),
                None => "no session of this client has this id".into(),
            },
        })
    }

    /// What masks the secrets of session `id` of `client` (the server's and the
    /// session's own) in what a front end builds for the client from its results:
    /// events, JSON decoded from the output. At once, whether a run is under way or
    /// the session is paused.
    pub fn masker(&self, client: &ClientId, id: &SessionId) -> Result<Masker> {
        Ok(self.entry(client, id)?.masker.clone())
    }

    /// Runs `f` on session `id` of `client`, one call at a time per session.
    pub fn with_session<T>(
        &self,
        client: &ClientId,
        id: &SessionId,
        f: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<T> {
        let span = session_span(client, id);
        let _entered = span.enter();
        self.in_session(client, id, f)
    }

    /// The error for session `id` of `client`, which ended while a caller waited.
    fn ended(&self, client: &ClientId, id: &SessionId) -> Error {
        self.entry(client, id)
            .err()
            .unwrap_or(Error::NoSuchSession {
                id: id.to_string(),
                reason: "it has ended".into(),
            })
    }

    /// [`SessionManager::with_session`], in the caller's spans.
    fn in_session<T>(
        &self,
        client: &ClientId,
        id: &SessionId,
        f: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<T> {
        self.in_entry(client, id, |_, session| f(session))
    }

    /// [`SessionManager::in_session`], `f` also given the session's entry.
    fn in_entry<T>(
        &self,
        client: &ClientId,
        id: &SessionId,
        f: impl FnOnce(&Entry, &mut Session) -> Result<T>,
    ) -> Result<T> {
        let entry = self.entry(client, id)?;
        let _turn = entry.queue()?;
        entry.touch();
        let result = {
            let mut slot = entry.session.lock().unwrap_or_else(|e| e.into_inner());
            if entry.ending.load(Ordering::Acquire) {
                drop(slot);
                return Err(self.ended(client, id));
            }
            if matches!(*slot, Slot::Paused) {
                match self.inner.resume(&entry) {
                    Ok(session) => *slot = Slot::Live(Box::new(session)),
                    Err(error) => {
                        drop(slot);
                        return Err(self.not_resumed(&entry, error));
                    }
                }
            }
            let Slot::Live(session) = &mut *slot else {
                return Err(self.ended(client, id));
            };
            f(&entry, session)
        };
        entry.touch();
        result
    }

    /// Runs `code` in session `id` of `client`. A time limit or an output cap of the
    /// run's own may be lower than the server's, never higher.
    pub fn run(
        &self,
        client: &ClientId,
        id: &SessionId,
        code: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let base = &self.inner.settings.limits;
        let this_run = Limits {
            timeout: options.timeout.unwrap_or(base.timeout),
            max_output: options.max_output.unwrap_or(base.max_output),
            ..*base
        };
        let looser: Vec<String> = this_run
            .looser_than(base)
            .iter()
            .map(|name| format!("limits.{name}"))
            .collect();
        if !looser.is_empty() {
            return self.count_run(Err(Error::NotAllowed { fields: looser }));
        }
        let session = session_span(client, id);
        let _in_session = session.enter();
        let run = tracing::info_span!("run");
        let _in_run = run.enter();
        self.count_run(self.in_run(client, id, options, |s, options| s.run_with(code, options)))
    }

    /// [`SessionManager::in_session`] for a run or a command: its interrupt (the
    /// caller's, or one of the manager's) is the session's to trigger while it runs,
    /// so closing the session stops it.
    fn in_run(
        &self,
        client: &ClientId,
        id: &SessionId,
        mut options: RunOptions,
        run: impl FnOnce(&mut Session, RunOptions) -> Result<Execution>,
    ) -> Result<Execution> {
        let interrupt = options
            .interrupt
            .get_or_insert_with(sandlot_core::Interrupt::new)
            .clone();
        self.in_entry(client, id, |entry, s| {
            *entry.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(interrupt.clone());
            // Closed between the turn and the line above: stopped at once.
            if entry.ending.load(Ordering::Acquire) {
                interrupt.interrupt();
            }
            let ran = run(s, options);
            *entry.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
            ran
        })
    }

    /// Runs a shell command line in session `id` of `client`, where its backend has a
    /// shell.
    pub fn run_command(
        &self,
        client: &ClientId,
        id: &SessionId,
        command_line: &str,
    ) -> Result<Execution> {
        self.run_command_with(client, id, command_line, RunOptions::default())
    }

    /// [`SessionManager::run_command`] with options: output as it comes, environment,
    /// working directory, an interrupt. Its time limit may be lower than the
    /// server's, never higher.
    pub fn run_command_with(
        &self,
        client: &ClientId,
        id: &SessionId,
        command_line: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let base = &self.inner.settings.limits;
        if options.timeout.is_some_and(|t| t > base.timeout) {
            return self.count_run(Err(Error::NotAllowed {
                fields: vec!["limits.timeout".into()],
            }));
        }
        let session = session_span(client, id);
        let _in_session = session.enter();
        let command = tracing::info_span!("command");
        let _in_command = command.enter();
        self.count_run(self.in_run(client, id, options, |s, options| {
            s.execute_command_with(command_line, options)
        }))
    }

    /// Opens a session, runs `code` once and closes it: for a client that needs no
    /// state. Counts against the client's sessions while it runs.
    pub fn run_once(
        &self,
        client: &ClientId,
        request: OpenRequest,
        code: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let opened = self.open(client, request)?;
        let run = self.run(client, &opened.id, code, options);
        let _ = self.end(&opened.id, Ended::Closed);
        run
    }

    fn count_run(&self, run: Result<Execution>) -> Result<Execution> {
        match &run {
            // At debug: a busy server runs thousands a second.
            Ok(execution) => {
                tracing::debug!(
                    exit_code = execution.exit_code,
                    end = ?execution.end,
                    ms = execution.duration.as_millis() as u64,
                    tool_calls = execution.tool_calls.len(),
                    "run finished"
                );
                for call in &execution.tool_calls {
                    tracing::debug!(
                        tool = %call.name,
                        outcome = call.outcome.as_str(),
                        us = call.duration.as_micros() as u64,
                        argument_bytes = call.argument_bytes,
                        result_bytes = call.result_bytes,
                        "tool call"
                    );
                }
            }
            Err(error) => tracing::warn!(%error, "run failed"),
        }
        let counters = &self.inner.counters;
        counters.runs.fetch_add(1, Ordering::Relaxed);
        match &run {
            Ok(execution) => {
                let micros = u64::try_from(execution.duration.as_micros()).unwrap_or(u64::MAX);
                counters.run_micros.fetch_add(micros, Ordering::Relaxed);
                let calls = &execution.tool_calls;
                let failed = calls
                    .iter()
                    .filter(|c| c.outcome != sandlot_core::tool::ToolOutcome::Ok)
                    .count();
                counters
                    .tool_calls
                    .fetch_add(calls.len() as u64, Ordering::Relaxed);
                counters
                    .tool_call_failures
                    .fetch_add(failed as u64, Ordering::Relaxed);
            }
            Err(_) => {
                counters.run_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        run
    }

    /// Closes session `id` of `client`, waiting for a run in progress to finish.
    pub fn close(&self, client: &ClientId, id: &SessionId) -> Result<()> {
        self.entry(client, id)?;
        self.end(id, Ended::Closed);
        Ok(())
    }

    /// The error of a call on `entry`, paused, that could not resume it. A state
    /// that cannot be read back (damaged, of a runtime this server no longer has)
    /// never will be: the session ends. Anything else (a backend down) may pass, and
    /// the session stays paused.
    fn not_resumed(&self, entry: &Entry, error: Error) -> Error {
        tracing::warn!(session = %entry.id, client = %entry.client, %error, "paused session not resumed");
        if error.kind() == sandlot_core::error::ErrorKind::InvalidInput {
            self.end(&entry.id, Ended::Unresumable);
            return Error::SessionEnded {
                reason: format!("it was paused, and its state cannot be taken back: {error}"),
            };
        }
        error
    }

    /// Takes a snapshot of session `id` of `client` with its interpreter's memory
    /// (variables, imports, functions) and its files, and keeps it in the server's
    /// store. Refused on a backend that cannot capture the memory (see
    /// [`SessionManager::snapshot_files`]), and when the store is full.
    pub fn snapshot(&self, client: &ClientId, id: &SessionId) -> Result<SnapshotInfo> {
        let span = session_span(client, id);
        let _entered = span.enter();
        let snapshot = self.in_session(client, id, Session::snapshot)?;
        let info = self.inner.store.keep(client, &snapshot)?;
        tracing::info!(snapshot = %info.id, bytes = info.bytes, "snapshot taken");
        Ok(info)
    }

    /// Takes a snapshot of the files of session `id` of `client` alone, on any
    /// backend, and keeps it in the server's store.
    pub fn snapshot_files(&self, client: &ClientId, id: &SessionId) -> Result<SnapshotInfo> {
        let span = session_span(client, id);
        let _entered = span.enter();
        let snapshot = self.in_session(client, id, Session::snapshot_files)?;
        let info = self.inner.store.keep(client, &snapshot)?;
        tracing::info!(snapshot = %info.id, bytes = info.bytes, "snapshot of files taken");
        Ok(info)
    }

    /// Opens a session for `client` holding what its snapshot `snapshot` holds. The
    /// session gets what `ask` asks (its language must be the snapshot's, or empty),
    /// within the server's policy and limits as for any open: nothing in a snapshot
    /// loosens them. A snapshot with memory restores on the backend it was taken on.
    pub fn restore(
        &self,
        client: &ClientId,
        snapshot: &SnapshotId,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        let (path, info) = self.inner.store.find(client, snapshot)?;
        let mut ask = ask.unwrap_or_default();
        if ask.language.is_empty() {
            ask.language = info.language.clone();
        } else if ask.language != info.language {
            let resolves = self.with_service(|service| {
                service
                    .sandlot()
                    .plugins()
                    .language(&ask.language)
                    .map(|handler| handler.info().id == info.language)
                    .unwrap_or(false)
            });
            if !resolves {
                return Err(Error::InvalidRequest {
                    reason: format!(
                        "snapshot {snapshot} is of a {} session, not {}: leave the language \
                         out, or name {}",
                        info.language, ask.language, info.language
                    ),
                });
            }
        }
        if info.memory && ask.backend.is_none() {
            ask.backend = Some(info.backend.clone());
        }
        let request = self.request_for(&ask)?;
        let started = Instant::now();
        let restored = (|| {
            self.check_open()?;
            self.check_allowed(&request)?;
            let slot = self.reserve(client, bound_of(&request))?;
            let session = {
                let service = self.inner.service.read().unwrap_or_else(|e| e.into_inner());
                let snapshot = service.sandlot().open_snapshot(&path)?;
                let builder = service.builder_for(&request);
                drop(service);
                builder.restore(&snapshot)?
            };
            let info = self.admit(client, session, request, Some(ask))?;
            drop(slot);
            Ok(info)
        })();
        match &restored {
            Ok(session) => {
                tracing::info!(session = %session.id, %client, %snapshot, ms = started.elapsed().as_millis() as u64, "session restored");
                self.inner.counters.opened.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(%client, %snapshot, %error, "session not restored");
                self.inner
                    .counters
                    .open_failures
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        restored
    }

    /// `count` new sessions of `client`, each starting from what session `id` holds
    /// now (memory and files), each going its own way after. They count against the
    /// client's and the server's session limits; the source runs on.
    pub fn fork(
        &self,
        client: &ClientId,
        id: &SessionId,
        count: usize,
    ) -> Result<Vec<SessionInfo>> {
        if count == 0 || count > self.inner.settings.max_per_client {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "a fork makes 1 to {} sessions (this server's sessions per client), not \
                     {count}",
                    self.inner.settings.max_per_client
                ),
            });
        }
        let span = session_span(client, id);
        let _entered = span.enter();
        self.check_open()?;
        let entry = self.entry(client, id)?;
        let slots = (0..count)
            .map(|_| self.reserve(client, entry.bound.load(Ordering::Relaxed)))
            .collect::<Result<Vec<_>>>()?;
        let started = Instant::now();
        let forks = self.in_session(client, id, |session| session.fork(count))?;
        let mut infos = Vec::with_capacity(count);
        // A fork that cannot be admitted ends with those after it (dropped, closed).
        for session in forks {
            infos.push(self.admit(client, session, entry.request.clone(), entry.ask.clone())?);
        }
        drop(slots);
        self.inner
            .counters
            .opened
            .fetch_add(count as u64, Ordering::Relaxed);
        tracing::info!(
            count,
            ms = started.elapsed().as_millis() as u64,
            "session forked"
        );
        Ok(infos)
    }

    /// Room in the store for a snapshot on its way in, taken as its bytes arrive
    /// ([`Incoming::take`]) and given back when dropped: uploads under way share the
    /// store's room with what it holds, so together they cannot put more than it
    /// takes on the disk.
    pub fn incoming(&self, client: &ClientId) -> Incoming {
        Incoming {
            inner: self.inner.clone(),
            client: client.clone(),
            bytes: 0,
        }
    }

    /// Keeps, for `client`, a snapshot read from `input` (made by this server, or any
    /// intact one where the server's configuration trusts others').
    pub fn upload_snapshot(
        &self,
        client: &ClientId,
        input: &mut dyn std::io::Read,
    ) -> Result<SnapshotInfo> {
        let snapshot = self.with_service(|service| service.sandlot().read_snapshot(input))?;
        self.inner.store.keep(client, &snapshot)
    }

    /// The file of snapshot `id` of `client` (to send it), and what it holds.
    pub fn snapshot_file(
        &self,
        client: &ClientId,
        id: &SnapshotId,
    ) -> Result<(PathBuf, SnapshotInfo)> {
        self.inner.store.find(client, id)
    }

    /// The snapshots `client` keeps in the server's store, newest first.
    pub fn snapshots(&self, client: &ClientId) -> Vec<SnapshotInfo> {
        self.inner.store.list(client)
    }

    /// Deletes snapshot `id` of `client`.
    pub fn delete_snapshot(&self, client: &ClientId, id: &SnapshotId) -> Result<()> {
        self.inner.store.delete(client, id)
    }

    /// Whether snapshots and paused sessions outlive the process (a
    /// [`ManagerSettings::state_dir`] is set): its sessions can outlive their client's
    /// connection, and a restart.
    pub fn keeps_state(&self) -> bool {
        self.inner.store.lasting()
    }

    /// Keeps `contents` as record `key` of a front end (`kind`: `e2b` keeps its
    /// sandboxes) in the state directory, readable by its owner only, for the next
    /// server to take back with [`SessionManager::take_records`]. `Ok(false)` without
    /// a state directory. Keys and kinds are letters, digits and `-`.
    pub fn keep_record(&self, kind: &str, key: &str, contents: &[u8]) -> Result<bool> {
        self.inner.store.keep_record(kind, key, contents)
    }

    /// The records of `kind` an earlier server kept ([`SessionManager::keep_record`]),
    /// by key; they are removed from the state directory.
    pub fn take_records(&self, kind: &str) -> Vec<(String, Vec<u8>)> {
        self.inner.store.take_records(kind)
    }

    /// Bytes the store of snapshots and paused sessions holds now.
    pub fn stored_bytes(&self) -> u64 {
        self.inner.store.used()
    }

    /// Pauses session `id` of `client` now, as its idle time would: its state goes to
    /// the store and its sandbox is released; its next call resumes it. `false` if
    /// its backend cannot capture its memory (it stays open).
    pub fn pause(&self, client: &ClientId, id: &SessionId) -> Result<bool> {
        let entry = self.entry(client, id)?;
        self.inner.pause(&entry, true)
    }

    /// Resumes session `id` of `client` now if it is paused (a call on it would), so
    /// that its next call finds it ready.
    pub fn resume(&self, client: &ClientId, id: &SessionId) -> Result<()> {
        self.in_session(client, id, |_| Ok(()))
    }

    /// The sessions `client` has open.
    pub fn list(&self, client: &ClientId) -> Vec<SessionInfo> {
        let mut list: Vec<SessionInfo> = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|e| e.client == *client)
            .map(|e| e.info(self.inner.settings.idle_timeout))
            .collect();
        list.sort_by(|a, b| b.age_seconds.total_cmp(&a.age_seconds));
        list
    }

    /// Closes every session of `client`, which has gone away, and any its opens in
    /// progress bring.
    pub fn client_gone(&self, client: &ClientId) {
        {
            let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending.gone.len() == REMEMBERED_GONE {
                pending.gone.pop_front();
            }
            pending.gone.push_back(client.clone());
        }
        let ids: Vec<SessionId> = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|e| e.client == *client)
            .map(|e| e.id.clone())
            .collect();
        for id in ids {
            self.end(&id, Ended::ClientGone);
        }
    }

    /// Counters since the manager started.
    pub fn stats(&self) -> ManagerStats {
        let c = &self.inner.counters;
        let (open, memory_held) = {
            let sessions = self
                .inner
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
            (sessions.len(), memory_held(&sessions, &pending))
        };
        ManagerStats {
            open,
            opened: c.opened.load(Ordering::Relaxed),
            open_failures: c.open_failures.load(Ordering::Relaxed),
            closed: c.closed.load(Ordering::Relaxed),
            expired: c.expired.load(Ordering::Relaxed),
            runs: c.runs.load(Ordering::Relaxed),
            run_failures: c.run_failures.load(Ordering::Relaxed),
            run_seconds: c.run_micros.load(Ordering::Relaxed) as f64 / 1e6,
            tool_calls: c.tool_calls.load(Ordering::Relaxed),
            tool_call_failures: c.tool_call_failures.load(Ordering::Relaxed),
            memory_held,
            memory_budget: self.inner.settings.budget(),
        }
    }

    /// Refuses new sessions and closes every open one, each after its run in
    /// progress (bounded by the run's timeout). Returns how many were closed.
    pub fn shutdown(&self) -> usize {
        self.inner.shutdown()
    }

    /// Removes session `id` and closes it; `false` if it was not open.
    fn end(&self, id: &SessionId, why: Ended) -> bool {
        self.inner.end(id, why)
    }
}

impl Inner {
    /// Whether `memory` more bytes fit the memory budget beside what the open
    /// sessions (`sessions`) and the opens in progress (`pending`) hold.
    fn within_budget(
        &self,
        sessions: &HashMap<SessionId, Arc<Entry>>,
        pending: &Pending,
        memory: u64,
    ) -> Result<()> {
        let budget = self.settings.budget();
        let held = memory_held(sessions, pending);
        if held.saturating_add(memory) > budget {
            return Err(Error::MemoryBudget {
                needed: memory,
                held,
                budget,
            });
        }
        Ok(())
    }

    /// Takes the state of a paused session back into a sandbox, if what it may hold
    /// fits the memory budget.
    fn resume(&self, entry: &Entry) -> Result<Session> {
        let bound = entry.bound.load(Ordering::Relaxed);
        let _held = {
            let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            self.within_budget(&sessions, &pending, bound)?;
            pending.in_flight += 1;
            pending.memory = pending.memory.saturating_add(bound);
            InFlight {
                inner: self,
                opening: None,
                memory: bound,
            }
        };
        let session = self.restore_paused(entry)?;
        let bound = session.memory_bound();
        entry.bound.store(bound, Ordering::Relaxed);
        entry.memory.store(bound, Ordering::Relaxed);
        Ok(session)
    }

    /// Takes the state of a paused session back into a sandbox.
    fn restore_paused(&self, entry: &Entry) -> Result<Session> {
        let started = Instant::now();
        let path = self.store.paused_file(&entry.id);
        let session = {
            let service = self.service.read().unwrap_or_else(|e| e.into_inner());
            let snapshot = service.sandlot().open_snapshot(&path)?;
            let mut request = entry.request.clone();
            request.backend = snapshot.backend().into();
            let builder = service.builder_for(&request);
            drop(service);
            builder.restore(&snapshot)?
        };
        self.store.unpause(&entry.id);
        tracing::info!(session = %entry.id, client = %entry.client, ms = started.elapsed().as_millis() as u64, "session resumed");
        Ok(session)
    }

    /// Pauses `entry`: snapshots it into the store and releases its sandbox. With
    /// `wait`, after a run in progress; without, not at all if one is. `false` if it
    /// was not paused: not live, busy, or its backend cannot capture its memory.
    fn pause(&self, entry: &Entry, wait: bool) -> Result<bool> {
        if !entry.pausable.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let mut slot = if wait {
            entry.session.lock().unwrap_or_else(|e| e.into_inner())
        } else {
            match entry.session.try_lock() {
                Ok(slot) => slot,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
            }
        };
        let Slot::Live(session) = &mut *slot else {
            return Ok(false);
        };
        let started = Instant::now();
        // The snapshot stays in the server's store and restores this session: its
        // secrets stay in it, as they are in the live session.
        let paused = session.snapshot_keeping_secrets().and_then(|snapshot| {
            let record = if self.store.lasting() {
                entry.record()
            } else {
                None
            };
            self.store
                .pause(&entry.id, &entry.client, &snapshot, record.as_ref())?;
            Ok(snapshot.len())
        });
        match paused {
            Ok(bytes) => {
                // The sandbox goes with the session, and what it held of the memory.
                *slot = Slot::Paused;
                entry.memory.store(0, Ordering::Relaxed);
                tracing::info!(session = %entry.id, client = %entry.client, bytes, ms = started.elapsed().as_millis() as u64, "session paused");
                Ok(true)
            }
            Err(error) => {
                // Not tried again: it stays open until its idle timeout.
                entry.pausable.store(false, Ordering::Relaxed);
                tracing::warn!(session = %entry.id, client = %entry.client, %error, "session not paused");
                Err(error)
            }
        }
    }

    /// At shutdown with a lasting store: keeps session `id` paused for the server
    /// after the restart, if it can be; `false` if it must be closed.
    fn keep_for_restart(&self, id: &SessionId) -> bool {
        if !self.store.lasting() {
            return false;
        }
        let Some(entry) = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
        else {
            return false;
        };
        if entry.ask.is_none() {
            return false;
        }
        let paused = matches!(
            *entry.session.lock().unwrap_or_else(|e| e.into_inner()),
            Slot::Paused
        ) || self.pause(&entry, true).unwrap_or(false);
        if paused {
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(id);
            tracing::info!(session = %id, client = %entry.client, "session kept paused for after the restart");
        }
        paused
    }

    fn end(&self, id: &SessionId, why: Ended) -> bool {
        let (entry, _closing) = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let Some(entry) = sessions.remove(id) else {
                return false;
            };
            // Counted before the entry leaves the table, so a shutdown never misses it.
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .in_flight += 1;
            (
                entry,
                InFlight {
                    inner: self,
                    opening: None,
                    memory: 0,
                },
            )
        };
        {
            let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
            if ended.len() == REMEMBERED_ENDS {
                ended.pop_front();
            }
            ended.push_back((entry.id.clone(), entry.client.clone(), why));
        }
        let counter = match why {
            Ended::Idle | Ended::Lifetime => &self.counters.expired,
            _ => &self.counters.closed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // A client's close and the lifetime stop a run under way; a shutdown lets it
        // finish.
        entry.end(matches!(
            why,
            Ended::Closed | Ended::Lifetime | Ended::ClientGone
        ));
        self.store.unpause(&entry.id);
        tracing::info!(
            session = %entry.id,
            client = %entry.client,
            reason = %why,
            age_s = entry.opened.elapsed().as_secs(),
            "session closed"
        );
        true
    }

    /// Closes sessions past their idle timeout or lifetime. A session in the middle of
    /// a run is not idle.
    fn sweep(self: &Arc<Self>) {
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

    fn shutdown(&self) -> usize {
        self.shut.store(true, Ordering::SeqCst);
        {
            let (stop, wake) = &*self.sweeper;
            *stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
            wake.notify_all();
        }
        let ids: Vec<SessionId> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        // In parallel: each close waits for its session's run and removes a sandbox.
        std::thread::scope(|scope| {
            for id in &ids {
                scope.spawn(move || self.keep_for_restart(id) || self.end(id, Ended::Shutdown));
            }
        });
        // Opens and closes that started before, on other threads (a client that
        // went away, the sweeper): their sandboxes go before this returns.
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .settled
            .wait_timeout_while(pending, SHUTDOWN_WAIT, |p| p.in_flight > 0)
            .unwrap_or_else(|e| e.into_inner());
        ids.len()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The span of everything done in session `id`, for the servers' logs.
fn session_span(client: &ClientId, id: &SessionId) -> tracing::Span {
    tracing::info_span!("session", id = %id, %client)
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

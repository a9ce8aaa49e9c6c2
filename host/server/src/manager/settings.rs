//! [`ManagerSettings`]: how a manager treats sessions (timeouts, limits, policy,
//! the store, the memory budget).

use sandlot_core::policy::Policy;
use sandlot_core::session::Limits;
use std::path::PathBuf;
use std::time::Duration;

/// How a [`SessionManager`](super::SessionManager) treats sessions.
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
    /// Roots the egress proxy trusts, beside the host's, for the hosts the secrets
    /// bound to hosts go to over TLS (default: none).
    pub upstream_ca: sandlot_core::secret::UpstreamCa,
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
    /// counted at the most it may hold ([`Session::memory_bound`](sandlot_core::session::Session::memory_bound)): its memory limit,
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
            upstream_ca: Default::default(),
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

    /// The egress proxy trusts `ca` too for bound secrets' hosts (see
    /// [`ManagerSettings::upstream_ca`]).
    pub fn upstream_ca(mut self, ca: sandlot_core::secret::UpstreamCa) -> Self {
        self.upstream_ca = ca;
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

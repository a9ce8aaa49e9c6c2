//! What a sandbox may do. The host decides once per session and applies it to every
//! sandbox it opens; the policy in force comes back with every [`Execution`].
//!
//! The defaults are the hardened ones. Each knob can be loosened for one session:
//!
//! ```
//! use sandlot::{Network, Policy};
//! let policy = Policy {
//!     network: Network::On,
//!     pids_limit: 1024,
//!     ..Policy::default()
//! };
//! assert!(policy.read_only_root && policy.drop_capabilities);
//! ```
//!
//! Or written down, as `sandlot.toml`'s `[policy]` section and `sandlot run --policy
//! FILE` take it: a [`Preset`] and the fields that differ from it.
//!
//! ```
//! use sandlot::policy::{Policy, Preset};
//! let policy = Policy::from_toml("preset = \"strict\"\npids_limit = 64\n", "inline".as_ref())?;
//! assert_eq!(policy.pids_limit, 64);
//! assert_eq!(policy.network, Preset::Strict.policy().network);
//! # Ok::<(), sandlot::Error>(())
//! ```
//!
//! [`Execution`]: crate::Execution

mod restricted;

pub use restricted::{Restrictions, LISTED_SEVERITY};

use crate::egress::{AllowList, RequestRules};
use crate::error::{Error, Result};
use crate::language::Severity;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// When a container sandbox may reach the network.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Network {
    /// Never: the container has only a loopback interface.
    Off,
    /// Only while installing libraries the run asked for; the user's code then runs
    /// with the network cut again.
    #[default]
    InstallOnly,
    /// Always, including while the user's code runs.
    On,
    /// Only to the destinations of [`Policy::allow`], installs and code alike,
    /// through a proxy the host runs: the sandbox itself has no network (see
    /// [`crate::egress`]). What was refused is in
    /// [`Execution::egress_denied`](crate::Execution::egress_denied).
    AllowList,
}

impl Network {
    /// Every setting, from closed to open.
    pub const ALL: [Network; 4] = [
        Network::Off,
        Network::InstallOnly,
        Network::AllowList,
        Network::On,
    ];

    /// Its name, as sandlot.toml, the CLI and the servers spell it (`off`,
    /// `install-only`, `allow-list`, `on`).
    pub fn name(self) -> &'static str {
        match self {
            Network::Off => "off",
            Network::InstallOnly => "install-only",
            Network::AllowList => "allow-list",
            Network::On => "on",
        }
    }

    /// The setting called `name` (see [`Network::name`]); `install` is short for
    /// `install-only`.
    ///
    /// ```
    /// use sandlot::Network;
    /// assert_eq!(Network::named("install"), Some(Network::InstallOnly));
    /// assert_eq!(Network::named("allow-list"), Some(Network::AllowList));
    /// assert_eq!(Network::named("sometimes"), None);
    /// ```
    pub fn named(name: &str) -> Option<Network> {
        match name {
            "install" => Some(Network::InstallOnly),
            name => Network::ALL.into_iter().find(|n| n.name() == name),
        }
    }
}

/// Seccomp filtering of a container's system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Seccomp {
    /// The engine's default profile, and under it sandlot's own filter, the same on
    /// every engine and cluster (the agent installs it before it runs anything):
    /// no user or other new namespaces (`unshare`, namespace flags to `clone`,
    /// `setns`), no mounts, no kernel keyring, no `bpf`, `perf_event_open`,
    /// `userfaultfd` or io_uring, no module or clock changes. Docker's profile refuses
    /// most of these already; Podman's allows namespaces, mounts and the keyring
    /// (for nested rootless containers); a Kubernetes node may run pods with none.
    /// `sandlot doctor` probes what a sandbox is refused on each engine.
    #[default]
    EngineDefault,
    /// No filtering, neither the engine's nor sandlot's. Only for trusted code that
    /// needs a refused call.
    Unconfined,
}

/// What the host allows a sandbox. The container fields apply to the Docker and Podman
/// backends; the wasm backend never has a network, a root filesystem or capabilities,
/// whatever the policy says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Read the code with its language's static analysis before it runs. Off, the
    /// handler is never called: no findings, nothing blocks on
    /// [`Policy::block_at`], [`Policy::restricted`] goes unchecked, and code of any
    /// size costs nothing to check. For code you trust, or gated elsewhere.
    pub analyze: bool,
    /// Refuse code with a finding at or above this severity; `None` only reports
    /// findings (they are in every [`Execution`](crate::Execution)).
    pub block_at: Option<Severity>,
    /// Findings below this severity are ignored: neither blocking nor reported.
    /// Between it and [`Policy::block_at`] they are warnings, in the execution.
    pub report_at: Severity,
    /// Modules and calls the static analysis reports, per language, beyond the
    /// handlers' own rules, each at its severity ([`Restrictions`]).
    pub restricted: Restrictions,
    /// When the sandbox may reach the network.
    pub network: Network,
    /// Where it may go when [`Policy::network`] is [`Network::AllowList`]: names
    /// (`pypi.org`, `*.pythonhosted.org`) and networks (`10.0.0.0/8`).
    pub allow: AllowList,
    /// Which requests to the listed hosts may go, by method and path
    /// (`GET api.github.com/repos/**`, `deny DELETE *.example.com`), checked by the
    /// egress proxy in each request, through TLS too ([`RequestRules`]). Only with
    /// [`Network::AllowList`]; an allow rule's host must be listed.
    pub requests: RequestRules,
    /// Mount the image's root filesystem read-only; only the workspace and `/tmp`
    /// (size-capped tmpfs) are writable.
    pub read_only_root: bool,
    /// User id the code runs as.
    pub uid: u32,
    /// Group id the code runs as.
    pub gid: u32,
    /// Drop every Linux capability.
    pub drop_capabilities: bool,
    /// Forbid gaining privileges through setuid binaries.
    pub no_new_privileges: bool,
    /// Most processes and threads at once (fork bombs stop here).
    pub pids_limit: u32,
    /// CPU time, in thousandths of a CPU (1000 = one whole CPU).
    pub cpu_millis: u32,
    /// Size of the writable workspace (`/workspace`), in bytes.
    pub workdir_size: u64,
    /// System-call filtering.
    pub seccomp: Seccomp,
}

impl Policy {
    /// The same policy with another blocking threshold.
    pub fn with_block_at(self, block_at: Option<Severity>) -> Policy {
        Policy { block_at, ..self }
    }

    /// What the policy does with a finding of `severity`.
    ///
    /// ```
    /// use sandlot::policy::{Gate, Policy};
    /// use sandlot::Severity;
    /// let policy = Policy { report_at: Severity::Low, ..Policy::default() };
    /// assert_eq!(policy.gate(Severity::Info), Gate::Ignore);
    /// assert_eq!(policy.gate(Severity::High), Gate::Warn);
    /// assert_eq!(policy.gate(Severity::Critical), Gate::Block);
    /// ```
    pub fn gate(&self, severity: Severity) -> Gate {
        if self.block_at.is_some_and(|threshold| severity >= threshold) {
            Gate::Block
        } else if severity >= self.report_at {
            Gate::Warn
        } else {
            Gate::Ignore
        }
    }

    /// The fields in which this policy allows more than `base`: empty when it is as
    /// strict or stricter everywhere. A server uses it to let a client tighten its
    /// policy, never loosen it.
    ///
    /// ```
    /// use sandlot::{Network, Policy, PolicyField};
    /// let server = Policy::default();
    /// let tighter = Policy { network: Network::Off, pids_limit: 64, ..server.clone() };
    /// assert!(tighter.looser_than(&server).is_empty());
    /// let looser = Policy { network: Network::On, ..server.clone() };
    /// assert_eq!(looser.looser_than(&server), [PolicyField::Network]);
    /// ```
    pub fn looser_than(&self, base: &Policy) -> Vec<PolicyField> {
        // Installs anywhere and code nowhere, or both to a few places: neither is
        // within the other.
        let network_looser = match (self.network, base.network) {
            (_, Network::On) | (Network::Off, _) => false,
            (Network::AllowList, Network::AllowList) => !self.allow.within(&base.allow),
            (mine, theirs) => mine != theirs,
        };
        // Engines read a limit of 0 as none at all.
        fn more(mine: u64, base: u64) -> bool {
            base != 0 && (mine == 0 || mine > base)
        }
        // `None` blocks nothing; a lower severity blocks more.
        let blocks_less = match (self.block_at, base.block_at) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(mine), Some(theirs)) => mine > theirs,
        };
        let checks = [
            (PolicyField::Analyze, base.analyze && !self.analyze),
            (PolicyField::BlockAt, blocks_less),
            (
                PolicyField::Restricted,
                !self.restricted.cover(&base.restricted),
            ),
            (PolicyField::Network, network_looser),
            (
                PolicyField::Requests,
                self.network == Network::AllowList && self.requests.looser_than(&base.requests),
            ),
            (
                PolicyField::ReadOnlyRoot,
                base.read_only_root && !self.read_only_root,
            ),
            // Another unprivileged id is no looser; root is.
            (PolicyField::Uid, self.uid == 0 && base.uid != 0),
            (PolicyField::Gid, self.gid == 0 && base.gid != 0),
            (
                PolicyField::DropCapabilities,
                base.drop_capabilities && !self.drop_capabilities,
            ),
            (
                PolicyField::NoNewPrivileges,
                base.no_new_privileges && !self.no_new_privileges,
            ),
            (
                PolicyField::PidsLimit,
                more(self.pids_limit.into(), base.pids_limit.into()),
            ),
            (
                PolicyField::CpuMillis,
                more(self.cpu_millis.into(), base.cpu_millis.into()),
            ),
            (
                PolicyField::WorkdirSize,
                more(self.workdir_size, base.workdir_size),
            ),
            (
                PolicyField::Seccomp,
                base.seccomp == Seccomp::EngineDefault && self.seccomp != Seccomp::EngineDefault,
            ),
        ];
        checks
            .into_iter()
            .filter_map(|(field, looser)| looser.then_some(field))
            .collect()
    }
}

impl Default for Policy {
    /// Blocks only what is clearly hostile (critical findings, such as a fork bomb):
    /// the sandbox, not a pattern match, is what keeps the host safe. Containers get
    /// every hardening on: no network but for installs, read-only root, uid 1000, no
    /// capabilities, no new privileges, 256 processes, one CPU, a 1 GiB workspace.
    fn default() -> Self {
        Policy {
            analyze: true,
            block_at: Some(Severity::Critical),
            report_at: Severity::Info,
            restricted: Restrictions::none(),
            network: Network::InstallOnly,
            allow: AllowList::empty(),
            requests: RequestRules::none(),
            read_only_root: true,
            uid: 1000,
            gid: 1000,
            drop_capabilities: true,
            no_new_privileges: true,
            pids_limit: 256,
            cpu_millis: 1000,
            workdir_size: 1 << 30,
            seccomp: Seccomp::EngineDefault,
        }
    }
}

/// What a policy does with a static-analysis finding ([`Policy::gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Gate {
    /// Dropped: below [`Policy::report_at`].
    Ignore,
    /// Reported in the execution; the code runs.
    Warn,
    /// The code is refused ([`crate::Error::Blocked`]).
    Block,
}

/// A field of a [`Policy`]: what [`crate::Execution::unenforced`] names when a
/// backend cannot apply a restriction the policy asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PolicyField {
    /// [`Policy::analyze`].
    Analyze,
    /// [`Policy::block_at`].
    BlockAt,
    /// [`Policy::restricted`].
    Restricted,
    /// [`Policy::network`].
    Network,
    /// [`Policy::requests`].
    Requests,
    /// [`Policy::read_only_root`].
    ReadOnlyRoot,
    /// [`Policy::uid`].
    Uid,
    /// [`Policy::gid`].
    Gid,
    /// [`Policy::drop_capabilities`].
    DropCapabilities,
    /// [`Policy::no_new_privileges`].
    NoNewPrivileges,
    /// [`Policy::pids_limit`].
    PidsLimit,
    /// [`Policy::cpu_millis`].
    CpuMillis,
    /// [`Policy::workdir_size`].
    WorkdirSize,
    /// [`Policy::seccomp`].
    Seccomp,
}

impl PolicyField {
    /// Every field, in declaration order.
    pub const ALL: [PolicyField; 14] = [
        PolicyField::Analyze,
        PolicyField::BlockAt,
        PolicyField::Restricted,
        PolicyField::Network,
        PolicyField::Requests,
        PolicyField::ReadOnlyRoot,
        PolicyField::Uid,
        PolicyField::Gid,
        PolicyField::DropCapabilities,
        PolicyField::NoNewPrivileges,
        PolicyField::PidsLimit,
        PolicyField::CpuMillis,
        PolicyField::WorkdirSize,
        PolicyField::Seccomp,
    ];

    /// The field a policy file names `name` (`pids_limit`, ...).
    ///
    /// ```
    /// use sandlot::PolicyField;
    /// assert_eq!(PolicyField::named("workdir_size"), Some(PolicyField::WorkdirSize));
    /// assert_eq!(PolicyField::named("disk"), None);
    /// ```
    pub fn named(name: &str) -> Option<PolicyField> {
        PolicyField::ALL.into_iter().find(|f| f.to_string() == name)
    }
}

impl std::fmt::Display for PolicyField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PolicyField::Analyze => "analyze",
            PolicyField::BlockAt => "block_at",
            PolicyField::Restricted => "restricted",
            PolicyField::Network => "network",
            PolicyField::Requests => "requests",
            PolicyField::ReadOnlyRoot => "read_only_root",
            PolicyField::Uid => "uid",
            PolicyField::Gid => "gid",
            PolicyField::DropCapabilities => "drop_capabilities",
            PolicyField::NoNewPrivileges => "no_new_privileges",
            PolicyField::PidsLimit => "pids_limit",
            PolicyField::CpuMillis => "cpu_millis",
            PolicyField::WorkdirSize => "workdir_size",
            PolicyField::Seccomp => "seccomp",
        })
    }
}

/// A named starting point for a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Preset {
    /// For code nobody has looked at: no network at all, high findings block, 128
    /// processes, half a CPU, a 256 MiB workspace.
    Strict,
    /// The default ([`Policy::default`]): every hardening on, the network only for
    /// installs, only critical findings block.
    Standard,
    /// For code you trust: the network always on, a writable root filesystem,
    /// findings only reported, 1,024 processes, two CPUs, a 4 GiB workspace. The
    /// sandbox still drops capabilities, forbids new privileges and filters system
    /// calls. The wasm backend, which has no network to give, cannot serve it.
    Permissive,
}

impl Preset {
    /// Every preset, strictest first.
    pub const ALL: [Preset; 3] = [Preset::Strict, Preset::Standard, Preset::Permissive];

    /// The preset called `name` (`strict`, `standard`, `permissive`).
    pub fn named(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Strict => "strict",
            Preset::Standard => "standard",
            Preset::Permissive => "permissive",
        }
    }

    /// The policy it stands for.
    pub fn policy(self) -> Policy {
        let standard = Policy::default();
        match self {
            Preset::Standard => standard,
            Preset::Strict => Policy {
                block_at: Some(Severity::High),
                network: Network::Off,
                pids_limit: 128,
                cpu_millis: 500,
                workdir_size: 256 << 20,
                ..standard
            },
            Preset::Permissive => Policy {
                block_at: None,
                network: Network::On,
                read_only_root: false,
                pids_limit: 1024,
                cpu_millis: 2000,
                workdir_size: 4 << 30,
                ..standard
            },
        }
    }
}

/// The severity at which code is refused, as a policy file and `--block-at` write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum BlockAt {
    /// Any finding.
    Info,
    /// Low and above.
    Low,
    /// Medium and above.
    Medium,
    /// High and above.
    High,
    /// Critical findings only.
    Critical,
    /// Only report findings.
    Never,
}

impl BlockAt {
    /// Every threshold, as written.
    pub const NAMES: [&'static str; 6] = ["info", "low", "medium", "high", "critical", "never"];

    /// The threshold written `name`.
    pub fn named(name: &str) -> Option<BlockAt> {
        let all = [
            BlockAt::Info,
            BlockAt::Low,
            BlockAt::Medium,
            BlockAt::High,
            BlockAt::Critical,
            BlockAt::Never,
        ];
        BlockAt::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|index| all[index])
    }

    /// The severity that blocks; `None` for `never`.
    pub fn severity(self) -> Option<Severity> {
        match self {
            BlockAt::Info => Some(Severity::Info),
            BlockAt::Low => Some(Severity::Low),
            BlockAt::Medium => Some(Severity::Medium),
            BlockAt::High => Some(Severity::High),
            BlockAt::Critical => Some(Severity::Critical),
            BlockAt::Never => None,
        }
    }
}

/// A policy as written in `sandlot.toml`'s `[policy]` or a `--policy` file: a preset
/// (default `standard`) and the fields that differ from it. Unknown keys are errors.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicySettings {
    preset: Option<Preset>,
    analyze: Option<bool>,
    block_at: Option<BlockAt>,
    report_at: Option<Severity>,
    restricted: Option<Restrictions>,
    network: Option<Network>,
    allow: Option<AllowList>,
    requests: Option<RequestRules>,
    read_only_root: Option<bool>,
    uid: Option<u32>,
    gid: Option<u32>,
    drop_capabilities: Option<bool>,
    no_new_privileges: Option<bool>,
    pids_limit: Option<u32>,
    cpu_millis: Option<u32>,
    workdir_size: Option<u64>,
    seccomp: Option<Seccomp>,
}

impl PolicySettings {
    /// The policy: the preset with the given fields over it.
    pub(crate) fn policy(&self) -> std::result::Result<Policy, String> {
        let base = self.preset.unwrap_or(Preset::Standard).policy();
        let policy = Policy {
            analyze: self.analyze.unwrap_or(base.analyze),
            block_at: self.block_at.map_or(base.block_at, BlockAt::severity),
            report_at: self.report_at.unwrap_or(base.report_at),
            restricted: self.restricted.clone().unwrap_or(base.restricted),
            network: self.network.unwrap_or(base.network),
            allow: self.allow.clone().unwrap_or(base.allow),
            requests: self.requests.clone().unwrap_or(base.requests),
            read_only_root: self.read_only_root.unwrap_or(base.read_only_root),
            uid: self.uid.unwrap_or(base.uid),
            gid: self.gid.unwrap_or(base.gid),
            drop_capabilities: self.drop_capabilities.unwrap_or(base.drop_capabilities),
            no_new_privileges: self.no_new_privileges.unwrap_or(base.no_new_privileges),
            pids_limit: self.pids_limit.unwrap_or(base.pids_limit),
            cpu_millis: self.cpu_millis.unwrap_or(base.cpu_millis),
            workdir_size: self.workdir_size.unwrap_or(base.workdir_size),
            seccomp: self.seccomp.unwrap_or(base.seccomp),
        };
        // A threshold written beside `analyze = false` would read as a gate that is
        // not there.
        if let (false, Some(block_at)) = (policy.analyze, self.block_at) {
            if block_at != BlockAt::Never {
                return Err(format!(
                    "analyze = false runs no analysis, so block_at = \"{}\" would never \
                     block; drop block_at, or analyze = false",
                    BlockAt::NAMES[block_at as usize]
                ));
            }
        }
        if let Some(block_at) = policy.block_at.filter(|b| *b < policy.report_at) {
            return Err(format!(
                "report_at ({}) is above block_at ({}): findings that block must be reported",
                policy.report_at, block_at
            ));
        }
        if !policy.allow.is_empty() && policy.network != Network::AllowList {
            return Err(format!(
                "allow lists where network = \"allow-list\" may go, but network is \"{}\"; \
                 set network = \"allow-list\" or drop allow",
                serde_json::to_value(policy.network)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ));
        }
        policy.check_requests()?;
        if policy.pids_limit == 0 || policy.cpu_millis == 0 || policy.workdir_size == 0 {
            return Err("pids_limit, cpu_millis and workdir_size must be more than 0".to_string());
        }
        Ok(policy)
    }
}

impl Policy {
    /// Whether [`Policy::requests`] can hold: rules only where the proxy reads an
    /// allow-list's requests, and an allow rule only for a listed host (a rule
    /// narrows the list, it does not add to it).
    pub fn check_requests(&self) -> std::result::Result<(), String> {
        if self.requests.is_empty() {
            return Ok(());
        }
        if self.network != Network::AllowList {
            return Err(format!(
                "requests narrow what an allow-list lets through, but network is \"{}\"; \
                 set network = \"allow-list\" and list the hosts",
                self.network.name()
            ));
        }
        for rule in self.requests.rules() {
            let host = AllowList::from(vec![rule.host().clone()]);
            if rule.action() == crate::egress::RuleAction::Allow && !host.within(&self.allow) {
                return Err(format!(
                    "the request rule `{rule}` is for {}, which allow does not list; \
                     add it to allow",
                    rule.host()
                ));
            }
        }
        Ok(())
    }

    /// Reads a policy written as `sandlot.toml`'s `[policy]` section is (a `preset`
    /// and overrides); `origin` names it in errors, which give the key and the line.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Policy> {
        let invalid = |reason: String| Error::Config {
            path: origin.to_path_buf(),
            reason,
        };
        let settings: PolicySettings = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        settings.policy().map_err(invalid)
    }

    /// A preset's name (`strict`, `standard`, `permissive`) or the path of a policy
    /// file, as `--policy` takes it.
    pub fn from_preset_or_file(value: &str) -> Result<Policy> {
        if let Some(preset) = Preset::named(value) {
            return Ok(preset.policy());
        }
        let path = Path::new(value);
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            reason: format!(
                "{e}; --policy takes a file or one of {}",
                Preset::ALL.map(Preset::name).join(", ")
            ),
        })?;
        Policy::from_toml(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_order_from_strict_to_permissive_and_standard_is_the_default() {
        assert_eq!(Preset::Standard.policy(), Policy::default());
        let (strict, permissive) = (Preset::Strict.policy(), Preset::Permissive.policy());
        assert_eq!(strict.network, Network::Off);
        assert_eq!(permissive.network, Network::On);
        assert!(strict.pids_limit < Policy::default().pids_limit);
        assert!(permissive.pids_limit > Policy::default().pids_limit);
        // Even the permissive preset keeps the kernel-level hardening.
        assert!(permissive.drop_capabilities && permissive.no_new_privileges);
        assert_eq!(permissive.seccomp, Seccomp::EngineDefault);
    }

    #[test]
    fn presets_are_ordered_by_looseness_and_every_loosened_field_is_named() {
        let (strict, standard, permissive) = (
            Preset::Strict.policy(),
            Preset::Standard.policy(),
            Preset::Permissive.policy(),
        );
        assert!(strict.looser_than(&standard).is_empty());
        assert!(standard.looser_than(&permissive).is_empty());
        assert!(standard.looser_than(&standard).is_empty());
        let loosened = permissive.looser_than(&strict);
        assert!(loosened.contains(&PolicyField::Network), "{loosened:?}");
        assert!(
            loosened.contains(&PolicyField::ReadOnlyRoot),
            "{loosened:?}"
        );

        let base = Policy::default();
        let root = Policy {
            uid: 0,
            ..base.clone()
        };
        assert_eq!(root.looser_than(&base), [PolicyField::Uid]);
        let other_user = Policy {
            uid: 4242,
            ..base.clone()
        };
        assert!(other_user.looser_than(&base).is_empty());
        let reports_only = base.clone().with_block_at(None);
        assert_eq!(reports_only.looser_than(&base), [PolicyField::BlockAt]);
        let blocks_more = base.clone().with_block_at(Some(Severity::Medium));
        assert!(blocks_more.looser_than(&base).is_empty());
        let unconfined = Policy {
            seccomp: Seccomp::Unconfined,
            ..base.clone()
        };
        assert_eq!(unconfined.looser_than(&base), [PolicyField::Seccomp]);
        // 0 is no limit to the engines, so it is the loosest of all.
        let unlimited = Policy {
            pids_limit: 0,
            cpu_millis: 0,
            workdir_size: 0,
            ..base.clone()
        };
        assert_eq!(
            unlimited.looser_than(&base),
            [
                PolicyField::PidsLimit,
                PolicyField::CpuMillis,
                PolicyField::WorkdirSize
            ]
        );
    }

    #[test]
    fn analysis_can_be_turned_off_and_that_is_looser_than_any_gate() {
        let off = Policy::from_toml("analyze = false\n", "p.toml".as_ref()).unwrap();
        assert!(!off.analyze);
        assert_eq!(off.looser_than(&Policy::default()), [PolicyField::Analyze]);
        assert!(Policy::default().looser_than(&off).is_empty());
        // `never` says the same as analyze = false does about blocking.
        let never = Policy::from_toml("analyze = false\nblock_at = \"never\"\n", "p.toml".as_ref());
        assert!(never.is_ok(), "{never:?}");
        let err = Policy::from_toml("analyze = false\nblock_at = \"high\"\n", "p.toml".as_ref())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("analyze = false") && err.contains("block_at = \"high\""),
            "{err}"
        );
    }

    #[test]
    fn an_allow_list_is_tighter_than_on_and_narrower_lists_are_tighter_still() {
        let list = |entries: &str| Policy {
            network: Network::AllowList,
            allow: entries.parse().unwrap(),
            ..Policy::default()
        };
        let on = Policy {
            network: Network::On,
            ..Policy::default()
        };
        let install_only = Policy::default();
        let wide = list("pypi.org *.pythonhosted.org");
        assert!(wide.looser_than(&on).is_empty());
        assert!(list("pypi.org").looser_than(&wide).is_empty());
        assert_eq!(list("evil.net").looser_than(&wide), [PolicyField::Network]);
        // Neither holds the other: installs anywhere, or code to a few places.
        assert_eq!(wide.looser_than(&install_only), [PolicyField::Network]);
        assert_eq!(install_only.looser_than(&wide), [PolicyField::Network]);
        assert!(Preset::Strict.policy().looser_than(&wide).is_empty());
    }

    #[test]
    fn an_allow_list_is_read_from_a_file_and_needs_its_network() {
        let policy = Policy::from_toml(
            "network = \"allow-list\"\nallow = [\"pypi.org\", \"10.0.0.0/8\"]\n",
            "p.toml".as_ref(),
        )
        .unwrap();
        assert_eq!(policy.network, Network::AllowList);
        assert_eq!(policy.allow.to_string(), "pypi.org, 10.0.0.0/8");
        let err = Policy::from_toml(
            "network = \"allow-list\"\nallow = [\"pypi.org:443\"]\n",
            "p.toml".as_ref(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("pypi.org:443") && err.contains("line 2"),
            "{err}"
        );
        let err = Policy::from_toml("allow = [\"pypi.org\"]\n", "p.toml".as_ref())
            .unwrap_err()
            .to_string();
        assert!(err.contains("network = \"allow-list\""), "{err}");
    }

    #[test]
    fn files_override_their_preset_and_errors_name_the_key_and_line() {
        let policy = Policy::from_toml(
            "preset = \"permissive\"\nnetwork = \"install-only\"\nblock_at = \"high\"\n",
            "p.toml".as_ref(),
        )
        .unwrap();
        assert_eq!(policy.network, Network::InstallOnly);
        assert_eq!(policy.block_at, Some(Severity::High));
        assert!(!policy.read_only_root, "the rest is the preset's");

        let err = Policy::from_toml("\nnetwrk = \"off\"\n", "p.toml".as_ref())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("p.toml") && err.contains("netwrk") && err.contains("line 2"),
            "{err}"
        );
        let err = Policy::from_toml("network = \"sometimes\"\n", "p.toml".as_ref())
            .unwrap_err()
            .to_string();
        assert!(err.contains("sometimes") && err.contains("line 1"), "{err}");
        let err = Policy::from_toml("pids_limit = 0\n", "p.toml".as_ref())
            .unwrap_err()
            .to_string();
        assert!(err.contains("pids_limit"), "{err}");
        let gate = Policy::from_toml(
            "report_at = \"low\"\nblock_at = \"high\"\n",
            "p.toml".as_ref(),
        )
        .unwrap();
        assert_eq!(
            [Severity::Info, Severity::Medium, Severity::High].map(|s| gate.gate(s)),
            [Gate::Ignore, Gate::Warn, Gate::Block]
        );
        let err = Policy::from_toml(
            "report_at = \"high\"\nblock_at = \"low\"\n",
            "p.toml".as_ref(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("report_at") && err.contains("block_at"),
            "{err}"
        );
        let err = Policy::from_preset_or_file("/nonexistent/policy.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("strict, standard, permissive"), "{err}");
    }
}

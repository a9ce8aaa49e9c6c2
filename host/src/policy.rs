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
//! [`Execution`]: crate::Execution

use crate::language::Severity;
use serde::Serialize;

/// When a container sandbox may reach the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
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
}

/// Seccomp filtering of a container's system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Seccomp {
    /// The engine's default profile (Docker's and Podman's block about 50 calls, such
    /// as `mount`, `kexec_load` and `bpf`).
    #[default]
    EngineDefault,
    /// No filtering. Only for trusted code that needs a blocked call.
    Unconfined,
}

/// What the host allows a sandbox. The container fields apply to the Docker and Podman
/// backends; the wasm backend never has a network, a root filesystem or capabilities,
/// whatever the policy says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Policy {
    /// Refuse code with a finding at or above this severity; `None` only reports
    /// findings (they are in every [`Execution`](crate::Execution)).
    pub block_at: Option<Severity>,
    /// When the sandbox may reach the network.
    pub network: Network,
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
}

impl Default for Policy {
    /// Blocks only what is clearly hostile (critical findings, such as a fork bomb):
    /// the sandbox, not a pattern match, is what keeps the host safe. Containers get
    /// every hardening on: no network but for installs, read-only root, uid 1000, no
    /// capabilities, no new privileges, 256 processes, one CPU, a 1 GiB workspace.
    fn default() -> Self {
        Policy {
            block_at: Some(Severity::Critical),
            network: Network::InstallOnly,
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

//! What a backend can do, as a list a session, `auto` and a user can read.

use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;

/// Something a backend can do. Behaviour every backend has (files in and out,
/// timeouts, output caps, artifacts, snapshots of the workspace's files) is not
/// listed: it is part of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Capability {
    /// Carries out the handler's whole plan for each run (files, installs, builds,
    /// commands): runs get [`Workload::Plan`](crate::backend::Workload::Plan). Without it, runs get
    /// [`Workload::Code`](crate::backend::Workload::Code) for a long-lived interpreter.
    RunsPlans,
    /// Variables, functions and imports survive from one run to the next.
    PersistentState,
    /// Starts a language's kernel (a long-lived driver its handler describes) and
    /// runs code in it, so state persists for languages that have one.
    Kernels,
    /// A run past its limit is interrupted and the session keeps its state (otherwise
    /// the interpreter is replaced, and the run says so with
    /// [`SessionState::Restarted`](crate::backend::SessionState::Restarted)).
    Interrupts,
    /// Runs shell command lines ([`Workload::Shell`](crate::backend::Workload::Shell)).
    Shell,
    /// Installs libraries a run asks for (with the network, when the policy allows).
    InstallLibraries,
    /// Turns the sandbox's network on and off as the policy says.
    NetworkControl,
    /// Runs a container image a session names.
    Images,
    /// Enforces a memory cap on the sandbox.
    MemoryLimit,
    /// Code in the sandbox can call the session's tools ([`crate::tool`]).
    Tools,
    /// A snapshot holds the interpreter's memory (variables, functions, imports), and
    /// restores it exactly ([`crate::snapshot`]); without it a snapshot holds the
    /// workspace's files only.
    SnapshotMemory,
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Capability::RunsPlans => "runs-plans",
            Capability::PersistentState => "persistent-state",
            Capability::Kernels => "kernels",
            Capability::Interrupts => "interrupts",
            Capability::Shell => "shell",
            Capability::InstallLibraries => "install-libraries",
            Capability::NetworkControl => "network-control",
            Capability::Images => "images",
            Capability::MemoryLimit => "memory-limit",
            Capability::Tools => "tools",
            Capability::SnapshotMemory => "snapshot-memory",
        })
    }
}

/// What a backend can do for a language.
///
/// ```
/// use sandlot::backend::{Capabilities, Capability};
/// let caps = Capabilities::new([Capability::Shell, Capability::RunsPlans]);
/// assert!(caps.has(Capability::Shell) && !caps.has(Capability::PersistentState));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Capabilities(BTreeSet<Capability>);

impl Capabilities {
    /// The capabilities listed.
    pub fn new(capabilities: impl IntoIterator<Item = Capability>) -> Capabilities {
        Capabilities(capabilities.into_iter().collect())
    }

    /// Whether `capability` is among them.
    pub fn has(&self, capability: Capability) -> bool {
        self.0.contains(&capability)
    }

    /// Adds `capability`.
    pub fn insert(&mut self, capability: Capability) {
        self.0.insert(capability);
    }

    /// Every capability, in a stable order.
    pub fn iter(&self) -> impl Iterator<Item = Capability> + '_ {
        self.0.iter().copied()
    }
}

//! The core of sandlot, which runs untrusted, often model-written, code and hands back
//! what it printed, its exit code and the files it made: the backend contract,
//! sessions, policy, the plugin host and pools. It names no concrete backend: each
//! comes from a [`BackendProvider`]. Applications depend on the `sandlot` crate, which
//! re-exports all of this and registers the providers its features enable.
//!
//! Languages are plugins: each is a WebAssembly component implementing the
//! `sandlot:plugin` WIT contract (`wit/` in the repository). Nine language handlers are
//! built in; more load from plugin directories without recompiling anything. Code runs
//! on a [`backend`]: the embedded wasm backend, Docker or Podman, or one an
//! application registers itself.
//!
//! ```
//! # fn main() -> Result<(), sandlot::Error> {
//! let host = sandlot::PluginHost::builder().no_cache().load()?;
//! let java = host.language("java")?;
//! let plan = java.plan(
//!     "public class Hello { public static void main(String[] a) { System.out.println(1); } }",
//!     &[],
//!     &sandlot::PlanOptions::default(),
//! )?;
//! assert_eq!(plan.files[0].path, "Hello.java");
//! let argv: Vec<_> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
//! assert_eq!(argv, ["javac -encoding UTF-8 -d . Hello.java", "java -cp . Hello"]);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod artifact;
pub mod backend;
#[doc(hidden)]
pub mod capability;
pub mod config;
pub mod dirs;
pub mod egress;
#[doc(hidden)]
pub mod entry;
#[doc(hidden)]
pub mod error;
pub mod execution;
#[doc(hidden)]
pub mod fuzzing;
pub mod interrupt;
pub mod language;
pub mod layout;
pub mod library;
pub mod plugin;
pub mod policy;
#[doc(hidden)]
pub mod pool_options;
pub mod provider;
pub mod request;
pub mod sandbox_path;
pub mod secret;
pub mod service;
pub mod session;
pub mod snapshot;
pub mod sync;
pub mod tool;
pub mod toolchain;
#[doc(hidden)]
pub mod transfer;
#[doc(hidden)]
pub mod wasmtime_engine;

pub use artifact::{Artifact, EarlierOutput};
pub use backend::{BackendName, Capability, EndReason, Outcome, SessionState};
pub use backend::{ListEntry, Listing};
pub use config::Config;
pub use entry::{Chosen, Sandlot, SandlotBuilder, SessionBuilder};
pub use error::{Error, ErrorKind, PluginSource, Result};
pub use execution::Execution;
pub use interrupt::Interrupt;
pub use language::{
    Command, Finding, KernelSpec, LanguageCapability, LanguageInfo, Phase, Plan, PlanOptions,
    RestrictedName, Restriction, RestrictionKind, Severity, SourceFile,
};
pub use plugin::{HandlerLimits, LanguageHandler, PluginHost, PluginHostBuilder};
pub use policy::{Network, Policy, PolicyField, Seccomp};
pub use provider::{BackendProvider, ProviderContext};
pub use request::{BackendChoice, OpenRequest};
pub use sandbox_path::SandboxPath;
pub use session::{AsyncSession, Limits, RunOptions, Session};
pub use snapshot::{Snapshot, SnapshotId, SnapshotKey, SnapshotTrust};
pub use tool::{Tool, ToolError, ToolSet};
pub use toolchain::Toolchain;
pub use transfer::Copied;

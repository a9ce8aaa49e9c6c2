//! sandlot runs untrusted, often model-written, code and hands back what it printed,
//! its exit code and the files it made.
//!
//! Languages are plugins: each is a WebAssembly component implementing the
//! `sandlot:plugin` WIT contract (`wit/` in the repository). Nine language handlers are
//! built in; more load from plugin directories without recompiling anything. Code runs
//! on a [backend](backend): the embedded wasm backend, Docker or Podman, or one an
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
mod capability;
pub mod config;
pub mod dirs;
pub mod egress;
mod entry;
mod error;
pub mod execution;
#[doc(hidden)]
pub mod fuzzing;
pub mod language;
pub mod layout;
mod listener;
pub mod manager;
pub mod mcp;
pub mod plugin;
pub mod policy;
mod pool_options;
pub mod provider;
pub mod runtimes;
pub mod sandbox_path;
pub mod secret;
pub mod serve;
pub mod service;
pub mod session;
mod transfer;
pub(crate) mod wasmtime_engine;

pub use artifact::{Artifact, EarlierOutput};
pub use backend::docker::{ContainerBackend, Engine};
pub use backend::{BackendName, Capability, EndReason, Outcome, SessionState};
pub use config::Config;
pub use entry::{BackendChoice, Chosen, Sandlot, SandlotBuilder, SessionBuilder};
pub use error::{Error, ErrorKind, PluginSource, Result};
pub use execution::Execution;
pub use language::{
    Command, Finding, KernelSpec, LanguageCapability, LanguageInfo, Phase, Plan, PlanOptions,
    RestrictedName, Restriction, RestrictionKind, Severity, SourceFile,
};
pub use plugin::{HandlerLimits, LanguageHandler, PluginHost, PluginHostBuilder};
pub use policy::{Network, Policy, PolicyField, Seccomp};
pub use provider::{BackendProvider, ProviderContext};
pub use sandbox_path::{ListEntry, Listing, SandboxPath};
pub use session::{AsyncSession, Limits, RunOptions, Session};
pub use transfer::Copied;

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of `docs/embedding.md`, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/embedding.md")]
pub struct EmbeddingDoctests;

/// The Rust examples of `docs/containers.md`, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/containers.md")]
pub struct ContainersDoctests;

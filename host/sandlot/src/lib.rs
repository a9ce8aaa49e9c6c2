//! sandlot runs untrusted, often model-written, code and hands back what it printed,
//! its exit code and the files it made.
//!
//! This crate is the one an application depends on. It re-exports [`sandlot_core`]
//! (sessions, policy, the plugin host, pools and the backend contract) and, by its
//! features, the backends and servers:
//!
//! | feature      | crate                | adds                                               |
//! |--------------|----------------------|----------------------------------------------------|
//! | `wasm` (default) | [`wasm`]         | interpreters that are WebAssembly, run in-process  |
//! | `docker`     | [`docker`], [`container`] | Docker and Podman                             |
//! | `kubernetes` | [`kubernetes`], [`container`] | pods of a cluster                         |
//! | `native`     | [`native`], [`container`] | Linux namespaces by bubblewrap: no engine     |
//! | `server`     | [`server`]           | the session manager both servers share             |
//! | `http`       | `server::serve`      | `sandlot serve`: the HTTP API (axum)               |
//! | `mcp`        | `server::mcp`        | `sandlot mcp`: the MCP server (rmcp)               |
//! | `e2b`        | `server::e2b`        | `sandlot serve --e2b`: E2B's protocol, for its SDKs |
//! | `full`       |                      | all of the above                                   |
//!
//! [`providers`] are the backend providers the enabled features bring, in the order
//! `auto` tries them; [`from_environment`], [`from_config`] and [`builder`] make a
//! [`Sandlot`] with them.
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

pub use sandlot_core::*;

#[cfg(any(feature = "docker", feature = "kubernetes", feature = "native"))]
pub use sandlot_container as container;
#[cfg(feature = "docker")]
pub use sandlot_docker as docker;
#[cfg(feature = "kubernetes")]
pub use sandlot_kubernetes as kubernetes;
#[cfg(feature = "native")]
pub use sandlot_native as native;
#[cfg(feature = "server")]
pub use sandlot_server as server;
#[cfg(feature = "wasm")]
pub use sandlot_wasm as wasm;

use sandlot_core::dirs::Overrides;
use std::sync::Arc;

/// The backend providers of the enabled features, in the order `auto` tries them:
/// `wasm`, `native` (where it enforces every limit: see
/// [`native::NativeProvider`]), `docker`, `podman`, `kubernetes`.
// With one feature only, clippy sees a lone push after `new`.
#[allow(clippy::vec_init_then_push)]
pub fn providers() -> Vec<Arc<dyn BackendProvider>> {
    #[allow(unused_mut)]
    let mut providers: Vec<Arc<dyn BackendProvider>> = Vec::new();
    #[cfg(feature = "wasm")]
    providers.push(Arc::new(wasm::WasmProvider::default()));
    // Before the engines: the same agent and images, without a daemon, in a tenth of
    // the time. It is in `auto` only where it enforces every limit they do.
    #[cfg(feature = "native")]
    providers.push(Arc::new(native::NativeProvider::default()));
    #[cfg(feature = "docker")]
    {
        providers.push(Arc::new(docker::ContainerProvider::new(
            docker::Engine::Docker,
        )));
        providers.push(Arc::new(docker::ContainerProvider::new(
            docker::Engine::Podman,
        )));
    }
    #[cfg(feature = "kubernetes")]
    providers.push(Arc::new(kubernetes::KubernetesProvider::default()));
    providers
}

/// Starts configuring a [`Sandlot`] over `plugins`, with the [`providers`] of the
/// enabled features (more can be added: [`SandlotBuilder::provider`]).
pub fn builder(plugins: PluginHost) -> SandlotBuilder {
    Sandlot::builder(plugins).providers(providers())
}

/// A [`Sandlot`] with plugins, runtimes and caches from the user's configuration file
/// (see [`Config::discover`]) and environment, in the order [`dirs`] documents, and
/// the [`providers`] of the enabled features.
pub fn from_environment() -> Result<Sandlot> {
    SandlotBuilder::from_environment()?
        .providers(providers())
        .build()
}

/// A [`Sandlot`] from `config`, the environment and `overrides` (the CLI's global
/// flags), with the [`providers`] of the enabled features.
pub fn from_config(config: Config, overrides: &Overrides) -> Result<Sandlot> {
    SandlotBuilder::from_config(config, overrides)?
        .providers(providers())
        .build()
}

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(all(doctest, feature = "full"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of `docs/embedding.md`, compiled and run as doc tests.
#[cfg(all(doctest, feature = "full"))]
#[doc = include_str!("../../../docs/embedding.md")]
pub struct EmbeddingDoctests;

/// The Rust example of `docs/tools.md`, compiled and run as a doc test.
#[cfg(all(doctest, feature = "full"))]
#[doc = include_str!("../../../docs/tools.md")]
pub struct ToolsDoctests;

/// The Rust examples of `docs/containers.md`, compiled and run as doc tests.
#[cfg(all(doctest, feature = "full"))]
#[doc = include_str!("../../../docs/containers.md")]
pub struct ContainersDoctests;

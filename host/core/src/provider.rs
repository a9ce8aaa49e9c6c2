//! Backend providers: what makes each backend a [`Sandlot`](crate::Sandlot) holds by
//! name.
//!
//! A `Sandlot` names no backend itself. Each backend comes from a [`BackendProvider`]
//! registered with [`SandlotBuilder::provider`](crate::SandlotBuilder::provider): the
//! provider says the name, whether `auto` tries it, and makes the backend when a
//! session first needs it (a container engine is connected then, not before). The
//! built-in providers (the `sandlot` crate's `providers()`, by its features) are
//! `wasm`, `native`, `docker`, `podman` and `kubernetes`;
//! an application registers its own the same way, or hands over a ready backend with
//! [`SandlotBuilder::backend`](crate::SandlotBuilder::backend).
//!
//! ```
//! use sandlot::backend::*;
//! use sandlot::provider::{BackendProvider, ProviderContext};
//! use std::sync::Arc;
//!
//! /// Makes the wasm backend again under another name.
//! struct Second;
//!
//! impl BackendProvider for Second {
//!     fn name(&self) -> BackendName {
//!         BackendName::new("second").unwrap()
//!     }
//!     fn connect(&self, context: &ProviderContext) -> sandlot::Result<Arc<dyn Backend>> {
//!         Ok(Arc::new(sandlot::wasm::WasmBackend::discover(
//!             context.runtimes_dir(),
//!             context.plugins().runtime_components(),
//!             None,
//!         )))
//!     }
//! }
//!
//! # fn main() -> sandlot::Result<()> {
//! let plugins = sandlot::PluginHost::builder().no_cache().load()?;
//! let sandlot = sandlot::builder(plugins).provider(Arc::new(Second)).build()?;
//! assert!(sandlot.backend_names().iter().any(|n| n == "second"));
//! # Ok(())
//! # }
//! ```

use crate::backend::{Backend, BackendName, Needs};
use crate::config::Config;
use crate::error::Result;
use crate::plugin::PluginHost;
use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a provider is given to make its backend: the configuration, the plugins and
/// the directories in force for the [`Sandlot`](crate::Sandlot).
#[derive(Debug, Clone)]
pub struct ProviderContext {
    pub(crate) config: Arc<Config>,
    pub(crate) plugins: Arc<PluginHost>,
    pub(crate) runtimes_dir: PathBuf,
    pub(crate) cache_dir: Option<PathBuf>,
}

impl ProviderContext {
    /// The configuration (engine endpoints, the cluster, images per language).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The loaded plugins (runtime components among them).
    pub fn plugins(&self) -> &PluginHost {
        &self.plugins
    }

    /// Where the wasm runtimes are installed (see [`crate::dirs`]).
    pub fn runtimes_dir(&self) -> &Path {
        &self.runtimes_dir
    }

    /// Where compiled components are cached; `None` caches nothing on disk.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }
}

/// What a front end shows while a provider prepares a session's backend.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// The runtime for a language is being installed, once.
    Installing {
        /// The language.
        language: String,
    },
    /// A step of the installation.
    Step(String),
    /// The runtime is being compiled (CPython takes about 90 s on two cores): once,
    /// unless the compiled form cannot be kept.
    Compiling {
        /// The language.
        language: String,
        /// Why the compiled form cannot be kept, so every run compiles again (see
        /// [`ComponentCache::unwritable`](crate::wasmtime_engine::cache::ComponentCache::unwritable)).
        uncached: Option<String>,
    },
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Installing { language } => {
                write!(
                    f,
                    "no {language} runtime installed yet; installing it (once)"
                )
            }
            Progress::Step(step) => f.write_str(step),
            Progress::Compiling { language, uncached } => {
                // Only CPython is slow enough to warn about.
                let cost = match language.as_str() {
                    "python" => " (CPython takes about 90 s on 2 cores)",
                    _ => "",
                };
                match uncached {
                    None => write!(
                        f,
                        "compiling the {language} runtime{cost}; this happens once"
                    ),
                    Some(why) => write!(
                        f,
                        "compiling the {language} runtime{cost}, and again on every run: \
                         {why}; make it writable, or set SANDLOT_CACHE_DIR (or cache_dir \
                         in sandlot.toml) to a directory that is"
                    ),
                }
            }
        }
    }
}

/// How a session came to ask a provider to prepare. Exhaustive on purpose: a provider
/// decides for each way of asking, and a new one must make it decide again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// The session names the backend: prepare whatever it can.
    ByName,
    /// `auto` asks whether the backend could serve once prepared: prepare only if it
    /// then would.
    ByAuto,
}

/// What [`BackendProvider::prepare`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Prepared {
    /// Nothing: the backend serves the session as it is, or the provider cannot
    /// make it serve it.
    Nothing,
    /// It installed something the backend already made cannot see: the backend is
    /// made again.
    Remake,
}

/// Makes one backend of a [`Sandlot`](crate::Sandlot).
///
/// Registered with [`SandlotBuilder::provider`](crate::SandlotBuilder::provider); the
/// `Sandlot` calls [`connect`](BackendProvider::connect) when a session first needs
/// the backend (or when it is built, for an [`eager`](BackendProvider::eager) one),
/// keeps what it made, and puts it in a pool if one was asked for. A failed connect
/// is not remembered: an engine started later is found by the next session.
pub trait BackendProvider: Any + Send + Sync {
    /// The name the backend is held and chosen by.
    fn name(&self) -> BackendName;

    /// Whether `auto` tries the backend under `config` (default: yes). The
    /// Kubernetes provider says no unless sandlot.toml has a `[kubernetes]` section:
    /// the ambient kubeconfig may point at any cluster.
    fn in_auto(&self, _config: &Config) -> bool {
        true
    }

    /// Whether the backend is made when the `Sandlot` is built rather than on first
    /// use (default: no). An in-process backend that cannot fail to start says yes.
    fn eager(&self) -> bool {
        false
    }

    /// Makes the backend.
    fn connect(&self, context: &ProviderContext) -> Result<Arc<dyn Backend>>;

    /// Whether [`prepare`](BackendProvider::prepare) would do something for a session
    /// with `needs` (default: no): a front end then takes the time, and says so.
    fn needs_preparing(
        &self,
        _context: &ProviderContext,
        _needs: &Needs<'_>,
        _asked: Asked,
    ) -> bool {
        false
    }

    /// Gets ready to serve a session with `needs` that the backend cannot serve as it
    /// is, if the provider knows how: the wasm provider installs the language's
    /// runtime on first use. Default: nothing.
    fn prepare(
        &self,
        _context: &ProviderContext,
        _needs: &Needs<'_>,
        _asked: Asked,
        _progress: &mut dyn FnMut(Progress),
    ) -> Result<Prepared> {
        Ok(Prepared::Nothing)
    }
}

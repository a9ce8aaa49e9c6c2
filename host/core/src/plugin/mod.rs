//! Plugins: finding, checking, compiling, caching and calling WebAssembly components.
//!
//! A [`PluginHost`] loads the built-in language handlers, then every `*.wasm` in the
//! plugin directories, in order of precedence. A plugin that fails to load — not a
//! component, another world, a future contract, a trap, a loop, a memory hog — is
//! reported with the reason and skipped; the others keep working. A plugin with the
//! same language id as one loaded before it replaces that one, and the report says so.

pub(crate) mod builtin;
pub(crate) mod contract;
pub(crate) mod handler;
pub(crate) mod manifest;

pub use crate::wasmtime_engine::cache::CacheOutcome;
pub use contract::{Inspection, PluginKind, SUPPORTED_API_VERSIONS};
pub use handler::{HandlerLimits, LanguageHandler};
pub use manifest::Manifest;

use crate::dirs::{Dirs, Origin, PluginDir};
use crate::error::{Error, PluginSource, Result};
use crate::policy::Restrictions;
use crate::wasmtime_engine::{self as engine, cache};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What became of one plugin the host looked at.
#[derive(Debug)]
#[non_exhaustive]
pub enum PluginStatus {
    /// Serving its language.
    Active {
        /// The plugin it replaced for the same language id, if any.
        replaces: Option<PluginSource>,
    },
    /// Loaded, but a plugin of higher precedence serves the same language.
    Shadowed {
        /// That plugin.
        by: PluginSource,
    },
    /// Its manifest says `enabled = false`.
    Disabled,
    /// A runtime component: handed to the wasm backend, which asks it what it serves
    /// when a session first needs a language no runtime before it serves
    /// (`sandlot runtimes list` shows what it said).
    Runtime,
    /// It could not be loaded.
    Failed(Error),
}

/// One plugin the host looked at, and what became of it.
#[derive(Debug)]
pub struct PluginReport {
    /// Where it came from.
    pub source: PluginSource,
    /// Its kind, if it got far enough to tell.
    pub kind: Option<PluginKind>,
    /// The contract version it was built for, if it got far enough to tell.
    pub api_version: Option<String>,
    /// The language it serves, if it is a loaded language handler.
    pub language: Option<String>,
    /// Its manifest's description.
    pub description: Option<String>,
    /// How its compiled form was obtained.
    pub cache: Option<CacheOutcome>,
    /// Time spent loading it (reading, checking, compiling or loading from cache,
    /// calling `info`).
    pub load_time: Duration,
    /// What became of it.
    pub status: PluginStatus,
}

/// Configures and loads a [`PluginHost`].
///
/// ```
/// use std::time::Duration;
/// # fn main() -> Result<(), sandlot::Error> {
/// let host = sandlot::PluginHost::builder()
///     .no_cache()
///     .handler_limits(sandlot::HandlerLimits {
///         memory: 32 << 20,
///         timeout: Duration::from_millis(500),
///     })
///     .load()?;
/// assert!(host.language("python").is_ok());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PluginHostBuilder {
    builtins: bool,
    dirs: Vec<PluginDir>,
    cache_dir: Option<PathBuf>,
    limits: HandlerLimits,
}

impl Default for PluginHostBuilder {
    /// Built-in handlers, no plugin directories, and the cache directory the
    /// environment names (see [`crate::dirs`]).
    fn default() -> Self {
        let dirs = Dirs::resolve(&crate::config::Config::default(), &Default::default());
        PluginHostBuilder {
            builtins: true,
            dirs: Vec::new(),
            cache_dir: dirs.cache.value,
            limits: HandlerLimits::default(),
        }
    }
}

impl PluginHostBuilder {
    /// Built-in handlers plus every plugin directory and the cache directory of
    /// `dirs`, as the CLI and [`SandlotBuilder::from_environment`](crate::SandlotBuilder::from_environment) load them.
    pub fn from_dirs(dirs: &Dirs) -> PluginHostBuilder {
        PluginHostBuilder {
            builtins: true,
            dirs: dirs.plugins.clone(),
            cache_dir: dirs.cache.value.clone(),
            limits: HandlerLimits::default(),
        }
    }

    /// Adds a plugin directory that must exist. Directories added later take precedence
    /// over earlier ones, and all of them over the built-in handlers.
    pub fn plugin_dir(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.dirs.push(PluginDir {
            path: path.into(),
            required: true,
            origin: Origin::Flag,
        });
        self
    }

    /// Adds a plugin directory that is skipped when it does not exist (such as the
    /// default `$XDG_CONFIG_HOME/sandlot/plugins`).
    pub fn optional_plugin_dir(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.dirs.push(PluginDir {
            path: path.into(),
            required: false,
            origin: Origin::Flag,
        });
        self
    }

    /// Whether to load the built-in handlers (default: yes).
    pub fn builtins(&mut self, load: bool) -> &mut Self {
        self.builtins = load;
        self
    }

    /// Caches compiled components in `dir` (default: see [`crate::dirs`]).
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Compiles every component in memory, caching nothing on disk.
    pub fn no_cache(&mut self) -> &mut Self {
        self.cache_dir = None;
        self
    }

    /// Limits of every call into a language handler.
    pub fn handler_limits(&mut self, limits: HandlerLimits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// Loads every plugin. Fails only when a required plugin directory cannot be read;
    /// a plugin that cannot be loaded is reported in [`PluginHost::reports`].
    pub fn load(&self) -> Result<PluginHost> {
        let cache = cache::ComponentCache::new(self.cache_dir.clone());
        let mut host = PluginHost {
            handlers: Vec::new(),
            by_id: HashMap::new(),
            reports: Vec::new(),
            runtimes: Vec::new(),
        };
        if self.builtins {
            for (name, bytes) in builtin::HANDLERS {
                let source = PluginSource::Builtin { name };
                host.add(load_plugin(source, bytes, None, &cache, self.limits));
            }
        }
        for dir in &self.dirs {
            for path in wasm_files(dir)? {
                let source = PluginSource::File { path: path.clone() };
                let started = Instant::now();
                let loaded = Manifest::beside(&path).and_then(|manifest| {
                    let bytes = std::fs::read(&path).map_err(|e| Error::ReadPlugin {
                        plugin: source.clone(),
                        source: e,
                    })?;
                    Ok((manifest, bytes))
                });
                let report = match loaded {
                    Ok((manifest, bytes)) => {
                        load_plugin(source, &bytes, manifest, &cache, self.limits)
                    }
                    Err(error) => Loaded::failed(source, error, started),
                };
                host.add(report);
            }
        }
        Ok(host)
    }
}

/// The loaded plugins.
#[derive(Debug)]
pub struct PluginHost {
    /// Active handlers.
    handlers: Vec<LanguageHandler>,
    /// Language id → index into `handlers`.
    by_id: HashMap<String, usize>,
    reports: Vec<PluginReport>,
    /// Runtime components found in plugin directories, in load order.
    runtimes: Vec<PathBuf>,
}

impl PluginHost {
    /// A builder with the defaults: built-in handlers, the default cache directory, no
    /// plugin directories. See [`crate::Config`] for the directories a user configures.
    pub fn builder() -> PluginHostBuilder {
        PluginHostBuilder::default()
    }

    /// Every active language handler, sorted by language id.
    pub fn languages(&self) -> Vec<&LanguageHandler> {
        let mut handlers: Vec<_> = self.handlers.iter().collect();
        handlers.sort_by(|a, b| a.info().id.cmp(&b.info().id));
        handlers
    }

    /// The handler for `name`: a language id or an alias, case-insensitive. An id
    /// always wins over an alias; among aliases the plugin of highest precedence wins.
    pub fn language(&self, name: &str) -> Result<&LanguageHandler> {
        let name = name.trim().to_ascii_lowercase();
        if let Some(&index) = self.by_id.get(&name) {
            return Ok(&self.handlers[index]);
        }
        self.handlers
            .iter()
            .rev()
            .find(|h| h.info().aliases.contains(&name))
            .ok_or_else(|| Error::UnknownLanguage {
                name,
                known: self
                    .languages()
                    .iter()
                    .map(|h| h.info().id.clone())
                    .collect(),
            })
    }

    /// Checks that every language `restricted` names is a loaded language, so a typo
    /// in `[policy.restricted.LANGUAGE]` is an error and not a restriction that
    /// silently applies to nothing.
    pub fn check_restricted(&self, restricted: &Restrictions) -> Result<()> {
        match restricted
            .languages()
            .find(|name| self.language(name).is_err())
        {
            None => Ok(()),
            Some(unknown) => Err(Error::InvalidPolicy {
                reason: format!(
                    "it restricts modules or calls of `{unknown}`, which is no loaded \
                     language (`sandlot languages` lists them); fix or drop \
                     [policy.restricted.{unknown}]"
                ),
            }),
        }
    }

    /// The handler whose file extension is `extension` (without the dot).
    pub fn language_for_extension(&self, extension: &str) -> Option<&LanguageHandler> {
        self.handlers
            .iter()
            .rev()
            .find(|h| h.info().file_extension.eq_ignore_ascii_case(extension))
    }

    /// Every plugin looked at, in load order (built-ins first), with what became of it.
    pub fn reports(&self) -> &[PluginReport] {
        &self.reports
    }

    /// The runtime components found in the plugin directories, in load order (the
    /// last takes precedence), for the wasm backend
    /// (the `sandlot-wasm` crate's `WasmBackend::discover`).
    pub fn runtime_components(&self) -> &[PathBuf] {
        &self.runtimes
    }

    fn add(&mut self, loaded: Loaded) {
        let Loaded {
            mut report,
            handler,
        } = loaded;
        if let (PluginStatus::Runtime, PluginSource::File { path }) =
            (&report.status, &report.source)
        {
            self.runtimes.push(path.clone());
        }
        if let Some(handler) = handler {
            let id = handler.info().id.clone();
            let replaces = match self.by_id.get(&id) {
                Some(&index) => {
                    let old = std::mem::replace(&mut self.handlers[index], handler);
                    let old_source = old.source().clone();
                    if let Some(old_report) = self.reports.iter_mut().find(|r| {
                        r.source == old_source && matches!(r.status, PluginStatus::Active { .. })
                    }) {
                        old_report.status = PluginStatus::Shadowed {
                            by: report.source.clone(),
                        };
                    }
                    Some(old_source)
                }
                None => {
                    self.by_id.insert(id, self.handlers.len());
                    self.handlers.push(handler);
                    None
                }
            };
            report.status = PluginStatus::Active { replaces };
        }
        self.reports.push(report);
    }
}

/// What loading one file gave.
struct Loaded {
    report: PluginReport,
    handler: Option<LanguageHandler>,
}

impl Loaded {
    fn failed(source: PluginSource, error: Error, started: Instant) -> Loaded {
        Loaded {
            report: PluginReport {
                source,
                kind: None,
                api_version: None,
                language: None,
                description: None,
                cache: None,
                load_time: started.elapsed(),
                status: PluginStatus::Failed(error),
            },
            handler: None,
        }
    }
}

fn load_plugin(
    source: PluginSource,
    bytes: &[u8],
    manifest: Option<Manifest>,
    cache: &cache::ComponentCache,
    limits: HandlerLimits,
) -> Loaded {
    let started = Instant::now();
    let manifest = manifest.unwrap_or_default();
    let inspection = match contract::inspect(bytes, &source) {
        Ok(inspection) => inspection,
        Err(error) => return Loaded::failed(source, error, started),
    };
    let mut report = PluginReport {
        source: source.clone(),
        kind: Some(inspection.kind),
        api_version: Some(inspection.api_version.clone()),
        language: None,
        description: manifest.description.clone(),
        cache: None,
        load_time: Duration::ZERO,
        status: PluginStatus::Disabled,
    };
    if !manifest.enabled {
        report.load_time = started.elapsed();
        return Loaded {
            report,
            handler: None,
        };
    }
    if inspection.kind == PluginKind::Runtime {
        report.status = PluginStatus::Runtime;
        report.load_time = started.elapsed();
        return Loaded {
            report,
            handler: None,
        };
    }
    let loaded = cache
        .load(engine::plugins(), bytes, &source)
        .and_then(|(component, outcome)| {
            report.cache = Some(outcome);
            LanguageHandler::new(&component, source, &inspection.api_version, limits)
        });
    report.load_time = started.elapsed();
    match loaded {
        Ok(handler) => {
            report.language = Some(handler.info().id.clone());
            Loaded {
                report,
                handler: Some(handler),
            }
        }
        Err(error) => {
            report.status = PluginStatus::Failed(error);
            Loaded {
                report,
                handler: None,
            }
        }
    }
}

/// The `*.wasm` files of `dir`, sorted by name so load order (and so precedence inside
/// one directory) does not depend on the file system.
fn wasm_files(dir: &PluginDir) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(&dir.path) {
        Ok(entries) => entries,
        Err(e) if !dir.required && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new())
        }
        Err(e) => {
            return Err(Error::PluginDir {
                path: dir.path.clone(),
                source: e,
            })
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::PluginDir {
            path: dir.path.clone(),
            source: e,
        })?;
        let path = entry.path();
        if path.extension().is_some_and(|ext| ext == "wasm") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// What a component declares, and for a language handler that loads, its info.
///
/// Used by `sandlot plugins inspect`; it compiles and calls the plugin (under the
/// usual limits) only if the header checks pass.
pub fn inspect_file(path: &Path) -> Result<(Inspection, Option<LanguageHandler>)> {
    let source = PluginSource::File {
        path: path.to_path_buf(),
    };
    let bytes = std::fs::read(path).map_err(|e| Error::ReadPlugin {
        plugin: source.clone(),
        source: e,
    })?;
    let inspection = contract::inspect(&bytes, &source)?;
    if inspection.kind != PluginKind::LanguageHandler {
        return Ok((inspection, None));
    }
    let component = cache::ComponentCache::new(None)
        .load(engine::plugins(), &bytes, &source)?
        .0;
    let handler = LanguageHandler::new(
        &component,
        source,
        &inspection.api_version,
        HandlerLimits::default(),
    )?;
    Ok((inspection, Some(handler)))
}

/// Checks that `bytes` (read from `path`) is a sandlot plugin of a supported contract
/// and says what it declares, without compiling it.
pub fn inspect_bytes(bytes: &[u8], path: &Path) -> Result<Inspection> {
    contract::inspect(
        bytes,
        &PluginSource::File {
            path: path.to_path_buf(),
        },
    )
}

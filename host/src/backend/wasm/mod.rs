//! The embedded backend: code runs in an interpreter that is itself WebAssembly,
//! under wasmtime, inside this process. No daemon, no container.
//!
//! Isolation the host applies to every sandbox: one preopened, writable scratch
//! directory (`/workspace`, the session's own), the runtime's files read-only, no
//! sockets, no inherited environment, a memory cap, a wall-clock deadline by epoch
//! interruption and capped output.

pub mod capture;
mod component;
mod input;
pub mod module;

use super::{Backend, BackendSession, RawOutput, RunRequest, SessionSpec};
use crate::error::{Error, Result};
use crate::wasmtime_engine::cache::{ComponentCache, FileLoadError};
use crate::wasmtime_engine::{self as engine, MemoryCap};
use capture::Capture;
use component::{ComponentRuntime, ComponentSession};
use input::Feed;
use module::{Protocol, RuntimeManifest};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::component::Component;
use wasmtime::{Instance, InstancePre, Linker, Module, Store, Trap, Val};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

/// Guest path of the session's working directory.
pub const WORKDIR: &str = "/workspace";

/// A runtime compiled and linked, ready to instantiate.
#[derive(Clone)]
enum Prepared {
    Module(Arc<InstancePre<SessionState>>),
    Component(Arc<ComponentRuntime>),
}

/// A runtime found on disk, compiled on first use.
struct RuntimeEntry {
    dir: PathBuf,
    manifest: RuntimeManifest,
    prepared: Mutex<Option<Prepared>>,
}

/// The wasm backend and the runtimes it knows.
pub struct WasmBackend {
    runtimes: Vec<RuntimeEntry>,
    cache: ComponentCache,
}

impl WasmBackend {
    /// Finds the runtimes installed under `runtimes_dir` (one folder each, with a
    /// `runtime.toml`). Compiles nothing yet. A broken manifest is an error naming it.
    pub fn discover(runtimes_dir: &Path, cache_dir: Option<PathBuf>) -> Result<WasmBackend> {
        let mut runtimes = Vec::new();
        if let Ok(entries) = std::fs::read_dir(runtimes_dir) {
            let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            dirs.sort();
            for dir in dirs {
                let path = dir.join("runtime.toml");
                if path.is_file() {
                    let manifest = RuntimeManifest::read(&path)?;
                    runtimes.push(RuntimeEntry {
                        dir,
                        manifest,
                        prepared: Mutex::new(None),
                    });
                }
            }
        }
        Ok(WasmBackend {
            runtimes,
            cache: ComponentCache::new(cache_dir),
        })
    }

    /// The manifests of the runtimes found, with their directories.
    pub fn runtimes(&self) -> impl Iterator<Item = (&Path, &RuntimeManifest)> {
        self.runtimes.iter().map(|r| (r.dir.as_path(), &r.manifest))
    }

    /// Whether the runtime for `language` still has to be compiled (slow: CPython
    /// takes about two minutes on two cores), so a caller can say so first.
    pub fn needs_compile(&self, language: &str) -> bool {
        self.entry(language).is_some_and(|entry| {
            let engine = engine::shared();
            let path = entry.dir.join(&entry.manifest.module);
            let cached = match entry.manifest.protocol {
                Protocol::Component => self.cache.has_file::<Component>(engine, &path),
                Protocol::Turn | Protocol::Command => self.cache.has_file::<Module>(engine, &path),
            };
            let prepared = entry.prepared.lock().unwrap_or_else(|e| e.into_inner());
            prepared.is_none() && !cached
        })
    }

    /// Compiles (or loads from the cache) the runtime for `language` now rather than
    /// at the first session.
    pub fn precompile(&self, language: &str) -> Result<()> {
        let entry = self
            .entry(language)
            .ok_or_else(|| Error::RuntimeNotInstalled {
                language: language.to_string(),
            })?;
        self.prepare(entry).map(|_| ())
    }

    fn entry(&self, language: &str) -> Option<&RuntimeEntry> {
        self.runtimes
            .iter()
            .find(|r| r.manifest.languages.iter().any(|l| l == language))
    }

    /// Compiles (or loads from the cache) and links the runtime, once per process.
    fn prepare(&self, entry: &RuntimeEntry) -> Result<Prepared> {
        let mut prepared = entry.prepared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ready) = &*prepared {
            return Ok(ready.clone());
        }
        let failed = |reason: String| Error::Runtime {
            runtime: entry.manifest.id.clone(),
            reason,
        };
        let engine = engine::shared();
        let path = entry.dir.join(&entry.manifest.module);
        let claimed = Some(entry.manifest.sha256.as_str());
        let cannot_load = |e: FileLoadError| match e {
            FileLoadError::HashMismatch { claimed, actual } => Error::HashMismatch {
                path: path.clone(),
                claimed,
                actual,
            },
            other => failed(format!("cannot load {}: {other}", path.display())),
        };
        let ready = match entry.manifest.protocol {
            Protocol::Component => {
                let (component, _) = self
                    .cache
                    .load_file::<Component>(engine, &path, claimed)
                    .map_err(cannot_load)?;
                Prepared::Component(Arc::new(ComponentRuntime::new(&component).map_err(
                    |e| {
                        failed(format!(
                            "does not match the sandlot:plugin runtime contract: {e:#}"
                        ))
                    },
                )?))
            }
            Protocol::Turn | Protocol::Command => {
                let (module, _) = self
                    .cache
                    .load_file::<Module>(engine, &path, claimed)
                    .map_err(cannot_load)?;
                Prepared::Module(Arc::new(
                    link(&module, &entry.manifest).map_err(|e| failed(format!("{e:#}")))?,
                ))
            }
        };
        *prepared = Some(ready.clone());
        Ok(ready)
    }
}

/// Links WASI preview 1 and the manifest's stubs; nothing else is importable.
fn link(
    module: &Module,
    manifest: &RuntimeManifest,
) -> wasmtime::Result<InstancePre<SessionState>> {
    let mut linker: Linker<SessionState> = Linker::new(engine::shared());
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |state| &mut state.wasi)?;
    for stub in &manifest.stubs {
        let import = module
            .imports()
            .find(|i| i.module() == stub.module && i.name() == stub.name)
            .ok_or_else(|| {
                wasmtime::Error::msg(format!(
                    "the module does not import {}.{}",
                    stub.module, stub.name
                ))
            })?;
        let ty = import.ty().func().cloned().ok_or_else(|| {
            wasmtime::Error::msg(format!("{}.{} is not a function", stub.module, stub.name))
        })?;
        let result = stub.result;
        linker.func_new(&stub.module, &stub.name, ty, move |_, _, results| {
            if let Some(slot) = results.first_mut() {
                *slot = Val::I32(result);
            }
            Ok(())
        })?;
    }
    linker.instantiate_pre(module)
}

impl Backend for WasmBackend {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn serves(&self, language: &str) -> bool {
        self.entry(language).is_some()
    }

    fn open(&self, spec: &SessionSpec<'_>) -> Result<Box<dyn BackendSession>> {
        let entry = self
            .entry(spec.language)
            .ok_or_else(|| Error::RuntimeNotInstalled {
                language: spec.language.to_string(),
            })?;
        match self.prepare(entry)? {
            Prepared::Module(pre) => Ok(Box::new(ModuleSession::open(pre, entry, spec)?)),
            Prepared::Component(runtime) => {
                let env = sandbox_env(
                    &[("HOME", WORKDIR.into()), ("PWD", WORKDIR.into())],
                    &entry.manifest,
                    spec,
                );
                Ok(Box::new(ComponentSession::open(
                    &runtime,
                    &entry.manifest,
                    spec.workdir,
                    spec.memory,
                    spec.max_output,
                    &env,
                )?))
            }
        }
    }
}

/// What a sandbox's store holds.
struct SessionState {
    wasi: WasiP1Ctx,
    memory: MemoryCap,
}

/// A live instance.
struct Live {
    store: Store<SessionState>,
    instance: Instance,
}

/// One sandbox of a module runtime.
struct ModuleSession {
    pre: Arc<InstancePre<SessionState>>,
    runtime: String,
    protocol: Protocol,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    mounts: Vec<(PathBuf, String)>,
    workdir: PathBuf,
    memory: usize,
    stdout: Capture,
    stderr: Capture,
    stdin: Feed,
    /// The session's instance (turn protocol only).
    live: Option<Live>,
    ended: Option<String>,
    bundled: Vec<String>,
}

impl ModuleSession {
    fn open(
        pre: Arc<InstancePre<SessionState>>,
        entry: &RuntimeEntry,
        spec: &SessionSpec<'_>,
    ) -> Result<Self> {
        let manifest = &entry.manifest;
        let env = sandbox_env(
            &[
                ("HOME", WORKDIR.into()),
                ("TMPDIR", format!("{WORKDIR}/.tmp")),
                ("PWD", WORKDIR.into()),
            ],
            manifest,
            spec,
        );
        std::fs::create_dir_all(spec.workdir.join(".tmp")).map_err(|e| Error::Io {
            context: format!(
                "cannot prepare the sandbox directory {}",
                spec.workdir.display()
            ),
            source: e,
        })?;
        let mut session = ModuleSession {
            pre,
            runtime: manifest.id.clone(),
            protocol: manifest.protocol,
            argv: manifest.argv.clone(),
            env,
            mounts: manifest
                .mounts
                .iter()
                .map(|m| (entry.dir.join(&m.host), m.guest.clone()))
                .collect(),
            workdir: spec.workdir.to_path_buf(),
            memory: spec.memory,
            stdout: Capture::new(spec.max_output),
            stderr: Capture::new(spec.max_output),
            stdin: Feed::default(),
            live: None,
            ended: None,
            bundled: manifest.bundled.clone(),
        };
        if session.protocol == Protocol::Turn {
            let argv = session.argv.clone();
            session.live = Some(session.instantiate(&argv)?);
            if let Some(setup) = &manifest.setup {
                session.stdout.start(None);
                session.stderr.start(None);
                let status = session.turn(setup, b"", SETUP_TIMEOUT)?;
                let (_, _) = session.stdout.finish();
                let (stderr, _) = session.stderr.finish();
                if status.exit_code != 0 || status.ended.is_some() {
                    return Err(Error::Runtime {
                        runtime: session.runtime.clone(),
                        reason: format!(
                            "session setup failed: {}",
                            String::from_utf8_lossy(&stderr).trim()
                        ),
                    });
                }
            }
        }
        Ok(session)
    }

    fn failed(&self, reason: String) -> Error {
        Error::Runtime {
            runtime: self.runtime.clone(),
            reason,
        }
    }

    /// A fresh instance in the session's sandbox, initialised.
    fn instantiate(&self, args: &[String]) -> Result<Live> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.args(args)
            .envs(&self.env)
            .stdin(self.stdin.clone())
            .stdout(self.stdout.clone())
            .stderr(self.stderr.clone());
        for (host, guest) in &self.mounts {
            wasi.preopened_dir(host, guest, FsPerms::ReadOnly)
                .map_err(|e| self.failed(format!("cannot mount {}: {e:#}", host.display())))?;
        }
        wasi.preopened_dir(&self.workdir, WORKDIR, FsPerms::ReadWrite)
            .map_err(|e| self.failed(format!("cannot mount the sandbox directory: {e:#}")))?;
        let mut store = Store::new(
            engine::shared(),
            SessionState {
                wasi: wasi.build_p1(),
                memory: MemoryCap::new(self.memory),
            },
        );
        store.limiter(|state| &mut state.memory);
        // Instantiation runs no user code, but a broken module could still loop.
        store.set_epoch_deadline(engine::ticks(SETUP_TIMEOUT));
        store.epoch_deadline_trap();
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.failed(format!("cannot instantiate: {e:#}")))?;
        if self.protocol == Protocol::Turn {
            if let Ok(init) = instance.get_typed_func::<(), ()>(&mut store, "_initialize") {
                init.call(&mut store, ())
                    .map_err(|e| self.failed(format!("_initialize failed: {e:#}")))?;
            }
        }
        Ok(Live { store, instance })
    }

    /// Runs `code` through the turn protocol on the session's instance.
    fn turn(&mut self, code: &str, stdin: &[u8], timeout: Duration) -> Result<RawOutput> {
        let Some(live) = self.live.as_mut() else {
            return Err(Error::SessionEnded {
                reason: self
                    .ended
                    .clone()
                    .unwrap_or_else(|| "the session is closed".into()),
            });
        };
        self.stdin.set(stdin);
        let len = i32::try_from(code.len())
            .map_err(|_| Error::InvalidInput("the code is larger than 2 GiB".into()))?;
        live.store.set_epoch_deadline(engine::ticks(timeout));
        let result = call_turn(live, code, len);
        let memory_hit = live.store.data().memory.hit;
        let mut output = RawOutput::default();
        match result {
            Ok(status) if (0..=511).contains(&status) => {
                output.exit_code = status & 0xff;
                if status >= 256 {
                    output.ended = Some("the program called quit()".into());
                }
            }
            Ok(status) => {
                output.exit_code = 1;
                output.ended = Some(format!("the runtime stopped (status {status})"));
            }
            Err(error) => stopped(&error, memory_hit, timeout, &mut output),
        }
        if output.ended.is_some() {
            self.ended = output.ended.clone();
            self.live = None;
        }
        Ok(output)
    }

    /// Runs `code` as a command in a fresh instance.
    fn command(&mut self, code: &str, stdin: &[u8], timeout: Duration) -> Result<RawOutput> {
        let file = ".sandlot/code";
        let host_file = self.workdir.join(file);
        let io = |e: std::io::Error| Error::Io {
            context: format!("cannot write the code into {}", self.workdir.display()),
            source: e,
        };
        std::fs::create_dir_all(self.workdir.join(".sandlot")).map_err(io)?;
        std::fs::write(&host_file, code).map_err(io)?;
        let guest_file = format!("{WORKDIR}/{file}");
        let args: Vec<String> = self
            .argv
            .iter()
            .map(|a| a.replace("{file}", &guest_file))
            .collect();
        self.stdin.set(stdin);
        let mut live = self.instantiate(&args)?;
        live.store.set_epoch_deadline(engine::ticks(timeout));
        let start = live
            .instance
            .get_typed_func::<(), ()>(&mut live.store, "_start")
            .map_err(|_| self.failed("the module does not export `_start`".into()))?;
        let mut output = RawOutput::default();
        if let Err(error) = start.call(&mut live.store, ()) {
            let memory_hit = live.store.data().memory.hit;
            stopped(&error, memory_hit, timeout, &mut output);
            // Every command runs in a fresh instance: the session goes on.
            output.ended = None;
        }
        Ok(output)
    }
}

/// How long opening a sandbox may take (instantiation, `_initialize`, setup code).
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Copies `code` into the guest and calls `turn`.
fn call_turn(live: &mut Live, code: &str, len: i32) -> wasmtime::Result<i32> {
    let alloc = live
        .instance
        .get_typed_func::<i32, i32>(&mut live.store, "host_alloc")?;
    let turn = live
        .instance
        .get_typed_func::<(i32, i32), i32>(&mut live.store, "turn")?;
    let ptr = if len == 0 {
        0
    } else {
        let ptr = alloc.call(&mut live.store, len)?;
        let memory = live
            .instance
            .get_memory(&mut live.store, "memory")
            .ok_or_else(|| wasmtime::Error::msg("the module exports no memory"))?;
        memory.write(&mut live.store, ptr as u32 as usize, code.as_bytes())?;
        ptr
    };
    turn.call(&mut live.store, (ptr, len))
}

/// Fills in `output` for a run that ended in `error` rather than returning.
pub(crate) fn stopped(
    error: &wasmtime::Error,
    memory_hit: bool,
    timeout: Duration,
    output: &mut RawOutput,
) {
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        output.exit_code = exit.0;
        output.ended = Some(format!(
            "the program exited the interpreter (status {})",
            exit.0
        ));
    } else if memory_hit {
        output.exit_code = 137;
        output.memory_exceeded = true;
        output.ended = Some("the program used more memory than the session allows".into());
    } else if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        output.exit_code = 124;
        output.timed_out = true;
        output.ended = Some(format!(
            "the program ran past its {timeout:?} limit and was stopped"
        ));
    } else {
        output.exit_code = 134;
        output.stderr = format!("sandlot: the interpreter crashed: {error:#}\n").into_bytes();
        output.ended = Some("the interpreter crashed".into());
    }
}

/// Ends a run's capture of stdout and stderr; the returned function puts what was
/// captured into the run's output, after which any message the host wrote to
/// `output.stderr` (a crash) follows what the program wrote.
pub(crate) fn finish_output(stdout: &Capture, stderr: &Capture) -> impl FnOnce(&mut RawOutput) {
    let (out, out_truncated) = stdout.finish();
    let (err, err_truncated) = stderr.finish();
    move |output: &mut RawOutput| {
        let crash = std::mem::take(&mut output.stderr);
        output.stdout = out;
        output.stdout_truncated = out_truncated;
        output.stderr = err;
        output.stderr.extend_from_slice(&crash);
        output.stderr_truncated = err_truncated;
    }
}

/// The environment of a sandbox, in increasing precedence: the host's defaults, the
/// runtime's manifest, the session's own.
fn sandbox_env(
    defaults: &[(&str, String)],
    manifest: &RuntimeManifest,
    spec: &SessionSpec<'_>,
) -> Vec<(String, String)> {
    defaults
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .chain(manifest.env.iter().map(|(k, v)| (k.clone(), v.clone())))
        .chain(spec.env.iter().cloned())
        .collect()
}

impl BackendSession for ModuleSession {
    fn missing_libraries(&self, libraries: &[String]) -> Vec<String> {
        module::missing(&self.bundled, libraries)
    }

    fn run(&mut self, request: RunRequest<'_>) -> Result<RawOutput> {
        self.stdout.start(request.on_stdout);
        self.stderr.start(request.on_stderr);
        let result = match self.protocol {
            Protocol::Command => self.command(request.code, request.stdin, request.timeout),
            Protocol::Turn | Protocol::Component => {
                self.turn(request.code, request.stdin, request.timeout)
            }
        };
        let captured = finish_output(&self.stdout, &self.stderr);
        let mut output = result?;
        captured(&mut output);
        Ok(output)
    }
}

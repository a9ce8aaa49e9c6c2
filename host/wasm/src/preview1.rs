//! Runtimes that are WASI preview-1 core modules (CPython for WASI, ruby.wasm, ...):
//! `turn` reactors that keep one instance per session, and `command`s that get a fresh
//! instance per run.

use super::door::{self, Door};
use super::module::{Protocol, RuntimeManifest};
use crate::interpreter::{
    arm, call, disarm, exited, CapturedState, Interpreter, Ran, Stdio, SETUP_TIMEOUT,
};
use crate::{prefault, snapshot};
use sandlot_core::error::{Error, Result};
use sandlot_core::interrupt::Interrupt;
use sandlot_core::layout::Layout;
use sandlot_core::snapshot::{MemoryFacts, StateReader};
use sandlot_core::wasmtime_engine::{self as engine, MemoryCap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Instance, InstancePre, Linker, Memory, Module, Store, Val};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// What a module instance's store holds.
pub(super) struct ModuleState {
    wasi: WasiP1Ctx,
    memory: MemoryCap,
    door: Door,
}

/// Links WASI preview 1 (asynchronously, so a guest blocked in a host call can be
/// stopped at its deadline), the tool door where the manifest says the module has one,
/// and the manifest's other stubs; nothing else is importable.
pub(super) fn link(
    module: &Module,
    manifest: &RuntimeManifest,
) -> wasmtime::Result<InstancePre<ModuleState>> {
    let mut linker: Linker<ModuleState> = Linker::new(engine::shared());
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state| &mut state.wasi)?;
    if manifest.tool_door() {
        door::link(&mut linker, |state: &ModuleState| &state.door)?;
    }
    for stub in manifest.stubs.iter().filter(|s| !s.is_tool_door()) {
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

/// A module runtime, linked, with what its fresh and its restored instances write.
pub(super) struct ModuleRuntime {
    pre: InstancePre<ModuleState>,
    writes: prefault::Writes,
    restored: prefault::ByState,
}

impl ModuleRuntime {
    pub(super) fn new(pre: InstancePre<ModuleState>) -> ModuleRuntime {
        ModuleRuntime {
            pre,
            writes: prefault::Writes::default(),
            restored: prefault::ByState::default(),
        }
    }
}

/// A live instance.
struct Live {
    store: Store<ModuleState>,
    instance: Instance,
}

impl Live {
    /// The instance's linear memory.
    fn memory(&mut self) -> Result<Memory> {
        self.instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| Error::Runtime {
                runtime: "module".into(),
                reason: "the module exports no memory".into(),
            })
    }
}

/// The interpreter of one sandbox, for a module runtime.
pub(super) struct ModuleInterpreter {
    module: Arc<ModuleRuntime>,
    runtime: String,
    protocol: Protocol,
    /// Code run once in a new session's instance.
    setup: Option<String>,
    argv: Vec<String>,
    /// What follows the manifest's argv for a command (the program's arguments).
    args: Vec<String>,
    env: Vec<(String, String)>,
    mounts: Vec<(PathBuf, String)>,
    workspace: PathBuf,
    memory: usize,
    stdio: Stdio,
    /// The session's instance (turn protocol only).
    live: Option<Live>,
    /// When this session, restored from a snapshot, is one to observe: what it
    /// wrote, for later restores of the same snapshot (`prefault`).
    observing: Option<prefault::Observation>,
}

impl ModuleInterpreter {
    /// A fresh interpreter in `workspace`; for the turn protocol, instantiated and
    /// set up now.
    pub(super) fn start(mut self) -> Result<ModuleInterpreter> {
        if self.protocol == Protocol::Turn {
            let argv = self.argv.clone();
            self.live = Some(self.instantiate(&argv)?);
            if let Some(setup) = self.setup.clone() {
                self.stdio.start(1 << 20);
                let ran = self.run(&setup, SETUP_TIMEOUT, None);
                let (_, stderr) = self.stdio.finish();
                match ran {
                    Ran::Returned { exit_code: 0, .. } => {}
                    _ => {
                        return Err(self.failed(format!(
                            "session setup failed: {}",
                            String::from_utf8_lossy(&stderr.bytes).trim()
                        )))
                    }
                }
            }
            // What a fresh interpreter has written by now, every later one will.
            if !self.module.writes.learned() {
                if let Some(live) = self.live.as_mut() {
                    let memory = live.memory()?;
                    self.module.writes.learn(memory.data(&live.store));
                }
            }
        }
        Ok(self)
    }

    /// The interpreter with its instance's memory the one `image` holds (what
    /// [`ModuleInterpreter::capture_memory`] wrote), as a turn runtime's session left
    /// it: no initialisation and no setup run again.
    pub(super) fn restore(mut self, image: &mut StateReader<'_>) -> Result<ModuleInterpreter> {
        if self.protocol != Protocol::Turn {
            return Err(self
                .failed("a command runtime keeps no interpreter between runs to restore".into()));
        }
        let argv = self.argv.clone();
        let mut live = self.instance(&argv, false)?;
        let head = snapshot::read_head(image, self.memory as u64)?;
        let linear = live.memory()?;
        let pages = head.growth(linear.data_size(&live.store) as u64)?;
        if pages > 0 {
            linear.grow(&mut live.store, pages).map_err(|e| {
                self.failed(format!(
                    "cannot grow the memory to the snapshot's {} MiB: {e:#}",
                    head.size >> 20
                ))
            })?;
        }
        let (file, start) = image.file();
        let data = start + image.position();
        let available = image.len() - image.position();
        let memory = linear.data_mut(&mut live.store);
        let mapped = snapshot::read_pages(&head, file, data, available, memory)?;
        if let Some(snapshot) = image.snapshot() {
            let state = prefault::StateKey {
                snapshot,
                offset: data,
            };
            self.observing = self.module.restored.of(state).restored(memory);
        }
        tracing::debug!(
            runtime = %self.runtime,
            size = head.size,
            mapped,
            "restored an interpreter's memory"
        );
        self.live = Some(live);
        Ok(self)
    }

    /// Writes the session instance's memory as its differences from a fresh
    /// instance's, or `whole`.
    pub(super) fn capture_memory(
        &mut self,
        out: &mut dyn Write,
        whole: bool,
    ) -> Result<MemoryFacts> {
        if self.protocol != Protocol::Turn {
            return Err(self.failed("a command runtime keeps no interpreter to capture".into()));
        }
        let argv = self.argv.clone();
        // A whole memory is compared with nothing.
        let mut base = match whole {
            true => None,
            false => Some(self.instance(&argv, false)?),
        };
        let Some(live) = self.live.as_mut() else {
            return Err(Error::SessionEnded {
                reason: "its interpreter is gone".into(),
            });
        };
        let memory = live.memory()?;
        let fresh = match base.as_mut() {
            Some(base) => Some(base.memory()?.data(&base.store)),
            None => None,
        };
        snapshot::write(memory.data(&live.store), fresh, out).map_err(|e| Error::Io {
            context: "cannot write the snapshot".into(),
            source: e,
        })
    }

    /// The interpreter of a sandbox, without an instance yet: [`start`] or
    /// [`restore`] gives it one.
    ///
    /// [`start`]: ModuleInterpreter::start
    /// [`restore`]: ModuleInterpreter::restore
    pub(super) fn new(
        module: Arc<ModuleRuntime>,
        manifest: &RuntimeManifest,
        runtime_dir: &Path,
        env: Vec<(String, String)>,
        workspace: &Path,
        memory: usize,
        stdio: Stdio,
    ) -> ModuleInterpreter {
        ModuleInterpreter {
            module,
            runtime: manifest.id.clone(),
            protocol: manifest.protocol,
            setup: manifest.setup.clone(),
            argv: manifest.argv.clone(),
            args: Vec::new(),
            env,
            mounts: manifest
                .mounts
                .iter()
                .map(|m| (runtime_dir.join(&m.host), m.guest.clone()))
                .collect(),
            workspace: workspace.to_path_buf(),
            memory,
            stdio,
            live: None,
            observing: None,
        }
    }

    fn failed(&self, reason: String) -> Error {
        Error::Runtime {
            runtime: self.runtime.clone(),
            reason,
        }
    }

    /// A fresh instance in the sandbox, initialised.
    fn instantiate(&self, args: &[String]) -> Result<Live> {
        self.instance(args, true)
    }

    /// A fresh instance in the sandbox; `initialize`: with its `_initialize` run (a
    /// restored memory already holds what it does).
    fn instance(&self, args: &[String], initialize: bool) -> Result<Live> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.args(args)
            .envs(&self.env)
            .stdin(self.stdio.stdin.clone())
            .stdout(self.stdio.stdout.clone())
            .stderr(self.stdio.stderr.clone())
            // File operations block the calling thread (which runs the guest anyway)
            // rather than hopping to a thread pool for every read of a module.
            .allow_blocking_current_thread(true);
        for (host, guest) in &self.mounts {
            wasi.preopened_dir(host, guest, FsPerms::ReadOnly)
                .map_err(|e| self.failed(format!("cannot mount {}: {e:#}", host.display())))?;
        }
        wasi.preopened_dir(&self.workspace, Layout::WORKSPACE, FsPerms::ReadWrite)
            .map_err(|e| self.failed(format!("cannot mount the workspace: {e:#}")))?;
        let mut store = Store::new(
            engine::shared(),
            ModuleState {
                wasi: wasi.build_p1(),
                memory: MemoryCap::new(self.memory),
                door: self.stdio.door.clone(),
            },
        );
        store.limiter(|state| &mut state.memory);
        // Instantiation runs no user code, but a broken module could still loop.
        store.set_epoch_deadline(engine::ticks(SETUP_TIMEOUT));
        store.epoch_deadline_trap();
        let module = self.module.clone();
        let protocol = self.protocol;
        let made = call(SETUP_TIMEOUT, None, async {
            let instance = module.pre.instantiate_async(&mut store).await?;
            if initialize {
                if let Some(memory) = instance.get_memory(&mut store, "memory") {
                    module.writes.apply(memory.data_mut(&mut store));
                }
                if protocol == Protocol::Turn {
                    if let Ok(init) = instance.get_typed_func::<(), ()>(&mut store, "_initialize") {
                        init.call_async(&mut store, ()).await?;
                    }
                }
            }
            Ok(instance)
        });
        match made {
            Some(Ok(instance)) => Ok(Live { store, instance }),
            Some(Err(e)) => Err(self.failed(format!("cannot instantiate: {e:#}"))),
            None => Err(self.failed(format!(
                "did not start within {} s",
                SETUP_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Runs `code` through the turn protocol on the session's instance.
    fn turn(&mut self, code: &str, timeout: Duration, interrupt: Option<&Interrupt>) -> Ran {
        let Some(live) = self.live.as_mut() else {
            return Ran::Gone;
        };
        let Ok(len) = i32::try_from(code.len()) else {
            return Ran::Refused("the code is larger than 2 GiB".into());
        };
        arm(&mut live.store, timeout, interrupt);
        let Live { store, instance } = live;
        let instance = *instance;
        let result = call(timeout, interrupt, async {
            let alloc = instance.get_typed_func::<i32, i32>(&mut *store, "host_alloc")?;
            let turn = instance.get_typed_func::<(i32, i32), i32>(&mut *store, "turn")?;
            let ptr = if len == 0 {
                0
            } else {
                let ptr = alloc.call_async(&mut *store, len).await?;
                let memory = instance
                    .get_memory(&mut *store, "memory")
                    .ok_or_else(|| wasmtime::Error::msg("the module exports no memory"))?;
                memory.write(&mut *store, ptr as u32 as usize, code.as_bytes())?;
                ptr
            };
            turn.call_async(&mut *store, (ptr, len)).await
        });
        disarm(&mut live.store);
        let memory_hit = live.store.data().memory.hit;
        let ran = match result {
            None => Ran::Deadline,
            // 256 and up: the program called quit(), which ends the interpreter.
            Some(Ok(status)) if (0..=511).contains(&status) => Ran::Returned {
                exit_code: status & 0xff,
                quit: status >= 256,
            },
            Some(Ok(status)) => Ran::Trapped {
                error: wasmtime::Error::msg(format!("the runtime stopped (status {status})")),
                memory_hit,
            },
            Some(Err(error)) => exited(error, memory_hit, true),
        };
        if !matches!(ran, Ran::Returned { quit: false, .. }) {
            // A stopped or trapped instance cannot be trusted with another run.
            self.live = None;
        }
        ran
    }

    /// Runs `code` as a command in a fresh instance.
    fn command(&mut self, code: &str, timeout: Duration, interrupt: Option<&Interrupt>) -> Ran {
        let file = ".sandlot/code";
        let written = std::fs::create_dir_all(self.workspace.join(".sandlot"))
            .and_then(|()| std::fs::write(self.workspace.join(file), code));
        if let Err(e) = written {
            return Ran::Refused(format!("cannot write the code into the workspace: {e}"));
        }
        let guest_file = format!("{}/{file}", Layout::WORKSPACE);
        let args: Vec<String> = self
            .argv
            .iter()
            .map(|a| a.replace("{file}", &guest_file))
            .chain(self.args.iter().cloned())
            .collect();
        let mut live = match self.instantiate(&args) {
            Ok(live) => live,
            Err(e) => return Ran::Refused(e.to_string()),
        };
        arm(&mut live.store, timeout, interrupt);
        let Live {
            mut store,
            instance,
        } = live;
        let result = call(timeout, interrupt, async {
            let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
            start.call_async(&mut store, ()).await
        });
        match result {
            None => Ran::Deadline,
            Some(Ok(())) => Ran::Returned {
                exit_code: 0,
                quit: false,
            },
            Some(Err(error)) => {
                let memory_hit = store.data().memory.hit;
                exited(error, memory_hit, false)
            }
        }
    }
}

impl Drop for ModuleInterpreter {
    fn drop(&mut self) {
        // A stopped instance (`live` gone) drops its observation unfinished.
        if let (Some(observation), Some(live)) = (self.observing.take(), self.live.as_mut()) {
            if let Ok(memory) = live.memory() {
                observation.finish(memory.data(&live.store));
            }
        }
    }
}

impl Interpreter for ModuleInterpreter {
    fn run(&mut self, code: &str, timeout: Duration, interrupt: Option<&Interrupt>) -> Ran {
        match self.protocol {
            Protocol::Command => self.command(code, timeout, interrupt),
            Protocol::Turn => self.turn(code, timeout, interrupt),
        }
    }

    fn capture(&mut self, out: &mut dyn Write, whole: bool) -> Option<Result<CapturedState>> {
        Some(self.capture_memory(out, whole).map(|memory| CapturedState {
            memory,
            globals: Vec::new(),
        }))
    }

    fn set_args(&mut self, args: &[String]) -> Option<std::result::Result<(), String>> {
        // A turn's instance was started with its argv once; the host sets it in code.
        (self.protocol == Protocol::Command).then(|| {
            self.args = args.to_vec();
            Ok(())
        })
    }
}

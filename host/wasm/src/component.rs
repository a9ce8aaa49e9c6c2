//! Runtimes that are components of the `sandlot:plugin/runtime` world (a JavaScript
//! engine, ...), of contract 0.1, 0.2 or 0.4. One instance per interpreter, holding one
//! `session` resource, so no two sessions ever share one. A 0.4 runtime may import
//! `tools`: its calls go through the sandbox's [`Door`], open only while a run that
//! offers tools is under way.

use crate::door::Door;
use crate::interpreter::{
    arm, call, disarm, exited, CapturedState, Interpreter, Ran, Stdio, SETUP_TIMEOUT,
};
use crate::snapshot;
use crate::state_access::{self, State};
use sandlot_core::error::{Error, Result};
use sandlot_core::interrupt::Interrupt;
use sandlot_core::layout::Layout;
use sandlot_core::snapshot::StateReader;
use sandlot_core::wasmtime_engine::{self as engine, MemoryCap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{
    Component, ComponentExportIndex, Instance, InstancePre, Linker, ResourceAny, ResourceTable,
    WasmList,
};
use wasmtime::Store;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

// Bindings of each supported contract version of the runtime world (sandlot-wit).
use sandlot_wit::v0_1_0::runtime as v0_1_0;
use sandlot_wit::v0_2_0::runtime as v0_2_0;
use sandlot_wit::v0_4_0::runtime as v0_4_0;

/// The same code on either contract version's bindings: the generated types differ,
/// the calls do not.
macro_rules! either {
    ($value:expr, $enum:ident, $b:ident => $body:expr) => {
        match $value {
            $enum::V0_1($b) => $body,
            $enum::V0_2($b) => $body,
            $enum::V0_4($b) => $body,
        }
    };
}

/// How long `info` may take, and how much memory it may use: it returns constants.
const INFO_TIMEOUT: Duration = Duration::from_secs(10);
const INFO_MEMORY: usize = 256 << 20;

/// What a runtime component says about itself (`info`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct ComponentInfo {
    pub id: String,
    pub languages: Vec<String>,
    pub version: String,
    /// Libraries built in (contract 0.2; none before).
    pub bundled: Vec<String>,
    /// The contract version it was built for.
    pub api_version: String,
    /// Whether sandlot added state access to it (see [`state_access`]).
    #[serde(default)]
    pub state_access: bool,
}

impl ComponentInfo {
    /// Whether its contract has the `tools` import (0.4), so that code in it can call
    /// a session's tools through bindings the runtime makes itself.
    pub(super) fn offers_tools(&self) -> bool {
        self.api_version == "0.4.0"
    }
}

/// A component's store: WASI preview 2, the memory cap, and the door tool calls
/// leave by.
pub(super) struct ComponentState {
    ctx: WasiCtx,
    table: ResourceTable,
    memory: MemoryCap,
    door: Door,
}

impl v0_4_0::sandlot::plugin::tools::Host for ComponentState {
    async fn call(&mut self, request: String) -> std::result::Result<String, String> {
        let Some(calls) = self.door.current() else {
            return Err(
                "no run that offers tools is under way: tools are called only \
                        by the run that was given them"
                    .into(),
            );
        };
        // The canonical ABI has already copied the request out of the guest (bounded
        // by the guest's own memory cap); `answer` refuses an oversized one from its
        // length before reading it.
        let answer = calls.answer(request.as_bytes()).await;
        // Frames are JSON the host encoded: always UTF-8.
        Ok(String::from_utf8(answer)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }
}

impl WasiView for ComponentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

impl ComponentState {
    fn new(wasi: &mut WasiCtxBuilder, memory: usize, door: Door) -> Store<ComponentState> {
        let mut store = Store::new(
            engine::shared(),
            ComponentState {
                ctx: wasi.build(),
                table: ResourceTable::new(),
                memory: MemoryCap::new(memory),
                door,
            },
        );
        store.limiter(|state| &mut state.memory);
        store.epoch_deadline_trap();
        store
    }
}

/// A component runtime compiled and linked, ready to instantiate per interpreter.
pub(super) struct ComponentRuntime {
    pre: InstancePre<ComponentState>,
    /// Where the bindings of its contract version find their exports.
    indices: Indices,
    /// Its state-access exports (see [`state_access`]), where sandlot added them.
    state: Option<State<ComponentExportIndex>>,
}

/// The export indices of the bindings of each contract version, found once.
enum Indices {
    V0_1(v0_1_0::RuntimeIndices),
    V0_2(v0_2_0::RuntimeIndices),
    V0_4(v0_4_0::RuntimeIndices),
}

/// The versions of the runtime world this host runs, oldest first.
const API_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.4.0"];

impl ComponentRuntime {
    /// Links WASI preview 2 (sockets are linked but the context grants none) and
    /// checks the component against the contract version its export names.
    pub(super) fn new(component: &Component) -> wasmtime::Result<Self> {
        let engine = engine::shared();
        let exports: Vec<String> = component
            .component_type()
            .exports(engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let Some(version) = exports
            .iter()
            .find_map(|name| name.strip_prefix("sandlot:plugin/interpreter@"))
        else {
            wasmtime::bail!(
                "it is not a runtime component: it exports no sandlot:plugin/interpreter \
                 (its exports: {})",
                if exports.is_empty() {
                    "none".to_string()
                } else {
                    exports.join(", ")
                }
            );
        };
        let mut linker = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        v0_4_0::sandlot::plugin::tools::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |state| state,
        )?;
        let pre = linker.instantiate_pre(component)?;
        let indices = match version {
            "0.1.0" => Indices::V0_1(v0_1_0::RuntimeIndices::new(&pre)?),
            "0.2.0" => Indices::V0_2(v0_2_0::RuntimeIndices::new(&pre)?),
            "0.4.0" => Indices::V0_4(v0_4_0::RuntimeIndices::new(&pre)?),
            other => wasmtime::bail!(
                "it was built for contract {other}; this sandlot runs runtimes of contract {} \
                 (a newer sandlot may run it)",
                API_VERSIONS.join(", ")
            ),
        };
        let index = |name: &str| component.get_export_index(None, name);
        let names = state_access::NAMES;
        let state = (|| {
            Some(State {
                size: index(names.size)?,
                grow: index(names.grow)?,
                read: index(names.read)?,
                place: index(names.place)?,
                write: index(names.write)?,
                globals: index(names.globals)?,
                global_get: index(names.global_get)?,
                global_set: index(names.global_set)?,
            })
        })();
        Ok(ComponentRuntime {
            pre,
            indices,
            state,
        })
    }

    fn api_version(&self) -> &'static str {
        match self.indices {
            Indices::V0_1(_) => "0.1.0",
            Indices::V0_2(_) => "0.2.0",
            Indices::V0_4(_) => "0.4.0",
        }
    }

    /// An instance in `store`, and the bindings of its contract version over it
    /// (the instance itself reaches the state-access exports).
    async fn instantiate(
        &self,
        store: &mut Store<ComponentState>,
    ) -> wasmtime::Result<(Instance, Bound)> {
        let instance = self.pre.instantiate_async(&mut *store).await?;
        let bound = match &self.indices {
            Indices::V0_1(i) => Bound::V0_1(i.load(&mut *store, &instance)?),
            Indices::V0_2(i) => Bound::V0_2(i.load(&mut *store, &instance)?),
            Indices::V0_4(i) => Bound::V0_4(i.load(&mut *store, &instance)?),
        };
        Ok((instance, bound))
    }

    /// Whether a session's whole state can be read and written (see
    /// [`state_access`]), so that a snapshot holds its memory.
    pub(super) fn has_state_access(&self) -> bool {
        self.state.is_some()
    }

    /// Calls `info` in an instance of its own, with nothing to read and a small budget.
    pub(super) fn describe(&self) -> wasmtime::Result<ComponentInfo> {
        let mut store =
            ComponentState::new(&mut WasiCtxBuilder::new(), INFO_MEMORY, Door::default());
        store.set_epoch_deadline(engine::ticks(INFO_TIMEOUT));
        let described = call(INFO_TIMEOUT, None, async {
            let (_, bound) = self.instantiate(&mut store).await?;
            // The same calls on each version's bindings; 0.1's info has no `bundled`.
            Ok(match bound {
                Bound::V0_1(b) => {
                    let info = b.sandlot_plugin_interpreter().call_info(&mut store).await?;
                    (info.id, info.languages, info.version, Vec::new())
                }
                Bound::V0_2(b) => {
                    let info = b.sandlot_plugin_interpreter().call_info(&mut store).await?;
                    (info.id, info.languages, info.version, info.bundled)
                }
                Bound::V0_4(b) => {
                    let info = b.sandlot_plugin_interpreter().call_info(&mut store).await?;
                    (info.id, info.languages, info.version, info.bundled)
                }
            })
        });
        let (id, languages, version, bundled) = match described {
            Some(result) => result?,
            None => wasmtime::bail!("`info` did not return within {INFO_TIMEOUT:?}"),
        };
        if id.trim().is_empty() || languages.is_empty() {
            wasmtime::bail!("`info` names no id or no language");
        }
        Ok(ComponentInfo {
            id,
            languages: languages.iter().map(|l| l.to_ascii_lowercase()).collect(),
            version,
            bundled,
            api_version: self.api_version().to_string(),
            state_access: self.has_state_access(),
        })
    }
}

/// An instance and its session, of any contract version.
enum Bound {
    V0_1(v0_1_0::Runtime),
    V0_2(v0_2_0::Runtime),
    V0_4(v0_4_0::Runtime),
}

/// The interpreter of one sandbox, for a component runtime.
pub(super) struct ComponentInterpreter {
    store: Option<Store<ComponentState>>,
    instance: Instance,
    bindings: Bound,
    session: ResourceAny,
    /// How it was started: a snapshot compares its memory with a fresh one's.
    start: Start,
}

/// What an interpreter of a component runtime is started from.
#[derive(Clone)]
pub(super) struct Start {
    pub runtime: Arc<ComponentRuntime>,
    pub id: String,
    pub env: Vec<(String, String)>,
    pub workspace: PathBuf,
    pub memory: usize,
    pub stdio: Stdio,
}

impl ComponentInterpreter {
    pub(super) fn start(start: Start) -> Result<ComponentInterpreter> {
        let failed = |reason: String| Error::Runtime {
            runtime: start.id.clone(),
            reason,
        };
        let (env, workspace, memory, stdio) =
            (&start.env, &start.workspace, start.memory, &start.stdio);
        let mut wasi = WasiCtxBuilder::new();
        wasi.envs(env)
            .stdin(stdio.stdin.clone())
            .stdout(stdio.stdout.clone())
            .stderr(stdio.stderr.clone())
            .allow_blocking_current_thread(true)
            .preopened_dir(workspace, Layout::WORKSPACE, FsPerms::ReadWrite)
            .map_err(|e| failed(format!("cannot mount the workspace: {e:#}")))?;
        let mut store = ComponentState::new(&mut wasi, memory, stdio.door.clone());
        store.set_epoch_deadline(engine::ticks(SETUP_TIMEOUT));
        let made = call(SETUP_TIMEOUT, None, async {
            let (instance, bindings) = start.runtime.instantiate(&mut store).await?;
            let session = either!(&bindings, Bound, b => {
                b.sandlot_plugin_interpreter()
                    .session()
                    .call_constructor(&mut store)
                    .await?
            });
            Ok((instance, bindings, session))
        });
        let (instance, bindings, session) = match made {
            Some(Ok(made)) => made,
            Some(Err(e)) => return Err(failed(format!("cannot start a session: {e:#}"))),
            None => {
                return Err(failed(format!(
                    "did not start within {} s",
                    SETUP_TIMEOUT.as_secs()
                )))
            }
        };
        Ok(ComponentInterpreter {
            store: Some(store),
            instance,
            bindings,
            session,
            start,
        })
    }

    /// A fresh interpreter, then the memory and globals a snapshot holds (what
    /// [`ComponentInterpreter::capture_state`] wrote) put in its place.
    pub(super) fn restore(
        start: Start,
        image: &mut StateReader<'_>,
        globals: &[u64],
    ) -> Result<ComponentInterpreter> {
        let mut interpreter = ComponentInterpreter::start(start)?;
        interpreter.load_state(image, globals)?;
        Ok(interpreter)
    }

    fn failed(&self, reason: String) -> Error {
        Error::Runtime {
            runtime: self.start.id.clone(),
            reason,
        }
    }

    /// The state-access functions, or why there are none.
    fn state(&self) -> Result<State<ComponentExportIndex>> {
        self.start.runtime.state.ok_or_else(|| {
            self.failed("its state is not reachable: it was not built with state access".into())
        })
    }

    /// The store and instance, for a call into its state within the setup deadline.
    fn for_state(&mut self) -> Result<(&mut Store<ComponentState>, Instance)> {
        let instance = self.instance;
        let Some(store) = self.store.as_mut() else {
            return Err(Error::SessionEnded {
                reason: "its interpreter is gone".into(),
            });
        };
        store.set_epoch_deadline(engine::ticks(SETUP_TIMEOUT));
        Ok((store, instance))
    }

    /// What a call into its state gave, or an error saying what could not be done.
    fn answer<T>(&self, what: &str, result: Option<wasmtime::Result<T>>) -> Result<T> {
        match result {
            Some(Ok(value)) => Ok(value),
            Some(Err(e)) => Err(self.failed(format!("cannot {what}: {e:#}"))),
            None => Err(self.failed(format!("cannot {what}: no answer within {SETUP_TIMEOUT:?}"))),
        }
    }

    /// The instance's whole memory, as a view into it, and its mutable globals.
    fn read_state(&mut self) -> Result<(WasmList<u8>, Vec<u64>)> {
        let state = self.state()?;
        let (store, instance) = self.for_state()?;
        let result = call(SETUP_TIMEOUT, None, async move {
            let size = number(store, &instance, state.size).await?;
            let bytes = u64::from(size) * snapshot::WASM_PAGE;
            let len = u32::try_from(bytes)
                .map_err(|_| wasmtime::Error::msg("its memory is 4 GiB, past what it can read"))?;
            // The answer's pointer and length go at offset 0 for the call; the
            // post-return puts back what was there before the host looks.
            let (memory,) = instance
                .get_typed_func::<(u32, u32, u32), (WasmList<u8>,)>(&mut *store, state.read)?
                .call_async(&mut *store, (0, len, 0))
                .await?;
            let count = number(store, &instance, state.globals).await?;
            let get = instance.get_typed_func::<(u32,), (u64,)>(&mut *store, state.global_get)?;
            let mut globals = Vec::with_capacity(count as usize);
            for i in 0..count {
                globals.push(get.call_async(&mut *store, (i,)).await?.0);
            }
            Ok((memory, globals))
        });
        self.answer("read its state", result)
    }

    /// Writes the instance's memory as its differences from a fresh instance's, or
    /// `whole`, and returns its globals with what was written.
    pub(super) fn capture_state(
        &mut self,
        out: &mut dyn Write,
        whole: bool,
    ) -> Result<CapturedState> {
        // A handle the guest holds to a host resource (a stream, a file) lives in
        // tables a snapshot does not carry: the restored guest would hold a dangling
        // one. The runtimes sandlot builds drop theirs after each use.
        let open = self
            .store
            .as_ref()
            .is_some_and(|s| !s.data().table.is_empty());
        if open {
            return Err(self.failed(
                "it holds open WASI handles (streams or files) between runs, which a \
                 snapshot cannot carry; snapshot the files alone"
                    .into(),
            ));
        }
        let mut base = match whole {
            true => None,
            false => Some(ComponentInterpreter::start(self.start.clone())?),
        };
        let fresh = match base.as_mut() {
            Some(base) => Some(base.read_state()?.0),
            None => None,
        };
        let (memory, globals) = self.read_state()?;
        let Some(store) = self.store.as_ref() else {
            return Err(Error::SessionEnded {
                reason: "its interpreter is gone".into(),
            });
        };
        let fresh = match (&base, &fresh) {
            (Some(base), Some(fresh)) => base.store.as_ref().map(|s| fresh.as_le_slice(s)),
            _ => None,
        };
        let facts =
            snapshot::write(memory.as_le_slice(store), fresh, out).map_err(|e| Error::Io {
                context: "cannot write the snapshot".into(),
                source: e,
            })?;
        Ok(CapturedState {
            memory: facts,
            globals,
        })
    }

    /// Puts a snapshot's memory and globals into this fresh instance.
    fn load_state(&mut self, image: &mut StateReader<'_>, globals: &[u64]) -> Result<()> {
        let state = self.state()?;
        let head = snapshot::read_head(image, self.start.memory as u64)?;
        let (file, start) = image.file();
        let data = start + image.position();
        let available = image.len() - image.position();
        let runs = snapshot::read_runs(&head, file, data, available)?;
        let runs = runs.bytes();
        let size = head.size;
        let globals = globals.to_vec();
        let (store, instance) = self.for_state()?;
        let result = call(SETUP_TIMEOUT, None, async move {
            let pages = number(store, &instance, state.size).await?;
            let more = match head.growth(u64::from(pages) * snapshot::WASM_PAGE) {
                Ok(more) => u32::try_from(more)?,
                Err(refused) => return Ok(Err(refused)),
            };
            if more > 0 {
                let (grown,) = instance
                    .get_typed_func::<(u32,), (i32,)>(&mut *store, state.grow)?
                    .call_async(&mut *store, (more,))
                    .await?;
                if grown < 0 {
                    return Ok(Err(Error::InvalidSnapshot {
                        reason: format!("its memory ({} MiB) cannot be had here", size >> 20),
                    }));
                }
            }
            let place = instance.get_typed_func::<(u32,), ()>(&mut *store, state.place)?;
            let write = instance.get_typed_func::<(u32, &[u8]), ()>(&mut *store, state.write)?;
            let mut from = 0usize;
            for (at, len) in &head.runs {
                let at = u32::try_from(*at)?;
                let bytes = &runs[from..from + *len as usize];
                from += *len as usize;
                place.call_async(&mut *store, (at,)).await?;
                write.call_async(&mut *store, (at, bytes)).await?;
            }
            let count = number(store, &instance, state.globals).await?;
            if count as usize != globals.len() {
                return Ok(Err(Error::InvalidSnapshot {
                    reason: format!(
                        "it holds {} globals and this runtime has {count}: it is not of this \
                         runtime",
                        globals.len()
                    ),
                }));
            }
            let set = instance.get_typed_func::<(u32, u64), ()>(&mut *store, state.global_set)?;
            for (i, value) in globals.iter().enumerate() {
                set.call_async(&mut *store, (i as u32, *value)).await?;
            }
            Ok(Ok(()))
        });
        self.answer("restore its state", result)?
    }

    /// Calls a 0.2 session's `set-env` or `set-cwd`; `None` for a 0.1 runtime, which
    /// has neither.
    fn configure(&mut self, setting: Setting<'_>) -> Option<std::result::Result<(), String>> {
        let session = self.session;
        // 0.2 and 0.4 share the interface; their generated types differ.
        macro_rules! set {
            ($b:expr) => {{
                let Some(store) = self.store.as_mut() else {
                    return Some(Err("the interpreter is gone".into()));
                };
                store.set_epoch_deadline(engine::ticks(SETUP_TIMEOUT));
                call(SETUP_TIMEOUT, None, async {
                    let api = $b.sandlot_plugin_interpreter().session();
                    match setting {
                        Setting::Env(vars) => api.call_set_env(&mut *store, session, vars).await,
                        Setting::Cwd(path) => api.call_set_cwd(&mut *store, session, path).await,
                    }
                })
            }};
        }
        let result = match &self.bindings {
            Bound::V0_1(_) => return None,
            Bound::V0_2(b) => set!(b),
            Bound::V0_4(b) => set!(b),
        };
        Some(match result {
            Some(Ok(answer)) => answer,
            Some(Err(e)) => {
                self.store = None;
                Err(format!("the interpreter trapped: {e:#}"))
            }
            None => {
                self.store = None;
                Err(format!("it did not answer within {SETUP_TIMEOUT:?}"))
            }
        })
    }
}

/// Calls a state-access function that takes nothing and answers a number (`size`,
/// `globals`).
async fn number(
    store: &mut Store<ComponentState>,
    instance: &Instance,
    index: ComponentExportIndex,
) -> wasmtime::Result<u32> {
    let func = instance.get_typed_func::<(), (u32,)>(&mut *store, index)?;
    Ok(func.call_async(&mut *store, ()).await?.0)
}

/// What `configure` sets.
enum Setting<'a> {
    Env(&'a [(String, String)]),
    Cwd(&'a str),
}

impl Interpreter for ComponentInterpreter {
    fn run(&mut self, code: &str, timeout: Duration, interrupt: Option<&Interrupt>) -> Ran {
        let Some(store) = self.store.as_mut() else {
            return Ran::Gone;
        };
        arm(store, timeout, interrupt);
        let session = self.session;
        let result = call(timeout, interrupt, async {
            either!(&self.bindings, Bound, b => {
                b.sandlot_plugin_interpreter()
                    .session()
                    .call_run(&mut *store, session, code)
                    .await
            })
        });
        disarm(store);
        let memory_hit = store.data().memory.hit;
        let ran = match result {
            None => Ran::Deadline,
            Some(Ok(exit_code)) => Ran::Returned {
                exit_code,
                quit: false,
            },
            Some(Err(error)) => exited(error, memory_hit, true),
        };
        if !matches!(ran, Ran::Returned { quit: false, .. }) {
            // A trapped instance cannot be trusted with another run.
            self.store = None;
        }
        ran
    }

    fn set_env(&mut self, env: &[(String, String)]) -> Option<std::result::Result<(), String>> {
        self.configure(Setting::Env(env))
    }

    fn set_cwd(&mut self, path: &str) -> Option<std::result::Result<(), String>> {
        self.configure(Setting::Cwd(path))
    }

    fn capture(&mut self, out: &mut dyn Write, whole: bool) -> Option<Result<CapturedState>> {
        self.start
            .runtime
            .has_state_access()
            .then(|| self.capture_state(out, whole))
    }
}

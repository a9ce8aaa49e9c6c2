//! Runtimes that are components of the `sandlot:plugin/runtime` world (a JavaScript
//! engine, ...), of contract 0.1, 0.2 or 0.4. One instance per interpreter, holding one
//! `session` resource, so no two sessions ever share one. A 0.4 runtime may import
//! `tools`: its calls go through the sandbox's [`Door`], open only while a run that
//! offers tools is under way.

use super::{arm, call, disarm, exited, Interpreter, Ran, Stdio, SETUP_TIMEOUT};
use crate::door::Door;
use sandlot_core::error::{Error, Result};
use sandlot_core::interrupt::Interrupt;
use sandlot_core::layout::Layout;
use sandlot_core::wasmtime_engine::{self as engine, MemoryCap};
use std::path::Path;
use std::time::Duration;
use wasmtime::component::{Component, Linker, ResourceAny, ResourceTable};
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
pub(super) enum ComponentRuntime {
    V0_1(v0_1_0::RuntimePre<ComponentState>),
    V0_2(v0_2_0::RuntimePre<ComponentState>),
    V0_4(v0_4_0::RuntimePre<ComponentState>),
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
        Ok(match version {
            "0.1.0" => ComponentRuntime::V0_1(v0_1_0::RuntimePre::new(pre)?),
            "0.2.0" => ComponentRuntime::V0_2(v0_2_0::RuntimePre::new(pre)?),
            "0.4.0" => ComponentRuntime::V0_4(v0_4_0::RuntimePre::new(pre)?),
            other => wasmtime::bail!(
                "it was built for contract {other}; this sandlot runs runtimes of contract {} \
                 (a newer sandlot may run it)",
                API_VERSIONS.join(", ")
            ),
        })
    }

    fn api_version(&self) -> &'static str {
        match self {
            ComponentRuntime::V0_1(_) => "0.1.0",
            ComponentRuntime::V0_2(_) => "0.2.0",
            ComponentRuntime::V0_4(_) => "0.4.0",
        }
    }

    /// Calls `info` in an instance of its own, with nothing to read and a small budget.
    pub(super) fn describe(&self) -> wasmtime::Result<ComponentInfo> {
        let mut store =
            ComponentState::new(&mut WasiCtxBuilder::new(), INFO_MEMORY, Door::default());
        store.set_epoch_deadline(engine::ticks(INFO_TIMEOUT));
        let described = call(INFO_TIMEOUT, None, async {
            // The same calls on each version's bindings; 0.1's info has no `bundled`.
            macro_rules! info {
                ($pre:expr) => {
                    $pre.instantiate_async(&mut store)
                        .await?
                        .sandlot_plugin_interpreter()
                        .call_info(&mut store)
                        .await?
                };
            }
            Ok(match self {
                ComponentRuntime::V0_1(pre) => {
                    let info = info!(pre);
                    (info.id, info.languages, info.version, Vec::new())
                }
                ComponentRuntime::V0_2(pre) => {
                    let info = info!(pre);
                    (info.id, info.languages, info.version, info.bundled)
                }
                ComponentRuntime::V0_4(pre) => {
                    let info = info!(pre);
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
    bindings: Bound,
    session: ResourceAny,
}

impl ComponentInterpreter {
    pub(super) fn start(
        runtime: &ComponentRuntime,
        id: &str,
        env: &[(String, String)],
        workspace: &Path,
        memory: usize,
        stdio: &Stdio,
    ) -> Result<ComponentInterpreter> {
        let failed = |reason: String| Error::Runtime {
            runtime: id.to_string(),
            reason,
        };
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
            let bindings = match runtime {
                ComponentRuntime::V0_1(pre) => {
                    Bound::V0_1(pre.instantiate_async(&mut store).await?)
                }
                ComponentRuntime::V0_2(pre) => {
                    Bound::V0_2(pre.instantiate_async(&mut store).await?)
                }
                ComponentRuntime::V0_4(pre) => {
                    Bound::V0_4(pre.instantiate_async(&mut store).await?)
                }
            };
            let session = either!(&bindings, Bound, b => {
                b.sandlot_plugin_interpreter()
                    .session()
                    .call_constructor(&mut store)
                    .await?
            });
            Ok((bindings, session))
        });
        let (bindings, session) = match made {
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
            bindings,
            session,
        })
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
}

//! Runtimes that are components of the `sandlot:plugin/runtime` world (a JavaScript
//! engine, ...). One instance per interpreter, holding one `session` resource, so no
//! two sessions ever share one.

use super::{call, exited, Interpreter, Ran, Stdio, SETUP_TIMEOUT};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::wasmtime_engine::{self as engine, MemoryCap};
use std::path::Path;
use std::time::Duration;
use wasmtime::component::{Component, Linker, ResourceAny, ResourceTable};
use wasmtime::Store;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Bindings of each supported contract version of the runtime world.
mod v0_1_0 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "runtime",
        exports: { default: async },
    });
}

/// A component's store: WASI preview 2 and the memory cap.
pub(super) struct ComponentState {
    ctx: WasiCtx,
    table: ResourceTable,
    memory: MemoryCap,
}

impl WasiView for ComponentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// A component runtime compiled and linked, ready to instantiate per interpreter.
pub(super) struct ComponentRuntime {
    pre: v0_1_0::RuntimePre<ComponentState>,
}

impl ComponentRuntime {
    /// Links WASI preview 2 (sockets are linked but the context grants none) and
    /// checks the component against the contract.
    pub(super) fn new(component: &Component) -> wasmtime::Result<Self> {
        let mut linker = Linker::new(engine::shared());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        let pre = linker.instantiate_pre(component)?;
        Ok(ComponentRuntime {
            pre: v0_1_0::RuntimePre::new(pre)?,
        })
    }
}

/// The interpreter of one sandbox, for a component runtime.
pub(super) struct ComponentInterpreter {
    store: Option<Store<ComponentState>>,
    bindings: v0_1_0::Runtime,
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
        let mut store = Store::new(
            engine::shared(),
            ComponentState {
                ctx: wasi.build(),
                table: ResourceTable::new(),
                memory: MemoryCap::new(memory),
            },
        );
        store.limiter(|state| &mut state.memory);
        store.set_epoch_deadline(engine::ticks(SETUP_TIMEOUT));
        store.epoch_deadline_trap();
        let made = call(SETUP_TIMEOUT, async {
            let bindings = runtime.pre.instantiate_async(&mut store).await?;
            let session = bindings
                .sandlot_plugin_interpreter()
                .session()
                .call_constructor(&mut store)
                .await?;
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
}

impl Interpreter for ComponentInterpreter {
    fn run(&mut self, code: &str, timeout: Duration) -> Ran {
        let Some(store) = self.store.as_mut() else {
            return Ran::Gone;
        };
        store.set_epoch_deadline(engine::ticks(timeout));
        let (bindings, session) = (&self.bindings, self.session);
        let result = call(timeout, async {
            bindings
                .sandlot_plugin_interpreter()
                .session()
                .call_run(&mut *store, session, code)
                .await
        });
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
}

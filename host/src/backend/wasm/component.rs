//! Runtimes that are components of the `sandlot:plugin/runtime` world (a JavaScript
//! engine, ...). One instance per session, holding one `session` resource, so no two
//! sessions ever share an interpreter.

use super::capture::Capture;
use super::input::Feed;
use super::module::RuntimeManifest;
use super::{finish_output, stopped, WORKDIR};
use crate::backend::{BackendSession, RawOutput, RunRequest};
use crate::error::{Error, Result};
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
    });
}

/// A component's store: WASI preview 2 and the memory cap.
pub(crate) struct ComponentState {
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

/// A component runtime compiled and linked, ready to instantiate per session.
pub(crate) struct ComponentRuntime {
    pre: v0_1_0::RuntimePre<ComponentState>,
}

impl ComponentRuntime {
    /// Links WASI preview 2 (sockets are linked but the context grants none) and
    /// checks the component against the contract.
    pub(crate) fn new(component: &Component) -> wasmtime::Result<Self> {
        let mut linker = Linker::new(engine::shared());
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        let pre = linker.instantiate_pre(component)?;
        Ok(ComponentRuntime {
            pre: v0_1_0::RuntimePre::new(pre)?,
        })
    }
}

/// One sandbox of a component runtime.
pub(crate) struct ComponentSession {
    store: Option<Store<ComponentState>>,
    bindings: v0_1_0::Runtime,
    session: ResourceAny,
    stdout: Capture,
    stderr: Capture,
    stdin: Feed,
    ended: Option<String>,
    bundled: Vec<String>,
}

impl ComponentSession {
    pub(crate) fn open(
        runtime: &ComponentRuntime,
        manifest: &RuntimeManifest,
        workdir: &Path,
        memory: usize,
        max_output: usize,
        env: &[(String, String)],
    ) -> Result<Self> {
        let failed = |reason: String| Error::Runtime {
            runtime: manifest.id.clone(),
            reason,
        };
        let (stdout, stderr, stdin) = (
            Capture::new(max_output),
            Capture::new(max_output),
            Feed::default(),
        );
        let mut wasi = WasiCtxBuilder::new();
        wasi.envs(env)
            .stdin(stdin.clone())
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .preopened_dir(workdir, WORKDIR, FsPerms::ReadWrite)
            .map_err(|e| failed(format!("cannot mount the sandbox directory: {e:#}")))?;
        let mut store = Store::new(
            engine::shared(),
            ComponentState {
                ctx: wasi.build(),
                table: ResourceTable::new(),
                memory: MemoryCap::new(memory),
            },
        );
        store.limiter(|state| &mut state.memory);
        store.set_epoch_deadline(engine::ticks(Duration::from_secs(60)));
        store.epoch_deadline_trap();
        let bindings = runtime
            .pre
            .instantiate(&mut store)
            .map_err(|e| failed(format!("cannot instantiate: {e:#}")))?;
        let session = bindings
            .sandlot_plugin_interpreter()
            .session()
            .call_constructor(&mut store)
            .map_err(|e| failed(format!("cannot create a session: {e:#}")))?;
        Ok(ComponentSession {
            store: Some(store),
            bindings,
            session,
            stdout,
            stderr,
            stdin,
            ended: None,
            bundled: manifest.bundled.clone(),
        })
    }
}

impl BackendSession for ComponentSession {
    fn missing_libraries(&self, libraries: &[String]) -> Vec<String> {
        super::module::missing(&self.bundled, libraries)
    }

    fn run(&mut self, request: RunRequest<'_>) -> Result<RawOutput> {
        let Some(store) = self.store.as_mut() else {
            return Err(Error::SessionEnded {
                reason: self
                    .ended
                    .clone()
                    .unwrap_or_else(|| "the session is closed".into()),
            });
        };
        self.stdin.set(request.stdin);
        self.stdout.start(request.on_stdout);
        self.stderr.start(request.on_stderr);
        store.set_epoch_deadline(engine::ticks(request.timeout));
        let result = self
            .bindings
            .sandlot_plugin_interpreter()
            .session()
            .call_run(&mut *store, self.session, request.code);
        let mut output = RawOutput::default();
        match result {
            Ok(code) => output.exit_code = code,
            Err(error) => {
                let memory_hit = store.data().memory.hit;
                stopped(&error, memory_hit, request.timeout, &mut output);
            }
        }
        finish_output(&self.stdout, &self.stderr)(&mut output);
        if output.ended.is_some() {
            // A trapped instance cannot be trusted with another run.
            self.ended = output.ended.clone();
            self.store = None;
        }
        Ok(output)
    }
}

impl Drop for ComponentSession {
    fn drop(&mut self) {
        if let Some(store) = self.store.as_mut() {
            let _ = self.session.resource_drop(&mut *store);
        }
    }
}

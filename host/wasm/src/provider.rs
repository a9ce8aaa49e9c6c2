//! The wasm backend's provider: the backend is made when the `Sandlot` is built (it
//! is in-process and cannot fail to start), and made again once a runtime it lacked
//! is installed.

use crate::backend::WasmBackend;
use sandlot_core::backend::{Backend, BackendName, Capability, Needs};
use sandlot_core::error::Result;
use sandlot_core::provider::{Asked, BackendProvider, Prepared, Progress, ProviderContext};
use std::sync::{Arc, Mutex, MutexGuard};

/// Makes the [`WasmBackend`] over the runtimes directory and the runtime components
/// of the plugin directories, and installs a runtime sandlot knows
/// ([`crate::runtimes::KNOWN`]) the first time a session needs it.
#[derive(Default)]
pub struct WasmProvider {
    /// The backend it made last.
    made: Mutex<Option<Arc<WasmBackend>>>,
}

impl WasmProvider {
    /// The backend it made last, made now if it made none.
    pub fn backend(&self, context: &ProviderContext) -> Arc<WasmBackend> {
        self.made()
            .get_or_insert_with(|| Arc::new(discover(context)))
            .clone()
    }

    fn made(&self) -> MutexGuard<'_, Option<Arc<WasmBackend>>> {
        self.made.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether installing the language's runtime would let the backend serve
    /// `needs`: a runtime sandlot can install, and, when `auto` asks, nothing the
    /// backend could not give even then (an image, a shell, libraries the runtime
    /// does not bundle).
    fn installs_for(needs: &Needs<'_>, asked: Asked) -> bool {
        let known = crate::runtimes::KNOWN
            .iter()
            .any(|k| k.language == needs.language);
        match asked {
            Asked::ByName => known,
            Asked::ByAuto => {
                known
                    && needs.image.is_none()
                    && needs
                        .capabilities
                        .iter()
                        .all(|c| matches!(c, Capability::PersistentState | Capability::MemoryLimit))
                    && crate::runtimes::bundles(needs.language, needs.libraries)
            }
        }
    }
}

fn discover(context: &ProviderContext) -> WasmBackend {
    let backend = WasmBackend::discover(
        context.runtimes_dir(),
        context.plugins().runtime_components(),
        context.cache_dir().map(Into::into),
    );
    let wasm = &context.config().wasm;
    if wasm.workers == 0 {
        return backend;
    }
    let mut options = crate::worker::WorkerOptions::new(wasm.workers);
    options.program = wasm.worker_program.clone();
    options.pin = wasm.pin_workers.unwrap_or(true);
    backend.in_workers(options)
}

impl BackendProvider for WasmProvider {
    fn name(&self) -> BackendName {
        BackendName::WASM
    }

    fn eager(&self) -> bool {
        true
    }

    fn connect(&self, context: &ProviderContext) -> Result<Arc<dyn Backend>> {
        Ok(self.backend(context))
    }

    fn needs_preparing(&self, context: &ProviderContext, needs: &Needs<'_>, asked: Asked) -> bool {
        WasmProvider::installs_for(needs, asked) && !self.backend(context).serves(needs.language)
    }

    fn prepare(
        &self,
        context: &ProviderContext,
        needs: &Needs<'_>,
        asked: Asked,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Prepared> {
        if !WasmProvider::installs_for(needs, asked) {
            return Ok(Prepared::Nothing);
        }
        let language = needs.language.to_string();
        let backend = self.backend(context);
        // Said before the lookup: a runtime component seen for the first time is
        // compiled to learn what it serves.
        let compiling = backend.needs_compile(&language);
        if compiling {
            progress(Progress::Compiling {
                language: language.clone(),
                uncached: backend.cache_problem(),
            });
        }
        if backend.serves(&language) {
            return Ok(Prepared::Nothing);
        }
        progress(Progress::Installing {
            language: language.clone(),
        });
        crate::runtimes::install(&language, context.runtimes_dir(), |step| {
            progress(Progress::Step(step.to_string()))
        })?;
        let fresh = Arc::new(discover(context));
        if !compiling && fresh.needs_compile(&language) {
            progress(Progress::Compiling {
                language,
                uncached: fresh.cache_problem(),
            });
        }
        *self.made() = Some(fresh);
        Ok(Prepared::Remake)
    }
}

impl WasmBackend {
    /// The wasm backend of `sandlot`, as its provider made it last (one over the same
    /// directories if no wasm provider is registered).
    pub fn of(sandlot: &sandlot_core::Sandlot) -> Arc<WasmBackend> {
        match sandlot.providers::<WasmProvider>().next() {
            Some(provider) => provider.backend(sandlot.context()),
            None => WasmProvider::default().backend(sandlot.context()),
        }
    }
}

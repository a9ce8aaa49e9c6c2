//! The loaded handler: preparing it, calling it in a fresh, capped instance, and
//! turning a failed call into an error that names the plugin. Every answer-specific
//! call (plan, kernel, analysis) builds on `call` from its own file.

use super::checks::{check_command, check_info};
use super::limits::HandlerLimits;
use super::versions::{capabilities, language_info, Guest, Pre, Version};
use crate::error::{Error, PluginSource, Result};
use crate::language::{Command, KernelSpec, LanguageCapability, LanguageInfo};
use crate::wasmtime_engine::{self as engine, MemoryCap};
use sandlot_wit::v0_1_0::handler as v0_1_0;
use sandlot_wit::v0_2_0::handler as v0_2_0;
use sandlot_wit::v0_3_0::handler as v0_3_0;
use std::sync::{Arc, Mutex};
use v0_2_0::exports::sandlot::plugin::handler as wit2;
use v0_3_0::exports::sandlot::plugin::handler as wit3;
use wasmtime::component::{Component, Linker};
use wasmtime::{Store, Trap};

/// A loaded language handler, ready to be called from any thread.
#[derive(Clone)]
pub struct LanguageHandler {
    source: PluginSource,
    pub(super) api_version: String,
    pub(super) info: LanguageInfo,
    limits: HandlerLimits,
    pre: Pre,
    /// The `kernel` answers given so far, by working and output directory. A handler
    /// links no imports and each call gets a fresh instance, so an answer depends on
    /// the arguments alone; every session asks the same, and a call costs about
    /// 0.1 ms of the session's opening.
    pub(super) kernels: Arc<Mutex<Vec<KernelAnswer>>>,
}

/// A `kernel` answer: for which working and output directory, and what it was.
type KernelAnswer = ((String, String), Option<KernelSpec>);

impl std::fmt::Debug for LanguageHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanguageHandler")
            .field("source", &self.source)
            .field("api_version", &self.api_version)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl LanguageHandler {
    /// Prepares `component` (already checked to claim contract `api_version`) and asks
    /// it for its [`LanguageInfo`].
    pub(crate) fn new(
        component: &Component,
        source: PluginSource,
        api_version: &str,
        limits: HandlerLimits,
    ) -> Result<Self> {
        let engine = engine::plugins();
        let imports: Vec<String> = component
            .component_type()
            .imports(engine)
            .map(|(name, _)| name.to_string())
            .collect();
        if !imports.is_empty() {
            return Err(Error::HandlerImports {
                plugin: source,
                imports,
            });
        }
        let mismatch = |e: wasmtime::Error| Error::ContractMismatch {
            plugin: source.clone(),
            api: api_version.to_string(),
            reason: format!("{e:#}"),
        };
        // No imports at all: a handler gets no capabilities, not even WASI.
        let linker = Linker::new(engine);
        let pre = linker.instantiate_pre(component).map_err(mismatch)?;
        let pre = match api_version {
            "0.1.0" => Pre::V0_1(v0_1_0::LanguageHandlerPre::new(pre).map_err(mismatch)?),
            "0.2.0" => Pre::V0_2(v0_2_0::LanguageHandlerPre::new(pre).map_err(mismatch)?),
            "0.3.0" => Pre::V0_3(v0_3_0::LanguageHandlerPre::new(pre).map_err(mismatch)?),
            other => {
                return Err(mismatch(wasmtime::format_err!(
                    "contract {other} has no bindings in this host"
                )))
            }
        };
        let mut handler = LanguageHandler {
            source,
            api_version: api_version.to_string(),
            info: placeholder_info(),
            limits,
            pre,
            kernels: Arc::default(),
        };
        let info = handler.call("info", 0, |guest, store| {
            Ok(match guest {
                Guest::V0_1(h) => {
                    let info = h.call_info(store)?;
                    let flags = [
                        (
                            info.can_install_libraries,
                            LanguageCapability::InstallLibraries,
                        ),
                        (info.can_capture_plots, LanguageCapability::CapturePlots),
                    ];
                    let capabilities = flags
                        .into_iter()
                        .filter_map(|(has, capability)| has.then_some(capability))
                        .collect();
                    language_info!(info, capabilities)
                }
                Guest::V0_2(h) => {
                    let info = h.call_info(store)?;
                    let capabilities = capabilities!(wit2, info.capabilities);
                    language_info!(info, capabilities)
                }
                Guest::V0_3(h) => {
                    let info = h.call_info(store)?;
                    let capabilities = capabilities!(wit3, info.capabilities);
                    language_info!(info, capabilities)
                }
            })
        })?;
        handler.info = check_info(info).map_err(|reason| handler.invalid("info", reason))?;
        Ok(handler)
    }

    /// Where the plugin came from.
    pub fn source(&self) -> &PluginSource {
        &self.source
    }

    /// The contract version the plugin was built for.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// What the handler declared when it was loaded.
    pub fn info(&self) -> &LanguageInfo {
        &self.info
    }

    pub(super) fn guest_kind(&self) -> Version {
        match self.pre {
            Pre::V0_1(_) => Version::V0_1,
            Pre::V0_2(_) => Version::V0_2,
            Pre::V0_3(_) => Version::V0_3,
        }
    }

    /// Runs `f` on a fresh instance with the memory cap and deadline (grown for the
    /// `code_bytes` of code it is handed), and turns any failure into an error naming
    /// the plugin and what happened.
    pub(super) fn call<R>(
        &self,
        function: &'static str,
        code_bytes: usize,
        f: impl FnOnce(Guest<'_>, &mut Store<MemoryCap>) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let limits = self.limits.for_code(code_bytes);
        let mut store = Store::new(engine::plugins(), MemoryCap::new(limits.memory));
        store.limiter(|state| state);
        store.set_epoch_deadline(engine::ticks(limits.timeout));
        store.epoch_deadline_trap();
        let result = match &self.pre {
            Pre::V0_1(pre) => pre
                .instantiate(&mut store)
                .and_then(|b| f(Guest::V0_1(b.sandlot_plugin_handler()), &mut store)),
            Pre::V0_2(pre) => pre
                .instantiate(&mut store)
                .and_then(|b| f(Guest::V0_2(b.sandlot_plugin_handler()), &mut store)),
            Pre::V0_3(pre) => pre
                .instantiate(&mut store)
                .and_then(|b| f(Guest::V0_3(b.sandlot_plugin_handler()), &mut store)),
        };
        result.map_err(|e| {
            if store.data().hit {
                Error::MemoryLimit {
                    plugin: self.source.clone(),
                    function,
                    limit: limits.memory,
                }
            } else if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                Error::Deadline {
                    plugin: self.source.clone(),
                    function,
                    limit: limits.timeout,
                }
            } else if let Some(trap) = e.downcast_ref::<Trap>() {
                Error::Trap {
                    plugin: self.source.clone(),
                    function,
                    reason: trap.to_string(),
                }
            } else {
                // The host links no imports, so the only other failures are values the
                // canonical ABI cannot lift: strings that are not UTF-8, bad pointers.
                self.invalid(function, format!("{e:#}"))
            }
        })
    }

    pub(super) fn checked(
        &self,
        function: &'static str,
        commands: Vec<Command>,
    ) -> Result<Vec<Command>> {
        for command in &commands {
            check_command(command).map_err(|reason| self.invalid(function, reason))?;
        }
        Ok(commands)
    }

    pub(super) fn invalid(&self, function: &'static str, reason: String) -> Error {
        Error::InvalidResponse {
            plugin: self.source.clone(),
            function,
            reason,
        }
    }

    pub(super) fn refused(&self, function: &'static str, message: String) -> Error {
        Error::Refused {
            plugin: self.source.clone(),
            function,
            message,
        }
    }
}

fn placeholder_info() -> LanguageInfo {
    LanguageInfo {
        id: String::new(),
        aliases: Vec::new(),
        display_name: String::new(),
        file_extension: String::new(),
        default_image: String::new(),
        capabilities: Default::default(),
        version: String::new(),
    }
}

//! Calling a language handler: one fresh instance per call from a reused
//! [`InstancePre`](wasmtime::component::InstancePre), with a memory cap and a deadline,
//! and every answer checked before the host uses it.

use crate::error::{Error, PluginSource, Result};
use crate::language::{
    check_language_name, Command, Finding, KernelSpec, LanguageCapability, LanguageInfo, Phase,
    Plan, PlanOptions, Restriction, RestrictionKind, Severity, SourceFile,
};
use crate::wasmtime_engine::{self as engine, MemoryCap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::component::{Component, Linker};
use wasmtime::{Store, Trap};

// Bindings of each supported contract version, bound once in sandlot-wit, so plugins
// built against an older contract keep loading.
use sandlot_wit::v0_1_0::handler as v0_1_0;
use sandlot_wit::v0_2_0::handler as v0_2_0;
use sandlot_wit::v0_3_0::handler as v0_3_0;

use v0_1_0::exports::sandlot::plugin::handler as wit1;
use v0_2_0::exports::sandlot::plugin::handler as wit2;
use v0_3_0::exports::sandlot::plugin::handler as wit3;

/// A prepared handler, by the contract version it was built for.
#[derive(Clone)]
enum Pre {
    V0_1(v0_1_0::LanguageHandlerPre<MemoryCap>),
    V0_2(v0_2_0::LanguageHandlerPre<MemoryCap>),
    V0_3(v0_3_0::LanguageHandlerPre<MemoryCap>),
}

/// The exports of one fresh instance, by contract version.
#[derive(Clone, Copy)]
enum Guest<'a> {
    V0_1(&'a wit1::Guest),
    V0_2(&'a wit2::Guest),
    V0_3(&'a wit3::Guest),
}

/// Runs `$body` on a handler of contract 0.2 or later, with `$wit` naming that
/// version's bindings (their types differ, the calls do not); a handler of 0.1 answers
/// `$older` without being instantiated.
macro_rules! since_0_2 {
    ($self:expr, $function:literal, $older:expr, |$h:ident, $store:ident, $wit:ident| $body:expr) => {
        since_0_2!($self, $function, 0, $older, |$h, $store, $wit| $body)
    };
    ($self:expr, $function:literal, $code_bytes:expr, $older:expr, |$h:ident, $store:ident, $wit:ident| $body:expr) => {{
        if $self.guest_kind() == Version::V0_1 {
            Ok($older)
        } else {
            $self.call($function, $code_bytes, |guest, $store| match guest {
                Guest::V0_1(_) => Ok($older),
                Guest::V0_2($h) => {
                    // Bodies that name no type of their version leave it unused.
                    #[allow(unused_imports)]
                    use wit2 as $wit;
                    $body
                }
                Guest::V0_3($h) => {
                    // Bodies that name no type of their version leave it unused.
                    #[allow(unused_imports)]
                    use wit3 as $wit;
                    $body
                }
            })
        }
    }};
}

/// The same conversion for the types every contract version defines alike.
macro_rules! convert_command {
    ($wit:ident, $c:expr) => {{
        let c = $c;
        Command {
            phase: match c.phase {
                $wit::Phase::Setup => Phase::Setup,
                $wit::Phase::Install => Phase::Install,
                $wit::Phase::Build => Phase::Build,
                $wit::Phase::Run => Phase::Run,
            },
            argv: c.argv,
            env: c.env,
            needs_network: c.needs_network,
        }
    }};
}

/// Calls `plan` of either version and converts its answer: file contents are a string
/// in 0.1 and bytes in 0.2, which `Into<Vec<u8>>` covers both ways.
macro_rules! call_plan {
    ($wit:ident, $h:expr, $store:expr, $code:expr, $libraries:expr, $options:expr) => {{
        let options = $wit::PlanOptions {
            workdir: $options.workdir.clone(),
            output_dir: $options.output_dir.clone(),
            capture_plots: $options.capture_plots,
            args: $options.args.clone(),
        };
        $h.call_plan($store, $code, $libraries, &options)?
            .map(|plan| {
                let files: Vec<SourceFile> = plan
                    .files
                    .into_iter()
                    .map(|f| SourceFile {
                        path: f.path,
                        contents: f.contents.into(),
                    })
                    .collect();
                let commands: Vec<Command> = plan
                    .commands
                    .into_iter()
                    .map(|c| convert_command!($wit, c))
                    .collect();
                (files, commands)
            })
    }};
}

/// A handler's `info` of any contract version, with its capabilities already read.
macro_rules! language_info {
    ($info:expr, $capabilities:expr) => {{
        let info = $info;
        LanguageInfo {
            id: info.id,
            aliases: info.aliases,
            display_name: info.display_name,
            file_extension: info.file_extension,
            default_image: info.default_image,
            capabilities: $capabilities,
            version: info.version,
        }
    }};
}

/// The capabilities of contract 0.2 or later.
macro_rules! capabilities {
    ($wit:ident, $list:expr) => {
        $list
            .iter()
            .map(|c| match c {
                $wit::Capability::InstallLibraries => LanguageCapability::InstallLibraries,
                $wit::Capability::CapturePlots => LanguageCapability::CapturePlots,
                $wit::Capability::Interactive => LanguageCapability::Interactive,
            })
            .collect()
    };
}

macro_rules! convert_finding {
    ($wit:ident, $f:expr) => {{
        let f = $f;
        Finding {
            rule_id: f.rule_id,
            severity: match f.severity {
                $wit::Severity::Info => Severity::Info,
                $wit::Severity::Low => Severity::Low,
                $wit::Severity::Medium => Severity::Medium,
                $wit::Severity::High => Severity::High,
                $wit::Severity::Critical => Severity::Critical,
            },
            line: f.line,
            message: f.message,
        }
    }};
}

/// Limits applied to every call into a language handler.
///
/// Handlers are pure functions that should answer in microseconds; these limits only
/// stop a broken or hostile plugin from hanging or exhausting the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerLimits {
    /// Most linear memory one call may use.
    pub memory: usize,
    /// Wall-clock deadline of one call.
    pub timeout: Duration,
}

impl Default for HandlerLimits {
    fn default() -> Self {
        HandlerLimits {
            memory: 64 << 20,
            timeout: Duration::from_secs(1),
        }
    }
}

/// Linear memory a call may use beyond [`HandlerLimits::memory`] per byte of code it
/// is handed: a scanner keeps a token per few bytes, so a 2 MB file of `x=1` lines
/// needs more than the fixed 64 MiB.
const MEMORY_PER_CODE_BYTE: usize = 64;

/// Time a call may take beyond [`HandlerLimits::timeout`] per MiB of code it is
/// handed. The built-in handlers analyse a MiB of literal-heavy code in about a fifth
/// of this on a slow machine (the `plugins` bench).
const TIME_PER_CODE_MIB: Duration = Duration::from_secs(1);

impl HandlerLimits {
    /// The limits of a call handed `code_bytes` of code: these, plus memory and time in
    /// proportion to the code, so that a long program (a model's inlined table, say) is
    /// analysed rather than refused, while a handler that loops or leaks on a short one
    /// still stops at the fixed budget.
    ///
    /// ```
    /// use sandlot::HandlerLimits;
    /// use std::time::Duration;
    /// let limits = HandlerLimits::default();
    /// assert_eq!(limits.for_code(0), limits);
    /// let ten_mib = limits.for_code(10 << 20);
    /// assert_eq!(ten_mib.timeout, limits.timeout + Duration::from_secs(10));
    /// assert_eq!(ten_mib.memory, limits.memory + (640 << 20));
    /// ```
    pub fn for_code(self, code_bytes: usize) -> HandlerLimits {
        let mib = code_bytes as f64 / f64::from(1u32 << 20);
        HandlerLimits {
            memory: self
                .memory
                .saturating_add(code_bytes.saturating_mul(MEMORY_PER_CODE_BYTE)),
            timeout: self.timeout + TIME_PER_CODE_MIB.mul_f64(mib),
        }
    }
}

/// A loaded language handler, ready to be called from any thread.
#[derive(Clone)]
pub struct LanguageHandler {
    source: PluginSource,
    api_version: String,
    info: LanguageInfo,
    limits: HandlerLimits,
    pre: Pre,
    /// The `kernel` answers given so far, by working and output directory. A handler
    /// links no imports and each call gets a fresh instance, so an answer depends on
    /// the arguments alone; every session asks the same, and a call costs about
    /// 0.1 ms of the session's opening.
    kernels: Arc<Mutex<Vec<KernelAnswer>>>,
}

/// A `kernel` answer: for which working and output directory, and what it was.
type KernelAnswer = ((String, String), Option<KernelSpec>);

/// How many distinct `kernel` answers a handler keeps (hosts ask with one pair).
const KERNEL_ANSWERS: usize = 8;

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

    /// Lays out a run of `code`: files to write and commands to run, including library
    /// installation. Every path is checked to stay inside the working directory.
    ///
    /// ```
    /// # fn main() -> Result<(), sandlot::Error> {
    /// let host = sandlot::PluginHost::builder().no_cache().load()?;
    /// let python = host.language("py")?;
    /// let plan = python.plan("print('hi')", &[], &sandlot::PlanOptions::default())?;
    /// assert_eq!(plan.commands.last().unwrap().argv[0], "python3");
    /// # Ok(())
    /// # }
    /// ```
    pub fn plan(&self, code: &str, libraries: &[String], options: &PlanOptions) -> Result<Plan> {
        let (files, commands) = self
            .call("plan", code.len(), |guest, store| {
                Ok(match guest {
                    Guest::V0_1(h) => call_plan!(wit1, h, store, code, libraries, options),
                    Guest::V0_2(h) => call_plan!(wit2, h, store, code, libraries, options),
                    Guest::V0_3(h) => call_plan!(wit3, h, store, code, libraries, options),
                })
            })?
            .map_err(|message| self.refused("plan", message))?;
        for file in &files {
            check_relative_path(&file.path).map_err(|reason| self.invalid("plan", reason))?;
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = files.iter().find(|f| !seen.insert(f.path.as_str())) {
            return Err(self.invalid("plan", format!("file `{}` is written twice", dup.path)));
        }
        let commands = self.checked("plan", commands)?;
        if !commands.iter().any(|c| c.phase == Phase::Run) {
            return Err(self.invalid("plan", "the plan has no `run` command".into()));
        }
        // The host reads the names too, whatever the handler made of them: a
        // handler's own check is its author's, and an installer takes far more than
        // names ([`crate::library`]).
        crate::library::check(&self.info.id, libraries)?;
        Ok(Plan { files, commands })
    }

    /// Whether `libraries` are registry names of the language's installer
    /// ([`crate::library`]), where the handler installs libraries at all (one that
    /// does not refuses them with its own reason when asked).
    pub fn check_libraries(&self, libraries: &[String]) -> Result<()> {
        let installs = self
            .info
            .capabilities
            .contains(&crate::language::LanguageCapability::InstallLibraries);
        match installs {
            true => crate::library::check(&self.info.id, libraries),
            false => Ok(()),
        }
    }

    /// Commands that install `libraries` into a sandbox whose working directory is
    /// `workdir`. A handler that installs nothing refuses with its reason; otherwise
    /// a library that is no registry name of the language's installer is
    /// [`Error::InvalidLibrary`](crate::Error::InvalidLibrary), whatever the handler
    /// made of it.
    pub fn install(&self, libraries: &[String], workdir: &str) -> Result<Vec<Command>> {
        let commands = self
            .call("install", 0, |guest, store| {
                Ok(match guest {
                    Guest::V0_1(h) => h.call_install(store, libraries, workdir)?.map(|c| {
                        c.into_iter()
                            .map(|c| convert_command!(wit1, c))
                            .collect::<Vec<_>>()
                    }),
                    Guest::V0_2(h) => h.call_install(store, libraries, workdir)?.map(|c| {
                        c.into_iter()
                            .map(|c| convert_command!(wit2, c))
                            .collect::<Vec<_>>()
                    }),
                    Guest::V0_3(h) => h.call_install(store, libraries, workdir)?.map(|c| {
                        c.into_iter()
                            .map(|c| convert_command!(wit3, c))
                            .collect::<Vec<_>>()
                    }),
                })
            })?
            .map_err(|message| self.refused("install", message))?;
        crate::library::check(&self.info.id, libraries)?;
        self.checked("install", commands)
    }

    /// Code that makes the language's plotting libraries save figures into
    /// `output_dir`, if the language has any.
    pub fn plot_prelude(&self, output_dir: &str) -> Result<Option<String>> {
        self.call("plot-prelude", 0, |guest, store| match guest {
            Guest::V0_1(h) => h.call_plot_prelude(store, output_dir),
            Guest::V0_2(h) => h.call_plot_prelude(store, output_dir),
            Guest::V0_3(h) => h.call_plot_prelude(store, output_dir),
        })
    }

    /// Code that saves the figures a run left open into `output_dir`, if the
    /// language's prelude needs it. Handlers of contract 0.1 have none.
    pub fn plot_flush(&self, output_dir: &str) -> Result<Option<String>> {
        since_0_2!(self, "plot-flush", None, |h, store, _wit| h
            .call_plot_flush(store, output_dir))
    }

    /// Whether `code` may draw a figure. Handlers of contract 0.1 cannot say, so the
    /// host looks for words of plotting libraries instead.
    pub fn may_plot(&self, code: &str) -> Result<bool> {
        if !self.info.has(LanguageCapability::CapturePlots) {
            return Ok(false);
        }
        since_0_2!(
            self,
            "may-plot",
            code.len(),
            mentions_plotting(code),
            |h, store, _wit| h.call_may_plot(store, code)
        )
    }

    /// The language's kernel for a sandbox whose working directory is `workdir` and
    /// output directory `output_dir`, or `None` when each run is a separate program.
    pub fn kernel(&self, workdir: &str, output_dir: &str) -> Result<Option<KernelSpec>> {
        if !self.info.has(LanguageCapability::Interactive) {
            return Ok(None);
        }
        let key = (workdir.to_string(), output_dir.to_string());
        let answers = || self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, spec)) = answers().iter().find(|(asked, _)| *asked == key) {
            return Ok(spec.clone());
        }
        let spec = self.ask_kernel(workdir, output_dir)?;
        let mut kept = answers();
        if kept.len() == KERNEL_ANSWERS {
            kept.remove(0);
        }
        kept.push((key, spec.clone()));
        Ok(spec)
    }

    /// [`LanguageHandler::kernel`], asked of the plugin.
    fn ask_kernel(&self, workdir: &str, output_dir: &str) -> Result<Option<KernelSpec>> {
        let spec = since_0_2!(self, "kernel", None, |h, store, wit| {
            let options = wit::KernelOptions {
                workdir: workdir.to_string(),
                output_dir: output_dir.to_string(),
            };
            h.call_kernel(store, &options).map(|spec| {
                spec.map(|spec| {
                    let wit::CellFraming::SandlotCell = spec.framing;
                    KernelSpec {
                        driver: spec.driver,
                        driver_name: spec.driver_name,
                        argv: spec.argv,
                        env: spec.env,
                    }
                })
            })
        })?;
        let Some(spec) = spec else {
            return Ok(None);
        };
        check_kernel(&spec).map_err(|reason| self.invalid("kernel", reason))?;
        Ok(Some(spec))
    }

    fn guest_kind(&self) -> Version {
        match self.pre {
            Pre::V0_1(_) => Version::V0_1,
            Pre::V0_2(_) => Version::V0_2,
            Pre::V0_3(_) => Version::V0_3,
        }
    }

    /// Static analysis of `code` for the security policy, most severe first: the
    /// handler's own rules and the `restricted` modules and calls of its language.
    ///
    /// A handler built before contract 0.3 cannot look for restrictions; it gives
    /// one finding, `sandlot.restrictions-unchecked`, as severe as the most severe
    /// restriction, so a policy that would block a restricted name blocks the code
    /// instead of letting it through unchecked.
    ///
    /// ```
    /// # fn main() -> Result<(), sandlot::Error> {
    /// use sandlot::{Restriction, RestrictionKind, Severity};
    /// let host = sandlot::PluginHost::builder().no_cache().load()?;
    /// let python = host.language("python")?;
    /// let socket = Restriction {
    ///     kind: RestrictionKind::Module,
    ///     name: "socket".parse().unwrap(),
    ///     severity: Severity::Critical,
    /// };
    /// let findings = python.analyze("import socket as s\ns.create_connection", &[socket])?;
    /// assert_eq!(findings[0].rule_id, "python.restricted-module.socket");
    /// assert_eq!(findings[0].line, Some(1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn analyze(&self, code: &str, restricted: &[Restriction]) -> Result<Vec<Finding>> {
        let rules: Vec<wit3::Restriction> = restricted
            .iter()
            .map(|r| wit3::Restriction {
                kind: match r.kind {
                    RestrictionKind::Module => wit3::RestrictionKind::Module,
                    RestrictionKind::Call => wit3::RestrictionKind::Call,
                },
                name: r.name.to_string(),
                severity: match r.severity {
                    Severity::Info => wit3::Severity::Info,
                    Severity::Low => wit3::Severity::Low,
                    Severity::Medium => wit3::Severity::Medium,
                    Severity::High => wit3::Severity::High,
                    Severity::Critical => wit3::Severity::Critical,
                },
            })
            .collect();
        let mut findings = self.call("analyze", code.len(), |guest, store| {
            Ok(match guest {
                Guest::V0_1(h) => h
                    .call_analyze(store, code)?
                    .into_iter()
                    .map(|f| convert_finding!(wit1, f))
                    .collect::<Vec<_>>(),
                Guest::V0_2(h) => h
                    .call_analyze(store, code)?
                    .into_iter()
                    .map(|f| convert_finding!(wit2, f))
                    .collect(),
                Guest::V0_3(h) => h
                    .call_analyze(store, code, &rules)?
                    .into_iter()
                    .map(|f| convert_finding!(wit3, f))
                    .collect(),
            })
        })?;
        if self.guest_kind() < Version::V0_3 {
            if let Some(severity) = restricted.iter().map(|r| r.severity).max() {
                findings.push(Finding {
                    rule_id: "sandlot.restrictions-unchecked".into(),
                    severity,
                    line: None,
                    message: format!(
                        "the `{}` handler is built for plugin contract {}, which cannot look \
                         for restricted modules and calls: use a handler built for 0.3.0, or \
                         drop the policy's restrictions for `{}`",
                        self.info.id, self.api_version, self.info.id
                    ),
                });
            }
        }
        for f in &findings {
            if f.rule_id.trim().is_empty() {
                return Err(self.invalid("analyze", "a finding has an empty rule id".into()));
            }
            if f.line == Some(0) {
                return Err(self.invalid("analyze", "line numbers start at 1".into()));
            }
        }
        // Stable whatever order the plugin answers in, and one finding per rule and line.
        findings.sort_by(|a, b| {
            (b.severity, a.line, &a.rule_id).cmp(&(a.severity, b.line, &b.rule_id))
        });
        findings.dedup_by(|a, b| a.rule_id == b.rule_id && a.line == b.line);
        Ok(findings)
    }

    /// Runs `f` on a fresh instance with the memory cap and deadline (grown for the
    /// `code_bytes` of code it is handed), and turns any failure into an error naming
    /// the plugin and what happened.
    fn call<R>(
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

    fn checked(&self, function: &'static str, commands: Vec<Command>) -> Result<Vec<Command>> {
        for command in &commands {
            check_command(command).map_err(|reason| self.invalid(function, reason))?;
        }
        Ok(commands)
    }

    fn invalid(&self, function: &'static str, reason: String) -> Error {
        Error::InvalidResponse {
            plugin: self.source.clone(),
            function,
            reason,
        }
    }

    fn refused(&self, function: &'static str, message: String) -> Error {
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

/// The contract version a handler was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Version {
    V0_1,
    V0_2,
    V0_3,
}

/// Whether `code` may draw a figure, directly or through a library (`df.plot()`,
/// seaborn, ggplot2...), for handlers that cannot say. A miss only means left-open
/// figures are not saved for that run; figures saved explicitly into the output
/// directory always come back.
fn mentions_plotting(code: &str) -> bool {
    [
        "plot",
        "plt",
        "matplotlib",
        "seaborn",
        "figure",
        "hist",
        "png(",
    ]
    .iter()
    .any(|word| code.contains(word))
}

/// A kernel the host can start: a plain driver file name and a program to run.
fn check_kernel(spec: &KernelSpec) -> std::result::Result<(), String> {
    check_relative_path(&spec.driver_name)?;
    if spec.driver_name.contains('/') {
        return Err(format!(
            "driver name `{}` must be a plain file name",
            spec.driver_name.escape_debug()
        ));
    }
    check_command(&Command {
        phase: Phase::Run,
        argv: spec.argv.clone(),
        env: spec.env.clone(),
        needs_network: false,
    })
}

fn check_info(info: LanguageInfo) -> std::result::Result<LanguageInfo, String> {
    check_language_name("language id", &info.id)?;
    for alias in &info.aliases {
        check_language_name("alias", alias)?;
    }
    let extension_ok = !info.file_extension.is_empty()
        && info.file_extension.len() <= 16
        && info
            .file_extension
            .chars()
            .all(|c| c.is_ascii_alphanumeric());
    if !extension_ok {
        return Err(format!(
            "file extension `{}` must be 1-16 letters or digits, without the dot",
            info.file_extension.escape_debug()
        ));
    }
    for (what, value) in [
        ("display name", &info.display_name),
        ("default image", &info.default_image),
        ("version", &info.version),
    ] {
        if value.trim().is_empty() || value.len() > 200 || value.chars().any(char::is_control) {
            return Err(format!(
                "{what} `{}` must be 1-200 printable characters",
                value.escape_debug()
            ));
        }
    }
    Ok(info)
}

/// A path the host may write: relative, normal components only, no NUL.
pub(crate) fn check_relative_path(path: &str) -> std::result::Result<(), String> {
    let escapes = path.is_empty()
        || path.starts_with('/')
        || path.contains('\0')
        || path.contains('\\')
        || path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if escapes {
        Err(format!(
            "file path `{}` must be relative to the working directory, without `.`, `..` or empty parts",
            path.escape_debug()
        ))
    } else {
        Ok(())
    }
}

pub(crate) fn check_command(command: &Command) -> std::result::Result<(), String> {
    match command.argv.first() {
        None => return Err("a command has an empty argv".into()),
        Some(program) if program.is_empty() => return Err("a command's program is empty".into()),
        _ => {}
    }
    if let Some(arg) = command.argv.iter().find(|a| a.contains('\0')) {
        return Err(format!(
            "argument `{}` contains a NUL byte",
            arg.escape_debug()
        ));
    }
    for (key, value) in &command.env {
        let key_ok = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !key_ok {
            return Err(format!(
                "environment name `{}` is not valid",
                key.escape_debug()
            ));
        }
        if value.contains('\0') {
            return Err(format!("environment value of `{key}` contains a NUL byte"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_is_asked_of_the_plugin_once_per_pair_of_directories() {
        let plugins = crate::plugin::PluginHost::builder().load().unwrap();
        let python = plugins.language("python").unwrap();
        let spec = python.kernel("/workspace", "/workspace/output").unwrap();
        assert!(spec.is_some());
        // Clones share the answers; another pair is asked again.
        assert_eq!(
            python
                .clone()
                .kernel("/workspace", "/workspace/output")
                .unwrap(),
            spec
        );
        assert_eq!(python.kernels.lock().unwrap().len(), 1);
        let elsewhere = python.kernel("/w", "/w/output").unwrap();
        assert!(elsewhere.is_some());
        assert_eq!(python.kernels.lock().unwrap().len(), 2);
    }

    #[test]
    fn paths_that_leave_the_workdir_are_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a\\b",
            "a\0b",
        ] {
            assert!(check_relative_path(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["main.py", "src/Main.java", ".sandlot/x", "a..b"] {
            assert!(check_relative_path(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn names_are_command_line_friendly() {
        for good in ["python", "c++", "c#", "lua5.4", "objective-c"] {
            assert!(check_language_name("id", good).is_ok(), "{good}");
        }
        for bad in ["", "Python", "two words", "-x", "a;b", &"x".repeat(33)] {
            assert!(check_language_name("id", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn commands_need_a_program_and_valid_env() {
        let command = |argv: &[&str], env: &[(&str, &str)]| Command {
            phase: Phase::Run,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            needs_network: false,
        };
        assert!(check_command(&command(&["python3", "main.py"], &[("A_1", "x")])).is_ok());
        assert!(check_command(&command(&[], &[])).is_err());
        assert!(check_command(&command(&[""], &[])).is_err());
        assert!(check_command(&command(&["x"], &[("1A", "x")])).is_err());
        assert!(check_command(&command(&["x"], &[("A=B", "x")])).is_err());
        assert!(check_command(&command(&["x", "a\0"], &[])).is_err());
    }
}

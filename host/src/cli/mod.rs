//! Command-line interface: argument parsing and the commands.

mod output;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use output::Table;
use sandlot::plugin::{PluginReport, PluginStatus};
use sandlot::{Config, PlanOptions, PluginHost};
use serde_json::json;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Run untrusted code in WebAssembly or container sandboxes.
#[derive(Parser)]
#[command(name = "sandlot", version, about, max_term_width = 100)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Commands,
}

#[derive(Args)]
struct Global {
    /// Configuration file (default: $SANDLOT_CONFIG, ./sandlot.toml, then
    /// $XDG_CONFIG_HOME/sandlot/sandlot.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Also load plugins from DIR; takes precedence over every other plugin source.
    /// Repeatable.
    #[arg(long = "plugin-dir", global = true, value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Cache compiled components in DIR (default: $SANDLOT_CACHE_DIR, the config's
    /// cache_dir, then $XDG_CACHE_HOME/sandlot/components).
    #[arg(long, global = true, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Compile plugins in memory; read and write no cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Look for WebAssembly runtimes in DIR (default: $SANDLOT_RUNTIMES_DIR, the
    /// config's runtimes_dir, then $XDG_DATA_HOME/sandlot/runtimes).
    #[arg(long, global = true, value_name = "DIR")]
    runtimes_dir: Option<PathBuf>,
}

impl Global {
    /// The configuration file in force.
    fn config(&self) -> Result<Config> {
        Ok(Config::discover(self.config.as_deref())?)
    }

    /// What the flags say, ahead of the environment and the configuration file.
    fn overrides(&self) -> sandlot::dirs::Overrides {
        sandlot::dirs::Overrides {
            cache_dir: self.cache_dir.clone(),
            no_cache: self.no_cache,
            runtimes_dir: self.runtimes_dir.clone(),
            plugin_dirs: self.plugin_dirs.clone(),
        }
    }

    /// Every directory, resolved as the library resolves them.
    fn dirs(&self) -> Result<sandlot::dirs::Dirs> {
        Ok(sandlot::dirs::Dirs::resolve(
            &self.config()?,
            &self.overrides(),
        ))
    }
}

#[derive(Subcommand)]
enum Commands {
    /// List the languages sandlot can run.
    Languages {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Inspect plugins.
    #[command(subcommand)]
    Plugins(PluginsCommand),
    /// Show what running code would do — the handler's plan and its analysis — without
    /// running anything.
    Plan(PlanArgs),
    /// Run code in a sandbox and print what it printed; the exit status is the
    /// program's (124 after a timeout, 137 at the memory cap, 125 if sandlot failed).
    Run(RunArgs),
    /// Manage the WebAssembly runtimes of the embedded backend.
    #[command(subcommand)]
    Runtimes(RuntimesCommand),
    /// Build, list and pull the container images of the Docker and Podman backends.
    #[command(subcommand)]
    Images(ImagesCommand),
    /// Remove containers left behind by sandlot processes that are gone (a crash, a
    /// kill -9); with --all, every sandlot container.
    Gc {
        /// The engine to clean.
        #[arg(long, value_enum, default_value = "docker")]
        engine: EngineArg,
        /// Remove every sandlot container, also those of running sessions.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Subcommand)]
enum ImagesCommand {
    /// Build images from the built-in recipes with mmdebstrap, from this machine's own
    /// Debian sources (no registry needed), and import them into the engine.
    Build {
        /// Recipes or languages to build (default: all): python, node, jvm, cpp, go, r,
        /// ruby, polyglot.
        names: Vec<String>,
        /// The engine to import into.
        #[arg(long, value_enum, default_value = "docker")]
        engine: EngineArg,
        /// Rebuild even images that are up to date.
        #[arg(long)]
        force: bool,
    },
    /// The sandlot images in the engine and whether each matches its recipe.
    List {
        /// The engine to ask.
        #[arg(long, value_enum, default_value = "docker")]
        engine: EngineArg,
    },
    /// Pull an image from a registry, showing progress (for `[images]` in sandlot.toml).
    Pull {
        /// Image reference, e.g. `python:3.12-slim`.
        reference: String,
        /// The engine to pull into.
        #[arg(long, value_enum, default_value = "docker")]
        engine: EngineArg,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum EngineArg {
    Docker,
    Podman,
}

impl EngineArg {
    fn engine(self) -> sandlot::Engine {
        match self {
            EngineArg::Docker => sandlot::Engine::Docker,
            EngineArg::Podman => sandlot::Engine::Podman,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum NetworkArg {
    /// Never.
    Off,
    /// Only while libraries are installed.
    Install,
    /// Always.
    On,
}

#[derive(Subcommand)]
enum RuntimesCommand {
    /// Download (with pip, pinned by sha256) and unpack a runtime into the data
    /// directory, then compile it once.
    Install {
        /// Language whose runtime to install (`python`).
        language: String,
    },
    /// The installed runtimes.
    List,
}

/// Where the code comes from, and its language.
#[derive(Args)]
struct CodeSource {
    /// Language id or alias (default: from FILE's extension).
    #[arg(short, long)]
    language: Option<String>,
    /// The code, instead of FILE.
    #[arg(short, long, conflicts_with = "file")]
    code: Option<String>,
    /// File with the code; `-` reads standard input.
    file: Option<PathBuf>,
}

impl CodeSource {
    /// The code and the handler of its language.
    fn load<'h>(&self, host: &'h PluginHost) -> Result<(String, &'h sandlot::LanguageHandler)> {
        let (code, from) = read_code(self.code.as_deref(), self.file.as_deref())?;
        let handler = pick_language(host, self.language.as_deref(), from)?;
        Ok((code, handler))
    }
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    source: CodeSource,
    /// Library the code needs. Repeatable. The wasm backend's runtimes cannot install
    /// libraries but bundle many (Python: numpy, pandas, scipy, scikit-learn,
    /// matplotlib, seaborn, statsmodels, ...).
    #[arg(long = "lib", value_name = "NAME")]
    libraries: Vec<String>,
    /// Where to run it.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Wall-clock limit in seconds.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    timeout: f64,
    /// Memory cap in MiB.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    memory: usize,
    /// Print one JSON document with everything (artifacts base64-encoded).
    #[arg(long)]
    json: bool,
    /// Write the files the program made into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Refuse code whose static analysis finds something this severe or worse.
    #[arg(long, value_enum, default_value = "critical", value_name = "SEVERITY")]
    block_at: BlockAt,
    /// When a container may reach the network.
    #[arg(long, value_enum, default_value = "install")]
    network: NetworkArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum BlockAt {
    Info,
    Low,
    Medium,
    High,
    Critical,
    /// Only report findings.
    Never,
}

impl BlockAt {
    fn policy(self, network: NetworkArg) -> sandlot::Policy {
        use sandlot::Severity;
        sandlot::Policy {
            network: match network {
                NetworkArg::Off => sandlot::Network::Off,
                NetworkArg::Install => sandlot::Network::InstallOnly,
                NetworkArg::On => sandlot::Network::On,
            },
            ..sandlot::Policy::default()
        }
        .with_block_at(match self {
            BlockAt::Info => Some(Severity::Info),
            BlockAt::Low => Some(Severity::Low),
            BlockAt::Medium => Some(Severity::Medium),
            BlockAt::High => Some(Severity::High),
            BlockAt::Critical => Some(Severity::Critical),
            BlockAt::Never => None,
        })
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    /// The embedded WebAssembly backend when it serves the language.
    Auto,
    /// The embedded WebAssembly backend.
    Wasm,
    /// A Docker container.
    Docker,
    /// A Podman container.
    Podman,
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Every plugin sandlot looked at: where it came from, its API version, its status.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// What a plugin file declares.
    Inspect {
        /// The component, a `.wasm` file.
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct PlanArgs {
    #[command(flatten)]
    source: CodeSource,
    /// Library to install first. Repeatable.
    #[arg(long = "lib", value_name = "NAME")]
    libraries: Vec<String>,
    /// Do not add the plot-capture prelude.
    #[arg(long)]
    no_plots: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Arguments for the program.
    #[arg(last = true)]
    args: Vec<String>,
}

/// Parses arguments, runs the command, prints errors.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Commands::Plugins(PluginsCommand::Inspect { file, json }) => inspect(&file, json),
        Commands::Languages { json } => {
            let host = load(&cli.global, true)?;
            languages(&host, json)
        }
        Commands::Plugins(PluginsCommand::List { json }) => {
            let host = load(&cli.global, false)?;
            plugins(&host, json)
        }
        Commands::Plan(args) => {
            let host = load(&cli.global, true)?;
            plan(&host, args)
        }
        Commands::Run(args) => {
            let host = load(&cli.global, true)?;
            run_code(host, &cli.global, args)
        }
        Commands::Runtimes(RuntimesCommand::Install { language }) => {
            runtimes_install(&cli.global, &language)
        }
        Commands::Runtimes(RuntimesCommand::List) => runtimes_list(&cli.global),
        Commands::Images(command) => images(&cli.global, command),
        Commands::Gc { engine, all } => {
            let backend = containers(&cli.global, engine)?;
            let removed = backend.gc(all)?;
            for name in &removed {
                println!("{name}");
            }
            eprintln!("sandlot: removed {} container(s)", removed.len());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn containers(global: &Global, engine: EngineArg) -> Result<sandlot::ContainerBackend> {
    let config = Config::discover(global.config.as_deref())?;
    let endpoint = match engine {
        EngineArg::Docker => config.docker_host.as_deref(),
        EngineArg::Podman => config.podman_host.as_deref(),
    };
    Ok(sandlot::ContainerBackend::connect(
        engine.engine(),
        endpoint,
    )?)
}

fn images(global: &Global, command: ImagesCommand) -> Result<ExitCode> {
    use sandlot::backend::docker::images::{default_rootfs_cache, Recipe};
    match command {
        ImagesCommand::Build {
            names,
            engine,
            force,
        } => {
            let backend = containers(global, engine)?;
            let present = backend.images()?;
            for recipe in Recipe::select(&names)? {
                let current = present
                    .iter()
                    .any(|i| i.reference == recipe.image && i.current);
                if current && !force {
                    eprintln!("sandlot: {} is up to date", recipe.image);
                    continue;
                }
                eprintln!(
                    "sandlot: building {} ({})",
                    recipe.image, recipe.description
                );
                let started = std::time::Instant::now();
                backend.build_image(&recipe, &default_rootfs_cache(), &mut |line| {
                    eprintln!("  {line}")
                })?;
                eprintln!(
                    "sandlot: {} ready in {:.0} s",
                    recipe.image,
                    started.elapsed().as_secs_f64()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ImagesCommand::List { engine } => {
            let backend = containers(global, engine)?;
            let images = backend.images()?;
            let mut table = Table::new(["IMAGE", "SIZE", "RECIPE", "STATUS"]);
            for image in &images {
                table.row([
                    image.reference.clone(),
                    format!("{} MB", image.size / 1_000_000),
                    image.recipe.clone().unwrap_or_else(|| "-".into()),
                    if image.current {
                        "up to date".into()
                    } else if image.recipe.is_some() {
                        "outdated: run `sandlot images build`".into()
                    } else {
                        "not from a recipe".to_string()
                    },
                ]);
            }
            for recipe in Recipe::all() {
                if !images.iter().any(|i| i.reference == recipe.image) {
                    table.row([
                        recipe.image.clone(),
                        "-".into(),
                        recipe.name.clone(),
                        format!("missing: `sandlot images build {}`", recipe.name),
                    ]);
                }
            }
            print!("{table}");
            Ok(ExitCode::SUCCESS)
        }
        ImagesCommand::Pull { reference, engine } => {
            let backend = containers(global, engine)?;
            backend.pull_image(&reference, &mut |line| eprintln!("  {line}"))?;
            eprintln!("sandlot: pulled {reference}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Exit status when sandlot itself fails during `run`, as `docker run` does.
const EXIT_SANDLOT_ERROR: u8 = 125;

fn run_code(host: PluginHost, global: &Global, args: RunArgs) -> Result<ExitCode> {
    let (code, handler) = args.source.load(&host)?;
    let language = handler.info().id.clone();
    let config = global.config()?;
    let dirs = global.dirs()?;
    let runtimes_dir = dirs.runtimes_dir().to_path_buf();
    let mut sandlot = sandlot::Sandlot::new(host, &runtimes_dir, dirs.cache.value.clone())?
        .with_config(config.clone());
    use sandlot::backend::Backend as _;
    // First use: install the runtime sandlot knows for the language, then go on.
    let installable = sandlot::runtimes::KNOWN
        .iter()
        .any(|k| k.language == language);
    let wasm_wanted = matches!(args.backend, BackendArg::Auto | BackendArg::Wasm);
    if wasm_wanted && installable && !sandlot.wasm().serves(&language) {
        eprintln!("sandlot: no {language} runtime installed yet; installing it (once)");
        sandlot::runtimes::install(&language, &runtimes_dir, |step| {
            eprintln!("sandlot: {step}")
        })?;
        sandlot.rediscover_runtimes(&runtimes_dir, dirs.cache.value.clone())?;
    }
    if wasm_wanted && sandlot.wasm().needs_compile(&language) {
        eprintln!("sandlot: compiling the {language} runtime; this happens once (CPython takes about 90 s on 2 cores)");
    }
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        bail!("--timeout must be a positive number of seconds");
    }
    let mut builder = sandlot.session(&language);
    builder
        .backend(match args.backend {
            BackendArg::Auto => sandlot::BackendChoice::Auto,
            BackendArg::Wasm => sandlot::BackendChoice::Wasm,
            BackendArg::Docker => sandlot::BackendChoice::Docker,
            BackendArg::Podman => sandlot::BackendChoice::Podman,
        })
        .timeout(std::time::Duration::from_secs_f64(args.timeout))
        .memory(args.memory.saturating_mul(1 << 20))
        .policy(args.block_at.policy(args.network));
    let mut session = match builder.open() {
        Ok(session) => session,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(EXIT_SANDLOT_ERROR));
        }
    };
    let mut options = sandlot::RunOptions {
        libraries: args.libraries.clone(),
        ..sandlot::RunOptions::default()
    };
    if !args.json {
        // Stream output as it is written.
        options.on_stdout = Some(Box::new(|bytes: &[u8]| {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(bytes);
            let _ = out.flush();
        }));
        options.on_stderr = Some(Box::new(|bytes: &[u8]| {
            use std::io::Write;
            let _ = std::io::stderr().lock().write_all(bytes);
        }));
    }
    let execution = match session.run_with(&code, options) {
        Ok(execution) => execution,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(EXIT_SANDLOT_ERROR));
        }
    };
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for artifact in &execution.artifacts {
            let path = dir.join(&artifact.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, &artifact.bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    if args.json {
        use base64::Engine as _;
        let artifacts: Vec<_> = execution
            .artifacts
            .iter()
            .map(|a| {
                json!({
                    "path": a.path, "size": a.size, "mime": a.mime, "is_plot": a.is_plot,
                    "base64": base64::engine::general_purpose::STANDARD.encode(&a.bytes),
                })
            })
            .collect();
        let mut value = serde_json::to_value(&execution)?;
        value["artifacts"] = serde_json::Value::Array(artifacts);
        value["language"] = json!(language);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        for note in [
            execution
                .stdout_truncated
                .then_some("stdout was cut at the output limit"),
            execution
                .stderr_truncated
                .then_some("stderr was cut at the output limit"),
            execution
                .artifacts_truncated
                .then_some("some files were left out by the artifact limits"),
        ]
        .into_iter()
        .flatten()
        {
            eprintln!("sandlot: {note}");
        }
        if execution.timed_out {
            eprintln!("sandlot: stopped after {:.1} s (--timeout)", args.timeout);
        }
        if execution.memory_exceeded {
            eprintln!(
                "sandlot: stopped at the memory cap of {} MiB (--memory)",
                args.memory
            );
        }
        if !execution.artifacts.is_empty() && args.out.is_none() {
            let names: Vec<_> = execution
                .artifacts
                .iter()
                .map(|a| a.path.as_str())
                .collect();
            eprintln!(
                "sandlot: made {} (use --out DIR to keep them)",
                names.join(", ")
            );
        }
    }
    Ok(ExitCode::from(exit_status(&execution)))
}

/// The CLI's exit status for an execution.
fn exit_status(execution: &sandlot::Execution) -> u8 {
    if execution.timed_out {
        124
    } else if execution.memory_exceeded {
        137
    } else {
        (execution.exit_code & 0xff) as u8
    }
}

fn runtimes_install(global: &Global, language: &str) -> Result<ExitCode> {
    let dirs = global.dirs()?;
    let dir = dirs.runtimes_dir();
    let installed = sandlot::runtimes::install(language, dir, |step| eprintln!("sandlot: {step}"))?;
    eprintln!("sandlot: installed in {}", installed.display());
    let backend = sandlot::backend::wasm::WasmBackend::discover(dir, dirs.cache.value.clone())?;
    if backend.needs_compile(language) {
        eprintln!("sandlot: compiling the runtime once (CPython takes about 90 s on 2 cores)");
        let started = std::time::Instant::now();
        backend.precompile(language)?;
        eprintln!(
            "sandlot: compiled in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn runtimes_list(global: &Global) -> Result<ExitCode> {
    let dirs = global.dirs()?;
    let dir = dirs.runtimes_dir();
    let backend = sandlot::backend::wasm::WasmBackend::discover(dir, dirs.cache.value.clone())?;
    let mut table = Table::new([
        "RUNTIME",
        "LANGUAGES",
        "VERSION",
        "PROTOCOL",
        "COMPILED",
        "PATH",
    ]);
    for (path, manifest) in backend.runtimes() {
        let compiled = manifest
            .languages
            .first()
            .is_some_and(|l| !backend.needs_compile(l));
        table.row([
            manifest.id.clone(),
            manifest.languages.join(", "),
            manifest.version.clone(),
            format!("{:?}", manifest.protocol).to_lowercase(),
            yes_no(compiled),
            path.display().to_string(),
        ]);
    }
    print!("{table}");
    if backend.runtimes().next().is_none() {
        eprintln!(
            "sandlot: no runtimes in {}; install one with `sandlot runtimes install python`",
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads the plugins; with `notes`, tells on stderr which plugins failed and which
/// replaced a built-in.
fn load(global: &Global, notes: bool) -> Result<PluginHost> {
    let host = sandlot::PluginHostBuilder::from_dirs(&global.dirs()?).load()?;
    if notes {
        for report in host.reports() {
            match &report.status {
                PluginStatus::Active {
                    replaces: Some(old),
                } => eprintln!(
                    "note: {} replaces {old} for language `{}`",
                    report.source,
                    report.language.as_deref().unwrap_or("?")
                ),
                PluginStatus::Failed(error) => eprintln!("warning: {error} (skipped)"),
                _ => {}
            }
        }
    }
    Ok(host)
}

fn languages(host: &PluginHost, json: bool) -> Result<ExitCode> {
    if json {
        let languages: Vec<_> = host
            .languages()
            .iter()
            .map(|h| json!({ "info": h.info(), "source": h.source().to_string(), "api_version": h.api_version() }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&languages)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new([
        "LANGUAGE", "ALIASES", "EXT", "LIBS", "PLOTS", "IMAGE", "SOURCE",
    ]);
    for handler in host.languages() {
        let info = handler.info();
        table.row([
            format!("{} ({})", info.id, info.display_name),
            info.aliases.join(", "),
            format!(".{}", info.file_extension),
            yes_no(info.can_install_libraries),
            yes_no(info.can_capture_plots),
            info.default_image.clone(),
            source_label(handler.source()),
        ]);
    }
    print!("{table}");
    Ok(ExitCode::SUCCESS)
}

fn plugins(host: &PluginHost, json: bool) -> Result<ExitCode> {
    if json {
        let reports: Vec<_> = host.reports().iter().map(report_json).collect();
        println!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new([
        "SOURCE", "PATH", "KIND", "API", "LANGUAGE", "LOAD", "STATUS",
    ]);
    for report in host.reports() {
        let (source, path) = match &report.source {
            sandlot::PluginSource::Builtin { name } => {
                ("built-in".to_string(), format!("builtin:{name}"))
            }
            sandlot::PluginSource::File { path } => {
                ("directory".to_string(), path.display().to_string())
            }
            other => ("other".to_string(), other.to_string()),
        };
        table.row([
            source,
            path,
            report
                .kind
                .map(|k| k.to_string())
                .unwrap_or_else(|| "-".into()),
            report.api_version.clone().unwrap_or_else(|| "-".into()),
            report.language.clone().unwrap_or_else(|| "-".into()),
            format!(
                "{:.1} ms{}",
                report.load_time.as_secs_f64() * 1e3,
                match report.cache {
                    Some(sandlot::plugin::CacheOutcome::Hit) => " (cached)",
                    _ => "",
                }
            ),
            status_text(&report.status),
        ]);
    }
    print!("{table}");
    Ok(ExitCode::SUCCESS)
}

fn inspect(file: &Path, json: bool) -> Result<ExitCode> {
    let (inspection, handler) = sandlot::plugin::inspect_file(file)?;
    if json {
        let value = json!({
            "file": file,
            "inspection": inspection,
            "language": handler.as_ref().map(|h| h.info()),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("file:        {}", file.display());
    println!("size:        {} bytes", inspection.size);
    println!("sha256:      {}", inspection.sha256);
    println!("kind:        {}", inspection.kind);
    println!("api version: sandlot:plugin@{}", inspection.api_version);
    println!("imports:     {}", list_or_none(&inspection.imports));
    println!("exports:     {}", list_or_none(&inspection.exports));
    if let Some(handler) = handler {
        let info = handler.info();
        println!("language:    {} ({})", info.id, info.display_name);
        println!("aliases:     {}", list_or_none(&info.aliases));
        println!("extension:   .{}", info.file_extension);
        println!("image:       {}", info.default_image);
        println!("libraries:   {}", yes_no(info.can_install_libraries));
        println!("plots:       {}", yes_no(info.can_capture_plots));
        println!("version:     {}", info.version);
    }
    Ok(ExitCode::SUCCESS)
}

/// The code from `-c`, a file or standard input, and the file it came from.
fn read_code<'a>(code: Option<&str>, file: Option<&'a Path>) -> Result<(String, Option<&'a Path>)> {
    Ok(match (code, file) {
        (Some(code), _) => (code.to_string(), None),
        (None, Some(file)) if file.as_os_str() == "-" => (read_stdin()?, None),
        (None, Some(file)) => (
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?,
            Some(file),
        ),
        (None, None) => bail!("give the code with -c CODE, a FILE, or - for standard input"),
    })
}

/// The handler named by `-l`, else the one for the file's extension.
fn pick_language<'h>(
    host: &'h PluginHost,
    language: Option<&str>,
    from: Option<&Path>,
) -> Result<&'h sandlot::LanguageHandler> {
    Ok(match (language, from) {
        (Some(language), _) => host.language(language)?,
        (None, Some(file)) => {
            let extension = file
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            host.language_for_extension(extension).with_context(|| {
                format!(
                    "no language handler for the extension of {}; name the language with -l",
                    file.display()
                )
            })?
        }
        (None, None) => bail!("name the language with -l LANGUAGE"),
    })
}

fn plan(host: &PluginHost, args: PlanArgs) -> Result<ExitCode> {
    let (code, handler) = args.source.load(host)?;
    let options = PlanOptions {
        capture_plots: !args.no_plots && handler.info().can_capture_plots,
        args: args.args.clone(),
        ..PlanOptions::default()
    };
    let plan = handler.plan(&code, &args.libraries, &options)?;
    let findings = handler.analyze(&code)?;
    if args.json {
        let value = json!({
            "language": handler.info().id,
            "source": handler.source().to_string(),
            "options": options,
            "plan": plan,
            "findings": findings,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    let info = handler.info();
    println!(
        "language: {} ({}), {}",
        info.id,
        info.display_name,
        source_label(handler.source())
    );
    println!("workdir:  {}", options.workdir);
    println!("\nfiles:");
    for file in &plan.files {
        println!(
            "  {} ({} lines, {} bytes)",
            file.path,
            file.contents.lines().count(),
            file.contents.len()
        );
    }
    println!("\ncommands:");
    for (i, command) in plan.commands.iter().enumerate() {
        let network = if command.needs_network {
            "  [network]"
        } else {
            ""
        };
        println!(
            "  {}. {:<7} {}{network}",
            i + 1,
            command.phase,
            shell_words(&command.argv)
        );
        for (key, value) in &command.env {
            println!("     {:<7} {key}={value}", "");
        }
    }
    println!("\nanalysis:");
    if findings.is_empty() {
        println!("  no findings");
    }
    let color = std::io::stdout().is_terminal();
    for finding in &findings {
        let line = finding
            .line
            .map(|l| format!("line {l}"))
            .unwrap_or_else(|| "-".into());
        let severity = output::severity(finding.severity, color);
        println!(
            "  {severity} {line:<8} {}: {}",
            finding.rule_id, finding.message
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn read_stdin() -> Result<String> {
    let mut code = String::new();
    std::io::stdin()
        .read_to_string(&mut code)
        .context("cannot read code from standard input")?;
    Ok(code)
}

fn report_json(report: &PluginReport) -> serde_json::Value {
    let (status, detail) = match &report.status {
        PluginStatus::Active { replaces } => {
            ("active", replaces.as_ref().map(|r| format!("replaces {r}")))
        }
        PluginStatus::Shadowed { by } => ("shadowed", Some(format!("by {by}"))),
        PluginStatus::Disabled => ("disabled", None),
        PluginStatus::Unsupported(why) => ("unsupported", Some(why.clone())),
        PluginStatus::Failed(error) => ("failed", Some(error.to_string())),
        _ => ("unknown", None),
    };
    json!({
        "source": report.source.to_string(),
        "builtin": report.source.is_builtin(),
        "path": match &report.source { sandlot::PluginSource::File { path } => Some(path.clone()), _ => None },
        "kind": report.kind,
        "api_version": report.api_version,
        "language": report.language,
        "description": report.description,
        "cache": report.cache,
        "load_ms": report.load_time.as_secs_f64() * 1e3,
        "status": status,
        "detail": detail,
    })
}

fn status_text(status: &PluginStatus) -> String {
    match status {
        PluginStatus::Active { replaces: None } => "active".into(),
        PluginStatus::Active {
            replaces: Some(old),
        } => format!("active, replaces {old}"),
        PluginStatus::Shadowed { by } => format!("shadowed by {by}"),
        PluginStatus::Disabled => "disabled by its manifest".into(),
        PluginStatus::Unsupported(why) => format!("not loaded: {why}"),
        PluginStatus::Failed(error) => format!("failed: {error}"),
        _ => "unknown".into(),
    }
}

fn source_label(source: &sandlot::PluginSource) -> String {
    match source {
        sandlot::PluginSource::Builtin { .. } => "built-in".into(),
        sandlot::PluginSource::File { path } => path.display().to_string(),
        other => other.to_string(),
    }
}

fn yes_no(value: bool) -> String {
    if value { "yes" } else { "no" }.into()
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".into()
    } else {
        items.join(", ")
    }
}

/// `argv` as a shell would need it typed, for display only.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

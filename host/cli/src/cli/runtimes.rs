//! `sandlot runtimes`: the WebAssembly runtimes of the embedded backend.

use super::global::Global;
use super::output::{yes_no, Table};
use anyhow::Result;
use clap::Subcommand;
use sandlot::wasm::WasmBackend;
use std::process::ExitCode;

#[derive(Subcommand)]
pub(super) enum RuntimesCommand {
    /// Download (with pip, pinned by sha256) and unpack a runtime into the data
    /// directory, then compile it once.
    Install {
        /// Language whose runtime to install (`python`, `javascript`).
        language: String,
    },
    /// The installed runtimes.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn command(global: &Global, command: RuntimesCommand) -> Result<ExitCode> {
    match command {
        RuntimesCommand::Install { language } => install(global, &language),
        RuntimesCommand::List { json } => list(global, json),
    }
}

/// The wasm backend as a session would see it: the runtimes directory and the runtime
/// components of every plugin directory.
fn backend(dirs: &sandlot::dirs::Dirs) -> Result<WasmBackend> {
    let plugins = sandlot::PluginHostBuilder::from_dirs(dirs).load()?;
    Ok(WasmBackend::discover(
        dirs.runtimes_dir(),
        plugins.runtime_components(),
        dirs.cache.value.clone(),
    ))
}

fn install(global: &Global, language: &str) -> Result<ExitCode> {
    let dirs = global.dirs()?;
    let dir = dirs.runtimes_dir();
    let installed =
        sandlot::wasm::runtimes::install(language, dir, |step| note!("sandlot: {step}"))?;
    note!("sandlot: installed in {}", installed.display());
    let backend = backend(&dirs)?;
    if backend.needs_compile(language) {
        let compiling = sandlot::provider::Progress::Compiling {
            language: language.to_string(),
            uncached: backend.cache_problem(),
        };
        note!("sandlot: {compiling}");
        let started = std::time::Instant::now();
        backend.precompile(language)?;
        note!(
            "sandlot: compiled in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn list(global: &Global, json: bool) -> Result<ExitCode> {
    let dirs = global.dirs()?;
    let backend = backend(&dirs)?;
    if json {
        let listed: Vec<_> = backend
            .runtimes()
            .iter()
            .map(|runtime| match &runtime.description {
                Ok(d) => serde_json::json!({
                    "id": d.id, "languages": d.languages, "version": d.version,
                    "kind": d.kind.to_string(), "compiled": runtime.compiled,
                    "path": runtime.path,
                }),
                Err(reason) => serde_json::json!({
                    "path": runtime.path, "error": reason.to_string(),
                }),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new([
        "RUNTIME",
        "LANGUAGES",
        "VERSION",
        "KIND",
        "COMPILED",
        "PATH",
    ]);
    let found = backend.runtimes();
    let mut skipped = Vec::new();
    for runtime in &found {
        match &runtime.description {
            Ok(d) => table.row([
                d.id.clone(),
                d.languages.join(", "),
                d.version.clone(),
                d.kind.to_string(),
                yes_no(runtime.compiled),
                runtime.path.display().to_string(),
            ]),
            Err(reason) => skipped.push(format!("{}: {reason}", runtime.path.display())),
        }
    }
    print!("{table}");
    for problem in &skipped {
        note!("sandlot: skipped {problem}");
    }
    if found.is_empty() {
        note!(
            "sandlot: no runtimes in {} or the plugin directories; install one with \
             `sandlot runtimes install python`",
            dirs.runtimes_dir().display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

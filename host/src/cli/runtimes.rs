//! `sandlot runtimes`: the WebAssembly runtimes of the embedded backend.

use super::output::{yes_no, Table};
use super::Global;
use anyhow::Result;
use clap::Subcommand;
use sandlot::backend::wasm::WasmBackend;
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
    List,
}

pub(super) fn command(global: &Global, command: RuntimesCommand) -> Result<ExitCode> {
    match command {
        RuntimesCommand::Install { language } => install(global, &language),
        RuntimesCommand::List => list(global),
    }
}

fn install(global: &Global, language: &str) -> Result<ExitCode> {
    let dirs = global.dirs()?;
    let dir = dirs.runtimes_dir();
    let installed = sandlot::runtimes::install(language, dir, |step| eprintln!("sandlot: {step}"))?;
    eprintln!("sandlot: installed in {}", installed.display());
    let backend = WasmBackend::discover(dir, dirs.cache.value.clone())?;
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

fn list(global: &Global) -> Result<ExitCode> {
    let dirs = global.dirs()?;
    let dir = dirs.runtimes_dir();
    let backend = WasmBackend::discover(dir, dirs.cache.value.clone())?;
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

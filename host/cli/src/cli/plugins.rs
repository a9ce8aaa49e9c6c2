//! `sandlot languages` and `sandlot plugins`: what the loaded plugins declare.

use super::global::Global;
use super::output::{list_or_none, yes_no, Table};
use anyhow::Result;
use clap::Subcommand;
use sandlot::plugin::{PluginReport, PluginStatus};
use sandlot::{LanguageCapability, PluginHost};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand)]
pub(super) enum PluginsCommand {
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

pub(super) fn command(global: &Global, command: PluginsCommand) -> Result<ExitCode> {
    match command {
        PluginsCommand::Inspect { file, json } => inspect(&file, json),
        PluginsCommand::List { json } => plugins(&global.plugins(false)?, json),
    }
}

pub(super) fn languages(host: &PluginHost, json: bool) -> Result<ExitCode> {
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
        "LANGUAGE", "ALIASES", "EXT", "LIBS", "PLOTS", "STATE", "IMAGE", "SOURCE",
    ]);
    for handler in host.languages() {
        let info = handler.info();
        table.row([
            format!("{} ({})", info.id, info.display_name),
            info.aliases.join(", "),
            format!(".{}", info.file_extension),
            yes_no(info.has(LanguageCapability::InstallLibraries)),
            yes_no(info.has(LanguageCapability::CapturePlots)),
            yes_no(info.has(LanguageCapability::Interactive)),
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
        println!(
            "libraries:   {}",
            yes_no(info.has(LanguageCapability::InstallLibraries))
        );
        println!(
            "plots:       {}",
            yes_no(info.has(LanguageCapability::CapturePlots))
        );
        println!(
            "kernel:      {} (state kept across runs in containers)",
            yes_no(info.has(LanguageCapability::Interactive))
        );
        println!("version:     {}", info.version);
    }
    Ok(ExitCode::SUCCESS)
}

fn report_json(report: &PluginReport) -> serde_json::Value {
    let (status, detail) = match &report.status {
        PluginStatus::Active { replaces } => {
            ("active", replaces.as_ref().map(|r| format!("replaces {r}")))
        }
        PluginStatus::Shadowed { by } => ("shadowed", Some(format!("by {by}"))),
        PluginStatus::Disabled => ("disabled", None),
        PluginStatus::Runtime => (
            "runtime",
            Some("used by the wasm backend; `sandlot runtimes list` shows what it serves".into()),
        ),
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
        PluginStatus::Runtime => {
            "runtime for the wasm backend (`sandlot runtimes list` shows what it serves)".into()
        }
        PluginStatus::Failed(error) => format!("failed: {error}"),
        _ => "unknown".into(),
    }
}

pub(super) fn source_label(source: &sandlot::PluginSource) -> String {
    match source {
        sandlot::PluginSource::Builtin { .. } => "built-in".into(),
        sandlot::PluginSource::File { path } => path.display().to_string(),
        other => other.to_string(),
    }
}

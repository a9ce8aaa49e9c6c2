//! `sandlot plan`: what running code would do, without running anything; and where
//! code comes from, for `plan` and `run` alike.

use super::exit;
use super::output;
use super::plugins::source_label;
use anyhow::{Context, Result};
use clap::Args;
use sandlot::{LanguageCapability, PlanOptions, PluginHost, Policy};
use serde_json::json;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the code comes from, and its language.
#[derive(Args)]
pub(super) struct CodeSource {
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
    /// Whether the code itself is read from standard input (`-`).
    pub(super) fn reads_stdin(&self) -> bool {
        self.code.is_none() && self.file.as_deref().is_some_and(|f| f.as_os_str() == "-")
    }

    /// The code and the handler of its language.
    pub(super) fn load<'h>(
        &self,
        host: &'h PluginHost,
    ) -> Result<(String, &'h sandlot::LanguageHandler)> {
        let (code, from) = read_code(self.code.as_deref(), self.file.as_deref())?;
        let handler = pick_language(host, self.language.as_deref(), from)?;
        Ok((code, handler))
    }
}

#[derive(Args)]
pub(super) struct PlanArgs {
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
    /// The policy whose restricted modules and calls the analysis looks for: a preset
    /// or a policy file. Default: the configuration's `[policy]`.
    #[arg(long, value_name = "FILE|PRESET")]
    policy: Option<String>,
    /// Arguments for the program.
    #[arg(last = true)]
    args: Vec<String>,
}

/// The code from `-c`, a file or standard input, and the file it came from.
fn read_code<'a>(code: Option<&str>, file: Option<&'a Path>) -> Result<(String, Option<&'a Path>)> {
    Ok(match (code, file) {
        (Some(code), _) => (code.to_string(), None),
        (None, Some(file)) if file.as_os_str() == "-" => (read_stdin()?, None),
        (None, Some(file)) => (
            std::fs::read_to_string(file).map_err(|e| {
                let message = format!("cannot read {}: {e}", file.display());
                match e.kind() {
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                        exit::no_input(message)
                    }
                    _ => anyhow::anyhow!(message),
                }
            })?,
            Some(file),
        ),
        (None, None) => {
            return Err(exit::usage(
                "give the code with -c CODE, a FILE, or - for standard input",
            ))
        }
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
            host.language_for_extension(extension).ok_or_else(|| {
                exit::no_input(format!(
                    "no language handler for the extension of {}; name the language with -l",
                    file.display()
                ))
            })?
        }
        (None, None) => return Err(exit::usage("name the language with -l LANGUAGE")),
    })
}

pub(super) fn command(
    host: &PluginHost,
    configured: Option<Policy>,
    args: PlanArgs,
) -> Result<ExitCode> {
    let (code, handler) = args.source.load(host)?;
    let policy = match &args.policy {
        Some(value) => Policy::from_preset_or_file(value)?,
        None => configured.unwrap_or_default(),
    };
    host.check_restricted(&policy.restricted)?;
    let options = PlanOptions {
        capture_plots: !args.no_plots && handler.info().has(LanguageCapability::CapturePlots),
        args: args.args.clone(),
        ..PlanOptions::default()
    };
    let plan = handler.plan(&code, &args.libraries, &options)?;
    let findings = handler.analyze(&code, &policy.restricted.for_language(handler.info()))?;
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
            file.contents.split(|&b| b == b'\n').count(),
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

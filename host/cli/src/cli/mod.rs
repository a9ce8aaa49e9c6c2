//! Command-line interface: argument parsing and dispatch. Each command lives in its
//! own module and is a thin client of the library's service layer.

#[macro_use]
mod output;
mod config;
mod doctor;
mod exit;
mod images;
mod mcp;
mod plan;
mod plugins;
mod repl;
mod run;
mod runtimes;
mod serve;
mod server;
mod snapshot;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use sandlot::plugin::{PluginHost, PluginStatus};
use sandlot::Config;
use std::path::PathBuf;
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
    /// Say nothing on stderr but errors and warnings: no progress, no notes.
    #[arg(short, long, global = true)]
    quiet: bool,
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

    /// The plugins; with `notes`, tells on stderr which failed and which replaced a
    /// built-in.
    fn plugins(&self, notes: bool) -> Result<PluginHost> {
        let host = sandlot::PluginHostBuilder::from_dirs(&self.dirs()?).load()?;
        if notes {
            plugin_notes(&host);
        }
        Ok(host)
    }
}

/// Tells on stderr which plugins failed and which replaced a built-in.
fn plugin_notes(host: &PluginHost) {
    for report in host.reports() {
        match &report.status {
            PluginStatus::Active {
                replaces: Some(old),
            } => note!(
                "note: {} replaces {old} for language `{}`",
                report.source,
                report.language.as_deref().unwrap_or("?")
            ),
            PluginStatus::Failed(error) => eprintln!("warning: {error} (skipped)"),
            _ => {}
        }
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
    Plugins(plugins::PluginsCommand),
    /// Show what running code would do — the handler's plan and its analysis — without
    /// running anything.
    Plan(plan::PlanArgs),
    /// Run code in a sandbox and print what it printed; the exit status is the
    /// program's (124 after a timeout, 137 at the memory cap, 125 if sandlot failed).
    Run(run::RunArgs),
    /// An interactive session: cells of code run one after another in one sandbox,
    /// sharing state. At a terminal: line editing, history and multi-line input; from
    /// a pipe: one cell per line. Exits with the last cell's status.
    Repl(repl::ReplArgs),
    /// Show the configuration in force and where each value came from.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Print a shell completion script, e.g. `sandlot completions bash >
    /// /etc/bash_completion.d/sandlot`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Serve MCP: tools for an AI assistant to run code once or in sessions, over
    /// stdio (the default) or streamable HTTP on a loopback address.
    Mcp(mcp::McpArgs),
    /// Serve the HTTP/JSON API: sessions, runs (streamed as server-sent events), files;
    /// bearer tokens from SANDLOT_API_TOKENS, or loopback only without.
    Serve(serve::ServeArgs),
    /// Manage the WebAssembly runtimes of the embedded backend.
    #[command(subcommand)]
    Runtimes(runtimes::RuntimesCommand),
    /// Build, list and pull the container images of the Docker and Podman backends.
    #[command(subcommand)]
    Images(images::ImagesCommand),
    /// What isolation is in force here: the engines and their versions, seccomp, user
    /// namespaces, cgroup limits, NetworkPolicy, the policy fields each backend can
    /// apply, and what to do about each gap.
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove containers or pods left behind by sandlot processes that are gone and
    /// whose sandboxes did not remove themselves, and the wasm backend's workspaces
    /// such processes left in the temp dir; with --all, every sandlot container or pod.
    Gc {
        /// The engine or cluster to clean.
        #[arg(long, alias = "backend", value_enum, default_value = "docker")]
        engine: images::GcTarget,
        /// Remove every sandlot container or pod, also those of running sessions.
        #[arg(long)]
        all: bool,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Parses arguments, runs the command, prints errors; the exit status says which kind
/// of error it was (see [`exit`]).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version come this way too, to stdout with status 0.
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(exit::Status::Usage.code());
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit::Status::of_error(&error).code())
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    let global = &cli.global;
    output::set_quiet(global.quiet);
    match cli.command {
        Commands::Languages { json } => plugins::languages(&global.plugins(true)?, json),
        Commands::Plugins(command) => plugins::command(global, command),
        Commands::Plan(args) => plan::command(
            &global.plugins(true)?,
            global.config()?.policy.clone(),
            args,
        ),
        Commands::Run(args) => run::command(global, args),
        Commands::Repl(args) => repl::command(global, args),
        Commands::Config(command) => config::command(global, command),
        Commands::Completions { shell } => config::completions(shell),
        Commands::Mcp(args) => mcp::command(global, args),
        Commands::Serve(args) => serve::command(global, args),
        Commands::Runtimes(command) => runtimes::command(global, command),
        Commands::Images(command) => images::command(global, command),
        Commands::Doctor { json } => doctor::command(global, json),
        Commands::Gc { engine, all, json } => images::gc(global, engine, all, json),
    }
}

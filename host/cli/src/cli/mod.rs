//! Command-line interface: argument parsing and dispatch. Each command lives in its
//! own module and is a thin client of the library's service layer.

#[macro_use]
mod output;
mod config;
mod doctor;
mod exit;
mod global;
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
use clap::{CommandFactory, Parser, Subcommand};
use global::Global;
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
        Commands::Completions { shell } => config::completions(shell, Cli::command()),
        Commands::Mcp(args) => mcp::command(global, args),
        Commands::Serve(args) => serve::command(global, args),
        Commands::Runtimes(command) => runtimes::command(global, command),
        Commands::Images(command) => images::command(global, command),
        Commands::Doctor { json } => doctor::command(global, json),
        Commands::Gc { engine, all, json } => images::gc(global, engine, all, json),
    }
}

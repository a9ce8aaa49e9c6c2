//! What the long-lived servers (`sandlot mcp`, `sandlot serve`) share: the session
//! settings they take, their logs, their runtime, how they stop.

use super::global::Global;
use anyhow::{anyhow, Context, Result};
use clap::Args;
use sandlot::policy::Policy;
use sandlot::server::manager::{ManagerSettings, SessionManager};
use sandlot::server::mcp::upstream::{Upstream, UpstreamEndpoint, Upstreams};
use sandlot::service::Service;
use std::time::Duration;

/// How a server treats its clients' sessions.
#[derive(Args)]
pub(super) struct SessionArgs {
    /// Close a session nobody has used for this many seconds.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    idle_timeout: u64,
    /// Close a session this many seconds after it opened, used or not.
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    max_lifetime: u64,
    /// Most sessions one client may have open.
    #[arg(long, default_value_t = 8, value_name = "N")]
    max_sessions_per_client: usize,
    /// Most sessions open at once over all clients.
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_sessions: usize,
    /// Wall-clock limit of a run, in seconds; a client may ask for less.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    timeout: u64,
    /// Memory cap of a sandbox, in MiB; a client may ask for less.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    memory: u64,
    /// Most of the host's memory the open sessions may hold in all, in MiB, each
    /// counted at its memory cap and, on wasm, its workspace (a tmpfs the cap does
    /// not count): a session past it is refused until another closes or pauses.
    /// Default: the machine's physical memory.
    #[arg(long, value_name = "MIB")]
    memory_budget: Option<u64>,
    /// How long one tool call from sandboxed code may take, in seconds (an upstream
    /// server's, or a client's answer to a call of its own tools).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    tool_timeout: f64,
    /// The policy every session gets, which a client may only tighten: a preset
    /// (`strict`, `standard`, `permissive`) or a policy file. Default: the
    /// configuration's `[policy]`, else `standard`.
    #[arg(long, value_name = "PRESET|FILE")]
    policy: Option<String>,
    /// Gives every session this environment variable of yours as a secret: the code
    /// can use it, its value is masked (`***`) in everything a client gets back.
    /// With `=HOSTS[@PLACEMENT]` the code gets a placeholder the egress proxy
    /// replaces in requests to those hosts only (see `sandlot run --secret`).
    /// Repeatable.
    #[arg(long = "secret", value_name = "NAME[=HOSTS[@PLACEMENT]]")]
    secrets: Vec<String>,
    /// Trusts the CAs of this PEM file, besides this machine's roots, for the hosts
    /// bound secrets go to over HTTPS (see `sandlot run --upstream-ca`).
    #[arg(long = "upstream-ca", value_name = "FILE")]
    upstream_ca: Option<std::path::PathBuf>,
    /// Lets sessions run on a backend that cannot apply these fields of the policy
    /// (`pids_limit`, `workdir_size`, `cpu_millis`, ...): otherwise such a session is
    /// refused, since the server's policy would not hold there. Repeatable, or
    /// comma-separated.
    #[arg(
        long = "accept-unenforced",
        value_name = "FIELD",
        value_delimiter = ','
    )]
    accept_unenforced: Vec<String>,
    /// Code mode: an upstream MCP server whose tools the sandboxed code calls as
    /// functions (NAME_TOOL), as NAME=COMMAND ARGS... or NAME=URL (loopback only);
    /// repeatable, and added to sandlot.toml's [mcp.upstream.NAME] sections. A
    /// command starts with none of sandlot's environment but PATH, HOME, the locale,
    /// TZ, TMPDIR and the certificates' paths (`env VAR=VALUE COMMAND` adds more;
    /// sandlot.toml's `env` and `inherit_env` do so without a value on the command
    /// line).
    #[arg(long, value_name = "NAME=COMMAND|URL")]
    upstream: Vec<String>,
    /// Pause a session idle for this many seconds: its state goes to disk and its
    /// sandbox is released; its next call resumes it where it was. Sessions whose
    /// backend cannot capture the interpreter's memory are not paused.
    #[arg(long, value_name = "SECONDS")]
    pause_after: Option<f64>,
    /// Keep snapshots and paused sessions in this directory, so that they survive a
    /// restart of the server (a shutdown then pauses the sessions it can). Default:
    /// a private temporary directory, gone with the server.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,
    /// Start every Python session on wasm from a fresh interpreter, not from a base
    /// with numpy, pandas and matplotlib already imported (made when the server
    /// starts; its namespace is a fresh one's).
    #[arg(long)]
    no_warm_start: bool,
    /// Most bytes the snapshots and paused sessions may take on disk.
    #[arg(long, default_value_t = 8 << 30, value_name = "BYTES")]
    max_stored_bytes: u64,
    /// Most bytes of those one client's snapshots and paused sessions may take, so
    /// that one client cannot fill the store for the others (default: a quarter of
    /// --max-stored-bytes).
    #[arg(long, value_name = "BYTES")]
    max_stored_bytes_per_client: Option<u64>,
}

impl SessionArgs {
    /// Connects to the upstream MCP servers of sandlot.toml and of `--upstream`, whose
    /// tools every session of the server `name` gets; says how many there are.
    pub(super) fn connect_upstreams(
        &self,
        global: &Global,
        runtime: &tokio::runtime::Runtime,
        name: &str,
    ) -> Result<Upstreams> {
        let upstreams =
            runtime.block_on(Upstreams::connect(&upstreams(global, &self.upstream)?))?;
        if !upstreams.tools().is_empty() {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "sandlot {name}: code mode: {} tools of the upstream servers are functions in the sandbox",
                upstreams.tools().len()
            );
        }
        Ok(upstreams)
    }

    /// The manager of the server's sessions, over the configured service, every one
    /// of which gets `tools`.
    pub(super) fn manager(
        &self,
        global: &Global,
        tools: sandlot::tool::ToolSet,
    ) -> Result<SessionManager> {
        let service =
            Service::from_config(global.config()?, &global.overrides(), sandlot::providers())?;
        if !self.no_warm_start {
            warm_up(service.sandlot());
        }
        let mut settings = ManagerSettings::default()
            .idle_timeout(Duration::from_secs(self.idle_timeout.max(1)))
            .max_lifetime(Duration::from_secs(self.max_lifetime.max(1)))
            .max_per_client(self.max_sessions_per_client)
            .max_sessions(self.max_sessions)
            .limits(sandlot::Limits {
                timeout: Duration::from_secs(self.timeout.max(1)),
                memory: usize::try_from(self.memory.max(1).saturating_mul(1 << 20))
                    .unwrap_or(usize::MAX),
                tools: sandlot::tool::ToolLimits {
                    call_timeout: Duration::try_from_secs_f64(self.tool_timeout)
                        .ok()
                        .filter(|t| !t.is_zero())
                        .with_context(|| {
                            format!(
                                "--tool-timeout {}: a positive number of seconds",
                                self.tool_timeout
                            )
                        })?,
                    ..sandlot::tool::ToolLimits::default()
                },
                ..sandlot::Limits::default()
            })
            .secrets(super::run::secrets_from_environment(&self.secrets)?)
            .upstream_ca(super::run::upstream_ca(self.upstream_ca.as_deref())?)
            .tools(tools)
            .accept_unenforced(
                self.accept_unenforced
                    .iter()
                    .map(|name| {
                        sandlot::PolicyField::named(name.trim()).ok_or_else(|| {
                            let known: Vec<String> = sandlot::PolicyField::ALL
                                .iter()
                                .map(ToString::to_string)
                                .collect();
                            anyhow::anyhow!(
                                "--accept-unenforced {name}: no such policy field; the fields are {}",
                                known.join(", ")
                            )
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
            );
        if let Some(policy) = &self.policy {
            settings = settings.policy(Policy::from_preset_or_file(policy)?);
        }
        if let Some(seconds) = self.pause_after {
            let idle = Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|t| !t.is_zero())
                .with_context(|| {
                    format!("--pause-after {seconds}: a positive number of seconds")
                })?;
            settings = settings.pause_after(idle);
        }
        if let Some(dir) = &self.state_dir {
            settings = settings.state_dir(dir);
        }
        settings = settings.max_stored_bytes(self.max_stored_bytes);
        if let Some(share) = self.max_stored_bytes_per_client {
            settings = settings.max_stored_bytes_per_client(share);
        }
        if let Some(budget) = self.memory_budget {
            settings = settings.memory_budget(budget.saturating_mul(1 << 20));
        }
        SessionManager::new(service, settings).context("cannot open the server's state directory")
    }
}

/// Turns warm starts on, and makes the Python base beside the server's start, if the
/// wasm backend runs Python here (else nothing: sessions start as they would).
fn warm_up(sandlot: &sandlot::Sandlot) {
    sandlot.set_warm_start(true);
    let mut builder = sandlot.session("python");
    builder.backend("wasm");
    let made = std::thread::Builder::new()
        .name("sandlot-warm-up".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            match builder.warm_up() {
                Ok(true) => tracing::info!(
                    ms = started.elapsed().as_millis() as u64,
                    "warm start ready: python on wasm"
                ),
                Ok(false) => {}
                Err(error) => tracing::debug!(%error, "no warm start for python on wasm"),
            }
        });
    if let Err(error) = made {
        tracing::debug!(%error, "no warm start: no thread for its base");
    }
}

/// The upstream servers of sandlot.toml, then those of the flags.
fn upstreams(global: &Global, flags: &[String]) -> Result<Vec<Upstream>> {
    let config = global.config()?;
    let mut upstreams = Vec::new();
    for (name, section) in &config.mcp.upstream {
        let endpoint = match (&section.command, &section.url) {
            (Some(command), None) => UpstreamEndpoint::Command(command.clone()),
            (None, Some(url)) => UpstreamEndpoint::Url(url.clone()),
            _ => {
                return Err(anyhow!(
                    "[mcp.upstream.{name}] needs one of `command` (a list) and `url`"
                ))
            }
        };
        let mut env = section.env.clone();
        for inherited in &section.inherit_env {
            let value = std::env::var(inherited).map_err(|_| {
                anyhow!(
                    "[mcp.upstream.{name}] inherit_env names {inherited}, which is not set \
                     (or not UTF-8) in sandlot's environment"
                )
            })?;
            env.insert(inherited.clone(), value);
        }
        upstreams.push(Upstream::new(name, endpoint)?.with_env(env)?);
    }
    for flag in flags {
        let upstream: Upstream = flag.parse()?;
        if upstreams.iter().any(|u| u.name == upstream.name) {
            return Err(anyhow!(
                "--upstream {flag}: an upstream server is already named {}",
                upstream.name
            ));
        }
        upstreams.push(upstream);
    }
    Ok(upstreams)
}

/// Logs of a long-lived server: to stderr (stdout may be the MCP transport), at the
/// level `RUST_LOG` sets (default: sandlot's `info`), coloured only on a terminal.
pub(super) fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("sandlot=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// A runtime for a server.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sandlot-server")
        .build()
        .context("cannot start the async runtime")
}

/// Closes every session, says how many, and lets the runtime go without waiting
/// for a read of stdin that may still block.
pub(super) fn finish(manager: &SessionManager, runtime: tokio::runtime::Runtime, name: &str) {
    let closed = manager.shutdown();
    if closed > 0 {
        // Not `eprintln!`: a closed stderr must not turn a clean stop into a panic.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "sandlot {name}: closed {closed} sessions"
        );
    }
    runtime.shutdown_timeout(Duration::from_millis(100));
}

/// Ctrl-C or SIGTERM.
pub(super) async fn stop_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

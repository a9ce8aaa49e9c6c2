//! `sandlot mcp`: the MCP server, over stdio (what an assistant's configuration
//! starts) or streamable HTTP on a loopback address.

use super::Global;
use anyhow::{Context, Result};
use clap::Args;
use sandlot::manager::{ManagerSettings, SessionManager};
use sandlot::policy::Policy;
use sandlot::service::Service;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub(super) struct McpArgs {
    /// Serve streamable HTTP at ADDR/mcp instead of stdio; loopback addresses only
    /// (e.g. 127.0.0.1:8765; port 0 picks one and prints it).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Close a session nobody has used for this many seconds.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    idle_timeout: u64,
    /// Close a session this many seconds after it opened, used or not.
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    max_lifetime: u64,
    /// Most sessions one connection may have open.
    #[arg(long, default_value_t = 8, value_name = "N")]
    max_sessions_per_client: usize,
    /// Most sessions open at once over all connections.
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_sessions: usize,
    /// The policy every session gets, which a client may only tighten: a preset
    /// (`strict`, `standard`, `permissive`) or a policy file. Default: the
    /// configuration's `[policy]`, else `standard`.
    #[arg(long, value_name = "PRESET|FILE")]
    policy: Option<String>,
}

pub(super) fn command(global: &Global, args: McpArgs) -> Result<ExitCode> {
    let service = Service::from_config(global.config()?, &global.overrides())?;
    let mut settings = ManagerSettings::default()
        .idle_timeout(Duration::from_secs(args.idle_timeout.max(1)))
        .max_lifetime(Duration::from_secs(args.max_lifetime.max(1)))
        .max_per_client(args.max_sessions_per_client)
        .max_sessions(args.max_sessions);
    if let Some(policy) = &args.policy {
        settings = settings.policy(Policy::from_preset_or_file(policy)?);
    }
    let manager = SessionManager::new(service, settings);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sandlot-mcp")
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(async move {
        match args.http {
            None => tokio::select! {
                served = sandlot::mcp::serve_stdio(manager.clone()) => served,
                () = stop_signal() => Ok(()),
            }
            .map(|()| manager),
            Some(address) => {
                let server = sandlot::mcp::HttpServer::bind(manager.clone(), address).await?;
                eprintln!(
                    "sandlot mcp: serving MCP at http://{}/mcp (loopback only, no authentication)",
                    server.address()
                );
                stop_signal().await;
                server.shutdown().await;
                Ok(manager)
            }
        }
    });
    let manager = served?;
    // Every session closed and every sandbox removed before the process goes.
    let closed = manager.shutdown();
    if closed > 0 {
        eprintln!("sandlot mcp: closed {closed} sessions");
    }
    // A read of stdin still blocked in the runtime must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() {
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

//! `sandlot mcp`: the MCP server, over stdio (what an assistant's configuration
//! starts) or streamable HTTP on a loopback address.

use super::global::Global;
use super::server::{finish, init_logging, runtime, stop_signal, SessionArgs};
use anyhow::Result;
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Args)]
pub(super) struct McpArgs {
    /// Serve streamable HTTP at ADDR/mcp instead of stdio; loopback addresses only
    /// (e.g. 127.0.0.1:8765; port 0 picks one and prints it).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    #[command(flatten)]
    sessions: SessionArgs,
}

pub(super) fn command(global: &Global, args: McpArgs) -> Result<ExitCode> {
    init_logging();
    let runtime = runtime()?;
    let upstreams = args.sessions.connect_upstreams(global, &runtime, "mcp")?;
    let manager = args.sessions.manager(global, upstreams.tools().clone())?;
    let served = runtime.block_on(async move {
        match args.http {
            None => tokio::select! {
                served = sandlot::server::mcp::serve_stdio(manager.clone()) => served,
                () = stop_signal() => Ok(()),
            }
            .map(|()| manager),
            Some(address) => {
                let server =
                    sandlot::server::mcp::HttpServer::bind(manager.clone(), address).await?;
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
    // The upstream servers it started stopped, every session closed and every
    // sandbox removed before the process goes.
    runtime.block_on(upstreams.close());
    finish(&manager, runtime, "mcp");
    Ok(ExitCode::SUCCESS)
}

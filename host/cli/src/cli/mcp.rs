//! `sandlot mcp`: the MCP server, over stdio (what an assistant's configuration
//! starts) or streamable HTTP on a loopback address.

use super::server::{finish, init_logging, runtime, stop_signal, SessionArgs};
use super::Global;
use anyhow::{anyhow, Result};
use clap::Args;
use sandlot::server::mcp::upstream::{Upstream, UpstreamEndpoint, Upstreams};
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Args)]
pub(super) struct McpArgs {
    /// Serve streamable HTTP at ADDR/mcp instead of stdio; loopback addresses only
    /// (e.g. 127.0.0.1:8765; port 0 picks one and prints it).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Code mode: an upstream MCP server whose tools the sandboxed code calls as
    /// functions (NAME_TOOL), as NAME=COMMAND ARGS... or NAME=URL (loopback only);
    /// repeatable, and added to sandlot.toml's [mcp.upstream.NAME] sections.
    #[arg(long, value_name = "NAME=COMMAND|URL")]
    upstream: Vec<String>,
    #[command(flatten)]
    sessions: SessionArgs,
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
        upstreams.push(Upstream::new(name, endpoint)?);
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

pub(super) fn command(global: &Global, args: McpArgs) -> Result<ExitCode> {
    init_logging();
    let runtime = runtime()?;
    let upstreams = runtime.block_on(Upstreams::connect(&upstreams(global, &args.upstream)?))?;
    if !upstreams.tools().is_empty() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "sandlot mcp: code mode: {} tools of the upstream servers are functions in the sandbox",
            upstreams.tools().len()
        );
    }
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

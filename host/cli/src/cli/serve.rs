//! `sandlot serve`: the HTTP/JSON API (see `sandlot::server::serve`).

use super::global::Global;
use super::server::{finish, init_logging, runtime, stop_signal, SessionArgs};
use anyhow::{Context, Result};
use clap::Args;
use sandlot::server::e2b::{E2bApi, E2bOptions};
use sandlot::server::serve::{HttpApi, ServeOptions, Token};
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Args)]
pub(super) struct ServeArgs {
    /// Where to listen. Beyond loopback only with tokens.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    listen: SocketAddr,
    /// Also serve E2B's protocol on this address, for the official E2B SDKs
    /// (E2B_API_URL and E2B_SANDBOX_URL = http://ADDR, E2B_API_KEY = a token's
    /// secret). Beyond loopback only with tokens.
    #[arg(long, value_name = "ADDR")]
    e2b: Option<SocketAddr>,
    #[command(flatten)]
    sessions: SessionArgs,
}

pub(super) fn command(global: &Global, args: ServeArgs) -> Result<ExitCode> {
    let tokens = tokens(global)?;
    init_logging();
    let runtime = runtime()?;
    let upstreams = args.sessions.connect_upstreams(global, &runtime, "serve")?;
    let manager = args.sessions.manager(global, upstreams.tools().clone())?;
    let served = runtime.block_on(async {
        let api = HttpApi::bind(
            manager.clone(),
            ServeOptions::new(args.listen, tokens.clone()),
        )
        .await?;
        let e2b = match args.e2b {
            Some(address) => {
                let e2b = E2bApi::bind(manager.clone(), E2bOptions::new(address, tokens)).await?;
                eprintln!(
                    "sandlot serve: E2B's protocol on http://{0} (E2B_API_URL and \
                     E2B_SANDBOX_URL=http://{0})",
                    e2b.address()
                );
                Some(e2b)
            }
            None => None,
        };
        if api.authenticated() {
            eprintln!("sandlot serve: listening on http://{}", api.address());
        } else {
            eprintln!(
                "sandlot serve: listening on http://{} WITHOUT AUTHENTICATION (loopback only; \
                 set SANDLOT_API_TOKENS to require tokens)",
                api.address()
            );
        }
        stop_signal().await;
        if let Some(e2b) = e2b {
            e2b.shutdown().await;
        }
        api.shutdown().await;
        Ok::<(), sandlot::Error>(())
    });
    // The upstream servers it started stop before the process goes.
    runtime.block_on(upstreams.close());
    finish(&manager, runtime, "serve");
    served?;
    Ok(ExitCode::SUCCESS)
}

/// The tokens of `SANDLOT_API_TOKENS` and of the config's `[serve] tokens_file`; never
/// from the command line, which every user of the machine can read.
fn tokens(global: &Global) -> Result<Vec<Token>> {
    let mut tokens = match std::env::var("SANDLOT_API_TOKENS") {
        Ok(list) => Token::parse_list(&list)?,
        Err(_) => Vec::new(),
    };
    if let Some(file) = global.config()?.serve.tokens_file {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read the tokens file {}", file.display()))?;
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)?.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "warning: {} can be read by other users (mode {:o}); `chmod 600` it",
                file.display(),
                mode & 0o777
            );
        }
        let lines: Vec<&str> = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default().trim())
            .filter(|l| !l.is_empty())
            .collect();
        tokens.extend(
            Token::parse_list(&lines.join(","))
                .with_context(|| format!("in the tokens file {}", file.display()))?,
        );
    }
    Ok(tokens)
}

//! `sandlot serve`: the HTTP/JSON API (see `sandlot::serve`).

use super::mcp::{finish, init_logging, runtime, stop_signal, SessionArgs};
use super::Global;
use anyhow::Result;
use clap::Args;
use sandlot::serve::{HttpApi, ServeOptions, Token};
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Args)]
pub(super) struct ServeArgs {
    /// Where to listen. Beyond loopback only with tokens.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    listen: SocketAddr,
    #[command(flatten)]
    sessions: SessionArgs,
}

pub(super) fn command(global: &Global, args: ServeArgs) -> Result<ExitCode> {
    // Tokens only from the environment: a command line is visible to every user.
    let tokens = match std::env::var("SANDLOT_API_TOKENS") {
        Ok(list) => Token::parse_list(&list)?,
        Err(_) => Vec::new(),
    };
    init_logging();
    let manager = args.sessions.manager(global)?;
    let runtime = runtime()?;
    let served = runtime.block_on(async {
        let api = HttpApi::bind(manager.clone(), ServeOptions::new(args.listen, tokens)).await?;
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
        api.shutdown().await;
        Ok::<(), sandlot::Error>(())
    });
    finish(&manager, runtime, "serve");
    served?;
    Ok(ExitCode::SUCCESS)
}

//! The host's end of a sandbox's egress: a Unix socket the sandbox's agent relays
//! every connection and DNS query to. Each starts with one line saying what it is:
//!
//! - `proxy`: an HTTP proxy connection (`CONNECT host:port`, or a plain request for
//!   `http://host/…`), from code that honours `HTTP_PROXY` and `HTTPS_PROXY`;
//! - `transparent 80` or `transparent 443`: a connection code made to a listed name
//!   directly (its DNS answer is the sandbox's loopback), read for its `Host` header
//!   or its TLS server name;
//! - `dns`: DNS queries, framed as over TCP (a two-byte length before each);
//! - `install TOKEN`: an HTTP proxy connection of a library install, which reaches
//!   any public destination while that install's token is admitted
//!   ([`EgressProxy::admit_install`]).
//!
//! The line, like everything else on the socket, comes from the sandbox and is
//! trusted for nothing: whatever a connection claims, it reaches only a listed name
//! or network.

mod check;
mod connection;
mod denials;
mod environment;
mod head;
mod intercept;
mod relay;
mod server;
mod shared;
#[cfg(test)]
mod tests;

pub use check::bound_secrets as bound_secrets_check;
pub use environment::{
    proxy_environment, sandbox_environment, CA_BUNDLE_FILE, CA_FILE, PROXY_PORT, SANDBOX_ADDRESS,
};
pub use server::EgressProxy;
pub use shared::Access;

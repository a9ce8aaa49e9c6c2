//! sandlot's servers, over [`sandlot_core`]: the [`manager`] of named, owned,
//! expiring sessions that both servers share, the [`service`] every front end opens
//! sessions through, and, by feature, the HTTP API ([`serve`], feature `http`, axum)
//! the MCP server ([`mcp`], feature `mcp`, rmcp) and E2B's protocol ([`e2b`], feature
//! `e2b`).

#[cfg(feature = "e2b")]
pub mod e2b;
#[cfg(any(feature = "http", feature = "mcp"))]
mod listener;
pub mod manager;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "http")]
pub mod serve;

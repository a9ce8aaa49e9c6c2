//! The MCP server (`sandlot mcp`): tools for an AI assistant to run code once or in
//! sessions that keep their variables and files, over stdio or streamable HTTP on a
//! loopback address. A thin layer over the
//! [`SessionManager`](crate::manager::SessionManager): every connection is a client of
//! its own, whose sessions close when it goes away; the policy is the server's, and a
//! tool call can only tighten it.
//!
//! ```no_run
//! use sandlot::server::manager::{ManagerSettings, SessionManager};
//! use sandlot::service::Service;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let manager = SessionManager::new(Service::from_environment(sandlot::providers())?, ManagerSettings::default())?;
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(sandlot::server::mcp::serve_stdio(manager))?;
//! # Ok(())
//! # }
//! ```

mod args;
mod content;
mod endpoints;
mod progress;
mod replies;
mod server;
mod stdio;
mod tools;
pub mod upstream;

pub use endpoints::{serve_stdio, HttpServer};
pub use server::McpServer;

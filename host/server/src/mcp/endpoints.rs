//! Where a client reaches the server: standard input and output, or streamable HTTP on
//! a loopback address. Each connection gets an [`McpServer`] of its own.

use super::server::McpServer;
use super::stdio;
use crate::manager::SessionManager;
use rmcp::ServiceExt;
use sandlot_core::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Serves one client over standard input and output until it closes its end, then
/// shuts the manager down (every session closed, every sandbox removed).
pub async fn serve_stdio(manager: SessionManager) -> Result<(), Error> {
    let server = McpServer::new(manager.clone());
    let transport =
        stdio::LineTransport::new(tokio::io::stdin(), tokio::io::stdout(), stdio::MAX_REQUEST);
    let running = server.serve(transport).await.map_err(|e| Error::Serve {
        reason: format!("the MCP client did not initialize: {e}"),
    })?;
    let _ = running.waiting().await;
    let _ = tokio::task::spawn_blocking(move || manager.shutdown()).await;
    Ok(())
}

/// A streamable-HTTP MCP server bound to a loopback address, until `shutdown`.
#[derive(Debug)]
pub struct HttpServer {
    listener: crate::listener::Listener,
}

impl HttpServer {
    /// Binds `address` (loopback only: the MCP endpoint has no authentication) and
    /// serves `/mcp` on the current tokio runtime. Port 0 picks a free port.
    pub async fn bind(manager: SessionManager, address: SocketAddr) -> Result<HttpServer, Error> {
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        use rmcp::transport::streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService,
        };
        if !address.ip().is_loopback() {
            return Err(Error::Serve {
                reason: format!(
                    "{address} is not a loopback address: the MCP endpoint has no \
                     authentication, so it listens on 127.0.0.1 or ::1 only"
                ),
            });
        }
        let stop = tokio_util::sync::CancellationToken::new();
        // An MCP session's connection is taken for dead after this long without a
        // message; its sandlot sessions go with it, so it must outlast their idle
        // timeout (rmcp's default is 5 minutes).
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive =
            Some(manager.settings().idle_timeout + Duration::from_secs(60));
        let service = StreamableHttpService::new(
            move || Ok(McpServer::new(manager.clone())),
            Arc::new(sessions),
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token()),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        Ok(HttpServer {
            listener: crate::listener::Listener::serve(router, address, stop).await?,
        })
    }

    /// The address it listens on (with the port picked, if 0 was asked for).
    pub fn address(&self) -> SocketAddr {
        self.listener.address()
    }

    /// Stops listening and ends every MCP session (their sandboxes close as their
    /// connections' servers go).
    pub async fn shutdown(self) {
        self.listener.shutdown().await;
    }
}

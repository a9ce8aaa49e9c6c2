//! An axum router served on a TCP address until it is stopped: what the MCP server's
//! HTTP transport and the HTTP API share.

use sandlot_core::error::Error;
use std::net::SocketAddr;

/// A router listening on an address, on the current tokio runtime.
#[derive(Debug)]
pub(crate) struct Listener {
    address: SocketAddr,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Binds `address` and serves `router` until [`Listener::shutdown`] or `stop`.
    pub(crate) async fn serve(
        router: axum::Router,
        address: SocketAddr,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<Listener, Error> {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| Error::Serve {
                reason: format!("cannot listen on {address}: {e}"),
            })?;
        let address = listener.local_addr().map_err(|e| Error::Serve {
            reason: format!("cannot read the bound address: {e}"),
        })?;
        // Without TCP_NODELAY a response streamed in small pieces (a run's output, its
        // last lines) waits for the client's delayed ACK of the piece before: 40 ms a
        // request on a reused connection.
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stopped.cancelled_owned().await })
                .await;
        });
        Ok(Listener {
            address,
            stop,
            task,
        })
    }

    /// The address it listens on (with the port picked, if 0 was asked for).
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops taking connections and waits for the requests in progress.
    pub(crate) async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

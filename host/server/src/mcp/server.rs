//! The MCP server of one connection: its client, its sessions' lifetime, and what it
//! says of itself (info, resources). The tools it serves are a room of their own.

use super::upstream;
use crate::manager::{ClientId, SessionManager};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool_handler, ErrorData, RoleServer, ServerHandler};
use sandlot_core::error::Error;
use sandlot_core::service::Service;
use std::sync::Arc;

/// The resource that lists the languages.
const LANGUAGES_URI: &str = "sandlot://languages";

/// What the server tells a model about itself when a client connects.
const INSTRUCTIONS: &str = "sandlot runs code in sandboxes: WebAssembly in-process \
(Python, JavaScript) or containers (every language). Use `execute_code` for a one-off \
program. For work in steps, `open_session` once, then `run_in_session` as many times as \
needed: variables, imports and files persist between runs of one session, never between \
sessions. Files the code writes under `output/` come back: plots as images, other files as \
resources. Close sessions you no longer need; idle ones close by themselves.";

/// Closes a connection's sessions when the connection's server goes.
struct ClientGuard {
    manager: SessionManager,
    client: ClientId,
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        if self.manager.keeps_state() {
            // Its sessions are the user's, kept until their idle timeout.
            return;
        }
        let (manager, client) = (self.manager.clone(), self.client.clone());
        // Closing removes sandboxes, which blocks: not on an async worker.
        let _ = std::thread::Builder::new()
            .name("sandlot-client-gone".into())
            .spawn(move || manager.client_gone(&client));
    }
}

/// The MCP server of one connection.
#[derive(Clone)]
pub struct McpServer {
    pub(super) manager: SessionManager,
    guard: Arc<ClientGuard>,
    #[allow(dead_code, reason = "read through the tool_handler macro")]
    tool_router: ToolRouter<McpServer>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("client", &self.guard.client)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for one connection, a client of `manager` of its own.
    pub fn new(manager: SessionManager) -> McpServer {
        // Where sessions outlive the server, a client after a restart must find its
        // sessions again: every connection is the one local user (the endpoint is on
        // loopback or stdio, without authentication, and session ids are unguessable).
        let client = if manager.keeps_state() {
            ClientId::new("mcp")
        } else {
            ClientId::unique("mcp")
        };
        let mut tool_router = Self::tool_router();
        // Code mode: the code can call the sessions' tools, so the model is told
        // which, where it decides what code to write.
        let tools = &manager.settings().tools;
        if !tools.is_empty() {
            let listed = upstream::describe(tools);
            for name in ["execute_code", "run_in_session"] {
                if let Some(route) = tool_router.map.get_mut(name) {
                    let base = route.attr.description.clone().unwrap_or_default();
                    route.attr.description = Some(format!("{base}{listed}").into());
                }
            }
        }
        McpServer {
            guard: Arc::new(ClientGuard {
                manager: manager.clone(),
                client,
            }),
            manager,
            tool_router,
        }
    }

    pub(super) fn client(&self) -> ClientId {
        self.guard.client.clone()
    }

    /// Runs blocking manager work off the async workers.
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(SessionManager, ClientId) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (manager, client) = (self.manager.clone(), self.client());
        match tokio::task::spawn_blocking(move || work(manager, client)).await {
            Ok(result) => result,
            Err(e) => Err(Error::Cancelled {
                what: format!("the call inside the server ({e})"),
            }),
        }
    }

    /// The languages, read off the async workers: the service may be taken for a
    /// while by a runtime install.
    pub(super) async fn languages_json(&self) -> Result<serde_json::Value, Error> {
        self.blocking(|manager, _| Ok(manager.with_service(Service::languages_json)))
            .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        // The product's name, not this crate's: clients show it to their users.
        .with_server_info(Implementation::new("sandlot", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![Resource::new(
            LANGUAGES_URI,
            "languages",
        )
        .with_mime_type("application/json")
        .with_description(
            "The languages and backends this server runs code with",
        )]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != LANGUAGES_URI {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource {}; the server has {LANGUAGES_URI}",
                    request.uri
                ),
                None,
            ));
        }
        let languages = self
            .languages_json()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let text = serde_json::to_string_pretty(&languages).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, LANGUAGES_URI).with_mime_type("application/json")
        ])
        .into())
    }
}

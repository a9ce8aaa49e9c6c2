//! The MCP server (`sandlot mcp`): tools for an AI assistant to run code once or in
//! sessions that keep their variables and files, over stdio or streamable HTTP on a
//! loopback address. A thin layer over the [`SessionManager`]: every connection is a
//! client of its own, whose sessions close when it goes away; the policy is the
//! server's, and a tool call can only tighten it.
//!
//! ```no_run
//! use sandlot::server::manager::{ManagerSettings, SessionManager};
//! use sandlot::server::service::Service;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let manager = SessionManager::new(Service::from_environment(sandlot::providers())?, ManagerSettings::default())?;
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(sandlot::server::mcp::serve_stdio(manager))?;
//! # Ok(())
//! # }
//! ```

mod content;
mod stdio;
pub mod upstream;

use crate::manager::{Ask, ClientId, SessionId, SessionManager, SnapshotId};
use crate::service::Service;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use sandlot_core::error::Error;
use sandlot_core::session::RunOptions;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The resource that lists the languages.
const LANGUAGES_URI: &str = "sandlot://languages";

/// What the server tells a model about itself when a client connects.
const INSTRUCTIONS: &str = "sandlot runs code in sandboxes: WebAssembly in-process \
(Python, JavaScript) or containers (every language). Use `execute_code` for a one-off \
program. For work in steps, `open_session` once, then `run_in_session` as many times as \
needed: variables, imports and files persist between runs of one session, never between \
sessions. Files the code writes under `output/` come back: plots as images, other files as \
resources. Close sessions you no longer need; idle ones close by themselves.";

/// Any failure of a tool, as a result the model reads (not a protocol error, which
/// clients tend to hide from it): `error [KIND]: message`, KIND being the error's
/// stable [`ErrorKind`](sandlot_core::ErrorKind) name, and a hint when trying again may help.
fn refused(error: Error) -> CallToolResult {
    let kind = error.kind();
    let again = if kind.is_retryable() {
        " (this may pass if tried again shortly)"
    } else {
        ""
    };
    CallToolResult::error(vec![ContentBlock::text(format!(
        "error [{kind}]: {error}{again}"
    ))])
}

/// A tool's arguments that cannot be used as given.
fn invalid(reason: impl Into<String>) -> CallToolResult {
    refused(Error::InvalidRequest {
        reason: reason.into(),
    })
}

/// What a model is told of a session it opened (or restored).
fn opened(info: &crate::manager::SessionInfo) -> serde_json::Value {
    json!({
        "session_id": info.id,
        "language": info.language,
        "backend": info.backend,
        "runs_with": info.runs_with,
        "keeps_variables": info.persistent,
        "idle_timeout_seconds": info.idle_timeout_seconds,
    })
}

/// A JSON answer.
fn answer(value: serde_json::Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

/// Arguments of `execute_code`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExecuteCode {
    /// Language id or alias: python, javascript, typescript, bash, java, cpp, go, r,
    /// ruby (`list_languages` has the full list).
    language: String,
    /// The program. For Python and JavaScript, statements run top to bottom; for
    /// compiled languages, a whole program with its main function.
    code: String,
    /// Packages the code needs (pip, npm, ... names). The WebAssembly runtimes bundle
    /// the common ones (numpy, pandas, matplotlib, scipy, scikit-learn, ...).
    #[serde(default)]
    libraries: Vec<String>,
    /// Wall-clock limit in seconds; at most the server's (30 s unless configured).
    timeout_seconds: Option<f64>,
    /// Where to run: `auto` (the default: WebAssembly when it can, else a container),
    /// `wasm`, `docker`, `podman` or `kubernetes`.
    backend: Option<String>,
}

/// Arguments of `open_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct OpenSession {
    /// Language id or alias, as for `execute_code`.
    language: String,
    /// Where to run, as for `execute_code`.
    backend: Option<String>,
    /// Packages every run of the session needs.
    #[serde(default)]
    libraries: Vec<String>,
    /// Network access: `off`, `install-only` (only while installing libraries), `on`,
    /// or `allow-list` (only where the server's allow-list lets it). Only as open as
    /// the server's policy; the default is the server's.
    network: Option<sandlot_core::Network>,
    /// Wall-clock limit of each run, in seconds; at most the server's.
    timeout_seconds: Option<f64>,
    /// Memory cap in MiB; at most the server's.
    memory_mb: Option<u64>,
}

/// Arguments of `run_in_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunInSession {
    /// The id `open_session` returned.
    session_id: String,
    /// Code to run; it sees the variables and files earlier runs left.
    code: String,
    /// Wall-clock limit of this run in seconds; at most the server's (instead of the
    /// session's).
    timeout_seconds: Option<f64>,
}

/// Arguments naming a session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SessionRef {
    /// The id `open_session` returned.
    session_id: String,
}

/// Arguments of `snapshot_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SnapshotSession {
    /// The id `open_session` returned.
    session_id: String,
    /// Keep the files alone, not the variables: for a backend that cannot capture
    /// the interpreter's memory.
    #[serde(default)]
    files_only: bool,
}

/// Arguments of `restore_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RestoreSession {
    /// The id `snapshot_session` returned.
    snapshot_id: String,
    /// Network access, as for `open_session`.
    network: Option<sandlot_core::Network>,
    /// Wall-clock limit of each run, in seconds; at most the server's.
    timeout_seconds: Option<f64>,
    /// Memory cap in MiB; at most the server's.
    memory_mb: Option<u64>,
}

/// Arguments of `fork_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForkSession {
    /// The id `open_session` returned.
    session_id: String,
    /// How many copies (default 1).
    count: Option<usize>,
}

/// Arguments naming a snapshot.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SnapshotRef {
    /// The id `snapshot_session` returned.
    snapshot_id: String,
}

/// Arguments of `upload_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadFile {
    /// The id `open_session` returned.
    session_id: String,
    /// Path relative to the session's working directory, e.g. `data/input.csv`.
    path: String,
    /// The contents as text.
    text: Option<String>,
    /// The contents as base64, for binary files (instead of `text`).
    base64: Option<String>,
}

/// Arguments of `download_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DownloadFile {
    /// The id `open_session` returned.
    session_id: String,
    /// Path relative to the session's working directory, e.g. `output/result.csv`.
    path: String,
}

/// Arguments of `run_shell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunShell {
    /// The id `open_session` returned.
    session_id: String,
    /// A shell command line, e.g. `ls -la output && head -5 data.csv`.
    command: String,
}

/// Arguments of `language_details`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LanguageRef {
    /// Language id or alias.
    language: String,
}

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
    manager: SessionManager,
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

    fn client(&self) -> ClientId {
        self.guard.client.clone()
    }

    /// Runs blocking manager work off the async workers.
    async fn blocking<T: Send + 'static>(
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
    async fn languages_json(&self) -> Result<serde_json::Value, Error> {
        self.blocking(|manager, _| Ok(manager.with_service(Service::languages_json)))
            .await
    }
}

/// Sends what a run prints as progress notifications, when the client asked for
/// progress. Returns the options that do it, and the sender's task: awaited before the
/// tool answers, since no notification may follow the result.
fn progress_options(
    context: &RequestContext<RoleServer>,
) -> (RunOptions, Option<tokio::task::JoinHandle<()>>) {
    let mut options = RunOptions::default();
    let Some(token) = context.meta.get_progress_token() else {
        return (options, None);
    };
    let peer = context.peer.clone();
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel::<(String, Vec<u8>)>();
    let task = tokio::spawn(async move {
        // Whole lines, one notification each: a program's writes come in pieces.
        let mut step = 0.0;
        let mut partial: std::collections::HashMap<String, Vec<u8>> = Default::default();
        let mut notes = Vec::new();
        loop {
            let received = received.recv().await;
            let ended = received.is_none();
            match received {
                Some((stream, bytes)) => {
                    let buffer = partial.entry(stream.clone()).or_default();
                    buffer.extend_from_slice(&bytes);
                    while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = buffer.drain(..=end).collect();
                        notes.push((stream.clone(), line));
                    }
                }
                None => notes.extend(partial.drain().filter(|(_, rest)| !rest.is_empty())),
            }
            for (stream, line) in notes.drain(..) {
                step += 1.0;
                let text = String::from_utf8_lossy(&line);
                let note = ProgressNotificationParam::new(token.clone(), step)
                    .with_message(format!("{stream}: {}", text.trim_end_matches('\n')));
                if peer.notify_progress(note).await.is_err() {
                    return;
                }
            }
            if ended {
                return;
            }
        }
    });
    let stderr = sender.clone();
    options.on_stdout = Some(Box::new(move |bytes: &[u8]| {
        let _ = sender.send(("stdout".into(), bytes.to_vec()));
    }));
    options.on_stderr = Some(Box::new(move |bytes: &[u8]| {
        let _ = stderr.send(("stderr".into(), bytes.to_vec()));
    }));
    (options, Some(task))
}

/// Waits (briefly) for the progress a run sent to go out; the run's options, and with
/// them the senders, are gone once it returned.
async fn progress_sent(task: Option<tokio::task::JoinHandle<()>>) {
    if let Some(task) = task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
}

#[tool_router]
impl McpServer {
    #[tool(
        description = "Run a program once in a fresh sandbox and return its stdout, stderr, \
        exit code and end reason (completed, timeout, memory, ...). Plots and files the code \
        writes under `output/` come back as images and resources. Nothing persists after \
        the call: for work in steps use open_session and run_in_session."
    )]
    async fn execute_code(
        &self,
        Parameters(args): Parameters<ExecuteCode>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let ask = Ask {
            backend: args.backend,
            libraries: args.libraries,
            timeout_seconds: args.timeout_seconds,
            ..Ask::new(&args.language)
        };
        let mut request = match self.manager.request_for(&ask) {
            Ok(request) => request,
            Err(e) => return refused(e),
        };
        request.one_shot = true;
        let (options, progress) = progress_options(&context);
        let code = args.code;
        let run = self
            .blocking(move |manager, client| manager.run_once(&client, request, &code, options))
            .await;
        progress_sent(progress).await;
        match run {
            Ok(run) => content::execution(&run, "sandlot://run/output"),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "List the languages this server can run now (ids, aliases, whether each \
        can install libraries, capture plots and keep state between runs, and the backends \
        that run it), the backends that answer, and in `unavailable` why the others cannot \
        run now."
    )]
    async fn list_languages(&self) -> CallToolResult {
        match self.languages_json().await {
            Ok(languages) => answer(languages),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Details of one language: its id, aliases, file extension, default \
        container image and capabilities, and for each backend that can run it now the \
        interpreter and version it runs there and the libraries that come with it (they \
        differ between backends); for each backend that cannot, why."
    )]
    async fn language_details(&self, Parameters(args): Parameters<LanguageRef>) -> CallToolResult {
        let details = self
            .blocking(move |manager, _| {
                manager.with_service(|service| service.language_details_json(&args.language))
            })
            .await;
        match details {
            Ok(details) => answer(details),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Open a session: a sandbox of one language that keeps variables, imports \
        and files from one run to the next. Returns its session_id for run_in_session, \
        upload_file, download_file, run_shell and close_session. It closes by itself after \
        an idle timeout."
    )]
    async fn open_session(&self, Parameters(args): Parameters<OpenSession>) -> CallToolResult {
        let ask = Ask {
            backend: args.backend,
            libraries: args.libraries,
            network: args.network,
            timeout_seconds: args.timeout_seconds,
            memory_mb: args.memory_mb,
            ..Ask::new(&args.language)
        };
        match self
            .blocking(move |manager, client| manager.open_asked(&client, &ask))
            .await
        {
            Ok(info) => answer(opened(&info)),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Run code in an open session. It sees the variables and files earlier \
        runs left; returns stdout, stderr, exit code, end reason, plots as images and other \
        files under `output/` as resources."
    )]
    async fn run_in_session(
        &self,
        Parameters(args): Parameters<RunInSession>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let timeout = match crate::manager::seconds("timeout_seconds", args.timeout_seconds) {
            Ok(t) => t,
            Err(e) => return refused(e),
        };
        let (mut options, progress) = progress_options(&context);
        options.timeout = timeout;
        let id = SessionId::from(args.session_id);
        let uri = format!("sandlot://session/{id}/output");
        let code = args.code;
        let run = self
            .blocking(move |manager, client| manager.run(&client, &id, &code, options))
            .await;
        progress_sent(progress).await;
        match run {
            Ok(run) => content::execution(&run, &uri),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Run a shell command line in an open session's sandbox (container \
        backends; the WebAssembly backend has no shell), e.g. to list files or inspect data."
    )]
    async fn run_shell(&self, Parameters(args): Parameters<RunShell>) -> CallToolResult {
        let id = SessionId::from(args.session_id);
        let uri = format!("sandlot://session/{id}/output");
        let command = args.command;
        match self
            .blocking(move |manager, client| manager.run_command(&client, &id, &command))
            .await
        {
            Ok(run) => content::execution(&run, &uri),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Write a file into an open session, relative to its working directory: \
        give `text`, or `base64` for binary contents. Later runs can read it."
    )]
    async fn upload_file(&self, Parameters(args): Parameters<UploadFile>) -> CallToolResult {
        use base64::Engine as _;
        let bytes = match (args.text, args.base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(encoded)) => {
                match base64::engine::general_purpose::STANDARD.decode(encoded.trim()) {
                    Ok(bytes) => bytes,
                    Err(e) => return invalid(format!("`base64` is not valid base64: {e}")),
                }
            }
            _ => return invalid("give exactly one of `text` and `base64`"),
        };
        let id = SessionId::from(args.session_id);
        let path = args.path;
        let size = bytes.len();
        let written = path.clone();
        match self
            .blocking(move |manager, client| {
                manager.with_session(&client, &id, |s| s.write_file(&path, &bytes))
            })
            .await
        {
            Ok(()) => answer(json!({ "written": written, "size": size })),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Read a file from an open session, relative to its working directory; \
        text comes back as text, anything else as base64."
    )]
    async fn download_file(&self, Parameters(args): Parameters<DownloadFile>) -> CallToolResult {
        let id = SessionId::from(args.session_id);
        // Percent-encoded when it is a path at all (reading refuses one that is not).
        let shown = sandlot_core::SandboxPath::new(&args.path)
            .map(|p| p.to_uri_path())
            .unwrap_or_default();
        let uri = format!("sandlot://session/{id}/{shown}");
        let path = args.path;
        let read = path.clone();
        match self
            .blocking(move |manager, client| {
                manager.with_session(&client, &id, |s| s.read_file(&read))
            })
            .await
        {
            Ok(bytes) => content::file(&path, &bytes, uri),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Snapshot a session: its variables, imports, functions and files, kept \
        by the server under a snapshot_id. restore_session opens a new session from it, as \
        often as needed (to go back to this point, or to try several ways from it). In \
        containers Python's variables are serialised, and `not_kept` names those that could \
        not be (open files, generators); `files_only` keeps the files alone."
    )]
    async fn snapshot_session(
        &self,
        Parameters(args): Parameters<SnapshotSession>,
    ) -> CallToolResult {
        let id = SessionId::from(args.session_id);
        let files_only = args.files_only;
        let taken = self
            .blocking(move |manager, client| {
                if files_only {
                    manager.snapshot_files(&client, &id)
                } else {
                    manager.snapshot(&client, &id)
                }
            })
            .await;
        match taken {
            Ok(info) => answer(json!({
                "snapshot_id": info.id,
                "language": info.language,
                "backend": info.backend,
                "keeps_variables": info.variables,
                "not_kept": info.unsaved,
                "bytes": info.bytes,
            })),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Open a new session from a snapshot: it starts with the variables and \
        files the snapshot holds. Returns its session_id, as open_session does."
    )]
    async fn restore_session(
        &self,
        Parameters(args): Parameters<RestoreSession>,
    ) -> CallToolResult {
        let snapshot = SnapshotId::from(args.snapshot_id);
        let ask = Ask {
            network: args.network,
            timeout_seconds: args.timeout_seconds,
            memory_mb: args.memory_mb,
            ..Ask::default()
        };
        match self
            .blocking(move |manager, client| manager.restore(&client, &snapshot, Some(ask)))
            .await
        {
            Ok(info) => answer(opened(&info)),
            Err(e) => refused(e),
        }
    }

    #[tool(
        description = "Fork a session into `count` new ones, each starting with the variables \
        and files the session holds now and going its own way after: to try several \
        approaches from one point. Returns their session_ids; the session itself goes on."
    )]
    async fn fork_session(&self, Parameters(args): Parameters<ForkSession>) -> CallToolResult {
        let id = SessionId::from(args.session_id);
        let count = args.count.unwrap_or(1);
        match self
            .blocking(move |manager, client| manager.fork(&client, &id, count))
            .await
        {
            Ok(forks) => answer(json!({
                "session_ids": forks.iter().map(|f| f.id.clone()).collect::<Vec<_>>(),
            })),
            Err(e) => refused(e),
        }
    }

    #[tool(description = "List the snapshots this client keeps on the server.")]
    async fn list_snapshots(&self) -> CallToolResult {
        answer(json!({ "snapshots": self.manager.snapshots(&self.client()) }))
    }

    #[tool(description = "Delete a snapshot, freeing the server's room for others.")]
    async fn delete_snapshot(&self, Parameters(args): Parameters<SnapshotRef>) -> CallToolResult {
        let snapshot = SnapshotId::from(args.snapshot_id);
        let deleted = snapshot.clone();
        match self
            .blocking(move |manager, client| manager.delete_snapshot(&client, &snapshot))
            .await
        {
            Ok(()) => answer(json!({ "deleted": deleted })),
            Err(e) => refused(e),
        }
    }

    #[tool(description = "List this connection's open sessions.")]
    async fn list_sessions(&self) -> CallToolResult {
        let sessions = self.manager.list(&self.client());
        answer(json!({ "sessions": sessions }))
    }

    #[tool(description = "Close a session and remove its sandbox.")]
    async fn close_session(&self, Parameters(args): Parameters<SessionRef>) -> CallToolResult {
        let id = SessionId::from(args.session_id);
        let closed = id.clone();
        match self
            .blocking(move |manager, client| manager.close(&client, &id))
            .await
        {
            Ok(()) => answer(json!({ "closed": closed })),
            Err(e) => refused(e),
        }
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

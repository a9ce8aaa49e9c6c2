//! The tools a model calls: run once, open and run in sessions, files, shell,
//! snapshots and forks. Each is a thin call of the manager; the server's state is
//! elsewhere.

use super::args::{
    DownloadFile, ExecuteCode, ForkSession, LanguageRef, OpenSession, RestoreSession, RunInSession,
    RunShell, SessionRef, SnapshotRef, SnapshotSession, UpdateNetwork, UploadFile,
};
use super::content;
use super::progress::{progress_options, progress_sent};
use super::replies::{answer, invalid, opened, refused};
use super::server::McpServer;
use crate::manager::{Ask, SessionId, StoredSnapshotId};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use sandlot_core::session::NetworkUpdate;
use serde_json::json;

#[tool_router(vis = "pub(super)")]
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
        let snapshot = StoredSnapshotId::from(args.snapshot_id);
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

    #[tool(
        description = "Change which requests a session's code may send to the hosts it can \
        reach, from its next request on: rules `[allow|deny] [METHOD] HOST[/PATH]`, such as \
        `GET api.github.com/repos/**` (a host an allow rule names takes only what allow rules \
        match; a deny rule wins). Never past what the server allows. Returns the rules now \
        in force."
    )]
    async fn update_network(&self, Parameters(args): Parameters<UpdateNetwork>) -> CallToolResult {
        let id = SessionId::from(args.session_id);
        let rules = match sandlot_core::egress::RequestRules::try_from(args.requests) {
            Ok(rules) => rules,
            Err(e) => return invalid(e.to_string()),
        };
        match self
            .blocking(move |manager, client| {
                manager.update_network(&client, &id, NetworkUpdate::requests(rules))
            })
            .await
        {
            Ok(policy) => answer(json!({ "requests": policy.requests })),
            Err(e) => refused(e),
        }
    }

    #[tool(description = "List the snapshots this client keeps on the server.")]
    async fn list_snapshots(&self) -> CallToolResult {
        answer(json!({ "snapshots": self.manager.snapshots(&self.client()) }))
    }

    #[tool(description = "Delete a snapshot, freeing the server's room for others.")]
    async fn delete_snapshot(&self, Parameters(args): Parameters<SnapshotRef>) -> CallToolResult {
        let snapshot = StoredSnapshotId::from(args.snapshot_id);
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

//! The Error enum: every failure of the library with its message and what to do,
//! one variant each, and the crate's Result. Its kinds and message helpers live
//! beside it so that this file reads as the list it is.

use super::kind::ErrorKind;
use super::messages::{image_build_command, list_or_nothing};
use super::plugin_source::PluginSource;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong in sandlot's library.
///
/// Errors about a plugin name the plugin ([`PluginSource`]) and say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error whose message quoted one of the session's secrets: the message with
    /// the secret masked.
    #[error("{message}")]
    Masked {
        /// The message, masked.
        message: String,
        /// The kind of the error it stands for.
        kind: ErrorKind,
    },

    /// A plugin file could not be read.
    #[error("cannot read {plugin}: {source}")]
    ReadPlugin {
        /// The plugin.
        plugin: PluginSource,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// A plugin directory given explicitly could not be listed.
    #[error("cannot read plugin directory {}: {source}", path.display())]
    PluginDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The file is not WebAssembly at all.
    #[error(
        "{plugin} is not a WebAssembly file ({reason}); a plugin is a WebAssembly component \
         built for the sandlot:plugin WIT package"
    )]
    NotWasm {
        /// The plugin.
        plugin: PluginSource,
        /// What the parser said.
        reason: String,
    },

    /// The file is a core WebAssembly module, not a component.
    #[error(
        "{plugin} is a core WebAssembly module, not a component; build it as a component \
         (target wasm32-wasip2, or `wasm-tools component new`)"
    )]
    CoreModule {
        /// The plugin.
        plugin: PluginSource,
    },

    /// The component belongs to another world.
    #[error(
        "{plugin} is not a sandlot plugin: it exports {}, but a plugin exports \
         `sandlot:plugin/handler` (a language handler) or `sandlot:plugin/interpreter` \
         (a runtime)",
        list_or_nothing(exports)
    )]
    NotAPlugin {
        /// The plugin.
        plugin: PluginSource,
        /// What the component exports instead.
        exports: Vec<String>,
    },

    /// The component was built for a version of the contract this host does not know.
    #[error(
        "{plugin} was built for sandlot plugin API {found}, which this sandlot does not \
         support (it supports {}); {}",
        supported.join(", "),
        if *newer { "upgrade sandlot to use it" } else { "rebuild it against a supported version" }
    )]
    UnsupportedApi {
        /// The plugin.
        plugin: PluginSource,
        /// The version in the plugin's export names.
        found: String,
        /// Versions this host supports.
        supported: Vec<&'static str>,
        /// Whether `found` is newer than every supported version.
        newer: bool,
    },

    /// A language handler imports something; handlers must be pure.
    #[error(
        "{plugin} imports {}, but a language handler must import nothing: handlers are \
         pure functions and get no capabilities (build it `no_std`, or without WASI)",
        imports.join(", ")
    )]
    HandlerImports {
        /// The plugin.
        plugin: PluginSource,
        /// Import names.
        imports: Vec<String>,
    },

    /// wasmtime rejected the component.
    #[error("{plugin} could not be compiled: {reason}")]
    Compile {
        /// The plugin.
        plugin: PluginSource,
        /// wasmtime's reason.
        reason: String,
    },

    /// The component's exports do not match the contract it claims.
    #[error("{plugin} does not match the sandlot:plugin@{api} contract: {reason}")]
    ContractMismatch {
        /// The plugin.
        plugin: PluginSource,
        /// The contract version it claims.
        api: String,
        /// What does not match.
        reason: String,
    },

    /// A call into the plugin trapped (a panic, an `unreachable`, a bad memory access).
    #[error("{plugin} crashed in `{function}`: {reason}")]
    Trap {
        /// The plugin.
        plugin: PluginSource,
        /// The exported function called.
        function: &'static str,
        /// The trap.
        reason: String,
    },

    /// A call into the plugin ran past its deadline and was stopped.
    #[error("{plugin} did not return from `{function}` within {limit:?}; the call was stopped")]
    Deadline {
        /// The plugin.
        plugin: PluginSource,
        /// The exported function called.
        function: &'static str,
        /// The deadline.
        limit: Duration,
    },

    /// A call into the plugin tried to use more memory than allowed and was stopped.
    #[error(
        "{plugin} tried to use more than {} MiB of memory in `{function}`; the call was stopped",
        limit / (1024 * 1024)
    )]
    MemoryLimit {
        /// The plugin.
        plugin: PluginSource,
        /// The exported function called.
        function: &'static str,
        /// The cap in bytes.
        limit: usize,
    },

    /// The plugin returned data that breaks the contract.
    #[error("{plugin} returned invalid data from `{function}`: {reason}")]
    InvalidResponse {
        /// The plugin.
        plugin: PluginSource,
        /// The exported function called.
        function: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// The handler declined the request, e.g. a library name it considers invalid.
    #[error("{plugin} refused `{function}`: {message}")]
    Refused {
        /// The plugin.
        plugin: PluginSource,
        /// The exported function called.
        function: &'static str,
        /// The handler's message.
        message: String,
    },

    /// No loaded handler serves the language.
    #[error(
        "unknown language `{name}`; known languages: {}",
        list_or_nothing(known)
    )]
    UnknownLanguage {
        /// What was asked for.
        name: String,
        /// Ids of the loaded languages.
        known: Vec<String>,
    },

    /// A plugin's sibling manifest is invalid.
    #[error("invalid plugin manifest {}: {reason}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// The configuration file is invalid or unreadable.
    #[error("invalid configuration {}: {reason}", path.display())]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// No installed WebAssembly runtime serves the language.
    #[error(
        "no WebAssembly runtime for `{language}` is installed; install one with \
         `sandlot runtimes install {language}`"
    )]
    RuntimeNotInstalled {
        /// The language asked for.
        language: String,
    },

    /// A file's bytes do not hash to what its manifest says: it was replaced or
    /// damaged after it was installed. Nothing compiled from another file is used.
    #[error(
        "{} has sha256 {actual}, but its manifest says {claimed}; the file was replaced or \
         damaged: install it again (`sandlot runtimes install`), or correct the manifest",
        path.display()
    )]
    HashMismatch {
        /// The file.
        path: PathBuf,
        /// What the manifest says.
        claimed: String,
        /// What its bytes hash to.
        actual: String,
    },

    /// A runtime could not be loaded, instantiated or driven.
    #[error("runtime `{runtime}`: {reason}")]
    Runtime {
        /// The runtime's id.
        runtime: String,
        /// What went wrong.
        reason: String,
    },

    /// The session can run nothing more (its program quit, crashed, hit a limit, or it
    /// was closed).
    #[error("the session has ended: {reason}; open a new session")]
    SessionEnded {
        /// Why it ended.
        reason: String,
    },

    /// A path inside the sandbox is not acceptable.
    #[error("invalid sandbox path `{path}`: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: String,
    },

    /// A backend name is not one users could type.
    #[error(
        "`{name}` is not a valid backend name: use lower-case letters, digits and `-`, \
         starting with a letter"
    )]
    InvalidBackendName {
        /// The name given.
        name: String,
    },

    /// No backend has this name.
    #[error("there is no backend `{name}`; backends: {}", list_or_nothing(known))]
    UnknownBackend {
        /// The name asked for.
        name: String,
        /// The backends there are.
        known: Vec<String>,
    },

    /// The backend asked for cannot serve the session.
    #[error("the {backend} backend cannot run this {language} session: {reason}")]
    BackendUnsuitable {
        /// The backend.
        backend: String,
        /// The session's language.
        language: String,
        /// Why not, as the backend says it.
        reason: String,
    },

    /// `auto` found no backend that answers and can serve the session.
    #[error(
        "no backend can run this {language} session: {}",
        passed_over.iter().map(|(b, why)| format!("{b}: {why}")).collect::<Vec<_>>().join("; ")
    )]
    NoBackend {
        /// The session's language.
        language: String,
        /// Each backend tried, and why it was passed over.
        passed_over: Vec<(String, String)>,
    },

    /// A path in the sandbox's workspace names nothing: no such file or directory.
    #[error("there is no `{path}` in the sandbox's workspace")]
    NoSuchFile {
        /// The path, relative to the workspace.
        path: String,
    },

    /// The session's backend lacks a capability the call needs.
    #[error("the {backend} backend cannot do this ({capability}): {hint}")]
    BackendCannot {
        /// The backend.
        backend: String,
        /// The capability it lacks.
        capability: crate::capability::Capability,
        /// What to do instead.
        hint: String,
    },

    /// A run asked for libraries its backend cannot provide.
    #[error(
        "the {backend} backend cannot provide the libraries this {language} run needs: {reason}"
    )]
    LibrariesUnavailable {
        /// The backend.
        backend: String,
        /// The language.
        language: String,
        /// Why, as the backend says it.
        reason: String,
    },

    /// Pool options that cannot work.
    #[error("invalid pool options: {reason}")]
    InvalidPool {
        /// What is wrong.
        reason: String,
    },

    /// Every sandbox the pool may hold is in use, and it fails fast.
    #[error(
        "the {backend} pool is exhausted: all {max_size} sandboxes are in use; wait and try \
         again, raise max_size, or let the pool wait (`Exhausted::Wait`) or open extras \
         (`Exhausted::Overflow`)"
    )]
    PoolExhausted {
        /// The pooled backend.
        backend: String,
        /// Its `max_size`.
        max_size: usize,
    },

    /// No sandbox of the pool came free in time.
    #[error(
        "no sandbox of the {backend} pool came free within {:.1} s; raise max_size or \
         acquire_timeout", waited.as_secs_f64()
    )]
    PoolTimeout {
        /// The pooled backend.
        backend: String,
        /// How long the caller waited.
        waited: std::time::Duration,
    },

    /// The pool was closed.
    #[error("the {backend} pool is closed: open the session on a new pool")]
    PoolClosed {
        /// The pooled backend.
        backend: String,
    },

    /// The pool could not open or warm a sandbox.
    #[error("the {backend} pool cannot warm a sandbox: {reason}")]
    PoolWarm {
        /// The pooled backend.
        backend: String,
        /// Why.
        reason: String,
    },

    /// A pool was asked of a backend that has none.
    #[error(
        "the {backend} backend has no pool: give it one with SandlotBuilder::pool or a \
         [pool.{backend}] section in sandlot.toml"
    )]
    NotPooled {
        /// The backend.
        backend: String,
    },

    /// A session manager was asked for something after it shut down.
    #[error("the server is shutting down: it opens no more sessions")]
    ManagerClosed,

    /// A client asked for a looser policy or higher limits than the server allows.
    #[error(
        "not allowed: the request loosens {} beyond what this server allows; ask for the \
         server's values or stricter ones (the server's configuration sets them)",
        fields.join(", ")
    )]
    NotAllowed {
        /// The fields, as `policy.network`, `limits.timeout`, ...
        fields: Vec<String>,
    },

    /// A client or a server has as many sessions open as it may.
    #[error(
        "{scope} has {limit} sessions open, its limit: close one (sessions also close after \
         their idle timeout)"
    )]
    TooManySessions {
        /// Whose limit: a client, or the whole server.
        scope: String,
        /// The limit.
        limit: usize,
    },

    /// A session id that names no open session of the client.
    #[error("no session `{id}`: {reason}; open a new session")]
    NoSuchSession {
        /// The id given.
        id: String,
        /// Why: it ended (and how), or it was never this client's.
        reason: String,
    },

    /// A snapshot id that names no stored snapshot of the client.
    #[error("no snapshot `{id}`: {reason}; take one with the session's snapshot operation")]
    NoSuchSnapshot {
        /// The id given.
        id: String,
        /// Why: deleted, or never this client's.
        reason: String,
    },

    /// A session has as many requests waiting for their turn as it takes.
    #[error(
        "session {id} has {waiting} requests waiting for their turn already (runs of one \
         session take turns): wait for one to finish, or open another session"
    )]
    SessionBusy {
        /// The session.
        id: String,
        /// How many were waiting.
        waiting: usize,
    },

    /// A server's store of snapshots and paused sessions is full.
    #[error(
        "the server's snapshot store cannot take {needed} more bytes: it holds {used} of \
         its {limit}; delete snapshots you no longer need (paused sessions free their space \
         when they resume or end), or raise the limit (`--max-stored-bytes`)"
    )]
    StoreFull {
        /// Bytes the new snapshot needs.
        needed: u64,
        /// Bytes held now.
        used: u64,
        /// The limit.
        limit: u64,
    },

    /// A server's memory budget cannot take another session: what the open sessions
    /// may hold fills it.
    #[error(
        "this server's memory budget cannot take a session that may hold {needed} more \
         bytes: its open sessions may hold {held} of its {budget} (each counted at its \
         memory limit, and its workspace where that is memory: the wasm backend's); close \
         or pause a session, ask for less memory or a smaller workspace (workdir_size), or \
         raise the budget (`--memory-budget`)"
    )]
    MemoryBudget {
        /// Bytes the new session may hold.
        needed: u64,
        /// Bytes the open sessions may hold now.
        held: u64,
        /// The budget.
        budget: u64,
    },

    /// A client's share of a server's store of snapshots and paused sessions is full:
    /// the rest of the store is the other clients'.
    #[error(
        "this client's share of the server's snapshot store cannot take {needed} more \
         bytes: it holds {used} of its {share}; delete snapshots you no longer need (paused \
         sessions free their space when they resume or end), or ask the operator for a \
         larger share (`--max-stored-bytes-per-client`)"
    )]
    StoreShareFull {
        /// Bytes the new snapshot needs.
        needed: u64,
        /// Bytes the client holds now.
        used: u64,
        /// The client's share.
        share: u64,
    },

    /// A library asked for is not a registry name its language's installer takes
    /// ([`crate::library`]): a path, an archive, a URL, a version-control spec, an
    /// option.
    #[error("`{library}` is not a library {installer} installs from its registry: {reason}")]
    InvalidLibrary {
        /// The library, as asked for.
        library: String,
        /// The installer it would go to.
        installer: String,
        /// Why it is refused, and what to write instead.
        reason: String,
    },

    /// A secret given to a session cannot be used.
    #[error("secret {name}: {reason}")]
    InvalidSecret {
        /// The secret's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A tool cannot be registered: its name, its schema, or a second tool of its name.
    #[error("invalid tool `{name}`: {reason}")]
    InvalidTool {
        /// The tool's name, as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A client's request to a server is malformed.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },

    /// A server could not start or serve.
    #[error("cannot serve: {reason}")]
    Serve {
        /// What went wrong, and what to do.
        reason: String,
    },

    /// A blocking call handed to tokio's blocking pool did not complete.
    #[error("{what} was cancelled")]
    Cancelled {
        /// What was cancelled.
        what: String,
    },

    /// No installable runtime is known for the language.
    #[error(
        "no installable WebAssembly runtime for `{language}`; known: {}",
        list_or_nothing(known)
    )]
    UnknownRuntime {
        /// The language asked for.
        language: String,
        /// The languages sandlot can install a runtime for.
        known: Vec<String>,
    },

    /// Installing a runtime failed.
    #[error("installing the {language} runtime failed: {reason}")]
    RuntimeInstall {
        /// The runtime's language.
        language: String,
        /// What went wrong and what to do.
        reason: String,
    },

    /// No image recipe has this name.
    #[error("no image recipe `{name}`; recipes: {}", list_or_nothing(known))]
    UnknownRecipe {
        /// The name asked for.
        name: String,
        /// The recipes there are.
        known: Vec<String>,
    },

    /// Building an image failed.
    #[error("building image {image} failed: {reason}")]
    ImageBuild {
        /// The image.
        image: String,
        /// What went wrong and what to do.
        reason: String,
    },

    /// An I/O operation of the host failed.
    #[error("{context}: {source}")]
    Io {
        /// What the host was doing.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The security policy refused the code because of what the static analysis found.
    #[error(
        "blocked by the security policy (blocks {threshold} and above): {}",
        findings.iter().map(|f| format!("{}{}: {} ({})", f.line.map(|l| format!("line {l}: ")).unwrap_or_default(), f.rule_id, f.message, f.severity)).collect::<Vec<_>>().join("; ")
    )]
    Blocked {
        /// The findings at or above the threshold.
        findings: Vec<crate::language::Finding>,
        /// The policy's threshold.
        threshold: crate::language::Severity,
    },

    /// A policy cannot be applied as written (it names a language no handler is).
    #[error("invalid policy: {reason}")]
    InvalidPolicy {
        /// What is wrong and how to fix it.
        reason: String,
    },

    /// A Kubernetes pod template is unusable.
    #[error("invalid pod template {}: {reason}", path.display())]
    PodTemplate {
        /// The template file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// The container engine cannot be reached.
    #[error("cannot reach {engine} at {endpoint}: {reason}; {hint}")]
    EngineUnavailable {
        /// `docker`, `podman` or `kubernetes`.
        engine: String,
        /// Where sandlot looked for it.
        endpoint: String,
        /// What failed.
        reason: String,
        /// How to start one or point sandlot at one.
        hint: String,
    },

    /// The container engine refused or failed a request.
    #[error("{engine}: {context}: {source}")]
    Engine {
        /// `docker`, `podman` or `kubernetes`.
        engine: String,
        /// What sandlot asked for.
        context: String,
        /// The engine's answer (or its client's error).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The image a language runs in is not in the engine.
    #[error(
        "{engine} has no image `{image}` for {language}; build it with `{}`, \
         or name an image that has {language} in sandlot.toml's [images] table",
        image_build_command(.engine, .language)
    )]
    ImageMissing {
        /// `docker`, `podman`, `native` or `kubernetes`.
        engine: String,
        /// The image looked for.
        image: String,
        /// The language it was for.
        language: String,
    },

    /// The in-container agent broke the protocol or went away.
    #[error("the sandbox's agent failed: {reason}")]
    Agent {
        /// What happened.
        reason: String,
    },

    /// A language's kernel (the long-lived interpreter of an interactive session)
    /// did not start in the sandbox.
    #[error(
        "{reason}\n(the image may lack the interpreter; a session opened with \
         `SessionBuilder::one_shot(true)` runs each program on its own, without a kernel)"
    )]
    KernelStart {
        /// What the kernel did, with what it wrote.
        reason: String,
    },

    /// A snapshot cannot be read or restored: truncated, corrupted, forged, of another
    /// format version, or made with another runtime than this host has.
    #[error("the snapshot cannot be restored: {reason}")]
    InvalidSnapshot {
        /// What is wrong with it, and what to do.
        reason: String,
    },

    /// The plugin kind is recognised but cannot be used by this build.
    #[error("{plugin}: {reason}")]
    Unsupported {
        /// The plugin.
        plugin: PluginSource,
        /// Why.
        reason: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

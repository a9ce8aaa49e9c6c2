//! The messages themselves, each way: what the backend asks of a worker and what a
//! worker sends back. Read here to know the conversation; the mirrored types they
//! carry live beside them.

use super::error::WireError;
use super::files::{WireEntry, WireInfo, WireStat};
use super::outcome::WireOutcome;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the backend sends a worker.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ToWorker {
    /// A call, answered by [`FromWorker::Done`] under the same `id` (after any
    /// streamed output, chunks and tool calls of it).
    Call { id: u64, call: Call },
    /// Stops the run that call `id` started, as its time limit would.
    Interrupt { id: u64 },
    /// The answer frame to the tool call the worker numbered `call`.
    ToolAnswer { call: u64, frame: Vec<u8> },
    /// A piece of the data of call `id`, sent before the call itself when the data is
    /// larger than [`CHUNK`](super::shared::CHUNK): the call's own (a write's, an unpack's) is then empty.
    Chunk { id: u64, bytes: Vec<u8> },
}

/// One thing for a worker to do.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Call {
    /// Opens a sandbox. Reply: [`Reply::Opened`].
    Open { spec: Spec },
    /// Opens a sandbox from a snapshot's interpreter state: `len` bytes at `offset` of
    /// the file whose descriptor comes with the message. Reply: [`Reply::Opened`].
    Restore {
        spec: Spec,
        /// The [`sandlot_core::snapshot::InterpreterState`], as JSON (its detail is
        /// free-form).
        state: String,
        offset: u64,
        len: u64,
        snapshot: Option<u64>,
    },
    /// Runs code in sandbox `sandbox`. Replies: [`FromWorker::Stdout`],
    /// [`FromWorker::Stderr`], [`FromWorker::ToolCall`], then [`Reply::Ran`].
    Run { sandbox: u64, run: Run },
    /// One operation on the sandbox's files.
    Files { sandbox: u64, op: FileOp },
    /// Starts the interpreter afresh. Reply: [`Reply::Done`].
    Reset { sandbox: u64 },
    /// Writes the interpreter's state as [`FromWorker::Chunk`]s. Reply:
    /// [`Reply::Captured`].
    Capture { sandbox: u64, here: bool },
    /// Closes the sandbox. Reply: [`Reply::Done`].
    Close { sandbox: u64 },
}

/// What a sandbox is opened with: what of a [`sandlot_core::backend::SandboxSpec`] the
/// wasm backend reads (its policy gives the workspace's size and nothing else).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Spec {
    pub language: String,
    pub memory: u64,
    pub workdir_size: u64,
}

/// One run of [`Call::Run`]: a [`sandlot_core::backend::RunRequest`] of code.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Run {
    pub code: String,
    pub stdin: Vec<u8>,
    pub env: Vec<(String, String)>,
    pub secret_names: Vec<String>,
    pub workdir: String,
    pub timeout: Duration,
    pub max_output: u64,
    /// Whether to stream each stream as it is written.
    pub stream_stdout: bool,
    pub stream_stderr: bool,
    pub last_value_shown: bool,
    pub args: Vec<String>,
    /// The largest tool request frame the run's tools take, if it has tools.
    pub tools: Option<u64>,
}

/// A [`sandlot_core::backend::SandboxFiles`] call.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum FileOp {
    Write { path: String, data: Vec<u8> },
    Read { path: String, max: u64 },
    List { path: String },
    Scan { path: String },
    Pack { path: String, max: u64 },
    Unpack { path: String, archive: Vec<u8> },
    Clear { path: String },
    Stat { path: String },
    MakeDir { path: String },
    Remove { path: String },
    Rename { from: String, to: String },
}

/// What a worker sends the backend.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum FromWorker {
    /// First, once the worker can take calls.
    Hello {
        version: u32,
        build: String,
    },
    /// Output of the run of call `id`.
    Stdout {
        id: u64,
        bytes: Vec<u8>,
    },
    Stderr {
        id: u64,
        bytes: Vec<u8>,
    },
    /// A piece of what call `id` captures.
    Chunk {
        id: u64,
        bytes: Vec<u8>,
    },
    /// Code of the run of call `id` called a tool; answered with
    /// [`ToWorker::ToolAnswer`].
    ToolCall {
        id: u64,
        call: u64,
        frame: Vec<u8>,
    },
    /// Code of the run of call `id` sent a request of `size` bytes, more than its
    /// tools take; answered like a call.
    ToolCallTooLarge {
        id: u64,
        call: u64,
        size: u64,
    },
    /// Call `id` is over.
    Done {
        id: u64,
        reply: Result<Reply, WireError>,
    },
}

/// How a call ended well.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Reply {
    Opened {
        sandbox: u64,
        name: String,
    },
    Ran(WireOutcome),
    Done,
    Bytes(Vec<u8>),
    Entries(Vec<WireEntry>),
    Scan(Vec<WireStat>),
    Info(WireInfo),
    Made(bool),
    /// The state [`Call::Capture`] wrote, as JSON, if it wrote any.
    Captured(Option<String>),
    /// Bytes, sent before as [`FromWorker::Chunk`]s.
    Chunked,
}

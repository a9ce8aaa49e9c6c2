//! What the host and the agent say to each other, and what each message means; the
//! protocol's version counts their changes. How each is laid out in bytes is the
//! `codec` module's, so what a message means reads whole, apart from its bytes.

use crate::install::InstallProxy;

/// Version of this protocol; the agent sends it in [`Reply::Hello`].
///
/// 2: [`Request::Run`] has `stop_after`, [`ExitReport`] has `output_limited`, the
/// agent exits when the host hangs up, and it can serve over standard input/output.
///
/// 3: kernels ([`Request::StartKernel`], [`Request::Cell`], [`Request::StopKernel`]);
/// [`ExitReport`] has `interrupted` and `kernel_ended`; file requests resolve paths
/// with no check-then-open race.
///
/// 5: [`Request::Freeze`] and [`Request::Thaw`], around installs that go online.
///
/// 6: [`Reply::Missing`], so a read, a listing or a pack of a path that names nothing
/// is told apart from every other failure.
///
/// 7: [`Request::Interrupt`], sent while a command or a cell runs, and
/// [`ExitReport::on_request`].
///
/// 8: tool calls (see [`Request`]): `tools` on [`Request::Run`] and
/// [`Request::Cell`], [`Reply::ToolCall`], [`Reply::ToolCallTooLarge`] and
/// [`Request::ToolAnswer`].
///
/// 9: [`Request::Stat`], [`Request::MakeDir`], [`Request::Remove`] and
/// [`Request::Rename`]; every [`Entry`] has its `mode`.
///
/// 10: [`Request::Freeze`] answers [`Reply::Frozen`], with the [`InstallProxy`] an
/// install reaches the network through when the agent relays the sandbox's egress.
pub const PROTOCOL_VERSION: u32 = 10;

/// A run's tool endpoint: how much a call may send, and how many calls may wait at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolChannel {
    /// Largest request frame the agent takes from the code, in bytes; a larger one is
    /// read, dropped, and reported as [`Reply::ToolCallTooLarge`].
    pub max_request: u64,
    /// Most connections to the endpoint open at once (each carries one call at a
    /// time); more are closed as they come.
    pub max_connections: u32,
}

/// What the host asks of the agent.
///
/// # Kernels
///
/// A kernel is one long-lived process (a small driver for an interpreter, which the
/// language handler supplies) that runs cells and keeps their state between requests.
/// The agent starts it in a session of its own with standard input on `/dev/null`,
/// and tells it two descriptors in its environment:
///
/// - `SANDLOT_CELL_FD`, where each cell arrives as an ASCII header line
///   `sandlot-cell CODE STDIN ENV CWD` (four decimal byte counts) followed by that many
///   bytes of code, of standard input for the cell, of environment (`KEY=VALUE\0`
///   each) and of the absolute working directory;
/// - `SANDLOT_DONE_FD`, where the driver writes `ready` and a newline once it can take
///   cells, then, after each cell, flushes its standard output and error and writes the
///   cell's exit status and a newline.
///
/// At a cell's time limit (or past its output limit) the agent sends `SIGINT` to the
/// kernel's process group; a driver abandons the cell, reports a status and waits for
/// the next one. If it has not reported within the cell's grace period the agent kills
/// the kernel and says so (`kernel_ended`).
///
/// # Interrupts
///
/// While a [`Request::Run`] or a [`Request::Cell`] runs, the host may send
/// [`Request::Interrupt`] and nothing else: the agent stops a command as at its time
/// limit, and interrupts a cell as at its limit (the kernel keeps its state if it comes
/// back within the grace period). The run's [`ExitReport`] then has `on_request`. An
/// interrupt that arrives once the run is over (it crossed the exit report on the
/// wire) is dropped: it is never answered.
///
/// # Tools
///
/// A [`Request::Run`] or [`Request::Cell`] with `tools` opens a tool endpoint for that
/// run only: a Unix socket, named in
/// [`TOOLS_VARIABLE`](crate::variables::TOOLS_VARIABLE) in the run's environment,
/// that code in the sandbox connects to and sends request frames of the
/// host's tool protocol (a little-endian `u32` length, then a JSON object), one at a
/// time per connection. The agent relays each as [`Reply::ToolCall`] with a number of
/// its own; the host answers with [`Request::ToolAnswer`] under that number, which the
/// agent writes back to the connection the same way. The endpoint closes, and every
/// connection to it, before the run's [`Reply::Exit`]: no call is relayed after it. An
/// answer that arrives after its run, or for a number never given, is dropped. The
/// host may send answers while the run goes on, between runs, or at any time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Runs one command to completion. Replies: any number of [`Reply::Stdout`] and
    /// [`Reply::Stderr`], then [`Reply::Exit`].
    Run {
        /// Program and arguments, run without a shell.
        argv: Vec<String>,
        /// Added to the agent's own environment.
        env: Vec<(String, String)>,
        /// Working directory, relative to the agent's root.
        cwd: String,
        /// Written to the command's standard input, which is then closed.
        stdin: Vec<u8>,
        /// Wall-clock limit in milliseconds; the whole process tree is killed at it.
        timeout_ms: u64,
        /// Most bytes of each stream forwarded; the rest is read and dropped.
        max_output: u64,
        /// Stop the command once either stream has written this many bytes (0: never),
        /// so a program that floods its output cannot keep the sandbox busy.
        stop_after: u64,
        /// A tool endpoint for this run (see [above](Request#tools)), or none.
        tools: Option<ToolChannel>,
    },
    /// Writes a file below the root, creating parent directories. Reply: [`Reply::Done`].
    Write {
        /// Path relative to the root.
        path: String,
        /// Contents.
        data: Vec<u8>,
    },
    /// Reads a regular file below the root. Reply: [`Reply::Data`].
    Read {
        /// Path relative to the root.
        path: String,
        /// Refuse files larger than this.
        max: u64,
    },
    /// Lists a directory below the root. Reply: [`Reply::Entries`], names only.
    List {
        /// Path relative to the root; empty for the root.
        path: String,
    },
    /// Every regular file under a directory, recursively. Reply: [`Reply::Entries`] with
    /// paths relative to that directory.
    Scan {
        /// Path relative to the root.
        path: String,
    },
    /// A tar archive of a file, or of a directory's contents, without links. Reply:
    /// [`Reply::Data`].
    Pack {
        /// Path relative to the root.
        path: String,
        /// Refuse to send more than this many bytes of archive.
        max: u64,
    },
    /// Unpacks a tar archive into a directory; links and devices are refused. Reply:
    /// [`Reply::Done`].
    Unpack {
        /// Directory relative to the root; created if missing.
        path: String,
        /// The archive.
        data: Vec<u8>,
    },
    /// Empties a directory: its files, links and directories go, no link followed.
    /// Reply: [`Reply::Done`].
    Clear {
        /// Directory relative to the root; a missing one is empty already.
        path: String,
    },
    /// Stops (`SIGSTOP`) every process of the sandbox but the agent, the kernel and
    /// its threads included, until [`Request::Thaw`]: while an install has the
    /// network, no code of the session may run. Where the agent relays the
    /// sandbox's egress, it then opens an [`InstallProxy`] for the install. Reply:
    /// [`Reply::Frozen`].
    Freeze,
    /// Closes the [`InstallProxy`], cutting what goes through it, and lets the
    /// processes [`Request::Freeze`] stopped go on (`SIGCONT`). Reply: [`Reply::Done`].
    Thaw,
    /// Starts the kernel (see [above](Request#kernels)), replacing one that runs, and
    /// waits until it says it is ready. Reply: [`Reply::Done`], or [`Reply::Error`]
    /// with what it wrote before it failed.
    StartKernel {
        /// Program and arguments of the driver, run without a shell.
        argv: Vec<String>,
        /// Added to the agent's own environment.
        env: Vec<(String, String)>,
        /// Working directory, relative to the root.
        cwd: String,
        /// How long the driver may take to say it is ready, in milliseconds.
        timeout_ms: u64,
    },
    /// Runs one cell in the kernel. Replies: any number of [`Reply::Stdout`] and
    /// [`Reply::Stderr`], then [`Reply::Exit`]; [`Reply::Error`] if no kernel runs.
    Cell {
        /// The code.
        code: Vec<u8>,
        /// Standard input for the cell.
        stdin: Vec<u8>,
        /// Environment for this cell only.
        env: Vec<(String, String)>,
        /// Working directory, relative to the root.
        cwd: String,
        /// Wall-clock limit in milliseconds; the cell is interrupted at it.
        timeout_ms: u64,
        /// Most bytes of each stream forwarded; the rest is read and dropped.
        max_output: u64,
        /// Interrupt the cell once either stream has written this many bytes (0: never).
        stop_after: u64,
        /// How long an interrupted kernel has to report before it is killed, in
        /// milliseconds.
        grace_ms: u64,
        /// A tool endpoint for this cell (see [above](Request#tools)), or none.
        tools: Option<ToolChannel>,
    },
    /// Stops the kernel and everything it started. Reply: [`Reply::Done`].
    StopKernel,
    /// Stops the command, or interrupts the cell, that runs (see
    /// [above](Request#interrupts)). No reply of its own: the run's replies go on, and
    /// its [`Reply::Exit`] says what the interrupt did.
    Interrupt,
    /// What the file system says of one path below the root, not following a link
    /// at its end. Reply: [`Reply::Entries`] with one entry named as the path's last
    /// component (empty for the root), or [`Reply::Missing`].
    Stat {
        /// Path relative to the root; empty for the root.
        path: String,
    },
    /// Makes a directory and its parents; one that exists is kept. Reply:
    /// [`Reply::Done`].
    MakeDir {
        /// Path relative to the root.
        path: String,
    },
    /// Removes a file, a link (never what it points to) or a directory with
    /// everything in it. Reply: [`Reply::Done`], or [`Reply::Missing`].
    Remove {
        /// Path relative to the root; never the root itself.
        path: String,
    },
    /// Moves a file, link or directory, replacing a file (or an empty directory)
    /// at the destination and making its parents. Reply: [`Reply::Done`], or
    /// [`Reply::Missing`] when `from` names nothing.
    Rename {
        /// Path relative to the root.
        from: String,
        /// Path relative to the root.
        to: String,
    },
    /// The answer to the [`Reply::ToolCall`] (or [`Reply::ToolCallTooLarge`]) numbered
    /// `call` (see [above](Request#tools)). No reply.
    ToolAnswer {
        /// The number of the call.
        call: u64,
        /// The answer frame of the tool protocol.
        frame: Vec<u8>,
    },
}

/// What the agent answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// First frame after connecting.
    Hello {
        /// [`PROTOCOL_VERSION`] of the agent.
        version: u32,
    },
    /// Bytes the command wrote to standard output.
    Stdout(Vec<u8>),
    /// Bytes the command wrote to standard error.
    Stderr(Vec<u8>),
    /// The command ended.
    Exit(ExitReport),
    /// A write succeeded.
    Done,
    /// File contents.
    Data(Vec<u8>),
    /// Directory entries.
    Entries(Vec<Entry>),
    /// The request failed; the message says why.
    Error(String),
    /// The request's path names nothing (no such file or directory); the message
    /// says which.
    Missing(String),
    /// Code of the run called a tool (see [`Request`'s tools](Request#tools)); the
    /// host answers with [`Request::ToolAnswer`] under `call`.
    ToolCall {
        /// The agent's number for the call, unique in the sandbox's life.
        call: u64,
        /// The request frame of the tool protocol, as the code sent it.
        frame: Vec<u8>,
    },
    /// Code of the run sent a request frame larger than the run's `max_request`; it
    /// was dropped, and the host answers it as it answers a call.
    ToolCallTooLarge {
        /// The agent's number for the call.
        call: u64,
        /// How many bytes the frame said it had.
        size: u64,
    },
    /// Every other process is stopped ([`Request::Freeze`]); the install goes out
    /// through this proxy, if the agent relays the sandbox's egress (otherwise the
    /// engine gives the sandbox its network).
    Frozen(Option<InstallProxy>),
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExitReport {
    /// Exit code, or 128 + signal number when a signal ended it.
    pub code: i32,
    /// The signal that ended it, 0 if none.
    pub signal: i32,
    /// Whether the agent killed it at the time limit.
    pub timed_out: bool,
    /// Whether standard output went past the cap.
    pub stdout_truncated: bool,
    /// Whether standard error went past the cap.
    pub stderr_truncated: bool,
    /// Whether the kernel's OOM killer killed a process of the container meanwhile.
    pub oom_killed: bool,
    /// Whether the agent stopped the command because it wrote past `stop_after`.
    pub output_limited: bool,
    /// Whether a cell was interrupted (at its limit or for its output) and the kernel
    /// came back from it, state intact.
    pub interrupted: bool,
    /// Whether the kernel is gone: it exited, or was killed because it did not come
    /// back from an interrupt. Its state is lost.
    pub kernel_ended: bool,
    /// Whether the host's [`Request::Interrupt`] stopped the command or interrupted
    /// the cell (rather than its time or output limit).
    pub on_request: bool,
}

/// One directory entry or scanned file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Name, or path relative to the scanned directory (`/`-separated), in the file
    /// system's bytes: a name that is not UTF-8 comes as it is, never rewritten, so
    /// the host can tell it from another and refuse it.
    pub path: Vec<u8>,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// `st_mode`: the file's type (`S_IFMT` bits) and permissions.
    pub mode: u32,
}

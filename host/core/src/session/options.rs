//! What one run may ask for beyond the session's settings: the caller fills it in,
//! so it stands apart from the session that reads it.

use crate::backend::Sink;
use std::time::Duration;

/// Options of one run.
#[derive(Default)]
pub struct RunOptions {
    /// Libraries the code needs, besides the session's. The wasm backend's runtimes
    /// cannot install any, but have many built in (Python: numpy, pandas, scipy,
    /// scikit-learn, matplotlib, ...); asking for one they lack is an error that says so.
    pub libraries: Vec<String>,
    /// Wall-clock limit, instead of the session's.
    pub timeout: Option<Duration>,
    /// Output cap, instead of the session's.
    pub max_output: Option<usize>,
    /// Environment variables for this run, on top of the session's.
    pub env: Vec<(String, String)>,
    /// Working directory of this run, relative to the workspace (default: the
    /// workspace). Artifacts still come from the workspace's `output/`.
    pub workdir: Option<String>,
    /// Standard input.
    pub stdin: Vec<u8>,
    /// The program's arguments, after its own name (`sys.argv[1:]`,
    /// `process.argv.slice(2)`), as `python3 main.py ARGS` would get them. Only a
    /// one-shot session ([`SessionBuilder::one_shot`](crate::SessionBuilder::one_shot))
    /// runs its code as a program; a kernel's cell has no command line, and asking
    /// for arguments there is
    /// [`Error::InvalidRequest`](crate::error::Error::InvalidRequest).
    pub args: Vec<String>,
    /// Sees stdout as it is written, up to the output cap.
    pub on_stdout: Option<Sink>,
    /// Sees stderr as it is written, up to the output cap.
    pub on_stderr: Option<Sink>,
    /// Stops the run when set from elsewhere (Ctrl-C, a caller that gave up): see
    /// [`Interrupt`](crate::Interrupt) for what each backend keeps.
    pub interrupt: Option<crate::interrupt::Interrupt>,
    /// Sees each tool call as it ends, while the run goes on, as
    /// [`Execution::tool_calls`](crate::execution::Execution::tool_calls) will hold it
    /// (secrets masked).
    pub on_tool_call: Option<crate::tool::ToolCallSink>,
}

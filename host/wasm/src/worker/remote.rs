//! A sandbox in a worker, as the session sees it: the backend contract's calls turned
//! into messages, and the replies held to what was asked (a worker is not trusted).

use super::limits::{POLL, STUCK};
use super::process::Process;
use super::wire::files::scan_from_wire;
use super::wire::messages::{Call, FileOp, FromWorker, Reply, Run, ToWorker};
use super::wire::shared::CHUNK;
use crate::door;
use sandlot_core::artifact::FileScan;
use sandlot_core::backend::{
    DirEntry, FileInfo, LastValue, Outcome, RunRequest, Sandbox, SandboxFiles, Workload,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::snapshot::InterpreterState;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Instant;

/// `outcome` with its output held to `max` bytes of each stream, as the worker should
/// have held it.
fn capped(mut outcome: Outcome, max: usize) -> Outcome {
    if outcome.stdout.len() > max {
        outcome.stdout.truncate(max);
        outcome.stdout_truncated = true;
    }
    if outcome.stderr.len() > max {
        outcome.stderr.truncate(max);
        outcome.stderr_truncated = true;
    }
    outcome
}

/// The reply's name, for an error: a worker that answered out of turn.
pub(super) fn out_of_turn(reply: &Reply) -> Error {
    let name = match reply {
        Reply::Opened { .. } => "opened",
        Reply::Ran(_) => "ran",
        Reply::Done => "done",
        Reply::Bytes(_) => "bytes",
        Reply::Entries(_) => "entries",
        Reply::Scan(_) => "scan",
        Reply::Info(_) => "info",
        Reply::Made(_) => "made",
        Reply::Captured(_) => "captured",
        Reply::Chunked => "chunked",
    };
    Error::Io {
        context: "the wasm worker answered out of turn".into(),
        source: std::io::Error::other(format!("a `{name}` reply")),
    }
}

/// A sandbox in a worker process.
pub(crate) struct RemoteSandbox {
    pub(super) process: Arc<Process>,
    pub(super) sandbox: u64,
    pub(super) name: String,
    /// Its memory cap, in bytes: what its captured state is held to.
    pub(super) memory: u64,
}

impl RemoteSandbox {
    /// Answers tool call `call` with the run's tools, on the backend's I/O runtime:
    /// the run goes on meanwhile (its output, its interrupt). Without tools (a
    /// worker asks only for runs that have them) the answer is an empty frame, which
    /// the guest reports as malformed.
    fn answer(
        &self,
        call: u64,
        tools: Option<Arc<sandlot_core::tool::ToolCalls>>,
        ask: impl FnOnce(
                Arc<sandlot_core::tool::ToolCalls>,
            )
                -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<u8>> + Send>>
            + Send
            + 'static,
    ) {
        let process = self.process.clone();
        crate::interpreter::io_runtime().spawn(async move {
            let frame = match tools {
                Some(tools) => ask(tools).await,
                None => Vec::new(),
            };
            let _ = process.send(&ToWorker::ToolAnswer { call, frame }, None);
        });
    }

    fn call(&self, call: Call) -> Result<Reply> {
        let sent = self.process.call(call, None)?;
        self.process.finish(sent, |_| {})
    }

    fn file_op(&self, op: FileOp) -> Result<Reply> {
        self.call(Call::Files {
            sandbox: self.sandbox,
            op,
        })
    }

    fn done(&self, op: FileOp) -> Result<()> {
        match self.file_op(op)? {
            Reply::Done => Ok(()),
            other => Err(out_of_turn(&other)),
        }
    }

    /// The bytes of a read or a pack of at most `max`: whole, or in pieces before
    /// the reply. A worker that sends more is taken for broken, and killed.
    fn bytes(&self, op: FileOp, max: u64) -> Result<Vec<u8>> {
        let sent = self.process.call(
            Call::Files {
                sandbox: self.sandbox,
                op,
            },
            None,
        )?;
        let (mut pieces, mut over) = (Vec::new(), false);
        let reply = self.process.finish(sent, |message| {
            if let FromWorker::Chunk { bytes, .. } = message {
                over |= (pieces.len() + bytes.len()) as u64 > max;
                if !over {
                    pieces.extend_from_slice(&bytes);
                }
            }
        })?;
        let whole = match reply {
            Reply::Bytes(bytes) => bytes,
            Reply::Chunked => pieces,
            other => return Err(out_of_turn(&other)),
        };
        if over || whole.len() as u64 > max {
            self.process.kill("it sent more bytes than were asked for");
            return Err(self.process.lost());
        }
        Ok(whole)
    }

    fn capture_as(
        &mut self,
        out: &mut dyn std::io::Write,
        here: bool,
    ) -> Result<Option<InterpreterState>> {
        let sent = self.process.call(
            Call::Capture {
                sandbox: self.sandbox,
                here,
            },
            None,
        )?;
        // The state is at most the memory and a little more; a worker that sends more
        // is broken, not a sandbox with more state.
        let most = self.memory.saturating_add(256 << 20);
        let (mut written, mut total) = (Ok(()), 0u64);
        let reply = self.process.finish(sent, |message| {
            if let (FromWorker::Chunk { bytes, .. }, Ok(())) = (message, &written) {
                total += bytes.len() as u64;
                written = if total > most {
                    Err(std::io::Error::other("more state than its memory holds"))
                } else {
                    out.write_all(&bytes)
                };
            }
        })?;
        if total > most {
            self.process
                .kill("it sent more state than a sandbox's memory holds");
            return Err(self.process.lost());
        }
        written.map_err(|e| Error::Io {
            context: "cannot write the captured state".into(),
            source: e,
        })?;
        match reply {
            Reply::Captured(None) => Ok(None),
            Reply::Captured(Some(state)) => {
                serde_json::from_str(&state)
                    .map(Some)
                    .map_err(|e| Error::Io {
                        context: "the wasm worker described its state wrongly".into(),
                        source: std::io::Error::other(e),
                    })
            }
            other => Err(out_of_turn(&other)),
        }
    }
}

impl Sandbox for RemoteSandbox {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        let Workload::Code(code) = request.workload else {
            return Err(request
                .workload
                .unsupported(sandlot_core::backend::BackendName::WASM.as_str()));
        };
        let tools = request.tools.clone();
        let run = Run {
            code: code.to_string(),
            stdin: request.stdin.to_vec(),
            env: request.env.to_vec(),
            secret_names: request.secret_names.to_vec(),
            workdir: request.workdir.to_string(),
            timeout: request.timeout,
            max_output: request.max_output as u64,
            stream_stdout: request.on_stdout.is_some(),
            stream_stderr: request.on_stderr.is_some(),
            last_value_shown: request.last_value == LastValue::Shown,
            args: request.args.to_vec(),
            tools: tools
                .as_ref()
                .map(|tools| door::Answer::max_request(&**tools) as u64),
        };
        let (id, from) = match self.process.call(
            Call::Run {
                sandbox: self.sandbox,
                run,
            },
            None,
        ) {
            Ok(sent) => sent,
            Err(e) if self.process.ended().is_some() => return Ok(Outcome::lost(e.to_string())),
            Err(e) => return Err(e),
        };
        let (mut on_stdout, mut on_stderr) = (request.on_stdout, request.on_stderr);
        let stuck_at = Instant::now() + request.timeout.saturating_add(STUCK);
        // What a worker may stream of each stream: the cap (it stops streaming there).
        let budget = request.max_output.saturating_add(CHUNK);
        let (mut streamed_out, mut streamed_err) = (0usize, 0usize);
        let mut interrupted = false;
        loop {
            // Looked at whatever comes, so a run that streams without pause is still
            // interrupted, and a worker that floods is still caught.
            if !interrupted && request.interrupt.is_some_and(|i| i.is_interrupted()) {
                interrupted = true;
                let _ = self.process.send(&ToWorker::Interrupt { id }, None);
            }
            if Instant::now() > stuck_at {
                self.process.kill(&format!(
                    "a run went {} s past its time limit",
                    STUCK.as_secs()
                ));
            }
            let message = match from.recv_timeout(POLL) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Ok(Outcome::lost(self.process.lost().to_string()))
                }
            };
            match message {
                FromWorker::Stdout { bytes, .. } | FromWorker::Stderr { bytes, .. }
                    if streamed_out.max(streamed_err) > budget =>
                {
                    let _ = bytes;
                    self.process
                        .kill("it streamed more output than the run's cap allows");
                }
                FromWorker::Stdout { bytes, .. } => {
                    streamed_out += bytes.len();
                    if let Some(sink) = on_stdout.as_mut() {
                        sink(&bytes);
                    }
                }
                FromWorker::Stderr { bytes, .. } => {
                    streamed_err += bytes.len();
                    if let Some(sink) = on_stderr.as_mut() {
                        sink(&bytes);
                    }
                }
                FromWorker::ToolCall { call, frame, .. } => {
                    self.answer(call, tools.clone(), move |tools| {
                        Box::pin(async move { tools.answer(&frame).await })
                    });
                }
                FromWorker::ToolCallTooLarge { call, size, .. } => {
                    let size = usize::try_from(size).unwrap_or(usize::MAX);
                    self.answer(call, tools.clone(), move |tools| {
                        Box::pin(async move { door::Answer::refuse(&*tools, size).await })
                    });
                }
                FromWorker::Done { reply, .. } => {
                    return match reply.map_err(Error::from)? {
                        Reply::Ran(outcome) => Ok(capped(outcome.into(), request.max_output)),
                        other => Err(out_of_turn(&other)),
                    }
                }
                FromWorker::Chunk { .. } | FromWorker::Hello { .. } => {}
            }
        }
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        self
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn reset(&mut self) -> Result<()> {
        match self.call(Call::Reset {
            sandbox: self.sandbox,
        })? {
            Reply::Done => Ok(()),
            other => Err(out_of_turn(&other)),
        }
    }

    fn capture(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, false)
    }

    fn capture_here(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, true)
    }
}

impl SandboxFiles for RemoteSandbox {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.done(FileOp::Write {
            path: path.into(),
            data: data.to_vec(),
        })
    }

    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.bytes(
            FileOp::Read {
                path: path.into(),
                max,
            },
            max,
        )
    }

    fn list(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        match self.file_op(FileOp::List { path: path.into() })? {
            Reply::Entries(entries) => Ok(entries.into_iter().map(Into::into).collect()),
            other => Err(out_of_turn(&other)),
        }
    }

    fn scan(&mut self, path: &str) -> Result<FileScan> {
        match self.file_op(FileOp::Scan { path: path.into() })? {
            Reply::Scan(stats) => Ok(scan_from_wire(stats)),
            other => Err(out_of_turn(&other)),
        }
    }

    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.bytes(
            FileOp::Pack {
                path: path.into(),
                max,
            },
            max,
        )
    }

    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        self.done(FileOp::Unpack {
            path: path.into(),
            archive: archive.to_vec(),
        })
    }

    fn clear(&mut self, path: &str) -> Result<()> {
        self.done(FileOp::Clear { path: path.into() })
    }

    fn stat(&mut self, path: &str) -> Result<FileInfo> {
        match self.file_op(FileOp::Stat { path: path.into() })? {
            Reply::Info(info) => Ok(info.into()),
            other => Err(out_of_turn(&other)),
        }
    }

    fn make_dir(&mut self, path: &str) -> Result<bool> {
        match self.file_op(FileOp::MakeDir { path: path.into() })? {
            Reply::Made(made) => Ok(made),
            other => Err(out_of_turn(&other)),
        }
    }

    fn remove(&mut self, path: &str) -> Result<()> {
        self.done(FileOp::Remove { path: path.into() })
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        self.done(FileOp::Rename {
            from: from.into(),
            to: to.into(),
        })
    }
}

impl Drop for RemoteSandbox {
    fn drop(&mut self) {
        // Waited for, so that a closed sandbox's workspace is gone when close returns.
        let _ = self.call(Call::Close {
            sandbox: self.sandbox,
        });
        self.process.load.fetch_sub(1, Ordering::SeqCst);
    }
}

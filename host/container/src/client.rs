//! The host's end of the agent protocol, over any [`Transport`]. Everything the agent
//! says is untrusted input: the code in the sandbox runs as the agent's user.

use super::transport::{Reader, Transport};
use sandlot_agent::{
    read_frame, Entry, ExitReport, InstallProxy, Reply, Request, ToolChannel, PROTOCOL_VERSION,
};
use sandlot_core::backend::Sink;
use sandlot_core::error::{Error, Result};
use sandlot_core::interrupt::Interrupt;
use sandlot_core::tool::{ToolCalls, ToolOutcome};
use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a file request may take before the agent counts as gone.
const FILE_DEADLINE: Duration = Duration::from_secs(60);
/// How long a tree copy may take.
const COPY_DEADLINE: Duration = Duration::from_secs(300);
/// How long past a command's own limit the agent has to report that it stopped it.
const RUN_GRACE: Duration = Duration::from_secs(5);
/// How often a run with an [`Interrupt`] checks it while it waits for the agent.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);
/// Most connections code may hold open to a run's tool endpoint at once: more than a
/// program's thread pool opens (Python's `sandlot_tools` keeps 32), and a cap on the
/// agent's threads for a sandbox that opens them without end.
const MAX_TOOL_CONNECTIONS: u32 = 64;

/// The tools code may call during one run, and the runtime their handlers run on.
#[derive(Debug, Clone, Copy)]
pub struct RunTools<'a> {
    /// The run's calls, answered under its limits and recorded.
    pub calls: &'a Arc<ToolCalls>,
    /// Where each call is answered, while the run's replies go on being read.
    pub runtime: &'a tokio::runtime::Handle,
}

impl RunTools<'_> {
    fn channel(&self) -> ToolChannel {
        ToolChannel {
            max_request: self.calls.limits().max_argument_bytes as u64,
            max_connections: MAX_TOOL_CONNECTIONS,
        }
    }
}

fn broken(reason: impl std::fmt::Display) -> Error {
    Error::Agent {
        reason: reason.to_string(),
    }
}

/// One command for the agent to run.
#[derive(Debug, Clone, Copy)]
pub struct RunCommand<'a> {
    /// Program and arguments, run without a shell.
    pub argv: &'a [String],
    /// Its environment.
    pub env: &'a [(String, String)],
    /// Its working directory, relative to the workspace.
    pub cwd: &'a str,
    /// Its standard input.
    pub stdin: &'a [u8],
    /// Wall-clock limit, enforced by the agent.
    pub timeout: Duration,
    /// Most bytes of each stream kept and streamed.
    pub max_output: usize,
    /// Stop the command once a stream has written this many bytes (0: never).
    pub stop_after: u64,
    /// Stops the command when set.
    pub interrupt: Option<&'a Interrupt>,
    /// The tools its code may call, if any.
    pub tools: Option<RunTools<'a>>,
}

/// One cell for the kernel to run.
#[derive(Debug, Clone, Copy)]
pub struct RunCell<'a> {
    /// The code.
    pub code: &'a [u8],
    /// Standard input of the cell.
    pub stdin: &'a [u8],
    /// Environment of this cell only.
    pub env: &'a [(String, String)],
    /// Working directory, relative to the workspace.
    pub cwd: &'a str,
    /// When the cell is interrupted.
    pub timeout: Duration,
    /// Most bytes of each stream kept and streamed.
    pub max_output: usize,
    /// Interrupt the cell once a stream has written this many bytes (0: never).
    pub stop_after: u64,
    /// How long an interrupted kernel has to come back before it is killed.
    pub grace: Duration,
    /// Interrupts the cell when set, as its time limit would.
    pub interrupt: Option<&'a Interrupt>,
    /// The tools its code may call, if any.
    pub tools: Option<RunTools<'a>>,
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// What a command wrote, up to the cap.
#[derive(Debug, Default)]
pub struct Output {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

/// Where replies come from.
enum Replies {
    /// Read here, with the socket's own timeouts.
    Direct(BufReader<UnixStream>),
    /// Read by a thread of the client's.
    Threaded(mpsc::Receiver<io::Result<Reply>>),
}

/// Where requests go: shared with the tasks that answer tool calls while a run's
/// replies are read, each frame written whole under the lock.
type Writer = Arc<Mutex<Box<dyn io::Write + Send>>>;

/// A connected agent.
pub struct AgentClient {
    replies: Replies,
    writer: Writer,
    close: Box<dyn FnMut() + Send>,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient").finish_non_exhaustive()
    }
}

impl Drop for AgentClient {
    fn drop(&mut self) {
        // The agent sees the hang-up, stops everything and exits; the reader thread
        // sees the end of the stream and returns.
        (self.close)();
    }
}

impl AgentClient {
    /// Takes over `transport` and waits up to `within` for the agent's hello.
    pub fn connect(transport: Transport, within: Duration) -> Result<AgentClient> {
        let Transport {
            reader,
            writer,
            close,
        } = transport;
        let replies = match reader {
            Reader::Timed(socket) => Replies::Direct(BufReader::new(socket)),
            Reader::Blocking(reader) => {
                let (tx, replies) = mpsc::channel();
                // A stream without read timeouts (an exec or attach stream) is read on
                // a thread of its own, so every wait here still has a deadline.
                std::thread::Builder::new()
                    .name("sandlot-agent-reader".into())
                    .spawn(move || {
                        let mut reader = BufReader::new(reader);
                        loop {
                            let reply = read_frame(&mut reader)
                                .and_then(|(tag, body)| Reply::decode(tag, &body));
                            let failed = reply.is_err();
                            if tx.send(reply).is_err() || failed {
                                return;
                            }
                        }
                    })
                    .map_err(|e| broken(format!("cannot start its reader: {e}")))?;
                Replies::Threaded(replies)
            }
        };
        let mut client = AgentClient {
            replies,
            writer: Arc::new(Mutex::new(writer)),
            close,
        };
        match client.receive(Instant::now() + within)? {
            Reply::Hello { version } if version == PROTOCOL_VERSION => Ok(client),
            Reply::Hello { version } => Err(broken(format!(
                "it speaks protocol {version} and this sandlot needs {PROTOCOL_VERSION}: \
                 the agent was built from another version of sandlot. sandlot puts the \
                 agent it was built with into every sandbox, so rebuild the program that \
                 embeds sandlot (`cargo build`) with the `sandlot` and `sandlot-agent` \
                 crates of one version"
            ))),
            other => Err(broken(format!("it began with {other:?} instead of hello"))),
        }
    }

    fn send(&mut self, request: &Request) -> Result<()> {
        send(&self.writer, request).map_err(|e| broken(format!("cannot send a request: {e}")))
    }

    fn receive(&mut self, deadline: Instant) -> Result<Reply> {
        self.receive_or_wake(deadline, deadline)?
            .ok_or_else(|| broken("it stopped answering"))
    }

    /// The next reply, due by `deadline`; `None` at `wake` (no later than `deadline`)
    /// if none has begun to arrive by then, so that the caller can act meanwhile.
    fn receive_or_wake(&mut self, deadline: Instant, wake: Instant) -> Result<Option<Reply>> {
        // A zero timeout would mean none at all.
        let until = |at: Instant| {
            at.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        };
        let hung_up = || broken("the sandbox stopped (its agent hung up)");
        let silent = || broken("it stopped answering");
        let timed_out =
            |e: &io::Error| matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut);
        let read = match &mut self.replies {
            Replies::Direct(socket) => {
                if let Err(e) = socket.get_ref().set_read_timeout(Some(until(wake))) {
                    return Err(broken(e));
                }
                // Waiting for the first byte consumes nothing, so a wake cannot cut a
                // frame in two; the rest of a frame that has begun is due by `deadline`.
                // A signal (Ctrl-C) ends the wait with EINTR, as a socket with a read
                // timeout is not restarted: that too is a wake, in which its interrupt
                // is seen at once.
                match socket.fill_buf() {
                    Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(None),
                    Err(e) if timed_out(&e) && Instant::now() < deadline => return Ok(None),
                    Err(e) if timed_out(&e) => return Err(silent()),
                    _ => {}
                }
                if let Err(e) = socket.get_ref().set_read_timeout(Some(until(deadline))) {
                    return Err(broken(e));
                }
                read_frame(socket).and_then(|(tag, body)| Reply::decode(tag, &body))
            }
            Replies::Threaded(replies) => match replies.recv_timeout(until(wake)) {
                Ok(read) => read,
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                    return Ok(None)
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return Err(silent()),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(hung_up()),
            },
        };
        match read {
            Ok(reply) => Ok(Some(reply)),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(hung_up()),
            Err(e) if timed_out(&e) => Err(silent()),
            Err(e) => Err(broken(e)),
        }
    }

    /// One request that is answered by one reply.
    fn call(&mut self, request: &Request, within: Duration) -> Result<Reply> {
        let deadline = Instant::now() + within;
        self.send(request)?;
        self.receive(deadline)
    }

    /// Runs a command; its output is kept up to `command.max_output` per stream and
    /// handed to the sinks as it arrives.
    pub fn run(
        &mut self,
        command: &RunCommand<'_>,
        on_stdout: &mut Option<Sink>,
        on_stderr: &mut Option<Sink>,
    ) -> Result<(ExitReport, Output)> {
        self.send(&Request::Run {
            argv: command.argv.to_vec(),
            env: command.env.to_vec(),
            cwd: command.cwd.to_string(),
            stdin: command.stdin.to_vec(),
            timeout_ms: millis(command.timeout),
            max_output: command.max_output as u64,
            stop_after: command.stop_after,
            tools: command.tools.map(|t| t.channel()),
        })?;
        // The agent enforces the limit; this deadline is for an agent that stopped
        // working. It bounds the whole run, not each frame.
        let deadline = Instant::now()
            + command
                .timeout
                .saturating_add(RUN_GRACE)
                .min(Duration::from_secs(365 * 86400));
        self.stream(
            deadline,
            command.interrupt,
            command.tools,
            command.max_output,
            command.cwd,
            on_stdout,
            on_stderr,
        )
    }

    /// Starts the sandbox's kernel (replacing one that runs) and waits until it says
    /// it is ready, at most `within`.
    pub fn start_kernel(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        within: Duration,
    ) -> Result<()> {
        let request = Request::StartKernel {
            argv: argv.to_vec(),
            env: env.to_vec(),
            cwd: String::new(),
            timeout_ms: millis(within),
        };
        match self.call(&request, within.saturating_add(RUN_GRACE))? {
            Reply::Done => Ok(()),
            Reply::Error(reason) => Err(Error::KernelStart { reason }),
            other => Err(broken(format!("unexpected {other:?} to a kernel start"))),
        }
    }

    /// Runs one cell in the kernel; its output is kept up to `cell.max_output` per
    /// stream and handed to the sinks as it arrives.
    pub fn cell(
        &mut self,
        cell: &RunCell<'_>,
        on_stdout: &mut Option<Sink>,
        on_stderr: &mut Option<Sink>,
    ) -> Result<(ExitReport, Output)> {
        self.send(&Request::Cell {
            code: cell.code.to_vec(),
            stdin: cell.stdin.to_vec(),
            env: cell.env.to_vec(),
            cwd: cell.cwd.to_string(),
            timeout_ms: millis(cell.timeout),
            max_output: cell.max_output as u64,
            stop_after: cell.stop_after,
            grace_ms: millis(cell.grace),
            tools: cell.tools.map(|t| t.channel()),
        })?;
        let deadline = Instant::now()
            + cell
                .timeout
                .saturating_add(cell.grace)
                .saturating_add(RUN_GRACE)
                .min(Duration::from_secs(365 * 86400));
        self.stream(
            deadline,
            cell.interrupt,
            cell.tools,
            cell.max_output,
            cell.cwd,
            on_stdout,
            on_stderr,
        )
    }

    /// Stops the kernel, if one runs.
    pub fn stop_kernel(&mut self) -> Result<()> {
        match self.call(&Request::StopKernel, FILE_DEADLINE)? {
            Reply::Done => Ok(()),
            other => Err(broken(format!("unexpected {other:?} to a kernel stop"))),
        }
    }

    /// Stops every process of the sandbox but the agent until [`AgentClient::thaw`]:
    /// no code of the session runs while an install has the network. Where the agent
    /// relays the sandbox's egress, the install goes out through the proxy it names.
    pub fn freeze(&mut self) -> Result<Option<InstallProxy>> {
        match self.call(&Request::Freeze, FILE_DEADLINE)? {
            Reply::Frozen(proxy) => Ok(proxy),
            // Nothing stays stopped: the agent let the code go on again.
            Reply::Error(message) => Err(Error::Io {
                context: "the install cannot go online".into(),
                source: std::io::Error::other(message),
            }),
            other => Err(broken(format!("unexpected {other:?} to a freeze"))),
        }
    }

    /// Closes the install proxy and lets the processes [`AgentClient::freeze`]
    /// stopped go on.
    pub fn thaw(&mut self) -> Result<()> {
        match self.call(&Request::Thaw, FILE_DEADLINE)? {
            Reply::Done => Ok(()),
            other => Err(broken(format!("unexpected {other:?} to a thaw"))),
        }
    }

    /// Output frames until the exit report of a run or a cell; passes `interrupt` on
    /// to the agent once it is set, and has the run's tool calls answered.
    #[allow(clippy::too_many_arguments)]
    fn stream(
        &mut self,
        deadline: Instant,
        mut interrupt: Option<&Interrupt>,
        tools: Option<RunTools<'_>>,
        max: usize,
        cwd: &str,
        on_stdout: &mut Option<Sink>,
        on_stderr: &mut Option<Sink>,
    ) -> Result<(ExitReport, Output)> {
        let mut output = Output::default();
        loop {
            // Asked before every frame, not only when none came: a program that
            // writes without pause never lets a wait run out.
            if interrupt.is_some_and(Interrupt::is_interrupted) {
                self.send(&Request::Interrupt)?;
                // Once is enough: the agent answers with the run's exit report.
                interrupt = None;
            }
            let wake = match interrupt {
                Some(_) => (Instant::now() + INTERRUPT_POLL).min(deadline),
                None => deadline,
            };
            let Some(reply) = self.receive_or_wake(deadline, wake)? else {
                continue;
            };
            match reply {
                Reply::Stdout(bytes) => forward(&mut output.stdout, &bytes, max, on_stdout),
                Reply::Stderr(bytes) => forward(&mut output.stderr, &bytes, max, on_stderr),
                Reply::Exit(report) => return Ok((report, output)),
                Reply::ToolCall { call, frame } => match tools {
                    Some(tools) => self.answer(tools, call, frame),
                    None => return Err(broken("it relayed a tool call in a run without tools")),
                },
                Reply::ToolCallTooLarge { call, size } => match tools {
                    Some(tools) => {
                        let size = usize::try_from(size).unwrap_or(usize::MAX);
                        let answer = tools.calls.refuse_oversized(size).unwrap_or_else(|| {
                            sandlot_core::tool::protocol::failure(
                                &serde_json::Value::Null,
                                ToolOutcome::Protocol,
                                "the agent refused a request within the limit",
                            )
                        });
                        self.send(&Request::ToolAnswer {
                            call,
                            frame: answer,
                        })?;
                    }
                    None => return Err(broken("it relayed a tool call in a run without tools")),
                },
                // The agent refuses a run for its working directory, or a cell when no
                // kernel runs.
                Reply::Error(message) => return Err(path_error(cwd, message)),
                other => return Err(broken(format!("unexpected {other:?} during a run"))),
            }
        }
    }

    /// Answers tool call `call` on the run's runtime, so that the run's output goes on
    /// being read (and other calls answered) while its handler works. The answer is
    /// sent whenever it is ready: one that comes after its run is dropped by the agent.
    fn answer(&self, tools: RunTools<'_>, call: u64, frame: Vec<u8>) {
        use std::future::Future as _;
        let calls = tools.calls.clone();
        let writer = self.writer.clone();
        let mut answering = Box::pin(async move {
            let frame = calls.answer(&frame).await;
            // A failed write is a gone agent, which the run's own reads report.
            let _ = send(&writer, &Request::ToolAnswer { call, frame });
        });
        // A call answered at once (an async handler that does not wait, a refusal) is
        // answered here, without a hop to the runtime's thread; one that waits goes on
        // there, where its first poll there registers the wakers it waits on.
        let _entered = tools.runtime.enter();
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        if answering.as_mut().poll(&mut context).is_pending() {
            tools.runtime.spawn(answering);
        }
    }

    /// Writes a file relative to the workspace.
    pub fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        let request = Request::Write {
            path: path.into(),
            data: data.to_vec(),
        };
        self.expect_done(&request, path, FILE_DEADLINE, "a write")
    }

    /// Reads a regular file relative to the workspace, at most `max` bytes.
    pub fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        let request = Request::Read {
            path: path.into(),
            max,
        };
        self.expect_data(&request, path, max, FILE_DEADLINE, "a read")
    }

    /// A tar of a file or a directory's contents, at most `max` bytes.
    pub fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        let request = Request::Pack {
            path: path.into(),
            max,
        };
        self.expect_data(&request, path, max, COPY_DEADLINE, "a pack")
    }

    /// Unpacks a tar into a directory.
    pub fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        let request = Request::Unpack {
            path: path.into(),
            data: archive.to_vec(),
        };
        self.expect_done(&request, path, COPY_DEADLINE, "an unpack")
    }

    /// Empties a directory, following no link.
    pub fn clear(&mut self, path: &str) -> Result<()> {
        let request = Request::Clear { path: path.into() };
        self.expect_done(&request, path, FILE_DEADLINE, "a clear")
    }

    /// What a path is, a link at its end not followed.
    pub fn stat(&mut self, path: &str) -> Result<Entry> {
        let request = Request::Stat { path: path.into() };
        match self.call(&request, FILE_DEADLINE)? {
            Reply::Entries(mut entries) if entries.len() == 1 => Ok(entries.remove(0)),
            Reply::Error(reason) => Err(path_error(path, reason)),
            Reply::Missing(_) => Err(Error::NoSuchFile { path: path.into() }),
            other => Err(broken(format!("unexpected {other:?} to a stat"))),
        }
    }

    /// Makes a directory and its parents.
    pub fn make_dir(&mut self, path: &str) -> Result<()> {
        let request = Request::MakeDir { path: path.into() };
        self.expect_done(&request, path, FILE_DEADLINE, "a make_dir")
    }

    /// Removes a file, a link or a directory tree.
    pub fn remove(&mut self, path: &str) -> Result<()> {
        let request = Request::Remove { path: path.into() };
        self.expect_done(&request, path, COPY_DEADLINE, "a remove")
    }

    /// Moves a file, link or directory.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        let request = Request::Rename {
            from: from.into(),
            to: to.into(),
        };
        self.expect_done(&request, from, FILE_DEADLINE, "a rename")
    }

    /// Lists a directory (`list`) or every file below one (`scan`).
    pub fn entries(&mut self, path: &str, recursive: bool) -> Result<Vec<Entry>> {
        let request = if recursive {
            Request::Scan { path: path.into() }
        } else {
            Request::List { path: path.into() }
        };
        match self.call(&request, FILE_DEADLINE)? {
            Reply::Entries(entries) => Ok(entries),
            Reply::Error(reason) => Err(path_error(path, reason)),
            Reply::Missing(_) => Err(Error::NoSuchFile { path: path.into() }),
            other => Err(broken(format!("unexpected {other:?} to a listing"))),
        }
    }

    /// A request about `path` that is answered with [`Reply::Done`].
    fn expect_done(
        &mut self,
        request: &Request,
        path: &str,
        within: Duration,
        what: &str,
    ) -> Result<()> {
        match self.call(request, within)? {
            Reply::Done => Ok(()),
            Reply::Error(reason) => Err(path_error(path, reason)),
            Reply::Missing(_) => Err(Error::NoSuchFile { path: path.into() }),
            other => Err(broken(format!("unexpected {other:?} to {what}"))),
        }
    }

    /// A request about `path` that is answered with at most `max` bytes of data.
    fn expect_data(
        &mut self,
        request: &Request,
        path: &str,
        max: u64,
        within: Duration,
        what: &str,
    ) -> Result<Vec<u8>> {
        match self.call(request, within)? {
            Reply::Data(data) if data.len() as u64 <= max => Ok(data),
            Reply::Data(_) => Err(broken("it sent more than was asked for")),
            Reply::Error(reason) => Err(path_error(path, reason)),
            Reply::Missing(_) => Err(Error::NoSuchFile { path: path.into() }),
            other => Err(broken(format!("unexpected {other:?} to {what}"))),
        }
    }
}

fn send(writer: &Writer, request: &Request) -> io::Result<()> {
    let mut writer = writer.lock().unwrap_or_else(|e| e.into_inner());
    request.write_to(&mut *writer)?;
    writer.flush()
}

fn path_error(path: &str, reason: String) -> Error {
    Error::InvalidPath {
        path: path.into(),
        reason,
    }
}

/// Keeps `bytes` up to `max` in all and hands the kept part to `sink`: an agent that
/// sends more than it was asked to is not believed.
fn forward(kept: &mut Vec<u8>, bytes: &[u8], max: usize, sink: &mut Option<Sink>) {
    let room = max.saturating_sub(kept.len());
    let bytes = &bytes[..bytes.len().min(room)];
    if bytes.is_empty() {
        return;
    }
    if let Some(sink) = sink {
        sink(bytes);
    }
    kept.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// An agent played by a test, over channels.
    fn pair() -> (mpsc::Sender<Vec<u8>>, mpsc::Receiver<Vec<u8>>, Transport) {
        let (to_host, from_agent) = mpsc::channel();
        let (to_agent, from_host) = mpsc::channel();
        let send = move |bytes| to_agent.send(bytes).is_ok();
        (
            to_host,
            from_host,
            Transport::channels(from_agent, send, || {}),
        )
    }

    fn frame(reply: &Reply) -> Vec<u8> {
        let mut wire = Vec::new();
        reply.write_to(&mut wire).unwrap();
        wire
    }

    #[test]
    fn output_past_the_cap_is_neither_kept_nor_streamed() {
        let (agent, _requests, transport) = pair();
        agent
            .send(frame(&Reply::Hello {
                version: PROTOCOL_VERSION,
            }))
            .unwrap();
        let mut client = AgentClient::connect(transport, Duration::from_secs(5)).unwrap();
        for reply in [
            Reply::Stdout(b"abc".to_vec()),
            Reply::Stdout(b"defg".to_vec()),
            Reply::Exit(ExitReport::default()),
        ] {
            agent.send(frame(&reply)).unwrap();
        }
        let streamed = Arc::new(Mutex::new(Vec::new()));
        let seen = streamed.clone();
        let mut sink: Option<Sink> =
            Some(Box::new(move |b| seen.lock().unwrap().extend_from_slice(b)));
        let argv = ["x".to_string()];
        let command = RunCommand {
            argv: &argv,
            env: &[],
            cwd: "",
            stdin: b"",
            timeout: Duration::from_secs(1),
            max_output: 5,
            stop_after: 0,
            interrupt: None,
            tools: None,
        };
        let (_, output) = client.run(&command, &mut sink, &mut None).unwrap();
        assert_eq!(output.stdout, b"abcde");
        assert_eq!(*streamed.lock().unwrap(), b"abcde");
    }

    #[test]
    fn an_interrupt_is_passed_on_once_while_the_run_goes_on() {
        let (agent, requests, transport) = pair();
        agent
            .send(frame(&Reply::Hello {
                version: PROTOCOL_VERSION,
            }))
            .unwrap();
        let mut client = AgentClient::connect(transport, Duration::from_secs(5)).unwrap();
        let interrupt = Interrupt::new();
        let request = |bytes: Vec<u8>| {
            let (tag, body) = read_frame(&mut bytes.as_slice()).unwrap();
            Request::decode(tag, &body).unwrap()
        };
        let played = {
            let interrupt = interrupt.clone();
            std::thread::spawn(move || {
                let run = request(requests.recv().unwrap());
                assert!(matches!(run, Request::Run { .. }), "{run:?}");
                agent
                    .send(frame(&Reply::Stdout(b"started".to_vec())))
                    .unwrap();
                interrupt.interrupt();
                // A program that goes on writing: the interrupt must not wait for a
                // pause in its output.
                let next = loop {
                    if let Ok(next) = requests.recv_timeout(Duration::from_millis(5)) {
                        break next;
                    }
                    agent.send(frame(&Reply::Stdout(b".".to_vec()))).unwrap();
                };
                assert_eq!(request(next), Request::Interrupt);
                let stopped = ExitReport {
                    code: 137,
                    signal: 9,
                    on_request: true,
                    ..ExitReport::default()
                };
                agent.send(frame(&Reply::Exit(stopped))).unwrap();
                // One interrupt, however long the exit report takes to arrive.
                assert!(requests.recv_timeout(Duration::from_millis(300)).is_err());
            })
        };
        let argv = ["sleep".to_string(), "100".to_string()];
        let command = RunCommand {
            argv: &argv,
            env: &[],
            cwd: "",
            stdin: b"",
            timeout: Duration::from_secs(100),
            max_output: 1 << 20,
            stop_after: 0,
            interrupt: Some(&interrupt),
            tools: None,
        };
        let (report, output) = client.run(&command, &mut None, &mut None).unwrap();
        played.join().unwrap();
        assert!(report.on_request, "{report:?}");
        assert!(output.stdout.starts_with(b"started"), "{:?}", output.stdout);
    }

    #[test]
    fn an_agent_that_never_answers_is_given_up_on_in_time() {
        let (_agent, _requests, transport) = pair();
        let started = Instant::now();
        let error = AgentClient::connect(transport, Duration::from_millis(200)).unwrap_err();
        assert!(error.to_string().contains("stopped answering"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn a_hang_up_is_an_agent_error() {
        let (agent, _requests, transport) = pair();
        drop(agent);
        let error = AgentClient::connect(transport, Duration::from_secs(5)).unwrap_err();
        assert!(error.to_string().contains("hung up"), "{error}");
    }

    #[test]
    fn an_agent_of_another_protocol_is_refused_with_what_to_rebuild() {
        let (agent, _requests, transport) = pair();
        agent.send(frame(&Reply::Hello { version: 2 })).unwrap();
        let error = AgentClient::connect(transport, Duration::from_secs(5)).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("protocol 2"), "{message}");
        assert!(
            message.contains(&format!("needs {PROTOCOL_VERSION}")),
            "{message}"
        );
        assert!(message.contains("cargo build"), "{message}");
    }
}

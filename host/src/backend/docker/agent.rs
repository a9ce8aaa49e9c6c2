//! The host's end of the agent protocol: one Unix socket per container, shared through
//! a read-only bind mount. Everything the agent says is untrusted input.

use crate::backend::Sink;
use crate::error::{Error, Result};
use sandlot_agent::{read_frame, Entry, ExitReport, Reply, Request, PROTOCOL_VERSION};
use std::io::{BufReader, ErrorKind};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// The program's output as it came, before caps are applied by the session.
#[derive(Default)]
pub(crate) struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// A connected agent.
pub(crate) struct AgentClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

fn broken(reason: impl std::fmt::Display) -> Error {
    Error::Agent {
        reason: reason.to_string(),
    }
}

impl AgentClient {
    /// Waits for the agent of a just-started container to connect and say hello.
    /// `alive` is asked now and then whether waiting still makes sense.
    pub fn accept(
        listener: &UnixListener,
        within: Duration,
        mut alive: impl FnMut() -> Result<()>,
    ) -> Result<AgentClient> {
        listener
            .set_nonblocking(true)
            .map_err(|e| broken(format!("cannot poll the agent socket: {e}")))?;
        let started = Instant::now();
        let mut last_check = Instant::now();
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if started.elapsed() > within {
                        return Err(broken(format!(
                            "it did not connect within {} s",
                            within.as_secs()
                        )));
                    }
                    if last_check.elapsed() > Duration::from_millis(250) {
                        alive()?;
                        last_check = Instant::now();
                    }
                    std::thread::sleep(Duration::from_micros(500));
                }
                Err(e) => return Err(broken(format!("accepting its connection failed: {e}"))),
            }
        };
        stream
            .set_nonblocking(false)
            .map_err(|e| broken(format!("socket setup failed: {e}")))?;
        let writer = stream
            .try_clone()
            .map_err(|e| broken(format!("socket setup failed: {e}")))?;
        let mut client = AgentClient {
            reader: BufReader::new(stream),
            writer,
        };
        // A hello that never comes must not hang the open.
        client.set_timeout(Some(within));
        match client.receive()? {
            Reply::Hello { version } if version == PROTOCOL_VERSION => Ok(client),
            Reply::Hello { version } => Err(broken(format!(
                "it speaks protocol {version}, this sandlot speaks {PROTOCOL_VERSION}"
            ))),
            other => Err(broken(format!("it began with {other:?} instead of hello"))),
        }
    }

    fn set_timeout(&mut self, timeout: Option<Duration>) {
        let _ = self.reader.get_ref().set_read_timeout(timeout);
        // An agent that stopped reading must not block a large request forever.
        let _ = self.writer.set_write_timeout(timeout);
    }

    fn send(&mut self, request: &Request) -> Result<()> {
        self.set_timeout(Some(Duration::from_secs(60)));
        request
            .write_to(&mut self.writer)
            .map_err(|e| broken(format!("cannot send a request: {e}")))
    }

    fn receive(&mut self) -> Result<Reply> {
        let (tag, body) = read_frame(&mut self.reader).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => broken("the container stopped (its agent hung up)"),
            ErrorKind::WouldBlock | ErrorKind::TimedOut => broken("it stopped answering"),
            _ => broken(e),
        })?;
        Reply::decode(tag, &body).map_err(broken)
    }

    /// One request that is answered by one reply.
    fn call(&mut self, request: &Request, timeout: Duration) -> Result<Reply> {
        self.send(request)?;
        self.set_timeout(Some(timeout));
        self.receive()
    }

    /// Runs a command; output is kept up to `max_output` per stream and also handed to
    /// the sinks as it arrives.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        stdin: &[u8],
        timeout: Duration,
        max_output: usize,
        output: &mut Output,
        on_stdout: &mut Option<Sink>,
        on_stderr: &mut Option<Sink>,
    ) -> Result<ExitReport> {
        self.send(&Request::Run {
            argv: argv.to_vec(),
            env: env.to_vec(),
            cwd: String::new(),
            stdin: stdin.to_vec(),
            timeout_ms: timeout.as_millis() as u64,
            max_output: max_output as u64,
        })?;
        // The agent enforces the limit; this deadline is for an agent that stopped
        // working, or code that keeps it busy past the limit. It bounds the whole run,
        // not each frame.
        let deadline = Instant::now()
            + timeout
                .saturating_add(Duration::from_secs(30))
                .min(Duration::from_secs(365 * 86400));
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(broken("it did not finish the command in time"));
            }
            self.set_timeout(Some(left));
            match self.receive()? {
                Reply::Stdout(bytes) => {
                    if let Some(sink) = on_stdout {
                        sink(&bytes);
                    }
                    append(&mut output.stdout, &bytes, max_output);
                }
                Reply::Stderr(bytes) => {
                    if let Some(sink) = on_stderr {
                        sink(&bytes);
                    }
                    append(&mut output.stderr, &bytes, max_output);
                }
                Reply::Exit(report) => return Ok(report),
                Reply::Error(message) => return Err(broken(message)),
                other => return Err(broken(format!("unexpected {other:?} during a run"))),
            }
        }
    }

    /// Writes a file relative to the workspace.
    pub fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        let request = Request::Write {
            path: path.into(),
            data: data.to_vec(),
        };
        self.expect_done(&request, path, Duration::from_secs(60), "a write")
    }

    /// Reads a regular file relative to the workspace, at most `max` bytes.
    pub fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        let request = Request::Read {
            path: path.into(),
            max,
        };
        self.expect_data(&request, path, max, Duration::from_secs(60), "a read")
    }

    /// A tar of a file or a directory's contents, at most `max` bytes.
    pub fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        let request = Request::Pack {
            path: path.into(),
            max,
        };
        self.expect_data(&request, path, max, Duration::from_secs(300), "a pack")
    }

    /// Unpacks a tar into a directory.
    pub fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        let request = Request::Unpack {
            path: path.into(),
            data: archive.to_vec(),
        };
        self.expect_done(&request, path, Duration::from_secs(300), "an unpack")
    }

    /// A request about `path` that is answered with [`Reply::Done`].
    fn expect_done(
        &mut self,
        request: &Request,
        path: &str,
        timeout: Duration,
        what: &str,
    ) -> Result<()> {
        match self.call(request, timeout)? {
            Reply::Done => Ok(()),
            Reply::Error(reason) => Err(path_error(path, reason)),
            other => Err(broken(format!("unexpected {other:?} to {what}"))),
        }
    }

    /// A request about `path` that is answered with at most `max` bytes of data.
    fn expect_data(
        &mut self,
        request: &Request,
        path: &str,
        max: u64,
        timeout: Duration,
        what: &str,
    ) -> Result<Vec<u8>> {
        match self.call(request, timeout)? {
            Reply::Data(data) if data.len() as u64 <= max => Ok(data),
            Reply::Data(_) => Err(broken("it sent more than was asked for")),
            Reply::Error(reason) => Err(path_error(path, reason)),
            other => Err(broken(format!("unexpected {other:?} to {what}"))),
        }
    }

    /// Lists a directory (`list`) or every file below one (`scan`).
    pub fn entries(&mut self, path: &str, recursive: bool) -> Result<Vec<Entry>> {
        let path = path.to_string();
        let request = if recursive {
            Request::Scan { path: path.clone() }
        } else {
            Request::List { path: path.clone() }
        };
        match self.call(&request, Duration::from_secs(60))? {
            Reply::Entries(entries) => Ok(entries),
            Reply::Error(reason) => Err(path_error(&path, reason)),
            other => Err(broken(format!("unexpected {other:?} to a listing"))),
        }
    }
}

fn path_error(path: &str, reason: String) -> Error {
    Error::InvalidPath {
        path: path.into(),
        reason,
    }
}

fn append(buffer: &mut Vec<u8>, bytes: &[u8], max: usize) {
    let room = max.saturating_sub(buffer.len());
    buffer.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// Makes `dir` and the socket in it reachable by the container's user `uid:gid` and
/// by nobody else: another local user who could connect first would be taken for the
/// agent. When sandlot cannot give files away (it is not root), the directory is
/// opened to every user instead, which is all an unprivileged host can do.
pub(crate) fn open_to_container(
    dir: &Path,
    socket: &Path,
    uid: u32,
    gid: u32,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    };
    let given = std::os::unix::fs::chown(dir, Some(uid), Some(gid))
        .and_then(|()| std::os::unix::fs::chown(socket, Some(uid), Some(gid)));
    if given.is_ok() {
        mode(dir, 0o700)?;
        mode(socket, 0o600)
    } else {
        mode(dir, 0o755)?;
        mode(socket, 0o666)
    }
}

//! What the backend and its worker processes say to each other: messages encoded with
//! postcard, each framed by its length (a little-endian `u32`), over one Unix stream
//! socket per worker. A restore's snapshot file travels beside its message as a
//! descriptor (`SCM_RIGHTS`), so the worker maps the snapshot's pages as the backend
//! would have, without copying them.
//!
//! Both ends are the same build (the handshake checks it), so the messages need no
//! versioning beyond [`VERSION`]; they mirror the backend contract's types where those
//! carry no serde of their own.

use sandlot_core::artifact::{FileScan, FileStat};
use sandlot_core::backend::{DirEntry, EndReason, FileInfo, FileKind, Outcome, SessionState};
use sandlot_core::error::{Error, ErrorKind};
use serde::{Deserialize, Serialize};
use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// Bumped whenever a message changes shape.
pub(crate) const VERSION: u32 = 1;

/// The first argument a worker is started with.
pub(crate) const FLAG: &str = "--sandlot-wasm-worker";
/// The variable that names the worker's end of the socket.
pub(crate) const FD_VARIABLE: &str = "SANDLOT_WASM_WORKER_FD";
/// The variable that names the core the worker keeps to, if any.
pub(crate) const CPU_VARIABLE: &str = "SANDLOT_WASM_WORKER_CPU";
/// The variable that holds the worker's [`WorkerConfig`], as JSON.
pub(crate) const CONFIG_VARIABLE: &str = "SANDLOT_WASM_WORKER_CONFIG";

/// What the worker's backend is made of: the parent's own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkerConfig {
    pub runtimes_dir: PathBuf,
    pub components: Vec<PathBuf>,
    pub cache_dir: Option<PathBuf>,
}

/// This build, as a worker's handshake names it: parent and worker must match.
pub(crate) fn build() -> String {
    format!("sandlot-wasm {} wire {VERSION}", env!("CARGO_PKG_VERSION"))
}

/// The largest frame either side accepts: a file of the largest upload, with room.
pub(crate) const MAX_FRAME: usize = 256 << 20;

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
    /// larger than [`CHUNK`]: the call's own (a write's, an unpack's) is then empty.
    Chunk { id: u64, bytes: Vec<u8> },
}

/// The most bytes of a file, an archive or captured state one message carries;
/// more go in pieces of this size.
pub(crate) const CHUNK: usize = 1 << 20;

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

/// An [`Outcome`] of a wasm run (which never reaches a network, so it has no egress
/// denials).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireOutcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub exit_code: i32,
    pub end: WireEnd,
    pub session: WireSession,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WireEnd {
    Completed,
    TimedOut { limit: Duration },
    MemoryLimit,
    OutputLimit,
    Interrupted,
    Killed { signal: i32 },
    SandboxLost { cause: String },
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WireSession {
    Open,
    Restarted { reason: String },
    Ended { reason: String },
}

impl From<Outcome> for WireOutcome {
    fn from(outcome: Outcome) -> WireOutcome {
        WireOutcome {
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            stdout_truncated: outcome.stdout_truncated,
            stderr_truncated: outcome.stderr_truncated,
            exit_code: outcome.exit_code,
            end: match outcome.end {
                EndReason::Completed => WireEnd::Completed,
                EndReason::TimedOut { limit } => WireEnd::TimedOut { limit },
                EndReason::MemoryLimit => WireEnd::MemoryLimit,
                EndReason::OutputLimit => WireEnd::OutputLimit,
                EndReason::Interrupted => WireEnd::Interrupted,
                EndReason::Killed { signal } => WireEnd::Killed { signal },
                EndReason::SandboxLost { cause } => WireEnd::SandboxLost { cause },
                other => WireEnd::SandboxLost {
                    cause: other.to_string(),
                },
            },
            session: match outcome.session {
                SessionState::Open => WireSession::Open,
                SessionState::Restarted { reason } => WireSession::Restarted { reason },
                SessionState::Ended { reason } => WireSession::Ended { reason },
                other => WireSession::Ended {
                    reason: format!("{other:?}"),
                },
            },
        }
    }
}

impl From<WireOutcome> for Outcome {
    fn from(wire: WireOutcome) -> Outcome {
        Outcome {
            stdout: wire.stdout,
            stderr: wire.stderr,
            stdout_truncated: wire.stdout_truncated,
            stderr_truncated: wire.stderr_truncated,
            exit_code: wire.exit_code,
            end: match wire.end {
                WireEnd::Completed => EndReason::Completed,
                WireEnd::TimedOut { limit } => EndReason::TimedOut { limit },
                WireEnd::MemoryLimit => EndReason::MemoryLimit,
                WireEnd::OutputLimit => EndReason::OutputLimit,
                WireEnd::Interrupted => EndReason::Interrupted,
                WireEnd::Killed { signal } => EndReason::Killed { signal },
                WireEnd::SandboxLost { cause } => EndReason::SandboxLost { cause },
            },
            session: match wire.session {
                WireSession::Open => SessionState::Open,
                WireSession::Restarted { reason } => SessionState::Restarted { reason },
                WireSession::Ended { reason } => SessionState::Ended { reason },
            },
            ..Outcome::default()
        }
    }
}

/// What the file system says of a file ([`FileInfo`]).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireInfo {
    kind: u8,
    size: u64,
    mode: u32,
    modified: Option<Duration>,
}

impl From<FileInfo> for WireInfo {
    fn from(info: FileInfo) -> WireInfo {
        WireInfo {
            kind: match info.kind {
                FileKind::File => 0,
                FileKind::Directory => 1,
                FileKind::Link => 2,
                _ => 3,
            },
            size: info.size,
            mode: info.mode,
            modified: info.modified.map(since_epoch),
        }
    }
}

impl From<WireInfo> for FileInfo {
    fn from(wire: WireInfo) -> FileInfo {
        let kind = match wire.kind {
            0 => FileKind::File,
            1 => FileKind::Directory,
            2 => FileKind::Link,
            _ => FileKind::Other,
        };
        FileInfo::new(kind, wire.size)
            .with_mode(wire.mode)
            .with_modified(wire.modified.and_then(at))
    }
}

/// One directory entry; its name is bytes the code in the sandbox chose.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireEntry {
    name: Vec<u8>,
    info: WireInfo,
}

impl From<DirEntry> for WireEntry {
    fn from(entry: DirEntry) -> WireEntry {
        WireEntry {
            name: entry.name.into_vec(),
            info: entry.info.into(),
        }
    }
}

impl From<WireEntry> for DirEntry {
    fn from(wire: WireEntry) -> DirEntry {
        DirEntry::new(std::ffi::OsString::from_vec(wire.name), wire.info.into())
    }
}

/// One file of a [`FileScan`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireStat {
    path: Vec<u8>,
    size: u64,
    modified: Option<Duration>,
}

pub(crate) fn scan_to_wire(scan: &FileScan) -> Vec<WireStat> {
    scan.stats()
        .map(|stat| WireStat {
            path: stat.path.as_os_str().as_bytes().to_vec(),
            size: stat.size,
            modified: stat.modified.map(since_epoch),
        })
        .collect()
}

pub(crate) fn scan_from_wire(stats: Vec<WireStat>) -> FileScan {
    FileScan::from_stats(stats.into_iter().map(|stat| FileStat {
        path: PathBuf::from(std::ffi::OsString::from_vec(stat.path)),
        size: stat.size,
        modified: stat.modified.and_then(at),
    }))
}

/// The time `since` the epoch; `None` for one past what the clock holds (a worker's
/// word is not trusted to be in range).
fn at(since: Duration) -> Option<SystemTime> {
    SystemTime::UNIX_EPOCH.checked_add(since)
}

fn since_epoch(time: SystemTime) -> Duration {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// An [`Error`]: the two a caller matches by variant (a missing file, an ended
/// session) as themselves, every other one by its kind and message.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WireError {
    NoSuchFile { path: String },
    SessionEnded { reason: String },
    Other { kind: u8, message: String },
}

impl From<&Error> for WireError {
    fn from(error: &Error) -> WireError {
        match error {
            Error::NoSuchFile { path } => WireError::NoSuchFile { path: path.clone() },
            Error::SessionEnded { reason } => WireError::SessionEnded {
                reason: reason.clone(),
            },
            other => WireError::Other {
                kind: ErrorKind::ALL
                    .iter()
                    .position(|kind| *kind == other.kind())
                    .and_then(|at| u8::try_from(at).ok())
                    .unwrap_or(u8::MAX),
                message: other.to_string(),
            },
        }
    }
}

impl From<WireError> for Error {
    fn from(wire: WireError) -> Error {
        match wire {
            WireError::NoSuchFile { path } => Error::NoSuchFile { path },
            WireError::SessionEnded { reason } => Error::SessionEnded { reason },
            WireError::Other { kind, message } => Error::Masked {
                message,
                kind: ErrorKind::ALL
                    .get(usize::from(kind))
                    .copied()
                    .unwrap_or(ErrorKind::Internal),
            },
        }
    }
}

/// Writes one message, with `fd` beside it if given. A message larger than
/// [`MAX_FRAME`] is refused before anything is written (`InvalidInput`): the stream
/// stays usable.
pub(crate) fn send<T: Serialize>(
    stream: &UnixStream,
    message: &T,
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    // The length goes first; it is known once the body is written behind its place.
    let mut frame = postcard::to_extend(message, vec![0u8; 4]).map_err(io::Error::other)?;
    let len = frame.len() - 4;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a message of {len} bytes is larger than the {MAX_FRAME} a worker's socket takes"
            ),
        ));
    }
    frame[..4].copy_from_slice(&(len as u32).to_le_bytes());
    let mut sent = match fd {
        Some(fd) => descriptors::send_with(stream, &frame, fd)?,
        None => 0,
    };
    while sent < frame.len() {
        sent += descriptors::send(stream, &frame[sent..])?;
    }
    Ok(())
}

/// Reads messages from a stream, and the descriptors sent beside them.
pub(crate) struct Receiver {
    stream: UnixStream,
    buffer: Vec<u8>,
    /// Descriptors received and not yet taken, in the order they came.
    fds: std::collections::VecDeque<OwnedFd>,
    /// The most descriptors it holds untaken: more is a peer that sends what it was
    /// not asked for, and an error (the backend takes none from a worker).
    keep: usize,
}

impl Receiver {
    /// A receiver that holds at most `keep` descriptors not yet taken.
    pub(crate) fn new(stream: UnixStream, keep: usize) -> Receiver {
        Receiver {
            stream,
            buffer: Vec::new(),
            fds: Default::default(),
            keep,
        }
    }

    /// The next message; `Ok(None)` at the end of the stream between messages.
    pub(crate) fn next<T: for<'de> Deserialize<'de>>(&mut self) -> io::Result<Option<T>> {
        let mut head = [0u8; 4];
        if !self.fill(&mut head)? {
            return Ok(None);
        }
        let len = u32::from_le_bytes(head) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of {len} bytes is larger than the {MAX_FRAME} allowed"),
            ));
        }
        // Grown as the bytes arrive, not from the length alone: a frame that claims
        // more than it brings costs what it brought.
        let mut body = std::mem::take(&mut self.buffer);
        body.clear();
        let filled = self.fill_growing(&mut body, len);
        let message = match filled {
            Ok(()) => postcard::from_bytes(&body)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) => Err(e),
        };
        if body.capacity() <= 1 << 20 {
            self.buffer = body;
        }
        message
    }

    /// Reads `len` bytes onto `body`, a piece at a time.
    fn fill_growing(&mut self, body: &mut Vec<u8>, len: usize) -> io::Result<()> {
        while body.len() < len {
            let at = body.len();
            let piece = (len - at).min(1 << 20);
            body.resize(at + piece, 0);
            let n = self.receive(&mut body[at..])?;
            body.truncate(at + n);
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }

    /// Reads some bytes, and keeps the descriptors that came with them, within
    /// `keep`.
    fn receive(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = descriptors::receive(&self.stream, buf, &mut self.fds)?;
        if self.fds.len() > self.keep {
            self.fds.clear();
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer sent descriptors it was not asked for",
            ));
        }
        Ok(n)
    }

    /// The oldest descriptor received and not yet taken.
    pub(crate) fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fds.pop_front()
    }

    /// Fills `buf` whole: `false` if the stream ended before its first byte.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        let mut at = 0;
        while at < buf.len() {
            let n = self.receive(&mut buf[at..])?;
            if n == 0 {
                return if at == 0 {
                    Ok(false)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
            at += n;
        }
        Ok(true)
    }
}

/// `SCM_RIGHTS`: descriptors sent beside the bytes of a Unix stream.
mod descriptors {
    #![allow(unsafe_code)] // sendmsg(2) and recvmsg(2) with control messages

    use super::*;

    /// Room for the control messages of a few descriptors, aligned as `cmsghdr` is.
    const SPACE: usize = 64;

    #[repr(C, align(8))]
    struct Control([u8; SPACE]);

    /// Sends some of `bytes` (returns how many), never raising `SIGPIPE`: a worker
    /// that went away is an error here, not the end of the application.
    pub(super) fn send(stream: &UnixStream, bytes: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `bytes` is a live buffer of its own length.
            let sent = unsafe {
                libc::send(
                    stream.as_raw_fd(),
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if sent >= 0 {
                return Ok(sent as usize);
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }

    /// Sends `bytes` (some of them: returns how many) with `fd` attached.
    pub(super) fn send_with(
        stream: &UnixStream,
        bytes: &[u8],
        fd: BorrowedFd<'_>,
    ) -> io::Result<usize> {
        let mut control = Control([0; SPACE]);
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: a zeroed msghdr is valid; every pointer set below points into
        // buffers that live across the call, with their true lengths.
        let sent = unsafe {
            let mut header: libc::msghdr = std::mem::zeroed();
            header.msg_iov = &mut iov;
            header.msg_iovlen = 1;
            header.msg_control = control.0.as_mut_ptr().cast();
            header.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&header);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd.as_raw_fd());
            libc::sendmsg(stream.as_raw_fd(), &header, libc::MSG_NOSIGNAL)
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sent as usize)
    }

    /// Reads some bytes into `buf`, and keeps the descriptors that came with them.
    pub(super) fn receive(
        stream: &UnixStream,
        buf: &mut [u8],
        fds: &mut std::collections::VecDeque<OwnedFd>,
    ) -> io::Result<usize> {
        let mut control = Control([0; SPACE]);
        let mut iov = [IoSliceMut::new(buf)];
        loop {
            // SAFETY: as in `send_with`; the kernel writes at most `msg_controllen`
            // bytes of control messages, each descriptor in them new to this process
            // and owned here from now on.
            let (read, header) = unsafe {
                let mut header: libc::msghdr = std::mem::zeroed();
                header.msg_iov = iov.as_mut_ptr().cast();
                header.msg_iovlen = 1;
                header.msg_control = control.0.as_mut_ptr().cast();
                header.msg_controllen = SPACE as _;
                let read = libc::recvmsg(stream.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC);
                (read, header)
            };
            if read < 0 {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            // SAFETY: walks the control messages the kernel wrote into `control`,
            // within the length it reported.
            unsafe {
                let mut cmsg = libc::CMSG_FIRSTHDR(&header);
                while !cmsg.is_null() {
                    if (*cmsg).cmsg_level == libc::SOL_SOCKET
                        && (*cmsg).cmsg_type == libc::SCM_RIGHTS
                    {
                        let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                        let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                            / std::mem::size_of::<RawFd>();
                        for i in 0..count {
                            fds.push_back(OwnedFd::from_raw_fd(std::ptr::read_unaligned(
                                data.add(i),
                            )));
                        }
                    }
                    cmsg = libc::CMSG_NXTHDR(&header, cmsg);
                }
            }
            if header.msg_flags & libc::MSG_CTRUNC != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "more descriptors came than there was room for",
                ));
            }
            return Ok(read as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_message_and_its_descriptor_arrive_together() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"snapshot").unwrap();
        send(
            &a,
            &ToWorker::Interrupt { id: 7 },
            Some(std::os::fd::AsFd::as_fd(&file)),
        )
        .unwrap();
        send(&a, &ToWorker::Interrupt { id: 8 }, None).unwrap();
        let mut receiver = Receiver::new(b, 1);
        let first: ToWorker = receiver.next().unwrap().unwrap();
        assert!(matches!(first, ToWorker::Interrupt { id: 7 }));
        let fd = receiver
            .take_fd()
            .expect("the descriptor came with its message");
        let mut bytes = String::new();
        let mut received = std::fs::File::from(fd);
        std::io::Seek::seek(&mut received, std::io::SeekFrom::Start(0)).unwrap();
        received.read_to_string(&mut bytes).unwrap();
        assert_eq!(bytes, "snapshot");
        let second: ToWorker = receiver.next().unwrap().unwrap();
        assert!(matches!(second, ToWorker::Interrupt { id: 8 }));
        assert!(receiver.take_fd().is_none());
        drop(a);
        assert!(receiver.next::<ToWorker>().unwrap().is_none());
    }

    #[test]
    fn an_oversized_or_cut_frame_is_an_error_not_a_panic() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let mut receiver = Receiver::new(b, 0);
        let error = receiver.next::<ToWorker>().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);

        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&10u32.to_le_bytes()).unwrap();
        a.write_all(b"abc").unwrap();
        drop(a);
        let error = Receiver::new(b, 0).next::<ToWorker>().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn descriptors_nobody_asked_for_are_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        for _ in 0..3 {
            send(
                &a,
                &ToWorker::Interrupt { id: 1 },
                Some(std::os::fd::AsFd::as_fd(&file)),
            )
            .unwrap();
        }
        // The backend's side takes none: the first is an error, and none is kept.
        let mut receiver = Receiver::new(b, 0);
        let error = receiver.next::<ToWorker>().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(receiver.take_fd().is_none());
    }

    #[test]
    fn a_message_too_large_is_refused_before_a_byte_is_written() {
        let (a, b) = UnixStream::pair().unwrap();
        let huge = ToWorker::Chunk {
            id: 1,
            bytes: vec![0; MAX_FRAME + 1],
        };
        let error = send(&a, &huge, None).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        // The stream is still in step: the next message arrives whole.
        send(&a, &ToWorker::Interrupt { id: 2 }, None).unwrap();
        let next: ToWorker = Receiver::new(b, 0).next().unwrap().unwrap();
        assert!(matches!(next, ToWorker::Interrupt { id: 2 }));
    }

    #[test]
    fn a_time_past_the_clocks_end_is_no_time_not_a_panic() {
        let info = WireInfo {
            kind: 0,
            size: 1,
            mode: 0o644,
            modified: Some(Duration::new(u64::MAX, 999_999_999)),
        };
        assert_eq!(FileInfo::from(info).modified, None);
        let scan = scan_from_wire(vec![WireStat {
            path: b"a".to_vec(),
            size: 1,
            modified: Some(Duration::MAX),
        }]);
        assert_eq!(scan.stats().next().unwrap().modified, None);
    }

    #[test]
    fn errors_keep_what_callers_match() {
        let missing = Error::NoSuchFile { path: "a/b".into() };
        let back = Error::from(WireError::from(&missing));
        assert!(matches!(back, Error::NoSuchFile { ref path } if path == "a/b"));
        let bad = Error::InvalidRequest {
            reason: "no".into(),
        };
        let back = Error::from(WireError::from(&bad));
        assert_eq!(back.kind(), bad.kind());
        assert_eq!(back.to_string(), bad.to_string());
    }
}

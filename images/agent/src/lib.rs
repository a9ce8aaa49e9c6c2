//! The wire protocol between sandlot and `sandlot-agent`, the small static program that
//! runs as process 1 inside every container sandlot starts.
//!
//! The protocol runs over any byte stream: a Unix socket the host shares with the
//! container (`sandlot-agent serve SOCKET ROOT`, the agent connects), or the agent's own
//! standard input and output (`sandlot-agent serve-stdio ROOT`), which an engine's
//! attach or exec call carries to a host anywhere. The agent says [`Reply::Hello`],
//! then answers one [`Request`] at a time. When the host's end goes away the agent
//! stops every process and exits, so a sandbox never outlives the host that made it.
//!
//! A frame is a little-endian `u32` length, a tag byte, and the body. The host treats
//! every reply as untrusted input (the code in the container runs as the agent's
//! user), so decoding checks every length against the bytes actually present and
//! [`MAX_FRAME`]. Nothing in the protocol depends on a stream being half-closed: a
//! transport that cannot close its input (Kubernetes' v4 exec channel) works too.
//!
//! ```
//! use sandlot_agent::{read_frame, Request};
//! let request = Request::Read { path: "output/plot.png".into(), max: 1 << 20 };
//! let mut wire = Vec::new();
//! request.write_to(&mut wire).unwrap();
//! let (tag, body) = read_frame(&mut wire.as_slice()).unwrap();
//! assert_eq!(Request::decode(tag, &body).unwrap(), request);
//! ```

use std::io::{self, Read, Write};

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

/// The environment variable that tells code in the sandbox where its run's tool
/// endpoint is: the path of a Unix socket, or `@NAME` for an abstract one (where no
/// directory could be written). Set only while a run with tools goes on.
pub const TOOLS_VARIABLE: &str = "SANDLOT_TOOLS";

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

/// The environment variable that, set to `unconfined` in the agent's environment,
/// turns off the system-call filter it installs on everything it runs (see the
/// agent's `seccomp` module); any other value, or none, leaves it on.
pub const SECCOMP_VARIABLE: &str = "SANDLOT_SECCOMP";

/// The environment variable that, set to a number in the agent's environment, limits
/// the processes (and threads) of the sandbox's user to it: `RLIMIT_NPROC`, which the
/// agent sets on itself inside the sandbox's user namespace, so that it counts that
/// sandbox alone. For a host that has no cgroup to do it (the native backend without
/// cgroups); an engine's pids cgroup does it everywhere else.
pub const PROCESS_LIMIT_VARIABLE: &str = "SANDLOT_PROCESS_LIMIT";

/// The environment variable that, set to a number of bytes in the agent's
/// environment, limits the memory of each process in the sandbox to it:
/// `RLIMIT_DATA` (the heap and every private writable mapping, so reserved address
/// space such as V8's or the JVM's does not count until it is used), which every
/// process inherits from the agent. A per-process cap, for a host with no memory
/// cgroup (the native backend without cgroups); a cgroup caps the sandbox as a whole
/// everywhere else.
pub const MEMORY_LIMIT_VARIABLE: &str = "SANDLOT_MEMORY_LIMIT";

/// Largest frame either side accepts.
pub const MAX_FRAME: usize = 256 << 20;

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
/// run only: a Unix socket, named in [`TOOLS_VARIABLE`] in the run's
/// environment, that code in the sandbox connects to and sends request frames of the
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

/// The way out an install gets while the sandbox is frozen, where the agent relays
/// the sandbox's egress: an HTTP proxy on `127.0.0.1:port`, listening only from the
/// moment every other process stopped, whose connections the agent hands the host
/// with `token`.
///
/// Why a way of its own: the relays the code uses stay open while it is frozen, and
/// what the code queued in them before it stopped (a connection in a listener's
/// backlog, a request in a socket's buffer) would reach the host while the install
/// has the network. The host lets a connection out to the public internet only
/// with the token of the install under way, which no process of the code could
/// have seen: it was drawn after they all stopped, and is void when they go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstallProxy {
    /// The port on the sandbox's loopback.
    pub port: u16,
    /// What the agent's connections present to the host.
    pub token: InstallToken,
}

/// A secret of 128 random bits that one install's connections present to the host;
/// see [`InstallProxy`]. Its `Debug` form does not show it.
///
/// ```
/// use sandlot_agent::InstallToken;
///
/// let token = InstallToken::random().unwrap();
/// assert_eq!(InstallToken::from_hex(&token.to_hex()), Some(token));
/// assert_eq!(InstallToken::from_hex("not a token"), None);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct InstallToken([u8; 16]);

impl InstallToken {
    /// A token from the kernel's random source.
    pub fn random() -> io::Result<InstallToken> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut bytes))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot read /dev/urandom: {e}")))?;
        Ok(InstallToken(bytes))
    }

    /// The token in 32 lowercase hex digits, as the agent sends it to the host.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The token that [`InstallToken::to_hex`] wrote; `None` for anything else.
    pub fn from_hex(text: &str) -> Option<InstallToken> {
        let digits = text.as_bytes();
        if digits.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            let pair = std::str::from_utf8(pair).ok()?;
            if !pair.bytes().all(|d| d.is_ascii_hexdigit()) {
                return None;
            }
            *byte = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(InstallToken(bytes))
    }

    /// Whether `other` is this token, in a time that does not depend on where they
    /// differ.
    pub fn matches(&self, other: &InstallToken) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl std::fmt::Debug for InstallToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstallToken(…)")
    }
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

/// A tar archive of the file or directory at `path` (for a directory, its contents),
/// with regular files and directories only: links are left out, never followed.
/// Fails once the archive would pass `max` bytes.
pub fn pack(path: &std::path::Path, max: u64) -> io::Result<Vec<u8>> {
    use std::fs;
    let meta = fs::symlink_metadata(path)?;
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    let mut total = 0u64;
    let mut add = |tar: &mut tar::Builder<Vec<u8>>,
                   full: &std::path::Path,
                   name: &std::path::Path,
                   meta: &fs::Metadata| {
        // A directory costs a header; a file its size plus a header and padding.
        total += if meta.is_dir() {
            512
        } else {
            meta.len() + 1024
        };
        if total > max {
            return Err(io::Error::other(format!(
                "it holds more than the {max} bytes one copy may move"
            )));
        }
        if meta.is_dir() {
            tar.append_dir(name, full)
        } else {
            tar.append_path_with_name(full, name)
        }
    };
    if meta.is_file() {
        let name = std::path::PathBuf::from(path.file_name().unwrap_or_default());
        add(&mut tar, path, &name, &meta)?;
    } else if meta.is_dir() {
        let mut stack = vec![path.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let mut items: Vec<_> = fs::read_dir(&dir)?.flatten().collect();
            items.sort_by_key(|i| i.file_name());
            for item in items {
                let full = item.path();
                let Ok(meta) = fs::symlink_metadata(&full) else {
                    continue;
                };
                let name = full.strip_prefix(path).unwrap_or(&full).to_path_buf();
                if meta.is_dir() {
                    add(&mut tar, &full, &name, &meta)?;
                    stack.push(full);
                } else if meta.is_file() {
                    add(&mut tar, &full, &name, &meta)?;
                }
            }
        }
    } else {
        return Err(io::Error::other(
            "it is neither a file nor a directory (links are not copied)",
        ));
    }
    tar.into_inner()
}

/// A frame that does not decode.
fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed agent frame: {what}"),
    )
}

/// Reads one frame: its tag and body.
pub fn read_frame(reader: &mut impl Read) -> io::Result<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(malformed("length out of range"));
    }
    let mut tag = [0u8; 1];
    reader.read_exact(&mut tag)?;
    let mut body = vec![0u8; len - 1];
    reader.read_exact(&mut body)?;
    Ok((tag[0], body))
}

struct Encoder(Vec<u8>);

impl Encoder {
    fn new(tag: u8) -> Self {
        Encoder(vec![0, 0, 0, 0, tag])
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }
    fn strings(&mut self, v: &[String]) -> &mut Self {
        self.u32(v.len() as u32);
        for s in v {
            self.bytes(s.as_bytes());
        }
        self
    }
    fn pairs(&mut self, v: &[(String, String)]) -> &mut Self {
        self.u32(v.len() as u32);
        for (k, v) in v {
            self.bytes(k.as_bytes()).bytes(v.as_bytes());
        }
        self
    }
    fn tools(&mut self, v: &Option<ToolChannel>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(t) => self.u8(1).u64(t.max_request).u32(t.max_connections),
        }
    }
    fn write_to(&mut self, writer: &mut impl Write) -> io::Result<()> {
        let len = self.0.len() - 4;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the agent protocol allows",
            ));
        }
        self.0[..4].copy_from_slice(&(len as u32).to_le_bytes());
        writer.write_all(&self.0)?;
        writer.flush()
    }
}

struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(malformed("body too short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self) -> io::Result<bool> {
        Ok(self.u8()? != 0)
    }
    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn string(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| malformed("string is not UTF-8"))
    }
    /// A count of items each at least `min_size` bytes long, checked against what is left.
    fn count(&mut self, min_size: usize) -> io::Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.0.len() {
            return Err(malformed("count larger than the body"));
        }
        Ok(n)
    }
    fn strings(&mut self) -> io::Result<Vec<String>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.string()).collect()
    }
    fn pairs(&mut self) -> io::Result<Vec<(String, String)>> {
        let n = self.count(8)?;
        (0..n)
            .map(|_| Ok((self.string()?, self.string()?)))
            .collect()
    }
    fn tools(&mut self) -> io::Result<Option<ToolChannel>> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some(ToolChannel {
                max_request: self.u64()?,
                max_connections: self.u32()?,
            }),
            _ => return Err(malformed("tools is neither absent nor present")),
        })
    }
    fn end(&self) -> io::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(malformed("trailing bytes"))
        }
    }
}

/// The tag of [`Request::ToolAnswer`]: the agent's reader picks these frames out of
/// the stream without decoding any other.
pub const TOOL_ANSWER: u8 = 15;

impl Request {
    /// Encodes and writes the request as one frame.
    pub fn write_to(&self, writer: &mut impl Write) -> io::Result<()> {
        match self {
            Request::Run {
                argv,
                env,
                cwd,
                stdin,
                timeout_ms,
                max_output,
                stop_after,
                tools,
            } => {
                let mut e = Encoder::new(1);
                e.strings(argv).pairs(env);
                e.bytes(cwd.as_bytes())
                    .bytes(stdin)
                    .u64(*timeout_ms)
                    .u64(*max_output)
                    .u64(*stop_after)
                    .tools(tools)
                    .write_to(writer)
            }
            Request::Write { path, data } => Encoder::new(2)
                .bytes(path.as_bytes())
                .bytes(data)
                .write_to(writer),
            Request::Read { path, max } => Encoder::new(3)
                .bytes(path.as_bytes())
                .u64(*max)
                .write_to(writer),
            Request::List { path } => Encoder::new(4).bytes(path.as_bytes()).write_to(writer),
            Request::Scan { path } => Encoder::new(5).bytes(path.as_bytes()).write_to(writer),
            Request::Pack { path, max } => Encoder::new(6)
                .bytes(path.as_bytes())
                .u64(*max)
                .write_to(writer),
            Request::Unpack { path, data } => Encoder::new(7)
                .bytes(path.as_bytes())
                .bytes(data)
                .write_to(writer),
            Request::StartKernel {
                argv,
                env,
                cwd,
                timeout_ms,
            } => {
                let mut e = Encoder::new(8);
                e.strings(argv).pairs(env);
                e.bytes(cwd.as_bytes()).u64(*timeout_ms).write_to(writer)
            }
            Request::Cell {
                code,
                stdin,
                env,
                cwd,
                timeout_ms,
                max_output,
                stop_after,
                grace_ms,
                tools,
            } => {
                let mut e = Encoder::new(9);
                e.bytes(code).bytes(stdin).pairs(env);
                e.bytes(cwd.as_bytes())
                    .u64(*timeout_ms)
                    .u64(*max_output)
                    .u64(*stop_after)
                    .u64(*grace_ms)
                    .tools(tools)
                    .write_to(writer)
            }
            Request::StopKernel => Encoder::new(10).write_to(writer),
            Request::Clear { path } => Encoder::new(11).bytes(path.as_bytes()).write_to(writer),
            Request::Freeze => Encoder::new(12).write_to(writer),
            Request::Thaw => Encoder::new(13).write_to(writer),
            Request::Interrupt => Encoder::new(14).write_to(writer),
            Request::Stat { path } => Encoder::new(16).bytes(path.as_bytes()).write_to(writer),
            Request::MakeDir { path } => Encoder::new(17).bytes(path.as_bytes()).write_to(writer),
            Request::Remove { path } => Encoder::new(18).bytes(path.as_bytes()).write_to(writer),
            Request::Rename { from, to } => Encoder::new(19)
                .bytes(from.as_bytes())
                .bytes(to.as_bytes())
                .write_to(writer),
            Request::ToolAnswer { call, frame } => Encoder::new(TOOL_ANSWER)
                .u64(*call)
                .bytes(frame)
                .write_to(writer),
        }
    }

    /// Decodes a request frame.
    pub fn decode(tag: u8, body: &[u8]) -> io::Result<Request> {
        let mut d = Decoder(body);
        let request = match tag {
            1 => Request::Run {
                argv: d.strings()?,
                env: d.pairs()?,
                cwd: d.string()?,
                stdin: d.bytes()?,
                timeout_ms: d.u64()?,
                max_output: d.u64()?,
                stop_after: d.u64()?,
                tools: d.tools()?,
            },
            2 => Request::Write {
                path: d.string()?,
                data: d.bytes()?,
            },
            3 => Request::Read {
                path: d.string()?,
                max: d.u64()?,
            },
            4 => Request::List { path: d.string()? },
            5 => Request::Scan { path: d.string()? },
            6 => Request::Pack {
                path: d.string()?,
                max: d.u64()?,
            },
            7 => Request::Unpack {
                path: d.string()?,
                data: d.bytes()?,
            },
            8 => Request::StartKernel {
                argv: d.strings()?,
                env: d.pairs()?,
                cwd: d.string()?,
                timeout_ms: d.u64()?,
            },
            9 => Request::Cell {
                code: d.bytes()?,
                stdin: d.bytes()?,
                env: d.pairs()?,
                cwd: d.string()?,
                timeout_ms: d.u64()?,
                max_output: d.u64()?,
                stop_after: d.u64()?,
                grace_ms: d.u64()?,
                tools: d.tools()?,
            },
            10 => Request::StopKernel,
            11 => Request::Clear { path: d.string()? },
            12 => Request::Freeze,
            13 => Request::Thaw,
            14 => Request::Interrupt,
            16 => Request::Stat { path: d.string()? },
            17 => Request::MakeDir { path: d.string()? },
            18 => Request::Remove { path: d.string()? },
            19 => Request::Rename {
                from: d.string()?,
                to: d.string()?,
            },
            TOOL_ANSWER => Request::ToolAnswer {
                call: d.u64()?,
                frame: d.bytes()?,
            },
            _ => return Err(malformed("unknown request")),
        };
        d.end()?;
        Ok(request)
    }
}

impl Reply {
    /// Encodes and writes the reply as one frame.
    pub fn write_to(&self, writer: &mut impl Write) -> io::Result<()> {
        match self {
            Reply::Hello { version } => Encoder::new(0x80).u32(*version).write_to(writer),
            Reply::Stdout(bytes) => Encoder::new(0x81).bytes(bytes).write_to(writer),
            Reply::Stderr(bytes) => Encoder::new(0x82).bytes(bytes).write_to(writer),
            Reply::Exit(report) => Encoder::new(0x83)
                .u32(report.code as u32)
                .u32(report.signal as u32)
                .u8(report.timed_out as u8)
                .u8(report.stdout_truncated as u8)
                .u8(report.stderr_truncated as u8)
                .u8(report.oom_killed as u8)
                .u8(report.output_limited as u8)
                .u8(report.interrupted as u8)
                .u8(report.kernel_ended as u8)
                .u8(report.on_request as u8)
                .write_to(writer),
            Reply::Done => Encoder::new(0x84).write_to(writer),
            Reply::Data(bytes) => Encoder::new(0x85).bytes(bytes).write_to(writer),
            Reply::Entries(entries) => {
                let mut e = Encoder::new(0x86);
                e.u32(entries.len() as u32);
                for entry in entries {
                    e.bytes(&entry.path)
                        .u8(entry.is_dir as u8)
                        .u64(entry.size)
                        .u64(entry.mtime_ns)
                        .u32(entry.mode);
                }
                e.write_to(writer)
            }
            Reply::Error(message) => Encoder::new(0x87)
                .bytes(message.as_bytes())
                .write_to(writer),
            Reply::Missing(message) => Encoder::new(0x88)
                .bytes(message.as_bytes())
                .write_to(writer),
            Reply::ToolCall { call, frame } => {
                Encoder::new(0x89).u64(*call).bytes(frame).write_to(writer)
            }
            Reply::ToolCallTooLarge { call, size } => {
                Encoder::new(0x8a).u64(*call).u64(*size).write_to(writer)
            }
            Reply::Frozen(None) => Encoder::new(0x8b).u8(0).write_to(writer),
            Reply::Frozen(Some(proxy)) => Encoder::new(0x8b)
                .u8(1)
                .u32(u32::from(proxy.port))
                .bytes(&proxy.token.0)
                .write_to(writer),
        }
    }

    /// Decodes a reply frame.
    pub fn decode(tag: u8, body: &[u8]) -> io::Result<Reply> {
        let mut d = Decoder(body);
        let reply = match tag {
            0x80 => Reply::Hello { version: d.u32()? },
            0x81 => Reply::Stdout(d.bytes()?),
            0x82 => Reply::Stderr(d.bytes()?),
            0x83 => Reply::Exit(ExitReport {
                code: d.u32()? as i32,
                signal: d.u32()? as i32,
                timed_out: d.bool()?,
                stdout_truncated: d.bool()?,
                stderr_truncated: d.bool()?,
                oom_killed: d.bool()?,
                output_limited: d.bool()?,
                interrupted: d.bool()?,
                kernel_ended: d.bool()?,
                on_request: d.bool()?,
            }),
            0x84 => Reply::Done,
            0x85 => Reply::Data(d.bytes()?),
            0x86 => {
                let n = d.count(25)?;
                let entries = (0..n)
                    .map(|_| {
                        Ok(Entry {
                            path: d.bytes()?,
                            is_dir: d.bool()?,
                            size: d.u64()?,
                            mtime_ns: d.u64()?,
                            mode: d.u32()?,
                        })
                    })
                    .collect::<io::Result<_>>()?;
                Reply::Entries(entries)
            }
            0x87 => Reply::Error(d.string()?),
            0x88 => Reply::Missing(d.string()?),
            0x89 => Reply::ToolCall {
                call: d.u64()?,
                frame: d.bytes()?,
            },
            0x8a => Reply::ToolCallTooLarge {
                call: d.u64()?,
                size: d.u64()?,
            },
            0x8b => Reply::Frozen(if d.bool()? {
                let port = u16::try_from(d.u32()?)
                    .ok()
                    .filter(|&port| port != 0)
                    .ok_or_else(|| malformed("an install proxy's port is 1 to 65535"))?;
                let token = d
                    .bytes()?
                    .try_into()
                    .map_err(|_| malformed("an install token is 16 bytes"))?;
                Some(InstallProxy {
                    port,
                    token: InstallToken(token),
                })
            } else {
                None
            }),
            _ => return Err(malformed("unknown reply")),
        };
        d.end()?;
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_request(request: Request) {
        let mut wire = Vec::new();
        request.write_to(&mut wire).unwrap();
        let (tag, body) = read_frame(&mut wire.as_slice()).unwrap();
        assert_eq!(Request::decode(tag, &body).unwrap(), request);
    }

    fn round_trip_reply(reply: Reply) {
        let mut wire = Vec::new();
        reply.write_to(&mut wire).unwrap();
        let (tag, body) = read_frame(&mut wire.as_slice()).unwrap();
        assert_eq!(Reply::decode(tag, &body).unwrap(), reply);
    }

    #[test]
    fn every_message_survives_the_wire() {
        round_trip_request(Request::Run {
            argv: vec!["python3".into(), "-u".into(), "main.py".into()],
            env: vec![("A".into(), "b=c".into())],
            cwd: "".into(),
            stdin: vec![0, 255, 10],
            timeout_ms: 1500,
            max_output: 1 << 20,
            stop_after: 2 << 20,
            tools: None,
        });
        round_trip_request(Request::Run {
            argv: vec!["sh".into()],
            env: vec![],
            cwd: "".into(),
            stdin: vec![],
            timeout_ms: 1,
            max_output: 2,
            stop_after: 3,
            tools: Some(ToolChannel {
                max_request: 1 << 20,
                max_connections: 64,
            }),
        });
        round_trip_request(Request::ToolAnswer {
            call: u64::MAX,
            frame: br#"{"v":1,"id":1,"ok":true,"value":2}"#.to_vec(),
        });
        round_trip_request(Request::Write {
            path: "a/b.txt".into(),
            data: b"\xff\xfe".to_vec(),
        });
        round_trip_request(Request::Read {
            path: "x".into(),
            max: 7,
        });
        round_trip_request(Request::List { path: "".into() });
        round_trip_request(Request::Scan {
            path: "output".into(),
        });
        round_trip_request(Request::Pack {
            path: "data".into(),
            max: 9,
        });
        round_trip_request(Request::Unpack {
            path: "in".into(),
            data: vec![0; 512],
        });
        round_trip_request(Request::StartKernel {
            argv: vec!["python3".into(), "-c".into(), "driver".into()],
            env: vec![("K".into(), "v".into())],
            cwd: "work".into(),
            timeout_ms: 9000,
        });
        round_trip_request(Request::Cell {
            code: b"x = 1\nx".to_vec(),
            stdin: vec![0xff],
            env: vec![("A".into(), "1".into())],
            cwd: "".into(),
            timeout_ms: 2000,
            max_output: 1 << 20,
            stop_after: 2 << 20,
            grace_ms: 1000,
            tools: Some(ToolChannel {
                max_request: 7,
                max_connections: 1,
            }),
        });
        round_trip_request(Request::StopKernel);
        round_trip_request(Request::Freeze);
        round_trip_request(Request::Thaw);
        round_trip_request(Request::Interrupt);
        round_trip_request(Request::Clear {
            path: "output".into(),
        });
        round_trip_request(Request::Stat { path: "".into() });
        round_trip_request(Request::MakeDir { path: "a/b".into() });
        round_trip_request(Request::Remove { path: "a".into() });
        round_trip_request(Request::Rename {
            from: "a.txt".into(),
            to: "b/c.txt".into(),
        });
        round_trip_reply(Reply::Hello { version: 3 });
        round_trip_reply(Reply::Stdout(vec![0xc3, 0x28]));
        round_trip_reply(Reply::Stderr(b"oops".to_vec()));
        round_trip_reply(Reply::Exit(ExitReport {
            code: 137,
            signal: 9,
            timed_out: true,
            stdout_truncated: false,
            stderr_truncated: true,
            oom_killed: true,
            output_limited: true,
            interrupted: false,
            kernel_ended: true,
            on_request: true,
        }));
        round_trip_reply(Reply::Done);
        round_trip_reply(Reply::Data(vec![1, 2, 3]));
        round_trip_reply(Reply::Entries(vec![Entry {
            path: b"plots/a\xff.png".to_vec(),
            is_dir: false,
            size: 10,
            mtime_ns: 1,
            mode: 0o100644,
        }]));
        round_trip_reply(Reply::Error("no".into()));
        round_trip_reply(Reply::Missing("cannot read `x`: gone".into()));
        round_trip_reply(Reply::ToolCall {
            call: 3,
            frame: br#"{"v":1,"id":1,"op":"list"}"#.to_vec(),
        });
        round_trip_reply(Reply::ToolCallTooLarge {
            call: 4,
            size: u64::MAX,
        });
        round_trip_reply(Reply::Frozen(None));
        round_trip_reply(Reply::Frozen(Some(InstallProxy {
            port: 40123,
            token: InstallToken::random().unwrap(),
        })));
    }

    #[test]
    fn install_tokens_are_random_and_read_back_only_from_their_own_form() {
        let (a, b) = (
            InstallToken::random().unwrap(),
            InstallToken::random().unwrap(),
        );
        assert_ne!(a, b);
        assert!(a.matches(&a) && !a.matches(&b));
        assert_eq!(InstallToken::from_hex(&a.to_hex()), Some(a));
        assert!(!format!("{a:?}").contains(&a.to_hex()));
        let hex = a.to_hex();
        let (longer, signed, wide) = (format!("{hex}0"), format!("+{}", &hex[1..]), "é".repeat(16));
        for bad in [&hex[..31], &longer, &signed, &wide, ""] {
            assert_eq!(InstallToken::from_hex(bad), None, "{bad:?}");
        }
        // A port past u16 or none, and a token of the wrong length, are malformed.
        for port in [70_000u32, 0] {
            let mut body = vec![1];
            body.extend_from_slice(&port.to_le_bytes());
            body.extend_from_slice(&16u32.to_le_bytes());
            body.extend_from_slice(&[0; 16]);
            assert!(Reply::decode(0x8b, &body).is_err(), "port {port}");
        }
        let mut body = vec![1];
        body.extend_from_slice(&80u32.to_le_bytes());
        body.extend_from_slice(&3u32.to_le_bytes());
        body.extend_from_slice(&[0; 3]);
        assert!(Reply::decode(0x8b, &body).is_err());
    }

    #[test]
    fn hostile_frames_are_errors_not_panics() {
        // A count that claims more items than the body holds.
        let mut body = Vec::new();
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(Reply::decode(0x86, &body).is_err());
        // A length prefix past the end.
        assert!(Reply::decode(0x81, &[9, 0, 0, 0, 1]).is_err());
        // Trailing garbage, unknown tags, oversized frames.
        assert!(Reply::decode(0x84, &[1]).is_err());
        assert!(Reply::decode(0x42, &[]).is_err());
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(read_frame(&mut huge.as_slice()).is_err());
        let zero = 0u32.to_le_bytes();
        assert!(read_frame(&mut zero.as_slice()).is_err());
    }
}

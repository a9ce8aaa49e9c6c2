//! The kernel: one long-lived driver process per sandbox that runs cells and keeps
//! their state (variables, imports, open figures) from one request to the next. The
//! framing it speaks is documented on `sandlot_agent::Request`.
//!
//! A cell is watched from this thread with poll(2) on the kernel's standard output and
//! error, its report pipe and the host's stream, so output is forwarded as it comes,
//! the time limit (or the host's interrupt) interrupts the cell rather than the
//! kernel, and a host that hangs up still ends everything.

use crate::command::{oom_kills, Output};
use crate::host::{Heard, HostInput};
use crate::process;
use crate::{send, Writer};
use sandlot_agent::{ExitReport, Reply};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Most bytes of what a driver wrote before it failed to start kept for the message.
const START_OUTPUT: usize = 4096;

/// A running kernel.
pub struct Kernel {
    child: Child,
    /// The kernel process, also the id of the session and process group it started
    /// in (code in a cell may move it to another group, never out of its session).
    pid: i32,
    cells: File,
    done: File,
    stdout: File,
    stderr: File,
    /// Bytes read from `done` that do not yet end a line.
    pending: Vec<u8>,
}

/// One cell to run.
pub struct Cell<'a> {
    /// The code.
    pub code: &'a [u8],
    /// Standard input for the cell.
    pub stdin: &'a [u8],
    /// Environment for the cell.
    pub env: &'a [(String, String)],
    /// Absolute working directory.
    pub cwd: &'a Path,
    /// When the cell is interrupted.
    pub timeout: Duration,
    /// How much output is kept, and when the cell is interrupted for writing too much.
    pub output: Output,
    /// How long an interrupted kernel has to report before it is killed.
    pub grace: Duration,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just returned by the kernel and belong to nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn nonblocking(fd: RawFd) {
    // SAFETY: fcntl(2) on a descriptor this process owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// What one nonblocking read found.
enum Read1 {
    Data(usize),
    Empty,
    Closed,
}

fn read_some(file: &mut File, buf: &mut [u8]) -> Read1 {
    match file.read(buf) {
        Ok(0) => Read1::Closed,
        Ok(n) => Read1::Data(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Read1::Empty,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Read1::Empty,
        Err(_) => Read1::Closed,
    }
}

/// Waits until one of `fds` is readable or `timeout` passes; returns which were.
fn poll(fds: &[RawFd], timeout: Duration) -> Vec<bool> {
    let mut polls: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        })
        .collect();
    let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: poll(2) on an array of valid pollfds of the length passed; negative
    // descriptors are ignored by the kernel.
    let ready = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, millis) };
    polls
        .iter()
        .map(|p| ready > 0 && p.fd >= 0 && p.revents != 0)
        .collect()
}

impl Kernel {
    /// Starts the driver in its own session and waits for it to say it is ready.
    pub fn start(
        argv: &[String],
        env: &[(String, String)],
        cwd: &OwnedFd,
        within: Duration,
    ) -> Result<Kernel, String> {
        let program = argv.first().ok_or("the kernel's command is empty")?;
        let io = |e: io::Error| format!("cannot start the kernel `{program}`: {e}");
        let (cells_in, cells) = pipe().map_err(io)?;
        let (done, done_out) = pipe().map_err(io)?;
        let mut command = Command::new(program);
        command
            .args(&argv[1..])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("SANDLOT_CELL_FD", cells_in.as_raw_fd().to_string())
            .env("SANDLOT_DONE_FD", done_out.as_raw_fd().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (cwd, keep) = (
            cwd.as_raw_fd(),
            [cells_in.as_raw_fd(), done_out.as_raw_fd()],
        );
        // SAFETY: between fork and exec this only calls async-signal-safe functions
        // (setsid, fchdir, fcntl, open, write, close) on descriptors that outlive the
        // spawn and a static path.
        unsafe {
            command.pre_exec(move || {
                // Its own session and process group: an interrupt reaches the cell's
                // processes, and the cleanup after a command spares the kernel's.
                if libc::setsid() < 0 || libc::fchdir(cwd) != 0 {
                    return Err(io::Error::last_os_error());
                }
                for fd in keep {
                    libc::fcntl(fd, libc::F_SETFD, 0);
                }
                process::default_signals();
                process::prefer_for_oom_kill();
                process::below_the_agent();
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(io)?;
        // Only the kernel holds the other ends now: its exit closes them.
        drop((cells_in, done_out));
        let pid = child.id() as i32;
        process::spare_session(pid);
        let stdout = File::from(OwnedFd::from(child.stdout.take().expect("piped")));
        let stderr = File::from(OwnedFd::from(child.stderr.take().expect("piped")));
        let mut kernel = Kernel {
            child,
            pid,
            cells: File::from(cells),
            done: File::from(done),
            stdout,
            stderr,
            pending: Vec::new(),
        };
        for fd in [&kernel.stdout, &kernel.stderr, &kernel.done] {
            nonblocking(fd.as_raw_fd());
        }
        let mut said = Vec::new();
        let mut keep = |_: bool, bytes: &[u8]| {
            let room = START_OUTPUT.saturating_sub(said.len());
            said.extend_from_slice(&bytes[..bytes.len().min(room)]);
        };
        let deadline = Instant::now() + within;
        let failed = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match kernel.poll_line(left, &mut keep) {
                Line::Got(line) if line == b"ready" => return Ok(kernel),
                Line::Got(line) => {
                    break format!(
                        "it said `{}` instead of `ready`",
                        String::from_utf8_lossy(&line)
                    )
                }
                Line::Closed => break "it exited before it was ready".to_string(),
                Line::None if left.is_zero() => {
                    break format!("it was not ready within {} ms", within.as_millis())
                }
                Line::None => {}
            }
        };
        kernel.stop_and_drain(&mut keep);
        let said = String::from_utf8_lossy(&said);
        Err(format!(
            "the kernel `{program}` did not start: {failed}{}{}",
            if said.trim().is_empty() {
                ""
            } else {
                "; it wrote:\n"
            },
            said.trim_end()
        ))
    }

    /// Waits up to `timeout` for a complete line on the report pipe, passing output
    /// read meanwhile to `out` (`true` for standard error).
    fn poll_line(&mut self, timeout: Duration, out: &mut dyn FnMut(bool, &[u8])) -> Line {
        if let Some(line) = self.take_line() {
            return Line::Got(line);
        }
        let fds = [
            self.stdout.as_raw_fd(),
            self.stderr.as_raw_fd(),
            self.done.as_raw_fd(),
        ];
        let ready = poll(&fds, timeout);
        let mut buf = [0u8; 64 * 1024];
        for (i, file) in [&mut self.stdout, &mut self.stderr].into_iter().enumerate() {
            if ready[i] {
                if let Read1::Data(n) = read_some(file, &mut buf) {
                    out(i == 1, &buf[..n]);
                }
            }
        }
        if ready[2] {
            match read_some(&mut self.done, &mut buf) {
                Read1::Data(n) => self.pending.extend_from_slice(&buf[..n]),
                Read1::Empty => {}
                Read1::Closed => return Line::Closed,
            }
        }
        self.take_line().map_or(Line::None, Line::Got)
    }

    fn take_line(&mut self) -> Option<Vec<u8>> {
        let end = self.pending.iter().position(|&b| b == b'\n')?;
        let mut line: Vec<u8> = self.pending.drain(..=end).collect();
        line.pop();
        Some(line)
    }

    /// Reads what is already in the output pipes (a driver flushes before it reports;
    /// a background process may still hold them open, so this does not wait for the
    /// end).
    fn drain(&mut self, out: &mut dyn FnMut(bool, &[u8])) {
        let mut buf = [0u8; 64 * 1024];
        for (i, file) in [&mut self.stdout, &mut self.stderr].into_iter().enumerate() {
            while let Read1::Data(n) = read_some(file, &mut buf) {
                out(i == 1, &buf[..n]);
            }
        }
    }

    /// Runs one cell; returns how it ended and whether the kernel lives on. The host's
    /// interrupt interrupts it as its time limit does; if the host hangs up meanwhile,
    /// stops everything and exits.
    pub fn run(
        &mut self,
        writer: &Writer,
        input: &mut HostInput,
        cell: &Cell,
    ) -> (ExitReport, bool) {
        let mut frame = format!(
            "sandlot-cell {} {} {} {}\n",
            cell.code.len(),
            cell.stdin.len(),
            cell.env
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>(),
            cell.cwd.as_os_str().len()
        )
        .into_bytes();
        frame.extend_from_slice(cell.code);
        frame.extend_from_slice(cell.stdin);
        for (k, v) in cell.env {
            frame.extend_from_slice(format!("{k}={v}\0").as_bytes());
        }
        frame.extend_from_slice(cell.cwd.as_os_str().as_bytes());
        // A cell that fits the pipe, empty since the driver read the last one whole,
        // is written here: it cannot block, and needs no thread, for which a sandbox
        // at its process limit (threads count, and processes an earlier cell left)
        // has no room. A larger one fills the pipe before the driver reads it, and the
        // driver may write output meanwhile that must be forwarded: from a thread.
        let sent = if frame.len() <= pipe_room(&self.cells) {
            (&self.cells).write_all(&frame)
        } else {
            self.cells.try_clone().and_then(|mut cells| {
                crate::command::thread(move || {
                    let _ = cells.write_all(&frame);
                })
                .map(drop)
            })
        };
        if let Err(e) = sent {
            // Nothing reached the driver: it waits for the next cell as it was.
            let message = format!(
                "sandlot-agent: cannot pass the code to the kernel ({e}): the sandbox is \
                 at its process limit; end the processes earlier runs left, or send \
                 less code at once\n"
            );
            let _ = send(writer, &Reply::Stderr(message.into_bytes()));
            let report = ExitReport {
                code: 126,
                ..ExitReport::default()
            };
            return (report, true);
        }
        let ooms_before = oom_kills();
        let mut report = ExitReport::default();
        let mut streams = Streams::new(writer, cell.output);
        let mut deadline = Instant::now() + cell.timeout;
        let mut interrupted_at = None;
        let mut on_request = false;
        let status = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let over_time = left.is_zero();
            if interrupted_at.is_none() && (over_time || streams.flooded() || on_request) {
                // The cell, not the kernel: a driver turns SIGINT into the language's
                // interrupt and reports.
                interrupted_at = Some(Instant::now());
                report.timed_out = over_time && !on_request;
                report.on_request = on_request;
                self.signal(libc::SIGINT);
                deadline = Instant::now() + cell.grace;
                continue;
            }
            if over_time {
                break None;
            }
            // Once the cell is interrupted, a second interrupt changes nothing.
            on_request |= input.heard() == Heard::Interrupt;
            let waited = left.min(process::HANGUP_POLL);
            match self.poll_line(waited, &mut |err, bytes| streams.forward(err, bytes)) {
                Line::Got(line) => break Some(line),
                Line::Closed => break None,
                Line::None => {}
            }
        };
        let alive = match status
            .as_deref()
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            Some(code) => {
                self.drain(&mut |err, bytes| streams.forward(err, bytes));
                report.code = code;
                report.interrupted = interrupted_at.is_some();
                if report.interrupted {
                    // What the interrupted cell started goes with it, and so does what
                    // those processes wrote before they died: it must not open the
                    // next cell's output.
                    process::clean_up_all_but(self.pid);
                    self.drain(&mut |err, bytes| streams.forward(err, bytes));
                }
                true
            }
            None => {
                // Gone, stuck past its grace, or it broke the framing: it cannot be
                // trusted with another cell.
                self.signal(libc::SIGKILL);
                let status = self.child.wait();
                // Nothing it started may outlive it (waited for first: this reaps
                // every exited child).
                process::clean_up_all_but(0);
                self.drain(&mut |err, bytes| streams.forward(err, bytes));
                (report.code, report.signal) = match status {
                    Ok(s) => match (s.code(), s.signal()) {
                        (Some(code), _) => (code, 0),
                        (None, Some(signal)) => (128 + signal, signal),
                        (None, None) => (1, 0),
                    },
                    Err(_) => (137, libc::SIGKILL),
                };
                report.kernel_ended = true;
                false
            }
        };
        report.stdout_truncated = streams.truncated[0];
        report.stderr_truncated = streams.truncated[1];
        report.output_limited = streams.flooded();
        report.oom_killed = oom_kills() > ooms_before;
        if !alive {
            process::spare_session(0);
        }
        (report, alive)
    }

    /// Kills the kernel and everything in its session.
    pub fn stop(self) {
        self.stop_and_drain(&mut |_, _| {});
    }

    /// Kills the kernel, then passes on what it had written and not yet been read.
    fn stop_and_drain(mut self, out: &mut dyn FnMut(bool, &[u8])) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
        process::clean_up_all_but(0);
        self.drain(out);
        process::spare_session(0);
    }
}

impl Kernel {
    /// Signals the process group the kernel started with (what a cell runs in the
    /// foreground), and the kernel by its pid if a cell moved it out of that group.
    fn signal(&self, signal: libc::c_int) {
        // SAFETY: getpgid(2) and kill(2) on a pid and a process group; no memory
        // involved.
        unsafe {
            // Exactly once each: a second SIGINT that lands after the driver handled
            // the first would interrupt whatever it does next, even the next cell.
            if libc::getpgid(self.pid) != self.pid {
                libc::kill(self.pid, signal);
            }
            libc::kill(-self.pid, signal);
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // Not once it was waited for: its pid may belong to someone else by now.
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(libc::SIGKILL);
        }
    }
}

/// What [`Kernel::poll_line`] found.
enum Line {
    Got(Vec<u8>),
    Closed,
    None,
}

/// A cell's two output streams on their way to the host, capped.
struct Streams<'a> {
    writer: &'a Writer,
    output: Output,
    sent: [u64; 2],
    total: [u64; 2],
    truncated: [bool; 2],
    broken: bool,
}

impl<'a> Streams<'a> {
    fn new(writer: &'a Writer, output: Output) -> Self {
        Streams {
            writer,
            output,
            sent: [0; 2],
            total: [0; 2],
            truncated: [false; 2],
            broken: false,
        }
    }

    fn forward(&mut self, err: bool, bytes: &[u8]) {
        let i = usize::from(err);
        self.total[i] += bytes.len() as u64;
        let room = self.output.keep.saturating_sub(self.sent[i]) as usize;
        if bytes.len() > room {
            self.truncated[i] = true;
        }
        let keep = &bytes[..bytes.len().min(room)];
        if !keep.is_empty() && !self.broken {
            self.sent[i] += keep.len() as u64;
            let reply = if err {
                Reply::Stderr(keep.to_vec())
            } else {
                Reply::Stdout(keep.to_vec())
            };
            self.broken = send(self.writer, &reply).is_err();
        }
    }

    fn flooded(&self) -> bool {
        self.output.stop_after > 0 && self.total.iter().any(|&t| t > self.output.stop_after)
    }
}

/// How many bytes the pipe to the driver holds (`F_GETPIPE_SZ`): 64 KiB unless the
/// system has shrunk it, one page when it cannot say.
fn pipe_room(pipe: &File) -> usize {
    // SAFETY: fcntl(2) F_GETPIPE_SZ on a descriptor this File owns.
    let size = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_GETPIPE_SZ) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sandlot_agent::read_frame;
    use std::sync::{Arc, Mutex};

    /// A driver as small as the framing allows: enough to show what the agent does.
    const DRIVER: &str = r#"
import os, sys, traceback
cells = os.fdopen(int(os.environ["SANDLOT_CELL_FD"]), "rb", buffering=0)
done = os.fdopen(int(os.environ["SANDLOT_DONE_FD"]), "wb", buffering=0)
def exact(n):
    data = b""
    while len(data) < n:
        chunk = cells.read(n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
names = {}
done.write(b"ready\n")
while True:
    header = b""
    while not header.endswith(b"\n"):
        byte = cells.read(1)
        if not byte:
            sys.exit(0)
        header += byte
    _, code, stdin, env, cwd = header.split()
    code, stdin, env, cwd = (exact(int(n)) for n in (code, stdin, env, cwd))
    status = 0
    try:
        os.chdir(cwd)
        names["stdin"], names["env"] = stdin, env
        exec(compile(code, "<cell>", "exec"), names)
    except KeyboardInterrupt:
        status = 130
        print("KeyboardInterrupt", file=sys.stderr)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    done.write(b"%d\n" % status)
"#;

    /// What the agent sends, kept for a test to read.
    #[derive(Clone, Default)]
    pub(crate) struct Capture(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct Harness {
        kernel: Option<Kernel>,
        capture: Capture,
        writer: Writer,
        /// The host's stream as the agent sees it, and the host's end of it.
        input: HostInput,
        host: std::os::unix::net::UnixStream,
        dir: std::path::PathBuf,
    }

    impl Harness {
        fn start(argv: &[&str]) -> Result<Harness, String> {
            let dir = std::env::temp_dir().join(format!(
                "sandlot-kernel-test-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let cwd = crate::beneath::Root::open(&dir).unwrap().dir("").unwrap();
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            let kernel = match Kernel::start(&argv, &[], &cwd, Duration::from_secs(10)) {
                Ok(kernel) => kernel,
                Err(error) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(error);
                }
            };
            let capture = Capture::default();
            let (host, agent) = std::os::unix::net::UnixStream::pair().unwrap();
            Ok(Harness {
                kernel: Some(kernel),
                writer: Arc::new(Mutex::new(Box::new(capture.clone()))),
                capture,
                input: HostInput::new(OwnedFd::from(agent)),
                host,
                dir,
            })
        }

        fn python() -> Harness {
            Harness::start(&["python3", "-c", DRIVER]).unwrap()
        }

        /// Runs a cell; returns its report, stdout, stderr and whether the kernel lives.
        fn cell(
            &mut self,
            code: &str,
            timeout: Duration,
            output: Output,
        ) -> (ExitReport, String, String, bool) {
            let cell = Cell {
                code: code.as_bytes(),
                stdin: b"",
                env: &[],
                cwd: &self.dir,
                timeout,
                output,
                grace: Duration::from_millis(500),
            };
            let kernel = self.kernel.as_mut().expect("a kernel runs");
            let (report, alive) = kernel.run(&self.writer, &mut self.input, &cell);
            if !alive {
                self.kernel = None;
            }
            let wire = std::mem::take(&mut *self.capture.0.lock().unwrap());
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let mut wire = wire.as_slice();
            while !wire.is_empty() {
                let (tag, body) = read_frame(&mut wire).unwrap();
                match Reply::decode(tag, &body).unwrap() {
                    Reply::Stdout(b) => out.extend(b),
                    Reply::Stderr(b) => err.extend(b),
                    other => panic!("unexpected {other:?}"),
                }
            }
            let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
            (report, text(out), text(err), alive)
        }

        fn quick(&mut self, code: &str) -> (ExitReport, String, String, bool) {
            let output = Output {
                keep: 1 << 20,
                stop_after: 0,
            };
            self.cell(code, Duration::from_secs(20), output)
        }
    }

    impl Drop for Harness {
        fn drop(&mut self) {
            if let Some(kernel) = self.kernel.take() {
                kernel.stop();
            }
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn state_lives_from_cell_to_cell_and_streams_stay_apart() {
        let mut h = Harness::python();
        let (report, out, err, alive) = h.quick("x = 41\nimport sys");
        assert_eq!(
            (report.code, out.as_str(), err.as_str(), alive),
            (0, "", "", true)
        );
        let (report, out, err, _) = h.quick("print(x + 1)\nprint('oops', file=sys.stderr)");
        assert_eq!(
            (report.code, out.as_str(), err.as_str()),
            (0, "42\n", "oops\n")
        );
        // An error ends the cell, not the kernel.
        let (report, _, err, alive) = h.quick("1/0");
        assert_eq!(report.code, 1);
        assert!(err.contains("ZeroDivisionError"), "{err}");
        assert!(alive && !report.kernel_ended);
        assert_eq!(h.quick("raise SystemExit(7)").0.code, 7);
        assert_eq!(h.quick("print(x)").1, "41\n");
    }

    #[test]
    fn a_cell_past_its_limit_is_interrupted_and_the_state_kept() {
        let mut h = Harness::python();
        h.quick("x = 'kept'");
        let started = Instant::now();
        let output = Output {
            keep: 1 << 20,
            stop_after: 0,
        };
        let (report, _, err, alive) = h.cell(
            "import time\ntime.sleep(30)",
            Duration::from_millis(300),
            output,
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            report.timed_out && report.interrupted && alive,
            "{report:?}"
        );
        assert!(!report.kernel_ended);
        assert!(err.contains("KeyboardInterrupt"), "{err}");
        assert_eq!(h.quick("print(x)").1, "kept\n");
    }

    #[test]
    fn the_hosts_interrupt_interrupts_the_cell_and_the_state_is_kept() {
        let mut h = Harness::python();
        h.quick("x = 'kept'");
        let host = h.host.try_clone().unwrap();
        let interrupter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            sandlot_agent::Request::Interrupt
                .write_to(&mut &host)
                .unwrap();
        });
        let (report, _, err, alive) = h.quick("import time\ntime.sleep(30)");
        interrupter.join().unwrap();
        assert!(
            report.on_request && report.interrupted && !report.timed_out && alive,
            "{report:?}"
        );
        assert!(err.contains("KeyboardInterrupt"), "{err}");
        assert_eq!(h.quick("print(x)").1, "kept\n");
    }

    #[test]
    fn a_kernel_that_ignores_the_interrupt_is_killed_after_its_grace() {
        let mut h = Harness::python();
        let started = Instant::now();
        let output = Output {
            keep: 1 << 20,
            stop_after: 0,
        };
        let (report, _, _, alive) = h.cell(
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)",
            Duration::from_millis(200),
            output,
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            report.timed_out && report.kernel_ended && !alive,
            "{report:?}"
        );
        assert!(!report.interrupted);
    }

    #[test]
    fn a_kernel_that_exits_reports_its_code() {
        let mut h = Harness::python();
        let (report, out, _, alive) = h.quick("print('bye', flush=True)\nimport os\nos._exit(3)");
        assert_eq!((report.code, out.as_str(), alive), (3, "bye\n", false));
        assert!(report.kernel_ended);
    }

    #[test]
    fn a_flood_is_capped_and_interrupted() {
        let mut h = Harness::python();
        let output = Output {
            keep: 1000,
            stop_after: 100_000,
        };
        let (report, out, _, alive) = h.cell(
            "while True:\n    print('x' * 999)",
            Duration::from_secs(20),
            output,
        );
        assert_eq!(out.len(), 1000);
        assert!(report.output_limited && report.stdout_truncated && !report.timed_out);
        assert!(alive && report.interrupted, "{report:?}");
    }

    #[test]
    fn a_driver_that_fails_to_start_says_what_it_wrote() {
        let failed = Harness::start(&[
            "python3",
            "-c",
            "import sys; print('no interpreter here', file=sys.stderr); sys.exit(2)",
        ])
        .err()
        .unwrap();
        assert!(failed.contains("exited before it was ready"), "{failed}");
        assert!(failed.contains("no interpreter here"), "{failed}");
        let missing = Harness::start(&["/nonexistent/driver"]).err().unwrap();
        assert!(missing.contains("/nonexistent/driver"), "{missing}");
    }
}

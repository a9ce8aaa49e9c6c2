//! Commands: one program run to completion in its own process group, with its output
//! streamed and capped and a wall-clock limit on the whole process tree.

use crate::host::{Heard, HostInput};
use crate::process::{self, kill_group, RUNNING};
use crate::{send, Writer};
use sandlot_agent::{ExitReport, Reply};
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What happens to a command's output: how much of each stream is forwarded, and when
/// the command is stopped for writing too much.
#[derive(Clone, Copy)]
pub struct Output {
    /// Most bytes of each stream forwarded.
    pub keep: u64,
    /// Stop the program once a stream has written this many bytes (0: never).
    pub stop_after: u64,
}

/// Runs one command and waits for it and everything it started; stops it when the
/// host interrupts it, and if the host hangs up meanwhile, stops everything and exits.
#[allow(clippy::too_many_arguments)]
pub fn run(
    writer: &Writer,
    input: &mut HostInput,
    argv: &[String],
    env: &[(String, String)],
    cwd: &OwnedFd,
    stdin: Vec<u8>,
    timeout: Duration,
    output: Output,
) -> ExitReport {
    let Some(program) = argv.first() else {
        let _ = send(
            writer,
            &Reply::Stderr(b"sandlot-agent: empty command\n".to_vec()),
        );
        return ExitReport {
            code: 127,
            ..ExitReport::default()
        };
    };
    let mut command = Command::new(program);
    command
        .args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // The directory is entered by its descriptor: a path could have been swapped for
    // a link since it was resolved.
    let cwd = cwd.as_raw_fd();
    // SAFETY: between fork and exec this only calls fchdir/open/write/close, which are
    // async-signal-safe, on a descriptor that outlives the spawn and a static path.
    unsafe {
        command.pre_exec(move || {
            if libc::fchdir(cwd) != 0 {
                return Err(io::Error::last_os_error());
            }
            process::default_signals();
            process::prefer_for_oom_kill();
            process::below_the_agent();
            Ok(())
        });
    }
    let ooms_before = oom_kills();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let message = format!("sandlot-agent: cannot run `{program}`: {e}\n");
            let _ = send(writer, &Reply::Stderr(message.into_bytes()));
            return ExitReport {
                code: if e.kind() == io::ErrorKind::NotFound {
                    127
                } else {
                    126
                },
                ..ExitReport::default()
            };
        }
    };
    let pgid = child.id() as i32;
    RUNNING.store(pgid, Ordering::SeqCst);
    let flooded = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = mpsc::channel();
    // Four threads: the input, the two outputs and the wait. A sandbox at its process
    // limit (threads count) may have room for the command and not for them: then the
    // command is stopped, and the run says why.
    let started = (|| -> io::Result<_> {
        if let Some(mut pipe) = child.stdin.take() {
            thread(move || {
                // A program that never reads its input ends with EPIPE here; fine.
                let _ = pipe.write_all(&stdin);
            })?;
        }
        let forwarded = |pipe: Option<OwnedFd>, wrap: fn(Vec<u8>) -> Reply| {
            pipe.map(|pipe| {
                let pipe = fs::File::from(pipe);
                forward(pipe, writer.clone(), output, pgid, flooded.clone(), wrap)
            })
            .transpose()
        };
        let stdout = forwarded(child.stdout.take().map(OwnedFd::from), Reply::Stdout)?;
        let stderr = forwarded(child.stderr.take().map(OwnedFd::from), Reply::Stderr)?;
        thread(move || {
            let _ = done_tx.send(child.wait());
        })?;
        Ok((stdout, stderr))
    })();
    let (stdout, stderr) = match started {
        Ok(outputs) => outputs,
        Err(e) => {
            kill_group(pgid);
            process::kill_leftovers();
            RUNNING.store(0, Ordering::SeqCst);
            process::clean_up();
            let message = format!(
                "sandlot-agent: cannot run `{program}`: no room for its threads ({e}): \
                 the sandbox is at its process limit; end the processes earlier runs \
                 left\n"
            );
            let _ = send(writer, &Reply::Stderr(message.into_bytes()));
            return ExitReport {
                code: 126,
                ..ExitReport::default()
            };
        }
    };
    let (mut timed_out, mut on_request) = (false, false);
    let deadline = Instant::now() + timeout;
    let status = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || on_request {
            timed_out = !on_request;
            // The command may have moved itself (or a child) to another process
            // group, so the group alone is not enough.
            kill_group(pgid);
            process::kill_leftovers();
            break done_rx
                .recv()
                .unwrap_or_else(|_| Err(io::Error::other("lost the command")));
        }
        match done_rx.recv_timeout(left.min(process::HANGUP_POLL)) {
            Ok(status) => break status,
            Err(mpsc::RecvTimeoutError::Timeout) => on_request = input.heard() == Heard::Interrupt,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(io::Error::other("lost the command"))
            }
        }
    };
    // Whatever the command left running (background jobs, daemons, a new session)
    // would hold the output pipes open and outlive the run: end it now.
    kill_group(pgid);
    process::kill_leftovers();
    let stdout_truncated = stdout.is_some_and(|h| h.join().unwrap_or(false));
    let stderr_truncated = stderr.is_some_and(|h| h.join().unwrap_or(false));
    RUNNING.store(0, Ordering::SeqCst);
    process::clean_up();
    let (code, signal) = match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => (code, 0),
            (None, Some(signal)) => (128 + signal, signal),
            (None, None) => (1, 0),
        },
        Err(_) => (1, 0),
    };
    ExitReport {
        code,
        signal,
        timed_out,
        on_request,
        stdout_truncated,
        stderr_truncated,
        oom_killed: oom_kills() > ooms_before,
        output_limited: flooded.load(Ordering::SeqCst) > 0,
        ..ExitReport::default()
    }
}

/// Starts a thread, or says why not: threads count against the sandbox's process
/// limit, and at it the kernel refuses one (where `std::thread::spawn` would panic).
pub(crate) fn thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new().spawn(work)
}

/// How many processes the OOM killer has killed in this container's memory cgroup
/// (cgroup v2's `memory.events`, or v1's `memory.oom_control`), 0 if unknown.
pub fn oom_kills() -> u64 {
    [
        "/sys/fs/cgroup/memory.events",
        "/sys/fs/cgroup/memory/memory.oom_control",
    ]
    .iter()
    .filter_map(|path| fs::read_to_string(path).ok())
    .find_map(|text| {
        text.lines().find_map(|line| {
            line.strip_prefix("oom_kill ")
                .and_then(|n| n.trim().parse().ok())
        })
    })
    .unwrap_or(0)
}

/// Streams a pipe to the host up to `output.keep` bytes and drains the rest; past
/// `output.stop_after` bytes it stops the command (and records that in `flooded`).
/// Returns whether anything was dropped.
fn forward(
    mut pipe: impl Read + Send + 'static,
    writer: Writer,
    output: Output,
    pgid: i32,
    flooded: Arc<AtomicU64>,
    wrap: fn(Vec<u8>) -> Reply,
) -> io::Result<std::thread::JoinHandle<bool>> {
    thread(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut sent = 0u64;
        let mut total = 0u64;
        let mut truncated = false;
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            total += n as u64;
            let room = output.keep.saturating_sub(sent) as usize;
            if n > room {
                truncated = true;
            }
            let keep = n.min(room);
            if keep > 0 {
                sent += keep as u64;
                if send(&writer, &wrap(buf[..keep].to_vec())).is_err() {
                    break;
                }
            }
            if output.stop_after > 0
                && total > output.stop_after
                && flooded.fetch_add(1, Ordering::SeqCst) == 0
            {
                kill_group(pgid);
                process::kill_leftovers();
            }
        }
        truncated
    })
}

//! `sandlot-agent serve SOCKET ROOT` or `sandlot-agent serve-stdio ROOT`: process 1 of a
//! sandlot container.
//!
//! It speaks the protocol of the `sandlot_agent` library over a Unix socket the host
//! listens on, or over its own standard input and output (an engine's attach or exec
//! stream), and serves requests one at a time: runs commands in their own process
//! group, streams their output, and reads and writes files below ROOT without ever
//! following a symbolic link. As process 1 of the container's PID namespace it
//! inherits every orphan, so after each command it kills whatever the command left
//! behind, including processes that called `setsid` or daemonized. When the host hangs
//! up it kills everything and exits, which ends the container.
#![allow(unsafe_code)] // kill(2), waitpid(2) and a post-fork oom_score_adj write

use sandlot_agent::{read_frame, Entry, ExitReport, Reply, Request, PROTOCOL_VERSION};
use std::fs;
use std::io::{self, BufReader, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let served = match args.get(1).map(String::as_str) {
        Some("serve") if args.len() == 4 => {
            serve_socket(Path::new(&args[2]), PathBuf::from(&args[3]))
        }
        Some("serve-stdio") if args.len() == 3 => serve_stdio(PathBuf::from(&args[2])),
        Some("--version") => {
            println!(
                "sandlot-agent {} (protocol {PROTOCOL_VERSION})",
                env!("CARGO_PKG_VERSION")
            );
            return;
        }
        _ => {
            eprintln!("usage: sandlot-agent serve SOCKET ROOT | sandlot-agent serve-stdio ROOT");
            std::process::exit(2);
        }
    };
    if let Err(e) = served {
        eprintln!("sandlot-agent: {e}");
        std::process::exit(1);
    }
}

type Writer = Arc<Mutex<Box<dyn Write + Send>>>;

fn send(writer: &Writer, reply: &Reply) -> io::Result<()> {
    reply.write_to(&mut *writer.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Serves over a Unix socket the host listens on.
fn serve_socket(socket: &Path, root: PathBuf) -> io::Result<()> {
    forbid_inspection();
    // The host listens before it starts the container, but allow the bind mount a moment.
    let mut stream = None;
    for _ in 0..200 {
        match UnixStream::connect(socket) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let stream = stream.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot connect to {}", socket.display()),
        )
    })?;
    let reader = stream.try_clone()?;
    serve(reader, Box::new(stream), root)
}

/// Serves over standard input and output, as an attach or exec stream carries them.
fn serve_stdio(root: PathBuf) -> io::Result<()> {
    forbid_inspection();
    serve(io::stdin().lock(), Box::new(io::stdout()), root)
}

/// The user's code runs as the agent's user. Non-dumpable, the agent's memory and file
/// descriptors (/proc/1/fd, the host's stream among them) are out of its reach.
fn forbid_inspection() {
    // SAFETY: prctl(2) with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// The process group of the command running now, 0 if none.
static RUNNING: AtomicI32 = AtomicI32::new(0);

/// The host's end of the stream is gone: nobody will ever read what the sandbox does,
/// so nothing in it may go on running.
fn host_gone() -> ! {
    let pgid = RUNNING.load(Ordering::SeqCst);
    if pgid > 0 {
        kill_group(pgid);
    }
    kill_leftovers();
    std::process::exit(0)
}

fn serve(
    reader: impl Read + AsRawFd,
    writer: Box<dyn Write + Send>,
    root: PathBuf,
) -> io::Result<()> {
    let input = reader.as_raw_fd();
    // Artifacts are collected from here; it exists before any code runs.
    let _ = fs::create_dir_all(root.join("output"));
    let writer: Writer = Arc::new(Mutex::new(writer));
    send(
        &writer,
        &Reply::Hello {
            version: PROTOCOL_VERSION,
        },
    )?;
    let mut reader = BufReader::new(reader);
    loop {
        // End of stream or a broken one: either way the host is gone. While a command
        // runs, `run` watches for the same (see `hung_up`).
        let Ok((tag, body)) = read_frame(&mut reader) else {
            host_gone()
        };
        let reply = match Request::decode(tag, &body) {
            Err(e) => Reply::Error(e.to_string()),
            Ok(Request::Run {
                argv,
                env,
                cwd,
                stdin,
                timeout_ms,
                max_output,
                stop_after,
            }) => match resolve(&root, &cwd) {
                Ok(dir) => Reply::Exit(run(
                    &writer,
                    input,
                    &argv,
                    &env,
                    &dir,
                    stdin,
                    Duration::from_millis(timeout_ms),
                    Output {
                        keep: max_output,
                        stop_after,
                    },
                )),
                Err(e) => Reply::Error(e),
            },
            Ok(Request::Write { path, data }) => {
                write_file(&root, &path, &data).map_or_else(Reply::Error, |()| Reply::Done)
            }
            Ok(Request::Read { path, max }) => {
                read_file(&root, &path, max).map_or_else(Reply::Error, Reply::Data)
            }
            Ok(Request::List { path }) => {
                list(&root, &path).map_or_else(Reply::Error, Reply::Entries)
            }
            Ok(Request::Scan { path }) => {
                scan(&root, &path).map_or_else(Reply::Error, Reply::Entries)
            }
            Ok(Request::Pack { path, max }) => {
                pack(&root, &path, max).map_or_else(Reply::Error, Reply::Data)
            }
            Ok(Request::Unpack { path, data }) => {
                unpack(&root, &path, &data).map_or_else(Reply::Error, |()| Reply::Done)
            }
        };
        match send(&writer, &reply) {
            // Too large for one frame: nothing was written, so say so instead.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => send(
                &writer,
                &Reply::Error(format!("the answer is too large to send: {e}")),
            )?,
            Err(_) => host_gone(),
            Ok(()) => {}
        }
    }
}

/// How often a running command's wait checks that the host is still there.
const HANGUP_POLL: Duration = Duration::from_millis(50);

/// Whether the host's end of the stream on `input` has closed. The host sends nothing
/// while a command runs, so readable input means it hung up.
fn hung_up(input: RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd: input,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: poll(2) on one valid pollfd, without waiting.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0
        && poll.revents & (libc::POLLIN | libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// What happens to a command's output: how much of each stream is forwarded, and when
/// the command is stopped for writing too much.
#[derive(Clone, Copy)]
struct Output {
    keep: u64,
    stop_after: u64,
}

/// Runs one command and waits for it and everything it started; if the host hangs up
/// meanwhile, stops everything and exits.
#[allow(clippy::too_many_arguments)]
fn run(
    writer: &Writer,
    input: RawFd,
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
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
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: between fork and exec this only calls open/write/close, which are
    // async-signal-safe, on a static path.
    unsafe {
        command.pre_exec(|| {
            // Make the user's processes, never the agent, the OOM killer's first choice.
            let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
            if fd >= 0 {
                libc::write(fd, b"1000".as_ptr().cast(), 4);
                libc::close(fd);
            }
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
    if let Some(mut pipe) = child.stdin.take() {
        std::thread::spawn(move || {
            // A program that never reads its input ends with EPIPE here; that is fine.
            let _ = pipe.write_all(&stdin);
        });
    }
    let flooded = Arc::new(AtomicU64::new(0));
    let stdout = child.stdout.take().map(|pipe| {
        forward(
            pipe,
            writer.clone(),
            output,
            pgid,
            flooded.clone(),
            Reply::Stdout,
        )
    });
    let stderr = child.stderr.take().map(|pipe| {
        forward(
            pipe,
            writer.clone(),
            output,
            pgid,
            flooded.clone(),
            Reply::Stderr,
        )
    });
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait());
    });
    let mut timed_out = false;
    let deadline = Instant::now() + timeout;
    let status = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            timed_out = true;
            // The command may have moved itself (or a child) to another process
            // group, so the group alone is not enough.
            kill_group(pgid);
            kill_leftovers();
            break done_rx
                .recv()
                .unwrap_or_else(|_| Err(io::Error::other("lost the command")));
        }
        match done_rx.recv_timeout(left.min(HANGUP_POLL)) {
            Ok(status) => break status,
            Err(mpsc::RecvTimeoutError::Timeout) if hung_up(input) => host_gone(),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(io::Error::other("lost the command"))
            }
        }
    };
    // Whatever the command left running (background jobs, daemons, a new session)
    // would hold the output pipes open and outlive the run: end it now.
    kill_group(pgid);
    kill_leftovers();
    let stdout_truncated = stdout.is_some_and(|h| h.join().unwrap_or(false));
    let stderr_truncated = stderr.is_some_and(|h| h.join().unwrap_or(false));
    RUNNING.store(0, Ordering::SeqCst);
    reap();
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
        stdout_truncated,
        stderr_truncated,
        oom_killed: oom_kills() > ooms_before,
        output_limited: flooded.load(Ordering::SeqCst) > 0,
    }
}

/// How many processes the OOM killer has killed in this container's memory cgroup
/// (cgroup v2's `memory.events`, or v1's `memory.oom_control`), 0 if unknown.
fn oom_kills() -> u64 {
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
) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
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
                kill_leftovers();
            }
        }
        truncated
    })
}

fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory involved.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// As process 1 of the container, `kill(-1)` reaches every other process in it: the
/// only way to catch children that left the command's process group.
fn kill_leftovers() {
    if std::process::id() == 1 {
        // SAFETY: as above; process 1 itself is never signalled by kill(-1).
        unsafe {
            libc::kill(-1, libc::SIGKILL);
        }
    }
}

/// Collects the exit status of every orphan that was reparented to the agent, waiting
/// at most a second for the last ones to die: a process the agent cannot kill (one
/// started by `docker exec` as another user) must not stop it from answering.
fn reap() {
    if std::process::id() != 1 {
        return;
    }
    for _ in 0..1000 {
        let mut status = 0;
        // SAFETY: waitpid(2) writes only to `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        match pid {
            0 => std::thread::sleep(Duration::from_millis(1)),
            p if p > 0 => {}
            _ => return,
        }
    }
}

/// `path` below `root`, refusing absolute paths, `..` and any symbolic link on the way.
fn resolve(root: &Path, path: &str) -> Result<PathBuf, String> {
    let mut resolved = root.to_path_buf();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => {
                resolved.push(name);
                match fs::symlink_metadata(&resolved) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        return Err(format!(
                            "refusing `{path}`: `{}` is a symbolic link",
                            resolved.strip_prefix(root).unwrap_or(&resolved).display()
                        ));
                    }
                    _ => {}
                }
            }
            Component::CurDir => {}
            _ => {
                return Err(format!(
                    "refusing `{path}`: it must stay inside the workspace"
                ))
            }
        }
    }
    Ok(resolved)
}

fn write_file(root: &Path, path: &str, data: &[u8]) -> Result<(), String> {
    let target = resolve(root, path)?;
    if target == root {
        return Err("cannot write to the workspace itself".into());
    }
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("cannot create `{path}`'s folder: {e}"))?;
    }
    // O_NONBLOCK: opening a FIFO the code left there must fail, not wait forever.
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&target)
        .map_err(|e| format!("cannot write `{path}`: {e}"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("cannot write `{path}`: not a regular file"));
    }
    file.write_all(data)
        .map_err(|e| format!("cannot write `{path}`: {e}"))
}

fn read_file(root: &Path, path: &str, max: u64) -> Result<Vec<u8>, String> {
    let target = resolve(root, path)?;
    // O_NONBLOCK: opening a FIFO must not wait for a writer that will never come;
    // regular files ignore the flag.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&target)
        .map_err(|e| format!("cannot read `{path}`: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read `{path}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!("cannot read `{path}`: not a regular file"));
    }
    if meta.len() > max {
        return Err(format!(
            "`{path}` is {} bytes, more than the {max} allowed",
            meta.len()
        ));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("cannot read `{path}`: {e}"))?;
    if data.len() as u64 > max {
        return Err(format!("`{path}` grew past the {max} bytes allowed"));
    }
    Ok(data)
}

fn entry(path: String, meta: &fs::Metadata) -> Entry {
    Entry {
        path,
        is_dir: meta.is_dir(),
        size: meta.len(),
        mtime_ns: (meta.mtime().max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec().max(0) as u64),
    }
}

fn list(root: &Path, path: &str) -> Result<Vec<Entry>, String> {
    let dir = resolve(root, path)?;
    let mut entries = Vec::new();
    for item in fs::read_dir(&dir).map_err(|e| format!("cannot list `{path}`: {e}"))? {
        let Ok(item) = item else { continue };
        let Ok(meta) = item.metadata() else { continue };
        entries.push(entry(
            item.file_name().to_string_lossy().into_owned(),
            &meta,
        ));
    }
    Ok(entries)
}

/// Regular files under `path`, never following links; a missing directory is empty.
fn scan(root: &Path, path: &str) -> Result<Vec<Entry>, String> {
    let base = resolve(root, path)?;
    let mut files = Vec::new();
    let mut stack = vec![base.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(items) = fs::read_dir(&dir) else {
            continue;
        };
        for item in items.flatten() {
            let Ok(meta) = item.metadata() else { continue };
            let full = item.path();
            if meta.is_dir() {
                stack.push(full);
            } else if meta.is_file() {
                if let Ok(rel) = full.strip_prefix(&base) {
                    files.push(entry(rel.to_string_lossy().into_owned(), &meta));
                }
            }
        }
    }
    Ok(files)
}

/// A tar of `path` below the root (a file, or a directory's contents), links left out.
fn pack(root: &Path, path: &str, max: u64) -> Result<Vec<u8>, String> {
    sandlot_agent::pack(&resolve(root, path)?, max)
        .map_err(|e| format!("cannot pack `{path}`: {e}"))
}

/// Unpacks regular files and directories into `path`; anything else is refused.
fn unpack(root: &Path, path: &str, data: &[u8]) -> Result<(), String> {
    let dest = resolve(root, path)?;
    fs::create_dir_all(&dest).map_err(|e| format!("cannot create `{path}`: {e}"))?;
    let mut archive = tar::Archive::new(data);
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("broken tar archive: {e}"))?;
        let name = entry
            .path()
            .map_err(|e| format!("broken tar archive: {e}"))?
            .into_owned();
        if name
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "refusing `{}`: it must stay inside `{path}`",
                name.display()
            ));
        }
        let target = Path::new(path).join(&name);
        let target = target.to_string_lossy();
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                let dir = resolve(root, &target)?;
                fs::create_dir_all(&dir).map_err(|e| format!("cannot create `{target}`: {e}"))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mut contents = Vec::new();
                entry
                    .read_to_end(&mut contents)
                    .map_err(|e| format!("broken tar archive: {e}"))?;
                write_file(root, &target, &contents)?;
                if let Ok(mode) = entry.header().mode() {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = fs::set_permissions(
                        resolve(root, &target)?,
                        fs::Permissions::from_mode(mode & 0o777),
                    );
                }
            }
            other => {
                return Err(format!(
                    "refusing `{}`: {other:?} entries (links, devices) are not copied",
                    name.display()
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_parent_paths_are_refused() {
        let root = std::env::temp_dir().join(format!("sandlot-agent-test-{}", std::process::id()));
        fs::create_dir_all(root.join("output")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("output/passwd")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        assert!(read_file(&root, "output/passwd", 1 << 20)
            .unwrap_err()
            .contains("symbolic link"));
        assert!(read_file(&root, "etc/passwd", 1 << 20)
            .unwrap_err()
            .contains("symbolic link"));
        assert!(read_file(&root, "../etc/passwd", 1 << 20)
            .unwrap_err()
            .contains("inside the workspace"));
        assert!(write_file(&root, "etc/evil", b"x").is_err());
        write_file(&root, "a/b/c.txt", b"hi").unwrap();
        assert_eq!(read_file(&root, "a/b/c.txt", 10).unwrap(), b"hi");
        assert!(read_file(&root, "a/b/c.txt", 1).is_err());
        let scanned = scan(&root, "").unwrap();
        assert_eq!(
            scanned.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
            vec!["a/b/c.txt"]
        );
        // A tree goes out without its links and comes back in elsewhere.
        let archive = pack(&root, "", 1 << 20).unwrap();
        unpack(&root, "copy", &archive).unwrap();
        assert_eq!(read_file(&root, "copy/a/b/c.txt", 10).unwrap(), b"hi");
        assert!(fs::symlink_metadata(root.join("copy/etc")).is_err());
        assert!(pack(&root, "a", 10).unwrap_err().contains("more than"));
        // An archive with a link in it is refused.
        let mut evil = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        evil.append_link(&mut header, "escape", "/etc").unwrap();
        let evil = evil.into_inner().unwrap();
        assert!(unpack(&root, "in", &evil).unwrap_err().contains("Symlink"));
        fs::remove_dir_all(&root).unwrap();
    }
}

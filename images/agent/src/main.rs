//! `sandlot-agent serve SOCKET ROOT`, `sandlot-agent serve-stdio ROOT` or
//! `sandlot-agent serve-attach ROOT`: process 1 of a sandlot container; and
//! `sandlot-agent install DEST`, which copies the agent where a container can run it
//! (the init container of a Kubernetes pod).
//!
//! It speaks the protocol of the `sandlot_agent` library over a Unix socket the host
//! listens on, or over its own standard input and output (an engine's attach or exec
//! stream), and serves requests one at a time: runs commands ([`command`]) and cells of
//! a long-lived kernel ([`kernel`]), streams their output, and reads and writes files
//! below ROOT ([`files`]) without ever following a symbolic link ([`beneath`]). What
//! a command leaves running is killed after it ([`process`]). When the host hangs up
//! the agent kills everything and exits, which ends the container.
#![allow(unsafe_code)] // openat2(2), kill(2), waitpid(2), poll(2), and post-fork setup

mod beneath;
mod command;
mod egress;
mod files;
mod host;
mod kernel;
mod privileges;
mod process;
mod seccomp;
mod tool_command;
mod tools;

use beneath::Root;
use command::Output;
use files::refused;
use host::HostInput;
use kernel::Kernel;
use sandlot_agent::{Reply, Request, ToolChannel, PROTOCOL_VERSION};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Run as `sandlot-tool` (a link to the agent on the run's PATH): a tool call.
    if args
        .first()
        .is_some_and(|a| Path::new(a).file_name() == Some(tools::COMMAND.as_ref()))
    {
        std::process::exit(tool_command::main(&args[1..]));
    }
    let served = match args.get(1).map(String::as_str) {
        Some("serve") if args.len() == 4 => {
            serve_socket(Path::new(&args[2]), PathBuf::from(&args[3]))
        }
        Some("serve-stdio") if args.len() == 3 => serve_stdio(PathBuf::from(&args[2]), false),
        Some("serve-attach") if args.len() == 3 => serve_stdio(PathBuf::from(&args[2]), true),
        Some("install") if args.len() == 3 => install(Path::new(&args[2])),
        Some("probe") if args.len() == 2 => seccomp::probe(),
        Some("--version") => {
            println!(
                "sandlot-agent {} (protocol {PROTOCOL_VERSION})",
                env!("CARGO_PKG_VERSION")
            );
            return;
        }
        _ => {
            eprintln!(
                "usage: sandlot-agent serve SOCKET ROOT | sandlot-agent serve-stdio ROOT | \
                 sandlot-agent serve-attach ROOT | sandlot-agent install DEST | \
                 sandlot-agent probe"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = served {
        eprintln!("sandlot-agent: {e}");
        std::process::exit(1);
    }
}

/// Where replies go; output threads share it.
pub(crate) type Writer = Arc<Mutex<Box<dyn Write + Send>>>;

/// Sends one reply.
pub(crate) fn send(writer: &Writer, reply: &Reply) -> io::Result<()> {
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
    let reader = OwnedFd::from(stream.try_clone()?);
    serve(reader, Box::new(stream), root)
}

/// Serves over standard input and output, as an attach or exec stream carries them.
///
/// With `await_host`, the agent says nothing until the host has sent one byte: an
/// engine that can attach only to a running container (Kubernetes) would otherwise
/// lose the greeting written before the host was there to read it. A host that never
/// comes (it died between making the pod and attaching) ends the sandbox after
/// [`HOST_WAIT`] instead of leaving it waiting for its whole life.
fn serve_stdio(root: PathBuf, await_host: bool) -> io::Result<()> {
    forbid_inspection();
    // Unbuffered, unlike `io::stdin()`: the byte that announces the host must be the
    // only one taken before `HostInput` reads the stream.
    let mut input = std::fs::File::from(io::stdin().as_fd().try_clone_to_owned()?);
    if await_host {
        let mut poll = libc::pollfd {
            fd: input.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = HOST_WAIT.as_millis() as libc::c_int;
        // SAFETY: poll(2) on one valid pollfd.
        if unsafe { libc::poll(&mut poll, 1, millis) } <= 0 {
            process::host_gone();
        }
        let mut byte = [0u8; 1];
        if input.read(&mut byte)? == 0 {
            process::host_gone();
        }
    }
    serve(OwnedFd::from(input), Box::new(io::stdout()), root)
}

/// Where the tool bindings are kept in the sandbox: a directory every sandbox can
/// write (a tmpfs in every engine's sandbox), outside the workspace.
const BINDINGS_DIR: &str = "/tmp/.sandlot/tools";

/// How long `serve-attach` waits for its host: longer than any host waits for a pod to
/// start.
const HOST_WAIT: Duration = Duration::from_secs(15 * 60);

/// Copies this executable to `dest`, readable and runnable by everyone and writable by
/// nobody: a pod's init container puts it in a volume that the sandbox container
/// mounts read-only.
fn install(dest: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let staged = dest.with_extension("partial");
    std::fs::copy("/proc/self/exe", &staged)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o555))?;
    std::fs::rename(&staged, dest)
}

/// The user's code runs as the agent's user. Non-dumpable, the agent's memory and file
/// descriptors (/proc/1/fd, the host's stream among them) are out of its reach.
fn forbid_inspection() {
    // SAFETY: prctl(2) with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

fn serve(reader: OwnedFd, writer: Box<dyn Write + Send>, root: PathBuf) -> io::Result<()> {
    let root_path = root;
    let root = Root::open(&root_path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot open {}: {e}", root_path.display()),
        )
    })?;
    // Before any thread or process is started, so that every one inherits them.
    privileges::limit_from_environment()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot set the sandbox's limits: {e}")))?;
    seccomp::install_from_environment().map_err(io::Error::other)?;
    let mut kernel: Option<Kernel> = None;
    // Artifacts are collected from here; it exists before any code runs.
    let _ = root.make_dirs("output");
    // Under an egress allow-list, the way out is there before any code runs. Its
    // ports are bound first: the one capability an engine may have handed the agent
    // is for them, and it goes before any thread or command can inherit it.
    let relays = egress::bind_from_environment()?;
    privileges::drop_handed()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot drop capabilities: {e}")))?;
    let mut egress = relays.map(egress::Relays::start);
    let writer: Writer = Arc::new(Mutex::new(writer));
    send(
        &writer,
        &Reply::Hello {
            version: PROTOCOL_VERSION,
        },
    )?;
    let mut input = HostInput::new(reader);
    let bindings = tools::Bindings::at(Path::new(BINDINGS_DIR));
    // A run's tool endpoint, open while it goes on.
    let endpoint = |input: &HostInput, channel: Option<ToolChannel>| match channel {
        None => Ok(None),
        Some(channel) => {
            bindings.make();
            tools::Endpoint::open(&writer, input.answers(), channel, bindings.sockets())
                .map(Some)
                .map_err(|e| format!("cannot open the run's tool endpoint: {e}"))
        }
    };
    loop {
        // End of stream or a broken one: either way the host is gone. While a command
        // runs, `run` watches for the same (see `HostInput::heard`).
        let Ok((tag, body)) = input.next_frame() else {
            process::host_gone()
        };
        let reply = match Request::decode(tag, &body) {
            Err(e) => Reply::Error(e.to_string()),
            // It crossed the exit report of the run it was meant for: nothing runs to
            // interrupt, and it has no reply.
            Ok(Request::Interrupt) => continue,
            // The reader hands these to their calls; a malformed one is refused above.
            Ok(Request::ToolAnswer { .. }) => continue,
            Ok(Request::Run {
                argv,
                env,
                cwd,
                stdin,
                timeout_ms,
                max_output,
                stop_after,
                tools,
            }) => match (root.dir(&cwd), endpoint(&input, tools)) {
                (Err(e), _) => Reply::Error(refused("run in", &cwd)(e)),
                (_, Err(e)) => Reply::Error(e),
                (Ok(dir), Ok(endpoint)) => {
                    let env = match &endpoint {
                        Some(endpoint) => endpoint.add_to(bindings.env(&env)),
                        None => env,
                    };
                    let report = command::run(
                        &writer,
                        &mut input,
                        &argv,
                        &env,
                        &dir,
                        stdin,
                        Duration::from_millis(timeout_ms),
                        Output {
                            keep: max_output,
                            stop_after,
                        },
                    );
                    // Closed before the exit report: no call is relayed after it.
                    drop(endpoint);
                    Reply::Exit(report)
                }
            },
            Ok(Request::Write { path, data }) => files::write_file(&root, &path, &data, None)
                .map_or_else(Reply::Error, |()| Reply::Done),
            Ok(Request::Read { path, max }) => {
                files::read_file(&root, &path, max).map_or_else(files::Failure::reply, Reply::Data)
            }
            Ok(Request::List { path }) => {
                files::list(&root, &path).map_or_else(files::Failure::reply, Reply::Entries)
            }
            Ok(Request::Scan { path }) => {
                files::scan(&root, &path).map_or_else(Reply::Error, Reply::Entries)
            }
            Ok(Request::Pack { path, max }) => {
                files::pack(&root, &path, max).map_or_else(files::Failure::reply, Reply::Data)
            }
            Ok(Request::Unpack { path, data }) => {
                files::unpack(&root, &path, &data).map_or_else(Reply::Error, |()| Reply::Done)
            }
            Ok(Request::StartKernel {
                argv,
                env,
                cwd,
                timeout_ms,
            }) => {
                if let Some(old) = kernel.take() {
                    old.stop();
                }
                // Any cell may be given tools: the kernel finds the bindings from the
                // start.
                bindings.make();
                let env = bindings.env(&env);
                let started = root.dir(&cwd).map_err(refused("start the kernel in", &cwd));
                match started.and_then(|dir| {
                    Kernel::start(&argv, &env, &dir, Duration::from_millis(timeout_ms))
                }) {
                    Ok(started) => {
                        kernel = Some(started);
                        Reply::Done
                    }
                    Err(e) => Reply::Error(e),
                }
            }
            Ok(Request::Cell {
                code,
                stdin,
                env,
                cwd,
                timeout_ms,
                max_output,
                stop_after,
                grace_ms,
                tools,
            }) => match (&mut kernel, root.dir(&cwd), endpoint(&input, tools)) {
                (None, _, _) => Reply::Error("no kernel runs in this sandbox; start one".into()),
                (Some(_), Err(e), _) => Reply::Error(refused("run in", &cwd)(e)),
                (Some(_), _, Err(e)) => Reply::Error(e),
                (Some(running), Ok(_), Ok(endpoint)) => {
                    let cwd = root_path.join(&cwd);
                    let env = match &endpoint {
                        Some(endpoint) => endpoint.add_to(env),
                        None => env,
                    };
                    let cell = kernel::Cell {
                        code: &code,
                        stdin: &stdin,
                        env: &env,
                        cwd: &cwd,
                        timeout: Duration::from_millis(timeout_ms),
                        output: Output {
                            keep: max_output,
                            stop_after,
                        },
                        grace: Duration::from_millis(grace_ms),
                    };
                    let (report, alive) = running.run(&writer, &mut input, &cell);
                    drop(endpoint);
                    if !alive {
                        kernel = None;
                    }
                    Reply::Exit(report)
                }
            },
            Ok(Request::Clear { path }) => {
                files::clear(&root, &path).map_or_else(Reply::Error, |()| Reply::Done)
            }
            Ok(Request::Stat { path }) => files::stat(&root, &path)
                .map_or_else(files::Failure::reply, |entry| Reply::Entries(vec![entry])),
            Ok(Request::MakeDir { path }) => {
                files::make_dir(&root, &path).map_or_else(Reply::Error, |()| Reply::Done)
            }
            Ok(Request::Remove { path }) => {
                files::remove(&root, &path).map_or_else(files::Failure::reply, |()| Reply::Done)
            }
            Ok(Request::Rename { from, to }) => files::rename(&root, &from, &to)
                .map_or_else(files::Failure::reply, |()| Reply::Done),
            Ok(Request::Freeze) => {
                let stopped = process::freeze();
                let opened = match (stopped, egress.as_mut()) {
                    (true, Some(egress)) => egress
                        .open_install()
                        .map(Some)
                        .map_err(|e| format!("the agent cannot open the install's proxy: {e}")),
                    (true, None) => Ok(None),
                    // Outside a container (tests) there is nothing to stop, and no
                    // way out to open for an install.
                    (false, None) if std::process::id() != 1 => Ok(None),
                    (false, _) => Err("a process of the sandbox would not stop for the \
                                       install, so it does not go online"
                        .to_string()),
                };
                match opened {
                    Ok(proxy) => Reply::Frozen(proxy),
                    Err(why) => {
                        // No install follows: the code goes on.
                        process::thaw();
                        Reply::Error(why)
                    }
                }
            }
            Ok(Request::Thaw) => {
                if let Some(egress) = egress.as_mut() {
                    egress.close_install();
                }
                process::thaw();
                Reply::Done
            }
            Ok(Request::StopKernel) => {
                if let Some(old) = kernel.take() {
                    old.stop();
                }
                Reply::Done
            }
        };
        match send(&writer, &reply) {
            // Too large for one frame: nothing was written, so say so instead.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => send(
                &writer,
                &Reply::Error(format!("the answer is too large to send: {e}")),
            )?,
            Err(_) => process::host_gone(),
            Ok(()) => {}
        }
    }
}

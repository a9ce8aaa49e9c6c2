//! A run's tool endpoint: a Unix socket that code of the run connects to, and that
//! relays each request frame to the host and the host's answer back (see
//! `sandlot_agent::Request`'s tools).
//!
//! The socket is made for each run, under a name no one in the sandbox can guess
//! ahead, in the bindings' directory (a tmpfs in every engine's sandbox), or under an
//! abstract name where that directory cannot be written. It needs no network
//! (`network = off`), and nothing outside the sandbox can reach it. It is gone once
//! the run ends: the endpoint and every connection to it are shut before the run's
//! exit report, so what the run left behind (a forked process, a kernel's thread)
//! finds nothing to call.
//!
//! The agent also keeps what code needs to call tools where code finds it:
//! `sandlot_tools` for Python (on `PYTHONPATH`) and for Node (on `NODE_PATH`), and
//! `sandlot-tool`, the agent itself under another name (on `PATH`), for every other
//! language ([`Bindings`]).

use crate::host::Answers;
use crate::Writer;
use sandlot_agent::{Reply, ToolChannel, TOOLS_VARIABLE};
use std::io::{self, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Numbers for relayed calls, unique in the agent's life: an answer late for one run
/// can never be taken for a call of the next.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// Numbers for endpoints' names.
static NEXT_ENDPOINT: AtomicU64 = AtomicU64::new(1);

/// One run's open endpoint; dropping it closes the endpoint and every connection.
pub struct Endpoint {
    address: Address,
    listener: UnixListener,
    shared: Arc<Shared>,
    accepting: Option<std::thread::JoinHandle<()>>,
}

/// What the endpoint's threads share.
struct Shared {
    writer: Writer,
    answers: Arc<Answers>,
    limits: ToolChannel,
    /// Set, under the writer's lock, when the run ends: no call is relayed after.
    closed: AtomicBool,
    /// Connections open now, to shut them at the end.
    connections: Mutex<Vec<Arc<UnixStream>>>,
    open: AtomicUsize,
    /// This endpoint's number among the agent's: its calls still waiting for an answer
    /// are abandoned under it at the end.
    id: u64,
}

/// Where an endpoint listens.
#[derive(Clone)]
enum Address {
    /// A socket file, which every language's runtime can connect to (Node 18's
    /// cannot reach an abstract name).
    Path(PathBuf),
    /// An abstract name, where no directory can be written.
    Abstract(String),
}

impl Endpoint {
    /// Opens an endpoint that relays calls to the host through `writer` and takes
    /// their answers from `answers`: a socket in `dir`, or under an abstract name if
    /// none can be made there.
    pub fn open(
        writer: &Writer,
        answers: &Arc<Answers>,
        limits: ToolChannel,
        dir: &Path,
    ) -> io::Result<Endpoint> {
        let id = NEXT_ENDPOINT.fetch_add(1, Ordering::Relaxed);
        let name = format!("sandlot-tools-{}-{id}-{:x}", std::process::id(), random());
        let path = dir.join(&name);
        let (address, listener) = match UnixListener::bind(&path) {
            Ok(listener) => (Address::Path(path), listener),
            Err(_) => (
                Address::Abstract(name.clone()),
                UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?,
            ),
        };
        let shared = Arc::new(Shared {
            writer: writer.clone(),
            answers: answers.clone(),
            limits,
            closed: AtomicBool::new(false),
            connections: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            id,
        });
        let accepting = {
            let listener = listener.try_clone()?;
            let shared = shared.clone();
            crate::command::thread(move || accept(listener, shared))?
        };
        Ok(Endpoint {
            address,
            listener,
            shared,
            accepting: Some(accepting),
        })
    }

    /// `env` with the variable that names this endpoint.
    pub fn add_to(&self, mut env: Vec<(String, String)>) -> Vec<(String, String)> {
        env.retain(|(k, _)| k != TOOLS_VARIABLE);
        let value = match &self.address {
            Address::Path(path) => path.display().to_string(),
            Address::Abstract(name) => format!("@{name}"),
        };
        env.push((TOOLS_VARIABLE.to_string(), value));
        env
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        {
            let _relaying = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.closed.store(true, Ordering::SeqCst);
        }
        // A listening socket shut down wakes its accept(2) with an error.
        // SAFETY: shutdown(2) on a descriptor this endpoint owns.
        unsafe {
            libc::shutdown(
                std::os::fd::AsRawFd::as_raw_fd(&self.listener),
                libc::SHUT_RDWR,
            );
        }
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
        for connection in lock(&self.shared.connections).drain(..) {
            let _ = connection.shutdown(std::net::Shutdown::Both);
        }
        self.shared.answers.abandon(self.shared.id);
        if let Address::Path(path) = &self.address {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A number no one in the sandbox can guess ahead: the endpoint's name is only ever
/// told to the run's own code.
fn random() -> u64 {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        bytes = (now.as_nanos() as u64).to_le_bytes();
    }
    u64::from_le_bytes(bytes)
}

fn accept(listener: UnixListener, shared: Arc<Shared>) {
    for connection in listener.incoming() {
        let Ok(connection) = connection else {
            if shared.closed.load(Ordering::SeqCst) {
                return;
            }
            continue;
        };
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        // Past the cap a connection is closed as it comes: the code sees its end.
        if shared.open.load(Ordering::SeqCst) >= shared.limits.max_connections as usize {
            continue;
        }
        // One stream per connection, shared by its thread, the answers written to it
        // and the end that shuts it.
        let connection = Arc::new(connection);
        lock(&shared.connections).push(connection.clone());
        shared.open.fetch_add(1, Ordering::SeqCst);
        let registered = connection.clone();
        let serving = shared.clone();
        let started = crate::command::thread(move || {
            serve(&connection, &serving);
            serving.open.fetch_sub(1, Ordering::SeqCst);
        });
        if started.is_err() {
            // No room for its thread (the sandbox is at its process limit): the
            // connection is closed, as one past the cap is, and the endpoint goes on.
            lock(&shared.connections).retain(|c| !Arc::ptr_eq(c, &registered));
            shared.open.fetch_sub(1, Ordering::SeqCst);
            let _ = registered.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Relays the calls of one connection, one at a time, until it or the run ends.
fn serve(stream: &Arc<UnixStream>, shared: &Shared) {
    let mut connection: &UnixStream = stream;
    loop {
        let mut len = [0u8; 4];
        if connection.read_exact(&mut len).is_err() {
            return;
        }
        let size = u64::from(u32::from_le_bytes(len));
        let call = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
        let reply = if size > shared.limits.max_request {
            // Read and dropped, so the connection can go on with the next call.
            if io::copy(&mut (&mut connection).take(size), &mut io::sink()).ok() != Some(size) {
                return;
            }
            Reply::ToolCallTooLarge { call, size }
        } else {
            let mut frame = vec![0u8; size as usize];
            if connection.read_exact(&mut frame).is_err() {
                return;
            }
            Reply::ToolCall { call, frame }
        };
        let answer = shared.answers.expect(call, shared.id, stream.clone());
        {
            let mut writer = shared.writer.lock().unwrap_or_else(|e| e.into_inner());
            if shared.closed.load(Ordering::SeqCst) || reply.write_to(&mut *writer).is_err() {
                return;
            }
        }
        // The answer is written as it arrives (see `Answers::deliver`); what the
        // connection did not take then is written here.
        let Ok(rest) = answer.recv() else {
            return;
        };
        if connection.write_all(&rest).is_err() {
            return;
        }
    }
}

/// Where the bindings live in the sandbox, and the environment that finds them.
pub struct Bindings {
    python: PathBuf,
    node: PathBuf,
    bin: PathBuf,
    sockets: PathBuf,
}

/// `sandlot_tools` for Python: the functions of the run's tools, over the endpoint.
const PYTHON_MODULE: &str = include_str!("bindings/sandlot_tools.py");

/// `sandlot_tools` for Node: the run's tools as async functions, over the endpoint.
const NODE_MODULE: &str = include_str!("bindings/sandlot_tools.js");

/// The name the agent answers to as the tool command.
pub const COMMAND: &str = "sandlot-tool";

impl Bindings {
    /// The bindings below `dir` (a directory the sandbox's user may write: they are
    /// made again before each run with tools, so code that removed them only loses
    /// them until then).
    pub fn at(dir: &Path) -> Bindings {
        Bindings {
            python: dir.join("python"),
            node: dir.join("node"),
            bin: dir.join("bin"),
            sockets: dir.join("run"),
        }
    }

    /// Makes the Python module and the `sandlot-tool` command where [`Bindings::env`]
    /// points. A failure leaves code without them, not the run.
    pub fn make(&self) {
        let _ = self.try_make();
    }

    /// Where runs' endpoints are made.
    pub fn sockets(&self) -> &Path {
        &self.sockets
    }

    fn try_make(&self) -> io::Result<()> {
        std::fs::create_dir_all(&self.sockets)?;
        keep(&self.python, "sandlot_tools.py", PYTHON_MODULE)?;
        keep(&self.node, "sandlot_tools.js", NODE_MODULE)?;
        std::fs::create_dir_all(&self.bin)?;
        let command = self.bin.join(COMMAND);
        let agent = std::env::current_exe()?;
        if std::fs::read_link(&command).ok().as_deref() != Some(agent.as_path()) {
            let _ = std::fs::remove_file(&command);
            std::os::unix::fs::symlink(&agent, &command)?;
        }
        Ok(())
    }

    /// `env` with the bindings found: their directory ahead on `PATH`, and on
    /// `PYTHONPATH` and `NODE_PATH` after what `env` or the agent's own environment
    /// has there.
    pub fn env(&self, env: &[(String, String)]) -> Vec<(String, String)> {
        let inherited = |key: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(key).ok())
        };
        let path = match inherited("PATH") {
            Some(path) if !path.is_empty() => format!("{}:{path}", self.bin.display()),
            _ => format!(
                "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                self.bin.display()
            ),
        };
        let after = |key: &str, dir: &Path| match inherited(key) {
            Some(p) if !p.is_empty() => format!("{p}:{}", dir.display()),
            _ => dir.display().to_string(),
        };
        let python_path = after("PYTHONPATH", &self.python);
        let node_path = after("NODE_PATH", &self.node);
        let mut env: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| !["PATH", "PYTHONPATH", "NODE_PATH"].contains(&k.as_str()))
            .cloned()
            .collect();
        env.push(("PATH".into(), path));
        env.push(("PYTHONPATH".into(), python_path));
        env.push(("NODE_PATH".into(), node_path));
        env
    }
}

/// Writes `contents` to `dir/name` unless it holds them already (whole: staged, then
/// renamed over).
fn keep(dir: &Path, name: &str, contents: &str) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join(name);
    if std::fs::read(&file).ok().as_deref() != Some(contents.as_bytes()) {
        let staged = dir.join(format!(".{name}.partial"));
        std::fs::write(&staged, contents)?;
        std::fs::rename(&staged, &file)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::tests::Capture;
    use sandlot_agent::{read_frame, Request};
    use std::os::fd::OwnedFd;
    use std::time::Duration;

    fn connect(endpoint: &Endpoint) -> io::Result<UnixStream> {
        match &endpoint.address {
            Address::Path(path) => UnixStream::connect(path),
            Address::Abstract(name) => {
                UnixStream::connect_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)
            }
        }
    }

    fn frame(bytes: &[u8]) -> Vec<u8> {
        let mut out = (bytes.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(bytes);
        out
    }

    /// The relayed replies captured so far, decoded, once there are `n`.
    fn relayed(captured: &Arc<Mutex<Vec<u8>>>, n: usize) -> Vec<Reply> {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let bytes = captured.lock().unwrap().clone();
            let mut reader = bytes.as_slice();
            let mut replies = Vec::new();
            while let Ok((tag, body)) = read_frame(&mut reader) {
                replies.push(Reply::decode(tag, &body).unwrap());
            }
            if replies.len() >= n || std::time::Instant::now() > deadline {
                return replies;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn calls_go_out_and_answers_come_back_until_the_run_ends() {
        let dir =
            std::env::temp_dir().join(format!("sandlot-endpoint-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // In a directory, and where none can be made, under an abstract name.
        for dir in [dir.as_path(), Path::new("/nonexistent/sandlot")] {
            let captured = Arc::new(Mutex::new(Vec::new()));
            let writer: Writer = Arc::new(Mutex::new(Box::new(Capture(captured.clone()))));
            let (host, agent) = UnixStream::pair().unwrap();
            let input = crate::host::HostInput::new(OwnedFd::from(agent));
            let limits = ToolChannel {
                max_request: 100,
                max_connections: 2,
            };
            let endpoint = Endpoint::open(&writer, input.answers(), limits, dir).unwrap();
            let mut code = connect(&endpoint).unwrap();
            code.write_all(&frame(br#"{"op":"list"}"#)).unwrap();
            let Reply::ToolCall { call, frame: sent } = relayed(&captured, 1).remove(0) else {
                panic!("no call relayed");
            };
            assert_eq!(sent, br#"{"op":"list"}"#);
            Request::ToolAnswer {
                call,
                frame: b"{}".to_vec(),
            }
            .write_to(&mut &host)
            .unwrap();
            let mut answer = [0u8; 6];
            code.read_exact(&mut answer).unwrap();
            assert_eq!(&answer, b"\x02\0\0\0{}");

            // Too large: dropped, reported by size, and the connection goes on.
            code.write_all(&frame(&[b'x'; 101])).unwrap();
            code.write_all(&frame(b"next")).unwrap();
            let replies = relayed(&captured, 2);
            assert!(
                matches!(replies[1], Reply::ToolCallTooLarge { size: 101, .. }),
                "{replies:?}"
            );

            // The run ends: the call waiting is abandoned and the endpoint is gone.
            let address = endpoint.address.clone();
            drop(endpoint);
            let mut rest = Vec::new();
            code.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            assert_eq!(code.read_to_end(&mut rest).unwrap_or(0), 0);
            let gone = match address {
                Address::Path(path) => {
                    assert!(!path.exists(), "{} left behind", path.display());
                    UnixStream::connect(path)
                }
                Address::Abstract(name) => UnixStream::connect_addr(
                    &SocketAddr::from_abstract_name(name.as_bytes()).unwrap(),
                ),
            };
            assert!(gone.is_err());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_bindings_come_first_on_the_paths() {
        let bindings = Bindings::at(Path::new("/tmp/.sandlot/tools"));
        let env = bindings.env(&[
            ("PATH".into(), "/opt/bin".into()),
            ("PYTHONPATH".into(), "/w/.sandlot/install".into()),
            ("A".into(), "1".into()),
        ]);
        assert!(env.contains(&("PATH".into(), "/tmp/.sandlot/tools/bin:/opt/bin".into())));
        assert!(env.contains(&(
            "PYTHONPATH".into(),
            "/w/.sandlot/install:/tmp/.sandlot/tools/python".into()
        )));
        assert!(env.contains(&("A".into(), "1".into())));
        assert!(env
            .iter()
            .any(|(k, v)| k == "NODE_PATH" && v.ends_with("/tools/node")));
    }
}

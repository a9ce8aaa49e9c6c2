//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod needs;

/// A component built by `guests/build.sh`: `builtin/python` (embedded by sandlot-core,
/// from `host/core/builtin/`), `examples/lua`, `fixtures/trap`, ... (`guests/dist/`).
pub fn component(name: &str) -> PathBuf {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    match name.strip_prefix("builtin/") {
        Some(handler) => repository.join(format!("host/core/builtin/{handler}.wasm")),
        None => repository.join(format!("guests/dist/{name}.wasm")),
    }
}

/// A fresh plugin directory holding copies of `components`, each under the file name
/// given (`("examples/lua", "lua.wasm")`).
pub fn plugin_dir(components: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (component_name, file_name) in components {
        std::fs::copy(component(component_name), dir.path().join(file_name)).unwrap();
    }
    dir
}

/// A WASI command that prints its arguments (NUL-separated, as WASI hands them over)
/// and then `marker`, and exits with status 7.
pub fn echo_module(marker: &str) -> Vec<u8> {
    let len = marker.len();
    let data: String = marker.bytes().map(|b| format!("\\{b:02x}")).collect();
    wat::parse_str(format!(
        r#"(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 4096) "{data}")
  (func (export "_start")
    (drop (call $sizes (i32.const 0) (i32.const 4)))
    (drop (call $args (i32.const 1024) (i32.const 2048)))
    ;; an iovec at 8: the argument bytes at 2048 (their total length from offset 4);
    ;; then one at 16: the marker at 4096 (WASI writes one iovec per call at most)
    (i32.store (i32.const 8) (i32.const 2048))
    (i32.store (i32.const 12) (i32.load (i32.const 4)))
    (i32.store (i32.const 16) (i32.const 4096))
    (i32.store (i32.const 20) (i32.const {len}))
    (drop (call $write (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 32)))
    (drop (call $write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 32)))
    (call $exit (i32.const 7))))"#
    ))
    .unwrap()
}

/// Installs `module` as a `command` runtime for `language` in `runtimes/echo`, with a
/// manifest that claims `claimed` as its sha256 (the module's own when `None`).
pub fn install_echo_runtime(runtimes: &Path, language: &str, module: &[u8], claimed: Option<&str>) {
    use sha2::Digest;
    let dir = runtimes.join("echo");
    std::fs::create_dir_all(&dir).unwrap();
    // Replaced as an installer would: a new file renamed over the old one.
    let staged = dir.join("echo.wasm.new");
    std::fs::write(&staged, module).unwrap();
    std::fs::rename(&staged, dir.join("echo.wasm")).unwrap();
    let sha256 = claimed
        .map(str::to_string)
        .unwrap_or_else(|| hex::encode(sha2::Sha256::digest(module)));
    std::fs::write(
        dir.join("runtime.toml"),
        format!(
            "id = \"echo\"\nlanguages = [\"{language}\"]\nversion = \"1\"\nmodule = \"echo.wasm\"\n\
             sha256 = \"{sha256}\"\nprotocol = \"command\"\nargv = [\"echo\", \"--file\", \"{{file}}\"]\n"
        ),
    )
    .unwrap();
}

/// Starts `repl` (a `sandlot repl` command), sends it one cell that prints `started`,
/// and returns once it has: the process and its standard input, held open so that it
/// keeps running until it is killed.
pub fn start_repl(
    repl: &mut std::process::Command,
) -> (std::process::Child, std::process::ChildStdin) {
    let mut host = repl
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = host.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"print('started')\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(host.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "started\n");
    (host, stdin)
}

/// Starts `sandlot run --backend BACKEND -l bash -c 'echo started; sleep 600'` with
/// `env`, and returns once the program runs in its sandbox: a host to kill.
pub fn start_sleeping_host(backend: &str, env: &[(&str, &str)]) -> std::process::Child {
    start_host(backend, env, "echo started; sleep 600")
}

/// Starts `sandlot run --backend BACKEND -l bash -c SCRIPT` with `env`, and returns
/// once the script has printed `started`.
pub fn start_host(backend: &str, env: &[(&str, &str)], script: &str) -> std::process::Child {
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["run", "--backend", backend, "-l", "bash", "-c", script])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(host.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    if line != "started\n" {
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut host.stderr.take().unwrap(), &mut stderr).unwrap();
        panic!("the host process did not start the program: {line:?} {stderr}");
    }
    host
}

/// Whether `backend`'s sandbox called `name` is still there: a container, a pod, or
/// (wasm) the workspace directory, as `sandbox_name` names them.
pub fn sandbox_exists(sandlot: &sandlot::Sandlot, backend: &str, name: &str) -> bool {
    use sandlot::docker::Engine;
    let engine = match backend {
        "wasm" | "wasm-workers" => return Path::new(name).exists(),
        "kubernetes" => {
            let pods = sandlot::kubernetes::KubernetesBackend::of(sandlot)
                .unwrap()
                .sandboxes()
                .unwrap();
            return pods.iter().any(|p| p.name == name);
        }
        "native" => {
            return sandlot::native::NativeBackend::of(sandlot)
                .unwrap()
                .sandboxes()
                .iter()
                .any(|s| s.name == name)
        }
        "podman" => Engine::Podman,
        _ => Engine::Docker,
    };
    let containers = sandlot::docker::ContainerBackend::of(sandlot, engine)
        .unwrap()
        .sandboxes()
        .unwrap();
    containers.iter().any(|c| c.name == name)
}

/// The servers of `tests/egress_servers.py`, on every address of this machine:
/// `http` and `https` answer `allowed-http` and `allowed-https`, `other` answers
/// `other-http`, `echo` (and `echo_tls`, over TLS) the head of the request it got
/// ([`EgressServers::received`]).
/// They stop when this is dropped.
pub struct EgressServers {
    child: std::process::Child,
    pub http: u16,
    pub https: u16,
    pub other: u16,
    pub echo: u16,
    /// `echo` over TLS, its certificate signed by [`EgressServers::ca`].
    pub echo_tls: u16,
    /// The certificate (PEM) of the CA that signed `echo_tls`'s.
    pub ca: String,
    received: tempfile::NamedTempFile,
}

impl EgressServers {
    pub fn start() -> EgressServers {
        use std::io::BufRead;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/egress_servers.py");
        let received = tempfile::NamedTempFile::new().unwrap();
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .arg(received.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the test servers");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ports: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the test servers said {line:?}: {e}"));
        let port = |name: &str| ports[name].as_u64().unwrap() as u16;
        EgressServers {
            http: port("http"),
            https: port("https"),
            other: port("other"),
            echo: port("echo"),
            echo_tls: port("echo-tls"),
            ca: ports["ca"].as_str().unwrap().to_string(),
            child,
            received,
        }
    }

    /// Python that prints on one line the status of a plain `GET` of each of `paths`
    /// from `echo` on `localhost`, through the sandbox's proxy (a refusal is the
    /// proxy's `403`).
    pub fn statuses_code(&self, paths: &[&str]) -> String {
        format!(
            "import os, urllib.request, urllib.error\n\
             os.environ['no_proxy'] = os.environ['NO_PROXY'] = ''\n\
             def get(path):\n\
             \x20   try:\n\
             \x20       return urllib.request.urlopen('http://localhost:{}' + path, timeout=20).status\n\
             \x20   except urllib.error.HTTPError as e:\n\
             \x20       return e.code\n\
             print({})",
            self.echo,
            paths
                .iter()
                .map(|p| format!("get({p:?})"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// The heads of the requests `echo` got, in order.
    pub fn received(&self) -> Vec<String> {
        std::fs::read_to_string(self.received.path())
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for EgressServers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python of the virtual environment `tests/run.sh` installs the clients no one here
/// wrote into (the MCP SDK, Selenium): `$SANDLOT_TEST_MCP_PYTHON`, or where `run.sh`
/// puts it.
pub fn client_python() -> String {
    let python = needs::mcp_python();
    assert!(
        Path::new(&python).exists(),
        "no client Python at {python}: run tests/run.sh, or point SANDLOT_TEST_MCP_PYTHON at \
         a Python with `mcp` and `selenium` installed"
    );
    python
}

/// Upstream MCP servers no one here wrote, which `tests/run.sh` installs for code
/// mode: `mcp-server-time` (PyPI; the program) and `@modelcontextprotocol/server-everything`
/// (npm; its `dist/index.js`, run with node). `$SANDLOT_TEST_MCP_TIME` and
/// `$SANDLOT_TEST_MCP_EVERYTHING`, or where `run.sh` puts them.
#[allow(
    dead_code,
    reason = "used by some of the test binaries that share this module"
)]
pub fn upstream_mcp_servers() -> (String, String) {
    let (time, everything) = needs::upstream_paths();
    for path in [&time, &everything] {
        assert!(
            Path::new(path).exists(),
            "no upstream MCP server at {path}: run tests/run.sh, which installs them"
        );
    }
    (time, everything)
}

/// A `sandlot.toml` in `dir` with server-everything as the upstream MCP server
/// `everything` over stdio: `before` ahead of its section, `within` inside it.
#[allow(
    dead_code,
    reason = "used by some of the test binaries that share this module"
)]
pub fn config_with_everything(dir: &Path, before: &str, within: &str) -> PathBuf {
    let (_, everything) = upstream_mcp_servers();
    let config = dir.join("sandlot.toml");
    let section =
        format!("[mcp.upstream.everything]\ncommand = [\"node\", {everything:?}, \"stdio\"]\n");
    std::fs::write(&config, format!("{before}{section}{within}")).unwrap();
    config
}

/// What `tests/SCRIPT ARGS` printed (standard output, then standard error), run by
/// [`client_python`]; fails with that text unless the script succeeded.
pub fn run_client_script(script: &str, args: &[&str]) -> String {
    let mut command = std::process::Command::new(client_python());
    command.arg(tests_dir().join(script)).args(args);
    output_of(command, &format!("tests/{script} {args:?}"))
}

/// The repository's `tests/` folder.
pub fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

/// What `command` printed (standard output, then standard error); fails with that
/// text, naming it `what`, unless it succeeded.
pub fn output_of(mut command: std::process::Command, what: &str) -> String {
    let out = command.output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{said}");
    said
}

/// Whether Docker still has the container whose id starts with `id`.
pub fn container_exists(id: &str) -> bool {
    let out = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("id={id}")])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

/// The `http://` address in the first line of `said` that holds `marker` (a server
/// saying where it listens); fails if `said` ends first.
pub fn address_after(said: &mut impl std::io::BufRead, marker: &str) -> String {
    let mut line = String::new();
    while !line.contains(marker) {
        line.clear();
        if said.read_line(&mut line).unwrap() == 0 {
            panic!("the server ended before it said `{marker}`");
        }
    }
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string()
}

/// A Python session's state as the snapshot tests of the servers build it (HTTP, MCP):
/// a variable, a function, a class instance, a pandas frame and a file.
pub mod python_state {
    /// Builds it.
    pub const BUILD: &str = "import pandas as pd\nx = 40\ndef twice(n):\n    return 2 * n\n\
                             class Box:\n    def __init__(self, v):\n        self.v = v\n\
                             b = Box(twice(x) + 2)\nframe = pd.DataFrame({'a': [1, 2, 3]})\n\
                             with open('notes.txt', 'w') as f:\n    f.write('kept')";
    /// Uses every part of it.
    pub const CHECK: &str = "print(b.v, twice(x), type(b).__name__, int(frame['a'].sum()), \
                             open('notes.txt').read())";
    /// What [`CHECK`] prints.
    pub const SEEN: &str = "82 80 Box 6 kept\n";

    /// What fork `i` does to its copy.
    pub fn mutate(i: usize) -> String {
        format!("x = {i}\nframe['a'] = frame['a'] * {i}")
    }

    /// Shows a fork's copy.
    pub const SHOW: &str = "print(x, int(frame['a'].sum()))";

    /// What [`SHOW`] prints in fork `i` after [`mutate`]`(i)`.
    pub fn mutated(i: usize) -> String {
        format!("{i} {}\n", 6 * i)
    }
}

/// Runs `test`, an ignored test of the running test binary, in a process of its own
/// with `env`, and checks that it passed: what it restores came from another process.
pub fn pass_in_another_process(test: &str, env: &[(&str, &Path)]) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.args(["--ignored", "--exact", test, "--nocapture"]);
    for (name, value) in env {
        command.env(name, value);
    }
    let child = command.output().unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && out.contains("restored in process") && out.contains("1 passed"),
        "{out}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
}

/// A builder over the built-in plugins and the runtimes and cache a `sandlot` at a
/// terminal finds by default; with the wasm backend in workers too (`wasm-workers`,
/// see [`wasm_workers`]) when `workers`.
pub fn default_builder(workers: bool) -> sandlot::SandlotBuilder {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let dirs = sandlot::dirs::Dirs::resolve(&sandlot::Config::default(), &Default::default());
    let workers = workers.then(|| wasm_workers(&plugins, &dirs));
    let mut builder = sandlot::builder(plugins)
        .runtimes_dir(dirs.runtimes_dir())
        .cache_dir(dirs.cache.value.clone());
    if let Some(workers) = workers {
        builder = builder.backend(workers);
    }
    builder
}

/// The wasm backend with its sandboxes in two worker processes (the `sandlot` binary),
/// named `wasm-workers`, over the same runtimes and caches as `dirs` give `wasm`.
pub fn wasm_workers(
    plugins: &sandlot::PluginHost,
    dirs: &sandlot::dirs::Dirs,
) -> std::sync::Arc<sandlot::wasm::WasmBackend> {
    let backend = sandlot::wasm::WasmBackend::discover(
        dirs.runtimes_dir(),
        plugins.runtime_components(),
        dirs.cache.value.clone(),
    )
    .in_workers(sandlot::wasm::WorkerOptions::new(2).program(env!("CARGO_BIN_EXE_sandlot")))
    .named(sandlot::backend::BackendName::new("wasm-workers").unwrap());
    std::sync::Arc::new(backend)
}

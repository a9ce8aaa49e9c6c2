//! What a test needs from the machine beyond its own build: an engine, the cluster,
//! a wasm runtime, a browser, a client SDK no one here wrote.
//!
//! A test states its needs first (`if !needs(&[Need::Backend("docker")]) { return; }`).
//! On a laptop with nothing running, a test whose need is missing passes without
//! running, and its suite says once, on standard error, what it skipped and why.
//! `tests/run.sh`, which starts everything, sets `SANDLOT_TEST_EXPECT_ALL=1`: there a
//! missing need fails the test instead, so that CI never passes by skipping.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// One thing a test needs from the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Need {
    /// A built-in backend that answers, by name (`docker`, `podman`, `kubernetes`,
    /// `native`): its engine or cluster reached, and for those that run sandlot's
    /// images, the Python image there. `wasm` is [`Need::Runtime`]`("python")`.
    Backend(&'static str),
    /// The wasm backend's runtime for a language, installed.
    Runtime(&'static str),
    /// The TLS proxy `tests/services.sh` puts in front of the local Docker.
    DockerTls,
    /// The Python virtual environment with the official MCP SDK and Selenium.
    McpClient,
    /// The upstream MCP servers code mode is tested with (and node to run one).
    UpstreamMcpServers,
    /// A headless browser: Debian's chromium and its WebDriver, with Selenium.
    Browser,
    /// E2B's Python SDKs in their virtual environment.
    E2bPython,
    /// E2B's JavaScript SDKs in their npm folder (and node).
    E2bJavaScript,
    /// The OpenAI Agents SDK with its E2B client.
    AgentsSdk,
    /// A program on `PATH`: a toolchain whose plans are carried out for real.
    Program(&'static str),
    /// A module the machine's `python3` imports.
    PythonModule(&'static str),
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Need::Backend(name) => write!(f, "the {name} backend"),
            Need::Runtime(language) => write!(f, "the wasm runtime for {language}"),
            Need::DockerTls => f.write_str("Docker over TLS"),
            Need::McpClient => f.write_str("the Python MCP SDK"),
            Need::UpstreamMcpServers => f.write_str("the upstream MCP servers"),
            Need::Browser => f.write_str("a headless browser"),
            Need::E2bPython => f.write_str("E2B's Python SDKs"),
            Need::E2bJavaScript => f.write_str("E2B's JavaScript SDKs"),
            Need::AgentsSdk => f.write_str("the OpenAI Agents SDK"),
            Need::Program(name) => write!(f, "`{name}`"),
            Need::PythonModule(name) => write!(f, "python3's `{name}`"),
        }
    }
}

impl Need {
    /// What makes it available.
    fn remedy(&self) -> String {
        match self {
            Need::Backend("kubernetes") => {
                "start a cluster and point KUBECONFIG at it (tests/run.sh starts k8s-local)".into()
            }
            Need::Backend(_) | Need::DockerTls => {
                "tests/services.sh starts the engines, the TLS proxy and builds the images".into()
            }
            Need::Runtime(language) => format!("sandlot runtimes install {language}"),
            Need::Browser => "apt-get install chromium chromium-driver; tests/run.sh installs \
                              Selenium"
                .into(),
            Need::Program(_) | Need::PythonModule(_) => {
                "tests/run.sh installs the toolchains the tests carry plans out with".into()
            }
            _ => "tests/run.sh installs the clients (see its `clients` step)".into(),
        }
    }
}

/// Whether every one of `needs` is here. When one is missing: fails the test under
/// `SANDLOT_TEST_EXPECT_ALL`, else says so once per suite and returns false (the
/// caller returns, and the test passes without running).
pub fn needs(needs: &[Need]) -> bool {
    for need in needs {
        let Err(why) = probe(*need) else { continue };
        if expect_all() {
            panic!(
                "{need} is missing ({why}), and this run expects everything \
                 (SANDLOT_TEST_EXPECT_ALL): {}",
                need.remedy()
            );
        }
        say_skipped(*need, &why);
        return false;
    }
    true
}

/// Whether this run expects every need met: `tests/run.sh` sets it.
pub fn expect_all() -> bool {
    std::env::var_os("SANDLOT_TEST_EXPECT_ALL").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Each need's answer, found once per test binary.
fn probe(need: Need) -> Result<(), String> {
    static FOUND: OnceLock<Mutex<HashMap<Need, Result<(), String>>>> = OnceLock::new();
    let found = FOUND.get_or_init(Default::default);
    if let Some(answer) = found.lock().unwrap_or_else(|e| e.into_inner()).get(&need) {
        return answer.clone();
    }
    // Probed outside the lock: reaching an engine can take seconds, and tests of
    // other needs should not wait for it. Two threads may probe the same need once.
    // On a thread of its own: an async test's runtime must not be where a failed
    // connection drops the engine client's own runtime.
    let answer = std::thread::spawn(move || look(need))
        .join()
        .unwrap_or_else(|_| Err(format!("probing for {need} panicked")));
    found
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(need, answer.clone());
    answer
}

/// Says, once per need in this test binary, what is skipped and why. Written to the
/// standard error itself, not through `eprintln!`, which the test harness captures
/// and shows only for failing tests.
fn say_skipped(need: Need, why: &str) {
    static SAID: Mutex<Vec<Need>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.contains(&need) {
        return;
    }
    said.push(need);
    let line = format!(
        "\n{}: skipping the tests that need {need}: {why}\n    to run them: {}\n",
        suite(),
        need.remedy()
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The running suite's name: its test binary's, without cargo's hash.
fn suite() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    let stem = exe.file_stem().unwrap_or_default().to_string_lossy();
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => stem.into_owned(),
    }
}

fn look(need: Need) -> Result<(), String> {
    match need {
        Need::Backend("wasm") => look(Need::Runtime("python")),
        Need::Backend(name) => backend(name),
        Need::Runtime(language) => runtime(language),
        Need::DockerTls => docker_tls_backend().map(drop).map_err(|e| e.to_string()),
        Need::McpClient => python_with(&mcp_python(), "mcp, selenium"),
        Need::UpstreamMcpServers => {
            let (time, everything) = upstream_paths();
            file(&time)?;
            file(&everything)?;
            program("node")
        }
        Need::Browser => {
            program("chromium")?;
            program("chromedriver")?;
            python_with(&mcp_python(), "selenium")
        }
        Need::E2bPython => python_with(
            &env_or("SANDLOT_TEST_E2B_PYTHON", "e2b-venv/bin/python"),
            "e2b, e2b_code_interpreter",
        ),
        Need::E2bJavaScript => {
            let prefix = env_or("SANDLOT_TEST_E2B_NPM", "e2b-npm");
            file(Path::new(&prefix).join("node_modules/@e2b/code-interpreter"))?;
            program("node")
        }
        Need::AgentsSdk => python_with(
            &env_or("SANDLOT_TEST_AGENTS_PYTHON", "agents-venv/bin/python"),
            "agents",
        ),
        Need::Program(name) => program(name),
        Need::PythonModule(name) => {
            program("python3")?;
            python_with("python3", name)
        }
    }
}

/// A Sandlot with the built-in backends over the machine's runtimes and caches, to
/// ask what answers.
fn prober() -> &'static sandlot::Sandlot {
    static SANDLOT: OnceLock<sandlot::Sandlot> = OnceLock::new();
    SANDLOT.get_or_init(|| super::default_builder(false).build().unwrap())
}

fn backend(name: &str) -> Result<(), String> {
    let sandlot = prober();
    let backend = sandlot.backend(name).map_err(|e| e.to_string())?;
    if name == "kubernetes" {
        // The cluster answered; its nodes' images are its own to have.
        return Ok(());
    }
    let handler = sandlot
        .plugins()
        .language("python")
        .map_err(|e| e.to_string())?;
    let image = sandlot.image_for(handler.info());
    match backend.toolchain("python", image) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!("sandlot's image {image} is not there")),
        Err(e) => Err(format!("cannot look at sandlot's image {image}: {e}")),
    }
}

fn runtime(language: &str) -> Result<(), String> {
    let mut session = prober().session(language);
    session.backend("wasm");
    match session.needs_preparing() {
        Ok(false) => Ok(()),
        Ok(true) => Err("it is not installed".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Where `tests/services.sh` leaves the TLS proxy in front of the local Docker, and
/// the client certificates it made: `$SANDLOT_TEST_DOCKER_TLS_ENDPOINT` and
/// `$SANDLOT_TEST_DOCKER_TLS_CERTS` if set.
pub fn docker_tls() -> (String, PathBuf) {
    let endpoint = std::env::var("SANDLOT_TEST_DOCKER_TLS_ENDPOINT")
        .unwrap_or_else(|_| "tcp://127.0.0.1:2376".into());
    let certs = std::env::var_os("SANDLOT_TEST_DOCKER_TLS_CERTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/lib/sandlot-tests/docker-tls/client".into());
    (endpoint, certs)
}

/// The backend `docker-tls`: the local Docker reached through that proxy.
pub fn docker_tls_backend() -> sandlot::Result<sandlot::docker::ContainerBackend> {
    let (endpoint, certs) = docker_tls();
    sandlot::docker::ContainerBackend::builder(sandlot::docker::Engine::Docker)
        .endpoint(endpoint)
        .tls(sandlot::docker::TlsFiles::from_dir(&certs))
        .name("docker-tls")
        .connect()
}

/// `$variable`, or `default` under the folder `tests/run.sh` installs the clients in.
pub fn env_or(variable: &str, default: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| format!("/var/tmp/sandlot-ci/{default}"))
}

/// The Python of the MCP SDK's and Selenium's virtual environment.
pub fn mcp_python() -> String {
    env_or("SANDLOT_TEST_MCP_PYTHON", "mcp-venv/bin/python")
}

/// `mcp-server-time` and server-everything's `dist/index.js`.
pub fn upstream_paths() -> (String, String) {
    (
        env_or(
            "SANDLOT_TEST_MCP_TIME",
            "mcp-upstream-venv/bin/mcp-server-time",
        ),
        env_or(
            "SANDLOT_TEST_MCP_EVERYTHING",
            "mcp-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        ),
    )
}

fn file(path: impl AsRef<Path>) -> Result<(), String> {
    let path = path.as_ref();
    match path.exists() {
        true => Ok(()),
        false => Err(format!("nothing at {}", path.display())),
    }
}

fn program(name: &str) -> Result<(), String> {
    let found = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
        .unwrap_or(false);
    match found {
        true => Ok(()),
        false => Err(format!("no `{name}` on PATH")),
    }
}

/// Whether `python` (a path, or a program on `PATH`) imports `modules`.
fn python_with(python: &str, modules: &str) -> Result<(), String> {
    if python.contains('/') {
        file(python)?;
    }
    let out = std::process::Command::new(python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("{python} cannot import {modules}")),
    }
}

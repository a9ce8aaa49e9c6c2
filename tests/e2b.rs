//! `sandlot serve --e2b` driven by E2B's official SDKs, pinned by `tests/run.sh`:
//! Python's (`e2b`, `e2b-code-interpreter`, as `tests/e2b_client.py`) and
//! JavaScript's (`e2b`, `@e2b/code-interpreter`, as `tests/e2b_client.mjs`), on wasm
//! and on pooled Docker; the OpenAI Agents SDK's E2B client (`tests/e2b_agents.py`)
//! on pooled Docker; and by hand where the SDKs never go: bad keys, malformed
//! Connect frames, unknown and foreign sandboxes, oversized uploads.
//!
//! Needs the Python runtime installed, Docker with sandlot's images, and the SDKs
//! (`$SANDLOT_TEST_E2B_PYTHON`, `$SANDLOT_TEST_E2B_NPM`; `tests/run.sh` makes all);
//! without one, the tests that need it pass without running and the suite says so
//! (`support::needs`); CI fails them instead.

mod support;

use serde_json::{json, Value};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use support::needs::{needs, Need};

/// E2B's Python SDK checks that a key looks like one of E2B's: `e2b_` and hex.
const ALICE: &str = "e2b_0123456789abcdef0123456789abcdef";
const BOB: &str = "e2b_fedcba9876543210fedcba9876543210";

/// A running `sandlot serve --e2b` with Alice's and Bob's keys and a Docker pool,
/// stopped on drop.
struct Server {
    child: Child,
    url: String,
    /// Its HTTP API.
    api: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        Server::start_with(&[])
    }

    /// With `extra` arguments of `sandlot serve`.
    fn start_with(extra: &[&str]) -> Server {
        Server::start_env(extra, &[])
    }

    /// With `extra` arguments of `sandlot serve`, and `env` in its environment.
    fn start_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sandlot.toml");
        std::fs::write(&config, "[pool.docker]\nmin_idle = 1\nmax_size = 3\n").unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandlot"))
            .args(["serve", "--listen", "127.0.0.1:0", "--e2b", "127.0.0.1:0"])
            .arg("--config")
            .arg(&config)
            .args(extra)
            .envs(env.iter().copied())
            .env("SANDLOT_API_TOKENS", format!("alice:{ALICE},bob:{BOB}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = std::io::BufReader::new(child.stderr.take().unwrap());
        let url = support::address_after(&mut said, "E2B's protocol on http://");
        let api = support::address_after(&mut said, "listening on http://");
        // Read to the end, so that its writes never fail.
        std::thread::spawn(move || for _ in said.lines().map_while(Result::ok) {});
        Server {
            child,
            url,
            api,
            _dir: dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..300 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python of a test environment: `$VARIABLE`, or where `tests/run.sh` makes it.
fn test_python(variable: &str, venv: &str, holding: &str) -> String {
    let python = support::needs::env_or(variable, &format!("{venv}/bin/python"));
    assert!(
        Path::new(&python).exists(),
        "no Python with {holding} at {python}: run tests/run.sh, or point {variable} at one"
    );
    python
}

fn e2b_python() -> String {
    test_python(
        "SANDLOT_TEST_E2B_PYTHON",
        "e2b-venv",
        "`e2b` and `e2b-code-interpreter`",
    )
}

fn e2b_npm() -> String {
    let prefix = support::needs::env_or("SANDLOT_TEST_E2B_NPM", "e2b-npm");
    assert!(
        Path::new(&prefix)
            .join("node_modules/@e2b/code-interpreter")
            .exists(),
        "no E2B JavaScript SDKs under {prefix}: run tests/run.sh, or point \
         SANDLOT_TEST_E2B_NPM at a folder where `npm install e2b @e2b/code-interpreter` ran"
    );
    prefix
}

/// Which SDKs a client script drives.
#[derive(Clone, Copy)]
enum Sdk {
    Python,
    JavaScript,
}

/// Runs `tests/e2b_client.{py,mjs} TEMPLATE SHELL` against `server` as Alice; returns
/// what it printed.
fn sdk_client(server: &Server, sdk: Sdk, template: &str, shell: bool) -> String {
    let tests = support::tests_dir();
    let mut command = match sdk {
        Sdk::Python => {
            let mut command = Command::new(e2b_python());
            command.arg(tests.join("e2b_client.py"));
            command
        }
        Sdk::JavaScript => {
            let mut command = Command::new("node");
            command
                .arg(tests.join("e2b_client.mjs"))
                .env("E2B_NPM_PREFIX", e2b_npm());
            command
        }
    };
    command
        .args([template, if shell { "yes" } else { "no" }])
        .env("E2B_API_URL", &server.url)
        .env("E2B_SANDBOX_URL", &server.url)
        .env("E2B_API_KEY", ALICE)
        .env("BOB_KEY", BOB)
        .env_remove("E2B_DOMAIN")
        .env_remove("E2B_DEBUG");
    support::output_of(command, &format!("the E2B client on {template}"))
}

const CHECKS: &[&str] = &[
    "ok: created",
    "ok: state across run_code calls",
    "ok: a last value as the main result, a frame as HTML, display()",
    "ok: the sandbox's environment",
    "ok: a matplotlib chart as a PNG result, output streamed",
    "ok: an exception as an error with its traceback",
    "ok: files written and read back, text and 10 MB binary",
    "ok: files listed, described, made, moved and removed",
    "ok: listing by metadata",
    "ok: connect to a running sandbox",
    "ok: another key cannot see or touch it",
    "ok: kill",
    "ok: a timeout ends the sandbox",
];

/// What the Python client says once contexts did what they should.
const CONTEXTS: &str = "ok: contexts with their own state, restarted and removed";

#[test]
fn the_python_and_javascript_sdks_on_wasm() {
    if !needs(&[
        Need::E2bPython,
        Need::E2bJavaScript,
        Need::Runtime("python"),
    ]) {
        return;
    }
    let server = Server::start();
    for sdk in [Sdk::Python, Sdk::JavaScript] {
        let said = sdk_client(&server, sdk, "python@wasm", false);
        for check in CHECKS {
            assert!(said.contains(check), "missing `{check}` in:\n{said}");
        }
        assert!(
            said.contains("ok: commands.run runs the interpreter where there is no shell"),
            "{said}"
        );
        if matches!(sdk, Sdk::Python) {
            assert!(said.contains(CONTEXTS), "{said}");
            assert!(
                said.contains("ok: pause keeps the memory; connect resumes it")
                    && said.contains("ok: a timeout pauses a sandbox made with on_timeout pause"),
                "{said}"
            );
        }
    }
}

#[test]
fn the_python_and_javascript_sdks_on_pooled_docker() {
    if !needs(&[
        Need::E2bPython,
        Need::E2bJavaScript,
        Need::Backend("docker"),
    ]) {
        return;
    }
    let server = Server::start();
    let said = sdk_client(&server, Sdk::JavaScript, "python@docker", true);
    for check in CHECKS {
        assert!(said.contains(check), "missing `{check}` in:\n{said}");
    }
    let said = sdk_client(&server, Sdk::Python, "python@docker", true);
    for check in CHECKS {
        assert!(said.contains(check), "missing `{check}` in:\n{said}");
    }
    assert!(
        said.contains("ok: commands.run with streamed output"),
        "{said}"
    );
    assert!(said.contains(CONTEXTS), "{said}");
    assert!(
        said.contains("ok: pause refused where the backend cannot keep the memory"),
        "{said}"
    );
    // The container of the sandbox the client killed is gone.
    let container = said
        .lines()
        .find_map(|l| l.strip_prefix("container: "))
        .unwrap_or_else(|| panic!("no container named in:\n{said}"));
    let started = std::time::Instant::now();
    while support::container_exists(container) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "container {container} left behind by a killed sandbox"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn agents_python() -> String {
    test_python(
        "SANDLOT_TEST_AGENTS_PYTHON",
        "agents-venv",
        "`openai-agents[e2b]`",
    )
}

#[test]
fn the_openai_agents_sdks_e2b_client_on_pooled_docker() {
    if !needs(&[Need::AgentsSdk, Need::Backend("docker")]) {
        return;
    }
    let server = Server::start();
    let mut command = Command::new(agents_python());
    command
        .arg(support::tests_dir().join("e2b_agents.py"))
        .arg("python@docker")
        .env("E2B_API_URL", &server.url)
        .env("E2B_SANDBOX_URL", &server.url)
        .env("E2B_API_KEY", ALICE)
        .env_remove("E2B_DOMAIN")
        .env_remove("OPENAI_API_KEY");
    let said = support::output_of(command, "the OpenAI Agents SDK's E2B client");
    for check in [
        "ok: opened",
        "ok: a command ran, with its output and exit code",
        "ok: files written, seen by commands, read and listed",
    ] {
        assert!(said.contains(check), "missing `{check}` in:\n{said}");
    }
    // The session's end killed its sandbox: the server lists nothing of Alice's.
    assert_eq!(alices_sandboxes(&server), json!([]), "{said}");
}

/// What the control API lists for Alice.
fn alices_sandboxes(server: &Server) -> Value {
    http()
        .get(format!("{}/v2/sandboxes", server.url))
        .header("X-API-Key", ALICE)
        .send()
        .unwrap()
        .json()
        .unwrap()
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::new()
}

/// Creates a wasm sandbox as Alice; returns its id and access token.
fn create(server: &Server) -> (String, String) {
    let made = http()
        .post(format!("{}/v2/sandboxes", server.url))
        .header("X-API-Key", ALICE)
        .json(&json!({ "templateID": "python@wasm", "timeout": 60 }))
        .send()
        .unwrap();
    assert_eq!(made.status().as_u16(), 201);
    let made: Value = made.json().unwrap();
    (
        made["sandboxID"].as_str().unwrap().to_string(),
        made["envdAccessToken"].as_str().unwrap().to_string(),
    )
}

/// Kills sandbox `id` through the control API, as the holder of `key`.
fn kill(server: &Server, id: &str, key: &str) -> reqwest::blocking::Response {
    http()
        .delete(format!("{}/sandboxes/{id}", server.url))
        .header("X-API-Key", key)
        .send()
        .unwrap()
}

fn envd(server: &Server, id: &str, token: &str, path: &str) -> reqwest::blocking::RequestBuilder {
    http()
        .post(format!("{}{path}", server.url))
        .header("E2b-Sandbox-Id", id)
        .header("E2b-Sandbox-Port", "49983")
        .header("X-Access-Token", token)
}

#[test]
fn bad_keys_ids_frames_and_uploads_get_the_errors_the_sdks_expect() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let server = Server::start();
    // No key, or one the server does not have: 401, E2B's error shape.
    for key in [None, Some("e2b_00")] {
        let mut request = http().get(format!("{}/v2/sandboxes", server.url));
        if let Some(key) = key {
            request = request.header("X-API-Key", key);
        }
        let answer = request.send().unwrap();
        assert_eq!(answer.status().as_u16(), 401);
        let body: Value = answer.json().unwrap();
        assert_eq!(body["code"], 401);
        assert!(body["message"].as_str().unwrap().contains("X-API-Key"));
    }
    // An unknown template is the request's fault, with sandlot's reason.
    let answer = http()
        .post(format!("{}/v2/sandboxes", server.url))
        .header("X-API-Key", ALICE)
        .json(&json!({ "templateID": "cobol" }))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400, "{:?}", answer.text());

    let (id, token) = create(&server);
    // Bob does not see Alice's sandbox: a 404 whose body says 404, as the SDKs check.
    let answer = kill(&server, &id, BOB);
    assert_eq!(answer.status().as_u16(), 404);
    assert_eq!(answer.json::<Value>().unwrap()["code"], 404);
    // A timeout of any size is answered, never a dropped connection.
    let answer = http()
        .post(format!("{}/sandboxes/{id}/timeout", server.url))
        .header("X-API-Key", ALICE)
        .json(&json!({ "timeout": u64::MAX }))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400, "{:?}", answer.text());
    // Metadata past its bound, and a message past the bound of everything but
    // uploads, are refused before they are kept or parsed.
    let metadata: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
    let answer = http()
        .post(format!("{}/v2/sandboxes", server.url))
        .header("X-API-Key", ALICE)
        .json(&json!({ "templateID": "base", "metadata": metadata }))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400, "{:?}", answer.text());
    let answer = envd(&server, &id, &token, "/process.Process/List")
        .header("Content-Type", "application/json")
        .body(format!("[{}0]", "0,".repeat(1_500_000)))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 413);
    // Nor reaches its envd without its token, nor an id that is not there.
    for (sandbox, given) in [(id.as_str(), "not-the-token"), ("inope", token.as_str())] {
        let answer = envd(&server, sandbox, given, "/process.Process/List")
            .header("Content-Type", "application/json")
            .body("{}")
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 502, "{sandbox}");
    }

    // Malformed Connect: a truncated envelope, a frame that is not JSON, binary
    // protobuf, a unary method sent a stream. Streams fail in their trailer.
    let start = |body: Vec<u8>, content_type: &str| {
        let answer = envd(&server, &id, &token, "/process.Process/Start")
            .header("Content-Type", content_type)
            .body(body)
            .send()
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.bytes().unwrap().to_vec())
    };
    let trailer_code = |bytes: &[u8]| -> String {
        assert_eq!(bytes[0], 0x02, "not an end-of-stream frame: {bytes:?}");
        let trailer: Value = serde_json::from_slice(&bytes[5..]).unwrap();
        trailer["error"]["code"].as_str().unwrap().to_string()
    };
    let (status, bytes) = start(vec![0, 0, 0, 0, 50, b'{'], "application/connect+json");
    assert_eq!(
        (status, trailer_code(&bytes).as_str()),
        (200, "invalid_argument")
    );
    let (_, bytes) = start(
        vec![0, 0, 0, 0, 3, b'x', b'y', b'z'],
        "application/connect+json",
    );
    assert_eq!(trailer_code(&bytes), "invalid_argument");
    let (_, bytes) = start(vec![0, 0, 0, 0, 0], "application/connect+proto");
    assert_eq!(trailer_code(&bytes), "unimplemented");
    let answer = envd(&server, &id, &token, "/process.Process/SendSignal")
        .header("Content-Type", "application/json")
        .body(r#"{"process":{"pid":4242},"signal":"SIGNAL_SIGKILL"}"#)
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    assert_eq!(answer.json::<Value>().unwrap()["code"], "not_found");
    let answer = envd(&server, &id, &token, "/process.Process/List")
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    assert_eq!(answer.json::<Value>().unwrap()["code"], "invalid_argument");
    // Every filesystem call: a body that is not JSON, a message of the wrong shape,
    // no path, a path outside the workspace, binary protobuf; a missing file;
    // watching, which is not served yet.
    let unary = |method: &str, content_type: &str, body: &str| {
        let answer = envd(
            &server,
            &id,
            &token,
            &format!("/filesystem.Filesystem/{method}"),
        )
        .header("Content-Type", content_type)
        .body(body.to_string())
        .send()
        .unwrap();
        let status = answer.status().as_u16();
        let code = answer.json::<Value>().unwrap()["code"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (status, code)
    };
    let invalid = (400, "invalid_argument".to_string());
    for method in ["Stat", "ListDir", "MakeDir", "Move", "Remove"] {
        let json = "application/json";
        assert_eq!(unary(method, json, "{not json"), invalid, "{method}");
        assert_eq!(unary(method, json, r#"{"path":7}"#), invalid, "{method}");
        assert_eq!(unary(method, json, "{}"), invalid, "{method}");
        let outside = r#"{"path":"/etc","source":"/etc","destination":"/etc"}"#;
        assert_eq!(unary(method, json, outside), invalid, "{method}");
        let (_, code) = unary(method, "application/proto", "");
        assert_eq!(code, "unimplemented", "{method}");
    }
    let missing = (404, "not_found".to_string());
    assert_eq!(
        unary("Stat", "application/json", r#"{"path":"nope"}"#),
        missing
    );
    assert_eq!(
        unary("Remove", "application/json", r#"{"path":"nope"}"#),
        missing
    );
    let moved = r#"{"source":"nope","destination":"b"}"#;
    assert_eq!(unary("Move", "application/json", moved), missing);
    let home = r#"{"path":"/home/user"}"#;
    assert_eq!(
        unary("MakeDir", "application/json", home),
        (409, "already_exists".to_string())
    );
    let (status, code) = unary("CreateWatcher", "application/json", home);
    assert_eq!((status, code.as_str()), (501, "unimplemented"));

    // Files outside the home directory, missing files, an upload past the limit.
    let files = |method: reqwest::Method, query: &str| {
        http()
            .request(method, format!("{}/files?{query}", server.url))
            .header("E2b-Sandbox-Id", &id)
            .header("E2b-Sandbox-Port", "49983")
            .header("X-Access-Token", &token)
    };
    let answer = files(reqwest::Method::GET, "path=/etc/passwd")
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    let answer = files(reqwest::Method::GET, "path=/home/user/missing.txt")
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    assert_eq!(answer.json::<Value>().unwrap()["code"], 404);
    let huge = vec![b'x'; (64 << 20) + 1];
    let answer = files(reqwest::Method::POST, "path=huge.bin")
        .header("Content-Type", "application/octet-stream")
        .body(huge)
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 413);

    // A quiet command's stream carries the keepalives its caller asks for.
    let body = r#"{"process":{"cmd":"python3","args":["-c","import time; time.sleep(2.5)"]}}"#;
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(body.as_bytes());
    let answer = envd(&server, &id, &token, "/process.Process/Start")
        .header("Content-Type", "application/connect+json")
        .header("Keepalive-Ping-Interval", "1")
        .body(framed)
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.matches(r#"{"event":{"keepalive":{}}}"#).count() >= 2,
        "{text}"
    );
    assert!(text.contains(r#""exitCode":0"#), "{text}");

    // The sandbox still works after all that, and is Alice's to kill.
    let ran = http()
        .post(format!("{}/execute", server.url))
        .header("E2b-Sandbox-Id", &id)
        .header("E2b-Sandbox-Port", "49999")
        .header("X-Access-Token", &token)
        .json(&json!({ "code": "print(6 * 7)" }))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let lines: Vec<Value> = ran
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "stdout");
    assert_eq!(lines[0]["text"], "42\n");
    assert_eq!(lines.last().unwrap()["type"], "end_of_execution");
    let answer = kill(&server, &id, ALICE);
    assert_eq!(answer.status().as_u16(), 204);
}

/// A sandbox whose session the manager closed for idleness is gone from the control
/// API too, and its id finds nothing.
#[test]
fn a_sandbox_idle_past_the_servers_idle_timeout_is_gone() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let server = Server::start_with(&["--idle-timeout", "1"]);
    let (id, _) = create(&server);
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let info = http()
        .get(format!("{}/sandboxes/{id}", server.url))
        .header("X-API-Key", ALICE)
        .send()
        .unwrap();
    assert_eq!(info.status().as_u16(), 404);
    assert_eq!(alices_sandboxes(&server), json!([]));
}

/// Runs `code` in sandbox `id`'s default context; what it printed.
fn execute(server: &Server, id: &str, token: &str, code: &str) -> String {
    execute_in(server, id, token, None, code)
}

/// Runs `code` in context `context` of sandbox `id` (its default one if `None`);
/// what it printed.
fn execute_in(server: &Server, id: &str, token: &str, context: Option<&str>, code: &str) -> String {
    let mut body = json!({ "code": code });
    if let Some(context) = context {
        body["context_id"] = json!(context);
    }
    let ran = http()
        .post(format!("{}/execute", server.url))
        .header("E2b-Sandbox-Id", id)
        .header("E2b-Sandbox-Port", "49999")
        .header("X-Access-Token", token)
        .json(&body)
        .send()
        .unwrap()
        .text()
        .unwrap();
    ran.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "stdout")
        .map(|l| l["text"].as_str().unwrap().to_string())
        .collect()
}

/// Creates a sandbox of `template` as Alice; returns its id and access token.
fn create_of(server: &Server, template: &str) -> (String, String) {
    create_with(server, json!({ "templateID": template, "timeout": 120 }))
}

/// Creates a sandbox as Alice with the create request `body`; returns its id and
/// access token.
fn create_with(server: &Server, body: Value) -> (String, String) {
    let made: Value = http()
        .post(format!("{}/v2/sandboxes", server.url))
        .header("X-API-Key", ALICE)
        .json(&body)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let id = made["sandboxID"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"));
    (
        id.to_string(),
        made["envdAccessToken"].as_str().unwrap().to_string(),
    )
}

/// Every line `/execute` answers for `code`, decoded.
fn execute_lines(server: &Server, id: &str, token: &str, code: &str) -> Vec<Value> {
    http()
        .post(format!("{}/execute", server.url))
        .header("E2b-Sandbox-Id", id)
        .header("E2b-Sandbox-Port", "49999")
        .header("X-Access-Token", token)
        .json(&json!({ "code": code }))
        .send()
        .unwrap()
        .text()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

/// Runs a command through envd's `Process.Start`, as the SDKs do (`bash -l -c
/// LINE`); the whole answer, frames and trailer.
fn run_command(server: &Server, id: &str, token: &str, line: &str) -> String {
    let body = json!({ "process": { "cmd": "/bin/bash", "args": ["-l", "-c", line] } }).to_string();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(body.as_bytes());
    let answer = envd(server, id, token, "/process.Process/Start")
        .header("Content-Type", "application/connect+json")
        .body(framed)
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// What a client gets from `run_code` is masked after the server decoded it: the
/// display hook prints a last value as JSON, whose escapes (`\"`, `\u00e9`) the
/// output's own masking cannot see through. The operator's secret, with a quote and
/// a letter outside ASCII, comes back nowhere in any line, decoded.
#[test]
fn run_code_results_carry_no_secret_whatever_its_json_form() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let secret = "op-\"kéy\"-0123456789";
    let server = Server::start_env(&["--secret", "OPERATOR_KEY"], &[("OPERATOR_KEY", secret)]);
    let (id, token) = create(&server);
    let code = "import os, json\nprint(json.dumps(os.environ['OPERATOR_KEY'][::1]))\nos.environ['OPERATOR_KEY']";
    let lines = execute_lines(&server, &id, &token, code);
    let mut texts = Vec::new();
    fn strings(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(text) => out.push(text.clone()),
            Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            Value::Object(fields) => fields.iter().for_each(|(k, v)| {
                out.push(k.clone());
                strings(v, out)
            }),
            _ => {}
        }
    }
    for line in &lines {
        strings(line, &mut texts);
    }
    let results: Vec<&Value> = lines.iter().filter(|l| l["type"] == "result").collect();
    assert!(
        results
            .iter()
            .any(|r| r["text"].as_str().is_some_and(|t| t.contains("***"))),
        "the last value is a result, masked: {lines:?}"
    );
    for text in &texts {
        assert!(
            !text.contains(secret),
            "the secret came back in {text:?}: {lines:?}"
        );
    }
    assert_eq!(kill(&server, &id, ALICE).status().as_u16(), 204);
}

/// A command's code is read by the analysis gate as code sent to `run_code` is: on
/// wasm, where a command is a program for the interpreter, and in a container, where
/// it is a shell line — with the code it hands an interpreter inline, in a shell in
/// a shell, or in a here-document. The policy here restricts Python's `socket`.
#[test]
fn commands_pass_the_analysis_gate_as_code_does() {
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[restricted.python]\nmodules = [\"socket\"]\n").unwrap();
    let server = Server::start_with(&["--policy", policy.to_str().unwrap()]);
    let refused = |answer: &str, what: &str| {
        assert!(
            answer.contains("blocked by the security policy") && !answer.contains("cmFu"),
            "{what} was not refused: {answer}"
        );
    };
    for template in ["python@wasm", "python@docker"] {
        let (id, token) = create_of(&server, template);
        let ran = execute_lines(&server, &id, &token, "import socket\nprint('ran')");
        assert!(
            ran.iter().any(|l| l["type"] == "error"
                && l["value"].as_str().unwrap_or_default().contains("socket")),
            "{template}: run_code was not refused: {ran:?}"
        );
        // `ran` is "cmFu" in the stream's base64.
        let inline = run_command(
            &server,
            &id,
            &token,
            "python3 -c \"import socket; print('ran')\"",
        );
        refused(&inline, &format!("{template}: python3 -c"));
        let fine = run_command(&server, &id, &token, "python3 -c \"print('fine')\"");
        assert!(fine.contains(r#""exitCode":0"#), "{template}: {fine}");
        if template.ends_with("docker") {
            for line in [
                "cd /tmp && bash -c \"python3 -c 'import socket; print(1)'\"",
                "python3 - <<'EOF'\nimport socket\nprint('ran')\nEOF",
                "echo 'import socket' | python3",
                ":(){ :|:& };:",
            ] {
                refused(&run_command(&server, &id, &token, line), line);
            }
        }
        assert_eq!(kill(&server, &id, ALICE).status().as_u16(), 204);
    }
}

/// A code context is the sandbox's: one made later (`POST /contexts`) gets the
/// sandbox's network, not the server's. On a server whose policy lets sandboxes
/// online, a Docker sandbox made with `allow_internet_access: false` has no network
/// interface but loopback in any of its contexts; one made without it has its own.
#[test]
fn every_context_of_a_sandbox_without_internet_access_is_offline() {
    if !needs(&[Need::Backend("docker")]) {
        return;
    }
    let server = Server::start_with(&["--policy", "permissive"]);
    let interfaces = "import os\nprint(sorted(os.listdir('/sys/class/net')))";
    for (allow, expected) in [(false, "['lo']\n"), (true, "['eth0', 'lo']\n")] {
        let (id, token) = create_with(
            &server,
            json!({
                "templateID": "python@docker",
                "timeout": 120,
                "allow_internet_access": allow,
            }),
        );
        let (id, token) = (id.as_str(), token.as_str());
        assert_eq!(
            execute(&server, id, token, interfaces),
            expected,
            "default context"
        );
        let context: Value = http()
            .post(format!("{}/contexts", server.url))
            .header("E2b-Sandbox-Id", id)
            .header("E2b-Sandbox-Port", "49999")
            .header("X-Access-Token", token)
            .json(&json!({ "language": "python" }))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let context = context["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{context}"));
        assert_eq!(
            execute_in(&server, id, token, Some(context), interfaces),
            expected,
            "a new context of a sandbox with allow_internet_access {allow}"
        );
        assert_eq!(kill(&server, id, ALICE).status().as_u16(), 204);
    }
}

/// With a state directory, a sandbox outlives a restart of the server: same id, same
/// access token, its variables there; a sandbox killed before is not.
#[test]
fn a_sandbox_outlives_a_restart_with_a_state_directory() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let flags = ["--state-dir", state.path().to_str().unwrap()];
    let server = Server::start_with(&flags);
    let (id, token) = create(&server);
    assert_eq!(execute(&server, &id, &token, "x = 41\nprint(x)"), "41\n");
    let (killed, _) = create(&server);
    let answer = kill(&server, &killed, ALICE);
    assert_eq!(answer.status().as_u16(), 204);
    drop(server);

    let server = Server::start_with(&flags);
    let listed = alices_sandboxes(&server);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sandboxID"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.as_str()], "{listed}");
    assert_eq!(execute(&server, &id, &token, "print(x + 1)"), "42\n");
    // Bob's key still sees nothing of it.
    let info = http()
        .get(format!("{}/sandboxes/{id}", server.url))
        .header("X-API-Key", BOB)
        .send()
        .unwrap();
    assert_eq!(info.status().as_u16(), 404);
    // Nothing of the sandbox is left in the state directory while it runs.
    assert_eq!(
        std::fs::read_dir(state.path().join("records/e2b"))
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
}

#[test]
fn a_sandbox_whose_client_hung_up_while_it_opened_is_listed_and_killable() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let server = Server::start();
    let address = server.url.trim_start_matches("http://");
    let body = r#"{"templateID":"python@wasm","timeout":60}"#;
    // Creates whose client hangs up 0 to 45 ms after sending: some before the server
    // read them (nothing opens), some while the sandbox opens, some after.
    for delay in (0..50).step_by(5) {
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        write!(
            stream,
            "POST /v2/sandboxes HTTP/1.1\r\nHost: {address}\r\nX-API-Key: {ALICE}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        drop(stream);
    }
    // Every session the server opened for them is a sandbox Alice sees and can kill:
    // none holds one of her sessions unseen until its idle timeout.
    let sessions = || -> Vec<Value> {
        let listed: Value = http()
            .get(format!("{}/v1/sessions", server.api))
            .bearer_auth(ALICE)
            .send()
            .unwrap()
            .json()
            .unwrap();
        listed["sessions"].as_array().unwrap().clone()
    };
    let started = Instant::now();
    let sandboxes = loop {
        std::thread::sleep(Duration::from_millis(500));
        let sandboxes = alices_sandboxes(&server).as_array().unwrap().clone();
        if sessions().len() == sandboxes.len() {
            break sandboxes;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} sessions open for {} listed sandboxes",
            sessions().len(),
            sandboxes.len()
        );
    };
    for sandbox in &sandboxes {
        let id = sandbox["sandboxID"].as_str().unwrap();
        assert_eq!(kill(&server, id, ALICE).status().as_u16(), 204);
    }
    assert_eq!(sessions(), Vec::<Value>::new());
}

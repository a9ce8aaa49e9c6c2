//! `sandlot mcp` driven by a real MCP client (the official Rust SDK's), over stdio
//! and over streamable HTTP: the same exercise on both. Python runs on wasm (plots
//! included) and in Docker (a session's variables, a shell, files up and down).
//!
//! A third-party client checks the same over both transports: the official Python SDK
//! (`tests/mcp_client.py`).
//!
//! Needs the Python runtime installed, Docker with sandlot's images and the Python
//! SDK in its virtual environment (`tests/run.sh` does all three); without one, the
//! tests that need it pass without running and the suite says so (`support::needs`);
//! CI fails them instead.

mod support;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ReadResourceRequestParams,
    ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::io::BufRead;
use std::time::{Duration, Instant};
use support::needs::{needs, Need};

type Client = RunningService<RoleClient, ()>;

fn sandlot() -> tokio::process::Command {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("calling {tool}: {e}"))
}

/// The JSON of a result's first (text) block.
fn json_of(result: &CallToolResult) -> Value {
    let text = &result.content[0]
        .as_text()
        .unwrap_or_else(|| panic!("a text block first: {result:?}"))
        .text;
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
}

fn text_of(result: &CallToolResult) -> String {
    result.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// Whether Docker has containers with these names.
fn containers_named(prefix: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Names}}"])
        .output()
        .expect("the docker CLI");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// What every transport must do; returns the Docker session's container name.
async fn exercise(client: &Client) -> String {
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for tool in [
        "execute_code",
        "list_languages",
        "language_details",
        "open_session",
        "run_in_session",
        "close_session",
        "upload_file",
        "download_file",
        "run_shell",
        "list_sessions",
        "update_network",
    ] {
        assert!(
            tools.iter().any(|t| t == tool),
            "{tool} missing from {tools:?}"
        );
    }

    // A model can see before it runs that the same Python differs between backends.
    let details = call(client, "language_details", json!({ "language": "python" })).await;
    assert_ne!(details.is_error, Some(true), "{details:?}");
    let details = json_of(&details);
    let on = |name: &str| {
        details["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {details}"))
            .clone()
    };
    let (wasm, docker) = (on("wasm"), on("docker"));
    assert_eq!(wasm["runs_with"], "CPython 3.15.0", "{details}");
    let in_docker = docker["runs_with"].as_str().unwrap_or_default();
    assert!(in_docker.starts_with("CPython 3."), "{details}");
    let pandas = |b: &serde_json::Value| b["toolchain"]["libraries"]["pandas"].clone();
    assert!(
        pandas(&wasm).is_string() && pandas(&docker).is_string(),
        "{details}"
    );
    assert_ne!(pandas(&wasm), pandas(&docker), "{details}");

    // A plot comes back as an image a model can see.
    let plotted = call(
        client,
        "execute_code",
        json!({
            "language": "python",
            "backend": "wasm",
            "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\nprint('plotted')",
        }),
    )
    .await;
    assert_ne!(plotted.is_error, Some(true), "{plotted:?}");
    let summary = json_of(&plotted);
    assert_eq!(summary["stdout"], "plotted\n");
    assert_eq!(summary["exit_code"], 0);
    let image = plotted
        .content
        .iter()
        .find_map(|c| c.as_image())
        .unwrap_or_else(|| panic!("no image in {plotted:?}"));
    assert_eq!(image.mime_type, "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // A failing program is a tool error the model sees, with what it printed.
    let failed = call(
        client,
        "execute_code",
        json!({ "language": "python", "backend": "wasm", "code": "raise SystemExit(3)" }),
    )
    .await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(json_of(&failed)["exit_code"], 3);

    // More than the policy allows is refused, naming what.
    let refused = call(
        client,
        "open_session",
        json!({ "language": "python", "backend": "docker", "network": "on" }),
    )
    .await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(
        text_of(&refused).starts_with("error [not_allowed]: ")
            && text_of(&refused).contains("policy.network"),
        "{}",
        text_of(&refused)
    );
    // A language the server does not have: a tool error of its own kind.
    let unknown = call(
        client,
        "execute_code",
        json!({ "language": "cobol", "code": "DISPLAY 'x'." }),
    )
    .await;
    assert_eq!(unknown.is_error, Some(true), "{unknown:?}");
    assert!(
        text_of(&unknown).starts_with("error [not_found]: unknown language `cobol`"),
        "{}",
        text_of(&unknown)
    );
    let too_long = call(
        client,
        "execute_code",
        json!({ "language": "python", "code": "print(1)", "timeout_seconds": 86400 }),
    )
    .await;
    assert!(
        text_of(&too_long).contains("limits.timeout"),
        "{}",
        text_of(&too_long)
    );

    // A session keeps its variables and files across calls.
    let opened = call(
        client,
        "open_session",
        json!({ "language": "python", "backend": "docker", "network": "off" }),
    )
    .await;
    assert_ne!(opened.is_error, Some(true), "{opened:?}");
    let opened = json_of(&opened);
    assert_eq!(opened["backend"], "docker");
    assert_eq!(opened["runs_with"], docker["runs_with"], "{opened}");
    assert_eq!(opened["keeps_variables"], true);
    let id = opened["session_id"].as_str().unwrap().to_string();
    // Request rules narrow an allow-list: a session with no network takes none, a
    // rule that does not read is named, and lifting none is fine.
    for (rules, says) in [
        (json!(["GET api.example.com/v1/**"]), "allow-list"),
        (
            json!(["GET api.example.com/a/../b"]),
            "`GET api.example.com/a/../b`",
        ),
    ] {
        let refused = call(
            client,
            "update_network",
            json!({ "session_id": id, "requests": rules }),
        )
        .await;
        assert_eq!(refused.is_error, Some(true), "{refused:?}");
        assert!(text_of(&refused).contains(says), "{}", text_of(&refused));
    }
    let lifted = call(
        client,
        "update_network",
        json!({ "session_id": id, "requests": [] }),
    )
    .await;
    assert_ne!(lifted.is_error, Some(true), "{lifted:?}");
    assert_eq!(json_of(&lifted)["requests"], json!([]));
    let set = call(
        client,
        "run_in_session",
        json!({ "session_id": id, "code": "answer = 41" }),
    )
    .await;
    assert_ne!(set.is_error, Some(true), "{set:?}");
    let uploaded = call(
        client,
        "upload_file",
        json!({ "session_id": id, "path": "data/in.txt", "text": "from the client" }),
    )
    .await;
    assert_ne!(uploaded.is_error, Some(true), "{uploaded:?}");
    let read = call(
        client,
        "run_in_session",
        json!({
            "session_id": id,
            "code": "print(answer + 1)\nprint(open('data/in.txt').read())\n_ = open('output/result.csv', 'w').write('a,b\\n1,2\\n')",
        }),
    )
    .await;
    assert_eq!(
        json_of(&read)["stdout"],
        "42\nfrom the client\n",
        "{read:?}"
    );
    let csv = read
        .content
        .iter()
        .find_map(|c| match c {
            ContentBlock::Resource(r) => Some(r.resource.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no resource in {read:?}"));
    let ResourceContents::TextResourceContents { text, uri, .. } = csv else {
        panic!("the CSV as text: {csv:?}");
    };
    assert_eq!(text, "a,b\n1,2\n");
    assert!(uri.ends_with("output/result.csv"), "{uri}");
    let shell = call(
        client,
        "run_shell",
        json!({ "session_id": id, "command": "cat data/in.txt | wc -c" }),
    )
    .await;
    assert_eq!(json_of(&shell)["stdout"].as_str().unwrap().trim(), "15");
    let downloaded = call(
        client,
        "download_file",
        json!({ "session_id": id, "path": "output/result.csv" }),
    )
    .await;
    assert!(
        matches!(&downloaded.content[1], ContentBlock::Resource(r)
            if matches!(&r.resource, ResourceContents::TextResourceContents { text, .. } if text == "a,b\n1,2\n")),
        "{downloaded:?}"
    );

    let languages = client
        .read_resource(ReadResourceRequestParams::new("sandlot://languages"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &languages.contents[0] else {
        panic!("languages as text");
    };
    assert!(text.contains("\"python\""), "{text}");

    let listed = json_of(&call(client, "list_sessions", json!({})).await);
    assert_eq!(listed["sessions"][0]["id"], id.as_str());
    assert!(
        !containers_named("sandlot-").is_empty(),
        "the session's container is there"
    );
    id
}

/// Waits until no container of the given names is left.
fn assert_gone(before: &[String]) {
    let started = Instant::now();
    loop {
        let left: Vec<String> = containers_named("sandlot-")
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "containers left behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_over_stdio_runs_code_keeps_sessions_and_is_refused_more() {
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let before = containers_named("sandlot-");
    let mut command = sandlot();
    command.arg("mcp");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("sandlot")
    );
    let id = exercise(&client).await;
    let closed = call(&client, "close_session", json!({ "session_id": id })).await;
    assert_ne!(closed.is_error, Some(true), "{closed:?}");
    let late = call(
        &client,
        "run_in_session",
        json!({ "session_id": id, "code": "print(1)" }),
    )
    .await;
    assert!(
        text_of(&late).contains("it was closed"),
        "{}",
        text_of(&late)
    );
    // A session left open when the client goes is closed by the server on its way out.
    let open = json_of(
        &call(
            &client,
            "open_session",
            json!({ "language": "python", "backend": "docker" }),
        )
        .await,
    );
    assert!(open["session_id"].is_string(), "{open}");
    client.cancel().await.unwrap();
    assert_gone(&before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_over_streamable_http_does_the_same() {
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let before = containers_named("sandlot-");
    let (mut server, url) = start_http_server();

    let client = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await.unwrap();
    let id = exercise(&client).await;
    // Another connection is another client: it cannot reach this session.
    let other = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();
    let stolen = call(
        &other,
        "run_in_session",
        json!({ "session_id": id, "code": "print(answer)" }),
    )
    .await;
    assert_eq!(stolen.is_error, Some(true));
    assert!(
        text_of(&stolen).starts_with("error [not_found]: no session"),
        "{}",
        text_of(&stolen)
    );
    other.cancel().await.unwrap();
    client.cancel().await.unwrap();

    // Stopped with a session open: it closes it and leaves nothing.
    stop(&mut server);
    assert_gone(&before);
}

/// Starts `sandlot mcp --http` on a free loopback port; returns it and its URL.
/// Code mode: the tools of two upstream servers no one here wrote, `mcp-server-time`
/// (PyPI) and `@modelcontextprotocol/server-everything` (npm), become functions in the
/// sandbox; `execute_code` lists them, and one program calls them a dozen times and
/// prints the combined result. The time server over stdio; the other over streamable
/// HTTP (code on wasm), then over stdio (code in Docker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_mode_calls_upstream_servers_from_one_program() {
    if !needs(&[
        Need::UpstreamMcpServers,
        Need::Runtime("python"),
        Need::Backend("docker"),
    ]) {
        return;
    }
    let (time, everything) = support::upstream_mcp_servers();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut http = std::process::Command::new("node")
        .args([everything.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("node runs server-everything");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server-everything never listened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let program = r#"
from sandlot_tools import time_convert_time, everything_get_sum, everything_echo
total = 0
for n in range(1, 11):
    said = everything_get_sum(a=total, b=n)
    total = int(said.rstrip(".").split()[-1])
tokyo = time_convert_time(source_timezone="UTC", time="12:00", target_timezone="Asia/Tokyo")
print(total, tokyo["target"]["datetime"][11:16], everything_echo(message="done"))
"#;
    let passes = [
        (format!("everything=http://127.0.0.1:{port}/mcp"), "wasm"),
        (format!("everything=node {everything} stdio"), "docker"),
    ];
    for (everything, backend) in passes {
        let mut command = sandlot();
        command.args([
            "mcp",
            "--upstream",
            &format!("time={time} --local-timezone UTC"),
            "--upstream",
            &everything,
        ]);
        let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
        let listed = client.list_all_tools().await.unwrap();
        let execute = listed.iter().find(|t| t.name == "execute_code").unwrap();
        let description = execute.description.as_deref().unwrap_or_default();
        for signature in [
            "time_convert_time(",
            "everything_get_sum(a: number, b: number)",
            "from sandlot_tools import",
        ] {
            assert!(
                description.contains(signature),
                "{signature}: {description}"
            );
        }
        let run = json_of(
            &call(
                &client,
                "execute_code",
                json!({ "language": "python", "code": program, "backend": backend }),
            )
            .await,
        );
        assert_eq!(run["stdout"], "55 21:00 Echo: done\n", "{backend}: {run}");
        client.cancel().await.unwrap();
    }
    let _ = http.kill();
    let _ = http.wait();
}

/// An upstream server is a child of sandlot that hands what it knows to sandboxed
/// code: it starts with none of sandlot's environment (the clients' API tokens, the
/// operator's secrets, the shell's variables) but the baseline and what the operator
/// gives it by name. server-everything's `get-env` tool reports its whole
/// environment, as a tool of any upstream could.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_servers_get_none_of_the_servers_environment() {
    if !needs(&[Need::UpstreamMcpServers, Need::Runtime("python")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = support::config_with_everything(
        dir.path(),
        "",
        "env = { GIVEN = \"given-value\" }\ninherit_env = [\"PASSED_ON\"]\n",
    );
    let token = "client-token-0123456789abcdef";
    let mut command = sandlot();
    command
        .args(["mcp", "--secret", "OPERATOR_KEY"])
        .env("SANDLOT_CONFIG", &config)
        .env("SANDLOT_API_TOKENS", format!("alice:{token}"))
        .env("OPERATOR_KEY", "operator-key-0123456789")
        .env("SHELL_ONLY_CANARY", "canary-of-the-shell")
        .env("PASSED_ON", "passed-on-value");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let program = r#"
from sandlot_tools import everything_get_env
env = everything_get_env()
print(" ".join(sorted(env)))
print(env.get("GIVEN"), env.get("PASSED_ON"))
print(any("0123456789" in value or "canary" in value for value in env.values()))
"#;
    let run = json_of(
        &call(
            &client,
            "execute_code",
            json!({ "language": "python", "code": program, "backend": "wasm" }),
        )
        .await,
    );
    let stdout = run["stdout"].as_str().unwrap_or_else(|| panic!("{run}"));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{run}");
    let baseline = sandlot::server::mcp::upstream::BASELINE_ENV;
    for name in lines[0].split_whitespace() {
        assert!(
            baseline.contains(&name) || ["GIVEN", "PASSED_ON"].contains(&name),
            "the upstream server was started with {name}: {}",
            lines[0]
        );
    }
    assert_eq!(lines[1], "given-value passed-on-value", "{run}");
    assert_eq!(lines[2], "False", "a value of sandlot's environment: {run}");
    client.cancel().await.unwrap();

    // A variable to pass on that sandlot does not have is an error, named.
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["mcp"])
        .env("SANDLOT_CONFIG", &config)
        .env_remove("PASSED_ON")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        said.contains("inherit_env names PASSED_ON, which is not set"),
        "{said}"
    );
}

fn start_http_server() -> (std::process::Child, String) {
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["mcp", "--http", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    // The rest of what it says goes to the test's output, so its writes never fail.
    std::thread::spawn(move || {
        for line in said.lines().map_while(Result::ok) {
            eprintln!("mcp: {line}");
        }
    });
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    (server, url)
}

/// SIGTERM, then a clean exit within 30 s.
fn stop(server: &mut std::process::Child) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    loop {
        if let Some(exit) = server.try_wait().unwrap() {
            assert!(exit.success(), "{exit}");
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server did not stop"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `tests/mcp_client.py` with `args`; fails with what it printed.
fn python_client(args: &[&str]) {
    let said = support::run_client_script("mcp_client.py", args);
    assert!(said.contains("ok: a looser policy is refused"), "{said}");
}

#[test]
fn the_python_sdk_as_a_client_over_stdio_and_streamable_http() {
    if !needs(&[Need::McpClient, Need::Runtime("python")]) {
        return;
    }
    python_client(&["stdio", env!("CARGO_BIN_EXE_sandlot")]);
    let (mut server, url) = start_http_server();
    python_client(&["http", &url]);
    stop(&mut server);
}

/// A client that keeps the progress notifications it hears.
#[derive(Clone, Default)]
struct Listener {
    heard: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.heard
            .lock()
            .unwrap()
            .push(params.message.unwrap_or_default());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reports_what_it_prints_as_progress() {
    if !needs(&[Need::Backend("docker")]) {
        return;
    }
    let listener = Listener::default();
    let mut command = sandlot();
    command.arg("mcp");
    let client = listener
        .clone()
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let Value::Object(arguments) = json!({
        "language": "python",
        "backend": "docker",
        "code": "import sys, time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(0.3)\nprint('oops', file=sys.stderr)",
    }) else {
        unreachable!()
    };
    let run = client
        .call_tool(CallToolRequestParams::new("execute_code").with_arguments(arguments))
        .await
        .unwrap();
    assert_eq!(json_of(&run)["stdout"], "step 0\nstep 1\nstep 2\n");
    // Notifications may trail the result by a moment.
    let started = Instant::now();
    loop {
        let heard = listener.heard.lock().unwrap().join("\n");
        if heard.contains("stdout: step 2") && heard.contains("stderr: oops") {
            // Whole lines, in order, one notification each.
            let stdout: Vec<&str> = heard.lines().filter(|l| l.starts_with("stdout")).collect();
            assert_eq!(
                stdout,
                ["stdout: step 0", "stdout: step 1", "stdout: step 2"]
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "progress heard: {heard:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.cancel().await.unwrap();
}

#[test]
fn the_http_server_refuses_to_listen_beyond_loopback() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["mcp", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("not a loopback address"), "{said}");
}

/// A request too large for one message, or a line that is no JSON, is answered with a
/// JSON-RPC error (the large one with its own id), and the server goes on: a client
/// never waits for an answer that will not come.
#[test]
fn over_stdio_an_oversized_or_broken_request_gets_an_error_and_the_server_goes_on() {
    use std::io::Write;
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut input = server.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(server.stdout.take().unwrap());
    let mut answer = || {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    let mut send = |message: &str| {
        input.write_all(message.as_bytes()).unwrap();
        input.write_all(b"\n").unwrap();
        input.flush().unwrap();
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
    );
    assert_eq!(answer()["id"], 1);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let code = "x".repeat(25 << 20);
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"execute_code","arguments":{{"language":"python","code":"{code}"}}}}}}"#
    ));
    let refused = answer();
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bytes"),
        "{refused}"
    );
    send("this is not json");
    let broken = answer();
    assert_eq!(broken["error"]["code"], -32700, "{broken}");
    send(r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#);
    let listed = answer();
    assert_eq!(listed["id"], 8, "{listed}");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    drop(input);
    server.wait().unwrap();
}

/// A run the gate refuses and a full pool are tool errors a model can read, each
/// with its stable kind first, as the HTTP API answers them with their own status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_tool_errors_with_their_kind() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sandlot.toml");
    std::fs::write(
        &config,
        "[pool.wasm]\nmin_idle = 0\nmax_size = 1\nwhen_exhausted = \"fail-fast\"\n",
    )
    .unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "block_at = \"high\"\n").unwrap();
    let mut command = sandlot();
    command
        .arg("mcp")
        .args(["--config", config.to_str().unwrap()])
        .args(["--policy", policy.to_str().unwrap()]);
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();

    let blocked = call(
        &client,
        "execute_code",
        json!({ "language": "python", "backend": "wasm", "code": "import os\nos.system('id')" }),
    )
    .await;
    assert_eq!(blocked.is_error, Some(true), "{blocked:?}");
    let said = text_of(&blocked);
    assert!(
        said.starts_with("error [blocked]: ") && said.contains("python.os-command"),
        "{said}"
    );

    let first = call(
        &client,
        "open_session",
        json!({ "language": "python", "backend": "wasm" }),
    )
    .await;
    assert_ne!(first.is_error, Some(true), "{first:?}");
    let full = call(
        &client,
        "open_session",
        json!({ "language": "python", "backend": "wasm" }),
    )
    .await;
    assert_eq!(full.is_error, Some(true), "{full:?}");
    assert!(
        text_of(&full).starts_with("error [exhausted]: "),
        "{}",
        text_of(&full)
    );
    // A misspelt argument is refused and named, not silently dropped.
    let Value::Object(typo) =
        json!({ "language": "python", "code": "print(1)", "timout_seconds": 5 })
    else {
        unreachable!()
    };
    let refused = client
        .call_tool(CallToolRequestParams::new("execute_code").with_arguments(typo))
        .await;
    let said = match refused {
        Err(error) => error.to_string(),
        Ok(result) => {
            assert_eq!(result.is_error, Some(true), "{result:?}");
            text_of(&result)
        }
    };
    assert!(said.contains("timout_seconds"), "{said}");
    client.cancel().await.unwrap();
}

/// `sandlot mcp` over stdio keeping its state in `state`.
async fn stdio_client_keeping(state: &std::path::Path) -> Client {
    let mut command = sandlot();
    command
        // A dozen wasm sessions at once, each counted at 2 GiB: more than the
        // machine's memory, the default budget.
        .args(["mcp", "--max-sessions-per-client", "12"])
        .args(["--memory-budget", "131072", "--state-dir"])
        .arg(state);
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

/// Runs `code` in session `id` and returns what it printed, checking it ran.
async fn runs(client: &Client, id: &str, code: &str) -> String {
    let run = call(
        client,
        "run_in_session",
        json!({ "session_id": id, "code": code }),
    )
    .await;
    assert_ne!(run.is_error, Some(true), "{run:?}");
    let run = json_of(&run);
    assert_eq!(run["exit_code"], 0, "{run}");
    run["stdout"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_restores_and_forks_through_mcp_outlive_a_restart() {
    use support::python_state as state;
    if !needs(&[Need::Runtime("python"), Need::Runtime("javascript")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let client = stdio_client_keeping(dir.path()).await;
    let opened = json_of(
        &call(
            &client,
            "open_session",
            json!({ "language": "python", "backend": "wasm" }),
        )
        .await,
    );
    let id = opened["session_id"].as_str().unwrap().to_string();
    runs(&client, &id, state::BUILD).await;
    let taken = call(&client, "snapshot_session", json!({ "session_id": id })).await;
    assert_ne!(taken.is_error, Some(true), "{taken:?}");
    let taken = json_of(&taken);
    assert_eq!(taken["keeps_variables"], true, "{taken}");
    let snapshot = taken["snapshot_id"].as_str().unwrap().to_string();
    runs(&client, &id, "x = 'later'").await;

    // JavaScript: its interpreter is snapshotted whole too.
    let js = json_of(
        &call(
            &client,
            "open_session",
            json!({ "language": "javascript", "backend": "wasm" }),
        )
        .await,
    );
    let js = js["session_id"].as_str().unwrap().to_string();
    runs(
        &client,
        &js,
        "const kept = { n: 40 };\nfunction bump() { return ++kept.n; }\nbump();",
    )
    .await;
    let js_taken = json_of(&call(&client, "snapshot_session", json!({ "session_id": js })).await);
    assert_eq!(js_taken["keeps_variables"], true, "{js_taken}");
    let js_snapshot = js_taken["snapshot_id"].as_str().unwrap().to_string();
    runs(&client, &js, "kept.n = 0").await;
    call(&client, "close_session", json!({ "session_id": js })).await;

    let restored = json_of(
        &call(
            &client,
            "restore_session",
            json!({ "snapshot_id": snapshot }),
        )
        .await,
    );
    let restored = restored["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{restored}"))
        .to_string();
    assert_eq!(runs(&client, &restored, state::CHECK).await, state::SEEN);
    let forked = json_of(
        &call(
            &client,
            "fork_session",
            json!({ "session_id": restored, "count": 10 }),
        )
        .await,
    );
    let forks: Vec<String> = forked["session_ids"]
        .as_array()
        .unwrap_or_else(|| panic!("{forked}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert_eq!(forks.len(), 10);
    for (i, fork) in forks.iter().enumerate() {
        runs(&client, fork, &state::mutate(i + 1)).await;
    }
    for (i, fork) in forks.iter().enumerate() {
        assert_eq!(
            runs(&client, fork, state::SHOW).await,
            state::mutated(i + 1)
        );
    }
    assert_eq!(runs(&client, &restored, state::SHOW).await, "40 6\n");
    for fork in &forks {
        call(&client, "close_session", json!({ "session_id": fork })).await;
    }

    // The server goes; the next one has the snapshot, and the session it paused.
    client.cancel().await.unwrap();
    let client = stdio_client_keeping(dir.path()).await;
    let listed = json_of(&call(&client, "list_snapshots", json!({})).await);
    assert!(listed.to_string().contains(&snapshot), "{listed}");
    assert_eq!(runs(&client, &id, "print(x)").await, "later\n");
    let again = json_of(
        &call(
            &client,
            "restore_session",
            json!({ "snapshot_id": snapshot }),
        )
        .await,
    );
    let again = again["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{again}"))
        .to_string();
    assert_eq!(runs(&client, &again, state::CHECK).await, state::SEEN);
    // The JavaScript snapshot too, and its forks diverge.
    let js_again = json_of(
        &call(
            &client,
            "restore_session",
            json!({ "snapshot_id": js_snapshot }),
        )
        .await,
    );
    let js_again = js_again["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{js_again}"))
        .to_string();
    assert_eq!(
        runs(&client, &js_again, "console.log(bump())").await,
        "42\n"
    );
    let js_forked = json_of(
        &call(
            &client,
            "fork_session",
            json!({ "session_id": js_again, "count": 2 }),
        )
        .await,
    );
    let js_forks: Vec<String> = js_forked["session_ids"]
        .as_array()
        .unwrap_or_else(|| panic!("{js_forked}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    for (i, fork) in js_forks.iter().enumerate() {
        runs(&client, fork, &format!("kept.n = {}", 100 * (i + 1))).await;
    }
    for (i, fork) in js_forks.iter().enumerate() {
        assert_eq!(
            runs(&client, fork, "console.log(bump())").await,
            format!("{}\n", 100 * (i + 1) + 1)
        );
    }
    assert_eq!(
        runs(&client, &js_again, "console.log(bump())").await,
        "43\n"
    );
    let deleted = call(
        &client,
        "delete_snapshot",
        json!({ "snapshot_id": snapshot }),
    )
    .await;
    assert_ne!(deleted.is_error, Some(true), "{deleted:?}");
    let gone = call(
        &client,
        "restore_session",
        json!({ "snapshot_id": snapshot }),
    )
    .await;
    assert!(
        text_of(&gone).contains("error [not_found]"),
        "{}",
        text_of(&gone)
    );
    client.cancel().await.unwrap();
}

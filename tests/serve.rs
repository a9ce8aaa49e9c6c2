//! `sandlot serve`, the HTTP/JSON API, driven over real HTTP: tokens, sessions across
//! requests, output streamed as server-sent events, idle expiry and shutdown that
//! leave no container, 50 concurrent clients.
//!
//! Needs the Python runtime installed and Docker with sandlot's images
//! (`tests/run.sh` does both); without them, the tests that need them pass without
//! running and the suite says so (`support::needs`); CI fails them instead.

mod support;

use futures_util::StreamExt;
use serde_json::{json, Value};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::needs::{needs, Need};

/// Whether the Python runtime of the wasm backend is here (see `support::needs`): a
/// test of sessions on wasm passes without running where it is not, and fails in CI.
fn wasm() -> bool {
    needs(&[Need::Runtime("python")])
}

/// Whether Docker with sandlot's images is here, as [`wasm`] asks of the runtime.
fn docker() -> bool {
    needs(&[Need::Backend("docker")])
}

const ALICE: &str = "alice-0123456789abcdef0123456789";
const BOB: &str = "bob-fedcba9876543210fedcba98765";

/// A running `sandlot serve` with Alice's and Bob's tokens, stopped on drop.
struct Server {
    child: Child,
    url: String,
    /// What it logged after its first line.
    said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        Server::spawn(extra, true, &[])
    }

    /// With Alice's and Bob's tokens, or with none (then on loopback, unauthenticated).
    fn spawn(extra: &[&str], tokens: bool, env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sandlot"));
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_LOG", "sandlot=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if tokens {
            command.env("SANDLOT_API_TOKENS", format!("alice:{ALICE},bob:{BOB}"));
        } else {
            command.env_remove("SANDLOT_API_TOKENS");
        }
        let mut child = command.spawn().unwrap();
        let mut said = std::io::BufReader::new(child.stderr.take().unwrap());
        // What it says before its address (code mode's tools) is passed over.
        let url = support::address_after(&mut said, "http://");
        // The rest of what it says is kept, and read to the end so its writes never
        // fail.
        let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keeping = kept.clone();
        std::thread::spawn(move || {
            for line in said.lines().map_while(Result::ok) {
                keeping.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            url,
            said: kept,
        }
    }

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// SIGTERM, then a clean exit.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let started = Instant::now();
        loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                assert!(exit.success(), "{exit}");
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "serve did not stop"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn get(url: &str, token: &str) -> Value {
    client()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn post(url: &str, token: &str, body: Value) -> (u16, Value) {
    send(client().post(url), token, body).await
}

async fn put(url: &str, token: &str, body: Value) -> (u16, Value) {
    send(client().put(url), token, body).await
}

/// `request` with `token` and the JSON `body`; the status and the JSON answer.
async fn send(request: reqwest::RequestBuilder, token: &str, body: Value) -> (u16, Value) {
    let response = request.bearer_auth(token).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Asks for a snapshot of session `id` as the holder of `token`; the status and answer.
async fn take_snapshot(server: &Server, token: &str, id: &str) -> (u16, Value) {
    post(
        &server.at(&format!("/v1/sessions/{id}/snapshot")),
        token,
        json!({}),
    )
    .await
}

/// What `/metrics` says now.
async fn metrics(server: &Server) -> String {
    client()
        .get(server.at("/metrics"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The container of a Docker session: its hostname is the container id's start.
async fn container_of(server: &Server, token: &str, id: &str) -> String {
    let (status, run) = post(
        &server.at(&format!("/v1/sessions/{id}/shell")),
        token,
        json!({ "command": "hostname" }),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    run["stdout"].as_str().unwrap().trim().to_string()
}

fn wait_gone(container: &str) {
    let started = Instant::now();
    while support::container_exists(container) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "container {container} left behind"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test]
async fn health_is_open_and_every_other_route_needs_a_valid_token() {
    // The languages listed are those a backend here runs: Python, on wasm.
    if !wasm() {
        return;
    }
    let server = Server::start(&[]);
    let health = client().get(server.at("/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    let bare = client()
        .get(server.at("/v1/languages"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 401);
    assert_eq!(bare.headers()["www-authenticate"], "Bearer");
    let error: Value = bare.json().await.unwrap();
    assert_eq!(error["error"]["kind"], "unauthorized");
    let wrong = client()
        .get(server.at("/v1/languages"))
        .bearer_auth("alice-0123456789abcdef012345678X")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let languages = get(&server.at("/v1/languages"), ALICE).await;
    let ids: Vec<&str> = languages["languages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"python"), "{ids:?}");

    let (status, refused) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": "python", "backend": "docker", "network": "on" }),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("policy.network"),
        "{refused}"
    );
    let (status, bad) = post(&server.at("/v1/sessions"), ALICE, json!({ "lang": "x" })).await;
    assert_eq!(status, 422, "{bad}");
    assert_eq!(bad["error"]["kind"], "invalid_input");

    let huge = client()
        .put(server.at("/v1/sessions/s-none/files/big.bin"))
        .bearer_auth(ALICE)
        .body(vec![0u8; sandlot::server::serve::MAX_BODY + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), 413);
}

#[tokio::test]
async fn secrets_reach_the_code_and_come_back_masked() {
    if !wasm() {
        return;
    }
    // The operator's secret, which clients never see, and one a client sends.
    let server = Server::spawn(
        &["--secret", "SANDLOT_TEST_OPERATOR_KEY"],
        true,
        &[("SANDLOT_TEST_OPERATOR_KEY", "op-key-77aa11")],
    );
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": "python", "backend": "wasm", "secrets": { "DB_PASSWORD": "pw-31337-secret" } }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap();
    let (status, run) = post(
        &server.at(&format!("/v1/sessions/{id}/run")),
        ALICE,
        json!({ "code": "import os\nprint('pw:', os.environ['DB_PASSWORD'], os.environ['SANDLOT_TEST_OPERATOR_KEY'])" }),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["stdout"], "pw: *** ***\n");

    let (status, one_off) = post(
        &server.at("/v1/run"),
        ALICE,
        json!({ "language": "python", "backend": "wasm", "secrets": { "T": "abcdefgh" },
                "code": "import os; print(os.environ['T'])" }),
    )
    .await;
    assert_eq!(
        (status, &one_off["stdout"]),
        (200, &json!("***\n")),
        "{one_off}"
    );

    let (status, refused) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": "python", "backend": "wasm", "secrets": { "PIN": "123" } }),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PIN"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_session_lives_across_requests_and_belongs_to_its_token() {
    if !wasm() {
        return;
    }
    let server = Server::start(&[]);
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": "python", "backend": "wasm" }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap().to_string();
    let run = |code: &'static str, token: &'static str| {
        let url = server.at(&format!("/v1/sessions/{id}/run"));
        async move { post(&url, token, json!({ "code": code })).await }
    };
    assert_eq!(run("x = 5", ALICE).await.0, 200);
    let (status, doubled) = run("print(x * 2)", ALICE).await;
    assert_eq!(status, 200);
    assert_eq!(doubled["stdout"], "10\n");
    assert_eq!(doubled["schema"], sandlot::execution::EXECUTION_SCHEMA);

    let (status, stolen) = run("print(x)", BOB).await;
    assert_eq!(status, 404, "{stolen}");
    let listed = get(&server.at("/v1/sessions"), BOB).await;
    assert_eq!(listed["sessions"], json!([]));

    let upload = client()
        .put(server.at(&format!("/v1/sessions/{id}/files/data/in.csv")))
        .bearer_auth(ALICE)
        .body("a,b\n1,2\n")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 200);
    let (_, read) = run(
        "import csv\nrows = list(csv.reader(open('data/in.csv')))\nopen('output/n.txt', 'w').write(str(len(rows)))\nprint(rows[1])",
        ALICE,
    )
    .await;
    assert_eq!(read["stdout"], "['1', '2']\n", "{read}");
    let file = client()
        .get(server.at(&format!("/v1/sessions/{id}/files/output/n.txt")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(file.status(), 200);
    assert_eq!(file.text().await.unwrap(), "2");

    let closed = client()
        .delete(server.at(&format!("/v1/sessions/{id}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    let (status, late) = run("print(x)", ALICE).await;
    assert_eq!(status, 404);
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it was closed"),
        "{late}"
    );

    // The server logged the session's life, by id and client.
    // Read off its stderr by another thread: give it a moment.
    let waited = Instant::now();
    let logged = loop {
        let logged = server.said.lock().unwrap().join("\n");
        if logged.contains("session closed") || waited.elapsed() > Duration::from_secs(10) {
            break logged;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for event in ["session opened", "session closed"] {
        assert!(
            logged.lines().any(|l| l.contains(event) && l.contains(&id)),
            "no `{event}` for {id} in:\n{logged}"
        );
    }
    // Each run in a span of its session.
    assert!(
        logged
            .lines()
            .any(|l| l.contains(&format!("session{{id={id}"))
                && l.contains(":run: ")
                && l.contains("run finished")),
        "no run of {id} in its session's span:\n{logged}"
    );
    assert!(logged.contains("client=alice"), "{logged}");
}

#[tokio::test]
async fn output_streams_as_server_sent_events_while_the_code_runs() {
    if !docker() {
        return;
    }
    let server = Server::start(&[]);
    let (_, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": "python", "backend": "docker" }),
    )
    .await;
    let id = opened["id"].as_str().unwrap();
    let response = client()
        .post(server.at(&format!("/v1/sessions/{id}/run")))
        .bearer_auth(ALICE)
        .header("accept", "text/event-stream")
        .json(&json!({
            "code": "import sys, time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second', file=sys.stderr)"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    // (event, data, when it arrived)
    let mut events: Vec<(String, Value, Instant)> = Vec::new();
    while let Some(chunk) = stream.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        let now = Instant::now();
        events.extend(
            take_events(&mut buffer)
                .into_iter()
                .map(|(name, data)| (name, data, now)),
        );
        if events.iter().any(|(n, _, _)| n == "result" || n == "error") {
            break;
        }
    }
    let names: Vec<&str> = events.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"stdout"), "{names:?}");
    assert_eq!(names.last(), Some(&"result"), "{names:?}");
    assert!(names.contains(&"stderr"), "{names:?}");
    // A write may come in pieces; together they are what the code printed.
    let streamed: String = events
        .iter()
        .filter(|(n, _, _)| n == "stdout")
        .map(|(_, data, _)| data["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "first\n");
    let (_, result, finished) = events.last().unwrap();
    assert_eq!(result["stdout"], "first\n");
    assert_eq!(result["stderr"], "second\n");
    // The first line came while the code still slept, not with the result.
    assert!(
        finished.duration_since(events[0].2) > Duration::from_secs(1),
        "the output came all at once"
    );
}

/// The server-sent events complete in `buffer` (taken out of it): name and data.
fn take_events(buffer: &mut String) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    while let Some(end) = buffer.find("\n\n") {
        let block: String = buffer.drain(..end + 2).collect();
        let mut name = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                name = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
        if !name.is_empty() {
            events.push((name, serde_json::from_str(&data).unwrap()));
        }
    }
    events
}

/// Client-side tools: Alice declares a tool when she opens a session; each call of it
/// comes as a `tool_call` event of the streamed run, she posts the result and the code
/// goes on with it. Bob cannot answer for her; a call nobody answers ends at the tool
/// timeout, and the code gets `ToolTimeout`; a run that is not streamed is told how.
#[tokio::test]
async fn client_tools_are_called_through_the_stream_and_answered_by_their_client() {
    if !wasm() {
        return;
    }
    let server = Server::start(&["--tool-timeout", "2"]);
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({
            "language": "python",
            "backend": "wasm",
            "tools": [{
                "name": "lookup",
                "description": "The word for a key.",
                "input_schema": {"type": "object", "properties": {"key": {"type": "string"}},
                                 "required": ["key"]}
            }]
        }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap().to_string();
    let code = "import sandlot_tools as t\nfor key in ['a', 'b', 'c', 'silent']:\n    try:\n        print(key, t.lookup(key=key))\n    except t.ToolError as e:\n        print(key, type(e).__name__)\n";
    let response = client()
        .post(server.at(&format!("/v1/sessions/{id}/run")))
        .bearer_auth(ALICE)
        .header("accept", "text/event-stream")
        .json(&json!({ "code": code }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut result = Value::Null;
    let mut calls = Vec::new();
    'reading: while let Some(chunk) = stream.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        for (name, data) in take_events(&mut buffer) {
            match name.as_str() {
                "tool_call" => {
                    assert_eq!(data["name"], "lookup", "{data}");
                    let call = data["id"].as_str().unwrap().to_string();
                    let key = data["arguments"]["key"].as_str().unwrap().to_string();
                    calls.push(key.clone());
                    let answer_at = server.at(&format!("/v1/sessions/{id}/tool_calls/{call}"));
                    if key == "silent" {
                        continue;
                    }
                    let (stolen, _) = post(&answer_at, BOB, json!({ "value": "bob's" })).await;
                    assert_eq!(stolen, 404, "Bob answered Alice's call");
                    let answer = match key.as_str() {
                        "c" => json!({ "error": "no word for c" }),
                        _ => json!({ "value": key.to_uppercase() }),
                    };
                    let (status, body) = post(&answer_at, ALICE, answer).await;
                    assert_eq!(status, 204, "{body}");
                }
                "result" | "error" => {
                    result = data;
                    break 'reading;
                }
                _ => {}
            }
        }
    }
    assert_eq!(calls, ["a", "b", "c", "silent"]);
    assert_eq!(
        result["stdout"], "a A\nb B\nc ToolError\nsilent ToolTimeout\n",
        "{result}"
    );
    let outcomes: Vec<&str> = result["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "ok", "tool_error", "timeout"]);
    assert_eq!(result["tool_calls"][2]["message"], "no word for c");

    // The run is over: no call of it waits any more.
    let (late, body) = post(
        &server.at(&format!("/v1/sessions/{id}/tool_calls/call_1")),
        ALICE,
        json!({ "value": 1 }),
    )
    .await;
    assert_eq!(late, 404, "{body}");
    // Not streamed, a call has nobody to go to, and the code is told so.
    let (_, plain) = post(
        &server.at(&format!("/v1/sessions/{id}/run")),
        ALICE,
        json!({ "code": "import sandlot_tools as t\ntry:\n    t.lookup(key='a')\nexcept t.ToolError as e:\n    print(e)" }),
    )
    .await;
    assert!(
        plain["stdout"]
            .as_str()
            .unwrap()
            .contains("text/event-stream"),
        "{plain}"
    );
    // Every call is counted, and so is every failed one.
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains("sandlot_tool_calls_total 5\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sandlot_tool_call_failures_total 3\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_idle_session_expires_and_leaves_no_container() {
    if !docker() {
        return;
    }
    let server = Server::start(&["--idle-timeout", "2"]);
    let (_, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": "python", "backend": "docker" }),
    )
    .await;
    let id = opened["id"].as_str().unwrap().to_string();
    assert_eq!(opened["idle_timeout_seconds"], 2.0);
    let container = container_of(&server, ALICE, &id).await;
    assert!(support::container_exists(&container));
    tokio::task::spawn_blocking(move || wait_gone(&container))
        .await
        .unwrap();
    let (status, late) = post(
        &server.at(&format!("/v1/sessions/{id}/run")),
        ALICE,
        json!({ "code": "print(1)" }),
    )
    .await;
    assert_eq!(status, 404);
    assert!(
        late["error"]["message"].as_str().unwrap().contains("idle"),
        "{late}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_clients_all_get_their_answer_and_nothing_stays_open() {
    if !wasm() {
        return;
    }
    // Fifty wasm sessions may hold 100 GiB (their memory and workspaces): more than
    // the machine's own budget admits at once.
    let server = Server::start(&[
        "--max-sessions-per-client",
        "25",
        "--memory-budget",
        "131072",
    ]);
    let url = server.at("/v1/run");
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                let token = if i % 2 == 0 { ALICE } else { BOB };
                post(
                    &url,
                    token,
                    json!({ "language": "python", "backend": "wasm", "code": format!("print({i} * 2)") }),
                )
                .await
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let (status, run) = task.await.unwrap();
        assert_eq!(status, 200, "client {i}: {run}");
        assert_eq!(run["stdout"], format!("{}\n", i * 2), "client {i}");
    }
    let metrics = metrics(&server).await;
    assert!(metrics.contains("sandlot_sessions_open 0\n"), "{metrics}");
    assert!(metrics.contains("sandlot_runs_total 50\n"), "{metrics}");
    assert!(
        metrics.contains("sandlot_run_failures_total 0\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn stopping_the_server_with_sessions_open_leaves_no_container() {
    if !docker() {
        return;
    }
    let mut server = Server::start(&[]);
    let mut containers = Vec::new();
    for token in [ALICE, BOB] {
        let (status, opened) = post(
            &server.at("/v1/sessions"),
            token,
            json!({ "language": "python", "backend": "docker" }),
        )
        .await;
        assert_eq!(status, 201, "{opened}");
        containers.push(container_of(&server, token, opened["id"].as_str().unwrap()).await);
    }
    tokio::task::spawn_blocking(move || {
        server.stop();
        for container in &containers {
            assert!(
                !support::container_exists(container),
                "{container} outlived the server"
            );
        }
    })
    .await
    .unwrap();
}

#[test]
fn without_tokens_it_serves_on_loopback_only_and_says_so() {
    let out = Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("SANDLOT_API_TOKENS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("not a loopback address"), "{said}");

    let mut open = Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("SANDLOT_API_TOKENS")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(open.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = open.kill();
    let _ = open.wait();
    assert!(line.contains("WITHOUT AUTHENTICATION"), "{line}");

    let short = Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("SANDLOT_API_TOKENS", "me:short")
        .output()
        .unwrap();
    assert!(!short.status.success());
    assert!(
        String::from_utf8_lossy(&short.stderr).contains("shorter than 16"),
        "{}",
        String::from_utf8_lossy(&short.stderr)
    );
}

/// Without tokens the loopback address is the only guard, and a web page can reach
/// it too: by a name of its own that resolves to 127.0.0.1 (DNS rebinding), or by a
/// cross-site request. Both are refused by their `Host` or `Origin`.
#[tokio::test]
async fn without_tokens_a_foreign_host_or_origin_is_refused() {
    let mut server = Server::spawn(&[], false, &[]);
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let languages = server.at("/v1/languages");
    let ask = |host: Option<String>, origin: Option<&str>| {
        let mut request = client().get(&languages);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let answer = ask(Some(host.clone()), None).await.unwrap();
        assert_eq!(answer.status(), 200, "{host}");
    }
    let same_origin = format!("http://127.0.0.1:{port}");
    let answer = ask(None, Some(&same_origin)).await.unwrap();
    assert_eq!(answer.status(), 200, "the playground's own requests");
    for (host, origin) in [
        (Some(format!("rebind.evil.example:{port}")), None),
        (None, Some("http://evil.example")),
        (None, Some("null")),
    ] {
        let answer = ask(host.clone(), origin).await.unwrap();
        assert_eq!(answer.status(), 403, "{host:?} {origin:?}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["kind"], "forbidden_origin", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("this machine"),
            "{body}"
        );
    }
    // Running code the same way is refused too.
    let run = client()
        .post(server.at("/v1/run"))
        .header("host", format!("rebind.evil.example:{port}"))
        .json(&json!({ "language": "python", "code": "print(1)" }))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 403);
    server.stop();
}

/// The playground page in a real headless browser (Debian's chromium, driven by
/// Selenium from `tests/playground_browser.py`): prints, plots, keeps a session, and
/// shows tool calls as they happen.
#[test]
fn the_playground_runs_python_in_a_real_browser() {
    if !needs(&[
        Need::Browser,
        Need::UpstreamMcpServers,
        Need::Runtime("python"),
    ]) {
        return;
    }
    assert!(
        std::path::Path::new("/usr/bin/chromedriver").exists(),
        "the browser test needs chromium and chromium-driver: run tests/run.sh"
    );
    // Without tokens, on loopback: the page needs none then.
    let server = Server::spawn(&[], false, &[]);
    let browse = |args: &[&str]| support::run_client_script("playground_browser.py", args);
    let said = browse(&[&server.at("/")]);
    drop(server);
    assert!(said.contains("ok: the browser decoded the image"), "{said}");
    assert!(said.contains("ok: the session kept the variable"), "{said}");

    // Code mode: the tools of an upstream MCP server no one here wrote; the page
    // lists each call as it ends, while the run goes on.
    let (time, _) = support::upstream_mcp_servers();
    let upstream = format!("time={time} --local-timezone UTC");
    let server = Server::spawn(&["--upstream", &upstream], false, &[]);
    let said = browse(&[&server.at("/"), "--tools"]);
    drop(server);
    assert!(
        said.contains("ok: the calls are listed while the run goes on"),
        "{said}"
    );
    assert!(said.contains("ok: a refused call says why"), "{said}");

    // With tokens: the page is public, the API is not until the token is entered.
    let server = Server::spawn(&[], true, &[]);
    let (policy, page) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let page = client().get(server.at("/")).send().await.unwrap();
        let policy = page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        (policy, page.text().await.unwrap())
    });
    assert!(
        policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"),
        "{policy}"
    );
    assert!(
        !page.contains("<script>") && !page.contains("<style>"),
        "inline code: {page}"
    );
    let said = browse(&[&server.at("/"), ALICE]);
    drop(server);
    assert!(said.contains("ok: the indented code runs"), "{said}");
}

/// The OpenAPI document is served without a token and lists exactly what the server
/// answers: every operation it names is routed (no 404 "no_route", no 405), and the
/// public ones need no token.
#[tokio::test]
async fn the_openapi_document_describes_the_routes_the_server_has() {
    let server = Server::start(&[]);
    let document: Value = client()
        .get(server.at("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    let schemas = &document["components"]["schemas"];
    for name in [
        "OpenSession",
        "ToolResult",
        "RunOnce",
        "SessionRun",
        "SessionInfo",
        "Execution",
        "Error",
    ] {
        assert!(schemas[name].is_object(), "no schema {name}");
    }
    assert_eq!(
        schemas["RunOnce"]["required"],
        json!(["language", "code"]),
        "generated from the type: {}",
        schemas["RunOnce"]
    );
    assert!(
        schemas["OpenSession"]["properties"]["tools"].is_object(),
        "the tools a client answers: {}",
        schemas["OpenSession"]
    );
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.len() >= 10, "{paths:?}");
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            operations += 1;
            let url = server.at(&path
                .replace("{id}", "s-none")
                .replace("{path}", "x.txt")
                .replace("{call}", "call_1"));
            let public = operation["security"] == json!([]);
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let mut request = client().request(method.clone(), &url);
            if !public {
                request = request.bearer_auth(ALICE);
            }
            if method == reqwest::Method::POST {
                request = request.json(&json!({}));
            }
            let answer = request.send().await.unwrap();
            let status = answer.status().as_u16();
            let body: Value = answer.json().await.unwrap_or(Value::Null);
            assert_ne!(status, 405, "{method} {path} is not routed");
            assert_ne!(
                body["error"]["kind"], "no_route",
                "{method} {path} is documented but not routed"
            );
            assert_ne!(status, 401, "{method} {path}: {body}");
        }
    }
    assert!(operations >= 12, "{operations} operations");
}

#[tokio::test]
async fn tokens_also_come_from_the_configs_tokens_file() {
    let dir = tempfile::tempdir().unwrap();
    let carol = "carol-0123456789abcdef0123456789";
    std::fs::write(
        dir.path().join("tokens"),
        format!("# who may call\ncarol:{carol}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("sandlot.toml"),
        "[serve]\ntokens_file = \"tokens\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.path().join("tokens"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let config = dir.path().join("sandlot.toml");
    let server = Server::start(&["--config", config.to_str().unwrap()]);
    for (token, status) in [
        (carol, 200),
        (ALICE, 200),
        ("carol-not-the-right-one-at-all", 401),
    ] {
        let answer = client()
            .get(server.at("/v1/sessions"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), status, "{token}");
    }
}

/// A server with Alice's and Bob's tokens whose wasm pool holds one sandbox and fails
/// fast, and whose policy blocks high findings; with `env`. The directory holds its
/// configuration.
fn with_a_pool_of_one_and_high_findings_blocked(
    env: &[(&str, &str)],
) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sandlot.toml");
    std::fs::write(
        &config,
        "[pool.wasm]\nmin_idle = 0\nmax_size = 1\nwhen_exhausted = \"fail-fast\"\n",
    )
    .unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "block_at = \"high\"\n").unwrap();
    let server = Server::spawn(
        &[
            "--config",
            config.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
        true,
        env,
    );
    (dir, server)
}

/// A run the gate refuses, a language the server does not have and a full pool each
/// answer with a status a client can act on and a stable `kind`; only the full pool
/// says to try again, and when.
#[tokio::test]
async fn refusals_answer_with_their_own_status_and_kind() {
    if !wasm() {
        return;
    }
    let (_dir, server) = with_a_pool_of_one_and_high_findings_blocked(&[]);
    let python = json!({ "language": "python", "backend": "wasm" });

    let mut blocked_run = python.clone();
    blocked_run["code"] = json!("import os\nos.system('id')");
    let (status, blocked) = post(&server.at("/v1/run"), ALICE, blocked_run).await;
    assert_eq!(status, 422, "{blocked}");
    assert_eq!(blocked["error"]["kind"], "blocked", "{blocked}");
    assert_eq!(blocked["error"]["retryable"], false, "{blocked}");
    assert!(
        blocked["error"]["message"]
            .as_str()
            .unwrap()
            .contains("python.os-command"),
        "{blocked}"
    );

    let (status, unknown) = post(
        &server.at("/v1/run"),
        ALICE,
        json!({ "language": "cobol", "code": "DISPLAY 'x'." }),
    )
    .await;
    assert_eq!(status, 422, "{unknown}");
    assert_eq!(unknown["error"]["kind"], "not_found", "{unknown}");

    let (status, first) = post(&server.at("/v1/sessions"), ALICE, python.clone()).await;
    assert_eq!(status, 201, "{first}");
    let full = client()
        .post(server.at("/v1/sessions"))
        .bearer_auth(ALICE)
        .json(&python)
        .send()
        .await
        .unwrap();
    assert_eq!(full.status(), 429);
    assert_eq!(
        full.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let full: Value = full.json().await.unwrap();
    assert_eq!(full["error"]["kind"], "exhausted", "{full}");
    assert_eq!(full["error"]["retryable"], true, "{full}");

    // Once the first session closes, its sandbox goes back and another opens.
    let id = first["id"].as_str().unwrap();
    let closed = client()
        .delete(server.at(&format!("/v1/sessions/{id}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, again) = post(&server.at("/v1/sessions"), ALICE, python.clone()).await;
        if status == 201 {
            break;
        }
        assert_eq!(status, 429, "{again}");
        assert!(
            Instant::now() < deadline,
            "the pool never took its sandbox back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every row of the error table in docs/servers.md, provoked over HTTP: the status, a
/// kind the row names, and the one JSON shape, whatever the status. (410 needs a
/// sandbox lost under a session and 500 a failure of sandlot itself: their kinds'
/// rows are checked by the unit tests of the server's routes.)
#[tokio::test]
async fn every_row_of_the_error_table_is_what_the_server_answers() {
    if !wasm() {
        return;
    }
    let (_dir, server) = with_a_pool_of_one_and_high_findings_blocked(&[(
        "DOCKER_HOST",
        "unix:///nonexistent/docker.sock",
    )]);
    let request = |method: reqwest::Method, path: &str| {
        client().request(method, server.at(path)).bearer_auth(ALICE)
    };
    // The status, the kind and the body of what the server answers to `request`, whose
    // body must have the API's one error shape.
    let answer = |request: reqwest::RequestBuilder| async move {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status} is not JSON: {text}"));
        let error = &body["error"];
        assert!(
            error["kind"].is_string()
                && error["message"].is_string()
                && error["retryable"].is_boolean(),
            "{status}: {body}"
        );
        (status, error["kind"].as_str().unwrap().to_string(), body)
    };
    let python = json!({ "language": "python", "backend": "wasm" });
    let (status, opened) = post(&server.at("/v1/sessions"), ALICE, python.clone()).await;
    assert_eq!(status, 201, "{opened}");
    let session = format!("/v1/sessions/{}", opened["id"].as_str().unwrap());

    use reqwest::Method;
    let post_json = |path: &str, body: Value| request(Method::POST, path).json(&body);
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            request(Method::POST, "/v1/run")
                .header("content-type", "application/json")
                .body("{"),
            400,
            "invalid_input",
        ),
        (
            client().get(server.at("/v1/languages")),
            401,
            "unauthorized",
        ),
        (
            post_json(
                "/v1/sessions",
                json!({ "language": "python", "network": "on" }),
            ),
            403,
            "not_allowed",
        ),
        (
            request(Method::GET, &format!("{session}/files/none.txt")),
            404,
            "not_found",
        ),
        (request(Method::GET, "/v2/nothing"), 404, "no_route"),
        (request(Method::GET, "/v1/run"), 405, "no_route"),
        (
            request(Method::PUT, &format!("{session}/files/big.bin")).body(vec![
                0u8;
                sandlot::server::serve::MAX_BODY
                    + 1
            ]),
            413,
            "invalid_input",
        ),
        (
            request(Method::POST, "/v1/run")
                .header("content-type", "text/plain")
                .body(r#"{"language":"python","code":"1"}"#),
            415,
            "invalid_input",
        ),
        (
            post_json(
                "/v1/run",
                json!({ "language": "python", "code": "1", "timout_seconds": 5 }),
            ),
            422,
            "invalid_input",
        ),
        (
            post_json(
                &format!("{session}/run"),
                json!({ "code": "1", "stdn": "x" }),
            ),
            422,
            "invalid_input",
        ),
        (
            post_json(
                &format!("{session}/run"),
                json!({ "code": "import os\nos.system('id')" }),
            ),
            422,
            "blocked",
        ),
        (
            post_json("/v1/run", json!({ "language": "cobol", "code": "x" })),
            422,
            "not_found",
        ),
        (
            post_json(&format!("{session}/shell"), json!({ "command": "ls" })),
            422,
            "unsupported",
        ),
        (post_json("/v1/sessions", python.clone()), 429, "exhausted"),
        (
            post_json(
                "/v1/run",
                json!({ "language": "python", "backend": "docker", "code": "1" }),
            ),
            503,
            "unavailable",
        ),
    ];
    let mut answered = Vec::new();
    for (request, status, kind) in cases {
        let (got, got_kind, body) = answer(request).await;
        assert_eq!((got, got_kind.as_str()), (status, kind), "{body}");
        answered.push((got, got_kind, body));
    }
    // A misspelt field is named; the shell refusal speaks of backends, not of the
    // library's types.
    let message = |status: u16, kind: &str| {
        answered
            .iter()
            .filter(|(s, k, _)| (*s, k.as_str()) == (status, kind))
            .map(|(_, _, body)| body["error"]["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(message(422, "invalid_input").contains("timout_seconds"));
    assert!(message(422, "invalid_input").contains("stdn"));
    assert!(!message(422, "unsupported").contains("Capability::"));

    // The listing offers what can run now, and says in a line why the rest cannot.
    let listing = get(&server.at("/v1/languages"), ALICE).await;
    let python = listing["languages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == "python")
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(
        python["backends"]
            .as_array()
            .unwrap()
            .contains(&json!("wasm")),
        "{listing}"
    );
    assert_eq!(python["runs_with"]["wasm"], "CPython 3.15.0", "{listing}");
    assert!(
        !listing["backends"]
            .as_array()
            .unwrap()
            .contains(&json!("docker")),
        "{listing}"
    );
    let docker = listing["unavailable"]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "docker")
        .unwrap_or_else(|| panic!("{listing}"));
    let why = docker["why"].as_str().unwrap();
    assert!(
        why.contains("not running") && !why.contains("dockerd") && why.len() < 80,
        "{why}"
    );

    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/servers.md"
    ))
    .unwrap();
    let rows: Vec<&str> = docs
        .lines()
        .filter(|line| {
            line.len() > 6
                && line.starts_with("| ")
                && line[2..5].bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    assert!(rows.len() >= 12, "{rows:?}");
    for row in rows {
        let status: u16 = row[2..5].parse().unwrap();
        if matches!(status, 410 | 500) {
            continue;
        }
        let kinds = answered
            .iter()
            .filter(|(s, _, _)| *s == status)
            .map(|(_, k, _)| k)
            .collect::<Vec<_>>();
        assert!(
            !kinds.is_empty(),
            "no request above answers {status}: {row}"
        );
        for kind in kinds {
            assert!(
                row.contains(&format!("`{kind}`")),
                "{status} {kind} is not in its row: {row}"
            );
        }
    }
}

/// Runs `code` in session `id` of Alice's and returns what it printed, checking it
/// ran.
async fn alice_runs(server: &Server, id: &str, code: &str) -> String {
    let (status, run) = post(
        &server.at(&format!("/v1/sessions/{id}/run")),
        ALICE,
        json!({ "code": code }),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["exit_code"], 0, "{run}");
    run["stdout"].as_str().unwrap().to_string()
}

/// Alice's session of `language` on wasm, its id.
async fn alice_opens(server: &Server, language: &str) -> String {
    alice_opens_on(server, language, "wasm").await
}

/// Opens a session of `language` on `backend` as Alice; its id.
async fn alice_opens_on(server: &Server, language: &str, backend: &str) -> String {
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": language, "backend": backend }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    opened["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_snapshot_restores_after_a_restart_and_forks_go_their_own_ways() {
    use support::python_state as state;
    if !needs(&[Need::Runtime("python"), Need::Runtime("javascript")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().to_str().unwrap();
    // Thirteen wasm sessions at once, each counted at 2 GiB: more than the machine's
    // memory, the default budget.
    let flags = [
        "--state-dir",
        state_dir,
        "--max-sessions-per-client",
        "20",
        "--memory-budget",
        "131072",
    ];
    let mut server = Server::start(&flags);
    let id = alice_opens(&server, "python").await;
    alice_runs(&server, &id, state::BUILD).await;
    let (status, taken) = take_snapshot(&server, ALICE, &id).await;
    assert_eq!(status, 201, "{taken}");
    assert_eq!(
        (taken["memory"].as_bool(), taken["language"].as_str()),
        (Some(true), Some("python")),
        "{taken}"
    );
    let snapshot = taken["id"].as_str().unwrap().to_string();
    // What the session does after is not in the snapshot.
    alice_runs(&server, &id, "x = 'later'").await;

    // JavaScript's interpreter is snapshotted whole too, through its state access.
    let js = alice_opens(&server, "javascript").await;
    alice_runs(
        &server,
        &js,
        "const kept = { n: 40 };\nfunction bump() { return ++kept.n; }\nbump();",
    )
    .await;
    let (status, js_taken) = take_snapshot(&server, ALICE, &js).await;
    assert_eq!(
        (
            status,
            js_taken["memory"].as_bool(),
            js_taken["language"].as_str()
        ),
        (201, Some(true), Some("javascript")),
        "{js_taken}"
    );
    let js_snapshot = js_taken["id"].as_str().unwrap().to_string();

    server.stop();
    let server = Server::start(&flags);
    let listed = get(&server.at("/v1/snapshots"), ALICE).await;
    let ids: Vec<&str> = listed["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&snapshot.as_str()), "{listed}");
    // Another client's snapshot is as missing as one that never was.
    let (status, _) = post(
        &server.at(&format!("/v1/snapshots/{snapshot}/restore")),
        BOB,
        json!({}),
    )
    .await;
    assert_eq!(status, 404);

    let (status, restored) = post(
        &server.at(&format!("/v1/snapshots/{snapshot}/restore")),
        ALICE,
        json!({}),
    )
    .await;
    assert_eq!(status, 201, "{restored}");
    assert_eq!(restored["backend"], "wasm");
    let restored = restored["id"].as_str().unwrap().to_string();
    assert_eq!(
        alice_runs(&server, &restored, state::CHECK).await,
        state::SEEN
    );

    // Ten forks, each changing its copy; none sees another's change, nor the source.
    let (status, forked) = post(
        &server.at(&format!("/v1/sessions/{restored}/fork")),
        ALICE,
        json!({ "count": 10 }),
    )
    .await;
    assert_eq!(status, 201, "{forked}");
    let forks: Vec<String> = forked["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(forks.len(), 10);
    for (i, fork) in forks.iter().enumerate() {
        alice_runs(&server, fork, &state::mutate(i + 1)).await;
    }
    for (i, fork) in forks.iter().enumerate() {
        assert_eq!(
            alice_runs(&server, fork, state::SHOW).await,
            state::mutated(i + 1)
        );
    }
    assert_eq!(alice_runs(&server, &restored, state::SHOW).await, "40 6\n");

    // The JavaScript session comes back after the restart, and its forks diverge.
    let (status, js_restored) = post(
        &server.at(&format!("/v1/snapshots/{js_snapshot}/restore")),
        ALICE,
        json!({}),
    )
    .await;
    assert_eq!(status, 201, "{js_restored}");
    let js_restored = js_restored["id"].as_str().unwrap().to_string();
    assert_eq!(
        alice_runs(&server, &js_restored, "console.log(bump())").await,
        "42\n"
    );
    let (status, js_forked) = post(
        &server.at(&format!("/v1/sessions/{js_restored}/fork")),
        ALICE,
        json!({ "count": 2 }),
    )
    .await;
    assert_eq!(status, 201, "{js_forked}");
    let js_forks: Vec<String> = js_forked["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    for (i, fork) in js_forks.iter().enumerate() {
        alice_runs(&server, fork, &format!("kept.n = {}", 100 * (i + 1))).await;
    }
    for (i, fork) in js_forks.iter().enumerate() {
        assert_eq!(
            alice_runs(&server, fork, "console.log(bump())").await,
            format!("{}\n", 100 * (i + 1) + 1)
        );
    }
    assert_eq!(
        alice_runs(&server, &js_restored, "console.log(bump())").await,
        "43\n"
    );

    // A snapshot goes out whole and comes back checked: one flipped byte is refused.
    let bytes = client()
        .get(server.at(&format!("/v1/snapshots/{snapshot}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    assert_eq!(bytes.len() as u64, taken["bytes"].as_u64().unwrap());
    let upload = |body: Vec<u8>| {
        client()
            .post(server.at("/v1/snapshots"))
            .bearer_auth(ALICE)
            .body(body)
            .send()
    };
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x20;
    let answer = upload(flipped).await.unwrap();
    assert_eq!(answer.status(), 400);
    let refused: Value = answer.json().await.unwrap();
    assert_eq!(refused["error"]["kind"], "invalid_input", "{refused}");
    let answer = upload(bytes).await.unwrap();
    assert_eq!(answer.status(), 201);
    let copy: Value = answer.json().await.unwrap();
    let copy = copy["id"].as_str().unwrap();
    let deleted = client()
        .delete(server.at(&format!("/v1/snapshots/{copy}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
}

/// The files in a state directory's `paused/`.
fn paused_files(state: &std::path::Path) -> usize {
    std::fs::read_dir(state.join("paused"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Waits up to 20 s for session `id`'s `paused` to be `paused`.
async fn wait_paused(server: &Server, id: &str, paused: bool) {
    let started = Instant::now();
    loop {
        let listed = get(&server.at("/v1/sessions"), ALICE).await;
        let now = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .map(|s| s["paused"].as_bool());
        if now == Some(Some(paused)) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{id} not paused={paused}: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_idle_session_pauses_resumes_and_outlives_a_restart() {
    use support::python_state as state;
    if !wasm() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().to_str().unwrap();
    let flags = [
        "--state-dir",
        state_dir,
        "--pause-after",
        "2",
        "--idle-timeout",
        "60",
    ];
    let mut server = Server::start(&flags);
    let id = alice_opens(&server, "python").await;
    alice_runs(&server, &id, state::BUILD).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    wait_paused(&server, &id, true).await;
    assert_eq!(paused_files(dir.path()), 2, "the snapshot and its record");
    assert_eq!(alice_runs(&server, &id, state::CHECK).await, state::SEEN);
    assert_eq!(
        paused_files(dir.path()),
        0,
        "a resumed session's state leaves the disk"
    );
    alice_runs(&server, &id, "x = 41").await;

    // A restart: the session was paused on the way out, and is back.
    server.stop();
    let server = Server::start(&flags);
    wait_paused(&server, &id, true).await;
    assert_eq!(
        alice_runs(&server, &id, "print(x, b.v, open('notes.txt').read())").await,
        "41 82 kept\n"
    );
    drop(server);

    // A paused session that expires leaves nothing behind.
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().to_str().unwrap();
    let server = Server::start(&[
        "--state-dir",
        state_dir,
        "--pause-after",
        "1",
        "--idle-timeout",
        "5",
    ]);
    let id = alice_opens(&server, "python").await;
    alice_runs(&server, &id, "x = 1").await;
    wait_paused(&server, &id, true).await;
    assert_eq!(paused_files(dir.path()), 2);
    let started = Instant::now();
    while paused_files(dir.path()) > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "a paused session's state outlived it"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, late) = post(
        &server.at(&format!("/v1/sessions/{id}/run")),
        ALICE,
        json!({ "code": "print(x)" }),
    )
    .await;
    assert_eq!(status, 404, "{late}");
}

#[tokio::test]
async fn the_store_keeps_to_its_disk_limit() {
    if !wasm() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().to_str().unwrap();
    let server = Server::start(&[
        "--state-dir",
        state_dir,
        "--pause-after",
        "1",
        "--max-stored-bytes",
        "100000",
        "--max-stored-bytes-per-client",
        "100000",
    ]);
    let id = alice_opens(&server, "python").await;
    alice_runs(&server, &id, "x = 7").await;
    let (status, full) = take_snapshot(&server, ALICE, &id).await;
    assert_eq!(
        (status, full["error"]["kind"].as_str()),
        (429, Some("exhausted")),
        "{full}"
    );
    assert!(
        full["error"]["message"]
            .as_str()
            .unwrap()
            .contains("100000"),
        "{full}"
    );
    // Nor can it pause: the session stays open, its state in its sandbox.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let listed = get(&server.at("/v1/sessions"), ALICE).await;
    assert_eq!(listed["sessions"][0]["paused"], false, "{listed}");
    assert_eq!(alice_runs(&server, &id, "print(x)").await, "7\n");
    assert_eq!(paused_files(dir.path()), 0);
    assert_eq!(
        std::fs::read_dir(dir.path().join("snapshots"))
            .unwrap()
            .count(),
        0
    );
}

/// Snapshots on their way in share the store's room with what it holds: while one
/// upload holds most of it, a second that would overrun it is refused as it
/// arrives, instead of each being streamed to the disk up to the whole store's size.
#[tokio::test]
async fn uploads_under_way_share_the_stores_room() {
    let server = Server::start(&[
        "--max-stored-bytes",
        "1000000",
        "--max-stored-bytes-per-client",
        "1000000",
    ]);
    let (sender, chunks) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let slow = futures_util::stream::unfold(chunks, |mut chunks| async move {
        let chunk = chunks.recv().await?;
        Some((Ok::<_, std::io::Error>(chunk), chunks))
    });
    let first = tokio::spawn(
        client()
            .post(server.at("/v1/snapshots"))
            .bearer_auth(ALICE)
            .body(reqwest::Body::wrap_stream(slow))
            .send(),
    );
    sender.send(vec![0; 700_000]).await.unwrap();
    // The first upload's bytes have reached the server and hold their room.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let whole = || {
        client()
            .post(server.at("/v1/snapshots"))
            .bearer_auth(ALICE)
            .body(vec![0u8; 700_000])
            .send()
    };
    let second = whole().await.unwrap();
    let status = second.status().as_u16();
    let refused: Value = second.json().await.unwrap();
    assert_eq!(
        (status, refused["error"]["kind"].as_str()),
        (429, Some("exhausted")),
        "{refused}"
    );
    // The first ends; what it sent is not a snapshot, and its room comes back.
    drop(sender);
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status().as_u16(), 400);
    let third = whole().await.unwrap();
    assert_eq!(third.status().as_u16(), 400, "{:?}", third.text().await);
}

/// A secret's forms a client must not find anywhere: its text, and its text as JSON
/// writes it inside a string.
fn secret_forms(secret: &str) -> [String; 2] {
    let escaped = serde_json::to_string(secret).unwrap();
    [
        secret.to_string(),
        escaped[1..escaped.len() - 1].to_string(),
    ]
}

/// The operator's secret and a client's reach the code and never the client, by any
/// channel: not in a client tool's `tool_call` event (the code passed them as
/// arguments), not in the stream's `tool_call_end` records or result, not in
/// a downloaded snapshot (memory and files: the variables that held them hold stars
/// there), whose restored session still gets its secrets in its environment. Both
/// secrets hold a quote and letters outside ASCII, which JSON and the interpreter's
/// own strings keep in other forms.
#[tokio::test]
async fn secrets_reach_no_client_in_events_records_or_snapshots() {
    if !wasm() {
        return;
    }
    let operator = "op-\"kéy\"-0123456789";
    let mine = "db-ü\"pw\"-9876543210";
    let server = Server::spawn(
        &["--secret", "OPERATOR_KEY"],
        true,
        &[("OPERATOR_KEY", operator)],
    );
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({
            "language": "python",
            "backend": "wasm",
            "secrets": { "DB_PASSWORD": mine },
            "tools": [{
                "name": "lookup",
                "description": "The word for a key.",
                "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}}
            }]
        }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap().to_string();
    let code = r#"import os, sandlot_tools as t
for name in ['OPERATOR_KEY', 'DB_PASSWORD']:
    print(t.lookup(key=os.environ[name]))
held = (os.environ['OPERATOR_KEY'], os.environ['DB_PASSWORD'])
written = open('kept.txt', 'w').write(held[0] + held[1])
"#;
    let response = client()
        .post(server.at(&format!("/v1/sessions/{id}/run")))
        .bearer_auth(ALICE)
        .header("accept", "text/event-stream")
        .json(&json!({ "code": code }))
        .send()
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    let (mut buffer, mut raw) = (String::new(), String::new());
    let (mut asked, mut ended, mut result) = (Vec::new(), Vec::new(), Value::Null);
    'reading: while let Some(chunk) = stream.next().await {
        let text = String::from_utf8_lossy(&chunk.unwrap()).into_owned();
        raw.push_str(&text);
        buffer.push_str(&text);
        for (name, data) in take_events(&mut buffer) {
            match name.as_str() {
                "tool_call" => {
                    asked.push(data["arguments"]["key"].clone());
                    let call = data["id"].as_str().unwrap();
                    let at = server.at(&format!("/v1/sessions/{id}/tool_calls/{call}"));
                    let (status, _) = post(&at, ALICE, json!({ "value": "ok" })).await;
                    assert_eq!(status, 204);
                }
                "tool_call_end" => ended.push(data["name"].clone()),
                "result" | "error" => {
                    result = data;
                    break 'reading;
                }
                _ => {}
            }
        }
    }
    assert_eq!(asked, [json!("***"), json!("***")], "{raw}");
    assert_eq!(ended, [json!("lookup"), json!("lookup")], "{raw}");
    assert_eq!(result["stdout"], "ok\nok\n", "{result}");
    for secret in [operator, mine] {
        for form in secret_forms(secret) {
            assert!(!raw.contains(&form), "{form} is in the stream: {raw}");
        }
    }

    // A downloaded snapshot holds neither, in any form the interpreter keeps text in.
    let (status, taken) = take_snapshot(&server, ALICE, &id).await;
    assert_eq!(status, 201, "{taken}");
    let snapshot = taken["id"].as_str().unwrap().to_string();
    let bytes = client()
        .get(server.at(&format!("/v1/snapshots/{snapshot}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let find = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    for secret in [operator, mine] {
        let latin1: Vec<u8> = secret.chars().map(|c| c as u8).collect();
        let utf16: Vec<u8> = secret.encode_utf16().flat_map(u16::to_le_bytes).collect();
        for (form, needle) in [
            ("UTF-8", secret.as_bytes()),
            ("Latin-1", &latin1),
            ("UTF-16", &utf16),
        ] {
            assert!(!find(needle), "the snapshot holds {secret:?} in {form}");
        }
    }
    // Restored, the session has its secrets again, and the variables stars.
    let (status, restored) = post(
        &server.at(&format!("/v1/snapshots/{snapshot}/restore")),
        ALICE,
        json!({ "secrets": { "DB_PASSWORD": mine } }),
    )
    .await;
    assert_eq!(status, 201, "{restored}");
    let again = restored["id"].as_str().unwrap();
    let check = "import os\nenv = (os.environ['OPERATOR_KEY'], os.environ['DB_PASSWORD'])\n\
                 print([set(v) == {'*'} for v in held], env != held, '*' in env[0] + env[1])\n\
                 print(set(open('kept.txt').read()))";
    assert_eq!(
        alice_runs(&server, again, check).await,
        "[True, True] True False\n{'*'}\n"
    );
}

/// One client cannot fill the store for the others: each has a share of it, and a
/// snapshot past Alice's share is refused (with hers named) while Bob keeps his.
#[tokio::test]
async fn one_clients_snapshots_leave_the_others_their_share() {
    if !wasm() {
        return;
    }
    let server = Server::start(&["--max-stored-bytes-per-client", "300000000"]);
    let mut kept = 0;
    let refused = loop {
        let id = alice_opens(&server, "python").await;
        // About 100 MB of changed memory a snapshot.
        alice_runs(
            &server,
            &id,
            "blob = bytearray(100 << 20)\nblob[::4096] = b'x' * len(blob[::4096])",
        )
        .await;
        let (status, answer) = take_snapshot(&server, ALICE, &id).await;
        if status != 201 {
            break (status, answer);
        }
        kept += 1;
        assert!(
            kept < 5,
            "a share of 300 MB took {kept} snapshots of 100 MB"
        );
    };
    assert!(kept >= 1, "no snapshot fit the share");
    let (status, answer) = refused;
    assert_eq!(
        (status, answer["error"]["kind"].as_str()),
        (429, Some("exhausted")),
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("this client's share") && message.contains("300000000"),
        "{message}"
    );
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        BOB,
        json!({ "language": "python", "backend": "wasm" }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let bobs = opened["id"].as_str().unwrap();
    let (status, taken) = take_snapshot(&server, BOB, bobs).await;
    assert_eq!(status, 201, "Bob's snapshot was refused: {taken}");
}

/// What a session may hold of the host's memory counts against one budget the
/// operator sets: its memory cap and, on wasm, its workspace (a tmpfs the cap does
/// not count). With a budget of 1.5 GiB, sessions of 256 MiB and 512 MiB workspaces
/// take 768 MiB each: a third is refused until one closes.
#[tokio::test]
async fn sessions_are_admitted_within_the_memory_budget() {
    if !wasm() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "workdir_size = 536870912\n").unwrap();
    let server = Server::start(&[
        "--memory",
        "256",
        "--memory-budget",
        "1536",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let first = alice_opens(&server, "python").await;
    let _second = alice_opens(&server, "python").await;
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains(&format!(
            "sandlot_memory_held_bytes {}\n",
            2 * (768u64 << 20)
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("sandlot_memory_budget_bytes {}\n", 1536u64 << 20)),
        "{metrics}"
    );
    let (status, refused) = post(
        &server.at("/v1/sessions"),
        BOB,
        json!({ "language": "python", "backend": "wasm" }),
    )
    .await;
    assert_eq!(
        (status, refused["error"]["kind"].as_str()),
        (429, Some("exhausted")),
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("memory budget"),
        "{refused}"
    );
    let response = client()
        .delete(server.at(&format!("/v1/sessions/{first}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        BOB,
        json!({ "language": "python", "backend": "wasm" }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
}

/// The processes under `pid`, children first found, that are still there.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`: the command may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').map_or(0, |at| at + 2)..];
        if let Some(parent) = after.split(' ').nth(1).and_then(|p| p.parse().ok()) {
            parents.push((child, parent));
        }
    }
    let mut found = vec![pid];
    let mut at = 0;
    while at < found.len() {
        let parent = found[at];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        at += 1;
    }
    found.remove(0);
    found
}

/// No process the server starts holds what its environment holds: its clients'
/// tokens, the operator's secrets, whatever its shell gave it. Checked on every
/// process under a server with an upstream MCP server (code mode), wasm sandboxes in
/// a worker process, and a native sandbox (bubblewrap and the agent in it) running.
#[tokio::test]
async fn no_process_the_server_starts_holds_its_environment() {
    if !needs(&[
        Need::UpstreamMcpServers,
        Need::Runtime("python"),
        Need::Backend("native"),
    ]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = support::config_with_everything(dir.path(), "[wasm]\nworkers = 1\n", "");
    let canary = "canary-of-the-operators-shell";
    let operator = "operator-key-0123456789";
    let server = Server::spawn(
        &[
            "--config",
            config.to_str().unwrap(),
            "--secret",
            "OPERATOR_KEY",
        ],
        true,
        &[("OPERATOR_KEY", operator), ("SHELL_CANARY", canary)],
    );
    let wasm = alice_opens(&server, "python").await;
    assert_eq!(alice_runs(&server, &wasm, "print(1)").await, "1\n");
    let (status, opened) = post(
        &server.at("/v1/sessions"),
        ALICE,
        json!({ "language": "python", "backend": "native" }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let native = opened["id"].as_str().unwrap();
    assert_eq!(alice_runs(&server, native, "print(2)").await, "2\n");
    let processes = descendants(server.child.id());
    let (mut read, mut outside_seen) = (0, 0);
    for pid in &processes {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        read += 1;
        let environ = String::from_utf8_lossy(&environ).replace('\0', "\n");
        let command = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .replace('\0', " ");
        // A sandbox's code gets the operator's secret as its session's variable (the
        // session's, not the server's environment); nothing else of the server's.
        let outside = command.starts_with("node ") || command.contains("--sandlot-wasm-worker");
        outside_seen += usize::from(outside);
        let mut held = vec![canary, ALICE, BOB, "SANDLOT_API_TOKENS"];
        if outside {
            held.push(operator);
        }
        for held in held {
            assert!(
                !environ.contains(held),
                "process {pid} ({command}) holds {held}:\n{environ}"
            );
        }
    }
    // The upstream server, the worker, bubblewrap and the agent at least.
    assert!(
        read >= 4,
        "only {read} processes under the server: {processes:?}"
    );
    assert_eq!(
        outside_seen, 2,
        "the upstream server and the worker: {processes:?}"
    );
}

/// A client narrows its live session's request rules over `PUT
/// /v1/sessions/{id}/network`, and the code's next request meets them; it may not
/// drop the server's rules, widen a host the server confines or name a host the
/// allow-list does not hold, and such an update changes nothing.
#[tokio::test]
async fn a_client_narrows_its_sessions_request_rules_live() {
    if !needs(&[Need::Backend("native")]) {
        return;
    }
    let servers = support::EgressServers::start();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "network = \"allow-list\"\nallow = [\"localhost\", \"127.0.0.1/32\"]\n\
         requests = [\"GET localhost/ok/**\"]\n",
    )
    .unwrap();
    let server = Server::start(&["--policy", policy.to_str().unwrap()]);
    let id = alice_opens_on(&server, "python", "native").await;
    let network = server.at(&format!("/v1/sessions/{id}/network"));
    let code = servers.statuses_code(&["/ok/1", "/ok/secret/2"]);
    let statuses = |run: &Value| run["stdout"].as_str().unwrap_or_default().to_string();
    let run_url = server.at(&format!("/v1/sessions/{id}/run"));
    let (_, before) = post(&run_url, ALICE, json!({ "code": code })).await;
    assert_eq!(statuses(&before), "200 200\n", "{before}");

    for (rules, status, says) in [
        (json!([]), 403, "policy.requests"),
        (
            json!(["GET localhost/ok/**", "POST localhost/**"]),
            403,
            "policy.requests",
        ),
        (
            json!(["GET localhost/ok/**", "GET elsewhere.test"]),
            400,
            "elsewhere.test",
        ),
        (json!(["GET localhost/a/../b"]), 422, "segment"),
    ] {
        let (got, answer) = put(&network, ALICE, json!({ "requests": rules })).await;
        assert_eq!(got, status, "{rules}: {answer}");
        assert!(answer.to_string().contains(says), "{rules}: {answer}");
    }
    let narrower = json!(["GET localhost/ok/**", "deny localhost/ok/secret/**"]);
    let (status, answer) = put(&network, ALICE, json!({ "requests": narrower })).await;
    assert_eq!((status, &answer["requests"]), (200, &narrower), "{answer}");
    // Bob's token does not reach Alice's session.
    let (status, _) = put(&network, BOB, json!({ "requests": narrower })).await;
    assert_eq!(status, 404);

    let (_, after) = post(&run_url, ALICE, json!({ "code": code })).await;
    assert_eq!(statuses(&after), "200 403\n", "{after}");
    let denied = after["egress_denied"].to_string();
    assert!(denied.contains("deny localhost/ok/secret/**"), "{after}");
}

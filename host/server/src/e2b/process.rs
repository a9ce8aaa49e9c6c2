//! envd's `process.Process` service over Connect: commands started in a sandbox
//! (`Start`, streaming their output), listed, signalled, and reattached to
//! (`Connect`). A command runs in the sandbox's default session, through its
//! backend's shell, or, on a backend without one (wasm), as a program of its
//! interpreter ([`super::program`]).

use super::connect::{self, Code, ConnectError};
use super::program;
use super::sandboxes::{E2bSandbox, Process};
use super::E2b;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use base64::Engine as _;
use sandlot_core::backend::EndReason;
use sandlot_core::session::RunOptions;
use sandlot_core::Interrupt;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc};

pub(super) fn router(e2b: E2b) -> Router {
    Router::new()
        .route("/process.Process/Start", post(start))
        .route("/process.Process/Connect", post(reconnect))
        .route("/process.Process/List", post(list))
        .route("/process.Process/SendSignal", post(signal))
        .route("/process.Process/SendInput", post(unsupported_input))
        .route("/process.Process/StreamInput", post(unsupported_input))
        .route("/process.Process/CloseStdin", post(unsupported_input))
        .route("/process.Process/Update", post(unsupported_pty))
        .with_state(e2b)
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct ProcessConfig {
    cmd: String,
    args: Vec<String>,
    envs: BTreeMap<String, String>,
    cwd: Option<String>,
}

#[derive(Debug, Deserialize)]
struct StartRequest {
    #[serde(default)]
    process: ProcessConfig,
    pty: Option<Value>,
    tag: Option<String>,
    #[serde(default)]
    stdin: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct Selector {
    pid: Option<u32>,
    tag: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct Selected {
    process: Selector,
    signal: Option<Value>,
}

/// The shell command line of a process config: what E2B's SDKs send is
/// `/bin/bash -l -c LINE`; anything else is its words quoted for the shell.
fn command_line(config: &ProcessConfig) -> Result<String, ConnectError> {
    let shell = matches!(
        config.cmd.as_str(),
        "/bin/bash" | "bash" | "/bin/sh" | "sh" | "/usr/bin/bash"
    );
    let flags: Vec<&str> = config.args.iter().map(String::as_str).collect();
    if shell {
        if let [.., "-c", line] = flags.as_slice() {
            if flags[..flags.len() - 2]
                .iter()
                .all(|f| matches!(*f, "-l" | "--login"))
            {
                return Ok((*line).to_string());
            }
        }
    }
    if config.cmd.is_empty() {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "process.cmd is empty: name the program to run",
        ));
    }
    Ok(std::iter::once(&config.cmd)
        .chain(&config.args)
        .map(|word| quoted(word))
        .collect::<Vec<_>>()
        .join(" "))
}

/// `word` as one word of a POSIX shell.
fn quoted(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn event(event: Value) -> Bytes {
    connect::frame(&json!({ "event": event }))
}

fn data(stream: &'static str, bytes: &[u8]) -> Bytes {
    event(json!({ "data": { stream: base64::engine::general_purpose::STANDARD.encode(bytes) } }))
}

/// Sends every frame of a process both to its caller and to those who reconnect.
///
/// The caller's channel is unbounded: a sink may be called inside a backend's own
/// async runtime (wasm), where nothing may block, and the run's output cap bounds
/// what it holds.
#[derive(Clone)]
struct Frames {
    caller: mpsc::UnboundedSender<Bytes>,
    others: broadcast::Sender<Bytes>,
}

impl Frames {
    fn send(&self, frame: Bytes) {
        // A caller that went away leaves the command running, as envd does.
        let _ = self.caller.send(frame.clone());
        let _ = self.others.send(frame);
    }
}

async fn start(
    State(e2b): State<E2b>,
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match started(e2b, sandbox, &headers, &body) {
        Ok(response) => response,
        Err(error) => connect::failed_stream(&error),
    }
}

fn started(
    e2b: E2b,
    sandbox: Arc<E2bSandbox>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ConnectError> {
    let request: StartRequest = connect::stream_call("Start", headers, body)?;
    if request.pty.is_some() {
        return Err(ConnectError::new(
            Code::Unimplemented,
            "terminals (pty) are not supported by sandlot yet: run commands without one",
        ));
    }
    if request.stdin == Some(true) {
        return Err(ConnectError::new(
            Code::Unimplemented,
            "stdin to a running command is not supported by sandlot yet: start it with \
             stdin off (the SDKs' default)",
        ));
    }
    let mut line = command_line(&request.process)?;
    let workdir = match &request.process.cwd {
        // A shell reaches the rest of the sandbox's file system too: a directory
        // outside the workspace is where the line starts, as envd's `cwd` is.
        Some(cwd) if sandbox.shell && outside_workspace(cwd) => {
            line = format!("cd -- {} || exit 1\n{line}", quoted(cwd));
            String::new()
        }
        Some(cwd) => super::files::workspace_path(cwd)?,
        None => String::new(),
    };
    let cwd = request.process.cwd.clone();
    let work = if sandbox.shell {
        Work::Shell(line)
    } else {
        let language = sandbox.language();
        let program = program::program(&line, &language)?;
        Work::Program { program, language }
    };
    let limit = e2b.manager.settings().limits.timeout;
    let timeout = connect::deadline(headers)?
        .filter(|d| !d.is_zero())
        .map_or(limit, |d| d.min(limit));
    let session = super::filesystem::main_session(&sandbox)?;
    let pid = sandbox.next_pid();
    let interrupt = Interrupt::new();
    let (caller, frames) = mpsc::unbounded_channel::<Bytes>();
    let (others, _) = broadcast::channel::<Bytes>(256);
    let config = json!({
        "cmd": request.process.cmd,
        "args": request.process.args,
        "envs": request.process.envs,
        "cwd": request.process.cwd,
    });
    sandbox
        .processes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(
            pid,
            Process {
                config,
                tag: request.tag.clone(),
                interrupt: interrupt.clone(),
                frames: others.clone(),
            },
        );
    let frames_out = Frames { caller, others };
    frames_out.send(event(json!({ "start": { "pid": pid } })));
    let mut env: BTreeMap<String, String> = sandbox.env.clone();
    env.extend(request.process.envs);
    let sink = |stream: &'static str| {
        let frames = frames_out.clone();
        Box::new(move |bytes: &[u8]| frames.send(data(stream, bytes)))
            as sandlot_core::backend::Sink
    };
    let options = RunOptions {
        env: env.into_iter().collect(),
        workdir: (!workdir.is_empty()).then_some(workdir),
        timeout: Some(timeout),
        interrupt: Some(interrupt.clone()),
        on_stdout: Some(sink("stdout")),
        on_stderr: Some(sink("stderr")),
        ..RunOptions::default()
    };
    let manager = e2b.manager.clone();
    tokio::task::spawn_blocking(move || {
        let client = &sandbox.client;
        let ran = match work {
            Work::Shell(line) => manager.run_command_with(client, &session, &line, options),
            Work::Program { program, language } => {
                let code = match program.source {
                    program::Source::Inline(code) => Ok((code, "<string>".to_string())),
                    program::Source::File(file) => {
                        read_program(&manager, &sandbox, &session, &workdir_of(&file, &cwd))
                    }
                };
                code.and_then(|(code, filename)| {
                    // The gate reads the program, as it reads a run's code: the code
                    // around it is the server's, which hides it from a reading.
                    manager.with_session(client, &session, |s| s.check(&code))?;
                    let code = program::as_code(&language, &code, &filename, &program.argv);
                    manager.run(client, &session, &code, options)
                })
            }
        };
        sandbox
            .processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
        let (end, error) = match ran {
            Ok(run) => ended(&run.end, run.exit_code, interrupt.is_interrupted()),
            Err(error) => (None, Some(ConnectError::from(error))),
        };
        if let Some(end) = end {
            frames_out.send(event(json!({ "end": end })));
        }
        frames_out.send(connect::end_of_stream(error.as_ref()));
    });
    Ok(connect::streamed(frames, keepalive(headers)))
}

/// Whether `cwd` is an absolute path that is not in the workspace.
fn outside_workspace(cwd: &str) -> bool {
    cwd.starts_with('/') && super::files::workspace_path(cwd).is_err()
}

/// What a command runs: a shell line, or a program for the interpreter of a
/// backend without a shell.
enum Work {
    Shell(String),
    Program {
        program: program::Program,
        language: String,
    },
}

/// The E2B path of a program's file, from the command's working directory when it is
/// relative.
fn workdir_of(file: &str, cwd: &Option<String>) -> String {
    match cwd {
        Some(cwd) if !file.starts_with('/') => format!("{}/{file}", cwd.trim_end_matches('/')),
        _ => file.to_string(),
    }
}

/// The code of a program's file, and its name for tracebacks; a missing file is what
/// the interpreter would say.
fn read_program(
    manager: &crate::manager::SessionManager,
    sandbox: &E2bSandbox,
    session: &crate::manager::SessionId,
    path: &str,
) -> Result<(String, String), sandlot_core::error::Error> {
    let relative = super::files::workspace_path(path)
        .map_err(|e| sandlot_core::error::Error::InvalidRequest { reason: e.message })?;
    let bytes = manager.with_session(&sandbox.client, session, |s| s.read_file(&relative))?;
    let code =
        String::from_utf8(bytes).map_err(|_| sandlot_core::error::Error::InvalidRequest {
            reason: format!("{path} is not UTF-8 text, so it is no program"),
        })?;
    Ok((code, super::files::e2b_path(&relative)))
}

/// The `end` event of a command, and the stream's error where E2B gives one (a
/// command past its deadline).
fn ended(end: &EndReason, exit_code: i32, killed: bool) -> (Option<Value>, Option<ConnectError>) {
    let status = |text: String| json!({ "exitCode": exit_code, "exited": true, "status": text, "error": text });
    match end {
        EndReason::Completed if exit_code == 0 => (
            Some(json!({ "exitCode": 0, "exited": true, "status": "exit status 0" })),
            None,
        ),
        EndReason::Completed => (Some(status(format!("exit status {exit_code}"))), None),
        EndReason::Interrupted if killed => (
            Some(json!({
                "exitCode": -1, "exited": false,
                "status": "signal: killed", "error": "signal: killed",
            })),
            None,
        ),
        EndReason::TimedOut { limit } => (
            None,
            Some(ConnectError::new(
                Code::DeadlineExceeded,
                format!(
                    "the command ran past its time limit of {} s and was stopped",
                    limit.as_secs_f64()
                ),
            )),
        ),
        other => (Some(status(format!("{other:?}"))), None),
    }
}

/// `Connect`: the output of a running command from now on.
async fn reconnect(
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let attached = (|| {
        let selected: Selected = connect::stream_call("Connect", &headers, &body)?;
        let (pid, process) = find(&sandbox, &selected.process)?;
        Ok((pid, process.frames.subscribe()))
    })();
    let (pid, mut frames) = match attached {
        Ok(attached) => attached,
        Err(error) => return connect::failed_stream(&error),
    };
    let (caller, received) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        if caller
            .send(event(json!({ "start": { "pid": pid } })))
            .is_err()
        {
            return;
        }
        loop {
            match frames.recv().await {
                Ok(frame) => {
                    if caller.send(frame).is_err() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                // The command ended between the lookup and the subscription.
                Err(broadcast::error::RecvError::Closed) => {
                    let _ = caller.send(connect::end_of_stream(None));
                    return;
                }
            }
        }
    });
    connect::streamed(received, keepalive(&headers))
}

/// Keepalive messages of a process stream, if the caller asks for them.
fn keepalive(headers: &HeaderMap) -> Option<(std::time::Duration, Value)> {
    connect::keepalive_interval(headers)
        .map(|every| (every, json!({ "event": { "keepalive": {} } })))
}

fn find(sandbox: &E2bSandbox, selector: &Selector) -> Result<(u32, Process), ConnectError> {
    let processes = sandbox.processes.lock().unwrap_or_else(|e| e.into_inner());
    let found = match (selector.pid, &selector.tag) {
        (Some(pid), _) => processes.get(&pid).map(|p| (pid, p.clone())),
        (None, Some(tag)) => processes
            .iter()
            .find(|(_, p)| p.tag.as_ref() == Some(tag))
            .map(|(pid, p)| (*pid, p.clone())),
        (None, None) => {
            return Err(ConnectError::new(
                Code::InvalidArgument,
                "select the process by pid or tag",
            ))
        }
    };
    found.ok_or_else(|| {
        ConnectError::new(
            Code::NotFound,
            "no such process runs in this sandbox: it ended, or never started",
        )
    })
}

async fn list(
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(error) = connect::unary_call::<Value>(&headers, &body) {
        return error.into_response();
    }
    let processes: Vec<Value> = sandbox
        .processes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(pid, p)| {
            let mut info = json!({ "pid": pid, "config": p.config });
            if let Some(tag) = &p.tag {
                info["tag"] = json!(tag);
            }
            info
        })
        .collect();
    connect::unary(json!({ "processes": processes }))
}

async fn signal(
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let signalled = (|| {
        let selected: Selected = connect::unary_call(&headers, &body)?;
        // SIGTERM and SIGKILL both stop the command: sandlot stops a command's whole
        // process tree at once.
        match &selected.signal {
            Some(Value::String(s)) if s == "SIGNAL_SIGKILL" || s == "SIGNAL_SIGTERM" => {}
            Some(Value::Number(n)) if n.as_u64() == Some(9) || n.as_u64() == Some(15) => {}
            other => {
                return Err(ConnectError::new(
                    Code::InvalidArgument,
                    format!(
                        "signal {} is not one this server sends: use SIGNAL_SIGKILL or \
                         SIGNAL_SIGTERM",
                        other
                            .as_ref()
                            .map_or("(none)".to_string(), Value::to_string)
                    ),
                ))
            }
        }
        let (_, process) = find(&sandbox, &selected.process)?;
        process.interrupt.interrupt();
        Ok(())
    })();
    match signalled {
        Ok(()) => connect::unary(json!({})),
        Err(error) => error.into_response(),
    }
}

async fn unsupported_input() -> Response {
    ConnectError::new(
        Code::Unimplemented,
        "stdin to a running command is not supported by sandlot yet",
    )
    .into_response()
}

async fn unsupported_pty() -> Response {
    ConnectError::new(
        Code::Unimplemented,
        "terminals (pty) are not supported by sandlot yet",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn config(cmd: &str, args: &[&str]) -> ProcessConfig {
        ProcessConfig {
            cmd: cmd.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..ProcessConfig::default()
        }
    }

    #[test]
    fn the_sdks_shell_line_is_run_as_it_is() {
        assert_eq!(
            command_line(&config("/bin/bash", &["-l", "-c", "echo hi | wc -c"])).unwrap(),
            "echo hi | wc -c"
        );
        assert_eq!(
            command_line(&config("python3", &["-c", "print('a b')"])).unwrap(),
            r#"python3 -c 'print('\''a b'\'')'"#
        );
        assert!(command_line(&config("", &[])).is_err());
        assert!(outside_workspace("/"));
        assert!(outside_workspace("/tmp/x"));
        assert!(!outside_workspace("/home/user/a"));
        assert!(!outside_workspace("/workspace"));
        assert!(!outside_workspace("relative"));
    }

    #[test]
    fn ends_say_what_the_sdks_read() {
        let (end, error) = ended(&EndReason::Completed, 3, false);
        let end = end.unwrap();
        assert_eq!(end["exitCode"], 3);
        assert_eq!(end["error"], "exit status 3");
        assert!(error.is_none());
        let (end, error) = ended(
            &EndReason::TimedOut {
                limit: Duration::from_secs(1),
            },
            124,
            false,
        );
        assert!(end.is_none());
        assert_eq!(error.unwrap().code, Code::DeadlineExceeded);
        let (end, _) = ended(&EndReason::Interrupted, 130, true);
        assert_eq!(end.unwrap()["exitCode"], -1);
    }
}

//! `sandlot-tool`: the agent under another name (a link on the run's `PATH`), so that
//! code in any language — a shell script, R, Ruby, Go, Java — can call the session's
//! tools by running a command.
//!
//! ```text
//! sandlot-tool NAME ['{"arg": 1}' | -]   call NAME; prints its value as JSON
//! sandlot-tool --raw NAME ...            a value that is a string, printed as it is
//! sandlot-tool --list                    the tools this run may call, as JSON
//! ```
//!
//! Exit status: 0 with the value on standard output; 1 when the call failed (the tool's
//! message on standard error, after the kind of failure); 2 when the command was used
//! wrong or the run has no tools.

use sandlot_agent::TOOLS_VARIABLE;
use serde_json::{json, Value};
use std::io::{self, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};

const USAGE: &str = "usage: sandlot-tool [--raw] NAME ['JSON ARGUMENTS' | -]
       sandlot-tool --list
Calls one of the session's tools with its arguments (a JSON object; `-` reads it
from standard input; none: {}) and prints its value as JSON (--raw: a string as it is).
--list prints the tools this run may call.";

/// Runs the command; returns its exit status.
pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(Failure::Usage(message)) => {
            eprintln!("sandlot-tool: {message}\n{USAGE}");
            2
        }
        Err(Failure::Unreachable(message)) => {
            eprintln!("sandlot-tool: {message}");
            2
        }
        Err(Failure::Call { kind, message }) => {
            eprintln!("sandlot-tool: {kind}: {message}");
            1
        }
    }
}

enum Failure {
    Usage(String),
    Unreachable(String),
    Call { kind: String, message: String },
}

fn run(args: &[String]) -> Result<(), Failure> {
    let mut raw = false;
    let mut rest = Vec::new();
    for arg in args {
        match arg.as_str() {
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--raw" | "-r" => raw = true,
            _ => rest.push(arg.as_str()),
        }
    }
    let request = match rest.as_slice() {
        ["--list"] => json!({"op": "list"}),
        [name] => call(name, "{}")?,
        [name, "-"] => {
            let mut text = String::new();
            io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| Failure::Usage(format!("cannot read the arguments: {e}")))?;
            call(name, &text)?
        }
        [name, arguments] => call(name, arguments)?,
        [] => return Err(Failure::Usage("name a tool".into())),
        _ => return Err(Failure::Usage("too many arguments".into())),
    };
    let answer = exchange(&request)?;
    if answer["ok"] != json!(true) {
        return Err(Failure::Call {
            kind: answer["error"]["kind"]
                .as_str()
                .unwrap_or("protocol")
                .to_string(),
            message: answer["error"]["message"]
                .as_str()
                .unwrap_or("the answer says nothing more")
                .to_string(),
        });
    }
    let value = if request["op"] == "list" {
        &answer["tools"]
    } else {
        &answer["value"]
    };
    let text = match value {
        Value::String(s) if raw => s.clone(),
        other => other.to_string(),
    };
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{text}");
    Ok(())
}

fn call(name: &str, arguments: &str) -> Result<Value, Failure> {
    let arguments: Value = serde_json::from_str(arguments)
        .map_err(|e| Failure::Usage(format!("the arguments of {name} are not JSON: {e}")))?;
    if !arguments.is_object() {
        return Err(Failure::Usage(format!(
            "the arguments of {name} must be a JSON object, like '{{\"query\": \"x\"}}'"
        )));
    }
    Ok(json!({"op": "call", "tool": name, "args": arguments}))
}

/// Sends one request frame to the run's endpoint and returns the answer.
fn exchange(request: &Value) -> Result<Value, Failure> {
    let address = std::env::var(TOOLS_VARIABLE).unwrap_or_default();
    if address.is_empty() {
        return Err(Failure::Unreachable(format!(
            "this run has no tools ({TOOLS_VARIABLE} is not set): open the session with tools"
        )));
    }
    let unreachable = |e: io::Error| {
        Failure::Unreachable(format!(
            "cannot reach the tool endpoint ({e}): the run that offered the tools is over"
        ))
    };
    // A socket's path, or `@NAME` for an abstract socket.
    let mut connection = match address.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| UnixStream::connect_addr(&addr)),
        None => UnixStream::connect(&address),
    }
    .map_err(unreachable)?;
    let mut frame = json!({"v": 1, "id": 1});
    if let (Some(frame), Some(request)) = (frame.as_object_mut(), request.as_object()) {
        frame.extend(request.clone());
    }
    let body = frame.to_string().into_bytes();
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    let closed = |_| {
        Failure::Unreachable(
            "the tool endpoint closed the connection: the run is over, or the sandbox holds \
             too many connections to it"
                .into(),
        )
    };
    connection.write_all(&out).map_err(closed)?;
    let mut len = [0u8; 4];
    connection.read_exact(&mut len).map_err(closed)?;
    let mut answer = vec![0u8; u32::from_le_bytes(len) as usize];
    connection.read_exact(&mut answer).map_err(closed)?;
    serde_json::from_slice(&answer).map_err(|e| Failure::Call {
        kind: "protocol".into(),
        message: format!("the answer is not JSON: {e}"),
    })
}

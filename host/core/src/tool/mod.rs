//! Tools that sandboxed code calls: functions of the host application, reached from
//! inside the sandbox without the sandbox ever reaching the host.
//!
//! A [`Tool`] is a name, a description, a JSON Schema of its arguments and a handler.
//! Registered on a session ([`SessionBuilder::tool`](crate::SessionBuilder::tool), or
//! a [`ToolSet`] shared by many), it becomes a function the session's code can call: in
//! Python, `from sandlot_tools import search; search(query="x")`. The code writes a
//! request; the host checks the name against the session's tools and the arguments
//! against the schema, calls the handler, and hands the result (or the handler's
//! error, as an exception) back. The handler runs in the host with the host's
//! rights; the sandbox never sees more than the JSON that comes back.
//!
//! ```no_run
//! # fn main() -> Result<(), sandlot::Error> {
//! use sandlot::tool::{Tool, ToolError};
//! use serde_json::json;
//!
//! let price = Tool::new(
//!     "price",
//!     "The price of a fruit, in cents.",
//!     json!({
//!         "type": "object",
//!         "properties": { "fruit": { "type": "string" } },
//!         "required": ["fruit"]
//!     }),
//!     |arguments| match arguments["fruit"].as_str() {
//!         Some("apple") => Ok(json!(120)),
//!         Some(other) => Err(ToolError::new(format!("no price for {other}"))),
//!         None => unreachable!("the schema requires a string"),
//!     },
//! )?;
//! let sandlot = sandlot::from_environment()?;
//! let mut session = sandlot.session("python").tool(price)?.open()?;
//! let run = session.run("from sandlot_tools import price\nprint(sum(price(fruit='apple') for _ in range(3)))")?;
//! assert_eq!(run.stdout_text(), "360\n");
//! assert_eq!(run.tool_calls.len(), 3);
//! # Ok(())
//! # }
//! ```
//!
//! Each run gets its own [`ToolCalls`]: the limits of [`ToolLimits`] (calls, argument
//! and result sizes, a timeout per call, calls at once) hold per run, a call never
//! outlives the run, and every call is recorded in the run's
//! [`Execution::tool_calls`](crate::Execution::tool_calls). The frames that cross the
//! sandbox's boundary are described in [`protocol`].

mod calls;
pub mod protocol;

pub use calls::{ToolCallSink, ToolCalls};

use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A tool's name as code calls it: an ASCII letter, then up to 63 letters, digits and
/// `_`, so that it is an identifier in every language the bindings are made for.
///
/// ```
/// use sandlot::tool::ToolName;
/// assert_eq!(ToolName::new("web_search").unwrap().as_str(), "web_search");
/// assert!(ToolName::new("web-search").is_err());
/// assert!(ToolName::new("_private").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ToolName(String);

impl ToolName {
    /// Checks and wraps `name`.
    pub fn new(name: impl Into<String>) -> Result<ToolName> {
        let name = name.into();
        let valid = (1..=64).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(Error::InvalidTool {
                name,
                reason: "a tool's name is an ASCII letter followed by up to 63 letters, digits \
                         and underscores"
                    .into(),
            });
        }
        Ok(ToolName(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ToolName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a tool's handler reports when it cannot answer: the message reaches the code
/// as the text of the exception its call raises (`sandlot_tools.ToolError` in Python).
/// Say what went wrong in words the program (and the model that wrote it) can act on;
/// keep host details out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// An error with `message` (cut to 4,096 bytes on its way to the code).
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::new(message)
    }
}

/// What an async handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = std::result::Result<Value, ToolError>> + Send>>;

type SyncHandler = dyn Fn(Value) -> std::result::Result<Value, ToolError> + Send + Sync;
type AsyncHandler = dyn Fn(Value) -> ToolFuture + Send + Sync;

/// How a tool answers.
#[derive(Clone)]
enum Handler {
    /// Runs on a thread of the blocking pool, so that one that hangs can be left
    /// behind at its timeout.
    Sync(Arc<SyncHandler>),
    /// Polled where the call arrives, with the call's timeout around it: no thread
    /// hop, the cheapest way to answer.
    Async(Arc<AsyncHandler>),
}

/// A function of the host that sandboxed code may call; see the [module](self) docs.
///
/// Cloning is cheap (the handler and the compiled schema are shared).
#[derive(Clone)]
pub struct Tool {
    name: ToolName,
    description: String,
    input_schema: Value,
    output_schema: Option<Value>,
    validator: Arc<jsonschema::Validator>,
    handler: Handler,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("input_schema", &self.input_schema)
            .field("output_schema", &self.output_schema)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool whose `handler` answers on a thread of its own (it may block). Its
    /// arguments are always a JSON object: `input_schema` must be a JSON Schema (draft
    /// 2020-12 unless it names another with `$schema`) of `"type": "object"`.
    ///
    /// Errors ([`Error::InvalidTool`]): a `name` that is not a [`ToolName`], a schema
    /// that is not one, or one that does not describe an object.
    pub fn new(
        name: &str,
        description: &str,
        input_schema: Value,
        handler: impl Fn(Value) -> std::result::Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Result<Tool> {
        Tool::make(
            name,
            description,
            input_schema,
            Handler::Sync(Arc::new(handler)),
        )
    }

    /// A tool whose `handler` is async: polled as the call arrives, with the call's
    /// timeout around it. The fastest kind; it must not block.
    ///
    /// ```
    /// use sandlot::tool::Tool;
    /// use serde_json::{json, Value};
    /// let echo = Tool::new_async("echo", "Gives back its arguments.", json!({"type": "object"}),
    ///     |arguments: Value| Box::pin(async move { Ok(arguments) })).unwrap();
    /// assert_eq!(echo.name().as_str(), "echo");
    /// ```
    pub fn new_async(
        name: &str,
        description: &str,
        input_schema: Value,
        handler: impl Fn(Value) -> ToolFuture + Send + Sync + 'static,
    ) -> Result<Tool> {
        Tool::make(
            name,
            description,
            input_schema,
            Handler::Async(Arc::new(handler)),
        )
    }

    fn make(name: &str, description: &str, input_schema: Value, handler: Handler) -> Result<Tool> {
        let name = ToolName::new(name)?;
        let validator = compile(&name, &input_schema, "input")?;
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(Error::InvalidTool {
                name: name.0,
                reason: "its input schema must have \"type\": \"object\": a tool is called \
                         with named arguments"
                    .into(),
            });
        }
        Ok(Tool {
            name,
            description: description.to_string(),
            input_schema,
            output_schema: None,
            validator: Arc::new(validator),
            handler,
        })
    }

    /// Documents what the tool returns with a JSON Schema (shown to the code, in its
    /// bindings' docs; results are not checked against it).
    pub fn with_output_schema(mut self, schema: Value) -> Result<Tool> {
        compile(&self.name, &schema, "output")?;
        self.output_schema = Some(schema);
        Ok(self)
    }

    /// The name code calls it by.
    pub fn name(&self) -> &ToolName {
        &self.name
    }

    /// What it does, for the code (and the model writing it).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of its arguments.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The JSON Schema of its result, if it has one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    /// Why `arguments` do not fit the input schema (up to three reasons, with where in
    /// the arguments each applies), or `None` if they do.
    pub fn check_arguments(&self, arguments: &Value) -> Option<String> {
        let reasons: Vec<String> = self
            .validator
            .iter_errors(arguments)
            .take(3)
            .map(|error| {
                let at = error.instance_path().to_string();
                match at.is_empty() {
                    true => error.to_string(),
                    false => format!("{at}: {error}"),
                }
            })
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

fn compile(name: &ToolName, schema: &Value, which: &str) -> Result<jsonschema::Validator> {
    jsonschema::validator_for(schema).map_err(|error| Error::InvalidTool {
        name: name.0.clone(),
        reason: format!("its {which} schema is not a valid JSON Schema: {error}"),
    })
}

/// Tools by name, to register on many sessions at once
/// ([`SessionBuilder::tools`](crate::SessionBuilder::tools)). Cloning is cheap.
///
/// ```
/// use sandlot::tool::{Tool, ToolSet};
/// use serde_json::json;
/// let mut tools = ToolSet::new();
/// tools.add(Tool::new("now", "The time.", json!({"type": "object"}), |_| Ok(json!("noon"))).unwrap()).unwrap();
/// assert!(tools.get("now").is_some());
/// assert!(tools.add(Tool::new("now", "Again.", json!({"type": "object"}), |_| Ok(json!(0))).unwrap()).is_err());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolSet(Arc<BTreeMap<ToolName, Tool>>);

impl ToolSet {
    /// No tools.
    pub fn new() -> ToolSet {
        ToolSet::default()
    }

    /// Adds `tool`; a second tool of the same name is an error.
    pub fn add(&mut self, tool: Tool) -> Result<()> {
        let tools = Arc::make_mut(&mut self.0);
        if tools.contains_key(tool.name()) {
            return Err(Error::InvalidTool {
                name: tool.name.0,
                reason: "a tool of this name is registered already".into(),
            });
        }
        tools.insert(tool.name.clone(), tool);
        Ok(())
    }

    /// Every tool of `other` added to these.
    pub fn extend(&mut self, other: &ToolSet) -> Result<()> {
        for tool in other.iter() {
            self.add(tool.clone())?;
        }
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.0.get(name)
    }

    /// The tools, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.0.values()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Bounds on the tool calls of one run. A call past a bound fails with an error the
/// code sees (and can catch); the run goes on. Built as [`Limits`](crate::Limits) is:
/// `ToolLimits { max_calls: 100, ..ToolLimits::default() }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Most calls per run.
    pub max_calls: u32,
    /// Most calls answered at once; more wait their turn.
    pub max_concurrent: u32,
    /// Largest request a call may send, in bytes of JSON.
    pub max_argument_bytes: usize,
    /// Largest result a call may return, in bytes of JSON.
    pub max_result_bytes: usize,
    /// Longest a handler may take; the run's own time limit still holds.
    pub call_timeout: Duration,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            max_calls: 10_000,
            max_concurrent: 8,
            max_argument_bytes: 1 << 20,
            max_result_bytes: 4 << 20,
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// How one call ended, as [`Execution::tool_calls`](crate::Execution::tool_calls)
/// records it. The `snake_case` names are those the code's exceptions are chosen by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolOutcome {
    /// The handler answered.
    Ok,
    /// The handler reported an error ([`ToolError`]), or panicked.
    ToolError,
    /// The session has no tool of that name.
    UnknownTool,
    /// The arguments do not fit the tool's schema.
    InvalidArguments,
    /// The handler took longer than its timeout or the run had left.
    Timeout,
    /// The request or the result is larger than the limits allow.
    TooLarge,
    /// The run has made all the calls it may.
    BudgetExceeded,
    /// The request was not a frame of the protocol.
    Protocol,
}

impl ToolOutcome {
    /// The stable name, in `snake_case`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::ToolError => "tool_error",
            ToolOutcome::UnknownTool => "unknown_tool",
            ToolOutcome::InvalidArguments => "invalid_arguments",
            ToolOutcome::Timeout => "timeout",
            ToolOutcome::TooLarge => "too_large",
            ToolOutcome::BudgetExceeded => "budget_exceeded",
            ToolOutcome::Protocol => "protocol",
        }
    }
}

impl fmt::Display for ToolOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call a run made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The tool called, as the code named it (cut to 64 bytes when it names none).
    pub name: String,
    /// From the request's arrival to the answer.
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
    /// Size of the request, in bytes.
    pub argument_bytes: usize,
    /// Size of the answer's value, in bytes (0 when it failed).
    pub result_bytes: usize,
    /// How it ended.
    pub outcome: ToolOutcome,
    /// The error's message, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn millis<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object() -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    }

    #[test]
    fn names_are_identifiers_in_every_language() {
        for good in ["a", "search", "get_Price2", &"x".repeat(64)] {
            assert!(ToolName::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "2fast",
            "web-search",
            "a b",
            "ünïcode",
            "_x",
            &"x".repeat(65),
        ] {
            let error = ToolName::new(bad).unwrap_err();
            assert_eq!(error.kind(), crate::error::ErrorKind::InvalidInput, "{bad}");
        }
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused_with_its_reason() {
        let error = Tool::new("t", "", json!({"type": 5}), Ok).unwrap_err();
        assert!(
            error.to_string().contains("not a valid JSON Schema"),
            "{error}"
        );
        let error = Tool::new("t", "", json!({"type": "string"}), Ok).unwrap_err();
        assert!(
            error.to_string().contains("\"type\": \"object\""),
            "{error}"
        );
        let tool = Tool::new("t", "", object(), Ok).unwrap();
        assert!(tool.with_output_schema(json!({"minimum": "x"})).is_err());
    }

    #[test]
    fn arguments_are_checked_against_the_schema_with_where_they_fail() {
        let tool = Tool::new("t", "", object(), Ok).unwrap();
        assert_eq!(tool.check_arguments(&json!({"n": 3})), None);
        let why = tool.check_arguments(&json!({"n": "three"})).unwrap();
        assert!(why.starts_with("/n: "), "{why}");
        assert!(tool
            .check_arguments(&json!({}))
            .unwrap()
            .contains("required"));
    }

    #[test]
    fn a_set_refuses_a_second_tool_of_a_name_and_clones_share() {
        let mut set = ToolSet::new();
        set.add(Tool::new("a", "", object(), Ok).unwrap()).unwrap();
        let shared = set.clone();
        set.add(Tool::new("b", "", object(), Ok).unwrap()).unwrap();
        assert_eq!((shared.len(), set.len()), (1, 2));
        let mut again = ToolSet::new();
        again
            .add(Tool::new("b", "", object(), Ok).unwrap())
            .unwrap();
        assert!(set.extend(&again).is_err());
    }
}

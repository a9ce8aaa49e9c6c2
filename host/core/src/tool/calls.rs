//! [`ToolCalls`]: the tool calls of one run, answered under that run's limits.

use super::protocol::{self, Request};
use super::{Handler, ToolCall, ToolLimits, ToolOutcome, ToolSet};
use futures_util::FutureExt as _;
use serde_json::Value;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tool calls of one run: a backend hands each request frame that comes out of
/// the sandbox to [`ToolCalls::answer`] and sends the answer back in. Limits hold
/// across the whole run; every call is recorded for the run's
/// [`Execution`](crate::Execution).
///
/// ```
/// # fn main() -> Result<(), sandlot::Error> {
/// use sandlot::tool::{Tool, ToolCalls, ToolLimits, ToolSet};
/// use serde_json::{json, Value};
/// use std::time::{Duration, Instant};
///
/// let mut tools = ToolSet::new();
/// tools.add(Tool::new("double", "Twice n.", json!({"type": "object",
///     "properties": {"n": {"type": "number"}}, "required": ["n"]}),
///     |a| Ok(json!(a["n"].as_f64().unwrap() * 2.0)))?)?;
/// let calls = ToolCalls::new(tools, ToolLimits::default(), Instant::now() + Duration::from_secs(5));
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let answer = runtime.block_on(calls.answer(br#"{"v":1,"id":1,"op":"call","tool":"double","args":{"n":21}}"#));
/// let answer: Value = serde_json::from_slice(&answer).unwrap();
/// assert_eq!(answer["value"], json!(42.0));
/// assert_eq!(calls.finish()[0].outcome, sandlot::tool::ToolOutcome::Ok);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ToolCalls {
    tools: ToolSet,
    limits: ToolLimits,
    /// When the run's own time is up: no call outlives it.
    deadline: Instant,
    record: Mutex<Record>,
    turns: tokio::sync::Semaphore,
    observer: Option<Observer>,
}

/// Sees each call of a run as it is recorded, while the run goes on: what a server
/// streams to its client as the calls happen. Called from whichever thread answered
/// the call, with the run's record locked: it should return quickly, and never after
/// the run has ended.
pub type ToolCallSink = Arc<dyn Fn(&ToolCall) + Send + Sync>;

struct Observer(ToolCallSink);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

#[derive(Debug, Default)]
struct Record {
    /// Calls counted against the budget.
    calls: u32,
    made: Vec<ToolCall>,
    finished: bool,
}

/// How a call failed, before it is recorded and answered.
struct Failed(ToolOutcome, String);

impl ToolCalls {
    /// The calls of a run that may call `tools` within `limits`, and ends at
    /// `deadline`.
    pub fn new(tools: ToolSet, limits: ToolLimits, deadline: Instant) -> ToolCalls {
        ToolCalls {
            tools,
            limits,
            deadline,
            record: Mutex::new(Record::default()),
            turns: tokio::sync::Semaphore::new(limits.max_concurrent.max(1) as usize),
            observer: None,
        }
    }

    /// The same calls, each shown to `sink` as it is recorded.
    pub fn observed(mut self, sink: ToolCallSink) -> ToolCalls {
        self.observer = Some(Observer(sink));
        self
    }

    /// The tools the run may call.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// The limits the calls are held to.
    pub fn limits(&self) -> &ToolLimits {
        &self.limits
    }

    /// Answers one request frame (see [`protocol`](super::protocol)) with its answer
    /// frame. Never fails: whatever goes wrong, the handler's error, a panic, a
    /// timeout, a malformed frame, is an error frame for the code. Must be awaited
    /// inside a tokio runtime (a blocking handler runs on its blocking pool).
    ///
    /// Every frame but a listing counts against the run's `max_calls`, malformed ones
    /// too, and is recorded; past the budget a frame is answered, not recorded, so a
    /// sandbox that floods the channel costs the host no memory.
    pub async fn answer(&self, frame: &[u8]) -> Vec<u8> {
        let arrived = Instant::now();
        if let Some(refusal) = self.refuse_oversized(frame.len()) {
            return refusal;
        }
        let request: Request = match serde_json::from_slice(frame) {
            Ok(request) => request,
            Err(error) => {
                let message = format!("the request is not a frame of the tool protocol: {error}");
                return self.refuse(
                    &Value::Null,
                    arrived,
                    frame.len(),
                    ToolOutcome::Protocol,
                    message,
                );
            }
        };
        if request.version() != protocol::VERSION {
            let message = format!(
                "the request speaks version {} of the tool protocol; this host speaks {}",
                request.version(),
                protocol::VERSION
            );
            return self.refuse(
                request.id(),
                arrived,
                frame.len(),
                ToolOutcome::Protocol,
                message,
            );
        }
        match request {
            Request::List { id, .. } => protocol::listing(&id, self.tools.iter()),
            Request::Call { id, tool, args, .. } => {
                let id = &id;
                let name = protocol::cut(&tool, 64);
                if let Err(Failed(outcome, message)) = self.admit() {
                    return protocol::failure(id, outcome, &message);
                }
                match self.call(&tool, args).await {
                    Ok(value) => {
                        self.note(
                            name,
                            arrived,
                            frame.len(),
                            value.len(),
                            ToolOutcome::Ok,
                            None,
                        );
                        match serde_json::value::RawValue::from_string(value) {
                            Ok(value) => protocol::answer(id, &value),
                            Err(error) => protocol::failure(
                                id,
                                ToolOutcome::ToolError,
                                &format!("the result could not be sent: {error}"),
                            ),
                        }
                    }
                    Err(Failed(outcome, message)) => {
                        self.note(name, arrived, frame.len(), 0, outcome, Some(&message));
                        protocol::failure(id, outcome, &message)
                    }
                }
            }
        }
    }

    /// The answer to a request of `len` bytes if it is larger than the limits allow
    /// (the call is recorded as refused), or `None`: a backend asks before it copies
    /// the request out of the sandbox.
    pub fn refuse_oversized(&self, len: usize) -> Option<Vec<u8>> {
        if len <= self.limits.max_argument_bytes {
            return None;
        }
        let message = format!(
            "the request is {len} bytes; a tool call may send at most {}",
            self.limits.max_argument_bytes
        );
        Some(self.refuse(
            &Value::Null,
            Instant::now(),
            len,
            ToolOutcome::TooLarge,
            message,
        ))
    }

    /// Answers a frame refused before any tool was looked up: counted, and recorded
    /// while within the budget.
    fn refuse(
        &self,
        id: &Value,
        arrived: Instant,
        len: usize,
        outcome: ToolOutcome,
        message: String,
    ) -> Vec<u8> {
        if let Err(Failed(over, why)) = self.admit() {
            return protocol::failure(id, over, &why);
        }
        self.note("", arrived, len, 0, outcome, Some(&message));
        protocol::failure(id, outcome, &message)
    }

    /// Counts one call against the run's budget, or says why it may not be made.
    fn admit(&self) -> Result<(), Failed> {
        let mut record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        if record.finished {
            return Err(Failed(
                ToolOutcome::Timeout,
                "the run this call belongs to has ended".into(),
            ));
        }
        if record.calls >= self.limits.max_calls {
            return Err(Failed(
                ToolOutcome::BudgetExceeded,
                format!(
                    "a run may make at most {} tool calls",
                    self.limits.max_calls
                ),
            ));
        }
        record.calls += 1;
        Ok(())
    }

    /// One call: the checks, the handler, the result encoded as JSON.
    async fn call(&self, name: &str, args: Option<Value>) -> Result<String, Failed> {
        let Some(tool) = self.tools.get(name) else {
            let offered: Vec<&str> = self.tools.iter().map(|t| t.name().as_str()).collect();
            return Err(Failed(
                ToolOutcome::UnknownTool,
                match offered.is_empty() {
                    true => format!("there is no tool `{name}`: this session has no tools"),
                    false => format!(
                        "there is no tool `{name}`; this session's tools: {}",
                        offered.join(", ")
                    ),
                },
            ));
        };
        let arguments = args.unwrap_or_else(|| Value::Object(Default::default()));
        if let Some(why) = tool.check_arguments(&arguments) {
            return Err(Failed(
                ToolOutcome::InvalidArguments,
                format!("{name}: the arguments do not fit its schema: {why}"),
            ));
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        let timeout = self.limits.call_timeout.min(left);
        let late = || {
            Failed(
                ToolOutcome::Timeout,
                match timeout < self.limits.call_timeout {
                    true => format!("{name} did not answer before the run's time was up"),
                    false => format!("{name} did not answer within {}", seconds(timeout)),
                },
            )
        };
        let answered = tokio::time::timeout(timeout, async {
            // Waiting for a turn counts against the call's time.
            let _turn = self.turns.acquire().await;
            match &tool.handler {
                Handler::Sync(handler) => {
                    let handler = handler.clone();
                    let work = tokio::task::spawn_blocking(move || handler(arguments));
                    work.await.map_err(|_| panicked(name))
                }
                Handler::Async(handler) => AssertUnwindSafe(handler(arguments))
                    .catch_unwind()
                    .await
                    .map_err(|_| panicked(name)),
            }
        })
        .await;
        let value = match answered {
            Err(_) => return Err(late()),
            Ok(Err(failed)) => return Err(failed),
            Ok(Ok(Err(error))) => {
                return Err(Failed(ToolOutcome::ToolError, error.message().to_string()))
            }
            Ok(Ok(Ok(value))) => value,
        };
        let encoded = serde_json::to_string(&value).map_err(|error| {
            Failed(
                ToolOutcome::ToolError,
                format!("{name} gave a result that is not JSON: {error}"),
            )
        })?;
        if encoded.len() > self.limits.max_result_bytes {
            return Err(Failed(
                ToolOutcome::TooLarge,
                format!(
                    "{name} gave {} bytes; a tool's result may be at most {}",
                    encoded.len(),
                    self.limits.max_result_bytes
                ),
            ));
        }
        Ok(encoded)
    }

    fn note(
        &self,
        name: &str,
        arrived: Instant,
        argument_bytes: usize,
        result_bytes: usize,
        outcome: ToolOutcome,
        message: Option<&str>,
    ) {
        let call = ToolCall {
            name: name.to_string(),
            duration: arrived.elapsed(),
            argument_bytes,
            result_bytes,
            outcome,
            message: message.map(|m| protocol::cut(m, protocol::MAX_MESSAGE).to_string()),
        };
        let mut record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        // A call that ends after its run is in no record, and shown to no one.
        if record.finished {
            return;
        }
        if let Some(Observer(sink)) = &self.observer {
            sink(&call);
        }
        record.made.push(call);
    }

    /// Ends the run's calls and gives their record, in the order they were answered.
    /// A call that arrives later is refused; one still waiting for its handler is
    /// answered with an error.
    pub fn finish(&self) -> Vec<ToolCall> {
        let mut record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        record.finished = true;
        std::mem::take(&mut record.made)
    }
}

fn panicked(name: &str) -> Failed {
    Failed(
        ToolOutcome::ToolError,
        format!("{name} failed inside the host (its handler panicked)"),
    )
}

fn seconds(duration: Duration) -> String {
    format!("{:.3} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Tool, ToolError};
    use serde_json::json;

    /// Runs `future` on a runtime of its own, left without waiting for its blocking
    /// threads (a hanging handler's among them), as the backends' long-lived
    /// runtimes never wait for them either.
    fn block<T>(future: impl std::future::Future<Output = T>) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let value = runtime.block_on(future);
        runtime.shutdown_background();
        value
    }

    fn tools() -> ToolSet {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let mut set = ToolSet::new();
        set.add(
            Tool::new("echo", "Gives back n.", schema.clone(), |a| {
                Ok(a["n"].clone())
            })
            .unwrap(),
        )
        .unwrap();
        set.add(
            Tool::new("fails", "Always fails.", schema.clone(), |_| {
                Err(ToolError::new("no such fruit"))
            })
            .unwrap(),
        )
        .unwrap();
        set.add(Tool::new("panics", "Panics.", schema.clone(), |_| panic!("boom")).unwrap())
            .unwrap();
        set.add(
            Tool::new("hangs", "Never answers.", schema.clone(), |_| {
                std::thread::sleep(Duration::from_secs(3));
                Ok(json!(null))
            })
            .unwrap(),
        )
        .unwrap();
        set.add(
            Tool::new_async("big", "A large result.", schema, |a| {
                Box::pin(
                    async move { Ok(json!("x".repeat(a["n"].as_u64().unwrap_or(0) as usize))) },
                )
            })
            .unwrap(),
        )
        .unwrap();
        set
    }

    fn ask(calls: &ToolCalls, frame: Value) -> Value {
        let frame = serde_json::to_vec(&frame).unwrap();
        serde_json::from_slice(&block(calls.answer(&frame))).unwrap()
    }

    fn call(tool: &str, args: Value) -> Value {
        json!({"v": 1, "id": 9, "op": "call", "tool": tool, "args": args})
    }

    fn calls_with(limits: ToolLimits) -> ToolCalls {
        ToolCalls::new(tools(), limits, Instant::now() + Duration::from_secs(60))
    }

    #[test]
    fn an_observer_sees_each_call_as_it_is_recorded_and_none_after_the_run() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seeing = seen.clone();
        let calls = calls_with(ToolLimits::default()).observed(Arc::new(move |call: &ToolCall| {
            seeing.lock().unwrap().push(call.clone())
        }));
        ask(&calls, call("echo", json!({"n": 1})));
        assert_eq!(seen.lock().unwrap().len(), 1, "seen while the run goes on");
        ask(&calls, call("fails", json!({})));
        let recorded = calls.finish();
        assert_eq!(*seen.lock().unwrap(), recorded);
        ask(&calls, call("echo", json!({"n": 2})));
        assert_eq!(
            seen.lock().unwrap().len(),
            2,
            "a call after the run is not shown"
        );
    }

    #[test]
    fn a_call_is_answered_and_recorded() {
        let calls = calls_with(ToolLimits::default());
        let answer = ask(&calls, call("echo", json!({"n": 5})));
        assert_eq!(answer, json!({"v": 1, "id": 9, "ok": true, "value": 5}));
        let made = calls.finish();
        assert_eq!(made.len(), 1);
        assert_eq!(
            (made[0].name.as_str(), made[0].outcome),
            ("echo", ToolOutcome::Ok)
        );
        assert_eq!(made[0].result_bytes, 1);
    }

    #[test]
    fn the_listing_describes_every_tool_with_mcp_names() {
        let calls = calls_with(ToolLimits::default());
        let listing = ask(&calls, json!({"v": 1, "id": 1, "op": "list"}));
        let names: Vec<&str> = listing["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["big", "echo", "fails", "hangs", "panics"]);
        assert_eq!(listing["tools"][1]["inputSchema"]["type"], json!("object"));
        assert!(calls.finish().is_empty(), "a listing is not a call");
    }

    #[test]
    fn every_failure_is_an_error_frame_of_its_kind() {
        let calls = calls_with(ToolLimits {
            // Long enough for a panicking handler to unwind (and print its backtrace)
            // on a loaded machine: a CI run once saw it take longer than 200 ms.
            call_timeout: Duration::from_millis(1500),
            max_result_bytes: 100,
            ..ToolLimits::default()
        });
        let kind = |answer: Value| answer["error"]["kind"].as_str().unwrap().to_string();
        assert_eq!(kind(ask(&calls, call("fails", json!({})))), "tool_error");
        assert_eq!(
            ask(&calls, call("fails", json!({})))["error"]["message"],
            json!("no such fruit")
        );
        assert_eq!(kind(ask(&calls, call("panics", json!({})))), "tool_error");
        assert_eq!(kind(ask(&calls, call("nope", json!({})))), "unknown_tool");
        assert_eq!(
            kind(ask(&calls, call("echo", json!({"n": "x"})))),
            "invalid_arguments"
        );
        assert_eq!(
            kind(ask(&calls, call("big", json!({"n": 1000})))),
            "too_large"
        );
        let started = Instant::now();
        assert_eq!(kind(ask(&calls, call("hangs", json!({})))), "timeout");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the call was not left behind"
        );
        let garbage = block(calls.answer(b"{not json"));
        let garbage: Value = serde_json::from_slice(&garbage).unwrap();
        assert_eq!(
            (garbage["id"].clone(), kind(garbage)),
            (Value::Null, "protocol".into())
        );
        let outcomes: Vec<ToolOutcome> = calls.finish().iter().map(|c| c.outcome).collect();
        assert_eq!(outcomes.len(), 8);
    }

    #[test]
    fn limits_on_calls_and_request_size_hold_for_the_run() {
        let calls = calls_with(ToolLimits {
            max_calls: 3,
            max_argument_bytes: 200,
            ..ToolLimits::default()
        });
        assert_eq!(
            ask(&calls, call("echo", json!({"n": 1})))["ok"],
            json!(true)
        );
        // Refused frames count too: a flood of them is bounded like calls.
        let big = call("echo", json!({"n": 1, "pad": "x".repeat(300)}));
        assert_eq!(ask(&calls, big)["error"]["kind"], json!("too_large"));
        assert_eq!(
            ask(&calls, call("echo", json!({"n": 2})))["ok"],
            json!(true)
        );
        for _ in 0..100 {
            let over = ask(&calls, call("echo", json!({"n": 3})));
            assert_eq!(over["error"]["kind"], json!("budget_exceeded"));
            assert_eq!(
                over["id"],
                json!(9),
                "the id comes back for the binding to match"
            );
        }
        assert_eq!(
            calls.finish().len(),
            3,
            "past the budget nothing is recorded"
        );
        let after = ask(
            &calls_with(ToolLimits::default()),
            call("echo", json!({"n": 1})),
        );
        assert_eq!(after["ok"], json!(true));
    }

    #[test]
    fn no_call_outlives_the_run() {
        let calls = ToolCalls::new(
            tools(),
            ToolLimits::default(),
            Instant::now() + Duration::from_millis(100),
        );
        let answer = ask(&calls, call("hangs", json!({})));
        assert!(answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("run's time"));
        calls.finish();
        let late = ask(&calls, call("echo", json!({"n": 1})));
        assert_eq!(
            late["error"]["message"],
            json!("the run this call belongs to has ended")
        );
    }
}

//! Client-side tools: tools an HTTP client declares when it opens a session and
//! answers itself, the protocol of programmatic tool calling in Anthropic's and
//! OpenAI's APIs. When the session's code calls one, the streamed run that made the
//! call sends a `tool_call` event (`id`, `name`, `arguments`); the client posts the
//! result to `/v1/sessions/{id}/tool_calls/{call}`; the code goes on with it. Only
//! the session's own client can answer; a call nobody answers ends at the server's
//! tool call timeout, and the code gets `ToolTimeout`.

use crate::manager::{ClientId, SessionId};
use axum::response::sse::Event;
use sandlot_core::error::Error;
use sandlot_core::secret::Masker;
use sandlot_core::tool::{Tool, ToolError, ToolSet};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

use super::requests::DeclaredTool;

type Answer = Result<Value, ToolError>;

/// The client tools of one session: where its calls go out, and their answers wait.
pub(super) struct ToolHub {
    owner: ClientId,
    /// The event stream of the run under way, while one is streamed, and what masks
    /// the session's secrets in the calls sent on it.
    events: Mutex<Option<(mpsc::UnboundedSender<Event>, Masker)>>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    next: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ToolHub {
    /// A hub for the tools `declared` by `owner`, and those tools, each calling out
    /// through the hub.
    pub(super) fn new(
        owner: ClientId,
        declared: Vec<DeclaredTool>,
    ) -> Result<(Arc<ToolHub>, ToolSet), Error> {
        let hub = Arc::new(ToolHub {
            owner,
            events: Mutex::new(None),
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        });
        let mut tools = ToolSet::new();
        for tool in declared {
            let calling = hub.clone();
            let name = tool.name.clone();
            tools.add(Tool::new_async(
                &tool.name,
                &tool.description,
                tool.input_schema,
                move |arguments| {
                    let (hub, name) = (calling.clone(), name.clone());
                    Box::pin(async move { hub.call(name, arguments).await })
                },
            )?)?;
        }
        Ok((hub, tools))
    }

    /// Whether `client` may answer this hub's calls.
    pub(super) fn owned_by(&self, client: &ClientId) -> bool {
        &self.owner == client
    }

    /// Sends calls to `events`, masked with `masker`, until the returned guard is
    /// dropped (the run ends); then every call still waiting fails.
    pub(super) fn listen(
        self: &Arc<Self>,
        events: mpsc::UnboundedSender<Event>,
        masker: Masker,
    ) -> Listening {
        *lock(&self.events) = Some((events, masker));
        Listening(self.clone())
    }

    /// Hands `answer` to call `call`; whether it was waiting.
    pub(super) fn answer(&self, call: &str, answer: Answer) -> bool {
        match lock(&self.waiting).remove(call) {
            Some(waiting) => waiting.send(answer).is_ok(),
            None => false,
        }
    }

    async fn call(&self, name: String, arguments: Value) -> Answer {
        let (tx, rx) = oneshot::channel();
        let id = {
            let events = lock(&self.events);
            let Some((events, masker)) = events.as_ref() else {
                return Err(ToolError::new(
                    "this session's tools are answered by its client, through the run's \
                     event stream: run with `Accept: text/event-stream`",
                ));
            };
            // Numbered as they go out: call_1 is a session's first.
            let id = format!("call_{}", self.next.fetch_add(1, Ordering::Relaxed));
            // The arguments are the code's, and may carry the session's secrets
            // (the operator's among them) to a client they were kept from.
            let call = json!({ "id": id, "name": name, "arguments": arguments });
            let event = super::events::masked_event(masker, "tool_call", call)
                .map_err(|e| ToolError::new(format!("the call could not be sent: {e}")))?;
            lock(&self.waiting).insert(id.clone(), tx);
            if events.send(event).is_err() {
                lock(&self.waiting).remove(&id);
                return Err(ToolError::new(
                    "the client stopped reading the run's events",
                ));
            }
            id
        };
        // Given up (timed out, the run over): the call no longer waits.
        let _forget = Forget(self, &id);
        match rx.await {
            Ok(answer) => answer,
            Err(_) => Err(ToolError::new("the run ended before the client answered")),
        }
    }
}

/// Removes a call from those waiting, however its wait ends.
struct Forget<'a>(&'a ToolHub, &'a str);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.0.waiting).remove(self.1);
    }
}

/// A streamed run's hold on the hub's calls.
pub(super) struct Listening(Arc<ToolHub>);

impl Drop for Listening {
    fn drop(&mut self) {
        *lock(&self.0.events) = None;
        // Dropping the senders fails the calls that still wait.
        lock(&self.0.waiting).clear();
    }
}

/// The hubs of the sessions that have client tools.
#[derive(Default)]
pub(super) struct Hubs(Mutex<HashMap<SessionId, Arc<ToolHub>>>);

impl Hubs {
    pub(super) fn insert(&self, id: SessionId, hub: Arc<ToolHub>) {
        lock(&self.0).insert(id, hub);
    }

    pub(super) fn get(&self, id: &SessionId) -> Option<Arc<ToolHub>> {
        lock(&self.0).get(id).cloned()
    }

    pub(super) fn remove(&self, id: &SessionId) {
        lock(&self.0).remove(id);
    }

    /// Keeps the hubs of `client`'s sessions that are still `open`, and everyone
    /// else's.
    pub(super) fn keep_open(&self, client: &ClientId, open: &[SessionId]) {
        lock(&self.0).retain(|id, hub| !hub.owned_by(client) || open.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(name: &str) -> DeclaredTool {
        serde_json::from_value(json!({ "name": name })).unwrap()
    }

    #[tokio::test]
    async fn a_call_goes_out_as_an_event_and_waits_for_its_answer() {
        let (hub, tools) = ToolHub::new(ClientId::new("alice"), vec![declared("look")]).unwrap();
        assert!(hub.owned_by(&ClientId::new("alice")));
        assert!(!hub.owned_by(&ClientId::new("bob")));
        assert_eq!(tools.len(), 1);
        // Not streamed: refused at once, saying how to stream.
        let unheard = hub.call("look".into(), json!({})).await.unwrap_err();
        assert!(unheard.message().contains("text/event-stream"), "{unheard}");

        let (events, mut sent) = mpsc::unbounded_channel();
        let listening = hub.listen(events, Masker::default());
        let calling = {
            let hub = hub.clone();
            tokio::spawn(async move { hub.call("look".into(), json!({"k": 1})).await })
        };
        let _event = sent.recv().await.unwrap();
        assert!(!hub.answer("call_99", Ok(json!(0))));
        assert!(hub.answer("call_1", Ok(json!("found"))));
        assert_eq!(calling.await.unwrap().unwrap(), json!("found"));

        // The run ends with a call waiting: it fails, and nothing is left waiting.
        let waiting = {
            let hub = hub.clone();
            tokio::spawn(async move { hub.call("look".into(), json!({})).await })
        };
        let _event = sent.recv().await.unwrap();
        drop(listening);
        assert!(waiting.await.unwrap().is_err());
        assert!(lock(&hub.waiting).is_empty());
    }

    #[test]
    fn a_bad_declaration_is_refused_with_its_name() {
        let error = ToolHub::new(ClientId::new("a"), vec![declared("not a name")])
            .err()
            .unwrap();
        assert!(error.to_string().contains("not a name"), "{error}");
    }
}

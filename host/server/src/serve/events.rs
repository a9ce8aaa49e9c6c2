//! The events of a streamed run, as a client gets them: every one's data masked with
//! the session's secrets as it goes out, whoever built it (the output, a client
//! tool's call, a tool call's record, the result, an error).

use axum::response::sse::Event;
use sandlot_core::secret::Masker;
use serde_json::Value;

/// A server-sent event `name` whose data is `data` with the session's secrets masked
/// in every string, key and number: the one way a run's events are made.
pub(super) fn masked_event(masker: &Masker, name: &str, data: Value) -> Result<Event, axum::Error> {
    Event::default().event(name).json_data(masker.json(data))
}

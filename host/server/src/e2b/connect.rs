//! The Connect protocol as envd's clients speak it: JSON messages, bare for unary
//! calls and in 5-byte envelopes for server streams, errors as Connect codes.
//!
//! Only the JSON codec: both official SDKs have sent JSON since 2024
//! (`application/json`, `application/connect+json`); a binary request is answered
//! with an error that says so.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// The flag of an envelope whose payload is compressed (never accepted).
const COMPRESSED: u8 = 0x01;
/// The flag of the last envelope of a stream, which holds its trailers.
const END_STREAM: u8 = 0x02;
/// The largest envelope accepted from a client: its requests are small (a command
/// line, a path), and its length field is the client's word, not ours.
pub const MAX_MESSAGE: usize = 4 << 20;

/// A Connect error code, as the protocol spells it on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Code {
    /// The call was cancelled.
    Canceled,
    /// An error of no known class.
    Unknown,
    /// The request is malformed whatever the state.
    InvalidArgument,
    /// The call's deadline passed.
    DeadlineExceeded,
    /// A file, process or sandbox that does not exist.
    NotFound,
    /// What was to be made exists already.
    AlreadyExists,
    /// The caller may not do this.
    PermissionDenied,
    /// A limit or quota was reached.
    ResourceExhausted,
    /// The sandbox is not in a state that allows it.
    FailedPrecondition,
    /// The method is not served.
    Unimplemented,
    /// The server failed.
    Internal,
    /// The server cannot serve it now.
    Unavailable,
    /// No valid credentials.
    Unauthenticated,
}

impl Code {
    /// The code's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Canceled => "canceled",
            Code::Unknown => "unknown",
            Code::InvalidArgument => "invalid_argument",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::NotFound => "not_found",
            Code::AlreadyExists => "already_exists",
            Code::PermissionDenied => "permission_denied",
            Code::ResourceExhausted => "resource_exhausted",
            Code::FailedPrecondition => "failed_precondition",
            Code::Unimplemented => "unimplemented",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status of a unary call that fails with this code (the Connect
    /// protocol's table).
    pub fn status(self) -> StatusCode {
        match self {
            Code::Canceled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
            Code::Unknown | Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::InvalidArgument | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

/// A failed call: its code and a message for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError {
    /// What class of failure.
    pub code: Code,
    /// What went wrong and what to do.
    pub message: String,
}

impl ConnectError {
    /// An error of `code`.
    pub fn new(code: Code, message: impl Into<String>) -> ConnectError {
        ConnectError {
            code,
            message: message.into(),
        }
    }

    fn json(&self) -> Value {
        json!({ "code": self.code.as_str(), "message": self.message })
    }
}

impl From<sandlot_core::error::Error> for ConnectError {
    fn from(error: sandlot_core::error::Error) -> ConnectError {
        use sandlot_core::error::ErrorKind;
        let code = match error.kind() {
            ErrorKind::NotFound => Code::NotFound,
            ErrorKind::InvalidInput => Code::InvalidArgument,
            ErrorKind::Blocked | ErrorKind::NotAllowed => Code::PermissionDenied,
            ErrorKind::Unsupported => Code::FailedPrecondition,
            ErrorKind::Exhausted => Code::ResourceExhausted,
            ErrorKind::SessionEnded | ErrorKind::Unavailable | ErrorKind::NotInstalled => {
                Code::Unavailable
            }
            _ => Code::Internal,
        };
        ConnectError::new(code, error.to_string())
    }
}

/// A unary error: the code's status and the JSON the SDKs decode.
impl IntoResponse for ConnectError {
    fn into_response(self) -> Response {
        (
            self.code.status(),
            [(header::CONTENT_TYPE, "application/json")],
            self.json().to_string(),
        )
            .into_response()
    }
}

/// Which form a call takes, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `application/json`: one bare message each way.
    Unary,
    /// `application/connect+json`: enveloped messages, an end-of-stream frame last.
    Stream,
}

/// The form of a request by its headers, or the error that says what this server
/// speaks.
pub fn form(headers: &HeaderMap) -> Result<Form, ConnectError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Ok(Form::Unary),
        "application/connect+json" => Ok(Form::Stream),
        "application/proto" | "application/connect+proto" => Err(ConnectError::new(
            Code::Unimplemented,
            "this server speaks Connect's JSON codec only (every E2B SDK since 2024 does); \
             update the SDK",
        )),
        _ => Err(ConnectError::new(
            Code::InvalidArgument,
            format!(
                "the content type `{}` is not Connect's: send application/json (unary) or \
                 application/connect+json (stream)",
                content_type.chars().take(80).collect::<String>()
            ),
        )),
    }
}

/// One frame of a Connect stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Its flags byte.
    pub flags: u8,
    /// Its payload.
    pub payload: Bytes,
}

/// The most envelopes a request body may hold: a server-streaming call's request is
/// one message and perhaps an end-of-stream frame.
pub const MAX_ENVELOPES: usize = 4;

/// Splits a request body into its envelopes. Refuses a truncated frame, a length
/// past [`MAX_MESSAGE`], a compressed payload and more than [`MAX_ENVELOPES`]
/// frames (a body of empty frames would otherwise cost 8 bytes of memory for each
/// of its bytes), each with what was wrong.
pub fn envelopes(mut body: &[u8]) -> Result<Vec<Envelope>, ConnectError> {
    let mut frames = Vec::new();
    while !body.is_empty() {
        if frames.len() == MAX_ENVELOPES {
            return Err(ConnectError::new(
                Code::InvalidArgument,
                format!(
                    "a request holds at most {MAX_ENVELOPES} Connect envelopes; send one \
                     message"
                ),
            ));
        }
        let Some((head, rest)) = body.split_first_chunk::<5>() else {
            return Err(ConnectError::new(
                Code::InvalidArgument,
                format!(
                    "a Connect envelope needs a 5-byte header, and {} bytes are left",
                    body.len()
                ),
            ));
        };
        let flags = head[0];
        let length = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if length > MAX_MESSAGE {
            return Err(ConnectError::new(
                Code::ResourceExhausted,
                format!("a message of {length} bytes is over this server's {MAX_MESSAGE}"),
            ));
        }
        if flags & COMPRESSED != 0 {
            return Err(ConnectError::new(
                Code::Unimplemented,
                "compressed messages are not accepted: send them uncompressed",
            ));
        }
        if rest.len() < length {
            return Err(ConnectError::new(
                Code::InvalidArgument,
                format!(
                    "an envelope announces {length} bytes, and the body holds {}",
                    rest.len()
                ),
            ));
        }
        let (payload, after) = rest.split_at(length);
        frames.push(Envelope {
            flags,
            payload: Bytes::copy_from_slice(payload),
        });
        body = after;
    }
    Ok(frames)
}

/// The one request message of a server-streaming call.
pub fn stream_request<T: DeserializeOwned>(body: &[u8]) -> Result<T, ConnectError> {
    let frames = envelopes(body)?;
    let messages: Vec<&Envelope> = frames
        .iter()
        .filter(|f| f.flags & END_STREAM == 0)
        .collect();
    match messages.as_slice() {
        [only] => message(&only.payload),
        other => Err(ConnectError::new(
            Code::InvalidArgument,
            format!(
                "a server-streaming call takes one request message, and this one has {}",
                other.len()
            ),
        )),
    }
}

/// The request of server-streaming `method`: the headers say it is a stream, the
/// body holds one message.
pub fn stream_call<T: DeserializeOwned>(
    method: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ConnectError> {
    if form(headers)? != Form::Stream {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            format!("{method} is a server-streaming method: send application/connect+json"),
        ));
    }
    stream_request(body)
}

/// The request of a unary method: the headers say it is unary, the body is the
/// message.
pub fn unary_call<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ConnectError> {
    if form(headers)? != Form::Unary {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "this is a unary method: send application/json",
        ));
    }
    message(body)
}

/// A JSON message, or the error that says what is wrong with it.
pub fn message<T: DeserializeOwned>(payload: &[u8]) -> Result<T, ConnectError> {
    // An empty unary body is the empty message.
    let payload = if payload.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        payload
    };
    serde_json::from_slice(payload).map_err(|e| {
        ConnectError::new(
            Code::InvalidArgument,
            format!("the request message is not what this method takes: {e}"),
        )
    })
}

/// One message as a frame of a stream.
pub fn frame(message: &Value) -> Bytes {
    enveloped(0, message.to_string().as_bytes())
}

/// The last frame of a stream: its error, if it failed.
pub fn end_of_stream(error: Option<&ConnectError>) -> Bytes {
    let trailer = match error {
        None => json!({}),
        Some(error) => json!({ "error": error.json() }),
    };
    enveloped(END_STREAM, trailer.to_string().as_bytes())
}

fn enveloped(flags: u8, payload: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(5 + payload.len());
    frame.put_u8(flags);
    frame.put_u32(payload.len() as u32);
    frame.put_slice(payload);
    frame.freeze()
}

/// A unary success.
pub fn unary(message: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        message.to_string(),
    )
        .into_response()
}

/// A streaming answer: 200 with frames from `frames`, which must end with
/// [`end_of_stream`]. A streaming call's errors travel in that last frame, never in
/// the status: the SDKs read no body from a stream that is not 200.
///
/// With a `keepalive` (the interval the caller's `Keepalive-Ping-Interval` asks for,
/// and the message), the message goes out whenever the stream has been quiet that
/// long, as envd does, so that proxies keep a silent command's stream open.
pub fn streamed(
    frames: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
    keepalive: Option<(std::time::Duration, Value)>,
) -> Response {
    let keepalive = keepalive.map(|(every, message)| (every, frame(&message)));
    let stream = futures_util::stream::unfold(frames, move |mut frames| {
        let keepalive = keepalive.clone();
        async move {
            let next = match keepalive {
                None => frames.recv().await,
                Some((every, ping)) => tokio::time::timeout(every, frames.recv())
                    .await
                    .unwrap_or(Some(ping)),
            };
            next.map(|frame| (Ok::<Bytes, std::convert::Infallible>(frame), frames))
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/connect+json"),
    );
    response
}

/// A stream that failed before its first message.
pub fn failed_stream(error: &ConnectError) -> Response {
    let mut response = Response::new(Body::from(end_of_stream(Some(error))));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/connect+json"),
    );
    response
}

/// The interval of keepalive messages the caller asks for with
/// `Keepalive-Ping-Interval` (seconds); none when it asks for none, or for an
/// interval that is not a whole number of seconds from 1 to a day.
pub fn keepalive_interval(headers: &HeaderMap) -> Option<std::time::Duration> {
    headers
        .get("keepalive-ping-interval")?
        .to_str()
        .ok()?
        .parse::<u64>()
        .ok()
        .filter(|s| (1..=86_400).contains(s))
        .map(std::time::Duration::from_secs)
}

/// The call's deadline from `Connect-Timeout-Ms`, if it has one.
pub fn deadline(headers: &HeaderMap) -> Result<Option<std::time::Duration>, ConnectError> {
    let Some(value) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .filter(|v| !v.is_empty() && v.len() <= 10 && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|ms| Some(std::time::Duration::from_millis(ms)))
        .ok_or_else(|| {
            ConnectError::new(
                Code::InvalidArgument,
                "Connect-Timeout-Ms must be at most 10 decimal digits",
            )
        })
}

/// What the fuzz target `e2b_connect` runs: any bytes as the body of a streaming
/// call and of a unary one. Parsing never panics, and frames that parse are the body
/// exactly, byte for byte.
#[doc(hidden)]
pub fn fuzz_body(data: &[u8]) {
    if let Ok(frames) = envelopes(data) {
        let again: Vec<u8> = frames
            .iter()
            .flat_map(|f| enveloped(f.flags, &f.payload))
            .collect();
        assert_eq!(again, data, "frames that are not the body they came from");
    }
    let _ = stream_request::<Value>(data);
    let _ = message::<Value>(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_and_join_back() {
        let mut body = frame(&json!({"a": 1})).to_vec();
        body.extend_from_slice(&end_of_stream(None));
        let frames = envelopes(&body).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].flags, 0);
        assert_eq!(&frames[0].payload[..], br#"{"a":1}"#);
        assert_eq!(frames[1].flags, END_STREAM);
        assert_eq!(&frames[1].payload[..], b"{}");
        let value: Value = stream_request(&body).unwrap();
        assert_eq!(value, json!({"a": 1}));
    }

    #[test]
    fn broken_frames_are_named() {
        let truncated = envelopes(&[0, 0, 0, 0, 9, b'{']).unwrap_err();
        assert_eq!(truncated.code, Code::InvalidArgument);
        assert!(
            truncated.message.contains("announces 9 bytes"),
            "{truncated:?}"
        );
        let many = envelopes(&[0u8; 5 * (MAX_ENVELOPES + 1)]).unwrap_err();
        assert!(many.message.contains("at most"), "{}", many.message);
        assert_eq!(
            envelopes(&[0u8; 5 * MAX_ENVELOPES]).unwrap().len(),
            MAX_ENVELOPES
        );
        let short = envelopes(&[0, 0]).unwrap_err();
        assert!(short.message.contains("5-byte header"), "{short:?}");
        let huge = envelopes(&[0, 0xff, 0xff, 0xff, 0xff]).unwrap_err();
        assert_eq!(huge.code, Code::ResourceExhausted);
        let compressed = envelopes(&[1, 0, 0, 0, 0]).unwrap_err();
        assert_eq!(compressed.code, Code::Unimplemented);
        let two = [frame(&json!({})), frame(&json!({}))].concat();
        assert!(stream_request::<Value>(&two).is_err());
        let not_json = envelopes(&[0, 0, 0, 0, 1, b'x']).unwrap();
        assert!(message::<Value>(&not_json[0].payload).is_err());
    }

    #[test]
    fn an_error_ends_a_stream_in_its_trailer() {
        let end = end_of_stream(Some(&ConnectError::new(Code::NotFound, "no process 7")));
        assert_eq!(end[0], END_STREAM);
        let trailer: Value = serde_json::from_slice(&end[5..]).unwrap();
        assert_eq!(trailer["error"]["code"], "not_found");
        assert_eq!(trailer["error"]["message"], "no process 7");
    }

    #[test]
    fn content_types_pick_the_form() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
            form(&headers)
        };
        assert_eq!(with("application/json").unwrap(), Form::Unary);
        assert_eq!(
            with("Application/JSON; charset=utf-8").unwrap(),
            Form::Unary
        );
        assert_eq!(with("application/connect+json").unwrap(), Form::Stream);
        assert_eq!(
            with("application/proto").unwrap_err().code,
            Code::Unimplemented
        );
        assert_eq!(with("text/plain").unwrap_err().code, Code::InvalidArgument);
    }

    #[test]
    fn deadlines_are_milliseconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(deadline(&headers).unwrap(), None);
        headers.insert("connect-timeout-ms", HeaderValue::from_static("1500"));
        assert_eq!(
            deadline(&headers).unwrap(),
            Some(std::time::Duration::from_millis(1500))
        );
        headers.insert("connect-timeout-ms", HeaderValue::from_static("-1"));
        assert!(deadline(&headers).is_err());
    }
}

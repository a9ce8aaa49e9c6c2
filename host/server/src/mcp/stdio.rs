//! MCP over standard input and output: one JSON-RPC message per line.
//!
//! rmcp's own stdio transport drops a line longer than its limit, and a line that is
//! not JSON, without a word: the client then waits for an answer that never comes.
//! This one answers every line it cannot take with a JSON-RPC error, and goes on
//! reading: a request too large gets `-32600` with the request's own id (found by
//! reading the line as it streams past, without keeping it), a line that is not JSON
//! gets `-32700`, JSON that is no message gets `-32600`.

use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The longest line taken, in bytes: a request that uploads a file of 16 MiB,
/// base64-encoded, fits with room to spare.
pub const MAX_REQUEST: usize = 24 << 20;

/// What is kept of a line's start, to quote in the error of one that is too long.
const KEPT: usize = 256;

/// A line-delimited JSON-RPC transport over a reader and a writer.
pub(super) struct LineTransport<R> {
    reader: BufReader<R>,
    writer: Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>,
    max: usize,
    /// The line read so far (until it passes `max`).
    line: Vec<u8>,
    /// Past `max`: the rest of the line is read and dropped, watched for its id.
    oversized: Option<Oversized>,
}

/// A line being dropped for its size.
struct Oversized {
    ids: IdFinder,
    length: usize,
}

impl<R: tokio::io::AsyncRead + Send + Unpin + 'static> LineTransport<R> {
    /// Reads `reader`, writes `writer`, takes lines of at most `max` bytes.
    pub(super) fn new(
        reader: R,
        writer: impl AsyncWrite + Send + Unpin + 'static,
        max: usize,
    ) -> Self {
        LineTransport {
            reader: BufReader::with_capacity(64 << 10, reader),
            writer: Arc::new(Mutex::new(Box::new(writer))),
            max,
            line: Vec::new(),
            oversized: None,
        }
    }

    /// Writes one line, whole, before any other.
    async fn write_line(
        writer: &Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
        mut bytes: Vec<u8>,
    ) -> std::io::Result<()> {
        bytes.push(b'\n');
        let mut writer = writer.lock().await;
        writer.write_all(&bytes).await?;
        writer.flush().await
    }

    /// The next whole line, or `None` at the end of input. Lines too long are
    /// answered here and skipped. Safe to cancel: what was read stays in `self`.
    async fn next_line(&mut self) -> Option<Vec<u8>> {
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(bytes) => bytes,
                Err(_) => return None,
            };
            if available.is_empty() {
                return None;
            }
            let (chunk, ends) = match memchr(available) {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            let taken = chunk.len() + usize::from(ends);
            match &mut self.oversized {
                Some(big) => {
                    big.ids.feed(chunk);
                    big.length += chunk.len();
                }
                None if self.line.len() + chunk.len() > self.max => {
                    let mut ids = IdFinder::default();
                    ids.feed(&self.line);
                    ids.feed(chunk);
                    self.oversized = Some(Oversized {
                        ids,
                        length: self.line.len() + chunk.len(),
                    });
                    self.line.clear();
                }
                None => self.line.extend_from_slice(chunk),
            }
            self.reader.consume(taken);
            if !ends {
                continue;
            }
            if let Some(big) = self.oversized.take() {
                let answer = error_line(
                    big.ids.id(),
                    -32600,
                    &format!(
                        "the request is {} bytes, more than the {} one message may be; send \
                         large files in parts (upload_file) or through a session's files",
                        big.length, self.max
                    ),
                );
                tracing::warn!(
                    bytes = big.length,
                    max = self.max,
                    "MCP request over the size limit refused"
                );
                if Self::write_line(&self.writer, answer).await.is_err() {
                    return None;
                }
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.starts_with(b"\xef\xbb\xbf") {
                line.drain(..3);
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(line);
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

/// A JSON-RPC error response, as a line's bytes (without the newline). `id` is the
/// request's id as JSON text, or `null`.
fn error_line(id: Option<String>, code: i32, message: &str) -> Vec<u8> {
    let id = id.unwrap_or_else(|| "null".into());
    let message = serde_json::Value::String(message.to_string());
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#)
        .into_bytes()
}

impl<R: tokio::io::AsyncRead + Send + Unpin + 'static> rmcp::transport::Transport<RoleServer>
    for LineTransport<R>
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        async move {
            let bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            Self::write_line(&writer, bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = self.next_line().await?;
            match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(&line) {
                Ok(message) => return Some(message),
                Err(error) => {
                    let value = serde_json::from_slice::<serde_json::Value>(&line);
                    let answer = match value {
                        // Notifications (no id) get no answer, as JSON-RPC asks.
                        Ok(value) if value.get("id").is_none() && value.get("method").is_some() => {
                            continue
                        }
                        Ok(value) => error_line(
                            value.get("id").map(|id| id.to_string()),
                            -32600,
                            &format!("not a JSON-RPC message MCP knows: {error}"),
                        ),
                        Err(_) => {
                            let mut ids = IdFinder::default();
                            ids.feed(&line);
                            error_line(ids.id(), -32700, &format!("not JSON: {error}"))
                        }
                    };
                    if Self::write_line(&self.writer, answer).await.is_err() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.flush().await
    }
}

/// Finds a JSON object's top-level `"id"` member in bytes fed to it piece by piece,
/// keeping nothing but the value (a number, or a string of at most [`KEPT`] bytes).
#[derive(Default)]
struct IdFinder {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The current top-level string, while it may be a key.
    key: Vec<u8>,
    /// A string just ended at depth 1: the key, if a `:` follows.
    last_string: Option<Vec<u8>>,
    /// Reading the value of the `id` member.
    value: Option<Vec<u8>>,
    found: Option<String>,
}

impl IdFinder {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.found.is_some() {
                return;
            }
            if let Some(value) = &mut self.value {
                let ends = !self.in_string && self.depth == 1 && matches!(byte, b',' | b'}');
                if ends {
                    let text = String::from_utf8_lossy(value).trim().to_string();
                    let valid = serde_json::from_str::<serde_json::Value>(&text)
                        .is_ok_and(|v| v.is_number() || v.is_string());
                    self.found = valid.then_some(text);
                    self.value = None;
                    continue;
                }
                if value.len() < KEPT {
                    value.push(byte);
                } else {
                    self.value = None;
                }
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                    if self.depth == 1 {
                        self.last_string = Some(std::mem::take(&mut self.key));
                    }
                    continue;
                }
                if self.depth == 1 && self.key.len() < 8 {
                    self.key.push(byte);
                }
                continue;
            }
            match byte {
                b'"' => {
                    self.in_string = true;
                    self.key.clear();
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b':' if self.depth == 1
                    && self.last_string.as_deref() == Some(b"id".as_slice()) =>
                {
                    self.last_string = None;
                    self.value = Some(Vec::new());
                }
                b':' if self.depth == 1 => self.last_string = None,
                b if b.is_ascii_whitespace() => {}
                _ if self.depth == 1 => self.last_string = None,
                _ => {}
            }
        }
    }

    fn id(&self) -> Option<String> {
        self.found.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(pieces: &[&str]) -> Option<String> {
        let mut finder = IdFinder::default();
        for piece in pieces {
            finder.feed(piece.as_bytes());
        }
        finder.id()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is_and_however_it_is_cut() {
        assert_eq!(
            id_of(&[r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#]),
            Some("7".into())
        );
        assert_eq!(
            id_of(&[
                r#"{"method":"x","params":{"id":99,"s":"\"id\":5"},"id""#,
                r#": "a-1"}"#
            ]),
            Some(r#""a-1""#.into())
        );
        assert_eq!(id_of(&[r#"{"params":{"id":1}}"#]), None);
        assert_eq!(
            id_of(&[r#"{"id":{"x":1}}"#]),
            None,
            "an id is a number or a string"
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_answered_and_reading_goes_on() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "a".repeat(5000)
        );
        let next = "{\"jsonrpc\":\"2.0\",\"id\":43,\"method\":\"ping\"}\n";
        let input = format!("{big}not json\n{next}");
        let (answers, mut read) = tokio::io::duplex(1 << 20);
        let mut transport =
            LineTransport::new(std::io::Cursor::new(input.into_bytes()), answers, 1000);
        let message = rmcp::transport::Transport::<RoleServer>::receive(&mut transport)
            .await
            .expect("the next request after the bad ones");
        assert!(format!("{message:?}").contains("43"), "{message:?}");
        drop(transport);
        let mut said = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut read, &mut said)
            .await
            .unwrap();
        let lines: Vec<serde_json::Value> = said
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{said}");
        assert_eq!(lines[0]["id"], 42);
        assert_eq!(lines[0]["error"]["code"], -32600);
        assert!(lines[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1000"));
        assert_eq!(lines[1]["error"]["code"], -32700);
    }
}

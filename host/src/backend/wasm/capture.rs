//! Standard output and error of a guest: kept in memory up to a cap, optionally
//! streamed to a callback as they are written.

use bytes::Bytes;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// A callback that sees every chunk the guest writes, before any cap applies.
pub type Sink = Box<dyn FnMut(&[u8]) + Send>;

/// One output stream of a session. Clones share the same buffer; the session takes the
/// bytes after each run.
#[derive(Clone)]
pub(crate) struct Capture {
    state: Arc<Mutex<State>>,
}

struct State {
    bytes: Vec<u8>,
    cap: usize,
    truncated: bool,
    sink: Option<Sink>,
}

impl Capture {
    pub(crate) fn new(cap: usize) -> Self {
        Capture {
            state: Arc::new(Mutex::new(State {
                bytes: Vec::new(),
                cap,
                truncated: false,
                sink: None,
            })),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Starts a run: empties the buffer and installs the run's sink, if any.
    pub(crate) fn start(&self, sink: Option<Sink>) {
        self.with(|s| {
            s.bytes.clear();
            s.truncated = false;
            s.sink = sink;
        });
    }

    /// Ends a run: what was kept, and whether anything was dropped at the cap.
    pub(crate) fn finish(&self) -> (Vec<u8>, bool) {
        self.with(|s| {
            s.sink = None;
            (
                std::mem::take(&mut s.bytes),
                std::mem::take(&mut s.truncated),
            )
        })
    }

    fn write(&self, data: &[u8]) {
        self.with(|s| {
            if let Some(sink) = &mut s.sink {
                sink(data);
            }
            let room = s.cap.saturating_sub(s.bytes.len());
            if data.len() > room {
                s.truncated = true;
            }
            s.bytes.extend_from_slice(&data[..data.len().min(room)]);
        });
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        Capture::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Past the cap, writes are still accepted (and dropped) so a chatty program
        // is not killed by its own output; the execution reports the truncation.
        Ok(1 << 20)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Capture::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_the_cap_and_flags_the_rest() {
        let capture = Capture::new(5);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink_seen = seen.clone();
        capture.start(Some(Box::new(move |b| {
            sink_seen.lock().unwrap().extend_from_slice(b)
        })));
        capture.write(b"abc");
        capture.write(b"defg");
        assert_eq!(capture.finish(), (b"abcde".to_vec(), true));
        assert_eq!(
            *seen.lock().unwrap(),
            b"abcdefg",
            "the sink sees everything"
        );
        capture.start(None);
        capture.write(b"x");
        assert_eq!(
            capture.finish(),
            (b"x".to_vec(), false),
            "each run starts empty"
        );
    }
}

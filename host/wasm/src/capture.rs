//! Standard output and error of a guest: kept in memory up to the run's cap, streamed
//! to a callback up to the same cap, and the guest stopped if it keeps writing far
//! past it (see [`stop_threshold`]).

use bytes::Bytes;
use sandlot_core::backend::{stop_threshold, Sink};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// One output stream of a session. Clones share the same buffer; the session takes the
/// bytes after each run.
#[derive(Clone)]
pub(crate) struct Capture {
    state: Arc<Mutex<State>>,
}

struct State {
    bytes: Vec<u8>,
    cap: usize,
    /// Everything the guest wrote in this run, kept or not.
    written: u64,
    truncated: bool,
    flooded: bool,
    sink: Option<Sink>,
}

/// What a run wrote to one stream.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The bytes kept, up to the cap.
    pub(crate) bytes: Vec<u8>,
    /// Whether the guest wrote more than the cap.
    pub(crate) truncated: bool,
    /// Whether it wrote so much more that it was stopped.
    pub(crate) flooded: bool,
}

impl Capture {
    pub(crate) fn new() -> Self {
        Capture {
            state: Arc::new(Mutex::new(State {
                bytes: Vec::new(),
                cap: 1 << 20,
                written: 0,
                truncated: false,
                flooded: false,
                sink: None,
            })),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Starts a run with its cap: empties the buffer and installs the run's sink.
    pub(crate) fn start(&self, cap: usize, sink: Option<Sink>) {
        self.with(|s| {
            s.bytes.clear();
            s.cap = cap;
            s.written = 0;
            s.truncated = false;
            s.flooded = false;
            s.sink = sink;
        });
    }

    /// Ends a run: what was kept, and what happened at the cap.
    pub(crate) fn finish(&self) -> Captured {
        self.with(|s| {
            s.sink = None;
            Captured {
                bytes: std::mem::take(&mut s.bytes),
                truncated: std::mem::take(&mut s.truncated),
                flooded: std::mem::take(&mut s.flooded),
            }
        })
    }

    /// Takes what the guest wrote. `Err` once it has written past the stop threshold:
    /// the guest is then stopped.
    fn write(&self, data: &[u8]) -> Result<(), ()> {
        self.with(|s| {
            s.written += data.len() as u64;
            let room = s.cap.saturating_sub(s.bytes.len());
            if data.len() > room {
                s.truncated = true;
            }
            let kept = &data[..data.len().min(room)];
            if !kept.is_empty() {
                if let Some(sink) = &mut s.sink {
                    sink(kept);
                }
                s.bytes.extend_from_slice(kept);
            }
            if s.written > stop_threshold(s.cap) {
                s.flooded = true;
                return Err(());
            }
            Ok(())
        })
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
        Capture::write(self, &bytes).map_err(|()| {
            StreamError::Trap(wasmtime::Error::msg(
                "the program kept writing far past the output cap",
            ))
        })
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Past the cap, writes are still accepted (and dropped) up to the stop
        // threshold, so a program that prints a little too much is not killed for it.
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
        Poll::Ready(match Capture::write(&self, buf) {
            Ok(()) => Ok(buf.len()),
            Err(()) => Err(std::io::Error::other(
                "the program kept writing far past the output cap",
            )),
        })
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
    fn keeps_and_streams_up_to_the_cap_and_stops_a_flood() {
        let capture = Capture::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink_seen = seen.clone();
        capture.start(
            5,
            Some(Box::new(move |b| {
                sink_seen.lock().unwrap().extend_from_slice(b)
            })),
        );
        capture.write(b"abc").unwrap();
        capture.write(b"defg").unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            b"abcde",
            "streaming stops at the cap"
        );
        // Past the threshold, the guest is stopped.
        assert!(capture.write(&vec![b'x'; 2 << 20]).is_err());
        assert_eq!(
            capture.finish(),
            Captured {
                bytes: b"abcde".to_vec(),
                truncated: true,
                flooded: true
            }
        );
        capture.start(5, None);
        capture.write(b"x").unwrap();
        assert_eq!(capture.finish().bytes, b"x", "each run starts empty");
    }
}

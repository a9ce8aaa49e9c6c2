//! Standard input of a guest: the bytes of the current run, then end of file.

use bytes::Bytes;
use std::sync::{Arc, Mutex, PoisonError};
use wasmtime_wasi::cli::{IsTerminal, StdinStream};
use wasmtime_wasi::p2::{InputStream, Pollable, StreamError};

/// Standard input shared by a session's instances; each run sets its own bytes.
#[derive(Clone, Default)]
pub(crate) struct Feed {
    pending: Arc<Mutex<Bytes>>,
}

impl Feed {
    /// What the next reads return, before end of file.
    pub(crate) fn set(&self, bytes: &[u8]) {
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner) =
            Bytes::copy_from_slice(bytes);
    }

    fn take(&self, size: usize) -> Bytes {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let n = size.min(pending.len());
        pending.split_to(n)
    }
}

impl IsTerminal for Feed {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdinStream for Feed {
    fn p2_stream(&self) -> Box<dyn InputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for Feed {
    fn read(&mut self, size: usize) -> Result<Bytes, StreamError> {
        let bytes = self.take(size);
        if bytes.is_empty() && size > 0 {
            Err(StreamError::Closed)
        } else {
            Ok(bytes)
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Feed {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncRead for Feed {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let bytes = self.take(buf.remaining());
        buf.put_slice(&bytes);
        std::task::Poll::Ready(Ok(()))
    }
}

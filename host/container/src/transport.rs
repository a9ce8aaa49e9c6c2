//! The byte streams an agent can be reached over: a Unix socket, or any pair of
//! channels bridged to an engine's attach or exec stream.

use sandlot_core::error::{Error, Result};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A byte stream to an agent: a reader, a writer, and a way to shut both.
///
/// Nothing is assumed of the stream but bytes in order: no half-close, and no read
/// timeouts, unless it says it has them (a Unix socket does): then the client reads it
/// on the caller's thread, else on a thread of its own, so its deadlines hold either
/// way.
pub struct Transport {
    pub(super) reader: Reader,
    pub(super) writer: Box<dyn Write + Send>,
    pub(super) close: Box<dyn FnMut() + Send>,
}

/// How the client can read a transport.
pub(super) enum Reader {
    /// A socket whose reads take a timeout: read where the reply is awaited.
    Timed(UnixStream),
    /// Any stream: read by a thread that hands frames over.
    Blocking(Box<dyn Read + Send>),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport").finish_non_exhaustive()
    }
}

impl Transport {
    /// Any stream. `close` must make a read blocked on `reader` return (shut a socket
    /// down, drop the far end of a channel): the client calls it when it is done.
    pub fn new(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        close: impl FnMut() + Send + 'static,
    ) -> Transport {
        Transport {
            reader: Reader::Blocking(Box::new(reader)),
            writer: Box::new(writer),
            close: Box::new(close),
        }
    }

    /// A connected Unix socket. A write that the agent does not take within
    /// `write_timeout` fails rather than blocking the host.
    pub fn unix(stream: UnixStream, write_timeout: Duration) -> io::Result<Transport> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(Some(write_timeout))?;
        let reader = stream.try_clone()?;
        let closer = stream.try_clone()?;
        Ok(Transport {
            reader: Reader::Timed(reader),
            writer: Box::new(stream),
            close: Box::new(move || {
                let _ = closer.shutdown(std::net::Shutdown::Both);
            }),
        })
    }

    /// Bytes that arrive on `incoming`, and `send` for bytes going out (it returns
    /// `false` once the stream is closed): the bridge to a stream that lives in async
    /// code (an attach or exec call). The stream ends when the sender of `incoming` is
    /// dropped; `close` should see to that.
    pub fn channels(
        incoming: mpsc::Receiver<Vec<u8>>,
        send: impl FnMut(Vec<u8>) -> bool + Send + 'static,
        close: impl FnMut() + Send + 'static,
    ) -> Transport {
        Transport::new(
            ChannelReader {
                incoming,
                pending: Vec::new(),
                at: 0,
            },
            ChannelWriter(Box::new(send)),
            close,
        )
    }
}

struct ChannelReader {
    incoming: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
    at: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.pending.len() {
            match self.incoming.recv() {
                Ok(chunk) => {
                    self.pending = chunk;
                    self.at = 0;
                }
                // The stream ended.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

struct ChannelWriter(Box<dyn FnMut(Vec<u8>) -> bool + Send>);

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !(self.0)(buf.to_vec()) {
            return Err(io::Error::new(
                ErrorKind::BrokenPipe,
                "the stream to the agent closed",
            ));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Waits for the agent of a just-started sandbox to connect to `listener`. `alive` is
/// asked now and then whether waiting still makes sense (the sandbox may have died).
pub fn accept_unix(
    listener: &UnixListener,
    within: Duration,
    mut alive: impl FnMut() -> Result<()>,
) -> Result<UnixStream> {
    let broken = |reason: String| Error::Agent { reason };
    listener
        .set_nonblocking(true)
        .map_err(|e| broken(format!("cannot poll the agent socket: {e}")))?;
    let started = Instant::now();
    let mut last_check = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => return Ok(stream),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if started.elapsed() > within {
                    return Err(broken(format!(
                        "it did not connect within {} s",
                        within.as_secs()
                    )));
                }
                if last_check.elapsed() > Duration::from_millis(250) {
                    alive()?;
                    last_check = Instant::now();
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            Err(e) => return Err(broken(format!("accepting its connection failed: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_stream_reads_in_order_and_ends_with_its_sender() {
        let (tx, rx) = mpsc::channel();
        let (out_tx, out_rx) = mpsc::channel();
        let mut transport = Transport::channels(rx, move |b| out_tx.send(b).is_ok(), || {});
        tx.send(b"he".to_vec()).unwrap();
        tx.send(b"llo".to_vec()).unwrap();
        drop(tx);
        let mut text = String::new();
        let Reader::Blocking(mut reader) = transport.reader else {
            panic!("channels have no read timeouts")
        };
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "hello");
        transport.writer.write_all(b"x").unwrap();
        assert_eq!(out_rx.recv().unwrap(), b"x");
    }
}

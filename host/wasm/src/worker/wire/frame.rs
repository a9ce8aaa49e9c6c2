//! Framing: each message encoded with postcard behind its length, written and read
//! whole, with the limits that keep a broken peer from costing more than it sent.

use super::descriptors;
use super::shared::MAX_FRAME;
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Writes one message, with `fd` beside it if given. A message larger than
/// [`MAX_FRAME`] is refused before anything is written (`InvalidInput`): the stream
/// stays usable.
pub(crate) fn send<T: Serialize>(
    stream: &UnixStream,
    message: &T,
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    // The length goes first; it is known once the body is written behind its place.
    let mut frame = postcard::to_extend(message, vec![0u8; 4]).map_err(io::Error::other)?;
    let len = frame.len() - 4;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a message of {len} bytes is larger than the {MAX_FRAME} a worker's socket takes"
            ),
        ));
    }
    frame[..4].copy_from_slice(&(len as u32).to_le_bytes());
    let mut sent = match fd {
        Some(fd) => descriptors::send_with(stream, &frame, fd)?,
        None => 0,
    };
    while sent < frame.len() {
        sent += descriptors::send(stream, &frame[sent..])?;
    }
    Ok(())
}

/// Reads messages from a stream, and the descriptors sent beside them.
pub(crate) struct Receiver {
    stream: UnixStream,
    buffer: Vec<u8>,
    /// Descriptors received and not yet taken, in the order they came.
    fds: std::collections::VecDeque<OwnedFd>,
    /// The most descriptors it holds untaken: more is a peer that sends what it was
    /// not asked for, and an error (the backend takes none from a worker).
    keep: usize,
}

impl Receiver {
    /// A receiver that holds at most `keep` descriptors not yet taken.
    pub(crate) fn new(stream: UnixStream, keep: usize) -> Receiver {
        Receiver {
            stream,
            buffer: Vec::new(),
            fds: Default::default(),
            keep,
        }
    }

    /// The next message; `Ok(None)` at the end of the stream between messages.
    pub(crate) fn next<T: for<'de> Deserialize<'de>>(&mut self) -> io::Result<Option<T>> {
        let mut head = [0u8; 4];
        if !self.fill(&mut head)? {
            return Ok(None);
        }
        let len = u32::from_le_bytes(head) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of {len} bytes is larger than the {MAX_FRAME} allowed"),
            ));
        }
        // Grown as the bytes arrive, not from the length alone: a frame that claims
        // more than it brings costs what it brought.
        let mut body = std::mem::take(&mut self.buffer);
        body.clear();
        let filled = self.fill_growing(&mut body, len);
        let message = match filled {
            Ok(()) => postcard::from_bytes(&body)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) => Err(e),
        };
        if body.capacity() <= 1 << 20 {
            self.buffer = body;
        }
        message
    }

    /// Reads `len` bytes onto `body`, a piece at a time.
    fn fill_growing(&mut self, body: &mut Vec<u8>, len: usize) -> io::Result<()> {
        while body.len() < len {
            let at = body.len();
            let piece = (len - at).min(1 << 20);
            body.resize(at + piece, 0);
            let n = self.receive(&mut body[at..])?;
            body.truncate(at + n);
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }

    /// Reads some bytes, and keeps the descriptors that came with them, within
    /// `keep`.
    fn receive(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = descriptors::receive(&self.stream, buf, &mut self.fds)?;
        if self.fds.len() > self.keep {
            self.fds.clear();
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer sent descriptors it was not asked for",
            ));
        }
        Ok(n)
    }

    /// The oldest descriptor received and not yet taken.
    pub(crate) fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fds.pop_front()
    }

    /// Fills `buf` whole: `false` if the stream ended before its first byte.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        let mut at = 0;
        while at < buf.len() {
            let n = self.receive(&mut buf[at..])?;
            if n == 0 {
                return if at == 0 {
                    Ok(false)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
            at += n;
        }
        Ok(true)
    }
}

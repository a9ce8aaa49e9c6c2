//! The host's end of the stream, as the agent reads it: one request at a time between
//! runs, and while a command or a cell runs, only [`Request::Interrupt`].

use crate::process;
use sandlot_agent::{read_frame, Request};
use std::fs::File;
use std::io::{self, BufReader};
use std::os::fd::{AsRawFd, OwnedFd};

/// What the host said while a run went on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// Nothing yet.
    Nothing,
    /// It asked for the run to be interrupted.
    Interrupt,
}

/// Requests from the host. Reads are buffered, so whether a frame is waiting is asked
/// of the buffer before the descriptor: an interrupt that arrived with the request it
/// interrupts is already in the buffer.
pub struct HostInput {
    reader: BufReader<File>,
}

impl HostInput {
    /// Reads requests from `fd` (a socket, or standard input).
    pub fn new(fd: OwnedFd) -> HostInput {
        HostInput {
            reader: BufReader::new(File::from(fd)),
        }
    }

    /// The next frame: its tag and body.
    pub fn next_frame(&mut self) -> io::Result<(u8, Vec<u8>)> {
        read_frame(&mut self.reader)
    }

    /// Without waiting: whether the host interrupted the run that goes on. A host that
    /// hung up, or that sent anything but an interrupt (it never does while a run
    /// goes on), is gone: nothing in the sandbox may go on running.
    pub fn heard(&mut self) -> Heard {
        if self.reader.buffer().is_empty() && !readable(self.reader.get_ref().as_raw_fd()) {
            return Heard::Nothing;
        }
        match self
            .next_frame()
            .and_then(|(tag, body)| Request::decode(tag, &body))
        {
            Ok(Request::Interrupt) => Heard::Interrupt,
            _ => process::host_gone(),
        }
    }
}

/// Whether reading `fd` would not block: a frame, or the end of the stream.
fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: poll(2) on one valid pollfd, without waiting.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0
        && poll.revents & (libc::POLLIN | libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn an_interrupt_is_heard_whether_buffered_or_not() {
        let (host, agent) = UnixStream::pair().unwrap();
        let mut input = HostInput::new(OwnedFd::from(agent));
        assert_eq!(input.heard(), Heard::Nothing);
        // A request and the interrupt behind it, in one write: the request's read
        // buffers the interrupt too.
        let mut wire = Vec::new();
        Request::StopKernel.write_to(&mut wire).unwrap();
        Request::Interrupt.write_to(&mut wire).unwrap();
        (&host).write_all(&wire).unwrap();
        let (tag, body) = input.next_frame().unwrap();
        assert_eq!(Request::decode(tag, &body).unwrap(), Request::StopKernel);
        assert_eq!(input.heard(), Heard::Interrupt);
        assert_eq!(input.heard(), Heard::Nothing);
        Request::Interrupt.write_to(&mut &host).unwrap();
        assert_eq!(input.heard(), Heard::Interrupt);
    }
}

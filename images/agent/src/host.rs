//! The host's end of the stream, as the agent reads it: one request at a time between
//! runs; while a command or a cell runs, only [`Request::Interrupt`]; and, at any
//! time, answers to tool calls, which go straight to the connection that waits for
//! them (see [`Answers`]).

use crate::process;
use sandlot_agent::{read_frame, Request, TOOL_ANSWER};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{mpsc, Arc, Mutex};

/// What the host said while a run went on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// Nothing yet.
    Nothing,
    /// It asked for the run to be interrupted.
    Interrupt,
}

/// Requests from the host, read by a thread of their own: a tool call's answer must
/// reach the code that waits for it at once, whatever the agent's main thread is
/// doing (waiting for a command, polling a kernel), and every other request is
/// queued for the main thread in the order it came.
pub struct HostInput {
    frames: mpsc::Receiver<io::Result<(u8, Vec<u8>)>>,
    answers: Arc<Answers>,
}

impl HostInput {
    /// Reads requests from `fd` (a socket, or standard input).
    pub fn new(fd: OwnedFd) -> HostInput {
        let answers = Arc::new(Answers::default());
        let (tx, frames) = mpsc::channel();
        let relay = answers.clone();
        let mut reader = BufReader::new(File::from(fd));
        std::thread::spawn(move || loop {
            let frame = read_frame(&mut reader);
            match frame {
                Ok((TOOL_ANSWER, body)) => match Request::decode(TOOL_ANSWER, &body) {
                    Ok(Request::ToolAnswer { call, frame }) => relay.deliver(call, frame),
                    // A malformed answer is a request the main thread refuses.
                    _ => {
                        if tx.send(Ok((TOOL_ANSWER, body))).is_err() {
                            return;
                        }
                    }
                },
                other => {
                    let ended = other.is_err();
                    if tx.send(other).is_err() || ended {
                        return;
                    }
                }
            }
        });
        HostInput { frames, answers }
    }

    /// Where answers to tool calls are handed over.
    pub fn answers(&self) -> &Arc<Answers> {
        &self.answers
    }

    /// The next frame other than a tool call's answer: its tag and body.
    pub fn next_frame(&mut self) -> io::Result<(u8, Vec<u8>)> {
        self.frames
            .recv()
            .unwrap_or_else(|_| Err(io::ErrorKind::UnexpectedEof.into()))
    }

    /// Without waiting: whether the host interrupted the run that goes on. A host that
    /// hung up, or that sent anything but an interrupt or a tool call's answer (it
    /// never does while a run goes on), is gone: nothing in the sandbox may go on
    /// running.
    pub fn heard(&mut self) -> Heard {
        match self.frames.try_recv() {
            Err(mpsc::TryRecvError::Empty) => Heard::Nothing,
            Ok(Ok((tag, body))) => match Request::decode(tag, &body) {
                Ok(Request::Interrupt) => Heard::Interrupt,
                _ => process::host_gone(),
            },
            Ok(Err(_)) | Err(mpsc::TryRecvError::Disconnected) => process::host_gone(),
        }
    }
}

/// Tool calls relayed to the host and not yet answered, under the numbers the agent
/// gave them.
#[derive(Default)]
pub struct Answers {
    waiting: Mutex<HashMap<u64, Waiting>>,
}

/// A call waiting for its answer: the endpoint it came through, the connection its
/// answer goes to, and the thread that serves that connection.
struct Waiting {
    endpoint: u64,
    to: Arc<UnixStream>,
    rest: mpsc::SyncSender<Vec<u8>>,
}

impl Answers {
    /// Registers call `call`, made on connection `to` of endpoint `endpoint`. Its
    /// answer is written there (the length, then the frame) as it arrives, as far as
    /// the connection takes it without waiting; the receiver then gets what is left to
    /// write (nothing, mostly).
    pub fn expect(&self, call: u64, endpoint: u64, to: Arc<UnixStream>) -> mpsc::Receiver<Vec<u8>> {
        let (rest, rx) = mpsc::sync_channel(1);
        self.lock().insert(call, Waiting { endpoint, to, rest });
        rx
    }

    /// Writes `frame` to the connection that waits for call `call`; dropped if none
    /// does (its run is over, or the number is not one the agent gave). Written here,
    /// on the reader's thread, the answer reaches the code without waiting for its
    /// connection's thread to wake; but never with a blocking write, which a sandbox
    /// that does not read would hold, and with it every request of the host.
    fn deliver(&self, call: u64, frame: Vec<u8>) {
        let Some(waiting) = self.lock().remove(&call) else {
            return;
        };
        let mut out = Vec::with_capacity(frame.len() + 4);
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
        let written = send_now(&waiting.to, &out);
        let _ = waiting.rest.try_send(out.split_off(written));
    }

    /// Gives up on every call of `endpoint` still waiting: their receivers see the
    /// channel closed.
    pub fn abandon(&self, endpoint: u64) {
        self.lock()
            .retain(|_, waiting| waiting.endpoint != endpoint);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How much of `bytes` the socket takes without waiting.
fn send_now(to: &UnixStream, bytes: &[u8]) -> usize {
    let mut sent = 0;
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        // SAFETY: send(2) reads `rest`, which outlives the call, on a descriptor `to`
        // owns.
        let n = unsafe {
            libc::send(
                to.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        match n {
            n if n > 0 => sent += n as usize,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    /// Polls `heard` until it hears something, a few seconds at most.
    fn heard_within(input: &mut HostInput) -> Heard {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match input.heard() {
                Heard::Nothing if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                heard => return heard,
            }
        }
    }

    #[test]
    fn an_interrupt_is_heard_whether_buffered_or_not() {
        let (host, agent) = UnixStream::pair().unwrap();
        let mut input = HostInput::new(OwnedFd::from(agent));
        assert_eq!(input.heard(), Heard::Nothing);
        // A request and the interrupt behind it, in one write.
        let mut wire = Vec::new();
        Request::StopKernel.write_to(&mut wire).unwrap();
        Request::Interrupt.write_to(&mut wire).unwrap();
        (&host).write_all(&wire).unwrap();
        let (tag, body) = input.next_frame().unwrap();
        assert_eq!(Request::decode(tag, &body).unwrap(), Request::StopKernel);
        assert_eq!(heard_within(&mut input), Heard::Interrupt);
        assert_eq!(input.heard(), Heard::Nothing);
        Request::Interrupt.write_to(&mut &host).unwrap();
        assert_eq!(heard_within(&mut input), Heard::Interrupt);
    }

    #[test]
    fn answers_reach_their_call_and_nothing_else() {
        let (host, agent) = UnixStream::pair().unwrap();
        let mut input = HostInput::new(OwnedFd::from(agent));
        let (code, to) = UnixStream::pair().unwrap();
        let to = Arc::new(to);
        // Two endpoints' calls on one connection; the second endpoint closes.
        let first = input.answers().expect(1, 7, to.clone());
        let second = input.answers().expect(2, 8, to);
        input.answers().abandon(8);
        let mut wire = Vec::new();
        for call in [9, 2, 1] {
            Request::ToolAnswer {
                call,
                frame: format!("answer {call}").into_bytes(),
            }
            .write_to(&mut wire)
            .unwrap();
        }
        Request::StopKernel.write_to(&mut wire).unwrap();
        (&host).write_all(&wire).unwrap();
        // Written to the connection whole: nothing is left for its thread.
        assert!(first
            .recv_timeout(Duration::from_secs(5))
            .unwrap()
            .is_empty());
        let mut answer = [0u8; 12];
        (&code).read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"\x08\0\0\0answer 1");
        assert!(second.recv_timeout(Duration::from_millis(50)).is_err());
        // The answers never reach the main thread; the request behind them does.
        let (tag, body) = input.next_frame().unwrap();
        assert_eq!(Request::decode(tag, &body).unwrap(), Request::StopKernel);
    }
}

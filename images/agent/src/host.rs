//! The host's end of the stream, as the agent reads it: one request at a time between
//! runs; while a command or a cell runs, only [`Request::Interrupt`]; and, at any
//! time, answers to tool calls, which go straight to the connection that waits for
//! them (see [`Answers`]).

use crate::process;
use sandlot_agent::{read_frame, Request, TOOL_ANSWER};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader};
use std::os::fd::OwnedFd;
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

/// Tool calls relayed to the host and not yet answered: each waits on a channel of
/// its own, under the number the agent gave it.
#[derive(Default)]
pub struct Answers {
    waiting: Mutex<HashMap<u64, mpsc::SyncSender<Vec<u8>>>>,
}

impl Answers {
    /// Registers call `call`; its answer arrives on the receiver.
    pub fn expect(&self, call: u64) -> mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.lock().insert(call, tx);
        rx
    }

    /// Hands `frame` to whoever waits for call `call`; dropped if nobody does (its
    /// run is over, or the number is not one the agent gave).
    fn deliver(&self, call: u64, frame: Vec<u8>) {
        if let Some(waiting) = self.lock().remove(&call) {
            let _ = waiting.try_send(frame);
        }
    }

    /// Gives up on every call still waiting: their receivers see the channel closed.
    pub fn abandon(&self, calls: impl IntoIterator<Item = u64>) {
        let mut waiting = self.lock();
        for call in calls {
            waiting.remove(&call);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, mpsc::SyncSender<Vec<u8>>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
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
        let first = input.answers().expect(1);
        let second = input.answers().expect(2);
        input.answers().abandon([2]);
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
        assert_eq!(
            first.recv_timeout(Duration::from_secs(5)).unwrap(),
            b"answer 1"
        );
        assert!(second.recv_timeout(Duration::from_millis(50)).is_err());
        // The answers never reach the main thread; the request behind them does.
        let (tag, body) = input.next_frame().unwrap();
        assert_eq!(Request::decode(tag, &body).unwrap(), Request::StopKernel);
    }
}

//! How each message is laid out in a frame: its tag, then its fields in order. The
//! tags and the order are the protocol; a room of their own so that both directions
//! of every message sit side by side, where a change to one shows in the other.

use crate::frame::{malformed, Decoder, Encoder};
use crate::install::{InstallProxy, InstallToken};
use crate::messages::{Entry, ExitReport, Reply, Request};
use std::io::{self, Write};

/// The tag of [`Request::ToolAnswer`]: the agent's reader picks these frames out of
/// the stream without decoding any other.
pub const TOOL_ANSWER: u8 = 15;

impl Request {
    /// Encodes and writes the request as one frame.
    pub fn write_to(&self, writer: &mut impl Write) -> io::Result<()> {
        match self {
            Request::Run {
                argv,
                env,
                cwd,
                stdin,
                timeout_ms,
                max_output,
                stop_after,
                tools,
            } => {
                let mut e = Encoder::new(1);
                e.strings(argv).pairs(env);
                e.bytes(cwd.as_bytes())
                    .bytes(stdin)
                    .u64(*timeout_ms)
                    .u64(*max_output)
                    .u64(*stop_after)
                    .tools(tools)
                    .write_to(writer)
            }
            Request::Write { path, data } => Encoder::new(2)
                .bytes(path.as_bytes())
                .bytes(data)
                .write_to(writer),
            Request::Read { path, max } => Encoder::new(3)
                .bytes(path.as_bytes())
                .u64(*max)
                .write_to(writer),
            Request::List { path } => Encoder::new(4).bytes(path.as_bytes()).write_to(writer),
            Request::Scan { path } => Encoder::new(5).bytes(path.as_bytes()).write_to(writer),
            Request::Pack { path, max } => Encoder::new(6)
                .bytes(path.as_bytes())
                .u64(*max)
                .write_to(writer),
            Request::Unpack { path, data } => Encoder::new(7)
                .bytes(path.as_bytes())
                .bytes(data)
                .write_to(writer),
            Request::StartKernel {
                argv,
                env,
                cwd,
                timeout_ms,
            } => {
                let mut e = Encoder::new(8);
                e.strings(argv).pairs(env);
                e.bytes(cwd.as_bytes()).u64(*timeout_ms).write_to(writer)
            }
            Request::Cell {
                code,
                stdin,
                env,
                cwd,
                timeout_ms,
                max_output,
                stop_after,
                grace_ms,
                tools,
            } => {
                let mut e = Encoder::new(9);
                e.bytes(code).bytes(stdin).pairs(env);
                e.bytes(cwd.as_bytes())
                    .u64(*timeout_ms)
                    .u64(*max_output)
                    .u64(*stop_after)
                    .u64(*grace_ms)
                    .tools(tools)
                    .write_to(writer)
            }
            Request::StopKernel => Encoder::new(10).write_to(writer),
            Request::Clear { path } => Encoder::new(11).bytes(path.as_bytes()).write_to(writer),
            Request::Freeze => Encoder::new(12).write_to(writer),
            Request::Thaw => Encoder::new(13).write_to(writer),
            Request::Interrupt => Encoder::new(14).write_to(writer),
            Request::Stat { path } => Encoder::new(16).bytes(path.as_bytes()).write_to(writer),
            Request::MakeDir { path } => Encoder::new(17).bytes(path.as_bytes()).write_to(writer),
            Request::Remove { path } => Encoder::new(18).bytes(path.as_bytes()).write_to(writer),
            Request::Rename { from, to } => Encoder::new(19)
                .bytes(from.as_bytes())
                .bytes(to.as_bytes())
                .write_to(writer),
            Request::ToolAnswer { call, frame } => Encoder::new(TOOL_ANSWER)
                .u64(*call)
                .bytes(frame)
                .write_to(writer),
        }
    }

    /// Decodes a request frame.
    pub fn decode(tag: u8, body: &[u8]) -> io::Result<Request> {
        let mut d = Decoder(body);
        let request = match tag {
            1 => Request::Run {
                argv: d.strings()?,
                env: d.pairs()?,
                cwd: d.string()?,
                stdin: d.bytes()?,
                timeout_ms: d.u64()?,
                max_output: d.u64()?,
                stop_after: d.u64()?,
                tools: d.tools()?,
            },
            2 => Request::Write {
                path: d.string()?,
                data: d.bytes()?,
            },
            3 => Request::Read {
                path: d.string()?,
                max: d.u64()?,
            },
            4 => Request::List { path: d.string()? },
            5 => Request::Scan { path: d.string()? },
            6 => Request::Pack {
                path: d.string()?,
                max: d.u64()?,
            },
            7 => Request::Unpack {
                path: d.string()?,
                data: d.bytes()?,
            },
            8 => Request::StartKernel {
                argv: d.strings()?,
                env: d.pairs()?,
                cwd: d.string()?,
                timeout_ms: d.u64()?,
            },
            9 => Request::Cell {
                code: d.bytes()?,
                stdin: d.bytes()?,
                env: d.pairs()?,
                cwd: d.string()?,
                timeout_ms: d.u64()?,
                max_output: d.u64()?,
                stop_after: d.u64()?,
                grace_ms: d.u64()?,
                tools: d.tools()?,
            },
            10 => Request::StopKernel,
            11 => Request::Clear { path: d.string()? },
            12 => Request::Freeze,
            13 => Request::Thaw,
            14 => Request::Interrupt,
            16 => Request::Stat { path: d.string()? },
            17 => Request::MakeDir { path: d.string()? },
            18 => Request::Remove { path: d.string()? },
            19 => Request::Rename {
                from: d.string()?,
                to: d.string()?,
            },
            TOOL_ANSWER => Request::ToolAnswer {
                call: d.u64()?,
                frame: d.bytes()?,
            },
            _ => return Err(malformed("unknown request")),
        };
        d.end()?;
        Ok(request)
    }
}

impl Reply {
    /// Encodes and writes the reply as one frame.
    pub fn write_to(&self, writer: &mut impl Write) -> io::Result<()> {
        match self {
            Reply::Hello { version } => Encoder::new(0x80).u32(*version).write_to(writer),
            Reply::Stdout(bytes) => Encoder::new(0x81).bytes(bytes).write_to(writer),
            Reply::Stderr(bytes) => Encoder::new(0x82).bytes(bytes).write_to(writer),
            Reply::Exit(report) => Encoder::new(0x83)
                .u32(report.code as u32)
                .u32(report.signal as u32)
                .u8(report.timed_out as u8)
                .u8(report.stdout_truncated as u8)
                .u8(report.stderr_truncated as u8)
                .u8(report.oom_killed as u8)
                .u8(report.output_limited as u8)
                .u8(report.interrupted as u8)
                .u8(report.kernel_ended as u8)
                .u8(report.on_request as u8)
                .write_to(writer),
            Reply::Done => Encoder::new(0x84).write_to(writer),
            Reply::Data(bytes) => Encoder::new(0x85).bytes(bytes).write_to(writer),
            Reply::Entries(entries) => {
                let mut e = Encoder::new(0x86);
                e.u32(entries.len() as u32);
                for entry in entries {
                    e.bytes(&entry.path)
                        .u8(entry.is_dir as u8)
                        .u64(entry.size)
                        .u64(entry.mtime_ns)
                        .u32(entry.mode);
                }
                e.write_to(writer)
            }
            Reply::Error(message) => Encoder::new(0x87)
                .bytes(message.as_bytes())
                .write_to(writer),
            Reply::Missing(message) => Encoder::new(0x88)
                .bytes(message.as_bytes())
                .write_to(writer),
            Reply::ToolCall { call, frame } => {
                Encoder::new(0x89).u64(*call).bytes(frame).write_to(writer)
            }
            Reply::ToolCallTooLarge { call, size } => {
                Encoder::new(0x8a).u64(*call).u64(*size).write_to(writer)
            }
            Reply::Frozen(None) => Encoder::new(0x8b).u8(0).write_to(writer),
            Reply::Frozen(Some(proxy)) => Encoder::new(0x8b)
                .u8(1)
                .u32(u32::from(proxy.port))
                .bytes(&proxy.token.0)
                .write_to(writer),
        }
    }

    /// Decodes a reply frame.
    pub fn decode(tag: u8, body: &[u8]) -> io::Result<Reply> {
        let mut d = Decoder(body);
        let reply = match tag {
            0x80 => Reply::Hello { version: d.u32()? },
            0x81 => Reply::Stdout(d.bytes()?),
            0x82 => Reply::Stderr(d.bytes()?),
            0x83 => Reply::Exit(ExitReport {
                code: d.u32()? as i32,
                signal: d.u32()? as i32,
                timed_out: d.bool()?,
                stdout_truncated: d.bool()?,
                stderr_truncated: d.bool()?,
                oom_killed: d.bool()?,
                output_limited: d.bool()?,
                interrupted: d.bool()?,
                kernel_ended: d.bool()?,
                on_request: d.bool()?,
            }),
            0x84 => Reply::Done,
            0x85 => Reply::Data(d.bytes()?),
            0x86 => {
                let n = d.count(25)?;
                let entries = (0..n)
                    .map(|_| {
                        Ok(Entry {
                            path: d.bytes()?,
                            is_dir: d.bool()?,
                            size: d.u64()?,
                            mtime_ns: d.u64()?,
                            mode: d.u32()?,
                        })
                    })
                    .collect::<io::Result<_>>()?;
                Reply::Entries(entries)
            }
            0x87 => Reply::Error(d.string()?),
            0x88 => Reply::Missing(d.string()?),
            0x89 => Reply::ToolCall {
                call: d.u64()?,
                frame: d.bytes()?,
            },
            0x8a => Reply::ToolCallTooLarge {
                call: d.u64()?,
                size: d.u64()?,
            },
            0x8b => Reply::Frozen(if d.bool()? {
                let port = u16::try_from(d.u32()?)
                    .ok()
                    .filter(|&port| port != 0)
                    .ok_or_else(|| malformed("an install proxy's port is 1 to 65535"))?;
                let token = d
                    .bytes()?
                    .try_into()
                    .map_err(|_| malformed("an install token is 16 bytes"))?;
                Some(InstallProxy {
                    port,
                    token: InstallToken(token),
                })
            } else {
                None
            }),
            _ => return Err(malformed("unknown reply")),
        };
        d.end()?;
        Ok(reply)
    }
}

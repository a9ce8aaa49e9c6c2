//! The wire protocol between sandlot and `sandlot-agent`, the small static program that
//! runs as process 1 inside every container sandlot starts.
//!
//! The protocol runs over any byte stream: a Unix socket the host shares with the
//! container (`sandlot-agent serve SOCKET ROOT`, the agent connects), or the agent's own
//! standard input and output (`sandlot-agent serve-stdio ROOT`), which an engine's
//! attach or exec call carries to a host anywhere. The agent says [`Reply::Hello`],
//! then answers one [`Request`] at a time. When the host's end goes away the agent
//! stops every process and exits, so a sandbox never outlives the host that made it.
//!
//! A frame is a little-endian `u32` length, a tag byte, and the body. The host treats
//! every reply as untrusted input (the code in the container runs as the agent's
//! user), so decoding checks every length against the bytes actually present and
//! [`MAX_FRAME`]. Nothing in the protocol depends on a stream being half-closed: a
//! transport that cannot close its input (Kubernetes' v4 exec channel) works too.
//!
//! ```
//! use sandlot_agent::{read_frame, Request};
//! let request = Request::Read { path: "output/plot.png".into(), max: 1 << 20 };
//! let mut wire = Vec::new();
//! request.write_to(&mut wire).unwrap();
//! let (tag, body) = read_frame(&mut wire.as_slice()).unwrap();
//! assert_eq!(Request::decode(tag, &body).unwrap(), request);
//! ```

mod codec;
mod frame;
mod install;
mod messages;
mod pack;
#[cfg(test)]
mod tests;
mod variables;

pub use codec::TOOL_ANSWER;
pub use frame::{read_frame, MAX_FRAME};
pub use install::{InstallProxy, InstallToken};
pub use messages::{Entry, ExitReport, Reply, Request, ToolChannel, PROTOCOL_VERSION};
pub use pack::pack;
pub use variables::{
    MEMORY_LIMIT_VARIABLE, PROCESS_LIMIT_VARIABLE, SECCOMP_VARIABLE, TOOLS_VARIABLE,
};

//! What the backend and its worker processes say to each other: messages encoded with
//! postcard, each framed by its length (a little-endian `u32`), over one Unix stream
//! socket per worker. A restore's snapshot file travels beside its message as a
//! descriptor (`SCM_RIGHTS`), so the worker maps the snapshot's pages as the backend
//! would have, without copying them.
//!
//! Both ends are the same build (the handshake checks it), so the messages need no
//! versioning beyond [`VERSION`]; they mirror the backend contract's types where those
//! carry no serde of their own.

mod descriptors;
mod error;
pub(super) mod files;
pub(super) mod frame;
pub(super) mod messages;
mod outcome;
pub(super) mod shared;

pub(crate) use error::WireError;
pub(crate) use files::scan_to_wire;
pub(crate) use frame::{send, Receiver};
pub(crate) use messages::{Call, FileOp, FromWorker, Reply, Run, Spec, ToWorker};
pub(crate) use shared::{
    build, WorkerConfig, CHUNK, CONFIG_VARIABLE, CPU_VARIABLE, FD_VARIABLE, FLAG, VERSION,
};

#[cfg(test)]
mod tests;

//! An [`Error`] as it crosses the socket: its own room because what a caller
//! matches on must survive the trip, and that choice is made here alone.

use sandlot_core::error::{Error, ErrorKind};
use serde::{Deserialize, Serialize};

/// An [`Error`]: the two a caller matches by variant (a missing file, an ended
/// session) as themselves, every other one by its kind and message.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WireError {
    NoSuchFile { path: String },
    SessionEnded { reason: String },
    Other { kind: u8, message: String },
}

impl From<&Error> for WireError {
    fn from(error: &Error) -> WireError {
        match error {
            Error::NoSuchFile { path } => WireError::NoSuchFile { path: path.clone() },
            Error::SessionEnded { reason } => WireError::SessionEnded {
                reason: reason.clone(),
            },
            other => WireError::Other {
                kind: ErrorKind::ALL
                    .iter()
                    .position(|kind| *kind == other.kind())
                    .and_then(|at| u8::try_from(at).ok())
                    .unwrap_or(u8::MAX),
                message: other.to_string(),
            },
        }
    }
}

impl From<WireError> for Error {
    fn from(wire: WireError) -> Error {
        match wire {
            WireError::NoSuchFile { path } => Error::NoSuchFile { path },
            WireError::SessionEnded { reason } => Error::SessionEnded { reason },
            WireError::Other { kind, message } => Error::Masked {
                message,
                kind: ErrorKind::ALL
                    .get(usize::from(kind))
                    .copied()
                    .unwrap_or(ErrorKind::Internal),
            },
        }
    }
}

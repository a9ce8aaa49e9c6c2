//! Entry points for the fuzz targets: the backend's reading of a worker's stream,
//! reached without a worker, so a fuzzer can feed it anything.

use super::wire::files::scan_from_wire;
use super::wire::frame::Receiver;
use super::wire::messages::{FromWorker, Reply};
use std::io::Write;

/// Reads `bytes` as a stream from a worker, every message to its end; converts
/// what the backend would.
pub(crate) fn frames(bytes: &[u8]) {
    let Ok((mut from, to)) = std::os::unix::net::UnixStream::pair() else {
        return;
    };
    // Larger inputs would need a writer thread; frames of the kinds that matter
    // fit.
    let bytes = &bytes[..bytes.len().min(64 << 10)];
    if from.write_all(bytes).is_err() {
        return;
    }
    drop(from);
    let mut receiver = Receiver::new(to, 0);
    while let Ok(Some(message)) = receiver.next::<FromWorker>() {
        if let FromWorker::Done { reply, .. } = message {
            match reply {
                Ok(Reply::Ran(outcome)) => drop(sandlot_core::backend::Outcome::from(outcome)),
                Ok(Reply::Entries(entries)) => entries
                    .into_iter()
                    .for_each(|e| drop(sandlot_core::backend::DirEntry::from(e))),
                Ok(Reply::Scan(stats)) => drop(scan_from_wire(stats)),
                Ok(Reply::Info(info)) => {
                    let _ = sandlot_core::backend::FileInfo::from(info);
                }
                Ok(_) => {}
                Err(error) => drop(sandlot_core::error::Error::from(error)),
            }
        }
    }
}

//! The sandbox's files as they cross the socket: what the file system says of a
//! file, a directory's entries and a scan, with names as bytes and times as
//! durations, and a worker's times held to what the clock can hold.

use sandlot_core::artifact::{FileScan, FileStat};
use sandlot_core::backend::{DirEntry, FileInfo, FileKind};
use serde::{Deserialize, Serialize};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// What the file system says of a file ([`FileInfo`]).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireInfo {
    pub(super) kind: u8,
    pub(super) size: u64,
    pub(super) mode: u32,
    pub(super) modified: Option<Duration>,
}

impl From<FileInfo> for WireInfo {
    fn from(info: FileInfo) -> WireInfo {
        WireInfo {
            kind: match info.kind {
                FileKind::File => 0,
                FileKind::Directory => 1,
                FileKind::Link => 2,
                _ => 3,
            },
            size: info.size,
            mode: info.mode,
            modified: info.modified.map(since_epoch),
        }
    }
}

impl From<WireInfo> for FileInfo {
    fn from(wire: WireInfo) -> FileInfo {
        let kind = match wire.kind {
            0 => FileKind::File,
            1 => FileKind::Directory,
            2 => FileKind::Link,
            _ => FileKind::Other,
        };
        FileInfo::new(kind, wire.size)
            .with_mode(wire.mode)
            .with_modified(wire.modified.and_then(at))
    }
}

/// One directory entry; its name is bytes the code in the sandbox chose.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireEntry {
    name: Vec<u8>,
    info: WireInfo,
}

impl From<DirEntry> for WireEntry {
    fn from(entry: DirEntry) -> WireEntry {
        WireEntry {
            name: entry.name.into_vec(),
            info: entry.info.into(),
        }
    }
}

impl From<WireEntry> for DirEntry {
    fn from(wire: WireEntry) -> DirEntry {
        DirEntry::new(std::ffi::OsString::from_vec(wire.name), wire.info.into())
    }
}

/// One file of a [`FileScan`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireStat {
    pub(super) path: Vec<u8>,
    pub(super) size: u64,
    pub(super) modified: Option<Duration>,
}

pub(crate) fn scan_to_wire(scan: &FileScan) -> Vec<WireStat> {
    scan.stats()
        .map(|stat| WireStat {
            path: stat.path.as_os_str().as_bytes().to_vec(),
            size: stat.size,
            modified: stat.modified.map(since_epoch),
        })
        .collect()
}

pub(crate) fn scan_from_wire(stats: Vec<WireStat>) -> FileScan {
    FileScan::from_stats(stats.into_iter().map(|stat| FileStat {
        path: PathBuf::from(std::ffi::OsString::from_vec(stat.path)),
        size: stat.size,
        modified: stat.modified.and_then(at),
    }))
}

/// The time `since` the epoch; `None` for one past what the clock holds (a worker's
/// word is not trusted to be in range).
fn at(since: Duration) -> Option<SystemTime> {
    SystemTime::UNIX_EPOCH.checked_add(since)
}

fn since_epoch(time: SystemTime) -> Duration {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

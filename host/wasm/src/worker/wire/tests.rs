//! The wire format's tests: framing, descriptors and the mirrored types, apart from
//! the code they check.

use super::error::WireError;
use super::files::{scan_from_wire, WireInfo, WireStat};
use super::frame::{send, Receiver};
use super::messages::ToWorker;
use super::shared::MAX_FRAME;
use sandlot_core::backend::FileInfo;
use sandlot_core::error::Error;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

#[test]
fn a_message_and_its_descriptor_arrive_together() {
    let (a, b) = UnixStream::pair().unwrap();
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(b"snapshot").unwrap();
    send(
        &a,
        &ToWorker::Interrupt { id: 7 },
        Some(std::os::fd::AsFd::as_fd(&file)),
    )
    .unwrap();
    send(&a, &ToWorker::Interrupt { id: 8 }, None).unwrap();
    let mut receiver = Receiver::new(b, 1);
    let first: ToWorker = receiver.next().unwrap().unwrap();
    assert!(matches!(first, ToWorker::Interrupt { id: 7 }));
    let fd = receiver
        .take_fd()
        .expect("the descriptor came with its message");
    let mut bytes = String::new();
    let mut received = std::fs::File::from(fd);
    std::io::Seek::seek(&mut received, std::io::SeekFrom::Start(0)).unwrap();
    received.read_to_string(&mut bytes).unwrap();
    assert_eq!(bytes, "snapshot");
    let second: ToWorker = receiver.next().unwrap().unwrap();
    assert!(matches!(second, ToWorker::Interrupt { id: 8 }));
    assert!(receiver.take_fd().is_none());
    drop(a);
    assert!(receiver.next::<ToWorker>().unwrap().is_none());
}

#[test]
fn an_oversized_or_cut_frame_is_an_error_not_a_panic() {
    let (mut a, b) = UnixStream::pair().unwrap();
    a.write_all(&u32::MAX.to_le_bytes()).unwrap();
    let mut receiver = Receiver::new(b, 0);
    let error = receiver.next::<ToWorker>().unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);

    let (mut a, b) = UnixStream::pair().unwrap();
    a.write_all(&10u32.to_le_bytes()).unwrap();
    a.write_all(b"abc").unwrap();
    drop(a);
    let error = Receiver::new(b, 0).next::<ToWorker>().unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn descriptors_nobody_asked_for_are_refused() {
    let (a, b) = UnixStream::pair().unwrap();
    let file = tempfile::tempfile().unwrap();
    for _ in 0..3 {
        send(
            &a,
            &ToWorker::Interrupt { id: 1 },
            Some(std::os::fd::AsFd::as_fd(&file)),
        )
        .unwrap();
    }
    // The backend's side takes none: the first is an error, and none is kept.
    let mut receiver = Receiver::new(b, 0);
    let error = receiver.next::<ToWorker>().unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(receiver.take_fd().is_none());
}

#[test]
fn a_message_too_large_is_refused_before_a_byte_is_written() {
    let (a, b) = UnixStream::pair().unwrap();
    let huge = ToWorker::Chunk {
        id: 1,
        bytes: vec![0; MAX_FRAME + 1],
    };
    let error = send(&a, &huge, None).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    // The stream is still in step: the next message arrives whole.
    send(&a, &ToWorker::Interrupt { id: 2 }, None).unwrap();
    let next: ToWorker = Receiver::new(b, 0).next().unwrap().unwrap();
    assert!(matches!(next, ToWorker::Interrupt { id: 2 }));
}

#[test]
fn a_time_past_the_clocks_end_is_no_time_not_a_panic() {
    let info = WireInfo {
        kind: 0,
        size: 1,
        mode: 0o644,
        modified: Some(Duration::new(u64::MAX, 999_999_999)),
    };
    assert_eq!(FileInfo::from(info).modified, None);
    let scan = scan_from_wire(vec![WireStat {
        path: b"a".to_vec(),
        size: 1,
        modified: Some(Duration::MAX),
    }]);
    assert_eq!(scan.stats().next().unwrap().modified, None);
}

#[test]
fn errors_keep_what_callers_match() {
    let missing = Error::NoSuchFile { path: "a/b".into() };
    let back = Error::from(WireError::from(&missing));
    assert!(matches!(back, Error::NoSuchFile { ref path } if path == "a/b"));
    let bad = Error::InvalidRequest {
        reason: "no".into(),
    };
    let back = Error::from(WireError::from(&bad));
    assert_eq!(back.kind(), bad.kind());
    assert_eq!(back.to_string(), bad.to_string());
}

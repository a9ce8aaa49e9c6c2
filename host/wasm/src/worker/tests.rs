//! The worker module's own tests, apart from the code they check.

use super::pool::read_only;
use std::io::{Read, Seek, Write};

#[test]
fn a_worker_gets_the_snapshot_read_only_even_unlinked() {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(b"state").unwrap();
    let mut given = read_only(&file).unwrap();
    let mut read = String::new();
    given.read_to_string(&mut read).unwrap();
    assert_eq!(read, "state");
    assert!(given.write_all(b"forged").is_err());
    assert!(given.set_len(0).is_err());
    // Its own offset: reading there moved nothing here.
    assert_eq!(file.stream_position().unwrap(), 5);
}

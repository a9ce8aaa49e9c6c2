use super::*;

#[test]
fn only_the_stores_own_names_become_paths() {
    assert!(StoredSnapshotId::well_formed(
        StoredSnapshotId::fresh().as_str()
    ));
    for bad in [
        "snap-../../etc/passwd",
        "snap-0123456789ABCDEF0123456789abcdef",
        "snap-0123",
        "s-0123456789abcdef0123456789abcdef",
        "",
    ] {
        assert!(!StoredSnapshotId::well_formed(bad), "{bad}");
        assert!(serde_json::from_value::<StoredSnapshotId>(bad.into()).is_err());
    }
}

#[test]
fn a_full_store_refuses_and_gives_back_what_it_did_not_keep() {
    let dir = tempfile::tempdir().unwrap();
    let (store, paused) = Store::open(Some(dir.path()), 100, 100).unwrap();
    assert!(paused.is_empty());
    let held = store.reserve("a", 60).unwrap();
    let full = store.reserve("b", 60).err().unwrap();
    assert!(matches!(
        full,
        Error::StoreFull {
            needed: 60,
            used: 60,
            limit: 100
        }
    ));
    assert_eq!(full.kind(), sandlot_core::error::ErrorKind::Exhausted);
    drop(held);
    assert_eq!(store.used(), 0);
    store.reserve("a", 100).unwrap().keep();
    assert_eq!(store.used(), 100);
}

#[test]
fn one_client_fills_its_share_and_leaves_the_rest_to_the_others() {
    let (store, _) = Store::open(None, 100, 40).unwrap();
    store.take_room("greedy", 40).unwrap();
    let refused = store.take_room("greedy", 1).unwrap_err();
    assert!(matches!(
        refused,
        Error::StoreShareFull {
            needed: 1,
            used: 40,
            share: 40
        }
    ));
    assert_eq!(refused.kind(), sandlot_core::error::ErrorKind::Exhausted);
    store.take_room("other", 40).unwrap();
    assert_eq!((store.used_by("greedy"), store.used_by("other")), (40, 40));
    store.release("greedy", 40);
    assert_eq!((store.used(), store.used_by("greedy")), (40, 0));
}

#[test]
fn leftovers_and_unreadable_records_are_cleared_at_open() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(Some(dir.path()), 1 << 20, 1 << 20).unwrap());
    let paused = dir.path().join("paused");
    let orphan = paused.join("s-0123456789abcdef0123456789abcdef.snap");
    let partial = paused.join("s-0123456789abcdef0123456789abcdef.partial");
    let garbled = paused.join("s-fedcba9876543210fedcba9876543210.json");
    fs::write(&orphan, b"x").unwrap();
    fs::write(&partial, b"x").unwrap();
    fs::write(&garbled, b"{not json").unwrap();
    let (store, records) = Store::open(Some(dir.path()), 1 << 20, 1 << 20).unwrap();
    assert!(records.is_empty());
    assert_eq!(store.used(), 0);
    assert_eq!(fs::read_dir(&paused).unwrap().count(), 0);
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(dir.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

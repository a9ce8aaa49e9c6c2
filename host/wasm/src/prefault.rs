//! The pages of a module runtime's memory that every fresh instance writes, written
//! in one go; and the same for the instances restored from one snapshot.
//!
//! A fresh instance's memory maps the runtime's memory image copy-on-write. The first
//! write to each page of it faults; where the page was read first (the kernel maps
//! the image's pages sixteen at a time on a read), the fault also replaces a page
//! table entry that other cores may have cached, and every core running this process
//! is interrupted to flush it. With four threads opening Python sandboxes on two
//! cores, those faults made a fresh sandbox cost 9.8 ms of processor time against
//! 3.3 ms with one thread. The pages are the same from one instance to the next (285
//! pages in 127 runs for CPython once its session is set up), so the first fresh
//! instance of a runtime in this process records which it wrote (`/proc/self/pagemap`:
//! its pages that are no longer the image's), and every later one has them copied
//! before it runs (`MADV_POPULATE_WRITE`, Linux 5.14; one call per run, which cost
//! less than copying the pages between runs too): no faults, no flushes. The same
//! four threads then cost 2.7 ms a sandbox. Where either is missing, instances fault
//! as before.
//!
//! A restored instance maps its snapshot's pages copy-on-write in the same way, and
//! its first cell faults in what it writes: a data assistant's first cell on the
//! pandas base wrote about 1,800 pages, a third of the cell's time. What a session
//! writes depends on its code, so a snapshot's set ([`Observed`]) is what the last
//! two observed sessions restored from it both wrote by their end, at most
//! [`MAX_OBSERVED`]: a page one session's own large frame filled is not copied into
//! every later session. The host's own cells (the plot prelude) run before the
//! user's, so a session's first run would say little; and an observed session gets
//! no copies, or it would seem to have written them. The first two sessions and one
//! in [`OBSERVE_EVERY`] after are observed, so the set follows what sessions do now.
// madvise(2) and a read of pagemap on the instance's own memory.
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::{Arc, Mutex, OnceLock};

/// The size of a page, which `pagemap` describes one at a time.
const PAGE: usize = 4096;

/// The write set of one runtime's fresh instances, learned once per process.
#[derive(Default)]
pub(crate) struct Writes {
    /// Byte ranges of the memory, page-aligned; empty where nothing could be learned.
    learned: OnceLock<Vec<Range<usize>>>,
}

impl Writes {
    /// Whether the set is known (and later instances should not record it again).
    pub(crate) fn learned(&self) -> bool {
        self.learned.get().is_some()
    }

    /// Copies the known pages of a fresh instance's `memory` before it runs. Does
    /// nothing before the set is learned, or where the kernel cannot.
    pub(crate) fn apply(&self, memory: &mut [u8]) {
        if let Some(ranges) = self.learned.get() {
            populate(memory, ranges);
        }
    }

    /// Records which pages of `memory` the instance has written: those present and
    /// no longer the image's, as `pagemap` says. Once per runtime; a failure leaves
    /// the set empty.
    pub(crate) fn learn(&self, memory: &[u8]) {
        self.learned.get_or_init(|| {
            let runs = written(memory).unwrap_or_default();
            tracing::debug!(
                pages = runs.iter().map(|r| r.len() / PAGE).sum::<usize>(),
                runs = runs.len(),
                "learned the pages a fresh instance writes"
            );
            runs
        });
    }
}

/// Copies `ranges` of `memory` (page-aligned, within or past its end) into this
/// mapping. Stops at the first the kernel refuses (before Linux 5.14: all of them).
fn populate(memory: &mut [u8], ranges: &[Range<usize>]) {
    let base = memory.as_mut_ptr();
    for range in ranges {
        let end = range.end.min(memory.len());
        if range.start >= end {
            continue;
        }
        // SAFETY: a page-aligned range inside the instance's memory, which this
        // store owns and nothing else runs in yet; the advice changes no byte of it.
        let done = unsafe {
            libc::madvise(
                base.add(range.start).cast(),
                end - range.start,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if done != 0 {
            // An older kernel: the instance faults its pages in as it runs.
            return;
        }
    }
}

/// The write set of the instances restored from one snapshot state, as recent
/// sessions wrote it.
#[derive(Default)]
pub(crate) struct Observed {
    state: Mutex<Observations>,
}

#[derive(Default)]
struct Observations {
    /// Instances restored so far.
    restored: u64,
    /// What the last observed session wrote.
    last: Option<Vec<Range<usize>>>,
    /// What the last two observed sessions both wrote: copied into new instances.
    set: Arc<Vec<Range<usize>>>,
}

/// One restored session in this many is observed (and gets no copies), after the
/// first two.
pub(crate) const OBSERVE_EVERY: u64 = 16;

/// The most an observed set holds: 4,096 pages.
pub(crate) const MAX_OBSERVED: usize = 16 << 20;

impl Observed {
    /// Called once `memory` holds a restored state, before anything runs in it:
    /// copies the set into it, or, for a session to be observed, nothing. Whether
    /// [`Observed::observe`] should be told what the session wrote when it ends.
    pub(crate) fn restored(&self, memory: &mut [u8]) -> bool {
        let set = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.restored += 1;
            if state.restored <= 2 || state.restored.is_multiple_of(OBSERVE_EVERY) {
                return true;
            }
            state.set.clone()
        };
        populate(memory, &set);
        false
    }

    /// What an observed session's `memory` holds as written when it ends; the set
    /// becomes what it and the previous observed session both wrote.
    pub(crate) fn observe(&self, memory: &[u8]) {
        let Ok(runs) = written(memory) else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = state.last.take() {
            let both = capped(intersection(&last, &runs), MAX_OBSERVED);
            tracing::debug!(
                pages = both.iter().map(|r| r.len() / PAGE).sum::<usize>(),
                runs = both.len(),
                "learned the pages restored instances write"
            );
            state.set = Arc::new(both);
        }
        state.last = Some(runs);
    }
}

/// The first `max` bytes of `runs`.
fn capped(mut runs: Vec<Range<usize>>, max: usize) -> Vec<Range<usize>> {
    let mut left = max;
    runs.retain_mut(|run| {
        let kept = run.len().min(left);
        run.end = run.start + kept;
        left -= kept;
        kept > 0
    });
    runs
}

/// The byte ranges in both sorted, disjoint lists.
fn intersection(a: &[Range<usize>], b: &[Range<usize>]) -> Vec<Range<usize>> {
    let (mut i, mut j) = (0, 0);
    let mut both = Vec::new();
    while i < a.len() && j < b.len() {
        let start = a[i].start.max(b[j].start);
        let end = a[i].end.min(b[j].end);
        if start < end {
            both.push(start..end);
        }
        if a[i].end <= b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    both
}

/// Which snapshot state an instance was restored from: the snapshot's private file
/// and where the state starts in it. The file is unlinked and held for as long as
/// the snapshot is; should the kernel give a later file the same inode, the worst
/// a stale set does is copy pages that did not need copying.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct StateKey {
    device: u64,
    inode: u64,
    offset: u64,
}

impl StateKey {
    /// The key of the state at `offset` in `file`; `None` where the file cannot be
    /// described (the instance then faults its pages in as it runs).
    pub(crate) fn of(file: &File, offset: u64) -> Option<StateKey> {
        let meta = file.metadata().ok()?;
        Some(StateKey {
            device: meta.dev(),
            inode: meta.ino(),
            offset,
        })
    }
}

/// The write sets of the snapshot states most recently restored in this process.
#[derive(Default)]
pub(crate) struct ByState {
    sets: Mutex<VecDeque<(StateKey, Arc<Observed>)>>,
}

/// How many states' sets are kept: a base restored for every new session, and the
/// snapshots being forked, fit; a process restoring many snapshots once each keeps
/// no more than this.
const KEPT_STATES: usize = 8;

impl ByState {
    /// The set of `state`, made unknown if it is not kept.
    pub(crate) fn of(&self, state: StateKey) -> Arc<Observed> {
        let mut sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        let writes = match sets.iter().position(|(key, _)| *key == state) {
            Some(at) => sets.remove(at).map(|(_, writes)| writes),
            None => None,
        }
        .unwrap_or_default();
        sets.push_front((state, writes.clone()));
        sets.truncate(KEPT_STATES);
        writes
    }
}

/// The runs of pages of `memory` that are present, private to this process and not
/// file pages: the ones it has written.
fn written(memory: &[u8]) -> std::io::Result<Vec<Range<usize>>> {
    let start = memory.as_ptr() as usize;
    if !start.is_multiple_of(PAGE) {
        return Ok(Vec::new());
    }
    let pages = memory.len() / PAGE;
    let pagemap = std::fs::File::open("/proc/self/pagemap")?;
    let mut entries = vec![0u8; pages * 8];
    pagemap.read_exact_at(&mut entries, (start / PAGE * 8) as u64)?;
    const PRESENT: u64 = 1 << 63;
    const FILE_OR_SHARED: u64 = 1 << 61;
    const EXCLUSIVE: u64 = 1 << 56;
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (page, entry) in entries.chunks_exact(8).enumerate() {
        let entry = u64::from_ne_bytes(entry.try_into().unwrap_or_default());
        if entry & (PRESENT | FILE_OR_SHARED | EXCLUSIVE) != PRESENT | EXCLUSIVE {
            continue;
        }
        let offset = page * PAGE;
        match runs.last_mut() {
            Some(last) if last.end == offset => last.end = offset + PAGE,
            _ => runs.push(offset..offset + PAGE),
        }
    }
    Ok(runs)
}

#[cfg(test)]
// Lists of page ranges, some of them one range long.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    /// A private, page-aligned mapping of `pages` pages of a file full of ones: what
    /// an instance's memory image is.
    struct Mapped {
        base: *mut u8,
        len: usize,
        _file: tempfile::NamedTempFile,
    }

    impl Mapped {
        fn new(pages: usize) -> Mapped {
            use std::os::fd::AsRawFd;
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), vec![1u8; pages * PAGE]).unwrap();
            let len = pages * PAGE;
            // SAFETY: a fresh private mapping of a file this test owns.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE,
                    file.as_file().as_raw_fd(),
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            Mapped {
                base: base.cast(),
                len,
                _file: file,
            }
        }

        fn memory(&mut self) -> &mut [u8] {
            // SAFETY: the mapping lives as long as `self`.
            unsafe { std::slice::from_raw_parts_mut(self.base, self.len) }
        }
    }

    impl Drop for Mapped {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`.
            unsafe { libc::munmap(self.base.cast(), self.len) };
        }
    }

    #[test]
    fn the_pages_an_instance_wrote_are_learned_and_copied_into_the_next() {
        let mut first = Mapped::new(8);
        let memory = first.memory();
        // Read everything, write pages 1, 2 and 5.
        assert!(memory.iter().all(|&b| b == 1));
        for page in [1, 2, 5] {
            memory[page * PAGE + 7] = 9;
        }
        let writes = Writes::default();
        writes.learn(memory);
        assert!(writes.learned());
        assert_eq!(
            writes.learned.get().unwrap(),
            &vec![PAGE..3 * PAGE, 5 * PAGE..6 * PAGE]
        );
        // The next instance gets those pages as its own, with the image's bytes.
        let mut next = Mapped::new(8);
        writes.apply(next.memory());
        assert_eq!(
            written(next.memory()).unwrap(),
            [PAGE..3 * PAGE, 5 * PAGE..6 * PAGE]
        );
        assert!(next.memory().iter().all(|&b| b == 1));
        // Learned once: a later instance does not change the set.
        writes.learn(Mapped::new(8).memory());
        assert_eq!(writes.learned.get().unwrap().len(), 2);
    }

    #[test]
    fn a_restored_state_copies_what_the_last_two_observed_sessions_both_wrote() {
        let observed = Observed::default();
        // The first two are observed, and get nothing copied.
        for pages in [&[1, 2, 5][..], &[2, 3, 5, 6]] {
            let mut session = Mapped::new(8);
            assert!(observed.restored(session.memory()));
            assert!(written(session.memory()).unwrap().is_empty());
            for &page in pages {
                session.memory()[page * PAGE] = 9;
            }
            observed.observe(session.memory());
        }
        // The next ones get pages 2 and 5, with their bytes, until the 16th.
        for _ in 3..OBSERVE_EVERY {
            let mut next = Mapped::new(8);
            assert!(!observed.restored(next.memory()));
            assert_eq!(
                written(next.memory()).unwrap(),
                [2 * PAGE..3 * PAGE, 5 * PAGE..6 * PAGE]
            );
            assert!(next.memory().iter().all(|&b| b == 1));
        }
        // The 16th is observed: sessions now write less, and the set follows.
        let mut sixteenth = Mapped::new(8);
        assert!(observed.restored(sixteenth.memory()));
        assert!(written(sixteenth.memory()).unwrap().is_empty());
        sixteenth.memory()[5 * PAGE] = 9;
        observed.observe(sixteenth.memory());
        let mut next = Mapped::new(8);
        assert!(!observed.restored(next.memory()));
        assert_eq!(written(next.memory()).unwrap(), [5 * PAGE..6 * PAGE]);
    }

    #[test]
    fn intersections_of_runs() {
        assert_eq!(
            intersection(&[0..10, 20..30], &[5..25]),
            vec![5..10, 20..25]
        );
        assert_eq!(
            intersection(&[0..10], &[10..20]),
            Vec::<Range<usize>>::new()
        );
        assert_eq!(intersection(&[0..30], &[1..2, 3..4]), vec![1..2, 3..4]);
        assert!(intersection(&[], &[0..4]).is_empty());
        assert_eq!(capped(vec![0..10, 20..30, 40..50], 15), vec![0..10, 20..25]);
        assert_eq!(capped(vec![0..10], 10), vec![0..10]);
    }

    #[test]
    fn states_keep_their_sets_and_the_oldest_go() {
        let files: Vec<tempfile::NamedTempFile> = (0..=KEPT_STATES)
            .map(|_| tempfile::NamedTempFile::new().unwrap())
            .collect();
        let key = |i: usize| StateKey::of(files[i].as_file(), 4096).unwrap();
        let by_state = ByState::default();
        let first = by_state.of(key(0));
        assert!(Arc::ptr_eq(&first, &by_state.of(key(0))));
        assert_ne!(key(0), StateKey::of(files[0].as_file(), 0).unwrap());
        for i in 1..=KEPT_STATES {
            by_state.of(key(i));
        }
        // Eight others came since: the first state's set was let go.
        assert!(!Arc::ptr_eq(&first, &by_state.of(key(0))));
    }
}

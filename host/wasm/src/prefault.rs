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
//! two observed sessions restored from it both wrote by their end (beyond what their
//! restore copied in), at most
//! [`MAX_OBSERVED`]: a page one session's own large frame filled is not copied into
//! every later session. The host's own cells (the plot prelude) run before the
//! user's, so a session's first run would say little; and an observed session gets
//! no copies, or it would seem to have written them. Sessions are observed until two
//! observations are in, and one in [`OBSERVE_EVERY`] after, so the set follows what
//! sessions do now.
// madvise(2) and a read of pagemap on the instance's own memory.
#![allow(unsafe_code)]

use sandlot_core::SnapshotId;
use std::collections::VecDeque;
use std::ops::Range;
use std::os::unix::fs::FileExt;
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
    /// Observations handed out and not yet back.
    pending: u64,
    /// Observations that came back with what their session wrote.
    observed: u64,
    /// What the last observed session wrote.
    last: Option<Vec<Range<usize>>>,
    /// What the last two observed sessions both wrote: copied into new instances.
    set: Arc<Vec<Range<usize>>>,
}

/// One restored session in this many is observed (and gets no copies), once two
/// observations are in.
const OBSERVE_EVERY: u64 = 16;

/// The most an observed set holds: 4,096 pages.
const MAX_OBSERVED: usize = 16 << 20;

impl Observed {
    /// Called once `memory` holds a restored state, before anything runs in it:
    /// copies the set into it; or, while fewer than two sessions have been observed
    /// (counting those still open) and for one in [`OBSERVE_EVERY`], copies nothing
    /// and hands back the observation to finish when the session ends.
    pub(crate) fn restored(self: &Arc<Self>, memory: &mut [u8]) -> Option<Observation> {
        let set = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.restored += 1;
            if state.observed + state.pending < 2 || state.restored.is_multiple_of(OBSERVE_EVERY) {
                state.pending += 1;
                drop(state);
                return Some(Observation {
                    of: self.clone(),
                    // The pages the restore itself copied are every session's: not
                    // what sessions write.
                    by_restore: written(memory).unwrap_or_default(),
                    finished: false,
                });
            }
            state.set.clone()
        };
        populate(memory, &set);
        None
    }

    /// What a session wrote (`runs`); the set becomes what it and the previous
    /// observed session both wrote.
    fn observe(&self, runs: Option<Vec<Range<usize>>>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.pending = state.pending.saturating_sub(1);
        let Some(runs) = runs else {
            return;
        };
        state.observed += 1;
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

/// A restored session being observed: [`Observation::finish`] it with its memory as
/// it ends; dropped unfinished (the instance trapped or quit), it counts as not
/// observed, and another session will be.
pub(crate) struct Observation {
    of: Arc<Observed>,
    /// The pages the restore itself wrote.
    by_restore: Vec<Range<usize>>,
    finished: bool,
}

impl Observation {
    /// Reads what the session wrote in `memory`, beyond what its restore did.
    pub(crate) fn finish(mut self, memory: &[u8]) {
        self.finished = true;
        let runs = written(memory)
            .ok()
            .map(|runs| difference(&runs, &self.by_restore));
        self.of.observe(runs);
    }
}

impl Drop for Observation {
    fn drop(&mut self) {
        if !self.finished {
            self.of.observe(None);
        }
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

/// The byte ranges of `a` outside every range of `b` (both sorted and disjoint).
fn difference(a: &[Range<usize>], b: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut left = Vec::new();
    let mut j = 0;
    for range in a {
        let mut start = range.start;
        while j < b.len() && b[j].end <= start {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].start < range.end {
            if b[k].start > start {
                left.push(start..b[k].start);
            }
            start = start.max(b[k].end);
            k += 1;
        }
        if start < range.end {
            left.push(start..range.end);
        }
    }
    left
}

/// Which snapshot state an instance was restored from: the snapshot, and where in
/// it the pages start.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct StateKey {
    pub(crate) snapshot: SnapshotId,
    pub(crate) offset: u64,
}

/// The write sets of the snapshot states most recently restored in this process, by
/// their key (a [`StateKey`]).
pub(crate) struct ByState<K = StateKey> {
    sets: Mutex<VecDeque<(K, Arc<Observed>)>>,
}

impl<K> Default for ByState<K> {
    fn default() -> Self {
        ByState {
            sets: Mutex::new(VecDeque::new()),
        }
    }
}

/// How many states' sets are kept: a base restored for every new session, and the
/// snapshots being forked, fit; a process restoring many snapshots once each keeps
/// no more than this.
const KEPT_STATES: usize = 8;

impl<K: PartialEq> ByState<K> {
    /// The set of `state`: the one kept, or a new, empty one; either way now the
    /// most recently used.
    pub(crate) fn of(&self, state: K) -> Arc<Observed> {
        let mut sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        let observed = match sets.iter().position(|(key, _)| *key == state) {
            Some(at) => sets.remove(at).map(|(_, observed)| observed),
            None => None,
        }
        .unwrap_or_default();
        sets.push_front((state, observed.clone()));
        sets.truncate(KEPT_STATES);
        observed
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

    /// A restored session: eight pages of ones, of which the restore copied page 0.
    fn restored(observed: &Arc<Observed>) -> (Mapped, Option<Observation>) {
        let mut session = Mapped::new(8);
        session.memory()[0] = 1;
        let observation = observed.restored(session.memory());
        (session, observation)
    }

    #[test]
    fn a_restored_state_copies_what_the_last_two_observed_sessions_both_wrote() {
        let observed = Arc::new(Observed::default());
        // The first two are observed, and get nothing copied; what their restore
        // copied does not count.
        for pages in [&[1, 2, 5][..], &[2, 3, 5, 6]] {
            let (mut session, observation) = restored(&observed);
            assert_eq!(written(session.memory()).unwrap(), [0..PAGE]);
            for &page in pages {
                session.memory()[page * PAGE] = 9;
            }
            observation.unwrap().finish(session.memory());
        }
        // The next ones get pages 2 and 5, with their bytes, until the 16th.
        for _ in 3..OBSERVE_EVERY {
            let (mut next, observation) = restored(&observed);
            assert!(observation.is_none());
            assert_eq!(
                written(next.memory()).unwrap(),
                [0..PAGE, 2 * PAGE..3 * PAGE, 5 * PAGE..6 * PAGE]
            );
            assert!(next.memory().iter().all(|&b| b == 1));
        }
        // The 16th is observed: sessions now write less, and the set follows.
        let (mut sixteenth, observation) = restored(&observed);
        assert_eq!(written(sixteenth.memory()).unwrap(), [0..PAGE]);
        sixteenth.memory()[5 * PAGE] = 9;
        observation.unwrap().finish(sixteenth.memory());
        let (mut next, _) = restored(&observed);
        assert_eq!(
            written(next.memory()).unwrap(),
            [0..PAGE, 5 * PAGE..6 * PAGE]
        );
    }

    #[test]
    fn sessions_are_observed_until_two_observations_are_in() {
        let observed = Arc::new(Observed::default());
        // Two sessions open at once are observed; a third, beside them, is not.
        let (mut first, one) = restored(&observed);
        let (_second, two) = restored(&observed);
        assert!(one.is_some() && two.is_some());
        assert!(restored(&observed).1.is_none());
        // One ends observed, the other trapped (its observation dropped): the next
        // session takes its place.
        first.memory()[3 * PAGE] = 9;
        one.unwrap().finish(first.memory());
        drop(two);
        let (mut third, three) = restored(&observed);
        third.memory()[3 * PAGE] = 9;
        three
            .expect("observed in place of the lost one")
            .finish(third.memory());
        let (mut next, none) = restored(&observed);
        assert!(none.is_none());
        assert_eq!(
            written(next.memory()).unwrap(),
            [0..PAGE, 3 * PAGE..4 * PAGE]
        );
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
        assert_eq!(
            difference(&[0..10, 20..30, 40..50], &[5..8, 9..22, 45..60]),
            vec![0..5, 8..9, 22..30, 40..45]
        );
        assert_eq!(difference(&[0..10], &[]), vec![0..10]);
        assert!(difference(&[4..8], &[0..10]).is_empty());
    }

    #[test]
    fn states_keep_their_sets_and_the_least_recently_used_go() {
        let by_state = ByState::<usize>::default();
        let sets: Vec<_> = (0..KEPT_STATES).map(|i| by_state.of(i)).collect();
        assert!(Arc::ptr_eq(&sets[0], &by_state.of(0)));
        // State 0 was used again just now, so a new state lets state 1 go.
        by_state.of(100);
        assert!(Arc::ptr_eq(&sets[0], &by_state.of(0)));
        assert!(!Arc::ptr_eq(&sets[1], &by_state.of(1)));
    }
}

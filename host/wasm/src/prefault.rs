//! The pages of a module runtime's memory that every fresh instance writes, written
//! in one go.
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
// madvise(2) and a read of pagemap on the instance's own memory.
#![allow(unsafe_code)]

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

/// The size of a page, which `pagemap` describes one at a time.
const PAGE: usize = 4096;

/// The write set of one runtime, learned once per process.
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
        let Some(ranges) = self.learned.get() else {
            return;
        };
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
}

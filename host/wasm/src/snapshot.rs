//! An interpreter's state in a snapshot: the pages of its linear memory that differ
//! from a fresh instance's, which is all a module runtime's state is between runs
//! once [`exact`] holds for its module.
//!
//! ```text
//! size: u64 LE (the memory's length) | runs: u64 LE
//! (offset: u64 LE, length: u64 LE) * runs   (4 KiB-aligned, increasing, apart)
//! zeros up to the next multiple of 4 KiB from the image's start
//! the runs' bytes, one after another
//! ```
//!
//! The snapshot puts the image at a 4 KiB-aligned offset of its file, so every run's
//! bytes are whole pages of the file too: a restore maps them into the instance's
//! memory copy-on-write instead of copying them.

use sandlot_core::error::{Error, Result};
use sandlot_core::snapshot::{MemoryFacts, RuntimeIdentity};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// The unit of comparison.
pub(crate) const PAGE: usize = 4096;
/// A wasm page: what memories grow by.
pub(crate) const WASM_PAGE: u64 = 65536;

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidSnapshot {
        reason: reason.into(),
    }
}

/// The page-aligned byte ranges where `memory` differs from `base` (read as zeros
/// past its end), neighbours merged.
fn changed(memory: &[u8], base: &[u8]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (i, page) in memory.chunks(PAGE).enumerate() {
        let at = i * PAGE;
        let same = match base.get(at..(at + page.len()).min(base.len())) {
            Some(old) if old.len() == page.len() => old == page,
            Some(old) => page[..old.len()] == *old && page[old.len()..].iter().all(|b| *b == 0),
            None => page.iter().all(|b| *b == 0),
        };
        if same {
            continue;
        }
        let at = at as u64;
        match runs.last_mut() {
            Some((start, len)) if *start + *len == at => *len += page.len() as u64,
            _ => runs.push((at, page.len() as u64)),
        }
    }
    runs
}

/// Writes `memory` as its differences from `base`; with no base, whole (one run).
pub(crate) fn write(
    memory: &[u8],
    base: Option<&[u8]>,
    out: &mut dyn Write,
) -> std::io::Result<MemoryFacts> {
    let runs = match base {
        Some(base) => changed(memory, base),
        None if memory.is_empty() => Vec::new(),
        None => vec![(0, memory.len() as u64)],
    };
    out.write_all(&(memory.len() as u64).to_le_bytes())?;
    out.write_all(&(runs.len() as u64).to_le_bytes())?;
    for (at, len) in &runs {
        out.write_all(&at.to_le_bytes())?;
        out.write_all(&len.to_le_bytes())?;
    }
    out.write_all(&vec![0u8; head_padding(runs.len() as u64) as usize])?;
    let mut total = 0;
    for (at, len) in &runs {
        out.write_all(&memory[*at as usize..][..*len as usize])?;
        total += len;
    }
    Ok(MemoryFacts {
        size: memory.len() as u64,
        changed: total,
    })
}

/// The zeros after a head of `runs` runs, up to the pages.
fn head_padding(runs: u64) -> u64 {
    let head = 16 + 16 * runs;
    (PAGE as u64 - head % PAGE as u64) % PAGE as u64
}

/// The head of a memory image: the memory's length and where its pages go.
pub(crate) struct Head {
    pub size: u64,
    pub runs: Vec<(u64, u64)>,
}

impl Head {
    /// The wasm pages a fresh instance's memory of `have` bytes grows by to hold the
    /// image; refused if the image is smaller, as no image of that runtime is.
    pub(crate) fn growth(&self, have: u64) -> Result<u64> {
        if self.size < have {
            return Err(invalid(format!(
                "its memory ({} bytes) is smaller than a fresh instance's ({have}): it is \
                 not of this runtime",
                self.size
            )));
        }
        Ok((self.size - have) / WASM_PAGE)
    }
}

fn read_u64(input: &mut dyn Read) -> Result<u64> {
    let mut bytes = [0u8; 8];
    input.read_exact(&mut bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => invalid("its interpreter state is cut short"),
        _ => Error::Io {
            context: "cannot read the snapshot".into(),
            source: e,
        },
    })?;
    Ok(u64::from_le_bytes(bytes))
}

/// Reads and checks an image's head: a memory of at most `max` bytes.
pub(crate) fn read_head(input: &mut dyn Read, max: u64) -> Result<Head> {
    let size = read_u64(input)?;
    if !size.is_multiple_of(WASM_PAGE) {
        return Err(invalid(format!(
            "its memory's length ({size}) is not a whole number of wasm pages"
        )));
    }
    if size > max {
        return Err(invalid(format!(
            "its interpreter's memory is {} MiB, more than this session may use ({} MiB): \
             restore it with a larger memory limit",
            size >> 20,
            max >> 20
        )));
    }
    let count = read_u64(input)?;
    if count > size / PAGE as u64 {
        return Err(invalid(
            "its memory image has more runs than its memory has pages",
        ));
    }
    let mut runs = Vec::with_capacity(count as usize);
    let mut end = 0u64;
    for _ in 0..count {
        let at = read_u64(input)?;
        let len = read_u64(input)?;
        let aligned = at.is_multiple_of(PAGE as u64) && len.is_multiple_of(PAGE as u64) && len > 0;
        if !aligned || at < end || at.checked_add(len).is_none_or(|e| e > size) {
            return Err(invalid(
                "its memory image is malformed (a run out of order, unaligned or past the \
                 memory's end)",
            ));
        }
        end = at + len;
        runs.push((at, len));
    }
    let padding = head_padding(count);
    let skipped = std::io::copy(&mut Read::take(&mut *input, padding), &mut std::io::sink())
        .map_err(|e| Error::Io {
            context: "cannot read the snapshot".into(),
            source: e,
        })?;
    if skipped != padding {
        return Err(invalid("its interpreter state is cut short"));
    }
    Ok(Head { size, runs })
}

/// Runs at least this long are mapped from the snapshot's file rather than copied:
/// each mapping is an entry in the process's map table (65,530 by default), so small
/// runs, which cost little to copy, are copied.
const MAP_AT: u64 = 1 << 20;

/// Puts the runs' pages into `memory` (as long as the head's size), from `file`, where
/// they lie one after another from offset `data`, within `available` bytes: long runs
/// mapped copy-on-write where the addresses allow, the rest copied. Returns how many
/// bytes were mapped.
pub(crate) fn read_pages(
    head: &Head,
    file: &File,
    data: u64,
    available: u64,
    memory: &mut [u8],
) -> Result<u64> {
    let total: u64 = head.runs.iter().map(|(_, len)| len).sum();
    if total > available || memory.len() as u64 != head.size {
        return Err(invalid("its interpreter state is cut short"));
    }
    let io = |e: std::io::Error| Error::Io {
        context: "cannot read the snapshot".into(),
        source: e,
    };
    // Short runs are many (a thousand or more for a data session): copied from one
    // read-only view of the pages rather than read one by one.
    let view = map::View::of(file, data, total).ok();
    let mut from = data;
    let mut mapped = 0;
    for (at, len) in &head.runs {
        let pages = &mut memory[*at as usize..(*at + *len) as usize];
        if *len >= MAP_AT && map::private(file, from, pages).is_ok() {
            mapped += len;
        } else if let Some(view) = &view {
            let start = (from - data) as usize;
            pages.copy_from_slice(&view.bytes()[start..start + pages.len()]);
        } else {
            read_exact_at(file, pages, from).map_err(io)?;
        }
        from += len;
    }
    Ok(mapped)
}

/// The runs' bytes one after another, as they lie in `file` from offset `data`
/// within `available` bytes: for a memory the host cannot map into, which takes
/// them through the guest's own copy. A read-only view of the file where it can be
/// had (no copy, no zeroed buffer), else read.
pub(crate) fn read_runs(head: &Head, file: &File, data: u64, available: u64) -> Result<Runs> {
    let total: u64 = head.runs.iter().map(|(_, len)| len).sum();
    if total > available {
        return Err(invalid("its interpreter state is cut short"));
    }
    if total == 0 {
        return Ok(Runs::Read(Vec::new()));
    }
    if let Ok(view) = map::View::of(file, data, total) {
        return Ok(Runs::Mapped(view));
    }
    let mut bytes = vec![0u8; total as usize];
    read_exact_at(file, &mut bytes, data).map_err(|e| Error::Io {
        context: "cannot read the snapshot".into(),
        source: e,
    })?;
    Ok(Runs::Read(bytes))
}

/// The runs' bytes [`read_runs`] gives.
pub(crate) enum Runs {
    Mapped(map::View),
    Read(Vec<u8>),
}

impl Runs {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Runs::Mapped(view) => view.bytes(),
            Runs::Read(bytes) => bytes,
        }
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Copy-on-write mappings of a file's pages over memory the caller holds.
pub(crate) mod map {
    #![allow(unsafe_code)] // mmap(2) over a wasm memory's pages

    use std::fs::File;
    use std::os::fd::AsRawFd;

    /// Replaces `pages` with a private mapping of `file` from `offset`: they read as
    /// the file's bytes, and writes to them stay in this mapping.
    pub(super) fn private(file: &File, offset: u64, pages: &mut [u8]) -> std::io::Result<()> {
        let page = super::PAGE;
        let aligned = (pages.as_ptr() as usize).is_multiple_of(page)
            && pages.len().is_multiple_of(page)
            && offset.is_multiple_of(page as u64);
        let offset = libc::off_t::try_from(offset).map_err(std::io::Error::other)?;
        if !aligned || pages.is_empty() {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: `pages` is memory this process mapped read-write (a wasm instance's
        // accessible linear memory), page-aligned and whole pages, borrowed mutably, so
        // nothing else reads or writes it while its pages are swapped. MAP_FIXED
        // replaces exactly that range with a mapping of the same protection; the file
        // is the snapshot's private copy, never written again, and a private mapping
        // keeps its pages however the file is closed. The instance's memory is later
        // unmapped whole with its reservation.
        let mapped = unsafe {
            libc::mmap(
                pages.as_mut_ptr().cast(),
                pages.len(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_FIXED,
                file.as_raw_fd(),
                offset,
            )
        };
        if mapped == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// A read-only view of `len` bytes of a file from a page-aligned `offset`;
    /// unmapped when dropped.
    pub(crate) struct View {
        at: *mut libc::c_void,
        len: usize,
    }

    impl View {
        pub(super) fn of(file: &File, offset: u64, len: u64) -> std::io::Result<View> {
            let len = usize::try_from(len).map_err(std::io::Error::other)?;
            let offset = libc::off_t::try_from(offset).map_err(std::io::Error::other)?;
            if len == 0 || !(offset as u64).is_multiple_of(super::PAGE as u64) {
                return Err(std::io::ErrorKind::InvalidInput.into());
            }
            // SAFETY: a new mapping at an address the kernel chooses, read-only and
            // private: it aliases nothing this process holds.
            let at = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    offset,
                )
            };
            if at == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            Ok(View { at, len })
        }

        pub(crate) fn bytes(&self) -> &[u8] {
            // SAFETY: `at` is a live read-only mapping of `len` bytes, unmapped only
            // when `self` drops; the file under it is never written.
            unsafe { std::slice::from_raw_parts(self.at.cast::<u8>(), self.len) }
        }
    }

    impl Drop for View {
        fn drop(&mut self) {
            // SAFETY: the mapping `of` made, no slice of which outlives `self`.
            unsafe {
                libc::munmap(self.at, self.len);
            }
        }
    }
}

/// [`exact`] for the module of `runtime` in file `module`, found once per process.
pub(crate) fn check_exact(
    runtime: &RuntimeIdentity,
    module: &Path,
) -> std::result::Result<(), String> {
    static FOUND: OnceLock<Mutex<HashMap<String, std::result::Result<(), String>>>> =
        OnceLock::new();
    let found = FOUND.get_or_init(Default::default);
    if let Some(answer) = found
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&runtime.digest)
    {
        return answer.clone();
    }
    let answer = std::fs::read(module)
        .map_err(|e| format!("cannot read its module `{}`: {e}", module.display()))
        .and_then(|bytes| exact(&bytes));
    found
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(runtime.digest.clone(), answer.clone());
    answer
}

/// Whether a module's state between runs is its linear memory alone, so that a
/// snapshot of the memory is exact: one memory, and no mutable global but the C
/// stack pointer (back at its start whenever no call is under way) or one it exports.
/// Tables must not grow. `Err` says what would be lost.
pub(crate) fn exact(module: &[u8]) -> std::result::Result<(), String> {
    use wasmparser::{Parser, Payload};
    let mut mutable: Vec<u32> = Vec::new();
    let mut exported: Vec<u32> = Vec::new();
    let mut stack_pointer: Option<u32> = None;
    let mut imported_globals = 0u32;
    let mut memories = 0u32;
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.map_err(|e| format!("its module does not parse: {e}"))?;
        match payload {
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    let import = import.map_err(|e| e.to_string())?;
                    match import.ty {
                        wasmparser::TypeRef::Global(g) if g.mutable => {
                            return Err(format!(
                                "it imports mutable global {}.{}",
                                import.module, import.name
                            ))
                        }
                        wasmparser::TypeRef::Global(_) => imported_globals += 1,
                        wasmparser::TypeRef::Memory(_) => memories += 1,
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(section) => memories += section.count(),
            Payload::TableSection(tables) => {
                for table in tables {
                    let table = table.map_err(|e| e.to_string())?;
                    if table.ty.maximum != Some(table.ty.initial) {
                        return Err("its function table can grow".into());
                    }
                }
            }
            Payload::GlobalSection(globals) => {
                for (i, global) in globals.into_iter().enumerate() {
                    let global = global.map_err(|e| e.to_string())?;
                    if global.ty.mutable {
                        mutable.push(imported_globals + i as u32);
                    }
                }
            }
            Payload::ExportSection(exports) => {
                for export in exports {
                    let export = export.map_err(|e| e.to_string())?;
                    if export.kind == wasmparser::ExternalKind::Global {
                        exported.push(export.index);
                    }
                }
            }
            Payload::CustomSection(section) if section.name() == "name" => {
                if let wasmparser::KnownCustom::Name(names) = section.as_known() {
                    for name in names.into_iter().flatten() {
                        if let wasmparser::Name::Global(map) = name {
                            for naming in map.into_iter().flatten() {
                                if naming.name == "__stack_pointer" {
                                    stack_pointer = Some(naming.index);
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if memories != 1 {
        return Err(format!("it has {memories} memories, not one"));
    }
    let hidden: Vec<u32> = mutable
        .into_iter()
        .filter(|g| !exported.contains(g) && Some(*g) != stack_pointer)
        .collect();
    if !hidden.is_empty() {
        return Err(format!(
            "it keeps state in mutable globals it does not export ({hidden:?})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pages_that_differ_are_written_and_they_read_back() {
        let base = vec![1u8; 4 * PAGE];
        let mut memory = vec![1u8; 4 * PAGE];
        memory.resize(WASM_PAGE as usize, 0);
        memory[PAGE + 5] = 9;
        memory[2 * PAGE] = 9;
        memory[6 * PAGE] = 7;
        let mut image = Vec::new();
        let facts = write(&memory, Some(&base), &mut image).unwrap();
        assert_eq!(
            facts.changed,
            3 * PAGE as u64,
            "two neighbours and one page past the base"
        );
        assert_eq!(facts.size, WASM_PAGE);
        let mut input = &image[..];
        let head = read_head(&mut input, 1 << 30).unwrap();
        assert_eq!(
            head.runs,
            vec![
                (PAGE as u64, 2 * PAGE as u64),
                (6 * PAGE as u64, PAGE as u64)
            ]
        );
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&image).unwrap();
        let data = (image.len() - input.len()) as u64;
        let mut restored = base.clone();
        restored.resize(head.size as usize, 0);
        let mapped = read_pages(&head, &file, data, input.len() as u64, &mut restored).unwrap();
        assert_eq!(mapped, 0, "short runs are copied");
        assert_eq!(restored, memory);
    }

    #[test]
    fn a_long_run_is_mapped_copy_on_write_from_the_file() {
        let size = 4 * MAP_AT as usize;
        let mut memory = vec![0u8; size];
        for (i, byte) in memory[PAGE..PAGE + 2 * MAP_AT as usize]
            .iter_mut()
            .enumerate()
        {
            *byte = (i % 251) as u8 + 1;
        }
        let mut image = Vec::new();
        write(&memory, Some(&[]), &mut image).unwrap();
        let mut file = tempfile::tempfile().unwrap();
        // The image where a snapshot puts it: at a page-aligned offset of its file.
        file.write_all(&vec![0u8; PAGE]).unwrap();
        file.write_all(&image).unwrap();
        let mut input = &image[..];
        let head = read_head(&mut input, 1 << 30).unwrap();
        let data = (PAGE + image.len() - input.len()) as u64;
        // Memory as an instance's is: page-aligned, whole pages.
        let mut backing = vec![0u8; size + PAGE];
        let start = backing.as_ptr().align_offset(PAGE);
        let restored = &mut backing[start..start + size];
        let mapped = read_pages(&head, &file, data, input.len() as u64, restored).unwrap();
        assert_eq!(mapped, 2 * MAP_AT);
        assert!(restored == &memory[..]);
        restored[PAGE] = 0;
        let mut first = [0u8; 1];
        read_exact_at(&file, &mut first, data).unwrap();
        assert_eq!(
            first,
            [1],
            "a write to restored memory stays out of the file"
        );
    }

    #[test]
    fn a_memory_over_the_limit_or_a_malformed_run_is_refused() {
        let memory = vec![3u8; 2 * WASM_PAGE as usize];
        let mut image = Vec::new();
        write(&memory, Some(&[]), &mut image).unwrap();
        let error = read_head(&mut &image[..], WASM_PAGE).err().unwrap();
        assert!(error.to_string().contains("larger memory limit"), "{error}");
        let mut bad = image.clone();
        bad[16] = 1; // the first run's offset, no longer aligned
        let error = read_head(&mut &bad[..], 1 << 30).err().unwrap();
        assert!(error.to_string().contains("malformed"), "{error}");
        let error = read_head(&mut &image[..20], 1 << 30).err().unwrap();
        assert!(error.to_string().contains("cut short"), "{error}");
    }

    #[test]
    fn a_module_with_a_hidden_mutable_global_is_not_exact() {
        let plain = wat::parse_str(
            r#"(module (memory (export "memory") 1)
                 (global $__stack_pointer (mut i32) (i32.const 1024))
                 (global (export "counter") (mut i32) (i32.const 0)))"#,
        )
        .unwrap();
        assert_eq!(exact(&plain), Ok(()));
        let hidden =
            wat::parse_str(r#"(module (memory 1) (global $state (mut i32) (i32.const 0)))"#)
                .unwrap();
        assert!(exact(&hidden).unwrap_err().contains("mutable globals"));
        let growing = wat::parse_str(r#"(module (memory 1) (table 1 funcref))"#).unwrap();
        assert!(exact(&growing).unwrap_err().contains("table"));
    }
}

//! An interpreter's state in a snapshot: the pages of its linear memory that differ
//! from a fresh instance's, which is all a module runtime's state is between runs
//! once [`exact`] holds for its module.
//!
//! ```text
//! size: u64 LE (the memory's length) | runs: u64 LE
//! (offset: u64 LE, length: u64 LE) * runs   (4 KiB-aligned, increasing, apart)
//! the runs' bytes, one after another
//! ```

use sandlot_core::error::{Error, Result};
use sandlot_core::snapshot::RuntimeIdentity;
use std::collections::HashMap;
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

/// Writes `memory` as its differences from `base`; returns how many bytes of pages
/// it wrote.
pub(crate) fn write(memory: &[u8], base: &[u8], out: &mut dyn Write) -> std::io::Result<u64> {
    let runs = changed(memory, base);
    out.write_all(&(memory.len() as u64).to_le_bytes())?;
    out.write_all(&(runs.len() as u64).to_le_bytes())?;
    for (at, len) in &runs {
        out.write_all(&at.to_le_bytes())?;
        out.write_all(&len.to_le_bytes())?;
    }
    let mut total = 0;
    for (at, len) in &runs {
        out.write_all(&memory[*at as usize..][..*len as usize])?;
        total += len;
    }
    Ok(total)
}

/// The head of a memory image: the memory's length and where its pages go.
pub(crate) struct Head {
    pub size: u64,
    pub runs: Vec<(u64, u64)>,
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
    if size % WASM_PAGE != 0 {
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
        let aligned = at % PAGE as u64 == 0 && len % PAGE as u64 == 0 && len > 0;
        if !aligned || at < end || at.checked_add(len).is_none_or(|e| e > size) {
            return Err(invalid(
                "its memory image is malformed (a run out of order, unaligned or past the \
                 memory's end)",
            ));
        }
        end = at + len;
        runs.push((at, len));
    }
    Ok(Head { size, runs })
}

/// Reads the runs' bytes into `memory` (as long as the head's size).
pub(crate) fn read_pages(head: &Head, input: &mut dyn Read, memory: &mut [u8]) -> Result<()> {
    for (at, len) in &head.runs {
        let range = *at as usize..(*at + *len) as usize;
        input
            .read_exact(&mut memory[range])
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => invalid("its interpreter state is cut short"),
                _ => Error::Io {
                    context: "cannot read the snapshot".into(),
                    source: e,
                },
            })?;
    }
    Ok(())
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
        let pages = write(&memory, &base, &mut image).unwrap();
        assert_eq!(
            pages,
            3 * PAGE as u64,
            "two neighbours and one page past the base"
        );
        let mut input = &image[..];
        let head = read_head(&mut input, 1 << 30).unwrap();
        assert_eq!(
            head.runs,
            vec![
                (PAGE as u64, 2 * PAGE as u64),
                (6 * PAGE as u64, PAGE as u64)
            ]
        );
        let mut restored = base.clone();
        restored.resize(head.size as usize, 0);
        read_pages(&head, &mut input, &mut restored).unwrap();
        assert_eq!(restored, memory);
    }

    #[test]
    fn a_memory_over_the_limit_or_a_malformed_run_is_refused() {
        let memory = vec![3u8; 2 * WASM_PAGE as usize];
        let mut image = Vec::new();
        write(&memory, &[], &mut image).unwrap();
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

//! WebAssembly binaries at the level of sections: reading where each lies and how
//! many items each index space holds, and writing a section back. Every other
//! room edits binaries through these few helpers.

use std::ops::Range;
use wasmparser::{BinaryReader, SectionLimited};

// Component section ids.
pub(super) const CORE_MODULE: u8 = 1;
pub(super) const CORE_INSTANCE: u8 = 2;
pub(super) const COMPONENT: u8 = 4;
pub(super) const INSTANCE: u8 = 5;
pub(super) const ALIAS: u8 = 6;
pub(super) const IMPORT: u8 = 10;
pub(super) const EXPORT: u8 = 11;

/// A section of a module or component: its id and where its content lies.
#[derive(Debug, Clone)]
pub(super) struct Section {
    pub(super) id: u8,
    pub(super) range: Range<usize>,
}

/// The sections of a module or component, after its 8-byte preamble.
pub(super) fn sections(bytes: &[u8]) -> Result<Vec<Section>, String> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err("it is not WebAssembly".into());
    }
    let mut reader = BinaryReader::new(bytes, 0);
    reader.read_bytes(8).map_err(text)?;
    let mut out = Vec::new();
    while !reader.eof() {
        let id = reader.read_u8().map_err(text)?;
        let len = reader.read_var_u32().map_err(text)? as usize;
        let start = reader.original_position();
        reader.read_bytes(len).map_err(text)?;
        out.push(Section {
            id,
            range: start..start + len,
        });
    }
    Ok(out)
}

pub(super) fn reader<'a, T: wasmparser::FromReader<'a>>(
    bytes: &'a [u8],
    range: &Range<usize>,
) -> Result<SectionLimited<'a, T>, String> {
    SectionLimited::new(BinaryReader::new(&bytes[range.clone()], range.start))
        .map_err(|e| e.to_string())
}

pub(super) fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// How many items each index space of a component holds after its last section.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counts {
    pub(super) core_funcs: u32,
    pub(super) core_memories: u32,
    pub(super) core_globals: u32,
    pub(super) core_instances: u32,
    pub(super) modules: u32,
    pub(super) types: u32,
    pub(super) funcs: u32,
}

pub(super) fn counts(component: &[u8]) -> Result<Counts, String> {
    let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
    let types = validator
        .validate_all(component)
        .map_err(|e| format!("it does not validate: {e}"))?;
    let types = types.as_ref();
    Ok(Counts {
        core_funcs: types.function_count(),
        core_memories: types.memory_count(),
        core_globals: types.global_count(),
        core_instances: types.core_instance_count(),
        modules: types.module_count(),
        types: types.component_type_count(),
        funcs: types.component_function_count(),
    })
}

pub(super) fn leb(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub(super) fn push_section(out: &mut Vec<u8>, id: u8, data: &[u8]) {
    out.push(id);
    leb(out, data.len() as u32);
    out.extend_from_slice(data);
}

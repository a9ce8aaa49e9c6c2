//! One core module of the interpreter: what it holds that a snapshot must carry,
//! that its code leaves its tables alone, and the module rewritten to export its
//! state under sandlot's names.

use super::binary::{leb, push_section, sections, text};
use wasmparser::{BinaryReader, Operator, Parser, Payload};

/// What a core module holds that a snapshot must carry.
#[derive(Debug, Default)]
pub(super) struct ModuleFacts {
    /// The type of the memory it defines, if any.
    pub(super) memory: Option<wasmparser::MemoryType>,
    /// The mutable globals it defines: index in its global space, and type.
    pub(super) globals: Vec<(u32, wasmparser::ValType)>,
}

/// Reads a core module: what it defines, and that its code leaves its tables alone.
pub(super) fn examine(module: &[u8]) -> Result<ModuleFacts, String> {
    let mut facts = ModuleFacts::default();
    let mut imported_globals = 0u32;
    let mut imported_memories = 0u32;
    for payload in Parser::new(0).parse_all(module) {
        match payload.map_err(text)? {
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    match import.map_err(text)?.ty {
                        wasmparser::TypeRef::Global(_) => imported_globals += 1,
                        wasmparser::TypeRef::Memory(_) => imported_memories += 1,
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(memories) => {
                for memory in memories {
                    let memory = memory.map_err(text)?;
                    if facts.memory.is_some() || imported_memories > 0 {
                        return Err("a module has more than one memory".into());
                    }
                    facts.memory = Some(memory);
                }
            }
            Payload::GlobalSection(globals) => {
                for (i, global) in globals.into_iter().enumerate() {
                    let global = global.map_err(text)?;
                    if global.ty.mutable {
                        facts
                            .globals
                            .push((imported_globals + i as u32, global.ty.content_type));
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut operators = body.get_operators_reader().map_err(text)?;
                while !operators.eof() {
                    match operators.read().map_err(text)? {
                        Operator::TableSet { .. }
                        | Operator::TableGrow { .. }
                        | Operator::TableFill { .. }
                        | Operator::TableCopy { .. }
                        | Operator::TableInit { .. }
                        | Operator::ElemDrop { .. } => {
                            return Err(
                                "its code can change a table, which a snapshot does not carry"
                                    .into(),
                            )
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(facts)
}

/// The name a module exports its memory under, and its `i`th mutable global.
pub(super) const MEMORY_EXPORT: &str = "sandlot-state-memory";
pub(super) fn global_export(i: usize) -> String {
    format!("sandlot-state-global-{i}")
}

/// `module` exporting its memory and mutable globals under sandlot's names.
pub(super) fn export_state(module: &[u8], facts: &ModuleFacts) -> Result<Vec<u8>, String> {
    let mut added: Vec<(String, u8, u32)> = Vec::new();
    if facts.memory.is_some() {
        added.push((MEMORY_EXPORT.into(), 0x02, 0));
    }
    for (i, (index, _)) in facts.globals.iter().enumerate() {
        added.push((global_export(i), 0x03, *index));
    }
    let mut encode_added = |count_before: u32, old: &[u8]| -> Vec<u8> {
        let mut content = Vec::new();
        leb(&mut content, count_before + added.len() as u32);
        content.extend_from_slice(old);
        for (name, kind, index) in added.drain(..) {
            leb(&mut content, name.len() as u32);
            content.extend_from_slice(name.as_bytes());
            content.push(kind);
            leb(&mut content, index);
        }
        content
    };
    // Where an export section goes when a module has none: before the first section
    // that must follow it.
    let rank = |id: u8| -> u8 {
        match id {
            1 => 1,
            2 => 2,
            3 => 3,
            4 => 4,
            5 => 5,
            13 => 6,
            6 => 7,
            7 => 8,
            8 => 9,
            9 => 10,
            12 => 11,
            10 => 12,
            11 => 13,
            _ => 0,
        }
    };
    let mut out = module[..8].to_vec();
    let mut written = false;
    for section in sections(module)? {
        let data = &module[section.range.clone()];
        if section.id == 7 {
            let mut r = BinaryReader::new(data, 0);
            let count = r.read_var_u32().map_err(text)?;
            let rest = &data[r.current_position()..];
            push_section(&mut out, 7, &encode_added(count, rest));
            written = true;
            continue;
        }
        if !written && section.id != 0 && rank(section.id) > rank(7) {
            push_section(&mut out, 7, &encode_added(0, &[]));
            written = true;
        }
        push_section(&mut out, section.id, data);
    }
    if !written {
        push_section(&mut out, 7, &encode_added(0, &[]));
    }
    Ok(out)
}

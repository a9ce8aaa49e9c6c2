//! State access: exports added to a runtime component so that the host can read and
//! write the interpreter's state (its linear memory and its mutable globals), which
//! the component model otherwise keeps from the host. sandlot adds them to the
//! runtimes it builds (the JavaScript one) when it installs them; with them, a
//! component's session is snapshotted as exactly as a module runtime's.
//!
//! What is added, to the component that instantiates the interpreter's core modules
//! (the top-level one, or in a composition the nested one whose instance exports
//! `sandlot:plugin/interpreter`):
//!
//! - each core module that defines a memory or a mutable global exports them;
//! - an accessor module, instantiated over those exports, whose functions are lifted
//!   and exported (and re-exported by the composition) as the functions [`NAMES`]
//!   lists.
//!
//! ```text
//! sandlot-state-size:       func() -> u32                  memory.size, in wasm pages
//! sandlot-state-grow:       func(pages: u32) -> s32        memory.grow
//! sandlot-state-read:       func(offset: u32, len: u32, scratch: u32) -> list<u8>
//! sandlot-state-place:      func(offset: u32)              where the next write lands
//! sandlot-state-write:      func(offset: u32, bytes: list<u8>)
//! sandlot-state-globals:    func() -> u32
//! sandlot-state-global-get: func(index: u32) -> u64
//! sandlot-state-global-set: func(index: u32, value: u64)
//! ```
//!
//! Neither direction costs a copy inside the guest. `read` returns the memory range
//! itself: the list's pointer and length are written at `scratch` for the call and
//! its post-return puts back the eight bytes that were there, so the host's view of
//! the list is the memory as it was. `write` lands where `place` said: the accessor's
//! `realloc` hands the canonical ABI that offset, so the bytes are copied straight
//! into place.
//!
//! A component whose state is more than its memory and globals is refused: one with
//! more than one memory, or whose code can change a table (`table.set`, `table.grow`
//! and the like), since tables are not captured.

use std::ops::Range;
use wasm_encoder::{
    Alias, CanonicalFunctionSection, CanonicalOption, CodeSection, Component,
    ComponentAliasSection, ComponentExportKind, ComponentExportSection, ComponentTypeSection,
    ComponentValType, ConstExpr, EntityType, ExportKind, ExportSection, Function, FunctionSection,
    GlobalSection, GlobalType, ImportSection, InstanceSection, MemArg, MemoryType, Module,
    ModuleArg, PrimitiveValType, RawSection, TypeSection, ValType,
};
use wasmparser::{
    BinaryReader, ComponentExternalKind, ComponentOuterAliasKind, ComponentTypeRef, Operator,
    Parser, Payload, SectionLimited,
};

/// The exports a component with state access has, in the order the accessor lifts
/// them.
pub(crate) const NAMES: State<&str> = State {
    size: "sandlot-state-size",
    grow: "sandlot-state-grow",
    read: "sandlot-state-read",
    place: "sandlot-state-place",
    write: "sandlot-state-write",
    globals: "sandlot-state-globals",
    global_get: "sandlot-state-global-get",
    global_set: "sandlot-state-global-set",
};

/// One of something per state-access function.
#[derive(Debug, Clone, Copy)]
pub(crate) struct State<T> {
    pub size: T,
    pub grow: T,
    pub read: T,
    pub place: T,
    pub write: T,
    pub globals: T,
    pub global_get: T,
    pub global_set: T,
}

impl<T: Copy> State<T> {
    fn all(&self) -> [T; 8] {
        [
            self.size,
            self.grow,
            self.read,
            self.place,
            self.write,
            self.globals,
            self.global_get,
            self.global_set,
        ]
    }
}

/// `component` with state access added, checked by the validator. `Err` says why it
/// cannot have it.
pub(crate) fn add(component: &[u8]) -> Result<Vec<u8>, String> {
    let top = sections(component)?;
    let out = if top.iter().any(|s| s.id == CORE_MODULE) {
        instrument(component)?
    } else {
        compose(component, &top)?
    };
    let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
    validator
        .validate_all(&out)
        .map_err(|e| format!("the component with state access does not validate: {e}"))?;
    Ok(out)
}

// Component section ids.
const CORE_MODULE: u8 = 1;
const CORE_INSTANCE: u8 = 2;
const COMPONENT: u8 = 4;
const INSTANCE: u8 = 5;
const ALIAS: u8 = 6;
const IMPORT: u8 = 10;
const EXPORT: u8 = 11;

/// A section of a module or component: its id and where its content lies.
#[derive(Debug, Clone)]
struct Section {
    id: u8,
    range: Range<usize>,
}

/// The sections of a module or component, after its 8-byte preamble.
fn sections(bytes: &[u8]) -> Result<Vec<Section>, String> {
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

fn reader<'a, T: wasmparser::FromReader<'a>>(
    bytes: &'a [u8],
    range: &Range<usize>,
) -> Result<SectionLimited<'a, T>, String> {
    SectionLimited::new(BinaryReader::new(&bytes[range.clone()], range.start))
        .map_err(|e| e.to_string())
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// How many items each index space of a component holds after its last section.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    core_funcs: u32,
    core_memories: u32,
    core_globals: u32,
    core_instances: u32,
    modules: u32,
    types: u32,
    funcs: u32,
}

fn counts(component: &[u8]) -> Result<Counts, String> {
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

/// A composition: the nested component whose instance exports the interpreter gets
/// state access, and the composition re-exports its functions.
fn compose(component: &[u8], top: &[Section]) -> Result<Vec<u8>, String> {
    // Index spaces of the composition, walked in order.
    let mut components: Vec<Option<usize>> = Vec::new(); // component index -> section
    let mut instances: Vec<Option<u32>> = Vec::new(); // instance index -> component it instantiates
    let mut interpreter: Option<u32> = None; // the instance whose export is the interpreter
    for (at, section) in top.iter().enumerate() {
        match section.id {
            COMPONENT => components.push(Some(at)),
            IMPORT => {
                for import in reader::<wasmparser::ComponentImport>(component, &section.range)? {
                    match import.map_err(text)?.ty {
                        ComponentTypeRef::Instance(_) => instances.push(None),
                        ComponentTypeRef::Component(_) => components.push(None),
                        _ => {}
                    }
                }
            }
            INSTANCE => {
                for instance in reader::<wasmparser::ComponentInstance>(component, &section.range)?
                {
                    instances.push(match instance.map_err(text)? {
                        wasmparser::ComponentInstance::Instantiate {
                            component_index, ..
                        } => Some(component_index),
                        wasmparser::ComponentInstance::FromExports(_) => None,
                    });
                }
            }
            ALIAS => {
                for alias in reader::<wasmparser::ComponentAlias>(component, &section.range)? {
                    match alias.map_err(text)? {
                        wasmparser::ComponentAlias::InstanceExport {
                            kind,
                            instance_index,
                            name,
                        } => {
                            if name.starts_with("sandlot:plugin/interpreter@") {
                                interpreter = Some(instance_index);
                            }
                            match kind {
                                ComponentExternalKind::Instance => instances.push(None),
                                ComponentExternalKind::Component => components.push(None),
                                _ => {}
                            }
                        }
                        wasmparser::ComponentAlias::Outer {
                            kind: ComponentOuterAliasKind::Component,
                            ..
                        } => components.push(None),
                        _ => {}
                    }
                }
            }
            EXPORT => {
                for export in reader::<wasmparser::ComponentExport>(component, &section.range)? {
                    match export.map_err(text)?.kind {
                        ComponentExternalKind::Instance => instances.push(None),
                        ComponentExternalKind::Component => components.push(None),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let interpreter =
        interpreter.ok_or("it exports no sandlot:plugin/interpreter from an instance")?;
    let nested = instances
        .get(interpreter as usize)
        .copied()
        .flatten()
        .and_then(|c| components.get(c as usize).copied().flatten())
        .ok_or("the instance exporting the interpreter is not of a component it defines")?;
    let inner = &top[nested];
    let instrumented = instrument(&component[inner.range.clone()])?;
    let funcs = counts(component)?.funcs;

    let mut out = Component::new();
    for (at, section) in top.iter().enumerate() {
        let data = match at == nested {
            true => &instrumented[..],
            false => &component[section.range.clone()],
        };
        out.section(&RawSection {
            id: section.id,
            data,
        });
    }
    let mut aliases = ComponentAliasSection::new();
    let mut exports = ComponentExportSection::new();
    for (i, name) in NAMES.all().into_iter().enumerate() {
        aliases.alias(Alias::InstanceExport {
            instance: interpreter,
            kind: ComponentExportKind::Func,
            name,
        });
        exports.export(name, ComponentExportKind::Func, funcs + i as u32, None);
    }
    out.section(&aliases);
    out.section(&exports);
    Ok(out.finish())
}

/// What a core module holds that a snapshot must carry.
#[derive(Debug, Default)]
struct ModuleFacts {
    /// The type of the memory it defines, if any.
    memory: Option<wasmparser::MemoryType>,
    /// The mutable globals it defines: index in its global space, and type.
    globals: Vec<(u32, wasmparser::ValType)>,
}

/// Reads a core module: what it defines, and that its code leaves its tables alone.
fn examine(module: &[u8]) -> Result<ModuleFacts, String> {
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
const MEMORY_EXPORT: &str = "sandlot-state-memory";
fn global_export(i: usize) -> String {
    format!("sandlot-state-global-{i}")
}

/// `module` exporting its memory and mutable globals under sandlot's names.
fn export_state(module: &[u8], facts: &ModuleFacts) -> Result<Vec<u8>, String> {
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

fn leb(out: &mut Vec<u8>, mut value: u32) {
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

fn push_section(out: &mut Vec<u8>, id: u8, data: &[u8]) {
    out.push(id);
    leb(out, data.len() as u32);
    out.extend_from_slice(data);
}

/// A component whose own core modules hold the interpreter, with state access added
/// (whole, preamble included: a composition's section holds it so).
fn instrument(component: &[u8]) -> Result<Vec<u8>, String> {
    let top = sections(component)?;
    let mut modules: Vec<usize> = Vec::new(); // module index -> section
    let mut instantiated: Vec<Option<u32>> = Vec::new(); // module index -> core instance
    let mut core_instances = 0u32;
    for (at, section) in top.iter().enumerate() {
        match section.id {
            CORE_MODULE => {
                modules.push(at);
                instantiated.push(None);
            }
            CORE_INSTANCE => {
                for instance in reader::<wasmparser::Instance>(component, &section.range)? {
                    if let wasmparser::Instance::Instantiate { module_index, .. } =
                        instance.map_err(text)?
                    {
                        let slot = instantiated
                            .get_mut(module_index as usize)
                            .ok_or("it instantiates a module it does not define")?;
                        if slot.is_some() {
                            return Err("it instantiates a module twice".into());
                        }
                        *slot = Some(core_instances);
                    }
                    core_instances += 1;
                }
            }
            IMPORT => {
                for import in reader::<wasmparser::ComponentImport>(component, &section.range)? {
                    if matches!(import.map_err(text)?.ty, ComponentTypeRef::Module(_)) {
                        return Err("it imports a core module".into());
                    }
                }
            }
            ALIAS => {
                for alias in reader::<wasmparser::ComponentAlias>(component, &section.range)? {
                    if let wasmparser::ComponentAlias::Outer {
                        kind: ComponentOuterAliasKind::CoreModule,
                        ..
                    } = alias.map_err(text)?
                    {
                        return Err("it aliases a core module from outside".into());
                    }
                }
            }
            // A nested component with modules would hold state this one cannot reach.
            COMPONENT
                if sections(&component[section.range.clone()])?
                    .iter()
                    .any(|s| s.id == CORE_MODULE) =>
            {
                return Err("it nests a component with core modules of its own".into());
            }
            _ => {}
        }
    }
    let counts = counts(component)?;

    // Each module with state exports it; the accessor imports it from there.
    let mut rewritten: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut memory: Option<(u32, wasmparser::MemoryType)> = None; // core instance, type
    let mut globals: Vec<(u32, String, wasmparser::ValType)> = Vec::new(); // instance, export, type
    for (index, at) in modules.iter().enumerate() {
        let bytes = &component[top[*at].range.clone()];
        let facts = examine(bytes)?;
        if facts.memory.is_none() && facts.globals.is_empty() {
            continue;
        }
        let Some(instance) = instantiated[index] else {
            continue;
        };
        if let Some(ty) = facts.memory {
            if memory.is_some() {
                return Err("its modules define more than one memory".into());
            }
            if ty.memory64 || ty.shared || ty.page_size_log2.is_some() {
                return Err("its memory is 64-bit, shared or of custom pages".into());
            }
            memory = Some((instance, ty));
        }
        for (i, (_, ty)) in facts.globals.iter().enumerate() {
            if !matches!(ty, wasmparser::ValType::I32 | wasmparser::ValType::I64) {
                return Err(format!("it has a mutable global of type {ty:?}"));
            }
            globals.push((instance, global_export(i), *ty));
        }
        rewritten.push((*at, export_state(bytes, &facts)?));
    }
    let (memory_instance, _) = memory.ok_or("its modules define no memory")?;

    let mut out = Component::new();
    for (at, section) in top.iter().enumerate() {
        let data = match rewritten.iter().find(|(r, _)| *r == at) {
            Some((_, bytes)) => &bytes[..],
            None => &component[section.range.clone()],
        };
        out.section(&RawSection {
            id: section.id,
            data,
        });
    }

    // The state, aliased from the instances that hold it.
    let memory_index = counts.core_memories;
    let mut aliases = ComponentAliasSection::new();
    aliases.alias(Alias::CoreInstanceExport {
        instance: memory_instance,
        kind: ExportKind::Memory,
        name: MEMORY_EXPORT,
    });
    for (instance, name, _) in &globals {
        aliases.alias(Alias::CoreInstanceExport {
            instance: *instance,
            kind: ExportKind::Global,
            name,
        });
    }
    out.section(&aliases);

    let global_types: Vec<ValType> = globals
        .iter()
        .map(|(_, _, ty)| match ty {
            wasmparser::ValType::I64 => ValType::I64,
            _ => ValType::I32,
        })
        .collect();
    out.section(&wasm_encoder::ModuleSection(&accessor(&global_types)));

    // Its imports, gathered into one instance, then the accessor over them.
    let global_names: Vec<String> = (0..globals.len()).map(|i| format!("global-{i}")).collect();
    let mut items: Vec<(&str, ExportKind, u32)> =
        vec![("memory", ExportKind::Memory, memory_index)];
    for (i, name) in global_names.iter().enumerate() {
        items.push((name, ExportKind::Global, counts.core_globals + i as u32));
    }
    let mut instances = InstanceSection::new();
    instances.export_items(items);
    instances.instantiate(
        counts.modules,
        [("state", ModuleArg::Instance(counts.core_instances))],
    );
    out.section(&instances);
    let accessor_instance = counts.core_instances + 1;

    let mut funcs = ComponentAliasSection::new();
    for name in ACCESSOR_FUNCS {
        funcs.alias(Alias::CoreInstanceExport {
            instance: accessor_instance,
            kind: ExportKind::Func,
            name,
        });
    }
    out.section(&funcs);
    let core = |name: &str| -> u32 {
        counts.core_funcs + ACCESSOR_FUNCS.iter().position(|n| *n == name).unwrap_or(0) as u32
    };

    // Their types, lifted and exported.
    let u32_ = ComponentValType::Primitive(PrimitiveValType::U32);
    let u64_ = ComponentValType::Primitive(PrimitiveValType::U64);
    let s32_ = ComponentValType::Primitive(PrimitiveValType::S32);
    let mut types = ComponentTypeSection::new();
    let bytes_type = counts.types;
    types.defined_type().list(PrimitiveValType::U8);
    let bytes_ = ComponentValType::Type(bytes_type);
    // In the order of `NAMES`: the accessor's function each lifts, and its type.
    type Signature<'a> = (
        &'a str,
        Vec<(&'a str, ComponentValType)>,
        Option<ComponentValType>,
    );
    let lifted: [Signature; 8] = [
        ("size", vec![], Some(u32_)),
        ("grow", vec![("pages", u32_)], Some(s32_)),
        (
            "read",
            vec![("offset", u32_), ("len", u32_), ("scratch", u32_)],
            Some(bytes_),
        ),
        ("place", vec![("offset", u32_)], None),
        ("write", vec![("offset", u32_), ("bytes", bytes_)], None),
        ("globals", vec![], Some(u32_)),
        ("global_get", vec![("index", u32_)], Some(u64_)),
        ("global_set", vec![("index", u32_), ("value", u64_)], None),
    ];
    for (_, params, result) in &lifted {
        types
            .function()
            .params(params.iter().map(|(n, t)| (*n, *t)))
            .result(*result);
    }
    out.section(&types);

    let mut canon = CanonicalFunctionSection::new();
    for (i, (name, _, _)) in lifted.iter().enumerate() {
        let ty = bytes_type + 1 + i as u32;
        let options: Vec<CanonicalOption> = match *name {
            "read" => vec![
                CanonicalOption::Memory(memory_index),
                CanonicalOption::PostReturn(core("read_post")),
            ],
            "write" => vec![
                CanonicalOption::Memory(memory_index),
                CanonicalOption::Realloc(core("realloc")),
            ],
            _ => vec![],
        };
        canon.lift(core(name), ty, options);
    }
    out.section(&canon);
    let mut exports = ComponentExportSection::new();
    for (i, name) in NAMES.all().into_iter().enumerate() {
        exports.export(
            name,
            ComponentExportKind::Func,
            counts.funcs + i as u32,
            None,
        );
    }
    out.section(&exports);
    Ok(out.finish())
}

/// The accessor module's functions, in the order it defines them.
const ACCESSOR_FUNCS: [&str; 10] = [
    "size",
    "grow",
    "read",
    "read_post",
    "place",
    "realloc",
    "write",
    "globals",
    "global_get",
    "global_set",
];

fn body() -> Function {
    Function::new(Vec::<(u32, ValType)>::new())
}

/// A function that does `each` for the global its first parameter names, and traps
/// for any other index.
fn dispatch(
    globals: &[ValType],
    each: impl Fn(&mut wasm_encoder::InstructionSink<'_>, u32, ValType),
) -> Function {
    let mut f = body();
    {
        let mut sink = f.instructions();
        for (i, ty) in globals.iter().enumerate() {
            sink.local_get(0)
                .i32_const(i as i32)
                .i32_eq()
                .if_(wasm_encoder::BlockType::Empty);
            each(&mut sink, i as u32, *ty);
            sink.return_().end();
        }
        sink.unreachable().end();
    }
    f
}

/// The accessor: imports `state.memory` and `state.global-N`, and reads and writes
/// them for the lifted functions.
fn accessor(globals: &[ValType]) -> Module {
    use ValType::{I32, I64};
    let mut types = TypeSection::new();
    types.ty().function([], [I32]); // 0: size, globals
    types.ty().function([I32], [I32]); // 1: grow
    types.ty().function([I32, I32, I32], [I32]); // 2: read
    types.ty().function([I32], []); // 3: read_post, place
    types.ty().function([I32, I32, I32, I32], [I32]); // 4: realloc
    types.ty().function([I32, I32, I32], []); // 5: write
    types.ty().function([I32], [I64]); // 6: global_get
    types.ty().function([I32, I64], []); // 7: global_set

    let mut imports = ImportSection::new();
    imports.import(
        "state",
        "memory",
        EntityType::Memory(MemoryType {
            minimum: 0,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        }),
    );
    for (i, ty) in globals.iter().enumerate() {
        imports.import(
            "state",
            &format!("global-{i}"),
            EntityType::Global(GlobalType {
                val_type: *ty,
                mutable: true,
                shared: false,
            }),
        );
    }
    // Its own: where the next write lands; where `read` put its answer, and what was
    // there before.
    let n = globals.len() as u32;
    let (place_at, answer_at, saved) = (n, n + 1, n + 2);
    let mut own = GlobalSection::new();
    let mutable = |val_type| GlobalType {
        val_type,
        mutable: true,
        shared: false,
    };
    own.global(mutable(I32), &ConstExpr::i32_const(0));
    own.global(mutable(I32), &ConstExpr::i32_const(0));
    own.global(mutable(I64), &ConstExpr::i64_const(0));

    let mut functions = FunctionSection::new();
    for ty in [0, 1, 2, 3, 3, 4, 5, 0, 6, 7] {
        functions.function(ty);
    }
    let mut exports = ExportSection::new();
    for (i, name) in ACCESSOR_FUNCS.iter().enumerate() {
        exports.export(name, ExportKind::Func, i as u32);
    }

    let word = |offset| MemArg {
        offset,
        align: 2,
        memory_index: 0,
    };
    let double = MemArg {
        offset: 0,
        align: 3,
        memory_index: 0,
    };
    let mut code = CodeSection::new();
    // size
    let mut f = body();
    f.instructions().memory_size(0).end();
    code.function(&f);
    // grow
    let mut f = body();
    f.instructions().local_get(0).memory_grow(0).end();
    code.function(&f);
    // read(offset, len, scratch): the pair at `scratch`, what was there kept.
    let mut f = body();
    f.instructions()
        .local_get(2)
        .global_set(answer_at)
        .local_get(2)
        .i64_load(double)
        .global_set(saved)
        .local_get(2)
        .local_get(0)
        .i32_store(word(0))
        .local_get(2)
        .local_get(1)
        .i32_store(word(4))
        .local_get(2)
        .end();
    code.function(&f);
    // read_post(answer): puts the eight bytes back.
    let mut f = body();
    f.instructions()
        .global_get(answer_at)
        .global_get(saved)
        .i64_store(double)
        .end();
    code.function(&f);
    // place(offset)
    let mut f = body();
    f.instructions().local_get(0).global_set(place_at).end();
    code.function(&f);
    // realloc(old, old_len, align, len): the place.
    let mut f = body();
    f.instructions().global_get(place_at).end();
    code.function(&f);
    // write(offset, ptr, len): the bytes are already there; a write that landed
    // elsewhere traps.
    let mut f = body();
    f.instructions()
        .local_get(0)
        .local_get(1)
        .i32_ne()
        .if_(wasm_encoder::BlockType::Empty)
        .unreachable()
        .end()
        .end();
    code.function(&f);
    // globals
    let mut f = body();
    f.instructions().i32_const(n as i32).end();
    code.function(&f);
    // global_get(index)
    code.function(&dispatch(globals, |sink, i, ty| {
        sink.global_get(i);
        if ty == I32 {
            sink.i64_extend_i32_u();
        }
    }));
    // global_set(index, value)
    code.function(&dispatch(globals, |sink, i, ty| {
        sink.local_get(1);
        if ty == I32 {
            sink.i32_wrap_i64();
        }
        sink.global_set(i);
    }));

    let mut module = Module::new();
    module
        .section(&types)
        .section(&imports)
        .section(&functions)
        .section(&own)
        .section(&exports)
        .section(&code);
    module
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{ModuleSection, TableSection, TableType};
    use wasmtime::component::{Component as Compiled, Linker, WasmList};
    use wasmtime::{Engine, Store};

    /// A component of one module per entry of `modules`, each instantiated: a module
    /// with a memory of one page and globals `i32 7` and `i64 9` (mutable) and `i32 1`
    /// (not); with `table_code`, a function that grows a table too.
    fn sample(modules: usize, table_code: bool) -> Vec<u8> {
        let mut module = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], []);
        module.section(&types);
        let mut functions = FunctionSection::new();
        if table_code {
            functions.function(0);
            module.section(&functions);
            let mut tables = TableSection::new();
            tables.table(TableType {
                element_type: wasm_encoder::RefType::FUNCREF,
                minimum: 1,
                maximum: None,
                table64: false,
                shared: false,
            });
            module.section(&tables);
        }
        let mut memories = wasm_encoder::MemorySection::new();
        memories.memory(MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        module.section(&memories);
        let mut globals = GlobalSection::new();
        let ty = |val_type, mutable| GlobalType {
            val_type,
            mutable,
            shared: false,
        };
        globals.global(ty(ValType::I32, true), &ConstExpr::i32_const(7));
        globals.global(ty(ValType::I64, true), &ConstExpr::i64_const(9));
        globals.global(ty(ValType::I32, false), &ConstExpr::i32_const(1));
        module.section(&globals);
        if table_code {
            let mut code = CodeSection::new();
            let mut f = body();
            f.instructions()
                .ref_null(wasm_encoder::HeapType::FUNC)
                .i32_const(1)
                .table_grow(0)
                .drop()
                .end();
            code.function(&f);
            module.section(&code);
        }
        let mut component = Component::new();
        for _ in 0..modules {
            component.section(&ModuleSection(&module));
        }
        let mut instances = InstanceSection::new();
        for index in 0..modules {
            instances.instantiate(index as u32, Vec::<(&str, ModuleArg)>::new());
        }
        component.section(&instances);
        component.finish()
    }

    #[test]
    fn memory_and_globals_round_trip_through_the_added_exports() {
        let bytes = add(&sample(1, false)).unwrap();
        let engine = Engine::default();
        let compiled = Compiled::new(&engine, &bytes).unwrap();
        let mut store = Store::new(&engine, ());
        let instance = Linker::new(&engine)
            .instantiate(&mut store, &compiled)
            .unwrap();
        macro_rules! func {
            ($name:expr, $params:ty, $results:ty) => {
                instance
                    .get_typed_func::<$params, $results>(&mut store, $name)
                    .unwrap()
            };
        }
        let size = func!(NAMES.size, (), (u32,));
        assert_eq!(size.call(&mut store, ()).unwrap(), (1,));
        func!(NAMES.place, (u32,), ())
            .call(&mut store, (100,))
            .unwrap();
        func!(NAMES.write, (u32, &[u8]), ())
            .call(&mut store, (100, &[1, 2, 3][..]))
            .unwrap();
        let (memory,) = func!(NAMES.read, (u32, u32, u32), (WasmList<u8>,))
            .call(&mut store, (0, 65536, 0))
            .unwrap();
        let memory = memory.as_le_slice(&store);
        assert_eq!(memory.len(), 65536);
        assert_eq!(&memory[100..103], [1, 2, 3]);
        // The answer's scratch space is put back as it was.
        assert_eq!(&memory[..8], [0; 8]);
        let grow = func!(NAMES.grow, (u32,), (i32,));
        assert_eq!(grow.call(&mut store, (2,)).unwrap(), (1,));
        assert_eq!(size.call(&mut store, ()).unwrap(), (3,));
        let count = func!(NAMES.globals, (), (u32,));
        assert_eq!(
            count.call(&mut store, ()).unwrap(),
            (2,),
            "the mutable ones"
        );
        let get = func!(NAMES.global_get, (u32,), (u64,));
        let set = func!(NAMES.global_set, (u32, u64), ());
        assert_eq!(get.call(&mut store, (0,)).unwrap(), (7,));
        assert_eq!(get.call(&mut store, (1,)).unwrap(), (9,));
        set.call(&mut store, (0, 42)).unwrap();
        set.call(&mut store, (1, u64::MAX)).unwrap();
        assert_eq!(get.call(&mut store, (0,)).unwrap(), (42,));
        assert_eq!(get.call(&mut store, (1,)).unwrap(), (u64::MAX,));
        // A global past the last traps rather than touch anything.
        assert!(get.call(&mut store, (2,)).is_err());
    }

    #[test]
    fn state_it_could_not_carry_is_refused() {
        let two = add(&sample(2, false)).unwrap_err();
        assert!(two.contains("more than one memory"), "{two}");
        let table = add(&sample(1, true)).unwrap_err();
        assert!(table.contains("change a table"), "{table}");
        assert!(add(b"not wasm").unwrap_err().contains("not WebAssembly"));
    }
}

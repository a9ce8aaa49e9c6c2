//! The component that instantiates the interpreter's core modules, given state
//! access: its modules export their state, and the accessor is instantiated over it,
//! lifted and exported. The index arithmetic of that one rewrite stays together.

use super::accessor::{accessor, ACCESSOR_FUNCS};
use super::binary::{
    counts, reader, sections, text, ALIAS, COMPONENT, CORE_INSTANCE, CORE_MODULE, IMPORT,
};
use super::core_module::{examine, export_state, global_export, MEMORY_EXPORT};
use super::names::NAMES;
use wasm_encoder::{
    Alias, CanonicalFunctionSection, CanonicalOption, Component, ComponentAliasSection,
    ComponentExportKind, ComponentExportSection, ComponentTypeSection, ComponentValType,
    ExportKind, InstanceSection, ModuleArg, PrimitiveValType, RawSection, ValType,
};
use wasmparser::{ComponentOuterAliasKind, ComponentTypeRef};

/// A component whose own core modules hold the interpreter, with state access added
/// (whole, preamble included: a composition's section holds it so).
pub(super) fn instrument(component: &[u8]) -> Result<Vec<u8>, String> {
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

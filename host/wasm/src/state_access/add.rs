//! The entry point: which component gets state access (the top-level one, or the
//! nested one of a composition that exports the interpreter), and the composition
//! re-exporting what was added.

use super::binary::{
    counts, reader, sections, text, Section, ALIAS, COMPONENT, CORE_MODULE, EXPORT, IMPORT,
    INSTANCE,
};
use super::instrument::instrument;
use super::names::NAMES;
use wasm_encoder::{
    Alias, Component, ComponentAliasSection, ComponentExportKind, ComponentExportSection,
    RawSection,
};
use wasmparser::{ComponentExternalKind, ComponentOuterAliasKind, ComponentTypeRef};

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

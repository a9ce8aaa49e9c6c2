//! Lookups by name inside a call: `getattr(obj, name)`, `__import__(name)` and
//! `importlib.import_module(name)`. A constant name is followed; a computed one is a
//! finding of its own, since it is how code hides a name from the analysis.

use super::rules::{normalize, DYNAMIC_ATTRIBUTE, DYNAMIC_IMPORT, SENSITIVE_ROOTS};
use super::tokens::{Kind, KEYWORDS};
use super::walk::Analysis;
use alloc::string::String;

impl Analysis<'_, '_> {
    /// `getattr(obj, name ...)` from its first argument; the call's result when the
    /// name is a constant.
    pub(super) fn getattr(&mut self, i: usize, line: u32) -> (Option<String>, usize) {
        let (object, mut next) = self.target(i);
        if self.kind(next) != Kind::Op(",") {
            return (None, next);
        }
        let (name, after) = self.constant(next + 1);
        next = after;
        let reached = match (object, name) {
            (Some(object), Some(name)) => {
                let mut full = object;
                full.push('.');
                full.push_str(&name);
                Some(full)
            }
            (Some(object), None) => {
                let root = normalize(&object).split('.').next().unwrap_or_default();
                let imported = self
                    .bindings
                    .contains_key(object.split('.').next().unwrap_or(""));
                if SENSITIVE_ROOTS.contains(&root) || object.starts_with("__builtins__") || imported
                {
                    self.hit(line, DYNAMIC_ATTRIBUTE);
                }
                None
            }
            _ => None,
        };
        (reached, self.close_call(next))
    }

    /// `__import__(name)` / `importlib.import_module(name)` from its first argument.
    pub(super) fn import_call(&mut self, i: usize, line: u32) -> (Option<String>, usize) {
        let (name, next) = self.constant(i);
        match &name {
            Some(module) => self.reach(module, line),
            None => self.hit(line, DYNAMIC_IMPORT),
        }
        (name, self.close_call(next))
    }

    /// A constant string at `i`: literals, possibly joined by `+` or juxtaposed,
    /// without fields. Anything else is read as code (a reference is still
    /// recorded) and gives `None`.
    pub(super) fn constant(&mut self, mut i: usize) -> (Option<String>, usize) {
        let mut value = Some(String::new());
        let mut parts = 0;
        let mut depth = 0usize;
        loop {
            match self.kind(i) {
                Kind::Op(")") | Kind::Op(",") | Kind::Op("]") | Kind::Op("}") | Kind::End
                    if depth == 0 =>
                {
                    return (value.filter(|_| parts > 0), i);
                }
                Kind::Str(index) => {
                    let literal = &self.scan.literals[index];
                    if literal.interpolated || depth > 0 {
                        value = None;
                    }
                    if let Some(v) = value.as_mut() {
                        v.push_str(&literal.text);
                    }
                    parts += 1;
                    i += 1;
                }
                Kind::Op("+") if depth == 0 => i += 1,
                Kind::Name(n) if !KEYWORDS.contains(&n) => {
                    i = self.reference(i);
                    value = None;
                    parts += 1;
                }
                Kind::End => return (None, i),
                kind => {
                    match kind {
                        Kind::Op("(") | Kind::Op("[") | Kind::Op("{") => depth += 1,
                        Kind::Op(")") | Kind::Op("]") | Kind::Op("}") => depth -= 1,
                        _ => {}
                    }
                    value = None;
                    parts += 1;
                    i += 1;
                }
            }
        }
    }

    /// Past the `)` that closes a call whose arguments continue at `i`, reading the
    /// rest of the arguments as code.
    fn close_call(&mut self, mut i: usize) -> usize {
        let mut depth = 0usize;
        while i < self.tokens.len() {
            match self.kind(i) {
                Kind::Op(")") if depth == 0 => return i + 1,
                Kind::Op("(") | Kind::Op("[") | Kind::Op("{") => depth += 1,
                Kind::Op(")") | Kind::Op("]") | Kind::Op("}") => depth -= 1,
                Kind::End => return i,
                Kind::Name(n) if !KEYWORDS.contains(&n) => {
                    i = self.reference(i);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        i
    }
}

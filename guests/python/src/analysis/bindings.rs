//! What a name stands for: definitions, parameters and loop targets bind local values
//! the analysis does not follow, and a name bound nowhere may come from a star import.
//! Every reference resolves through here.

use super::rules::{matches, normalize, RULES};
use super::tokens::{Kind, KEYWORDS};
use super::walk::{Analysis, Binding};
use alloc::string::{String, ToString};
use sandlot_handler_kit::restrict;

impl Analysis<'_, '_> {
    /// `def name(params)` / `class name(bases)`: the name and the parameters are
    /// local values.
    pub(super) fn definition(&mut self, i: usize) -> usize {
        if let Kind::Name(name) = self.kind(i) {
            self.bindings.insert(name, Binding::Opaque);
        }
        if self.kind(i + 1) == Kind::Op("(") && self.kind(i.saturating_sub(1)) == Kind::Name("def")
        {
            return self.parameters(i + 2, ")");
        }
        i + 1
    }

    /// Parameter names up to `close` at depth zero; defaults are read as code.
    pub(super) fn parameters(&mut self, mut i: usize, close: &str) -> usize {
        let mut expect_name = true;
        let mut depth = 0usize;
        while i < self.tokens.len() {
            match self.kind(i) {
                Kind::Op(op) if op == close && depth == 0 => return i + 1,
                Kind::Op("(") | Kind::Op("[") | Kind::Op("{") => depth += 1,
                Kind::Op(")") | Kind::Op("]") | Kind::Op("}") => depth = depth.saturating_sub(1),
                Kind::Op(",") if depth == 0 => expect_name = true,
                Kind::Op("*") | Kind::Op("**") | Kind::Op("/") => {}
                Kind::Op("=") | Kind::Op(":") if depth == 0 => {
                    expect_name = false;
                    // A default or an annotation is code: read it.
                    i += 1;
                    while i < self.tokens.len()
                        && !matches!(self.kind(i), Kind::Op(",") | Kind::End)
                        && self.kind(i) != Kind::Op(close)
                    {
                        i = match self.kind(i) {
                            Kind::Name(n) if !KEYWORDS.contains(&n) => self.reference(i),
                            _ => i + 1,
                        };
                    }
                    continue;
                }
                Kind::Name(name) if expect_name => {
                    self.bindings.insert(name, Binding::Opaque);
                    expect_name = false;
                }
                Kind::End => return i,
                _ => {}
            }
            i += 1;
        }
        i
    }

    /// Names after `for`, `as`, `global`: local values.
    pub(super) fn bind_targets(&mut self, mut i: usize) -> usize {
        while let Kind::Name(name) | Kind::Op(name) = self.kind(i) {
            if matches!(name, "in" | ":" | "=") {
                break;
            }
            if name.starts_with(|c: char| c == '_' || c.is_alphabetic()) {
                self.bindings.insert(name, Binding::Opaque);
            }
            i += 1;
        }
        i
    }

    /// What the name at `i` refers to, through the bindings: `Some(full name)` for a
    /// module, a function or a builtin, `None` for a local value.
    pub(super) fn resolve(&self, name: &str) -> Option<String> {
        match self.bindings.get(name) {
            Some(Binding::Known(full)) => Some(full.clone()),
            Some(Binding::Opaque) => None,
            None => Some(self.star_member(name).unwrap_or_else(|| name.to_string())),
        }
    }

    /// What an unbound `name` is when a star import may have bound it: `M.name` for
    /// the first star-imported module `M` under which that reaches a rule or a
    /// restriction.
    fn star_member(&self, name: &str) -> Option<String> {
        self.star_modules.iter().find_map(|module| {
            let mut full = module.clone();
            full.push('.');
            full.push_str(name);
            let matched = RULES
                .iter()
                .any(|rule| rule.names.iter().any(|pattern| matches(pattern, &full)))
                || self
                    .restricted
                    .iter()
                    .any(|r| restrict::beneath(normalize(&r.name), &full));
            matched.then_some(full)
        })
    }
}

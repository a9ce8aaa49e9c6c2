//! `import` and `from ... import` statements: where names are bound to modules and
//! their members, and where a module is reached by importing it.

use super::tokens::Kind;
use super::walk::{Analysis, Binding};
use alloc::string::{String, ToString};

impl Analysis<'_, '_> {
    /// A dotted name at `i`: `a.b.c`.
    fn dotted(&self, mut i: usize) -> (String, usize) {
        let mut name = String::new();
        while let Kind::Name(part) = self.kind(i) {
            if !name.is_empty() {
                name.push('.');
            }
            name.push_str(part);
            i += 1;
            if self.kind(i) != Kind::Op(".") {
                break;
            }
            i += 1;
        }
        (name, i)
    }

    /// `import a.b [as c], d`
    pub(super) fn import(&mut self, mut i: usize) -> usize {
        loop {
            let line = self.line(i);
            let (module, next) = self.dotted(i);
            let Kind::Name(root) = self.kind(i) else {
                return i;
            };
            i = next;
            self.reach(&module, line);
            if self.kind(i) == Kind::Name("as") {
                if let Kind::Name(alias) = self.kind(i + 1) {
                    self.bindings.insert(alias, Binding::Known(module.clone()));
                }
                i += 2;
            } else {
                // `import a.b` binds `a`.
                self.bindings.insert(root, Binding::Known(root.to_string()));
            }
            if self.kind(i) != Kind::Op(",") {
                return i;
            }
            i += 1;
        }
    }

    /// `from a.b import c [as d], (e, f)` and `from a import *`
    pub(super) fn from_import(&mut self, i: usize) -> usize {
        let line = self.line(i);
        let mut i = i;
        let mut relative = false;
        while self.kind(i) == Kind::Op(".") {
            relative = true;
            i += 1;
        }
        let (module, mut i) = self.dotted(i);
        if self.kind(i) != Kind::Name("import") {
            return i;
        }
        i += 1;
        if !relative && !module.is_empty() {
            self.reach(&module, line);
        }
        loop {
            match self.kind(i) {
                Kind::Op("(") | Kind::Op(")") | Kind::Op(",") => i += 1,
                Kind::Op("*") => {
                    if !relative && !module.is_empty() && !self.star_modules.contains(&module) {
                        self.star_modules.push(module.clone());
                    }
                    i += 1
                }
                Kind::Name(name) => {
                    let full = if relative || module.is_empty() {
                        None
                    } else {
                        let mut full = module.clone();
                        full.push('.');
                        full.push_str(name);
                        Some(full)
                    };
                    let mut bound = name;
                    i += 1;
                    if self.kind(i) == Kind::Name("as") {
                        if let Kind::Name(alias) = self.kind(i + 1) {
                            bound = alias;
                        }
                        i += 2;
                    }
                    match full {
                        Some(full) => {
                            self.reach(&full, line);
                            self.bindings.insert(bound, Binding::Known(full));
                        }
                        None => {
                            self.bindings.insert(bound, Binding::Opaque);
                        }
                    }
                }
                _ => return i,
            }
        }
    }
}

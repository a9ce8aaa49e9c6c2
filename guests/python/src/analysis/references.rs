//! A use of a name: the `.attr` chain it follows to a full dotted name, and an
//! assignment that binds a name to what it reaches. Most findings are made here.

use super::rules::{normalize, DYNAMIC_ATTRIBUTE, SUBPROCESS_SHELL};
use super::tokens::Kind;
use super::walk::{Analysis, Binding};
use alloc::string::{String, ToString};

impl<'a> Analysis<'a, '_> {
    /// A reference starting at the name at `i`: follows `.attr` chains, calls to
    /// `getattr`, `__import__` and `importlib.import_module`, and records what it
    /// reaches. Returns the index after it.
    pub(super) fn reference(&mut self, i: usize) -> usize {
        let line = self.line(i);
        // `x.name` where x is not a plain name (a call result, a subscript) is not
        // followed; nor is a keyword argument's name.
        if self.kind(i.wrapping_sub(1)) == Kind::Op(".")
            || (self.kind(i + 1) == Kind::Op("=") && self.inside_call(i))
        {
            return i + 1;
        }
        let assigned = self.assignment_target(i);
        let (target, mut next) = self.target(i);
        // `name = <reference>` binds name to what the reference reaches.
        if let Some(name) = assigned {
            let (value, after) = self.target(next + 1);
            if let Some(value) = value.filter(|_| after > next + 1 && self.expression_ends(after)) {
                self.reach(&value, line);
                self.bindings.insert(name, Binding::Known(value));
                return after;
            }
            self.bindings.insert(name, Binding::Opaque);
            // The value is read again as code by the caller.
            return next + 1;
        }
        if let Some(target) = target {
            if (target == "subprocess" || target.starts_with("subprocess."))
                && self.kind(next) == Kind::Op("(")
                && self.runs_a_shell(next)
            {
                self.hit(line, SUBPROCESS_SHELL);
            }
            self.reach(&target, line);
        }
        if next == i {
            next = i + 1;
        }
        next
    }

    /// The name at `i` when it is the whole left side of a plain assignment.
    fn assignment_target(&self, i: usize) -> Option<&'a str> {
        let statement_start = i == 0 || self.kind(i - 1) == Kind::End;
        match (self.kind(i), self.kind(i + 1)) {
            (Kind::Name(name), Kind::Op("=")) if statement_start => Some(name),
            (Kind::Name(name), Kind::Op(":=")) => Some(name),
            _ => None,
        }
    }

    /// Whether the token at `i` is the end of an expression that started just before.
    fn expression_ends(&self, i: usize) -> bool {
        matches!(self.kind(i), Kind::End | Kind::Op(")") | Kind::Op(","))
    }

    /// Whether the token at `i` sits inside parentheses (a call's arguments).
    fn inside_call(&self, i: usize) -> bool {
        let mut depth = 0i32;
        for j in (0..i).rev() {
            match self.kind(j) {
                Kind::Op(")") | Kind::Op("]") | Kind::Op("}") => depth += 1,
                Kind::Op("(") if depth == 0 => return true,
                Kind::Op("(") | Kind::Op("[") | Kind::Op("{") => depth -= 1,
                Kind::End => return false,
                _ => {}
            }
        }
        false
    }

    /// What the expression at `i` reaches, if it is a chain the analysis follows, and
    /// the index after it.
    pub(super) fn target(&mut self, i: usize) -> (Option<String>, usize) {
        let line = self.line(i);
        let Kind::Name(first) = self.kind(i) else {
            return (None, i);
        };
        let mut next = i + 1;
        let mut reached = match first {
            "getattr" if self.kind(next) == Kind::Op("(") => {
                let (reached, after) = self.getattr(next + 1, line);
                next = after;
                reached
            }
            "__import__" if self.kind(next) == Kind::Op("(") => {
                let (reached, after) = self.import_call(next + 1, line);
                next = after;
                reached
            }
            _ => self.resolve(first),
        };
        while self.kind(next) == Kind::Op(".") {
            let Kind::Name(attribute) = self.kind(next + 1) else {
                break;
            };
            reached = reached.map(|base| {
                let mut full = base;
                full.push('.');
                full.push_str(attribute);
                full
            });
            next += 2;
            if matches!(
                reached.as_deref(),
                Some("importlib.import_module") | Some("importlib.__import__")
            ) && self.kind(next) == Kind::Op("(")
            {
                let (module, after) = self.import_call(next + 1, line);
                reached = module;
                next = after;
            }
        }
        // `__builtins__.__dict__[...]`, `vars(builtins)[...]` and the like: the
        // builtins looked up by a key.
        if let Some(full) = &reached {
            let builtins = normalize(full);
            if (builtins == "__dict__" || full == "__builtins__" || full == "builtins")
                && self.kind(next) == Kind::Op("[")
            {
                let (key, after) = self.constant(next + 1);
                match key {
                    Some(key) => reached = Some(key),
                    None => self.hit(line, DYNAMIC_ATTRIBUTE),
                }
                next = after;
            }
        }
        (reached.map(|r| normalize(&r).to_string()), next)
    }
}

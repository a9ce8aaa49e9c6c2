//! The modules and calls a user's policy restricts, found the way the handler's own
//! rules are: in code only (never in a comment or a string), and under the names an
//! import binds (`const cp = require('child_process'); cp.exec(...)` reaches
//! `child_process.exec`; Go's `exec.Command` is `os/exec.Command`).

use crate::scan::{self, Scan, Syntax};
use crate::{findings, Finding, Import, Restriction, RestrictionKind, Rule};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Everything the analysis of one language needs.
pub struct Language {
    /// The language's id, which prefixes the rule ids of restricted names.
    pub id: &'static str,
    /// Where its comments and strings are.
    pub syntax: &'static Syntax,
    /// The modules code imports.
    pub imports: fn(&Scan) -> Vec<Import>,
    /// The names imports bind.
    pub bindings: fn(&Scan) -> Vec<Binding>,
    /// The handler's own rules.
    pub rules: &'static [Rule],
    /// Characters a name may hold besides letters, digits and `_` (`$` in
    /// JavaScript, `-` in shell commands): a restricted `curl` is not `curl-config`.
    pub name_chars: &'static str,
}

/// A name code binds to a module or to something in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The name as the code uses it (`cp`, `run`, `exec`).
    pub name: String,
    /// What it stands for, as a restriction names it (`child_process`,
    /// `child_process.exec`, `os/exec`).
    pub stands_for: String,
}

/// For languages whose imports bind no names the analysis follows.
pub fn no_bindings(_: &Scan) -> Vec<Binding> {
    Vec::new()
}

/// The handler's rules and the `restricted` modules and calls over `code`: one finding
/// per rule and line, in line order.
pub fn analyze_restricted(
    code: &str,
    language: &Language,
    restricted: &[Restriction],
) -> Vec<Finding> {
    let scan = scan::scan(code, language.syntax);
    let mut hits: Vec<(u32, usize)> = Vec::new();
    let lines: Vec<&str> = scan.code.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        for (r, rule) in language.rules.iter().enumerate() {
            if rule
                .needles
                .iter()
                .any(|needle| crate::contains_token(line, needle))
            {
                hits.push((index as u32 + 1, r));
            }
        }
    }
    let imports = (language.imports)(&scan);
    for import in &imports {
        for (r, rule) in language.rules.iter().enumerate() {
            if rule
                .modules
                .iter()
                .any(|pattern| crate::module_matches(pattern, &import.module))
            {
                hits.push((import.line, r));
            }
        }
    }
    let mut found = findings(hits, language.rules);
    if restricted.is_empty() {
        return found;
    }
    let bindings = (language.bindings)(&scan);
    let mut extra: Vec<(u32, usize)> = Vec::new();
    for (r, restriction) in restricted.iter().enumerate() {
        match restriction.kind {
            RestrictionKind::Module => {
                for import in &imports {
                    if beneath(&restriction.name, &import.module) {
                        extra.push((import.line, r));
                    }
                }
            }
            RestrictionKind::Call => {
                let names = local_names(&restriction.name, &bindings);
                for (index, line) in lines.iter().enumerate() {
                    if names
                        .iter()
                        .any(|name| contains_name(line, name, language.name_chars))
                    {
                        extra.push((index as u32 + 1, r));
                    }
                }
            }
        }
    }
    extra.sort_unstable();
    extra.dedup();
    found.extend(
        extra
            .into_iter()
            .map(|(line, r)| finding(language.id, &restricted[r], line)),
    );
    found.sort_by_key(|f| f.line);
    found
}

/// The finding a restriction gives on `line`.
pub fn finding(language: &str, restriction: &Restriction, line: u32) -> Finding {
    let (kind, verb) = match restriction.kind {
        RestrictionKind::Module => ("module", "uses the module"),
        RestrictionKind::Call => ("call", "calls"),
    };
    Finding {
        rule_id: format!("{language}.restricted-{kind}.{}", restriction.name),
        severity: restriction.severity,
        line: Some(line),
        message: format!(
            "{verb} `{}`, which the policy restricts",
            restriction.name.trim_end_matches('*')
        ),
    }
}

/// Whether `module` is `pattern` or a module beneath it (`net/http` is beneath `net`,
/// `java.net.Socket` beneath `java.net`); a trailing `*` matches any continuation.
pub fn beneath(pattern: &str, module: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        return module.starts_with(prefix);
    }
    module == pattern
        || module
            .strip_prefix(pattern)
            .is_some_and(|rest| rest.starts_with(['.', '/', ':']))
}

/// The names code may reach the call `restricted` by: itself, and for each binding
/// of its module (or of it), the bound name with the rest appended.
fn local_names(restricted: &str, bindings: &[Binding]) -> Vec<String> {
    let mut names = alloc::vec![restricted.to_string()];
    for binding in bindings {
        if let Some(rest) = restricted.strip_prefix(binding.stands_for.as_str()) {
            if rest.is_empty() || rest.starts_with('.') || rest.starts_with("::") {
                let mut name = binding.name.clone();
                name.push_str(rest);
                names.push(name);
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Whether `name` occurs in `line` as a whole name: not inside a longer identifier on
/// either side. A trailing `*` in `name` matches any continuation.
pub fn contains_name(line: &str, name: &str, name_chars: &str) -> bool {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_' || name_chars.contains(c);
    let (needle, open_end) = match name.strip_suffix('*') {
        Some(prefix) => (prefix, true),
        None => (name, false),
    };
    if needle.is_empty() {
        return false;
    }
    line.match_indices(needle).any(|(at, _)| {
        let before_ok = !line[..at].chars().next_back().is_some_and(is_name_char);
        let after_ok = open_end
            || !line[at + needle.len()..]
                .chars()
                .next()
                .is_some_and(is_name_char);
        before_ok && after_ok
    })
}

/// Names bound by Node.js imports: `const cp = require('x')`, `import cp from 'x'`,
/// `import * as cp from 'x'` bind `cp` to `x`; `const { exec, spawn: run } =
/// require('x')` and `import { exec, spawn as run } from 'x'` bind `exec` and `run`
/// to `x.exec` and `x.spawn`.
pub fn node_bindings(scan: &Scan) -> Vec<Binding> {
    let mut bindings = Vec::new();
    for import in crate::node_imports(scan) {
        let Some(literal) = scan
            .literals
            .iter()
            .find(|l| l.line == import.line && l.text.trim_start_matches("node:") == import.module)
        else {
            continue;
        };
        // The statement up to the module's string: `const cp = require(` or
        // `import { a as b } from `.
        let start = scan.code[..literal.at]
            .rfind([';', '\n'])
            .map_or(0, |at| at + 1);
        let head = scan.code[start..literal.at].trim();
        let head = head
            .strip_prefix("import")
            .or_else(|| {
                ["const", "let", "var"]
                    .iter()
                    .find_map(|k| head.strip_prefix(k))
            })
            .unwrap_or("");
        let head = head
            .trim_end_matches(|c: char| c.is_whitespace() || c == '(')
            .trim_end_matches("require")
            .trim_end_matches("from")
            .trim_end_matches(|c: char| c.is_whitespace() || c == '=')
            .trim();
        if let Some(named) = head.strip_prefix('{').and_then(|h| h.strip_suffix('}')) {
            for part in named.split(',') {
                let part = part.trim();
                let (original, local) = part
                    .split_once(" as ")
                    .or_else(|| part.split_once(':'))
                    .unwrap_or((part, part));
                push_binding(&mut bindings, local.trim(), &import.module, original.trim());
            }
        } else {
            let local = head.strip_prefix("* as ").unwrap_or(head).trim();
            push_binding(&mut bindings, local, &import.module, "");
        }
    }
    bindings
}

fn push_binding(bindings: &mut Vec<Binding>, name: &str, module: &str, member: &str) {
    let simple = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$');
    if !simple {
        return;
    }
    let mut stands_for = module.to_string();
    if !member.is_empty() {
        stands_for.push('.');
        stands_for.push_str(member);
    }
    bindings.push(Binding {
        name: name.to_string(),
        stands_for,
    });
}


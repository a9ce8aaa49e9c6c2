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
    /// Names code reaches where no name is bound (`require('x').exec`).
    pub uses: fn(&Scan) -> Vec<Import>,
    /// The handler's own rules.
    pub rules: &'static [Rule],
    /// Characters a name may hold besides letters, digits and `_` (`$` in
    /// JavaScript, `-` in shell commands): a restricted `curl` is not `curl-config`.
    pub name_chars: &'static str,
}

/// A name code binds to a module or to something in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The name as the code uses it (`cp`, `run`, `exec`); empty when the import
    /// makes the module's members plain names (Go's `import . "os"`, Java's
    /// `import java.net.*;`).
    pub name: String,
    /// What it stands for, as a restriction names it (`child_process`,
    /// `child_process.exec`, `os/exec`).
    pub stands_for: String,
}

/// For languages whose imports bind no names the analysis follows.
pub fn no_bindings(_: &Scan) -> Vec<Binding> {
    Vec::new()
}

/// For languages where every use goes through a name.
pub fn no_uses(_: &Scan) -> Vec<Import> {
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
    let imports = (language.imports)(&scan);
    let hits = crate::rule_hits(&scan, &imports, language.rules);
    let mut found = findings(hits, language.rules);
    if restricted.is_empty() {
        return found;
    }
    let lines: Vec<&str> = scan.code.lines().collect();
    let bindings = (language.bindings)(&scan);
    let uses = (language.uses)(&scan);
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
                for used in &uses {
                    if beneath(&restriction.name, &used.module) {
                        extra.push((used.line, r));
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
/// of its module (or of it), the bound name with the rest appended. A family
/// (`child_process.exec*`) also reaches a name bound to one of its members
/// (`execSync` of `const { execSync } = require('child_process')`).
fn local_names(restricted: &str, bindings: &[Binding]) -> Vec<String> {
    let mut names = alloc::vec![restricted.to_string()];
    // R reaches a package's internals with `:::` as well as `::`.
    if restricted.contains("::") && !restricted.contains(":::") {
        names.push(restricted.replacen("::", ":::", 1));
    }
    let family = restricted.strip_suffix('*');
    for binding in bindings {
        if let Some(rest) = restricted.strip_prefix(binding.stands_for.as_str()) {
            if rest.is_empty() || rest.starts_with('.') || rest.starts_with("::") {
                let name = if binding.name.is_empty() {
                    rest.trim_start_matches(['.', ':']).to_string()
                } else {
                    let mut name = binding.name.clone();
                    name.push_str(rest);
                    name
                };
                if !name.is_empty() {
                    names.push(name);
                }
            }
        }
        if family.is_some_and(|prefix| binding.stands_for.starts_with(prefix))
            && !binding.name.is_empty()
        {
            names.push(binding.name.clone());
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

/// How the analysis reads code that runs on Node.js: JavaScript, and TypeScript once
/// its types are erased. `id` prefixes the rule ids of restricted names.
pub const fn node_language(id: &'static str) -> Language {
    Language {
        id,
        syntax: &scan::JAVASCRIPT,
        imports: crate::node_imports,
        bindings: node_bindings,
        uses: node_uses,
        rules: crate::NODE_RULES,
        name_chars: "$",
    }
}

/// Names bound by Node.js imports: `const cp = require('x')`, `import cp from 'x'`,
/// `import * as cp from 'x'` and `import cp = require('x')` bind `cp` to `x`;
/// `const { exec, spawn: run } = require('x')` and `import { exec, spawn as run }
/// from 'x'` bind `exec` and `run` to `x.exec` and `x.spawn`. A statement may span
/// lines inside braces and hold several declarations (`const a = require('a'), b =
/// require('b')`).
pub fn node_bindings(scan: &Scan) -> Vec<Binding> {
    let mut bindings = Vec::new();
    let code = scan.code.as_str();
    for (literal, keyword) in crate::import_literals(scan, crate::NODE_IMPORT_KEYWORDS) {
        let module = literal.text.strip_prefix("node:").unwrap_or(&literal.text);
        // The statement ends where the keyword before the string starts.
        let before = code[..literal.at].trim_end();
        let end = before.len() - keyword.len();
        let head = code[statement_start(code, end)..end].trim();
        let head = head.strip_prefix("export ").unwrap_or(head).trim_start();
        if let Some(rest) = word_after(head, "import") {
            // `import a, { b as c }, * as d from` or TypeScript's `import a = require(`.
            let rest = rest.trim_end().trim_end_matches('=').trim_end();
            for part in split_top(rest, ',') {
                bind_clause(&mut bindings, part, module, " as ");
            }
        } else {
            let rest = ["const", "let", "var"]
                .iter()
                .find_map(|k| word_after(head, k))
                .unwrap_or(head);
            // The declaration this string belongs to is the last one so far.
            let last = split_top(rest, ',').pop().unwrap_or("");
            if let Some((target, _)) = last.split_once('=') {
                bind_clause(&mut bindings, target, module, ":");
            }
        }
    }
    bindings
}

/// Names code reaches by a module's member without binding the module:
/// `require('child_process').exec` and `(await import('child_process')).exec`.
pub fn node_uses(scan: &Scan) -> Vec<Import> {
    let code = scan.code.as_str();
    let mut uses = Vec::new();
    for (literal, _) in crate::import_literals(scan, crate::NODE_IMPORT_KEYWORDS) {
        let after = code[literal.end..].trim_start_matches(|c: char| c == ')' || c == ' ');
        let Some(member) = after.strip_prefix('.') else {
            continue;
        };
        let member: String = member
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$' || *c == '.')
            .collect();
        let member = member.trim_end_matches('.');
        if member.is_empty() {
            continue;
        }
        let module = literal.text.strip_prefix("node:").unwrap_or(&literal.text);
        uses.push(Import {
            module: format!("{module}.{member}"),
            line: literal.line,
        });
    }
    uses
}

/// Where the statement that ends at `end` starts: after a `;`, or after a line break
/// outside brackets that does not follow a `=` or `,` (which continue a statement).
fn statement_start(code: &str, end: usize) -> usize {
    let bytes = code.as_bytes();
    let mut depth = 0usize;
    let mut at = end;
    while at > 0 {
        let c = bytes[at - 1];
        match c {
            b')' | b']' | b'}' => depth += 1,
            b'(' | b'[' | b'{' => {
                if depth == 0 {
                    return at;
                }
                depth -= 1;
            }
            b';' if depth == 0 => return at,
            b'\n' if depth == 0 => {
                let previous = code[..at - 1].trim_end();
                if !previous.ends_with(['=', ',']) {
                    return at;
                }
            }
            _ => {}
        }
        at -= 1;
    }
    0
}

/// `text` after the word `word` at its start, if it starts with it.
fn word_after<'t>(text: &'t str, word: &str) -> Option<&'t str> {
    let rest = text.strip_prefix(word)?;
    (rest.is_empty() || rest.starts_with(|c: char| c.is_whitespace() || c == '{'))
        .then_some(rest)
}

/// `text` split at `separator` outside brackets.
fn split_top(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (at, c) in text.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            c if c == separator && depth == 0 => {
                parts.push(&text[start..at]);
                start = at + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// One clause of an import or a declaration: `{ a, b <rename> c }` binds members,
/// `* as x` and `x` bind the module.
fn bind_clause(bindings: &mut Vec<Binding>, clause: &str, module: &str, rename: &str) {
    let clause = clause.trim();
    if let Some(named) = clause.strip_prefix('{').and_then(|c| c.strip_suffix('}')) {
        for part in split_top(named, ',') {
            let part = part.trim();
            let part = part.strip_prefix("type ").unwrap_or(part);
            // A default value (`{ exec = fallback }`) is not part of the name.
            let part = part.split('=').next().unwrap_or("").trim();
            let (member, local) = part.split_once(rename).unwrap_or((part, part));
            push_binding(bindings, local.trim(), module, member.trim());
        }
    } else {
        let local = clause.strip_prefix("* as ").unwrap_or(clause).trim();
        push_binding(bindings, local, module, "");
    }
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

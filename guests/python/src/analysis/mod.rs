//! Static analysis of Python for the security policy. It reads tokens, not text: a
//! comment or a string that mentions `os.system` is not a call, and names bound by
//! imports and assignments are followed to what they stand for, so
//! `import os as o; o.system('id')`, `from os import system as s; s('id')`,
//! `getattr(__builtins__, 'ev' + 'al')` and `__import__('os').system` all resolve to
//! the function they reach.
//!
//! It is a gate, not a sandbox: code can always build a name the analysis cannot
//! follow (a value computed at run time, `pickle`, bytecode). Those lookups by a
//! computed name are findings of their own, so a policy can refuse them too.

mod bindings;
mod dynamic;
mod imports;
mod references;
mod rules;
mod shell;
mod tokens;
mod walk;

use alloc::collections::BTreeMap;
use alloc::string::ToString;
use alloc::vec::Vec;
use rules::{RULES, SYSTEM_FILES, SYSTEM_PATHS};
use sandlot_handler_kit::restrict;
use sandlot_handler_kit::scan;
use sandlot_handler_kit::{Finding, Restriction};
use tokens::{normalized_identifiers, tokenize};
use walk::Analysis;

/// The findings for `code`, in line order, one per rule and line: the handler's rules
/// and the `restricted` modules and calls. Both match the names code reaches, so
/// a restricted `socket` is found behind `import socket as s` and `__import__('socket')`.
pub fn analyze(code: &str, restricted: &[Restriction]) -> Vec<Finding> {
    let scan = scan::scan(code, &scan::PYTHON);
    let normalized = normalized_identifiers(&scan);
    let tokens = tokenize(&scan, &normalized);
    let mut analysis = Analysis {
        tokens: &tokens,
        scan: &scan,
        restricted,
        bindings: BTreeMap::new(),
        star_modules: Vec::new(),
        hits: Vec::new(),
    };
    analysis.run();
    for literal in &scan.literals {
        if SYSTEM_PATHS.iter().any(|p| literal.text.contains(p)) {
            analysis.hits.push((literal.line, SYSTEM_FILES));
        }
    }
    let mut hits = analysis.hits;
    hits.sort_unstable();
    hits.dedup();
    hits.into_iter()
        .map(|(line, r)| match RULES.get(r) {
            Some(rule) => Finding {
                rule_id: rule.id.to_string(),
                severity: rule.severity,
                line: Some(line),
                message: rule.message.to_string(),
            },
            None => restrict::finding("python", &restricted[r - RULES.len()], line),
        })
        .collect()
}

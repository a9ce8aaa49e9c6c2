//! The walk over the tokens: what it knows so far (the bindings, the hits) and the
//! statement each token starts. Each kind of statement is read in a room of its own;
//! this one holds the state they share and records what a name reaches.

use super::rules::{matches, normalize, RULES};
use super::tokens::{Kind, Token, KEYWORDS};
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use sandlot_handler_kit::restrict;
use sandlot_handler_kit::scan::Scan;
use sandlot_handler_kit::Restriction;

/// What a name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Binding {
    /// A module or a function in one, by its full dotted name.
    Known(String),
    /// Something the analysis does not follow (a local value, a parameter).
    Opaque,
}

pub(super) struct Analysis<'a, 't> {
    pub(super) tokens: &'t [Token<'a>],
    pub(super) scan: &'t Scan,
    pub(super) restricted: &'t [Restriction],
    pub(super) bindings: BTreeMap<&'a str, Binding>,
    /// Modules imported with `from M import *`: a name bound nowhere may be one of
    /// theirs (`from os import *; system('id')`).
    pub(super) star_modules: Vec<String>,
    /// (line, rule index); indices past [`RULES`] are restrictions, in order.
    pub(super) hits: Vec<(u32, usize)>,
}

impl<'a> Analysis<'a, '_> {
    pub(super) fn kind(&self, i: usize) -> Kind<'a> {
        self.tokens.get(i).map_or(Kind::End, |t| t.kind)
    }

    pub(super) fn line(&self, i: usize) -> u32 {
        self.tokens
            .get(i)
            .or(self.tokens.last())
            .map_or(1, |t| t.line)
    }

    pub(super) fn run(&mut self) {
        let mut i = 0;
        while i < self.tokens.len() {
            let statement_start = i == 0 || matches!(self.kind(i - 1), Kind::End | Kind::Op(":"));
            i = match self.kind(i) {
                Kind::Name("import") if statement_start => self.import(i + 1),
                Kind::Name("from") if statement_start => self.from_import(i + 1),
                Kind::Name("def") | Kind::Name("class") => self.definition(i + 1),
                Kind::Name("lambda") => self.parameters(i + 1, ":"),
                Kind::Name("for") | Kind::Name("as") | Kind::Name("global") => {
                    self.bind_targets(i + 1)
                }
                Kind::Name(name) if !KEYWORDS.contains(&name) => self.reference(i),
                _ => i + 1,
            };
        }
    }

    pub(super) fn hit(&mut self, line: u32, rule: usize) {
        self.hits.push((line, rule));
    }

    /// Records the rules and restrictions that `name` (a full dotted name) matches.
    /// A module and a call restriction both match the name and what lies under it.
    pub(super) fn reach(&mut self, name: &str, line: u32) {
        let name = normalize(name);
        for (index, rule) in RULES.iter().enumerate() {
            if rule.names.iter().any(|pattern| matches(pattern, name)) {
                self.hits.push((line, index));
            }
        }
        for (index, restriction) in self.restricted.iter().enumerate() {
            // As in every handler: a name and what lies under it, and a `*` matching
            // any continuation, none included (`socket*` is `socket` too).
            if restrict::beneath(normalize(&restriction.name), name) {
                self.hits.push((line, RULES.len() + index));
            }
        }
    }
}

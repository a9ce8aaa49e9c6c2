//! Helpers every handler uses, written once for both contract versions: the types
//! they name are those of whichever bindings the including crate generated.

use super::*;
use crate::scan::{self, Scan, Syntax};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A command of `phase` running `argv`, with no extra environment and no network.
pub fn command(phase: Phase, argv: &[&str]) -> Command {
    Command {
        phase,
        argv: argv.iter().map(|a| a.to_string()).collect(),
        env: Vec::new(),
        needs_network: false,
    }
}

/// Builder-style additions to [`Command`].
pub trait CommandExt {
    /// Adds one environment variable.
    fn env(self, key: &str, value: &str) -> Self;
    /// Appends arguments.
    fn args<S: AsRef<str>>(self, args: &[S]) -> Self;
    /// Marks the command as needing the network.
    fn network(self) -> Self;
}

impl CommandExt for Command {
    fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }
    fn args<S: AsRef<str>>(mut self, args: &[S]) -> Self {
        self.argv
            .extend(args.iter().map(|a| a.as_ref().to_string()));
        self
    }
    fn network(mut self) -> Self {
        self.needs_network = true;
        self
    }
}

/// A source file at `path` (relative to the working directory).
pub fn file(path: &str, contents: String) -> SourceFile {
    SourceFile {
        path: path.to_string(),
        // A string in contract 0.1, bytes in 0.2.
        contents: contents.into(),
    }
}

/// `dir/name`, without a doubled slash.
pub fn join(dir: &str, name: &str) -> String {
    format!("{}/{}", dir.trim_end_matches('/'), name)
}

/// Checks every library name with `valid`. Names starting with `-` are always refused:
/// commands run without a shell, but an installer would still read them as options.
pub fn check_libraries(
    libraries: &[String],
    language: &str,
    valid: impl Fn(&str) -> bool,
) -> Result<(), String> {
    for name in libraries {
        if name.is_empty() || name.starts_with('-') || !valid(name) {
            return Err(format!("`{name}` is not a valid {language} library name"));
        }
    }
    Ok(())
}

/// Whether every character of `s` is ASCII alphanumeric or one of `extra`.
pub fn only(s: &str, extra: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// `npm install`, so `require` finds the packages next to the program in `workdir`.
/// npm reads the `.npmrc` of the prefix it installs into, and nothing turns that off:
/// code of an earlier run could have planted one in the working directory. So the
/// packages install into the installer's own home (the host gives each install a
/// fresh one, which earlier code cannot know or write to, and runs it there) and are
/// then copied into `workdir/node_modules`. npm's cache is in that home too. Shared
/// by the JavaScript and TypeScript handlers.
pub fn npm_install(libraries: &[String], workdir: &str) -> Result<Vec<Command>, String> {
    if libraries.is_empty() {
        return Ok(Vec::new());
    }
    check_libraries(libraries, "npm", |l| only(l, "@/._-^~<>=*|"))?;
    // The directory and the names are the script's arguments, never part of its text.
    Ok(alloc::vec![command(
        Phase::Install,
        &["sh", "-c", NPM_INSTALL, "npm-install", workdir]
    )
    .args(libraries)
    .network()])
}

/// The script of [`npm_install`]: its first argument is the working directory, the
/// rest the packages.
pub const NPM_INSTALL: &str = "set -e\n\
work=\"$1\"\n\
shift\n\
stage=\"$HOME/npm-prefix\"\n\
mkdir -p \"$stage\"\n\
npm install --no-audit --no-fund --no-save --loglevel=error --prefix \"$stage\" \"$@\"\n\
mkdir -p \"$work/node_modules\"\n\
cp -a \"$stage/node_modules/.\" \"$work/node_modules/\"\n";

/// `install` for a handler that cannot install libraries: fine when there are none,
/// a clear refusal otherwise.
pub fn no_libraries(libraries: &[String], language: &str) -> Result<Vec<Command>, String> {
    if libraries.is_empty() {
        Ok(Vec::new())
    } else {
        Err(format!(
            "the {language} handler cannot install libraries; use an image that has them"
        ))
    }
}

/// `code` with `prelude` (plot capture) in front, when there is one.
pub fn prepend(prelude: Option<String>, code: &str) -> String {
    let mut source = prelude.unwrap_or_default();
    source.push_str(code);
    source
}

/// One static-analysis rule: any of `needles` in the code (not in a comment or a
/// string, not preceded by an identifier character), or an import of any of
/// `modules`, gives a finding.
pub struct Rule {
    /// Stable rule id, `language.what`.
    pub id: &'static str,
    /// How serious a match is.
    pub severity: Severity,
    /// Code that triggers the rule.
    pub needles: &'static [&'static str],
    /// Modules whose import triggers the rule; `name*` matches every module whose
    /// name starts with `name` (`http*`: `http`, `https`, `http2`).
    pub modules: &'static [&'static str],
    /// What the finding says.
    pub message: &'static str,
}

/// A module the code imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// Its name as the language writes it (`os/exec`, `child_process`).
    pub module: String,
    /// 1-based line of the import.
    pub line: u32,
}

/// Runs `rules` over `code` lexed with `syntax`: needles match code only (comments and
/// string contents are blanked), modules match what `imports` finds. One finding per
/// rule and line, in line order.
pub fn analyze(
    code: &str,
    syntax: &Syntax,
    imports: fn(&Scan) -> Vec<Import>,
    rules: &[Rule],
) -> Vec<Finding> {
    let scan = scan::scan(code, syntax);
    findings(rule_hits(&scan, &imports(&scan), rules), rules)
}

/// The `(line, rule index)` pairs at which `rules` match: their needles in the lexed
/// code, their modules among `imports`.
pub fn rule_hits(scan: &Scan, imports: &[Import], rules: &[Rule]) -> Vec<(u32, usize)> {
    let mut hits: Vec<(u32, usize)> = Vec::new();
    for (index, line) in scan.code.lines().enumerate() {
        for (r, rule) in rules.iter().enumerate() {
            if rule
                .needles
                .iter()
                .any(|needle| contains_token(line, needle))
            {
                hits.push((index as u32 + 1, r));
            }
        }
    }
    for import in imports {
        for (r, rule) in rules.iter().enumerate() {
            if rule
                .modules
                .iter()
                .any(|pattern| module_matches(pattern, &import.module))
            {
                hits.push((import.line, r));
            }
        }
    }
    hits
}

/// Findings for `(line, rule index)` hits: sorted by line then rule, one per pair.
pub fn findings(mut hits: Vec<(u32, usize)>, rules: &[Rule]) -> Vec<Finding> {
    hits.sort_unstable();
    hits.dedup();
    hits.into_iter()
        .map(|(line, r)| Finding {
            rule_id: rules[r].id.to_string(),
            severity: rules[r].severity,
            line: Some(line),
            message: rules[r].message.to_string(),
        })
        .collect()
}

/// Whether `module` is `pattern`, or starts with it when the pattern ends in `*`.
pub fn module_matches(pattern: &str, module: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => module.starts_with(prefix),
        None => module == pattern,
    }
}

/// For languages whose rules name no modules.
pub fn no_imports(_: &Scan) -> Vec<Import> {
    Vec::new()
}

/// String literals that follow one of `keywords` (ignoring spaces): `require('x')`,
/// `from 'x'`, `require "x"`. `node:` prefixes are dropped.
pub fn imports_after(scan: &Scan, keywords: &[&str]) -> Vec<Import> {
    import_literals(scan, keywords)
        .map(|(literal, _)| Import {
            module: literal
                .text
                .strip_prefix("node:")
                .unwrap_or(&literal.text)
                .to_string(),
            line: literal.line,
        })
        .collect()
}

/// The string literals [`imports_after`] reads as imports, each with the keyword
/// before it.
pub fn import_literals<'s>(
    scan: &'s Scan,
    keywords: &'s [&'s str],
) -> impl Iterator<Item = (&'s scan::Literal, &'s str)> + 's {
    scan.literals.iter().filter_map(move |literal| {
        let before = scan.code[..literal.at].trim_end();
        keywords
            .iter()
            .find(|k| {
                before.strip_suffix(**k).is_some_and(|rest| {
                    !rest
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '.')
                })
            })
            .map(|keyword| (literal, *keyword))
    })
}

/// What introduces a module in JavaScript and TypeScript: `require('x')`,
/// `module.require('x')`, `import ... from 'x'`, `import 'x'`, `import('x')`,
/// `export ... from 'x'`.
pub const NODE_IMPORT_KEYWORDS: &[&str] =
    &["require(", "module.require(", "from", "import", "import("];

/// What [`node_imports`] reports for a `require(...)` or `import(...)` whose module
/// name is computed at run time (`require(name)`, `` import(`./${x}`) ``): no rule
/// can tell which module it loads.
pub const COMPUTED_MODULE: &str = "(computed)";

/// Imports of JavaScript and TypeScript (see [`NODE_IMPORT_KEYWORDS`]), and a
/// [`COMPUTED_MODULE`] for each one whose name is not a constant.
pub fn node_imports(scan: &Scan) -> Vec<Import> {
    let mut imports = imports_after(scan, NODE_IMPORT_KEYWORDS);
    imports.extend(computed_node_imports(scan));
    imports
}

/// `require(...)` and `import(...)` calls (also `module.require(...)`) whose argument
/// is not a string literal without fields.
fn computed_node_imports(scan: &Scan) -> Vec<Import> {
    let code = scan.code.as_str();
    let mut found = Vec::new();
    for keyword in ["require", "import"] {
        for (at, _) in code.match_indices(keyword) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let after = code[at + keyword.len()..].trim_start_matches([' ', '\t']);
            let Some(arguments) = after.strip_prefix('(') else {
                continue;
            };
            let first = arguments.trim_start();
            let first_at = code.len() - first.len();
            let computed = match first.as_bytes().first() {
                // A literal alone is a constant: `require('fs')`; one with fields or
                // joined to more (`'child_' + x`) is not.
                Some(b'\'' | b'"' | b'`') => scan
                    .literals
                    .binary_search_by_key(&first_at, |l| l.at)
                    .map_or(true, |i| {
                        let literal = &scan.literals[i];
                        let rest = code[literal.end..].trim_start();
                        literal.interpolated || !(rest.starts_with(')') || rest.starts_with(','))
                    }),
                // `require()` loads nothing.
                Some(b')') | None => false,
                Some(_) => true,
            };
            if computed {
                found.push(Import {
                    module: COMPUTED_MODULE.into(),
                    line: scan.line_of(at),
                });
            }
        }
    }
    found
}

/// Whether `needle` occurs in `line` at a position not preceded by an identifier
/// character, so `eval(` does not match `my_eval(`.
pub fn contains_token(line: &str, needle: &str) -> bool {
    let starts_with_ident = needle
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_');
    line.match_indices(needle).any(|(at, _)| {
        !starts_with_ident
            || !line[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
    })
}

/// The first identifier that follows `keyword` (as a whole word) in `code`.
pub fn identifier_after<'a>(code: &'a str, keyword: &str) -> Option<&'a str> {
    let mut rest = code;
    while let Some(at) = rest.find(keyword) {
        let before_ok = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let after = &rest[at + keyword.len()..];
        if before_ok && after.starts_with(char::is_whitespace) {
            let name = after.trim_start();
            let end = name
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(name.len());
            if end > 0 {
                return Some(&name[..end]);
            }
        }
        rest = after;
    }
    None
}

/// Analysis rules for code that runs on Node.js: JavaScript, and TypeScript once its
/// types are erased. Needles cover both `require` and `import` forms.
pub const NODE_RULES: &[Rule] = &[
    Rule {
        id: "javascript.child-process",
        severity: Severity::High,
        needles: &["execSync(", "spawnSync(", "execFileSync("],
        modules: &["child_process"],
        message: "starts other processes",
    },
    Rule {
        id: "javascript.dynamic-code",
        severity: Severity::Medium,
        needles: &["eval(", "new Function(", "vm.run"],
        modules: &["vm"],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "javascript.dynamic-import",
        severity: Severity::Medium,
        needles: &[],
        modules: &[COMPUTED_MODULE],
        message: "imports a module whose name is computed at run time",
    },
    Rule {
        id: "javascript.network",
        severity: Severity::Medium,
        needles: &["fetch(", "WebSocket", "XMLHttpRequest"],
        modules: &["net", "http*", "dgram", "tls", "dns"],
        message: "uses the network",
    },
    Rule {
        id: "javascript.file-deletion",
        severity: Severity::Medium,
        needles: &["fs.rm", "fs.unlink", "rmSync(", "unlinkSync("],
        modules: &[],
        message: "deletes files",
    },
    Rule {
        id: "javascript.process-control",
        severity: Severity::Medium,
        needles: &["process.kill(", "process.binding(", "process.dlopen("],
        modules: &["cluster"],
        message: "controls processes or loads native code",
    },
];

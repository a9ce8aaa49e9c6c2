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

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use sandlot_handler_kit::restrict;
use sandlot_handler_kit::scan::{self, Scan};
use sandlot_handler_kit::{Finding, Restriction, Severity};

/// One rule: code that reaches any of `names` gives a finding.
struct Rule {
    id: &'static str,
    severity: Severity,
    /// Dotted names as Python resolves them: `os.system` matches `os.system` and
    /// anything under it; a trailing `*` matches any last part with that start
    /// (`os.exec*`: `os.execv`, `os.execlp`). A module name matches its import and
    /// every use of it.
    names: &'static [&'static str],
    message: &'static str,
}

const SUBPROCESS_SHELL: usize = 2;
const SYSTEM_FILES: usize = 8;
const DYNAMIC_IMPORT: usize = 9;
const DYNAMIC_ATTRIBUTE: usize = 10;

const RULES: &[Rule] = &[
    Rule {
        id: "python.os-command",
        severity: Severity::High,
        names: &[
            "os.system",
            "os.popen",
            "os.exec*",
            "os.spawn*",
            "os.posix_spawn*",
            "posix.system",
            "pty.spawn",
        ],
        message: "runs a shell command",
    },
    Rule {
        id: "python.subprocess",
        severity: Severity::Medium,
        names: &["subprocess", "_posixsubprocess"],
        message: "starts other processes through subprocess",
    },
    Rule {
        id: "python.subprocess-shell",
        severity: Severity::High,
        names: &[],
        message: "runs a shell command through subprocess (shell=True, or a shell as the program)",
    },
    Rule {
        id: "python.dynamic-code",
        severity: Severity::Medium,
        names: &[
            "eval",
            "exec",
            "compile",
            "__import__",
            "runpy",
            "code.interact",
        ],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "python.native-code",
        severity: Severity::High,
        names: &["ctypes", "_ctypes", "cffi"],
        message: "calls native code directly",
    },
    Rule {
        id: "python.network",
        severity: Severity::Medium,
        names: &[
            "socket",
            "_socket",
            "urllib",
            "urllib3",
            "requests",
            "http.client",
            "httpx",
            "aiohttp",
            "ftplib",
            "smtplib",
            "telnetlib",
        ],
        message: "uses the network",
    },
    Rule {
        id: "python.file-deletion",
        severity: Severity::Medium,
        names: &[
            "shutil.rmtree",
            "os.remove",
            "os.unlink",
            "os.rmdir",
            "os.removedirs",
        ],
        message: "deletes files",
    },
    Rule {
        id: "python.process-control",
        severity: Severity::Medium,
        names: &[
            "os.kill",
            "os.killpg",
            "os.fork",
            "os.forkpty",
            "os.setuid",
            "os.setgid",
            "signal.signal",
        ],
        message: "controls processes or signals",
    },
    Rule {
        id: "python.system-files",
        severity: Severity::Low,
        names: &[],
        message: "refers to system files",
    },
    Rule {
        id: "python.dynamic-import",
        severity: Severity::Medium,
        names: &[],
        message: "imports a module whose name is computed at run time",
    },
    Rule {
        id: "python.dynamic-attribute",
        severity: Severity::Medium,
        names: &[],
        message: "looks up a function of a module or of the builtins by a computed name",
    },
];

/// Programs that are shells: `subprocess.run(["sh", "-c", ...])` runs a shell command
/// as surely as `os.system` does.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "csh", "tcsh",
];

/// Whether a program named by a string literal is a shell (`sh`, `/bin/bash`).
fn is_shell(program: &str) -> bool {
    let name = program.trim().rsplit('/').next().unwrap_or("");
    SHELLS.contains(&name)
}

/// Paths in string literals that [`SYSTEM_FILES`] reports.
const SYSTEM_PATHS: &[&str] = &["/etc/", "/proc/", "/sys/", "/dev/"];

/// Modules whose attributes looked up by a computed name are a finding (for other
/// objects `getattr(obj, name)` is ordinary Python).
const SENSITIVE_ROOTS: &[&str] = &[
    "builtins",
    "os",
    "posix",
    "subprocess",
    "sys",
    "importlib",
    "ctypes",
    "shutil",
    "socket",
    "pty",
    "signal",
];

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind<'a> {
    Name(&'a str),
    /// A string literal, by index in [`Scan::literals`].
    Str(usize),
    Op(&'a str),
    /// The end of a logical line (a newline outside brackets, or `;`).
    End,
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    kind: Kind<'a>,
    line: u32,
}

const KEYWORDS: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "None",
    "True", "False",
];

/// Whether a byte may be part of an identifier as [`tokenize`] reads them.
fn identifier_byte(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80
}

/// The identifiers of the code (outside strings and comments) that are not ASCII,
/// by their byte offset, in NFKC: Python reads `ｏs` (fullwidth) and `𝐨𝐬` as `os`
/// (PEP 3131), so the rules must too.
fn normalized_identifiers(scan: &Scan) -> BTreeMap<usize, String> {
    use unicode_normalization::UnicodeNormalization;
    let mut normalized = BTreeMap::new();
    let code = scan.code.as_str();
    if code.is_ascii() {
        return normalized;
    }
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if identifier_byte(bytes[i]) && !bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && identifier_byte(bytes[i]) {
                i += 1;
            }
            let name = &code[start..i];
            if !name.is_ascii() {
                normalized.insert(start, name.nfkc().collect::<String>());
            }
        } else if bytes[i].is_ascii_digit() {
            // A number's letters (`1e5`, `0x1f`) are no identifier.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    normalized
}

fn tokenize<'a>(scan: &'a Scan, normalized: &'a BTreeMap<usize, String>) -> Vec<Token<'a>> {
    let code = scan.code.as_str();
    let bytes = code.as_bytes();
    let mut tokens = Vec::new();
    let mut literals = scan.literals.iter().enumerate().peekable();
    let mut depth = 0usize;
    let mut line = 1u32;
    let mut i = 0;
    while i < bytes.len() {
        while literals.peek().is_some_and(|(_, l)| l.at < i) {
            literals.next();
        }
        if let Some(&(index, literal)) = literals.peek().filter(|(_, l)| l.at == i) {
            tokens.push(Token {
                kind: Kind::Str(index),
                line,
            });
            literals.next();
            // An f-string's fields are code inside the literal's span: lex on from its
            // contents; the blanked text and the closing quote read as nothing.
            i = if literal.interpolated {
                literal.body
            } else {
                line += code[i..literal.end].matches('\n').count() as u32;
                literal.end
            };
            continue;
        }
        let c = bytes[i];
        match c {
            b'\n' => {
                if depth == 0 {
                    push_end(&mut tokens, line);
                }
                line += 1;
                i += 1;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'\n') => {
                line += 1;
                i += 2;
            }
            b';' => {
                push_end(&mut tokens, line);
                i += 1;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                tokens.push(Token {
                    kind: Kind::Op(&code[i..i + 1]),
                    line,
                });
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                tokens.push(Token {
                    kind: Kind::Op(&code[i..i + 1]),
                    line,
                });
                i += 1;
            }
            _ if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => {
                let start = i;
                while i < bytes.len() && identifier_byte(bytes[i]) {
                    i += 1;
                }
                let name = normalized
                    .get(&start)
                    .map_or(&code[start..i], String::as_str);
                // A string prefix (`f`, `rb`) is part of the literal that follows.
                let prefix = literals.peek().is_some_and(|(_, l)| l.at == i)
                    && name.len() <= 2
                    && name.chars().all(|c| "fFrRbBuUtT".contains(c));
                if !prefix {
                    tokens.push(Token {
                        kind: Kind::Name(name),
                        line,
                    });
                }
            }
            _ if c.is_ascii_digit() => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                    i += 1;
                }
            }
            b' ' | b'\t' | b'\r' | b'\'' | b'"' => i += 1,
            _ => {
                // Two-character operators matter only to tell `=` from `==`, `<=`...
                let two = code.get(i..i + 2).filter(|op| {
                    matches!(
                        *op,
                        "==" | "!=" | "<=" | ">=" | ":=" | "+=" | "-=" | "*=" | "/=" | "->" | "**"
                    )
                });
                let op = two.unwrap_or(&code[i..i + 1]);
                tokens.push(Token {
                    kind: Kind::Op(op),
                    line,
                });
                i += op.len();
            }
        }
    }
    push_end(&mut tokens, line);
    tokens
}

fn push_end(tokens: &mut Vec<Token<'_>>, line: u32) {
    if tokens.last().is_some_and(|t| t.kind != Kind::End) {
        tokens.push(Token {
            kind: Kind::End,
            line,
        });
    }
}

/// What a name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Binding {
    /// A module or a function in one, by its full dotted name.
    Known(String),
    /// Something the analysis does not follow (a local value, a parameter).
    Opaque,
}

struct Analysis<'a, 't> {
    tokens: &'t [Token<'a>],
    scan: &'t Scan,
    restricted: &'t [Restriction],
    bindings: BTreeMap<&'a str, Binding>,
    /// Modules imported with `from M import *`: a name bound nowhere may be one of
    /// theirs (`from os import *; system('id')`).
    star_modules: Vec<String>,
    /// (line, rule index); indices past [`RULES`] are restrictions, in order.
    hits: Vec<(u32, usize)>,
}

impl<'a> Analysis<'a, '_> {
    fn kind(&self, i: usize) -> Kind<'a> {
        self.tokens.get(i).map_or(Kind::End, |t| t.kind)
    }

    fn line(&self, i: usize) -> u32 {
        self.tokens
            .get(i)
            .or(self.tokens.last())
            .map_or(1, |t| t.line)
    }

    fn run(&mut self) {
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
    fn import(&mut self, mut i: usize) -> usize {
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
    fn from_import(&mut self, i: usize) -> usize {
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

    /// `def name(params)` / `class name(bases)`: the name and the parameters are
    /// local values.
    fn definition(&mut self, i: usize) -> usize {
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
    fn parameters(&mut self, mut i: usize, close: &str) -> usize {
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
    fn bind_targets(&mut self, mut i: usize) -> usize {
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
    fn resolve(&self, name: &str) -> Option<String> {
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

    /// A reference starting at the name at `i`: follows `.attr` chains, calls to
    /// `getattr`, `__import__` and `importlib.import_module`, and records what it
    /// reaches. Returns the index after it.
    fn reference(&mut self, i: usize) -> usize {
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

    /// Whether the call whose `(` is at `open` starts a shell: `shell=True`, or a
    /// shell as its first string (`["sh", "-c", ...]`, `"/bin/bash"`).
    fn runs_a_shell(&self, open: usize) -> bool {
        let mut depth = 0usize;
        let mut first_string = true;
        let mut i = open;
        while i < self.tokens.len() {
            match self.kind(i) {
                Kind::Op("(") | Kind::Op("[") | Kind::Op("{") => depth += 1,
                Kind::Op(")") | Kind::Op("]") | Kind::Op("}") => {
                    depth -= 1;
                    if depth == 0 {
                        return false;
                    }
                }
                Kind::Name("shell")
                    if depth == 1
                        && self.kind(i + 1) == Kind::Op("=")
                        && self.kind(i + 2) != Kind::Name("False")
                        && self.kind(i + 2) != Kind::Name("None") =>
                {
                    return true;
                }
                Kind::Str(index) if first_string => {
                    first_string = false;
                    if is_shell(&self.scan.literals[index].text) {
                        return true;
                    }
                }
                Kind::End => return false,
                _ => {}
            }
            i += 1;
        }
        false
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
    fn target(&mut self, i: usize) -> (Option<String>, usize) {
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

    /// `getattr(obj, name ...)` from its first argument; the call's result when the
    /// name is a constant.
    fn getattr(&mut self, i: usize, line: u32) -> (Option<String>, usize) {
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
    fn import_call(&mut self, i: usize, line: u32) -> (Option<String>, usize) {
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
    fn constant(&mut self, mut i: usize) -> (Option<String>, usize) {
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

    fn hit(&mut self, line: u32, rule: usize) {
        self.hits.push((line, rule));
    }

    /// Records the rules and restrictions that `name` (a full dotted name) matches.
    /// A module and a call restriction both match the name and what lies under it.
    fn reach(&mut self, name: &str, line: u32) {
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

/// `builtins.eval` and `__builtins__.eval` are `eval`.
fn normalize(name: &str) -> &str {
    name.strip_prefix("builtins.")
        .or_else(|| name.strip_prefix("__builtins__."))
        .unwrap_or(name)
}

/// Whether `name` is `pattern` or lies under it (see [`Rule::names`]).
fn matches(pattern: &str, name: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        // The starred part is the last one: `os.exec*` matches `os.execv` and
        // `os.execv.x`, not `os.exe`.
        let Some(rest) = name.strip_prefix(prefix) else {
            return false;
        };
        return !rest.is_empty() || prefix.ends_with('.');
    }
    name == pattern
        || name
            .strip_prefix(pattern)
            .is_some_and(|rest| rest.starts_with('.'))
}

//! Helpers every handler uses, written once for both contract versions: the types
//! they name are those of whichever bindings the including crate generated.

use super::*;
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

/// `npm install` into the working directory, so `require` finds the packages next to the
/// program. npm's cache lives in the working directory too: the root is read-only.
/// Shared by the JavaScript and TypeScript handlers.
pub fn npm_install(libraries: &[String], workdir: &str) -> Result<Vec<Command>, String> {
    if libraries.is_empty() {
        return Ok(Vec::new());
    }
    check_libraries(libraries, "npm", |l| only(l, "@/._-^~<>=*"))?;
    Ok(alloc::vec![command(
        Phase::Install,
        &[
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--loglevel=error",
            "--prefix",
            ".",
        ],
    )
    .args(libraries)
    .env("npm_config_cache", &join(workdir, ".sandlot/npm-cache"))
    .network()])
}

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

/// One static-analysis rule: any of `needles` on a line (not in a comment, not preceded
/// by an identifier character) gives a finding.
pub struct Rule {
    /// Stable rule id, `language.what`.
    pub id: &'static str,
    /// How serious a match is.
    pub severity: Severity,
    /// Text that triggers the rule.
    pub needles: &'static [&'static str],
    /// What the finding says.
    pub message: &'static str,
}

/// Runs `rules` over `code`, skipping lines that start with `comment`. One finding per
/// rule and line.
pub fn analyze(code: &str, comment: &str, rules: &[Rule]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (index, line) in code.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with(comment) {
            continue;
        }
        for rule in rules {
            if rule
                .needles
                .iter()
                .any(|needle| contains_token(line, needle))
            {
                findings.push(Finding {
                    rule_id: rule.id.to_string(),
                    severity: rule.severity,
                    line: Some(index as u32 + 1),
                    message: rule.message.to_string(),
                });
            }
        }
    }
    findings
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
        needles: &["child_process", "execSync(", "spawnSync("],
        message: "starts other processes",
    },
    Rule {
        id: "javascript.dynamic-code",
        severity: Severity::Medium,
        needles: &["eval(", "new Function(", "vm.run"],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "javascript.network",
        severity: Severity::Medium,
        needles: &[
            "require('net')",
            "require(\"net\")",
            "require('http",
            "require(\"http",
            "from 'net'",
            "from \"net\"",
            "from 'http",
            "from \"http",
            "fetch(",
            "WebSocket",
            "dgram",
        ],
        message: "uses the network",
    },
    Rule {
        id: "javascript.file-deletion",
        severity: Severity::Medium,
        needles: &["fs.rm", "fs.unlink", "rmSync(", "unlinkSync("],
        message: "deletes files",
    },
    Rule {
        id: "javascript.process-control",
        severity: Severity::Medium,
        needles: &["process.kill(", "process.binding(", "process.dlopen("],
        message: "controls processes or loads native code",
    },
];

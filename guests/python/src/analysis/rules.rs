//! The handler's rules: which dotted names give which finding, and how a name is
//! matched against them. A rule that names what it finds is added here alone: the walk
//! only asks the table.

use sandlot_handler_kit::Severity;

/// One rule: code that reaches any of `names` gives a finding.
pub(super) struct Rule {
    pub(super) id: &'static str,
    pub(super) severity: Severity,
    /// Dotted names as Python resolves them: `os.system` matches `os.system` and
    /// anything under it; a trailing `*` matches any last part with that start
    /// (`os.exec*`: `os.execv`, `os.execlp`). A module name matches its import and
    /// every use of it.
    pub(super) names: &'static [&'static str],
    pub(super) message: &'static str,
}

pub(super) const SUBPROCESS_SHELL: usize = 2;
pub(super) const SYSTEM_FILES: usize = 8;
pub(super) const DYNAMIC_IMPORT: usize = 9;
pub(super) const DYNAMIC_ATTRIBUTE: usize = 10;

pub(super) const RULES: &[Rule] = &[
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

/// Paths in string literals that [`SYSTEM_FILES`] reports.
pub(super) const SYSTEM_PATHS: &[&str] = &["/etc/", "/proc/", "/sys/", "/dev/"];

/// Modules whose attributes looked up by a computed name are a finding (for other
/// objects `getattr(obj, name)` is ordinary Python).
pub(super) const SENSITIVE_ROOTS: &[&str] = &[
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

/// `builtins.eval` and `__builtins__.eval` are `eval`.
pub(super) fn normalize(name: &str) -> &str {
    name.strip_prefix("builtins.")
        .or_else(|| name.strip_prefix("__builtins__."))
        .unwrap_or(name)
}

/// Whether `name` is `pattern` or lies under it (see [`Rule::names`]).
pub(super) fn matches(pattern: &str, name: &str) -> bool {
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

"""Security policies as llm-sandbox 0.3.46 writes them (``llm_sandbox.security``).

The classes, fields and verdicts are llm-sandbox's; what differs:

- the policy is **enforced**: a session's ``run`` refuses code the policy finds unsafe
  with ``SecurityViolationError`` (llm-sandbox only reported it through ``is_safe``);
- comments are removed with the language's own rules, so a ``#`` inside a string no
  longer hides the rest of the line from the patterns;
- checking does not add the restricted modules' patterns to the policy again on every
  call.

sandlot's own sandbox (no network unless allowed, limits, a read-only system) applies
whatever the policy says; ``sandlot.Policy`` is the native way to tighten it.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from .exceptions import InvalidRegexPatternError, ValidationError


class SecurityIssueSeverity(IntEnum):
    SAFE = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3


@dataclass
class SecurityPattern:
    """A regular expression that marks code as a security issue."""

    pattern: str
    description: str
    severity: SecurityIssueSeverity

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except (re.error, TypeError) as e:
            raise InvalidRegexPatternError(self.pattern) from e
        self.severity = SecurityIssueSeverity(self.severity)


@dataclass
class RestrictedModule:
    """A module (library) the code may not import, nor a run install."""

    name: str
    description: str
    severity: SecurityIssueSeverity

    def __post_init__(self) -> None:
        self.severity = SecurityIssueSeverity(self.severity)


@dataclass
class SecurityPolicy:
    """Patterns and restricted modules, and the severity from which they block.

    With ``severity_threshold=SAFE`` nothing blocks: violations are listed only."""

    severity_threshold: SecurityIssueSeverity = SecurityIssueSeverity.SAFE
    patterns: list[SecurityPattern] | None = None
    restricted_modules: list[RestrictedModule] | None = None

    def add_pattern(self, pattern: SecurityPattern) -> None:
        if self.patterns is None:
            self.patterns = []
        self.patterns.append(pattern)

    def add_restricted_module(self, module: RestrictedModule) -> None:
        if self.restricted_modules is None:
            self.restricted_modules = []
        self.restricted_modules.append(module)

    def blocks(self, severity: SecurityIssueSeverity) -> bool:
        """Whether a violation of ``severity`` makes code unsafe under this policy."""
        return self.severity_threshold > SecurityIssueSeverity.SAFE and severity >= self.severity_threshold


def import_pattern(module: str, language: str) -> str:
    """The regular expression that finds an import of ``module`` in ``language``."""
    m = re.escape(module)
    if language == "python":
        return r"\s*(from\s+" + m + r"(?:\s|$|\.|import)|import\s+" + m + r"(?:\s|$|\.|,))"
    if language in ("javascript", "typescript"):
        return (
            r"(?:import(?:\s+.*\s+from)?\s*['\"]" + m + r"['\"]"
            r"|require\s*\(\s*['\"]" + m + r"['\"]\s*\))"
        )
    if language == "go":
        return r"import\s*(?:\(\s*[^)]*)?\"" + m + r"\""
    if language == "ruby":
        return r"require(?:_relative)?\s*\(?\s*['\"]" + m + r"['\"]"
    if language == "r":
        return r"(?:library|require|requireNamespace)\s*\(\s*['\"]?" + m + r"['\"]?\s*[,)]|" + m + r"::"
    if language == "cpp":
        return r"#\s*include\s*[<\"]" + m + r"(?:\.h(?:pp)?)?[>\"]"
    if language == "java":
        return r"import\s+(?:static\s+)?" + m + r"(?:\.|;)"
    return r"\b" + m + r"\b"


def strip_comments(code: str, language: str) -> str:
    """``code`` without its comments, by ``language``'s rules; strings stay whole."""
    if language == "python":
        try:
            tokens = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type != tokenize.COMMENT]
            return tokenize.untokenize(tokens)
        except (tokenize.TokenError, SyntaxError, IndentationError):
            return code  # unparsable: every pattern sees all of it
    if language in ("r", "ruby", "bash"):
        return _strip(code, line="#", block=None)
    return _strip(code, line="//", block=("/*", "*/"))


def _strip(code: str, line: str, block: tuple[str, str] | None) -> str:
    out: list[str] = []
    i, n, quote = 0, len(code), ""
    while i < n:
        c = code[i]
        if quote:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(code[i + 1])
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'`":
            quote = c
            out.append(c)
        elif code.startswith(line, i):
            end = code.find("\n", i)
            i = n if end < 0 else end
            continue
        elif block and code.startswith(block[0], i):
            end = code.find(block[1], i + len(block[0]))
            i = n if end < 0 else end + len(block[1])
            out.append(" ")
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def check(policy: SecurityPolicy | None, code: str, language: str) -> tuple[bool, list[SecurityPattern]]:
    """llm-sandbox's verdict on ``code``: whether it is safe, and the patterns it breaks.

    As in llm-sandbox the check stops at the first violation that blocks."""
    if policy is None:
        return True, []
    candidates = list(policy.patterns or [])
    for module in policy.restricted_modules or []:
        candidates.append(SecurityPattern(import_pattern(module.name, language), module.description, module.severity))
    filtered = strip_comments(code, language)
    violations: list[SecurityPattern] = []
    for candidate in candidates:
        if candidate.pattern and re.search(candidate.pattern, filtered, re.MULTILINE):
            violations.append(candidate)
            if policy.blocks(candidate.severity):
                return False, violations
    return True, violations


_SPEC = r"(?:===|==|!=|~=|>=|<=|>|<)[0-9][A-Za-z0-9._+!*-]*"
_NPM = r"(?:@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*(?:@[A-Za-z0-9._-]+)?"
PACKAGE_NAME_PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    language: re.compile(r"^" + pattern + r"$")
    for language, pattern in {
        "python": r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9_,.-]+\])?(?:" + _SPEC + r"(?:," + _SPEC + r")*)?",
        "javascript": _NPM,
        "node": _NPM,
        "typescript": _NPM,
        "go": r"[A-Za-z0-9][A-Za-z0-9._/-]*(?:@[A-Za-z0-9._+-]+)?",
        "ruby": r"[A-Za-z0-9][A-Za-z0-9._-]*(?::[A-Za-z0-9._-]+)?",
        "r": r"[A-Za-z][A-Za-z0-9.]*",
        "cpp": r"[a-z0-9][a-z0-9.+-]+",
        "c": r"[a-z0-9][a-z0-9.+-]+",
        "java": r"[A-Za-z0-9][A-Za-z0-9._-]*(?::[A-Za-z0-9][A-Za-z0-9._-]*(?::[A-Za-z0-9][A-Za-z0-9._-]*)?)?",
    }.items()
}
_NO_SHELL = re.compile(r"^[A-Za-z0-9@/._:+=<>!~,\[\]-]+$")


def validate_package_name(library: str, language: str) -> str:
    """``library`` trimmed, if it is a well-formed package name for ``language``;
    otherwise ``ValidationError`` (shell metacharacters never pass)."""
    name = library.strip() if isinstance(library, str) else ""
    pattern = PACKAGE_NAME_PATTERNS.get(str(language).lower(), _NO_SHELL)
    if not name or not pattern.match(name):
        raise ValidationError(f"Invalid {language} package name: {library!r}")
    return name


__all__ = [
    "PACKAGE_NAME_PATTERNS",
    "RestrictedModule",
    "SecurityIssueSeverity",
    "SecurityPattern",
    "SecurityPolicy",
    "validate_package_name",
]

"""The enums of llm-sandbox 0.3.46 (``llm_sandbox.const``), with sandlot's ``wasm`` backend."""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """A ``str`` enum whose lookup by value ignores case: ``SandboxBackend("Docker")``."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> StrEnum | None:
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None


class SandboxBackend(StrEnum):
    """Where a session runs. sandlot runs ``docker``, ``podman``, ``kubernetes``, its own
    in-process ``wasm`` and ``native`` (bubblewrap jails, no daemon), on which
    ``bubblewrap`` and ``nsjail`` run too; the others are named so that code importing
    them loads, and opening a session on one raises ``UnsupportedBackendError``."""

    DOCKER = "docker"
    KUBERNETES = "kubernetes"
    PODMAN = "podman"
    MICROMAMBA = "micromamba"
    BUBBLEWRAP = "bubblewrap"
    NSJAIL = "nsjail"
    WINDOWS_MXC = "windows-mxc"
    WSL2_BUBBLEWRAP = "wsl2-bubblewrap"
    WASM = "wasm"
    NATIVE = "native"


class SupportedLanguage(StrEnum):
    """The languages llm-sandbox names. sandlot also runs ``bash`` and ``typescript``."""

    PYTHON = "python"
    JAVA = "java"
    JAVASCRIPT = "javascript"
    CPP = "cpp"
    GO = "go"
    RUBY = "ruby"
    R = "r"


class DefaultImage(StrEnum):
    """llm-sandbox's default images (on ghcr.io). sandlot does not pull them: a session
    given none of these runs in sandlot's own image for the language
    (``sandlot images build``); one given ``image=`` runs there."""

    PYTHON = "ghcr.io/vndee/sandbox-python-311-bullseye"
    JAVA = "ghcr.io/vndee/sandbox-java-11-bullseye"
    JAVASCRIPT = "ghcr.io/vndee/sandbox-node-22-bullseye"
    CPP = "ghcr.io/vndee/sandbox-cpp-11-bullseye"
    GO = "ghcr.io/vndee/sandbox-go-123-bullseye"
    RUBY = "ghcr.io/vndee/sandbox-ruby-302-bullseye"
    R = "ghcr.io/vndee/sandbox-r-451-bullseye"


# The plot-capturing languages of llm-sandbox's ArtifactSandboxSession.
PLOT_LANGUAGES = frozenset({SupportedLanguage.PYTHON.value, SupportedLanguage.R.value})

# The sandlot backend each built-in llm-sandbox name runs on: the session reads it,
# the backend registry (whose factories make sessions) need not.
_SANDLOT_BACKEND = {"bubblewrap": "native", "nsjail": "native"}


def sandlot_backend(name: str) -> str:
    """The sandlot backend a built-in llm-sandbox backend name runs on (``bubblewrap``
    and ``nsjail`` run on ``native``; the others are sandlot's own names)."""
    return _SANDLOT_BACKEND.get(name, name)


__all__ = ["DefaultImage", "SandboxBackend", "StrEnum", "SupportedLanguage"]


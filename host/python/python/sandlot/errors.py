"""sandlot's exceptions: one class per kind of error the Rust host reports.

Every exception sandlot raises for a failure of its own is a ``SandlotError``; its
``kind`` is the stable name of the Rust ``ErrorKind`` (``"not_found"``...) and
``retryable`` says whether the same call may succeed later unchanged. A program that
fails inside the sandbox is not an exception: its ``Execution`` says how it ended.
"""

from __future__ import annotations

from typing import Any


class SandlotError(Exception):
    """Something kept sandlot from doing what was asked."""

    kind: str = "internal"
    retryable: bool = False

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class BlockedError(SandlotError):
    """The code was refused before it ran: the policy's analysis gate found what it blocks."""

    kind = "blocked"


class InvalidInputError(SandlotError, ValueError):
    """An argument is malformed or names something invalid (a path, a secret, a policy key)."""

    kind = "invalid_input"


class NotFoundError(SandlotError, LookupError):
    """There is no such language, backend, runtime or image recipe."""

    kind = "not_found"


class NotAllowedError(SandlotError):
    """What was asked is looser than the configuration allows."""

    kind = "not_allowed"


class UnsupportedError(SandlotError):
    """The backend cannot do what the session or call needs, or no backend can."""

    kind = "unsupported"


class ExhaustedError(SandlotError):
    """Every sandbox of a pool is in use. Worth retrying after a while."""

    kind = "exhausted"
    retryable = True


class SessionEndedError(SandlotError):
    """The session can run nothing more (it was closed, or its sandbox is gone): open another."""

    kind = "session_ended"


class UnavailableError(SandlotError):
    """The container engine or cluster does not answer now. Worth retrying after a while."""

    kind = "unavailable"
    retryable = True


class NotInstalledError(SandlotError):
    """An image or runtime the session needs is not installed (``sandlot images build``)."""

    kind = "not_installed"


class PluginError(SandlotError):
    """A language plugin cannot be loaded, or misbehaved."""

    kind = "plugin"


class ConfigError(SandlotError):
    """The configuration (``sandlot.toml``, a plugin manifest) is invalid."""

    kind = "config"


class InternalError(SandlotError):
    """The host failed: an I/O error, an engine's error, a broken agent."""

    kind = "internal"


class CallbackError(SandlotError):
    """An ``on_stdout``/``on_stderr`` callback raised. The run went on to its end:
    ``execution`` is what it gave, and ``__cause__`` is what the callback raised."""

    kind = "callback"

    def __init__(self, message: str, execution: Any = None) -> None:
        super().__init__(message)
        self.execution = execution


_BY_KIND = {
    cls.kind: cls
    for cls in (
        BlockedError,
        InvalidInputError,
        NotFoundError,
        NotAllowedError,
        UnsupportedError,
        ExhaustedError,
        SessionEndedError,
        UnavailableError,
        NotInstalledError,
        PluginError,
        ConfigError,
        InternalError,
    )
}


def _class_for_kind(kind: str) -> type[SandlotError]:
    # A kind newer than this module still raises a SandlotError, with its kind.
    return _BY_KIND.get(kind, SandlotError)


__all__ = [name for name in dir() if name.endswith("Error")]

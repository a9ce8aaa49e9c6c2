"""The exceptions of llm-sandbox 0.3.46 (``llm_sandbox.exceptions``): the same classes,
messages and attributes.

When one of sandlot's own errors is the reason, it is the exception's ``__cause__``: a
``sandlot.SandlotError`` with its ``kind``.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base of llm-sandbox's exceptions."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ContainerError(SandboxError):
    """The container could not be created, found or used."""


class SecurityError(SandboxError):
    """A path or argument would escape the sandbox."""


class ResourceError(SandboxError):
    """A resource limit was hit."""


class ValidationError(SandboxError):
    """An argument is invalid."""


class ExtraArgumentsError(SandboxError):
    """Arguments that cannot be combined."""


class LanguageNotSupportedError(SandboxError):
    def __init__(self, lang: str) -> None:
        super().__init__(f"Language {lang} is not supported")


class ImageNotFoundError(SandboxError):
    def __init__(self, image: str) -> None:
        super().__init__(f"Image {image} not found")


class NotOpenSessionError(SandboxError):
    def __init__(self) -> None:
        super().__init__("Session is not open. Please call open() method before running code.")


class LibraryInstallationNotSupportedError(SandboxError):
    def __init__(self, lang: str) -> None:
        super().__init__(f"Library installation is not supported for {lang}")


class CommandEmptyError(SandboxError):
    def __init__(self) -> None:
        super().__init__("Command cannot be empty")


class CommandFailedError(SandboxError):
    def __init__(self, command: str, exit_code: int, output: str) -> None:
        super().__init__(f"Command {command} failed with exit code {exit_code}:\n{output}")


class PackageManagerError(SandboxError):
    def __init__(self, package_manager: str) -> None:
        super().__init__(f"Package manager {package_manager} not found")


class ImagePullError(SandboxError):
    def __init__(self, image: str, error: str) -> None:
        super().__init__(f"Failed to pull image {image}: {error}")


class UnsupportedBackendError(SandboxError):
    def __init__(self, backend: str) -> None:
        super().__init__(f"Unsupported backend: {backend}")


class MissingDependencyError(SandboxError):
    """A backend needs something that is not installed."""


class LanguageNotSupportPlotError(SandboxError):
    def __init__(self, lang: str) -> None:
        super().__init__(f"Language {lang} does not support plot detection")


class InvalidRegexPatternError(SandboxError):
    def __init__(self, pattern: str) -> None:
        super().__init__(f"Invalid regex pattern: {pattern}")


class LanguageHandlerNotInitializedError(SandboxError):
    def __init__(self, language: str) -> None:
        super().__init__(f"Language handler for {language} is not initialized.")


class SecurityViolationError(SandboxError):
    """The code or a library breaks the session's security policy. Unlike llm-sandbox,
    sandlot enforces the policy: ``run`` raises this instead of running the code."""


class SandboxTimeoutError(SandboxError):
    """A run (or the session) outlived its timeout. sandlot has killed the program."""

    def __init__(self, message: str, timeout_duration: float | None = None) -> None:
        super().__init__(message)
        self.timeout_duration = timeout_duration


# The pool's exceptions are plain ``Exception``s in llm-sandbox, and stay so.
class PoolExhaustedError(Exception):
    def __init__(self, pool_size: int, timeout: float | None = None) -> None:
        if timeout is not None:
            message = f"All {pool_size} containers in pool are busy and timeout of {timeout}s exceeded"
        else:
            message = f"All {pool_size} containers in pool are busy"
        super().__init__(message)
        self.pool_size = pool_size
        self.timeout = timeout


class PoolClosedError(Exception):
    def __init__(self) -> None:
        super().__init__("Container pool has been closed")


class PoolHealthCheckError(Exception):
    def __init__(self, container_id: str, reason: str) -> None:
        super().__init__(f"Health check failed for container {container_id}: {reason}")
        self.container_id = container_id
        self.reason = reason


class SessionNotOpenError(RuntimeError):
    def __init__(self) -> None:
        super().__init__("Session not open - call open() first or use context manager")


class DuplicateClientError(ValueError):
    def __init__(self) -> None:
        super().__init__("client= belongs to the pool manager, not to a pooled session")


__all__ = [name for name in dir() if name.endswith("Error")]

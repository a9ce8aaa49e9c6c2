"""A drop-in for llm-sandbox 0.3.46 code, running on sandlot.

Change the import and keep the code::

    from sandlot.llm_sandbox import SandboxSession      # was: from llm_sandbox import ...

    with SandboxSession(lang="python") as session:
        print(session.run("print(1)").stdout)

The names, signatures, defaults and result shapes are llm-sandbox's, and so are the
submodules code imports (``.exceptions``, ``.security``, ``.pool``, ``.interactive``,
``.const``, ``.data``, ``.backends``, ``.core.session_base``). Where llm-sandbox has a
known defect sandlot's behaviour stands instead: a timeout kills the program, exit
codes survive streaming callbacks, stdout carries no banner, a pooled sandbox never
reaches a second borrower, ``to_json(include_plots=True)`` works, and security
policies are enforced. ``backend="wasm"`` runs in this process, with no daemon.
``docs/llm-sandbox.md`` lists every difference.
"""

from __future__ import annotations

from .backends import BackendCapabilities, BackendDefinition, get_backend, list_backends, register_backend
from .const import DefaultImage, SandboxBackend, SupportedLanguage
from .core.session_base import SessionConfig
from .data import ConsoleOutput, ExecutionResult, FileType, PlotOutput, StreamCallback
from .exceptions import ContainerError, ResourceError, SandboxError, SecurityError, ValidationError
from .local import LocalSandboxConfig, SeccompPolicy, WindowsMxcConfig
from .interactive import InteractiveSandboxSession, KernelType
from .security import SecurityIssueSeverity, SecurityPattern, SecurityPolicy
from .session import ArtifactSandboxSession, SandboxSession, create_session

__all__ = [
    "ArtifactSandboxSession",
    "BackendCapabilities",
    "BackendDefinition",
    "ConsoleOutput",
    "ContainerError",
    "DefaultImage",
    "ExecutionResult",
    "FileType",
    "InteractiveSandboxSession",
    "KernelType",
    "LocalSandboxConfig",
    "PlotOutput",
    "ResourceError",
    "SandboxBackend",
    "SandboxError",
    "SandboxSession",
    "SeccompPolicy",
    "SecurityError",
    "SecurityIssueSeverity",
    "SecurityPattern",
    "SecurityPolicy",
    "SessionConfig",
    "StreamCallback",
    "SupportedLanguage",
    "ValidationError",
    "WindowsMxcConfig",
    "create_session",
    "get_backend",
    "list_backends",
    "register_backend",
]

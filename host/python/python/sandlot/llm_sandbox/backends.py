"""llm-sandbox's backend registry (``llm_sandbox.backends``).

sandlot's backends are built in: ``docker``, ``podman``, ``kubernetes``, ``wasm`` and
``native`` (bubblewrap jails, no daemon), which llm-sandbox's local backends
``bubblewrap`` and ``nsjail`` also name. A backend registered here is a factory
``SandboxSession(backend=NAME)`` calls, as in llm-sandbox.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .exceptions import UnsupportedBackendError, ValidationError


@dataclass(frozen=True)
class BackendCapabilities:
    platforms: tuple[str, ...] = ()
    container_images: bool = False
    interactive: bool = False
    pooling: bool = False
    filesystem_isolation: bool = True
    network_isolation: bool = True
    seccomp: bool = False
    daemon_required: bool = False


@dataclass(frozen=True)
class BackendDefinition:
    name: str
    factory: Callable[..., Any]
    capabilities: BackendCapabilities
    builtin: bool = False


_lock = threading.Lock()
_registry: dict[str, BackendDefinition] = {}
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def _builtin(name: str, capabilities: BackendCapabilities) -> None:
    def factory(*args: Any, **kwargs: Any) -> Any:
        from .core.session_base import BaseSession

        return BaseSession(name, *args, **kwargs)

    _registry[name] = BackendDefinition(name, factory, capabilities, builtin=True)


_container = dict(container_images=True, interactive=True, pooling=True, seccomp=True, platforms=("linux",))
_builtin("docker", BackendCapabilities(daemon_required=True, **_container))
_builtin("podman", BackendCapabilities(daemon_required=True, **_container))
_builtin("kubernetes", BackendCapabilities(daemon_required=True, **_container))
_builtin("wasm", BackendCapabilities(interactive=True, platforms=("linux", "darwin", "windows")))
# sandlot's native backend jails sandlot's images with bubblewrap: llm-sandbox's two
# local backends run there, with sandlot's limits, seccomp profile and egress proxy.
for _name in ("native", "bubblewrap", "nsjail"):
    _builtin(_name, BackendCapabilities(**_container))

# llm-sandbox backends sandlot does not run, and what to use instead.
_ELSEWHERE = {
    "micromamba": "use image= with a conda image on docker",
    "windows-mxc": "use backend='wasm'",
    "wsl2-bubblewrap": "use backend='native' (bubblewrap on Linux) or 'wasm'",
}


def _normal(name: Any) -> str:
    text = str(getattr(name, "value", name)).lower()
    if not _NAME.match(text):
        raise UnsupportedBackendError(str(name))
    return text


def get_backend(name: Any) -> BackendDefinition:
    """The backend called ``name`` (any case), or ``UnsupportedBackendError``."""
    key = _normal(name)
    with _lock:
        found = _registry.get(key)
    if found is None:
        err = UnsupportedBackendError(key)
        if key in _ELSEWHERE:
            err.args = (f"Unsupported backend: {key} is not one sandlot runs; {_ELSEWHERE[key]}",)
        raise err
    return found


def list_backends() -> list[BackendDefinition]:
    with _lock:
        return list(_registry.values())


def register_backend(
    name: str, factory: Callable[..., Any], *, capabilities: BackendCapabilities | None = None
) -> BackendDefinition:
    """Adds a backend; an existing one cannot be replaced."""
    key = _normal(name)
    definition = BackendDefinition(key, factory, capabilities or BackendCapabilities())
    with _lock:
        if key in _registry:
            raise ValidationError(f"Backend {key} is already registered")
        _registry[key] = definition
    return definition


__all__ = ["BackendCapabilities", "BackendDefinition", "get_backend", "list_backends", "register_backend"]

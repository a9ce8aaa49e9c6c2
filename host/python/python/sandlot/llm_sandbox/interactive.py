"""``InteractiveSandboxSession``, as llm-sandbox 0.3.46 spells it (``llm_sandbox.interactive``).

sandlot's Python kernel keeps state between runs, as IPython does; no IPython is
installed in the sandbox and PyPI is not needed. Lines ``%pip install X`` and
``!pip install X`` install ``X`` (as ``libraries=``); other magics are not Python and
fail as such. ``interactive_settings=`` is honoured (llm-sandbox ignored it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .const import StrEnum
from .core.session_base import BaseSession
from .data import ConsoleOutput, StreamCallback, with_execution
from .exceptions import LanguageNotSupportedError, UnsupportedBackendError, ValidationError


class KernelType(StrEnum):
    IPYTHON = "ipython"


@dataclass(slots=True)
class InteractiveSettings:
    kernel_type: KernelType = KernelType.IPYTHON
    max_memory: str | None = None
    history_size: int = 1000
    timeout: float | None = 300.0
    poll_interval: float = 0.1

    def __post_init__(self) -> None:
        self.kernel_type = KernelType(self.kernel_type)
        if self.history_size < 0:
            raise ValidationError("history_size must be 0 or more")
        if self.poll_interval <= 0:
            raise ValidationError("poll_interval must be positive")


_PIP = re.compile(r"^\s*[%!]pip\s+install\s+(?P<args>.+)$", re.MULTILINE)


class InteractiveSandboxSession(BaseSession):
    """A Python session whose runs share one interpreter: variables, imports and
    functions persist from run to run."""

    def __init__(
        self,
        *,
        backend: str = "docker",
        lang: str = "python",
        kernel_type: str = "ipython",
        max_memory: str | None = "1GB",
        history_size: int = 1000,
        timeout: float | None = 300.0,
        runtime_configs: dict[str, Any] | None = None,
        interactive_settings: InteractiveSettings | None = None,
        **kwargs: Any,
    ) -> None:
        if str(lang).lower() != "python":
            raise LanguageNotSupportedError(str(lang))
        name = str(getattr(backend, "value", backend)).lower()
        if name not in ("docker", "podman", "kubernetes", "wasm", "native", "bubblewrap", "nsjail"):
            raise UnsupportedBackendError(name)
        self.settings = interactive_settings or InteractiveSettings(
            kernel_type=kernel_type, max_memory=max_memory, history_size=history_size, timeout=timeout
        )
        configs = dict(runtime_configs or {})
        if self.settings.max_memory and name != "kubernetes":
            configs.setdefault("mem_limit", self.settings.max_memory)
        super().__init__(
            name,
            lang="python",
            runtime_configs=configs,
            execution_timeout=self.settings.timeout,
            _kernel=True,
            **kwargs,
        )
        self.history: list[str] = []

    def run(
        self,
        code: str,
        libraries: list[str] | None = None,
        timeout: float | None = None,
        on_stdout: StreamCallback | None = None,
        on_stderr: StreamCallback | None = None,
    ) -> ConsoleOutput:
        """Runs ``code`` in the session's interpreter; ``exit_code`` is 0 when the cell
        succeeded and 1 when it raised, as with IPython."""
        wanted = list(libraries or [])
        if isinstance(code, str):
            for match in _PIP.finditer(code):
                wanted.extend(arg for arg in match.group("args").split() if not arg.startswith("-"))
            code = _PIP.sub("", code)
        out = super().run(code, libraries=wanted, timeout=timeout, on_stdout=on_stdout, on_stderr=on_stderr)
        if self.settings.history_size:
            self.history.append(code)
            del self.history[: -self.settings.history_size]
        result = ConsoleOutput(exit_code=0 if out.exit_code == 0 else 1, stderr=out.stderr, stdout=out.stdout)
        return with_execution(result, out.execution)


__all__ = ["InteractiveSandboxSession", "InteractiveSettings", "KernelType"]

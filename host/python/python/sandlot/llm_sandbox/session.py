"""``SandboxSession`` and ``ArtifactSandboxSession``, as llm-sandbox 0.3.46 spells them."""

from __future__ import annotations

import base64
from typing import Any

from .backends import get_backend
from .const import PLOT_LANGUAGES, SandboxBackend
from .core.session_base import BaseSession
from .data import ExecutionResult, FileType, PlotOutput, StreamCallback, file_type_of, with_execution
from .exceptions import LanguageNotSupportPlotError, ValidationError
from .security import SecurityPolicy


def SandboxSession(backend: SandboxBackend | str = SandboxBackend.DOCKER, pool: Any = None, *args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """A session on ``backend`` (``docker`` by default, as in llm-sandbox; ``wasm``
    runs in this process with no daemon), or on a sandbox from ``pool``. A factory
    function, as in llm-sandbox: use the result as a context manager."""
    if pool is not None:
        # The pool makes its own sessions: this module never names the pool's types.
        return pool._session(**kwargs)
    return get_backend(backend).factory(*args, **kwargs)


create_session = SandboxSession

_PLOT_FORMATS = {FileType.PNG, FileType.JPEG, FileType.SVG, FileType.PDF, FileType.HTML}


class ArtifactSandboxSession:
    """A session that captures plots: each ``run`` returns an ``ExecutionResult`` whose
    ``plots`` are every plot captured since the session opened or was last cleared."""

    def __init__(
        self,
        backend: SandboxBackend | str = SandboxBackend.DOCKER,
        image: str | None = None,
        dockerfile: str | None = None,
        lang: str = "python",
        *,
        pool: Any = None,
        keep_template: bool = False,
        commit_container: bool = False,
        verbose: bool = False,
        runtime_configs: dict[str, Any] | None = None,
        workdir: str = "/sandbox",
        enable_plotting: bool = True,
        security_policy: SecurityPolicy | None = None,
        container_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        if str(getattr(backend, "value", backend)).lower() == "windows-mxc":
            raise ValidationError("ArtifactSandboxSession does not support the windows-mxc backend")
        self.enable_plotting = enable_plotting
        self._plots: list[PlotOutput] = []
        if pool is not None:
            self._session: Any = pool._session(security_policy=security_policy, **kwargs)
            lang = pool.lang
        else:
            self._session = create_session(
                backend,
                image=image,
                dockerfile=dockerfile,
                lang=lang,
                keep_template=keep_template,
                commit_container=commit_container,
                verbose=verbose,
                runtime_configs=runtime_configs,
                workdir=workdir,
                security_policy=security_policy,
                container_id=container_id,
                **kwargs,
            )
        if enable_plotting and str(lang).lower() not in PLOT_LANGUAGES:
            raise LanguageNotSupportPlotError(str(lang))

    def __getattr__(self, name: str) -> Any:
        # Everything else is the wrapped session's, as in llm-sandbox.
        session = self.__dict__.get("_session")
        if session is None:
            raise AttributeError(name)
        return getattr(session, name)

    def __enter__(self) -> ArtifactSandboxSession:
        self._session.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self._session.close()

    def open(self) -> None:
        self._session.open()

    def close(self) -> None:
        self._session.close()

    def run(
        self,
        code: str,
        libraries: list[str] | None = None,
        timeout: float | None = None,
        clear_plots: bool = False,
        on_stdout: StreamCallback | None = None,
        on_stderr: StreamCallback | None = None,
    ) -> ExecutionResult:
        """Runs ``code`` (60 s timeout unless given or configured, as in llm-sandbox);
        with ``clear_plots``, forgets earlier plots first."""
        if clear_plots:
            self.clear_plots()
        config = self._session.config
        limit = timeout or config.execution_timeout or config.default_timeout or 60
        out = self._session.run(code, libraries=libraries, timeout=limit, on_stdout=on_stdout, on_stderr=on_stderr)
        execution = out.execution
        if self.enable_plotting and execution is not None:
            self._plots.extend(plot_outputs(execution))
        result = ExecutionResult(
            exit_code=out.exit_code, stderr=out.stderr, stdout=out.stdout, plots=list(self._plots)
        )
        return with_execution(result, execution)  # type: ignore[return-value]

    def clear_plots(self) -> None:
        """Forgets the plots captured so far; the next result lists only newer ones."""
        self._plots.clear()


def plot_outputs(execution: Any) -> list[PlotOutput]:
    """The plots of a sandlot ``Execution`` as llm-sandbox's ``PlotOutput``s, by name."""
    plots = []
    for file in sorted(execution.files, key=lambda f: f.path):
        kind = file_type_of(file.mime, file.name)
        if kind in _PLOT_FORMATS and (file.is_plot or kind is not FileType.HTML):
            plots.append(PlotOutput(format=kind, content_base64=base64.b64encode(file.bytes).decode()))
    return plots


__all__ = ["ArtifactSandboxSession", "SandboxSession", "create_session"]

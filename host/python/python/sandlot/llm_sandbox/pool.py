"""Pools of pre-warmed sandboxes, as llm-sandbox 0.3.46 spells them (``llm_sandbox.pool``),
over sandlot's pools.

One difference is deliberate: a pooled sandbox is never handed to a second borrower.
A session that ends gives its sandbox back to be destroyed, and the pool warms a fresh
one in its place, so nothing one borrower wrote or started reaches the next
(``max_container_uses`` is therefore always 1).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .. import errors as _errors
from .._native import Sandlot
from ._hosts import _config_file
from .const import PLOT_LANGUAGES, SandboxBackend, SupportedLanguage
from .core.session_base import BaseSession, Container, translate
from .exceptions import (
    DuplicateClientError,
    LanguageNotSupportPlotError,
    PoolClosedError,
    PoolExhaustedError,
    PoolHealthCheckError,
    SessionNotOpenError,
    UnsupportedBackendError,
    ValidationError,
)
from .session import ArtifactSandboxSession


class ExhaustionStrategy(str, Enum):
    """What an acquire does when every sandbox of the pool is in use."""

    FAIL_FAST = "fail_fast"
    WAIT = "wait"
    TEMPORARY = "temporary"


class ContainerState(str, Enum):
    INITIALIZING = "initializing"
    IDLE = "idle"
    BUSY = "busy"
    UNHEALTHY = "unhealthy"
    REMOVING = "removing"


@dataclass
class PoolConfig:
    max_pool_size: int = 10
    min_pool_size: int = 0
    idle_timeout: float | None = 300.0
    acquisition_timeout: float | None = 30.0
    health_check_interval: float = 60.0
    max_container_lifetime: float | None = 3600.0
    max_container_uses: int | None = None
    exhaustion_strategy: ExhaustionStrategy = ExhaustionStrategy.WAIT
    enable_prewarming: bool = True

    def __post_init__(self) -> None:
        if self.max_pool_size < 1:
            raise ValidationError("max_pool_size must be at least 1")
        if not 0 <= self.min_pool_size <= self.max_pool_size:
            raise ValidationError("min_pool_size must be between 0 and max_pool_size")
        self.exhaustion_strategy = ExhaustionStrategy(self.exhaustion_strategy)

    def to_sandlot(self) -> dict[str, Any]:
        """The keys of sandlot's ``[pool.BACKEND]`` for this configuration."""
        return {
            "min_idle": self.min_pool_size if self.enable_prewarming else 0,
            "max_size": self.max_pool_size,
            "idle_timeout": self.idle_timeout or 0,
            "max_lifetime": self.max_container_lifetime or 0,
            "health_check": self.health_check_interval > 0,
            "acquire_timeout": self.acquisition_timeout or 0,
            "when_exhausted": {
                ExhaustionStrategy.WAIT: "wait",
                ExhaustionStrategy.FAIL_FAST: "fail-fast",
                ExhaustionStrategy.TEMPORARY: "overflow",
            }[self.exhaustion_strategy],
        }


@dataclass
class PooledContainer:
    """A sandbox borrowed from the pool (``acquire``) until ``release``."""

    container_id: str
    container: Container
    state: ContainerState = ContainerState.BUSY
    created_at: float = field(default_factory=time.time)
    last_used_at: float = field(default_factory=time.time)
    use_count: int = 1
    session: Any = field(default=None, repr=False)

    def is_available(self) -> bool:
        return self.state is ContainerState.IDLE


class ContainerPoolManager:
    """Pre-warmed sandboxes of one language on one backend (``create_pool_manager``)."""

    def __init__(
        self,
        config: PoolConfig | None = None,
        lang: str = "python",
        backend: str = "docker",
        image: str | None = None,
        client: Any = None,
        runtime_configs: dict[str, Any] | None = None,
        **session_kwargs: Any,
    ) -> None:
        self.config = config or PoolConfig()
        self.lang = str(getattr(lang, "value", lang)).lower()
        self.backend = str(getattr(backend, "value", backend)).lower()
        self.image = image
        self.client = client
        self.runtime_configs = runtime_configs
        self.session_kwargs = session_kwargs
        # Built once: what the pool's sessions open with, warnings said once.
        self._template = BaseSession(
            self.backend, lang=self.lang, image=image, runtime_configs=runtime_configs, client=client, **session_kwargs
        )
        self._libraries = self._template._checked_libraries(self._template._pending)
        settings = self._template._settings
        self._host = Sandlot(
            _config_file(settings) if settings else None, pools={self._template.engine: self.config.to_sandlot()}
        )
        self._lock = threading.Lock()
        self._closed = False
        self._borrowed: dict[str, PooledContainer] = {}
        if self.config.enable_prewarming and self.config.min_pool_size:
            # sandlot warms a pool's sandboxes for the sessions it has seen: one
            # borrowed and given back at once starts the warming.
            self.release(self.acquire())

    def _open_native(self, session: BaseSession) -> Any:
        with self._lock:
            if self._closed:
                raise PoolClosedError()
        template = self._template
        try:
            return self._host.session(
                self.lang,
                backend=template.engine,
                image=template.docker_image,
                libraries=self._libraries,
                one_shot=not session._kernel,
                **template._options,
            )
        except _errors.ExhaustedError as err:
            raise PoolExhaustedError(self.config.max_pool_size) from err
        except _errors.SandlotError as err:
            if err.kind == "exhausted" or "timed out" in str(err):
                raise PoolExhaustedError(self.config.max_pool_size, self.config.acquisition_timeout) from err
            raise translate(err) from err

    def _session(self, **kwargs: Any) -> PooledSandboxSession:
        """A session on one of the pool's sandboxes: what ``SandboxSession(pool=...)``
        and ``ArtifactSandboxSession(pool=...)`` open."""
        return PooledSandboxSession(self, **kwargs)

    def acquire(self) -> PooledContainer:
        """Borrows a ready sandbox (``PoolExhaustedError`` when none comes in time)."""
        session = BaseSession(self.backend, lang=self.lang, _pool=self)
        session.open()
        assert session.container is not None
        borrowed = PooledContainer(session.container.id, session.container, session=session)
        with self._lock:
            self._borrowed[borrowed.container_id] = borrowed
        return borrowed

    def release(self, container: PooledContainer) -> None:
        """Gives a borrowed sandbox back; it is destroyed and replaced, never reused."""
        with self._lock:
            self._borrowed.pop(container.container_id, None)
        container.state = ContainerState.REMOVING
        if container.session is not None:
            container.session.close()

    def get_stats(self) -> dict[str, Any]:
        """llm-sandbox's statistics: sizes, and sandboxes per state."""
        with self._lock:
            closed = self._closed
        stats = {} if closed else self._host.pool_stats(self._template.engine)
        counts = {state.value: 0 for state in ContainerState}
        counts["initializing"] = stats.get("warming", 0)
        counts["idle"] = stats.get("idle", 0)
        counts["busy"] = stats.get("in_use", 0)
        return {
            "total_size": stats.get("size", 0),
            "max_size": self.config.max_pool_size,
            "min_size": self.config.min_pool_size,
            "state_counts": counts,
            "closed": closed,
        }

    def close(self) -> None:
        """Destroys every sandbox of the pool; sessions still open get up to 10 s."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._host.close()

    def __enter__(self) -> ContainerPoolManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_pool_manager(
    client: Any = None,
    backend: SandboxBackend | str = SandboxBackend.DOCKER,
    config: PoolConfig | None = None,
    lang: SupportedLanguage | str = SupportedLanguage.PYTHON,
    **kwargs: Any,
) -> ContainerPoolManager:
    """A pool on ``docker``, ``podman``, ``kubernetes`` or ``native`` (which
    ``bubblewrap`` and ``nsjail`` name too)."""
    name = str(getattr(backend, "value", backend)).lower()
    if name not in ("docker", "podman", "kubernetes", "native", "bubblewrap", "nsjail"):
        raise UnsupportedBackendError(name)
    return ContainerPoolManager(config=config, lang=str(lang), backend=name, client=client, **kwargs)


class PooledSandboxSession(BaseSession):
    """A session on a sandbox borrowed from ``pool_manager``; ``close`` gives it back."""

    def __init__(
        self,
        pool_manager: ContainerPoolManager,
        verbose: bool = False,
        stream: bool = False,
        workdir: str = "/sandbox",
        security_policy: Any = None,
        default_timeout: float | None = None,
        execution_timeout: float | None = None,
        session_timeout: float | None = None,
        encoding_errors: str = "strict",
        **kwargs: Any,
    ) -> None:
        if "client" in kwargs:
            raise DuplicateClientError()
        kwargs.pop("lang", None)
        super().__init__(
            pool_manager.backend,
            lang=pool_manager.lang,
            verbose=verbose,
            stream=stream,
            workdir=workdir,
            security_policy=security_policy,
            default_timeout=default_timeout,
            execution_timeout=execution_timeout,
            session_timeout=session_timeout,
            encoding_errors=encoding_errors,
            _pool=pool_manager,
            **kwargs,
        )
        self.pool_manager = pool_manager

    def _live(self) -> Any:
        if not self.is_open:
            raise SessionNotOpenError()
        return super()._live()

    @property
    def backend_session(self) -> BaseSession:
        return self


class ArtifactPooledSandboxSession(ArtifactSandboxSession):
    """``ArtifactSandboxSession`` on a pooled sandbox."""

    def __init__(self, pool_manager: ContainerPoolManager, enable_plotting: bool = True, **kwargs: Any) -> None:
        if enable_plotting and pool_manager.lang not in PLOT_LANGUAGES:
            raise LanguageNotSupportPlotError(pool_manager.lang)
        self.enable_plotting = enable_plotting
        self._plots = []
        self._session = PooledSandboxSession(pool_manager, **kwargs)


__all__ = [
    "ArtifactPooledSandboxSession",
    "ContainerPoolManager",
    "ContainerState",
    "ExhaustionStrategy",
    "PoolClosedError",
    "PoolConfig",
    "PoolExhaustedError",
    "PoolHealthCheckError",
    "PooledContainer",
    "PooledSandboxSession",
    "create_pool_manager",
]

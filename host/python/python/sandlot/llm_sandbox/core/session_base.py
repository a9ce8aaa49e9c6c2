"""``BaseSession``: one llm-sandbox session over one sandlot session.

llm-sandbox's keyword arguments map onto sandlot's session; what has no counterpart is
said with a ``UserWarning`` naming the argument, never dropped silently. The
differences are listed in ``docs/llm-sandbox.md``.
"""

from __future__ import annotations

import io
import logging
import re
import tarfile
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ... import errors as _errors
from ..const import DefaultImage, SandboxBackend, sandlot_backend
from ..data import ConsoleOutput, StreamCallback, with_execution
from ..exceptions import (
    CommandEmptyError,
    ContainerError,
    ImageNotFoundError,
    LanguageNotSupportedError,
    LibraryInstallationNotSupportedError,
    NotOpenSessionError,
    SandboxError,
    SandboxTimeoutError,
    SecurityError,
    SecurityViolationError,
    UnsupportedBackendError,
    ValidationError,
)
from ..local import DEFAULT_BLOCKED_SYSCALLS, LocalSandboxConfig
from ..security import SecurityPattern, SecurityPolicy, check, validate_package_name

logger = logging.getLogger("sandlot.llm_sandbox")

# Sessions of this process by container id, for ``container_id=``.
_open: dict[str, BaseSession] = {}
_open_lock = threading.Lock()

# The languages whose handlers install libraries in llm-sandbox (Java's does not).
_NO_INSTALL = frozenset({"java"})
_BACKENDS = {"docker", "podman", "kubernetes", "wasm", "native", "bubblewrap", "nsjail"}
# llm-sandbox's local backends, which run on sandlot's native backend with their own
# arguments (sandbox_config=, bwrap_path=, nsjail_path=) and their own rules: a 60 s
# default timeout, and an unknown argument is a TypeError.
_LOCAL = {"bubblewrap", "nsjail"}
# runtime_configs keys that ask for what sandlot's sandboxes already are.
_ALREADY = {"security_opt": "no-new-privileges is always set", "cap_drop": "every capability is dropped"}


@dataclass
class SessionConfig:
    """The settings of a session, as llm-sandbox's ``SessionConfig`` names them."""

    lang: str = "python"
    image: str | None = None
    dockerfile: str | None = None
    container_id: str | None = None
    verbose: bool = False
    workdir: str = "/sandbox"
    default_timeout: float | None = 60.0
    execution_timeout: float | None = None
    session_timeout: float | None = None
    security_policy: SecurityPolicy | None = None
    runtime_configs: dict[str, Any] = field(default_factory=dict)
    skip_environment_setup: bool = False
    encoding_errors: str = "strict"

    def __post_init__(self) -> None:
        if self.image and self.dockerfile:
            raise ValidationError("Only one of image or dockerfile can be provided")
        if self.dockerfile and self.container_id:
            raise ValidationError("Cannot use dockerfile with existing container_id")

    def get_execution_timeout(self) -> float | None:
        return self.execution_timeout or self.default_timeout


@dataclass(frozen=True)
class Container:
    """What stands for docker-py's ``Container``: its ``id`` (the sandbox's name) is
    what ``container_id=`` attaches to."""

    id: str
    name: str
    backend: str


@dataclass(frozen=True)
class LanguageHandler:
    """A language as llm-sandbox's handlers describe it."""

    name: str
    file_extension: str
    is_support_library_installation: bool
    is_support_plot_detection: bool


def translate(err: BaseException) -> BaseException:
    """The llm-sandbox exception for one of sandlot's errors."""
    message = str(err)
    if isinstance(err, _errors.BlockedError):
        return SecurityViolationError(message)
    if isinstance(err, _errors.NotInstalledError):
        return ImageNotFoundError(message)
    if isinstance(err, _errors.SessionEndedError):
        return NotOpenSessionError()
    if isinstance(err, (_errors.InvalidInputError, _errors.NotAllowedError, _errors.ConfigError)):
        return ValidationError(message)
    if isinstance(err, (_errors.UnavailableError, _errors.InternalError, _errors.ExhaustedError)):
        return ContainerError(message)
    return SandboxError(message)


def _mem_bytes(value: Any) -> int:
    """docker-py's ``mem_limit``: bytes, or ``"512m"``, ``"1g"``, ``"1GB"``."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(value).lower())
    if not m:
        raise ValidationError(f"mem_limit {value!r} is not a size: give bytes or e.g. '512m'")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)]
    return int(float(m.group(1)) * scale)


def _warn(what: str, why: str) -> None:
    warnings.warn(f"sandlot.llm_sandbox: {what} {why}", UserWarning, stacklevel=4)


def _client_settings(client: Any, backend: str) -> dict[str, str]:
    """The ``sandlot.toml`` settings a caller's engine client stands for."""
    if client is None:
        return {}
    if backend in ("docker", "podman"):
        api = getattr(client, "api", client)
        url = getattr(api, "base_url", None)
        if not isinstance(url, str):
            _warn("client=", f"({type(client).__name__}) has no base_url: sessions use the default engine")
            return {}
        # docker-py spells a Unix socket http+docker://localhost(unix socket path in
        # the adapter); a TCP engine is http(s)://host:port.
        if url.startswith("http+docker://") or url.startswith("http+unix://"):
            return {}
        if getattr(api, "_custom_adapter", None) is not None or url.startswith("https://"):
            _warn("client=", "uses TLS: sandlot takes certificates from DOCKER_CERT_PATH, not from the client")
        tcp = re.sub(r"^https?://", "tcp://", url)
        return {f"{backend}_host": tcp}
    if backend == "kubernetes":
        _warn("client=", "for Kubernetes is not used: sandlot reads KUBECONFIG (or ~/.kube/config)")
    return {}


class BaseSession:
    """A session with llm-sandbox's methods, running on sandlot.

    Each ``run`` is a fresh program, as in llm-sandbox (files persist, variables do
    not); ``InteractiveSandboxSession`` keeps state between runs."""

    def __init__(
        self,
        backend: str = "docker",
        lang: str = "python",
        image: str | None = None,
        dockerfile: str | None = None,
        keep_template: bool = False,
        commit_container: bool = False,
        verbose: bool = False,
        stream: bool = False,
        runtime_configs: dict[str, Any] | None = None,
        workdir: str = "/sandbox",
        security_policy: SecurityPolicy | None = None,
        default_timeout: float | None = None,
        execution_timeout: float | None = None,
        session_timeout: float | None = None,
        container_id: str | None = None,
        skip_environment_setup: bool = False,
        encoding_errors: str = "strict",
        libraries: list[str] | None = None,
        client: Any = None,
        *,
        _kernel: bool = False,
        _pool: Any = None,
        **kwargs: Any,
    ) -> None:
        self.backend = str(SandboxBackend(backend)) if _valid_backend(backend) else str(backend)
        if self.backend not in _BACKENDS:
            raise UnsupportedBackendError(self.backend)
        # The sandlot backend the session runs on (``native`` for ``bubblewrap``).
        self.engine = sandlot_backend(self.backend)
        if self.backend in _LOCAL and default_timeout is None:
            default_timeout = 60.0
        self.config = SessionConfig(
            lang=str(lang).lower(),
            image=image,
            dockerfile=dockerfile,
            container_id=container_id,
            verbose=verbose,
            workdir=workdir.rstrip("/") or "/",
            default_timeout=default_timeout,
            execution_timeout=execution_timeout,
            session_timeout=session_timeout,
            security_policy=security_policy,
            runtime_configs=dict(runtime_configs or {}),
            skip_environment_setup=skip_environment_setup,
            encoding_errors=encoding_errors,
        )
        if dockerfile:
            raise ValidationError(
                "dockerfile= is not supported: sandlot runs images it can vouch for. Build the "
                "image (docker build -t NAME .) and pass image=NAME, or pass libraries="
            )
        self.verbose = verbose
        self.stream = stream
        self.keep_template = keep_template
        self.commit_container = commit_container
        self.client = client
        self.logger = logger
        self.is_open = False
        self.using_existing_container = container_id is not None
        self.container: Container | None = None
        self._kernel = _kernel
        self._pool = _pool
        self._native: Any = None
        self._pending: list[str] = list(libraries or [])
        self._opened_at = 0.0
        self._timer: threading.Timer | None = None
        self._settings = _client_settings(client, self.backend)
        self._options = self._session_options(kwargs)
        self.docker_image = None if image in {d.value for d in DefaultImage} else image
        self.language_handler = _handler(self.config.lang)

    # ---- arguments -------------------------------------------------------------------

    def _session_options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {}
        configs = self.config.runtime_configs
        local = kwargs.pop("sandbox_config", None)
        if local is None and self.backend in _LOCAL:
            local = LocalSandboxConfig()
        if local is not None and self.engine != "native":
            _warn("sandbox_config=", f"is for the local backends and not applied on {self.engine}")
            local = None
        for name, default in (("bwrap_path", "bwrap"), ("nsjail_path", "nsjail")):
            path = kwargs.pop(name, None)
            if path not in (None, default):
                _warn(f"{name}={path!r}", "is not used: sandlot's native backend runs the bwrap on PATH")
        mounts = kwargs.pop("mounts", None)
        if mounts:
            _warn("mounts=", "are not mounted: sandlot never shares host folders; use copy_to_runtime")
        env = dict(kwargs.pop("env_vars", None) or {})
        policy: dict[str, Any] = {}
        for key, value in configs.items():
            if key == "pids_limit":
                policy["pids_limit"] = int(value)
            elif key == "nano_cpus":
                policy["cpu_millis"] = max(1, int(value) // 1_000_000)
            elif key in ("cpu_count", "cpus"):
                policy["cpu_millis"] = max(1, int(float(value) * 1000))
            elif key == "cpu_quota":
                period = int(configs.get("cpu_period") or 100_000)
                policy["cpu_millis"] = max(1, int(value) * 1000 // period)
            elif key == "cpu_period":
                pass
            elif key == "mem_limit":
                options["memory"] = _mem_bytes(value)
            elif key == "network_mode":
                options["network"] = "off" if value == "none" else "on"
                if value not in ("none", "bridge", "default"):
                    _warn(f"runtime_configs network_mode={value!r}", "runs with a network of its own (on)")
            elif key == "network_disabled":
                if value:
                    options["network"] = "off"
            elif key == "environment":
                pairs = value.items() if isinstance(value, dict) else (str(v).split("=", 1) for v in value)
                env.update({str(k): str(v) for k, v in pairs})
            elif key in _ALREADY:
                logger.debug("runtime_configs %s: %s", key, _ALREADY[key])
            elif key == "privileged" and value:
                _warn("runtime_configs privileged=True", "is refused: sandlot never runs a privileged sandbox")
            elif key in ("tty", "detach", "user", "working_dir", "read_only"):
                logger.debug("runtime_configs %s has no effect on sandlot", key)
            else:
                _warn(f"runtime_configs {key}={value!r}", "has no counterpart in sandlot and is not applied")
        if local is not None:
            self._local_options(local, options, env)
        if env:
            options["env"] = env
        if policy:
            options["policy"] = policy
        namespace = kwargs.pop("kube_namespace", None)
        if namespace and self.backend == "kubernetes" and namespace != "default":
            self._settings["kubernetes.namespace"] = namespace
        if kwargs.pop("pod_manifest", None):
            _warn("pod_manifest=", "is not used: sandlot builds its pods (see [kubernetes] pod_template)")
        if kwargs.pop("commit_image_tag", None) or self.commit_container:
            _warn("commit_container=", "is not supported: sandlot does not commit sandboxes to images")
        if self.keep_template:
            logger.debug("keep_template: sandlot never deletes the image a session ran in")
        if kwargs and self.backend in _LOCAL:
            raise TypeError(f"Unknown native sandbox options: {', '.join(sorted(kwargs))}")
        for name in kwargs:
            _warn(f"{name}=", "is not an argument sandlot knows and is ignored")
        return options

    @staticmethod
    def _local_options(config: LocalSandboxConfig, options: dict[str, Any], env: dict[str, str]) -> None:
        """llm-sandbox's ``LocalSandboxConfig`` as sandlot's session options."""
        network = config.network
        if network == "none":
            options["network"] = "off"
        elif network == "host":
            options["network"] = "on"
            _warn("sandbox_config network='host'", "gets a network of its own (on), through sandlot's egress proxy")
        else:
            raise ValidationError(f"sandbox_config network={network!r}: give 'none' or 'host'")
        if config.memory_limit_bytes is not None:
            options["memory"] = int(config.memory_limit_bytes)
        options["max_output"] = int(config.max_output_bytes)
        env.update({str(k): str(v) for k, v in (config.env or {}).items()})
        for name in ("cpu_time_limit", "file_size_limit", "open_files_limit"):
            if getattr(config, name) is not None:
                _warn(
                    f"sandbox_config {name}=",
                    "is not applied: sandlot limits a run's time (default_timeout), its CPU share "
                    "(runtime_configs cpus) and the workspace's size instead",
                )
        if tuple(config.seccomp.blocked_syscalls) != DEFAULT_BLOCKED_SYSCALLS:
            _warn("sandbox_config seccomp=", "is not applied: sandlot's jails load Docker's default seccomp profile")
        if config.max_artifact_bytes != 8 << 20:
            _warn("sandbox_config max_artifact_bytes=", "is not applied: sandlot caps the workspace's size instead")
        # read_only_paths and python_executable have nothing to do: the jail's root is
        # read-only whole, and the interpreter is the image's.

    # ---- lifecycle -------------------------------------------------------------------

    def open(self) -> None:
        if self.is_open:
            return
        if self.config.container_id is not None:
            self._attach(self.config.container_id)
            return
        try:
            self._native = self._open_native()
        except _errors.NotFoundError as err:
            raise LanguageNotSupportedError(self.config.lang) from err
        except _errors.SandlotError as err:
            raise translate(err) from err
        name = self._native.sandbox_name or f"{self.backend}-{uuid.uuid4().hex[:12]}"
        self.container = Container(id=name, name=name, backend=self.backend)
        with _open_lock:
            _open[name] = self
        self._started()

    def _open_native(self) -> Any:
        if self._pool is not None:
            return self._pool._open_native(self)
        from .._hosts import host_for

        libraries = [] if self.config.skip_environment_setup else self._checked_libraries(self._pending)
        if self.config.skip_environment_setup and self._pending:
            logger.info("skip_environment_setup: libraries %s are not installed", self._pending)
        self._pending = []
        return host_for(self._settings).session(
            self.config.lang,
            backend=self.engine,
            image=self.docker_image,
            libraries=libraries,
            one_shot=not self._kernel,
            **self._options,
        )

    def _attach(self, container_id: str) -> None:
        with _open_lock:
            owner = _open.get(container_id)
        if owner is None or owner._native is None or owner._native.closed:
            raise ContainerError(
                f"Container {container_id} not found: sandlot attaches only to a sandbox "
                "this process has open (another session's container.id)"
            )
        self._native = owner._native
        self.container = owner.container
        self._started()

    def _started(self) -> None:
        self.is_open = True
        self._opened_at = time.monotonic()
        if self.config.session_timeout:
            self._timer = threading.Timer(self.config.session_timeout, self.close)
            self._timer.daemon = True
            self._timer.start()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        native, self._native = self._native, None
        was_open, self.is_open = self.is_open, False
        if native is None or not was_open:
            return
        if self.using_existing_container:
            return  # attached: the sandbox belongs to the session that opened it
        with _open_lock:
            if self.container is not None:
                _open.pop(self.container.id, None)
        native.close()

    def __enter__(self) -> BaseSession:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    def _live(self) -> Any:
        if self.config.session_timeout and self._opened_at:
            if time.monotonic() - self._opened_at > self.config.session_timeout:
                self.close()
                raise SandboxTimeoutError(
                    f"Session timed out after {self.config.session_timeout} seconds",
                    timeout_duration=self.config.session_timeout,
                )
        if not self.is_open or self._native is None:
            raise NotOpenSessionError()
        return self._native

    # ---- running ---------------------------------------------------------------------

    def run(
        self,
        code: str,
        libraries: list[str] | None = None,
        timeout: float | None = None,
        on_stdout: StreamCallback | None = None,
        on_stderr: StreamCallback | None = None,
    ) -> ConsoleOutput:
        """Runs ``code`` as a new program; a non-zero exit is returned, a timeout raises
        ``SandboxTimeoutError`` (the program is killed), code the security policy finds
        unsafe raises ``SecurityViolationError`` without running."""
        native = self._live()
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        safe, violations = self.is_safe(code)
        if not safe:
            raise SecurityViolationError(
                "Code violates the security policy: " + "; ".join(v.description for v in violations)
            )
        libs = self._libraries_for_run(libraries)
        limit = timeout or self.config.execution_timeout or self.config.default_timeout or None
        execution = self._call(
            native.run, code, libraries=libs, timeout=limit, on_stdout=on_stdout, on_stderr=on_stderr
        )
        return self._console(execution, limit)

    def _libraries_for_run(self, libraries: list[str] | None) -> list[str]:
        wanted = self._pending + list(libraries or [])
        self._pending = []
        if not wanted:
            return []
        if self.config.skip_environment_setup or self.config.lang in _NO_INSTALL:
            raise LibraryInstallationNotSupportedError(self.config.lang)
        return self._checked_libraries(wanted)

    def _checked_libraries(self, libraries: Iterable[str]) -> list[str]:
        checked = [validate_package_name(lib, self.config.lang) for lib in libraries]
        policy = self.config.security_policy
        restricted = {m.name for m in (policy.restricted_modules or [])} if policy else set()
        for lib in checked:
            base = re.split(r"[\[<>=!~@ ]", lib, maxsplit=1)[0]
            if base in restricted:
                raise SecurityViolationError(f"Library {base} is restricted by the security policy")
        return checked

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except _errors.CallbackError:
            raise
        except _errors.SandlotError as err:
            raise translate(err) from err

    def _console(self, execution: Any, limit: float | None) -> ConsoleOutput:
        if execution.timed_out:
            raise SandboxTimeoutError(
                f"Code execution timed out after {limit} seconds" if limit else "Code execution timed out",
                timeout_duration=limit,
            )
        errors = self.config.encoding_errors
        out = ConsoleOutput(
            exit_code=execution.exit_code,
            stderr=execution.stderr_bytes.decode("utf-8", errors),
            stdout=execution.stdout_bytes.decode("utf-8", errors),
        )
        return with_execution(out, execution)

    def execute_command(
        self,
        command: str,
        workdir: str | None = None,
        on_stdout: StreamCallback | None = None,
        on_stderr: StreamCallback | None = None,
    ) -> ConsoleOutput:
        """Runs ``command`` with ``sh -c`` in ``workdir`` (default: the workdir)."""
        native = self._live()
        if not command or not command.strip():
            raise CommandEmptyError()
        where = self._inside(workdir) if workdir else None
        execution = self._call(native.shell, command, workdir=where or None, on_stdout=on_stdout, on_stderr=on_stderr)
        return self._console(execution, None)

    def execute_commands(
        self,
        commands: list[str | tuple[str, str | None]],
        workdir: str | None = None,
        on_stdout: StreamCallback | None = None,
        on_stderr: StreamCallback | None = None,
    ) -> ConsoleOutput:
        """Runs each command in turn, stopping at the first that exits non-zero."""
        output = ConsoleOutput()
        for item in commands:
            command, where = item if isinstance(item, tuple) else (item, workdir)
            output = self.execute_command(command, workdir=where, on_stdout=on_stdout, on_stderr=on_stderr)
            if output.exit_code:
                break
        return output

    def install(self, libraries: list[str] | None = None) -> None:
        """Checks ``libraries`` now; they are installed with the next run."""
        if not libraries:
            return
        if self.config.skip_environment_setup or self.config.lang in _NO_INSTALL:
            raise LibraryInstallationNotSupportedError(self.config.lang)
        self._pending.extend(self._checked_libraries(libraries))

    def is_safe(self, code: str) -> tuple[bool, list[SecurityPattern]]:
        """Whether ``code`` passes the security policy, and the patterns it breaks.
        Works before ``open()``."""
        return check(self.config.security_policy, code, self.config.lang)

    def environment_setup(self) -> None:
        """Nothing to do: sandlot prepares the sandbox when it opens."""

    # ---- files -----------------------------------------------------------------------

    def _inside(self, path: str) -> str:
        """``path`` (absolute under the workdir, or relative to it) as sandlot's
        workspace-relative path."""
        if ".." in PurePosixPath(path).parts:
            raise SecurityError(f"Path {path} must not contain '..'")
        workdir = PurePosixPath(self.config.workdir)
        p = PurePosixPath(path)
        if p.is_absolute():
            for root in (workdir, PurePosixPath("/workspace")):
                if p == root:
                    return ""
                if root in p.parents:
                    return str(p.relative_to(root))
            raise ValidationError(
                f"{path} is outside the workdir {self.config.workdir}: sandlot moves files only "
                "within the sandbox's workspace"
            )
        return str(p)

    def copy_to_runtime(self, src: str, dest: str) -> None:
        """Copies the host file or folder ``src`` to exactly ``dest`` in the sandbox."""
        native = self._live()
        target = self._inside(dest)
        source = Path(src)
        if not source.exists():
            raise FileNotFoundError(f"File {src} not found")
        if source.is_file():
            self._call(native.write_file, target, source.read_bytes())
            return
        for item in sorted(source.rglob("*")):
            if item.is_file() and not item.is_symlink():
                rel = item.relative_to(source).as_posix()
                self._call(native.write_file, f"{target}/{rel}" if target else rel, item.read_bytes())

    def copy_from_runtime(self, src: str, dest: str) -> None:
        """Copies the sandbox file ``src`` to exactly ``dest`` on the host, or the folder
        ``src`` to ``dest/<its name>/``. Empty files copy too."""
        native = self._live()
        source = self._inside(src)
        try:
            data = native.read_file(source)
        except _errors.SandlotError as err:
            if not self._is_folder(native, source):
                raise FileNotFoundError(f"File {src} not found in the sandbox") from err
            # sandlot's copy_out fills ``dest`` itself; llm-sandbox nests the folder.
            self._call(native.copy_out, source, str(Path(dest) / PurePosixPath(source).name))
            return
        target = Path(dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def _is_folder(self, native: Any, path: str) -> bool:
        parent, _, name = path.rpartition("/")
        try:
            return f"{name}/" in native.list_files(parent)
        except _errors.SandlotError:
            return False

    def get_archive(self, path: str) -> tuple[bytes, dict[str, Any]]:
        """A tar of the sandbox file or folder ``path`` and docker's stat of it."""
        native = self._live()
        source = self._inside(path)
        name = PurePosixPath(path).name
        buffer = io.BytesIO()
        with tempfile.TemporaryDirectory() as folder, tarfile.open(fileobj=buffer, mode="w") as tar:
            host = Path(folder) / name
            self.copy_from_runtime(path, str(host) if not self._is_folder(native, source) else folder)
            tar.add(host, arcname=name)
            size = host.stat().st_size if host.is_file() else 0
        return buffer.getvalue(), {"name": name, "size": size, "mode": 0o644, "mtime": "", "linkTarget": ""}

    # ---- what llm-sandbox exposed ----------------------------------------------------

    @property
    def python_executable_path(self) -> str:
        return "python3"

    @property
    def pip_executable_path(self) -> str:
        return "pip"

    @property
    def pip_cache_dir_path(self) -> str:
        return f"{self.config.workdir}/.sandbox-pip-cache"

    @property
    def session(self) -> Any:
        """The ``sandlot.Session`` underneath (``None`` before ``open()``)."""
        return self._native


def _valid_backend(name: Any) -> bool:
    try:
        SandboxBackend(name)
    except ValueError:
        return False
    return True


_EXT = {"python": "py", "javascript": "js", "java": "java", "cpp": "cpp", "go": "go", "ruby": "rb", "r": "R"}


def _handler(lang: str) -> LanguageHandler:
    return LanguageHandler(
        name=lang,
        file_extension=_EXT.get(lang, lang),
        is_support_library_installation=lang not in _NO_INSTALL,
        is_support_plot_detection=lang in ("python", "r"),
    )


__all__ = ["BaseSession", "Container", "SessionConfig"]

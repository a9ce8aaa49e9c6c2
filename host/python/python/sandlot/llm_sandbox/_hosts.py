"""The ``sandlot.Sandlot`` hosts the compatibility layer's sessions run on."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
from pathlib import Path

from .._native import Sandlot

_lock = threading.Lock()
_hosts: dict[tuple[tuple[str, str], ...], Sandlot] = {}
_folders: list[str] = []


def host_for(settings: dict[str, str] | None = None) -> Sandlot:
    """The shared host for sessions with these ``sandlot.toml`` settings: the host the
    environment configures when there are none (as the CLI finds it), else one whose
    configuration holds just them (``docker_host``, ``podman_host``,
    ``kubernetes.namespace``), so a docker-py client's base URL or a namespace
    reaches the engine they name."""
    key = tuple(sorted((settings or {}).items()))
    with _lock:
        host = _hosts.get(key)
        if host is None:
            host = Sandlot(_config_file(dict(key))) if key else Sandlot()
            _hosts[key] = host
        return host


def _config_file(settings: dict[str, str]) -> str:
    folder = tempfile.mkdtemp(prefix="sandlot-llm-sandbox-")
    _folders.append(folder)
    top = [f"{k} = {json.dumps(v)}" for k, v in settings.items() if "." not in k]
    tables: dict[str, list[str]] = {}
    for k, v in settings.items():
        if "." in k:
            table, name = k.split(".", 1)
            tables.setdefault(table, []).append(f"{name} = {json.dumps(v)}")
    text = "\n".join(top) + "\n"
    for table, lines in tables.items():
        text += f"[{table}]\n" + "\n".join(lines) + "\n"
    path = Path(folder) / "sandlot.toml"
    path.write_text(text)
    return str(path)


@atexit.register
def _remove_config_files() -> None:
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)

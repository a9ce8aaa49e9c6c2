"""Results, as llm-sandbox 0.3.46 shapes them (``llm_sandbox.data``): the same fields,
field order, repr and JSON keys.

Each result also carries sandlot's own ``Execution`` as ``.execution`` (``None`` for
results built by hand): how the run ended, its duration, files and findings.
"""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

StreamCallback = Callable[[str], None]


class FileType(Enum):
    PNG = "png"
    JPEG = "jpeg"
    PDF = "pdf"
    SVG = "svg"
    CSV = "csv"
    JSON = "json"
    TXT = "txt"
    HTML = "html"


_BY_MIME = {
    "image/png": FileType.PNG,
    "image/jpeg": FileType.JPEG,
    "application/pdf": FileType.PDF,
    "image/svg+xml": FileType.SVG,
    "text/csv": FileType.CSV,
    "application/json": FileType.JSON,
    "text/plain": FileType.TXT,
    "text/html": FileType.HTML,
}


def file_type_of(mime: str, name: str) -> FileType | None:
    """The ``FileType`` of a captured file, by its MIME type, then its extension."""
    if mime in _BY_MIME:
        return _BY_MIME[mime]
    suffix = name.rsplit(".", 1)[-1].lower()
    if suffix == "jpg":
        suffix = "jpeg"
    try:
        return FileType(suffix)
    except ValueError:
        return None


@dataclass(frozen=True)
class PlotOutput:
    """A captured plot. ``width``, ``height`` and ``dpi`` stay ``None``, as in llm-sandbox."""

    format: FileType
    content_base64: str
    width: int | None = None
    height: int | None = None
    dpi: int | None = None

    @property
    def content(self) -> bytes:
        """The plot's bytes (``content_base64`` decoded)."""
        return base64.b64decode(self.content_base64)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format.value,
            "content_base64": self.content_base64,
            "width": self.width,
            "height": self.height,
            "dpi": self.dpi,
        }


@dataclass(frozen=True)
class ConsoleOutput:
    """What a run or command printed and how it exited. A non-zero exit is returned,
    not raised."""

    exit_code: int = 0
    stderr: str = ""
    stdout: str = ""

    @property
    def execution(self) -> Any:
        """sandlot's ``Execution`` behind this result, or ``None``."""
        return self.__dict__.get("_execution")

    def text(self) -> str:
        warnings.warn(
            "The 'text' property is deprecated and will be removed in a future version. "
            "Use 'stdout' attribute directly instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.stdout

    def success(self) -> bool:
        return not self.exit_code

    def to_json(self, include_plots: bool = False) -> str:
        """The fields as JSON; with ``include_plots``, plots as objects with their
        base64 content (llm-sandbox raised ``TypeError`` there)."""
        result: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "plots":
                if not include_plots:
                    continue
                value = [plot.to_dict() for plot in value]
            result[f.name] = value
        return json.dumps(result, indent=2)


@dataclass(frozen=True)
class ExecutionResult(ConsoleOutput):
    """A run's output with the plots captured so far in the session."""

    plots: list[PlotOutput] = field(default_factory=list)


def with_execution(result: ConsoleOutput, execution: Any) -> ConsoleOutput:
    # Not a field: the constructor, repr, equality and JSON stay llm-sandbox's.
    object.__setattr__(result, "_execution", execution)
    return result


__all__ = ["ConsoleOutput", "ExecutionResult", "FileType", "PlotOutput", "StreamCallback"]

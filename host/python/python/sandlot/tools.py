"""Tools: functions of your program that sandboxed code may call.

Give a session tools and its code calls them as functions::

    import sandlot

    @sandlot.tool
    def price(fruit: str) -> int:
        "The price of a fruit, in cents."
        return {"apple": 120}[fruit]

    with sandlot.Sandlot().session("python", tools=[price]) as session:
        run = session.run("from sandlot_tools import price\\nprint(price(fruit='apple'))")
        print(run.stdout, run.tool_calls)

The function runs here, in your process, with your rights; the sandbox sends only the
arguments (checked against the tool's JSON Schema first) and gets back the JSON of the
result. An exception the function raises reaches the code as ``ToolError`` with its
message. Limits per run (calls, sizes, a timeout per call) are the session's.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Dict, Optional

__all__ = ["Tool", "tool"]

_JSON_TYPES = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    list: {"type": "array"},
    dict: {"type": "object"},
    type(None): {"type": "null"},
}


def _schema_of(annotation: Any) -> Dict[str, Any]:
    """The JSON Schema of a parameter's annotation: {} (anything) when it has none
    that JSON Schema can say."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation in _JSON_TYPES:
        return dict(_JSON_TYPES[annotation])
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        args = typing.get_args(annotation)
        schema: Dict[str, Any] = {"type": "array"}
        if origin is list and args:
            schema["items"] = _schema_of(args[0])
        return schema
    if origin is dict:
        return {"type": "object"}
    if origin is typing.Union or str(origin) == "types.UnionType":
        branches = [_schema_of(a) for a in typing.get_args(annotation)]
        return {"anyOf": branches} if all(branches) else {}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(annotation))}
    return {}


def schema_of(function: Callable[..., Any]) -> Dict[str, Any]:
    """The JSON Schema of `function`'s keyword arguments, from its signature: each
    parameter a property (typed from its annotation where JSON Schema can say it),
    those without a default required."""
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # unresolvable forward references: fall back to the raw ones
        hints = {}
    properties: Dict[str, Any] = {}
    required = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{function.__name__}: parameter {name!r} is positional-only; "
                "tools are called with named arguments"
            )
        properties[name] = _schema_of(hints.get(name, parameter.annotation))
        if parameter.default is parameter.empty:
            required.append(name)
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


class Tool:
    """A function that sandboxed code may call, by ``name``, with the arguments
    ``schema`` (a JSON Schema of ``"type": "object"``) describes.

    ``function`` is called with the arguments as keywords and returns anything
    ``json.dumps`` takes. ``name`` defaults to the function's, ``description`` to its
    docstring, ``schema`` to one made from its signature and annotations. Given a
    ``Tool``, it makes a copy with what is given here changed.
    """

    __slots__ = ("function", "name", "description", "schema")

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        schema: Optional[Dict[str, Any]] = None,
    ) -> None:
        if isinstance(function, Tool):
            # Another tool's function, with what is not given here taken from it.
            name = function.name if name is None else name
            description = function.description if description is None else description
            schema = function.schema if schema is None else schema
            function = function.function
        if not callable(function):
            raise TypeError(f"a tool's function must be callable, not {type(function).__name__}")
        self.function = function
        self.name = name if name is not None else function.__name__
        self.description = (
            description if description is not None else inspect.getdoc(function) or ""
        )
        self.schema = schema if schema is not None else schema_of(function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def tool(
    function: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    schema: Optional[Dict[str, Any]] = None,
) -> Any:
    """Makes `function` a ``Tool``: ``@tool`` or ``@tool(name=..., ...)``."""
    if function is None:
        return lambda f: Tool(f, name=name, description=description, schema=schema)
    return Tool(function, name=name, description=description, schema=schema)

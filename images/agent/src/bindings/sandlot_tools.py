"""The tools this session may call: functions of the host application.

`from sandlot_tools import NAME` gives one; `help(NAME)` shows its arguments;
`tools()` lists them all. Each takes its arguments by keyword and returns the tool's
value. A call that fails raises ToolError, or one of its subclasses: ToolArgumentError
(arguments that do not fit, or no such tool), ToolTimeout, ToolTooLarge,
ToolBudgetExceeded, ToolDenied, ToolCancelled, ToolProtocolError.

`sandlot_tools.aio` has the same functions as coroutines, for `asyncio.gather`:
each call waits on a thread of its own, so calls run side by side up to the
session's limit of concurrent calls.

Calls go to the host through the endpoint named in SANDLOT_TOOLS, which the agent
opens for each run that may call tools; from a shell, `sandlot-tool NAME 'JSON'`
does the same.
"""

import inspect as _inspect
import itertools as _itertools
import json as _json
import keyword as _keyword
import os as _os
import socket as _socket
import struct as _struct
import sys as _sys
import threading as _threading
import types as _types

_VARIABLE = "SANDLOT_TOOLS"
_PROTOCOL = 1
# Connections one process keeps to the endpoint; the agent takes 64 at most.
_MAX_CONNECTIONS = 32


class ToolError(Exception):
    """A tool call failed (`tool_error`); the base of every class below."""

    kind = "tool_error"


class ToolDenied(ToolError, PermissionError):
    """The host refused the call (`denied`)."""

    kind = "denied"


class ToolArgumentError(ToolError, TypeError):
    """The arguments do not fit the tool, or no tool has that name
    (`invalid_arguments`, `unknown_tool`)."""

    kind = "invalid_arguments"


class ToolTimeout(ToolError, TimeoutError):
    """The tool did not answer in its time (`timeout`)."""

    kind = "timeout"


class ToolCancelled(ToolError):
    """The run was cancelled while the tool ran (`cancelled`)."""

    kind = "cancelled"


class ToolTooLarge(ToolError):
    """The request or the result is over its cap (`too_large`)."""

    kind = "too_large"


class ToolBudgetExceeded(ToolError):
    """This run has used all the tool calls it may make (`budget_exceeded`)."""

    kind = "budget_exceeded"


class ToolProtocolError(ToolError):
    """The frame broke the protocol, or the endpoint failed (`protocol`)."""

    kind = "protocol"


_CLASS_OF_KIND = {
    "tool_error": ToolError,
    "denied": ToolDenied,
    "invalid_arguments": ToolArgumentError,
    "unknown_tool": ToolArgumentError,
    "timeout": ToolTimeout,
    "cancelled": ToolCancelled,
    "too_large": ToolTooLarge,
    "budget_exceeded": ToolBudgetExceeded,
    "protocol": ToolProtocolError,
}

_ids = _itertools.count(1)


class _Pool:
    """Idle connections to one endpoint, for one process: a call takes one (or opens
    one, up to the cap) and gives it back, so threads call side by side."""

    def __init__(self, address):
        self.address = address
        self.pid = _os.getpid()
        self.idle = []
        self.open = 0
        self.free = _threading.Condition()

    def take(self):
        with self.free:
            while not self.idle and self.open >= _MAX_CONNECTIONS:
                self.free.wait()
            if self.idle:
                return self.idle.pop()
            self.open += 1
        try:
            connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            connection.connect(_socket_address(self.address))
            return connection
        except OSError as error:
            self.lost(None)
            raise ToolProtocolError(
                f"cannot reach the tool endpoint ({error}): the run that offered the "
                "tools is over"
            ) from None

    def give_back(self, connection):
        with self.free:
            self.idle.append(connection)
            self.free.notify()

    def close_idle(self):
        with self.free:
            for connection in self.idle:
                connection.close()
            self.idle.clear()

    def lost(self, connection):
        if connection is not None:
            connection.close()
        with self.free:
            self.open -= 1
            self.free.notify()


def _socket_address(address):
    """A socket's path, or `@NAME` for an abstract socket."""
    return "\0" + address[1:] if address.startswith("@") else address


_pools = {}
_pools_lock = _threading.Lock()


def _pool():
    address = _os.environ.get(_VARIABLE, "")
    if not address:
        raise ToolProtocolError(
            "this run has no tools: open the session with tools (SANDLOT_TOOLS is not set)"
        )
    pid = _os.getpid()
    with _pools_lock:
        pool = _pools.get(address)
        # A forked child never shares its parent's connections.
        if pool is None or pool.pid != pid:
            # Each run has an endpoint of its own: the connections to an earlier one
            # (a kernel outlives its runs) lead nowhere now.
            for old in _pools.values():
                if old.pid == pid:
                    old.close_idle()
            _pools.clear()
            pool = _pools[address] = _Pool(address)
        return pool


def _read_exact(connection, n):
    data = bytearray()
    while len(data) < n:
        chunk = connection.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _exchange(request):
    """Sends one request frame and returns its answer (a dict with `ok`)."""
    request = dict(request, v=_PROTOCOL, id=next(_ids))
    try:
        body = _json.dumps(
            request, separators=(",", ":"), allow_nan=False, default=_plain
        ).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise ToolArgumentError(f"the arguments have no JSON form: {error}") from None
    pool = _pool()
    connection = pool.take()
    try:
        connection.sendall(_struct.pack("<I", len(body)) + body)
        (size,) = _struct.unpack("<I", _read_exact(connection, 4))
        answer = _read_exact(connection, size)
    except (OSError, EOFError):
        pool.lost(connection)
        raise ToolProtocolError(
            "the tool endpoint closed the connection: the run is over, the sandbox "
            "holds too many connections to it, or it is at its process limit"
        ) from None
    pool.give_back(connection)
    try:
        answer = _json.loads(answer)
    except ValueError:
        raise ToolProtocolError("the answer is not JSON") from None
    if not isinstance(answer, dict) or answer.get("id") != request["id"]:
        raise ToolProtocolError("the answer does not match the call")
    return answer


def _plain(value):
    """JSON for what json does not know: numpy arrays and scalars, sets."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def _raise(answer):
    error = answer.get("error") or {}
    kind = error.get("kind", "protocol")
    raise _CLASS_OF_KIND.get(kind, ToolError)(error.get("message", kind))


_listings = {}


def tools():
    """The tools this run may call: a dict each, with `name`, `description` and
    `inputSchema` (JSON Schema of the arguments)."""
    address = _os.environ.get(_VARIABLE, "")
    listed = _listings.get(address)
    if listed is None:
        answer = _exchange({"op": "list"})
        if not answer.get("ok"):
            _raise(answer)
        listed = {d["name"]: d for d in answer.get("tools", []) if isinstance(d, dict)}
        _listings.clear()
        _listings[address] = listed
    return [dict(d) for d in listed.values()]


def call(name, arguments=None):
    """Calls the tool `name` with `arguments` (a dict); returns its value."""
    answer = _exchange({"op": "call", "tool": name, "args": arguments or {}})
    if answer.get("ok"):
        return answer.get("value")
    _raise(answer)


class _Omitted:
    """The default of an optional argument: it is not sent."""

    def __repr__(self):
        return "..."


_OMITTED = _Omitted()
_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


class _Hint:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _hint(schema):
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        return _Hint(" | ".join(_TYPES.get(k, "object") for k in kind))
    if isinstance(kind, str):
        return _Hint(_TYPES.get(kind, "object"))
    return _inspect.Parameter.empty


def _function(descriptor, asynchronous):
    name = descriptor["name"]
    schema = descriptor.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parameters = []
    # Arguments the signature cannot name (not identifiers, or any at all where the
    # schema allows more properties) are taken as `**more`.
    odd = schema.get("additionalProperties", True) is not False and not properties
    for key in sorted(properties, key=lambda k: k not in required):
        if not key.isidentifier() or _keyword.iskeyword(key):
            odd = True
            continue
        parameters.append(
            _inspect.Parameter(
                key,
                _inspect.Parameter.KEYWORD_ONLY,
                default=_inspect.Parameter.empty if key in required else _OMITTED,
                annotation=_hint(properties[key]),
            )
        )
    if odd:
        parameters.append(_inspect.Parameter("more", _inspect.Parameter.VAR_KEYWORD))
    signature = _inspect.Signature(parameters)

    def arguments_of(args, kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise ToolArgumentError(f"{name}: {error}") from None
        sent = dict(bound.arguments.pop("more", None) or {}) if odd else {}
        sent.update((k, v) for k, v in bound.arguments.items() if v is not _OMITTED)
        return sent

    if asynchronous:

        async def tool(*args, **kwargs):
            import asyncio

            sent = arguments_of(args, kwargs)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, call, name, sent)

    else:

        def tool(*args, **kwargs):
            return call(name, arguments_of(args, kwargs))

    lines = [descriptor.get("description") or name]
    documented = [
        (k, p) for k, p in properties.items() if isinstance(p, dict) and p.get("description")
    ]
    if documented:
        lines += ["", "Arguments:"]
        lines += [f"    {k}: {p['description']}" for k, p in documented]
    tool.__name__ = tool.__qualname__ = name
    tool.__module__ = "sandlot_tools.aio" if asynchronous else "sandlot_tools"
    tool.__doc__ = "\n".join(lines)
    tool.__signature__ = signature
    tool.descriptor = descriptor
    return tool


def _lookup(name, asynchronous):
    if name.startswith("__"):
        raise AttributeError(name)
    listed = {d["name"]: d for d in tools()}
    if name not in listed:
        may = ", ".join(sorted(listed)) or "none"
        raise AttributeError(f"no tool named {name!r} in this run; it may call: {may}")
    return _function(listed[name], asynchronous)


def __getattr__(name):
    return _lookup(name, False)


def __dir__():
    return sorted(set(__all__) | {d["name"] for d in tools()})


aio = _types.ModuleType(
    "sandlot_tools.aio",
    "The tools as coroutines: `await search(query=...)`, side by side with "
    "asyncio.gather.",
)
aio.__getattr__ = lambda name: _lookup(name, True)
aio.__dir__ = lambda: sorted(d["name"] for d in tools())
_sys.modules["sandlot_tools.aio"] = aio

__all__ = [
    "ToolError",
    "ToolDenied",
    "ToolArgumentError",
    "ToolTimeout",
    "ToolCancelled",
    "ToolTooLarge",
    "ToolBudgetExceeded",
    "ToolProtocolError",
    "tools",
    "call",
    "aio",
]

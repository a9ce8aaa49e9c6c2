"""sandlot's Python kernel: runs cells of code in one interpreter, so variables,
functions and imports persist from one run to the next.

The agent sends each cell on the descriptor in SANDLOT_CELL_FD, framed as
`sandlot-cell CODE STDIN ENV CWD` plus that many bytes of each; the kernel answers
`ready` once, then each cell's exit status, on the descriptor in SANDLOT_DONE_FD.
SIGINT interrupts the running cell (KeyboardInterrupt), never the kernel.
"""


def _sandlot_kernel():
    import os
    import sys

    # Libraries installed later land on PYTHONPATH. The import system remembers a
    # directory that was missing when it first looked (at start-up already) and never
    # looks again: make them, and forget that they were missing.
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry:
            os.makedirs(entry, exist_ok=True)
            if sys.path_importer_cache.get(entry, False) is None:
                del sys.path_importer_cache[entry]

    # Only built-in modules up front: `ast`, `signal`, `traceback` and `linecache`
    # import enum, re and tokenize, milliseconds of every sandbox's start that most
    # sessions never need. `_ast` and `_signal` are what those modules wrap.
    import _ast
    import _signal
    import builtins
    import io

    cells = os.fdopen(int(os.environ.pop("SANDLOT_CELL_FD")), "rb", buffering=0)
    done = os.fdopen(int(os.environ.pop("SANDLOT_DONE_FD")), "wb", buffering=0)
    # The cells' namespace is a fresh `__main__`, so what they define pickles, and
    # `if __name__ == "__main__":` runs.
    main = type(sys)("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    names = main.__dict__
    running = [False]

    def interrupt(_signum, _frame):
        # Between cells an interrupt has nothing to stop.
        if running[0]:
            raise KeyboardInterrupt

    _signal.signal(_signal.SIGINT, interrupt)
    # A cell's `sys.exit()` ends the cell; the kernel itself leaves through this.
    leave = os._exit
    # A process the cell forked that comes back here is a copy of the kernel: it must
    # never answer for a cell nor read the next one.
    kernel = os.getpid()

    def read_exact(n):
        data = b""
        while len(data) < n:
            chunk = cells.read(n - len(data))
            if not chunk:
                leave(0)
            data += chunk
        return data

    def read_cell():
        header = b""
        while not header.endswith(b"\n"):
            byte = cells.read(1)
            if not byte:
                leave(0)
            header += byte
        fields = header.split()
        if len(fields) != 5 or fields[0] != b"sandlot-cell":
            sys.stderr.write("sandlot kernel: malformed cell header %r\n" % header)
            leave(2)
        return [read_exact(int(n)) for n in fields[1:]]

    # Each cell's source, for tracebacks to quote: handed to `linecache` when
    # something first imports it (a traceback, a warning), and from then on as each
    # cell runs.
    sources = {}

    def remember(lines, filename):
        source = sources[filename]
        lines.cache[filename] = (len(source), None, source.splitlines(True), filename)

    class LinecacheHook:
        def find_spec(self, name, path=None, target=None):
            if name != "linecache":
                return None
            sys.meta_path.remove(self)
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                spec = find(name, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
            # The path finder makes a loader for each module it finds: this one's
            # loading can be extended without touching any other module's.
            loader = spec.loader
            if loader is not None and not isinstance(loader, type):
                load = loader.exec_module

                def exec_module(module):
                    load(module)
                    for filename in sources:
                        remember(module, filename)

                loader.exec_module = exec_module
            return spec

    if "linecache" not in sys.modules:
        sys.meta_path.insert(0, LinecacheHook())

    def show_error(kind, value, tb):
        import traceback

        # The kernel's own frames are noise: the traceback starts in the cell, and
        # ends where the cell's code was when the interrupt handler raised.
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
            tb = tb.tb_next
        last = tb
        while last is not None and last.tb_next is not None:
            if last.tb_next.tb_frame.f_code is interrupt.__code__:
                last.tb_next = None
            else:
                last = last.tb_next
        traceback.print_exception(kind, value, tb)

    def execute(code, filename):
        source = code.decode("utf-8", "surrogateescape")
        sources[filename] = source
        lines = sys.modules.get("linecache")
        if lines is not None:
            remember(lines, filename)
        tree = compile(source, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        last = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            last = _ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec", dont_inherit=True), names)
        if last is not None:
            value = eval(compile(last, filename, "eval", dont_inherit=True), names)
            if value is not None:
                # As a notebook cell shows its last expression, through the hook
                # a front end may replace (as the wasm runtime's cells do).
                sys.displayhook(value)

    def apply(env):
        saved = {}
        for item in env.split(b"\0"):
            if item:
                key, _, value = item.partition(b"=")
                key = os.fsdecode(key)
                # The first value is the one to restore, whatever the run repeats.
                saved.setdefault(key, os.environ.get(key))
                os.environ[key] = os.fsdecode(value)
        return saved

    def restore(saved):
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def flush():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except Exception:
                pass

    done.write(b"ready\n")
    count = 0
    while True:
        code, stdin, env, cwd = read_cell()
        count += 1
        status = 0
        saved = {}
        try:
            try:
                cwd = os.fsdecode(cwd)
                os.chdir(cwd)
                # As `python3 main.py` would: the working directory's modules import.
                if sys.path and sys.path[0] != cwd:
                    sys.path[0] = cwd
                saved = apply(env)
                sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
                running[0] = True
                try:
                    execute(code, "<cell-%d>" % count)
                finally:
                    running[0] = False
            except SystemExit as e:
                if e.code is None:
                    status = 0
                elif isinstance(e.code, int):
                    status = e.code
                else:
                    sys.stderr.write("%s\n" % (e.code,))
                    status = 1
            except KeyboardInterrupt:
                if os.getpid() != kernel:
                    # A copy the cell forked, interrupted with the kernel's process
                    # group: the kernel reports the interrupt once. Hundreds of copies
                    # (a fork bomb at its time limit) each printing it would starve
                    # the kernel past its grace.
                    flush()
                    leave(130)
                show_error(*sys.exc_info())
                status = 130
            except BaseException:
                show_error(*sys.exc_info())
                status = 1
            restore(saved)
            flush()
        except KeyboardInterrupt:
            # An interrupt that came as the cell ended: the cell is over anyway.
            running[0] = False
            status = status or 130
        if os.getpid() != kernel:
            flush()
            leave(status & 0xFF)
        # As a process's exit status would be.
        done.write(b"%d\n" % (status & 0xFF))


_sandlot_kernel()

//! A Python kernel's namespace through serialisation: what a snapshot holds of a
//! session on a backend that cannot capture the interpreter's memory (containers,
//! native). Variables are pickled one by one; modules are kept by name and imported
//! again; functions and classes defined in the session are kept as their source (the
//! kernel keeps each cell's). What cannot be kept (an open file, a generator, a
//! socket) is named in the snapshot, and a restore that cannot put back something it
//! kept fails, saying what: never a silent partial restore.
//!
//! Both run inside the sandbox, in the kernel, as the host's own code (not through
//! the analysis gate, as the plot prelude): the pickle is made and read by the
//! sandboxed interpreter, never by the host.

use super::state::Session;
use crate::error::{Error, Result};
use std::time::Duration;

/// Where the namespace is written, relative to the workspace: it travels with the
/// files, and the restore removes it.
pub(crate) const FILE: &str = ".sandlot/namespace.pickle";

/// The time and output the save and the load may take: a large frame pickles for a
/// while.
const HOST_CODE_LIMITS: (Duration, usize) = (Duration::from_secs(300), 1 << 20);

/// Writes the namespace to [`FILE`] and prints, as JSON, the names it could not keep.
const SAVE: &str = r#"
def __sandlot_save():
    import ast, json, linecache, os, pickle, sys, textwrap, types
    names = sys.modules["__main__"].__dict__
    modules, sources, values, unsaved = {}, [], {}, []
    cells = sorted(
        (k for k in linecache.cache if k.startswith("<cell-")),
        key=lambda k: int(k[6:-1]),
        reverse=True,
    )
    def defined(name):
        # The newest cell that defines it (a class's source is not found by
        # `inspect` outside a file).
        for cell in cells:
            lines = linecache.getlines(cell)
            try:
                tree = ast.parse("".join(lines))
            except SyntaxError:
                continue
            kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            found = [n for n in ast.walk(tree) if isinstance(n, kinds) and n.name == name]
            if found:
                node = max(found, key=lambda n: n.lineno)
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                return textwrap.dedent("".join(lines[start - 1:node.end_lineno]))
        raise OSError("no source")
    for name, value in list(names.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        elif isinstance(value, (types.FunctionType, type)) and value.__module__ == "__main__" \
                and value.__name__ == name:
            try:
                sources.append((name, defined(name)))
            except OSError:
                unsaved.append(name)
        else:
            try:
                values[name] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                unsaved.append(name)
    os.makedirs(".sandlot", exist_ok=True)
    with open(".sandlot/namespace.pickle", "wb") as f:
        pickle.dump({"modules": modules, "sources": sources, "values": values}, f)
    print(json.dumps(sorted(unsaved)))
__sandlot_save()
del __sandlot_save
"#;

/// Reads [`FILE`] back into the namespace, removes it, and prints, as JSON, what
/// could not be put back (with why).
const LOAD: &str = r#"
def __sandlot_load():
    import importlib, json, os, pickle, sys
    names = sys.modules["__main__"].__dict__
    with open(".sandlot/namespace.pickle", "rb") as f:
        state = pickle.load(f)
    os.remove(".sandlot/namespace.pickle")
    failed = {}
    def source(name, text):
        exec(compile(text, "<restored " + name + ">", "exec", dont_inherit=True), names)
    def value(name, data):
        names[name] = pickle.loads(data)
    pending = [(source, n, t) for n, t in state["sources"]]
    pending += [(value, n, d) for n, d in state["values"].items()]
    for name, module in state["modules"].items():
        try:
            names[name] = importlib.import_module(module)
        except Exception as e:
            failed[name] = repr(e)
    # A function's default may be a variable, an instance's class a function's
    # source: what fails is tried again once the rest is back.
    for _ in range(2):
        retry = []
        for put, name, what in pending:
            try:
                put(name, what)
                failed.pop(name, None)
            except Exception as e:
                failed[name] = repr(e)
                retry.append((put, name, what))
        pending = retry
    print(json.dumps(failed))
__sandlot_load()
del __sandlot_load
"#;

impl Session {
    /// Whether a snapshot of this session keeps its namespace by serialisation: a
    /// Python kernel on a backend that cannot capture its memory.
    pub(super) fn keeps_namespace(&self) -> bool {
        self.handler.info().id == "python" && self.kernel.is_some() && self.keeps_state()
    }

    /// Runs the host's `code` in the kernel, with the session's environment and
    /// [`HOST_CODE_LIMITS`]; its stdout.
    fn in_kernel(&mut self, code: &str, what: &str) -> Result<String> {
        let env = self.env.clone();
        self.host_code(code, &env, HOST_CODE_LIMITS, what)
    }

    /// Writes the namespace into the workspace; the names it could not keep.
    pub(super) fn save_namespace(&mut self) -> Result<Vec<String>> {
        let said = self.in_kernel(SAVE, "saving the session's variables")?;
        serde_json::from_str(said.trim()).map_err(|e| Error::Runtime {
            runtime: self.backend_name.to_string(),
            reason: format!("saving the session's variables said `{}`: {e}", said.trim()),
        })
    }

    /// Puts the namespace saved in the workspace back; fails naming what it could
    /// not.
    pub(super) fn load_namespace(&mut self) -> Result<()> {
        let said = self.in_kernel(LOAD, "restoring the session's variables")?;
        let failed: std::collections::BTreeMap<String, String> = serde_json::from_str(said.trim())
            .map_err(|e| Error::Runtime {
                runtime: self.backend_name.to_string(),
                reason: format!(
                    "restoring the session's variables said `{}`: {e}",
                    said.trim()
                ),
            })?;
        if failed.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = failed
            .iter()
            .map(|(name, why)| format!("{name} ({why})"))
            .collect();
        Err(Error::InvalidSnapshot {
            reason: format!(
                "its variables could not all be put back here: {}",
                listed.join(", ")
            ),
        })
    }
}

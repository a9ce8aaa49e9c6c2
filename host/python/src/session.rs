//! [`Session`]: a sandbox for one language, as Python holds it, and the
//! [`Interrupt`] that stops its run from elsewhere.

use crate::blocking::{detached, interruptible};
use crate::errors::{Failure, OrRaise};
use crate::execution::Execution;
use crate::options::RunArgs;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use sandlot::ErrorKind;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Stops a run from another thread, or from a signal handler: pass it to
/// ``Session.run(interrupt=...)``, then call ``interrupt()``. The run ends with
/// ``end_reason == "interrupted"``; the session stays usable. Ctrl-C does this by
/// itself for a run on the main thread.
#[pyclass(module = "sandlot", frozen)]
#[derive(Default)]
pub(crate) struct Interrupt {
    inner: sandlot::Interrupt,
}

#[pymethods]
impl Interrupt {
    #[new]
    fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Stops the run that holds this interrupt, and every later run given it until
    /// ``reset()``.
    fn interrupt(&self) {
        self.inner.interrupt();
    }

    /// Whether ``interrupt()`` was called since the last ``reset()``.
    #[getter]
    fn interrupted(&self) -> bool {
        self.inner.is_interrupted()
    }

    /// Makes it ready for another run.
    fn reset(&self) {
        self.inner.reset();
    }
}

/// A sandbox for one language, from ``Sandlot.session()``. State — files, and
/// variables where the backend keeps a kernel — lasts from one run to the next and is
/// never shared with another session.
///
/// Use it as a context manager, or call ``close()``: closing removes the sandbox
/// (the container, on Docker). A closed session raises ``SessionEndedError``.
#[pyclass(module = "sandlot", frozen)]
pub(crate) struct Session {
    /// `None` once closed. Shared with the thread a run happens on.
    inner: Arc<Mutex<Option<sandlot::Session>>>,
    /// Keeps the pools the session may draw from open while it lives: the
    /// `Sandlot` that opened it, held as any object so this module needs no more.
    _owner: Py<PyAny>,
    language: String,
    backend: String,
    sandbox_name: Option<String>,
    unenforced: Vec<String>,
    passed_over: Vec<(String, String)>,
}

impl Session {
    pub(crate) fn new(session: sandlot::Session, owner: Py<PyAny>) -> Session {
        Session {
            language: session.language().to_string(),
            backend: session.backend().to_string(),
            sandbox_name: session.sandbox_name(),
            unenforced: session
                .unenforced()
                .iter()
                .map(crate::execution::name_of)
                .collect(),
            passed_over: session
                .passed_over()
                .iter()
                .map(|(name, why)| (name.to_string(), why.clone()))
                .collect(),
            inner: Arc::new(Mutex::new(Some(session))),
            _owner: owner,
        }
    }

    /// Calls `work` on the open session with the GIL released (see
    /// [`crate::blocking`]); `interrupt` is set by Ctrl-C meanwhile.
    fn with_session<T: Send + 'static>(
        &self,
        py: Python<'_>,
        interrupt: Option<sandlot::Interrupt>,
        work: impl FnOnce(&mut sandlot::Session) -> sandlot::Result<T> + Send + 'static,
    ) -> PyResult<T> {
        let inner = self.inner.clone();
        let work = move || -> Result<T, Failure> {
            let mut guard = inner.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut() {
                Some(session) => work(session).map_err(Failure::from),
                None => Err(closed()),
            }
        };
        let done = match interrupt {
            Some(interrupt) => interruptible(py, &interrupt, work)?,
            None => detached(py, || {}, work)?,
        };
        done.or_raise(py)
    }

    /// A run or a shell command, with its callbacks finished.
    fn execute(
        &self,
        py: Python<'_>,
        args: RunArgs<'_>,
        interrupt: Option<&Bound<'_, Interrupt>>,
        work: impl FnOnce(
                &mut sandlot::Session,
                sandlot::RunOptions,
            ) -> sandlot::Result<sandlot::Execution>
            + Send
            + 'static,
    ) -> PyResult<Execution> {
        let interrupt = interrupt.map(|i| i.get().inner.clone()).unwrap_or_default();
        let (options, callbacks) = args.options(py, interrupt.clone())?;
        let ran = self.with_session(py, Some(interrupt), move |session| work(session, options));
        let failed = callbacks.finish(py);
        let execution = Execution::new(py, ran?)?;
        match failed {
            None => Ok(execution),
            Some(cause) => Err(callback_error(py, cause, execution)),
        }
    }
}

/// The error for a session used after `close()`.
fn closed() -> Failure {
    Failure {
        kind: ErrorKind::SessionEnded,
        message: "the session is closed; open another with Sandlot.session()".into(),
    }
}

/// `sandlot.CallbackError` for a run whose callback raised `cause`; it carries the
/// run's `execution`.
fn callback_error(py: Python<'_>, cause: PyErr, execution: Execution) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let class = py.import("sandlot.errors")?.getattr("CallbackError")?;
        let message = format!(
            "an output callback raised {}; the run went on to its end (see .execution)",
            cause.value(py).repr()?
        );
        let error = class.call1((message, Py::new(py, execution)?))?;
        let error = PyErr::from_value(error);
        error.set_cause(py, Some(cause.clone_ref(py)));
        Ok(error)
    })();
    made.unwrap_or_else(|e| e)
}

#[pymethods]
impl Session {
    /// Runs ``code`` and returns its ``Execution``. A program that fails is not an
    /// exception: look at ``exit_code``. Exceptions are for what kept the code from
    /// running (``BlockedError`` when the policy refused it, ``SessionEndedError``...).
    ///
    /// ``timeout`` (seconds) and ``max_output`` override the session's;
    /// ``libraries`` are installed first where the backend can; ``env`` adds
    /// variables; ``stdin`` is str or bytes; ``args`` are the program's arguments
    /// (one-shot sessions only); ``on_stdout``/``on_stderr`` are called with each
    /// piece of output as it is written; ``interrupt`` stops the run when set.
    #[pyo3(signature = (code, *, timeout=None, libraries=None, env=None, stdin=None, args=None, workdir=None, max_output=None, on_stdout=None, on_stderr=None, interrupt=None))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        code: String,
        timeout: Option<f64>,
        libraries: Option<Vec<String>>,
        env: Option<Bound<'py, PyDict>>,
        stdin: Option<Bound<'py, PyAny>>,
        args: Option<Vec<String>>,
        workdir: Option<String>,
        max_output: Option<Bound<'py, PyAny>>,
        on_stdout: Option<Bound<'py, PyAny>>,
        on_stderr: Option<Bound<'py, PyAny>>,
        interrupt: Option<Bound<'py, Interrupt>>,
    ) -> PyResult<Execution> {
        let args = RunArgs {
            timeout,
            env,
            stdin,
            workdir,
            max_output,
            on_stdout,
            on_stderr,
            libraries,
            args,
        };
        self.execute(py, args, interrupt.as_ref(), move |session, options| {
            session.run_with(&code, options)
        })
    }

    /// Runs ``command`` in the sandbox's shell (``sh -c``), on container backends.
    #[pyo3(signature = (command, *, timeout=None, env=None, stdin=None, workdir=None, max_output=None, on_stdout=None, on_stderr=None, interrupt=None))]
    #[allow(clippy::too_many_arguments)]
    fn shell<'py>(
        &self,
        py: Python<'py>,
        command: String,
        timeout: Option<f64>,
        env: Option<Bound<'py, PyDict>>,
        stdin: Option<Bound<'py, PyAny>>,
        workdir: Option<String>,
        max_output: Option<Bound<'py, PyAny>>,
        on_stdout: Option<Bound<'py, PyAny>>,
        on_stderr: Option<Bound<'py, PyAny>>,
        interrupt: Option<Bound<'py, Interrupt>>,
    ) -> PyResult<Execution> {
        let args = RunArgs {
            timeout,
            env,
            stdin,
            workdir,
            max_output,
            on_stdout,
            on_stderr,
            ..RunArgs::default()
        };
        self.execute(py, args, interrupt.as_ref(), move |session, options| {
            session.execute_command_with(&command, options)
        })
    }

    /// The contents of ``path`` (relative to the workspace) in the sandbox.
    fn read_file<'py>(&self, py: Python<'py>, path: String) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.with_session(py, None, move |s| s.read_file(&path))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Writes ``data`` (bytes, or str as UTF-8) to ``path`` (relative to the
    /// workspace) in the sandbox, making its folders.
    fn write_file(&self, py: Python<'_>, path: String, data: Bound<'_, PyAny>) -> PyResult<()> {
        let contents = crate::convert::bytes_or_str(&data, "data")?;
        self.with_session(py, None, move |s| s.write_file(&path, &contents))
    }

    /// The names in the sandbox folder ``path`` (``""``: the workspace), sorted; a
    /// folder's name ends with ``/``.
    #[pyo3(signature = (path=String::new()))]
    fn list_files(&self, py: Python<'_>, path: String) -> PyResult<Vec<String>> {
        let listing = self.with_session(py, None, move |s| s.list_files(&path))?;
        Ok(listing
            .entries
            .into_iter()
            .map(|entry| match entry.is_dir {
                true => format!("{}/", entry.name),
                false => entry.name.to_string(),
            })
            .collect())
    }

    /// What ``path`` (``""``: the workspace) is, a link at its end not followed: a
    /// dict with ``kind`` (``"file"``, ``"dir"``, ``"link"`` or ``"other"``),
    /// ``size`` in bytes, ``mode`` (permission bits) and ``modified`` (seconds since
    /// the epoch, or None). Raises ``sandlot.NotFoundError`` if nothing is there.
    #[pyo3(signature = (path=String::new()))]
    fn file_info<'py>(&self, py: Python<'py>, path: String) -> PyResult<Bound<'py, PyDict>> {
        use sandlot::backend::FileKind;
        let info = self.with_session(py, None, move |s| s.file_info(&path))?;
        let kind = match info.kind {
            FileKind::File => "file",
            FileKind::Directory => "dir",
            FileKind::Link => "link",
            _ => "other",
        };
        let modified = info.modified.and_then(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64())
        });
        let dict = PyDict::new(py);
        dict.set_item("kind", kind)?;
        dict.set_item("size", info.size)?;
        dict.set_item("mode", info.mode)?;
        dict.set_item("modified", modified)?;
        Ok(dict)
    }

    /// Makes the sandbox folder ``path`` and its parents; True if it was made, False
    /// if it was there already.
    fn make_dir(&self, py: Python<'_>, path: String) -> PyResult<bool> {
        self.with_session(py, None, move |s| s.make_dir(&path))
    }

    /// Removes the sandbox file, link (never what it points to) or folder ``path``,
    /// with everything in it. Raises ``sandlot.NotFoundError`` if nothing is there.
    fn remove(&self, py: Python<'_>, path: String) -> PyResult<()> {
        self.with_session(py, None, move |s| s.remove_path(&path))
    }

    /// Moves the sandbox file, link or folder ``src`` to ``dest``, making ``dest``'s
    /// folders and replacing a file there.
    fn rename(&self, py: Python<'_>, src: String, dest: String) -> PyResult<()> {
        self.with_session(py, None, move |s| s.rename(&src, &dest))
    }

    /// Copies the host file or folder ``src`` into the sandbox folder ``dest``
    /// (``""``: the workspace). Links in a folder are left out.
    #[pyo3(signature = (src, dest=String::new()))]
    fn copy_in(&self, py: Python<'_>, src: PathBuf, dest: String) -> PyResult<()> {
        self.with_session(py, None, move |s| s.copy_in(&src, &dest))
    }

    /// Copies the sandbox file or folder ``src`` out into the host folder ``dest``
    /// (made if missing) and returns the paths of the files written. Nothing is
    /// written outside ``dest``, and no link is.
    fn copy_out(&self, py: Python<'_>, src: String, dest: PathBuf) -> PyResult<Vec<PathBuf>> {
        let into = dest.clone();
        let copied = self.with_session(py, None, move |s| s.copy_out(&src, &into))?;
        Ok(copied
            .files
            .iter()
            .map(|file| dest.join(file.as_str()))
            .collect())
    }

    /// Replaces the session's request rules (``"GET api.github.com/repos/**"``,
    /// ``"deny DELETE *.example.com"``; ``[]`` lifts them) from its code's next
    /// request on, and returns the rules now in force. Rules narrow an allow-list:
    /// a session without one, or a rule for a host it does not list, raises
    /// ``InvalidInputError`` and changes nothing.
    fn update_network(&self, py: Python<'_>, requests: Vec<String>) -> PyResult<Vec<String>> {
        let rules = sandlot::egress::RequestRules::try_from(requests)
            .map_err(|e| crate::errors::invalid(py, e.to_string()))?;
        self.with_session(py, None, move |s| {
            s.update_network(sandlot::session::NetworkUpdate::requests(rules))?;
            Ok(s.policy()
                .requests
                .rules()
                .iter()
                .map(ToString::to_string)
                .collect())
        })
    }

    /// Ends the session and removes its sandbox. Calling it again does nothing.
    fn close(&self, py: Python<'_>) {
        let inner = self.inner.clone();
        py.detach(move || {
            let session = inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(session);
        });
    }

    /// Whether ``close()`` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .try_lock()
            .map(|guard| guard.is_none())
            .unwrap_or(false)
    }

    /// The language id (``"python"``), whatever alias opened it.
    #[getter]
    fn language(&self) -> &str {
        &self.language
    }

    /// The backend the session runs on (``"wasm"``, ``"docker"``, ...).
    #[getter]
    fn backend(&self) -> &str {
        &self.backend
    }

    /// The backend's name for the sandbox: the container's on Docker and Podman.
    #[getter]
    fn sandbox_name(&self) -> Option<&str> {
        self.sandbox_name.as_deref()
    }

    /// The policy's restrictions this backend cannot apply.
    #[getter]
    fn unenforced(&self) -> Vec<String> {
        self.unenforced.clone()
    }

    /// The backends ``"auto"`` tried first, and why each could not serve.
    #[getter]
    fn passed_over<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let pairs = self
            .passed_over
            .iter()
            .map(|(name, why)| PyTuple::new(py, [name, why]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, pairs)
    }

    /// What the backend runs the code with (``"CPython 3.12.3"``), or ``None``.
    #[getter]
    fn runs_with(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with_session(py, None, |s| {
            Ok(s.toolchain().map(|toolchain| toolchain.to_string()))
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { ", closed" } else { "" };
        format!(
            "Session(language={:?}, backend={:?}, sandbox={:?}{state})",
            self.language,
            self.backend,
            self.sandbox_name.as_deref().unwrap_or("")
        )
    }
}

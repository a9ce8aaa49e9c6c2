//! What a run gave, as Python sees it: [`Execution`], its [`File`]s and the
//! [`Finding`]s of the static analysis.

use crate::convert::{json_to_py, to_py_value};
use crate::errors::OrRaise;
use crate::policy::Policy;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::path::PathBuf;

/// What one run gave: its output, how it ended, the files it made.
///
/// ``stdout`` and ``stderr`` are text (invalid UTF-8 shown as U+FFFD);
/// ``stdout_bytes`` and ``stderr_bytes`` are exactly what the program wrote.
/// ``exit_code`` is the program's: 124 after a timeout, 137 at the memory cap.
/// ``to_dict()`` is the documented JSON form, ``sandlot.execution/1``.
#[pyclass(module = "sandlot", frozen)]
pub(crate) struct Execution {
    /// The run, its artifacts moved out into `files`.
    inner: sandlot::Execution,
    files: Vec<Py<File>>,
}

impl Execution {
    pub(crate) fn new(py: Python<'_>, mut inner: sandlot::Execution) -> PyResult<Execution> {
        let files = std::mem::take(&mut inner.artifacts)
            .into_iter()
            .map(|artifact| Py::new(py, File { artifact }))
            .collect::<PyResult<_>>()?;
        Ok(Execution { inner, files })
    }

    /// The run with its artifacts back in.
    fn whole(&self, py: Python<'_>) -> sandlot::Execution {
        let mut whole = self.inner.clone();
        whole.artifacts = self
            .files
            .iter()
            .map(|file| file.bind(py).get().artifact.clone())
            .collect();
        whole
    }
}

#[pymethods]
impl Execution {
    /// Standard output as text; invalid UTF-8 becomes U+FFFD.
    #[getter]
    fn stdout(&self) -> String {
        self.inner.stdout_text().into_owned()
    }

    /// Standard error as text; invalid UTF-8 becomes U+FFFD.
    #[getter]
    fn stderr(&self) -> String {
        self.inner.stderr_text().into_owned()
    }

    /// Standard output, exactly as written.
    #[getter]
    fn stdout_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.stdout)
    }

    /// Standard error, exactly as written.
    #[getter]
    fn stderr_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.stderr)
    }

    /// The exit code: the program's, 124 after a timeout, 137 at the memory cap.
    #[getter]
    fn exit_code(&self) -> i32 {
        self.inner.exit_code
    }

    /// Why the run ended: ``"completed"``, ``"timed-out"``, ``"memory-limit"``,
    /// ``"output-limit"``, ``"interrupted"``, ``"killed"`` or ``"sandbox-lost"``
    /// (``end`` has the details).
    #[getter]
    fn end_reason(&self) -> String {
        let end = serde_json::to_value(&self.inner.end).unwrap_or_default();
        end["reason"].as_str().unwrap_or("completed").to_string()
    }

    /// Why the run ended, with its details: ``{"reason": "timed-out", "limit_ms": 2000}``.
    #[getter]
    fn end<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_value(py, &self.inner.end)
    }

    /// Exit code 0, and the program finished by itself.
    #[getter]
    fn success(&self) -> bool {
        self.inner.success()
    }

    /// Whether the run was stopped at its time limit.
    #[getter]
    fn timed_out(&self) -> bool {
        self.inner.timed_out()
    }

    /// Whether the run was stopped at the memory cap.
    #[getter]
    fn memory_exceeded(&self) -> bool {
        self.inner.memory_exceeded()
    }

    /// Whether the session can run nothing more (open a new one).
    #[getter]
    fn session_ended(&self) -> bool {
        self.inner.session_ended()
    }

    /// Wall-clock time of the run, in seconds.
    #[getter]
    fn duration(&self) -> f64 {
        self.inner.duration.as_secs_f64()
    }

    /// The language id.
    #[getter]
    fn language(&self) -> &str {
        &self.inner.language
    }

    /// The backend that ran it.
    #[getter]
    fn backend(&self) -> &str {
        self.inner.backend.as_str()
    }

    /// What it ran with there, e.g. ``"CPython 3.11.2"``; ``None`` where the backend
    /// cannot tell.
    #[getter]
    fn runs_with(&self) -> Option<&str> {
        self.inner.runs_with.as_deref()
    }

    /// The files the run created or changed in ``output/``, plots included.
    #[getter]
    fn files<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.files.iter().map(|f| f.clone_ref(py)))
    }

    /// The files that are images, such as saved or captured figures.
    #[getter]
    fn plots<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let plots = self
            .files
            .iter()
            .filter(|f| f.bind(py).get().artifact.is_plot)
            .map(|f| f.clone_ref(py));
        PyList::new(py, plots)
    }

    /// What the static analysis found in the code.
    #[getter]
    fn findings(&self) -> Vec<Finding> {
        self.inner.findings.iter().map(Finding::from).collect()
    }

    /// The tool calls the code made, in order: a dict each, with ``name``,
    /// ``duration_ms``, ``argument_bytes``, ``result_bytes``, ``outcome`` (``"ok"``,
    /// ``"tool_error"``, ``"invalid_arguments"``, ``"timeout"``...) and ``message``
    /// when it failed.
    #[getter]
    fn tool_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_value(py, &self.inner.tool_calls)
    }

    /// The policy's restrictions the backend could not apply (``"workdir_size"`` on
    /// wasm, say): what the sandbox did *not* enforce.
    #[getter]
    fn unenforced(&self) -> Vec<String> {
        self.inner.unenforced.iter().map(name_of).collect()
    }

    /// The policy in force for the run.
    #[getter]
    fn policy(&self) -> Policy {
        Policy::from(self.inner.policy.clone())
    }

    /// Whether stdout went past the output cap and was cut.
    #[getter]
    fn stdout_truncated(&self) -> bool {
        self.inner.stdout_truncated
    }

    /// Whether stderr went past the output cap and was cut.
    #[getter]
    fn stderr_truncated(&self) -> bool {
        self.inner.stderr_truncated
    }

    /// Whether files were left out of ``files`` by the limits.
    #[getter]
    fn files_truncated(&self) -> bool {
        self.inner.artifacts_truncated
    }

    /// How many files were left out because their names cannot be shown safely.
    #[getter]
    fn files_refused(&self) -> usize {
        self.inner.artifacts_refused
    }

    /// Under an allow-list, the connections and lookups the run was refused.
    #[getter]
    fn egress_denied<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_value(py, &self.inner.egress_denied)
    }

    /// Writes every file below the host folder ``folder`` (made if missing) and
    /// returns their paths. No name the code chose can lead a write outside it.
    fn save_files(&self, py: Python<'_>, folder: PathBuf) -> PyResult<Vec<PathBuf>> {
        let whole = self.whole(py);
        let written = whole
            .artifacts
            .iter()
            .map(|a| folder.join(a.path.as_str()))
            .collect();
        py.detach(|| whole.write_artifacts(&folder)).or_raise(py)?;
        Ok(written)
    }

    /// The documented JSON form (``sandlot.execution/1``) as a dict; files carry
    /// their contents in base64.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.whole(py).to_json())
    }

    /// The documented JSON form as a string.
    #[pyo3(signature = (indent=None))]
    fn to_json(&self, py: Python<'_>, indent: Option<usize>) -> PyResult<String> {
        let json = self.whole(py).to_json();
        let text = match indent {
            None => serde_json::to_string(&json),
            Some(width) => {
                let indent = " ".repeat(width);
                let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
                let mut out = Vec::new();
                let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
                serde::Serialize::serialize(&json, &mut serializer)
                    .map(|()| String::from_utf8_lossy(&out).into_owned())
            }
        };
        text.map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
    }

    fn __repr__(&self) -> String {
        format!(
            "Execution(exit_code={}, end_reason={:?}, stdout={:?}, files={}, duration={:.3})",
            self.inner.exit_code,
            self.end_reason(),
            abbreviated(&self.inner.stdout_text()),
            self.files.len(),
            self.inner.duration.as_secs_f64()
        )
    }
}

/// A serde enum's name as its JSON form spells it.
pub(crate) fn name_of(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// At most 60 characters of `text`, for a repr.
fn abbreviated(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

/// A file a run made in ``output/``.
///
/// ``path`` is relative to ``output/`` and came from the sandbox: write the file with
/// ``save()``, which never leaves the folder it is given, rather than joining the
/// path to a folder yourself.
#[pyclass(module = "sandlot", frozen)]
pub(crate) struct File {
    artifact: sandlot::Artifact,
}

#[pymethods]
impl File {
    /// Path relative to ``output/``, ``/``-separated, never ``..``.
    #[getter]
    fn path(&self) -> &str {
        self.artifact.path.as_str()
    }

    /// The last part of ``path``.
    #[getter]
    fn name(&self) -> &str {
        self.artifact.path.file_name()
    }

    /// The contents.
    #[getter]
    fn bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.artifact.bytes)
    }

    /// The contents as text; invalid UTF-8 becomes U+FFFD.
    #[getter]
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.artifact.bytes).into_owned()
    }

    /// Size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.artifact.size
    }

    /// Media type guessed from the name, e.g. ``"image/png"``.
    #[getter]
    fn mime(&self) -> &str {
        self.artifact.mime
    }

    /// Whether it is an image, such as a figure.
    #[getter]
    fn is_plot(&self) -> bool {
        self.artifact.is_plot
    }

    /// Writes the file below the host folder ``folder`` (made if missing, with the
    /// file's own folders) and returns its path there.
    fn save(&self, py: Python<'_>, folder: PathBuf) -> PyResult<PathBuf> {
        let written = folder.join(self.artifact.path.as_str());
        let io = |context: String| move |source| sandlot::Error::Io { context, source };
        py.detach(|| -> sandlot::Result<()> {
            std::fs::create_dir_all(&folder)
                .map_err(io(format!("cannot create {}", folder.display())))?;
            let root = cap_std::fs::Dir::open_ambient_dir(&folder, cap_std::ambient_authority())
                .map_err(io(format!("cannot open {}", folder.display())))?;
            self.artifact.write_into(&root).map_err(io(format!(
                "cannot write `{}` in {}",
                self.artifact.path,
                folder.display()
            )))
        })
        .or_raise(py)?;
        Ok(written)
    }

    fn __repr__(&self) -> String {
        format!(
            "File(path={:?}, size={}, mime={:?})",
            self.artifact.path.as_str(),
            self.artifact.size,
            self.artifact.mime
        )
    }
}

/// Something the static analysis found in the code.
#[pyclass(module = "sandlot", frozen, get_all)]
pub(crate) struct Finding {
    /// Stable rule id, e.g. ``"python.os-command"``.
    rule_id: String,
    /// ``"info"``, ``"low"``, ``"medium"``, ``"high"`` or ``"critical"``.
    severity: String,
    /// 1-based line, if the finding concerns one.
    line: Option<u32>,
    /// What was found.
    message: String,
}

impl From<&sandlot::Finding> for Finding {
    fn from(finding: &sandlot::Finding) -> Finding {
        Finding {
            rule_id: finding.rule_id.clone(),
            severity: name_of(&finding.severity),
            line: finding.line,
            message: finding.message.clone(),
        }
    }
}

#[pymethods]
impl Finding {
    fn __repr__(&self) -> String {
        format!(
            "Finding(rule_id={:?}, severity={:?}, line={:?}, message={:?})",
            self.rule_id, self.severity, self.line, self.message
        )
    }
}

//! sandlot's errors as the Python exceptions of `sandlot.errors`: one class per
//! [`ErrorKind`], so Python code catches `sandlot.NotFoundError` where Rust matches
//! `ErrorKind::NotFound`. The classes are defined in Python (they are plain
//! exception classes, with the standard library's bases where one fits: an
//! `InvalidInputError` is also a `ValueError`); this module only finds and raises them.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use sandlot::ErrorKind;

/// `sandlot.errors`, imported once.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || Ok(py.import("sandlot.errors")?.unbind()))
        .map(|module| module.bind(py))
}

/// The `sandlot.errors` exception for `kind`, carrying `message`.
pub(crate) fn raise(py: Python<'_>, kind: ErrorKind, message: String) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let module = errors_module(py)?;
        let class = module.getattr("_class_for_kind")?.call1((kind.as_str(),))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("kind", kind.as_str())?;
        let error = class.call((message.clone(),), Some(&kwargs))?;
        Ok(PyErr::from_value(error))
    })();
    // The package's own module missing is a broken install; still say what failed.
    made.unwrap_or_else(|import| {
        let error = PyRuntimeError::new_err(format!("{message} (and sandlot.errors: {import})"));
        error.set_cause(py, Some(import));
        error
    })
}

/// A sandlot error as its Python exception.
pub(crate) fn to_py(py: Python<'_>, error: sandlot::Error) -> PyErr {
    raise(py, error.kind(), error.to_string())
}

/// A Python exception of `kind` made without the GIL in hand: [`to_py`] later.
pub(crate) struct Failure {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl From<sandlot::Error> for Failure {
    fn from(error: sandlot::Error) -> Failure {
        Failure {
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

impl Failure {
    pub(crate) fn into_py(self, py: Python<'_>) -> PyErr {
        raise(py, self.kind, self.message)
    }
}

/// `Result<T, sandlot::Error>` into a `PyResult`.
pub(crate) trait OrRaise<T> {
    /// The value, or the error raised as its Python exception.
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for Result<T, sandlot::Error> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

impl<T> OrRaise<T> for Result<T, Failure> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| e.into_py(py))
    }
}

/// A `ValueError`-like `sandlot.InvalidInputError` about an argument.
pub(crate) fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, ErrorKind::InvalidInput, message.into())
}

/// A configuration error about what the caller passed as `origin` (keywords turned
/// into TOML), as `InvalidInputError`: the parser's report points into TOML the caller
/// never saw, so only its last line, which says what is wrong, is kept.
pub(crate) fn invalid_config(py: Python<'_>, error: sandlot::Error, origin: &str) -> PyErr {
    match error {
        sandlot::Error::Config { reason, .. } => {
            let what = reason.lines().last().unwrap_or(&reason).trim();
            invalid(py, format!("{origin}: {what}"))
        }
        other => to_py(py, other),
    }
}

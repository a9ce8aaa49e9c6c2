//! [`Policy`]: what the host allows a sandbox, as Python builds it. Its keywords are
//! the keys of `sandlot.toml`'s `[policy]`, read by the same parser, so a policy
//! means the same whichever front end it came through.

use crate::convert::{dict_to_toml, to_py_value};
use crate::errors::{invalid, to_py};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};

/// What the host allows a sandbox: the static analysis and what it blocks, the
/// network, the filesystem, the user, processes and CPU.
///
/// Built from a preset (``"strict"``, ``"standard"`` — the default —, or
/// ``"permissive"``) and the fields that differ from it, with the keys of
/// ``sandlot.toml``'s ``[policy]``::
///
///     Policy("strict", network="allow-list", allow=["pypi.org"], block_at="medium")
///
/// Keys: ``analyze``, ``block_at`` (``"never"``, ``"low"`` ... ``"critical"``),
/// ``report_at``, ``restricted`` (``{"python": [{"module": "socket"}]}``),
/// ``network`` (``"off"``, ``"install-only"``, ``"allow-list"``, ``"on"``),
/// ``allow``, ``requests`` (``["GET api.github.com/repos/**"]``), ``read_only_root``, ``uid``, ``gid``, ``drop_capabilities``,
/// ``no_new_privileges``, ``pids_limit``, ``cpu_millis``, ``workdir_size``,
/// ``seccomp``. An unknown key or a wrong value raises ``InvalidInputError``.
#[pyclass(module = "sandlot", frozen, eq)]
#[derive(PartialEq)]
pub(crate) struct Policy {
    pub(crate) inner: sandlot::Policy,
}

impl From<sandlot::Policy> for Policy {
    fn from(inner: sandlot::Policy) -> Policy {
        Policy { inner }
    }
}

/// `text` as a policy; a mistake in it is the caller's, named by `origin`.
fn parse(py: Python<'_>, text: &str, origin: &str) -> PyResult<Policy> {
    sandlot::Policy::from_toml(text, Path::new(origin))
        .map(Policy::from)
        .map_err(|error| crate::errors::invalid_config(py, error, origin))
}

impl Policy {
    /// A policy from keyword fields over `preset`.
    pub(crate) fn from_fields(
        py: Python<'_>,
        preset: Option<&str>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Policy> {
        let mut table = match fields {
            Some(fields) => dict_to_toml(fields, "")?,
            None => toml::Table::new(),
        };
        if let Some(preset) = preset {
            table.insert("preset".into(), toml::Value::String(preset.into()));
        }
        let text = toml::to_string(&table).map_err(|e| invalid(py, e.to_string()))?;
        parse(py, &text, "Policy")
    }
}

#[pymethods]
impl Policy {
    #[new]
    #[pyo3(signature = (preset=None, **fields))]
    fn new(
        py: Python<'_>,
        preset: Option<&str>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Policy> {
        Policy::from_fields(py, preset, fields)
    }

    /// A policy written as ``sandlot.toml``'s ``[policy]`` section is.
    #[staticmethod]
    fn from_toml(py: Python<'_>, text: &str) -> PyResult<Policy> {
        parse(py, text, "the policy's TOML")
    }

    /// A preset's name, or the path of a policy file (as the CLI's ``--policy``).
    #[staticmethod]
    fn load(py: Python<'_>, preset_or_path: PathBuf) -> PyResult<Policy> {
        let value = preset_or_path.to_string_lossy().into_owned();
        py.detach(|| sandlot::Policy::from_preset_or_file(&value))
            .map(Policy::from)
            .map_err(|e| to_py(py, e))
    }

    /// When the sandbox may reach the network: ``"off"``, ``"install-only"``,
    /// ``"allow-list"`` or ``"on"``.
    #[getter]
    fn network(&self) -> &'static str {
        self.inner.network.name()
    }

    /// Where the code may go under ``network="allow-list"``.
    #[getter]
    fn allow(&self) -> Vec<String> {
        self.inner
            .allow
            .entries()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Whether the code is read by its language's static analysis before it runs.
    #[getter]
    fn analyze(&self) -> bool {
        self.inner.analyze
    }

    /// The severity at and above which a finding refuses the code; ``None``: never.
    #[getter]
    fn block_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_value(py, &self.inner.block_at)
    }

    /// Every field, as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_value(py, &self.inner)
    }

    fn __repr__(&self) -> String {
        let block_at = serde_json::to_value(self.inner.block_at).unwrap_or_default();
        format!(
            "Policy(network={:?}, allow={:?}, analyze={}, block_at={})",
            self.inner.network.name(),
            self.allow(),
            if self.inner.analyze { "True" } else { "False" },
            match block_at.as_str() {
                Some(name) => format!("{name:?}"),
                None => "None".into(),
            }
        )
    }
}

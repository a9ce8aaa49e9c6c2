//! [`Sandlot`]: the entry point, as Python makes it — from the environment, a
//! `sandlot.toml` or explicit folders — and the sessions it opens.

use crate::blocking::detached;
use crate::convert::{dict_to_toml, seconds, size, to_py_value};
use crate::errors::{invalid, Failure, OrRaise};
use crate::options::env_pairs;
use crate::policy::Policy;
use crate::session::Session;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use sandlot::dirs::Overrides;
use sandlot::{BackendChoice, Config, OpenRequest};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Every `Sandlot` with pools that is not closed yet, so that the interpreter's
/// exit closes them (`_close_all`, registered with `atexit`): a warmed container
/// must not outlive the program.
static POOLED: Mutex<Vec<(u64, sandlot::Sandlot)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Runs code in sandboxes. Make one per program and open sessions from it; it
/// caches compiled runtimes and engine connections.
///
/// With no arguments it reads the configuration as the CLI does (``$SANDLOT_CONFIG``,
/// ``./sandlot.toml``, then ``~/.config/sandlot/sandlot.toml``, and the
/// ``SANDLOT_*`` variables). ``config`` names a ``sandlot.toml``; ``runtimes_dir``,
/// ``cache_dir``, ``no_cache`` and ``plugin_dirs`` override its folders; ``pools``
/// keeps pre-warmed sandboxes per backend, with the keys of ``[pool.NAME]``::
///
///     Sandlot(pools={"docker": {"min_idle": 2, "max_size": 8}})
#[pyclass(module = "sandlot", frozen, subclass)]
pub(crate) struct Sandlot {
    inner: sandlot::Sandlot,
    /// Its entry in [`POOLED`], if it has pools.
    pooled: Option<u64>,
}

impl Drop for Sandlot {
    fn drop(&mut self) {
        if let Some(id) = self.pooled {
            forget(id);
            self.inner.close();
        }
    }
}

fn forget(id: u64) {
    POOLED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(pooled, _)| *pooled != id);
}

/// Closes the pools of every `Sandlot` still open: at the interpreter's exit.
#[pyfunction]
pub(crate) fn _close_all(py: Python<'_>) {
    let all: Vec<_> = std::mem::take(&mut *POOLED.lock().unwrap_or_else(|e| e.into_inner()));
    py.detach(|| {
        for (_, sandlot) in all {
            sandlot.close();
        }
    });
}

/// `[pool.NAME]` sections from `pools`, read as `sandlot.toml`'s are.
fn pool_options(
    py: Python<'_>,
    pools: &Bound<'_, PyDict>,
) -> PyResult<Vec<(String, sandlot::backend::pool::PoolOptions)>> {
    let mut sections = toml::Table::new();
    for (backend, options) in pools.iter() {
        let backend: String = backend
            .extract()
            .map_err(|_| invalid(py, "pools: the keys are backend names, str"))?;
        let options = options.cast::<PyDict>().map_err(|_| {
            invalid(
                py,
                format!(
                    "pools[{backend:?}]: a dict of [pool.{backend}] keys (min_idle, max_size, ...)"
                ),
            )
        })?;
        let section = dict_to_toml(options, &format!("pools[{backend:?}]"))?;
        sections.insert(backend, toml::Value::Table(section));
    }
    let mut document = toml::Table::new();
    document.insert("pool".into(), toml::Value::Table(sections));
    let text = toml::to_string(&document).map_err(|e| invalid(py, e.to_string()))?;
    let config = Config::parse(&text, Path::new("pools="))
        .map_err(|error| crate::errors::invalid_config(py, error, "pools"))?;
    Ok(config.pools.into_iter().collect())
}

/// A policy argument: a `Policy`, a preset's name or a policy file's path, or a dict
/// of `[policy]` keys.
fn policy_argument(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<sandlot::Policy> {
    if let Ok(policy) = value.cast::<Policy>() {
        return Ok(policy.get().inner.clone());
    }
    if let Ok(fields) = value.cast::<PyDict>() {
        return Ok(Policy::from_fields(py, None, Some(fields))?.inner);
    }
    if let Ok(name) = value.extract::<PathBuf>() {
        let name = name.to_string_lossy().into_owned();
        return py
            .detach(|| sandlot::Policy::from_preset_or_file(&name))
            .or_raise(py);
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "policy must be a sandlot.Policy, a preset's name, a policy file's path or a dict, not {}",
        value.get_type().name()?
    )))
}

/// Writes what preparing a backend reports to Python's `sys.stderr`, as the CLI does.
fn show_progress(step: sandlot::provider::Progress) {
    Python::attach(|py| {
        let line = format!("sandlot: {step}\n");
        if let Ok(stderr) = py.import("sys").and_then(|sys| sys.getattr("stderr")) {
            let _ = stderr.call_method1("write", (line,));
            let _ = stderr.call_method0("flush");
        }
    });
}

#[pymethods]
impl Sandlot {
    #[new]
    #[pyo3(signature = (config=None, *, runtimes_dir=None, cache_dir=None, no_cache=false, plugin_dirs=None, pools=None))]
    fn new(
        py: Python<'_>,
        config: Option<PathBuf>,
        runtimes_dir: Option<PathBuf>,
        cache_dir: Option<PathBuf>,
        no_cache: bool,
        plugin_dirs: Option<Vec<PathBuf>>,
        pools: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Sandlot> {
        let extra_pools = match &pools {
            Some(pools) => pool_options(py, pools)?,
            None => Vec::new(),
        };
        let overrides = Overrides {
            cache_dir,
            no_cache,
            runtimes_dir,
            plugin_dirs: plugin_dirs.unwrap_or_default(),
        };
        let inner = py
            .detach(move || -> sandlot::Result<sandlot::Sandlot> {
                let mut config = Config::discover(config.as_deref())?;
                config.pools.extend(extra_pools);
                sandlot::from_config(config, &overrides)
            })
            .or_raise(py)?;
        let pooled = (!inner.config().pools.is_empty()).then(|| {
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            POOLED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((id, inner.clone()));
            id
        });
        Ok(Sandlot { inner, pooled })
    }

    /// Opens a session for ``language`` (an id or alias: ``"python"``, ``"js"``...)
    /// and returns it; use it as a context manager.
    ///
    /// ``backend`` is ``"auto"`` (the first that can serve: wasm, then native where
    /// it enforces every limit, then Docker, Podman, Kubernetes), or a backend's name.
    /// ``image`` picks the container image;
    /// ``libraries`` are installed with the first run; ``policy`` is a ``Policy``, a
    /// preset's name or a dict of its keys; ``timeout`` (seconds per run),
    /// ``memory`` and ``max_output`` (bytes, or ``"512M"``) are the limits;
    /// ``network`` and ``allow`` override the policy's (``allow`` implies
    /// ``network="allow-list"``); ``secrets`` are variables whose values are masked in
    /// everything that comes back; ``env`` are plain variables; ``one_shot`` runs each
    /// program in a fresh process instead of the language's kernel; ``clear_output``
    /// empties ``output/`` before each run; ``tools`` are functions of this program
    /// the code may call (``sandlot.Tool``s, or plain functions: see ``sandlot.tools``).
    ///
    /// The first session on wasm for a language installs its runtime, saying so on
    /// ``sys.stderr``.
    #[pyo3(signature = (language, *, backend="auto", image=None, libraries=None, policy=None, timeout=None, memory=None, max_output=None, network=None, allow=None, secrets=None, env=None, one_shot=false, clear_output=false, shell=false, tools=None))]
    #[allow(clippy::too_many_arguments)]
    fn session(
        slf: &Bound<'_, Self>,
        language: String,
        backend: &str,
        image: Option<String>,
        libraries: Option<Vec<String>>,
        policy: Option<Bound<'_, PyAny>>,
        timeout: Option<f64>,
        memory: Option<Bound<'_, PyAny>>,
        max_output: Option<Bound<'_, PyAny>>,
        network: Option<String>,
        allow: Option<Bound<'_, PyAny>>,
        secrets: Option<Bound<'_, PyDict>>,
        env: Option<Bound<'_, PyDict>>,
        one_shot: bool,
        clear_output: bool,
        shell: bool,
        tools: Option<Vec<Bound<'_, PyAny>>>,
    ) -> PyResult<Session> {
        let py = slf.py();
        let this = slf.get();
        let mut request = OpenRequest::new(&language);
        request.backend = BackendChoice::from(backend);
        request.image = image;
        request.libraries = libraries.unwrap_or_default();
        request.policy = match &policy {
            Some(policy) => policy_argument(py, policy)?,
            None => this.inner.config().policy.clone().unwrap_or_default(),
        };
        if let Some(timeout) = timeout {
            request.limits.timeout = seconds(py, timeout, "timeout")?;
        }
        if let Some(memory) = memory {
            request.limits.memory = size(&memory, "memory")?;
        }
        if let Some(max_output) = max_output {
            request.limits.max_output = size(&max_output, "max_output")?;
        }
        if let Some(network) = &network {
            request.policy.network = sandlot::Network::named(network).ok_or_else(|| {
                invalid(
                    py,
                    format!(
                        "network {network:?} is none of \"off\", \"install-only\", \
                         \"allow-list\", \"on\""
                    ),
                )
            })?;
        }
        if let Some(allow) = allow {
            let listed = allow_list(&allow)?;
            if network.is_some() && request.policy.network != sandlot::Network::AllowList {
                return Err(invalid(
                    py,
                    "allow lists where the code may go, so it goes with network=\"allow-list\" only",
                ));
            }
            request.policy.network = sandlot::Network::AllowList;
            let mut entries = request.policy.allow.entries().to_vec();
            entries.extend(listed.entries().iter().cloned());
            request.policy.allow = entries.into();
        }
        if let Some(env) = env {
            request.env = env_pairs(&env, "env")?;
        }
        if let Some(secrets) = secrets {
            for (name, value) in env_pairs(&secrets, "secrets")? {
                let secret = sandlot::secret::Secret::new(&name, &value).or_raise(py)?;
                request.secrets.push(secret);
            }
        }
        request.one_shot = one_shot;
        if clear_output {
            request.earlier_output = sandlot::EarlierOutput::Clear;
        }
        if shell {
            request.required.push(sandlot::Capability::Shell);
        }
        for tool in tools.unwrap_or_default() {
            request
                .tools
                .add(crate::tools::from_py(&tool)?)
                .or_raise(py)?;
        }
        let builder = this.inner.session_for(request);
        let opened = detached(
            py,
            || {},
            move || -> Result<sandlot::Session, Failure> {
                builder.prepare(&mut show_progress)?;
                Ok(builder.open()?)
            },
        )?
        .or_raise(py)?;
        Ok(Session::new(opened, slf.clone().into_any().unbind()))
    }

    /// The languages there are handlers for: a dict each (``id``, ``aliases``,
    /// ``display_name``, ``file_extension``, ``default_image``, ``capabilities``,
    /// ``version``).
    fn languages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let infos = self
            .inner
            .plugins()
            .languages()
            .into_iter()
            .map(|handler| to_py_value(py, handler.info()))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, infos)
    }

    /// The backends' names, in the order ``"auto"`` tries them.
    fn backends(&self) -> Vec<String> {
        self.inner
            .backend_names()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// What running ``code`` would do, without running it: the files the
    /// ``language``'s handler writes and the commands it runs, as a dict.
    #[pyo3(signature = (language, code, *, libraries=None))]
    fn plan<'py>(
        &self,
        py: Python<'py>,
        language: &str,
        code: &str,
        libraries: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let handler = self.inner.plugins().language(language).or_raise(py)?;
        let plan = handler
            .plan(
                code,
                &libraries.unwrap_or_default(),
                &sandlot::PlanOptions::default(),
            )
            .or_raise(py)?;
        to_py_value(py, &plan)
    }

    /// What the pool of ``backend`` holds and has done (``size``, ``idle``,
    /// ``in_use``, ``hits``, ``misses``, acquire times...), as a dict.
    fn pool_stats<'py>(&self, py: Python<'py>, backend: &str) -> PyResult<Bound<'py, PyAny>> {
        let backend = backend.to_string();
        let inner = self.inner.clone();
        let pool = py.detach(move || inner.pool(&backend)).or_raise(py)?;
        to_py_value(py, &pool.stats())
    }

    /// Closes every pool: sessions still using one get up to 10 s, and every pooled
    /// sandbox is gone when this returns. Sessions opened later open unpooled.
    fn close(&self, py: Python<'_>) {
        if let Some(id) = self.pooled {
            forget(id);
            let inner = self.inner.clone();
            py.detach(move || inner.close());
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("Sandlot(backends={:?})", self.backends())
    }
}

/// An `allow` argument: a list of destinations, or one comma-separated string.
fn allow_list(value: &Bound<'_, PyAny>) -> PyResult<sandlot::egress::AllowList> {
    let py = value.py();
    let joined = if let Ok(text) = value.cast::<PyString>() {
        text.to_str()?.to_string()
    } else if let Ok(items) = value.extract::<Vec<String>>() {
        items.join(",")
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "allow must be a list of destinations (\"pypi.org\", \"*.example.com\", \
             \"10.0.0.0/8\") or one comma-separated str, not {}",
            value.get_type().name()?
        )));
    };
    joined
        .parse()
        .map_err(|e| invalid(py, format!("allow: {e}")))
}

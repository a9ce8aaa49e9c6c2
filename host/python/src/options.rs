//! A run's keyword arguments as sandlot's [`RunOptions`], and the Python callbacks
//! that see its output as it is written.
//!
//! A callback is called with text, decoded incrementally (a character split between
//! two writes arrives whole). One that raises is not called again; the run goes on to
//! its end, and its caller then gets a `CallbackError` whose `__cause__` is what the
//! callback raised — a callback's failure is never lost, nor does it lose the run.

use crate::convert::seconds;
use crate::errors::invalid;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sandlot::RunOptions;
use std::sync::{Arc, Mutex};

/// The keyword arguments `run` and `shell` share.
#[derive(Default)]
pub(crate) struct RunArgs<'py> {
    pub(crate) timeout: Option<f64>,
    pub(crate) env: Option<Bound<'py, PyDict>>,
    pub(crate) stdin: Option<Bound<'py, PyAny>>,
    pub(crate) workdir: Option<String>,
    pub(crate) max_output: Option<Bound<'py, PyAny>>,
    pub(crate) on_stdout: Option<Bound<'py, PyAny>>,
    pub(crate) on_stderr: Option<Bound<'py, PyAny>>,
    pub(crate) libraries: Option<Vec<String>>,
    pub(crate) args: Option<Vec<String>>,
}

/// What a run's callbacks left behind: the first exception one raised.
#[derive(Clone, Default)]
pub(crate) struct Callbacks {
    failure: Arc<Mutex<Option<PyErr>>>,
    decoders: Vec<Arc<Mutex<Decoding>>>,
}

impl Callbacks {
    /// Calls each callback with what its decoder still holds (an incomplete
    /// character at the end, as U+FFFD), then takes the first exception raised.
    pub(crate) fn finish(&self, py: Python<'_>) -> Option<PyErr> {
        for decoder in &self.decoders {
            let mut decoding = decoder.lock().unwrap_or_else(|e| e.into_inner());
            if !decoding.pending.is_empty() {
                decoding.pending.clear();
                let callback = decoding.callback.clone_ref(py);
                drop(decoding);
                self.call(py, &callback, "\u{fffd}");
            }
        }
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn call(&self, py: Python<'_>, callback: &Py<PyAny>, text: &str) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if failure.is_some() {
            return;
        }
        if let Err(error) = callback.call1(py, (text,)) {
            *failure = Some(error);
        }
    }
}

/// A callback and the bytes of a character it has not been given yet.
struct Decoding {
    callback: Py<PyAny>,
    pending: Vec<u8>,
}

impl Decoding {
    /// The text `bytes` completes, keeping an incomplete last character for later.
    fn decode(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match error.error_len() {
                        Some(bad) => {
                            text.push('\u{fffd}');
                            rest = &after[bad..];
                        }
                        // A character cut short by the end of this write.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        text
    }
}

/// A Python callable, checked, as the name of the argument says.
fn callable<'py>(value: Option<Bound<'py, PyAny>>, what: &str) -> PyResult<Option<Py<PyAny>>> {
    match value {
        None => Ok(None),
        Some(value) if value.is_none() => Ok(None),
        Some(value) if value.is_callable() => Ok(Some(value.unbind())),
        Some(value) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be callable (it is called with each piece of output, a str), not {}",
            value.get_type().name()?
        ))),
    }
}

impl RunArgs<'_> {
    /// The options, and the callbacks to finish once the run has returned.
    pub(crate) fn options(
        self,
        py: Python<'_>,
        interrupt: sandlot::Interrupt,
    ) -> PyResult<(RunOptions, Callbacks)> {
        let mut options = RunOptions {
            interrupt: Some(interrupt),
            ..RunOptions::default()
        };
        if let Some(timeout) = self.timeout {
            options.timeout = Some(seconds(py, timeout, "timeout")?);
        }
        if let Some(env) = self.env {
            options.env = env_pairs(&env, "env")?;
        }
        if let Some(stdin) = self.stdin {
            options.stdin = crate::convert::bytes_or_str(&stdin, "stdin")?;
        }
        options.workdir = self.workdir;
        if let Some(max_output) = self.max_output {
            options.max_output = Some(crate::convert::size(&max_output, "max_output")?);
        }
        options.libraries = self.libraries.unwrap_or_default();
        options.args = self.args.unwrap_or_default();
        let mut callbacks = Callbacks::default();
        for (value, what) in [(self.on_stdout, "on_stdout"), (self.on_stderr, "on_stderr")] {
            let Some(callback) = callable(value, what)? else {
                continue;
            };
            let decoder = Arc::new(Mutex::new(Decoding {
                callback,
                pending: Vec::new(),
            }));
            callbacks.decoders.push(decoder.clone());
            let each = callbacks.clone();
            let sink: sandlot::backend::Sink = Box::new(move |bytes: &[u8]| {
                Python::attach(|py| {
                    let (text, callback) = {
                        let mut decoding = decoder.lock().unwrap_or_else(|e| e.into_inner());
                        (decoding.decode(bytes), decoding.callback.clone_ref(py))
                    };
                    if !text.is_empty() {
                        each.call(py, &callback, &text);
                    }
                })
            });
            match what {
                "on_stdout" => options.on_stdout = Some(sink),
                _ => options.on_stderr = Some(sink),
            }
        }
        Ok((options, callbacks))
    }
}

/// A dict of strings as environment variables; `what` names it in errors.
pub(crate) fn env_pairs(env: &Bound<'_, PyDict>, what: &str) -> PyResult<Vec<(String, String)>> {
    env.iter()
        .map(
            |(key, value)| match (key.extract::<String>(), value.extract::<String>()) {
                (Ok(key), Ok(value)) => Ok((key, value)),
                _ => Err(invalid(
                    env.py(),
                    format!("{what} maps names to values, both str; got {key:?}: {value:?}"),
                )),
            },
        )
        .collect()
}

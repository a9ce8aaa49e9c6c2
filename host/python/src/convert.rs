//! Values between Python and sandlot: JSON documents out, TOML tables in (a policy or
//! a pool is read by the same parser as `sandlot.toml`, so it is checked the same way
//! and its errors name the same keys), seconds and sizes.

use crate::errors::invalid;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::time::Duration;

/// A JSON value as the Python value `json.loads` would give.
pub(crate) fn json_to_py<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(fields) => {
            let dict = PyDict::new(py);
            for (key, item) in fields {
                dict.set_item(key, json_to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Anything serde serializes, as the Python value of its JSON form.
pub(crate) fn to_py_value<'py>(
    py: Python<'py>,
    value: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(value)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    json_to_py(py, &json)
}

/// A Python value as TOML, for the key `key` (named in errors). `None` has no TOML
/// form: callers leave such keys out.
pub(crate) fn py_to_toml(value: &Bound<'_, PyAny>, key: &str) -> PyResult<toml::Value> {
    let py = value.py();
    if value.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        let n: i64 = value
            .extract()
            .map_err(|_| invalid(py, format!("{key}: {value} is too large")))?;
        return Ok(toml::Value::Integer(n));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(value.extract()?));
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(toml::Value::String(text.to_str()?.to_string()));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for (i, item) in value.try_iter()?.enumerate() {
            items.push(py_to_toml(&item?, &format!("{key}[{i}]"))?);
        }
        return Ok(toml::Value::Array(items));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        return Ok(toml::Value::Table(dict_to_toml(dict, key)?));
    }
    Err(invalid(
        py,
        format!(
            "{key}: a {} has no place here; give a bool, a number, a string, a list or a dict",
            value.get_type().name()?
        ),
    ))
}

/// A dict with string keys as a TOML table; keys whose value is `None` are left out.
pub(crate) fn dict_to_toml(dict: &Bound<'_, PyDict>, within: &str) -> PyResult<toml::Table> {
    let mut table = toml::Table::new();
    for (key, item) in dict.iter() {
        let Ok(key) = key.extract::<String>() else {
            return Err(invalid(
                dict.py(),
                format!("{within}: keys must be strings, not {key:?}"),
            ));
        };
        if item.is_none() {
            continue;
        }
        let path = match within {
            "" => key.clone(),
            within => format!("{within}.{key}"),
        };
        table.insert(key, py_to_toml(&item, &path)?);
    }
    Ok(table)
}

/// A number of seconds as a duration; `what` names it in the error.
pub(crate) fn seconds(py: Python<'_>, value: f64, what: &str) -> PyResult<Duration> {
    if value > 0.0 {
        if let Ok(duration) = Duration::try_from_secs_f64(value) {
            return Ok(duration);
        }
    }
    Err(invalid(
        py,
        format!("{what} must be a positive number of seconds, not {value}"),
    ))
}

/// A size in bytes: an int, or a string with `K`, `M` or `G` (`"512M"`); `what`
/// names it in the error.
pub(crate) fn size(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    let py = value.py();
    let wrong = || {
        invalid(
            py,
            format!(
                "{what} must be a number of bytes, or a string such as \"512M\" or \"2G\", \
                 not {}",
                value.repr().map(|r| r.to_string()).unwrap_or_default()
            ),
        )
    };
    if value.is_instance_of::<PyBool>() {
        return Err(wrong());
    }
    let bytes = if let Ok(n) = value.extract::<u64>() {
        n
    } else if let Ok(text) = value.extract::<String>() {
        parse_size(text.trim()).ok_or_else(wrong)?
    } else {
        return Err(wrong());
    };
    if bytes == 0 {
        return Err(invalid(py, format!("{what} must be more than 0")));
    }
    usize::try_from(bytes).map_err(|_| wrong())
}

/// `"512M"` as 512 MiB; a bare number is bytes.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.char_indices().last()? {
        (at, 'K' | 'k') => (&text[..at], 10),
        (at, 'M' | 'm') => (&text[..at], 20),
        (at, 'G' | 'g') => (&text[..at], 30),
        _ => (text, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1 << shift)
}

/// Bytes as given, or a str as UTF-8; `what` names the argument in the error.
pub(crate) fn bytes_or_str(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        Ok(bytes.as_bytes().to_vec())
    } else if let Ok(text) = value.cast::<PyString>() {
        Ok(text.to_str()?.as_bytes().to_vec())
    } else {
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be bytes or str, not {}",
            value.get_type().name()?
        )))
    }
}

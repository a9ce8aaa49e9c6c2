//! Python functions as sandlot tools: the code in a sandbox calls them, and they run
//! here, in the Python process, with the GIL taken for the call.

use crate::convert::json_to_py;
use crate::errors::OrRaise;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The tool `object` describes: a `sandlot.Tool` (or anything with its `name`,
/// `description`, `schema` and `function`), or a plain function, made a `Tool` first.
pub(crate) fn from_py(object: &Bound<'_, PyAny>) -> PyResult<sandlot::Tool> {
    let py = object.py();
    let tool_class = py.import("sandlot.tools")?.getattr("Tool")?;
    let tool = match object.is_instance(&tool_class)? {
        true => object.clone(),
        false if object.is_callable() => tool_class.call1((object,))?,
        false => {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "tools= takes sandlot.Tool objects or functions, not {}",
                object.get_type().name()?
            )))
        }
    };
    let name: String = tool.getattr("name")?.extract()?;
    let description: String = tool.getattr("description")?.extract()?;
    let schema = to_json(&tool.getattr("schema")?).map_err(|why| {
        pyo3::exceptions::PyTypeError::new_err(format!("tool {name}: its schema {why}"))
    })?;
    let function: Py<PyAny> = tool.getattr("function")?.unbind();
    let handler = move |arguments: serde_json::Value| {
        Python::attach(|py| -> Result<serde_json::Value, sandlot::ToolError> {
            let reported = |error: PyErr| {
                let kind = error
                    .get_type(py)
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "Exception".into());
                let message = error
                    .value(py)
                    .str()
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                sandlot::ToolError::new(match message.is_empty() {
                    true => kind,
                    false => format!("{kind}: {message}"),
                })
            };
            let keywords = json_to_py(py, &arguments).map_err(reported)?;
            let keywords = keywords
                .cast_into::<PyDict>()
                .map_err(|_| sandlot::ToolError::new("the arguments are not an object"))?;
            let result = function
                .bind(py)
                .call((), Some(&keywords))
                .map_err(reported)?;
            to_json(&result).map_err(|why| sandlot::ToolError::new(format!("its result {why}")))
        })
    };
    sandlot::Tool::new(&name, &description, schema, handler).or_raise(py)
}

/// `value` as JSON, through Python's own `json.dumps` (what a tool's result is
/// documented to be), or why it is not JSON.
fn to_json(value: &Bound<'_, PyAny>) -> Result<serde_json::Value, String> {
    let py = value.py();
    let text: String = py
        .import("json")
        .and_then(|json| json.call_method1("dumps", (value,)))
        .and_then(|text| text.extract())
        .map_err(|e| format!("is not JSON: {}", e.value(py)))?;
    serde_json::from_str(&text).map_err(|e| format!("is not JSON: {e}"))
}

//! Rich results of Python contexts, as E2B's code interpreter returns them: the value
//! of a cell's last expression as the main result (`execution.text`), and what
//! `display(obj)` shows, each with the forms the object offers through IPython's
//! display protocol (`_repr_html_`, `_repr_markdown_`, `_repr_png_`, ...), so that a
//! pandas frame comes back as `text` and `html`.
//!
//! sandlot's Python kernels and its wasm runtime show a last value through
//! `sys.displayhook`. Before a Python context's first run, [`HOOK`] replaces it (and
//! adds `display` to the builtins) with one that writes each value as a line of
//! stdout: [`MARK`], then the result's fields as one line of JSON. The code
//! interpreter takes those lines out of stdout and sends each as a `result`. Code
//! that prints a line like it makes a result of its own sandbox's, nothing more.

use serde_json::{Map, Value};

/// Starts a line that carries a result.
pub const MARK: &str = "\u{1e}sandlot-e2b-result ";

/// Python that installs the hook; leaves no name behind.
pub const HOOK: &str = r#"def _sandlot_e2b_display():
    import base64, builtins, json, sys
    mark = "\x1esandlot-e2b-result "
    forms = ("html", "markdown", "latex", "json", "javascript", "svg", "png", "jpeg", "pdf")

    def fields(value, main):
        found = {"text": repr(value), "is_main_result": main}
        for form in forms:
            # Looked up on the type, as IPython does: a class is shown by its repr.
            method = getattr(type(value), "_repr_%s_" % form, None)
            if method is None:
                continue
            try:
                shown = method(value)
            except Exception:
                continue
            if isinstance(shown, tuple):
                shown = shown[0]
            if isinstance(shown, bytes):
                shown = base64.b64encode(shown).decode("ascii")
            if shown is not None and (form == "json" or isinstance(shown, str)):
                found[form] = shown
        return found

    def emit(value, main):
        # ASCII escapes: a lone surrogate in a repr cannot fail the write.
        try:
            line = json.dumps(fields(value, main), default=repr, allow_nan=False)
        except Exception:
            line = json.dumps({"text": repr(value), "is_main_result": main})
        sys.stdout.write(mark + line + "\n")
        sys.stdout.flush()

    def displayhook(value):
        if value is None:
            return
        builtins._ = value
        emit(value, True)

    def display(*values, **_options):
        for value in values:
            emit(value, False)

    sys.displayhook = displayhook
    builtins.display = display


_sandlot_e2b_display()
del _sandlot_e2b_display
"#;

/// The fields a result may carry, and whether each is a string (`json` is any JSON).
const FIELDS: &[(&str, bool)] = &[
    ("text", true),
    ("html", true),
    ("markdown", true),
    ("latex", true),
    ("json", false),
    ("javascript", true),
    ("svg", true),
    ("png", true),
    ("jpeg", true),
    ("pdf", true),
];

/// A line of stdout split at [`MARK`]: what came before it on the line (printed
/// without a newline) and the `result` message it carries, if it parses (a line cut
/// by the output cap does not: it is dropped, not shown as output); `None` when the
/// line carries no mark.
pub fn result_in(line: &str) -> Option<(&str, Option<Value>)> {
    let (before, rest) = line.split_once(MARK)?;
    let Ok(sent) = serde_json::from_str::<Map<String, Value>>(rest.trim_end_matches('\n')) else {
        return Some((before, None));
    };
    let mut result = Map::new();
    result.insert("type".into(), Value::from("result"));
    for (field, string) in FIELDS {
        match sent.get(*field) {
            Some(value) if !*string || value.is_string() => {
                result.insert((*field).into(), value.clone());
            }
            _ => {}
        }
    }
    let main = sent.get("is_main_result").and_then(Value::as_bool);
    result.insert("is_main_result".into(), Value::from(main.unwrap_or(false)));
    Some((before, Some(Value::Object(result))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_lines_are_results_and_others_are_output() {
        let line = format!(
            "partial{MARK}{{\"text\": \"2\", \"html\": \"<b>2</b>\", \"is_main_result\": true, \"png\": 7}}\n"
        );
        let (before, result) = result_in(&line).unwrap();
        let result = result.unwrap();
        assert_eq!(before, "partial");
        assert_eq!(result["type"], "result");
        assert_eq!(result["text"], "2");
        assert_eq!(result["html"], "<b>2</b>");
        assert_eq!(result["is_main_result"], true);
        // A field of the wrong type is left out.
        assert!(result.get("png").is_none());
        assert!(result_in("plain output\n").is_none());
        // A line the output cap cut is dropped.
        let cut = format!("x{MARK}{{\"text\": \"2\n");
        assert_eq!(result_in(&cut), Some(("x", None)));
    }

    #[test]
    fn the_hook_marks_with_the_same_mark() {
        assert!(HOOK.contains(&format!("mark = \"{}\"", MARK.replace('\u{1e}', "\\x1e"))));
    }
}

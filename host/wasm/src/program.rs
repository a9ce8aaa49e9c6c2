//! Code run as a program file rather than as a notebook cell, in the runtimes sandlot
//! installs itself.
//!
//! CPython's `turn` and the QuickJS runtime work as a notebook does: the value of the
//! code's last expression is printed (`1 + 1` shows `2`), which is what a session's
//! runs want. A one-shot run must print what `python3 FILE` or `node FILE` prints, and
//! see its arguments where those would. Neither runtime's interface takes either, so
//! the host says it in the runtime's own language: a statement after the code that
//! leaves no value, and a hook that sets the argument vector before the run. Both are
//! added after the code or run on their own, so the code's line numbers stay its own.
//!
//! Runtimes sandlot did not build get the code as it is; a command module (one
//! instance per run) takes arguments on its own command line instead.

/// How one runtime is told that code is a program.
pub(crate) struct ProgramForm {
    /// Follows the code, on a line of its own: leaves the run without a value to show.
    pub(crate) no_value: &'static str,
    /// Sets the argument vector; `{argv}` stands for a JSON list of strings, the
    /// program's name first.
    pub(crate) set_argv: &'static str,
    /// The program's name and what comes before it, as the container's plan runs it
    /// (`python3 -u main.py`, `node main.js`).
    pub(crate) argv0: &'static [&'static str],
}

/// The form of the runtime `id`, if sandlot knows how to run a program in it.
pub(crate) fn form(id: &str) -> Option<&'static ProgramForm> {
    match id {
        // A final expression statement is what the turn shows; `pass` is none.
        "cpython" => Some(&ProgramForm {
            no_value: "pass\n",
            set_argv: "import sys as _sl_sys\n_sl_sys.argv = {argv}\ndel _sl_sys\n",
            argv0: &["main.py"],
        }),
        // A script's completion value is its last statement's that has one;
        // `void 0` has none to show. The `;` keeps a final line without one from
        // running on into it.
        "quickjs" => Some(&ProgramForm {
            no_value: ";void 0;\n",
            set_argv: "process.argv = {argv};\n",
            argv0: &["node", "/workspace/main.js"],
        }),
        _ => None,
    }
}

impl ProgramForm {
    /// `code` as a program: the same lines, then one that leaves no value.
    pub(crate) fn program(&self, code: &str) -> String {
        let newline = if code.ends_with('\n') || code.is_empty() {
            ""
        } else {
            "\n"
        };
        format!("{code}{newline}{}", self.no_value)
    }

    /// The hook that hands the program `args` after its name.
    pub(crate) fn argv_hook(&self, args: &[String]) -> String {
        let argv: Vec<&str> = self
            .argv0
            .iter()
            .copied()
            .chain(args.iter().map(String::as_str))
            .collect();
        // A JSON list of strings is a literal in both languages.
        let list = serde_json::to_string(&argv).expect("strings serialize");
        self.set_argv.replace("{argv}", &list)
    }
}

#[cfg(test)]
mod tests {
    use super::form;

    #[test]
    fn a_program_keeps_its_lines_and_ends_without_a_value() {
        let python = form("cpython").unwrap();
        assert_eq!(python.program("x = 1\nx"), "x = 1\nx\npass\n");
        assert_eq!(python.program("x\n"), "x\npass\n");
        let js = form("quickjs").unwrap();
        assert_eq!(
            js.program("a.push(4) // done"),
            "a.push(4) // done\n;void 0;\n"
        );
        assert!(form("ruby").is_none());
    }

    #[test]
    fn arguments_come_after_the_program_name_as_a_literal() {
        let python = form("cpython").unwrap();
        let hook = python.argv_hook(&["a".into(), "b \"c\"\n".into()]);
        assert_eq!(
            hook,
            "import sys as _sl_sys\n_sl_sys.argv = [\"main.py\",\"a\",\"b \\\"c\\\"\\n\"]\ndel _sl_sys\n"
        );
        let js = form("quickjs").unwrap();
        assert_eq!(
            js.argv_hook(&[]),
            "process.argv = [\"node\",\"/workspace/main.js\"];\n"
        );
    }
}

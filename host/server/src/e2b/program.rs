//! Commands on a backend without a shell (wasm): there is no `bash` to run, but there
//! is the sandbox's interpreter, and what agents run as commands is mostly that
//! interpreter — `python3 -c CODE`, `python3 script.py ARGS`, `node -e CODE`. Such a
//! command line becomes code for the interpreter that runs the program in a namespace
//! of its own, with its `argv`, its exit status and its output, in the sandbox's
//! workspace. Anything else (a pipe, another program) is refused with what to use.

use super::connect::{Code, ConnectError};

/// The words of a command line as a POSIX shell splits a simple command: single and
/// double quotes and backslashes are honoured; anything that makes it more than one
/// program with literal arguments (pipes, redirections, `;`, `&`, substitutions,
/// globs, variables) is refused.
pub fn words(line: &str) -> Result<Vec<String>, ConnectError> {
    let refuse = |what: &str| {
        ConnectError::new(
            Code::FailedPrecondition,
            format!(
                "this sandbox's backend has no shell, so a command is one program with plain \
                 arguments, and `{what}` is shell syntax: run `python3 -c CODE`, `python3 \
                 FILE ARGS`, `node -e CODE` or `node FILE ARGS`, or open the sandbox on a \
                 container backend (template `python@docker`)"
            ),
        )
    };
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' if in_word => {
                words.push(std::mem::take(&mut word));
                in_word = false;
            }
            ' ' | '\t' | '\n' => {}
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(refuse("an unclosed '")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(refuse("an unclosed \"")),
                        },
                        Some(c @ ('$' | '`')) => return Err(refuse(&c.to_string())),
                        Some(c) => word.push(c),
                        None => return Err(refuse("an unclosed \"")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => word.push(c),
                    None => return Err(refuse("a trailing \\")),
                }
            }
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' | '*' | '?' | '[' | '{' | '}'
            | '~' | '#' => return Err(refuse(&c.to_string())),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Where the program's code comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Given on the command line (`-c`, `-e`).
    Inline(String),
    /// A file of the workspace, to read first.
    File(String),
}

/// A command as a program for the interpreter of `language`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Its code.
    pub source: Source,
    /// What the language's argv holds after the interpreter: `sys.argv` (`-c` or the
    /// file first), `process.argv` after `node`.
    pub argv: Vec<String>,
}

/// The program a command line runs on an interpreter of `language` (`python`,
/// `javascript`), or why it cannot run there.
pub fn program(line: &str, language: &str) -> Result<Program, ConnectError> {
    let words = words(line)?;
    let Some((name, args)) = words.split_first() else {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "the command is empty",
        ));
    };
    let program = name.rsplit('/').next().unwrap_or(name);
    let (flag, interpreter) = match language {
        "python" => ("-c", program == "python" || program.starts_with("python3")),
        "javascript" => ("-e", program == "node" || program == "nodejs"),
        _ => ("", false),
    };
    if !interpreter {
        return Err(ConnectError::new(
            Code::FailedPrecondition,
            format!(
                "this sandbox's backend has no shell and runs only its {language} interpreter \
                 (`{}`), not `{}`; open the sandbox on a container backend (template \
                 `{language}@docker`) for other programs",
                if language == "python" {
                    "python3"
                } else {
                    "node"
                },
                crate::serve::shown(name)
            ),
        ));
    }
    match args {
        // Python's argv after `-c` starts with `-c`; Node's has none of it.
        [option, code, rest @ ..] if option == flag => Ok(Program {
            source: Source::Inline(code.clone()),
            argv: (language == "python")
                .then(|| flag.to_string())
                .into_iter()
                .chain(rest.iter().cloned())
                .collect(),
        }),
        [file, ..] if !file.starts_with('-') => Ok(Program {
            source: Source::File(file.clone()),
            argv: args.to_vec(),
        }),
        _ => Err(ConnectError::new(
            Code::FailedPrecondition,
            format!(
                "on this backend `{program}` takes `{flag} CODE [ARGS]` or `FILE [ARGS]`, and \
                 no other options"
            ),
        )),
    }
}

/// The code that runs `code` (read from `filename`) as the program with `argv`, in
/// `language`'s interpreter, in a namespace of its own.
pub fn as_code(language: &str, code: &str, filename: &str, argv: &[String]) -> String {
    // A JSON string or list is a literal in both languages.
    let literal = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let list = serde_json::to_string(argv).unwrap_or_default();
    match language {
        "python" => format!(
            "__import__('sys').argv = {list}\nexec(compile({}, {}, 'exec'), {{'__name__': \
             '__main__', '__builtins__': __builtins__}})\n",
            literal(code),
            literal(filename)
        ),
        _ => format!(
            "process.argv = [\"node\"].concat({list});\n(0, eval)({});\nvoid 0;\n",
            literal(code)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_splits_them() {
        assert_eq!(
            words(r#"python3 -c "print('a b')" x\ y 'z'"#).unwrap(),
            ["python3", "-c", "print('a b')", "x y", "z"]
        );
        assert_eq!(words(r#"a "q\"uote" ''"#).unwrap(), ["a", "q\"uote", ""]);
        for line in [
            "echo hi | wc",
            "a && b",
            "a; b",
            "cat < f",
            "echo $HOME",
            "echo \"$HOME\"",
            "ls *.py",
            "echo 'open",
        ] {
            let refused = words(line).unwrap_err();
            assert_eq!(refused.code, Code::FailedPrecondition, "{line}");
            assert!(refused.message.contains("python3 -c CODE"), "{refused:?}");
        }
    }

    #[test]
    fn only_the_interpreter_runs() {
        assert_eq!(
            program("python3 -c 'print(1)' a", "python").unwrap(),
            Program {
                source: Source::Inline("print(1)".into()),
                argv: vec!["-c".into(), "a".into()],
            }
        );
        assert_eq!(
            program("/usr/bin/python3 job.py --fast", "python").unwrap(),
            Program {
                source: Source::File("job.py".into()),
                argv: vec!["job.py".into(), "--fast".into()],
            }
        );
        assert_eq!(
            program("node -e 'console.log(1)'", "javascript")
                .unwrap()
                .source,
            Source::Inline("console.log(1)".into())
        );
        let other = program("pip install x", "python").unwrap_err();
        assert!(other.message.contains("`pip`"), "{other:?}");
        assert!(program("python3 -m http.server", "python").is_err());
        assert!(program("node -e x", "python").is_err());
    }

    #[test]
    fn programs_become_code_with_their_argv() {
        let code = as_code(
            "python",
            "import sys\nprint(sys.argv)",
            "<string>",
            &["-c".into()],
        );
        assert!(
            code.starts_with("__import__('sys').argv = [\"-c\"]\n"),
            "{code}"
        );
        assert!(
            code.contains(r#"compile("import sys\nprint(sys.argv)", "<string>""#),
            "{code}"
        );
        let js = as_code(
            "javascript",
            "console.log(1)",
            "main.js",
            &["main.js".into()],
        );
        assert!(js.contains(r#"(0, eval)("console.log(1)")"#), "{js}");
    }
}

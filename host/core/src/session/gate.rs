//! The analysis gate: code is read under the session's policy before it runs,
//! whichever door it came through. Code a run hands the session's interpreter is read
//! by its language's handler; a shell command line is read as shell code, and the
//! code it hands an interpreter inline (`python3 -c CODE`, `node -e CODE`, `bash -c
//! CODE`, a here-document or an `echo` piped into one) is read by that language's
//! handler, under that language's restrictions. A program the line runs from a file
//! is not followed: that is a route no static reading takes (the policy's limits say
//! so, and the sandbox, not the reading, holds the line).

use crate::plugin::{LanguageHandler, PluginHost};

/// Programs whose inline code the gate reads, the language that reads it, and the
/// flags after which their code follows.
const INTERPRETERS: [(&str, &str, &[&str]); 9] = [
    ("python", "python", &["-c"]),
    ("python3", "python", &["-c"]),
    ("node", "javascript", &["-e", "--eval", "-p", "--print"]),
    ("nodejs", "javascript", &["-e", "--eval", "-p", "--print"]),
    ("ruby", "ruby", &["-e"]),
    ("Rscript", "r", &["-e"]),
    ("bash", "bash", &["-c"]),
    ("sh", "bash", &["-c"]),
    ("dash", "bash", &["-c"]),
];

/// Words that run the command after them (and their own options and settings).
const WRAPPERS: [&str; 8] = [
    "env", "exec", "nohup", "time", "nice", "timeout", "command", "stdbuf",
];

/// How deep `bash -c` inside `bash -c` is followed.
const MAX_DEPTH: usize = 4;

/// The handlers the gate reads command lines with, found once per [`crate::Sandlot`].
#[derive(Default)]
pub(crate) struct Readers {
    /// The shell's (bash).
    pub(super) shell: Option<LanguageHandler>,
    /// By language id: those of [`INTERPRETERS`] that are loaded.
    languages: Vec<(&'static str, LanguageHandler)>,
}

impl Readers {
    pub(crate) fn of(plugins: &PluginHost) -> Readers {
        let mut languages: Vec<(&'static str, LanguageHandler)> = Vec::new();
        for (_, language, _) in INTERPRETERS {
            if languages.iter().all(|(id, _)| *id != language) {
                if let Ok(handler) = plugins.language(language) {
                    languages.push((language, handler.clone()));
                }
            }
        }
        Readers {
            shell: plugins.language("bash").ok().cloned(),
            languages,
        }
    }

    pub(super) fn handler(&self, language: &str) -> Option<&LanguageHandler> {
        self.languages
            .iter()
            .find(|(id, _)| *id == language)
            .map(|(_, handler)| handler)
    }
}

/// One piece of a command line, as a shell reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    /// What ends a command: `;`, `&`, `&&`, `||`, a newline, `(`, `)`.
    End,
    /// A pipe: the next command reads what this one writes.
    Pipe,
    /// A here-document's body: the command's standard input.
    Input(String),
}

/// The code `line` hands interpreters inline, by language, `bash -c` followed to
/// [`MAX_DEPTH`].
pub(super) fn inline_code(line: &str, depth: usize) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    let mut piped: Option<String> = None;
    for (words, input, pipes_on) in commands(&tokens(line)) {
        let fed = input.or_else(|| piped.take());
        piped = None;
        let Some((program, args)) = program_of(&words) else {
            continue;
        };
        if pipes_on && matches!(program, "echo" | "printf") {
            piped = Some(args.join(" "));
            continue;
        }
        if pipes_on && program == "cat" && args.is_empty() {
            piped = fed;
            continue;
        }
        let Some(&(_, language, flags)) = INTERPRETERS.iter().find(|(p, _, _)| *p == program)
        else {
            continue;
        };
        let code = code_after(args, flags, language).or(fed.filter(|_| reads_stdin(args)));
        if let Some(code) = code {
            if language == "bash" && depth < MAX_DEPTH {
                found.extend(inline_code(&code, depth + 1));
            }
            found.push((language, code));
        }
    }
    found
}

/// Whether an interpreter called with `args` reads its program from standard input:
/// no script, no inline code, or `-` for the script.
fn reads_stdin(args: &[String]) -> bool {
    match args.iter().find(|a| !a.starts_with('-') || *a == "-") {
        None => true,
        Some(first) => first == "-",
    }
}

/// The inline code among `args`: what follows one of `flags` (`-c CODE`, `-uc CODE`
/// for Python's clustered short flags, `--eval=CODE`); Ruby's several `-e` joined.
fn code_after(args: &[String], flags: &[&str], language: &str) -> Option<String> {
    let mut pieces = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if let Some((flag, value)) = word.split_once('=') {
            if flag.starts_with("--") && flags.contains(&flag) {
                pieces.push(value.to_string());
                continue;
            }
        }
        let clustered = language == "python"
            && word.len() > 2
            && word.starts_with('-')
            && !word.starts_with("--")
            && word.ends_with('c');
        if flags.contains(&word.as_str()) || clustered {
            if let Some(code) = words.next() {
                pieces.push(code.clone());
            }
            if language != "ruby" {
                break;
            }
            continue;
        }
        // The program's own arguments start at its script (or at `-m MODULE`).
        if !word.starts_with('-') || word == "-m" || word == "--" {
            break;
        }
    }
    (!pieces.is_empty()).then(|| pieces.join("\n"))
}

/// The program `words` run (its file name, past settings and wrappers like `env`
/// and `timeout`), and its arguments.
fn program_of(words: &[String]) -> Option<(&str, &[String])> {
    let mut at = 0;
    while at < words.len() {
        let word = &words[at];
        let assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        let name = word.rsplit('/').next().unwrap_or(word);
        if assignment || word.starts_with('-') {
            at += 1;
        } else if WRAPPERS.contains(&name) {
            at += 1;
            // `timeout 10 CMD`, `nice -n 5 CMD`: a number is the wrapper's.
            while words
                .get(at)
                .is_some_and(|w| w.starts_with('-') || duration(w))
            {
                at += 1;
            }
        } else {
            return Some((name, &words[at + 1..]));
        }
    }
    None
}

/// Whether `word` is a wrapper's duration or count: `10`, `2.5`, `10s`, `5m`.
fn duration(word: &str) -> bool {
    let number = word.strip_suffix(['s', 'm', 'h']).unwrap_or(word);
    !number.is_empty() && number.parse::<f64>().is_ok()
}

/// The commands of `tokens`: their words, their here-document, and whether a pipe
/// takes what they write.
fn commands(tokens: &[Token]) -> Vec<(Vec<String>, Option<String>, bool)> {
    let mut commands = Vec::new();
    let (mut words, mut input) = (Vec::new(), None);
    for token in tokens {
        match token {
            Token::Word(word) => words.push(word.clone()),
            Token::Input(body) => input = Some(body.clone()),
            Token::End | Token::Pipe => {
                let pipes = *token == Token::Pipe;
                commands.push((std::mem::take(&mut words), input.take(), pipes));
            }
        }
    }
    commands.push((words, input, false));
    commands
}

/// `line` split as a POSIX shell splits it: quotes (`'…'`, `"…"`, `$'…'`) and
/// backslashes honoured, comments dropped, here-documents (`<<EOF`, `<<-EOF`,
/// `<<'EOF'`) read into the command they feed. Redirections' targets are words of
/// their own; nothing is expanded.
fn tokens(line: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word = String::new();
    let mut in_word = false;
    // Here-documents whose bodies start after the next newline: where their token
    // is, their delimiter, and whether leading tabs are stripped (`<<-`).
    let mut pending: Vec<(usize, String, bool)> = Vec::new();
    let end_word = |tokens: &mut Vec<Token>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => word.push(e),
                            Some('\n') => {}
                            Some(e) => {
                                word.push('\\');
                                word.push(e);
                            }
                            None => break,
                        },
                        c => word.push(c),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '\'' => break,
                        '\\' => match chars.next() {
                            Some('n') => word.push('\n'),
                            Some('t') => word.push('\t'),
                            Some(e) => word.push(e),
                            None => break,
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(e) => {
                    in_word = true;
                    word.push(e);
                }
                None => {}
            },
            '#' if !in_word => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            ' ' | '\t' => end_word(&mut tokens, &mut word, &mut in_word),
            '\n' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                for (at, delimiter, tabs) in std::mem::take(&mut pending) {
                    let mut body = String::new();
                    loop {
                        let mut text = String::new();
                        let mut ended = true;
                        for c in chars.by_ref() {
                            if c == '\n' {
                                ended = false;
                                break;
                            }
                            text.push(c);
                        }
                        let shown = match tabs {
                            true => text.trim_start_matches('\t'),
                            false => text.as_str(),
                        };
                        if shown == delimiter {
                            break;
                        }
                        body.push_str(shown);
                        body.push('\n');
                        if ended {
                            break;
                        }
                    }
                    tokens[at] = Token::Input(body);
                }
                tokens.push(Token::End);
            }
            ';' | '&' | '(' | ')' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                if c == '&' && chars.peek() == Some(&'&') {
                    chars.next();
                }
                tokens.push(Token::End);
            }
            '|' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                if chars.peek() == Some(&'|') {
                    chars.next();
                    tokens.push(Token::End);
                } else {
                    tokens.push(Token::Pipe);
                }
            }
            '<' if chars.peek() == Some(&'<') => {
                end_word(&mut tokens, &mut word, &mut in_word);
                chars.next();
                if chars.peek() == Some(&'<') {
                    // A here-string (`<<<WORD`): the word is the input.
                    chars.next();
                    continue;
                }
                let tabs = chars.peek() == Some(&'-');
                if tabs {
                    chars.next();
                }
                while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
                    chars.next();
                }
                let mut delimiter = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || matches!(c, ';' | '&' | '|' | '<' | '>' | '(' | ')') {
                        break;
                    }
                    chars.next();
                    if !matches!(c, '\'' | '"' | '\\') {
                        delimiter.push(c);
                    }
                }
                // In its command's place: `cat <<EOF | python3` feeds `cat`.
                pending.push((tokens.len(), delimiter, tabs));
                tokens.push(Token::Input(String::new()));
            }
            '<' | '>' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                // The target is a word of its own, which is not an argument: skipped.
                while chars.peek().is_some_and(|c| matches!(c, '>' | '&' | '|')) {
                    chars.next();
                }
                while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
                    chars.next();
                }
                while chars.peek().is_some_and(|c| {
                    !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | '(' | ')')
                }) {
                    chars.next();
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut tokens, &mut word, &mut in_word);
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> Vec<(&'static str, String)> {
        inline_code(line, 0)
    }

    fn p(language: &'static str, code: &str) -> (&'static str, String) {
        (language, code.to_string())
    }

    #[test]
    fn inline_code_of_each_interpreter_is_found() {
        assert_eq!(
            code("python3 -c 'import os; os.fork()'"),
            [p("python", "import os; os.fork()")]
        );
        assert_eq!(
            code("/usr/bin/python3 -u -c \"print(1)\""),
            [p("python", "print(1)")]
        );
        assert_eq!(code("python -Ic 'x'"), [p("python", "x")]);
        assert_eq!(
            code("node -e 'require(\"child_process\")'"),
            [p("javascript", "require(\"child_process\")")]
        );
        assert_eq!(code("node --eval=1+1"), [p("javascript", "1+1")]);
        assert_eq!(code("ruby -e 'a' -e 'b'"), [p("ruby", "a\nb")]);
        assert_eq!(
            code("Rscript -e 'system(\"x\")'"),
            [p("r", "system(\"x\")")]
        );
        assert_eq!(
            code("cd /tmp && env X=1 timeout 5 python3 -c 'A' | tee out; echo done"),
            [p("python", "A")]
        );
    }

    #[test]
    fn shells_inside_shells_heredocs_and_pipes_are_followed() {
        assert_eq!(
            code("bash -c \"python3 -c 'B'\""),
            [p("python", "B"), p("bash", "python3 -c 'B'")]
        );
        assert_eq!(
            code("python3 - <<'EOF'\nimport socket\nprint(2)\nEOF\necho after"),
            [p("python", "import socket\nprint(2)\n")]
        );
        assert_eq!(
            code("cat <<-END | python3\n\tC\n\tEND\n"),
            [p("python", "C\n")]
        );
        assert_eq!(code("python3 <<-END\n\tC\n\tEND\n"), [p("python", "C\n")]);
        assert_eq!(
            code("echo 'import os' | python3"),
            [p("python", "import os")]
        );
        assert_eq!(code(r"python3 -c $'a\nb'"), [p("python", "a\nb")]);
    }

    #[test]
    fn programs_run_from_files_and_other_commands_are_not_code() {
        assert!(code("python3 script.py -c x").is_empty());
        assert!(code("python3 -m http.server").is_empty());
        assert!(code("ls -la /; cat file > out.txt").is_empty());
        assert!(code("echo 'print(1)' > x.py").is_empty());
        assert!(code("# python3 -c 'x'").is_empty());
        assert!(code("").is_empty());
        assert!(code("python3 -c").is_empty());
    }
}

//! A lexer that knows where a language's comments and strings are, so static analysis
//! reads code and not text that only mentions it: `# os.system(1)` is a comment and
//! `'os.system(1)'` a string, in any position on a line, across lines, inside
//! heredocs. Code nested in strings (f-string fields, `${...}` in templates, `#{...}`
//! in Ruby) stays code.

use alloc::string::String;
use alloc::vec::Vec;

/// Where a language's comments and strings are.
pub struct Syntax {
    /// Markers that start a comment running to the end of the line (`#`, `//`).
    pub line_comments: &'static [&'static str],
    /// Comments with an opening and a closing marker (`/*`, `*/`).
    pub block_comments: &'static [(&'static str, &'static str)],
    /// String delimiters, longest first where one is a prefix of another (`"""`
    /// before `"`).
    pub strings: &'static [Quote],
    /// Whether `<<WORD` starts a heredoc (shells, Ruby). Its body is data unless the
    /// command before `<<` is one of [`Syntax::heredoc_code`].
    pub heredocs: bool,
    /// Commands whose heredoc body is code (`bash`, `sh`, `python3`, ...).
    pub heredoc_code: &'static [&'static str],
    /// A comment marker only starts a comment at the start of a word (shells:
    /// `$#` and `a#b` are not comments).
    pub comment_needs_word_start: bool,
}

/// One kind of string literal.
pub struct Quote {
    /// Opening delimiter.
    pub open: &'static str,
    /// Closing delimiter.
    pub close: &'static str,
    /// A backslash escapes the next character.
    pub escapes: bool,
    /// The literal may run over several lines (otherwise a newline ends it).
    pub multiline: bool,
    /// Code nested inside the literal.
    pub interpolation: Interpolation,
    /// The contents stay visible to the rules (a shell's quoted words are still
    /// commands: `bash -c "rm -rf /"`); the quote only hides comment markers.
    pub keep: bool,
}

/// How code is nested in a string literal.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Interpolation {
    /// None: the whole literal is text.
    None,
    /// Python f-strings: `{expr}` when the literal's prefix has an `f`; `{{` is a brace.
    FString,
    /// `${expr}` (JavaScript templates).
    DollarBrace,
    /// `#{expr}` (Ruby double-quoted strings).
    HashBrace,
}

/// A string literal's text, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Literal {
    /// Its contents, escapes as written.
    pub text: String,
    /// 1-based line of its opening delimiter.
    pub line: u32,
    /// Byte offset of its opening delimiter in the source (and in [`Scan::code`]).
    pub at: usize,
    /// Byte offset where its contents start, after the opening delimiter.
    pub body: usize,
    /// Byte offset just past its closing delimiter.
    pub end: usize,
    /// Whether code is nested in it (an f-string, a template with fields).
    pub interpolated: bool,
}

/// The source with comments and string contents blanked out.
pub struct Scan {
    /// The source, same length and line structure, with every byte of a comment or of
    /// a string's contents (not its delimiters) turned into a space. Code nested in a
    /// string is kept.
    pub code: String,
    /// Every string literal, in order.
    pub literals: Vec<Literal>,
    /// Byte offset of every `\n`, in order: line lookups are a binary search, so a
    /// file of thousands of literals costs what its size costs.
    newlines: Vec<usize>,
}

/// Byte offsets of every `\n` of `bytes`.
fn newlines(bytes: &[u8]) -> Vec<usize> {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i)
        .collect()
}

/// The 1-based line of byte offset `at`, given the offsets of every newline.
fn line_in(newlines: &[usize], at: usize) -> u32 {
    newlines.partition_point(|&n| n < at) as u32 + 1
}

impl Scan {
    /// The 1-based line of byte offset `at`.
    pub fn line_of(&self, at: usize) -> u32 {
        line_in(&self.newlines, at.min(self.code.len()))
    }

    /// The literal whose opening delimiter is at `at`.
    pub fn literal_at(&self, at: usize) -> Option<&Literal> {
        // Sorted by `at` (see `scan`).
        self.literals
            .binary_search_by_key(&at, |l| l.at)
            .ok()
            .map(|i| &self.literals[i])
    }
}

/// Lexes `source` with `syntax`.
pub fn scan(source: &str, syntax: &Syntax) -> Scan {
    let mut lexer = Lexer {
        src: source.as_bytes(),
        out: source.as_bytes().to_vec(),
        literals: Vec::new(),
        syntax,
        pending_heredocs: Vec::new(),
        newlines: newlines(source.as_bytes()),
    };
    let mut at = 0;
    lexer.code(&mut at, None);
    // A string nested in an f-string's field is recorded before the f-string.
    lexer.literals.sort_by_key(|l| l.at);
    // Only ASCII spaces replaced whole bytes, so the result is still UTF-8; the
    // fallback keeps this total.
    let code = String::from_utf8(lexer.out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Scan {
        code,
        literals: lexer.literals,
        newlines: lexer.newlines,
    }
}

struct Lexer<'a> {
    src: &'a [u8],
    out: Vec<u8>,
    literals: Vec<Literal>,
    syntax: &'a Syntax,
    /// Heredocs opened on the current line: (terminator, body is code, `<<-`/`<<~`).
    pending_heredocs: Vec<(Vec<u8>, bool, bool)>,
    /// Byte offsets of the source's newlines (the output keeps every one in place).
    newlines: Vec<usize>,
}

impl Lexer<'_> {
    fn blank(&mut self, from: usize, to: usize) {
        for b in &mut self.out[from..to.min(self.src.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }

    fn starts(&self, at: usize, s: &str) -> bool {
        self.src[at..].starts_with(s.as_bytes())
    }

    fn line_of(&self, at: usize) -> u32 {
        line_in(&self.newlines, at)
    }

    /// Lexes code from `*at` until the end, or until `close` at nesting depth zero
    /// (code nested in a string: `}` ends it, counting braces opened inside).
    fn code(&mut self, at: &mut usize, close: Option<u8>) {
        let mut depth = 0usize;
        while *at < self.src.len() {
            let c = self.src[*at];
            if let Some(close) = close {
                if c == b'{' {
                    depth += 1;
                } else if c == close {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                }
            }
            if c == b'\n' {
                *at += 1;
                self.heredoc_bodies(at);
                continue;
            }
            if self.comment(at) {
                continue;
            }
            if self.string(at) {
                continue;
            }
            if self.syntax.heredocs && self.heredoc_start(at) {
                continue;
            }
            *at += utf8_len(c);
        }
    }

    fn at_word_start(&self, at: usize) -> bool {
        at == 0
            || matches!(
                self.src[at - 1],
                b' ' | b'\t' | b'\n' | b';' | b'(' | b'&' | b'|'
            )
    }

    fn comment(&mut self, at: &mut usize) -> bool {
        // Block comments first: Lua's `--[[` starts with its line comment's `--`.
        for (open, close) in self.syntax.block_comments {
            if self.starts(*at, open) {
                let body = *at + open.len();
                let end = find(&self.src[body..], close.as_bytes())
                    .map_or(self.src.len(), |n| body + n + close.len());
                self.blank(*at, end);
                *at = end;
                return true;
            }
        }
        for marker in self.syntax.line_comments {
            if self.starts(*at, marker)
                && (!self.syntax.comment_needs_word_start || self.at_word_start(*at))
            {
                let end = self.src[*at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.src.len(), |n| *at + n);
                self.blank(*at, end);
                *at = end;
                return true;
            }
        }
        false
    }

    fn string(&mut self, at: &mut usize) -> bool {
        let Some(quote) = self
            .syntax
            .strings
            .iter()
            .find(|q| self.starts(*at, q.open))
        else {
            return false;
        };
        let start = *at;
        let interpolated = match quote.interpolation {
            Interpolation::FString => python_prefix(&self.src[..start]).contains(&b'f'),
            Interpolation::None => false,
            _ => true,
        };
        let mut i = start + quote.open.len();
        let mut text = Vec::new();
        let mut has_fields = false;
        loop {
            if i >= self.src.len() {
                break;
            }
            if self.starts(i, quote.close) {
                break;
            }
            let c = self.src[i];
            if c == b'\n' && !quote.multiline {
                break;
            }
            if quote.escapes && c == b'\\' && i + 1 < self.src.len() {
                text.extend_from_slice(&self.src[i..i + 2]);
                if !quote.keep {
                    self.blank(i, i + 2);
                }
                i += 2;
                continue;
            }
            if interpolated {
                let nested = match quote.interpolation {
                    Interpolation::FString if c == b'{' => {
                        if self.src.get(i + 1) == Some(&b'{') {
                            text.extend_from_slice(b"{{");
                            self.blank(i, i + 2);
                            i += 2;
                            continue;
                        }
                        Some(1)
                    }
                    Interpolation::DollarBrace if self.starts(i, "${") => Some(2),
                    Interpolation::HashBrace if self.starts(i, "#{") => Some(2),
                    _ => None,
                };
                if let Some(open) = nested {
                    has_fields = true;
                    let mut j = i + open;
                    self.code(&mut j, Some(b'}'));
                    text.extend_from_slice(&self.src[i..j.min(self.src.len())]);
                    i = (j + 1).min(self.src.len());
                    continue;
                }
            }
            text.push(c);
            if !quote.keep {
                self.blank(i, i + 1);
            }
            i += 1;
        }
        let end = if self.starts(i.min(self.src.len()), quote.close) && i < self.src.len() {
            i + quote.close.len()
        } else {
            i
        };
        let end = end.max(start + 1);
        self.literals.push(Literal {
            text: String::from_utf8_lossy(&text).into_owned(),
            line: self.line_of(start),
            at: start,
            body: start + quote.open.len(),
            end,
            interpolated: has_fields,
        });
        *at = end;
        true
    }

    /// `<<WORD`, `<<-WORD`, `<<~WORD`, `<<'WORD'`, `<<"WORD"`: remembers the heredoc;
    /// its body starts on the next line. `<<<` is a here-string, not a heredoc.
    fn heredoc_start(&mut self, at: &mut usize) -> bool {
        if !self.starts(*at, "<<") || self.starts(*at, "<<<") {
            return false;
        }
        let mut i = *at + 2;
        let indented = matches!(self.src.get(i), Some(b'-') | Some(b'~'));
        if indented {
            i += 1;
        }
        let quoted = matches!(self.src.get(i), Some(b'\'') | Some(b'"'));
        if quoted {
            i += 1;
        }
        let word_start = i;
        while i < self.src.len() && (self.src[i].is_ascii_alphanumeric() || self.src[i] == b'_') {
            i += 1;
        }
        if i == word_start {
            return false;
        }
        let word = self.src[word_start..i].to_vec();
        if quoted && i < self.src.len() && matches!(self.src[i], b'\'' | b'"') {
            i += 1;
        }
        let line_start = self.src[..*at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |n| n + 1);
        let before = &self.src[line_start..*at];
        let is_code = self
            .syntax
            .heredoc_code
            .iter()
            .any(|command| words(before).any(|w| w == command.as_bytes()));
        self.pending_heredocs.push((word, is_code, indented));
        *at = i;
        true
    }

    /// At the start of a line: skips the bodies of the heredocs the previous line
    /// opened, blanking those that are data.
    fn heredoc_bodies(&mut self, at: &mut usize) {
        for (word, is_code, indented) in core::mem::take(&mut self.pending_heredocs) {
            let body = *at;
            let mut i = *at;
            let end = loop {
                if i >= self.src.len() {
                    break self.src.len();
                }
                let line_end = self.src[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.src.len(), |n| i + n);
                let line = &self.src[i..line_end];
                let line = if indented { trim_start(line) } else { line };
                if line == word.as_slice() {
                    break (line_end + 1).min(self.src.len());
                }
                i = line_end + 1;
            };
            if is_code {
                // Lexed as code of its own, so its comments and strings count too.
                let mut j = body;
                let terminator = end;
                while j < terminator {
                    let before = j;
                    self.code_until(&mut j, terminator);
                    if j == before {
                        break;
                    }
                }
            } else {
                self.blank(body, end);
            }
            *at = end;
        }
    }

    fn code_until(&mut self, at: &mut usize, end: usize) {
        while *at < end {
            if self.src[*at] == b'\n' {
                *at += 1;
                continue;
            }
            if self.comment(at) || self.string(at) {
                continue;
            }
            *at += 1;
        }
    }
}

/// The letters of a Python string prefix (`f`, `rb`, `Rf`, ...) right before `end`,
/// lower-cased; empty when the quote follows anything else.
fn python_prefix(before: &[u8]) -> Vec<u8> {
    let letters = before
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let prefix = &before[before.len() - letters..];
    let preceded_by_ident = before[..before.len() - letters]
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    if letters > 2 || preceded_by_ident {
        return Vec::new();
    }
    let lower: Vec<u8> = prefix.iter().map(|b| b.to_ascii_lowercase()).collect();
    if lower
        .iter()
        .all(|b| matches!(b, b'f' | b'r' | b'b' | b'u' | b't'))
    {
        lower
    } else {
        Vec::new()
    }
}

fn words(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| matches!(b, b' ' | b'\t' | b'|' | b';' | b'&' | b'('))
        .filter(|w| !w.is_empty())
        .map(|w| w.rsplit(|&b| b == b'/').next().unwrap_or(w))
}

fn trim_start(line: &[u8]) -> &[u8] {
    let n = line
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    &line[n..]
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Python: `#` comments, single, double and triple quotes, f-string fields.
pub const PYTHON: Syntax = Syntax {
    line_comments: &["#"],
    block_comments: &[],
    strings: &[
        quote("\"\"\"", "\"\"\"", true, Interpolation::FString),
        quote("'''", "'''", true, Interpolation::FString),
        quote("\"", "\"", false, Interpolation::FString),
        quote("'", "'", false, Interpolation::FString),
    ],
    heredocs: false,
    heredoc_code: &[],
    comment_needs_word_start: false,
};

/// C-family languages: `//` and `/* */` comments, double-quoted strings and character
/// literals; Java's `"""` text blocks and Go's backquoted raw strings.
pub const C_LIKE: Syntax = Syntax {
    line_comments: &["//"],
    block_comments: &[("/*", "*/")],
    strings: &[
        quote("\"\"\"", "\"\"\"", true, Interpolation::None),
        quote("\"", "\"", false, Interpolation::None),
        quote("'", "'", false, Interpolation::None),
        Quote {
            escapes: false,
            ..quote("`", "`", true, Interpolation::None)
        },
    ],
    heredocs: false,
    heredoc_code: &[],
    comment_needs_word_start: false,
};

/// JavaScript and TypeScript: C comments, three kinds of quotes, `${}` in templates.
pub const JAVASCRIPT: Syntax = Syntax {
    line_comments: &["//"],
    block_comments: &[("/*", "*/")],
    strings: &[
        quote("`", "`", true, Interpolation::DollarBrace),
        quote("\"", "\"", false, Interpolation::None),
        quote("'", "'", false, Interpolation::None),
    ],
    heredocs: false,
    heredoc_code: &[],
    comment_needs_word_start: false,
};

/// Ruby: `#` comments, `#{}` in double quotes, heredocs. Backquotes run commands, so
/// they stay visible.
pub const RUBY: Syntax = Syntax {
    line_comments: &["#"],
    block_comments: &[],
    strings: &[
        quote("\"", "\"", true, Interpolation::HashBrace),
        quote("'", "'", true, Interpolation::None),
    ],
    heredocs: true,
    heredoc_code: &[],
    comment_needs_word_start: false,
};

/// R: `#` comments, single and double quotes.
pub const R: Syntax = Syntax {
    line_comments: &["#"],
    block_comments: &[],
    strings: &[
        quote("\"", "\"", true, Interpolation::None),
        quote("'", "'", true, Interpolation::None),
    ],
    heredocs: false,
    heredoc_code: &[],
    comment_needs_word_start: false,
};

/// Shells: `#` comments at the start of a word; quoted words stay visible (they are
/// still arguments and often commands); heredoc bodies are data unless fed to a shell
/// or an interpreter.
pub const SHELL: Syntax = Syntax {
    line_comments: &["#"],
    block_comments: &[],
    strings: &[
        Quote {
            keep: true,
            escapes: false,
            ..quote("'", "'", true, Interpolation::None)
        },
        Quote {
            keep: true,
            ..quote("\"", "\"", true, Interpolation::None)
        },
    ],
    heredocs: true,
    heredoc_code: &[
        "bash", "sh", "zsh", "dash", "ksh", "eval", "source", ".", "python", "python3", "perl",
        "ruby", "node",
    ],
    comment_needs_word_start: true,
};

/// A quote whose contents are text (not kept), with backslash escapes.
pub const fn quote(
    open: &'static str,
    close: &'static str,
    multiline: bool,
    interpolation: Interpolation,
) -> Quote {
    Quote {
        open,
        close,
        escapes: true,
        multiline,
        interpolation,
        keep: false,
    }
}

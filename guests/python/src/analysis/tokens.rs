//! Python read as tokens: names (in NFKC, as Python reads them), string literals,
//! operators and line ends. Comments and strings are no code, so the checks never
//! see text, only tokens.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use sandlot_handler_kit::scan::Scan;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind<'a> {
    Name(&'a str),
    /// A string literal, by index in [`Scan::literals`].
    Str(usize),
    Op(&'a str),
    /// The end of a logical line (a newline outside brackets, or `;`).
    End,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Token<'a> {
    pub(super) kind: Kind<'a>,
    pub(super) line: u32,
}

pub(super) const KEYWORDS: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "None",
    "True", "False",
];

/// Whether a byte may be part of an identifier as [`tokenize`] reads them.
fn identifier_byte(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80
}

/// The identifiers of the code (outside strings and comments) that are not ASCII,
/// by their byte offset, in NFKC: Python reads `ｏs` (fullwidth) and `𝐨𝐬` as `os`
/// (PEP 3131), so the rules must too.
pub(super) fn normalized_identifiers(scan: &Scan) -> BTreeMap<usize, String> {
    use unicode_normalization::UnicodeNormalization;
    let mut normalized = BTreeMap::new();
    let code = scan.code.as_str();
    if code.is_ascii() {
        return normalized;
    }
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if identifier_byte(bytes[i]) && !bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && identifier_byte(bytes[i]) {
                i += 1;
            }
            let name = &code[start..i];
            if !name.is_ascii() {
                normalized.insert(start, name.nfkc().collect::<String>());
            }
        } else if bytes[i].is_ascii_digit() {
            // A number's letters (`1e5`, `0x1f`) are no identifier.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    normalized
}

pub(super) fn tokenize<'a>(
    scan: &'a Scan,
    normalized: &'a BTreeMap<usize, String>,
) -> Vec<Token<'a>> {
    let code = scan.code.as_str();
    let bytes = code.as_bytes();
    let mut tokens = Vec::new();
    let mut literals = scan.literals.iter().enumerate().peekable();
    let mut depth = 0usize;
    let mut line = 1u32;
    let mut i = 0;
    while i < bytes.len() {
        while literals.peek().is_some_and(|(_, l)| l.at < i) {
            literals.next();
        }
        if let Some(&(index, literal)) = literals.peek().filter(|(_, l)| l.at == i) {
            tokens.push(Token {
                kind: Kind::Str(index),
                line,
            });
            literals.next();
            // An f-string's fields are code inside the literal's span: lex on from its
            // contents; the blanked text and the closing quote read as nothing.
            i = if literal.interpolated {
                literal.body
            } else {
                line += code[i..literal.end].matches('\n').count() as u32;
                literal.end
            };
            continue;
        }
        let c = bytes[i];
        match c {
            b'\n' => {
                if depth == 0 {
                    push_end(&mut tokens, line);
                }
                line += 1;
                i += 1;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'\n') => {
                line += 1;
                i += 2;
            }
            b';' => {
                push_end(&mut tokens, line);
                i += 1;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                tokens.push(Token {
                    kind: Kind::Op(&code[i..i + 1]),
                    line,
                });
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                tokens.push(Token {
                    kind: Kind::Op(&code[i..i + 1]),
                    line,
                });
                i += 1;
            }
            _ if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => {
                let start = i;
                while i < bytes.len() && identifier_byte(bytes[i]) {
                    i += 1;
                }
                let name = normalized
                    .get(&start)
                    .map_or(&code[start..i], String::as_str);
                // A string prefix (`f`, `rb`) is part of the literal that follows.
                let prefix = literals.peek().is_some_and(|(_, l)| l.at == i)
                    && name.len() <= 2
                    && name.chars().all(|c| "fFrRbBuUtT".contains(c));
                if !prefix {
                    tokens.push(Token {
                        kind: Kind::Name(name),
                        line,
                    });
                }
            }
            _ if c.is_ascii_digit() => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                    i += 1;
                }
            }
            b' ' | b'\t' | b'\r' | b'\'' | b'"' => i += 1,
            _ => {
                // Two-character operators matter only to tell `=` from `==`, `<=`...
                let two = code.get(i..i + 2).filter(|op| {
                    matches!(
                        *op,
                        "==" | "!=" | "<=" | ">=" | ":=" | "+=" | "-=" | "*=" | "/=" | "->" | "**"
                    )
                });
                let op = two.unwrap_or(&code[i..i + 1]);
                tokens.push(Token {
                    kind: Kind::Op(op),
                    line,
                });
                i += op.len();
            }
        }
    }
    push_end(&mut tokens, line);
    tokens
}

fn push_end(tokens: &mut Vec<Token<'_>>, line: u32) {
    if tokens.last().is_some_and(|t| t.kind != Kind::End) {
        tokens.push(Token {
            kind: Kind::End,
            line,
        });
    }
}

//! Paths that name a file inside a sandbox: the names of the files a run made, of
//! those copied out, listed or read, and the paths clients ask for.
//!
//! A name that comes out of a sandbox was chosen by the code in it, so it is hostile
//! input. On Linux a file name is any bytes but `/` and NUL: `..\..\x`, a newline, an
//! escape sequence, bytes that are not UTF-8 are all one ordinary component. A
//! [`SandboxPath`] holds only what is safe to hand on: relative, `/`-separated, every
//! component a plain name (never empty, `.` or `..`), valid UTF-8, with no NUL and no
//! control or text-direction character. A backslash stays a byte of its component (it
//! is no separator on Linux) and [`Display`](std::fmt::Display) shows it escaped, as
//! `\\`, so it never reads as a Windows path.
//!
//! A name that cannot be represented is refused, never rewritten into something else:
//! the session leaves such a file out and counts it
//! ([`Execution::artifacts_refused`](crate::Execution::artifacts_refused)).
//!
//! Writing one to the host goes through a capability handle on the destination
//! ([`SandboxPath::write_into`]), so neither a name nor a link already in the
//! destination can lead outside it:
//!
//! ```
//! use sandlot::SandboxPath;
//! let dest = tempfile::tempdir()?;
//! let dir = cap_std::fs::Dir::open_ambient_dir(dest.path(), cap_std::ambient_authority())?;
//! let path = SandboxPath::new("figures/plot.png")?;
//! path.write_into(&dir, b"png")?;
//! assert_eq!(std::fs::read(dest.path().join("figures/plot.png"))?, b"png");
//!
//! // One component on Linux: written as a file of that name, inside `dest`.
//! let tricky = SandboxPath::new(r"..\..\evil")?;
//! assert_eq!(tricky.to_string(), r"..\\..\\evil");
//! assert!(SandboxPath::new("../evil").is_err());
//! assert!(SandboxPath::new("a\nsandlot: forged").is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::Path;

/// Longest component accepted, in bytes (Linux's `NAME_MAX`).
pub const MAX_COMPONENT: usize = 255;

/// Longest path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;

/// A relative path inside a sandbox that is safe to show and to write below a host
/// directory (see the [module documentation](self)).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SandboxPath(String);

/// Why a name is not a [`SandboxPath`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathProblem {
    /// The path is empty.
    Empty,
    /// It starts at the root (`/`).
    Absolute,
    /// A component is `.` or `..`.
    DotComponent,
    /// Two separators follow each other, or one ends the path.
    EmptyComponent,
    /// A single name was expected, and it holds a `/`.
    Separator,
    /// It contains a NUL byte.
    Nul,
    /// It contains a control or text-direction character (a newline, an escape, a
    /// right-to-left override, ...), which would garble or forge what a terminal or
    /// a log shows.
    ControlCharacter(char),
    /// Its bytes are not UTF-8.
    NotUtf8,
    /// A component is longer than [`MAX_COMPONENT`] or the path longer than
    /// [`MAX_PATH`] bytes.
    TooLong,
}

impl fmt::Display for PathProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathProblem::Empty => f.write_str("the path is empty"),
            PathProblem::Absolute => f.write_str("the path must be relative, not start at `/`"),
            PathProblem::DotComponent => f.write_str("the path must not contain `.` or `..`"),
            PathProblem::EmptyComponent => {
                f.write_str("the path has an empty component (`//`, or a trailing `/`)")
            }
            PathProblem::Separator => f.write_str("a file name must not contain `/`"),
            PathProblem::Nul => f.write_str("the path contains a NUL byte"),
            PathProblem::ControlCharacter(c) => write!(
                f,
                "the path contains the control character U+{:04X}",
                *c as u32
            ),
            PathProblem::NotUtf8 => f.write_str("the path is not UTF-8"),
            PathProblem::TooLong => write!(
                f,
                "the path is longer than {MAX_PATH} bytes, or a component longer than {MAX_COMPONENT}"
            ),
        }
    }
}

impl std::error::Error for PathProblem {}

/// Whether `c` may not appear in a name shown to people: the C0 and C1 controls and
/// DEL, and the characters that reorder or hide text on a terminal (bidirectional
/// overrides and isolates, zero-width marks, line and paragraph separators).
pub(crate) fn is_forbidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

impl SandboxPath {
    /// Checks `path` (see the [module documentation](self) for what passes).
    pub fn new(path: &str) -> Result<SandboxPath, PathProblem> {
        if path.is_empty() {
            return Err(PathProblem::Empty);
        }
        if path.len() > MAX_PATH {
            return Err(PathProblem::TooLong);
        }
        if path.starts_with('/') {
            return Err(PathProblem::Absolute);
        }
        for component in path.split('/') {
            check_component(component)?;
        }
        Ok(SandboxPath(path.to_string()))
    }

    /// Checks a name given as bytes, as a file system or an archive holds it.
    pub fn from_bytes(bytes: &[u8]) -> Result<SandboxPath, PathProblem> {
        if bytes.contains(&0) {
            return Err(PathProblem::Nul);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| PathProblem::NotUtf8)?;
        SandboxPath::new(text)
    }

    /// Checks a relative path as the host's file system APIs give it.
    pub fn from_path(path: &Path) -> Result<SandboxPath, PathProblem> {
        use std::os::unix::ffi::OsStrExt;
        SandboxPath::from_bytes(path.as_os_str().as_bytes())
    }

    /// One component checked alone: a file name with no `/`.
    pub fn component(name: &str) -> Result<SandboxPath, PathProblem> {
        if name.contains('/') {
            return Err(PathProblem::Separator);
        }
        SandboxPath::new(name)
    }

    /// The path as it is in the sandbox, `/`-separated. Show it with `Display`, which
    /// escapes backslashes; pass this to whatever reads the sandbox's files.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its components, in order.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The path with its last component dropped, if it has more than one.
    pub fn parent(&self) -> Option<SandboxPath> {
        self.0
            .rsplit_once('/')
            .map(|(parent, _)| SandboxPath(parent.to_string()))
    }

    /// `self/other`.
    pub fn join(&self, other: &SandboxPath) -> SandboxPath {
        SandboxPath(format!("{}/{}", self.0, other.0))
    }

    /// The path below `prefix`, `"a/b"` of `"output/a/b"` below `"output"`.
    pub fn strip_prefix(&self, prefix: &SandboxPath) -> Option<SandboxPath> {
        let rest = self.0.strip_prefix(prefix.as_str())?.strip_prefix('/')?;
        Some(SandboxPath(rest.to_string()))
    }

    /// The path for a URI: every component percent-encoded but for letters, digits
    /// and `-._~`, joined by `/` (`a b\c` is `a%20b%5Cc`).
    pub fn to_uri_path(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for (n, component) in self.components().enumerate() {
            if n > 0 {
                out.push('/');
            }
            for byte in component.bytes() {
                if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                    out.push(byte as char);
                } else {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
        }
        out
    }

    /// Writes `contents` to this path below `dir`, making the directories on the way.
    /// Every step goes through `dir`'s capability handle: a link already there that
    /// leads outside `dir` is refused, never followed out.
    pub fn write_into(&self, dir: &cap_std::fs::Dir, contents: &[u8]) -> std::io::Result<()> {
        if let Some(parent) = self.parent() {
            dir.create_dir_all(parent.as_str())?;
        }
        dir.write(self.as_str(), contents)
    }

    /// Makes this path below `dir` as a directory, with its parents, through `dir`'s
    /// capability handle.
    pub fn create_dir_in(&self, dir: &cap_std::fs::Dir) -> std::io::Result<()> {
        dir.create_dir_all(self.as_str())
    }
}

fn check_component(component: &str) -> Result<(), PathProblem> {
    match component {
        "" => Err(PathProblem::EmptyComponent),
        "." | ".." => Err(PathProblem::DotComponent),
        _ if component.len() > MAX_COMPONENT => Err(PathProblem::TooLong),
        _ => match component.chars().find(|c| *c == '\0' || is_forbidden(*c)) {
            Some('\0') => Err(PathProblem::Nul),
            Some(c) => Err(PathProblem::ControlCharacter(c)),
            None => Ok(()),
        },
    }
}

impl fmt::Display for SandboxPath {
    /// The path with each backslash shown as `\\`: nothing else in it needs escaping.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.contains('\\') {
            f.write_str(&self.0.replace('\\', "\\\\"))
        } else {
            f.write_str(&self.0)
        }
    }
}

impl fmt::Debug for SandboxPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl PartialEq<str> for SandboxPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SandboxPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl std::str::FromStr for SandboxPath {
    type Err = PathProblem;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxPath::new(s)
    }
}

impl serde::Serialize for SandboxPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for SandboxPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        SandboxPath::new(&text).map_err(serde::de::Error::custom)
    }
}

/// `text` with every control and text-direction character shown as an escape
/// (`\n`, `\u{1b}`), for sandlot's own notes on a terminal: a name or a host name a
/// sandbox chose cannot then start a line of its own or colour the screen.
///
/// ```
/// assert_eq!(sandlot::sandbox_path::escape_controls("a\nsandlot: x\x1b[31m"), "a\\nsandlot: x\\u{1b}[31m");
/// assert_eq!(sandlot::sandbox_path::escape_controls("plain"), "plain");
/// ```
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c == '\0' || is_forbidden(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\0' || is_forbidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_names_pass() {
        for good in [
            "a",
            "output/plot.png",
            r"..\..\x",
            r"\etc\cron.d\x",
            "...",
            "a..b/.hidden",
            "données/été.csv",
            "a b/c:d",
        ] {
            assert_eq!(SandboxPath::new(good).unwrap().as_str(), good);
        }
        let bad: &[(&str, PathProblem)] = &[
            ("", PathProblem::Empty),
            ("/etc/passwd", PathProblem::Absolute),
            ("..", PathProblem::DotComponent),
            ("a/../b", PathProblem::DotComponent),
            ("./a", PathProblem::DotComponent),
            ("a//b", PathProblem::EmptyComponent),
            ("a/", PathProblem::EmptyComponent),
            ("a\0b", PathProblem::Nul),
            ("a\nsandlot: forged", PathProblem::ControlCharacter('\n')),
            ("x\x1b[31m", PathProblem::ControlCharacter('\x1b')),
            ("x\u{7f}", PathProblem::ControlCharacter('\u{7f}')),
            ("x\u{9b}", PathProblem::ControlCharacter('\u{9b}')),
            ("gpj.\u{202e}exe", PathProblem::ControlCharacter('\u{202e}')),
        ];
        for (path, problem) in bad {
            assert_eq!(SandboxPath::new(path), Err(*problem), "{path:?}");
        }
        assert_eq!(
            SandboxPath::from_bytes(b"caf\xe9.txt"),
            Err(PathProblem::NotUtf8)
        );
        assert_eq!(
            SandboxPath::new(&"x".repeat(256)),
            Err(PathProblem::TooLong)
        );
        assert_eq!(
            SandboxPath::new(&["y"; 2049].join("/")),
            Err(PathProblem::TooLong)
        );
    }

    #[test]
    fn backslashes_are_shown_escaped_and_encoded_in_uris() {
        let path = SandboxPath::new(r"out/..\..\evil a.txt").unwrap();
        assert_eq!(path.to_string(), r"out/..\\..\\evil a.txt");
        assert_eq!(path.to_uri_path(), "out/..%5C..%5Cevil%20a.txt");
        assert_eq!(path.file_name(), r"..\..\evil a.txt");
        assert_eq!(path.parent().unwrap(), "out");
        let json = serde_json::to_string(&path).unwrap();
        assert_eq!(json, r#""out/..\\..\\evil a.txt""#);
        let back: SandboxPath = serde_json::from_str(&json).unwrap();
        assert_eq!(back, path);
        assert!(serde_json::from_str::<SandboxPath>(r#""../x""#).is_err());
    }

    #[test]
    fn writes_stay_inside_the_destination_whatever_is_there() {
        let dest = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dest.path().join("link")).unwrap();
        let dir =
            cap_std::fs::Dir::open_ambient_dir(dest.path(), cap_std::ambient_authority()).unwrap();
        SandboxPath::new(r"..\..\x")
            .unwrap()
            .write_into(&dir, b"1")
            .unwrap();
        assert_eq!(std::fs::read(dest.path().join(r"..\..\x")).unwrap(), b"1");
        let through_link = SandboxPath::new("link/y").unwrap();
        assert!(through_link.write_into(&dir, b"2").is_err());
        assert!(!outside.path().join("y").exists());
    }

    #[test]
    fn controls_are_escaped_for_notes() {
        assert_eq!(escape_controls("a\tb"), "a\\tb");
        assert_eq!(escape_controls("\u{202e}x"), "\\u{202e}x");
    }
}

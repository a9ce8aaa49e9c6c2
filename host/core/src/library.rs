//! Library names as each language's installer reads them.
//!
//! A session's libraries go to an installer (pip, npm, `go get`, RubyGems, R's
//! `install.packages`) that runs with the install's way out to the network, before
//! any of the session's code. An installer reads far more than a registry name in
//! the same argument: a path (`./pkg`, `/workspace/pkg`), an archive in its working
//! directory (`pkg.tar.gz`, `pkg.whl`, `pkg.tgz`, `pkg.gem`), a URL or a version
//! control spec (`git+https://…`, `github:user/repo`, `user/repo`), an option
//! (`--index-url=…`). Each of those installs code the session wrote, or code from
//! anywhere, and runs its build or install scripts online. So every library is read
//! here by its installer's grammar of a registry name with an optional version, and
//! anything else is refused with the reason, before any language handler (a third
//! party's included) sees it.
//!
//! ```
//! use sandlot::library::Installer;
//! assert!(Installer::Pip.check("pandas[excel]>=2.0,<3").is_ok());
//! assert!(Installer::Npm.check("@types/node@^20").is_ok());
//! let refused = Installer::Npm.check("./my-package").unwrap_err();
//! assert!(refused.contains("a path"), "{refused}");
//! ```

use crate::error::{Error, Result};

/// The longest library name any installer is handed.
pub const MAX_LEN: usize = 256;

/// The installer a language's libraries go to, whose grammar their names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Installer {
    /// Python's pip: a PEP 508 name, extras, version clauses (`pandas[excel]>=2,<3`).
    Pip,
    /// npm: a package, scoped or not, with a version, range or tag
    /// (`@types/node@^20`).
    Npm,
    /// Go modules: a module path with an optional version (`golang.org/x/text@v0.14.0`).
    Go,
    /// R's CRAN: a package name (`data.table`).
    Cran,
    /// RubyGems: a gem with an optional version (`rake:13.1.0`).
    RubyGems,
    /// A language sandlot knows no installer of (a third party's handler): a plain
    /// registry name, with an optional version after `==`, `@` or `:`.
    Other,
}

impl Installer {
    /// The installer of the language `language` (an id, as a handler gives it).
    ///
    /// ```
    /// use sandlot::library::Installer;
    /// assert_eq!(Installer::of("typescript"), Installer::Npm);
    /// assert_eq!(Installer::of("lua"), Installer::Other);
    /// ```
    pub fn of(language: &str) -> Installer {
        match language {
            "python" => Installer::Pip,
            "javascript" | "typescript" => Installer::Npm,
            "go" => Installer::Go,
            "r" => Installer::Cran,
            "ruby" => Installer::RubyGems,
            _ => Installer::Other,
        }
    }

    /// Its name, as its users call it.
    pub fn name(self) -> &'static str {
        match self {
            Installer::Pip => "pip",
            Installer::Npm => "npm",
            Installer::Go => "go get",
            Installer::Cran => "CRAN",
            Installer::RubyGems => "RubyGems",
            Installer::Other => "the language's installer",
        }
    }

    /// Whether `library` is a registry name (and version) of this installer; if not,
    /// why, in a sentence that says what to write instead.
    pub fn check(self, library: &str) -> std::result::Result<(), String> {
        if library.is_empty() {
            return Err("it is empty".into());
        }
        if library.len() > MAX_LEN {
            return Err(format!("it is longer than {MAX_LEN} bytes"));
        }
        if let Some(kind) = not_a_name(library) {
            return Err(format!(
                "it is {kind}, which {} would install from somewhere other than its \
                 registry (and run its scripts online); ask for a package by its \
                 registry name",
                self.name()
            ));
        }
        if library.chars().any(char::is_whitespace) {
            return Err(
                "it holds a space: write a name and its version together, e.g. \
                 `pandas>=2` or `lodash@^4`"
                    .into(),
            );
        }
        match self {
            Installer::Pip => pip(library),
            Installer::Npm => npm(library),
            Installer::Go => go(library),
            Installer::Cran => cran(library),
            Installer::RubyGems => gem(library),
            Installer::Other => other(library),
        }
    }
}

/// Checks every library of a `language` session by its installer's grammar
/// ([`Installer::check`]).
///
/// ```
/// let refused = sandlot::library::check("python", &["numpy".into(), "evil.tar.gz".into()]);
/// assert_eq!(refused.unwrap_err().kind(), sandlot::ErrorKind::InvalidInput);
/// ```
pub fn check(language: &str, libraries: &[String]) -> Result<()> {
    let installer = Installer::of(language);
    for library in libraries {
        installer
            .check(library)
            .map_err(|reason| Error::InvalidLibrary {
                library: library.clone(),
                installer: installer.name().into(),
                reason,
            })?;
    }
    Ok(())
}

/// What `library` is when it is plainly no registry name, whatever the installer.
fn not_a_name(library: &str) -> Option<&'static str> {
    let lower = library.to_ascii_lowercase();
    if library.starts_with('-') {
        return Some("an option");
    }
    if library.contains("://") || lower.starts_with("file:") {
        return Some("a URL");
    }
    let vcs = [
        "git+",
        "git:",
        "hg+",
        "svn+",
        "bzr+",
        "github:",
        "gitlab:",
        "bitbucket:",
        "gist:",
    ];
    if vcs.iter().any(|prefix| lower.starts_with(prefix)) {
        return Some("a version-control spec");
    }
    if library.starts_with(['.', '/', '~', '\\']) || library.contains('\\') {
        return Some("a path");
    }
    if !library.is_ascii() || library.chars().any(|c| c.is_ascii_control()) {
        return Some("text with characters no registry name has");
    }
    None
}

/// Archive files each installer installs from its working directory when a name
/// ends like one.
const ARCHIVES: [&str; 14] = [
    ".zip",
    ".whl",
    ".tar",
    ".tgz",
    ".tar.gz",
    ".tbz",
    ".tar.bz2",
    ".txz",
    ".tar.xz",
    ".tlz",
    ".tar.lz",
    ".tar.lzma",
    ".gem",
    ".egg",
];

fn archive(name: &str) -> std::result::Result<(), String> {
    let lower = name.to_ascii_lowercase();
    match ARCHIVES.iter().find(|end| lower.ends_with(*end)) {
        Some(end) => Err(format!(
            "it ends in `{end}`, so the installer would take it for an archive file in its \
             working directory, not a package of its registry"
        )),
        None => Ok(()),
    }
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// The length of the longest start of `text` whose characters `allowed` takes.
fn span(text: &str, allowed: impl Fn(char) -> bool) -> usize {
    text.find(|c: char| !allowed(c)).unwrap_or(text.len())
}

/// A PEP 508 name: letters and digits, with `.`, `_` and `-` inside.
fn pep508_name(name: &str) -> bool {
    !name.is_empty()
        && name.starts_with(word_char)
        && name.ends_with(word_char)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `name[extra,...]` then version clauses (`>=2,<3`): no direct reference (`@ URL`),
/// no environment marker (`;`), no hash or option.
fn pip(library: &str) -> std::result::Result<(), String> {
    let end = span(library, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
    });
    let (name, mut rest) = library.split_at(end);
    if !pep508_name(name) {
        return Err(
            "a Python package name is letters and digits, with `.`, `_` or `-` inside".into(),
        );
    }
    archive(name)?;
    if let Some(after) = rest.strip_prefix('[') {
        let Some((extras, after)) = after.split_once(']') else {
            return Err("its extras (`[...]`) are not closed".into());
        };
        if !extras.split(',').all(pep508_name) {
            return Err("an extra in `[...]` is not a name".into());
        }
        rest = after;
    }
    if rest.starts_with('@') {
        return Err(
            "it is a direct reference (`name @ URL`), which pip installs from that address".into(),
        );
    }
    if rest.contains(';') {
        return Err(
            "environment markers (`; ...`) are not taken: give the name and version".into(),
        );
    }
    if rest.is_empty() {
        return Ok(());
    }
    for clause in rest.split(',') {
        let op = ["===", "==", "!=", "~=", "<=", ">=", "<", ">"]
            .into_iter()
            .find(|op| clause.starts_with(op));
        let version = op.map(|op| &clause[op.len()..]);
        let valid = version.is_some_and(|v| {
            !v.is_empty()
                && v.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '!' | '_' | '-')
                })
        });
        if !valid {
            return Err(format!(
                "`{clause}` is not a version clause: an operator (`==`, `>=`, `<`, `~=`, \
                 `!=`) and a version, clauses joined by `,`"
            ));
        }
    }
    Ok(())
}

/// An npm name: lower-case letters, digits, `-._~`, not starting with `.` or `_`.
fn npm_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['.', '_'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'))
}

/// `name`, `@scope/name`, each with an optional `@version`, `@range` or `@tag`: no
/// path, tarball, git spec (`user/repo`, `name@user/repo`) or alias (`npm:`).
fn npm(library: &str) -> std::result::Result<(), String> {
    let (scope, rest) = match library.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, rest)) => (Some(scope), rest),
            None => return Err("a scoped package is `@scope/name`".into()),
        },
        None => (None, library),
    };
    let (name, version) = match rest.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (rest, None),
    };
    if scope.is_some_and(|scope| !npm_name(scope)) {
        return Err("its scope is not an npm name".into());
    }
    if name.contains('/') {
        return Err(
            "`user/repo` is a GitHub repository to npm, not a package of its registry; \
             a scoped package is `@scope/name`"
                .into(),
        );
    }
    if !npm_name(name) {
        return Err(
            "an npm package name is letters, digits, `-`, `.`, `_` or `~`, not starting \
             with `.` or `_`"
                .into(),
        );
    }
    archive(name)?;
    if let Some(version) = version {
        let valid = !version.is_empty()
            && version.chars().all(|c| {
                c.is_ascii_alphanumeric()
                    || matches!(c, '.' | '-' | '+' | '^' | '~' | '<' | '>' | '=' | '*' | '|')
            });
        if !valid {
            return Err(format!(
                "`{version}` is no version, range or tag (`1.2.3`, `^4`, `>=1<2`, \
                 `latest`): npm would read it as a git, path or alias spec"
            ));
        }
    }
    Ok(())
}

/// A module path (its first element a domain) with an optional `@version`: no local
/// path, pattern (`...`) or branch with a `/`.
fn go(library: &str) -> std::result::Result<(), String> {
    let (path, version) = match library.split_once('@') {
        Some((path, version)) => (path, Some(version)),
        None => (library, None),
    };
    let element_ok = |e: &str| {
        !e.is_empty()
            && !e.starts_with(['.', '-'])
            && !e.ends_with('.')
            && e.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'))
    };
    let elements: Vec<&str> = path.split('/').collect();
    if !elements.iter().all(|e| element_ok(e)) {
        return Err(
            "a module path is elements of letters, digits, `-._~` joined by `/` (no `.` or \
             `..`, no pattern like `...`)"
                .into(),
        );
    }
    if !elements[0].contains('.') {
        return Err(format!(
            "`{}` is not a domain: a module path starts with one, e.g. `golang.org/x/text`",
            elements[0]
        ));
    }
    if let Some(version) = version {
        let valid = !version.is_empty()
            && version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
        if !valid {
            return Err(format!(
                "`{version}` is not a version (`v1.2.3`, `latest`, a commit)"
            ));
        }
    }
    Ok(())
}

/// A CRAN package name: letters, digits and `.`, starting with a letter, not ending
/// with `.`.
fn cran(library: &str) -> std::result::Result<(), String> {
    let valid = library.len() >= 2
        && library.starts_with(|c: char| c.is_ascii_alphabetic())
        && !library.ends_with('.')
        && library
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.');
    if !valid {
        return Err(
            "an R package name is letters, digits and `.`, starting with a letter, and \
             takes no version"
                .into(),
        );
    }
    archive(library)
}

/// A gem name with an optional `:version`.
fn gem(library: &str) -> std::result::Result<(), String> {
    let (name, version) = match library.split_once(':') {
        Some((name, version)) => (name, Some(version)),
        None => (library, None),
    };
    let valid = !name.is_empty()
        && name.starts_with(word_char)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid {
        return Err(
            "a gem name is letters, digits, `.`, `_` or `-`, starting with a letter or digit"
                .into(),
        );
    }
    archive(name)?;
    if let Some(version) = version {
        let valid = !version.is_empty()
            && version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
        if !valid {
            return Err(format!("`{version}` is not a gem version (`13.1.0`)"));
        }
    }
    Ok(())
}

/// A plain name, with an optional version after `==`, `@` or `:`.
fn other(library: &str) -> std::result::Result<(), String> {
    let end = span(library, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+')
    });
    let (name, rest) = library.split_at(end);
    let version = ["==", "@", ":"]
        .into_iter()
        .find_map(|sep| rest.strip_prefix(sep));
    let named = !name.is_empty() && name.starts_with(word_char);
    let versioned = rest.is_empty()
        || version.is_some_and(|v| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
        });
    if !named || !versioned {
        return Err(
            "sandlot knows no installer of this language, so a library is a plain name \
             (letters, digits, `._+-`) with an optional version after `==`, `@` or `:`"
                .into(),
        );
    }
    archive(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(installer: Installer, names: &[&str]) {
        for name in names {
            assert_eq!(installer.check(name), Ok(()), "{installer:?} {name}");
        }
    }

    fn refuses(installer: Installer, names: &[&str]) {
        for name in names {
            assert!(
                installer.check(name).is_err(),
                "{installer:?} took {name:?}"
            );
        }
    }

    #[test]
    fn pip_takes_requirements_and_nothing_that_installs_from_elsewhere() {
        accepts(
            Installer::Pip,
            &[
                "numpy",
                "scikit-learn",
                "zope.interface",
                "Django==5.0",
                "pandas[excel,performance]>=2.0,<3",
                "requests~=2.31",
                "torch==2.1.0+cpu",
                "foo===1.0",
                "x1",
            ],
        );
        refuses(
            Installer::Pip,
            &[
                "./evil",
                "../evil",
                "/workspace/evil",
                "~/evil",
                "evil.tar.gz",
                "evil-1.0-py3-none-any.whl",
                "Evil.ZIP",
                "evil.tgz",
                "git+https://example.com/evil.git",
                "https://example.com/evil.whl",
                "file:///workspace/evil",
                "evil @ file:///workspace/evil",
                "evil@file:///workspace/evil",
                "evil;python_version>'3'",
                "--index-url=http://evil.test/simple",
                "-r requirements.txt",
                "-e.",
                "numpy --index-url=http://evil.test",
                "numpy>=",
                "numpy[",
                "numpy]",
                "é",
                "",
                "evil\n",
            ],
        );
    }

    #[test]
    fn npm_takes_registry_packages_not_paths_tarballs_git_or_aliases() {
        accepts(
            Installer::Npm,
            &[
                "lodash",
                "lodash@4.17.21",
                "lodash@^4",
                "@types/node",
                "@types/node@>=20<21",
                "react@latest",
                "left-pad@1.x||2.x",
            ],
        );
        refuses(
            Installer::Npm,
            &[
                "./evil",
                "evil/",
                "user/repo",
                "evil@user/repo",
                "github:user/repo",
                "evil@github:user/repo",
                "evil@file:../evil",
                "file:evil",
                "evil.tgz",
                "evil@npm:other",
                "git+ssh://git@github.com/u/r.git",
                "https://registry.test/evil.tgz",
                "@scope",
                "@scope/",
                ".hidden",
                "_private",
                "--registry=http://evil.test",
            ],
        );
    }

    #[test]
    fn go_takes_module_paths_not_local_ones() {
        accepts(
            Installer::Go,
            &[
                "golang.org/x/text",
                "golang.org/x/text@v0.14.0",
                "github.com/google/uuid@latest",
                "gopkg.in/yaml.v3",
            ],
        );
        refuses(
            Installer::Go,
            &[
                "./...",
                "../mod",
                "/workspace/mod",
                "mod",
                "example.com/x/...",
                "example.com/x@feature/branch",
                "example.com/../x",
                "-u",
            ],
        );
    }

    #[test]
    fn cran_and_gems_take_names() {
        accepts(Installer::Cran, &["data.table", "ggplot2", "R6"]);
        refuses(
            Installer::Cran,
            &["evil.tar.gz", "./evil", "2d", "a_b", "evil.", "x"],
        );
        accepts(Installer::RubyGems, &["rake", "rake:13.1.0", "nokogiri"]);
        refuses(
            Installer::RubyGems,
            &["evil.gem", "./evil-1.0.gem", "rake:>=1", "evil:1/2", "-v"],
        );
    }

    #[test]
    fn an_unknown_installer_gets_plain_names() {
        accepts(
            Installer::Other,
            &["luasocket", "penlight==1.13", "x@2", "y:1.0"],
        );
        refuses(
            Installer::Other,
            &["./x", "a/b", "x.tar.gz", "x==", "x==1/2"],
        );
    }

    #[test]
    fn refusals_say_why_and_name_the_library() {
        let error = check("javascript", &["lodash".into(), "./evil".into()]).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("`./evil`"), "{message}");
        assert!(message.contains("npm"), "{message}");
        assert!(message.contains("a path"), "{message}");
        assert_eq!(error.kind(), crate::error::ErrorKind::InvalidInput);
    }
}

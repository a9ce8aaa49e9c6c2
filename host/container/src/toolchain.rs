//! What an image runs a language with, read from its Debian package database
//! (`/var/lib/dpkg/status`): sandlot's images are made of Debian packages
//! ([`crate::recipe`]), so the database is the account of what is in them, versions
//! included, without starting a container.

use crate::recipe::Recipe;
use sandlot_core::toolchain::Toolchain;
use std::collections::BTreeMap;

/// Where an image keeps its package database.
pub const DPKG_STATUS: &str = "/var/lib/dpkg/status";

/// The installed packages of a dpkg status file, by name, with their Debian versions.
///
/// ```
/// let status = "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b7\n\n\
///               Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0-1\n";
/// let packages = sandlot::container::toolchain::installed_packages(status);
/// assert_eq!(packages["bash"], "5.2.15-2+b7");
/// assert!(!packages.contains_key("gone"));
/// ```
pub fn installed_packages(status: &str) -> BTreeMap<String, String> {
    let mut packages = BTreeMap::new();
    for paragraph in status.split("\n\n") {
        let field = |name: &str| {
            paragraph.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key == name).then(|| value.trim())
            })
        };
        let installed = field("Status").is_some_and(|s| s.ends_with(" installed"));
        if let (true, Some(name), Some(version)) = (installed, field("Package"), field("Version")) {
            packages.insert(name.to_string(), version.to_string());
        }
    }
    packages
}

/// A Debian version as the software's makers write it: without the epoch (`1:`), the
/// Debian revision (`-6+deb12u6`) and a repacking mark (`+dfsg`); of a version that went
/// back (`3.1.7+really3.1.2`), the one it really is.
///
/// ```
/// use sandlot::container::toolchain::upstream_version;
/// assert_eq!(upstream_version("3.11.2-6+deb12u6"), "3.11.2");
/// assert_eq!(upstream_version("1:1.24.2-1+deb12u1"), "1.24.2");
/// assert_eq!(upstream_version("1.5.3+dfsg-2"), "1.5.3");
/// assert_eq!(upstream_version("17.0.13+11-2~deb12u1"), "17.0.13+11");
/// assert_eq!(upstream_version("3.1.7+really3.1.2-0+deb12u1"), "3.1.2");
/// ```
pub fn upstream_version(debian: &str) -> &str {
    let version = match debian.split_once(':') {
        Some((epoch, rest)) if epoch.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => debian,
    };
    let version = version.rsplit_once('-').map_or(version, |(up, _)| up);
    let version = version
        .rsplit_once("+really")
        .map_or(version, |(_, really)| really);
    ["+dfsg", "+ds", "+repack"]
        .iter()
        .find_map(|mark| version.find(mark).map(|at| &version[..at]))
        .unwrap_or(version)
}

/// How a language's interpreter or compiler is packaged in Debian.
struct Interpreter {
    language: &'static str,
    name: &'static str,
    /// Whether a package is it (`python3.11`, not `python3.11-minimal`).
    is: fn(&str) -> bool,
}

/// `prefix` followed by a version of digits and dots, then `suffix`.
fn versioned(package: &str, prefix: &str, suffix: &str) -> bool {
    package
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(suffix))
        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        language: "python",
        name: "CPython",
        is: |p| versioned(p, "python3.", ""),
    },
    Interpreter {
        language: "javascript",
        name: "Node.js",
        is: |p| p == "nodejs",
    },
    Interpreter {
        language: "typescript",
        name: "TypeScript",
        is: |p| p == "node-typescript",
    },
    Interpreter {
        language: "java",
        name: "OpenJDK",
        is: |p| versioned(p, "openjdk-", "-jdk-headless"),
    },
    Interpreter {
        language: "cpp",
        name: "GCC",
        is: |p| versioned(p, "g++-", ""),
    },
    Interpreter {
        language: "go",
        name: "Go",
        is: |p| versioned(p, "golang-", "-go"),
    },
    Interpreter {
        language: "r",
        name: "R",
        is: |p| p == "r-base-core",
    },
    Interpreter {
        language: "ruby",
        name: "Ruby",
        is: |p| versioned(p, "ruby", ""),
    },
    Interpreter {
        language: "bash",
        name: "Bash",
        is: |p| p == "bash",
    },
];

/// Debian's prefix for a language's libraries, and its packages that are not libraries
/// a program imports.
fn library_prefix(language: &str) -> Option<(&'static str, &'static [&'static str])> {
    match language {
        "python" => Some((
            "python3-",
            &["minimal", "venv", "distutils", "lib2to3", "dev", "pip-whl"],
        )),
        "r" => Some(("r-cran-", &[])),
        "ruby" => Some(("ruby-", &[])),
        _ => None,
    }
}

/// What `image` runs `language` with, from its installed `packages`; `None` when no
/// package of the image is the language's interpreter (an image not made of Debian's
/// packages, say). Python's, R's and Ruby's libraries are every package of theirs in the
/// image; other languages' are the ones the image's recipe names (Node.js images
/// carry hundreds of npm's own).
pub fn of_image(
    language: &str,
    image: &str,
    packages: &BTreeMap<String, String>,
) -> Option<Toolchain> {
    let interpreter = INTERPRETERS.iter().find(|i| i.language == language)?;
    // The newest, where an image has two (python3.11 and python3.12).
    let (_, version) = packages.iter().rfind(|(name, _)| (interpreter.is)(name))?;
    let mut toolchain = Toolchain::new(
        interpreter.name,
        upstream_version(version),
        format!("the Debian packages of {image}"),
    );
    let recipe = Recipe::all().into_iter().find(|r| r.image == image);
    for (name, version) in packages {
        let library = match library_prefix(language) {
            Some((prefix, not)) => name.strip_prefix(prefix).filter(|l| !not.contains(l)),
            None => recipe
                .as_ref()
                .filter(|r| r.packages.contains(name) && !(interpreter.is)(name))
                .and_then(|_| name.strip_prefix("node-")),
        };
        if let Some(library) = library {
            toolchain = toolchain.with_library(library, upstream_version(version));
        }
    }
    Some(toolchain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(packages: &[(&str, &str)]) -> String {
        packages
            .iter()
            .map(|(name, version)| {
                format!("Package: {name}\nStatus: install ok installed\nVersion: {version}\n")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn python_is_the_versioned_interpreter_package_and_its_libraries_are_python3_ones() {
        let packages = installed_packages(&status(&[
            ("python3", "3.11.2-1+b1"),
            ("python3.11", "3.11.2-6+deb12u6"),
            ("python3.11-minimal", "3.11.2-6+deb12u6"),
            ("python3-minimal", "3.11.2-1+b1"),
            ("python3-pandas", "1.5.3+dfsg-2"),
            ("python3-numpy", "1:1.24.2-1+deb12u1"),
            ("libpython3.11", "3.11.2-6+deb12u6"),
        ]));
        let python = of_image("python", "sandlot/python:latest", &packages).unwrap();
        assert_eq!(python.to_string(), "CPython 3.11.2");
        assert_eq!(
            python.libraries,
            BTreeMap::from([
                ("numpy".to_string(), "1.24.2".to_string()),
                ("pandas".to_string(), "1.5.3".to_string()),
            ])
        );
        assert_eq!(
            python.source,
            "the Debian packages of sandlot/python:latest"
        );
    }

    #[test]
    fn node_libraries_are_the_recipes_not_npms_own() {
        let packages = installed_packages(&status(&[
            ("nodejs", "18.20.4+dfsg-1~deb12u1"),
            ("node-typescript", "4.9.5+ds1-1"),
            ("node-semver", "7.3.5+~7.3.8-2"),
        ]));
        let node = of_image("javascript", "sandlot/node:latest", &packages).unwrap();
        assert_eq!(node.to_string(), "Node.js 18.20.4");
        assert_eq!(node.libraries.keys().collect::<Vec<_>>(), ["typescript"]);
        let typescript = of_image("typescript", "sandlot/node:latest", &packages).unwrap();
        assert_eq!(typescript.to_string(), "TypeScript 4.9.5");
    }

    #[test]
    fn an_image_without_the_interpreter_package_has_no_account() {
        let packages = installed_packages(&status(&[("bash", "5.2.15-2+b7")]));
        assert!(of_image("python", "python:3.12", &packages).is_none());
        assert_eq!(
            of_image("bash", "python:3.12", &packages)
                .unwrap()
                .to_string(),
            "Bash 5.2.15"
        );
        assert!(of_image("cobol", "python:3.12", &packages).is_none());
    }
}

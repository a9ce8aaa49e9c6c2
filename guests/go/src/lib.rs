//! Go handler: sets up a module so `go get` works, builds `main.go` and runs the
//! binary. The module cache and build cache live in the working directory because the
//! sandbox's root is read-only; installs download in a module of their own
//! ([`GO_GET`]).
#![no_std]

extern crate alloc;

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct Go;

/// The module path of the user's program.
const INIT_MODULE: &str = "test -f go.mod || exec go mod init sandlot.local/main";

impl Guest for Go {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "go".into(),
            aliases: vec!["golang".into()],
            display_name: "Go".into(),
            file_extension: "go".into(),
            default_image: "sandlot/go:latest".into(),
            capabilities: vec![Capability::InstallLibraries],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        // A session runs many plans in one workspace: the module exists after the first.
        let mut commands = vec![command(Phase::Setup, &["sh", "-c", INIT_MODULE])];
        commands.extend(Self::install(libraries, options.workdir.clone())?);
        commands.push(command(Phase::Build, &["go", "build", "-o", "main", "."]));
        commands.push(command(Phase::Run, &["./main"]).args(&options.args));
        let env = go_env(&options.workdir);
        for command in &mut commands {
            if command.phase != Phase::Run {
                command.env.extend(env.iter().cloned());
            }
        }
        Ok(Plan {
            files: vec![file("main.go", code)],
            commands,
        })
    }

    fn install(libraries: Vec<String>, workdir: String) -> Result<Vec<Command>, String> {
        if libraries.is_empty() {
            return Ok(Vec::new());
        }
        // A module path with an optional `@version`.
        check_libraries(&libraries, "Go module", |l| only(l, "._~/-@+"))?;
        // The directory and the modules are the script's arguments, never its text.
        let mut install = command(Phase::Install, &["sh", "-c", GO_GET, "go-get", &workdir])
            .args(&libraries)
            .network();
        install.env = go_env(&workdir);
        Ok(vec![install])
    }

    no_plots_no_kernel!();

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// The packages of `import "x"`, `import name "x"` and `import ( ... )` declarations.
fn go_imports(scan: &Scan) -> Vec<Import> {
    import_specs(scan).into_iter().map(|(import, _)| import).collect()
}

/// The name each import binds: its alias, or the package's name as the path suggests
/// it (`exec` for `os/exec`, `yaml` for `gopkg.in/yaml.v3`, `git` as well as `go-git`
/// for `github.com/go-git/go-git/v5`). A dot import makes the members plain names;
/// a blank import binds nothing.
fn go_bindings(scan: &Scan) -> Vec<Binding> {
    let mut bindings = Vec::new();
    for (import, alias) in import_specs(scan) {
        let names: Vec<String> = match alias {
            Some("_") => continue,
            Some(".") => vec![String::new()],
            Some(alias) => vec![alias.to_string()],
            None => package_names(&import.module),
        };
        for name in names {
            bindings.push(Binding {
                name,
                stands_for: import.module.clone(),
            });
        }
    }
    bindings
}

/// The names a package at `path` is likely declared with: its last element without
/// a major-version element or suffix, and without a `go-` prefix or `-go` suffix.
fn package_names(path: &str) -> Vec<String> {
    let is_version = |s: &str| {
        s.strip_prefix('v')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut elements = path.rsplit('/');
    let mut last = elements.next().unwrap_or(path);
    if is_version(last) {
        last = elements.next().unwrap_or(last);
    }
    if let Some((base, version)) = last.rsplit_once('.') {
        if is_version(version) {
            last = base;
        }
    }
    let mut names = vec![last.to_string()];
    let bare = last.strip_prefix("go-").unwrap_or(last);
    let bare = bare.strip_suffix("-go").unwrap_or(bare);
    if bare != last {
        names.push(bare.to_string());
    }
    names
}

/// Each import and the alias written before its path, if any.
fn import_specs(scan: &Scan) -> Vec<(Import, Option<&str>)> {
    let mut imports = Vec::new();
    for literal in &scan.literals {
        let before = &scan.code[..literal.at];
        let Some(keyword) = before.rfind("import") else {
            continue;
        };
        let between = &before[keyword + "import".len()..];
        // `import "x"`, `import alias "x"`, or inside a group that has not closed yet.
        let single = between.trim().split_whitespace().count() <= 1 && !between.contains('(');
        let grouped = between.trim_start().starts_with('(') && !between.contains(')');
        if single || grouped {
            let line_start = before.rfind(['\n', '(']).map_or(0, |at| at + 1);
            let alias = before[line_start.max(keyword + "import".len())..].trim();
            imports.push((
                Import {
                    module: literal.text.clone(),
                    line: literal.line,
                },
                (!alias.is_empty()).then_some(alias),
            ));
        }
    }
    imports
}

/// Installs the modules named in its arguments (after the first, the working
/// directory) without letting the workspace steer what goes online. Earlier code may
/// have written the session's `go.mod` (a `require` or `replace` names any host, and
/// a path can carry data out) or a `go.work`; so the download runs in a module of its own, in the install's fresh
/// home, into a module cache there: only the names asked for and what they need go
/// out. Then `go get` in the working directory adds them to the session's module
/// from that cache alone: no proxy, no checksum database, no version control, so
/// whatever the session's files say, nothing more reaches the network.
const GO_GET: &str = "set -e\n\
work=\"$1\"\n\
shift\n\
fetch=\"$HOME/go-fetch\"\n\
mkdir -p \"$fetch/module\"\n\
cd \"$fetch/module\"\n\
export GOWORK=off GOMODCACHE=\"$fetch/cache\" GOFLAGS='-mod=mod -modcacherw'\n\
go mod init sandlot.local/fetch 2>\"$fetch/init.log\" || { cat \"$fetch/init.log\" >&2; exit 1; }\n\
go get \"$@\"\n\
cd \"$work\"\n\
export GOPROXY=\"file://$GOMODCACHE/cache/download\" GOSUMDB=off GONOPROXY= GONOSUMDB= \
GOPRIVATE= GOVCS='*:off' GOFLAGS=-mod=mod\n\
unset GOWORK GOMODCACHE\n\
go get \"$@\"\n";

/// Environment of every go command: caches inside the working directory, no automatic
/// toolchain download, no cgo (no C compiler is needed in the image).
fn go_env(workdir: &str) -> Vec<(String, String)> {
    [
        ("GOPATH", join(workdir, ".sandlot/go")),
        ("GOCACHE", join(workdir, ".sandlot/go-build")),
        ("GOTOOLCHAIN", "local".into()),
        ("GOFLAGS", "-mod=mod".into()),
        ("CGO_ENABLED", "0".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v))
    .collect()
}

const RULES: &[Rule] = &[
    Rule {
        id: "go.process",
        severity: Severity::High,
        needles: &["exec.Command(", "syscall.Exec(", "syscall.ForkExec("],
        modules: &["os/exec"],
        message: "starts other processes",
    },
    Rule {
        id: "go.unsafe",
        severity: Severity::Medium,
        needles: &[],
        modules: &["unsafe", "syscall", "plugin", "golang.org/x/sys/*"],
        message: "bypasses Go's memory safety or calls the kernel directly",
    },
    Rule {
        id: "go.network",
        severity: Severity::Medium,
        needles: &["net.Dial(", "http.Get("],
        modules: &["net", "net/*"],
        message: "uses the network",
    },
    Rule {
        id: "go.file-deletion",
        severity: Severity::Medium,
        needles: &["os.Remove(", "os.RemoveAll("],
        modules: &[],
        message: "deletes files",
    },
];

/// How the analysis reads go code.
const LANGUAGE: Language = Language {
    id: "go",
    syntax: &scan::C_LIKE,
    imports: go_imports,
    bindings: go_bindings,
    uses: restrict::no_uses,
    rules: RULES,
    name_chars: "",
};

export_handler!(Go);

//! Java handler: compiles a single-file program with `javac` and runs its main class.
//! The file and class are named after the program's public class (or its first class),
//! and a `package` declaration is honoured.
#![no_std]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct Java;

impl Guest for Java {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "java".into(),
            aliases: vec!["jvm".into()],
            display_name: "Java".into(),
            file_extension: "java".into(),
            default_image: "sandlot/jvm:latest".into(),
            capabilities: Vec::new(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        Self::install(libraries, options.workdir.clone())?;
        let class = main_class(&code);
        let qualified = match package(&code) {
            Some(package) => format!("{package}.{class}"),
            None => class.to_string(),
        };
        let source = format!("{class}.java");
        Ok(Plan {
            commands: vec![
                command(
                    Phase::Build,
                    &["javac", "-encoding", "UTF-8", "-d", ".", &source],
                ),
                command(Phase::Run, &["java", "-cp", ".", &qualified]).args(&options.args),
            ],
            files: vec![file(&source, code)],
        })
    }

    fn install(libraries: Vec<String>, _workdir: String) -> Result<Vec<Command>, String> {
        no_libraries(&libraries, "java")
    }

    no_plots_no_kernel!();

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// The imports of the code: `import a.b.C;` (`a.b.C`), `import a.b.*;` (`a.b`, and
/// whether it is a whole package) and `import static a.b.C.m;`, any number to a line.
fn java_import_specs(scan: &Scan) -> Vec<(Import, bool)> {
    let code = scan.code.as_str();
    let mut imports = Vec::new();
    let mut start = 0;
    for statement in code.split_inclusive(';') {
        let at = start;
        start += statement.len();
        let trimmed = statement.trim_start();
        let Some(rest) = trimmed.strip_prefix("import") else {
            continue;
        };
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = rest.trim_start();
        let rest = rest
            .strip_prefix("static")
            .filter(|r| r.starts_with(char::is_whitespace))
            .unwrap_or(rest);
        let name: String = rest
            .trim_end_matches(';')
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let (name, package) = match name.strip_suffix(".*") {
            Some(package) => (package.to_string(), true),
            None => (name, false),
        };
        if !name.is_empty() {
            let line = scan.line_of(at + (statement.len() - trimmed.len()));
            imports.push((Import { module: name, line }, package));
        }
    }
    imports
}

/// The classes and packages the code imports.
fn java_imports(scan: &Scan) -> Vec<Import> {
    java_import_specs(scan)
        .into_iter()
        .map(|(import, _)| import)
        .collect()
}

/// `import a.b.C;` binds `C` to `a.b.C`, so `C.m` reaches `a.b.C.m`; `import a.b.*;`
/// and the implicit `java.lang.*` make a package's classes plain names.
fn java_bindings(scan: &Scan) -> Vec<Binding> {
    let mut bindings = vec![Binding {
        name: String::new(),
        stands_for: "java.lang".into(),
    }];
    for (import, package) in java_import_specs(scan) {
        let name = match import.module.rsplit_once('.') {
            _ if package => String::new(),
            Some((_, name)) => name.to_string(),
            None => continue,
        };
        bindings.push(Binding {
            name,
            stands_for: import.module,
        });
    }
    bindings
}

/// The class javac requires the file to be named after: the public class, else the
/// first class, else `Main`.
fn main_class(code: &str) -> &str {
    let public = code.match_indices("public").find_map(|(at, _)| {
        let rest = code[at + "public".len()..].trim_start();
        let rest = rest
            .strip_prefix("final ")
            .or_else(|| rest.strip_prefix("abstract "))
            .unwrap_or(rest)
            .trim_start();
        identifier_after(rest, "class")
            .filter(|_| rest.starts_with("class"))
            .or_else(|| identifier_after(rest, "record").filter(|_| rest.starts_with("record")))
    });
    public
        .or_else(|| identifier_after(code, "class"))
        .unwrap_or("Main")
}

/// The dotted name of the `package` declaration, if there is one.
fn package(code: &str) -> Option<&str> {
    code.lines().find_map(|line| {
        let name = line.trim().strip_prefix("package ")?.trim();
        let name = name.strip_suffix(';')?.trim();
        let valid = !name.is_empty()
            && name
                .split('.')
                .all(|part| !part.is_empty() && only(part, "_$"));
        valid.then_some(name)
    })
}

const RULES: &[Rule] = &[
    Rule {
        id: "java.process",
        severity: Severity::High,
        needles: &["Runtime.getRuntime().exec", "ProcessBuilder"],
        modules: &[],
        message: "starts other processes",
    },
    Rule {
        id: "java.native-code",
        severity: Severity::High,
        needles: &["System.load", "sun.misc.Unsafe", "JNI"],
        modules: &[],
        message: "loads native code",
    },
    Rule {
        id: "java.reflection",
        severity: Severity::Medium,
        needles: &["setAccessible(", "Class.forName(", "MethodHandles"],
        modules: &[],
        message: "uses reflection to reach private code",
    },
    Rule {
        id: "java.network",
        severity: Severity::Medium,
        needles: &["java.net", "Socket(", "HttpClient", "URLConnection"],
        modules: &[],
        message: "uses the network",
    },
    Rule {
        id: "java.file-deletion",
        severity: Severity::Medium,
        needles: &["Files.delete", ".delete()", "deleteOnExit"],
        modules: &[],
        message: "deletes files",
    },
];

/// How the analysis reads java code.
const LANGUAGE: Language = Language {
    id: "java",
    syntax: &scan::C_LIKE,
    imports: java_imports,
    bindings: java_bindings,
    uses: restrict::no_uses,
    rules: RULES,
    name_chars: "$",
};

export_handler!(Java);

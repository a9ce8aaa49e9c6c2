//! C++ handler: compiles `main.cpp` with g++ (C++17, optimised) and runs the binary.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct Cpp;

impl Guest for Cpp {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "cpp".into(),
            aliases: vec!["c++".into(), "cxx".into(), "g++".into()],
            display_name: "C++".into(),
            file_extension: "cpp".into(),
            default_image: "sandlot/cpp:latest".into(),
            capabilities: Vec::new(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        Self::install(libraries, options.workdir.clone())?;
        Ok(Plan {
            files: vec![file("main.cpp", code)],
            commands: vec![
                command(
                    Phase::Build,
                    &[
                        "g++",
                        "-std=c++17",
                        "-O2",
                        "-pipe",
                        "-Wall",
                        "-o",
                        "main",
                        "main.cpp",
                        "-pthread",
                        "-lm",
                    ],
                ),
                command(Phase::Run, &["./main"]).args(&options.args),
            ],
        })
    }

    fn install(libraries: Vec<String>, _workdir: String) -> Result<Vec<Command>, String> {
        no_libraries(&libraries, "cpp")
    }

    no_plots_no_kernel!();

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// The headers of `#include <x>` and `#include "x"`.
fn include_imports(scan: &Scan) -> Vec<Import> {
    let mut imports = Vec::new();
    let mut offset = 0;
    for (index, line) in scan.code.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        let Some(rest) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("include") else {
            continue;
        };
        let rest = rest.trim_start();
        let header = if let Some(angled) = rest.strip_prefix('<') {
            angled.split('>').next().map(String::from)
        } else {
            // A quoted header is a string literal: its text is blanked in the code.
            scan.literals
                .iter()
                .find(|l| l.at >= start && l.at < offset)
                .map(|l| l.text.clone())
        };
        if let Some(header) = header.filter(|h| !h.is_empty()) {
            imports.push(Import {
                module: header,
                line: index as u32 + 1,
            });
        }
    }
    imports
}

const RULES: &[Rule] = &[
    Rule {
        id: "cpp.process",
        severity: Severity::High,
        needles: &[
            "system(",
            "popen(",
            "execl",
            "execv",
            "execvp",
            "posix_spawn",
        ],
        modules: &[],
        message: "starts other processes",
    },
    Rule {
        id: "cpp.process-control",
        severity: Severity::Medium,
        needles: &["fork(", "kill(", "ptrace(", "setuid("],
        modules: &[],
        message: "controls processes",
    },
    Rule {
        id: "cpp.native-loading",
        severity: Severity::High,
        needles: &["dlopen(", "asm(", "__asm__", "syscall("],
        modules: &[],
        message: "loads code or issues raw system calls",
    },
    Rule {
        id: "cpp.network",
        severity: Severity::Medium,
        needles: &["socket(", "connect(", "<sys/socket.h>", "<netinet/"],
        modules: &[],
        message: "uses the network",
    },
    Rule {
        id: "cpp.file-deletion",
        severity: Severity::Medium,
        needles: &["remove(", "unlink(", "rmdir(", "std::filesystem::remove"],
        modules: &[],
        message: "deletes files",
    },
];

/// How the analysis reads cpp code.
const LANGUAGE: Language = Language {
    id: "cpp",
    syntax: &scan::C_LIKE,
    imports: include_imports,
    bindings: restrict::no_bindings,
    uses: restrict::no_uses,
    rules: RULES,
    name_chars: "",
};

export_handler!(Cpp);

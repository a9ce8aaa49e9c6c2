//! Bash handler: runs `main.sh` with bash, and keeps a session's state in a Bash
//! kernel.
#![no_std]

extern crate alloc;

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct Bash;

impl Guest for Bash {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "bash".into(),
            aliases: vec!["sh".into(), "shell".into()],
            display_name: "Bash".into(),
            file_extension: "sh".into(),
            default_image: "sandlot/polyglot:latest".into(),
            capabilities: vec![Capability::Interactive],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        Self::install(libraries, options.workdir)?;
        Ok(Plan {
            files: vec![file("main.sh", code)],
            commands: vec![command(Phase::Run, &["bash", "main.sh"]).args(&options.args)],
        })
    }

    fn install(libraries: Vec<String>, _workdir: String) -> Result<Vec<Command>, String> {
        no_libraries(&libraries, "bash")
    }

    no_plots!();

    fn kernel(_options: KernelOptions) -> Option<KernelSpec> {
        Some(kernel_spec(
            KERNEL,
            "kernel.sh",
            &["bash", "{driver}"],
            Vec::new(),
        ))
    }

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// The kernel's driver: sources each cell in one shell; SIGINT leaves the cell.
const KERNEL: &str = include_str!("kernel.sh");

const RULES: &[Rule] = &[
    Rule {
        id: "bash.fork-bomb",
        severity: Severity::Critical,
        needles: &[":(){", ":() {"],
        modules: &[],
        message: "defines a fork bomb",
    },
    Rule {
        id: "bash.destructive",
        severity: Severity::High,
        needles: &["rm -rf /", "mkfs", "dd if=", "> /dev/sd", "shred "],
        modules: &[],
        message: "destroys files or disks",
    },
    Rule {
        id: "bash.privilege",
        severity: Severity::High,
        needles: &["sudo ", "su -", "chmod +s", "chmod u+s", "setcap "],
        modules: &[],
        message: "tries to gain privileges",
    },
    Rule {
        id: "bash.network",
        severity: Severity::Medium,
        needles: &[
            "curl ",
            "wget ",
            "nc ",
            "ncat ",
            "/dev/tcp/",
            "/dev/udp/",
            "ssh ",
        ],
        modules: &[],
        message: "uses the network",
    },
    Rule {
        id: "bash.dynamic-code",
        severity: Severity::Medium,
        needles: &["eval ", "source <(", "bash -c", "sh -c"],
        modules: &[],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "bash.file-deletion",
        severity: Severity::Low,
        needles: &["rm "],
        modules: &[],
        message: "deletes files",
    },
];

/// The files code reads in as part of itself: `source FILE` and `. FILE`. A shell's
/// modules are those files; its calls are commands.
fn sourced_files(scan: &Scan) -> Vec<Import> {
    let mut imports = Vec::new();
    for (index, line) in scan.code.lines().enumerate() {
        for command in line.split([';', '&', '|']) {
            let command = command.trim_start();
            let Some(rest) = command
                .strip_prefix("source ")
                .or_else(|| command.strip_prefix(". "))
            else {
                continue;
            };
            let file = rest.split_whitespace().next().unwrap_or("");
            let file = file.trim_matches(['"', '\'']);
            if !file.is_empty() {
                imports.push(Import {
                    module: file.to_string(),
                    line: index as u32 + 1,
                });
            }
        }
    }
    imports
}

/// How the analysis reads bash code.
const LANGUAGE: Language = Language {
    id: "bash",
    syntax: &scan::SHELL,
    imports: sourced_files,
    bindings: restrict::no_bindings,
    uses: restrict::no_uses,
    rules: RULES,
    name_chars: "-",
};

export_handler!(Bash);

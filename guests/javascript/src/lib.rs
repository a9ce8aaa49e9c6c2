//! JavaScript handler: runs `main.js` with Node.js, installs packages with npm into the
//! sandbox's working directory, and keeps a session's state in a Node.js kernel.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct JavaScript;

impl Guest for JavaScript {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "javascript".into(),
            aliases: vec!["js".into(), "node".into(), "nodejs".into()],
            display_name: "JavaScript (Node.js)".into(),
            file_extension: "js".into(),
            default_image: "sandlot/node:latest".into(),
            capabilities: vec![Capability::InstallLibraries, Capability::Interactive],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        let mut commands = npm_install(&libraries, &options.workdir)?;
        commands.push(command(Phase::Run, &["node", "main.js"]).args(&options.args));
        Ok(Plan {
            files: vec![file("main.js", code)],
            commands,
        })
    }

    fn install(libraries: Vec<String>, workdir: String) -> Result<Vec<Command>, String> {
        npm_install(&libraries, &workdir)
    }

    no_plots!();

    fn kernel(_options: KernelOptions) -> Option<KernelSpec> {
        // Node's REPL rewrites top-level `await` with an internal module.
        Some(kernel_spec(
            KERNEL,
            "kernel.js",
            &["node", "--expose-internals", "{driver}"],
            Vec::new(),
        ))
    }

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// The kernel's driver: runs cells in one Node.js process, shows a final expression's
/// value as the REPL does, waits for what a cell started, turns SIGINT into an
/// interrupt of the cell.
const KERNEL: &str = include_str!("kernel.js");

/// How the analysis reads JavaScript.
const LANGUAGE: Language = restrict::node_language("javascript");

export_handler!(JavaScript);

//! TypeScript handler: type-checks and compiles `main.ts` with `tsc`, then runs the
//! result with Node.js. Type errors are compile errors, as for any TypeScript project.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct TypeScript;

/// Global type definitions the sandlot node image installs (`@types/node`), so code
/// using `process` or `require` type-checks.
const TYPE_ROOTS: &str = "/usr/local/lib/node_modules/@types";

impl Guest for TypeScript {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "typescript".into(),
            aliases: vec!["ts".into()],
            display_name: "TypeScript".into(),
            file_extension: "ts".into(),
            default_image: "sandlot/node:latest".into(),
            capabilities: vec![Capability::InstallLibraries],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        let mut commands = npm_install(&libraries, &options.workdir)?;
        commands.push(command(
            Phase::Build,
            &[
                "tsc",
                "--target",
                "es2022",
                "--module",
                "commonjs",
                "--esModuleInterop",
                "--skipLibCheck",
                "--typeRoots",
                TYPE_ROOTS,
                "--outDir",
                ".sandlot/ts",
                "main.ts",
            ],
        ));
        commands.push(command(Phase::Run, &["node", ".sandlot/ts/main.js"]).args(&options.args));
        Ok(Plan {
            files: vec![file("main.ts", code)],
            commands,
        })
    }

    fn install(libraries: Vec<String>, workdir: String) -> Result<Vec<Command>, String> {
        npm_install(&libraries, &workdir)
    }

    no_plots_no_kernel!();

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// How the analysis reads TypeScript: as the JavaScript it becomes.
const LANGUAGE: Language = restrict::node_language("typescript");

export_handler!(TypeScript);

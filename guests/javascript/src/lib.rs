//! JavaScript handler: runs `main.js` with Node.js, installs packages with npm into the
//! sandbox's working directory.
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
            capabilities: vec![Capability::InstallLibraries],
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

    no_plots_no_kernel!();

    fn analyze(code: String) -> Vec<Finding> {
        analyze(&code, "//", NODE_RULES)
    }
}

export_handler!(JavaScript);

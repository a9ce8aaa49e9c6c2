//! R handler: runs `main.R` with Rscript, installs packages with `install.packages`
//! into the sandbox's working directory, saves plots as PNG files.
#![no_std]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct R;

/// Library directory, relative to the working directory.
const LIBRARY: &str = ".sandlot/R";

impl Guest for R {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "r".into(),
            aliases: vec!["rscript".into()],
            display_name: "R".into(),
            file_extension: "R".into(),
            default_image: "sandlot/r:latest".into(),
            capabilities: vec![Capability::InstallLibraries, Capability::CapturePlots],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        let mut commands = Self::install(libraries, options.workdir.clone())?;
        let prelude = options
            .capture_plots
            .then(|| Self::plot_prelude(options.output_dir.clone()))
            .flatten();
        let source = prepend(prelude, &code);
        commands.push(
            command(Phase::Run, &["Rscript", "main.R"])
                .args(&options.args)
                .env("R_LIBS_USER", &join(&options.workdir, LIBRARY)),
        );
        Ok(Plan {
            files: vec![file("main.R", source)],
            commands,
        })
    }

    fn install(libraries: Vec<String>, workdir: String) -> Result<Vec<Command>, String> {
        if libraries.is_empty() {
            return Ok(Vec::new());
        }
        // CRAN package names: letters, digits and dots. Nothing else can reach the R
        // expression below, so it cannot be escaped from.
        check_libraries(&libraries, "R package", |l| only(l, "."))?;
        let names: Vec<String> = libraries.iter().map(|l| format!("\"{l}\"")).collect();
        let names = names.join(", ");
        // install.packages only warns when a package fails; check each one loads so a
        // failed install fails the command.
        let library = join(&workdir, LIBRARY);
        let script = format!(
            "pkgs <- c({names}); lib <- {}; \
             dir.create(lib, recursive = TRUE, showWarnings = FALSE); \
             install.packages(pkgs, lib = lib, repos = \"https://cloud.r-project.org\", quiet = TRUE); \
             for (p in pkgs) if (!requireNamespace(p, lib.loc = lib, quietly = TRUE)) \
             {{ message(\"could not install \", p); quit(status = 1) }}",
            r_string(&library)
        );
        Ok(vec![
            command(Phase::Install, &["Rscript", "-e", &script]).network()
        ])
    }

    fn plot_prelude(output_dir: String) -> Option<String> {
        Some(format!(
            "options(device = function(...) grDevices::png(filename = file.path({}, \"plot-%03d.png\"), width = 800, height = 600))\n",
            r_string(&output_dir)
        ))
    }

    fn plot_flush(_output_dir: String) -> Option<String> {
        // Each run is its own Rscript process, which closes the device at exit.
        None
    }

    fn may_plot(code: String) -> bool {
        ["plot", "hist", "ggplot", "barplot", "boxplot", "png(", "dev."]
            .iter()
            .any(|word| code.contains(word))
    }

    fn kernel(_options: KernelOptions) -> Option<KernelSpec> {
        None
    }

    fn analyze(code: String) -> Vec<Finding> {
        analyze(&code, "#", RULES)
    }
}

/// `s` as an R string literal.
fn r_string(s: &str) -> String {
    let mut out = "\"".to_string();
    for c in s.chars() {
        match c {
            '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

const RULES: &[Rule] = &[
    Rule {
        id: "r.process",
        severity: Severity::High,
        needles: &["system(", "system2(", "shell(", "pipe("],
        message: "starts other processes",
    },
    Rule {
        id: "r.dynamic-code",
        severity: Severity::Medium,
        needles: &["eval(parse(", "parse(text"],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "r.native-code",
        severity: Severity::High,
        needles: &["dyn.load(", ".Call(", ".C("],
        message: "loads native code",
    },
    Rule {
        id: "r.network",
        severity: Severity::Medium,
        needles: &[
            "download.file(",
            "url(",
            "socketConnection(",
            "httr::",
            "curl::",
        ],
        message: "uses the network",
    },
    Rule {
        id: "r.file-deletion",
        severity: Severity::Medium,
        needles: &["unlink(", "file.remove("],
        message: "deletes files",
    },
];

export_handler!(R);

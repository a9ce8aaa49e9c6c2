//! R handler: runs `main.R` with Rscript, installs packages with `install.packages`
//! into the sandbox's working directory, saves plots (base graphics, ggplot2) as PNG
//! files, and keeps a session's state in an R kernel.
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
            capabilities: vec![
                Capability::InstallLibraries,
                Capability::CapturePlots,
                Capability::Interactive,
            ],
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
        // failed install fails the command. R loads packages as it installs and checks
        // them (dependencies, then each package itself), from its libraries: the
        // session's library is the code's to write, so a package planted there would
        // run its `.onLoad` online. They install into a library in the installer's own
        // home (fresh for each install, out of the code's reach), seeing only R's
        // own, and are then copied into the session's library.
        let library = join(&workdir, LIBRARY);
        let script = format!(
            "pkgs <- c({names}); lib <- {}; \
             stage <- file.path(Sys.getenv(\"HOME\"), \"R-library\"); \
             dir.create(stage, recursive = TRUE, showWarnings = FALSE); \
             dir.create(lib, recursive = TRUE, showWarnings = FALSE); \
             .libPaths(stage); \
             install.packages(pkgs, lib = stage, repos = \"https://cloud.r-project.org\", quiet = TRUE); \
             for (p in pkgs) if (!requireNamespace(p, lib.loc = stage, quietly = TRUE)) \
             {{ message(\"could not install \", p); quit(status = 1) }}; \
             for (d in list.files(stage)) {{ unlink(file.path(lib, d), recursive = TRUE); \
             if (!file.copy(file.path(stage, d), lib, recursive = TRUE)) \
             {{ message(\"could not copy \", d, \" into the library\"); quit(status = 1) }} }}",
            r_string(&library)
        );
        // --vanilla: no `.Rprofile` or `.Renviron` that earlier code left in the
        // workspace (or in a home) is read, so none can redefine install.packages.
        Ok(vec![
            command(Phase::Install, &["Rscript", "--vanilla", "-e", &script]).network()
        ])
    }

    fn plot_prelude(output_dir: String) -> Option<String> {
        Some(PRELUDE.replace("@OUTPUT_DIR@", &r_string(&output_dir)))
    }

    fn plot_flush(_output_dir: String) -> Option<String> {
        // The prelude attaches its flush where this finds it.
        Some("if (exists(\".sandlot_flush_plots\")) .sandlot_flush_plots()\n".into())
    }

    fn may_plot(code: String) -> bool {
        [
            "plot", "hist", "ggplot", "barplot", "boxplot", "png(", "dev.",
        ]
        .iter()
        .any(|word| code.contains(word))
    }

    fn kernel(options: KernelOptions) -> Option<KernelSpec> {
        Some(kernel_spec(
            KERNEL,
            "kernel.R",
            &["Rscript", "{driver}"],
            vec![("R_LIBS_USER".into(), join(&options.workdir, LIBRARY))],
        ))
    }

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// Packages code loads: `library(x)`, `require(x)`, `requireNamespace("x")`,
/// `loadNamespace("x")` (a name or a string), and `x::f` / `x:::f`.
fn r_imports(scan: &Scan) -> Vec<Import> {
    let mut imports = Vec::new();
    let code = scan.code.as_str();
    let is_name = |c: char| c.is_alphanumeric() || c == '.' || c == '_';
    for call in ["library(", "require(", "requireNamespace(", "loadNamespace("] {
        for (at, _) in code.match_indices(call) {
            if code[..at].chars().next_back().is_some_and(is_name) {
                continue;
            }
            let after = at + call.len();
            let rest = code[after..].trim_start();
            let name: String = if let Some(literal) = scan
                .literals
                .iter()
                .find(|l| l.at == code.len() - rest.len())
            {
                literal.text.clone()
            } else {
                rest.chars().take_while(|c| is_name(*c)).collect()
            };
            if !name.is_empty() {
                imports.push(Import {
                    module: name,
                    line: scan.line_of(at),
                });
            }
        }
    }
    for (at, _) in code.match_indices("::") {
        if code[..at].ends_with(':') {
            continue;
        }
        let start = code[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_name(*c))
            .last()
            .map_or(at, |(i, _)| i);
        if start < at {
            imports.push(Import {
                module: code[start..at].to_string(),
                line: scan.line_of(at),
            });
        }
    }
    imports
}

/// The kernel's driver: runs cells in one R process, prints visible values as R's
/// prompt does, turns SIGINT into an interrupt of the cell.
const KERNEL: &str = include_str!("kernel.R");

/// Sends every graphics device's pages to `plot-NNN.png` in the output directory, when
/// the devices close: after each run (`plot-flush`) and when the program exits, even by
/// an error. Numbers continue after the plots earlier runs left.
const PRELUDE: &str = r#"invisible(local({
  out <- @OUTPUT_DIR@
  dir.create(out, recursive = TRUE, showWarnings = FALSE)
  # Pages are drawn here and numbered into `out` when the device closes: after
  # the plots earlier runs left, never over them.
  pages <- tempfile("sandlot-plots-")
  dir.create(pages)
  options(device = function(...) {
    grDevices::png(filename = file.path(pages, "page-%04d.png"), width = 800, height = 600)
  })
  flush_plots <- function() {
    grDevices::graphics.off()
    drawn <- sort(list.files(pages, full.names = TRUE))
    if (length(drawn) == 0) return(invisible(NULL))
    kept <- list.files(out, pattern = "^plot-[0-9]+[.]png$")
    n <- if (length(kept)) max(as.integer(gsub("[^0-9]", "", kept))) else 0L
    for (page in drawn) {
      n <- n + 1L
      file.copy(page, file.path(out, sprintf("plot-%03d.png", n)), overwrite = TRUE)
      unlink(page)
    }
    invisible(NULL)
  }
  plots <- new.env()
  plots$.sandlot_flush_plots <- flush_plots
  attach(plots, name = "sandlot:plots", warn.conflicts = FALSE)
  # A program's plots are saved when it ends, even by an error.
  reg.finalizer(plots, function(e) flush_plots(), onexit = TRUE)
}))
"#;

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
        modules: &[],
        message: "starts other processes",
    },
    Rule {
        id: "r.dynamic-code",
        severity: Severity::Medium,
        needles: &["eval(parse(", "parse(text"],
        modules: &[],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "r.native-code",
        severity: Severity::High,
        needles: &["dyn.load(", ".Call(", ".C("],
        modules: &[],
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
        modules: &[],
        message: "uses the network",
    },
    Rule {
        id: "r.file-deletion",
        severity: Severity::Medium,
        needles: &["unlink(", "file.remove("],
        modules: &[],
        message: "deletes files",
    },
];

/// How the analysis reads R code.
const LANGUAGE: Language = Language {
    id: "r",
    syntax: &scan::R,
    imports: r_imports,
    bindings: restrict::no_bindings,
    uses: restrict::no_uses,
    rules: RULES,
    name_chars: ".",
};

export_handler!(R);

//! An out-of-tree language handler for Perl 5, on plugin contract 0.2.
//!
//! The worked example of the 0.2 exports: capabilities as a list, a kernel (so a
//! session in a container keeps its state, as the built-in languages' do), `may-plot`
//! and `plot-flush`. Perl is in every Debian image (`perl-base` is essential), so it
//! runs in any sandlot image. It is never embedded in the host: drop the built
//! `perl.wasm` into a plugin directory and `sandlot languages` lists Perl.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct Perl;

impl Guest for Perl {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "perl".into(),
            aliases: vec!["pl".into(), "perl5".into()],
            display_name: "Perl 5".into(),
            file_extension: "pl".into(),
            default_image: "sandlot/polyglot:latest".into(),
            // No library installs (the images have no cpanm) and no plots: a kernel.
            capabilities: vec![Capability::Interactive],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        Self::install(libraries, options.workdir)?;
        Ok(Plan {
            files: vec![file("main.pl", code)],
            commands: vec![command(Phase::Run, &["perl", "main.pl"]).args(&options.args)],
        })
    }

    fn install(libraries: Vec<String>, _workdir: String) -> Result<Vec<Command>, String> {
        no_libraries(&libraries, "Perl")
    }

    no_plots!();

    fn kernel(_options: KernelOptions) -> Option<KernelSpec> {
        Some(kernel_spec(
            KERNEL,
            "kernel.pl",
            &["perl", "{driver}"],
            Vec::new(),
        ))
    }

    fn analyze(code: String) -> Vec<Finding> {
        analyze(&code, &PERL, no_imports, RULES)
    }
}

/// The kernel's driver: evaluates cells in package `main` of one perl process; SIGINT
/// dies inside a cell and is ignored between cells.
const KERNEL: &str = include_str!("kernel.pl");

/// Where Perl's comments and strings are: `#` comments, quotes (double quotes
/// interpolate, but only variables), heredocs.
const PERL: Syntax = Syntax {
    line_comments: &["#"],
    block_comments: &[],
    strings: &[
        scan::quote("\"", "\"", true, Interpolation::None),
        scan::quote("'", "'", true, Interpolation::None),
    ],
    heredocs: true,
    heredoc_code: &[],
    comment_needs_word_start: false,
};

const RULES: &[Rule] = &[
    Rule {
        id: "perl.process",
        severity: Severity::High,
        needles: &[
            "system(",
            "system ",
            "exec(",
            "exec ",
            "qx(",
            "`",
            "open(my $fh, \"|",
        ],
        modules: &[],
        message: "starts other processes",
    },
    Rule {
        id: "perl.dynamic-code",
        severity: Severity::Medium,
        needles: &["eval $", "eval(\"", "eval \""],
        modules: &[],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "perl.network",
        severity: Severity::Medium,
        needles: &["IO::Socket", "LWP::", "HTTP::Tiny", "Net::"],
        modules: &[],
        message: "uses the network",
    },
    Rule {
        id: "perl.file-deletion",
        severity: Severity::Medium,
        needles: &["unlink", "rmtree", "remove_tree", "rmdir"],
        modules: &[],
        message: "deletes files",
    },
];

export_handler!(Perl);

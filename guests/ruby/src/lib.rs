//! Ruby handler: runs `main.rb`, installs gems into the sandbox's working directory, and
//! keeps a session's state in a Ruby kernel.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct Ruby;

/// Gem directory, relative to the working directory.
const GEMS: &str = ".sandlot/gems";

impl Guest for Ruby {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "ruby".into(),
            aliases: vec!["rb".into()],
            display_name: "Ruby".into(),
            file_extension: "rb".into(),
            default_image: "sandlot/ruby:latest".into(),
            capabilities: vec![Capability::InstallLibraries, Capability::Interactive],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        let mut commands = Self::install(libraries, options.workdir.clone())?;
        let gems = join(&options.workdir, GEMS);
        commands.push(
            command(Phase::Run, &["ruby", "main.rb"])
                .args(&options.args)
                .env("GEM_HOME", &gems)
                .env("GEM_PATH", &gems),
        );
        Ok(Plan {
            files: vec![file("main.rb", code)],
            commands,
        })
    }

    fn install(libraries: Vec<String>, workdir: String) -> Result<Vec<Command>, String> {
        if libraries.is_empty() {
            return Ok(Vec::new());
        }
        // `name` or `name:version`, which `gem install` understands.
        check_libraries(&libraries, "gem", |l| only(l, "._-:"))?;
        let gems = join(&workdir, GEMS);
        // The directory and the gems are the script's arguments, never its text.
        Ok(vec![command(
            Phase::Install,
            &["sh", "-c", GEM_INSTALL, "gem-install", &gems],
        )
        .args(&libraries)
        .network()])
    }

    no_plots!();

    fn kernel(options: KernelOptions) -> Option<KernelSpec> {
        let gems = join(&options.workdir, GEMS);
        Some(kernel_spec(
            KERNEL,
            "kernel.rb",
            &["ruby", "{driver}"],
            vec![("GEM_HOME".into(), gems.clone()), ("GEM_PATH".into(), gems)],
        ))
    }

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analyze_restricted(&code, &LANGUAGE, &restricted)
    }
}

/// The script of `install`: its first argument is the session's gem directory, the
/// rest the gems. RubyGems runs Ruby from its gem directory as it starts: every
/// `specifications/*.gemspec` is evaluated and `plugins/*_plugin.rb` loaded. The
/// session's directory is the code's to write, so a gem installed there would run
/// what earlier code planted, online. The gems install into the installer's own
/// home (fresh for each install, out of the code's reach), seeing no other gems,
/// and are then copied into the session's directory.
const GEM_INSTALL: &str = "set -e\n\
gems=\"$1\"\n\
shift\n\
stage=\"$HOME/gems\"\n\
mkdir -p \"$stage\" \"$gems\"\n\
GEM_HOME=\"$stage\" GEM_PATH=\"$stage\" gem install --no-document --install-dir \"$stage\" \"$@\"\n\
cp -a \"$stage/.\" \"$gems/\"\n";

/// The kernel's driver: runs cells in one binding, turns SIGINT into `Interrupt`
/// inside a cell.
const KERNEL: &str = include_str!("kernel.rb");

/// The libraries of `require "x"` and `require_relative "x"`.
fn ruby_imports(scan: &Scan) -> Vec<Import> {
    imports_after(
        scan,
        &[
            "require",
            "require(",
            "require_relative",
            "require_relative(",
        ],
    )
}

const RULES: &[Rule] = &[
    Rule {
        id: "ruby.process",
        severity: Severity::High,
        needles: &[
            "system(", "exec(", "spawn(", "IO.popen", "Open3", "%x(", "`",
        ],
        modules: &["open3"],
        message: "starts other processes",
    },
    Rule {
        id: "ruby.dynamic-code",
        severity: Severity::Medium,
        needles: &["eval(", "instance_eval", "class_eval", ".send("],
        modules: &[],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "ruby.network",
        severity: Severity::Medium,
        needles: &["Socket", "Net::HTTP", "URI.open"],
        modules: &["socket", "open-uri", "net/*"],
        message: "uses the network",
    },
    Rule {
        id: "ruby.file-deletion",
        severity: Severity::Medium,
        needles: &["FileUtils.rm", "File.delete(", "File.unlink("],
        modules: &[],
        message: "deletes files",
    },
];

/// How the analysis reads ruby code.
const LANGUAGE: Language = Language {
    id: "ruby",
    syntax: &scan::RUBY,
    imports: ruby_imports,
    bindings: restrict::no_bindings,
    uses: restrict::no_uses,
    rules: RULES,
    name_chars: "",
};

export_handler!(Ruby);

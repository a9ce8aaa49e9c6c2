//! An out-of-tree language handler for Lua 5.4.
//!
//! It is built like the built-in handlers but never embedded in the host: drop the
//! built `lua.wasm` into a plugin directory and `sandlot languages` lists Lua. It is the
//! worked example of the plugin guide (docs/plugins.md).
#![no_std]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use sandlot_handler_kit::*;

struct Lua;

/// Rocks tree, relative to the working directory.
const ROCKS: &str = ".sandlot/rocks";

impl Guest for Lua {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "lua".into(),
            aliases: vec!["lua5.4".into()],
            display_name: "Lua 5.4".into(),
            file_extension: "lua".into(),
            default_image: "sandlot/lua:latest".into(),
            can_install_libraries: true,
            can_capture_plots: false,
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        let mut commands = Self::install(libraries, options.workdir.clone())?;
        let rocks = join(&options.workdir, ROCKS);
        commands.push(
            command(Phase::Run, &["lua5.4", "main.lua"])
                .args(&options.args)
                .env(
                    "LUA_PATH",
                    &format!("{rocks}/share/lua/5.4/?.lua;{rocks}/share/lua/5.4/?/init.lua;;"),
                )
                .env("LUA_CPATH", &format!("{rocks}/lib/lua/5.4/?.so;;")),
        );
        Ok(Plan {
            files: vec![file("main.lua", code)],
            commands,
        })
    }

    fn install(libraries: Vec<String>, workdir: String) -> Result<Vec<Command>, String> {
        check_libraries(&libraries, "LuaRocks", |l| only(l, "._-"))?;
        let rocks = join(&workdir, ROCKS);
        // luarocks installs one rock per call.
        Ok(libraries
            .iter()
            .map(|rock| {
                command(
                    Phase::Install,
                    &[
                        "luarocks",
                        "--lua-version=5.4",
                        "install",
                        "--tree",
                        &rocks,
                        rock,
                    ],
                )
                .network()
            })
            .collect())
    }

    fn plot_prelude(_output_dir: String) -> Option<String> {
        None
    }

    fn analyze(code: String) -> Vec<Finding> {
        analyze(&code, &LUA, lua_imports, RULES)
    }
}

/// Where Lua's comments and strings are: `--` and `--[[ ]]` comments, quotes and long
/// brackets.
const LUA: Syntax = Syntax {
    line_comments: &["--"],
    block_comments: &[("--[[", "]]")],
    strings: &[
        Quote {
            escapes: false,
            ..scan::quote("[[", "]]", true, Interpolation::None)
        },
        scan::quote("\"", "\"", false, Interpolation::None),
        scan::quote("'", "'", false, Interpolation::None),
    ],
    heredocs: false,
    heredoc_code: &[],
    comment_needs_word_start: false,
};

/// The modules of `require("x")`, `require 'x'`.
fn lua_imports(scan: &Scan) -> Vec<Import> {
    imports_after(scan, &["require", "require("])
}

const RULES: &[Rule] = &[
    Rule {
        id: "lua.process",
        severity: Severity::High,
        needles: &["os.execute(", "io.popen("],
        modules: &[],
        message: "starts other processes",
    },
    Rule {
        id: "lua.dynamic-code",
        severity: Severity::Medium,
        needles: &["load(", "loadstring(", "dofile(", "loadfile("],
        modules: &[],
        message: "evaluates dynamically built code",
    },
    Rule {
        id: "lua.file-deletion",
        severity: Severity::Medium,
        needles: &["os.remove(", "os.rename("],
        modules: &[],
        message: "deletes or moves files",
    },
    Rule {
        id: "lua.network",
        severity: Severity::Medium,
        needles: &[],
        modules: &["socket*"],
        message: "uses the network",
    },
];

export_handler!(Lua);

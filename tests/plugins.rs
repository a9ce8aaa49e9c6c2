//! The plugin host: built-ins, plugin directories, overrides, the cache, and plugins
//! that misbehave in every way we know of. Each bad plugin must give its own clear
//! error naming the file, and leave every other plugin working.
//!
//! Two tests need the JavaScript runtime installed (`sandlot runtimes install
//! javascript`; tests/run.sh does it); without it, they pass without running and the
//! suite says so (`support::needs`); CI fails them instead.

mod support;

use sandlot::plugin::{CacheOutcome, PluginKind, PluginReport, PluginStatus};
use sandlot::{
    Error, HandlerLimits, LanguageCapability, PlanOptions, PluginHost, PluginSource, Restriction,
    RestrictionKind, Severity,
};
use std::path::Path;
use std::time::{Duration, Instant};
use support::needs::{needs, Need};
use support::{component, plugin_dir};

const BUILTINS: [&str; 9] = [
    "bash",
    "cpp",
    "go",
    "java",
    "javascript",
    "python",
    "r",
    "ruby",
    "typescript",
];

fn ids(host: &PluginHost) -> Vec<String> {
    host.languages()
        .iter()
        .map(|h| h.info().id.clone())
        .collect()
}

fn report<'a>(host: &'a PluginHost, file: &str) -> &'a PluginReport {
    host.reports()
        .iter()
        .find(|r| matches!(&r.source, PluginSource::File { path } if path.ends_with(file)))
        .unwrap_or_else(|| panic!("no report for {file}"))
}

fn failure<'a>(host: &'a PluginHost, file: &str) -> &'a Error {
    match &report(host, file).status {
        PluginStatus::Failed(error) => {
            assert!(
                error.to_string().contains(file),
                "error does not name {file}: {error}"
            );
            error
        }
        other => panic!("{file} did not fail: {other:?}"),
    }
}

/// The built-ins and the plugins of `dir`, compiled in memory.
fn load_from(dir: &std::path::Path) -> PluginHost {
    PluginHost::builder()
        .no_cache()
        .plugin_dir(dir)
        .load()
        .unwrap()
}

fn short_limits() -> HandlerLimits {
    HandlerLimits {
        memory: 16 << 20,
        timeout: Duration::from_millis(300),
    }
}

#[test]
fn all_builtins_load_and_declare_api_0_2_0() {
    let host = PluginHost::builder().no_cache().load().unwrap();
    assert_eq!(ids(&host), BUILTINS);
    for report in host.reports() {
        assert!(report.source.is_builtin());
        assert!(
            matches!(report.status, PluginStatus::Active { replaces: None }),
            "{report:?}"
        );
        assert_eq!(report.api_version.as_deref(), Some("0.3.0"));
        assert_eq!(report.kind, Some(PluginKind::LanguageHandler));
    }
    // Aliases and case do not matter; unknown names list what is known.
    assert_eq!(host.language("PY").unwrap().info().id, "python");
    assert_eq!(host.language("golang").unwrap().info().id, "go");
    let err = host.language("cobol").unwrap_err().to_string();
    assert!(
        err.contains("unknown language `cobol`") && err.contains("`python`"),
        "{err}"
    );
}

#[test]
fn the_out_of_tree_lua_plugin_is_picked_up_from_a_directory() {
    let builtins_only = PluginHost::builder().no_cache().load().unwrap();
    assert!(
        builtins_only.language("lua").is_err(),
        "lua must not be embedded"
    );

    let dir = plugin_dir(&[("examples/lua", "lua.wasm")]);
    let host = load_from(dir.path());
    let lua = host.language("lua").unwrap();
    assert_eq!(lua.info().display_name, "Lua 5.4");
    assert_eq!(
        lua.source(),
        &PluginSource::File {
            path: dir.path().join("lua.wasm")
        }
    );
    let plan = lua
        .plan("print(1)", &["inspect".into()], &PlanOptions::default())
        .unwrap();
    let argv: Vec<_> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
    assert_eq!(
        argv,
        [
            "luarocks --lua-version=5.4 install --tree /workspace/.sandlot/rocks inspect",
            "lua5.4 main.lua"
        ]
    );
    assert_eq!(host.language_for_extension("lua").unwrap().info().id, "lua");
    assert_eq!(ids(&host).len(), BUILTINS.len() + 1);
}

/// Handlers of contract 0.1 (the Lua example) and 0.2 (the built-ins) load side by
/// side; what 0.1 cannot say has a sensible answer.
#[test]
fn handlers_of_both_contracts_load_side_by_side() {
    let dir = plugin_dir(&[("examples/lua", "lua.wasm")]);
    let host = load_from(dir.path());
    let lua = host.language("lua").unwrap();
    let python = host.language("python").unwrap();
    assert_eq!(
        (lua.api_version(), python.api_version()),
        ("0.1.0", "0.3.0")
    );
    // 0.1's two flags became capabilities.
    assert!(lua.info().has(LanguageCapability::InstallLibraries));
    assert!(!lua.info().has(LanguageCapability::Interactive));
    assert_eq!(lua.kernel("/workspace", "/workspace/output").unwrap(), None);
    assert!(!lua.may_plot("plot(1)").unwrap());
    assert_eq!(lua.plot_flush("/workspace/output").unwrap(), None);
    // 0.2 says all of it itself.
    for capability in [
        LanguageCapability::InstallLibraries,
        LanguageCapability::CapturePlots,
        LanguageCapability::Interactive,
    ] {
        assert!(python.info().has(capability), "{capability}");
    }
    let kernel = python
        .kernel("/workspace", "/workspace/output")
        .unwrap()
        .expect("python has a kernel");
    assert_eq!(
        kernel.command("/workspace/.sandlot/kernel/kernel.py"),
        ["python3", "-u", "/workspace/.sandlot/kernel/kernel.py"]
    );
    assert!(kernel.driver.contains("SANDLOT_CELL_FD"));
    assert!(kernel
        .env
        .contains(&("PYTHONPATH".into(), "/workspace/.sandlot/python".into())));
    assert!(python.may_plot("import matplotlib.pyplot as plt").unwrap());
    assert!(!python.may_plot("print(1)").unwrap());
    assert!(python.plot_flush("/workspace/output").unwrap().is_some());
    // Plans carry bytes now; the Python program is still text.
    let plan = python
        .plan("print('é')", &[], &PlanOptions::default())
        .unwrap();
    assert!(plan.files[0].contents.ends_with("print('é')".as_bytes()));
    // Compiled languages have no kernel: each run is its own program.
    let java = host.language("java").unwrap();
    assert_eq!(
        java.kernel("/workspace", "/workspace/output").unwrap(),
        None
    );
}

/// Out-of-tree plugins of both contracts from one directory: the Lua example on 0.1
/// and the Perl example on 0.2, whose kernel makes an out-of-tree language
/// interactive too.
#[test]
fn out_of_tree_plugins_of_both_contracts_load_from_one_directory() {
    let dir = plugin_dir(&[("examples/lua", "lua.wasm"), ("examples/perl", "perl.wasm")]);
    let host = load_from(dir.path());
    let lua = host.language("lua").unwrap();
    let perl = host.language("pl").unwrap();
    assert_eq!((lua.api_version(), perl.api_version()), ("0.1.0", "0.2.0"));
    assert_eq!(perl.info().display_name, "Perl 5");
    assert!(perl.info().has(LanguageCapability::Interactive));
    assert!(!perl.info().has(LanguageCapability::InstallLibraries));
    let kernel = perl
        .kernel("/workspace", "/workspace/output")
        .unwrap()
        .expect("the Perl example has a kernel");
    assert_eq!(
        kernel.command("/workspace/.sandlot/kernel/kernel.pl"),
        ["perl", "/workspace/.sandlot/kernel/kernel.pl"]
    );
    assert!(kernel.driver.contains("SANDLOT_DONE_FD"));
    assert!(!perl.may_plot("print 1").unwrap());
    assert_eq!(perl.plot_flush("/workspace/output").unwrap(), None);
    let plan = perl
        .plan("print qq(hi\\n);", &[], &PlanOptions::default())
        .unwrap();
    assert_eq!(plan.commands.last().unwrap().argv, ["perl", "main.pl"]);
    let refused = perl.plan("1", &["Moose".into()], &PlanOptions::default());
    assert!(refused.is_err(), "Perl installs no libraries");
    let findings = perl.analyze("system('ls')", &[]).unwrap();
    assert!(
        findings.iter().any(|f| f.rule_id == "perl.process"),
        "{findings:?}"
    );
}

/// Handlers built before contract 0.3 cannot look for a policy's restricted modules
/// and calls: the host says so with a finding as severe as the restrictions, so a
/// policy that would block them blocks instead of letting code through unchecked.
#[test]
fn handlers_of_older_contracts_fail_closed_on_restrictions_they_cannot_check() {
    let dir = plugin_dir(&[("examples/lua", "lua.wasm"), ("examples/perl", "perl.wasm")]);
    let host = load_from(dir.path());
    let restricted = |severity| Restriction {
        kind: RestrictionKind::Module,
        name: "socket".parse().unwrap(),
        severity,
    };
    for language in ["lua", "perl"] {
        let handler = host.language(language).unwrap();
        let findings = handler
            .analyze(
                "print(1)",
                &[restricted(Severity::Low), restricted(Severity::Critical)],
            )
            .unwrap();
        assert_eq!(findings.len(), 1, "{language}: {findings:?}");
        assert_eq!(findings[0].rule_id, "sandlot.restrictions-unchecked");
        assert_eq!(findings[0].severity, Severity::Critical);
        assert!(
            findings[0].message.contains("0.3.0") && findings[0].message.contains(language),
            "{}",
            findings[0].message
        );
        assert_eq!(handler.analyze("print(1)", &[]).unwrap(), []);
    }
}

#[test]
fn a_directory_plugin_overrides_the_builtin_with_the_same_id() {
    let dir = plugin_dir(&[("builtin/python", "my-python.wasm")]);
    let host = load_from(dir.path());
    let python = host.language("python").unwrap();
    let path = dir.path().join("my-python.wasm");
    assert_eq!(python.source(), &PluginSource::File { path: path.clone() });

    let builtin = host
        .reports()
        .iter()
        .find(|r| r.source == PluginSource::Builtin { name: "python" })
        .unwrap();
    assert!(
        matches!(&builtin.status, PluginStatus::Shadowed { by } if *by == PluginSource::File { path: path.clone() }),
        "{builtin:?}"
    );
    assert!(matches!(
        &report(&host, "my-python.wasm").status,
        PluginStatus::Active {
            replaces: Some(PluginSource::Builtin { name: "python" })
        }
    ));
    assert_eq!(ids(&host), BUILTINS, "still one python");
}

#[test]
fn later_directories_take_precedence_over_earlier_ones() {
    let first = plugin_dir(&[("examples/lua", "lua.wasm")]);
    let second = plugin_dir(&[("examples/lua", "lua.wasm")]);
    let host = PluginHost::builder()
        .no_cache()
        .plugin_dir(first.path())
        .plugin_dir(second.path())
        .load()
        .unwrap();
    assert_eq!(
        host.language("lua").unwrap().source(),
        &PluginSource::File {
            path: second.path().join("lua.wasm")
        }
    );
}

#[test]
fn bad_plugins_each_fail_clearly_and_the_rest_keep_working() {
    let dir = plugin_dir(&[
        ("examples/lua", "lua.wasm"),
        ("fixtures/trap", "trap.wasm"),
        ("fixtures/spin", "spin.wasm"),
        ("fixtures/hog", "hog.wasm"),
        ("fixtures/malformed", "malformed.wasm"),
        ("fixtures/other-world", "other-world.wasm"),
        ("fixtures/future-api", "future-api.wasm"),
    ]);
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(dir.path().join("random.wasm"), random).unwrap();
    let core = wat::parse_str("(module (func (export \"info\")))").unwrap();
    std::fs::write(dir.path().join("core-module.wasm"), core).unwrap();
    std::fs::write(dir.path().join("empty.wasm"), b"").unwrap();

    let started = Instant::now();
    let host = PluginHost::builder()
        .no_cache()
        .handler_limits(short_limits())
        .plugin_dir(dir.path())
        .load()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "a bad plugin hung the host"
    );

    assert!(matches!(
        failure(&host, "random.wasm"),
        Error::NotWasm { .. }
    ));
    assert!(matches!(
        failure(&host, "empty.wasm"),
        Error::NotWasm { .. }
    ));
    assert!(matches!(
        failure(&host, "core-module.wasm"),
        Error::CoreModule { .. }
    ));
    match failure(&host, "other-world.wasm") {
        Error::NotAPlugin { exports, .. } => assert_eq!(exports, &["greet"]),
        other => panic!("{other}"),
    }
    match failure(&host, "future-api.wasm") {
        error @ Error::UnsupportedApi { found, newer, .. } => {
            assert_eq!((found.as_str(), *newer), ("9.0.0", true));
            assert!(error.to_string().contains("upgrade sandlot"), "{error}");
        }
        other => panic!("{other}"),
    }
    assert!(matches!(
        failure(&host, "trap.wasm"),
        Error::Trap {
            function: "info",
            ..
        }
    ));
    match failure(&host, "spin.wasm") {
        Error::Deadline {
            function, limit, ..
        } => {
            assert_eq!((*function, *limit), ("info", Duration::from_millis(300)))
        }
        other => panic!("{other}"),
    }
    match failure(&host, "hog.wasm") {
        error @ Error::MemoryLimit { limit, .. } => {
            assert_eq!(*limit, 16 << 20);
            assert!(error.to_string().contains("16 MiB"), "{error}");
        }
        other => panic!("{other}"),
    }
    match failure(&host, "malformed.wasm") {
        error @ Error::InvalidResponse { function, .. } => {
            assert_eq!(*function, "info");
            assert!(
                error.to_string().to_lowercase().contains("utf-8"),
                "{error}"
            );
        }
        other => panic!("{other}"),
    }

    // Everything else still works, and keeps working after the failures.
    assert_eq!(ids(&host).len(), BUILTINS.len() + 1);
    let lua = host.language("lua").unwrap();
    assert!(lua.plan("print(1)", &[], &PlanOptions::default()).is_ok());
    let python = host.language("python").unwrap();
    assert!(python
        .plan("print(1)", &[], &PlanOptions::default())
        .is_ok());
}

#[test]
fn contract_breaking_answers_are_refused_per_call() {
    let dir = plugin_dir(&[("fixtures/badplan", "badplan.wasm")]);
    let host = PluginHost::builder()
        .no_cache()
        .handler_limits(short_limits())
        .plugin_dir(dir.path())
        .load()
        .unwrap();
    let bad = host.language("badplan").unwrap();

    let err = bad.plan("x", &[], &PlanOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidResponse {
                function: "plan",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("../escape.txt") && err.to_string().contains("badplan.wasm"),
        "{err}"
    );

    let err = bad.install(&["x".into()], "/w").unwrap_err();
    assert!(err.to_string().contains("empty argv"), "{err}");

    let started = Instant::now();
    let err = bad.analyze("x", &[]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Deadline {
                function: "analyze",
                ..
            }
        ),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    // The same handler and the others answer normally afterwards.
    assert_eq!(bad.info().id, "badplan");
    let findings = host
        .language("bash")
        .unwrap()
        .analyze("curl http://x", &[])
        .unwrap();
    assert_eq!(findings[0].rule_id, "bash.network");
}

#[test]
fn manifests_can_disable_a_plugin_and_typos_are_reported() {
    let dir = plugin_dir(&[("examples/lua", "lua.wasm"), ("builtin/bash", "shell.wasm")]);
    std::fs::write(
        dir.path().join("lua.toml"),
        "description = \"Lua\"\nenabled = false\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("shell.toml"), "enable = true\n").unwrap();
    let host = load_from(dir.path());
    let lua = report(&host, "lua.wasm");
    assert!(matches!(lua.status, PluginStatus::Disabled));
    assert_eq!(lua.description.as_deref(), Some("Lua"));
    assert!(host.language("lua").is_err());
    match &report(&host, "shell.wasm").status {
        PluginStatus::Failed(error @ Error::Manifest { .. }) => {
            let text = error.to_string();
            assert!(
                text.contains("shell.toml") && text.contains("enable"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The built-in bash is untouched by the broken override.
    assert!(host.language("bash").unwrap().source().is_builtin());
}

#[test]
fn a_missing_plugin_directory_given_explicitly_is_an_error() {
    let err = PluginHost::builder()
        .no_cache()
        .plugin_dir("/nonexistent/sandlot-plugins")
        .load()
        .unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/sandlot-plugins"),
        "{err}"
    );
    // The default directory is optional.
    PluginHost::builder()
        .no_cache()
        .optional_plugin_dir("/nonexistent/sandlot-plugins")
        .load()
        .unwrap();
}

#[test]
fn compiled_components_are_cached_on_disk() {
    let cache = tempfile::tempdir().unwrap();
    let outcomes = |host: &PluginHost| -> Vec<Option<CacheOutcome>> {
        host.reports().iter().map(|r| r.cache).collect()
    };
    let cold = PluginHost::builder()
        .cache_dir(cache.path())
        .load()
        .unwrap();
    assert!(outcomes(&cold)
        .iter()
        .all(|o| *o == Some(CacheOutcome::Compiled)));
    let artifacts = std::fs::read_dir(cache.path()).unwrap().count();
    assert_eq!(artifacts, BUILTINS.len());
    let warm = PluginHost::builder()
        .cache_dir(cache.path())
        .load()
        .unwrap();
    assert!(outcomes(&warm)
        .iter()
        .all(|o| *o == Some(CacheOutcome::Hit)));
    assert_eq!(ids(&warm), BUILTINS);
}

#[test]
fn inspect_reports_what_a_component_declares() {
    let (inspection, handler) = sandlot::plugin::inspect_file(&component("examples/lua")).unwrap();
    assert_eq!(inspection.kind, PluginKind::LanguageHandler);
    assert_eq!(inspection.api_version, "0.1.0");
    assert!(inspection.imports.is_empty(), "handlers import nothing");
    assert_eq!(inspection.exports, ["sandlot:plugin/handler@0.1.0"]);
    assert_eq!(inspection.sha256.len(), 64);
    assert_eq!(handler.unwrap().info().id, "lua");

    let err = sandlot::plugin::inspect_file(Path::new("/nonexistent.wasm")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent.wasm"), "{err}");
}

/// The JavaScript runtime `sandlot runtimes install javascript` built (tests/run.sh
/// does it): a component of the runtime world, contract 0.4.
fn installed_quickjs() -> std::path::PathBuf {
    let dirs = sandlot::dirs::Dirs::resolve(&sandlot::Config::default(), &Default::default());
    let path = dirs.runtimes_dir().join("quickjs.wasm");
    assert!(
        path.is_file(),
        "{} is missing: run `sandlot runtimes install javascript`",
        path.display()
    );
    path
}

#[test]
fn a_runtime_component_dropped_into_a_plugin_directory_runs_code() {
    if !needs(&[Need::Runtime("javascript")]) {
        return;
    }
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(installed_quickjs(), plugins.path().join("my-js.wasm")).unwrap();
    let runtimes = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let open = || {
        let host = PluginHost::builder()
            .plugin_dir(plugins.path())
            .cache_dir(cache.path())
            .load()
            .unwrap();
        assert!(matches!(
            report(&host, "my-js.wasm").status,
            PluginStatus::Runtime
        ));
        assert_eq!(report(&host, "my-js.wasm").kind, Some(PluginKind::Runtime));
        sandlot::builder(host)
            .runtimes_dir(runtimes.path())
            .cache_dir(Some(cache.path().to_path_buf()))
            .build()
            .unwrap()
    };

    let sandlot = open();
    // Nothing was compiled to find the runtime: that waits for the first lookup.
    assert!(sandlot::wasm::WasmBackend::of(&sandlot).needs_compile("javascript"));
    let mut session = sandlot
        .session("javascript")
        .backend("wasm")
        .open()
        .unwrap();
    assert_eq!(session.run("let n = 20").unwrap().exit_code, 0);
    let out = session.run("n + 22").unwrap();
    assert_eq!(out.stdout_text(), "42\n", "{}", out.stderr_text());
    // set-env and set-cwd (contract 0.2, kept in 0.4) carry a run's environment and
    // directory.
    let out = session
        .run_with(
            "console.log(process.env.GREETING, process.cwd())",
            sandlot::RunOptions {
                env: vec![("GREETING".into(), "hello".into())],
                workdir: Some("sub".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(out.stdout_text(), "hello /workspace/sub\n");
    drop(session);

    let found = sandlot::wasm::WasmBackend::of(&sandlot).runtimes();
    assert_eq!(found.len(), 1, "{found:?}");
    let description = found[0].description.as_ref().unwrap();
    assert_eq!(found[0].path, plugins.path().join("my-js.wasm"));
    assert_eq!(description.id, "quickjs");
    assert_eq!(description.languages, ["javascript"]);
    assert_eq!(
        description.kind,
        sandlot::wasm::RuntimeKind::Component {
            api_version: "0.4.0".into()
        }
    );
    // Contract 0.4's `tools` import: code in it can call a session's tools.
    assert!(description.tools);

    // Another process finds what it serves in the cache, by content: no compile.
    let again = open();
    assert!(!sandlot::wasm::WasmBackend::of(&again).needs_compile("javascript"));
    assert!(sandlot::wasm::WasmBackend::of(&again).runtimes()[0].compiled);
    let noted = std::fs::read_dir(cache.path().join("runtime-info"))
        .unwrap()
        .count();
    assert_eq!(noted, 1);
}

#[test]
fn runtime_components_of_every_contract_run_and_a_handler_among_them_is_skipped_clearly() {
    use sandlot::backend::{Backend, Needs, RunRequest, SandboxSpec, Workload};
    use sandlot::wasm::{RuntimeKind, WasmBackend};
    if !needs(&[Need::Runtime("javascript")]) {
        return;
    }
    let plugins = plugin_dir(&[
        ("fixtures/tally-runtime", "tally.wasm"),
        ("fixtures/tally-runtime-0-2", "tally2.wasm"),
    ]);
    std::fs::copy(installed_quickjs(), plugins.path().join("quickjs.wasm")).unwrap();
    // Dropped into the runtimes directory by mistake: a language handler.
    let runtimes = tempfile::tempdir().unwrap();
    std::fs::copy(component("examples/lua"), runtimes.path().join("lua.wasm")).unwrap();
    let backend = WasmBackend::discover(
        runtimes.path(),
        &[
            plugins.path().join("quickjs.wasm"),
            plugins.path().join("tally.wasm"),
            plugins.path().join("tally2.wasm"),
        ],
        None,
    );

    // 0.1: state kept between runs; no set-env, so a run's environment is refused.
    let policy = sandlot::Policy::default();
    let mut tally = backend
        .open(&SandboxSpec::new("tally", "", &policy, 64 << 20))
        .unwrap();
    let run = |sandbox: &mut Box<dyn sandlot::backend::Sandbox>, code: &str| {
        sandbox
            .run(RunRequest::new(Workload::Code(code)))
            .unwrap()
            .exit_code
    };
    assert_eq!(run(&mut tally, "5"), 5);
    assert_eq!(run(&mut tally, "10"), 15);
    let env = [("A".to_string(), "1".to_string())];
    let mut request = RunRequest::new(Workload::Code("1"));
    request.env = &env;
    let err = tally.run(request).unwrap_err().to_string();
    assert!(err.contains("set-env"), "{err}");
    // A trap ends that interpreter; the next run starts from a fresh one.
    let trapped = tally.run(RunRequest::new(Workload::Code("trap"))).unwrap();
    assert!(
        matches!(trapped.session, sandlot::SessionState::Restarted { .. }),
        "{trapped:?}"
    );
    assert_eq!(run(&mut tally, "2"), 2);

    // 0.2, beside 0.4: its own set-env and set-cwd, and what it bundles.
    let mut tally2 = backend
        .open(&SandboxSpec::new("tally2", "", &policy, 64 << 20))
        .unwrap();
    assert_eq!(run(&mut tally2, "5"), 5);
    let env = [
        ("A".to_string(), "1".to_string()),
        ("B".to_string(), "2".to_string()),
    ];
    let mut request = RunRequest::new(Workload::Code("env"));
    request.env = &env;
    assert_eq!(tally2.run(request).unwrap().exit_code, 2);
    let mut request = RunRequest::new(Workload::Code("cwd"));
    request.workdir = "deep";
    assert_eq!(
        tally2.run(request).unwrap().exit_code,
        "/workspace/deep".len() as i32
    );
    let mut request = RunRequest::new(Workload::Code("cwd"));
    request.workdir = "nowhere";
    let err = tally2.run(request).unwrap_err().to_string();
    assert!(err.contains("tally2 will not go there"), "{err}");
    assert_eq!(run(&mut tally2, "10"), 15);

    let kinds: Vec<_> = backend
        .runtimes()
        .into_iter()
        .map(|found| {
            (
                found.path.file_name().unwrap().to_owned(),
                found.description,
            )
        })
        .collect();
    let kind = |file: &str| {
        kinds
            .iter()
            .find(|(name, _)| name == file)
            .map(|(_, d)| d.clone())
            .unwrap()
    };
    assert_eq!(
        kind("tally.wasm").unwrap().kind,
        RuntimeKind::Component {
            api_version: "0.1.0".into()
        }
    );
    let tally2 = kind("tally2.wasm").unwrap();
    assert_eq!(
        (tally2.kind, tally2.bundled, tally2.tools),
        (
            RuntimeKind::Component {
                api_version: "0.2.0".into()
            },
            vec!["abacus".to_string()],
            false
        )
    );
    assert_eq!(
        kind("quickjs.wasm").unwrap().kind,
        RuntimeKind::Component {
            api_version: "0.4.0".into()
        }
    );
    let skipped = kind("lua.wasm").unwrap_err();
    assert!(
        skipped.contains("not a runtime component") && skipped.contains("handler@0.1.0"),
        "{skipped}"
    );
    // Asked for a language nobody serves, the backend names what it skipped and why.
    let refused = backend
        .supports(&Needs::language("lua"))
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("lua.wasm") && refused.contains("not a runtime component"),
        "{refused}"
    );
}

/// The hostile corpus's plugin case: a handler that asks for the host's filesystem and
/// sockets gets nothing; it is refused before any of it runs.
#[test]
fn a_handler_that_imports_anything_from_the_host_is_refused() {
    let component = wat::parse_str(
        r#"(component
             (import "wasi:filesystem/preopens@0.2.0" (instance))
             (import "wasi:sockets/tcp@0.2.0" (instance))
             (instance $handler)
             (export "sandlot:plugin/handler@0.2.0" (instance $handler)))"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spy.wasm"), component).unwrap();
    let host = load_from(dir.path());
    let error = failure(&host, "spy.wasm");
    assert!(matches!(error, Error::HandlerImports { .. }), "{error}");
    assert!(
        error.to_string().contains("wasi:filesystem/preopens@0.2.0"),
        "{error}"
    );
    assert_eq!(ids(&host), BUILTINS);
}

//! The backend contract, through backends written here against the public API alone
//! (as an application's own backend would be): how sessions choose a backend and fall
//! back, the analysis gate, when the plot prelude runs, and how end reasons reach the
//! caller. No engine and no runtime is needed.

use sandlot::backend::{
    Backend, BackendName, Capabilities, Capability, MemoryFiles, Needs, Outcome, RunRequest,
    Sandbox, SandboxFiles, SandboxSpec, SessionState, Unsuitable, Workload,
};
use sandlot::{EndReason, Error, PluginHost, Policy, Result, Sandlot, Severity};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a fake sandbox was asked to run.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Code(String),
    Plan { main: String },
    Shell(String),
}

/// A backend that runs nothing: it records every run and answers with scripted
/// outcomes (or a plain success).
struct Fake {
    name: &'static str,
    languages: &'static [&'static str],
    capabilities: Vec<Capability>,
    /// Libraries it can provide; `None`: any.
    libraries: Option<&'static [&'static str]>,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<Vec<Outcome>>>,
    opened: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn new(name: &'static str, capabilities: &[Capability]) -> Fake {
        Fake {
            name,
            languages: &["python", "javascript", "bash"],
            capabilities: capabilities.to_vec(),
            libraries: None,
            seen: Arc::default(),
            script: Arc::default(),
            opened: Arc::default(),
        }
    }
}

struct FakeSandbox {
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<Vec<Outcome>>>,
    files: MemoryFiles,
}

impl Backend for Fake {
    fn name(&self) -> BackendName {
        BackendName::new(self.name).unwrap()
    }

    fn capabilities(&self, _language: &str) -> Capabilities {
        Capabilities::new(self.capabilities.iter().copied())
    }

    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
        if !self.languages.contains(&needs.language) {
            return Err(Unsuitable(format!("it knows no {}", needs.language)));
        }
        if let Some(known) = self.libraries {
            let missing: Vec<_> = needs
                .libraries
                .iter()
                .filter(|l| !known.contains(&l.as_str()))
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(Unsuitable(format!("it lacks {}", missing.join(", "))));
            }
        }
        sandlot::backend::check_capabilities(needs, &self.capabilities(needs.language))
    }

    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        self.opened
            .lock()
            .unwrap()
            .push(format!("{} in {}", spec.language, spec.image));
        Ok(Box::new(FakeSandbox {
            seen: self.seen.clone(),
            script: self.script.clone(),
            files: MemoryFiles::default(),
        }))
    }
}

impl Sandbox for FakeSandbox {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        let seen = match request.workload {
            Workload::Code(code) => Seen::Code(code.to_string()),
            Workload::Plan(plan) => Seen::Plan {
                main: String::from_utf8(plan.files[0].contents.clone()).unwrap(),
            },
            Workload::Shell(line) => Seen::Shell(line.to_string()),
            _ => unreachable!("no other workloads exist yet"),
        };
        self.seen.lock().unwrap().push(seen);
        // Every run leaves a plot behind, as a figure saved by the program would.
        self.files.write("output/plot.png", b"\x89PNG fake")?;
        let mut script = self.script.lock().unwrap();
        Ok(if script.is_empty() {
            Outcome::default()
        } else {
            script.remove(0)
        })
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        &mut self.files
    }

    fn name(&self) -> String {
        "fake".into()
    }
}

fn plugins() -> PluginHost {
    PluginHost::builder().no_cache().load().unwrap()
}

fn sandlot_with(backends: Vec<Fake>) -> Sandlot {
    let mut builder = sandlot::Sandlot::builder(plugins());
    for backend in backends {
        builder = builder.backend(Arc::new(backend));
    }
    builder.build().unwrap()
}

#[test]
fn auto_picks_the_first_backend_that_can_serve_the_session_and_says_why_others_could_not() {
    let mut narrow = Fake::new("narrow", &[Capability::PersistentState]);
    narrow.languages = &["javascript"];
    narrow.libraries = Some(&["lodash"]);
    let wide = Fake::new("wide", &[Capability::RunsPlans, Capability::Shell]);
    let sandlot = sandlot_with(vec![narrow, wide]);
    assert_eq!(sandlot.backend_names(), ["narrow", "wide"]);

    let js = sandlot.session("js").open().unwrap();
    assert_eq!(js.backend(), &"narrow");
    assert!(js.passed_over().is_empty());

    let python = sandlot.session("python").open().unwrap();
    assert_eq!(python.backend(), &"wide");
    assert_eq!(python.passed_over().len(), 1);
    assert!(python.passed_over()[0].1.contains("knows no python"));

    // A library the first backend lacks sends the session to the next one.
    let mut builder = sandlot.session("javascript");
    builder.libraries(&["left-pad".to_string()]);
    assert_eq!(builder.open().unwrap().backend(), &"wide");

    // So does a capability the session requires.
    let mut builder = sandlot.session("javascript");
    builder.require(Capability::Shell);
    assert_eq!(builder.open().unwrap().backend(), &"wide");
}

#[test]
fn choosing_a_backend_that_cannot_serve_says_why() {
    let mut narrow = Fake::new("narrow", &[]);
    narrow.languages = &["javascript"];
    let sandlot = sandlot_with(vec![narrow]);

    let error = sandlot
        .session("python")
        .backend("narrow")
        .open()
        .unwrap_err();
    assert!(matches!(error, Error::BackendUnsuitable { .. }), "{error}");
    assert!(error.to_string().contains("knows no python"), "{error}");

    let error = sandlot
        .session("python")
        .backend("nowhere")
        .open()
        .unwrap_err();
    assert!(matches!(error, Error::UnknownBackend { .. }), "{error}");
    assert!(
        error.to_string().contains("narrow"),
        "lists the backends: {error}"
    );

    let error = sandlot.session("python").open().unwrap_err();
    assert!(matches!(error, Error::NoBackend { .. }), "{error}");
    assert!(
        error.to_string().contains("narrow: it knows no python"),
        "{error}"
    );
}

#[test]
fn an_image_the_session_names_reaches_the_backend() {
    let fake = Fake::new("fake", &[Capability::RunsPlans, Capability::Images]);
    let opened = fake.opened.clone();
    let sandlot = sandlot_with(vec![fake]);
    sandlot.session("python").open().unwrap();
    sandlot
        .session("python")
        .image("python:3.12-slim")
        .open()
        .unwrap();
    assert_eq!(
        *opened.lock().unwrap(),
        [
            "python in sandlot/python:latest",
            "python in python:3.12-slim"
        ]
    );
}

#[test]
fn the_analysis_gate_blocks_before_anything_runs() {
    let fake = Fake::new("fake", &[Capability::PersistentState]);
    let seen = fake.seen.clone();
    let sandlot = sandlot_with(vec![fake]);
    let hostile = "import os\nos.system('rm -rf /')";

    let strict = Policy::default().with_block_at(Some(Severity::High));
    let mut session = sandlot.session("python").policy(strict).open().unwrap();
    let error = session.run(hostile).unwrap_err();
    assert!(matches!(error, Error::Blocked { .. }), "{error}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "blocked code never reaches the sandbox"
    );

    let report_only = Policy::default().with_block_at(None);
    let mut session = sandlot
        .session("python")
        .policy(report_only)
        .open()
        .unwrap();
    let run = session.run(hostile).unwrap();
    assert!(!run.findings.is_empty(), "findings are reported");
    assert_eq!(seen.lock().unwrap().len(), 1);

    // Below report_at a finding is dropped; between it and block_at it is a warning.
    let quiet = Policy {
        report_at: Severity::Medium,
        ..Policy::default()
    };
    let mut session = sandlot.session("python").policy(quiet).open().unwrap();
    let run = session
        .run("print(open('/etc/hostname').read())\nimport socket\n")
        .unwrap();
    let rules: Vec<&str> = run.findings.iter().map(|f| f.rule_id.as_str()).collect();
    assert_eq!(
        rules,
        ["python.network"],
        "the low system-files finding is ignored"
    );
}

#[test]
fn a_policy_file_restricts_modules_and_calls_and_a_misspelt_language_is_an_error() {
    let fake = Fake::new("fake", &[Capability::PersistentState]);
    let seen = fake.seen.clone();
    let sandlot = sandlot_with(vec![fake]);
    let policy = Policy::from_toml(
        "[restricted.py]\nmodules = [\"requests\"]\ncalls = { \"os.getcwd\" = \"low\" }\n",
        "policy.toml".as_ref(),
    )
    .unwrap();
    let mut session = sandlot
        .session("python")
        .policy(policy.clone())
        .open()
        .unwrap();
    let error = session
        .run("import requests as r\nr.get('http://x')\n")
        .unwrap_err();
    let Error::Blocked { findings, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(findings.len(), 2, "the import and the use: {findings:?}");
    assert!(error
        .to_string()
        .contains("line 1: python.restricted-module.requests"));
    assert!(seen.lock().unwrap().is_empty(), "nothing ran");
    // A restriction below the blocking threshold is a warning.
    let run = session
        .run("from os import getcwd\nprint(getcwd())\n")
        .unwrap();
    assert!(run
        .findings
        .iter()
        .any(|f| f.rule_id == "python.restricted-call.os.getcwd" && f.severity == Severity::Low));
    // Another language's session is not restricted by Python's list.
    let mut other = sandlot.session("javascript").policy(policy).open().unwrap();
    assert!(other
        .run("const requests = require('requests');\n")
        .unwrap()
        .findings
        .is_empty());

    let misspelt = Policy::from_toml(
        "[restricted.pyhton]\nmodules = [\"os\"]\n",
        "policy.toml".as_ref(),
    )
    .unwrap();
    let error = sandlot
        .session("python")
        .policy(misspelt)
        .open()
        .unwrap_err();
    assert!(matches!(error, Error::InvalidPolicy { .. }), "{error}");
    assert!(
        error.to_string().contains("[policy.restricted.pyhton]"),
        "{error}"
    );
}

#[test]
fn interpreters_get_the_plot_prelude_once_before_the_first_plotting_run() {
    let fake = Fake::new("fake", &[Capability::PersistentState]);
    let seen = fake.seen.clone();
    let script = fake.script.clone();
    let sandlot = sandlot_with(vec![fake]);
    let mut session = sandlot.session("python").open().unwrap();

    session.run("print(1)").unwrap();
    let plotting = "import matplotlib.pyplot as plt\nplt.plot([1, 2])";
    session.run(plotting).unwrap();
    session.run(plotting).unwrap();
    let seen_now = seen.lock().unwrap().clone();
    let preludes = |seen: &[Seen]| {
        seen.iter()
            .filter(|s| matches!(s, Seen::Code(c) if c.contains("_sandlot_capture_plots")))
            .count()
    };
    assert_eq!(preludes(&seen_now), 1, "{seen_now:#?}");
    assert_eq!(
        seen_now[0],
        Seen::Code("print(1)".into()),
        "no prelude for code that draws nothing"
    );
    assert!(
        seen_now
            .iter()
            .any(|s| matches!(s, Seen::Code(c) if c.contains("_sandlot_save_figures"))),
        "figures left open are saved after a plotting run"
    );

    // A restarted interpreter lost the prelude: the next plotting run installs it again.
    script.lock().unwrap().push(Outcome {
        session: SessionState::Restarted {
            reason: "test".into(),
        },
        ..Outcome::default()
    });
    session.run("x = 1").unwrap();
    session.run(plotting).unwrap();
    assert_eq!(preludes(&seen.lock().unwrap()), 2);
}

#[test]
fn plans_carry_the_plot_prelude_only_when_the_code_may_plot() {
    let fake = Fake::new("fake", &[Capability::RunsPlans]);
    let seen = fake.seen.clone();
    let sandlot = sandlot_with(vec![fake]);
    let mut session = sandlot.session("python").open().unwrap();
    session.run("print(1)").unwrap();
    session.run("import matplotlib.pyplot as plt").unwrap();
    let seen = seen.lock().unwrap();
    let Seen::Plan { main: plain } = &seen[0] else {
        panic!("{seen:?}")
    };
    let Seen::Plan { main: plotting } = &seen[1] else {
        panic!("{seen:?}")
    };
    assert!(!plain.contains("_sandlot_capture_plots"), "{plain}");
    assert!(plotting.contains("_sandlot_capture_plots"), "{plotting}");
    assert_eq!(seen.len(), 2, "a plan needs no extra runs");
}

#[test]
fn end_reasons_reach_the_caller_and_an_ended_session_refuses_more() {
    let fake = Fake::new("fake", &[Capability::PersistentState]);
    let script = fake.script.clone();
    let sandlot = sandlot_with(vec![fake]);
    let mut session = sandlot.session("python").open().unwrap();
    let limit = Duration::from_secs(2);
    script.lock().unwrap().extend([
        Outcome {
            exit_code: 124,
            end: EndReason::TimedOut { limit },
            session: SessionState::Restarted {
                reason: "it ran past its time limit".into(),
            },
            ..Outcome::default()
        },
        Outcome {
            exit_code: 137,
            end: EndReason::MemoryLimit,
            ..Outcome::default()
        },
        Outcome {
            exit_code: 141,
            end: EndReason::OutputLimit,
            stdout_truncated: true,
            ..Outcome::default()
        },
        Outcome::lost("the agent went away"),
    ]);
    let timed_out = session.run("x").unwrap();
    assert!(timed_out.timed_out() && !timed_out.success());
    assert_eq!(timed_out.exit_code, 124);
    assert!(matches!(timed_out.session, SessionState::Restarted { .. }));
    assert!(session.run("x").unwrap().memory_exceeded());
    let flooded = session.run("x").unwrap();
    assert_eq!(flooded.end, EndReason::OutputLimit);
    assert!(flooded.stdout_truncated);
    let lost = session.run("x").unwrap();
    assert!(matches!(lost.end, EndReason::SandboxLost { .. }));
    assert!(lost.session_ended());
    assert!(
        lost.artifacts.is_empty(),
        "nothing is collected from a lost sandbox"
    );
    let error = session.run("x").unwrap_err();
    assert!(matches!(error, Error::SessionEnded { .. }), "{error}");
    assert!(error.to_string().contains("the agent went away"), "{error}");
}

#[test]
fn artifacts_come_back_through_the_backends_files_and_the_shell_needs_its_capability() {
    let fake = Fake::new("fake", &[Capability::PersistentState]);
    let sandlot = sandlot_with(vec![fake]);
    let mut session = sandlot.session("python").open().unwrap();
    let run = session.run("print(1)").unwrap();
    let plots: Vec<_> = run.plots().map(|p| p.path.as_str()).collect();
    assert_eq!(plots, ["plot.png"]);
    assert_eq!(run.backend, "fake");
    let json = run.to_json();
    assert_eq!(json["schema"], sandlot::execution::EXECUTION_SCHEMA);
    assert_eq!(json["end"]["reason"], "completed");

    let error = session.execute_command("ls").unwrap_err();
    assert!(
        matches!(
            error,
            Error::BackendCannot {
                capability: Capability::Shell,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn only_what_a_run_made_comes_back_not_what_the_host_put_there() {
    let fake = Fake::new("fake", &[Capability::PersistentState]);
    let sandlot = sandlot_with(vec![fake]);
    let mut session = sandlot.session("python").open().unwrap();
    session.run("x = 1").unwrap();
    session.write_file("output/from-host.csv", b"a,b").unwrap();
    let run = session.run("x = 2").unwrap();
    let names: Vec<_> = run.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(names, ["plot.png"], "the host's own file is not the run's");
}

/// Makes a `Fake` called `lazy` when asked, failing the first `failures` times.
struct Lazy {
    connects: std::sync::atomic::AtomicUsize,
    failures: usize,
}

impl sandlot::BackendProvider for Lazy {
    fn name(&self) -> BackendName {
        BackendName::new("lazy").unwrap()
    }

    fn connect(&self, _context: &sandlot::ProviderContext) -> Result<Arc<dyn Backend>> {
        let n = self
            .connects
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n < self.failures {
            return Err(Error::EngineUnavailable {
                engine: "lazy".into(),
                endpoint: "nowhere".into(),
                reason: "not started yet".into(),
                hint: "start it".into(),
            });
        }
        Ok(Arc::new(Fake::new(
            "lazy",
            &[Capability::RunsPlans, Capability::Shell],
        )))
    }
}

fn lazy(failures: usize) -> (Arc<Lazy>, Sandlot) {
    let provider = Arc::new(Lazy {
        connects: Default::default(),
        failures,
    });
    let sandlot = Sandlot::builder(plugins())
        .provider(provider.clone())
        .build()
        .unwrap();
    (provider, sandlot)
}

#[test]
fn a_provider_makes_its_backend_when_a_session_first_needs_it_and_only_once() {
    let (provider, sandlot) = lazy(0);
    assert_eq!(sandlot.backend_names(), ["lazy"]);
    let connects = || provider.connects.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(connects(), 0, "nothing is made before a session needs it");
    for _ in 0..3 {
        let session = sandlot.session("python").open().unwrap();
        assert_eq!(session.backend(), &"lazy");
    }
    assert_eq!(connects(), 1);
    // Typed access finds the provider registered.
    assert_eq!(sandlot.providers::<Lazy>().count(), 1);
}

#[test]
fn a_provider_that_failed_to_connect_is_asked_again_by_the_next_session() {
    let (provider, sandlot) = lazy(1);
    let error = sandlot.session("python").open().unwrap_err();
    assert!(error.to_string().contains("not started yet"), "{error}");
    assert_eq!(error.kind(), sandlot::ErrorKind::Unsupported);
    let session = sandlot.session("python").backend("lazy").open().unwrap();
    assert_eq!(session.backend(), &"lazy");
    assert_eq!(
        provider.connects.load(std::sync::atomic::Ordering::SeqCst),
        2
    );
}

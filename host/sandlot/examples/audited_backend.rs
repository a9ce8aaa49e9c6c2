//! A backend written outside the crate: `audited` wraps another backend (here the
//! in-process wasm one) and keeps one line per sandbox opened and per run carried
//! out. Everything a backend needs is public (`sandlot::backend`); sessions, the
//! analysis gate, the policy and artifacts work on it unchanged.
//!
//! ```sh
//! sandlot runtimes install python   # once
//! cargo run -p sandlot --example audited_backend
//! ```

use sandlot::backend::*;
use sandlot::policy::{Policy, PolicyField};
use sandlot::{Outcome, Result};
use std::sync::{Arc, Mutex};

/// What the audit saw, in order.
type Log = Arc<Mutex<Vec<String>>>;

struct Audited {
    inner: Arc<dyn Backend>,
    log: Log,
}

impl Backend for Audited {
    fn name(&self) -> BackendName {
        BackendName::new("audited").expect("a valid backend name")
    }
    fn capabilities(&self, language: &str) -> Capabilities {
        self.inner.capabilities(language)
    }
    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
        self.inner.supports(needs)
    }
    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        let inner = self.inner.open(spec)?;
        record(
            &self.log,
            format!("open {} for {}", inner.name(), spec.language),
        );
        Ok(Box::new(AuditedSandbox {
            inner,
            log: self.log.clone(),
        }))
    }
    // What the wrapped backend cannot enforce, this one cannot either.
    fn unenforced(&self, policy: &Policy) -> Vec<PolicyField> {
        self.inner.unenforced(policy)
    }
    // Nor does it hold less memory.
    fn workspace_in_memory(&self) -> bool {
        self.inner.workspace_in_memory()
    }
}

struct AuditedSandbox {
    inner: Box<dyn Sandbox>,
    log: Log,
}

impl Sandbox for AuditedSandbox {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        let what = match request.workload {
            Workload::Code(code) => format!("code ({} bytes)", code.len()),
            Workload::Plan(plan) => format!("a plan of {} commands", plan.commands.len()),
            Workload::Shell(line) => format!("shell `{line}`"),
            _ => "a workload".to_string(),
        };
        let outcome = self.inner.run(request)?;
        record(
            &self.log,
            format!("run {what}: exit {}, {:?}", outcome.exit_code, outcome.end),
        );
        Ok(outcome)
    }
    fn files(&mut self) -> &mut dyn SandboxFiles {
        self.inner.files()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

fn record(log: &Log, line: String) {
    log.lock().unwrap_or_else(|e| e.into_inner()).push(line);
}

fn main() -> Result<()> {
    let sandlot = sandlot::from_environment()?;
    let log = Log::default();
    let audited = Arc::new(Audited {
        inner: sandlot.backend("wasm")?,
        log: log.clone(),
    });
    let plugins = sandlot::PluginHost::builder().load()?;
    let sandlot = sandlot::builder(plugins).backend(audited).build()?;

    let mut session = sandlot.session("python").backend("audited").open()?;
    let run = session.run("print(sum(range(10)))")?;
    assert_eq!(run.stdout_text(), "45\n");
    session.close();

    let log = log.lock().unwrap_or_else(|e| e.into_inner());
    for line in log.iter() {
        println!("audit: {line}");
    }
    let opens = log.iter().filter(|l| l.starts_with("open ")).count();
    let runs = log.iter().filter(|l| l.starts_with("run ")).count();
    // The session may run setup of its own (a plot prelude) before the user's code.
    assert!(
        opens == 1 && runs >= 1,
        "one sandbox, the code run in it: {log:?}"
    );
    Ok(())
}

//! The hostile corpus: every file in `tests/hostile/` is one attack, with where it
//! applies and what must hold, run against every backend it applies to.
//!
//! Besides each case's own expectations, every run must leave:
//! - the host unharmed: a canary file on the host is neither read nor changed, and
//!   neither the canary nor the test's own environment shows up in the output;
//! - other sessions unaffected: a session opened beforehand on the same backend still
//!   answers;
//! - a clear error where the run is refused, and a session that still answers (or
//!   says why it ended) where the case expects one;
//! - nothing running: once closed, the sandbox is gone.
//!
//! The table of `docs/security.md` (attacks × backends) is generated from the cases:
//! `SANDLOT_UPDATE_HOSTILE_TABLE=1 cargo test --test hostile` rewrites it; otherwise
//! the test fails when it differs.

mod support;

use sandlot::{EndReason, Limits, Network, Policy, RunOptions, Sandlot, Session};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;
use support::needs::{needs, Need};

const BACKENDS: [&str; 5] = ["wasm", "docker", "podman", "kubernetes", "native"];

/// Backends attacked as another of [`BACKENDS`] is, under its rules and its column of
/// the table: the wasm backend with its sandboxes in worker processes.
const VARIANTS: [(&str, &str); 1] = [("wasm-workers", "wasm")];

/// One file of `tests/hostile/`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Case {
    /// The row of the table in `docs/security.md`.
    attack: String,
    #[serde(default = "python")]
    language: String,
    /// Backends it applies to.
    backends: Vec<String>,
    /// Why it does not apply to the others.
    #[serde(default)]
    not_applicable: BTreeMap<String, String>,
    /// Backends that do not enforce what the case tests, and the policy field they
    /// report as not enforced instead: the execution must say so. A backend here but
    /// not in `backends` is not attacked (the attack would reach the host, as filling
    /// its disk); its session must still report the field.
    #[serde(default)]
    unenforced_on: BTreeMap<String, String>,
    /// Seconds.
    #[serde(default = "five")]
    timeout: f64,
    /// MiB.
    #[serde(default = "two_fifty_six")]
    memory: usize,
    /// Bytes of the workspace.
    workdir_size: Option<u64>,
    /// The policy's network (default `off`), and its allow-list.
    #[serde(default)]
    network: Option<Network>,
    #[serde(default)]
    allow: Vec<String>,
    /// Request rules on top of the allow-list.
    #[serde(default)]
    requests: Vec<String>,
    #[serde(default)]
    max_output: Option<usize>,
    /// The code; `{canary_path}` stands for the host's canary file.
    code: String,
    /// How the run may end: completed, timeout, memory, output, killed.
    ends: Vec<String>,
    #[serde(default)]
    stdout_has: Vec<String>,
    #[serde(default)]
    stdout_lacks: Vec<String>,
    /// Libraries asked for after the code ran, one run each: each must be refused
    /// for its name (`InvalidLibrary`, naming it) before any installer saw it.
    #[serde(default)]
    libraries_refused: Vec<String>,
    /// Libraries asked for by one run after the code (and after the refusals). The
    /// install may fail; `then` shows what it did.
    #[serde(default)]
    install: Vec<String>,
    /// Code run after, in the same session; its stdout must be `then_stdout`.
    then: Option<String>,
    then_stdout: Option<String>,
    /// Workspace paths that reading must refuse, after the run.
    #[serde(default)]
    read_fails: Vec<String>,
    /// Workspace paths that writing must refuse.
    #[serde(default)]
    write_fails: Vec<String>,
    /// The session gets a secret, `SANDLOT_CASE_SECRET` (letters and digits, mixed
    /// case), which must come back nowhere: not in the output, the files' names or
    /// contents, a listing, a copy, an egress denial (in any case there: DNS, TLS
    /// and `Host` fold it), an error.
    #[serde(default)]
    secret: bool,
    /// The secret is bound to these hosts (as `--secret NAME=HOSTS` writes them): the
    /// code holds a placeholder, the value never enters the sandbox.
    bound_to: Option<String>,
    /// At least this many of the run's files must be refused for their names.
    #[serde(default)]
    artifacts_refused_at_least: usize,
    /// The session has one tool, `echo` (its arguments back), under tool limits of
    /// 100 calls and 64 KiB requests per run.
    #[serde(default)]
    tools: bool,
}

fn python() -> String {
    "python".into()
}
fn five() -> f64 {
    5.0
}
fn two_fifty_six() -> usize {
    256
}

fn cases() -> Vec<(String, Case)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hostile");
    let mut cases: Vec<(String, Case)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let case: Case =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for backend in BACKENDS {
                let listed = case.backends.iter().any(|b| b == backend);
                let gap_only = !listed && case.unenforced_on.contains_key(backend);
                assert!(
                    [listed, case.not_applicable.contains_key(backend), gap_only]
                        .iter()
                        .filter(|x| **x)
                        .count()
                        == 1,
                    "{name}: {backend} must be in `backends`, `not_applicable` or only in \
                     `unenforced_on`, once"
                );
            }
            (name, case)
        })
        .collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    cases
}

fn sandlot() -> &'static Sandlot {
    static SANDLOT: OnceLock<Sandlot> = OnceLock::new();
    SANDLOT.get_or_init(|| support::default_builder(true).build().unwrap())
}

/// A file on the host that no sandbox may read or change.
struct Canary {
    path: PathBuf,
    content: String,
    _dir: tempfile::TempDir,
}

impl Canary {
    fn new() -> Canary {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("canary.txt");
        let content = format!("canary-{:016x}", rand_u64());
        std::fs::write(&path, &content).unwrap();
        Canary {
            path,
            content,
            _dir: dir,
        }
    }

    fn intact(&self) -> bool {
        std::fs::read_to_string(&self.path).is_ok_and(|c| c == self.content)
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .elapsed()
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.finish()
}

fn end_name(end: &EndReason) -> &'static str {
    match end {
        EndReason::Completed => "completed",
        EndReason::TimedOut { .. } => "timeout",
        EndReason::MemoryLimit => "memory",
        EndReason::OutputLimit => "output",
        EndReason::Killed { .. } => "killed",
        _ => "lost",
    }
}

/// The secret a case with `secret = true` gets: letters and digits only, so that it
/// can be a DNS label, in mixed case, so that a channel that folds case shows.
fn case_secret() -> &'static str {
    static SECRET: OnceLock<String> = OnceLock::new();
    SECRET.get_or_init(|| format!("SecRet{:016x}Val", rand_u64()))
}

fn open(case: &Case, backend: &str) -> Session {
    let mut policy = Policy {
        // The corpus tests the sandbox, not the gate: nothing is refused for its text.
        block_at: None,
        network: Network::Off,
        ..Policy::default()
    };
    if let Some(size) = case.workdir_size {
        policy.workdir_size = size;
    }
    if let Some(network) = case.network {
        policy.network = network;
    }
    policy.allow = case.allow.join(",").parse().expect("the case's allow-list");
    policy.requests = case
        .requests
        .clone()
        .try_into()
        .expect("the case's request rules");
    let mut builder = sandlot().session(&case.language);
    builder.backend(backend).policy(policy).limits(Limits {
        timeout: Duration::from_secs_f64(case.timeout),
        memory: case.memory << 20,
        max_output: case.max_output.unwrap_or(Limits::default().max_output),
        ..Limits::default()
    });
    if case.secret {
        let mut secret =
            sandlot::secret::Secret::new("SANDLOT_CASE_SECRET", case_secret()).expect("a secret");
        if let Some(hosts) = &case.bound_to {
            secret = secret
                .bound_to(hosts.parse().expect("the case's binding"))
                .expect("a secret that can be bound");
        }
        builder.secrets(&[secret]);
    }
    if case.tools {
        let echo = sandlot::Tool::new(
            "echo",
            "Gives back its arguments.",
            serde_json::json!({"type": "object"}),
            Ok,
        )
        .unwrap();
        let limits = Limits {
            tools: sandlot::tool::ToolLimits {
                max_calls: 100,
                max_argument_bytes: 64 << 10,
                ..Default::default()
            },
            ..builder.request().limits
        };
        builder.tool(echo).unwrap().limits(limits);
    }
    builder
        .open()
        .unwrap_or_else(|e| panic!("cannot open {} on {backend}: {e}", case.language))
}

/// What must hold of every run's files, whatever the case: written to the host
/// through the API (`write_artifacts`, `copy_out`), nothing lands outside the
/// destination, and every file named comes back where its name says.
fn files_stay_inside(session: &mut Session, run: &sandlot::Execution) -> Vec<String> {
    let mut problems = Vec::new();
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("dest");
    if let Err(e) = run.write_artifacts(&dest) {
        problems.push(format!("writing the artifacts failed: {e}"));
    }
    for artifact in &run.artifacts {
        if !dest.join(artifact.path.as_str()).is_file() {
            problems.push(format!(
                "artifact {} was not written where its name says",
                artifact.path
            ));
        }
    }
    let copied = root.path().join("copied");
    // A run may have replaced its output directory; then nothing is copied.
    if let Ok(copy) = session.copy_out("output", &copied) {
        for file in &copy.files {
            if !copied.join(file.as_str()).is_file() {
                problems.push(format!("copied {file} is not where its name says"));
            }
        }
    }
    let mut stack = vec![root.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if !path.starts_with(&dest) && !path.starts_with(&copied) {
                problems.push(format!(
                    "a file landed outside the destination: {}",
                    path.display()
                ));
            }
        }
    }
    problems
}

/// Where the session's secret shows in what the run and the session give back.
fn secret_leaks(session: &mut Session, run: &sandlot::Execution) -> Vec<String> {
    let secret = case_secret();
    let folded = secret.to_lowercase();
    let mut leaks = Vec::new();
    let mut check = |what: &str, text: &str| {
        if text.contains(secret) {
            leaks.push(format!("the secret is in {what}"));
        }
    };
    check("stdout", &run.stdout_text());
    check("stderr", &run.stderr_text());
    for artifact in &run.artifacts {
        check("an artifact's name", artifact.path.as_str());
        check(
            "an artifact's contents",
            &String::from_utf8_lossy(&artifact.bytes),
        );
    }
    check("the JSON form", &run.to_json().to_string());
    for dir in ["", "output"] {
        match session.list_files(dir) {
            Ok(listing) => check("a listing", &listing.names().join("\n")),
            Err(e) => check("a listing's error", &e.to_string()),
        }
    }
    let copied = tempfile::tempdir().unwrap();
    match session.copy_out("", copied.path()) {
        Ok(copy) => {
            for file in &copy.files {
                check("a copied file's name", file.as_str());
                let bytes = std::fs::read(copied.path().join(file.as_str())).unwrap_or_default();
                check("a copied file's contents", &String::from_utf8_lossy(&bytes));
            }
        }
        Err(e) => check("a copy's error", &e.to_string()),
    }
    // DNS, TLS server names and Host headers fold case: so must their masking.
    for denial in &run.egress_denied {
        let shown = serde_json::to_string(denial).unwrap().to_lowercase();
        if shown.contains(&folded) {
            leaks.push(format!(
                "the secret is in an egress denial, in some case: {shown}"
            ));
        }
    }
    leaks
}

/// For a backend the case does not attack because it does not enforce what the case
/// tests: its sessions must say so.
fn reported_gap(name: &str, case: &Case, backend: &str, rules: &str) -> Vec<String> {
    let field = &case.unenforced_on[rules];
    let session = open(case, backend);
    if session.unenforced().iter().any(|f| f.to_string() == *field) {
        Vec::new()
    } else {
        vec![format!(
            "{name} on {backend}: {field} is not reported as unenforced"
        )]
    }
}

/// Runs `case` on `backend`; the problems found, if any.
fn attack(name: &str, case: &Case, backend: &str, rules: &str, canary: &Canary) -> Vec<String> {
    let mut problems = Vec::new();
    let mut fail = |what: String| problems.push(format!("{name} on {backend}: {what}"));
    let mut bystander = {
        let mut builder = sandlot().session("python");
        builder.backend(backend);
        builder.open().unwrap()
    };
    let mut session = open(case, backend);
    let sandbox = session.sandbox_name().unwrap_or_default();
    let code = case
        .code
        .replace("{canary_path}", &canary.path.to_string_lossy());
    let unenforced = case.unenforced_on.get(rules);
    match session.run_with(&code, RunOptions::default()) {
        Ok(run) => {
            for problem in files_stay_inside(&mut session, &run) {
                fail(problem);
            }
            if case.secret {
                for leak in secret_leaks(&mut session, &run) {
                    fail(leak);
                }
            }
            if run.artifacts_refused < case.artifacts_refused_at_least {
                fail(format!(
                    "{} files were refused for their names, not at least {} (made {:?})",
                    run.artifacts_refused,
                    case.artifacts_refused_at_least,
                    run.artifacts
                        .iter()
                        .map(|a| a.path.to_string())
                        .collect::<Vec<_>>()
                ));
            }
            let (stdout, stderr) = (run.stdout_text(), run.stderr_text());
            for leak in [canary.content.as_str(), env!("CARGO_MANIFEST_DIR")] {
                if stdout.contains(leak) || stderr.contains(leak) {
                    fail(format!("the output shows the host's {leak:?}"));
                }
            }
            if let Some(field) = unenforced {
                let reported = run.unenforced.iter().any(|f| f.to_string() == *field);
                if !reported {
                    fail(format!("{field} is not enforced here but not reported"));
                }
            } else {
                let end = end_name(&run.end);
                if !case.ends.iter().any(|e| e == end) {
                    fail(format!(
                        "ended {end}, expected one of {:?}; stdout {:?}, stderr {:?}",
                        case.ends,
                        truncate(&stdout),
                        truncate(&stderr)
                    ));
                }
                for wanted in &case.stdout_has {
                    if !stdout.contains(wanted.as_str()) {
                        fail(format!(
                            "stdout lacks {wanted:?}: {:?} (stderr {:?})",
                            truncate(&stdout),
                            truncate(&stderr)
                        ));
                    }
                }
                for unwanted in &case.stdout_lacks {
                    if stdout.contains(unwanted.as_str()) {
                        fail(format!("stdout has {unwanted:?}: {:?}", truncate(&stdout)));
                    }
                }
            }
        }
        Err(error) => {
            let message = error.to_string();
            if case.secret && message.contains(case_secret()) {
                fail("the secret is in the run's error".into());
            }
            if message.trim().is_empty() {
                fail("an error without a message".into());
            } else {
                fail(format!("the run failed: {message}"));
            }
        }
    }
    if unenforced.is_none() {
        for library in &case.libraries_refused {
            let options = RunOptions {
                libraries: vec![library.clone()],
                ..RunOptions::default()
            };
            match session.run_with("", options) {
                Err(sandlot::Error::InvalidLibrary { library: named, .. }) if named == *library => {
                }
                Err(e) => fail(format!(
                    "asking for library {library:?} failed otherwise: {e}"
                )),
                Ok(run) => fail(format!(
                    "library {library:?} was handed to the installer (exit {}, stderr {:?})",
                    run.exit_code,
                    truncate(&run.stderr_text())
                )),
            }
        }
        if !case.install.is_empty() {
            let options = RunOptions {
                libraries: case.install.clone(),
                ..RunOptions::default()
            };
            if let Err(e) = session.run_with("", options) {
                if e.kind() != sandlot::ErrorKind::Unsupported {
                    fail(format!("installing {:?} failed: {e}", case.install));
                }
            }
        }
        for path in &case.read_fails {
            if session.read_file(path).is_ok() {
                fail(format!("reading {path:?} was allowed"));
            }
        }
        for path in &case.write_fails {
            if session.write_file(path, b"x").is_ok() {
                fail(format!("writing {path:?} was allowed"));
            }
        }
        if let Some(then) = &case.then {
            match session.run(then) {
                Ok(run) => {
                    let expected = case.then_stdout.as_deref().unwrap_or_default();
                    if run.stdout_text() != expected {
                        fail(format!(
                            "the session afterwards printed {:?}, not {expected:?} ({:?})",
                            run.stdout_text(),
                            run.end
                        ));
                    }
                }
                Err(e) => fail(format!("the session afterwards: {e}")),
            }
        }
    }
    if !canary.intact() {
        fail("the host's canary file was changed".into());
    }
    match bystander.run("print(6 * 7)") {
        Ok(run) if run.stdout_text() == "42\n" => {}
        Ok(run) => fail(format!("another session printed {:?}", run.stdout_text())),
        Err(e) => fail(format!("another session failed: {e}")),
    }
    session.close();
    bystander.close();
    if !sandbox.is_empty() && support::sandbox_exists(sandlot(), backend, &sandbox) {
        fail(format!("{sandbox} is still there after close"));
    }
    problems
}

fn truncate(text: &str) -> String {
    text.chars().take(300).collect()
}

/// The table of `docs/security.md` for `cases`: one row per attack, one column per
/// backend.
fn table(cases: &[(String, Case)]) -> String {
    let mut out = String::from("| attack | file | wasm | Docker | Podman | Kubernetes |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for (name, case) in cases {
        let cells: Vec<String> = BACKENDS
            .iter()
            .map(|backend| {
                if let Some(why) = case.not_applicable.get(*backend) {
                    format!("n/a: {why}")
                } else if let Some(field) = case.unenforced_on.get(*backend) {
                    format!("**not enforced**: `{field}`, reported in `unenforced`")
                } else {
                    "contained".into()
                }
            })
            .collect();
        out.push_str(&format!(
            "| {} | `{name}.toml` | {} |\n",
            case.attack,
            cells.join(" | ")
        ));
    }
    out
}

const BEGIN: &str = "<!-- hostile-table: generated by tests/hostile.rs -->\n";
const END: &str = "<!-- /hostile-table -->";

#[test]
fn every_attack_of_the_corpus_is_contained_on_every_backend_it_applies_to() {
    let all = cases();
    assert!(all.len() >= 20, "the corpus has {} cases", all.len());
    // SANDLOT_HOSTILE_CASES=a,b attacks with those cases alone (while one is written).
    let only = std::env::var("SANDLOT_HOSTILE_CASES").ok();
    let cases: Vec<_> = all
        .iter()
        .filter(|(name, _)| {
            only.as_ref()
                .is_none_or(|o| o.split(',').any(|n| n == name))
        })
        .cloned()
        .collect();
    // SANDLOT_HOSTILE_BACKENDS=native attacks that backend alone (tests/run.sh, as an
    // ordinary user).
    let backends = std::env::var("SANDLOT_HOSTILE_BACKENDS").ok();
    let canary = Canary::new();
    let problems: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = BACKENDS
            .iter()
            .map(|backend| (*backend, *backend))
            .chain(VARIANTS)
            .filter(|(backend, _)| {
                backends
                    .as_ref()
                    .is_none_or(|b| b.split(',').any(|n| n == *backend))
            })
            // A backend this machine lacks is left out and said so (and fails in CI).
            .filter(|(_, rules)| match *rules {
                "wasm" => needs(&[Need::Runtime("python")]),
                backend => needs(&[Need::Backend(backend)]),
            })
            .map(|(backend, rules)| {
                let (cases, canary) = (&cases, &canary);
                scope.spawn(move || {
                    cases
                        .iter()
                        .flat_map(|(name, case)| {
                            if case.backends.iter().any(|b| b == rules) {
                                attack(name, case, backend, rules, canary)
                            } else if case.unenforced_on.contains_key(rules) {
                                reported_gap(name, case, backend, rules)
                            } else {
                                Vec::new()
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    if only.is_some() || backends.is_some() {
        return;
    }

    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/security.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let start = doc
        .find(BEGIN)
        .expect("docs/security.md has the hostile table's markers");
    let end = doc[start..].find(END).unwrap() + start;
    let generated = table(&all);
    if std::env::var_os("SANDLOT_UPDATE_HOSTILE_TABLE").is_some() {
        let updated = format!("{}{BEGIN}{generated}{}", &doc[..start], &doc[end..]);
        std::fs::write(&doc_path, updated).unwrap();
    } else {
        assert_eq!(
            &doc[start + BEGIN.len()..end],
            generated,
            "the table of docs/security.md is stale: run SANDLOT_UPDATE_HOSTILE_TABLE=1 cargo test --test hostile"
        );
    }
}

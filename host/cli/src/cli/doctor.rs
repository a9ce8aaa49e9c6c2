//! `sandlot doctor`: what isolation is actually in force here. The engines and their
//! versions, seccomp, user namespaces, cgroup limits, NetworkPolicy, which policy
//! fields each backend can apply, and what to do about each gap.

use super::global::Global;
use anyhow::Result;
use sandlot::backend::{Check, CheckState};
use sandlot::policy::{Policy, PolicyField, Preset};
use sandlot::service::Service;
use serde::Serialize;
use std::process::ExitCode;

/// Prints the report. The exit status is 0 whatever it finds: gaps are facts about
/// the machine, not failures of the command.
pub(super) fn command(global: &Global, json: bool) -> Result<ExitCode> {
    let config = global.config()?;
    let policy = config.policy.clone().unwrap_or_default();
    let service = Service::from_config(config, &global.overrides(), sandlot::providers())?;
    let sandlot = service.sandlot();
    let backends = sandlot
        .backend_names()
        .into_iter()
        .map(|name| match sandlot.backend(name.as_str()) {
            Ok(backend) => {
                let unenforced = cannot_enforce(&*backend, &policy);
                let mut checks = backend.checks();
                checks.push(policy_check(&unenforced));
                checks.push(snapshot_check(&*backend));
                BackendReport {
                    name: name.to_string(),
                    unavailable: None,
                    checks,
                    unenforced,
                }
            }
            Err(error) => BackendReport {
                name: name.to_string(),
                unavailable: Some(error.to_string()),
                checks: Vec::new(),
                unenforced: Vec::new(),
            },
        })
        .collect();
    let report = Report {
        host: host_checks(),
        backends,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.as_text());
    }
    Ok(ExitCode::SUCCESS)
}

/// Everything `doctor` found.
#[derive(Serialize)]
struct Report {
    host: Vec<Check>,
    backends: Vec<BackendReport>,
}

/// What `doctor` found about one backend.
#[derive(Serialize)]
struct BackendReport {
    name: String,
    /// Why it cannot be used here (its engine does not answer), if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    unavailable: Option<String>,
    checks: Vec<Check>,
    /// The policy fields it cannot apply.
    unenforced: Vec<PolicyField>,
}

fn policy_check(unenforced: &[PolicyField]) -> Check {
    if unenforced.is_empty() {
        return Check::ok("policy", "every field is enforced");
    }
    let fields: Vec<String> = unenforced.iter().map(ToString::to_string).collect();
    Check::gap(
        "policy",
        format!("not enforced here: {}", fields.join(", ")),
        "each execution lists these in `unenforced`; where one matters, use a backend \
         that enforces it",
    )
}

impl Report {
    fn as_text(&self) -> String {
        let mut out = String::new();
        let mut section = |title: &str, checks: &[Check]| {
            out.push_str(title);
            out.push('\n');
            for check in checks {
                let mark = if check.state == CheckState::Ok {
                    "ok "
                } else {
                    "gap"
                };
                out.push_str(&format!("  {mark}  {:<16} {}\n", check.topic, check.detail));
                if let Some(hint) = &check.hint {
                    out.push_str(&format!("       {:<16} → {hint}\n", ""));
                }
            }
        };
        section("host", &self.host);
        for backend in &self.backends {
            match &backend.unavailable {
                None => section(&backend.name, &backend.checks),
                Some(why) => section(
                    &format!("{}\n  --   not available here: {why}", backend.name),
                    &[],
                ),
            }
        }
        out
    }
}

/// The policy fields `backend` cannot apply: under the policy in force, and under the
/// strict preset, which asks for everything.
fn cannot_enforce(backend: &dyn sandlot::backend::Backend, policy: &Policy) -> Vec<PolicyField> {
    let mut fields = backend.unenforced(policy);
    for field in backend.unenforced(&Preset::Strict.policy()) {
        if !fields.contains(&field) {
            fields.push(field);
        }
    }
    fields
}

/// Facts about this machine rather than one backend.
fn host_checks() -> Vec<Check> {
    let mut checks = vec![Check::ok(
        "sandlot",
        format!(
            "{} on {}",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::ARCH
        ),
    )];
    if let Some(check) = sys_resource() {
        checks.push(check);
    }
    checks.push(checkpoints());
    checks
}

/// What a snapshot of a Python session on `backend` holds.
fn snapshot_check(backend: &dyn sandlot::backend::Backend) -> Check {
    use sandlot::Capability;
    let capabilities = backend.capabilities("python");
    if capabilities.has(Capability::SnapshotMemory) {
        let languages = match backend
            .capabilities("javascript")
            .has(Capability::SnapshotMemory)
        {
            true => "Python and JavaScript",
            false => "Python",
        };
        Check::ok(
            "snapshots",
            format!(
                "{languages}: the interpreter's memory, exactly, and the files; restores and \
                 forks copy-on-write"
            ),
        )
    } else if capabilities.has(Capability::PersistentState) || capabilities.has(Capability::Kernels)
    {
        Check::gap(
            "snapshots",
            "Python: the kernel's variables by serialisation (what cannot be pickled is \
             named) and the files; not the memory, no fork",
            "for exact snapshots, forks and pauses of a session's memory, run it on wasm; \
             see `checkpoints` above for container memory checkpoints",
        )
    } else {
        Check::gap(
            "snapshots",
            "the files alone",
            "for snapshots with the interpreter's state, run the session on wasm",
        )
    }
}

/// Whether CRIU could checkpoint a container's memory here (Podman's `container
/// checkpoint`, Docker's experimental checkpoints both use it). sandlot does not
/// drive it: a container session's Python variables go by serialisation.
fn checkpoints() -> Check {
    let fallback = "sandlot keeps a container session's Python variables by serialisation \
                    instead (docs/snapshots.md)";
    let version = std::process::Command::new("criu").arg("--version").output();
    let Ok(version) = version else {
        return Check::gap(
            "checkpoints",
            "CRIU is not installed: no engine here can checkpoint a container's memory",
            fallback,
        );
    };
    let version = String::from_utf8_lossy(&version.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Version: ").map(str::to_string))
        .unwrap_or_else(|| "of an unknown version".into());
    let checked = std::process::Command::new("criu").arg("check").output();
    match checked {
        Ok(out) if out.status.success() => Check::ok(
            "checkpoints",
            format!(
                "criu {version} works on this kernel; {}",
                fallback.replace(" instead", "")
            ),
        ),
        Ok(out) => {
            let said = String::from_utf8_lossy(&out.stderr);
            let first = said
                .lines()
                .find(|l| l.contains("Error"))
                .or_else(|| said.lines().next())
                .unwrap_or("no reason given")
                .trim()
                .to_string();
            Check::gap(
                "checkpoints",
                format!("criu {version} cannot checkpoint on this kernel: {first}"),
                fallback,
            )
        }
        Err(e) => Check::gap(
            "checkpoints",
            format!("criu {version} does not run: {e}"),
            fallback,
        ),
    }
}

/// Whether root here has CAP_SYS_RESOURCE. Without it (a container or a VM that
/// drops it), engines started from here cannot give a container a negative
/// `oom_score_adj` nor raise an rlimit above its hard limit. Only asked as root: an
/// ordinary user never has it, and the engine's own rights are what count then.
fn sys_resource() -> Option<Check> {
    const CAP_SYS_RESOURCE: u32 = 24;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .map(str::to_string)
    };
    let euid: u32 = field("Uid:")?.split_whitespace().nth(1)?.parse().ok()?;
    if euid != 0 {
        return None;
    }
    let effective = u64::from_str_radix(&field("CapEff:")?, 16).ok()?;
    Some(if effective & (1 << CAP_SYS_RESOURCE) != 0 {
        Check::ok("capabilities", "root has CAP_SYS_RESOURCE")
    } else {
        Check::gap(
            "capabilities",
            "root here lacks CAP_SYS_RESOURCE: an engine started here cannot give a \
             container a negative oom_score_adj or raise an rlimit above its hard limit \
             (sandlot only lowers limits, so its sandboxes still start)",
            "run the engines where root keeps CAP_SYS_RESOURCE (not in a container or VM \
             that drops it) if other tools need those",
        )
    })
}

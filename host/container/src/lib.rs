//! The engine-neutral half of every container backend: `sandlot-agent`, the static
//! program that runs as process 1 of each sandbox, and the host's side of it.
//!
//! An engine (Docker, Podman, Kubernetes) only makes a sandbox with the agent in it,
//! hands over a byte stream to the agent ([`Transport`]: a Unix socket, or an attach
//! or exec stream) and implements [`SandboxHandle`] (network on and off, removal).
//! [`AgentSandbox`] does the rest: runs the handler's plan, shell commands and file
//! requests, with the run's limits, and turns what the agent reports into an
//! [`Outcome`](sandlot_core::backend::Outcome). The protocol is in the `sandlot_agent` crate.

mod client;
mod kernel;
mod plan;
pub mod proxy;
pub mod recipe;
mod sandbox;
pub mod toolchain;
mod transport;

pub use client::{AgentClient, Output, RunCell, RunCommand, RunTools};
pub use recipe::Recipe;
pub use sandbox::{AgentSandbox, SandboxHandle};
pub use transport::{accept_unix, Transport};

use sandlot_core::error::{Error, Result};
use std::path::PathBuf;

/// The agent executable, built for this machine's architecture and linked statically
/// (it runs in images whose C library sandlot does not know).
pub fn executable() -> &'static [u8] {
    static AGENT: &[u8] = include_bytes!(env!("SANDLOT_AGENT_PATH"));
    AGENT
}

/// The agent executable's SHA-256, in hex: what tells its versions apart.
fn digest() -> &'static str {
    use sha2::Digest;
    static DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIGEST.get_or_init(|| hex::encode(sha2::Sha256::digest(executable())))
}

/// The image that holds only the agent, for engines that can only start containers
/// from images (a Kubernetes pod's init container copies it out of this one):
/// `sandlot/agent:<digest>`, so a node never runs a stale agent.
pub fn image() -> String {
    format!("sandlot/agent:{}", &digest()[..16])
}

/// Where an image made by [`variant`] holds the agent.
pub const BAKED_PATH: &str = "/.sandlot/agent";

/// The image `base` with this version of the agent inside at [`BAKED_PATH`]:
/// `sandlot/python:latest` gives `sandlot/python:latest-agent-<digest>`. `sandlot images
/// build` makes one for each recipe's image, so that a Kubernetes pod from it starts
/// the agent at once instead of copying it in with an init container first.
///
/// ```
/// let variant = sandlot::container::variant("sandlot/python:latest");
/// assert!(variant.starts_with("sandlot/python:latest-agent-"));
/// let untagged = sandlot::container::variant("localhost:5000/sandlot/go");
/// assert!(untagged.starts_with("localhost:5000/sandlot/go:latest-agent-"));
/// ```
pub fn variant(base: &str) -> String {
    format!("{}{}", variant_prefix(base), &digest()[..16])
}

/// Whether `image` is a variant of `base` made by [`variant`], for this agent or any
/// other version of it.
///
/// ```
/// use sandlot::container::{is_variant, variant};
/// assert!(is_variant("sandlot/r:latest", &variant("sandlot/r:latest")));
/// assert!(is_variant("sandlot/r:latest", "sandlot/r:latest-agent-0123456789abcdef"));
/// assert!(!is_variant("sandlot/r:latest", "sandlot/r:latest"));
/// assert!(!is_variant("sandlot/r:latest", "sandlot/r:latest-agent-mine"));
/// ```
pub fn is_variant(base: &str, image: &str) -> bool {
    image
        .strip_prefix(&variant_prefix(base))
        .is_some_and(|digest| digest.len() == 16 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `repository:tag-agent-` of `base` (whose tag defaults to `latest`).
fn variant_prefix(base: &str) -> String {
    let name_start = base.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match base[name_start..].rfind(':') {
        Some(colon) => (&base[..name_start + colon], &base[name_start + colon + 1..]),
        None => (base, "latest"),
    };
    format!("{repository}:{tag}-agent-")
}

/// A tar archive of the agent as the file `name`, owned by root and not writable:
/// code in a container, which runs as another user, cannot replace it.
pub fn archive(name: &str) -> Result<Vec<u8>> {
    let agent = executable();
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(agent.len() as u64);
    header.set_mode(0o555);
    header.set_uid(0);
    header.set_gid(0);
    header.set_cksum();
    tar.append_data(&mut header, name, agent)
        .and_then(|()| tar.into_inner())
        .map_err(|e| Error::Io {
            context: "cannot pack the agent".into(),
            source: e,
        })
}

/// The agent executable as a file, written once per version under the user's cache,
/// for engines that mount it into a sandbox from the host.
pub fn executable_file() -> Result<PathBuf> {
    executable_file_in(&sandlot_core::dirs::user_cache().join("agent"))
}

/// The agent executable as a file under `dir` (in `<dir>/<version>/sandlot-agent`),
/// written once per version: for an engine whose sandboxes reach the host's files as
/// another user than this process's, who may not get into the user's cache.
pub fn executable_file_in(base: &std::path::Path) -> Result<PathBuf> {
    use sha2::Digest;
    use std::os::unix::fs::MetadataExt;
    /// Inode, size and modification time (seconds, nanoseconds).
    type Identity = (u64, u64, i64, i64);
    /// The file last found intact, and what `stat` said of it then.
    static CHECKED: std::sync::Mutex<Option<(PathBuf, Identity)>> = std::sync::Mutex::new(None);
    let identity = |path: &std::path::Path| {
        std::fs::metadata(path)
            .ok()
            .map(|m| (m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
    };
    let agent = executable();
    let dir = base.join(&digest()[..16]);
    let path = dir.join("sandlot-agent");
    // Hashing the whole binary cost every container start a few milliseconds (the
    // pool's warmer paid it beside every pooled acquire): once the file was found
    // intact, the same inode, size and mtime stand for the same bytes.
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((known, seen)) = checked.as_ref() {
        if *known == path && identity(&path).as_ref() == Some(seen) {
            return Ok(path);
        }
    }
    // It becomes process 1 of every container: use a file that is there only if it is
    // exactly ours (a shared temp dir could hold anyone's).
    let intact = std::fs::read(&path)
        .is_ok_and(|bytes| hex::encode(sha2::Sha256::digest(&bytes)) == digest());
    if intact {
        *checked = identity(&path).map(|seen| (path.clone(), seen));
        return Ok(path);
    }
    let io = |e| Error::Io {
        context: format!("cannot install the container agent in {}", dir.display()),
        source: e,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    // Written under a temporary name and renamed, so a concurrent process never
    // mounts a half-written file.
    let staged = tempfile::NamedTempFile::new_in(&dir).map_err(io)?;
    std::fs::write(staged.path(), agent).map_err(io)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    staged.persist(&path).map_err(|e| io(e.error))?;
    *checked = identity(&path).map(|seen| (path.clone(), seen));
    Ok(path)
}

/// What code in `sandbox` may do of the calls a jail must refuse (new user and other
/// namespaces, mounts, the kernel keyring, io_uring, userfaultfd, bpf,
/// perf_event_open), measured where code runs: the agent at `agent_path` tries each
/// in a child of its own (`sandlot-agent probe`), under every filter the engine and
/// the agent applied. What `sandlot doctor` reports for an engine, instead of what the
/// engine's labels claim.
pub fn probe_system_calls(
    sandbox: &mut dyn sandlot_core::backend::Sandbox,
    agent_path: &str,
) -> sandlot_core::backend::Check {
    use sandlot_core::backend::{Check, RunRequest, Workload};
    use sandlot_core::language::{Command, Phase, Plan};
    const TOPIC: &str = "system calls";
    let plan = Plan {
        files: Vec::new(),
        commands: vec![Command {
            phase: Phase::Run,
            argv: vec![agent_path.to_string(), "probe".to_string()],
            env: Vec::new(),
            needs_network: false,
        }],
    };
    let mut request = RunRequest::new(Workload::Plan(&plan));
    request.timeout = std::time::Duration::from_secs(20);
    let outcome = match sandbox.run(request) {
        Ok(outcome) if outcome.exit_code == 0 => outcome,
        Ok(outcome) => {
            return Check::gap(
                TOPIC,
                format!(
                    "the probe failed ({}): {}",
                    outcome.end,
                    String::from_utf8_lossy(&outcome.stderr).trim()
                ),
                "run `sandlot doctor` again; if it keeps failing, the agent cannot run here",
            )
        }
        Err(e) => {
            return Check::gap(
                TOPIC,
                format!("the probe could not run: {e}"),
                "run `sandlot doctor` again; if it keeps failing, the agent cannot run here",
            )
        }
    };
    let said = String::from_utf8_lossy(&outcome.stdout);
    let (mut refused, mut allowed) = (Vec::new(), Vec::new());
    for line in said.lines() {
        if let Some(rest) = line.strip_prefix("refused ") {
            refused.push(rest.split(" (").next().unwrap_or(rest).to_string());
        } else if let Some(name) = line.strip_prefix("allowed ") {
            allowed.push(name.to_string());
        }
    }
    if refused.is_empty() && allowed.is_empty() {
        return Check::gap(
            TOPIC,
            format!(
                "the probe said nothing sandlot understands: {}",
                said.trim()
            ),
            "the agent and this sandlot do not match; rebuild sandlot",
        );
    }
    if allowed.is_empty() {
        Check::ok(
            TOPIC,
            format!("probed in a sandbox: refused {}", refused.join(", ")),
        )
    } else {
        Check::gap(
            TOPIC,
            format!(
                "probed in a sandbox: allowed {} (refused {})",
                allowed.join(", "),
                refused.join(", ")
            ),
            "sandlot's agent refuses these unless the policy's seccomp is `unconfined`; \
             check that the sandbox runs this version of the agent",
        )
    }
}

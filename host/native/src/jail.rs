//! The jail: bubblewrap, found once, and the command line that makes one sandbox of
//! it. The command line is a pure function of what the sandbox is, so that what each
//! policy turns into can be read and tested without running it.

use sandlot_core::error::{Error, Result};
use sandlot_core::layout::Layout;
use sandlot_core::policy::{Policy, Seccomp};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The oldest bubblewrap with every option the command line uses (`--size`, 0.7.0).
const OLDEST: (u32, u32) = (0, 7);

/// The `PATH` of a sandbox, as Docker's images have it.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the agent's egress socket directory is in the sandbox.
pub(crate) const EGRESS_DIR: &str = "/.sandlot/egress";

/// Size of the sandbox's `/dev/shm`.
const SHM_SIZE: u64 = 64 << 20;

/// A bubblewrap executable that was found to work.
#[derive(Debug, Clone)]
pub struct Bwrap {
    /// Its path.
    pub path: PathBuf,
    /// What `bwrap --version` said, e.g. `bubblewrap 0.8.0`.
    pub version: String,
    /// Whether it is installed setuid root (it then refuses what this backend needs).
    pub setuid: bool,
}

impl Bwrap {
    /// `SANDLOT_BWRAP`, else `bwrap` on `PATH`: where [`Bwrap::find`] looks, without
    /// running it.
    fn path() -> Option<PathBuf> {
        std::env::var_os("SANDLOT_BWRAP")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("PATH").and_then(|dirs| {
                    std::env::split_paths(&dirs)
                        .map(|d| d.join("bwrap"))
                        .find(|p| p.is_file())
                })
            })
    }

    /// Whether there is a `bwrap` to try (it is not run).
    pub fn on_path() -> bool {
        Bwrap::path().is_some()
    }

    /// `SANDLOT_BWRAP`, else `bwrap` on `PATH`, if it runs and is new enough.
    pub fn find() -> Result<Bwrap> {
        let path = Bwrap::path().ok_or_else(|| unavailable("no `bwrap` on PATH".into()))?;
        let out = std::process::Command::new(&path)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| unavailable(format!("{} does not run: {e}", path.display())))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let number: Vec<u32> = version
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .split('.')
            .filter_map(|n| n.parse().ok())
            .collect();
        if !out.status.success() || number.len() < 2 || (number[0], number[1]) < OLDEST {
            return Err(unavailable(format!(
                "{} says `{version}`; sandlot needs bubblewrap {}.{} or newer",
                path.display(),
                OLDEST.0,
                OLDEST.1
            )));
        }
        use std::os::unix::fs::PermissionsExt;
        let setuid = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o4000 != 0)
            .unwrap_or(false);
        Ok(Bwrap {
            path,
            version,
            setuid,
        })
    }
}

/// Why this kernel refuses the user namespaces every jail is made in (bubblewrap makes
/// them unprivileged, also for root's sandboxes, which it starts as another uid), and
/// the setting to change; `None` where nothing says it does.
pub(crate) fn user_namespaces_refused() -> Option<String> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    refused_by(
        read("/proc/sys/user/max_user_namespaces").as_deref(),
        read("/proc/sys/kernel/unprivileged_userns_clone").as_deref(),
    )
}

/// [`user_namespaces_refused`] over the two settings' values.
fn refused_by(
    max_user_namespaces: Option<&str>,
    unprivileged_clone: Option<&str>,
) -> Option<String> {
    if max_user_namespaces.map(str::trim) == Some("0") {
        return Some(
            "the kernel allows no user namespaces (user.max_user_namespaces = 0): \
             `sysctl -w user.max_user_namespaces=15000` as root"
                .into(),
        );
    }
    // Debian's and Ubuntu's older kernels have a switch of their own.
    if unprivileged_clone.map(str::trim) == Some("0") {
        return Some(
            "the kernel refuses user namespaces to users other than root \
             (kernel.unprivileged_userns_clone = 0): `sysctl -w \
             kernel.unprivileged_userns_clone=1` as root"
                .into(),
        );
    }
    None
}

fn unavailable(reason: String) -> Error {
    Error::EngineUnavailable {
        engine: "native".into(),
        endpoint: "bwrap".into(),
        reason,
        hint: "install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`), \
               or set SANDLOT_BWRAP to its path"
            .into(),
    }
}

/// What one sandbox's jail is made of.
#[derive(Debug, Clone)]
pub(crate) struct JailSpec<'a> {
    /// The root filesystem, mounted read-only.
    pub rootfs: &'a Path,
    /// The agent executable, mounted read-only over `/.sandlot/agent`.
    pub agent: &'a Path,
    /// The policy: user, workspace size, seccomp.
    pub policy: &'a Policy,
    /// The directory with the egress proxy's socket and the `resolv.conf` that sends
    /// DNS to the agent's relay, when the sandbox reaches out through the proxy.
    pub egress: Option<&'a Path>,
    /// The sandbox's memory cgroup, shown at `/sys/fs/cgroup/memory` so that the
    /// agent can tell an out-of-memory kill.
    pub memory_cgroup: Option<&'a Path>,
    /// Descriptors of system call filters for bwrap to load before it executes the
    /// agent, in order (see [`crate::seccomp`]); none when the policy is unconfined.
    pub seccomp: &'a [std::os::fd::RawFd],
    /// Where no cgroup limits the sandbox: the rlimits the agent sets instead.
    pub rlimits: Option<Rlimits>,
}

/// What stands in for the cgroups where there are none: limits the agent sets on
/// itself, inside the sandbox's user namespace, for every process to inherit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimits {
    /// The processes (and threads) of the sandbox: `RLIMIT_NPROC`.
    pub processes: u32,
    /// The memory of each process (not of the sandbox as a whole): `RLIMIT_DATA`.
    pub memory_per_process: u64,
}

/// The arguments of `bwrap` for `spec`: fresh namespaces of every kind, no
/// capability but the one the agent's egress relay needs to bind its ports (it drops
/// it before any code runs), a read-only root, a size-limited workspace and `/tmp`,
/// and the agent as process 1 speaking on its standard input and output.
pub(crate) fn argv(spec: &JailSpec<'_>) -> Vec<OsString> {
    let policy = spec.policy;
    let workspace = Layout::WORKSPACE;
    let mut args: Vec<OsString> = Vec::new();
    let mut add = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    add(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup",
        "--unshare-net",
        "--hostname",
        "sandlot",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
    ]);
    add(&[
        "--uid",
        &policy.uid.to_string(),
        "--gid",
        &policy.gid.to_string(),
    ]);
    if spec.egress.is_some() {
        // Ports 53, 80 and 443 of the sandbox's own loopback, for the relay.
        add(&["--cap-add", "CAP_NET_BIND_SERVICE"]);
    }
    add(&["--clearenv"]);
    for (name, value) in [
        ("HOME", workspace),
        ("TMPDIR", "/tmp"),
        ("LANG", "C.UTF-8"),
        ("PATH", PATH),
    ] {
        add(&["--setenv", name, value]);
    }
    if policy.seccomp == Seccomp::Unconfined {
        add(&["--setenv", sandlot_agent::SECCOMP_VARIABLE, "unconfined"]);
    }
    if let Some(limits) = spec.rlimits {
        add(&[
            "--setenv",
            sandlot_agent::PROCESS_LIMIT_VARIABLE,
            &limits.processes.to_string(),
            "--setenv",
            sandlot_agent::MEMORY_LIMIT_VARIABLE,
            &limits.memory_per_process.to_string(),
        ]);
    }
    if spec.egress.is_some() {
        for (name, value) in sandlot_container::proxy::sandbox_environment(EGRESS_DIR) {
            add(&["--setenv", &name, &value]);
        }
    }
    let mut bind = |flag: &str, from: &Path, to: &str| {
        args.push(flag.into());
        args.push(from.into());
        args.push(to.into());
    };
    bind("--ro-bind", spec.rootfs, "/");
    bind("--ro-bind", spec.agent, "/.sandlot/agent");
    if let Some(dir) = spec.egress {
        bind("--ro-bind", dir, EGRESS_DIR);
        bind("--ro-bind", &dir.join("resolv.conf"), "/etc/resolv.conf");
    }
    if let Some(dir) = spec.memory_cgroup {
        bind("--ro-bind", dir, "/sys/fs/cgroup/memory");
    }
    let mut add = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    add(&["--proc", "/proc"]);
    // Not `--dev`: it makes a nested user namespace for its ptys, where the relay's
    // capability would not hold; its tmpfs has no size either.
    add(&["--perms", "0755", "--size", "65536", "--tmpfs", "/dev"]);
    for device in ["null", "zero", "full", "random", "urandom"] {
        let path = format!("/dev/{device}");
        add(&["--dev-bind", &path, &path]);
    }
    for (link, to) in [
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        add(&["--symlink", to, link]);
    }
    add(&[
        "--perms",
        "1777",
        "--size",
        &SHM_SIZE.to_string(),
        "--tmpfs",
        "/dev/shm",
    ]);
    // Not recursive: /dev/shm stays writable.
    add(&["--remount-ro", "/dev"]);
    let size = policy.workdir_size.to_string();
    add(&["--perms", "0755", "--size", &size, "--tmpfs", workspace]);
    add(&["--perms", "1777", "--size", &size, "--tmpfs", "/tmp"]);
    add(&["--chdir", workspace]);
    for fd in spec.seccomp {
        add(&["--add-seccomp-fd", &fd.to_string()]);
    }
    add(&["/.sandlot/agent", "serve-stdio", workspace]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandlot_core::policy::Network;

    fn joined(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_default_sandbox_has_every_namespace_no_capability_and_no_way_out() {
        let policy = Policy::default();
        let args = argv(&JailSpec {
            rootfs: Path::new("/store/objects/abc-u1"),
            agent: Path::new("/store/agent/sandlot-agent"),
            policy: &policy,
            egress: None,
            memory_cgroup: Some(Path::new("/sys/fs/cgroup/memory/sandlot/x")),
            seccomp: &[5, 6],
            rlimits: None,
        });
        let line = joined(&args);
        for part in [
            "--unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup --unshare-net",
            "--die-with-parent",
            "--as-pid-1",
            "--cap-drop ALL",
            "--uid 1000 --gid 1000",
            "--clearenv",
            "--ro-bind /store/objects/abc-u1 /",
            "--ro-bind /store/agent/sandlot-agent /.sandlot/agent",
            "--ro-bind /sys/fs/cgroup/memory/sandlot/x /sys/fs/cgroup/memory",
            "--perms 0755 --size 1073741824 --tmpfs /workspace",
            "--perms 1777 --size 1073741824 --tmpfs /tmp",
            "--remount-ro /dev",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert!(line.ends_with(
            "--chdir /workspace --add-seccomp-fd 5 --add-seccomp-fd 6 \
             /.sandlot/agent serve-stdio /workspace"
        ));
        assert!(!line.contains("--cap-add"), "{line}");
        assert!(!line.contains("PROXY"), "{line}");
        assert!(!line.contains("--share-net"), "{line}");
        assert!(!line.contains(sandlot_agent::SECCOMP_VARIABLE), "{line}");
        assert!(!line.contains("SANDLOT_PROCESS_LIMIT"), "{line}");
        assert!(!line.contains("SANDLOT_MEMORY_LIMIT"), "{line}");
    }

    #[test]
    fn a_sandbox_behind_the_proxy_gets_its_socket_its_resolver_and_one_capability() {
        let policy = Policy {
            network: Network::AllowList,
            seccomp: Seccomp::Unconfined,
            ..Policy::default()
        };
        let args = argv(&JailSpec {
            rootfs: Path::new("/r"),
            agent: Path::new("/a"),
            policy: &policy,
            egress: Some(Path::new("/tmp/egress")),
            memory_cgroup: None,
            seccomp: &[],
            rlimits: Some(Rlimits {
                processes: 64,
                memory_per_process: 128 << 20,
            }),
        });
        let line = joined(&args);
        for part in [
            "--cap-drop ALL --uid 1000 --gid 1000 --cap-add CAP_NET_BIND_SERVICE",
            "--setenv SANDLOT_PROCESS_LIMIT 64 --setenv SANDLOT_MEMORY_LIMIT 134217728",
            "--setenv HTTPS_PROXY http://127.0.0.1:3128",
            "--setenv SANDLOT_EGRESS_SOCKET /.sandlot/egress/proxy.sock",
            "--ro-bind /tmp/egress /.sandlot/egress",
            "--ro-bind /tmp/egress/resolv.conf /etc/resolv.conf",
            "--unshare-net",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert!(line.contains(&format!(
            "--setenv {} unconfined",
            sandlot_agent::SECCOMP_VARIABLE
        )));
        assert!(!line.contains("/sys/fs/cgroup/memory"), "{line}");
        assert!(!line.contains("seccomp-fd"), "{line}");
    }

    #[test]
    fn a_kernel_without_user_namespaces_is_named_with_the_setting_to_change() {
        assert_eq!(refused_by(Some("15000\n"), None), None);
        assert_eq!(refused_by(Some("15000\n"), Some("1\n")), None);
        let none = refused_by(Some("0\n"), Some("1\n")).unwrap();
        assert!(none.contains("user.max_user_namespaces=15000"), "{none}");
        let debian = refused_by(Some("15000"), Some("0")).unwrap();
        assert!(
            debian.contains("kernel.unprivileged_userns_clone=1"),
            "{debian}"
        );
    }
}

//! The agent's own system-call filter, under whatever profile the engine applied.
//!
//! Engines differ: Docker's default profile refuses `unshare`, namespace flags to
//! `clone`, `setns`, `mount` and the keyring calls to a process without
//! `CAP_SYS_ADMIN`; Podman's allows all of them (so that nested rootless containers
//! work), and a Kubernetes node may run pods unconfined. A user namespace is where
//! most kernel privilege escalations start, so the agent installs one filter of its
//! own, the same on every engine, before it runs anything: every process of the
//! sandbox inherits it, and no later filter can loosen it (the kernel applies the
//! strictest answer of all filters stacked).
//!
//! The filter is a denylist, built with rust-vmm's `seccompiler` (Firecracker's): the
//! engine's profile stays the allowlist, and this takes away what no sandboxed program
//! needs and what a jail must not give. `clone3` answers `ENOSYS`, as on Docker, so
//! the C library falls back to `clone`, whose flags a filter can read. Every call
//! also has its x32 twin refused (the same number with bit 30 set), and a call from
//! another architecture (32-bit `int 0x80`) kills the process: its numbers differ.
//!
//! [`probe`] tries each call in a child of its own and says which are refused: what
//! `sandlot doctor` reports, measured where code runs rather than read from labels.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;

/// The variable that turns the filter off (`unconfined`), for a policy that asked for
/// no filtering at all.
const VARIABLE: &str = sandlot_agent::SECCOMP_VARIABLE;

/// Bit 30 of a system call number: the x32 ABI's calls.
const X32: i64 = 0x4000_0000;

/// Refused with `EPERM`, whatever their arguments.
const REFUSED: &[(&str, libc::c_long)] = &[
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    // Port I/O exists only on x86.
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
    ("vhangup", libc::SYS_vhangup),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
];

/// The `clone` flags that make new namespaces: a `clone` with any of them is refused.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

#[cfg(target_arch = "x86_64")]
const ARCH: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;

/// The numbers a rule covers: the call's, and on x86_64 its x32 twin.
fn numbers(number: i64) -> Vec<i64> {
    if cfg!(target_arch = "x86_64") {
        vec![number, number | X32]
    } else {
        vec![number]
    }
}

/// The two programs: calls refused with `EPERM`, and `clone3` with `ENOSYS`.
fn programs() -> Result<[BpfProgram; 2], String> {
    let fail = |e: seccompiler::BackendError| format!("cannot build the seccomp filter: {e}");
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, number) in REFUSED {
        for n in numbers(*number) {
            refused.insert(n, Vec::new());
        }
    }
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = *flag as u32 as u64;
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    for n in numbers(libc::SYS_clone) {
        refused.insert(n, clone_rules.clone());
    }
    let eperm = SeccompFilter::new(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .map_err(fail)?;
    let clone3: BTreeMap<i64, Vec<SeccompRule>> = numbers(libc::SYS_clone3)
        .into_iter()
        .map(|n| (n, Vec::new()))
        .collect();
    let enosys = SeccompFilter::new(
        clone3,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    )
    .map_err(fail)?;
    Ok([
        eperm.try_into().map_err(fail)?,
        enosys.try_into().map_err(fail)?,
    ])
}

/// Installs the filter on every thread of the agent, so that everything it starts
/// inherits it; does nothing when `SANDLOT_SECCOMP=unconfined` (the policy asked for
/// no filtering). Also sets `no_new_privs`, which the filter needs.
pub(crate) fn install_from_environment() -> Result<(), String> {
    let unconfined = std::env::var_os(VARIABLE).is_some_and(|v| v == "unconfined");
    // The setting is the agent's, not the code's: what it runs does not see it.
    std::env::remove_var(VARIABLE);
    if unconfined {
        return Ok(());
    }
    for program in programs()? {
        seccompiler::apply_filter_all_threads(&program)
            .map_err(|e| format!("cannot install the seccomp filter: {e}"))?;
    }
    Ok(())
}

/// Installs built programs on the calling thread only: what a forked child can do
/// before it executes another program (nothing here allocates).
#[cfg(test)]
fn install_on_this_thread(programs: &[BpfProgram]) -> std::io::Result<()> {
    for program in programs {
        seccompiler::apply_filter(program).map_err(|_| std::io::Error::last_os_error())?;
    }
    Ok(())
}

/// One call `probe` tries, and how.
struct Probe {
    name: &'static str,
    /// Makes the call in a fresh child; returns its result (`-1` with `errno` set on
    /// failure).
    attempt: fn() -> libc::c_long,
}

// SAFETY (for every probe): raw system calls with integer or null arguments, or
// pointers to locals that outlive the call; each runs in a forked child that exits
// right after, so nothing it changes outlives it.
const PROBES: &[Probe] = &[
    Probe {
        name: "unshare(CLONE_NEWUSER)",
        attempt: || unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) },
    },
    Probe {
        name: "unshare(CLONE_NEWNS)",
        attempt: || unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS) },
    },
    Probe {
        name: "clone(CLONE_NEWUSER)",
        attempt: || unsafe {
            let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
            let pid = libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize);
            if pid == 0 {
                libc::_exit(0);
            }
            pid
        },
    },
    Probe {
        name: "setns",
        attempt: || unsafe {
            let fd = libc::open(c"/proc/self/ns/uts".as_ptr(), libc::O_RDONLY);
            libc::syscall(libc::SYS_setns, fd, libc::CLONE_NEWUTS)
        },
    },
    Probe {
        name: "mount",
        attempt: || unsafe {
            libc::syscall(
                libc::SYS_mount,
                c"none".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                0usize,
                0usize,
            )
        },
    },
    Probe {
        name: "keyctl",
        attempt: || unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                0 as libc::c_long,  // KEYCTL_GET_KEYRING_ID
                -3 as libc::c_long, // KEY_SPEC_SESSION_KEYRING
                1 as libc::c_long,
            )
        },
    },
    Probe {
        name: "add_key",
        attempt: || unsafe {
            libc::syscall(
                libc::SYS_add_key,
                c"user".as_ptr(),
                c"sandlot-probe".as_ptr(),
                c"x".as_ptr(),
                1usize,
                -3 as libc::c_long,
            )
        },
    },
    Probe {
        name: "userfaultfd",
        attempt: || unsafe { libc::syscall(libc::SYS_userfaultfd, 0) },
    },
    Probe {
        name: "io_uring_setup",
        attempt: || unsafe {
            let mut params = [0u8; 120];
            libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr())
        },
    },
    Probe {
        name: "bpf",
        attempt: || unsafe {
            let mut attr = [0u8; 128];
            libc::syscall(libc::SYS_bpf, 0, attr.as_mut_ptr(), attr.len())
        },
    },
    Probe {
        name: "perf_event_open",
        attempt: || unsafe {
            let mut attr = [0u8; 128];
            attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
            libc::syscall(libc::SYS_perf_event_open, attr.as_mut_ptr(), 0, -1, -1, 0)
        },
    },
];

/// Whether an `errno` is a filter's answer: `EPERM` from a refusal (or a missing
/// capability, which refuses as well), `ENOSYS` from a profile that lists nothing.
fn refusal(errno: i32) -> bool {
    errno == libc::EPERM || errno == libc::ENOSYS || errno == libc::EACCES
}

/// Tries every probe in a child of its own and prints one line each:
/// `refused NAME (ERRNO)` or `allowed NAME`, the latter when the call did anything
/// but refuse (it succeeded, or failed for another reason, which shows the filter let
/// it through). Exit status 0.
pub(crate) fn probe() -> ! {
    for probe in PROBES {
        // SAFETY: fork(2); the child makes one system call and exits with its errno.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let result = (probe.attempt)();
            let errno = if result < 0 {
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
            } else {
                0
            };
            // SAFETY: _exit(2) in the child.
            unsafe { libc::_exit(errno.min(255)) };
        }
        let mut status = 0;
        // SAFETY: waitpid(2) on the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let line = if pid < 0 {
            format!("unknown {} (cannot fork)", probe.name)
        } else if libc::WIFEXITED(status) && refusal(libc::WEXITSTATUS(status)) {
            let errno = libc::WEXITSTATUS(status);
            let name = if errno == libc::ENOSYS {
                "ENOSYS"
            } else if errno == libc::EACCES {
                "EACCES"
            } else {
                "EPERM"
            };
            format!("refused {} ({name})", probe.name)
        } else if libc::WIFSIGNALED(status) {
            format!(
                "refused {} (killed by signal {})",
                probe.name,
                libc::WTERMSIG(status)
            )
        } else {
            format!("allowed {}", probe.name)
        };
        println!("{line}");
    }
    std::process::exit(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_build_and_cover_x32() {
        let [eperm, enosys] = programs().unwrap();
        assert!(
            eperm.len() > REFUSED.len() * 2,
            "a rule per number and twin"
        );
        assert!(!enosys.is_empty());
        assert_eq!(
            numbers(libc::SYS_unshare).len(),
            if cfg!(target_arch = "x86_64") { 2 } else { 1 }
        );
    }

    /// A program started under the filter cannot make namespaces, while it can still
    /// fork and run others.
    #[test]
    fn a_filtered_process_cannot_make_namespaces_but_can_fork() {
        use std::os::unix::process::CommandExt;
        let built = programs().unwrap();
        let script = "unshare -U true 2>/dev/null && echo user-made || echo user-refused; \
                      unshare -m true 2>/dev/null && echo mount-made || echo mount-refused; \
                      /bin/true && echo forked";
        let mut command = std::process::Command::new("/bin/sh");
        command.arg("-c").arg(script);
        // SAFETY: the closure only makes system calls (prctl, seccomp).
        unsafe {
            command.pre_exec(move || install_on_this_thread(&built));
        }
        let output = command.output().unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        assert_eq!(said, "user-refused\nmount-refused\nforked\n");
    }
}

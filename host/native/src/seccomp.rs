//! Docker's default system-call profile, for jails: what runc loads into every Docker
//! container, built here as classic BPF and handed to `bwrap --add-seccomp-fd`, which
//! loads it just before it executes the agent. The agent stacks sandlot's own filter
//! on top, as it does on every engine; the kernel answers with the strictest of the
//! two.
//!
//! The profile is an allowlist. It is written out here for a process with no
//! capabilities (a sandbox has none), from moby's `profiles/seccomp/default.json`
//! ([`PROFILE`]): every call its rules allow without a capability, the calls it allows
//! only with some arguments (`personality`, `clone` without namespace flags, `socket`
//! of any family but `AF_VSOCK`), and `clone3` answered with `ENOSYS` so that the C
//! library falls back to `clone`, whose flags a filter can read. Everything else is
//! refused with `EPERM`, as Docker refuses it. It is stricter than that profile in
//! three ways: only x86_64's own calls are let through (Docker also lets 32-bit and
//! x32 calls through to the same rules; here a 32-bit call kills the process and an
//! x32 call is refused); io_uring is refused, as newer Docker and containerd refuse it;
//! and the calls a capability would unlock are refused even where the kernel would
//! give that capability inside a user namespace.

#![allow(unsafe_code)] // memfd_create(2), fcntl(2)
// Elsewhere only the descriptors-less stub below is built.
#![cfg_attr(not(target_arch = "x86_64"), allow(unused_imports, dead_code))]

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::io::{self, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// The profile this is written from.
pub const PROFILE: &str = "moby 00f3d189e420 profiles/seccomp/default.json";

/// Whether the profile is written out for this machine's architecture (x86_64 only,
/// so far; elsewhere a jail has the agent's filter alone and says so).
pub(crate) const WRITTEN_OUT: bool = cfg!(target_arch = "x86_64");

/// Calls the profile allows whatever their arguments, to a process with no capability.
#[cfg(target_arch = "x86_64")]
const ALLOWED: &[libc::c_long] = &[
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_access,
    libc::SYS_adjtimex,
    libc::SYS_alarm,
    libc::SYS_arch_prctl,
    libc::SYS_bind,
    libc::SYS_brk,
    libc::SYS_capget,
    libc::SYS_capset,
    libc::SYS_chdir,
    libc::SYS_chmod,
    libc::SYS_chown,
    libc::SYS_clock_adjtime,
    libc::SYS_clock_getres,
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_connect,
    libc::SYS_copy_file_range,
    libc::SYS_creat,
    libc::SYS_dup,
    libc::SYS_dup2,
    libc::SYS_dup3,
    libc::SYS_epoll_create,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_ctl_old,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_wait_old,
    libc::SYS_eventfd,
    libc::SYS_eventfd2,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_fadvise64,
    libc::SYS_fallocate,
    libc::SYS_fanotify_mark,
    libc::SYS_fchdir,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_fcntl,
    libc::SYS_fdatasync,
    libc::SYS_fgetxattr,
    libc::SYS_flistxattr,
    libc::SYS_flock,
    libc::SYS_fork,
    libc::SYS_fremovexattr,
    libc::SYS_fsetxattr,
    libc::SYS_fstat,
    libc::SYS_fstatfs,
    libc::SYS_fsync,
    libc::SYS_ftruncate,
    libc::SYS_futex,
    libc::SYS_futex_waitv,
    libc::SYS_futimesat,
    libc::SYS_get_robust_list,
    libc::SYS_get_thread_area,
    libc::SYS_getcpu,
    libc::SYS_getcwd,
    libc::SYS_getdents,
    libc::SYS_getdents64,
    libc::SYS_getegid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getgroups,
    libc::SYS_getitimer,
    libc::SYS_getpeername,
    libc::SYS_getpgid,
    libc::SYS_getpgrp,
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_getpriority,
    libc::SYS_getrandom,
    libc::SYS_getresgid,
    libc::SYS_getresuid,
    libc::SYS_getrlimit,
    libc::SYS_getrusage,
    libc::SYS_getsid,
    libc::SYS_getsockname,
    libc::SYS_getsockopt,
    libc::SYS_gettid,
    libc::SYS_gettimeofday,
    libc::SYS_getuid,
    libc::SYS_getxattr,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_init,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_rm_watch,
    libc::SYS_io_cancel,
    libc::SYS_io_destroy,
    libc::SYS_io_getevents,
    libc::SYS_io_setup,
    libc::SYS_io_submit,
    libc::SYS_ioctl,
    libc::SYS_ioprio_get,
    libc::SYS_ioprio_set,
    libc::SYS_kill,
    libc::SYS_landlock_add_rule,
    libc::SYS_landlock_create_ruleset,
    libc::SYS_landlock_restrict_self,
    libc::SYS_lchown,
    libc::SYS_lgetxattr,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_listen,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_lremovexattr,
    libc::SYS_lseek,
    libc::SYS_lsetxattr,
    libc::SYS_lstat,
    libc::SYS_madvise,
    libc::SYS_membarrier,
    libc::SYS_memfd_create,
    libc::SYS_memfd_secret,
    libc::SYS_mincore,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_mlock,
    libc::SYS_mlock2,
    libc::SYS_mlockall,
    libc::SYS_mmap,
    libc::SYS_modify_ldt,
    libc::SYS_mprotect,
    libc::SYS_mq_getsetattr,
    libc::SYS_mq_notify,
    libc::SYS_mq_open,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_unlink,
    libc::SYS_mremap,
    libc::SYS_msgctl,
    libc::SYS_msgget,
    libc::SYS_msgrcv,
    libc::SYS_msgsnd,
    libc::SYS_msync,
    libc::SYS_munlock,
    libc::SYS_munlockall,
    libc::SYS_munmap,
    libc::SYS_name_to_handle_at,
    libc::SYS_nanosleep,
    libc::SYS_newfstatat,
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_pause,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_send_signal,
    libc::SYS_pipe,
    libc::SYS_pipe2,
    libc::SYS_pkey_alloc,
    libc::SYS_pkey_free,
    libc::SYS_pkey_mprotect,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_prctl,
    libc::SYS_pread64,
    libc::SYS_preadv,
    libc::SYS_preadv2,
    libc::SYS_prlimit64,
    libc::SYS_process_mrelease,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pselect6,
    libc::SYS_ptrace,
    libc::SYS_pwrite64,
    libc::SYS_pwritev,
    libc::SYS_pwritev2,
    libc::SYS_read,
    libc::SYS_readahead,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_readv,
    libc::SYS_recvfrom,
    libc::SYS_recvmmsg,
    libc::SYS_recvmsg,
    libc::SYS_remap_file_pages,
    libc::SYS_removexattr,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_restart_syscall,
    libc::SYS_rmdir,
    libc::SYS_rseq,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigpending,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigsuspend,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_getattr,
    libc::SYS_sched_getparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_rr_get_interval,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setattr,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_yield,
    libc::SYS_seccomp,
    libc::SYS_select,
    libc::SYS_semctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_sendfile,
    libc::SYS_sendmmsg,
    libc::SYS_sendmsg,
    libc::SYS_sendto,
    libc::SYS_set_robust_list,
    libc::SYS_set_thread_area,
    libc::SYS_set_tid_address,
    libc::SYS_setfsgid,
    libc::SYS_setfsuid,
    libc::SYS_setgid,
    libc::SYS_setgroups,
    libc::SYS_setitimer,
    libc::SYS_setpgid,
    libc::SYS_setpriority,
    libc::SYS_setregid,
    libc::SYS_setresgid,
    libc::SYS_setresuid,
    libc::SYS_setreuid,
    libc::SYS_setrlimit,
    libc::SYS_setsid,
    libc::SYS_setsockopt,
    libc::SYS_setuid,
    libc::SYS_setxattr,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_shmget,
    libc::SYS_shutdown,
    libc::SYS_sigaltstack,
    libc::SYS_signalfd,
    libc::SYS_signalfd4,
    libc::SYS_socketpair,
    libc::SYS_splice,
    libc::SYS_stat,
    libc::SYS_statfs,
    libc::SYS_statx,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_sync,
    libc::SYS_sync_file_range,
    libc::SYS_syncfs,
    libc::SYS_sysinfo,
    libc::SYS_tee,
    libc::SYS_tgkill,
    libc::SYS_time,
    libc::SYS_timer_create,
    libc::SYS_timer_delete,
    libc::SYS_timer_getoverrun,
    libc::SYS_timer_gettime,
    libc::SYS_timer_settime,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_gettime,
    libc::SYS_timerfd_settime,
    libc::SYS_times,
    libc::SYS_tkill,
    libc::SYS_truncate,
    libc::SYS_umask,
    libc::SYS_uname,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_utime,
    libc::SYS_utimensat,
    libc::SYS_utimes,
    libc::SYS_vfork,
    libc::SYS_vmsplice,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_write,
    libc::SYS_writev,
    // io_pgetevents, which the libc crate does not name on x86_64.
    333,
];

/// The `personality` values the profile allows: Linux, Linux32, `UNAME26` with each,
/// and the query. `ADDR_NO_RANDOMIZE`, `READ_IMPLIES_EXEC` and the rest are refused.
const PERSONALITIES: &[u64] = &[0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// The `clone` flags that make namespaces (`CLONE_NEWNS`, `CLONE_NEWCGROUP`,
/// `CLONE_NEWUTS`, `CLONE_NEWIPC`, `CLONE_NEWUSER`, `CLONE_NEWPID`, `CLONE_NEWNET`): a
/// `clone` with none of them is allowed, as Docker allows it without `CAP_SYS_ADMIN`.
const NAMESPACE_FLAGS: u64 = 0x7E02_0000;

#[cfg(target_arch = "x86_64")]
const ARCH: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;

#[cfg(target_arch = "x86_64")]
/// The two programs, in the order they are loaded: the allowlist, then `clone3`'s
/// `ENOSYS` (loaded last, its errno is the one a refused `clone3` sees).
fn programs() -> Result<[BpfProgram; 2], seccompiler::BackendError> {
    let mut allowed: BTreeMap<i64, Vec<SeccompRule>> =
        ALLOWED.iter().map(|n| (*n, Vec::new())).collect();
    let personality = PERSONALITIES
        .iter()
        .map(|value| {
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                *value,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    allowed.insert(libc::SYS_personality, personality);
    allowed.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_VSOCK as u64,
        )?])?],
    );
    allowed.insert(
        libc::SYS_clone,
        vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(NAMESPACE_FLAGS),
            0,
        )?])?],
    );
    let allowlist = SeccompFilter::new(
        allowed,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        ARCH,
    )?;
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    )?;
    Ok([allowlist.try_into()?, clone3.try_into()?])
}

/// The programs as the kernel reads them (`struct sock_filter` arrays), built once.
#[cfg(target_arch = "x86_64")]
fn compiled() -> io::Result<&'static [Vec<u8>]> {
    static COMPILED: OnceLock<Result<Vec<Vec<u8>>, String>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let programs = programs().map_err(|e| e.to_string())?;
            Ok(programs
                .iter()
                .map(|program| {
                    program
                        .iter()
                        .flat_map(|i| {
                            let mut bytes = Vec::with_capacity(8);
                            bytes.extend_from_slice(&i.code.to_ne_bytes());
                            bytes.push(i.jt);
                            bytes.push(i.jf);
                            bytes.extend_from_slice(&i.k.to_ne_bytes());
                            bytes
                        })
                        .collect()
                })
                .collect())
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| io::Error::other(format!("cannot build the seccomp profile: {e}")))
}

/// None where the profile is not written out.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn descriptors() -> io::Result<Vec<OwnedFd>> {
    Ok(Vec::new())
}

/// One descriptor per program, each an in-memory file at offset 0 with a number above
/// the standard streams', for `bwrap --add-seccomp-fd`.
#[cfg(target_arch = "x86_64")]
pub(crate) fn descriptors() -> io::Result<Vec<OwnedFd>> {
    compiled()?
        .iter()
        .map(|program| {
            // SAFETY: a constant NUL-terminated name and flags; the result is checked.
            let fd = unsafe { libc::memfd_create(c"sandlot-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: just made, ours alone.
            let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            file.write_all(program)?;
            file.rewind()?;
            let fd = OwnedFd::from(file);
            if fd.as_raw_fd() > 2 {
                return Ok(fd);
            }
            // A host with a standard stream closed: move it out of their way.
            // SAFETY: F_DUPFD_CLOEXEC on an open descriptor; the result is checked.
            let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
            if moved < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: just made, ours alone.
            Ok(unsafe { OwnedFd::from_raw_fd(moved) })
        })
        .collect()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn the_profile_builds_and_fits_the_kernels_limit() {
        let programs = programs().unwrap();
        // BPF_MAXINSNS: the kernel refuses a longer program.
        assert!(
            programs[0].len() < 4096,
            "{} instructions",
            programs[0].len()
        );
        assert!(ALLOWED.contains(&libc::SYS_read) && ALLOWED.contains(&libc::SYS_execve));
        for refused in [
            libc::SYS_unshare,
            libc::SYS_mount,
            libc::SYS_keyctl,
            libc::SYS_bpf,
            libc::SYS_userfaultfd,
            libc::SYS_io_uring_setup,
            libc::SYS_init_module,
            libc::SYS_open_by_handle_at,
            libc::SYS_chroot,
        ] {
            assert!(!ALLOWED.contains(&refused), "{refused} is allowed");
        }
        let descriptors = descriptors().unwrap();
        assert_eq!(descriptors.len(), 2);
        let size = std::fs::File::from(descriptors.into_iter().next().unwrap())
            .metadata()
            .unwrap()
            .len();
        assert_eq!(size as usize, programs[0].len() * 8);
    }
}

//! The capabilities an engine may hand the agent to set a sandbox up, given up for
//! good before any code runs.
//!
//! Docker, Podman and Kubernetes start the agent with none. The native backend's jail
//! (bubblewrap, unprivileged) can only offer the relay's ports below 1024 through
//! `CAP_NET_BIND_SERVICE` in the sandbox's own user namespace, as an ambient
//! capability that every child would inherit: the agent binds its listeners, then
//! drops everything here, on its only thread, so that no command it starts has any.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Gives up every capability of this thread if an engine handed it any as ambient
/// ones (what an unprivileged jail can hand over): ambient, effective, permitted and
/// inheritable sets are cleared. Capabilities that are not ambient (a root sandbox's,
/// under a permissive policy) are the policy's business and stay. Call it before any
/// other thread starts: capabilities are per thread, and a thread started earlier
/// keeps its own.
pub(crate) fn drop_handed() -> io::Result<()> {
    if ambient()? == 0 {
        return Ok(());
    }
    // SAFETY: prctl with integer arguments only.
    let cleared = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    if cleared != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data::default(); 2];
    // SAFETY: capset reads one header and two data words, both valid for the call.
    let set = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// This thread's ambient set, from `/proc/thread-self/status` (every engine mounts
/// a `/proc` of the sandbox's own).
fn ambient() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapAmb:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .ok_or_else(|| io::Error::other("no CapAmb line in /proc/thread-self/status"))
}

/// Sets the limits the host put in the agent's environment, soft and hard, so no
/// command can raise them: the processes of the sandbox's user
/// ([`sandlot_agent::PROCESS_LIMIT_VARIABLE`], `RLIMIT_NPROC`) and the memory of each
/// process ([`sandlot_agent::MEMORY_LIMIT_VARIABLE`], `RLIMIT_DATA`). Set here, after
/// the jail made the sandbox's user namespace, the kernel counts that namespace's
/// processes against `RLIMIT_NPROC`; set before, it would count every process of the
/// host user.
pub(crate) fn limit_from_environment() -> io::Result<()> {
    limit(sandlot_agent::PROCESS_LIMIT_VARIABLE, libc::RLIMIT_NPROC)?;
    limit(sandlot_agent::MEMORY_LIMIT_VARIABLE, libc::RLIMIT_DATA)
}

/// The type of setrlimit(2)'s first argument, which glibc and musl spell differently.
#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

/// Sets `resource` to the number in `variable`, if the host set it.
fn limit(variable: &str, resource: Resource) -> io::Result<()> {
    let Some(value) = std::env::var_os(variable) else {
        return Ok(());
    };
    std::env::remove_var(variable);
    let limit: libc::rlim_t = value.to_str().and_then(|v| v.parse().ok()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{variable} is not a number: {value:?}"),
        )
    })?;
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit(2) reads the struct it is given.
    if unsafe { libc::setrlimit(resource, &rlimit) } != 0 {
        return Err(io::Error::other(format!(
            "cannot set the limit {variable} asks for: {}",
            io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A set of this thread, from `/proc/thread-self/status`.
    fn set(name: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    }

    #[test]
    fn capabilities_that_are_not_ambient_stay() {
        // On a thread of its own: the test harness's other threads keep theirs.
        std::thread::spawn(|| {
            let before = set("CapEff:");
            assert_eq!(set("CapAmb:"), 0, "a test runner with ambient capabilities");
            super::drop_handed().unwrap();
            assert_eq!(set("CapEff:"), before);
        })
        .join()
        .unwrap();
    }
}

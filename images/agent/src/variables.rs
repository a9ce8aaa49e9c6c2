//! The environment variables the two ends agree on: those the host sets to confine
//! what the agent runs, and the one that tells code in the sandbox where its tools
//! are. Named here so that the side that sets one and the side that reads it share it.

/// The environment variable that tells code in the sandbox where its run's tool
/// endpoint is: the path of a Unix socket, or `@NAME` for an abstract one (where no
/// directory could be written). Set only while a run with tools goes on.
pub const TOOLS_VARIABLE: &str = "SANDLOT_TOOLS";

/// The environment variable that, set to `unconfined` in the agent's environment,
/// turns off the system-call filter it installs on everything it runs (see the
/// agent's `seccomp` module); any other value, or none, leaves it on.
pub const SECCOMP_VARIABLE: &str = "SANDLOT_SECCOMP";

/// The environment variable that, set to a number in the agent's environment, limits
/// the processes (and threads) of the sandbox's user to it: `RLIMIT_NPROC`, which the
/// agent sets on itself inside the sandbox's user namespace, so that it counts that
/// sandbox alone. For a host that has no cgroup to do it (the native backend without
/// cgroups); an engine's pids cgroup does it everywhere else.
pub const PROCESS_LIMIT_VARIABLE: &str = "SANDLOT_PROCESS_LIMIT";

/// The environment variable that, set to a number of bytes in the agent's
/// environment, limits the memory of each process in the sandbox to it:
/// `RLIMIT_DATA` (the heap and every private writable mapping, so reserved address
/// space such as V8's or the JVM's does not count until it is used), which every
/// process inherits from the agent. A per-process cap, for a host with no memory
/// cgroup (the native backend without cgroups); a cgroup caps the sandbox as a whole
/// everywhere else.
pub const MEMORY_LIMIT_VARIABLE: &str = "SANDLOT_MEMORY_LIMIT";

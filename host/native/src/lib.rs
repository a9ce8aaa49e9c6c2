//! The `native` backend: sandboxes without a container engine. Each is a tree of
//! processes in fresh Linux namespaces (user, mount, PID, network, IPC, UTS, cgroup),
//! jailed by [bubblewrap](https://github.com/containers/bubblewrap), over a read-only
//! root filesystem unpacked from the same recipe tarball Docker and Podman import,
//! with the same agent as process 1 speaking the same protocol over a socket pair
//! ([`sandlot_container`] does everything inside, as for the engines).
//!
//! - **No daemon**: opening a sandbox forks `bwrap`; nothing runs between sessions.
//! - **Users**: as root, each sandbox runs as a host uid of its own from a range no
//!   system hands out, never as root; not as root, as the calling user (where the
//!   kernel allows unprivileged user namespaces).
//! - **Limits**: memory, processes and CPU through cgroup v1, as root or as a user root
//!   delegated a cgroup to; elsewhere rlimits the agent sets ([`jail::Rlimits`]):
//!   processes through `RLIMIT_NPROC` (set inside the sandbox's user namespace, so it
//!   counts that sandbox alone) and the memory of each process through `RLIMIT_DATA`;
//!   the CPU limit is said to be unenforced ([`Backend::unenforced`]), and since no
//!   rlimit caps the sandbox's memory as a whole, [`Capability::MemoryLimit`] is not
//!   offered.
//! - **System calls**: Docker's default seccomp profile, loaded by bwrap before the
//!   agent starts, and the agent's own filter over it, as on every engine.
//! - **Network**: a network namespace of its own, always; `off` has only loopback,
//!   every other mode reaches out through the host's egress proxy
//!   ([`sandlot_container::proxy`]), which installs open and close.
//! - **Lifetime**: the jail dies with the thread that started it and with its agent;
//!   [`NativeBackend::gc`] removes what a killed host left (cgroups, host directories).
//!
//! Root filesystems are unpacked with [`NativeBackend::build_image`] (`sandlot images
//! build --engine native`).

mod backend;
mod cgroup;
mod dir;
pub mod jail;
mod provider;
pub mod rootfs;
mod sandbox;
mod seccomp;
mod spawn;

pub use backend::{NativeBackend, SandboxInfo};
pub use dir::default_dir;
pub use jail::Bwrap;
pub use provider::NativeProvider;
pub use rootfs::{Rootfs, RootfsStore};

"""The settings of llm-sandbox's local backends (bubblewrap, nsjail, Windows MXC).

``SandboxSession(backend="bubblewrap", sandbox_config=LocalSandboxConfig(...))`` (or
``"nsjail"``) runs on sandlot's native backend, which applies the network mode, the
memory limit, the output cap and the environment, and warns about the rest; Windows
MXC has no counterpart (``UnsupportedBackendError`` says what to use instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The syscalls llm-sandbox's seccomp denylist blocks; sandlot's containers run under
# the engine's default seccomp profile, which blocks these and more.
DEFAULT_BLOCKED_SYSCALLS: tuple[str, ...] = (
    "ptrace", "mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "bpf",
    "perf_event_open", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "acct", "add_key", "request_key",
    "keyctl", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "process_vm_readv", "process_vm_writev",
    "iopl", "ioperm",
)  # fmt: skip


@dataclass(frozen=True)
class SeccompPolicy:
    blocked_syscalls: tuple[str, ...] = DEFAULT_BLOCKED_SYSCALLS


@dataclass
class LocalSandboxConfig:
    network: str = "none"
    read_only_paths: tuple[str, ...] = ("/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives")
    seccomp: SeccompPolicy = field(default_factory=SeccompPolicy)
    python_executable: str = "/usr/bin/python3"
    env: dict[str, str] = field(default_factory=dict)
    max_output_bytes: int = 8 << 20
    max_artifact_bytes: int = 8 << 20
    memory_limit_bytes: int | None = None
    cpu_time_limit: int | None = None
    file_size_limit: int | None = None
    open_files_limit: int | None = None


@dataclass
class WindowsMxcConfig(LocalSandboxConfig):
    deny_paths: tuple[str, ...] = ()


__all__ = ["DEFAULT_BLOCKED_SYSCALLS", "LocalSandboxConfig", "SeccompPolicy", "WindowsMxcConfig"]

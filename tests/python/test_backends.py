"""The native API on the container backends (Docker, Podman, Kubernetes, and the
native backend's bubblewrap jails): what the conformance suite asks of every backend,
seen from Python, and closing a session removes its sandbox."""

import glob
import os
import shutil
import subprocess
import tempfile

import pytest

import sandlot

BACKENDS = ["docker", "podman", "kubernetes", "native"]


def sandbox_exists(backend, name):
    """Whether the engine or cluster still has the sandbox called `name` (for native:
    whether its host directory, which lives as long as its jail, is still there)."""
    if backend == "native":
        sandbox_id = name.removeprefix("sandlot-")
        return bool(glob.glob(os.path.join(tempfile.gettempdir(), f"sandlot-native-*-{sandbox_id}-*")))
    if backend == "kubernetes":
        kubectl = os.environ.get("K8S_LOCAL_KUBECTL") or shutil.which("kubectl")
        out = subprocess.run(
            [kubectl, "get", "pods", "--all-namespaces", "-o", "name"],
            capture_output=True, text=True, check=True,
        ).stdout
        return any(line.endswith("/" + name) for line in out.splitlines())
    out = subprocess.run(
        [backend, "ps", "-a", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True,
    ).stdout
    return name in out.split()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_container_session_runs_keeps_state_moves_files_and_leaves_nothing(host, backend):
    with host.session("python", backend=backend) as session:
        assert session.backend == backend
        name = session.sandbox_name
        assert name and sandbox_exists(backend, name)
        session.run("x = 6 * 7")
        run = session.run("print(x)\n_ = open('output/answer.txt', 'w').write(str(x))")
        assert (run.stdout, run.exit_code, run.backend) == ("42\n", 0, backend)
        assert [(f.path, f.bytes) for f in run.files] == [("answer.txt", b"42")]
        failed = session.run("import sys\nsys.exit(4)")
        assert failed.exit_code == 4
        shell = session.shell("echo from-the-shell && ls output")
        assert shell.stdout == "from-the-shell\nanswer.txt\n"
        session.write_file("in.txt", b"bytes in")
        assert session.read_file("in.txt") == b"bytes in"
        timed_out = session.run("import time\ntime.sleep(30)", timeout=1)
        assert timed_out.timed_out and timed_out.exit_code == 124
    assert session.closed
    assert not sandbox_exists(backend, name)


def test_pooled_docker_sessions_never_share_a_sandbox_and_close_leaves_none():
    with sandlot.Sandlot(pools={"docker": {"min_idle": 1, "max_size": 2}}) as host:
        names = []
        for _ in range(3):
            with host.session("python", backend="docker") as session:
                session.run("x = 1")
                names.append(session.sandbox_name)
        assert len(set(names)) == 3
        stats = host.pool_stats("docker")
        assert stats["in_use"] == 0 and stats["created"] >= 3
        held = stats["ready_sandboxes"] + names
    assert not [name for name in held if sandbox_exists("docker", name)]


def test_wasm_has_no_shell_and_says_where_to_go(host):
    with host.session("python", backend="wasm") as session:
        with pytest.raises(sandlot.UnsupportedError, match="container backend"):
            session.shell("ls")

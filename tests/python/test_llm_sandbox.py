"""sandlot.llm_sandbox against llm-sandbox 0.3.46's documented behaviour: the drop-in
checklist of /work/shared/notes/llm-sandbox-0.3.46-api.md (what its own examples and
tests rely on is kept; its known defects are fixed), on wasm where the behaviour does
not depend on the backend and on Docker (llm-sandbox's default) where it does."""

import base64
import json
import subprocess
import warnings

import pytest

from sandlot.llm_sandbox import (
    ArtifactSandboxSession,
    ConsoleOutput,
    ExecutionResult,
    FileType,
    InteractiveSandboxSession,
    PlotOutput,
    SandboxSession,
    SecurityIssueSeverity,
    SecurityPattern,
    SecurityPolicy,
    create_session,
)
from sandlot.llm_sandbox.exceptions import (
    ContainerError,
    LanguageNotSupportedError,
    LanguageNotSupportPlotError,
    LibraryInstallationNotSupportedError,
    NotOpenSessionError,
    PoolExhaustedError,
    SandboxTimeoutError,
    SecurityError,
    SecurityViolationError,
    UnsupportedBackendError,
    ValidationError,
)
from sandlot.llm_sandbox.interactive import InteractiveSettings
from sandlot.llm_sandbox.local import LocalSandboxConfig
from sandlot.llm_sandbox.pool import (
    ArtifactPooledSandboxSession,
    ExhaustionStrategy,
    PoolConfig,
    create_pool_manager,
)
from sandlot.llm_sandbox.security import RestrictedModule

PLOT = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.show()
"""


def containers_named(prefix):
    out = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True)
    return [name for name in out.stdout.split() if name.startswith(prefix)]


# ---- results ---------------------------------------------------------------------------


def test_results_keep_llm_sandbox_field_order_repr_and_json_keys():
    out = ConsoleOutput(0, "warn", "hi")
    assert repr(out) == "ConsoleOutput(exit_code=0, stderr='warn', stdout='hi')"
    assert json.loads(out.to_json()) == {"exit_code": 0, "stderr": "warn", "stdout": "hi"}
    assert out.success() and not ConsoleOutput(exit_code=3).success()
    with pytest.warns(DeprecationWarning):
        assert out.text() == "hi"
    plot = PlotOutput(FileType.PNG, base64.b64encode(b"png").decode())
    result = ExecutionResult(0, "", "x", [plot])
    assert "plots" not in json.loads(result.to_json())
    # llm-sandbox raised TypeError here.
    assert json.loads(result.to_json(include_plots=True))["plots"][0]["format"] == "png"


# ---- sessions on wasm ------------------------------------------------------------------


def test_a_session_runs_each_program_fresh_and_returns_non_zero_exits():
    with SandboxSession("wasm", lang="python") as session:
        assert session.container.id
        first = session.run("x = 1\nprint('Hello from LLM Sandbox!')")
        assert (first.exit_code, first.stdout, first.stderr) == (0, "Hello from LLM Sandbox!\n", "")
        # Each run is its own program, as in llm-sandbox: no banner, no state.
        assert session.run("print('x' in globals())").stdout == "False\n"
        assert session.run("import sys\nsys.exit(7)").exit_code == 7
        crashed = session.run("raise ValueError('boom')")
        assert crashed.exit_code == 1 and "ValueError: boom" in crashed.stderr
        assert crashed.execution.backend == "wasm"


def test_streaming_callbacks_see_the_output_and_the_exit_code_survives():
    seen = []
    with create_session(backend="wasm", lang="python") as session:
        out = session.run("print('a')\nimport sys\nsys.exit(3)", on_stdout=seen.append, on_stderr=seen.append)
    assert "".join(seen) == "a\n" and out.exit_code == 3


def test_a_timeout_raises_with_its_duration_and_kills_the_program():
    with SandboxSession(backend="wasm", lang="python", default_timeout=30) as session:
        with pytest.raises(SandboxTimeoutError) as caught:
            session.run("import time\ntime.sleep(1.5)\nopen('output/late.txt', 'w').write('x')", timeout=0.5)
        assert caught.value.timeout_duration == 0.5
        # The session goes on, and the killed program never wrote its file.
        later = session.run("import os, time\ntime.sleep(1.5)\nprint(os.path.exists('output/late.txt'))")
        assert later.stdout == "False\n"


def test_files_move_with_llm_sandbox_copy_semantics(tmp_path):
    source = tmp_path / "input"
    (source / "deep").mkdir(parents=True)
    (source / "a.txt").write_text("A")
    (source / "deep" / "b.txt").write_text("B")
    (tmp_path / "empty.txt").write_bytes(b"")
    with SandboxSession(backend="wasm", lang="python") as session:
        session.copy_to_runtime(str(source), "/sandbox/input")
        session.copy_to_runtime(str(source / "a.txt"), "/sandbox/renamed.txt")
        session.copy_to_runtime(str(tmp_path / "empty.txt"), "/sandbox/empty.txt")
        listing = session.run(
            "import os\nprint(sorted(os.listdir('input')), open('input/deep/b.txt').read(), open('renamed.txt').read())\n"
            "os.makedirs('output/sub', exist_ok=True)\nopen('output/sub/c.txt', 'w').write('C')"
        )
        assert listing.stdout == "['a.txt', 'deep'] B A\n"
        session.copy_from_runtime("/sandbox/output", str(tmp_path / "back"))
        assert (tmp_path / "back" / "output" / "sub" / "c.txt").read_text() == "C"
        # llm-sandbox refused empty files here.
        session.copy_from_runtime("/sandbox/empty.txt", str(tmp_path / "empty-back.txt"))
        assert (tmp_path / "empty-back.txt").read_bytes() == b""
        with pytest.raises(FileNotFoundError):
            session.copy_to_runtime(str(tmp_path / "missing"), "/sandbox/x")
        with pytest.raises(FileNotFoundError):
            session.copy_from_runtime("/sandbox/missing.txt", str(tmp_path / "m"))
        with pytest.raises(SecurityError):
            session.copy_to_runtime(str(source / "a.txt"), "/sandbox/../etc/passwd")
        with pytest.raises(ValidationError):
            session.copy_to_runtime(str(source / "a.txt"), "/etc/passwd")


def test_container_id_attaches_to_an_open_session_and_an_unknown_one_raises():
    with SandboxSession(backend="wasm", lang="python") as owner:
        owner.run("open('shared.txt', 'w').write('from the owner')")
        with SandboxSession(backend="wasm", lang="python", container_id=owner.container.id) as attached:
            assert attached.run("print(open('shared.txt').read())").stdout == "from the owner\n"
        # Closing the attached session leaves the owner's sandbox alone.
        assert owner.run("print(1)").stdout == "1\n"
    with pytest.raises(ContainerError):
        SandboxSession(backend="wasm", lang="python", container_id="no-such-container").open()


def test_security_policies_are_checked_like_llm_sandbox_and_enforced():
    policy = SecurityPolicy(
        severity_threshold=SecurityIssueSeverity.MEDIUM,
        patterns=[SecurityPattern(r"\bos\.system\s*\(", "System command execution", SecurityIssueSeverity.HIGH)],
        restricted_modules=[RestrictedModule("subprocess", "Process spawning", SecurityIssueSeverity.HIGH)],
    )
    session = SandboxSession(backend="wasm", lang="python", security_policy=policy)
    # Works before open(), as llm-sandbox's examples use it.
    assert session.is_safe("print('hello')") == (True, [])
    safe, violations = session.is_safe("import subprocess")
    assert not safe and violations[0].description == "Process spawning"
    assert session.is_safe("# os.system('ls') is only a comment\nprint(1)")[0]
    # A '#' inside a string no longer hides the rest of the line (llm-sandbox's bypass).
    assert not session.is_safe("print('#'); import os; os.system('ls')")[0]
    session.is_safe("import subprocess")
    assert len(policy.patterns) == 1  # checking does not grow the policy
    with session:
        with pytest.raises(SecurityViolationError):
            session.run("import subprocess\nsubprocess.run(['ls'])")
        with pytest.raises(SecurityViolationError):
            session.run("print(1)", libraries=["subprocess"])
        assert session.run("print('fine')").stdout == "fine\n"
    # Below the threshold a violation is listed but not blocking, as in llm-sandbox.
    lenient = SecurityPolicy(patterns=[SecurityPattern(r"print", "printing", SecurityIssueSeverity.LOW)])
    assert SandboxSession(backend="wasm", security_policy=lenient).is_safe("print(1)")[0]


def test_bad_input_gets_llm_sandbox_exceptions_that_say_what_was_wrong():
    with pytest.raises(UnsupportedBackendError, match="wsl2-bubblewrap.*native"):
        SandboxSession(backend="wsl2-bubblewrap")
    with pytest.raises(TypeError, match="Unknown native sandbox options: some_future_option"):
        SandboxSession(backend="bubblewrap", some_future_option=1)
    with pytest.raises(ValidationError, match="network='bridge'"):
        SandboxSession(backend="nsjail", sandbox_config=LocalSandboxConfig(network="bridge"))
    with pytest.raises(UnsupportedBackendError):
        SandboxSession(backend="no such backend")
    with pytest.raises(LanguageNotSupportedError):
        SandboxSession(backend="wasm", lang="cobol").open()
    with pytest.raises(ValidationError, match="dockerfile"):
        SandboxSession(backend="wasm", dockerfile="Dockerfile")
    with pytest.raises(ValidationError):
        SandboxSession(backend="wasm", image="x", dockerfile="Dockerfile")
    with pytest.raises(NotOpenSessionError):
        SandboxSession(backend="wasm").run("print(1)")
    with SandboxSession(backend="wasm") as session:
        with pytest.raises(TypeError):
            session.run(b"print(1)")
        with pytest.raises(ValidationError, match="package name"):
            session.run("print(1)", libraries=["numpy; rm -rf /"])
    with pytest.raises(NotOpenSessionError):
        session.run("print(1)")
    with pytest.raises(LibraryInstallationNotSupportedError):
        SandboxSession(backend="docker", lang="java").install(["guava"])
    with pytest.raises(LanguageNotSupportPlotError):
        ArtifactSandboxSession(backend="wasm", lang="javascript")
    with pytest.raises(LanguageNotSupportedError):
        InteractiveSandboxSession(backend="wasm", lang="ruby")


def test_arguments_without_a_counterpart_warn_instead_of_vanishing():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = SandboxSession(
            backend="wasm",
            lang="python",
            commit_container=True,
            mounts=["/host:/data"],
            runtime_configs={"mem_limit": "256m", "pids_limit": 64, "ulimits": []},
            some_future_option=1,
        )
    said = " ".join(str(w.message) for w in caught)
    for name in ("commit_container", "mounts", "ulimits", "some_future_option"):
        assert name in said
    assert "pids_limit" not in said and "mem_limit" not in said
    assert session._options == {"memory": 256 << 20, "policy": {"pids_limit": 64}}


def test_plots_accumulate_until_cleared_as_in_llm_sandbox():
    with ArtifactSandboxSession(backend="wasm", lang="python") as session:
        counts = [len(session.run(PLOT).plots)]
        counts.append(len(session.run(PLOT).plots))
        counts.append(len(session.run(PLOT, clear_plots=True).plots))
        session.clear_plots()
        counts.append(len(session.run("print('no plot')").plots))
        result = session.run(PLOT)
        counts.append(len(result.plots))
    assert counts == [1, 2, 1, 0, 1]
    plot = result.plots[0]
    assert plot.format is FileType.PNG and base64.b64decode(plot.content_base64).startswith(b"\x89PNG")
    # No "Python plot detection setup complete" banner.
    assert "setup complete" not in result.stdout


def test_an_interactive_session_keeps_state_and_honours_its_settings():
    settings = InteractiveSettings(timeout=0.5, history_size=2)
    with InteractiveSandboxSession(backend="wasm", lang="python", interactive_settings=settings) as session:
        session.run("value = 21 * 2")
        result = session.run("print(f'Result: {value}')")
        assert (result.stdout, result.exit_code) == ("Result: 42\n", 0)
        assert session.run("1 / 0").exit_code == 1
        assert session.history == ["print(f'Result: {value}')", "1 / 0"]
        with pytest.raises(SandboxTimeoutError):
            session.run("import time\ntime.sleep(5)")


# ---- llm-sandbox's local backends, on sandlot's native backend -------------------------


def test_bubblewrap_and_nsjail_sessions_run_in_native_jails_with_their_config():
    config = LocalSandboxConfig(memory_limit_bytes=128 << 20, max_output_bytes=1000, env={"GREETING": "hi"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = SandboxSession(backend="bubblewrap", lang="python", sandbox_config=config)
    assert [str(w.message) for w in caught] == []
    assert session.config.default_timeout == 60.0  # llm-sandbox's local backends' default
    with session:
        assert session.container.backend == "bubblewrap"
        result = session.run(
            "import os, socket\nprint(os.environ['GREETING'], os.getuid() != 0)\n"
            "socket.create_connection(('1.1.1.1', 53), timeout=2)"
        )
        assert result.stdout == "hi True\n"
        assert result.exit_code != 0 and "Error" in result.stderr  # network="none": no way out
        flood = session.run("print('x' * 5000)")
        assert 0 < len(flood.stdout) <= 1000  # max_output_bytes
        bomb = session.run("b = b'x' * (512 << 20)\nprint('allocated')")
        assert "allocated" not in bomb.stdout and bomb.exit_code != 0
        assert session.session.backend == "native"
    with pytest.warns(UserWarning, match="cpu_time_limit"):
        session = SandboxSession(
            backend="nsjail", lang="javascript", sandbox_config=LocalSandboxConfig(cpu_time_limit=5)
        )
    with session:
        assert session.run("console.log(6 * 7)").stdout == "42\n"
    with InteractiveSandboxSession(backend="bubblewrap", lang="python") as session:
        session.run("value = 21 * 2")
        assert session.run("print(value)").stdout == "42\n"


# ---- the llm-sandbox README's examples, on Docker (its default backend) ----------------


def test_readme_quick_start_and_languages_on_docker():
    with SandboxSession(lang="python") as session:
        result = session.run('print("Hello from LLM Sandbox!")\nprint("I\'m running in a secure container.")')
        assert result.stdout == "Hello from LLM Sandbox!\nI'm running in a secure container.\n"
        assert session.container.id in containers_named("sandlot-")
        numpy = session.run(
            "import numpy as np\narr = np.array([1, 2, 3, 4, 5])\nprint(f'Mean: {np.mean(arr)}')", libraries=["numpy"]
        )
        assert numpy.stdout == "Mean: 3.0\n"
    assert session.container.id not in containers_named("sandlot-")
    programs = {
        "java": ('public class HelloWorld { public static void main(String[] a) '
                 '{ System.out.println("Hello from Java!"); } }'),
        "cpp": '#include <iostream>\nint main() { std::cout << "Hello from C++!" << std::endl; return 0; }',
        "go": 'package main\nimport "fmt"\nfunc main() { fmt.Println("Hello from Go!") }',
        "javascript": 'console.log("Hello from Node.js!")',
    }
    for lang, code in programs.items():
        with SandboxSession(lang=lang) as session:
            assert session.run(code).stdout.startswith("Hello from"), lang


def test_readme_files_commands_and_runtime_configs_on_docker(tmp_path):
    script = tmp_path / "test.py"
    script.write_text("open('/workspace/output.txt', 'w').write('written by test.py')\nprint('ran')")
    runtime = {"network_mode": "none", "mem_limit": "512m", "pids_limit": 128, "security_opt": ["no-new-privileges:true"]}
    with SandboxSession(lang="python", keep_template=True, runtime_configs=runtime) as session:
        session.copy_to_runtime(str(script), "/sandbox/test.py")
        result = session.execute_command("python3 test.py")
        assert (result.exit_code, result.stdout) == (0, "ran\n")
        session.copy_from_runtime("/sandbox/output.txt", str(tmp_path / "output.txt"))
        assert (tmp_path / "output.txt").read_text() == "written by test.py"
        assert session.execute_commands(["true", "exit 5", "echo never"]).exit_code == 5
        limited = session.run("print(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read().strip())")
        assert limited.stdout.strip() == str(512 << 20)


def test_readme_images_the_engine_lacks_say_so():
    with pytest.raises(Exception) as caught:
        SandboxSession(image="python:3.9.19-bullseye", keep_template=True, lang="python").open()
    assert "python:3.9.19-bullseye" in str(caught.value)


def test_readme_docker_client_is_honoured():
    docker = pytest.importorskip("docker")
    client = docker.DockerClient(base_url="unix:///var/run/docker.sock")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SandboxSession(client=client, lang="python") as session:
            assert session.run("print('Hello, World!')").stdout == "Hello, World!\n"
            assert client.containers.get(session.container.id).status == "running"


def test_readme_podman_and_kubernetes_sessions():
    with SandboxSession(backend="podman", lang="python") as session:
        assert session.run("print('Hello from Podman!')").stdout == "Hello from Podman!\n"
    with pytest.warns(UserWarning, match="pod_manifest"):
        session = SandboxSession(backend="kubernetes", lang="python", pod_manifest={"kind": "Pod"})
    with session:
        assert session.run("print('Hello from Kubernetes!')").stdout == "Hello from Kubernetes!\n"


def test_readme_artifacts_on_docker():
    with ArtifactSandboxSession(lang="python") as session:
        result = session.run(
            "import matplotlib.pyplot as plt\nimport numpy as np\nx = np.linspace(0, 10, 100)\n"
            "plt.plot(x, np.sin(x))\nplt.title('Sine Wave')\nplt.show()",
            libraries=["matplotlib", "numpy"],
        )
        assert len(result.plots) == 1 and result.plots[0].format is FileType.PNG
    with ArtifactSandboxSession(lang="r") as session:
        result = session.run('hist(rnorm(100), main = "Distribution of X", col = "lightblue")')
        assert result.exit_code == 0 and len(result.plots) == 1


def test_readme_interactive_session_installs_with_pip_magic():
    with InteractiveSandboxSession(lang="python", kernel_type="ipython", history_size=200) as session:
        session.run("value = 21 * 2")
        assert session.run("print(f'Result: {value}')").stdout == "Result: 42\n"
        session.run("%pip install pandas")
        frame = session.run("import pandas as pd; print(pd.DataFrame({'A': [1, 2, 3]}).shape)")
        assert frame.stdout == "(3, 1)\n"


# ---- pools -----------------------------------------------------------------------------


def test_readme_pools_serve_threads_and_never_share_a_sandbox():
    from concurrent.futures import ThreadPoolExecutor

    pool = create_pool_manager(backend="docker", config=PoolConfig(max_pool_size=3, min_pool_size=1), lang="python")
    try:
        stats = pool.get_stats()
        assert set(stats) == {"total_size", "max_size", "min_size", "state_counts", "closed"}
        assert set(stats["state_counts"]) == {"initializing", "idle", "busy", "unhealthy", "removing"}
        assert (stats["max_size"], stats["min_size"], stats["closed"]) == (3, 1, False)
        with SandboxSession(lang="python", pool=pool) as first:
            first.run("open('secret.txt', 'w').write('first borrower')")
            first_id = first.container.id
        with SandboxSession(lang="python", pool=pool) as second:
            assert second.container.id != first_id
            assert second.run("import os\nprint(os.path.exists('secret.txt'))").stdout == "False\n"

        def run_code(task_id):
            with SandboxSession(lang="python", pool=pool) as session:
                return session.run(f'print("Task {task_id}")').stdout

        with ThreadPoolExecutor(max_workers=6) as executor:
            assert list(executor.map(run_code, range(8))) == [f"Task {i}\n" for i in range(8)]
        with ArtifactPooledSandboxSession(pool_manager=pool, enable_plotting=True) as session:
            assert len(session.run(PLOT).plots) == 1
        held = [first_id, second.container.id, *pool._host.pool_stats("docker")["ready_sandboxes"]]
    finally:
        pool.close()
    assert pool.get_stats()["closed"]
    assert not set(held) & set(containers_named(""))


def test_a_fail_fast_pool_raises_pool_exhausted():
    config = PoolConfig(max_pool_size=1, exhaustion_strategy=ExhaustionStrategy.FAIL_FAST, enable_prewarming=False)
    with create_pool_manager(backend="docker", config=config, lang="python") as pool:
        held = pool.acquire()
        try:
            with pytest.raises(PoolExhaustedError):
                SandboxSession(lang="python", pool=pool).open()
        finally:
            pool.release(held)
        with SandboxSession(lang="python", pool=pool) as session:
            assert session.run("print(1)").stdout == "1\n"

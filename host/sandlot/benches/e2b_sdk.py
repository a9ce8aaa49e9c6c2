"""Times E2B's Python SDK against `sandlot serve --e2b`: `Sandbox.create()` +
`run_code("print(1)")` + `kill()`, on wasm and on a pooled Docker, as an agent
written against E2B would see it (HTTP on loopback included).

    python host/sandlot/benches/e2b_sdk.py SANDLOT_BINARY [ROUNDS]

Run it with the E2B SDK's Python (`tests/run.sh` makes /var/tmp/sandlot-ci/e2b-venv)
and a release build of the binary (`cargo build --release -p sandlot-cli`). Prints
the minimum, median and maximum of each backend over ROUNDS (default 30) after 3
rounds of warm-up, and the Docker/wasm ratio of the medians.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

KEY = "e2b_0123456789abcdef0123456789abcdef"


def serve(binary, config):
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--e2b", "127.0.0.1:0", "--config", config],
        env={**os.environ, "SANDLOT_API_TOKENS": f"bench:{KEY}"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in server.stderr:
        if "E2B's protocol on http://" in line:
            url = next(w for w in line.split() if w.startswith("http://"))
            return server, url
    raise SystemExit("sandlot serve ended before it listened")


def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "sandlot.toml")
        with open(config, "w") as f:
            f.write("[pool.docker]\nmin_idle = 2\nmax_size = 4\n")
        server, url = serve(binary, config)
        os.environ.update(E2B_API_KEY=KEY, E2B_API_URL=url, E2B_SANDBOX_URL=url)
        from e2b_code_interpreter import Sandbox

        medians = {}
        try:
            for template in ("python@wasm", "python@docker"):
                times = []
                for round in range(3 + rounds):
                    started = time.perf_counter()
                    sandbox = Sandbox.create(template=template)
                    ran = sandbox.run_code("print(1)")
                    sandbox.kill()
                    took = time.perf_counter() - started
                    assert ran.logs.stdout == ["1\n"], ran
                    if round >= 3:
                        times.append(took * 1000)
                    if template.endswith("docker"):
                        # The pool refills in the background; a sandbox made while
                        # it is empty is a cold one, which is not what this measures.
                        time.sleep(1.0)
                medians[template] = statistics.median(times)
                print(
                    f"{template}: create + run_code(print(1)) + kill: "
                    f"min {min(times):.1f} ms, median {medians[template]:.1f} ms, "
                    f"max {max(times):.1f} ms ({rounds} rounds)"
                )
            print(f"docker/wasm: {medians['python@docker'] / medians['python@wasm']:.1f}x")
        finally:
            server.terminate()
            server.wait(timeout=60)


if __name__ == "__main__":
    main()

"""Capture the plots a program shows."""

import base64
import os
import tempfile
from pathlib import Path

import sandlot
from sandlot.llm_sandbox import ArtifactSandboxSession

BACKEND = os.environ.get("SANDLOT_EXAMPLE_BACKEND", "docker")
SINE = """
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 10, 100)
plt.plot(x, np.sin(x))
plt.title("Sine Wave")
plt.show()
"""


def native(folder: Path) -> None:
    with sandlot.Sandlot().session("python", backend=BACKEND) as session:
        run = session.run(SINE)
        for plot in run.plots:
            print(f"{plot.name}: {plot.mime}, {plot.size} bytes ->", plot.save(folder))


def llm_sandbox_api(folder: Path) -> None:
    with ArtifactSandboxSession(backend=BACKEND, lang="python") as session:
        result = session.run(SINE)
        print(f"Generated {len(result.plots)} plots")
        for i, plot in enumerate(result.plots):
            path = folder / f"plot_{i + 1}.{plot.format.value}"
            path.write_bytes(base64.b64decode(plot.content_base64))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        native(Path(tmp))
        llm_sandbox_api(Path(tmp))

"""What the Python test scripts (mcp_client.py, playground_browser.py) share: one line
per check, and a non-zero exit at the first that fails."""

import sys


def check(what, condition, detail=""):
    if not condition:
        print(f"FAILED: {what}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)

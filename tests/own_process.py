"""Code run in a Python process of its own: what an interpreter's start and exit do."""

from __future__ import annotations

import os
import subprocess
import sys


def python_without_url(code: str) -> subprocess.CompletedProcess:
    """`python -c CODE` with EMQ_URL empty (so `connect` takes no server from the
    environment), its output captured as text; killed after 60 s."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "EMQ_URL": ""},
    )


def stop(proc: subprocess.Popen) -> None:
    """End a server process this test started: SIGTERM, then SIGKILL after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()

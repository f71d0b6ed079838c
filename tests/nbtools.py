"""Helpers to build, execute and nbval-check throwaway notebooks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def execute(path: Path, env: dict | None = None) -> nbformat.NotebookNode:
    """Run a notebook in place (outputs stored), as a person's "Run all" would."""
    nb = nbformat.read(path, 4)
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    nbformat.write(nb, path)
    return nb


def nbval(path: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pytest --nbval PATH` in a subprocess, outside the project's own pytest config."""
    return _pytest_nbval([path], path.parent, path.parent, list(extra), env or {}, timeout=300)


ROOT = Path(__file__).resolve().parent.parent


def runbooks(paths: list[Path], scratch: Path, env: dict) -> subprocess.CompletedProcess:
    """The shipped runbooks under nbval with the project's sanitize file, from a scratch
    pytest.ini (so the project's own addopts do not apply), with `env` added."""
    sanitize = ["--nbval-sanitize-with", str(ROOT / "notebooks" / "demos" / "sanitize.cfg")]
    return _pytest_nbval(paths, scratch, ROOT, sanitize, env, timeout=600)


def _pytest_nbval(
    paths: list[Path], scratch: Path, rootdir: Path, extra: list[str], env: dict, *, timeout: float
) -> subprocess.CompletedProcess:
    """`pytest --nbval EXTRA PATHS` in a subprocess with `env` added, from an empty
    pytest.ini written in `scratch`, so the project's own config does not apply."""
    ini = scratch / "pytest.ini"
    ini.write_text("[pytest]\n")

    def once() -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--nbval",
                "-p",
                "no:cacheprovider",
                "-q",
                "-c",
                str(ini),
                "--rootdir",
                str(rootdir),
                *extra,
                *map(str, paths),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **env},
        )

    run = once()
    # a kernel that never started (every cell an error at setup, no cell run: seen once
    # in a loaded full run, 3 errors in 4 s) is started again once; a cell's own
    # failure is a "failed", never retried
    if re.search(r"^\d+ errors? in ", run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""):
        run = once()
    return run

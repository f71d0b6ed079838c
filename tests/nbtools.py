"""Helpers to build, execute and nbval-check throwaway notebooks."""

from __future__ import annotations

import os
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
    ini = path.parent / "pytest.ini"
    ini.write_text("[pytest]\n")
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
            str(path.parent),
            *extra,
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


ROOT = Path(__file__).resolve().parent.parent


def runbooks(paths: list[Path], scratch: Path, env: dict) -> subprocess.CompletedProcess:
    """The shipped runbooks under nbval with the project's sanitize file, from a scratch
    pytest.ini (so the project's own addopts do not apply), with `env` added."""
    ini = scratch / "pytest.ini"
    ini.write_text("[pytest]\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ini),
            "--rootdir",
            str(ROOT),
            "--nbval-sanitize-with",
            str(ROOT / "notebooks" / "demos" / "sanitize.cfg"),
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )

"""The shipped demos (`notebooks/demos/`): once more against a real Valkey (the
default run of `pytest` already checks them on the embedded default), and the
Binder config followed as repo2docker would, in a fresh venv, outside the repo."""

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
from nbtools import runbooks

import emq_notebook as emq

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks" / "demos").glob("*.ipynb"))


def test_the_demos_are_shipped():
    assert [p.stem for p in NOTEBOOKS] == [
        "00-quickstart",
        "01-pause-and-drain",
        "02-dead-letters",
        "03-progress-and-logs",
        "04-retire-a-queue",
        "05-grouped-lanes",
        "06-health-at-a-glance",
        "dashboard",
    ]


def test_the_demos_run_on_a_real_valkey(valkey, tmp_path):
    # an empty real server: a demo stops on a queue of its name that no demo made
    emq.connect(f"redis://127.0.0.1:{valkey.port}/0").client.flushall()
    run = runbooks(NOTEBOOKS, tmp_path, {"EMQ_URL": f"redis://127.0.0.1:{valkey.port}/0"})
    assert run.returncode == 0, run.stdout[-4000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_the_binder_link_opens_a_shipped_demo():
    from documentation import ALL as readme

    path = readme.split("?urlpath=lab/tree/", 1)[1].split(")", 1)[0]
    assert path == "notebooks/demos/00-quickstart.ipynb" and (ROOT / path).is_file()


def test_the_pytest_config_collects_the_demos_and_not_the_runbooks():
    import tomllib

    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "notebooks/demos" in ini["testpaths"] and "notebooks" not in ini["testpaths"]
    assert "notebooks/demos/sanitize.cfg" in ini["addopts"]
    assert (ROOT / "notebooks" / "demos" / "sanitize.cfg").is_file()


@pytest.mark.binder
def test_binder_config_in_a_fresh_venv(tmp_path):
    # the repository as a clone sees it (tracked files only), outside this tree
    repo = tmp_path / "repo"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, repo / f)
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}:{os.environ['PATH']}", "EMQ_URL": ""}
    env.pop("PYTHONPATH", None)

    def sh(*cmd, cwd=repo):
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, f"{cmd}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
        return out.stdout

    # repo2docker's order: its base environment (a kernel), binder/requirements.txt, postBuild
    sh(str(py), "-m", "pip", "install", "-q", "ipykernel", "nbclient", "nbformat")
    sh(str(py), "-m", "pip", "install", "-q", "-r", "binder/requirements.txt")
    assert "emq_notebook ready" in sh("bash", "binder/postBuild")
    where = sh(
        str(py),
        "-c",
        "import emq_notebook, emq_notebook.scripts as s; print(emq_notebook.__file__); print(s.lua_dir())",
        cwd=tmp_path,
    )
    assert str(env_dir) in where and "site-packages/emq_notebook/lua" in where
    run = sh(
        str(py),
        "-c",
        (
            "import nbformat, sys; from nbclient import NotebookClient\n"
            "nb = nbformat.read('notebooks/demos/00-quickstart.ipynb', 4)\n"
            "NotebookClient(nb, timeout=300, kernel_name='python3',"
            " resources={'metadata': {'path': 'notebooks/demos'}}).execute()\n"
            "print('quickstart ran', len(nb.cells), 'cells')"
        ),
    )
    assert "quickstart ran" in run

"""docs/monitoring.md (the README's "Monitoring") runs as written: its exporter block,
its check and its cron line against a real Valkey, and its Prometheus configuration
and promtool commands with Debian's Prometheus (skipped outside CI without it, as
tests/test_monitor.py's TestPrometheus is)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import emq_notebook as emq
from emq_notebook import jobs, local_valkey

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "monitoring.md").read_text()
BLOCKS = [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", DOC, re.M | re.S)]
BASH = [body for lang, body in BLOCKS if lang == "bash"]
PLAIN = [body for lang, body in BLOCKS if not lang]
YAML = next(body for lang, body in BLOCKS if lang == "yaml")


def shell_env(url: str) -> dict[str, str]:
    """This interpreter's `emq` first on PATH, this checkout's package, `EMQ_URL` set."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PATH": path, "PYTHONPATH": pythonpath, "EMQ_URL": url}


@pytest.fixture
def staged(valkey) -> str:
    """The page's server: mail failing (2 of 2 failed, 2 dead); reports 3 of 7 failed
    (not failing), its 3 dead left."""
    url = f"redis://127.0.0.1:{valkey.port}/0"
    conn = emq.connect(url)
    conn.client.flushall()
    for q, failed, completed in (("mail", 2, 0), ("reports", 3, 4)):
        for _ in range(failed + completed):
            jobs.enqueue(conn, q, "{}", max_attempts=1)
        for i in range(failed + completed):
            got = jobs.claim(conn, q, 60_000)
            if i < failed:
                jobs.fail(conn, q, got.id, "SMTP 550")
            else:
                jobs.complete(conn, q, got.id)
    return url


def test_the_exporter_block_runs_as_written(staged):
    block = BASH[0]
    # the page's port, made one nobody else here listens on
    script = block.replace("9808", str(local_valkey.free_port()))
    expected = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    run = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=120, env=shell_env(staged)
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == expected
    assert run.stderr.splitlines()[-1] == "emq exporter: stopped"


def test_the_check_runs_as_written_from_a_shell_and_from_cron(staged):
    lines = [line for line in BASH[2].splitlines() if line.strip()]
    assert [line.split("  #", 1)[0] for line in lines] == ["emq check --dead-above 2", "echo $?"]
    said, code = (line.split("  # ", 1)[1] for line in lines)
    env = shell_env(staged)
    run = subprocess.run(
        ["bash", "-c", lines[0].split("  #")[0]], capture_output=True, text=True, timeout=120, env=env
    )
    assert (run.returncode, run.stdout.splitlines()[0]) == (int(code), said)
    # the whole answer, as the page prints it
    shown = next(block for block in PLAIN if block.startswith("EMQ CRITICAL"))
    assert run.stdout == shown
    # the cron line: the check's lines when it is not OK, nothing when it is
    cron = next(block for block in PLAIN if "/etc/cron.d/emq-check" in block)
    entry = next(line for line in cron.splitlines() if line.startswith("*/5"))
    command = re.split(r"\s+", entry, maxsplit=6)[6]
    failing = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120, env=env)
    assert failing.stdout.splitlines()[0] == "EMQ CRITICAL - 1 problem in 1 of 2 queues (1 critical): mail"
    conn = emq.connect(staged)
    conn.client.flushall()
    jobs.enqueue(conn, "calm", "{}", delay_ms=3_600_000)
    quiet = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120, env=env)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


PROMTOOL = Path("/usr/bin/promtool")


@pytest.fixture
def promtool():
    if not PROMTOOL.exists():
        if os.environ.get("CI"):
            raise RuntimeError("CI needs /usr/bin/promtool for the monitoring page (.ci/run installs it)")
        pytest.skip("no /usr/bin/promtool: apt-get install -y prometheus")
    return str(PROMTOOL)


def test_the_prometheus_configuration_and_promtool_commands_run_as_written(promtool, tmp_path):
    # the page's rule file, where this checkout holds it
    config = tmp_path / "prometheus.yml"
    config.write_text(
        YAML.replace("/etc/prometheus/emq-alerts.yml", str(ROOT / "deploy/prometheus/emq-alerts.yml"))
    )
    checked = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout
    commands = BASH[1]
    assert commands.count("promtool") == 2
    env = {**os.environ, "PATH": os.pathsep.join([str(PROMTOOL.parent), os.environ.get("PATH", "")])}
    run = subprocess.run(
        ["bash", "-ec", commands], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_readme_links_the_page():
    assert "[Monitoring](docs/monitoring.md)" in (ROOT / "README.md").read_text()
    assert shutil.which("bash") is not None

"""The monitor against a real Prometheus: the shipped alert rules pass `promtool check
rules` and `promtool test rules`, and a Prometheus server (Debian's `prometheus`
package) scraping the exporter every second finds the queues' counts and raises the
alert of a failing queue.

Needs /usr/bin/prometheus and /usr/bin/promtool (`apt-get install -y prometheus`;
.ci/run installs it). Outside CI a machine without them skips this file with that
line; in CI it fails. The Prometheus started here listens on 127.0.0.1 (a free port),
keeps its data in the test's temporary directory, runs under `timeout` (it stops by
itself) and is stopped by its pid.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emq_notebook import frames, jobs, local_valkey, monitor

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
RULES = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
# the longest a Prometheus started here lives (seconds): it stops by itself after it
LIFETIME_S = 300
# the longest a test waits for Prometheus to start, scrape or evaluate (seconds)
WAIT_S = 90.0

if not (PROMETHEUS.exists() and PROMTOOL.exists()):
    if os.environ.get("CI"):
        raise RuntimeError(
            "CI needs /usr/bin/prometheus and promtool for the monitor test (.ci/run installs it)"
        )
    pytest.skip("no /usr/bin/prometheus: apt-get install -y prometheus", allow_module_level=True)


def promtool(*args: str) -> subprocess.CompletedProcess:
    """`promtool ARGS` in deploy/prometheus, its output as text."""
    return subprocess.run([str(PROMTOOL), *args], cwd=RULES, capture_output=True, text=True, timeout=60)


def test_the_shipped_rules_pass_promtool_check_and_test():
    checked = promtool("check", "rules", "emq-alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout
    tested = promtool("test", "rules", "emq-alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


class Prometheus:
    """A Prometheus server of this test: `query(expr)` asks its HTTP API."""

    def __init__(self, port: int, process: subprocess.Popen, log: Path):
        self.url = f"http://127.0.0.1:{port}"
        self.process, self.log = process, log

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return json.loads(reply.read())

    def query(self, expr: str) -> list[dict]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def until(self, expr: str, holds: Any, what: str) -> list[dict]:
        """The result of `expr` once `holds(result)`; fails after `WAIT_S`."""
        deadline = time.monotonic() + WAIT_S
        result: list[dict] = []
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"Prometheus exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
            result = self.query(expr)
            if holds(result):
                return result
            time.sleep(0.5)
        pytest.fail(f"{what}: {expr} answered {result} after {WAIT_S:g} s")


@pytest.fixture
def prometheus(tmp_path) -> Iterator[Any]:
    """`start(target)`: a Prometheus scraping `target` (host:port) every second in a job
    named `emq`, evaluating the shipped rules every second."""
    started: list[Prometheus] = []

    def start(target: str) -> Prometheus:
        port = local_valkey.free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {RULES / 'emq-alerts.yml'}\n"
            f"scrape_configs:\n  - job_name: emq\n    static_configs:\n      - targets: ['{target}']\n"
        )
        log = tmp_path / "prometheus.log"
        process = subprocess.Popen(
            [
                "timeout",
                str(LIFETIME_S),
                str(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.console.templates=/dev/null",
                "--web.console.libraries=/dev/null",
            ],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        server = Prometheus(port, process, log)
        started.append(server)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"Prometheus exited {process.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as reply:
                    if reply.status == 200:
                        return server
            except OSError:
                pass
            time.sleep(0.3)
        pytest.fail(f"Prometheus not ready after {WAIT_S:g} s: {log.read_text()[-2000:]}")

    yield start
    for server in started:
        server.process.terminate()  # `timeout` hands the signal on to Prometheus
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=30)


def test_prometheus_scrapes_the_counts_and_raises_a_failing_queues_alert(conn, prometheus):
    # mail: three failed, none completed (failing), 3 dead; fine: one job due in an hour
    for _ in range(3):
        jobs.enqueue(conn, "mail", "{}", max_attempts=1)
        jobs.fail(conn, "mail", jobs.claim(conn, "mail", 60_000).id, "SMTP 550")
    jobs.enqueue(conn, "fine", "{}", delay_ms=3_600_000)
    dead = int(frames.counts(conn).loc["mail", "dead"])
    assert dead == 3
    with monitor.serve(conn, "127.0.0.1", 0) as exporter:
        server = prometheus(f"127.0.0.1:{exporter.port}")
        found = server.until(
            'emq_jobs{queue="mail",state="dead"}', lambda r: len(r) == 1, "the dead count of mail"
        )
        assert float(found[0]["value"][1]) == dead
        assert found[0]["metric"]["job"] == "emq"
        assert float(server.query('emq_jobs{queue="fine",state="schedule"}')[0]["value"][1]) == 1
        assert float(server.query("emq_up")[0]["value"][1]) == 1
        alert = server.until(
            'ALERTS{alertname="EmqQueueFailing",queue="mail"}',
            lambda r: len(r) == 1 and r[0]["metric"]["alertstate"] in ("pending", "firing"),
            "the failing alert of mail",
        )
        assert alert[0]["metric"]["severity"] == "critical"
        # and no alert for the queue that is fine
        assert server.query('ALERTS{queue="fine",alertname=~"EmqQueue.*"}') == []

"""The panels in a real browser: JupyterLab (headless, 127.0.0.1, a token) on a
small notebook, a real Valkey through EMQ_URL, Debian's Chromium driven by
Playwright. Clicks Pause / Resume in the QueuePanel and Reprocess in the
DeadLetterPanel (and there its filter, Preview and Reprocess previewed), and checks
each through a separate redis client.

Needs /usr/bin/chromium (`apt-get install -y chromium`; .ci/run installs it).
Outside CI a machine without it skips this file with that line; in CI it fails.
Screenshots go to a temporary folder, or to docs/ with EMQ_SAVE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import redis

import emq_notebook as emq
from emq_notebook import jobs
from nbtools import notebook

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
Q = "browser"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]

if not CHROMIUM.exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs /usr/bin/chromium for the browser test (.ci/run installs it)")
    pytest.skip("no /usr/bin/chromium: apt-get install -y chromium", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, what: str, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


@pytest.fixture
def url(valkey):
    client = redis.Redis(port=valkey.port, decode_responses=True)
    client.flushall()
    return f"redis://127.0.0.1:{valkey.port}/0"


@pytest.fixture
def lab(tmp_path, url):
    """JupyterLab on 127.0.0.1 with a token and a private HOME; stopped by its pid."""
    home, work = tmp_path / "home", tmp_path / "work"
    settings = home / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    work.mkdir()
    # no news toast over the panels
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "HOME": str(home), "EMQ_URL": url,
           "JUPYTERLAB_SETTINGS_DIR": str(home / "lab-settings"),
           "JUPYTER_CONFIG_DIR": str(home / ".jupyter")}
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def up():
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False
    try:
        wait_for(up, "JupyterLab to answer", 60)
        yield base, token, work
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run_all(page) -> None:
    """Run > Run All Cells, once the kernel is idle (retried: it is not ready at once)."""
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    for attempt in range(3):
        time.sleep(1.5)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            page.get_by_role("button", name="Pause").wait_for(timeout=30_000)
            return
        except Exception:
            if attempt == 2:
                raise


def test_the_panels_clicked_in_jupyterlab_reach_valkey(lab, url):
    from playwright.sync_api import sync_playwright

    base, token, work = lab
    conn = emq.connect(url)
    spy = redis.Redis.from_url(url, decode_responses=True)      # a separate client
    for i in range(3):
        jobs.enqueue(conn, Q, json.dumps({"to": f"user{i}@example.com"}), id=f"j_{i}")
    jobs.enqueue(conn, Q, '{"to": "bad address"}', id="j_bad", max_attempts=1, priority=0)
    spy.zadd(f"emq:{{{Q}}}:pending", {"j_bad": -1})            # served first
    assert jobs.claim(conn, Q, 60_000)[0] == "j_bad"
    jobs.fail(conn, Q, "j_bad", "SMTP 550: mailbox unavailable")
    assert spy.zscore(f"emq:{{{Q}}}:dead", "j_bad") is not None

    notebook(work / "panels.ipynb", "%load_ext emq_notebook\n%emq connect",
             f"emq_notebook.widgets.QueuePanel(emq_notebook.current(), {Q!r})",
             f"emq_notebook.widgets.DeadLetterPanel(emq_notebook.current(), {Q!r})")
    nb = json.loads((work / "panels.ipynb").read_text())
    nb["cells"][0]["source"] = "import emq_notebook\n" + "".join(nb["cells"][0]["source"])
    (work / "panels.ipynb").write_text(json.dumps(nb))

    shots = ROOT / "docs" if os.environ.get("EMQ_SAVE_SCREENSHOTS") else work
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1400})
            page.goto(f"{base}/lab/tree/panels.ipynb?reset&token={token}")
            run_all(page)
            panels = page.locator(".jp-OutputArea-output .widget-vbox")

            page.get_by_role("button", name="Pause").click()
            wait_for(lambda: spy.hget(f"emq:{{{Q}}}:meta", "paused") == "1", "the paused field")
            page.get_by_role("button", name="Resume").click()
            wait_for(lambda: not spy.hexists(f"emq:{{{Q}}}:meta", "paused"), "the paused field to go")
            page.get_by_text("resumed browser").wait_for()

            dead = page.locator(".widget-select-multiple select")
            dead.select_option(value=dead.locator("option").first.get_attribute("value"))
            shots.mkdir(exist_ok=True)
            panels.nth(1).screenshot(path=str(shots / "dead-letter-panel.png"))
            page.get_by_role("button", name="Reprocess selected").click()
            wait_for(lambda: spy.zscore(f"emq:{{{Q}}}:pending", "j_bad") is not None,
                     "j_bad to move to pending")
            assert spy.zscore(f"emq:{{{Q}}}:dead", "j_bad") is None
            assert spy.hget(f"emq:{{{Q}}}:job:j_bad", "failures") == "1"
            page.get_by_text("1 reprocessed").wait_for()

            # triage: a second dead job, found by the filter, previewed, reprocessed
            jobs.enqueue(conn, Q, '{"to": "nobody"}', id="j_bad2", max_attempts=1)
            spy.zadd(f"emq:{{{Q}}}:pending", {"j_bad2": -1})
            assert jobs.claim(conn, Q, 60_000)[0] == "j_bad2"
            jobs.fail(conn, Q, "j_bad2", "SMTP 550: mailbox unavailable")
            page.get_by_placeholder("error glob, e.g. SMTP 5*").fill("SMTP 550*")
            page.locator("button.widget-button", has_text=re.compile(r"^\s*Filter\s*$")).click()
            page.locator("button.widget-button", has_text=re.compile(r"^\s*Preview\s*$")).click()
            page.get_by_text("Preview: 1 dead jobs").wait_for()
            page.get_by_role("button", name="Reprocess previewed").click()
            wait_for(lambda: spy.zscore(f"emq:{{{Q}}}:pending", "j_bad2") is not None,
                     "j_bad2 to move to pending")
            assert spy.zscore(f"emq:{{{Q}}}:dead", "j_bad2") is None
            page.get_by_text("reprocess previewed: 1 reprocessed").wait_for()

            page.get_by_role("button", name="Pause").click()            # shown paused
            wait_for(lambda: spy.hexists(f"emq:{{{Q}}}:meta", "paused"), "paused again")
            page.get_by_text("paused browser").wait_for()
            panels.nth(0).screenshot(path=str(shots / "queue-panel.png"))
        finally:
            browser.close()
    for name in ("queue-panel.png", "dead-letter-panel.png"):
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000

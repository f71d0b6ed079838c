"""The panels in a real browser: JupyterLab (headless, 127.0.0.1, a token) on a
small notebook, a real Valkey through EMQ_URL, Debian's Chromium driven by
Playwright. Clicks Pause / Resume in the QueuePanel and Reprocess in the
DeadLetterPanel (and there its filter, Preview and Reprocess previewed), and checks
each through a separate redis client. The dashboard
twice: in JupyterLab (click a queue, filter the dead jobs, select two rows of the
grid, Reprocess) and served by Voilà (the overview's queues and counts, Pause; the
highlight that follows the open queue when a refresh ranks another above it, a
greyed-out button's reason, a typed reason in the audit, a queue gone under it; a
tab killed without its unload step, whose kernel Voilà culls).

Needs /usr/bin/chromium (`apt-get install -y chromium`; .ci/run installs it).
Outside CI a machine without it skips this file with that line; in CI it fails.
Screenshots go to a temporary folder, or to docs/ with EMQ_SAVE_SCREENSHOTS=1.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import redis
from nbtools import notebook
from own_process import stop

import emq_notebook as emq
from emq_notebook import jobs
from emq_notebook.widgets import grid as grids

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
Q = "browser"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

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
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "HOME": str(home),
        "EMQ_URL": url,
        "JUPYTERLAB_SETTINGS_DIR": str(home / "lab-settings"),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
    }
    base = f"http://127.0.0.1:{port}"

    def up():
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    argv = ["jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}"]
    argv += [f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}"]
    with launched(tmp_path / "lab.log", argv, up, "JupyterLab to answer", env=env):
        yield base, token, work


@contextlib.contextmanager
def launched(log: Path, argv: list[str], up, what: str, **popen):
    """`python -m *argv` (its output to `log`) for the block, once `up()` holds; stopped
    by its pid."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", *argv], stdout=out, stderr=subprocess.STDOUT, **popen)
        try:
            wait_for(up, what, 60)
            yield proc
        finally:
            stop(proc)


def run_all(page, ready: str = "Pause") -> None:
    """Run > Run All Cells, once the kernel is idle (retried: it is not ready at once),
    until the button named `ready` shows."""
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    for attempt in range(3):
        time.sleep(1.5)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            page.get_by_role("button", name=ready).first.wait_for(timeout=30_000)
            return
        except Exception:
            if attempt == 2:
                raise


def test_the_panels_clicked_in_jupyterlab_reach_valkey(lab, url):

    base, token, work = lab
    conn = emq.connect(url)
    spy = redis.Redis.from_url(url, decode_responses=True)  # a separate client
    for i in range(3):
        jobs.enqueue(conn, Q, json.dumps({"to": f"user{i}@example.com"}), id=f"j_{i}")
    jobs.enqueue(conn, Q, '{"to": "bad address"}', id="j_bad", max_attempts=1, priority=0)
    spy.zadd(f"emq:{{{Q}}}:pending", {"j_bad": -1})  # served first
    assert jobs.claim(conn, Q, 60_000)[0] == "j_bad"
    jobs.fail(conn, Q, "j_bad", "SMTP 550: mailbox unavailable")
    assert spy.zscore(f"emq:{{{Q}}}:dead", "j_bad") is not None

    notebook(
        work / "panels.ipynb",
        "%load_ext emq_notebook\n%emq connect",
        f"emq_notebook.widgets.QueuePanel(emq_notebook.current(), {Q!r})",
        f"emq_notebook.widgets.DeadLetterPanel(emq_notebook.current(), {Q!r})",
    )
    nb = json.loads((work / "panels.ipynb").read_text())
    nb["cells"][0]["source"] = "import emq_notebook\n" + "".join(nb["cells"][0]["source"])
    (work / "panels.ipynb").write_text(json.dumps(nb))

    shots = ROOT / "docs" if os.environ.get("EMQ_SAVE_SCREENSHOTS") else work
    with chromium_page(1100, 1400) as page:
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
        page.get_by_role("button", name="Reprocess 1 selected").click()  # the count restated
        wait_for(lambda: spy.zscore(f"emq:{{{Q}}}:pending", "j_bad") is not None, "j_bad to move to pending")
        assert spy.zscore(f"emq:{{{Q}}}:dead", "j_bad") is None
        assert spy.hget(f"emq:{{{Q}}}:job:j_bad", "failures") == "1"
        # the status line, and the line beside the bar
        page.get_by_text("reprocess selected: 1 reprocessed").nth(1).wait_for()

        # triage: a second dead job, found by the filter, previewed, reprocessed
        jobs.enqueue(conn, Q, '{"to": "nobody"}', id="j_bad2", max_attempts=1)
        spy.zadd(f"emq:{{{Q}}}:pending", {"j_bad2": -1})
        assert jobs.claim(conn, Q, 60_000)[0] == "j_bad2"
        jobs.fail(conn, Q, "j_bad2", "SMTP 550: mailbox unavailable")
        page.get_by_placeholder("error glob, e.g. SMTP 5*").fill("SMTP 550*")
        page.locator("button.widget-button", has_text=re.compile(r"^\s*Filter\s*$")).click()
        page.locator("button.widget-button", has_text=re.compile(r"^\s*Preview\s*$")).click()
        page.get_by_text("Preview: 1 dead jobs").wait_for()
        page.get_by_role("button", name="Reprocess 1 previewed").click()
        wait_for(
            lambda: spy.zscore(f"emq:{{{Q}}}:pending", "j_bad2") is not None, "j_bad2 to move to pending"
        )
        assert spy.zscore(f"emq:{{{Q}}}:dead", "j_bad2") is None
        page.get_by_text("reprocess previewed: 1 reprocessed").last.wait_for()
        # the result beside its bar: the labelled progress of the bulk action
        bar = panels.nth(1).locator(".widget-hprogress").locator("xpath=..")
        assert "reprocess previewed: 1 reprocessed" in bar.inner_text()
        panels.nth(1).screenshot(path=str(shots / "dead-letter-panel-done.png"))

        page.get_by_role("button", name="Pause").click()  # shown paused
        wait_for(lambda: spy.hexists(f"emq:{{{Q}}}:meta", "paused"), "paused again")
        page.get_by_text("paused browser").wait_for()
        panels.nth(0).screenshot(path=str(shots / "queue-panel.png"))
    for name in ("queue-panel.png", "dead-letter-panel.png"):
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


# -- the dashboard ------------------------------------------------------------------------
HEADER_PX, ROW_PX = 28, 24  # emq_notebook.widgets.grid: a grid's header and row heights


def click_row(page, grid, row: int, *, add: bool = False, x: float = 300) -> None:
    """Click body row `row` of an ipydatagrid (a canvas: by position), Ctrl held to add."""
    box = grid.bounding_box()
    assert box is not None
    if add:
        page.keyboard.down("Control")
    page.mouse.click(box["x"] + x, box["y"] + HEADER_PX + ROW_PX * row + ROW_PX / 2)
    if add:
        page.keyboard.up("Control")


def stage_dead(conn, q: str, spy, errors: list[tuple[str, str]]) -> None:
    """Dead jobs in this order of death: (id, error) each."""
    for job_id, error in errors:
        jobs.enqueue(conn, q, json.dumps({"id": job_id}), id=job_id, max_attempts=1)
        spy.zadd(f"emq:{{{q}}}:pending", {job_id: -1})  # served next
        assert jobs.claim(conn, q, 60_000)[0] == job_id
        jobs.fail(conn, q, job_id, error)


def test_the_dashboard_in_jupyterlab_reprocesses_two_selected_rows(lab, url):

    base, token, work = lab
    conn = emq.connect(url)
    spy = redis.Redis.from_url(url, decode_responses=True)  # a separate client
    smtp = [f"j_smtp_{i}" for i in range(4)]
    dns = [f"j_dns_{i}" for i in range(2)]
    stage_dead(
        conn,
        Q,
        spy,
        [
            (dns[0], "DNS timeout: mx.example.net"),
            *[(j, f"SMTP 550: mailbox unavailable <user{i}>") for i, j in enumerate(smtp)],
            (dns[1], "DNS timeout: mx.example.org"),
        ],
    )
    for i in range(1_234):
        jobs.enqueue(conn, Q, json.dumps({"to": f"user{i}@example.com"}), id=f"j_{i:05d}")
    jobs.enqueue(conn, "reports", "{}", delay_ms=3_600_000)
    emq.admin.pause(conn, "reports")
    notebook(
        work / "dashboard.ipynb",
        "import emq_notebook\n%load_ext emq_notebook\n%emq connect",
        "%emq dashboard",
    )

    shots = ROOT / "docs" if os.environ.get("EMQ_SAVE_SCREENSHOTS") else work
    shots.mkdir(exist_ok=True)
    with chromium_page(1280, 1400) as page:
        page.goto(f"{base}/lab/tree/dashboard.ipynb?reset&token={token}")
        run_all(page, ready="Refresh")
        dashboard = page.locator(".jp-OutputArea-output").last
        grids = dashboard.locator(".ipydatagrid-widget")
        grids.first.wait_for()
        page.get_by_text("2 queues · 1,234 pending · 0 active · 1 schedule · 6 dead · 1 paused").wait_for()
        # JupyterLab's default layout (the file browser open): the verdict, the queue and
        # why are within the output's width, the counts after them
        from emq_notebook.widgets.dashboard import OVERVIEW_WIDTHS

        grid_box, output_box = grids.first.bounding_box(), dashboard.bounding_box()
        why_ends = grid_box["x"] + sum(OVERVIEW_WIDTHS[c] for c in ("verdict", "queue", "why"))
        assert why_ends <= output_box["x"] + output_box["width"], (why_ends, output_box)
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / "dashboard-lab-default.png"))
        # the file browser folded away: the notebook gets the page's width
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").first.click()
        click_overview_row(page, grids.first, 0)  # the first queue: browser
        page.get_by_text(f"queue {Q}", exact=True).wait_for()
        page.get_by_role("tab", name="Jobs", exact=True).click()
        page.get_by_text("rows 1–6 of 6 dead").wait_for()
        page.get_by_placeholder("error glob, e.g. SMTP 5*").fill("SMTP*")
        dashboard.get_by_role("button", name=re.compile(r"^\W*Filter$")).click()
        page.get_by_text("matches 1–4").wait_for()
        jobs_grid = grids.nth(1)
        click_row(page, jobs_grid, 1)
        click_row(page, jobs_grid, 2, add=True)
        page.get_by_text("2 selected", exact=True).wait_for()
        page.wait_for_timeout(500)
        dashboard.screenshot(path=str(shots / "dashboard-jobs.png"))
        dashboard.get_by_role("button", name=re.compile(r"^\W*Reprocess 2 selected$")).click()
        wait_for(
            lambda: all(spy.zscore(f"emq:{{{Q}}}:pending", j) is not None for j in smtp[1:3]),
            "the two selected jobs to move to pending",
        )
        page.get_by_text("2 reprocessed").wait_for()
        assert set(spy.zrange(f"emq:{{{Q}}}:dead", 0, -1)) == {dns[0], smtp[0], smtp[3], dns[1]}
        assert spy.hget(f"emq:{{{Q}}}:job:{smtp[1]}", "failures") == "1"
        page.get_by_role("tab", name="Dead letters", exact=True).click()
        page.get_by_text("4 dead").first.wait_for()
        page.wait_for_timeout(300)
        # docs/ has the 200-queue one, its Reprocess all asking first
        dashboard.screenshot(path=str(work / "dashboard-dead-letters.png"))
        # the Audit tab: the click above is on the record, surface panel
        page.get_by_role("tab", name="Audit", exact=True).click()
        trail = dashboard.locator("table.emq").filter(has_text="surface").last
        trail.wait_for()
        first = trail.locator("tr").nth(1)
        assert [first.locator("td").nth(i).inner_text() for i in (1, 2, 3, 4, 6)] == [
            Q,
            "reprocess",
            "done",
            "2",
            "panel",
        ]
    for png in (
        (shots / "dashboard-jobs.png").read_bytes(),
        (work / "dashboard-dead-letters.png").read_bytes(),
    ):
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


class Served(str):
    """A server's base URL that knows the server's pid."""

    pid: int

    def __new__(cls, base: str, pid: int) -> Served:
        served = super().__new__(cls, base)
        served.pid = pid
        return served


@contextlib.contextmanager
def serve_voila(tmp_path: Path, url: str, notebook_path: str, *options: str):
    """`voila NOTEBOOK` on 127.0.0.1 with EMQ_URL and `options`, a private HOME; stopped
    by its pid."""
    port = free_port()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "EMQ_URL": url, "JUPYTER_CONFIG_DIR": str(home / ".jupyter")}

    def up():
        # the port only: a GET of the page would run the notebook before the test stages
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    argv = ["voila", "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1", *options, notebook_path]
    with launched(tmp_path / "voila.log", argv, up, "Voilà to listen", cwd=ROOT, env=env) as proc:
        yield Served(f"http://127.0.0.1:{port}", proc.pid)


@pytest.fixture
def voila(tmp_path, url):
    """`voila notebooks/demos/dashboard.ipynb` on 127.0.0.1 with EMQ_URL; stopped by its pid."""
    with serve_voila(tmp_path, url, "notebooks/demos/dashboard.ipynb") as served:
        yield served


def test_the_dashboard_served_by_voila_lists_the_queues_and_pauses(voila, url):

    conn = emq.connect(url)
    spy = redis.Redis.from_url(url, decode_responses=True)
    for i in range(1_500):
        jobs.enqueue(conn, "mailers", json.dumps({"to": f"user{i}@example.com"}))
    stage_dead(conn, "mailers", spy, [(f"j_dead_{i}", "SMTP 550: mailbox unavailable") for i in range(3)])
    for i in range(12):
        jobs.enqueue(conn, "reports", json.dumps({"report": i}), group=("acme", "globex")[i % 2])
    jobs.enqueue(conn, "thumbnails", "{}", delay_ms=3_600_000)
    emq.admin.pause(conn, "reports")
    counts = emq.frames.counts(emq.connect(url))  # what the page must say
    shots = voila_shots()  # docs/ has the 200-queue page
    with chromium_page(1280, 1100) as page:
        page.goto(voila, timeout=90_000)
        page.locator(".ipydatagrid-widget").first.wait_for(timeout=90_000)
        total = {c: int(counts[c].sum()) for c in ("pending", "active", "schedule", "dead")}
        page.get_by_text(
            f"3 queues · {total['pending']:,} pending · {total['active']:,} active · "
            f"{total['schedule']:,} schedule · {total['dead']:,} dead · 1 paused"
        ).wait_for()
        picker = page.get_by_placeholder("open queue: type to search")
        names = page.locator("datalist option")
        wait_for(lambda: names.count() == 3, "the picker's three names")
        assert [names.nth(i).get_attribute("value") for i in range(3)] == ["mailers", "reports", "thumbnails"]
        assert emq.frames.counts(conn).equals(counts)  # the page staged nothing here
        for q in ("reports", "thumbnails", "mailers"):  # each queue's counts, as chips
            picker.fill(q)
            page.get_by_text(f"queue {q}", exact=True).wait_for()
            chips = page.locator(".emq-chips").first
            for state in ("pending", "active", "schedule", "dead"):
                n = int(counts.loc[q, state])
                chips.get_by_text(f"{state} {n:,}", exact=True).wait_for()
        page.get_by_role("button", name=re.compile(r"^\W*Pause$")).click()
        wait_for(lambda: spy.hget("emq:{mailers}:meta", "paused") == "1", "mailers to be paused")
        page.get_by_text("paused mailers: claims answer empty").wait_for()
        page.get_by_role("button", name=re.compile(r"^\W*Resume$")).click()
        wait_for(lambda: not spy.hexists("emq:{mailers}:meta", "paused"), "mailers to run again")
        page.get_by_text("resumed mailers").wait_for()
        page.wait_for_timeout(2_500)  # one refresh of the overview
        bottom = page.locator(".jp-OutputArea-output").last.bounding_box()
        assert bottom is not None
        page.screenshot(
            path=str(shots / "dashboard-overview-small.png"),
            clip={"x": 0, "y": 0, "width": 1280, "height": bottom["y"] + bottom["height"] + 16},
        )
        # the page left: its unload asks Voila to shut the kernel down, and it does
        kernel_id = json.loads(page.locator("#jupyter-config-data").text_content())["kernelId"]
        assert kernel_known(voila, kernel_id) and kernel_processes(voila.pid) == 1
        page.goto("about:blank")
        wait_for(lambda: not kernel_known(voila, kernel_id), "the page's kernel to shut down", 15)
        wait_for(lambda: kernel_processes(voila.pid) == 0, "the kernel process to end", 15)
    png = (shots / "dashboard-overview-small.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


@contextlib.contextmanager
def chromium_page(width: int, height: int):
    """A page of Debian's Chromium (headless, driven by Playwright), closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def voila_overview(page, base: str):
    """Open the dashboard Voilà serves at `base`; answer its overview grid, once drawn."""
    page.goto(base, timeout=90_000)
    overview = page.locator(".ipydatagrid-widget").first
    overview.wait_for(timeout=90_000)
    return overview


def highlighted_rows(grid, rows: int, x: float, row_px: int = grids.ROW_PX) -> list[int]:
    """The body rows of a grid (a canvas) drawn with the selection's tint: the pixel at
    `x` of each row, in a column drawn white unless selected, read from a screenshot."""
    import io

    from PIL import Image

    shot = Image.open(io.BytesIO(grid.screenshot())).convert("RGB")
    ys = [grids.HEADER_PX + row_px * row + row_px // 2 for row in range(rows)]
    return [row for row, y in enumerate(ys) if shot.getpixel((int(x), y)) != (255, 255, 255)]


def test_the_dashboard_in_voila_keeps_its_highlight_on_the_open_queue_and_says_what_is_off(voila, url):
    """Select beta; gamma starts failing and the refresh ranks it first: the highlight
    moves with beta. Its Overview says why Obliterate is off; a reason typed before Pause
    is the audit entry's; beta obliterated by another client is said gone, its Pause off."""
    from emq_notebook.widgets.dashboard import OVERVIEW_WIDTHS
    from emq_notebook.widgets.dashboard import ROW_PX as OVERVIEW_ROW_PX

    conn = emq.connect(url)
    spy = redis.Redis.from_url(url, decode_responses=True)
    for q in ("alpha", "beta", "gamma"):  # idle and the same size: ranked by name
        jobs.enqueue(conn, q, "{}", delay_ms=3_600_000)
    # a white column's left edge (pending: no colour of its own, its numbers right-aligned)
    x = sum(OVERVIEW_WIDTHS[c] for c in ("verdict", "queue", "why")) + 8

    def highlighted(rows: int) -> list[int]:
        return highlighted_rows(overview, rows, x, OVERVIEW_ROW_PX)

    shots = ROOT / "docs" if os.environ.get("EMQ_SAVE_SCREENSHOTS") else voila_shots()
    with chromium_page(1280, 1300) as page:
        overview = voila_overview(page, voila)
        page.get_by_text(re.compile(r"^3 queues · ")).wait_for()
        click_overview_row(page, overview, 1)  # beta, second by rank
        page.get_by_text("queue beta", exact=True).wait_for()
        wait_for(lambda: highlighted(3) == [1], "beta's row highlighted")
        stage_dead(conn, "gamma", spy, [("j_gamma_dead", "SMTP 550: mailbox unavailable")])
        page.get_by_text("1 failing", exact=True).wait_for(timeout=20_000)  # refreshed
        # gamma first, alpha, then beta: the highlight went with beta
        wait_for(lambda: highlighted(3) == [2], "the highlight to follow beta")
        page.get_by_text("queue beta", exact=True).wait_for()
        page.get_by_text("Obliterate: pause the queue first").wait_for()
        page.wait_for_timeout(300)
        page.locator(".emq-dashboard").screenshot(path=str(shots / "dashboard-highlight.png"))

        page.get_by_placeholder("why: recorded as the reason of each write below").first.fill(
            "INC-9 hold beta"
        )
        page.get_by_role("button", name=re.compile(r"^\W*Pause$")).click()
        wait_for(lambda: spy.hget("emq:{beta}:meta", "paused") == "1", "beta to be paused")
        top = emq.audit.read(conn, "beta").iloc[0]
        assert (top.verb, top.reason, top.surface) == ("pause", "INC-9 hold beta", "panel")
        page.get_by_text("Obliterate: type the queue name to confirm").wait_for()

        emq.admin.obliterate_all(conn, "beta")  # another client retires beta
        # the dashboard's title of the open queue and its Overview tab both say so
        gone = page.get_by_text("queue beta is gone: no key of it is on the server")
        gone.nth(1).wait_for(timeout=20_000)
        pause = page.get_by_role("button", name=re.compile(r"^\W*Pause$"))
        assert pause.is_disabled() and pause.get_attribute("title") == "queue beta is gone"
        page.get_by_text("Pause, Drain…, Obliterate: queue beta is gone").wait_for()
        wait_for(lambda: highlighted(2) == [], "no row highlighted")
        page.wait_for_timeout(300)
        page.locator(".emq-dashboard").screenshot(path=str(shots / "dashboard-gone.png"))
    for name in ("dashboard-highlight.png", "dashboard-gone.png"):
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


def test_a_voila_tab_killed_without_its_unload_frees_its_kernel(tmp_path, url):
    """Voilà culling idle kernels (the serve line's options, short here): a live page's
    kernel is kept past the idle timeout; the browser killed (no unload step), the page
    stops beating, the dashboard stops publishing, and the kernel is culled."""
    from playwright.sync_api import sync_playwright

    conn = emq.connect(url)
    for i in range(3):
        jobs.enqueue(conn, "mailers", json.dumps({"n": i}))
    notebook(
        tmp_path / "board.ipynb",
        "import emq_notebook\n%load_ext emq_notebook\n%emq connect",
        "board = emq_notebook.widgets.Dashboard(emq_notebook.current(), refresh_every=1)\n"
        "board.presence.beat_ms = 500  # lost after 1.5 s without a beat\nboard",
    )
    idle_s = 4
    culling = ("--MappingKernelManager.cull_interval=1", f"--MappingKernelManager.cull_idle_timeout={idle_s}")
    profile = tmp_path / "chromium"
    with (
        serve_voila(tmp_path, url, str(tmp_path / "board.ipynb"), *culling) as served,
        sync_playwright() as p,
    ):
        # our own Chromium (its pid known), driven over CDP, so it can die without unloading
        chromium = subprocess.Popen(
            [str(CHROMIUM), *ARGS, "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            active = profile / "DevToolsActivePort"
            wait_for(lambda: active.exists() and active.read_text().strip(), "Chromium's debugging port", 30)
            port = int(active.read_text().split()[0])
            browser = p.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
            page = browser.contexts[0].new_page()
            page.goto(served, timeout=90_000)
            page.locator(".ipydatagrid-widget").first.wait_for(timeout=90_000)
            page.get_by_text(re.compile(r"^1 queues · ")).wait_for()
            kernel_id = json.loads(page.locator("#jupyter-config-data").text_content())["kernelId"]
            page.wait_for_timeout(2 * (idle_s + 1) * 1000)  # an open page is never culled
            assert kernel_known(served, kernel_id) and kernel_processes(served.pid) == 1
            os.killpg(chromium.pid, signal.SIGKILL)  # the tab dies: no unload step
            chromium.wait(10)
            wait_for(lambda: not kernel_known(served, kernel_id), "the idle kernel to be culled", 40)
            wait_for(lambda: kernel_processes(served.pid) == 0, "the kernel process to end", 15)
        finally:
            if chromium.poll() is None:
                os.killpg(chromium.pid, signal.SIGKILL)
                chromium.wait(10)
    said = (tmp_path / "voila.log").read_text()
    assert f"Culling kernels with idle durations > {idle_s} seconds" in said
    assert "due to" in said and "seconds of inactivity" in said


def voila_shots() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="emq-voila-"))


# -- health at a glance ----------------------------------------------------------------


def test_the_metrics_and_health_views_in_jupyterlab(lab, url):
    """MetricsView draws both plots and says when, its Stop stops the refresh; HealthView
    counts the verdicts a separate connection computes, each chip in its colour, and
    names the queues that need a look."""

    base, token, work = lab
    conn = emq.connect(url)
    rng = __import__("random").Random(18)
    for i in range(30):
        jobs.enqueue(conn, "mailers", json.dumps({"to": f"user{i}@example.com"}))
    emq.Worker(conn, "mailers", lambda *job: time.sleep(rng.uniform(0.02, 0.08))).run(max_jobs=24)
    for i in range(8):
        jobs.enqueue(conn, "billing", json.dumps({"charge": i}), max_attempts=1)
    emq.Worker(
        conn,
        "billing",
        lambda job_id, payload, attempts: None if json.loads(payload)["charge"] % 4 == 0 else 1 / 0,
    ).run(until_empty=True)
    for i in range(40):
        jobs.enqueue(conn, "exports", json.dumps({"export": i}))
    emq.Worker(conn, "exports", lambda *job: None).run(max_jobs=5)
    for i in range(5):
        jobs.enqueue(conn, "reports", json.dumps({"report": i}))
    emq.admin.pause(conn, "reports")
    verdicts = emq.frames.health(emq.connect(url))["verdict"].to_dict()
    assert verdicts == {"billing": "failing", "exports": "growing", "mailers": "ok", "reports": "paused"}

    notebook(
        work / "health.ipynb",
        "import emq_notebook\n%load_ext emq_notebook\n%emq connect",
        "emq_notebook.widgets.MetricsView(emq_notebook.current(), 'mailers', refresh_every=2)",
        "emq_notebook.widgets.HealthView(emq_notebook.current())",
    )
    shots = ROOT / "docs" if os.environ.get("EMQ_SAVE_SCREENSHOTS") else work
    with chromium_page(1400, 1800) as page:
        page.goto(f"{base}/lab/tree/health.ipynb?reset&token={token}")
        run_all(page, ready="Stop")
        # the file browser folded away: the notebook gets the page's width
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").first.click()
        views = page.locator(".jp-OutputArea-output .widget-vbox")
        metrics = views.nth(0)
        metrics.locator("img").nth(1).wait_for(timeout=30_000)  # both plots drawn
        first = metrics.get_by_text(re.compile(r"last refreshed \d\d:\d\d:\d\d UTC · every 2s"))
        first.wait_for()
        said = first.inner_text()
        wait_for(
            lambda: metrics.get_by_text(re.compile("last refreshed")).inner_text() != said,
            "a second refresh by the view's own thread",
        )
        metrics.get_by_text("claimed").first.wait_for()
        health = views.nth(1)
        health.locator(".ipydatagrid-widget").wait_for()
        for verdict in verdicts.values():  # one queue each, as a chip in its colour
            health.locator("span", has_text=re.compile(rf"^1 {verdict}$")).wait_for()
        health.get_by_text("needs a look: billing, exports").wait_for()
        page.wait_for_timeout(500)
        shots.mkdir(exist_ok=True)
        health.screenshot(path=str(shots / "health-view.png"))
        metrics.get_by_role("button", name="Stop").click()
        metrics.get_by_text(re.compile(r"last refreshed .* · stopped")).wait_for()
        metrics.get_by_role("button", name="Start").wait_for()
        metrics.screenshot(path=str(shots / "metrics-view.png"))
    for name in ("metrics-view.png", "health-view.png"):
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


# -- at production scale: 200 queues, left open, closed ---------------------------------
def kernel_processes(pid: int) -> int:
    """The kernels a server runs: its child processes running ipykernel."""
    found = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            found += b"ipykernel" in cmdline
    return found


def kernel_known(base: str, kernel_id: str) -> bool:
    """Whether the server's kernels API knows kernel `kernel_id` (404: shut down)."""
    try:
        with urllib.request.urlopen(f"{base}/api/kernels/{kernel_id}", timeout=2) as r:
            return r.status == 200
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise


def stage_200_queues(conn, spy) -> list[str]:
    """q000..q199, 1 to 7 pending jobs each: 5 paused, 12 stuck (their jobs waited 10 min
    and nobody claims), 8 growing (nobody claimed yet), the rest ok (workers claimed and
    finished half, the other half waits); cheap: about 1,300 commands."""
    names = [f"q{i:03d}" for i in range(200)]
    paused, stuck, growing = set(names[::40]), set(names[3:195:16]), set(names[7::25])
    long_ago = str(int(time.time() * 1000) - 10 * 60_000)
    for i, q in enumerate(names):
        ids = [jobs.enqueue(conn, q, json.dumps({"n": n})) for n in range(1 + i % 7)]
        if q in paused:
            emq.admin.pause(conn, q)
        elif q in stuck:
            for job_id in ids:
                spy.hset(f"emq:{{{q}}}:job:{job_id}", "created_at", long_ago)
        elif q not in growing:
            for _ in range((len(ids) + 1) // 2):
                job_id = jobs.claim(conn, q, 60_000)[0]
                jobs.complete(conn, q, job_id)
    return names


def scroll_top(grid) -> float:
    """How far the grid's body is scrolled: its vertical scroll bar thumb's offset."""
    return grid.evaluate(
        "g => { const t = g.querySelector("
        "'.lm-ScrollBar[data-orientation=\"vertical\"] .lm-ScrollBar-thumb');"
        " return t ? t.offsetTop : -1; }"
    )


def test_the_dashboard_of_200_queues_in_voila_keeps_its_scroll_guards_and_shuts_its_kernel(
    voila, url, tmp_path
):
    """201 queues; the overview scrolled half-way stays there across two refreshes that
    change counts and ranks, and the browser sorts the patched rows again; "Reprocess
    all" on 60 dead jobs (above confirm_above 50) asks first, naming the count and the
    connection, and moves nothing until confirmed; the page closed, its kernel is gone
    from the server's kernels API and its processes."""

    profile = tmp_path / "home" / ".ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text("c.EMQMagics.confirm_above = 50\n")
    conn = emq.connect(url)
    spy = redis.Redis.from_url(url, decode_responses=True)
    from emq_notebook.widgets.dashboard import ROW_PX as OVERVIEW_ROW_PX

    names = stage_200_queues(conn, spy)
    stage_dead(
        conn, "mailers", spy, [(f"j_dead_{i:03d}", "SMTP 550: mailbox unavailable") for i in range(60)]
    )
    verdicts = emq.frames.health(conn)["verdict"].value_counts().to_dict()
    assert verdicts == {"failing": 1, "stuck": 12, "growing": 8, "paused": 5, "ok": 175}
    shots = ROOT / "docs" if os.environ.get("EMQ_SAVE_SCREENSHOTS") else voila_shots()
    with chromium_page(1400, 1100) as page:
        overview = voila_overview(page, voila)
        page.get_by_text(re.compile(r"^201 queues · ")).wait_for()
        page.get_by_text("1 failing", exact=True).wait_for()  # mailers, first
        page.get_by_text("12 stuck", exact=True).wait_for()
        kernel_id = json.loads(page.locator("#jupyter-config-data").text_content())["kernelId"]
        assert kernel_known(voila, kernel_id)
        page.wait_for_timeout(500)
        page.locator(".emq-dashboard").screenshot(path=str(shots / "dashboard-overview.png"))

        box = overview.bounding_box()
        page.mouse.move(box["x"] + 400, box["y"] + 200)
        page.mouse.wheel(0, 2_400)  # about 100 rows down
        wait_for(lambda: scroll_top(overview) > 0, "the overview to scroll")
        page.wait_for_timeout(300)
        scrolled = scroll_top(overview)
        for refresh in range(2):  # two refreshes, each with counts and ranks that moved
            for q in names[::10]:
                jobs.enqueue(conn, q, "{}")
            for _ in range(15):  # the biggest of the growing queues
                jobs.enqueue(conn, "q199", "{}")
            pending = int(emq.frames.counts(conn)["pending"].sum())
            page.get_by_text(re.compile(rf"^201 queues · {pending:,} pending ")).wait_for(timeout=20_000)
            assert scroll_top(overview) == scrolled, f"refresh {refresh + 1} moved the overview's scroll"
        # the browser sorted the patched rows again: q199, grown, is where the kernel ranks it
        rank = list(emq.frames.health(conn).index).index("q199")
        assert 12 < rank < 20  # after the failing and the stuck queues, on the first screen
        page.mouse.move(box["x"] + 400, box["y"] + 200)
        page.mouse.wheel(0, -10_000)
        wait_for(lambda: scroll_top(overview) <= 1, "the overview to scroll back to the top")
        # the overview shows 11 rows: scrolled so that q199's is the sixth
        page.mouse.wheel(0, (rank - 5) * OVERVIEW_ROW_PX)
        wait_for(lambda: scroll_top(overview) > 0, "the overview to scroll to q199")
        page.wait_for_timeout(300)
        click_overview_row(page, overview, 5)
        page.get_by_text("queue q199", exact=True).wait_for()

        page.get_by_placeholder("open queue: type to search").fill("mailers")
        page.get_by_text("queue mailers", exact=True).wait_for()
        page.get_by_role("tab", name="Dead letters", exact=True).click()
        # the panel is built by the kernel on the tab's first show: on a loaded machine
        # (CI, a full run beside it) that took over the 30 s default once
        page.get_by_role("button", name="Reprocess all 60…").click(timeout=90_000)
        question = page.get_by_text(re.compile(r"Reprocess 60 dead jobs of mailers\?"))
        question.wait_for()
        assert "connected: " in question.inner_text()
        page.wait_for_timeout(500)
        assert spy.zcard("emq:{mailers}:dead") == 60  # asked, nothing moved
        page.locator(".emq-dashboard .widget-tab").first.screenshot(
            path=str(shots / "dashboard-dead-letters.png")
        )
        page.get_by_role("button", name="Confirm").click()
        wait_for(lambda: spy.zcard("emq:{mailers}:dead") == 0, "the 60 dead jobs to move", 15)
        page.get_by_text("reprocessed 60 dead jobs").last.wait_for()  # beside the bar, and the status

        assert kernel_processes(voila.pid) == 1
        page.goto("about:blank")  # leave the page (its unload asks for the shutdown)
        wait_for(lambda: not kernel_known(voila, kernel_id), "the page's kernel to shut down", 15)
        wait_for(lambda: kernel_processes(voila.pid) == 0, "the kernel process to end", 15)
    png = (shots / "dashboard-overview.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


def click_overview_row(page, grid, row: int, *, x: float = 60) -> None:
    """Click body row `row` of the dashboard's overview (its rows are taller)."""
    from emq_notebook.widgets.dashboard import ROW_PX as OVERVIEW_ROW_PX

    box = grid.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + x, box["y"] + HEADER_PX + OVERVIEW_ROW_PX * row + OVERVIEW_ROW_PX / 2)

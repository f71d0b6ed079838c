"""The dead letters in a real browser: the dashboard served by Voilà on a queue of
100,000 dead jobs (a real Valkey through EMQ_URL, Debian's Chromium driven by
Playwright). The Jobs tab lists the newest death first and pages through the
server's order (Next, Last: the oldest); a click on a row shows the job whole below
the grid (its error with markup as text, its payload, its logs, its times in the
page's zone); the Dead letters tab's list is the newest first too, and a job picked
there is shown whole. Each page click is timed from the click to its rows' label
(printed; the figures go to bench/README.md, never asserted).

Needs /usr/bin/chromium, as tests/test_browser.py (whose fixtures it uses). Screenshots
go to a temporary folder, or to docs/ with EMQ_SAVE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
import redis
from dead_letters import written_rows
from nbtools import notebook
from test_browser import ROOT, chromium_page, click_row, serve_voila, url, voila_shots, wait_for  # noqa: F401

import emq_notebook as emq
from emq_notebook import jobs

pytestmark = pytest.mark.browser
Q = "mailers"
N = 100_000
# the newest death: markup in its error (shown as text), a payload of bytes that are not UTF-8
TRACE = "".join(f'  File "send.py", line {i}, in deliver\n    smtp.send(msg)  # <{i}>\n' for i in range(150))
NEWEST_ERROR = "Traceback (most recent call last):\n" + TRACE + "SMTPError: 550 <b>mailbox</b> unavailable"


def stage(conn, address: str) -> list[str]:
    """`N` dead jobs of `Q` as another node writes them, died one ms apart in id order up
    to a minute ago; the newest with a 10 KB error holding markup, a payload that is not
    UTF-8 and two log lines. Answers the ids, oldest death first."""
    ids = [f"j_{i:06d}" for i in range(N)]
    first = int(time.time() * 1000) - 60_000 - N
    for at in range(0, N, 10_000):
        written_rows(
            conn,
            Q,
            "dead",
            ids[at : at + 10_000],
            first=first + at,
            attempts=lambda i, at=at: str(1 + (at + i) % 5),
            last_error=lambda i, at=at: f"SMTP 550: mailbox unavailable <user{at + i}>",
            payload=lambda i, at=at: json.dumps({"to": f"user{at + i}@example.com"}),
            created_at=str(first - 3_600_000),
        )
    newest = f"emq:{{{Q}}}:job:{ids[-1]}"
    raw = redis.Redis.from_url(address)
    raw.hset(newest, mapping={"last_error": NEWEST_ERROR, "payload": b'{"to": "\xff@example.com"}'})
    raw.rpush(newest + ":logs", b"tried mx1.example.net", b"tried mx2 \xfe")
    raw.close()
    return ids


# clicks `button` and notes, in the page's own clock, when an element's text becomes `label`
TIMED_CLICK = """([button, label]) => {
  window.__emqShown = null;
  const began = performance.now();
  const seen = () =>
    [...document.querySelectorAll('.widget-html-content')].some((e) => e.textContent === label);
  const watch = new MutationObserver(() => {
    if (seen()) { window.__emqShown = performance.now() - began; watch.disconnect(); }
  });
  watch.observe(document.body, { subtree: true, childList: true, characterData: true });
  button.click();
}"""


def timed_click(page, button, label: str) -> float:
    """Seconds from a click on `button` until the text `label` shows, as the page measures
    them (from the click event to the DOM change that shows it)."""
    button.evaluate(f"(b) => ({TIMED_CLICK})([b, {json.dumps(label)}])")
    page.wait_for_function("window.__emqShown !== null", timeout=30_000)
    return page.evaluate("window.__emqShown") / 1000


def test_dead_letters_newest_first_paged_on_the_server_and_a_row_shown_whole(tmp_path, url):  # noqa: F811
    conn = emq.connect(url)
    spy = redis.Redis.from_url(url, decode_responses=True)
    ids = stage(conn, url)
    assert spy.zcard(f"emq:{{{Q}}}:dead") == N
    board = notebook(
        tmp_path / "board.ipynb",
        "%load_ext emq_notebook\nimport emq_notebook as emq\nfrom emq_notebook.widgets import Dashboard",
        f"Dashboard(emq.current(), queue={Q!r})",
    )
    shots = ROOT / "docs" if os.environ.get("EMQ_SAVE_SCREENSHOTS") else voila_shots()
    seconds: dict[str, float] = {}
    with serve_voila(tmp_path, url, str(board)) as voila, chromium_page(1400, 1500) as page:
        page.goto(voila, timeout=90_000)
        page.locator(".ipydatagrid-widget").first.wait_for(timeout=90_000)
        page.get_by_text(f"queue {Q}", exact=True).wait_for(timeout=60_000)
        page.get_by_role("tab", name="Jobs", exact=True).click()
        page.get_by_role("button", name="dead", exact=True).click()
        page.get_by_text("rows 1–100 of 100,000 dead", exact=True).wait_for(timeout=60_000)
        view = page.locator(".emq-dashboard .widget-tab").first
        assert view.locator("select").filter(has_text="newest death first").count() == 1
        jobs_grid = view.locator(".ipydatagrid-widget").first
        jobs_grid.wait_for()
        page.wait_for_timeout(500)

        # the newest death first: its row shown whole below the grid on a click
        click_row(page, jobs_grid, 0, x=120)
        detail = view.locator("pre.emq-whole").first
        detail.wait_for(timeout=30_000)
        view.get_by_text(f"job {ids[-1]}", exact=True).filter(visible=True).first.wait_for()
        shown = detail.inner_text()
        assert shown == NEWEST_ERROR  # whole, every line, the markup as text
        assert view.locator("pre.emq-whole b").count() == 0
        whole = view.locator(".emq-whole")
        assert '"to": "\\xff@example.com"' in whole.nth(1).inner_text()
        assert whole.nth(2).inner_text() == "tried mx1.example.net\ntried mx2 \\xfe"
        zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
        created = view.locator("td", has_text=re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(\d+\)$"))
        assert created.count() >= 1, "created_at in the page's zone"
        page.wait_for_timeout(300)
        view.screenshot(path=str(shots / "dashboard-dead-newest.png"))

        # page clicks through the server's order, each timed
        buttons = {name: view.get_by_role("button", name=re.compile(rf"{name}")) for name in ("Next", "Last")}
        seconds["next"] = timed_click(page, buttons["Next"], "rows 101–200 of 100,000 dead")
        seconds["last"] = timed_click(page, buttons["Last"], "rows 99,901–100,000 of 100,000 dead")
        seconds["previous"] = timed_click(
            page,
            view.get_by_role("button", name=re.compile("Previous")),
            "rows 99,801–99,900 of 100,000 dead",
        )
        seconds["first"] = timed_click(
            page, view.get_by_role("button", name=re.compile("First")), "rows 1–100 of 100,000 dead"
        )

        # the Dead letters tab: the list newest first; a job picked there shown whole
        page.get_by_role("tab", name="Dead letters", exact=True).click()
        dead_tab = page.locator(".emq-dashboard .widget-tab").first
        listing = dead_tab.locator("select[multiple]").filter(visible=True)
        listing.wait_for(timeout=90_000)
        wait_for(lambda: listing.locator("option").count() > 0, "the dead letters list")
        options = [o.replace("\xa0", " ") for o in listing.locator("option").all_inner_texts()]
        assert options[0].startswith(f"{ids[-1]} — Traceback") and options[1].startswith(ids[-2])
        listing.select_option(index=1)  # the second newest
        dead_tab.get_by_text(f"job {ids[-2]}", exact=True).filter(visible=True).wait_for(timeout=30_000)
        picked = dead_tab.locator("pre.emq-whole").filter(visible=True).first
        assert picked.inner_text() == f"SMTP 550: mailbox unavailable <user{N - 2}>"
        page.wait_for_timeout(300)
        dead_tab.screenshot(path=str(shots / "dashboard-dead-letters-newest.png"))
    print(f"\npage clicks at {N:,} dead in Voilà (s): {seconds}; the page's zone {zone}")
    for name in ("dashboard-dead-newest.png", "dashboard-dead-letters-newest.png"):
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000
    # the jobs were only read
    assert spy.zcard(f"emq:{{{Q}}}:dead") == N and jobs.get_job(conn, Q, ids[0])["state"] == "dead"

"""HealthView: every queue's verdict at a glance, coloured, with why.

A table of `frames.health`, most urgent first (failing, stuck, growing, dead
letters, paused, ok, idle, then the biggest): queue, verdict (one colour each),
backlog, dead, oldest pending, failure rate, wait p95, and the sentence that
explains the verdict, under a line counting each verdict. Refresh reads it again
(the queues the connection knows: no SCAN); Rescan finds the queues on the server
again. An opt-in auto-refresh is one background thread (`emq-health`), stopped like
every panel's. Reads only, and at most a small sample of rows a queue (two time
fields each), so it is as cheap on a million jobs.
"""

from __future__ import annotations

import html
import math
import time

import ipywidgets as w
import pandas as pd
import redis

from .. import frames, health
from ..connector import Connection
from ..errors import EMQError
from ..health import ago, ms_text
from ..keyspace import check_name
from ..plots import VERDICT_COLOURS
from .base import Panel, interval
from .refresher import Refresher

_HEAD = ("queue", "verdict", "pending", "dead", "oldest", "failed (5 min)", "wait p95", "why")
# the verdicts the status line names as needing a look
_LOOK = ("failing", "stuck", "growing", "dead_letters")


def badge(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict, "#7f7f7f")
    return (
        f'<span style="background:{colour};color:white;padding:0 6px;border-radius:3px">'
        f"{html.escape(verdict)}</span>"
    )


def health_table(h: pd.DataFrame) -> str:
    """The health frame as a small HTML table, one coloured verdict per queue."""
    if h.empty:
        return "<i>no queue on this server</i>"
    rows = []
    for q, r in h.iterrows():
        oldest = "" if math.isnan(r["oldest_pending_s"]) else ago(r["oldest_pending_s"])
        rate = "" if math.isnan(r["failure_rate_5m"]) else f"{r['failure_rate_5m']:.0%}"
        cells = [
            html.escape(str(q)),
            badge(r["verdict"]),
            f"{r['pending']:,}",
            f"{r['dead']:,}",
            oldest,
            rate,
            "" if math.isnan(r["wait_p95_5m"]) else ms_text(r["wait_p95_5m"]),
            html.escape(r["why"]),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h_}</th>" for h_ in _HEAD)
    said = html.escape(health.summary(h))
    return f'<div>{said}</div><table class="emq"><tr>{head}</tr>{"".join(rows)}</table>'


class HealthView(Panel):
    """`HealthView(conn, queues=None, refresh_every=5.0, auto=False)`: reads only."""

    def __init__(
        self,
        conn: Connection,
        queues: list[str] | None = None,
        refresh_every: float = 5.0,
        auto: bool = False,
    ):
        super().__init__()
        self.conn = conn
        self.queues = None if queues is None else [check_name(q) for q in queues]
        self.title = "every queue" if self.queues is None else ", ".join(self.queues)
        self.refresh_every = interval(refresh_every)
        self.frame = pd.DataFrame()
        self.verdicts: dict[str, str] = {}
        self.refreshed_at: str | None = None
        self.table = w.HTML()
        self.refreshed = w.HTML()
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.auto_button = w.Button(description=f"Auto-refresh {self.refresh_every:g}s", icon="play")
        self.auto_button.on_click(lambda _: self.toggle())
        self.rescan_button = w.Button(description="Rescan", icon="search")
        self.rescan_button.on_click(lambda _: self.rescan())
        if self.queues is not None:  # named queues: nothing to find
            self.rescan_button.layout.display = "none"
        self._refresher = Refresher(
            "emq-health",
            self.refresh_every,
            self.refresh,
            lambda exc: self.say(f"error: {type(exc).__name__}: {exc}", "error"),
        )
        self.children = [
            w.HTML(f"<b>health of {html.escape(self.title)}</b>"),
            w.HBox([self.refresh_button, self.rescan_button, self.auto_button, self.refreshed]),
            self.table,
            self.status,
        ]
        self._register("*" if self.queues is None else ",".join(self.queues))
        self.refresh()
        if auto:
            self.start()

    @property
    def running(self) -> bool:
        return self._refresher.running

    def refresh(self) -> None:
        try:
            h = frames.health(self.conn, self.queues)
        except (EMQError, redis.RedisError) as exc:
            self.say(f"error: {exc}", "error")
            return
        self.frame = h
        self.verdicts = {str(q): str(v) for q, v in h["verdict"].items()}
        self.table.value = health_table(h)
        self.refreshed_at = time.strftime("%H:%M:%S UTC", time.gmtime())
        self._show_state()
        bad = [q for q, v in self.verdicts.items() if v in _LOOK]
        self.say(
            f"needs a look: {', '.join(bad)}" if bad else "nothing failing, stuck, growing or dead",
            "refused" if bad else "ok",
        )

    def rescan(self) -> None:
        """Find the queues on the server again (a whole SCAN sweep), then refresh."""
        try:
            frames.queues(self.conn, rescan=True)
        except (EMQError, redis.RedisError) as exc:
            self.say(f"error: {exc}", "error")
            return
        self.refresh()

    def _show_state(self) -> None:
        how = f"every {self.refresh_every:g}s" if self.running else "refresh by hand"
        self.refreshed.value = f"<small>last refreshed {self.refreshed_at} · {how}</small>"

    def facts(self) -> list[tuple[str, object]]:
        return [("queues", len(self.verdicts)), ("last refreshed", self.refreshed_at or "never")]

    def start(self) -> None:
        self._refresher.start()
        self.auto_button.description, self.auto_button.icon = "Stop", "stop"
        self._show_state()

    def stop(self) -> None:
        self.stop_threads()
        self.auto_button.description = f"Auto-refresh {self.refresh_every:g}s"
        self.auto_button.icon = "play"
        self._show_state()

    def toggle(self) -> None:
        self.stop() if self.running else self.start()

    def stop_threads(self) -> None:
        self._refresher.stop()

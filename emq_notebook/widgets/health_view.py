"""HealthView: every queue's verdict at a glance, coloured, with why.

A grid of `frames.health`, its rows ranked most urgent first (`#`: failing, stuck,
growing, dead letters, paused, ok, idle, then the biggest), sortable by any column in
the browser (the verdict column by severity): queue, verdict (one colour each),
pending, active, dead, oldest pending, failure rate, wait p95, and the sentence that
explains the verdict, under a line counting each verdict. Refresh reads it again (the
queues the connection knows: no SCAN) and patches the grid in place; Rescan finds the
queues on the server again. An opt-in auto-refresh is one background thread
(`emq-health`). Reads only, and at most a small sample of rows a queue (two time
fields each), so it is as cheap on a million jobs. A saved notebook shows the table.
"""

from __future__ import annotations

import html
import math

import ipywidgets as w
import pandas as pd

from .. import frames, health, watching
from ..connector import Connection
from ..decoding import printable
from ..errors import EMQError
from ..health import ago, ms_text
from ..keyspace import check_name
from ..plots import VERDICT_TINTS, verdict_chip
from . import grid as grids
from .base import Panel, interval
from .values import clock

_HEAD = ("queue", "verdict", "pending", "active", "dead", "oldest", "failed (5 min)", "wait p95", "why")
# the verdicts the status line names as needing a look
_LOOK = ("failing", "stuck", "growing", "dead_letters")
VERDICTS = health.SEVERITY
WIDTHS = {
    "#": 40,
    "verdict": 96,
    "pending": 76,
    "active": 72,
    "dead": 68,
    "oldest": 104,
    "failed (5 min)": 104,
    "wait p95": 84,
    # wrapped onto the row's two lines: read whole, and the grid fits a 1,280 px page
    "why": 440,
}
# a row holds two lines of `why`
ROW_PX = 36


def _vega_list(items: list[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


VERDICT_TEXT = f"{_vega_list([v.replace('_', ' ') for v in VERDICTS])}[cell.value]"
COLOURS = {
    "verdict": f"{_vega_list([VERDICT_TINTS[v] for v in VERDICTS])}[cell.value]",
    "dead": "cell.value > 0 ? '#e8dbff' : 'white'",
}


def badge(verdict: str) -> str:
    return verdict_chip(verdict)


def _oldest(r: pd.Series) -> str:
    return "" if math.isnan(r["oldest_pending_s"]) else ago(r["oldest_pending_s"])


def _rate(r: pd.Series) -> str:
    return "" if math.isnan(r["failure_rate_5m"]) else f"{r['failure_rate_5m']:.0%}"


def _wait(r: pd.Series) -> str:
    return "" if math.isnan(r["wait_p95_5m"]) else ms_text(r["wait_p95_5m"])


def health_table(h: pd.DataFrame) -> str:
    """The health frame as a small HTML table, most urgent first, one coloured verdict
    per queue, under the line counting each verdict."""
    if h.empty:
        return "<i>no queue on this server</i>"
    rows = []
    for q, r in h.iterrows():
        cells = [
            html.escape(str(q)),
            badge(r["verdict"]),
            f"{r['pending']:,}",
            f"{r['active']:,}",
            f"{r['dead']:,}",
            _oldest(r),
            _rate(r),
            _wait(r),
            html.escape(r["why"]),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h_}</th>" for h_ in _HEAD)
    return f'{summary_html(h)}<table class="emq"><tr>{head}</tr>{"".join(rows)}</table>'


def summary_html(h: pd.DataFrame) -> str:
    """How many queues hold each verdict, as chips in their colours, most urgent first."""
    if h.empty:
        return ""
    counted = h["verdict"].value_counts()
    chips = "".join(verdict_chip(v, int(counted[v])) for v in VERDICTS if v in counted.index)
    return f'<div title="{html.escape(health.summary(h))}">{chips}</div>'


def health_frame(h: pd.DataFrame) -> pd.DataFrame:
    """The health frame as the grid holds it: a row per queue in name order (a refresh
    patches rows in place), `#` its rank (most urgent first), the verdict as its
    severity (shown as its word), the figures as an operator reads them."""
    columns = list(WIDTHS)
    if h.empty:
        ints = ("#", "verdict", "pending", "active", "dead")
        return pd.DataFrame(
            {c: pd.Series(dtype="int64" if c in ints else "object") for c in columns},
            index=pd.Index([], name="queue"),
        )
    rank = {q: i + 1 for i, q in enumerate(h.index)}
    names = sorted(h.index, key=str)
    src = h.loc[names]
    out = pd.DataFrame(index=pd.Index(names, name="queue"))
    out["#"] = pd.Series([rank[q] for q in names], index=out.index, dtype="int64")
    out["verdict"] = pd.Series(
        [VERDICTS.index(v) if v in VERDICTS else len(VERDICTS) - 1 for v in src["verdict"]],
        index=out.index,
        dtype="int64",
    )
    for c in ("pending", "active", "dead"):
        out[c] = src[c].astype("int64")
    out["oldest"] = [_oldest(r) for _, r in src.iterrows()]
    out["failed (5 min)"] = [_rate(r) for _, r in src.iterrows()]
    out["wait p95"] = [_wait(r) for _, r in src.iterrows()]
    out["why"] = src["why"].astype(object)
    for c in ("oldest", "failed (5 min)", "wait p95"):
        out[c] = out[c].astype(object)
    return out[columns]


def lane_notes_html(look: watching.Look) -> str:
    """A line for each queue of `look` with notes (its pending count holds a lane backlog
    from a pass over its lanes rather than this refresh, ...), at most 5."""
    said = [(q, look.note(q)) for q in look.notes]
    lines = "".join(
        f"<div><small>pending of <b>{html.escape(printable(q))}</b>: {html.escape(note)}</small></div>"
        for q, note in said[:5]
    )
    more = (
        f"<div><small>and {len(said) - 5:,} more queues of many lanes</small></div>" if len(said) > 5 else ""
    )
    return f'<div style="color:#57606a">{lines}{more}</div>' if said else ""


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
        self.summary = w.HTML()
        self.grid = grids.grid(
            health_frame(self.frame),
            colours=COLOURS,
            widths=WIDTHS,
            index_px=120,
            most_rows=25,
            texts={"verdict": VERDICT_TEXT},
            sort="#",
            row_px=ROW_PX,
            wrap=("why",),
        )
        self.refreshed = w.HTML()
        self.refresh_button = w.Button(description="Refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.auto_button = w.Button(description=f"Auto-refresh {self.refresh_every:g}s")
        self.auto_button.on_click(lambda _: self.toggle())
        self.rescan_button = w.Button(description="Rescan")
        self.rescan_button.on_click(lambda _: self.rescan())
        if self.queues is not None:  # named queues: nothing to find
            self.rescan_button.layout.display = "none"
        self.every(self.refresh_every, "emq-health")
        self.children = [
            w.HTML(f"<b>health of {html.escape(self.title)}</b>"),
            w.HBox([self.refresh_button, self.rescan_button, self.auto_button, self.refreshed]),
            self.summary,
            self.grid,
            self.status,
        ]
        self._register("*" if self.queues is None else ",".join(self.queues))
        self.refresh()
        if auto:
            self.start()

    def refresh(self) -> None:
        try:
            look = health.look(self.conn, self.queues)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.frame = h = look.frame
        self.verdicts = {str(q): str(v) for q, v in h["verdict"].items()}
        grids.patch(self.grid, health_frame(h))
        self.summary.value = (
            summary_html(h) + lane_notes_html(look) if len(h) else "<i>no queue on this server</i>"
        )
        self.refreshed_at = clock()
        self.show_running()
        bad = [q for q, v in self.verdicts.items() if v in _LOOK]
        shown = ", ".join(bad[:10]) + (f" and {len(bad) - 10:,} more" if len(bad) > 10 else "")
        self.say(
            f"needs a look: {shown}" if bad else "nothing failing, stuck, growing or dead",
            "refused" if bad else "ok",
        )

    def rescan(self) -> None:
        """Find the queues on the server again (a whole SCAN sweep), then refresh."""
        try:
            frames.queues(self.conn, rescan=True)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.refresh()

    def show_running(self) -> None:
        self.auto_button.description = "Stop" if self.running else f"Auto-refresh {self.refresh_every:g}s"
        how = f"every {self.refresh_every:g}s" if self.running else "refresh by hand"
        self.refreshed.value = f"<small>last refreshed {self.refreshed_at} · {how}</small>"

    def facts(self) -> list[tuple[str, object]]:
        return [("queues", len(self.verdicts)), ("last refreshed", self.refreshed_at or "never")]

    def _shown(self):  # type: ignore[no-untyped-def]
        # the saved-notebook view: the table, most urgent first
        yield health_table(self.frame)

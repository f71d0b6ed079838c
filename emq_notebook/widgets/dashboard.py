"""Dashboard: every queue at a glance, and two clicks to one job.

A header names the connection (redacted), its env (red for production) and a
read-only flag. The overview is one row per queue: its state (running / paused),
the verdict and its reason from `frames.health`, and the counts, coloured; the
most urgent first (failing, stuck, growing, dead letters, paused, ok, idle), then
the biggest, and a line counting each verdict. Click a queue (or pick it) and its
tabs open below:

- Overview: the QueuePanel (counts as chips, pause / resume, the confirmed drain
  and obliterate) and its throughput plot (`plots.throughput`, the last hour);
- Jobs: the JobsView (a page of 100 rows of one state, filter, select, act);
- Job: the JobPanel of the last row clicked in Jobs;
- Dead letters: the DeadLetterPanel;
- Lanes and Repeatables: their tables and buttons;
- Events: the EventsView, its live tail with Stop.

Each tab is built the first time it is shown, so opening the dashboard reads the
counts only: a 100,000-job queue costs a few pipelined commands until a tab asks
for one page of its rows.

Refresh: ONE background loop per dashboard (`refresh_every`, from `%config
EMQMagics.refresh_s`) re-reads the overview and the open queue's counts and lanes;
the header says "updated 2 s ago". The counts are read once a refresh (the
overview, its verdicts and the open queue's panel share them), of the queues the
connection's directory knows: a refresh sends no SCAN, whatever else the database
holds. Rescan finds the queues again; the directory also does, in the background, at
most once a minute (`directory.py`). It waits while a confirmation is open (a drain,
an obliterate gate, a remove), so a count the operator is reading does not move
under the button. The grids of jobs are re-read by their own buttons and after
each action, never under a selection. The loop stops when the dashboard is
closed, when a Dashboard for the same connection is built again (re-running the
cell), and at interpreter exit; the owned panels' threads (the events tail) stop
with it. The loop writes only into the dashboard's own widgets.
"""

from __future__ import annotations

import html
import io
import threading
import time
from collections.abc import Iterator

import ipywidgets as w
import pandas as pd
import redis

from .. import frames, health, plots
from ..connector import Connection
from ..decoding import printable
from ..errors import EMQError
from . import grid as grids
from .base import Panel, interval
from .dead_letters import DeadLetterPanel
from .events_view import EventsView
from .job_grid import JobsView
from .job_panel import JobPanel
from .lanes_view import LanesView, RepeatablesView
from .queue_panel import QueuePanel
from .refresher import Refresher

# the writing buttons of the panels shown as they are (greyed out on a read-only connection)
WRITING_BUTTONS = ("reprocess_button", "remove_button", "reprocess_all_button")
TABS = ("Overview", "Jobs", "Job", "Dead letters", "Lanes", "Repeatables", "Events")
COUNTS = ("pending", "active", "schedule", "dead")
# verdict -> background of its cell (frames.health's words), one colour a severity
VERDICT_COLOURS = {
    "failing": "#ffcecb",
    "stuck": "#ffebe9",
    "growing": "#fff1e5",
    "dead_letters": "#fbefff",
    "paused": "#fff8c5",
    "ok": "#dafbe1",
    "idle": "#f6f8fa",
}
OVERVIEW_COLOURS = {
    "state": "cell.value == 'paused' ? '#fff8c5' : '#dafbe1'",
    "dead": "cell.value > 0 ? '#ffebe9' : 'white'",
    "active": "cell.value > 0 ? '#dafbe1' : 'white'",
    "verdict": " : ".join(f"cell.value == '{v}' ? '{c}'" for v, c in VERDICT_COLOURS.items()) + " : 'white'",
}
OVERVIEW_WIDTHS = {
    "state": 80,
    "verdict": 80,
    "pending": 96,
    "active": 80,
    "schedule": 88,
    "dead": 80,
    "lanes": 64,
    "repeatables": 96,
    "why": 360,
}


class Dashboard(Panel):
    """Refuses nothing itself: every write is a button of one of its tabs, whose refusal
    (a `ReadOnly` one too) is that tab's status line."""

    title = "dashboard"

    def __init__(
        self, conn: Connection, refresh_every: float = 2.0, auto: bool = True, queue: str | None = None
    ):
        super().__init__()
        self.conn = conn
        self.refresh_every = interval(refresh_every)
        self._lock = threading.RLock()
        # wakes at least once a second to keep "updated N s ago" true; refreshes when due
        self.refresher = Refresher(
            "emq-dashboard-refresh",
            min(1.0, self.refresh_every),
            self._tick,
            self._auto_failed,
            stop_on_error=True,
        )
        self.updated_at: float | None = None
        self.refreshes = 0
        self.overview = pd.DataFrame()
        self.q: str | None = None
        self.parts: dict[str, Panel] = {}
        self.plot: w.Image | None = None

        self.grid = grids.grid(
            _overview_frame(pd.DataFrame()),
            colours=OVERVIEW_COLOURS,
            widths=OVERVIEW_WIDTHS,
            index_px=180,
            most_rows=10,
        )
        self.grid.on_cell_click(self._clicked)
        self.picker = w.Dropdown(
            options=[], description="open queue", value=None, style={"description_width": "auto"}
        )
        self._quiet = False  # True while the refresh replaces the picker's options
        self.picker.observe(self._picked, names="value")
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        # a refresh reads the queues known; this finds them again (SCAN)
        self.rescan_button = w.Button(
            description="Rescan", icon="search", tooltip="find the queues on the server again"
        )
        self.rescan_button.on_click(lambda _: self.rescan())
        self.auto = w.ToggleButton(
            value=False,
            icon="clock",
            layout=w.Layout(width="auto"),
            description=f"Auto-refresh every {self.refresh_every:g} s",
        )
        self.auto.observe(lambda ch: self._auto(ch["new"]), names="value")
        self.updated = w.HTML()
        self.summary = w.HTML()
        self.queue_title = w.HTML()
        self.tabs = w.Tab(children=[], layout=w.Layout(display="none"))
        self.tabs.observe(lambda ch: self._show(ch["new"]), names="selected_index")
        self.children = [
            self.summary,
            self.grid,
            w.HBox(
                [self.picker, self.refresh_button, self.rescan_button, self.auto, self.updated],
                layout=w.Layout(align_items="center"),
            ),
            self.queue_title,
            self.tabs,
            self.status,
        ]
        self.refresh()
        self._register("*")
        if queue is not None:
            self.open_queue(queue)
        if auto:
            self.auto.value = True

    # -- the header ------------------------------------------------------------------
    def _heading_html(self) -> str:
        badge = "padding:1px 8px;border-radius:10px;font-weight:600"
        if self.env == "production":
            env = f'<span style="background:#cf222e;color:white;{badge}">production</span>'
        elif self.env:
            name = html.escape(printable(self.env))
            env = f'<span style="background:#57606a;color:white;{badge}">{name}</span>'
        else:
            env = f'<span style="background:#eaeef2;color:#57606a;{badge}">env not set</span>'
        ro = (
            f' <span style="background:#fff8c5;color:#7d4e00;{badge}">read-only</span>'
            if self.read_only
            else ""
        )
        return (
            f'<div style="font-size:14px;line-height:28px"><b>EchoMQ queues</b> &nbsp;{env}{ro}'
            f' &nbsp;<span style="color:#57606a">connected: {html.escape(self.label)}</span></div>'
        )

    # -- reading ------------------------------------------------------------------------
    @property
    def confirming(self) -> bool:
        """True while a confirmation is open in a tab: the refresh loop waits."""
        queue = self.parts.get("Overview")
        if isinstance(queue, QueuePanel) and (
            queue.drain_shown is not None or queue.obliterate_shown is not None
        ):
            return True
        jobs_view = self.parts.get("Jobs")
        return isinstance(jobs_view, JobsView) and jobs_view.confirming

    def refresh(self) -> None:
        """Read the overview again (counts and verdicts, most urgent first), then the
        open queue's counts (the same read) and lanes; an error is shown in the status
        and the loop keeps on. The queues are the ones the connection knows (no SCAN:
        see `rescan`)."""
        with self._lock:
            try:
                counts = frames.counts(self.conn)
                frame = self._read_overview(counts)
            except (EMQError, redis.RedisError) as exc:
                self.say(f"error: {exc}", "error")
                return
            if not frame.equals(self.overview):
                self.overview = frame
                grids.refill(self.grid, _overview_frame(frame), OVERVIEW_COLOURS, most_rows=10)
            names = list(frame.index)
            if list(self.picker.options) != names:
                self._quiet = True
                try:
                    self.picker.options = names
                    self.picker.value = self.q if self.q in names else None
                finally:
                    self._quiet = False
            self.summary.value = self._summary_html()
            panel = self.parts.get("Overview")
            if isinstance(panel, QueuePanel):
                panel.refresh(counts)
            lanes = self.parts.get("Lanes")
            if lanes is not None:
                lanes.refresh()
            self.updated_at = time.monotonic()
            self.refreshes += 1
            self._say_updated()

    def rescan(self) -> None:
        """Find the queues on the server again (a whole SCAN sweep), then refresh."""
        try:
            found = frames.queues(self.conn, rescan=True)
        except (EMQError, redis.RedisError) as exc:
            self.say(f"error: {exc}", "error")
            return
        self.refresh()
        self.say(f"rescanned: {len(found):,} queue{'' if len(found) == 1 else 's'} on the server", "ok")

    def _read_overview(self, counts: pd.DataFrame) -> pd.DataFrame:
        """The counts with each queue's verdict and why, in the health frame's order
        (most urgent first, then the biggest)."""
        if counts.empty:
            return counts
        verdicts = frames.health(self.conn, counts=counts)
        return counts.loc[verdicts.index].join(verdicts[["verdict", "why"]])

    def _summary_html(self) -> str:
        frame = self.overview
        if frame.empty:
            return "<div><i>no queues on this server yet</i></div>"
        total = {c: int(frame[c].sum()) for c in COUNTS}
        paused = int(frame["paused"].sum())
        parts = [f"{len(frame):,} queues", *(f"{n:,} {c}" for c, n in total.items())]
        if paused:
            parts.append(f"{paused:,} paused")
        verdicts = health.summary(frame) if "verdict" in frame.columns else ""
        said = f"<div>{html.escape(verdicts)}</div>" if verdicts else ""
        return f"<div>{' · '.join(parts)}</div>{said}"

    def _say_updated(self) -> None:
        if self.updated_at is None:
            self.updated.value = ""
            return
        ago = time.monotonic() - self.updated_at
        when = "just now" if ago < 1 else f"{ago:.0f} s ago"
        if self.refresher.running and self.confirming:
            note = "refresh waits while a confirmation is open"
        elif self.refresher.running:
            note = f"every {self.refresh_every:g} s"
        else:
            note = "auto-refresh off"
        self.updated.value = f'<small style="color:#57606a">updated {when} · {note}</small>'

    def facts(self) -> list[tuple[str, object]]:
        return [
            ("queues", len(self.overview)),
            ("open", self.q or "none"),
            ("auto-refresh", f"every {self.refresh_every:g}s" if self.refresher.running else "off"),
        ]

    def _shown(self) -> Iterator[str]:
        # the saved-notebook view: the summary, the overview as a table, the open queue
        yield self.summary.value
        if not self.overview.empty:
            yield overview_table(self.overview)
        if self.queue_title.value:
            yield self.queue_title.value

    # -- one queue's tabs -------------------------------------------------------------
    def _picked(self, change: dict) -> None:
        if not self._quiet and change["new"] is not None and change["new"] != self.q:
            self.open_queue(change["new"])

    def _clicked(self, event: dict) -> None:
        q = grids.clicked_id(event, self.overview)
        if q is not None:
            self.open_queue(q)

    def open_queue(self, q: str) -> None:
        """Show queue `q`'s tabs (closing the previous queue's), on its Overview."""
        with self._lock:
            self._close_parts()
            self.q = q
            if self.picker.value != q and q in self.picker.options:
                self.picker.value = q
            self.queue_title.value = (
                f'<div style="font-size:14px;margin-top:8px"><b>queue {html.escape(q)}</b></div>'
            )
            self.tabs.children = [w.VBox() for _ in TABS]
            self.tabs.titles = TABS
            self.tabs.layout.display = "flex"
            if self.tabs.selected_index == 0:
                self._show(0)
            else:
                self.tabs.selected_index = 0

    def tab(self, name: str) -> Panel | None:
        """Select tab `name` (built when first shown) and answer its panel."""
        self.tabs.selected_index = TABS.index(name)
        return self.parts.get(name)

    def _show(self, index: int | None) -> None:
        if index is None or self.q is None or not self.tabs.children:
            return
        name = TABS[index]
        if name in self.parts or name == "Job":
            return
        box = self.tabs.children[index]
        try:
            part = self._build(name, self.q)
        except (EMQError, redis.RedisError) as exc:
            self.say(f"error: {exc}", "error")
            return
        if not part.owned:
            part.heading.layout.display = "none"  # the dashboard's header names the connection
            # a panel built before read-only sessions existed may not name its writing buttons
            part.writes(
                *(
                    b
                    for b in (getattr(part, n, None) for n in WRITING_BUTTONS)
                    if isinstance(b, w.Button) and b not in part._writing
                )
            )
        self.parts[name] = part
        extra = [self.plot] if name == "Overview" and self.plot is not None else []
        box.children = [part, *extra]

    def _build(self, name: str, q: str) -> Panel:
        c = self.conn
        if name == "Overview":
            self.plot = self._plot(q)
            return QueuePanel(c, q, refresh_every=self.refresh_every, owned=True)
        if name == "Jobs":
            return JobsView(c, q, state=_busiest(self.overview, q), on_open=self.open_job, owned=True)
        if name == "Dead letters":
            return DeadLetterPanel(c, q)
        if name == "Lanes":
            return LanesView(c, q, owned=True)
        if name == "Repeatables":
            return RepeatablesView(c, q, owned=True)
        if name == "Events":
            return EventsView(c, q, owned=True)
        raise KeyError(name)

    def open_job(self, job_id: str) -> JobPanel | None:
        """Put job `job_id`'s JobPanel in the Job tab (the Jobs tab stays selected)."""
        if self.q is None:
            return None
        index = TABS.index("Job")
        old = self.parts.pop("Job", None)
        if old is not None:
            old.close()
        panel = JobPanel(self.conn, self.q, job_id)
        panel.heading.layout.display = "none"
        self.parts["Job"] = panel
        self.tabs.children[index].children = [panel]
        titles = list(TABS)
        titles[index] = f"Job {printable(job_id)[:24]}"
        self.tabs.titles = tuple(titles)
        return panel

    def _plot(self, q: str) -> w.Image | None:
        """The last hour's throughput plot as a PNG (None, and a status line, when it
        cannot be drawn)."""
        try:
            figure = plots.throughput(self.conn, q, since="1h")
            png = io.BytesIO()
            figure.savefig(png, format="png", dpi=80, bbox_inches="tight")
        except Exception as exc:  # a plot that cannot be drawn is one status line, not a crash
            self.say(f"no throughput plot: {type(exc).__name__}: {exc}", "error")
            return None
        return w.Image(value=png.getvalue(), format="png", layout=w.Layout(max_width="720px"))

    def _close_parts(self) -> None:
        for part in self.parts.values():
            part.close()
        self.parts = {}
        self.plot = None

    # -- the one refresh loop -------------------------------------------------------
    def _auto(self, on: bool) -> None:
        self.stop_threads()
        if on:
            self.refresher.start()
        self._say_updated()

    def _tick(self) -> None:
        """One wake of the refresh: a refresh when one is due and no confirmation is
        open (a refresh would redraw it away), else only the "updated" line."""
        due = self.updated_at is None or time.monotonic() - self.updated_at >= self.refresh_every
        if due and not self.confirming:
            self.refresh()
        else:
            self._say_updated()

    def _auto_failed(self, exc: Exception) -> None:
        """A refresh failed: said in the status (never printed into a cell), the toggle off."""
        self.say(f"auto-refresh stopped: {type(exc).__name__}: {exc}", "error")
        self.auto.value = False

    def stop_threads(self) -> None:
        self.refresher.stop()

    def close(self) -> None:
        self.auto.value = False
        self.stop_threads()
        self._close_parts()
        super().close()


def _busiest(overview: pd.DataFrame, q: str) -> str:
    """The state the Jobs tab opens on: dead when there are dead jobs, else the first
    non-empty set, else pending."""
    if q not in overview.index:
        return "pending"
    row = {s: int(n) for s, n in overview.loc[q, list(COUNTS)].to_dict().items()}
    if row["dead"]:
        return "dead"
    return next((s for s in COUNTS if row[s]), "pending")


def _overview_frame(counts: pd.DataFrame) -> pd.DataFrame:
    """The overview as the grid shows it: state first, then the verdict, the counts, why."""
    cols = [
        "state",
        *(["verdict"] if "verdict" in counts.columns else []),
        *COUNTS,
        "lanes",
        "repeatables",
        *(["why"] if "why" in counts.columns else []),
    ]
    if counts.empty:
        return pd.DataFrame(
            {
                c: pd.Series(dtype="int64" if c in (*COUNTS, "lanes", "repeatables") else "object")
                for c in cols
            },
            index=pd.Index([], name="queue"),
        )
    out = counts.copy()
    out["state"] = out["paused"].map({True: "paused", False: "running"})
    for c in (*COUNTS, "lanes", "repeatables"):
        out[c] = out[c].astype("int64")
    return out[cols]


def overview_table(counts: pd.DataFrame) -> str:
    """The overview as a static HTML table: numbers right-aligned, thousands separated."""
    view = _overview_frame(counts)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ("queue", *view.columns))
    rows = []
    for q, row in view.iterrows():
        cells = [f"<td>{html.escape(printable(str(q)))}</td>"]
        for c in view.columns:
            v = row[c]
            if c in (*COUNTS, "lanes", "repeatables"):
                cells.append(f'<td style="text-align:right">{int(v):,}</td>')
            else:
                cells.append(f"<td>{html.escape(printable('' if v is None else str(v)))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="emq"><tr>{head}</tr>{"".join(rows)}</table>'

"""Dashboard: every queue at a glance, the most urgent first, and two clicks to one job.

A header names the connection (redacted), its env (red for production) and a
read-only flag. The overview is one row per queue, most urgent first
(`health.by_severity`: failing, stuck, growing, dead letters, paused, ok, idle, then
the biggest), its columns in the order they are read: the verdict in its colour, the
queue, why (wrapped onto the row's two lines), the counts, the state, the rank (`#`),
then the rarely-used lanes and repeatables. Above it one chip a verdict with its count;
each chip is a toggle, and the chips switched on filter the overview to their verdicts,
together with a box that filters by name (a line says how many queues match). The queue
picker is a search box (the browser lists the names matching what is typed; a whole name
opens the queue). The browser sorts by any column (the verdict column by severity); it
starts sorted by `#`. Click a queue (or pick it) and its tabs open right under the
overview, which is short enough that they show on the first screen; its row is the one
highlighted wherever a refresh ranks it or a sort puts it (none while a filter hides
it), never a row position:

- Overview: the QueuePanel (counts as chips, pause / resume, the confirmed drain
  and obliterate) and its throughput plot (`plots.throughput`, the last hour);
- Jobs: the JobsView (a page of 100 rows of one state, filter, select, act);
- Job: the JobPanel of the last row clicked in Jobs;
- Dead letters: the DeadLetterPanel;
- Lanes and Repeatables: their tables and buttons;
- Events: the EventsView, its live tail with Stop;
- Audit: the AuditView, the queue's audit trail (who did what, when, why).

Each tab is built the first time it is shown, so opening the dashboard reads the
counts only: a 100,000-job queue costs a few pipelined commands until a tab asks
for one page of its rows.

Refresh: ONE background loop per dashboard (`refresh_every`, from `%config
EMQMagics.refresh_s`) re-reads the overview and the open queue's counts, lanes and
throughput plot. The counts are read once a refresh (the overview, its verdicts
and the open queue's panel share them), of the queues the connection's directory
knows: a refresh sends no SCAN (Rescan finds the queues again; `directory.py`). A
refresh patches what is shown in place: the grid's changed cells (`grid.patch`: nothing
when nothing changed), the chips, the plot's image; no widget is made, so the browser
keeps its scroll, sort and selection and the kernel's widgets stay as many however long
it runs. The freshness line ("updated 2 s ago") keeps its place and height.

It refreshes only while someone looks (`Presence`): not while the page is hidden
or the dashboard scrolled out of sight, not once the page is lost (it died without
its unload step: no beat heard), and not after `IDLE_S` without a touch (a click, a
key, the wheel, the pointer over it), when it shows "paused: click to resume". A lost
page also stops the Events tab's tail until it is heard again: the kernel then
publishes nothing, and a server that culls idle kernels (Voilà's serve line in
docs/dashboard.md) shuts it down. It waits while a confirmation is open (a drain, a
remove), so a count the operator is reading does not move under the button. The
loop stops when the dashboard is closed, when a Dashboard for the same connection is
built again (re-running the cell), and at interpreter exit; the owned panels' threads
(the events tail) stop with it.
"""

from __future__ import annotations

import html
import io
import threading
import time
from collections.abc import Iterator

import ipywidgets as w
import pandas as pd

from .. import frames, health, plots, watching
from ..connector import Connection
from ..decoding import printable
from ..errors import EMQError
from ..settings import Settings
from . import grid as grids
from . import values
from .audit_view import AuditView
from .base import Panel, interval
from .dead_letters import DeadLetterPanel
from .events_view import EventsView
from .job_grid import JobsView
from .job_panel import JobPanel
from .lanes_view import LanesView, RepeatablesView
from .presence import Presence
from .queue_panel import QueuePanel

TABS = ("Overview", "Jobs", "Job", "Dead letters", "Lanes", "Repeatables", "Events", "Audit")
COUNTS = ("pending", "active", "schedule", "dead")
SIZES = (*COUNTS, "lanes", "repeatables")
# no touch for this long and the refresh pauses until a click
IDLE_S = 30 * 60.0
# the open queue's throughput plot is drawn again at most this often
PLOT_EVERY_S = 10.0
# the overview's rows shown at once: short enough that the open queue's tabs below it
# show on the first screen
ROWS = 11
VERDICTS = health.SEVERITY
# the queues whose lane backlog note the summary shows, at most
NOTES_SHOWN = 5


def _vega_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


# the verdict column holds the verdict's severity (so the browser sorts it most urgent
# first) and shows its word on its colour
VERDICT_TEXT = f"{_vega_list([v.replace('_', ' ') for v in VERDICTS])}[cell.value]"
OVERVIEW_COLOURS = {
    "verdict": f"{_vega_list([plots.VERDICT_TINTS[v] for v in VERDICTS])}[cell.value]",
    "state": "cell.value == 'paused' ? '#ddf4ff' : 'white'",
    "dead": "cell.value > 0 ? '#e8dbff' : 'white'",
}
# what an operator reads first, in order: the verdict, the queue and why, then the
# counts; the rarely-used columns last (on a narrow page they are the ones cut). The
# whole grid fits a 1,400 px page; `why` wraps onto its row's two lines.
OVERVIEW_WIDTHS = {
    "verdict": 96,
    "queue": 170,
    "why": 520,
    "pending": 76,
    "active": 64,
    "schedule": 80,
    "dead": 64,
    "state": 68,
    "#": 48,
    "lanes": 56,
    "repeatables": 96,
}
# a row holds two lines of `why`
ROW_PX = 36
COLUMNS = list(OVERVIEW_WIDTHS)
INTEGERS = ("#", "verdict", *SIZES)


class Dashboard(Panel):
    """Refuses nothing itself: every write is a button of one of its tabs, whose refusal
    (a `ReadOnly` one too) is that tab's status line. `confirm_above` is the count
    above which a bulk button of a tab asks first (`%config EMQMagics.confirm_above`)."""

    title = "dashboard"
    heading_title = "EchoMQ queues"

    def __init__(
        self,
        conn: Connection,
        refresh_every: float = 2.0,
        auto: bool = True,
        queue: str | None = None,
        confirm_above: int = Settings.confirm_above,
    ):
        super().__init__()
        self.conn = conn
        self.add_class("emq-dashboard")
        self.refresh_every = interval(refresh_every)
        self.confirm_above = confirm_above
        self._lock = threading.RLock()
        # wakes at least once a second to keep "updated N s ago" true; refreshes when due
        self.every(min(1.0, self.refresh_every), "emq-dashboard-refresh", stop_on_error=True, tick=self._tick)
        self.updated_at: float | None = None
        self.touched_at = time.monotonic()
        self.plotted_at = 0.0
        self.refreshes = 0
        self.overview = pd.DataFrame()
        # the last refresh's look: its counts and the notes beside them
        self.look = watching.Look(pd.DataFrame(), {}, pd.DataFrame())
        self.shown_frame = _overview_frame(pd.DataFrame())
        self.q: str | None = None
        self.parts: dict[str, Panel] = {}
        # the Events tab's tail was stopped because the page was lost
        self.events_held = False

        self.presence = Presence()
        self.presence.observe(lambda _: self.touch(), names="touched")
        self.presence.observe(self._seen, names="visible")
        self.presence.observe(lambda ch: values.set_zone(ch["new"]), names="zone")
        self.grid = grids.grid(
            self.shown_frame,
            colours=OVERVIEW_COLOURS,
            widths=OVERVIEW_WIDTHS,
            most_rows=ROWS,
            texts={"verdict": VERDICT_TEXT},
            sort="#",
            row_px=ROW_PX,
            wrap=("why",),
            row_header=False,
        )
        self.grid.on_cell_click(self._clicked)
        # the browser sorted the rows again (a refresh re-ranked them, a header was clicked):
        # the highlight goes back to the open queue's row
        self.grid.observe(lambda _: self._highlight(), names="_visible_rows")
        self.name_filter = w.Text(
            placeholder="filter queue names",
            continuous_update=False,
            layout=w.Layout(width="220px"),
        )
        self.name_filter.observe(lambda _: self._filtered(), names="value")
        # one toggle a verdict ("3 failing"): those switched on filter the overview
        self.verdict_chips = {v: _chip(v) for v in VERDICTS}
        self._on: set[str] = set()
        for v, chip in self.verdict_chips.items():
            chip.on_click(lambda _, v=v: self.toggle_verdict(v))
        self.shown_line = w.HTML()
        self.chips_box = w.HBox(
            [*self.verdict_chips.values(), self.shown_line],
            layout=w.Layout(flex_flow="row wrap", align_items="center", min_height="30px"),
        )
        # the queue picker searches (the browser's list of the names that match what is
        # typed) instead of listing every queue; the options are the names as shown,
        # `_named` maps each back to the queue
        self.picker = w.Combobox(
            options=[],
            placeholder="open queue: type to search",
            ensure_option=False,
            layout=w.Layout(width="260px"),
        )
        self._named: dict[str, str] = {}
        self._quiet = False  # True while the refresh replaces the picker's options
        self.picker.observe(self._picked, names="value")
        self.refresh_button = w.Button(description="Refresh", layout=w.Layout(width="auto"))
        self.refresh_button.on_click(lambda _: self._by_hand(self.refresh))
        # a refresh reads the queues known; this finds them again (SCAN)
        self.rescan_button = w.Button(
            description="Rescan", tooltip="find the queues on the server again", layout=w.Layout(width="auto")
        )
        self.rescan_button.on_click(lambda _: self._by_hand(self.rescan))
        self.auto = w.ToggleButton(
            value=False,
            layout=w.Layout(width="auto"),
            description=f"Auto-refresh every {self.refresh_every:g} s",
        )
        self.auto.observe(lambda ch: self._auto(ch["new"]), names="value")
        self.resume_button = w.Button(
            description="paused: click to resume",
            button_style="warning",
            layout=w.Layout(width="auto", display="none"),
        )
        self.resume_button.on_click(lambda _: self.resume())
        self.updated = w.HTML()
        # the freshness line keeps its place and height whatever it says (or the resume
        # button beside it), so the grid below never moves
        self.freshness = w.HBox(
            [self.updated, self.resume_button],
            layout=w.Layout(align_items="center", height="30px", min_height="30px", overflow="hidden"),
        )
        self.freshness.add_class("emq-freshness")
        self.summary = w.HTML()
        self.queue_title = w.HTML()
        self.plot = w.Image(format="png", layout=w.Layout(max_width="760px"))
        # the tabs' boxes are made once: opening a queue fills them, so a click on a
        # queue makes its panels and nothing of the strip around them
        self.tabs = w.Tab(children=[w.VBox() for _ in TABS], titles=TABS, layout=w.Layout(display="none"))
        self.tabs.observe(lambda ch: self._show(ch["new"]), names="selected_index")
        self.children = [
            self.summary,
            self.chips_box,
            w.HBox(
                [self.name_filter, self.picker, self.refresh_button, self.rescan_button, self.auto],
                layout=w.Layout(align_items="center", flex_flow="row wrap"),
            ),
            self.freshness,
            self.grid,
            self.queue_title,
            self.tabs,
            self.status,
            self.presence,
        ]
        self.refresh()
        self._register("*")
        if queue is not None:
            self.open_queue(queue)
        if auto:
            self.auto.value = True

    # -- reading ------------------------------------------------------------------------
    @property
    def confirming(self) -> bool:
        """True while a confirmation is open in a tab: the refresh loop waits."""
        return any(part.confirming for part in self.parts.values())

    def refresh(self) -> None:
        """Read the overview again (counts and verdicts) and patch what is shown: the grid's
        changed rows, the summary, the open queue's counts and lanes, its plot when due.
        An error is shown in the status and the loop keeps on. The queues are the ones
        the connection knows (no SCAN: see `rescan`)."""
        with self._lock:
            try:
                look = health.look(self.conn)
            except EMQError as exc:
                self.say(f"error: {exc}", "error")
                return
            self.overview, self.look = _overview_of(look), look
            self._show_overview()
            self._named = {printable(str(q)): str(q) for q in self.overview.index}
            names = sorted(self._named)
            if list(self.picker.options) != names:
                self._quiet = True
                try:
                    self.picker.options = names
                finally:
                    self._quiet = False
            panel = self.parts.get("Overview")
            if isinstance(panel, QueuePanel):
                panel.refresh(look)
            lanes = self.parts.get("Lanes")
            if lanes is not None:
                lanes.refresh()
            if self.q is not None and time.monotonic() - self.plotted_at >= PLOT_EVERY_S:
                self._draw_plot()
            self._title_queue()
            self.updated_at = time.monotonic()
            self.refreshes += 1
            self._say_updated()

    def _show_overview(self) -> None:
        """The overview as the grid and the summary show it (the name filter applied)."""
        shown = self._matching(self.overview)
        self.shown_frame = _overview_frame(shown, self.overview)
        grids.patch(self.grid, self.shown_frame)
        self._highlight()
        self.summary.value = self._summary_html(shown)

    def _highlight(self) -> None:
        """The highlighted row is the open queue's, wherever the browser shows it (none
        when the filter hides it or it is gone): never a row position."""
        with self._lock:
            grids.select_id(self.grid, self.shown_frame, self.q)

    @property
    def verdicts_on(self) -> list[str]:
        """The verdicts whose chip is switched on, most urgent first (none: all shown)."""
        return [v for v in VERDICTS if v in self._on]

    def toggle_verdict(self, verdict: str) -> None:
        """A chip's click: switch its verdict's filter on or off, and show the overview so."""
        self._on ^= {verdict}
        _paint_chip(self.verdict_chips[verdict], verdict, verdict in self._on)
        self._filtered()

    def _matching(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The queues the filters let through: the name holds what is typed (any case)
        and, when a chip is on, the verdict is one of those switched on."""
        typed = self.name_filter.value.strip().lower()
        on = set(self.verdicts_on)
        if frame.empty or not (typed or on):
            return frame
        keep = [
            (not typed or typed in str(q).lower()) and (not on or verdict in on)
            for q, verdict in zip(frame.index, frame["verdict"], strict=True)
        ]
        return frame[keep]

    def _filtered(self) -> None:
        self.touch()
        with self._lock:
            self._show_overview()

    def rescan(self) -> None:
        """Find the queues on the server again (a whole SCAN sweep), then refresh."""
        try:
            found = frames.queues(self.conn, rescan=True)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.refresh()
        self.say(f"rescanned: {len(found):,} queue{'' if len(found) == 1 else 's'} on the server", "ok")

    def _summary_html(self, shown: pd.DataFrame) -> str:
        frame = self.overview
        if frame.empty:
            return "<div><i>no queues on this server yet</i></div>"
        total = {c: int(frame[c].sum()) for c in COUNTS}
        paused = int(frame["paused"].sum())
        parts = [f"{len(frame):,} queues", *(f"{n:,} {c}" for c, n in total.items())]
        if paused:
            parts.append(f"{paused:,} paused")
        self._count_chips(frame)
        self._say_shown(shown)
        return f"<div>{' · '.join(parts)}</div>{self._lane_notes()}"

    def _say_shown(self, shown: pd.DataFrame) -> None:
        """How many queues the overview shows, and which filters chose them."""
        every = len(self.overview)
        typed = self.name_filter.value.strip()
        said = [f"“{html.escape(printable(typed))}”"] if typed else []
        said += [v.replace("_", " ") for v in self.verdicts_on]
        text = f"all {every:,} shown"
        if said:
            text = f"{len(shown):,} of {every:,} queues match {' and '.join(said)}"
        self.shown_line.value = f'<span style="color:#57606a">{text}</span>'

    def _count_chips(self, frame: pd.DataFrame) -> None:
        """Each verdict's chip says how many queues have it; a chip with none is hidden
        unless it is on (so it can be switched off again)."""
        counted = frame["verdict"].value_counts() if "verdict" in frame.columns else pd.Series()
        for v, chip in self.verdict_chips.items():
            n = int(counted[v]) if v in counted.index else 0
            label = f"{n:,} {v.replace('_', ' ')}"
            if chip.description != label:
                chip.description = label
            display = "flex" if n or v in self._on else "none"
            if chip.layout.display != display:
                chip.layout.display = display

    def _lane_notes(self) -> str:
        """A line for each queue whose pending count holds a lane backlog from a pass over
        its lanes rather than this refresh (`watching.watched`: a queue of many lanes is
        summed a page a refresh), at most `NOTES_SHOWN`."""
        said = {q: self.look.note(q) for q in self.look.notes}
        lines = [
            f"<div><small>pending of <b>{html.escape(printable(q))}</b>: {html.escape(note)}</small></div>"
            for q, note in list(said.items())[:NOTES_SHOWN]
        ]
        if len(said) > NOTES_SHOWN:
            lines.append(
                f"<div><small>and {len(said) - NOTES_SHOWN:,} more queues of many lanes</small></div>"
            )
        return f'<div style="color:#57606a">{"".join(lines)}</div>' if lines else ""

    def _say_updated(self) -> None:
        if self.updated_at is None:
            self.updated.value = ""
            return
        ago = time.monotonic() - self.updated_at
        when = "just now" if ago < 1 else f"{ago:,.0f} s ago"
        if self.running and self.resume_button.layout.display != "none":
            note = f"paused after {IDLE_S / 60:.0f} min without a touch"
        elif self.running and not self.presence.seen:
            note = "paused while nobody looks"
        elif self.running and self.confirming:
            note = "refresh waits while a confirmation is open"
        elif self.running:
            note = f"every {self.refresh_every:g} s"
        else:
            note = "auto-refresh off"
        self.updated.value = (
            f'<small style="color:#57606a">updated {when} ({values.clock()}) · {note}</small>'
        )

    def facts(self) -> list[tuple[str, object]]:
        return [
            ("queues", len(self.overview)),
            ("open", self.q or "none"),
            ("auto-refresh", f"every {self.refresh_every:g}s" if self.running else "off"),
        ]

    def _shown(self) -> Iterator[str]:
        # the saved-notebook view: the summary, the verdicts counted, how many are shown,
        # the overview as a table, the open queue
        yield self.summary.value
        if not self.overview.empty:
            counted = self.overview["verdict"].value_counts()
            chips = (plots.verdict_chip(v, int(counted[v])) for v in VERDICTS if v in counted.index)
            yield f"<div>{''.join(chips)} {self.shown_line.value}</div>"
            yield overview_table(self._matching(self.overview), self.overview)
        if self.queue_title.value:
            yield self.queue_title.value

    # -- one queue's tabs -------------------------------------------------------------
    def _picked(self, change: dict) -> None:
        """A queue's name typed or picked whole opens it (a part of a name opens nothing)."""
        q = self._named.get(change["new"])
        if not self._quiet and q is not None and q != self.q:
            self.touch()
            self.open_queue(q)

    def _clicked(self, event: dict) -> None:
        self.touch()
        q = grids.clicked_id(event, self.shown_frame)
        if q is not None and q != self.q:
            self.open_queue(q)

    def _title_queue(self) -> None:
        q = self.q
        if q is None:
            self.queue_title.value = ""
            return
        said = ""
        if q not in self.overview.index:  # no key of it left: not a row of the overview
            gone = "is gone: no key of it is on the server"
            said = f' <span class="emq-gone" style="color:#9a6700">{gone}</span>'
        elif "verdict" in self.overview.columns:
            row = self.overview.loc[q]
            said = (
                f" &nbsp;{plots.verdict_chip(str(row['verdict']))} {html.escape(printable(str(row['why'])))}"
            )
        self.queue_title.value = (
            f'<div style="font-size:14px;margin-top:8px"><b>queue {html.escape(printable(q))}</b>{said}</div>'
        )

    def open_queue(self, q: str) -> None:
        """Show queue `q`'s tabs (closing the previous queue's), on its Overview."""
        with self._lock:
            self._close_parts()
            self.q = q
            if self._named.get(self.picker.value) != q and q in self._named.values():
                self.picker.value = printable(q)
            self._highlight()
            self._title_queue()
            for box in self.tabs.children:
                box.children = ()
            if tuple(self.tabs.titles) != TABS:
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
        self.touch()
        name = TABS[index]
        if name in self.parts or name == "Job":
            return
        box = self.tabs.children[index]
        try:
            part = self._build(name, self.q)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        part.heading.layout.display = "none"  # the dashboard's header names the connection
        self.parts[name] = part
        extra = [self.plot] if name == "Overview" else []
        box.children = [part, *extra]

    def _build(self, name: str, q: str) -> Panel:
        c, above = self.conn, self.confirm_above
        if name == "Overview":
            self._draw_plot()
            return QueuePanel(c, q, refresh_every=self.refresh_every, owned=True)
        if name == "Jobs":
            return JobsView(
                c, q, state=_busiest(self.overview, q), on_open=self.open_job, owned=True, confirm_above=above
            )
        if name == "Dead letters":
            return DeadLetterPanel(c, q, owned=True, confirm_above=above)
        if name == "Lanes":
            return LanesView(c, q, owned=True)
        if name == "Repeatables":
            return RepeatablesView(c, q, owned=True)
        if name == "Events":
            return EventsView(c, q, owned=True)
        if name == "Audit":
            return AuditView(c, q, owned=True)
        raise KeyError(name)

    def open_job(self, job_id: str) -> JobPanel | None:
        """Put job `job_id`'s JobPanel in the Job tab (the Jobs tab stays selected)."""
        if self.q is None:
            return None
        self.touch()
        index = TABS.index("Job")
        old = self.parts.pop("Job", None)
        if old is not None:
            old.close()
        panel = JobPanel(self.conn, self.q, job_id)
        panel.heading.layout.display = "none"
        self.parts["Job"] = panel
        self.tabs.children[index].children = [panel]
        titles = list(TABS)
        shown = printable(job_id)
        titles[index] = f"Job …{shown[-10:]}" if len(shown) > 12 else f"Job {shown}"
        self.tabs.titles = tuple(titles)
        return panel

    def _draw_plot(self) -> None:
        """Draw the open queue's last hour of throughput into the one image (a status
        line when it cannot be drawn)."""
        if self.q is None:
            return
        self.plotted_at = time.monotonic()
        try:
            figure = plots.throughput(self.conn, self.q, since="1h", tz=values.zone())
            png = io.BytesIO()
            figure.savefig(png, format="png", dpi=80)
        except EMQError as exc:
            self.say(f"no throughput plot: {exc}", "error")
            return
        self.plot.value = png.getvalue()

    def _close_parts(self) -> None:
        for part in self.parts.values():
            part.close()
        self.parts = {}
        self.events_held = False

    # -- the one refresh loop, while someone looks ---------------------------------------
    def touch(self) -> None:
        """The operator did something: the idle clock starts again (a paused refresh resumes)."""
        self.touched_at = time.monotonic()
        if self.resume_button.layout.display != "none":
            self.resume_button.layout.display = "none"

    def _by_hand(self, action: object) -> None:
        self.touch()
        action()  # type: ignore[operator]

    def resume(self) -> None:
        """The "paused: click to resume" button: refresh now, and on."""
        self.touch()
        self.refresh()

    @property
    def idle(self) -> bool:
        """True when nobody touched the dashboard for `IDLE_S`."""
        return time.monotonic() - self.touched_at >= IDLE_S

    def _seen(self, change: dict) -> None:
        if change["new"] and self.running:
            self.updated_at = None  # due at the next wake
        self._say_updated()

    def _auto(self, on: bool) -> None:
        if on != self.running:
            self.touch()
            self.start() if on else self.stop()
        self._say_updated()

    def show_running(self) -> None:
        self.auto.value = self.running
        self._say_updated()

    def _tick(self) -> None:
        """One wake of the refresh: a refresh when one is due, someone looks, and no
        confirmation is open (a refresh would redraw it away); else only the line."""
        if self.idle:
            if self.resume_button.layout.display == "none":
                self.resume_button.layout.display = "flex"
                self._say_updated()
            return
        if self.presence.lost:
            self._hold_events()  # the page is gone: nothing of it publishes
            return
        self._resume_events()
        if not self.presence.visible:
            return
        due = self.updated_at is None or time.monotonic() - self.updated_at >= self.refresh_every
        if due and not self.confirming:
            self.refresh()
        else:
            self._say_updated()

    def _hold_events(self) -> None:
        """Stop the Events tab's tail while the page is lost (each event it shows is a
        message the kernel publishes)."""
        events = self.parts.get("Events")
        if isinstance(events, EventsView) and events.running:
            events.stop()
            self.events_held = True

    def _resume_events(self) -> None:
        """The page is heard again: the tail held while it was lost starts again."""
        events = self.parts.get("Events")
        if self.events_held and isinstance(events, EventsView):
            events.start()
        self.events_held = False

    def close(self) -> None:
        self.auto.value = False
        self.stop_threads()
        self._close_parts()
        super().close()


def _chip(verdict: str) -> w.Button:
    """A verdict's toggle: its count and word on the verdict's tint (off) or its colour
    with a tick (on: the overview shows only the verdicts switched on)."""
    chip = w.Button(
        description=verdict.replace("_", " "),
        tooltip=f"show only the {verdict.replace('_', ' ')} queues (and those of any other chip on)",
        layout=w.Layout(width="auto", height="26px", display="none", margin="1px 4px 1px 0"),
    )
    chip.add_class("emq-verdict-chip")
    _paint_chip(chip, verdict, False)
    return chip


def _paint_chip(chip: w.Button, verdict: str, on: bool) -> None:
    chip.style.button_color = plots.VERDICT_COLOURS[verdict] if on else plots.VERDICT_TINTS[verdict]
    chip.style.text_color = "white" if on else plots.VERDICT_COLOURS[verdict]
    chip.style.font_weight = "bold"
    chip.icon = "check" if on else ""


def _busiest(overview: pd.DataFrame, q: str) -> str:
    """The state the Jobs tab opens on: dead when there are dead jobs, else the first
    non-empty set, else pending."""
    if q not in overview.index:
        return "pending"
    row = {s: int(n) for s, n in overview.loc[q, list(COUNTS)].to_dict().items()}
    if row["dead"]:
        return "dead"
    return next((s for s in COUNTS if row[s]), "pending")


def _overview_of(look: watching.Look) -> pd.DataFrame:
    """The look's counts with each queue's verdict and why, in the health frame's order
    (most urgent first, then the biggest)."""
    if look.counts.empty:
        return look.counts
    return look.counts.loc[look.frame.index].join(look.frame[["verdict", "why"]])


def _overview_frame(shown: pd.DataFrame, every: pd.DataFrame | None = None) -> pd.DataFrame:
    """The overview as the grid holds it: one row per queue in name order (so a refresh
    patches rows in place), `#` its rank among `every` queue (most urgent first), the
    verdict as its severity (shown as its word), the state, the counts, why."""
    if shown.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="int64" if c in INTEGERS else "object") for c in COLUMNS},
            index=pd.Index([], name="queue"),
        )
    every = shown if every is None else every
    rank = {q: i + 1 for i, q in enumerate(every.index)}
    rows = shown.to_dict("index")
    names = sorted(rows, key=str)
    last = len(VERDICTS) - 1
    columns: dict[str, list] = {c: [] for c in COLUMNS}
    for q in names:
        r = rows[q]
        verdict = r.get("verdict")
        columns["#"].append(rank[q])
        columns["verdict"].append(VERDICTS.index(verdict) if verdict in VERDICTS else last)
        columns["queue"].append(printable(str(q)))
        columns["state"].append("paused" if r["paused"] else "running")
        columns["why"].append(str(r.get("why", "")))
        for c in SIZES:
            columns[c].append(int(r[c]))
    return pd.DataFrame(
        {c: pd.Series(v, dtype="int64" if c in INTEGERS else "object") for c, v in columns.items()},
    ).set_axis(pd.Index(names, name="queue"))


def overview_table(shown: pd.DataFrame, every: pd.DataFrame | None = None) -> str:
    """The overview as a static HTML table, most urgent first: numbers right-aligned,
    thousands separated, each verdict in its colour."""
    view = _overview_frame(shown, every).sort_values("#", kind="stable")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in view.columns)
    rows = []
    for _, row in view.iterrows():
        cells = []
        for c in view.columns:
            v = row[c]
            if c == "verdict":
                cells.append(f"<td>{plots.verdict_chip(VERDICTS[int(v)])}</td>")
            elif c in ("#", *SIZES):
                cells.append(f'<td style="text-align:right">{int(v):,}</td>')
            else:
                cells.append(f"<td>{html.escape(printable('' if v is None else str(v)))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="emq"><tr>{head}</tr>{"".join(rows)}</table>'

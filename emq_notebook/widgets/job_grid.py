"""JobsView: one state of a queue as a sortable grid, a page of 100 rows at a time,
filtered by an error or payload glob, and the actions that apply to that state on
exactly the selected rows, each id's outcome shown.

The dead set unfiltered is read in the server's order (`frames.dead_page`, one bounded
call a page, from a place in that order): the newest death first by default, or the
oldest first, or the most attempts first (among the `defaults.MAX_BUDGET` newest), as
the order box says; First, Previous, Next and Last page through that order, and a page
costs the same at the end of a 100,000-job set as at its start. The grid's own header
menu sorts the one page it holds. A click on a row shows that job whole below the grid
(`JobDetail`: the whole error, payload and logs, times in the viewer's zone).

Any other listing (another state, or a filter) is one `triage.find` a page, from a
place on the server (the set, the score and the member after the last row shown):
Next reads on from the place the page ended, Previous from the place the page before
it started, so a page costs one page of rows wherever it is in a 100,000-job set, and
a filter never reads again from the start. The grid shows the ids whole. A filtered
view knows how many matched so far: it says "at least N", and Count all walks the
rest (on the server, a page at a time) for the whole number.

The actions apply where they mean something: Reprocess on dead jobs only, Remove on
every state but active (a job in flight belongs to its worker). Each restates the count
it acts on ("Remove 12 selected…"); both are greyed out, saying why, while nothing is
selected and while they work; Remove always asks first, Reprocess
above `confirm_above` jobs (`base.Confirmation`), naming the count and the
connection, and a confirm acts only on the ids it named (the selection changed
since: it asks again).
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable
from typing import Any

import ipywidgets as w
import pandas as pd

from .. import admin, frames, triage, watching
from ..connector import Connection
from ..decoding import printable, shown_id, visible
from ..errors import EMQError
from ..keyspace import STATES, queue_key
from ..settings import Settings
from . import grid as grids
from .base import Confirmation, Panel, Question, chip, counted
from .job_panel import JobDetail

PAGE = 100
COLOURS = {
    "last_error": "cell.value != '' ? '#fff5f5' : 'white'",
    "failures": "cell.value > 0 ? '#fff5f5' : 'white'",
}
# the time of death (the set's score) first, then what the job died of
WIDTHS = {
    "state": 72,
    "at": 200,
    "attempts": 84,
    "last_error": 300,
    "payload": 300,
    "failures": 84,
    "stalled": 76,
    "group": 84,
    "priority": 80,
    "progress": 84,
}
# the grid's columns, what a dead job is read by first
SHOWN = list(WIDTHS)
# the id column: as wide as the longest id shown, within these
ID_PX = (120, grids.INDEX_MAX_PX)


def shown_page(page: pd.DataFrame) -> pd.DataFrame:
    """A page as its grid holds it: the id a column (first), the rows named by their place
    on the page (the row header is hidden). Every full page then has the same rows, so a
    page turn is `grid.patch`'s one message of changed rows; a data replacement (new row
    names) makes the browser resize and redraw the grid once for each column."""
    out = page[SHOWN].copy()
    out.insert(0, "id", [printable(str(shown_id(i))) for i in page.index])
    out.index = pd.RangeIndex(len(out), name="row")
    return out


def tally(outcome: dict[str, str]) -> str:
    """`2 reprocessed, 1 gone`: how many ids got each answer."""
    return ", ".join(f"{n} {word}" for word, n in sorted(Counter(outcome.values()).items()))


# the states each action applies to
REPROCESS_STATES = ("dead",)
REMOVE_STATES = ("pending", "schedule", "dead")
# matches Count all reads a call
COUNT_PAGE = 1000
# the orders the server pages the dead set in (`frames.dead_page`), as the order box says them
ORDERS = (
    ("newest death first", "time"),
    ("oldest death first", "oldest"),
    ("most attempts first", "attempts"),
)
ORDER_WORDS = {key: label for label, key in ORDERS}
# a character of the grid's 12px text at most, for a column that must show its text whole
CELL_CHAR_PX = 8


class DeadPages:
    """Where a listing of a queue's dead set stands in an order the server keeps
    (`frames.dead_page`): the place each page shown so far started, the last one this
    page's. Next starts where this page ended (a page may hold fewer than asked when its
    ids are long: the call's byte budget), Previous where the page before began, Last at
    the final page of what the order ranked."""

    def __init__(self, page: int = PAGE):
        self.page = page
        self.starts = [0]
        self.shown = 0
        self.total = 0
        self.ranked = 0

    @property
    def start(self) -> int:
        return self.starts[-1]

    @property
    def more(self) -> bool:
        return self.start + self.shown < self.ranked

    def read(self, conn: Connection, q: str, by: str) -> pd.DataFrame:
        """This page, in order `by` (`time`, `oldest`, `attempts`). Refuses what
        `frames.dead_page` refuses."""
        page = frames.dead_page(conn, q, self.start, self.page, by=by)
        self.total, self.ranked, self.shown = page.attrs["total"], page.attrs["ranked"], len(page)
        return page

    def first(self) -> None:
        self.starts, self.shown = [0], 0

    def next(self) -> None:
        if self.more:
            self.starts.append(self.start + self.shown)

    def previous(self) -> None:
        """The page before: where it began, or (after Last) a page's length back."""
        if len(self.starts) > 1:
            was = self.starts.pop()
            if self.start < was - self.page:
                self.starts.append(was - self.page)

    def last(self) -> None:
        """The final page of what was ranked (the oldest deaths, newest first)."""
        at = max(0, self.ranked - self.page)
        if at > self.start:
            self.starts.append(at)

    def label(self) -> str:
        """`rows 1–100 of 100,000 dead` (the order box names the order); `of the 1,000
        newest of 100,000 dead` when the order ranked fewer than the set holds."""
        if not self.total:
            return "no dead jobs"
        if not self.shown:
            return f"no more dead jobs (of {self.total:,})"
        first, last = self.start + 1, self.start + self.shown
        of = f"{self.total:,}"
        if self.ranked < self.total:
            of = f"the {self.ranked:,} newest of {of}"
        return f"rows {first:,}–{last:,} of {of} dead"


class JobsView(Panel):
    """Refuses nothing itself: each action is a verb whose answer per id is shown; on a
    read-only connection Reprocess and Remove are greyed out and never send."""

    def __init__(
        self,
        conn: Connection,
        q: str,
        state: str = "dead",
        page: int = PAGE,
        on_open: Callable[[str], object] | None = None,
        owned: bool = False,
        confirm_above: int = Settings.confirm_above,
    ):
        super().__init__(owned=owned)
        self.conn, self.q, self.title, self.page = conn, q, q, page
        self.on_open = on_open
        self.confirm_above = confirm_above
        # where each page shown so far started (None: the start); the last is this page's
        self.starts: list[triage.Place | None] = [None]
        # the dead set unfiltered: its place in the server's order
        self.pages = DeadPages(page)
        self.next_place: triage.Place | None = None
        self.offset = 0
        self.total = 0
        self.counted: int | None = None  # every match of the filter, once counted
        self.more = False
        self.busy = False
        self.frame = _empty()
        self.state = w.ToggleButtons(options=list(STATES), value=state, style={"button_width": "90px"})
        self.state.observe(lambda _: self.first_page(), names="value")
        self.order = w.Dropdown(
            options=ORDERS,
            value="time",
            description="order",
            tooltip="the order the server pages the dead set in",
            layout=w.Layout(width="250px"),
            style={"description_width": "40px"},
        )
        self.order.observe(lambda _: self.first_page(), names="value")
        self.error_glob = w.Text(
            placeholder="error glob, e.g. SMTP 5*",
            description="error",
            layout=w.Layout(width="300px"),
            style={"description_width": "50px"},
        )
        self.payload_glob = w.Text(
            placeholder="payload glob, e.g. *@example.com*",
            description="payload",
            layout=w.Layout(width="340px"),
            style={"description_width": "60px"},
        )
        self.filter_button = w.Button(description="Filter")
        self.filter_button.on_click(lambda _: self.first_page())
        self.clear_button = w.Button(description="Clear")
        self.clear_button.on_click(lambda _: self.clear_filter())
        self.first_button = w.Button(description="◀◀ First", layout=w.Layout(width="auto"))
        self.first_button.on_click(lambda _: self.first_page())
        self.last_button = w.Button(description="Last ▶▶", layout=w.Layout(width="auto"))
        self.last_button.on_click(lambda _: self.last_page())
        self.prev_button = w.Button(description="◀ Previous")
        self.prev_button.on_click(lambda _: self.turn(-1))
        self.next_button = w.Button(description="Next ▶")
        self.next_button.on_click(lambda _: self.turn(+1))
        self.refresh_button = w.Button(description="Refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.count_button = w.Button(
            description="Count all",
            tooltip="count every match on the server, a page at a time",
            layout=w.Layout(display="none"),
        )
        self.count_button.on_click(lambda _: self.count_all())
        self.page_label = w.HTML()
        self.grid = grids.grid(
            shown_page(self.frame), colours=COLOURS, widths=WIDTHS, most_rows=14, index_px=0
        )
        self.grid.header_visibility = "column"
        self.grid.observe(lambda _: self._show_selection(), names="selections")
        self.grid.on_cell_click(self._clicked)
        self.selection_label = w.HTML()
        self.reprocess_button = w.Button(
            description="Reprocess selected", button_style="primary", layout=w.Layout(width="auto")
        )
        self.reprocess_button.on_click(lambda _: self.reprocess_selected())
        self.remove_button = w.Button(
            description="Remove selected…", button_style="danger", layout=w.Layout(width="auto")
        )
        self.remove_button.on_click(lambda _: self.ask_remove())
        self.confirmation = Confirmation(self)
        self.outcome = w.HTML()
        self.results: dict[str, str] = {}
        self.detail = JobDetail()
        self.writes(self.reprocess_button, self.remove_button)
        self.children = [
            self.state,
            w.HBox([self.error_glob, self.payload_glob, self.filter_button, self.clear_button]),
            w.HBox(
                [
                    self.order,
                    self.first_button,
                    self.prev_button,
                    self.next_button,
                    self.last_button,
                    self.refresh_button,
                    self.count_button,
                    self.page_label,
                ],
                layout=w.Layout(align_items="center", flex_flow="row wrap"),
            ),
            self.grid,
            w.HBox(
                [self.reprocess_button, self.remove_button, self.selection_label],
                layout=w.Layout(align_items="center"),
            ),
            self.confirmation.view,
            self.outcome,
            self.status,
            self.detail,
        ]
        self.refresh()

    # -- reading ----------------------------------------------------------------------
    @property
    def filtering(self) -> bool:
        return bool(self.error_glob.value or self.payload_glob.value)

    @property
    def server_order(self) -> bool:
        """True when the page is read in the server's order of the dead set (`DeadPages`):
        the dead state, unfiltered (a filter reads in the set's order, oldest first)."""
        return self.state.value == "dead" and not self.filtering

    @property
    def confirming(self) -> bool:
        """True while a confirmation is open (the owner's refresh waits)."""
        return self.confirmation.open

    @property
    def confirm_text(self) -> w.HTML:
        return self.confirmation.text

    @property
    def confirm_remove_button(self) -> w.Button:
        return self.confirmation.confirm_button

    def first_page(self) -> None:
        self.starts, self.offset, self.counted = [None], 0, None
        self.pages.first()
        self.refresh()

    def last_page(self) -> None:
        """The final page of the server's order (the oldest deaths, newest first); a
        filtered listing has no last page short of reading every match: it stays."""
        if self.server_order:
            self.pages.last()
            self.refresh()

    def clear_filter(self) -> None:
        self.error_glob.value = self.payload_glob.value = ""
        self.first_page()

    def turn(self, step: int) -> None:
        """The next page (from where this one ended) or the previous one (from where it began)."""
        if self.server_order:
            (self.pages.next if step > 0 else self.pages.previous)()
        elif step > 0 and self.more:
            self.starts.append(self.next_place)
            self.offset += len(self.frame)
        elif step < 0 and len(self.starts) > 1:
            self.starts.pop()
            self.offset = max(0, self.offset - self.page)
        self.refresh()

    def _busy(self, on: bool, what: str = "reading…") -> None:
        self.busy = on
        for b in (
            self.first_button,
            self.last_button,
            self.prev_button,
            self.next_button,
            self.refresh_button,
            self.filter_button,
            self.count_button,
        ):
            b.disabled = on
        if on:
            self.page_label.value = f'<i style="color:#57606a">{html.escape(what)}</i>'

    def refresh(self) -> None:
        """Read the current page again, from where it starts (the selection is cleared:
        its rows may have moved). A page of the server's order is one bounded call: the
        buttons are not greyed out for it (each change is a message the page redraws for)."""
        slow = not self.server_order
        if slow:
            self._busy(True)
        try:
            page, note = self._read()
        except EMQError as exc:
            self._busy(False)
            self.say(f"error: {exc}", "error")
            return
        if slow:
            self._busy(False)
        self.frame = page
        grids.patch(self.grid, shown_page(page))
        self._fit_widths()
        self.grid.selections = []
        self.page_label.value = note
        paged = self.server_order
        self.prev_button.disabled = len(self.pages.starts if paged else self.starts) <= 1
        self.first_button.disabled = self.prev_button.disabled
        self.next_button.disabled = not self.more
        self.last_button.disabled = not self.more
        self.last_button.layout.display = self.first_button.layout.display = "flex" if paged else "none"
        self.order.layout.display = "flex" if self.state.value == "dead" else "none"
        self.order.disabled = not paged
        self.order.tooltip = (
            "the order the server pages the dead set in"
            if paged
            else "a filtered listing reads in the set's order (the oldest death first)"
        )
        if self.detail.job_id is not None and self.detail.job_id not in page.index:
            self.detail.clear()
        self.count_button.layout.display = (
            "flex"
            if self.filtering and self.counted is None and (self.more or len(self.starts) > 1)
            else "none"
        )
        self.confirmation.cancel()
        self._show_selection()

    def _fit_widths(self) -> None:
        """The id and time columns as wide as their longest text (an id whole, a zone's
        name never cut); sent only when a width changed (the browser redraws the grid)."""
        data = self.grid.data

        def longest(column: str) -> int:
            return CELL_CHAR_PX * max((len(str(v)) for v in data[column]), default=0) + 16

        want = {
            **WIDTHS,
            "id": min(ID_PX[1], max(ID_PX[0], longest("id"))),
            "at": max(WIDTHS["at"], longest("at")),
        }
        if self.grid.column_widths != want:
            self.grid.column_widths = self.grid.column_px = want
            self.grid.layout.width = grids.width(data, want, 0)

    def _size(self) -> tuple[int, str]:
        """How many jobs the state holds, a lane's backlog counted as pending, and what a
        reader must know of that figure ("" when exact). The lanes are summed as a
        watching look sums them (`watching.watched`: one call, however many lanes), so a
        page turn never walks a million lanes."""
        state = self.state.value
        pipe = self.conn.pipeline()
        pipe.zcard(queue_key(self.q, state))
        pipe.scard(queue_key(self.q, "groups"))
        size, known = pipe.execute()
        if state != "pending" or not known:
            return size, ""
        counted = watching.watched(self.conn, {self.q: known})[self.q]
        return size + counted.jobs, counted.note()

    def _find(self, limit: int, after: triage.Place | None) -> pd.DataFrame:
        return triage.find(
            self.conn,
            self.q,
            state=self.state.value,
            error=self.error_glob.value or None,
            payload=self.payload_glob.value or None,
            limit=limit,
            after=after,
        )

    def _read(self) -> tuple[pd.DataFrame, str]:
        state = self.state.value
        if self.server_order:
            by = self.order.value
            page = self.pages.read(self.conn, self.q, by)
            self.more, self.offset, self.total = self.pages.more, self.pages.start, self.pages.total
            return page, html.escape(self.pages.label())
        page = self._find(self.page, self.starts[-1])
        self.next_place = page.attrs.get("next")
        # one match past the page says whether a next page exists (its row is not kept)
        self.more = self.next_place is not None and len(self._find(1, self.next_place)) > 0
        first, last = self.offset + 1, self.offset + len(page)
        if not self.filtering:
            self.total, note = self._size()
            about = f" · {html.escape(visible(note))}" if note else ""
            if not self.total and not page.empty:  # a first pass over many lanes in progress
                return page, f"rows {first:,}–{last:,} {state}{about}"
            if not self.total:
                return page, f"no {state} jobs"
            if page.empty:
                return page, f"no more {state} jobs (of {self.total:,}){about}"
            return page, f"rows {first:,}–{last:,} of {self.total:,} {state}{about}"
        if page.empty:
            return page, f"no {state} job matches · searched on the server"
        if self.counted is not None:
            total = f" of {self.counted:,}"
        elif self.more:
            total = f" of at least {last + 1:,}"
        else:
            total = f" of {last:,}"
        return page, f"matches {first:,}–{last:,}{total} · found on the server"

    def count_all(self) -> int | None:
        """Count every match of the filter on the server, a page at a time (rows are read
        and dropped), and say it."""
        self._busy(True, "counting every match on the server…")
        n, after = 0, None
        try:
            while True:
                found = self._find(COUNT_PAGE, after)
                n += len(found)
                after = found.attrs.get("next")
                if len(found) < COUNT_PAGE or after is None:
                    break
                self.page_label.value = f'<i style="color:#57606a">counting… {n:,} so far</i>'
        except EMQError as exc:
            self._busy(False)
            self.say(f"error: {exc}", "error")
            return None
        self._busy(False)
        self.counted = n
        self.refresh()
        return n

    def _show_selection(self) -> None:
        ids = self.selected()
        state = self.state.value
        self.reprocess_button.layout.display = "flex" if state in REPROCESS_STATES else "none"
        self.remove_button.layout.display = "flex" if state in REMOVE_STATES else "none"
        n = len(ids)
        self.reprocess_button.description = counted("Reprocess", n, "selected")
        self.remove_button.description = counted("Remove", n, "selected…")
        why = "reading…" if self.busy else None if ids else "select rows first"
        self.off(self.reprocess_button, why)
        self.off(self.remove_button, why)
        self.selection_label.value = (
            chip(f"{len(ids):,} selected", colour="pending")
            if ids
            else "<small>select rows (Ctrl/Shift-click for more)</small>"
        )

    def selected(self) -> list[str]:
        """The job ids of the selected rows of this page."""
        return grids.selected_ids(self.grid, self.frame)

    def _clicked(self, event: dict) -> None:
        job_id = grids.clicked_id(event, self.frame)
        if job_id is None:
            return
        self.open_detail(job_id)
        if self.on_open is not None:
            self.on_open(job_id)

    def open_detail(self, job_id: str) -> dict[str, str] | None:
        """Show job `job_id` whole below the grid (`JobDetail`); answers its row, None when
        it is gone since the page was read (the pane says so)."""
        return self.detail.show(self.conn, self.q, job_id)

    def facts(self) -> list[tuple[str, object]]:
        return [
            ("queue", self.q),
            ("state", self.state.value),
            ("rows shown", len(self.frame)),
            ("selected", len(self.selected())),
        ]

    # -- acting -------------------------------------------------------------------
    def _show_outcome(self, outcome: dict[str, str]) -> None:
        self.results = outcome
        rows = "".join(
            f"<tr><td><code>{html.escape(printable(i))}</code></td><td>{html.escape(word)}</td></tr>"
            for i, word in outcome.items()
        )
        self.outcome.value = (
            f'<table class="emq"><tr><th>id</th><th>outcome</th></tr>{rows}</table>' if outcome else ""
        )

    def _question(self, doing: str, ids: list[str], act: Callable[[list[str]], Any], **kw: Any) -> Question:
        def changed() -> tuple[Question, str] | None:
            now = self.selected()
            if now == ids:
                return None
            return self._question(doing, now, act, **kw), "The selection changed. "

        sample = ", ".join(printable(i) for i in ids[:3]) + (", …" if len(ids) > 3 else "")
        return Question(
            doing,
            len(ids),
            f"selected {self.state.value} jobs of {self.q} ({sample})",
            lambda n: act(ids),
            changed=changed,
            **kw,
        )

    def _act(self, verb: Callable[..., dict[str, str]], ids: list[str]) -> dict[str, str] | None:
        for button in (self.reprocess_button, self.remove_button):
            self.off(button, "an action is running")
        try:
            outcome = self.attempt(verb, self.conn, self.q, ids, done=lambda r: tally(r))
        finally:
            self._show_selection()
        if not isinstance(outcome, dict):
            return None
        self.refresh()
        self._show_outcome(outcome)
        return outcome

    def reprocess_selected(self) -> dict[str, str] | None:
        """Dead -> pending for exactly the selected ids: `{id: "reprocessed" | "gone" |
        "not_dead"}`; above `confirm_above` it asks first (answers None then)."""
        if not self.writable("reprocess"):
            return None
        ids = self.selected()
        if not ids:
            self.say("select the rows to reprocess first", "refused")
            return None
        question = self._question(
            "Reprocess", ids, lambda chosen: self._act(admin.reprocess_jobs, chosen), note="Each runs again."
        )
        return self.confirmation.guard(question, self.confirm_above)

    def ask_remove(self) -> None:
        """State how many selected jobs a remove would delete, and show Confirm."""
        if not self.writable("remove"):
            return
        ids = self.selected()
        if not ids:
            self.say("select the rows to remove first", "refused")
            return
        self.confirmation.ask(
            self._question(
                "Remove",
                ids,
                lambda chosen: self._act(admin.remove_jobs, chosen),
                note="Their rows and logs are deleted.",
                always=True,
            )
        )

    def remove_selected(self) -> dict[str, str] | None:
        """Confirm the open remove question: removes exactly the ids it named; when the
        selection changed since, it names the new ones and waits for another confirm."""
        return self.confirmation.confirm()


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype="int64" if c in frames._INTS else "object") for c in frames.COLUMNS},
        index=pd.Index([], name="id"),
    )

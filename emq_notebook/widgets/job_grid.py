"""JobsView: one state of a queue as a sortable grid, a page of 100 rows at a time,
filtered by an error or payload glob, and Reprocess / Remove on exactly the
selected rows, each id's outcome shown.

A page is one `frames.snapshot(limit=, offset=)` call, so a 100,000-job set costs
a page of row reads, never the set. For pending, the flat backlog comes first, then
each lane, paged as one order. A filter is one `triage.find` (the server examines
the set in bounded calls and sends only the matches), asked for the matches up to
the end of the page shown and one more, to know whether a next page exists.

Remove asks first, naming the count and the connection; its confirm removes only
the ids the confirmation named, and asks again when the selection changed since.
Reprocess (`admin.reprocess_jobs`, one bulk call) needs no confirmation: it moves
dead jobs back and deletes nothing.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable

import ipywidgets as w
import pandas as pd

from .. import admin, frames, triage
from ..connector import Connection
from ..decoding import printable
from ..errors import EMQError
from ..keyspace import STATES, lane_key, queue_key
from . import grid as grids
from .base import Panel, chip

PAGE = 100
COLOURS = {
    "last_error": "cell.value != '' ? '#fff5f5' : 'white'",
    "failures": "cell.value > 0 ? '#fff5f5' : 'white'",
}
WIDTHS = {
    "state": 72,
    "last_error": 300,
    "payload": 300,
    "attempts": 84,
    "failures": 84,
    "stalled": 76,
    "at": 150,
    "group": 84,
    "priority": 80,
    "progress": 84,
}
# the grid's columns, what a dead job is read by first
SHOWN = list(WIDTHS)


def tally(outcome: dict[str, str]) -> str:
    """`2 reprocessed, 1 gone`: how many ids got each answer."""
    return ", ".join(f"{n} {word}" for word, n in sorted(Counter(outcome.values()).items()))


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
    ):
        super().__init__(owned=owned)
        self.conn, self.q, self.title, self.page = conn, q, q, page
        self.on_open = on_open
        self.offset = 0
        self.total = 0
        self.more = False
        self.frame = _empty()
        self.state = w.ToggleButtons(options=list(STATES), value=state, style={"button_width": "90px"})
        self.state.observe(lambda _: self.first_page(), names="value")
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
        self.filter_button = w.Button(description="Filter", icon="filter")
        self.filter_button.on_click(lambda _: self.first_page())
        self.clear_button = w.Button(description="Clear")
        self.clear_button.on_click(lambda _: self.clear_filter())
        self.prev_button = w.Button(description="Previous", icon="chevron-left")
        self.prev_button.on_click(lambda _: self.turn(-1))
        self.next_button = w.Button(description="Next", icon="chevron-right")
        self.next_button.on_click(lambda _: self.turn(+1))
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.page_label = w.HTML()
        self.grid = grids.grid(self.frame[SHOWN], colours=COLOURS, widths=WIDTHS, most_rows=14)
        self.grid.observe(lambda _: self._show_selection(), names="selections")
        self.grid.on_cell_click(self._clicked)
        self.selection_label = w.HTML()
        self.reprocess_button = w.Button(
            description="Reprocess selected",
            button_style="primary",
            icon="redo",
            layout=w.Layout(width="auto"),
        )
        self.reprocess_button.on_click(lambda _: self.reprocess_selected())
        self.remove_button = w.Button(
            description="Remove selected…", button_style="danger", icon="trash", layout=w.Layout(width="auto")
        )
        self.remove_button.on_click(lambda _: self.ask_remove())
        self.confirm_text = w.HTML()
        self.confirm_remove_button = w.Button(
            description="Confirm remove", button_style="danger", layout=w.Layout(width="auto")
        )
        self.confirm_remove_button.on_click(lambda _: self.remove_selected())
        self.cancel_button = w.Button(description="Cancel")
        self.cancel_button.on_click(lambda _: self._hide_confirm())
        self.confirm_row = w.HBox(
            [self.confirm_remove_button, self.cancel_button], layout=w.Layout(display="none")
        )
        # the ids the remove confirmation named
        self.remove_shown: list[str] | None = None
        self.outcome = w.HTML()
        self.results: dict[str, str] = {}
        self.writes(self.reprocess_button, self.remove_button, self.confirm_remove_button)
        self.children = [
            self.state,
            w.HBox([self.error_glob, self.payload_glob, self.filter_button, self.clear_button]),
            w.HBox(
                [self.prev_button, self.next_button, self.refresh_button],
                layout=w.Layout(align_items="center"),
            ),
            self.page_label,
            self.grid,
            w.HBox(
                [self.reprocess_button, self.remove_button, self.selection_label],
                layout=w.Layout(align_items="center"),
            ),
            self.confirm_text,
            self.confirm_row,
            self.outcome,
            self.status,
        ]
        self.refresh()

    # -- reading ----------------------------------------------------------------------
    @property
    def filtering(self) -> bool:
        return bool(self.error_glob.value or self.payload_glob.value)

    @property
    def confirming(self) -> bool:
        """True while the remove confirmation is open (the owner's refresh waits)."""
        return self.remove_shown is not None

    def first_page(self) -> None:
        self.offset = 0
        self.refresh()

    def clear_filter(self) -> None:
        self.error_glob.value = self.payload_glob.value = ""
        self.first_page()

    def turn(self, step: int) -> None:
        self.offset = max(0, self.offset + step * self.page)
        self.refresh()

    def refresh(self) -> None:
        """Read the current page again (the selection is cleared: its rows may have moved)."""
        try:
            if self.filtering:
                page, note = self._filtered()
            else:
                page, note = self._page()
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.frame = page
        grids.refill(self.grid, page[SHOWN], COLOURS, most_rows=14)
        self.page_label.value = note
        self.prev_button.disabled = self.offset == 0
        self.next_button.disabled = not self.more
        self._hide_confirm()
        self._show_selection()

    def _sizes(self) -> list[int]:
        state = self.state.value
        groups = (
            sorted(self.conn.command("SMEMBERS", queue_key(self.q, "groups")) or [])
            if state == "pending"
            else []
        )
        pipe = self.conn.pipeline()
        pipe.zcard(queue_key(self.q, state))
        for g in groups:
            pipe.zcard(lane_key(self.q, g))
        return pipe.execute()

    def _page(self) -> tuple[pd.DataFrame, str]:
        self.total = sum(self._sizes())
        if self.offset and self.offset >= self.total:  # the set shrank under the page
            self.offset = max(0, (self.total - 1) // self.page * self.page)
        page = frames.snapshot(
            self.conn, self.q, states=(self.state.value,), limit=self.page, offset=self.offset
        )
        self.more = self.offset + self.page < self.total
        first, last = self.offset + 1, min(self.offset + self.page, self.total)
        state = self.state.value
        if not self.total:
            return page, f"no {state} jobs"
        return page, f"rows {first:,}–{last:,} of {self.total:,} {state}"

    def _filtered(self) -> tuple[pd.DataFrame, str]:
        error = self.error_glob.value or None
        payload = self.payload_glob.value or None
        state = self.state.value
        want = self.offset + self.page
        found = triage.find(self.conn, self.q, state=state, error=error, payload=payload, limit=want + 1)
        self.more = len(found) > want
        page = found.iloc[self.offset : want]
        if page.empty:
            return page, f"no {state} job matches · searched on the server"
        first, last = self.offset + 1, self.offset + len(page)
        more = " and more" if self.more else ""
        return page, f"matches {first:,}–{last:,}{more} · found on the server"

    def _show_selection(self) -> None:
        ids = self.selected()
        self.selection_label.value = (
            chip(f"{len(ids)} selected", colour="pending")
            if ids
            else "<small>select rows (Ctrl/Shift-click for more)</small>"
        )

    def selected(self) -> list[str]:
        """The job ids of the selected rows of this page."""
        return grids.selected_ids(self.grid, self.frame)

    def _clicked(self, event: dict) -> None:
        job_id = grids.clicked_id(event, self.frame)
        if job_id is not None and self.on_open is not None:
            self.on_open(job_id)

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

    def reprocess_selected(self) -> dict[str, str] | None:
        """Dead -> pending for exactly the selected ids: `{id: "reprocessed" | "gone" | "not_dead"}`."""
        if not self.writable("reprocess"):
            return None
        ids = self.selected()
        if not ids:
            self.say("select the rows to reprocess first", "refused")
            return None
        outcome = self.attempt(admin.reprocess_jobs, self.conn, self.q, ids, done=lambda r: tally(r))
        if not isinstance(outcome, dict):
            return None
        self.refresh()
        self._show_outcome(outcome)
        return outcome

    def ask_remove(self) -> None:
        """State how many selected jobs a remove would delete, and show Confirm."""
        if not self.writable("remove"):
            return
        ids = self.selected()
        if not ids:
            self.say("select the rows to remove first", "refused")
            return
        self._ask_remove(ids)

    def _ask_remove(self, ids: list[str], again: str = "") -> None:
        self.remove_shown = ids
        sample = ", ".join(html.escape(printable(i)) for i in ids[:5]) + (" …" if len(ids) > 5 else "")
        self.confirm_text.value = (
            f"{again}Remove <b>{len(ids):,}</b> selected jobs from <b>{self.q}</b> "
            f"({sample}): their rows and logs are deleted.<br>"
            f"<small>{html.escape(self.connection_line())}</small>"
        )
        self.confirm_row.layout.display = "flex"

    def _hide_confirm(self) -> None:
        self.remove_shown = None
        self.confirm_text.value = ""
        self.confirm_row.layout.display = "none"

    def remove_selected(self) -> dict[str, str] | None:
        """Remove exactly the ids the confirmation named; when the selection changed since,
        name the new ones and wait for another confirm (nothing removed)."""
        if not self.writable("remove"):
            return None
        ids, shown = self.selected(), self.remove_shown
        if shown is None or ids != shown:
            if ids:
                self._ask_remove(ids, again="The selection changed. ")
            self.say("not removed: confirm the selection shown", "refused")
            return None
        self._hide_confirm()
        outcome = self.attempt(admin.remove_jobs, self.conn, self.q, ids, done=lambda r: tally(r))
        if not isinstance(outcome, dict):
            return None
        self.refresh()
        self._show_outcome(outcome)
        return outcome


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype="int64" if c in frames._INTS else "object") for c in frames.COLUMNS},
        index=pd.Index([], name="id"),
    )

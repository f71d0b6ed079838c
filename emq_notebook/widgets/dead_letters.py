"""DeadLetterPanel: the dead set as a table grouped by last_error; select some
or all; reprocess or remove them, bounded, each id answered."""

from __future__ import annotations

from collections import Counter

import ipywidgets as w
import pandas as pd

from .. import admin, frames, jobs
from ..connector import Connection
from ..decoding import printable
from ..errors import Refused
from ..keyspace import queue_key
from .base import Panel, table

PAGE = 500
# the by-error table counts at most this many dead rows (one field each, in batches)
SUMMARY = 10_000


class DeadLetterPanel(Panel):
    def __init__(self, conn: Connection, q: str, page: int = PAGE):
        super().__init__()
        self.conn, self.q, self.title, self.page = conn, q, q, page
        self.summary = w.HTML()
        self.select = w.SelectMultiple(options=[], rows=10, layout=w.Layout(width="100%"))
        self.select_all_button = w.Button(description="Select all")
        self.select_all_button.on_click(lambda _: self.select_all())
        self.reprocess_button = w.Button(description="Reprocess selected", button_style="primary")
        self.reprocess_button.on_click(lambda _: self.reprocess_selected())
        self.remove_button = w.Button(description="Remove selected", button_style="danger")
        self.remove_button.on_click(lambda _: self.remove_selected())
        self.reprocess_all_button = w.Button(description="Reprocess all",
                                             tooltip="every dead job, in bounded calls")
        self.reprocess_all_button.on_click(lambda _: self.reprocess_all())
        self.budget = w.BoundedIntText(value=admin.DEFAULT_BUDGET, min=1, max=1_000_000,
                                       description="budget")
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(visibility="hidden"))
        self.children = [
            w.HTML(f"<b>dead letters of {q}</b>"), self.summary, self.select,
            w.HBox([self.select_all_button, self.reprocess_button, self.remove_button]),
            w.HBox([self.reprocess_all_button, self.budget, self.progress]), self.status,
        ]
        self.refresh()

    def refresh(self) -> None:
        dead = frames.snapshot(self.conn, self.q, states=("dead",), limit=self.page)
        self.frame = dead
        total = self.conn.command("ZCARD", queue_key(self.q, "dead"))
        by_error, counted = self._by_error(dead, total)
        shown = f"showing the oldest {len(dead)}" if total > len(dead) else ""
        if counted < total:
            shown += f"; errors counted over the oldest {counted}"
        self.summary.value = f"<div>{total} dead" + (f" ({shown})" if shown else "") + "</div>" + \
            (table(sorted(by_error.items(), key=lambda kv: -kv[1]), ("last_error", "jobs")) if total else "")
        self.select.options = [(f"{i} — {printable(row.last_error)} (failures {row.failures})", i)
                               for i, row in dead.iterrows()]

    def _by_error(self, dead: pd.DataFrame, total: int) -> tuple[Counter, int]:
        """last_error -> jobs over the whole dead set (its oldest `SUMMARY` when larger),
        not only the page shown, so the table adds up to the total it sits under."""
        if total <= len(dead):
            return Counter(dead["last_error"].fillna("(none)")), len(dead)
        ids = self.conn.command("ZRANGE", queue_key(self.q, "dead"), 0, SUMMARY - 1)
        errors = [e if e is not None else "(none)"
                  for (e,) in frames.rows(self.conn, self.q, ids, ("last_error",))]
        return Counter(errors), len(ids)

    def select_all(self) -> None:
        self.select.value = tuple(v for _, v in self.select.options)

    def reprocess_selected(self) -> None:
        ids = list(self.select.value)
        outcome: Counter = Counter()
        self.progress.max, self.progress.value = max(len(ids), 1), 0
        self.progress.layout.visibility = "visible"
        for n, job_id in enumerate(ids, 1):
            try:
                jobs.reprocess_job(self.conn, self.q, job_id)
                outcome["reprocessed"] += 1
            except Refused as refusal:
                outcome[refusal.reason] += 1
            self.progress.value = n
        self.say(_tally(outcome) or "nothing selected")
        self.refresh()

    def remove_selected(self) -> None:
        ids = list(self.select.value)
        words = self.attempt(admin.remove_jobs, self.conn, self.q, ids,
                             done=lambda r: _tally(Counter(r.values())) or "nothing selected")
        self.refresh()
        return words

    def reprocess_all(self) -> None:
        total = self.conn.command("ZCARD", queue_key(self.q, "dead"))
        self.progress.max, self.progress.value = max(total, 1), 0
        self.progress.layout.visibility = "visible"
        self.attempt(admin.reprocess_dead, self.conn, self.q, budget=self.budget.value,
                     progress=lambda calls, n: setattr(self.progress, "value", n),
                     done=lambda n: f"reprocessed {n} dead jobs")
        self.refresh()


def _tally(counts: Counter) -> str:
    return ", ".join(f"{n} {word}" for word, n in sorted(counts.items()))

"""DeadLetterPanel: the dead set grouped by error, a filter, and bulk actions on
exactly what was previewed.

Filter by an error glob and a payload glob (fnmatch, on the server); the errors view
lists the dead set's signatures (count, last seen) and one may be chosen; Preview
states how many dead jobs match (and sample ids) and keeps their ids; Reprocess
previewed (at an optional rate) and Remove previewed act on those ids only, so a job
that died after the preview is not touched.  The older selection list acts on the
jobs picked by hand.  Every write is a verb whose answer, refusal or error is shown
on the status line; on a read-only connection the writing buttons are greyed out.

Remove previewed and Reprocess all first ask (`base.Confirmation`): the count, the
queue, the connection and its env, and the rate; nothing moves before Confirm.
Reprocess all moves at most the count it stated, oldest death first, at the rate
field's pace (0: as fast as it goes), and asks again when more died meanwhile.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

import ipywidgets as w
import pandas as pd

from .. import admin, frames, triage
from ..connector import Connection
from ..decoding import visible
from ..errors import EMQError
from ..keyspace import queue_key
from .base import Confirmation, Panel, Question, table

PAGE = 500
# the by-error table counts at most this many dead rows (one field each, in batches)
SUMMARY = 10_000
# how many dead jobs a preview holds at most, and how many ids it shows
PREVIEW_LIMIT = 100_000
SAMPLES = 5
EVERY = "(every signature)"


class DeadLetterPanel(Panel):
    def __init__(self, conn: Connection, q: str, page: int = PAGE):
        super().__init__()
        self.conn, self.q, self.title, self.page = conn, q, q, page
        self.frame: Any = None
        self.errors_frame: Any = None
        # the ids the last Preview showed: what the previewed actions act on
        self.previewed: list[str] = []
        # a signature as the dropdown shows it -> the signature
        self._signatures: dict[str, str] = {}
        self.summary = w.HTML()

        self.error_glob = w.Text(placeholder="error glob, e.g. SMTP 5*", description="error")
        self.payload_glob = w.Text(
            placeholder='payload glob, e.g. *"to": "*@example.com"*', description="payload"
        )
        self.filter_button = w.Button(description="Filter", icon="filter")
        self.filter_button.on_click(lambda _: self.refresh())
        self.errors_view = w.HTML()
        self.signature = w.Dropdown(
            options=[EVERY], value=EVERY, description="signature", layout=w.Layout(width="100%")
        )
        self.preview_button = w.Button(description="Preview", icon="eye")
        self.preview_button.on_click(lambda _: self.preview())
        self.preview_view = w.HTML()
        self.rate = w.BoundedFloatText(
            value=0,
            min=0,
            max=1_000_000,
            description="rate /s",
            tooltip="jobs a second for Reprocess previewed and Reprocess all (0: no cap)",
        )
        self.reprocess_preview_button = w.Button(
            description="Reprocess previewed", button_style="primary", disabled=True
        )
        self.reprocess_preview_button.on_click(lambda _: self.reprocess_previewed())
        self.remove_preview_button = w.Button(
            description="Remove previewed", button_style="danger", disabled=True
        )
        self.remove_preview_button.on_click(lambda _: self.remove_previewed())

        self.select = w.SelectMultiple(options=[], rows=10, layout=w.Layout(width="100%"))
        self.select_all_button = w.Button(description="Select all")
        self.select_all_button.on_click(lambda _: self.select_all())
        self.reprocess_button = w.Button(description="Reprocess selected", button_style="primary")
        self.reprocess_button.on_click(lambda _: self.reprocess_selected())
        self.remove_button = w.Button(description="Remove selected", button_style="danger")
        self.remove_button.on_click(lambda _: self.remove_selected())
        self.reprocess_all_button = w.Button(
            description="Reprocess all", tooltip="every dead job, in bounded calls"
        )
        self.reprocess_all_button.on_click(lambda _: self.reprocess_all())
        self.budget = w.BoundedIntText(value=admin.DEFAULT_BUDGET, min=1, max=1_000_000, description="budget")
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(visibility="hidden"))
        self.confirmation = Confirmation(self)
        self.writes(
            self.reprocess_preview_button,
            self.remove_preview_button,
            self.reprocess_button,
            self.remove_button,
            self.reprocess_all_button,
        )
        self.children = [
            w.HTML(f"<b>dead letters of {html.escape(q)}</b>"),
            self.summary,
            w.HBox([self.error_glob, self.payload_glob, self.filter_button]),
            self.errors_view,
            self.signature,
            w.HBox(
                [self.preview_button, self.rate, self.reprocess_preview_button, self.remove_preview_button]
            ),
            self.preview_view,
            self.select,
            w.HBox([self.select_all_button, self.reprocess_button, self.remove_button]),
            w.HBox([self.reprocess_all_button, self.budget, self.progress]),
            self.confirmation.view,
            self.status,
        ]
        self.refresh()

    # -- reading ---------------------------------------------------------------------
    def _glob(self, field: str) -> str | None:
        """The glob typed for `field` ("error" or "payload"); None when the box is empty."""
        return (self.error_glob if field == "error" else self.payload_glob).value or None

    def _globs(self) -> dict[str, str | None]:
        return {f: self._glob(f) for f in ("error", "payload")}

    def refresh(self) -> None:
        """Read the dead set again: the filtered jobs (a page of them), the counts by error
        text and the signatures; a wire fault or a bad glob is shown in the status."""
        try:
            total = int(self.conn.command("ZCARD", queue_key(self.q, "dead")))
            dead = triage.find(
                self.conn,
                self.q,
                state="dead",
                limit=self.page,
                error=self._glob("error"),
                payload=self._glob("payload"),
            )
            errors = triage.errors(self.conn, self.q)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.frame, self.errors_frame = dead, errors
        filtered = any(self._globs().values())
        shown = f"{len(dead)} match the filter" if filtered else f"showing the oldest {len(dead)}"
        if filtered:
            by_error = Counter(dead["last_error"].fillna("(none)"))
        else:  # over the whole dead set (its oldest SUMMARY), not only the page shown
            by_error, counted = self._by_error(dead, total)
            if counted < total:
                shown += f"; errors counted over the oldest {counted}"
        self.summary.value = (
            f"<div>{total} dead"
            + (f" ({shown})" if filtered or total > len(dead) else "")
            + "</div>"
            + (
                table(sorted(by_error.items(), key=lambda kv: -kv[1]), ("last_error", "jobs"))
                if len(dead)
                else ""
            )
        )
        rows = [
            (sig or "(no error)", (int(r["count"]), _when(r["last_seen"]))) for sig, r in errors.iterrows()
        ]
        self.errors_view.value = table(rows, ("signature", "count", "last seen")) if rows else ""
        keep = self.signature.value
        self.signature.options = [EVERY, *(visible(s) for s in errors.index)]
        self._signatures = {visible(s): s for s in errors.index}
        self.signature.value = keep if keep in self.signature.options else EVERY
        self.select.options = [
            (f"{visible(i)} — {visible(row.last_error)} (failures {row.failures})", i)
            for i, row in dead.iterrows()
        ]

    def _by_error(self, dead: pd.DataFrame, total: int) -> tuple[Counter, int]:
        """last_error -> jobs over the whole dead set (its oldest `SUMMARY` when larger),
        not only the page shown, so the table adds up to the total it sits under."""
        if total <= len(dead):
            return Counter(dead["last_error"].fillna("(none)")), len(dead)
        ids = self.conn.command("ZRANGE", queue_key(self.q, "dead"), 0, SUMMARY - 1)
        errors = [
            e if e is not None else "(none)" for (e,) in frames.rows(self.conn, self.q, ids, ("last_error",))
        ]
        return Counter(errors), len(ids)

    def facts(self) -> list[tuple[str, object]]:
        return [("previewed", len(self.previewed))]

    def preview(self) -> None:
        """Find the dead jobs the filter and the chosen signature match; keep their ids and
        show their count and samples. Nothing is written."""
        chosen = self.signature.value
        sig = None if chosen == EVERY else self._signatures.get(chosen, chosen)
        try:
            found = triage.find(
                self.conn,
                self.q,
                state="dead",
                signature=sig,
                limit=PREVIEW_LIMIT,
                error=self._glob("error"),
                payload=self._glob("payload"),
            )
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.previewed = list(found.index)
        self.confirmation.cancel()  # a question about the previous preview no longer holds
        capped = " (the first of more)" if len(found) >= PREVIEW_LIMIT else ""
        what = "every signature" if sig is None else f"signature {sig!r}"
        filters = ", ".join(f"{k} {v!r}" for k, v in self._globs().items() if v) or "no filter"
        more = ", …" if len(found) > SAMPLES else ""
        sample = ", ".join(visible(i) for i in self.previewed[:SAMPLES]) + more
        self.preview_view.value = (
            f"<div>Preview: <b>{len(found):,}</b> dead jobs{capped} — {html.escape(visible(what))}, "
            f"{html.escape(visible(filters))}</div>"
            + (f"<div><small>samples: {html.escape(sample)}</small></div>" if found.size else "")
        )
        self._gate_preview()
        self.say(f"previewed {len(found):,} dead jobs; nothing written")

    def _gate_preview(self) -> None:
        off = not self.previewed or self.read_only
        self.reprocess_preview_button.disabled = off
        self.remove_preview_button.disabled = off

    def _consume_preview(self) -> list[str]:
        ids, self.previewed = self.previewed, []
        self.preview_view.value = ""
        self._gate_preview()
        return ids

    # -- acting on the previewed ids -------------------------------------------------------
    def reprocess_previewed(self) -> Any:
        """Reprocess exactly the previewed ids (at the rate field's pace when it is set)."""
        if not self.writable("reprocess") or not self.previewed:
            return None
        ids = self._consume_preview()
        rate = self.rate.value or None
        self._show_progress(len(ids))
        words = self.attempt(
            admin.reprocess_jobs,
            self.conn,
            self.q,
            ids,
            rate=rate,
            budget=self.budget.value,
            progress=lambda calls, n: self._step(n),
            done=lambda r: f"reprocess previewed: {_tally(Counter(r.values()))}",
        )
        self.refresh()
        return words

    def remove_previewed(self) -> None:
        """Ask to remove exactly the previewed ids; Confirm removes them."""
        if not self.writable("remove") or not self.previewed:
            return
        ids = list(self.previewed)
        self.confirmation.ask(
            Question(
                "Remove",
                len(ids),
                f"previewed dead jobs of {self.q}",
                lambda n: self._remove(ids),
                note="Their rows and logs are deleted.",
            )
        )

    def _remove(self, ids: list[str]) -> Any:
        self._consume_preview()
        words = self.attempt(
            admin.remove_jobs,
            self.conn,
            self.q,
            ids,
            done=lambda r: f"remove previewed: {_tally(Counter(r.values()))}",
        )
        self.refresh()
        return words

    # -- acting on the selection ---------------------------------------------------------------
    def select_all(self) -> None:
        self.select.value = tuple(v for _, v in self.select.options)

    def reprocess_selected(self) -> Any:
        if not self.writable("reprocess"):
            return None
        ids = list(self.select.value)
        self._show_progress(len(ids))
        words = self.attempt(
            admin.reprocess_jobs,
            self.conn,
            self.q,
            ids,
            budget=self.budget.value,
            progress=lambda calls, n: self._step(n),
            done=lambda r: _tally(Counter(r.values())) or "nothing selected",
        )
        self.refresh()
        return words

    def remove_selected(self) -> Any:
        if not self.writable("remove"):
            return None
        ids = list(self.select.value)
        words = self.attempt(
            admin.remove_jobs,
            self.conn,
            self.q,
            ids,
            done=lambda r: _tally(Counter(r.values())) or "nothing selected",
        )
        self.refresh()
        return words

    def _dead_count(self) -> int | None:
        try:
            return int(self.conn.command("ZCARD", queue_key(self.q, "dead")))
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return None

    def reprocess_all(self) -> None:
        """Ask to reprocess every dead job, stating the count and the rate; Confirm moves at
        most that many (oldest death first) at the rate field's pace."""
        if not self.writable("reprocess"):
            return
        total = self._dead_count()
        if total is None:
            return
        if not total:
            self.say(f"no dead jobs in {self.q}; nothing to reprocess")
            return
        rate = self.rate.value or None
        pace = f"At most {rate:g} a second." if rate else "As fast as it goes (rate 0)."
        self.confirmation.ask(
            Question(
                "Reprocess",
                total,
                f"dead jobs of {self.q}",
                lambda n: self._reprocess_all(n, rate),
                recount=self._dead_count,
                note=f"{pace} Each runs again.",
            )
        )

    def _reprocess_all(self, count: int, rate: float | None) -> Any:
        self._show_progress(count)
        moved = self.attempt(
            admin.reprocess_dead,
            self.conn,
            self.q,
            budget=self.budget.value,
            limit=count,
            rate=rate,
            progress=lambda calls, n: self._step(n),
            done=lambda n: f"reprocessed {n} dead jobs",
        )
        self.refresh()
        return moved

    # -- helpers -----------------------------------------------------------------------------
    def _show_progress(self, total: int) -> None:
        self.progress.max, self.progress.value = max(total, 1), 0
        self.progress.layout.visibility = "visible"

    def _step(self, n: int) -> None:
        self.progress.value = min(n, self.progress.max)


def _when(value: Any) -> str:
    return "" if value is None or str(value) == "NaT" else str(value)


def _tally(counts: Counter) -> str:
    return ", ".join(f"{n} {word}" for word, n in sorted(counts.items()))

"""DeadLetterPanel: the dead set grouped by error, a filter, and bulk actions on
exactly what was previewed.

Filter by an error glob and a payload glob (fnmatch, on the server); the errors view
is the one table of errors: the signatures of the whole dead set (`triage.errors`, on
the server in bounded calls), each with its count and when it was last seen, in the
viewer's zone; one may be chosen. Preview states how many dead jobs match (and sample
ids) and keeps their ids; Reprocess previewed (at an optional rate) and Remove
previewed act on those ids only, so a job that died after the preview is not
touched. Move previewed to… moves exactly those ids to another queue (a quarantine,
`transfer.move_jobs`: each once; a new target is created paused), its question stating
what a dry run of it answers; Export previewed writes the jobs the preview's filter and
signature match to a file (`transfer.export_jobs`, a read) and shows its path. The
selection list acts on the jobs picked by hand. It lists the dead set in the server's
order (`job_grid.DeadPages`: the newest death first by default, or the oldest, or the
most attempts), a page at a time through First, Previous, Next and Last; a filtered
list is `triage.find`'s (the set's order, the oldest death first). The job picked last
in it is shown whole below it (`JobDetail`: its error, payload and logs, never cut). Every write is a verb
whose answer, refusal or error is shown on the status line; on a read-only
connection the writing buttons are greyed out.

Every bulk button goes through one guard (`base.Confirmation`): a removal always
asks, a reprocess above `confirm_above` jobs asks, naming the count, the queue, the
connection and its env, and the rate; nothing moves before Confirm. A bulk button
restates the count it acts on ("Reprocess 840 previewed", "Remove 12 selected…"); it is
greyed out, saying why, while there is nothing for it (no preview, no selection, no
dead job) and while one works, whose bar says what it does and how far it got
("reprocessing 840: 300 done"), then what came of it. Reprocess all moves at most the
count it stated, oldest death first, at the rate field's pace (0: as fast as it goes),
and asks again when more died meanwhile.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from .. import admin, defaults, transfer, triage
from ..connector import Connection
from ..decoding import visible
from ..errors import EMQError
from ..keyspace import queue_key
from ..settings import Settings
from .base import Confirmation, Panel, Progress, Question, counted, table
from .grid import CELL_CHARS
from .job_grid import ORDER_WORDS, ORDERS, DeadPages
from .job_panel import JobDetail
from .values import when

PAGE = 500
# how many dead jobs a preview holds at most, and how many ids it shows
PREVIEW_LIMIT = 100_000
SAMPLES = 5
EVERY = "(every signature)"


def _whole() -> w.Layout:
    """A button as wide as its label, never squeezed: a narrow panel wraps the row."""
    return w.Layout(width="auto", flex="0 0 auto")


def _row(children: list[w.Widget]) -> w.HBox:
    return w.HBox(children, layout=w.Layout(flex_flow="row wrap", align_items="center"))


class DeadLetterPanel(Panel):
    def __init__(
        self,
        conn: Connection,
        q: str,
        page: int = PAGE,
        owned: bool = False,
        confirm_above: int = Settings.confirm_above,
    ):
        super().__init__(owned=owned)
        self.conn, self.q, self.title, self.page = conn, q, q, page
        self.confirm_above = confirm_above
        self.total = 0
        self.working = False
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
        self.filter_button = w.Button(description="Filter")
        self.filter_button.on_click(lambda _: self.first_page())
        self.pages = DeadPages(page)
        self.order = w.Dropdown(options=ORDERS, value="time", description="order")
        self.order.observe(lambda _: self.first_page(), names="value")
        self.first_button = w.Button(description="◀◀ First", layout=_whole())
        self.first_button.on_click(lambda _: self.first_page())
        self.prev_button = w.Button(description="◀ Previous", layout=_whole())
        self.prev_button.on_click(lambda _: self.turn(self.pages.previous))
        self.next_button = w.Button(description="Next ▶", layout=_whole())
        self.next_button.on_click(lambda _: self.turn(self.pages.next))
        self.last_button = w.Button(description="Last ▶▶", layout=_whole())
        self.last_button.on_click(lambda _: self.turn(self.pages.last))
        self.page_label = w.HTML()
        self.detail = JobDetail()
        self.errors_view = w.HTML()
        self.signature = w.Dropdown(
            options=[EVERY], value=EVERY, description="signature", layout=w.Layout(width="100%")
        )
        self.preview_button = w.Button(description="Preview")
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
            description="Reprocess previewed", button_style="primary", layout=_whole()
        )
        self.reprocess_preview_button.on_click(lambda _: self.reprocess_previewed())
        self.remove_preview_button = w.Button(
            description="Remove previewed…", button_style="danger", layout=_whole()
        )
        self.remove_preview_button.on_click(lambda _: self.remove_previewed())
        self.target = w.Text(placeholder=f"{q}.quarantine", description="move to")
        self.move_preview_button = w.Button(description="Move previewed to…", layout=_whole())
        self.move_preview_button.on_click(lambda _: self.move_previewed())
        self.export_path = w.Text(placeholder=f"{q}-dead.jsonl", description="export to")
        self.export_button = w.Button(
            description="Export previewed", tooltip=".jsonl, .jsonl.gz or .parquet", layout=_whole()
        )
        self.export_button.on_click(lambda _: self.export_previewed())

        self.select = w.SelectMultiple(options=[], rows=10, layout=w.Layout(width="100%"))
        self.select.observe(self._picked, names="value")
        self.select_all_button = w.Button(description="Select all")
        self.select_all_button.on_click(lambda _: self.select_all())
        self.reprocess_button = w.Button(
            description="Reprocess selected", button_style="primary", layout=_whole()
        )
        self.reprocess_button.on_click(lambda _: self.reprocess_selected())
        self.remove_button = w.Button(description="Remove selected…", button_style="danger", layout=_whole())
        self.remove_button.on_click(lambda _: self.remove_selected())
        self.reprocess_all_button = w.Button(
            description="Reprocess all…",
            tooltip="every dead job, in bounded calls",
            layout=_whole(),
        )
        self.reprocess_all_button.on_click(lambda _: self.reprocess_all())
        self.budget = w.BoundedIntText(
            value=defaults.MOVE_BUDGET, min=1, max=defaults.MAX_MOVE_BUDGET, description="budget"
        )
        self.progress = Progress()
        self.confirmation = Confirmation(self)
        self.writes(
            self.reprocess_preview_button,
            self.remove_preview_button,
            self.move_preview_button,
            self.reprocess_button,
            self.remove_button,
            self.reprocess_all_button,
        )
        self.children = [
            w.HTML(f"<b>dead letters of {html.escape(visible(q))}</b>"),
            self.summary,
            w.HBox([self.error_glob, self.payload_glob, self.filter_button]),
            self.errors_view,
            self.signature,
            _row([self.preview_button, self.rate, self.reprocess_preview_button, self.remove_preview_button]),
            self.preview_view,
            _row([self.target, self.move_preview_button, self.export_path, self.export_button]),
            _row(
                [
                    self.order,
                    self.first_button,
                    self.prev_button,
                    self.next_button,
                    self.last_button,
                    self.page_label,
                ]
            ),
            self.select,
            _row([self.select_all_button, self.reprocess_button, self.remove_button]),
            _row([self.reprocess_all_button, self.budget]),
            self.confirmation.view,
            self.progress.view,
            self.status,
            self.detail,
        ]
        self.refresh()

    # -- reading ---------------------------------------------------------------------
    @property
    def confirming(self) -> bool:
        return self.confirmation.open

    def _glob(self, field: str) -> str | None:
        """The glob typed for `field` ("error" or "payload"); None when the box is empty."""
        return (self.error_glob if field == "error" else self.payload_glob).value or None

    def _globs(self) -> dict[str, str | None]:
        return {f: self._glob(f) for f in ("error", "payload")}

    @property
    def filtering(self) -> bool:
        return any(self._globs().values())

    def first_page(self) -> None:
        self.pages.first()
        self.refresh()

    def turn(self, step: Callable[[], None]) -> None:
        """Another page of the server's order (`DeadPages.next`, `.previous`, `.last`)."""
        step()
        self.refresh()

    def _listed(self) -> tuple[Any, int, str]:
        """The jobs listed, the dead set's size, and what the summary says of the list."""
        if not self.filtering:
            by = self.order.value
            dead = self.pages.read(self.conn, self.q, by)
            self.page_label.value = html.escape(self.pages.label())
            total = self.pages.total
            if not len(dead) or (total <= len(dead) and by != "attempts"):
                return dead, total, ""
            return dead, total, f"{len(dead):,} listed below, {ORDER_WORDS[by]}"
        total = int(self.conn.command("ZCARD", queue_key(self.q, "dead")))
        dead = triage.find(
            self.conn,
            self.q,
            state="dead",
            limit=self.page,
            error=self._glob("error"),
            payload=self._glob("payload"),
        )
        self.page_label.value = "<small>a filtered list: the oldest death first</small>"
        more = dead.attrs.get("next") is not None and len(dead) >= self.page
        shown = f"{len(dead):,}{' or more' if more else ''} match the filter"
        if more:
            shown += f"; the first {len(dead):,} listed below"
        return dead, total, shown

    def refresh(self) -> None:
        """Read the dead set again: its size, the listed jobs (a page of them, in the
        server's order, or those the filter matches) and the signatures of the whole set;
        a wire fault or a bad glob is shown in the status."""
        try:
            dead, total, shown = self._listed()
            errors = triage.errors(self.conn, self.q)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.frame, self.errors_frame, self.total = dead, errors, total
        paged = not self.filtering
        self.order.disabled = not paged
        for button in (self.first_button, self.prev_button):
            button.disabled = not paged or len(self.pages.starts) <= 1
        for button in (self.next_button, self.last_button):
            button.disabled = not paged or not self.pages.more
        if self.detail.job_id is not None and self.detail.job_id not in dead.index:
            self.detail.clear()
        self.summary.value = f"<div>{total:,} dead" + (f" ({shown})" if shown else "") + "</div>"
        rows = [
            (sig or "(no error)", (f"{int(r['count']):,}", when(r["last_seen"])))
            for sig, r in errors.iterrows()
        ]
        self.errors_view.value = (
            f"<div><small>the errors of all {total:,} dead jobs, by signature</small></div>"
            + table(rows, ("signature", "jobs", "last seen"))
            if rows
            else ""
        )
        keep = self.signature.value
        self.signature.options = [EVERY, *(visible(s) for s in errors.index)]
        self._signatures = {visible(s): s for s in errors.index}
        self.signature.value = keep if keep in self.signature.options else EVERY
        self.select.options = [
            (f"{visible(i)} — {_clipped(visible(row.last_error))} (failures {row.failures:,})", i)
            for i, row in dead.iterrows()
        ]
        self._gate()

    def _picked(self, change: dict) -> None:
        """The one job just picked (added to the selection) is shown whole below the list;
        Select all shows none anew."""
        added = [i for i in change["new"] if i not in set(change["old"] or ())]
        if len(added) == 1:
            self.detail.show(self.conn, self.q, added[0])
        self._gate()

    def _gate(self) -> None:
        """Each bulk button restates the count it acts on ("Reprocess 840 previewed"), and
        is greyed out, saying why, while there is nothing for it or while one works."""
        previewed, selected = len(self.previewed), len(self.select.value)
        self.reprocess_preview_button.description = counted("Reprocess", previewed, "previewed")
        self.remove_preview_button.description = counted("Remove", previewed, "previewed…")
        self.reprocess_button.description = counted("Reprocess", selected, "selected")
        self.remove_button.description = counted("Remove", selected, "selected…")
        self.reprocess_all_button.description = counted("Reprocess all", self.total) + "…"
        self.move_preview_button.description = counted("Move", previewed, "previewed to…")
        self.export_button.description = counted("Export", previewed, "previewed")
        working = "a bulk action is running" if self.working else None
        nothing = {
            self.reprocess_preview_button: "nothing previewed (Preview first)" if not previewed else None,
            self.remove_preview_button: "nothing previewed (Preview first)" if not previewed else None,
            self.reprocess_button: "nothing selected" if not selected else None,
            self.remove_button: "nothing selected" if not selected else None,
            self.reprocess_all_button: f"no dead jobs in {visible(self.q)}" if not self.total else None,
            self.move_preview_button: "nothing previewed (Preview first)" if not previewed else None,
            self.export_button: "nothing previewed (Preview first)" if not previewed else None,
        }
        for button, why in nothing.items():
            self.off(button, working or why)

    def facts(self) -> list[tuple[str, object]]:
        return [("previewed", len(self.previewed))]

    def _chosen(self) -> str | None:
        """The signature chosen in the dropdown, None for every signature."""
        chosen = self.signature.value
        return None if chosen == EVERY else self._signatures.get(chosen, chosen)

    def preview(self) -> None:
        """Find the dead jobs the filter and the chosen signature match; keep their ids and
        show their count and samples. Nothing is written."""
        sig = self._chosen()
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
        self._gate()
        self.say(f"previewed {len(found):,} dead jobs; nothing written")

    def _consume_preview(self) -> list[str]:
        ids, self.previewed = self.previewed, []
        self.preview_view.value = ""
        self._gate()
        return ids

    def _working(self, doing: str, total: int, act: Callable[[], Any]) -> Any:
        """Run one bulk action on `total` jobs with every bulk button greyed out, its bar
        labelled `doing` ("reprocessing 840: 300 done") and then with what came of it;
        then read again."""
        self.working = True
        self._gate()
        self.progress.start(doing, total)
        result = None
        try:
            result = act()
            return result
        finally:
            self.progress.end(self.status_text, whole=not isinstance(result, (EMQError, type(None))))
            self.working = False
            self.refresh()

    # -- acting on the previewed ids -------------------------------------------------------
    def reprocess_previewed(self) -> Any:
        """Reprocess exactly the previewed ids (at the rate field's pace when it is set);
        above `confirm_above` it asks first."""
        if not self.writable("reprocess") or not self.previewed:
            return None
        ids = list(self.previewed)
        rate = self.rate.value or None
        return self.confirmation.guard(
            Question(
                "Reprocess",
                len(ids),
                f"previewed dead jobs of {self.q}",
                lambda n: self._reprocess(ids, rate, "reprocess previewed"),
                note=f"{_pace(rate)} Each runs again.",
            ),
            self.confirm_above,
        )

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
                lambda n: self._remove(ids, "remove previewed"),
                note="Their rows and logs are deleted.",
                always=True,
            )
        )

    def move_previewed(self) -> Any:
        """Move exactly the previewed ids to the queue named (`<queue>.quarantine` when the
        box is empty; a new one is created paused), each once: the question (above
        `confirm_above`) states what a dry run of the move answers; nothing moves before
        Confirm."""
        if not self.writable("move") or not self.previewed:
            return None
        ids, target = list(self.previewed), self.target.value.strip() or f"{self.q}.quarantine"
        try:
            would = transfer.move_jobs(self.conn, self.q, target, ids=ids, dry_run=True)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return None
        stays = f" {len(ids) - would.moved:,} would stay ({_tally(Counter(would.stayed.values()))})."
        new = "" if self.conn.command("EXISTS", queue_key(target, "meta")) else " (a new queue, paused)"
        return self.confirmation.guard(
            Question(
                "Move",
                len(ids),
                f"previewed dead jobs of {self.q} to {target}",
                lambda n: self._move(ids, target),
                note=f"{would.moved:,} would move{new}." + (stays if would.stayed else ""),
            ),
            self.confirm_above,
        )

    def _move(self, ids: list[str], target: str) -> Any:
        if ids == self.previewed:
            self._consume_preview()
        return self._working(
            f"moving to {visible(target)}",
            len(ids),
            lambda: self.attempt(
                transfer.move_jobs,
                self.conn,
                self.q,
                target,
                ids=ids,
                progress=lambda calls, n: self.progress.step(n),
                done=lambda r: (
                    f"moved {r.moved:,} jobs to {target}"
                    + (
                        f"; {len(r.stayed):,} stayed ({_tally(Counter(r.stayed.values()))})"
                        if r.stayed
                        else ""
                    )
                ),
            ),
        )

    def export_previewed(self) -> Any:
        """Write the jobs the preview's filter and signature match (found again, as they
        are now) to the file named (`<queue>-dead.jsonl` when the box is empty), and show
        its path. A read: it works on a read-only connection."""
        if not self.previewed:
            return None
        path = self.export_path.value.strip() or f"{self.q}-dead.jsonl"
        return self._working(
            "exporting",
            len(self.previewed),
            lambda: self.attempt(
                transfer.export_jobs,
                self.conn,
                self.q,
                path,
                signature=self._chosen(),
                error=self._glob("error"),
                payload=self._glob("payload"),
                done=lambda n: f"exported {n:,} jobs to {n.path}",
            ),
        )

    def _reprocess(self, ids: list[str], rate: float | None, what: str) -> Any:
        if ids == self.previewed:
            self._consume_preview()
        return self._working(
            "reprocessing",
            len(ids),
            lambda: self.attempt(
                admin.reprocess_jobs,
                self.conn,
                self.q,
                ids,
                rate=rate,
                budget=self.budget.value,
                progress=lambda calls, n: self.progress.step(n),
                done=lambda r: f"{what}: {_tally(Counter(r.values()))}",
            ),
        )

    def _remove(self, ids: list[str], what: str) -> Any:
        if ids == self.previewed:
            self._consume_preview()
        return self._working(
            "removing",
            len(ids),
            lambda: self.attempt(
                admin.remove_jobs,
                self.conn,
                self.q,
                ids,
                done=lambda r: f"{what}: {_tally(Counter(r.values()))}",
            ),
        )

    # -- acting on the selection ---------------------------------------------------------------
    def select_all(self) -> None:
        self.select.value = tuple(v for _, v in self.select.options)

    def _selection_question(self, doing: str, act: Callable[[list[str]], Any], **kw: Any) -> Question:
        ids = list(self.select.value)

        def changed() -> tuple[Question, str] | None:
            if list(self.select.value) == ids:
                return None
            return self._selection_question(doing, act, **kw), "The selection changed. "

        return Question(
            doing, len(ids), f"selected dead jobs of {self.q}", lambda n: act(ids), changed=changed, **kw
        )

    def reprocess_selected(self) -> Any:
        """Reprocess the selected ids; above `confirm_above` it asks first."""
        if not self.writable("reprocess"):
            return None
        if not self.select.value:
            self.say("select the jobs to reprocess first", "refused")
            return None
        question = self._selection_question(
            "Reprocess", lambda ids: self._reprocess(ids, None, "reprocess selected"), note="Each runs again."
        )
        return self.confirmation.guard(question, self.confirm_above)

    def remove_selected(self) -> None:
        """Ask to remove the selected ids; Confirm removes them."""
        if not self.writable("remove"):
            return
        if not self.select.value:
            self.say("select the jobs to remove first", "refused")
            return
        self.confirmation.ask(
            self._selection_question(
                "Remove",
                lambda ids: self._remove(ids, "remove selected"),
                note="Their rows and logs are deleted.",
                always=True,
            )
        )

    def _dead_count(self) -> int | None:
        try:
            return int(self.conn.command("ZCARD", queue_key(self.q, "dead")))
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return None

    def reprocess_all(self) -> Any:
        """Reprocess every dead job, stating the count and the rate (above `confirm_above`
        it asks first); it moves at most that many (oldest death first) at the rate
        field's pace."""
        if not self.writable("reprocess"):
            return None
        total = self._dead_count()
        if total is None:
            return None
        if not total:
            self.say(f"no dead jobs in {self.q}; nothing to reprocess")
            return None
        rate = self.rate.value or None
        return self.confirmation.guard(
            Question(
                "Reprocess",
                total,
                f"dead jobs of {self.q}",
                lambda n: self._reprocess_all(n, rate),
                recount=self._dead_count,
                note=f"{_pace(rate)} Each runs again.",
            ),
            self.confirm_above,
        )

    def _reprocess_all(self, count: int, rate: float | None) -> Any:
        return self._working(
            "reprocessing",
            count,
            lambda: self.attempt(
                admin.reprocess_dead,
                self.conn,
                self.q,
                budget=self.budget.value,
                limit=count,
                rate=rate,
                progress=lambda calls, n: self.progress.step(n),
                done=lambda n: f"reprocessed {n:,} dead jobs",
            ),
        )


def _clipped(text: str) -> str:
    """A list entry's error on one line, its start (the pane below shows it whole)."""
    text = text.replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _pace(rate: float | None) -> str:
    return f"At most {rate:g} a second." if rate else "As fast as it goes (rate 0)."


def _tally(counts: Counter) -> str:
    return ", ".join(f"{n:,} {word}" for word, n in sorted(counts.items())) or "nothing selected"

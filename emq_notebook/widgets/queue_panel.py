"""QueuePanel: counts, the pause toggle, a confirmed drain, a confirmed and
bounded obliterate with a labelled progress bar, and an opt-in auto-refresh.

A queue with no key left (obliterated here or by another client) is said gone
("queue mailers is gone"), never "running": its writing buttons are greyed out
(a pause would make its meta hash again), until a job or a pause made elsewhere
brings it back. Every greyed-out button says why (`Panel.off`): Obliterate waits
for the queue to be paused and its name typed.

A confirmation states a count, and the confirm re-counts: when more jobs are
there than the operator was shown, it asks again with the new count instead of
deleting them. The auto-refresh is one thread per panel, its interval at least
half a second; it stops when the panel is closed, when a QueuePanel for the
same queue and connection is built again, and at interpreter exit.
"""

from __future__ import annotations

import html

import ipywidgets as w

from .. import admin, counts, defaults, watching
from ..connector import Connection
from ..decoding import printable
from ..errors import EMQError, UnknownQueue
from ..keyspace import STATES
from .base import Panel, Progress, chips, interval, table


class QueuePanel(Panel):
    """Refuses nothing itself: every write is a verb whose refusal is shown in the status;
    on a read-only connection the writing buttons are greyed out and never send."""

    def __init__(
        self, conn: Connection, q: str, refresh_every: float = 2.0, auto: bool = False, owned: bool = False
    ):
        super().__init__(owned=owned)
        self.conn, self.q, self.title = conn, q, q
        self.refresh_every = interval(refresh_every)
        self.every(self.refresh_every, f"emq-refresh-{q}", stop_on_error=True)
        self.snapshot: dict = {}
        self.paused = False
        # no key of the queue on the server (obliterated, or never made)
        self.gone = False
        self.counts = w.HTML()
        self.pause_button = w.Button(description="Pause")
        self.pause_button.on_click(lambda _: self.toggle_pause())
        self.refresh_button = w.Button(description="Refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.auto = w.ToggleButton(description=f"Auto-refresh {self.refresh_every:g}s", value=False)
        self.auto.observe(lambda ch: self._auto(ch["new"]), names="value")
        if owned:  # the owner's one refresh loop refreshes it
            self.auto.layout.display = "none"

        self.include_schedule = w.Checkbox(
            description="include schedule",
            value=False,
            indent=False,
            layout=w.Layout(width="auto", margin="0 0 0 12px"),
        )
        self.drain_button = w.Button(description="Drain…")
        self.drain_button.on_click(lambda _: self.ask_drain())
        self.confirm_drain_button = w.Button(description="Confirm drain", button_style="warning")
        self.confirm_drain_button.on_click(lambda _: self.drain())
        self.cancel_button = w.Button(description="Cancel")
        self.cancel_button.on_click(lambda _: self._hide_confirm())
        self.confirm_row = w.HBox(
            [self.confirm_drain_button, self.cancel_button], layout=w.Layout(display="none")
        )
        self.confirm_text = w.HTML()
        # what the drain confirmation stated: (include_schedule, count)
        self.drain_shown: tuple[bool, int] | None = None

        self.typed_name = w.Text(placeholder="type the queue name to confirm")
        self.typed_name.observe(lambda _: self._gate_obliterate(), names="value")
        self.force = w.Checkbox(
            description="force (jobs in flight)",
            value=False,
            indent=False,
            layout=w.Layout(width="auto", margin="0 12px"),
        )
        self.budget = w.BoundedIntText(
            value=defaults.DEFAULT_BUDGET, min=1, max=defaults.MAX_BUDGET, description="budget"
        )
        self.obliterate_button = w.Button(description="Obliterate", button_style="danger", disabled=True)
        self.obliterate_button.on_click(lambda _: self.obliterate())
        self.obliterate_text = w.HTML()
        # the job count the obliterate line stated when the gate opened
        self.obliterate_shown: int | None = None
        self.progress = Progress()
        self.writes(self.pause_button, self.drain_button, self.confirm_drain_button, self.obliterate_button)

        # the queue's name, unless an owner's line names it (a dashboard's tab)
        named = [] if owned else [w.HTML(f"<b>queue {html.escape(printable(q))}</b>")]
        self.children = [
            *named,
            self.counts,
            w.HBox([self.pause_button, self.refresh_button, self.auto]),
            w.HBox([self.drain_button, self.include_schedule]),
            self.confirm_text,
            self.confirm_row,
            w.HBox([self.typed_name, self.force, self.budget]),
            self.obliterate_button,
            self.obliterate_text,
            self.progress.view,
            self.status,
        ]
        self.refresh()
        self._register(q)
        if auto:
            self.auto.value = True

    @property
    def confirming(self) -> bool:
        """True while the drain question or the obliterate gate is open."""
        return self.drain_shown is not None or self.obliterate_shown is not None

    # -- reading ----------------------------------------------------------------
    def refresh(self, look: watching.Look | None = None) -> None:
        """Read the counts again (or take this queue's row of `look`'s counts, read already
        by the owner's refresh); a wire fault or a foreign key (a reply error) is shown in
        the status, and the auto-refresh keeps trying."""
        try:
            if look is None or self.q not in look.counts.index:
                look = counts.look(self.conn, [self.q], watch=True)
            row = look.counts.loc[self.q].to_dict()
        except UnknownQueue:  # no key yet, or none left (obliterated): nothing to count
            self._show_gone()
            return
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.gone = False
        self.paused = bool(row.pop("paused"))
        self.snapshot = {k: int(v) for k, v in row.items()}
        # a queue of many lanes: its pending count holds a pass's lane backlog (`watching.watched`)
        note = look.note(self.q)
        said = f'<div style="color:#57606a"><small>pending: {html.escape(note)}</small></div>' if note else ""
        if self.owned:
            self.counts.value = chips(self.snapshot, self.paused) + said
        else:
            self.counts.value = (
                table(self.snapshot, ("set", "jobs"))
                + f"<div>{'■ paused' if self.paused else '▶ running'}</div>"
                + said
            )
        self.pause_button.description = "Resume" if self.paused else "Pause"
        for button in (self.pause_button, self.drain_button):
            self.off(button, None)
        self._gate_obliterate(recount=False)

    def gone_line(self) -> str:
        return f"queue {printable(self.q)} is gone: no key of it is on the server"

    def _show_gone(self) -> None:
        """No key of the queue is left: said so, nothing counted, every writing button off."""
        self.gone, self.paused = True, False
        self.snapshot = {**dict.fromkeys(STATES, 0), "lanes": 0, "repeatables": 0}
        self.counts.value = (
            f'<div class="emq-gone" style="color:#9a6700"><b>{html.escape(self.gone_line())}</b></div>'
        )
        self._hide_confirm()
        self.pause_button.description = "Pause"
        why = f"queue {printable(self.q)} is gone"
        for button in (self.pause_button, self.drain_button):
            self.off(button, why)
        self._gate_obliterate(recount=False)

    def facts(self) -> list[tuple[str, object]]:
        auto = f"every {self.refresh_every:g}s" if self.running else "off"
        state = "gone" if self.gone else "paused" if self.paused else "running"
        return [("queue", self.q), ("state", state), ("auto-refresh", auto)]

    def _gate_obliterate(self, recount: bool = True) -> None:
        """Open the obliterate line (paused, the name typed) with the count of the jobs it
        would delete, counted exactly (`admin.job_count`: as many bounded calls as the
        lanes take). A refresh (`recount=False`) counts only for a line it opens: the
        line shown stays as counted, and a click counts again before anything goes."""
        # enabled only while paused, and only once the operator typed the name
        if self.gone:
            why: str | None = f"queue {printable(self.q)} is gone"
        elif not self.paused:
            why = "pause the queue first"
        elif self.typed_name.value != self.q:
            why = "type the queue name to confirm"
        else:
            why = None
        if why is not None or self.read_only:
            self.obliterate_shown = None
            self.obliterate_text.value = ""
            self.obliterate_button.description = "Obliterate"
            self.off(self.obliterate_button, why)
            return
        if not recount and self.obliterate_shown is not None:
            return
        try:
            n = admin.job_count(self.conn, self.q)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self._show_obliterate(n)

    def _where(self) -> str:
        return html.escape(self.connection_line())

    def _show_obliterate(self, n: int, again: str = "") -> None:
        self.obliterate_shown = n
        # the button restates the count the line states
        self.obliterate_button.description = f"Obliterate {n:,} jobs"
        self.off(self.obliterate_button, None)
        self.obliterate_text.value = (
            f"{again}Obliterate <b>{self.q}</b>: <b>{n}</b> jobs and every "
            f"key of the queue.<br><small>{self._where()}</small>"
        )

    # -- the auto-refresh thread ---------------------------------------------------
    def _auto(self, on: bool) -> None:
        if on != self.running:
            self.start() if on else self.stop()

    def show_running(self) -> None:
        # the toggle follows the thread (a refresh that stopped on an error turns it off)
        self.auto.value = self.running

    def close(self) -> None:
        self.auto.value = False
        super().close()

    # -- acting -------------------------------------------------------------------
    def toggle_pause(self) -> None:
        """Pause or resume; refused on a gone queue (a pause would make its meta hash again)."""
        # what the button said when clicked, whatever another client did since
        pausing = not self.paused
        if not self.writable("pause" if pausing else "resume") or self._refused_gone():
            return
        if not pausing:
            self.attempt(admin.resume, self.conn, self.q, done=f"resumed {self.q}")
        else:
            self.attempt(
                admin.pause,
                self.conn,
                self.q,
                done=f"paused {self.q}: claims answer empty, the backlog stays",
            )
        self.refresh()

    def _refused_gone(self) -> bool:
        """True (said on the status line) when the queue is gone, read again now."""
        self.refresh()
        if self.gone:
            self.say(f"not done: {self.gone_line()}", "refused")
        return self.gone

    def _backlog(self) -> int | None:
        try:
            return admin.backlog(self.conn, self.q, include_schedule=self.include_schedule.value)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return None

    def _ask(self, n: int, again: str = "") -> None:
        what = "pending and scheduled" if self.include_schedule.value else "pending"
        self.drain_shown = (self.include_schedule.value, n)
        self.confirm_text.value = (
            f"{again}Drain <b>{n}</b> {what} jobs from <b>{self.q}</b>? "
            f"Active jobs and repeatables stay.<br><small>{self._where()}</small>"
        )
        self.confirm_row.layout.display = "flex"

    def ask_drain(self) -> None:
        """Show the count a drain would delete now, and the Confirm button."""
        if not self.writable("drain"):
            return
        n = self._backlog()
        if n is not None:
            self._ask(n)

    def _hide_confirm(self) -> None:
        self.confirm_text.value = ""
        self.confirm_row.layout.display = "none"
        self.drain_shown = None

    def drain(self) -> None:
        """Drain, after re-counting: when more jobs wait than the confirmation stated (or the
        schedule choice changed), ask again with the new count and delete nothing."""
        if not self.writable("drain"):
            return
        shown = self.drain_shown
        n = self._backlog()
        if n is None:
            return
        if shown is None or shown[0] != self.include_schedule.value or n > shown[1]:
            was = f" (the confirmation said {shown[1]})" if shown else ""
            self._ask(n, again=f"The backlog changed{was}. ")
            self.say(f"not drained: {n} jobs wait now; confirm again", "refused")
            return
        self._hide_confirm()
        self.attempt(
            admin.drain,
            self.conn,
            self.q,
            include_schedule=self.include_schedule.value,
            done=lambda got: f"drained {got} jobs from {self.q}",
        )
        self.refresh()

    def obliterate(self) -> None:
        """Obliterate in bounded calls, after the typed name and a re-count: when more jobs
        are there than the line stated, it states the new count and waits for another click."""
        if not self.writable("obliterate"):
            return
        if self.typed_name.value != self.q:
            self.say("type the queue name to confirm", "refused")
            return
        shown = self.obliterate_shown
        try:
            total = admin.job_count(self.conn, self.q)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        if shown is None or total > shown:
            was = f" (the line said {shown})" if shown is not None else ""
            self._show_obliterate(total, again=f"The queue changed{was}. ")
            self.say(f"not obliterated: {total} jobs now; click Obliterate again", "refused")
            return
        self.progress.start("obliterating", total)
        result = self.attempt(
            admin.obliterate_all,
            self.conn,
            self.q,
            force=self.force.value,
            budget=self.budget.value,
            progress=lambda calls, left: self.progress.step(total - left),
            done=lambda calls: f"obliterated {self.q}: {total} jobs in {calls} calls",
        )
        self.progress.end(self.status_text, whole=isinstance(result, int))
        if isinstance(result, int):
            self.typed_name.value = ""
        self.refresh()

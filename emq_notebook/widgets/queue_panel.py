"""QueuePanel: counts, the pause toggle, a confirmed drain, a confirmed and
bounded obliterate with a progress bar, and an opt-in auto-refresh."""

from __future__ import annotations

import threading

import ipywidgets as w

from .. import admin, frames
from ..connector import Connection
from ..errors import EMQError
from .base import Panel, table


class QueuePanel(Panel):
    def __init__(self, conn: Connection, q: str, refresh_every: float = 2.0):
        super().__init__()
        self.conn, self.q, self.title = conn, q, q
        self.counts = w.HTML()
        self.pause_button = w.Button(description="Pause", icon="pause")
        self.pause_button.on_click(lambda _: self.toggle_pause())
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.auto = w.ToggleButton(description=f"Auto-refresh {refresh_every:g}s", value=False)
        self.auto.observe(lambda ch: self._auto(ch["new"]), names="value")
        self.refresh_every = refresh_every
        self._ticker: threading.Event | None = None

        self.include_schedule = w.Checkbox(description="include schedule", value=False)
        self.drain_button = w.Button(description="Drain…", icon="trash")
        self.drain_button.on_click(lambda _: self.ask_drain())
        self.confirm_drain_button = w.Button(description="Confirm drain", button_style="warning")
        self.confirm_drain_button.on_click(lambda _: self.drain())
        self.cancel_button = w.Button(description="Cancel")
        self.cancel_button.on_click(lambda _: self._hide_confirm())
        self.confirm_row = w.HBox([self.confirm_drain_button, self.cancel_button],
                                  layout=w.Layout(display="none"))
        self.confirm_text = w.HTML()

        self.typed_name = w.Text(placeholder="type the queue name to confirm")
        self.typed_name.observe(lambda _: self._gate_obliterate(), names="value")
        self.force = w.Checkbox(description="force (jobs in flight)", value=False)
        self.budget = w.BoundedIntText(value=admin.DEFAULT_BUDGET, min=1, max=1_000_000,
                                       description="budget")
        self.obliterate_button = w.Button(description="Obliterate", button_style="danger",
                                          icon="bomb", disabled=True)
        self.obliterate_button.on_click(lambda _: self.obliterate())
        self.progress = w.IntProgress(value=0, min=0, max=1, description="obliterate",
                                      layout=w.Layout(visibility="hidden"))

        self.children = [
            w.HTML(f"<b>queue {q}</b>"), self.counts,
            w.HBox([self.pause_button, self.refresh_button, self.auto]),
            w.HBox([self.drain_button, self.include_schedule]), self.confirm_text, self.confirm_row,
            w.HBox([self.typed_name, self.force, self.budget]),
            w.HBox([self.obliterate_button, self.progress]), self.status,
        ]
        self.refresh()

    # -- reading ----------------------------------------------------------------
    def refresh(self) -> None:
        try:
            row = frames.counts(self.conn, [self.q]).iloc[0].to_dict()
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.paused = bool(row.pop("paused"))
        self.snapshot = row
        self.counts.value = table(row, ("set", "jobs")) + \
            f"<div>{'■ paused' if self.paused else '▶ running'}</div>"
        self.pause_button.description = "Resume" if self.paused else "Pause"
        self.pause_button.icon = "play" if self.paused else "pause"
        self._gate_obliterate()

    def _gate_obliterate(self) -> None:
        # enabled only while paused, and only once the operator typed the name
        self.obliterate_button.disabled = not (self.paused and self.typed_name.value == self.q)

    def _auto(self, on: bool) -> None:
        if self._ticker:
            self._ticker.set()
            self._ticker = None
        if on:
            stop = self._ticker = threading.Event()

            def tick() -> None:
                while not stop.wait(self.refresh_every):
                    self.refresh()
            threading.Thread(target=tick, daemon=True, name=f"emq-refresh-{self.q}").start()

    def close(self) -> None:
        self.auto.value = False
        super().close()

    # -- acting -------------------------------------------------------------------
    def toggle_pause(self) -> None:
        if self.paused:
            self.attempt(admin.resume, self.conn, self.q, done=f"resumed {self.q}")
        else:
            self.attempt(admin.pause, self.conn, self.q,
                         done=f"paused {self.q}: claims answer empty, the backlog stays")
        self.refresh()

    def ask_drain(self) -> None:
        n = self.snapshot["pending"] + (self.snapshot["schedule"] if self.include_schedule.value else 0)
        what = "pending and scheduled" if self.include_schedule.value else "pending"
        self.confirm_text.value = f"Drain <b>{n}</b> {what} jobs from <b>{self.q}</b>? " \
                                  "Active jobs and repeatables stay."
        self.confirm_row.layout.display = "flex"

    def _hide_confirm(self) -> None:
        self.confirm_text.value = ""
        self.confirm_row.layout.display = "none"

    def drain(self) -> None:
        self._hide_confirm()
        self.attempt(admin.drain, self.conn, self.q, include_schedule=self.include_schedule.value,
                     done=lambda n: f"drained {n} jobs from {self.q}")
        self.refresh()

    def obliterate(self) -> None:
        if self.typed_name.value != self.q:
            self.say("type the queue name to confirm", "refused")
            return
        total = admin.job_count(self.conn, self.q)
        self.progress.max = max(total, 1)
        self.progress.value = 0
        self.progress.layout.visibility = "visible"

        def step(calls: int, left: int) -> None:
            self.progress.value = max(0, total - left)

        result = self.attempt(admin.obliterate_all, self.conn, self.q, force=self.force.value,
                              budget=self.budget.value, progress=step,
                              done=lambda calls: f"obliterated {self.q}: {total} jobs in {calls} calls")
        if isinstance(result, int):
            self.progress.value = self.progress.max
            self.typed_name.value = ""
        self.refresh()

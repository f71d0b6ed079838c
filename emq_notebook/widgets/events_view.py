"""EventsView: a live tail of a queue's events channel, with a visible Stop.

The subscription runs in a background thread and stops when the view is
stopped or closed (or after `seconds`)."""

from __future__ import annotations

import html
import json
from collections import deque

import ipywidgets as w

from ..connector import Connection
from ..events import Tail
from .base import Panel


class EventsView(Panel):
    def __init__(self, conn: Connection, q: str, keep: int = 50, seconds: float | None = None):
        super().__init__()
        self.conn, self.q, self.title = conn, q, q
        self.events: deque = deque(maxlen=keep)
        self.seen = 0
        self.lines = w.HTML("<i>waiting for events…</i>")
        self.stop_button = w.Button(description="Stop", icon="stop")
        self.stop_button.on_click(lambda _: self.toggle())
        self.children = [w.HTML(f"<b>events of {q}</b>"), self.stop_button, self.lines, self.status]
        self.seconds = seconds
        self.tail: Tail | None = None
        self.start()

    def _on_event(self, event: dict) -> None:
        self.events.append(event)
        self.seen += 1
        lines = [html.escape(json.dumps(e, sort_keys=True)) for e in reversed(self.events)]
        self.lines.value = "<pre>" + "\n".join(lines) + "</pre>"

    def start(self) -> None:
        self.tail = Tail(self.conn, self.q, self._on_event, seconds=self.seconds)
        self.stop_button.description = "Stop"
        self.say(f"listening on emq:{{{self.q}}}:events")

    def stop(self) -> None:
        if self.tail:
            self.tail.stop()
            self.tail = None
        self.stop_button.description = "Start"
        self.say(f"stopped after {self.seen} events")

    def toggle(self) -> None:
        self.stop() if self.tail and self.tail.running else self.start()

    def close(self) -> None:
        self.stop()
        super().close()

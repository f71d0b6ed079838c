"""EventsView: a live tail of a queue's events channel, with a visible Stop.

The subscription runs in one background thread per view, which writes only into
the view's own widgets. It stops when the view is stopped or closed, when an
EventsView for the same queue and connection is built again, at interpreter
exit, or after `seconds`. A thread that meets an error says so in the status
line and `running` turns False; it never keeps saying "listening".
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections import deque

import ipywidgets as w
import redis

from ..connector import Connection
from ..decoding import printable
from ..errors import EMQError
from ..events import follow
from .base import Panel
from .values import clock, when


def event_line(event: dict, at: float | None = None) -> str:
    """One event as a line an operator reads: the time it arrived (the viewer's zone),
    what happened, the job, then the other fields as `name value`; undecodable bytes
    shown as `\\xNN`."""
    rest = dict(event)
    what = rest.pop("event", None) or rest.pop("type", None) or "event"
    job = rest.pop("job", None) or rest.pop("id", None) or rest.pop("jobId", None)
    words = [clock() if at is None else when(at * 1000, "%H:%M:%S %Z"), str(what)]
    if job is not None:
        words.append(f"job {job}")
    for k, v in sorted(rest.items()):
        shown = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
        words.append(f"{k} {shown}")
    return printable("  ".join(words))


class EventsView(Panel):
    def __init__(
        self, conn: Connection, q: str, keep: int = 50, seconds: float | None = None, owned: bool = False
    ):
        super().__init__(owned=owned)
        self.conn, self.q, self.title = conn, q, q
        self.events: deque = deque(maxlen=keep)
        self.arrived: deque = deque(maxlen=keep)  # when each event came (epoch s)
        self.seen = 0
        self.error: Exception | None = None
        self.lines = w.HTML("<i>waiting for events…</i>")
        self.stop_button = w.Button(description="Stop")
        self.stop_button.on_click(lambda _: self.toggle())
        self.children = [w.HTML(f"<b>events of {q}</b>"), self.stop_button, self.lines, self.status]
        self.seconds = seconds
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._register(q)
        self.start()

    @property
    def running(self) -> bool:
        """True while the subscription thread is alive and has met no error."""
        return self._thread is not None and self._thread.is_alive() and self.error is None

    def _on_event(self, event: dict) -> None:
        self.events.append(event)
        self.arrived.append(time.time())
        self.seen += 1
        pairs = reversed(list(zip(self.events, self.arrived, strict=True)))
        lines = [html.escape(event_line(e, at)) for e, at in pairs]
        self.lines.value = "<pre>" + "\n".join(lines) + "</pre>"

    def facts(self) -> list[tuple[str, object]]:
        return [
            ("queue", self.q),
            ("events seen", self.seen),
            ("tail", "listening" if self.running else "stopped"),
        ]

    def start(self) -> None:
        """Subscribe (acknowledged before this returns), then tail in one thread."""
        self.stop_threads()
        self.error = None
        stop = self._stop = threading.Event()
        try:
            stream = follow(self.conn, self.q, seconds=self.seconds, stop=stop)
        except EMQError as exc:
            self.error = exc
            self.stop_button.description = "Start"
            self.say(f"not listening: {exc}", "error")
            return

        def run() -> None:
            try:
                for event in stream:
                    self._on_event(event)
            except Exception as exc:  # shown in the status, never lost silently
                if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
                    exc = self.conn.wire_error(exc)
                self.error = exc
                self.stop_button.description = "Start"
                self.say(
                    f"stopped by an error after {self.seen} events: {type(exc).__name__}: {exc}", "error"
                )
                return
            if not stop.is_set():  # `seconds` ran out
                self.stop_button.description = "Start"
                self.say(f"stopped after {self.seen} events ({self.seconds:g}s)")

        # said before the thread starts, so an error it meets at once is the last word
        self.stop_button.description = "Stop"
        self.say(f"listening on emq:{{{self.q}}}:events")
        self._thread = threading.Thread(target=run, name=f"emq-events-{self.q}", daemon=True)
        self._thread.start()

    def stop_more(self) -> None:
        if self._stop is not None:
            self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)

    def stop(self) -> None:
        self.stop_threads()
        self.stop_button.description = "Start"
        if self.error is None:
            self.say(f"stopped after {self.seen} events")

    def close(self) -> None:
        self.stop()
        super().close()

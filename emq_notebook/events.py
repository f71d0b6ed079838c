"""A queue's lifecycle events, read from its channel `emq:{q}:events`.

The subscription is confirmed before `subscribe` returns, so no event published
after it is missed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .connector import Connection
from .errors import WireError
from .keyspace import events_channel


def subscribe(conn: Connection, q: str, timeout: float = 5.0) -> Any:
    """A pubsub on the queue's events channel, its SUBSCRIBE acknowledged."""
    with conn.wire():
        ps = conn.client.pubsub()
        ps.subscribe(events_channel(q))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = ps.get_message(timeout=0.1)
            if msg and msg["type"] == "subscribe":
                return ps
    ps.close()
    raise WireError(f"no subscription to {events_channel(q)} within {timeout}s")


def _decode(data: str) -> dict:
    try:
        return json.loads(data)
    except ValueError:
        return {"event": "unparsed", "raw": data}


def follow(
    conn: Connection, q: str, seconds: float | None = None, stop: threading.Event | None = None
) -> Iterator[dict]:
    """Subscribe now; then yield each event until `seconds` pass or `stop` is set."""
    ps = subscribe(conn, q)
    deadline = None if seconds is None else time.monotonic() + seconds

    def events() -> Iterator[dict]:
        try:
            while not (stop and stop.is_set()):
                if deadline is not None and time.monotonic() >= deadline:
                    return
                msg = ps.get_message(timeout=0.2)
                if msg and msg["type"] == "message":
                    yield _decode(msg["data"])
        finally:
            ps.close()

    return events()


class Tail:
    """A background subscription calling `on_event(event)` until `stop()` (or `seconds`)."""

    def __init__(
        self, conn: Connection, q: str, on_event: Callable[[dict], None], seconds: float | None = None
    ):
        self._stop = threading.Event()
        self.error: Exception | None = None
        stream = follow(conn, q, seconds=seconds, stop=self._stop)

        def run() -> None:
            try:
                for event in stream:
                    on_event(event)
            except Exception as exc:  # kept for the view to show, never lost silently
                self.error = exc

        self.thread = threading.Thread(target=run, name=f"emq-events-{q}", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self.thread.join(timeout)

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

"""One background refresh for a panel: a thread that calls `tick()` every
`every` seconds until stopped, never more than one at a time.

`start()` stops a running thread before it starts the next, `stop()` joins it
(unless called from that thread), so a panel that owns a Refresher holds at
most one thread, whatever its buttons are pressed in what order. An exception
from `tick()` goes to `on_error` and the refresh keeps going (a lost server is
a line in the panel's status, and the next tick tries again), or, with
`stop_on_error`, the refresh stops there (`on_error` says so and may turn the
panel's toggle off: a stop from inside the thread does not wait for itself).

Every panel that refreshes by itself (QueuePanel, Dashboard, MetricsView,
HealthView) holds one of these through `Panel.every`: the one refresh loop of
the package.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Refresher:
    def __init__(
        self,
        name: str,
        every: float,
        tick: Callable[[], None],
        on_error: Callable[[Exception], None],
        *,
        stop_on_error: bool = False,
    ):
        self.name, self.every, self.tick, self.on_error = name, every, tick, on_error
        self.stop_on_error = stop_on_error
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """True from `start()` until `stop()` or an error that stops it (its `on_error`
        already sees it stopped)."""
        stop, thread = self._stop, self._thread
        return stop is not None and not stop.is_set() and thread is not None and thread.is_alive()

    def start(self) -> None:
        self.stop()
        stop = self._stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.every):
                try:
                    self.tick()
                except Exception as exc:  # shown by the panel, never printed into a cell
                    if self.stop_on_error:
                        stop.set()
                        if self._stop is stop:
                            self._stop = None
                    self.on_error(exc)
                    if self.stop_on_error:
                        return

        self._thread = threading.Thread(target=loop, daemon=True, name=self.name)
        self._thread.start()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
